"""The Python API's calls, and its first import, leave logging as the caller set it up.

absl (imported with orbax) runs logging.basicConfig() at its first message when the root logger
has no handler: a notebook's own basicConfig() would then silently do nothing. And orbax logs
dozens of routine absl INFO lines per checkpoint restored, which bury rsvqa_jax's own lines in a
notebook logging at INFO.
"""
import contextlib
import functools
import logging
import sys
import threading


_LOCK = threading.Lock()
_state = {"depth": 0}  # calls inside kept() now (threads too); the outermost one's record


@contextlib.contextmanager
def kept():
  """Root handlers as found (none added), absl's and jax's lines below WARNING held back
  meanwhile (jax's INFO "Unable to initialize backend 'tpu'" at its first use reads as a
  fault). Calls that overlap (threads) share one record, taken by the first to start and put
  back by the last to end: two overlapping calls left absl at WARNING for good, the second
  having recorded the level the first had raised."""
  with _LOCK:
    if not _state["depth"]:
      _state.update(_record())
    _state["depth"] += 1
  try:
    yield
  finally:
    with _LOCK:
      _state["depth"] -= 1
      if not _state["depth"]:
        _put_back(_state)


def _record():
  """The root handlers and the levels kept() changes, with those levels raised to WARNING."""
  root = logging.getLogger()
  # Only a logger absl made itself: one made here first would be a plain Logger absl then uses.
  jax = logging.getLogger("jax")
  held = ([jax] if jax.level == logging.NOTSET else []) + (  # JAX_LOGGING_LEVEL: the user's
      [logging.getLogger("absl")] if "absl.logging" in sys.modules else [])
  levels = [logger.level for logger in held]
  for logger, level in zip(held, levels):
    logger.setLevel(max(level, logging.WARNING))
  return {"handlers": list(root.handlers), "held": held, "levels": levels}


def _put_back(record):
  for logger, level in zip(record["held"], record["levels"]):
    logger.setLevel(level)
  if not record["handlers"]:
    root = logging.getLogger()
    for handler in list(root.handlers):
      root.removeHandler(handler)


def keeping(function):
  """`function` run inside kept()."""
  @functools.wraps(function)
  def wrapped(*args, **kwargs):
    with kept():
      return function(*args, **kwargs)
  return wrapped
