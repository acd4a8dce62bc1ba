"""`rsvqa-jax analyze`: the dataset analysis and, given predictions, the relative metrics.

Writes under --out, for every evaluated split S (bias/tables.write_analysis):
  types_S.{csv,md,tex}            Tables 3 / 5 (question-type level; with --predictions the
                                  RSVQA_Acc and IO_Prior columns, with
                                  --adversarial-predictions AdTest_Acc and IO_AdTest)
  objects_patterns_S.{csv,md,tex} Table 4 (LR only: the template levels)
  questions_S.{csv,md,tex}        Table 7 (per single question; written when the split has
                                  at most MAX_QUESTION_ROWS distinct questions)
and answer_distribution.png (Figure 7, all splits). The question-type table is printed too.

Prediction files are normalised as the dataset's answers are (bias/predictions.py); for each
file and split a line says how many predictions the normalisation mapped, how many it refused
as answers of their question's type ("1" to a yes / no question; counted wrong, said only where
there are any), how many fall outside the training answer space (counted wrong; the most common
listed) and how many are missing. Among the default splits (no --split), one a file answers
nothing of (HR's test_phili beside evaluate's test file) is analysed without that file, with a
line saying so. An adversarial file of K repeats (a `repeat` column) is averaged over the
repeats as `rsvqa-jax evaluate` does.

With --shortcuts O (a `rsvqa-jax shortcuts` folder; --data its O/data, on which the model was
trained), the --predictions on the test split are also scored on the benchmark's IID test split
and its nine OOD sets: shortcuts.json and shortcuts_ood.{csv,md,tex} (bias/shortcut_report.py).
"""
import os

from rsvqa_jax import storage
from rsvqa_jax.commands import argument_types
from rsvqa_jax.data import other_datasets, split_files
from rsvqa_jax.errors import RSVQAError
from rsvqa_jax.train import run_record

DATASETS = other_datasets.NAMES
MAX_QUESTION_ROWS = 500
FIGURE = "answer_distribution.png"  # Figure 7, of every split


def add_arguments(parser):
  parser.add_argument("--data", required=True, help="dataset folder")
  parser.add_argument("--dataset", choices=DATASETS,
                      help="file layout of --data (default: detected among lr, hr, xben; "
                           "floodnet and rsivqa are named)")
  parser.add_argument("--out", required=True, help="folder for the tables and the figure")
  parser.add_argument("--split", action="append",
                      help="split to evaluate (repeatable); default: the test split(s), or the only "
                           "split for datasets without splits (priors always come from train)")
  parser.add_argument("--predictions", help="CSV with columns question_id,prediction of a model "
                      "(our labels, the original code's, or raw counts / areas)")
  parser.add_argument("--adversarial-predictions",
                      help="CSV like --predictions, from the same model under adversarial testing; "
                           "a `repeat` column holds K repeats, averaged")
  parser.add_argument("--top-k", type=argument_types.positive_int, default=8,
                      help="answers shown per type in Figure 7")
  parser.add_argument("--shortcuts", metavar="O",
                      help="also score --predictions on the IID test split and the OOD sets of "
                           "this shortcut benchmark folder (--data: its O/data)")


