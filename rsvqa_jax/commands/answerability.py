"""`rsvqa-jax answerability ACTION`: can this image answer the question (ChiQA, DESIGN.md 6.3)?

  train   --config C --workdir W [--config.KEY=VALUE ...]  train an answerability head (resumes)
  score   --scores S.csv --labels L.csv [--val-scores VS.csv --val-labels VL.csv] --out O
          any model's scores (pool_id,image_id,score in [0, 1]) against labels
          (pool_id,image_id,label) -> O/metrics.json; the binary threshold comes from the
          validation files only, and without them no binary metric is reported
  select  --workdir W --pool U.csv --top N [--out F.csv]  the N unlabelled pairs of highest
          predictive entropy; F a new file or an earlier selection (never the pool, a
          workdir's or a dataset's folder: eval/answerability._check_select_out), and F.json
          beside it: the counts, and the pool's words outside the model's vocabulary
  study   --config C --workdir DIR [--docs docs/audits/answerability.md]  a study's
          answerability stage alone
This module also holds `synth --answerability` (its flags, refused without it, and the call)
and prints `evaluate --workdir W --answerability`.
"""
import os
import shlex

import numpy as np

from rsvqa_jax.commands import argument_types, common
from rsvqa_jax.errors import RSVQAError

DOCS_BEGIN = ("<!-- answerability: begin (rsvqa-jax answerability study --config "
              "configs/answerability_study.py --workdir DIR --docs docs/audits/answerability.md) -->")
DOCS_END = "<!-- answerability: end -->"


DESCRIPTIONS = {
    "train": "Train an answerability head (can this image answer this question?) from a config "
             "into --workdir; run it again to resume.",
    "score": "Score any model's answerability scores against labels: NDCG, MAP, ternary and "
             "binary accuracy / F1, into OUT/metrics.json.",
    "select": "Pick the N pairs of an unlabelled pool file the trained head is least sure of "
              "(highest predictive entropy), to label next.",
    "study": "Run the answerability stage of a study config alone: heads with and without the "
             "image, Random and Majority, and their summary.",
}


def add_arguments(parser):
  actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
  add = lambda name, text: actions.add_parser(name, help=text, description=DESCRIPTIONS[name])
  p = add("train", "train an answerability head from a config (resumes)")
  common.add_run_arguments(p, example="configs/answerability_synthetic.py:skipthoughts,blind",
                           workdir_means="the folder for checkpoints and metrics",
                           override="answerability.batch_pools=8")
  p = add("score", "ranking and classification metrics of a scores file")
  p.add_argument("--scores", required=True, help="CSV pool_id,image_id,score (score in [0, 1])")
  p.add_argument("--labels", required=True, help="CSV pool_id,image_id,label (2 / 1 / 0)")
  p.add_argument("--val-scores", help="validation scores: they alone choose the binary threshold")
  p.add_argument("--val-labels", help="validation labels")
  p.add_argument("--out", required=True, help="folder for metrics.json")
  p = add("select", "unlabelled pairs of highest predictive entropy")
  p.add_argument("--workdir", required=True, help="an answerability workdir")
  p.add_argument("--pool", required=True,
                 help="CSV pool_id,question,image_id (a label column is ignored)")
  p.add_argument("--top", type=int, required=True, help="how many pairs to keep")
  p.add_argument("--out", help="CSV to write: a new file or an earlier selection (default "
                               "WORKDIR/eval/answerability/selected.csv)")
  p.add_argument("--checkpoint", choices=("best", "last"), default="best",
                 help="best-on-validation or the last checkpoint")
  common.add_pickle_argument(p)
  p = add("study", "the answerability stage of a study config, alone")
  common.add_run_arguments(p, example="configs/answerability_study.py",
                           workdir_means="the study folder",
                           override="answerability.study.num_epochs=5")
  p.add_argument("--docs", "--readme", dest="docs",
                 help="also copy the stage's summary into this page, between its markers")


def run(args):
  return {"train": _train, "score": _score, "select": _select, "study": _study}[args.action](args)


def _train(args):
  config = common.config_for_run(args, "the folder for checkpoints and metrics")
  if config is None:
    return 0
  from rsvqa_jax.train import answerability  # pylint: disable=g-import-not-at-top
  with common.trusted_pickles(args):
    summary = answerability.train(config, args.workdir)
  if summary["finished"]:
    reading = answerability.best_reading(summary, config.answerability.select_metric)
    last = "" if summary.get("best_step") else " --checkpoint last"
    print(f"{args.workdir}: done; {reading}; evaluate with: rsvqa-jax evaluate "
          f"--workdir={shlex.quote(args.workdir)} --answerability{last}")
  return 0


