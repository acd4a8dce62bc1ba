"""`rsvqa-jax analyze`: the dataset analysis and, given predictions, the relative metrics.

Writes under --out, for every evaluated split S (bias/tables.write_analysis):
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


def run(args):
  if args.adversarial_predictions and not args.predictions:
    raise RSVQAError("--adversarial-predictions needs --predictions (IO_AdTest compares the two)")
  dataset = other_datasets.read_any(args.data, args.dataset)
  fit, eval_names = analysis.default_splits(dataset)
  for name in args.split or ():
    if name not in dataset.splits:
      raise RSVQAError(f"{args.data}: no split {name!r} (has {', '.join(sorted(dataset.splits))})")
  evaluated = {name: dataset[name] for name in (args.split or eval_names)}
  model = predictions.load(args.predictions, evaluated) if args.predictions else {}
  adversarial = predictions.load(args.adversarial_predictions, evaluated) if args.adversarial_predictions else {}
  label = LABELS[args.dataset]
  written = []
  for name, split in evaluated.items():
    result = analysis.analyze(dataset[fit], split, templates=args.dataset == "lr",
                              predictions=model.get(name), adversarial=adversarial.get(name))
    main, _, paths = tables.write_analysis(result, label, args.out,
                                           max_question_rows=MAX_QUESTION_ROWS)
    print(tables.to_markdown(main))
    written += paths
    n_questions = len(result.levels["question"].subsets)
    if n_questions > MAX_QUESTION_ROWS:
      print(f"{name}: {n_questions} distinct questions, more than {MAX_QUESTION_ROWS}: no per-question table")
  written.append(plots.answer_distribution(analysis.ordered_splits(dataset),
                                           os.path.join(args.out, "answer_distribution.png"),
                                           title=f"{label}: answers per question type and split", top_k=args.top_k))
  print("wrote " + ", ".join(written))
  return 0
