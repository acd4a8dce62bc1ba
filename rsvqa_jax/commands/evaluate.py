"""`rsvqa-jax evaluate --workdir DIR [--split test]`, or `--seeds W1 W2 W3` (or globs).

Restores a workdir's best-on-validation checkpoint (or its last one), predicts every question of
the split and writes DIR/eval/SPLIT/predictions.csv (question_id, image_id, type, prediction,
answer) and accuracy.json (OA, AA, per-type accuracy). With --seeds, each workdir is evaluated
and the accuracies are aggregated to mean (std) over runs (population std, as in the paper's
Table 2). With --adversarial KIND, each workdir is instead tested with substituted images
(bias/adversarial_run.py): K repeats, per-type accuracy mean (std) over them, written to
DIR/eval/SPLIT/adversarial_KIND.json and adversarial_KIND_predictions.csv.
"""
import csv
import glob
import json
import math
import os

import numpy as np

from rsvqa_jax.errors import RSVQAError

HELP = "Evaluate trained workdirs on a split: predictions.csv, accuracy table, mean (std) over seeds."


def add_arguments(parser):
  group = parser.add_mutually_exclusive_group(required=True)
  group.add_argument("--workdir", help="a training workdir")
  group.add_argument("--seeds", nargs="+", metavar="WORKDIR",
                     help="workdirs (or glob patterns) of the same model over seeds")
  parser.add_argument("--split", default="test", help="split to evaluate (default: test)")
  parser.add_argument("--checkpoint", choices=("best", "last"), default="best",
                      help="best-on-validation (default) or the last checkpoint")
  parser.add_argument("--data-root", default=None,
                      help="dataset folder, when it moved since training (real-data configs)")
  parser.add_argument("--adversarial", choices=("random", "shuffle", "white", "black", "noise"),
                      help="adversarial testing: answer with a substituted image")
  parser.add_argument("--repeats", type=int, default=10,
                      help="substitutions per question for --adversarial (default: 10)")
  parser.add_argument("--adv-seed", type=int, default=0,
                      help="seed of the substitutions (and of the noise images)")


def evaluate_workdir(workdir, split, which="best", data_root=None, *, dataset=None, features=None):
  """Writes predictions.csv and accuracy.json for one workdir; returns the accuracy table.

  `dataset` / `features` replace the ones the workdir's config names (in-memory tasks).
  """
  # Imported here: JAX starts only when a command that needs it runs.
  from rsvqa_jax.train import checkpointing, loop  # pylint: disable=g-import-not-at-top
  config = checkpointing.read_config(workdir)
  if data_root:
    config.data.root = data_root
  s = loop.setup(config, workdir, [split], dataset=dataset, features=features)
  if split not in s.dataset.splits:
    raise RSVQAError(f"--split {split}: the dataset has splits {sorted(s.dataset.splits)}")
  state, _ = loop.new_state(s)
  mgr = checkpointing.Checkpoints(os.path.join(workdir, "best" if which == "best" else "checkpoints"), 1)
  step = mgr.latest_step()
  if step is None:
    raise RSVQAError(f"{mgr.directory}: no checkpoint to evaluate (has training run?)")
  items, _ = mgr.restore(step, state.checkpoint_items())
  state = state.replace(**items)
  preds = loop.predict(s, state, split)
  rows = s.dataset[split]
  table = loop.accuracy_table(rows, preds, s.columns[split].columns["answer"])
  table.update(split=split, checkpoint=which, step=int(step), workdir=os.path.abspath(workdir))
  out = os.path.join(workdir, "eval", split)
  os.makedirs(out, exist_ok=True)
  predicted = s.vocab.decode(preds)
  with open(os.path.join(out, "predictions.csv"), "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["question_id", "image_id", "type", "prediction", "answer"])
    for qid, iid, qt, p, a in zip(rows.question_id.tolist(), rows.image_id.tolist(),
                                  rows.qtype.tolist(), predicted, rows.answer.tolist()):
      w.writerow([qid, iid, qt, p, a])
  with open(os.path.join(out, "accuracy.json"), "w") as f:
    json.dump(table, f, indent=1)
  return table


def _pct(x):
  return "n/a" if x is None or math.isnan(x) else f"{100 * x:.2f}"


def aggregate(tables):
  """{column: (mean, std)} over runs for OA, AA and each question type (population std)."""
  columns = {}
  for t in tables:
    for name, v in [*t["per_type"].items(), ("AA", t["aa"]), ("OA", t["oa"])]:
      columns.setdefault(name, []).append(v)
  return {k: (float(np.mean(v)), float(np.std(v))) for k, v in columns.items()}


def markdown(tables):
  """One Markdown table: a row per run, then mean (std) when there are several."""
  agg = aggregate(tables)
  names = list(agg)
  lines = ["| run | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
  for t in tables:
    values = {**t["per_type"], "AA": t["aa"], "OA": t["oa"]}
    lines.append(f"| {os.path.basename(t['workdir'])} | "
                 + " | ".join(_pct(values.get(n)) for n in names) + " |")
  if len(tables) > 1:
    lines.append("| mean (std) | " + " | ".join(
        f"{_pct(agg[n][0])} ({_pct(agg[n][1])})" for n in names) + " |")
  return "\n".join(lines)


def _expand(patterns):
  out = []
  for p in patterns:
    hits = sorted(glob.glob(p)) if any(c in p for c in "*?[") else [p]
    if not hits:
      raise RSVQAError(f"--seeds {p}: matches no workdir")
    out += hits
  return list(dict.fromkeys(out))


def _run_adversarial(args, workdirs):
  from rsvqa_jax.bias import adversarial_run  # pylint: disable=g-import-not-at-top
  tables = []
  for w in workdirs:
    out = adversarial_run.evaluate_workdir(w, args.split, args.adversarial, repeats=args.repeats,
                                           seed=args.adv_seed, which=args.checkpoint,
                                           data_root=args.data_root)
    tables.append({"workdir": w, "per_type": {t: v[0] for t, v in out["per_type"].items()},
                   "aa": out["aa"][0], "oa": out["oa"][0]})
    print(f"{w}: {args.adversarial} x{args.repeats}, mean (std) over repeats: " + ", ".join(
        f"{name} {_pct(m)} ({_pct(sd)})" for name, (m, sd) in
        [*out["per_type"].items(), ("AA", out["aa"]), ("OA", out["oa"])]))
  print(markdown(tables))
  return 0


def run(args):
  workdirs = [args.workdir] if args.workdir else _expand(args.seeds)
  if args.adversarial:
    return _run_adversarial(args, workdirs)
  tables = [evaluate_workdir(w, args.split, args.checkpoint, args.data_root) for w in workdirs]
  print(markdown(tables))
  for t in tables:
    if t.get("n_out_of_vocabulary"):
      print(f"{t['workdir']}: {t['n_out_of_vocabulary']} of {t['n']} {args.split} answers are "
            "outside the training answer vocabulary (counted as wrong)")
  if len(tables) > 1:
    agg = aggregate(tables)
    summary = {"split": args.split, "workdirs": workdirs,
               "mean": {k: v[0] for k, v in agg.items()}, "std": {k: v[1] for k, v in agg.items()}}
    print(json.dumps(summary))
  return 0
