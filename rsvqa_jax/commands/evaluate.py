"""`rsvqa-jax evaluate --workdir DIR [--split test]`, or `--seeds W1 W2 W3` (or globs).

Clean evaluation (eval/accuracy.py) writes DIR/eval/SPLIT/predictions.csv and accuracy.json
(DIR/eval_last/ with --checkpoint last: the best's files stay);
with --seeds the accuracies are aggregated to mean (std) over runs (population std, as in the
paper's Table 2). With --adversarial KIND each workdir is instead tested with substituted
images (eval/adversarial.py): K repeats, written to DIR/eval/SPLIT/adversarial_KIND.json and
adversarial_KIND_predictions.csv (every repeat, a `repeat` column); `--pool` says where random
draws its images: every image of the dataset (default, as the paper) or of the split only.
Predictions the answer normalisation would map, or outside the training answer space, are
reported (never expected from our own models: a check that `analyze` reads the files alike).
With --shortcuts O (a `rsvqa-jax shortcuts` folder whose data/ the workdir was trained on) the
IID test split and the nine OOD sets are scored instead (eval/shortcuts.py), into
DIR/eval/shortcuts/; --ood-selection adds the paper's Table 4 comparison (checkpoints selected on
OOD val / OOD test: adaptive overfitting, shown as such).
With --counterfactual (synthetic datasets) each question is asked again on its scene re-rendered
with the question's object removed, added or moved across its relation, and with an unrelated
object removed (eval/counterfactual.py): per question type, the share of answers that change as
the edit demands and the share that change under the control edit, written to
DIR/eval/SPLIT/counterfactual.{json,csv,md,tex} and counterfactual_edits.csv.
"""
import glob
import logging
import os

from rsvqa_jax import storage
from rsvqa_jax.commands import argument_types, common
from rsvqa_jax.errors import RSVQAError

_log = logging.getLogger(__name__)


def add_arguments(parser):
  group = parser.add_mutually_exclusive_group(required=True)
  group.add_argument("--workdir", help="a training workdir")
  group.add_argument("--seeds", nargs="+", action="extend", metavar="WORKDIR",
                     help="workdirs (or glob patterns) of the same model over seeds (given "
                          "twice: all of them)")
  parser.add_argument("--split", default="test", help="split to evaluate (default: test)")
  parser.add_argument("--checkpoint", choices=("best", "last"), default="best",
                      help="best-on-validation (default) or the last checkpoint (its files go "
                           "to WORKDIR/eval_last/)")
  parser.add_argument("--data-root", default=None,
                      help="dataset folder, when it moved since training (real-data configs)")
  parser.add_argument("--adversarial", choices=("random", "shuffle", "white", "black", "noise"),
                      help="adversarial testing: answer with a substituted image")
  parser.add_argument("--repeats", type=argument_types.repeats, default=None,
                      help="substitutions per question for --adversarial, 1 to 1000 (default: "
                           "10; 1 for white, black and noise, whose repeats are all alike)")
  parser.add_argument("--adv-seed", type=argument_types.seed, default=None,
                      help="seed of the substitutions (and of the noise images); default 0")
  parser.add_argument("--pool", choices=("dataset", "split"), default=None,
                      help="images --adversarial random draws from: every image of the dataset "
                           "(default, as the paper) or of the evaluated split")
  parser.add_argument("--shortcuts", metavar="O",
                      help="score the IID test split and the OOD sets of this shortcut benchmark "
                           "folder (rsvqa-jax shortcuts; the workdir trained on O/data)")
  parser.add_argument("--ood-selection", action="store_true",
                      help="with --shortcuts: also select checkpoints on OOD val / OOD test among "
                           "the kept ones (the paper's Table 4: adaptive overfitting)")
  parser.add_argument("--answerability", action="store_true",
                      help="score an answerability workdir on its pools (ranking and "
                           "classification metrics, Random and Majority beside it)")
  parser.add_argument("--counterfactual", action="store_true",
                      help="synthetic datasets: answer each question on its scene edited (its "
                           "object removed, added, moved; an unrelated object removed as control)"
                           "; --adv-seed seeds the edits")
  common.add_pickle_argument(parser)


