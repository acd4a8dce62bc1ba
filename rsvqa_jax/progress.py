"""Progress bars for the steps that take more than a few seconds, shown only where someone watches.

`bar` is `tqdm.auto.tqdm` (a widget in a notebook, a text bar in a terminal). Where stderr is not
a terminal (a log file, a cluster job, a pipe) a redrawn bar would be carriage returns, so it
becomes plain lines instead: one at most every INTERVAL_S seconds and one at its end, logged at
INFO by `rsvqa_jax.progress`, so they land where the commands' other routine lines go (a bar done
within INTERVAL_S writes none: the command's own line follows). Bars and lines stay off when the
user asked for warnings only (`rsvqa-jax -q`, which sets the `rsvqa_jax` logger to WARNING; a
library user can do the same); the lines also when nothing takes INFO (a library user who
configured no logging). A leaf module: any layer may import it.
"""
import io
import logging
import sys
import time
import warnings

from tqdm import std

with warnings.catch_warnings():  # a Jupyter without ipywidgets: "IProgress not found. Please
  warnings.simplefilter("ignore", std.TqdmWarning)  # update jupyter", and a text bar anyway
  from tqdm import auto

LOGGER = "rsvqa_jax"
_log = logging.getLogger(__name__)  # below LOGGER: its handlers, and a level of its own if set
INTERVAL_S = 30.0  # seconds between two progress lines of a bar in a log
_clock = time.monotonic  # what the interval is measured on (a test replaces it)


def quiet():
  """Whether the `rsvqa_jax` logger was set above INFO (the command line's -q)."""
  return logging.getLogger(LOGGER).level > logging.INFO


def bar(iterable=None, *, total=None, desc=None, unit="it", enabled=True, **kwargs):
  """A tqdm.auto progress bar; off when not `enabled` or under -q; log lines (LogLines) when
  stderr is no terminal and the `rsvqa_jax` logger passes INFO."""
  if (enabled and not quiet() and not _notebook() and not _terminal(kwargs.get("file"))
      and _log.isEnabledFor(logging.INFO)):
    kwargs.pop("file", None)
    return LogLines(iterable, total=total, desc=desc, unit=unit, **kwargs)
  disable = True if not enabled or quiet() else None  # None: tqdm's own terminal test
  return auto.tqdm(iterable, total=total, desc=desc, unit=unit, dynamic_ncols=True,
                   disable=disable, **kwargs)


def _notebook():
  """Whether tqdm.auto picked the notebook widget, which shows whatever stderr is."""
  return any(c.__module__ == "tqdm.notebook" for c in auto.tqdm.__mro__)


def _terminal(stream=None):
  """Whether `stream` (default stderr) is a terminal, as tqdm tests it."""
  stream = stream or sys.stderr
  try:
    return bool(stream.isatty())
  except (AttributeError, ValueError):  # None, or closed
    return False


class _Nowhere(io.TextIOBase):
  """The file a LogLines bar draws on: tqdm's own output (newlines at close) goes nowhere."""

  def write(self, text):
    return len(text)


class LogLines(std.tqdm):
  """A tqdm bar that draws nothing and logs `desc: n/total unit (p%), elapsed, left, postfix`
  at most every INTERVAL_S seconds, and once more at close when it logged before (unless
  leave=False). tqdm asks to redraw on every update and postfix change; the interval is
  checked here, so the count of lines depends on the time taken, never on the steps."""

  monitor_interval = 0  # tqdm's monitor thread lowers miniters, which is 1 here already

  def __init__(self, *args, **kwargs):
    self._due = _clock() + INTERVAL_S
    self._said = None  # the count the last line gave
    super().__init__(*args, file=_Nowhere(), mininterval=0, miniters=1, **kwargs)

  def display(self, msg=None, pos=None):
    """Draws nothing: refresh and close log the lines."""
    return True

  def refresh(self, nolock=False, lock_args=None):
    """Logs a line when one is due. Outside tqdm's lock: the command line's handler takes it."""
    if not self.disable and _clock() >= self._due:
      self._say()
    return True

  def close(self):
    final = (not self.disable and self._said is not None and self._said != self.n
             and self.leave is not False)  # a last line that would repeat the one before: none
    super().close()
    if final:
      self._say()

  def _say(self):
    self._due, self._said = _clock() + INTERVAL_S, self.n
    _log.info(self.line())

  def line(self):
    """This bar as one line: what a terminal's bar shows, less the bar."""
    d = self.format_dict
    n, total, elapsed = d["n"], d["total"], d["elapsed"]
    parts = [f"{n}/{total} {d['unit']} ({int(100 * n / total)}%)" if total else
             f"{n} {d['unit']}", f"{self.format_interval(elapsed)} elapsed"]
    done = n - d["initial"]
    if total and 0 < done and n < total and elapsed > 0:
      parts.append(f"{self.format_interval((total - n) * elapsed / done)} left")
    if d["postfix"]:
      parts.append(d["postfix"])
    desc = self.desc.rstrip(": ")
    return f"{desc}: {', '.join(parts)}" if desc else ", ".join(parts)