def _score(args):
  from rsvqa_jax import storage  # pylint: disable=g-import-not-at-top
  from rsvqa_jax.bias import answerability  # pylint: disable=g-import-not-at-top
  _check_score_out(args.out)
  metrics = answerability.score_files(args.scores, args.labels, args.val_scores, args.val_labels)
  os.makedirs(args.out, exist_ok=True)
  path = os.path.join(args.out, "metrics.json")
  storage.write_json(path, metrics)
  _print_table([(os.path.basename(args.scores), metrics)], f"scores {args.scores}")
  _print_undefined(args.labels, metrics)
  _print_undefined_binary(args.scores, metrics)
  if args.val_scores is None:
    print("binary metrics not reported: give --val-scores and --val-labels (the threshold is "
          "chosen on validation, never on the scored pairs)")
  elif metrics["binary_threshold"] is None:
    print(f"binary metrics not reported: no pair of {args.val_labels} is labelled 2, so no "
          "threshold can be chosen on it")
  print(f"written to {path}")
  return 0


def _check_score_out(out):
  """`score` writes OUT/metrics.json into a folder of its own: never a dataset's folder, a
  workdir's own folder, or evaluate's answerability folder (its SPLIT_metrics.json go with
  their SPLIT_evaluation.json; an older evaluate wrote evaluation.json)."""
  from rsvqa_jax.data import answerability as pools_lib  # pylint: disable=g-import-not-at-top
  if not os.path.isdir(out):
    return
  held = "config.json" if os.path.exists(os.path.join(out, "config.json")) else next(
      (f for f in sorted(os.listdir(out)) if f.endswith("evaluation.json")), None)
  if pools_lib.is_dataset_folder(out) or held:
    what = ("a dataset folder" if held is None else "a workdir's own folder" if
            held == "config.json" else f"evaluate's folder, whose metrics go with its {held}")
    raise RSVQAError(f"--out {out}: {what}; give a folder of its own for metrics.json")


def _print_undefined(name, metrics):
  """A line for each ranking metric that no pool could give (all pools left out): the labels'
  doing, `name`d by their file."""
  for metric, key, relevant in (("NDCG", "ndcg", "1 or 2"), ("MAP", "map", "2")):
    if metrics[f"{key}@1"] is None:
      print(f"{name}: {metric} n/a: no pool of 2 or more candidates has a pair "
            f"labelled {relevant} ({metrics[f'{key}_pools_left_out']} pools left out)")


def _print_undefined_binary(name, metrics):
  """A line for each binary metric that is a ratio over no pair: the doing of one model's scores
  and threshold, `name`d by its scores file or workdir (none without a threshold: said with it)."""
  if metrics["binary_threshold"] is None:
    return
  above = f"scores at or above the threshold {metrics['binary_threshold']:g}"
  why = {"Precision": f"no pair {above}", "Recall": "no pair is labelled 2",
         "F1": f"no pair is labelled 2 or {above}"}
  for metric, reason in why.items():
    if metrics[f"binary_{metric.lower()}"] is None:
      print(f"{name}: Binary {metric} n/a: {reason}")


def _print_table(rows, caption):
  from rsvqa_jax.bias import answerability, tables  # pylint: disable=g-import-not-at-top
  print(tables.to_markdown(answerability.table4(rows, caption)))


def _select(args):
  from rsvqa_jax.eval import answerability  # pylint: disable=g-import-not-at-top
  with common.trusted_pickles(args):
    path, n, summary = answerability.select(args.workdir, args.pool, args.top, args.out,
                                            which=args.checkpoint)
  print(f"{n} pair(s) of highest predictive entropy written to {path}")
  unknown = (answerability.describe_unknown(summary) if summary["n_questions_with_unknown_words"]
             else f"none in its {summary['questions']} questions")
  print(f"words outside the model's vocabulary (read as unknown): {unknown}; summary written to "
        f"{answerability.summary_path(path)}")
  return 0


def _study(args):
  config = common.config_for_run(args, "the study folder")
  if config is None:
    return 0
  from rsvqa_jax import study  # pylint: disable=g-import-not-at-top
  from rsvqa_jax.eval import answerability  # pylint: disable=g-import-not-at-top
  if "answerability" not in config:
    raise RSVQAError(f"{args.config}: no answerability section (configs/answerability_study.py "
                     "has one)")
  if args.docs:
    _check_docs(args.docs)
  stage = study.Study(config, args.workdir)
  with common.trusted_pickles(args), stage.locked():
    result = answerability.study_stage(stage)
  print(result["summary"])
  if args.docs:
    _quote_in_docs(args.docs, os.path.join(args.workdir, "answerability"))
  return 0


def _check_docs(page):
  """The --docs page, read before the stage runs: a missing page or one without the markers was
  refused only once every model had trained."""
  try:
    with open(page, encoding="utf-8") as f:
      text = f.read()
  except OSError as e:
    raise RSVQAError(f"--docs {page}: {(e.strerror or str(e)).lower()}") from None
  from rsvqa_jax.bias import report  # pylint: disable=g-import-not-at-top
  if not report.block_pattern(DOCS_BEGIN, DOCS_END).search(text):
    raise RSVQAError(f"--docs {page}: no block between {DOCS_BEGIN!r} and {DOCS_END!r} (put the "
                     "two markers where the summary goes)")


