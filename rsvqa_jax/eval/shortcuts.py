"""A trained workdir scored on a shortcut benchmark (bias/shortcuts.py): IID test and OOD sets.

The workdir must have been trained on the benchmark's data/ folder: its val split is the IID val
set training selected the best checkpoint on, its test split the IID test set the nine OOD sets
are cut from. The best checkpoint (IID val selection, the protocol) answers the IID test split
once, through the run's compiled eval step; bias/shortcuts.score reads accuracy per question
type on the IID set and each OOD set, the IID - OOD gap and Prior_Acc from those answers.

With `ood_selection`, the paper's Table 4 comparison: every checkpoint the workdir kept at an
epoch end (the steps training validated: train.keep_checkpoints periodic ones and the best)
answers the val and test splits, and the checkpoint is chosen three ways among them: on IID val
OA (the protocol: training's own best), on OOD val (the same rules applied to the val split) and
on OOD test. The OOD rules pick one checkpoint per OOD set for its column
and one on the mean over the nine sets for the IID and mean columns. Both look at OOD data and
are labelled adaptive overfitting wherever they are shown; they compare, never replace, the
IID-val numbers. Only kept checkpoints are candidates (keep more with train.keep_checkpoints).

Written to WORKDIR/eval/shortcuts/ (eval_last/ for the last checkpoint; replaced whole;
bias/shortcut_report.write_evaluation):
  predictions.csv, iid_accuracy.json    the IID test answers and their accuracy table
  shortcuts.json, shortcuts_ood.*       the scores; with ood_selection shortcuts_selection.*
"""
import logging
import math
import os

import numpy as np

from rsvqa_jax.bias import shortcut_report, shortcuts
from rsvqa_jax.errors import RSVQAError
from rsvqa_jax.eval import accuracy, outputs
from rsvqa_jax.train import checkpointing, metrics_log, predict, restore
from rsvqa_jax.train import run as run_lib

_log = logging.getLogger(__name__)

FOLDER = "shortcuts"


def folder(workdir, which="best"):
  return os.path.join(outputs.root(workdir, which), FOLDER)


def _correct(run, split, preds):
  """bool [N]: answer ids [1, N] equal to the split's answers (outside the vocabulary: wrong)."""
  answers = run.columns[split].columns["answer"]
  return (preds[0] == answers) & (answers >= 0)


def _kept_states(workdir, run):
  """Yields (step, TrainState) of every checkpoint the workdir kept at a step training validated
  (epoch ends: the steps its own best-on-val choice saw), oldest first, one state in memory at a
  time; a corrupted one is named in a WARNING and skipped."""
  like = run_lib.new_state(run)
  keep = run.config.train.keep_checkpoints
  managers = [checkpointing.Checkpoints(os.path.join(workdir, "best"), 1, reader=True),
              checkpointing.Checkpoints(os.path.join(workdir, "checkpoints"), keep, reader=True)]
  validated = {r["step"] for r in metrics_log.read(workdir)
               if r.get("split") == run.config.data.val_split}
  where = {}
  for mgr in reversed(managers):  # a step in both is read from best/
    where.update((step, mgr) for step in mgr.steps() if step in validated)
  if not where:
    raise RSVQAError(f"{workdir}: no kept checkpoint at a validated step (epoch end) to select "
                     "among")
  for step in sorted(where):
    try:
      items, _ = where[step].restore(step, like.checkpoint_items())
    except checkpointing.CorruptCheckpoint as e:
      _log.warning("%s; skipped", e)
      continue
    yield step, like.replace(**items)


def _oa(correct, mask):
  return float(correct[mask].mean()) if mask.any() else math.nan


def _mean(values):
  values = [v for v in values if not math.isnan(v)]
  return float(np.mean(values)) if values else math.nan


def _pick(scores):
  """Index of the best score (the earliest on ties), None when every score is NaN."""
  scores = np.asarray(scores, np.float64)
  if np.isnan(scores).all():
    return None
  return int(np.argmax(np.where(np.isnan(scores), -np.inf, scores)))


RULES = ("iid_val", "ood_val", "ood_test")
PICKED = (*shortcuts.CONCEPTS, "mean")  # a checkpoint per OOD set, one for IID and the mean


