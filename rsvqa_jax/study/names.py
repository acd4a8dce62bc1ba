"""The protocol's vocabulary: LM weights, model roles, run folder names, Table 2 row specs."""
from rsvqa_jax import config as config_lib
from rsvqa_jax.errors import RSVQAError

WEIGHTS = ("frozen", "finetuned")
ROLES = ("reference", "blind")
ROLE_LABELS = {"reference": "reference", "blind": "visual blind"}
FUSION_LABELS = {"mult": "e-mult", "concat": "concat", "mutan": "MUTAN"}
BASELINE = "baseline"  # the Table 2 row of the original RSVQA model (study.baseline)


def run_name(lm, weights, role, fusion=None):
  return f"{lm}_{weights}_{role}" if fusion is None else f"{lm}_{weights}_{fusion}_{role}"


def parse_row(spec):
  """(lm, weights, fusion) of a study.table2_rows entry: "baseline" or "LM,WEIGHTS,FUSION"."""
  if spec == BASELINE:
    return BASELINE, "frozen", None
  parts = spec.split(",")
  if len(parts) != 3 or parts[1] not in WEIGHTS or parts[2] not in config_lib.FUSIONS:
    raise RSVQAError(f"config study.table2_rows: {spec!r} is not {BASELINE!r} or "
                     f"LM,frozen|finetuned,{'|'.join(config_lib.FUSIONS)} (a list override "
                     "splits at commas: give each row as a quoted string, "
                     "--config.study.table2_rows='(\"skipthoughts,frozen,mutan\",)')")
  return tuple(parts)


def row_lm(s, spec):
  """The language model (a key of study.lm) of Table 2 row `spec` of study section `s`."""
  lm = parse_row(spec)[0]
  return s.baseline.language_model if lm == BASELINE else lm