def _quote_in_docs(page, folder):
  """Copies the stage's summary and Table 4 of both pool sets (the files the stage wrote) between
  the page's answerability markers."""
  from rsvqa_jax.bias import report  # pylint: disable=g-import-not-at-top
  parts = []
  for name in ("summary.md", os.path.join("tables", "table4_main.md"),
               os.path.join("tables", "table4_no_info.md")):
    if os.path.exists(os.path.join(folder, name)):
      with open(os.path.join(folder, name), encoding="utf-8") as f:
        parts.append(f.read().strip())
  report.quote_into([page], [(DOCS_BEGIN, DOCS_END, "\n\n".join(parts))])
  print(f"{page}: answerability summary updated")


# Hooks of other commands.

def add_synth_arguments(parser):
  """`synth` flags: --answerability and the pool knobs (None when not given: see check_synth)."""
  parser.add_argument("--answerability", action="store_true",
                      help="also write answerability pools Answerability_{split}.csv "
                           "(pool_id,question,image_id,label) into --out")
  parser.add_argument("--pool-size", type=argument_types.int_at_least(2),
                      help="with --answerability: candidate images per question (default 5; "
                           "a split too small for it gets the most it can fill, down to 2, "
                           "with a warning)")
  parser.add_argument("--pools-per-image", type=argument_types.positive_float,
                      help="with --answerability: questions per image of a split (default 2, "
                           "at most 100)")
  parser.add_argument("--answerability-balance", type=argument_types.fraction,
                      help="with --answerability: 1 = labels uniform whatever the question "
                           "(default), 0 = candidate tiles as the scenes fall")


def _pool_knobs(args):
  """{data/answerability.params keyword: value} of the pool flags given (the rest default)."""
  given = {"pool_size": args.pool_size, "pools_per_image": args.pools_per_image,
           "balance": args.answerability_balance}
  return {k: v for k, v in given.items() if v is not None}


def check_synth(args, images):
  """Before `synth` writes anything: the pool flags need --answerability (else they would be
  ignored) and must make valid parameters, and each split needs images enough for pools of 2
  (else the pools fail after the dataset is written)."""
  from rsvqa_jax.data import answerability  # pylint: disable=g-import-not-at-top
  if not args.answerability:
    flags = [f for f, v in (("--pool-size", args.pool_size),
                            ("--pools-per-image", args.pools_per_image),
                            ("--answerability-balance", args.answerability_balance))
             if v is not None]
    if flags:
      raise RSVQAError(f"{', '.join(flags)} {'needs' if len(flags) == 1 else 'need'} "
                       "--answerability (they shape its pools)")
    return
  answerability.params(**_pool_knobs(args), seed=args.seed)
  least = answerability.least_images(args.variant) if args.variant != "xben" else 0
  if images < least:
    raise RSVQAError(f"--images {images}: --answerability needs at least {least} {args.variant} "
                     "images (2 in each split, the smallest pool); raise --images")


def synth(args, generated):
  """Writes the pools of a dataset `synth` just generated; prints the label shares per split."""
  from rsvqa_jax.data import answerability  # pylint: disable=g-import-not-at-top
  ids = {name: np.unique(split.image_id) for name, split in generated.splits.items()
         if len(split)}
  manifest = answerability.generate(args.out, args.out, ids, **_pool_knobs(args), seed=args.seed)
  for name, s in manifest["splits"].items():
    print(f"answerability {name}: {s['pools']} pools of {s['pool_size']} candidates, "
          f"{s['pairs']} pairs; labels 0 / 1 / 2: "
          + " / ".join(f"{100 * x:.1f}%" for x in s["shares"]))


def evaluate(args, workdirs, where):
  """`evaluate --answerability`: each workdir scored on its pools, with Random and Majority."""
  if args.adversarial or args.shortcuts:
    raise RSVQAError("--answerability scores a workdir's pools: drop --adversarial / --shortcuts")
  from rsvqa_jax.eval import answerability  # pylint: disable=g-import-not-at-top
  with common.trusted_pickles(args):
    records = [answerability.evaluate(w, args.split, **where) for w in workdirs]
  rows = [(name, m) for name, m in answerability.baselines(records[0]).items()]
  rows += [(os.path.basename(os.path.normpath(r["workdir"])), r["metrics"]) for r in records]
  if len(records) > 1:  # --seeds aggregates, as the accuracy tables do
    rows.append(("mean (population std)", [r["metrics"] for r in records]))
  for r in records:
    t = r["metrics"]["binary_threshold"]
    threshold = (f"binary threshold {t:.4g} from {r['val_split']}" if t is not None else
                 f"no binary threshold (chosen on {r['val_split']}, the split scored here: binary "
                 "metrics n/a)" if r["split"] == r["val_split"] else
                 f"no binary threshold (no {r['val_split']} pair labelled 2: binary metrics n/a)")
    print(f"{r['workdir']}: {r['pools']} {args.split} pools, {r['pairs']} pairs (step "
          f"{r['step']}); {threshold}; written to "
          f"{answerability.folder(r['workdir'], r['checkpoint'])}")
  for labels, metrics in {r["labels"]: r["metrics"] for r in records}.items():
    _print_undefined(labels, metrics)
  for r in records:
    _print_undefined_binary(r["workdir"], r["metrics"])
  _print_table(rows, f"{args.split} pools: answerability (Table 4 layout)")
  return 0
