"""argparse types for numbers whose range argparse cannot say: a value outside it is the usual
one-line usage error naming the option, before the command does any work (a negative seed
otherwise reached NumPy, a NaN prior strength a dataset that never matched its own record)."""
import argparse
import math

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
