"""`rsvqa-jax study --config configs/study_X.py[:arg] --workdir DIR [--config.a.b=value ...]`.

Runs the whole language-bias protocol (rsvqa_jax/study/) and writes DIR/report.md; run it
again on the same DIR to resume an interrupted study. `--print-config` shows the effective
config and exits.
"""
from rsvqa_jax.commands import common


WORKDIR = "the study folder (runs, caches, report.md)"


def add_arguments(parser):
  common.add_run_arguments(parser, example="configs/study_synthetic.py:balanced",
                           workdir_means=WORKDIR)


def run(args):
  from rsvqa_jax.study import checks  # pylint: disable=g-import-not-at-top
  config = common.config_for_run(args, WORKDIR,
                                 check=lambda c: checks.check(c, paths=not args.print_config),
                                 unread=False)
  if config is None:
    return 0
  # Imported here: JAX starts only when a command that needs it runs.
  from rsvqa_jax import study  # pylint: disable=g-import-not-at-top
  with common.trusted_pickles(args):
    study.run_study(config, args.workdir, named=common.command_line_keys(args))
  print(f"report: {args.workdir}/report.md")
  return 0
