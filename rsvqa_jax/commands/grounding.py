"""`rsvqa-jax grounding`: answer grounding (VizWiz-VQA-Grounding, DESIGN.md 6.2).

  rsvqa-jax grounding score --predicted P --truth T --out O [--confidence C.csv]
  rsvqa-jax grounding stats --truth T --out O
  rsvqa-jax grounding --workdir W [--split test] --out O [--method auto|attention|gradcam]

`score` and `stats` read folders of `{question_id}.png` masks (a synthetic dataset's Grounding/,
or anyone's) and need no model (bias/grounding.py says what they write). The workdir form
computes a trained model's relevance maps on a split and scores them against the dataset's
Grounding/ masks (eval/grounding.py); O/maps is replaced whole, so it holds that split's maps only.
"""
import os

from rsvqa_jax import errors
from rsvqa_jax.commands import common
from rsvqa_jax.errors import RSVQAError

ACTIONS = ("score", "stats")


def add_arguments(parser):
  parser.add_argument("action", nargs="?", choices=ACTIONS,
                      help="score: predicted masks against truth; stats: statistics of a mask "
                           "set; none: a trained workdir's relevance maps (--workdir)")
  parser.add_argument("--out", required=True, help="folder for the results")
  parser.add_argument("--predicted", metavar="P",
                      help="score: folder of predicted {question_id}.png masks or 8-bit relevance "
                           "maps (min-max normalised, thresholded at 0.5, resized to the truth)")
  parser.add_argument("--truth", metavar="T",
                      help="folder of {question_id}.png truth masks (score: each one without a "
                           "predicted mask counts as IoU 0)")
  parser.add_argument("--confidence", metavar="C.csv",
                      help="score: CSV question_id,confidence ranking the predictions for AP")
  parser.add_argument("--workdir", help="a trained workdir (the relevance-map form)")
  # The workdir form's options default to None, so that score and stats can refuse them.
  parser.add_argument("--split", help="workdir form: split (default: test)")
  parser.add_argument("--checkpoint", choices=("best", "last"),
                      help="workdir form: best-on-validation (default) or the last checkpoint")
  parser.add_argument("--method", choices=("auto", "attention", "gradcam"),
                      help="workdir form: relevance maps from the model's attention (auto, the "
                           "default: where it has one) or Grad-CAM on the image feature map")
  parser.add_argument("--images", choices=("own", "shuffled"),
                      help="workdir form: each question's own image (the default), or a random "
                           "other image (a control: its grounding should fall to the floor)")
  parser.add_argument("--data-root", default=None,
                      help="workdir form: dataset folder, when it moved since training")
  common.add_pickle_argument(parser)


# Options of the workdir form alone: score and stats read mask folders, whatever these say.
WORKDIR_FLAGS = ("--workdir", "--split", "--checkpoint", "--method", "--images", "--data-root",
                 "--allow-pickle")


def _refuse(args, flags, what):
  given = [f for f in flags if getattr(args, f.lstrip("-").replace("-", "_")) not in (None, False)]
  if given:
    raise RSVQAError(f"{given[0]} does not apply to {what}")


def _first_other(folder):
  """" (e.g. NAME)": the first file of a mask folder that no question names, so that a user sees
  why (0.jpg, 0.npy, notes.txt)."""
  from rsvqa_jax.bias import grounding  # pylint: disable=g-import-not-at-top
  names = grounding.other_files(folder)
  return f" (e.g. {errors.short_repr(names[0])})" if names else ""  # a name may hold a newline


def _own_out(args, what):
  """--out must not be a dataset or a mask folder read here: what is written would land among
  (and, run again, be read as) their files."""
  from rsvqa_jax.data import split_files  # pylint: disable=g-import-not-at-top
  split_files.refuse_dataset(args.out, "--out", what, inside=True)
  for flag in ("--predicted", "--truth"):
    folder = getattr(args, flag.lstrip("-"))
    if folder and os.path.realpath(folder) == os.path.realpath(args.out):
      raise RSVQAError(f"--out {args.out} is the {flag} folder; give {what} a folder of its own")
  if args.action == "score" and os.path.isdir(os.path.join(args.out, "maps")):
    # A workdir evaluation's folder: its grounding.csv and summary.json would be replaced.
    raise RSVQAError(f"--out {args.out} holds a grounding evaluation (maps/); give {what} a "
                     "folder of its own")