def _shortcuts(args, workdirs, where):
  """--shortcuts: each workdir scored on the benchmark; their tables, then mean (std) of runs."""
  from rsvqa_jax.bias import shortcut_report, tables  # pylint: disable=g-import-not-at-top
  from rsvqa_jax.eval import shortcuts  # pylint: disable=g-import-not-at-top
  if args.adversarial or args.split != "test":
    raise RSVQAError("--shortcuts scores the IID test split with clean images: drop --adversarial "
                     "and --split")
  with common.trusted_pickles(args):
    results = [shortcuts.evaluate(w, args.shortcuts, ood_selection=args.ood_selection, **where)
               for w in workdirs]
  for r in results:
    for table in r["tables"]:
      print(tables.to_markdown(table))
    print(f"written to {shortcuts.folder(r['workdir'], r['checkpoint'])}")
  if len(results) > 1:
    print(tables.to_markdown(shortcut_report.models_table([("runs", results)])))
  return 0


def _counterfactual(args, workdirs, where):
  """--counterfactual: each workdir's answers on edited scenes, one table per workdir, and their
  mean over several."""
  from rsvqa_jax.bias import tables  # pylint: disable=g-import-not-at-top
  from rsvqa_jax.eval import counterfactual  # pylint: disable=g-import-not-at-top
  if args.adversarial or args.shortcuts or args.answerability:
    raise RSVQAError("--counterfactual edits the scenes of the clean images: drop --adversarial, "
                     "--shortcuts and --answerability")
  with common.trusted_pickles(args):
    results = [counterfactual.evaluate(w, args.split, seed=args.adv_seed, **where)
               for w in workdirs]
  for r in results:
    print(tables.to_markdown(r["table"]))
    for why, n in r["skipped"].items():
      print(f"{r['workdir']}: {n} of {r['n_questions']} questions left out: {why}")
    print(f"written to {counterfactual.paths(r['workdir'], args.split, r['checkpoint'])[0]}")
  if len(results) > 1:  # --seeds aggregates, as the accuracy and answerability tables do
    print(tables.to_markdown(counterfactual.mean_table(
        results, f"Counterfactual edits, {args.split}: mean (population std) over "
                 f"{len(results)} runs (shares of edits)")))
  return 0


def _expand(patterns):
  out = []
  for p in patterns:
    hits = sorted(glob.glob(p)) if any(c in p for c in "*?[") else [p]
    if not hits:
      raise RSVQAError(f"--seeds {p}: matches no workdir")
    for hit in hits:
      if any(os.path.realpath(hit) == os.path.realpath(w) for w in out):
        raise RSVQAError(f"--seeds: {hit} is given twice")
      out.append(hit)
  return out


def _check_seed_runs(workdirs, data_root):
  """--seeds averages one model over seeds: refuse runs of another config or of the same seed,
  and a run stopped before its last epoch beside finished ones.

  Anything else would come out as a mean (std) over runs that are not seeds of one model.
  """
  from rsvqa_jax import config as config_lib  # pylint: disable=g-import-not-at-top
  from rsvqa_jax.train import checkpointing, run_record  # pylint: disable=g-import-not-at-top
  configs = {w: checkpointing.read_config(w, data_root) for w in workdirs}
  problem = config_lib.unlike_seed_runs([(w, config_lib.identity(c)) for w, c in configs.items()])
  if problem:
    raise RSVQAError(f"--seeds: {problem}")
  total = next(iter(configs.values())).train.num_epochs  # alike: one config
  done = {w: run_record.epochs_trained(os.path.join(w, "checkpoints")) for w in workdirs}
  stopped = [w for w, d in done.items() if d is not None and d < total]
  if stopped and len(stopped) < len(workdirs):
    first = stopped[0]
    raise RSVQAError(f"--seeds: {first}: {run_record.unfinished(first, done[first], total)}; a mean "
                     "over seeds would mix it with finished runs")
  lengths = sorted({d for d in done.values() if d is not None})
  if len(lengths) > 1:  # every one stopped, at different epochs
    first = stopped[0]
    raise RSVQAError(f"--seeds: runs of {' and '.join(map(str, lengths))} epochs of training (e.g. "
                     f"{first}: {run_record.unfinished(first, done[first], total)}); a mean over "
                     "seeds is of one training length")
  for w in (w for w, d in done.items() if d is None):
    _log.warning(f"--seeds: {w}: how far it trained cannot be read (no readable checkpoint record "
                 "under checkpoints/): taken as finished")


