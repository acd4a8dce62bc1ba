"""argparse types for numbers whose range argparse cannot say: a value outside it is the usual
one-line usage error naming the option, before the command does any work (a negative seed
otherwise reached NumPy, a NaN prior strength a dataset that never matched its own record)."""
import argparse
import math

SEED_LIMIT = 2 ** 32  # NumPy's and JAX's seeds: 0 .. 2**32 - 1


def seed(text):
  value = _int(text)
  if not 0 <= value < SEED_LIMIT:
    raise argparse.ArgumentTypeError(f"{text}: a seed is a whole number from 0 to "
                                     f"{SEED_LIMIT - 1}")
  return value


def positive_int(text):
  value = _int(text)
  if value < 1:
    raise argparse.ArgumentTypeError(f"{text}: must be 1 or more")
  return value


def non_negative_float(text):
  try:
    value = float(text)
  except ValueError:
    raise argparse.ArgumentTypeError(f"{text}: not a number") from None
  if not math.isfinite(value) or value < 0:
    raise argparse.ArgumentTypeError(f"{text}: must be a finite number >= 0")
  return value


def _int(text):
  try:
    return int(text)
  except ValueError:
    raise argparse.ArgumentTypeError(f"{text}: not a whole number") from None
