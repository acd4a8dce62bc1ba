"""`rsvqa-jax tables --runs DIR`: the paper's Table 1 and Table 2 from a folder of workdirs.

Every training workdir under DIR (a folder with the config.json that `train` records, at any
depth) is read without loading a model: its config says which cell it fills (language model,
frozen or fine-tuned, fusion, visual blind, the original head, the language model's learning
rate), its metrics.jsonl the best validation OA (Table 1, Figure 8), and eval/SPLIT/accuracy.json,
written by `rsvqa-jax evaluate`, its test accuracy (Table 2). Cells without a run read "missing";
Table 2 rows whose runs were never evaluated read "not evaluated"; a --split that no workdir
was evaluated on, while some were on others, is refused (a misspelt split would read "not
evaluated" everywhere). A Table 2 row over runs that are not one model over distinct seeds
(evaluate --seeds's rule) reads "unlike runs", as does a Table 1 cell whose runs differ in more
than the seed and the language model's learning rate, and a Figure 8 cell's (runs stopped
before their last epoch beside finished ones are unlike too); an evaluation of the last
checkpoint, or of a best step the run has since replaced, is left out of Table 2, and
answerability and visual-blind workdirs out of every table; each with a WARNING. Workdirs of
more than one dataset (a study folder holds its balanced twin's runs beside its main ones) are
refused: a table is of one dataset. Writes table1, table2 and, when the fine-tuned runs of a language model differ
in its learning rate (configs/lr_sweep.py), figure8_lr (bias/tables.py layouts) as CSV, Markdown
and LaTeX under --out, and prints the Markdown.
"""
import json
import logging
import math
import os

from rsvqa_jax import storage
from rsvqa_jax.bias import metrics
from rsvqa_jax.errors import RSVQAError, short_repr
from rsvqa_jax.train import metrics_log, run_record

CONFIG_FILE = "config.json"  # train/checkpointing.py CONFIG_FILE
_log = logging.getLogger(__name__)


def add_arguments(parser):
  parser.add_argument("--runs", required=True,
                      help="folder holding training workdirs, at any depth")
  parser.add_argument("--out", help="folder for the tables (default: RUNS/tables)")
  parser.add_argument("--split", default="test",
                      help="evaluated split Table 2 reads (default: test)")


def _json(path):
  try:
    with open(path, encoding="utf-8") as f:
      return json.load(f)
  except FileNotFoundError:
    return None
  except (OSError, ValueError) as e:
    raise RSVQAError(f"{path}: unreadable ({e})") from None
  except RecursionError:
    raise RSVQAError(f"{path}: unreadable (nested too deep)") from None


def _accuracy(path):
  """eval/SPLIT/accuracy.json (None if not evaluated), with the keys Table 2 reads checked."""
  table = metrics.from_json(_json(path))  # null: a NaN, as storage.write_json writes one
  if table is None:
    return None
  ok = (isinstance(table, dict)
        and all(isinstance(table.get(k), dict) for k in ("per_type", "per_type_n"))
        and all(isinstance(table.get(k), (int, float)) for k in ("oa", "aa", "n")))
  if not ok:
    raise RSVQAError(f"{path}: not an accuracy table of rsvqa-jax evaluate (oa, aa, n, per_type, "
                     "per_type_n); evaluate the workdir again")
  wrong = _out_of_range(table)
  if wrong:
    raise RSVQAError(f"{path}: {wrong}, which no evaluation writes; evaluate the workdir again")
  return table