def selection(run, states, saved):
  """The Table 4 comparison over `states`, (step, TrainState) pairs (the module docstring)."""
  val, test = run.dataset["val"], run.dataset["test"]
  masks = {"ood_val": shortcuts.ood_masks(saved, val, "val"),
           "ood_test": shortcuts.ood_masks(saved, test, "iid_test")}
  rows, steps = [], []
  for step, state in states:
    steps.append(step)
    on = {split: _correct(run, split, predict.predict(run, state, split))
          for split in ("val", "test")}
    row = {"iid_test": float(on["test"].mean()),
           "iid_val": dict.fromkeys(PICKED, float(on["val"].mean()))}
    for rule, split in (("ood_val", "val"), ("ood_test", "test")):
      row[rule] = {c: _oa(on[split], masks[rule][c]) for c in shortcuts.CONCEPTS}
      row[rule]["mean"] = _mean(row[rule].values())
    rows.append(row)
  out = {"candidates": steps,
         "ood_val_n": {c: int(masks["ood_val"][c].sum()) for c in shortcuts.CONCEPTS}}
  for rule in RULES:
    chosen = {c: _pick([r[rule][c] for r in rows]) for c in PICKED}
    at = lambda c, value: math.nan if chosen[c] is None else value(rows[chosen[c]])
    out[rule] = {"steps": {c: None if k is None else steps[k] for c, k in chosen.items()},
                 "iid_test": at("mean", lambda r: r["iid_test"]),
                 "ood": {c: at(c, lambda r, c=c: r["ood_test"][c]) for c in shortcuts.CONCEPTS},
                 "mean_ood": at("mean", lambda r: r["ood_test"]["mean"])}
  return out


def evaluate(workdir, benchmark, *, which="best", ood_selection=False, data_root=None,
             dataset=None, features=None):
  """Scores a workdir on benchmark folder `benchmark`; writes eval/shortcuts/, returns the
  result of bias/shortcuts.score (with "selection" when `ood_selection`)."""
  saved = shortcuts.load(benchmark)
  splits = ["val", "test"] if ood_selection else ["test"]
  run, state, step = restore.restore(workdir, splits, which=which, data_root=data_root,
                                     dataset=dataset, features=features)
  hint = ("the run trained on other data: give --shortcuts the benchmark whose data/ it trained "
          "on (or train a run on this one's)")
  saved.check_split(run.dataset["test"], "iid_test", workdir, hint)
  if ood_selection:
    saved.check_split(run.dataset["val"], "val", workdir, hint)
  preds = predict.predict(run, state, "test")
  result = shortcuts.score(saved, run.dataset["train"], run.dataset["test"],
                           _correct(run, "test", preds))
  result.update(workdir=os.path.abspath(workdir), benchmark=os.path.abspath(benchmark),
                checkpoint=which, step=step)
  chosen = selection(run, _kept_states(workdir, run), saved) if ood_selection else None
  if chosen is not None and len(chosen["candidates"]) == 1:
    # One candidate: every rule picks it, and the table's equal rows would read as "no
    # adaptive overfitting" when nothing was compared.
    _log.warning(f"{workdir}: --ood-selection has one kept checkpoint at an epoch end to select "
                 f"among (step {chosen['candidates'][0]}), so every rule picks it and the "
                 "comparison shows nothing; train with a larger train.keep_checkpoints")
  caption = (f"{workdir}: step {step} ({which} checkpoint"
             + (", selected on IID val" if which == "best" else "")
             + f") on the IID test split and the OOD sets of {benchmark}")
  with shortcut_report.rebuilt(folder(workdir, which)) as tmp:
    table = predict.accuracy(run, "test", preds)
    table.update(split="test", checkpoint=which, step=step, workdir=os.path.abspath(workdir))
    accuracy.write_results(run, "test", preds, table, os.path.join(tmp, "iid_accuracy.json"),
                           os.path.join(tmp, "predictions.csv"), repeats=False)
    written, _ = shortcut_report.write_evaluation(result, tmp, caption, chosen)
  result["tables"] = written
  if chosen is not None:
    result["selection"] = chosen
  return result