def run(args):
  # Imported here (and in the helpers below): at module level, `analyze --help` loaded
  # matplotlib (bias.plots) and took 3-5 times as long as the other commands' help.
  from rsvqa_jax.bias import analysis, plots  # pylint: disable=g-import-not-at-top
  from rsvqa_jax.bias import shortcuts, tables  # pylint: disable=g-import-not-at-top
  if args.adversarial_predictions and not args.predictions:
    raise RSVQAError("--adversarial-predictions needs --predictions (IO_AdTest compares the two)")
  if args.shortcuts and not args.predictions:
    raise RSVQAError("--shortcuts scores a model: give its --predictions")
  split_files.refuse_dataset(args.out, "--out", "the tables", inside=True)
  run_record.refuse_run(args.out, "--out", "the tables")
  if os.path.isfile(os.path.join(args.out, shortcuts.SPLIT_FILE)):  # its manifest is ours too
    raise RSVQAError(f"--out {args.out} is a shortcut benchmark folder ({shortcuts.SPLIT_FILE}); "
                     "give a folder of its own for the tables")
  layout = args.dataset or split_files.detect_variant(args.data, DATASETS)
  dataset = other_datasets.read_any(args.data, layout)
  fit, names = analysis.analysed_splits(dataset, args.split or (), args.data)
  evaluated = {name: dataset[name] for name in names}
  space = set(dataset[fit].answer.tolist())
  chosen = bool(args.split)
  # --data checked against the benchmark first: predictions of its data read against another
  # dataset were refused with split hints that led nowhere
  benchmark = _shortcut_benchmark(args, dataset, evaluated) if args.shortcuts else None
  model = _load(args.predictions, evaluated, dataset, space, clean=True, chosen=chosen)
  adversarial = _load(args.adversarial_predictions, evaluated, dataset, space, clean=False,
                      chosen=chosen)
  if adversarial:
    from rsvqa_jax.bias import predictions  # pylint: disable=g-import-not-at-top
    predictions.check_same_questions(model, adversarial, args.predictions,
                                     args.adversarial_predictions)
  if benchmark and "test" not in model:  # the file answers test_phili alone, say
    raise RSVQAError(f"--predictions {args.predictions}: no answer to a question of the test "
                     "split, which --shortcuts scores (the IID test set)")
  label = tables.dataset_label(layout)
  written = []
  # The set replaced whole: a full disk or a kill part-way left new tables beside old ones, and
  # an earlier set's tables this one has not (LR's objects_patterns over HR's) stayed.
  owned = [f for name in evaluated for f in tables.analysis_files(name)] + [FIGURE]
  with storage.staged(args.out, owned) as (out, final):
    for name, split in evaluated.items():
      result = analysis.analyze(dataset[fit], split, templates=layout == "lr",
                                predictions=model.get(name), adversarial=adversarial.get(name))
      main, _, paths = tables.write_analysis(result, label, out,
                                             max_question_rows=MAX_QUESTION_ROWS)
      print(tables.to_markdown(main))
      written += paths
      n_questions = len(result.levels["question"].subsets)
      if n_questions > MAX_QUESTION_ROWS:
        print(f"{name}: {n_questions} distinct questions, more than {MAX_QUESTION_ROWS}: no "
              "per-question table")
    if benchmark:
      written += _shortcuts(args, benchmark, dataset, fit, model, out)
    written.append(plots.answer_distribution(
        analysis.ordered_splits(dataset), os.path.join(out, FIGURE),
        title=f"{label}: answers per question type and split", top_k=args.top_k))
  print("wrote " + ", ".join(map(final, written)))
  return 0


def _shortcut_benchmark(args, dataset, evaluated):
  """The --shortcuts benchmark, checked against --data before the predictions are read."""
  from rsvqa_jax.bias import shortcuts  # pylint: disable=g-import-not-at-top
  if "test" not in evaluated:
    raise RSVQAError("--shortcuts scores the test split (the IID test set): include it in --split")
  saved = shortcuts.load(args.shortcuts)
  saved.check_split(dataset["test"], "iid_test", f"--data {args.data}")
  return saved


def _shortcuts(args, saved, dataset, fit, model, out):
  """--shortcuts: the test split's predictions scored on the IID and OOD sets, written under
  `out`; the paths written."""
  from rsvqa_jax.bias import shortcut_report  # pylint: disable=g-import-not-at-top
  from rsvqa_jax.bias import shortcuts, tables  # pylint: disable=g-import-not-at-top
  test = dataset["test"]
  result = shortcuts.score(saved, dataset[fit], test, model["test"].correct(test.answer)[0])
  result.update(predictions=os.path.abspath(args.predictions),
                benchmark=os.path.abspath(args.shortcuts))
  caption = f"{args.predictions} on the IID test split and the OOD sets of {args.shortcuts}"
  written, paths = shortcut_report.write_evaluation(result, out, caption)
  for table in written:
    print(tables.to_markdown(table))
  return paths


def _load(path, evaluated, dataset, space, *, clean, chosen):
  """{split: predictions.Aligned} of a file (empty without one), its counts printed."""
  if not path:
    return {}
  from rsvqa_jax.bias import predictions  # pylint: disable=g-import-not-at-top
  out = predictions.load(path, evaluated, dataset.name, space, adversarial=not clean,
                         chosen=chosen, others=dataset.splits)
  for split, aligned in out.items():
    print(aligned.describe(f"{path} on {split}"))
  return out
