"""Progress bars for the steps that take more than a few seconds, shown only where someone watches.

`bar` is `tqdm.auto.tqdm` (a widget in a notebook, a text bar in a terminal) that stays off when
stderr is not a terminal (a log file, a CI job, a pipe) and when the user asked for warnings only
(`rsvqa-jax -q`, which sets the `rsvqa_jax` logger to WARNING; a library user can do the same).
A leaf module: any layer may import it.
"""
import logging

from tqdm import auto

LOGGER = "rsvqa_jax"


def quiet():
  """Whether the `rsvqa_jax` logger was set above INFO (the command line's -q)."""
  return logging.getLogger(LOGGER).level > logging.INFO


def bar(iterable=None, *, total=None, desc=None, unit="it", enabled=True, **kwargs):
  """A tqdm.auto progress bar; off when not `enabled`, under -q, or when stderr is no terminal."""
  disable = True if not enabled or quiet() else None  # None: tqdm's own terminal test
  return auto.tqdm(iterable, total=total, desc=desc, unit=unit, dynamic_ncols=True,
                   disable=disable, **kwargs)