def run(args):
  # Imported here: JAX starts only when a command that needs it runs.
  from rsvqa_jax.bias import tables  # pylint: disable=g-import-not-at-top
  from rsvqa_jax.eval import accuracy, adversarial, outputs  # pylint: disable=g-import-not-at-top
  workdirs = [args.workdir] if args.workdir else _expand(args.seeds)
  for w in workdirs:  # the results go under it: said before the predictions, not after
    storage.check_writable(w)
    storage.check_writable(os.path.join(w, "eval"))
  if len(workdirs) > 1:
    _check_seed_runs(workdirs, args.data_root)
  if args.pool and args.adversarial != "random":
    raise RSVQAError("--pool applies to --adversarial random only")
  if args.repeats is not None and not args.adversarial:
    raise RSVQAError("--repeats applies to --adversarial only")
  if args.adv_seed is not None and not (args.adversarial or args.counterfactual):
    raise RSVQAError("--adv-seed applies to --adversarial and --counterfactual only")
  if args.adversarial:
    args.repeats = adversarial.chosen_repeats(args.adversarial, args.repeats, "--repeats")
  args.adv_seed = args.adv_seed or 0
  where = dict(which=args.checkpoint, data_root=args.data_root)
  if args.ood_selection and not args.shortcuts:
    raise RSVQAError("--ood-selection applies to --shortcuts only")
  if args.counterfactual:
    return _counterfactual(args, workdirs, where)
  if args.answerability:
    from rsvqa_jax.commands import answerability  # pylint: disable=g-import-not-at-top
    return answerability.evaluate(args, workdirs, where)
  if args.shortcuts:
    return _shortcuts(args, workdirs, where)
  if args.adversarial:
    pool = args.pool or "dataset"
    with common.trusted_pickles(args):
      results = [adversarial.evaluate(w, args.split, args.adversarial, repeats=args.repeats,
                                      seed=args.adv_seed, pool=pool, **where) for w in workdirs]
    caption = (f"{args.split}, {args.adversarial} substitution"
               + (f" from the {pool}'s images" if args.adversarial == "random" else "")
               + (f", mean over {args.repeats} repeats" if args.repeats > 1 else ""))
  else:
    with common.trusted_pickles(args):
      results = [accuracy.evaluate(w, args.split, **where) for w in workdirs]
    caption = f"{args.split}, clean"
  for r in results:
    line = (f"{r['workdir']}: {r['n']} {args.split} questions ({r['checkpoint']} checkpoint, "
            f"step {r['step']})")
    if args.adversarial and r["repeats"] > 1:  # one repeat's std of 0 says nothing
      line += (f"; std over the {r['repeats']} repeats: OA {tables.pct(r['std']['oa'])}, "
               f"AA {tables.pct(r['std']['aa'])}")
    print(line)
    paths = (outputs.adversarial_paths(r["workdir"], args.split, args.adversarial, args.checkpoint)
             if args.adversarial else
             outputs.accuracy_paths(r["workdir"], args.split, args.checkpoint))
    print(f"wrote {', '.join(paths)}")
    if r.get("n_out_of_vocabulary"):
      print(f"{r['workdir']}: {r['n_out_of_vocabulary']} of {r['n']} {args.split} answers are "
            "outside the training answer vocabulary (counted as wrong)")
    audit = r["predictions"]
    if audit["n_mapped"] or audit["n_outside_answer_space"]:
      print(f"{r['workdir']}: {audit['n_mapped']} predictions mapped by the answer normalisation, "
            f"{audit['n_outside_answer_space']} outside the training answer space (counted wrong): "
            f"{audit['outside_answer_space_top']}")
  setup = f"adversarial {args.adversarial}" if args.adversarial else None
  print(tables.to_markdown(tables.runs_table(results, caption, setup)))
  if len(results) > 1:
    stats = {k: tables.mean_std(v) for k, v in tables.run_columns(results).items()}
    setting = {"adversarial": args.adversarial}
    if args.adversarial:
      setting.update(repeats=args.repeats, adv_seed=args.adv_seed,
                     **({"pool": pool} if args.adversarial == "random" else {}))
    print(storage.json_line({"split": args.split, "checkpoint": args.checkpoint, **setting,
                             "workdirs": workdirs,
                             "mean": {k: m for k, (m, _) in stats.items()},
                             "std": {k: s for k, (_, s) in stats.items()}}))
  return 0
