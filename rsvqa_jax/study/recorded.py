"""The study section a folder's study was made with: recorded at the folder's first study
(DIR/study_config.json) once its datasets are checked, compared on every rerun before anything
is generated.

A key of FIXED decides the folder's data or runs: changed, it would regenerate DIR/data/main
under runs trained on the old data, which then refuse it naming a key of their own config
(text.checkpoint), not the study key that changed. Such a change is refused, naming that key.
The other keys (seeds, repeats, adversarial kinds, stages, the report's thresholds) may change:
what they need is trained or evaluated again (reuse.py), and the file records them as last run.
"""
import os

from rsvqa_jax import config as config_lib
from rsvqa_jax import storage
from rsvqa_jax.errors import RSVQAError

FILE = "study_config.json"
# Study keys (prefixes of dotted keys) fixed for the life of a folder; an LM's label is not.
FIXED = ("synthetic", "variant", "images", "questions_per_image", "data_seed", "prior_strength",
         "balanced_data", "balanced.images", "balanced.questions_per_image", "fusion",
         "frozen_epochs", "lm", "baseline.language_model", "baseline.overrides")


def _flat(d, prefix=""):
  """{dotted key: value} of a nested dict."""
  out = {}
  for key, value in d.items():
    if isinstance(value, dict):
      out.update(_flat(value, f"{prefix}{key}."))
    else:
      out[f"{prefix}{key}"] = value
  return out


def changed(recorded, section):
  """[(study key, recorded value, value now)] of the FIXED keys that differ; keys one side
  lacks (a language model added since, a record of an older version) are not compared."""
  old, new = _flat(recorded), _flat(section)
  out = []
  for key in sorted(old.keys() & new.keys()):
    fixed = any(key == k or key.startswith(k + ".") for k in FIXED)
    if fixed and not key.endswith(".label") and old[key] != new[key]:
      out.append((f"study.{key}", old[key], new[key]))
  return out


def _resolved(section):
  """`section` (a dict) with its language models' checkpoint folders as absolute paths: the same
  files named from another folder (`../models/x` there, `models/x` here) are the same study."""
  for entry in (section.get("lm") or {}).values():
    checkpoint = entry.get("checkpoint") if isinstance(entry, dict) else None
    if isinstance(checkpoint, str) and checkpoint and checkpoint != config_lib.RANDOM:
      entry["checkpoint"] = os.path.abspath(os.path.expanduser(checkpoint))
  return section


def _section(study_section):
  return _resolved(config_lib.to_dict(study_section))  # tuples as JSON lists, as read back


def check(study_section, folder):
  """Refuses a study whose FIXED keys differ from the folder's record (none yet: any study)."""
  recorded = storage.read_json(os.path.join(folder, FILE))
  if isinstance(recorded, dict) and (diff := changed(_resolved(recorded),
                                                     _section(study_section))):
    keys = ", ".join(f"{key}={old!r} (now {new!r})" for key, old, new in diff[:3])
    more = f" and {len(diff) - 3} more key(s)" if len(diff) > 3 else ""
    raise RSVQAError(f"{folder} holds a study made with {keys}{more} ({FILE}); use another "
                     "--workdir, or the same settings")


def record(study_section, folder):
  """Records the section, once the study's datasets are there and checked, before any run: a
  study refused before (a generated set too small) leaves no record to refuse its corrected
  rerun."""
  storage.write_json(os.path.join(folder, FILE), _section(study_section))
