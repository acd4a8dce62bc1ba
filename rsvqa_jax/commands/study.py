"""`rsvqa-jax study --config configs/study_X.py[:arg] --workdir DIR [--config.a.b=value ...]`.

Runs the whole language-bias protocol (rsvqa_jax/study.py) and writes DIR/report.md; run it
again on the same DIR to resume an interrupted study.
"""
from rsvqa_jax.commands.train import accept_overrides

HELP = ("Whole language-bias study: reference and visual-blind models over seeds, adversarial "
        "testing, dataset analysis, report.md.")


def add_arguments(parser):
  parser.add_argument("--config", required=True,
                      help="study config file, optionally with an argument: "
                           "configs/study_synthetic.py:balanced")
  parser.add_argument("--workdir", required=True, help="study folder (runs, caches, report.md)")
  parser.epilog = ("Override any config key with --config.KEY=VALUE, e.g. "
                   "--config.study.seeds=(0,1)")
  accept_overrides(parser)


def run(args):
  # Imported here: JAX starts only when a command that needs it runs.
  from rsvqa_jax import study  # pylint: disable=g-import-not-at-top
  from rsvqa_jax.train import config_lib  # pylint: disable=g-import-not-at-top
  config = config_lib.load(args.config)
  config_lib.apply_overrides(config, getattr(args, "config_overrides", []))
  study.run_study(config, args.workdir)
  print(f"report: {args.workdir}/report.md")
  return 0