def _out_of_range(table):
  """'KEY is VALUE' for the first value of an accuracy table no evaluation can give, or None:
  a count that is not a whole number >= 0, an accuracy outside [0, 1] (NaN only where there is
  no question), per-type keys that differ between per_type and per_type_n, a types_absent that
  is no list of types the split lacks, totals that do not follow from the per-type figures."""
  count = lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0
  share = lambda v, n: (isinstance(v, (int, float)) and not isinstance(v, bool)
                        and (0 <= v <= 1 or (math.isnan(v) and n == 0)))
  if set(table["per_type"]) != set(table["per_type_n"]):
    return (f"per_type has types {sorted(table['per_type'])} and per_type_n "
            f"{sorted(table['per_type_n'])}")
  absent = table.get("types_absent", [])  # the training types the split lacks (Table 2 columns)
  if not (isinstance(absent, list) and all(isinstance(t, str) for t in absent)
          and not set(absent) & set(table["per_type"])):
    return f"types_absent is {short_repr(absent)}"
  checks = [("n", table["n"], count(table["n"])),
            ("oa", table["oa"], share(table["oa"], table["n"])),
            ("aa", table["aa"], share(table["aa"], table["n"]))]
  for t, v in table["per_type"].items():
    n = table["per_type_n"][t]
    checks += [(f"per_type_n.{t}", n, count(n)), (f"per_type.{t}", v, count(n) and share(v, n))]
  wrong = next((f"{key} is {short_repr(value)}" for key, value, good in checks if not good), None)
  return wrong or _inconsistent(table)


def _inconsistent(table):
  """What of n, oa, aa disagrees with per_type and per_type_n (their sum, the per_type mean
  weighted by per_type_n, the plain mean over types with questions), or None."""
  n, counts, per_type = table["n"], table["per_type_n"], table["per_type"]
  if sum(counts.values()) != n:
    return f"n is {n} but per_type_n sums to {sum(counts.values())}"
  asked = [t for t in per_type if counts[t]]
  if not asked:
    return None
  derived = {"oa": sum(per_type[t] * counts[t] for t in asked) / n,
             "aa": sum(per_type[t] for t in asked) / len(asked)}
  return next((f"{k} is {table[k]!r} but per_type gives {v!r}" for k, v in derived.items()
               if abs(table[k] - v) > 1e-6), None)


def workdirs(root):
  """Training workdirs under `root` (folders with config.json), not looking inside them.
  Symbolic links to folders are followed (a folder of links to runs found none), each folder
  read once however many links reach it (a run twice would count twice in a mean)."""
  found, seen = [], set()
  for folder, dirs, files in os.walk(root, followlinks=True):
    real = os.path.realpath(folder)
    if real in seen:  # a second link to it, or a link back up the tree
      dirs[:] = []
      continue
    seen.add(real)
    if CONFIG_FILE in files and ("checkpoints" in dirs or "best" in dirs
                                 or metrics_log.METRICS_FILE in files):
      found.append(folder)
      dirs[:] = []
    else:
      dirs[:] = sorted(d for d in dirs if not d.startswith("."))
  return sorted(found)


def _is_answerability(workdir):
  """Whether a workdir's config has an answerability section (its head ranks pools)."""
  config = _json(os.path.join(workdir, CONFIG_FILE))
  return isinstance(config, dict) and "answerability" in config


_REQUIRED = object()


def _key(workdir, config, dotted, kind, default=_REQUIRED):
  """Config key `dotted` ('optim.text_lr') of a workdir's config.json, checked to be a `kind`
  (a type or a tuple of them; bool is never a number): a file edited by hand, cut or of another
  tool once gave "not a training config (TypeError('list indices must be integers ...'))"."""
  path = f"{workdir}/{CONFIG_FILE}"
  value, where, parts = config, "the file", dotted.split(".")
  for i, part in enumerate(parts):
    if not isinstance(value, dict):
      raise RSVQAError(f"{path}: {where} is {_shown(value)}, not an object of keys; not a "
                       "training config (rsvqa-jax train writes it): train the run again")
    if part not in value:
      if default is not _REQUIRED:
        return default
      raise RSVQAError(f"{path}: no key {dotted}; not a training config (rsvqa-jax train writes "
                       "it): train the run again")
    value, where = value[part], ".".join(parts[:i + 1])
  numbers = kind in ((int, float), int)
  finite = not numbers or (isinstance(value, (int, float)) and math.isfinite(value))
  if not isinstance(value, kind) or (numbers and isinstance(value, bool)) or not finite:
    wanted = {bool: "true or false", str: "a string", int: "a whole number",
              (int, float): "a finite number", dict: "an object of keys"}[kind]
    raise RSVQAError(f"{path}: {dotted} is {_shown(value, whole=True)}, not {wanted}")
  return value


