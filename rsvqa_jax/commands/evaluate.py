"""`rsvqa-jax evaluate --workdir DIR [--split test]`, or `--seeds W1 W2 W3` (or globs).

Clean evaluation (eval/accuracy.py) writes DIR/eval/SPLIT/predictions.csv and accuracy.json;
with --seeds the accuracies are aggregated to mean (std) over runs (population std, as in the
paper's Table 2). With --adversarial KIND each workdir is instead tested with substituted
images (eval/adversarial.py): K repeats, written to DIR/eval/SPLIT/adversarial_KIND.json and
adversarial_KIND_predictions.csv.
"""
import glob
import json

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


def _expand(patterns):
  out = []
  for p in patterns:
    hits = sorted(glob.glob(p)) if any(c in p for c in "*?[") else [p]
    if not hits:
      raise RSVQAError(f"--seeds {p}: matches no workdir")
    out += hits
  return list(dict.fromkeys(out))


def run(args):
  # Imported here: JAX starts only when a command that needs it runs.
  from rsvqa_jax.bias import tables  # pylint: disable=g-import-not-at-top
  from rsvqa_jax.eval import accuracy, adversarial  # pylint: disable=g-import-not-at-top
  workdirs = [args.workdir] if args.workdir else _expand(args.seeds)
  common = dict(which=args.checkpoint, data_root=args.data_root)
  if args.adversarial:
    results = [adversarial.evaluate(w, args.split, args.adversarial, repeats=args.repeats,
                                    seed=args.adv_seed, **common) for w in workdirs]
    caption = (f"{args.split}, {args.adversarial} substitution, mean over "
               f"{args.repeats} repeats")
  else:
    results = [accuracy.evaluate(w, args.split, **common) for w in workdirs]
    caption = f"{args.split}, clean"
  for r in results:
    line = f"{r['workdir']}: {r['n']} {args.split} questions"
    if args.adversarial:
      line += (f"; std over the {r['repeats']} repeats: OA {tables.pct(r['std']['oa'])}, "
               f"AA {tables.pct(r['std']['aa'])}")
    print(line)
    if r.get("n_out_of_vocabulary"):
      print(f"{r['workdir']}: {r['n_out_of_vocabulary']} of {r['n']} {args.split} answers are "
            "outside the training answer vocabulary (counted as wrong)")
  print(tables.to_markdown(tables.runs_table(results, caption)))
  if len(results) > 1:
    stats = {k: tables.mean_std(v) for k, v in tables.run_columns(results).items()}
    print(json.dumps({"split": args.split, "workdirs": workdirs,
                      "mean": {k: m for k, (m, _) in stats.items()},
                      "std": {k: s for k, (_, s) in stats.items()}}))
  return 0
