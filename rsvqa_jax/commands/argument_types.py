"""argparse types for numbers whose range argparse cannot say: a value outside it is the usual
one-line usage error naming the option, before the command does any work (a negative seed
otherwise reached NumPy, a NaN prior strength a dataset that never matched its own record)."""
import argparse
import math
import os

from rsvqa_jax.config import MAX_REPEATS, SEED

SEED_LIMIT = SEED[1]  # the config's seed keys' rule: 0 .. 2**32 - 1


def seed(text):
  value = _int(text)
  if not 0 <= value < SEED_LIMIT:
    raise argparse.ArgumentTypeError(f"{text}: a seed is a whole number from 0 to "
                                     f"{SEED_LIMIT - 1}")
  return value


def int_at_least(low, high=None):
  """The type of a whole number >= `low` (and <= `high`, if given)."""
  def parse(text):
    value = _int(text)
    if high is not None and not low <= value <= high:
      raise argparse.ArgumentTypeError(f"{text}: must be from {low} to {high}")
    if value < low:
      raise argparse.ArgumentTypeError(f"{text}: must be {low} or more")
    return value
  return parse


positive_int = int_at_least(1)
repeats = int_at_least(1, MAX_REPEATS)


def non_negative_float(text):
  value = _float(text)
  if value < 0:
    raise argparse.ArgumentTypeError(f"{text}: must be a finite number >= 0")
  return value


def positive_float(text):
  value = _float(text)
  if value <= 0:
    raise argparse.ArgumentTypeError(f"{text}: must be a finite number > 0")
  return value


def fraction(text):
  value = _float(text)
  if not 0 <= value <= 1:
    raise argparse.ArgumentTypeError(f"{text}: must be a number from 0 to 1")
  return value


def _float(text):
  try:
    value = float(text)
  except ValueError:
    raise argparse.ArgumentTypeError(f"{text}: not a number") from None
  if not math.isfinite(value):
    raise argparse.ArgumentTypeError(f"{text}: must be a finite number")
  return value


def _int(text):
  try:
    return int(text)
  except ValueError:
    raise argparse.ArgumentTypeError(f"{text}: not a whole number") from None


# The options (by dest) that name a file or folder, in any command.
PATH_OPTIONS = frozenset({
    "out", "data", "data_root", "workdir", "seeds", "runs", "predictions",
    "adversarial_predictions", "shortcuts", "config", "cache", "checkpoint", "pretrained_dir",
    "image_labels", "src", "predicted", "truth", "confidence", "scores", "labels", "val_scores",
    "val_labels", "pool", "docs"})


def home(text):
  """A path with its leading ~ (or ~user) expanded. The shell expands it only at the start of a
  word of its own: `--out=~/x` or a quoted "~/x" came through as is, and the command then wrote
  into (or read) a folder named `~` in the current folder."""
  return os.path.expanduser(text)


def expand_home(parser):
  """Gives each path option of `parser` (PATH_OPTIONS) the `home` type (cli.py, for a command and
  each of its sub-commands). Options with choices (evaluate --checkpoint best|last, --pool
  dataset|split) are left alone."""
  for action in parser._actions:  # pylint: disable=protected-access
    if (action.dest in PATH_OPTIONS and action.option_strings and action.type is None
          and action.choices is None and action.nargs != 0):
      action.type = home