def _shown(value, whole=False):
  """A JSON value as an error names it, in JSON's words; a list or an object by its kind unless
  `whole` (then shortened), so that a config in the wrong place is not printed whole."""
  if value is None or isinstance(value, bool):
    return {None: "null", True: "true", False: "false"}[value]
  if isinstance(value, (list, dict)) and not whole:
    return "a list" if isinstance(value, list) else "an object"
  return short_repr(value)


def read_run(workdir, split):
  """A bias/tables.RunRecord of one workdir."""
  from rsvqa_jax import config as config_lib  # pylint: disable=g-import-not-at-top
  from rsvqa_jax.bias import tables  # pylint: disable=g-import-not-at-top
  config = _json(os.path.join(workdir, CONFIG_FILE))
  key = lambda dotted, kind, *default: _key(workdir, config, dotted, kind, *default)
  try:
    return tables.RunRecord(
        workdir=workdir, lm=key("text.encoder", str), frozen=key("text.frozen", bool),
        fusion=key("model.fusion", str), blind=key("model.blind", bool, False),
        head=str(key("model.head", object, "paper")),
        text_lr=float(key("optim.text_lr", (int, float))),
        val_oa=metrics_log.best_validation(workdir, key("data.val_split", str)),
        accuracy=_best_accuracy(os.path.join(workdir, "eval", split, "accuracy.json"), workdir),
        identity=config_lib.recorded_identity(config),
        stopped=_stopped(workdir, key("train.num_epochs", int)),
        epochs=run_record.epochs_trained(os.path.join(workdir, "checkpoints")),
        data=_data_record(workdir),
        random_init=_random_init(key("text.checkpoint", object, None)),
        dataset=dataset_of(key("data", dict)))
  except (KeyError, TypeError, ValueError, AttributeError) as e:
    raise RSVQAError(f"{workdir}/{CONFIG_FILE}: not a training config ({e!r} missing or wrong)") \
        from None


def _random_init(checkpoint):
  """Unset, RANDOM, or a study's random-init stand-in folder (study/language_models.py)."""
  from rsvqa_jax import config as config_lib  # pylint: disable=g-import-not-at-top
  return config_lib.is_random(checkpoint) or config_lib.is_stand_in(checkpoint)


def dataset_of(data):
  """Which data a config's data section trains on, as a table names it: the layout and its
  folder, or the synthetic generator's settings (a study's main and balanced datasets differ in
  their folders)."""
  from rsvqa_jax.bias import tables  # pylint: disable=g-import-not-at-top
  name = tables.dataset_label(str(data.get("name")))
  if data.get("synthetic"):
    return (f"synthetic {data.get('synthetic_variant')} ({data.get('synthetic_images')} images, "
            f"{data.get('synthetic_questions_per_image')} questions each, seed "
            f"{data.get('synthetic_seed')})")
  root = data.get("root")
  return f"{name} at {os.path.normpath(root)}" if isinstance(root, str) else name


def _one_dataset(runs, folder):
  """Refuses runs (blind ones aside, which no table holds) of more than one dataset: a table over
  them would average and count questions of different data (a study folder holds its main and
  its balanced twin's runs)."""
  groups = {}
  for r in runs:
    if not r.blind:
      groups.setdefault(r.dataset, []).append(r.workdir)
  if len(groups) > 1:
    said = "; ".join(f"{d}: {len(w)} workdir{'' if len(w) == 1 else 's'}, e.g. {w[0]}"
                     for d, w in sorted(groups.items(), key=lambda g: g[1][0]))
    raise RSVQAError(f"--runs {folder}: workdirs of {len(groups)} datasets ({said}); a table is "
                     "of one dataset: give --runs a folder of one dataset's workdirs (a "
                     "study's: DIR/runs, its balanced twin's: DIR/balanced/runs)")


def _data_record(workdir):
  """The workdir's data.json (train/inputs.record_data) as read, or None (none, or unreadable:
  then the run's data is not compared)."""
  record = storage.read_json(os.path.join(workdir, "data.json"))
  return record if isinstance(record, dict) else None


def _stopped(workdir, total):
  """What to say of a run whose checkpoints stop before its last epoch, else None."""
  done = run_record.epochs_trained(os.path.join(workdir, "checkpoints"))
  return run_record.unfinished(workdir, done, total) if done is not None and done < total else None


