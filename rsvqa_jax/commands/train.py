"""`rsvqa-jax train --config configs/X.py[:arg] --workdir DIR [--config.a.b=value ...]`.

Starts the run, resumes it from its last checkpoint, or reports it finished. Overrides use the
dotted config keys; an unknown key or a value of the wrong type is a one-line error.
`--print-config` shows the effective config and exits.
"""
import shlex

from rsvqa_jax.commands import common
from rsvqa_jax.errors import RSVQAError


WORKDIR = "the folder for checkpoints and metrics"


def add_arguments(parser):
  common.add_run_arguments(parser, example="configs/lr_table1.py:distilbert,mutan,finetuned",
                           workdir_means=WORKDIR)


def _not_a_study(config):
  """A study or answerability config trained as one run would ignore its own section (and a
  study's synthetic data, say that data.root is not set)."""
  if "study" in config:
    raise RSVQAError("--config: a study config (it has a `study` section); run it with "
                     "rsvqa-jax study --config ... --workdir DIR")
  if "answerability" in config:  # trained as one run: a VQA classifier, its ranking head never
    raise RSVQAError("--config: an answerability config (it has an `answerability` section); "
                     "run it with rsvqa-jax answerability train --config ... --workdir DIR")


def run(args):
  config = common.config_for_run(args, WORKDIR, _not_a_study)
  if config is None:
    return 0
  if config.train.num_epochs <= 0:
    raise RSVQAError(f"config train.num_epochs={config.train.num_epochs}: must be positive")
  # Imported here: JAX starts only when a command that needs it runs.
  from rsvqa_jax.bias import tables  # pylint: disable=g-import-not-at-top
  from rsvqa_jax.train import loop  # pylint: disable=g-import-not-at-top
  with common.trusted_pickles(args):
    summary = loop.train(config, args.workdir)
  if summary["finished"]:
    print(f"{args.workdir}: done; best validation OA {tables.percent(summary['best_oa'])} at step "
          f"{summary['best_step']}; evaluate with: rsvqa-jax evaluate "
          f"--workdir={shlex.quote(args.workdir)}")  # = : a folder named -x is no option
  return 0