def run(args):
  from rsvqa_jax.bias import grounding, tables  # pylint: disable=g-import-not-at-top
  if args.action == "score":
    _refuse(args, WORKDIR_FLAGS, "grounding score")
    if not args.predicted or not args.truth:
      raise RSVQAError("grounding score needs --predicted P and --truth T")
    _own_out(args, "the scores")
    s = grounding.score_folders(args.predicted, args.truth, args.out, args.confidence)
    extra = "".join(f", {k} {tables.percent(s[k])}" for k in ("ap_25", "ap_50", "ap_75", "map_50_95")
                    if k in s)
    print(f"{s['n_scored']} of {s['n_questions']} truth masks scored ({s['n_empty_truth']} empty, "
          f"{s['n_missing_prediction']} without a prediction): mean IoU {tables.percent(s['mean_iou'])}"
          f"{extra}; written to {args.out}")
    if s["n_missing_prediction"]:
      print(f"--truth {args.truth}: {s['n_missing_prediction']} truth mask(s) without a predicted "
            "map count as IoU 0 and AP misses; to score one evaluation's maps alone, give --truth "
            "the masks of the questions its confidence.csv lists (docs/audits/grounding.md)")
    if s["n_extra_prediction"] or s["n_other_files"]:
      print(f"--predicted {args.predicted}: ignored {s['n_extra_prediction']} mask(s) of questions "
            f"without a truth mask and {s['n_other_files']} file(s) not named "
            "{question_id}.png" + _first_other(args.predicted))
    if s.get("n_extra_confidence") or s.get("n_confidence_without_map"):
      print(f"--confidence {args.confidence}: ignored {s['n_extra_confidence']} row(s) of "
            f"questions without a truth mask and {s['n_confidence_without_map']} of questions "
            "without a predicted map (a miss, ranked after every prediction)")
    if s["n_other_truth_files"]:
      print(f"--truth {args.truth}: ignored {s['n_other_truth_files']} file(s) not named "
            "{question_id}.png" + _first_other(args.truth))
    return 0
  if args.action == "stats":
    _refuse(args, ("--predicted", "--confidence", *WORKDIR_FLAGS), "grounding stats")
    if not args.truth:
      raise RSVQAError("grounding stats needs --truth T")
    _own_out(args, "the statistics")
    s = grounding.stats_folder(args.truth, args.out)
    if s["n"] == s["n_empty"]:
      print(f"{s['n']} masks, all empty: no coverage or boundary complexity to report; written "
            f"to {args.out}")
      return 0
    c, b, g = s["coverage"], s["boundary_complexity"], grounding.significant
    print(f"{s['n']} masks ({s['n_empty']} empty): coverage {g(100 * c['mean'])}% +- "
          f"{g(100 * c['std'])}% of the image area, boundary complexity {g(b['mean'])} +- "
          f"{g(b['std'])}; written to {args.out}")
    return 0
  _refuse(args, ("--predicted", "--truth", "--confidence"), "the workdir form (give score/stats)")
  if not args.workdir:
    raise RSVQAError("grounding: give score, stats, or --workdir W")
  from rsvqa_jax.eval import grounding as evaluator  # pylint: disable=g-import-not-at-top
  with common.trusted_pickles(args):
    result = evaluator.evaluate(args.workdir, args.split or "test", args.out,
                                method=args.method or "auto", images=args.images or "own",
                                which=args.checkpoint or "best", data_root=args.data_root)
  for table in result["tables"]:
    print(tables.to_markdown(table))
  print(f"written to {args.out}")
  return 0