def _best_accuracy(path, workdir):
  """_accuracy of the best checkpoint; an evaluation of another (versions up to 0.2.0 wrote
  evaluate --checkpoint last there), or of a best step the run has since replaced (trained on
  after the evaluation), is left out of Table 2 with a WARNING, not averaged."""
  table = _accuracy(path)
  which = table.get("checkpoint", "best") if table else "best"
  if which != "best":
    _log.warning(f"{path}: scores the {which!r} checkpoint, Table 2 the best: left out (rsvqa-jax "
                 f"evaluate --workdir {workdir} scores the best)")
    return None
  best = run_record.best_step(os.path.join(workdir, "checkpoints"))
  if table and best is not None and table.get("step", best) != best:
    _log.warning(f"{path}: scores step {table['step']}, and the run's best checkpoint is now step "
                 f"{best} (it trained on after the evaluation): left out (rsvqa-jax evaluate "
                 f"--workdir {workdir} scores it)")
    return None
  return table


def _evaluated_splits(workdir):
  """The splits `rsvqa-jax evaluate` wrote an accuracy table of in `workdir`."""
  folder = os.path.join(workdir, "eval")
  return [s for s in (os.listdir(folder) if os.path.isdir(folder) else ())
          if os.path.isfile(os.path.join(folder, s, "accuracy.json"))]


def run(args):
  from rsvqa_jax.bias import tables  # pylint: disable=g-import-not-at-top
  from rsvqa_jax.data import split_files  # pylint: disable=g-import-not-at-top
  if not os.path.isdir(args.runs):
    raise RSVQAError(f"--runs {args.runs}: not a folder")
  found = workdirs(args.runs)
  if not found:
    raise RSVQAError(f"--runs {args.runs}: no training workdir (a folder with {CONFIG_FILE} and "
                     f"{metrics_log.METRICS_FILE}) under it")
  ranking = [w for w in found if _is_answerability(w)]
  if ranking:
    _log.warning(f"{len(ranking)} answerability workdir(s) under {args.runs} left out (Table 4 "
                 f"of `rsvqa-jax evaluate --workdir W --answerability` scores them), e.g. "
                 f"{ranking[0]}")
  found = [w for w in found if w not in ranking]
  if not found:
    raise RSVQAError(f"--runs {args.runs}: no VQA training workdir under it, only answerability "
                     "ones (rsvqa-jax evaluate --workdir W --answerability scores each)")
  runs = [read_run(w, args.split) for w in found]
  _one_dataset(runs, args.runs)
  blind = [r.workdir for r in runs if r.blind]
  if blind:
    _log.warning(f"{len(blind)} visual-blind workdir(s) under {args.runs} left out (the paper's "
                 "tables hold models that see the image; rsvqa-jax study compares each blind "
                 f"model with its reference in report.md), e.g. {blind[0]}")
  if not any(r.accuracy for r in runs):
    evaluated = sorted({s for w in found for s in _evaluated_splits(w)})
    if args.split in evaluated:
      raise RSVQAError(f"--split {args.split}: no workdir under {args.runs} has its best "
                       "checkpoint evaluated on it, only another (--checkpoint last); rsvqa-jax "
                       "evaluate --workdir W scores the best")
    if evaluated:
      raise RSVQAError(f"--split {args.split}: no workdir under {args.runs} was evaluated on it "
                       f"(evaluated splits: {', '.join(evaluated)})")
  out = args.out or os.path.join(args.runs, "tables")
  split_files.refuse_dataset(out, "--out", "the tables")
  named = {"table1": tables.table1(runs), "table2": tables.table2(runs, args.split)}
  swept = lambda lm: len({r.text_lr for r in runs if r.lm == lm and not r.frozen}) > 1
  if any(swept(lm) for lm in tables.LM_ORDER):
    named["figure8_lr"] = tables.lr_sweep_table(runs)
  with storage.staged(out) as (folder, _):  # the set replaced whole: no table of other runs
    for stem, table in named.items():
      tables.write(table, folder, stem)
  for table in named.values():
    print(tables.to_markdown(table))
  read = f"{len(runs)} workdir{'' if len(runs) == 1 else 's'} read"
  print(f"{read}; wrote {', '.join(named)} (.csv, .md, .tex) to {out}")
  return 0
