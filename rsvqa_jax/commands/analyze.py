"""`rsvqa-jax analyze`: the dataset analysis and, given predictions, the relative metrics.

Writes under --out, for every evaluated split S:
  types_S.{csv,md,tex}            Tables 3 / 5 (question-type level; with --predictions the
                                  RSVQA_Acc and IO_Prior columns, with
                                  --adversarial-predictions AdTest_Acc and IO_AdTest)
  objects_patterns_S.{csv,md,tex} Table 4 (LR only: the template levels)
  questions_S.{csv,md,tex}        Table 7 (per single question; written when the split has
                                  at most MAX_QUESTION_ROWS distinct questions)
and answer_distribution.png (Figure 7, all splits). The question-type table is printed too.
"""
import os

from rsvqa_jax.bias import analysis
from rsvqa_jax.bias import plots
from rsvqa_jax.bias import predictions
from rsvqa_jax.bias import tables
from rsvqa_jax.data import other_datasets
from rsvqa_jax.errors import RSVQAError

HELP = "Dataset analysis (most common / uniform answer accuracies), relative metrics, tables and Figure 7."
DATASETS = ("lr", "hr", "xben", "floodnet", "rsivqa")
LABELS = {"lr": "RSVQA LR", "hr": "RSVQA HR", "xben": "RSVQAxBEN", "floodnet": "FloodNet", "rsivqa": "RSIVQA"}
MAX_QUESTION_ROWS = 500
_SPLIT_ORDER = ("train", "val", "test", "test_phili", "all")


def add_arguments(parser):
  parser.add_argument("--data", required=True, help="dataset folder")
  parser.add_argument("--dataset", required=True, choices=DATASETS, help="file layout of --data")
  parser.add_argument("--out", required=True, help="folder for the tables and the figure")
  parser.add_argument("--split", action="append",
                      help="split to evaluate (repeatable); default: the test split(s), or the only "
                           "split for datasets without splits (priors always come from train)")
  parser.add_argument("--predictions", help="CSV with columns question_id,prediction of a model")
  parser.add_argument("--adversarial-predictions",
                      help="CSV like --predictions, from the same model under adversarial testing")
  parser.add_argument("--top-k", type=int, default=8, help="answers shown per type in Figure 7")


def read_dataset(root, name):
  """records.Dataset of `root` in the layout `name`."""
  if name == "floodnet":
    return other_datasets.read_floodnet(root)
  if name == "rsivqa":
    return other_datasets.read_rsivqa(root)
  from rsvqa_jax.data import rsvqa_json  # pylint: disable=g-import-not-at-top
  return rsvqa_json.read_dataset(root, name)


def run(args):
  if args.adversarial_predictions and not args.predictions:
    raise RSVQAError("--adversarial-predictions needs --predictions (IO_AdTest compares the two)")
  dataset = read_dataset(args.data, args.dataset)
  fit, eval_names = analysis.default_splits(dataset)
  for name in args.split or ():
    if name not in dataset.splits:
      raise RSVQAError(f"{args.data}: no split {name!r} (has {', '.join(sorted(dataset.splits))})")
  evaluated = {name: dataset[name] for name in (args.split or eval_names)}
  model = predictions.load(args.predictions, evaluated) if args.predictions else {}
  adversarial = predictions.load(args.adversarial_predictions, evaluated) if args.adversarial_predictions else {}
  label = LABELS[args.dataset]
  templates = args.dataset == "lr"
  written = []
  for name, split in evaluated.items():
    result = analysis.analyze(dataset[fit], split, templates=templates, predictions=model.get(name),
                              adversarial=adversarial.get(name))
    main = tables.type_table(result, label)
    print(tables.to_markdown(main))
    written += tables.write(main, args.out, f"types_{name}")
    if templates:
      written += tables.write(tables.objects_patterns_table(result, label), args.out, f"objects_patterns_{name}")
    n_questions = len(result.levels["question"].subsets)
    if n_questions <= MAX_QUESTION_ROWS:
      written += tables.write(tables.question_table(result, label), args.out, f"questions_{name}")
    else:
      print(f"{name}: {n_questions} distinct questions, more than {MAX_QUESTION_ROWS}: no per-question table")
  order = sorted(dataset.splits, key=lambda s: (_SPLIT_ORDER.index(s) if s in _SPLIT_ORDER else len(_SPLIT_ORDER), s))
  written.append(plots.answer_distribution({s: dataset[s] for s in order},
                                           os.path.join(args.out, "answer_distribution.png"),
                                           title=f"{label}: answers per question type and split", top_k=args.top_k))
  print("wrote " + ", ".join(written))
  return 0
