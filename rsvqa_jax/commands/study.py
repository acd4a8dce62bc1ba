"""`rsvqa-jax study --config configs/study_X.py[:arg] --workdir DIR [--config.a.b=value ...]`.

Runs the whole language-bias protocol (rsvqa_jax/study.py) and writes DIR/report.md; run it
again on the same DIR to resume an interrupted study. `--print-config` shows the effective
config and exits.
"""
from rsvqa_jax.commands import common
from rsvqa_jax.errors import RSVQAError

HELP = ("Whole language-bias study: reference and visual-blind models over seeds, adversarial "
        "testing, dataset analysis, report.md.")


def add_arguments(parser):
  common.add_config_arguments(parser, example="configs/study_synthetic.py:balanced")
  parser.add_argument("--workdir", help="study folder (runs, caches, report.md; required to run)")


def run(args):
  config = common.load_config(args)
  if args.print_config:
    print(common.config_text(config))
    return 0
  if not args.workdir:
    raise RSVQAError("--workdir is required (the study folder)")
  # Imported here: JAX starts only when a command that needs it runs.
  from rsvqa_jax import study  # pylint: disable=g-import-not-at-top
  study.run_study(config, args.workdir)
  print(f"report: {args.workdir}/report.md")
  return 0
