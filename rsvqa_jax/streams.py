"""The console script's standard streams, made safe for the ways a shell hands them over.

A command's files are its results, its printed lines a report of them: a reader that stops
early (`rsvqa-jax tables ... | head -1`), standard output on a full device (`>/dev/full`) or
closed (`>&-`, `2>&-`) must not stop the work half-way, print a traceback at exit, or turn a
finished command into a failed one. Lines that cannot be encoded for an ASCII or Latin-1
terminal are written with backslash escapes instead of failing the command after its work.
Standard library only: it runs before the interrupt handler's imports settle.
"""
import errno
import os
import sys


class _Unfailing:
  """A standard stream that never raises on write or flush: a reader gone (EPIPE) is silence from
  then on; any other failure of stdout is said once on stderr, and the lines after it dropped."""

  def __init__(self, stream, name):
    self._stream = stream
    self._name = name
    self._lost = False

  def write(self, text):
    if not self._lost:
      try:
        return self._stream.write(text)
      except OSError as e:
        self._lose(e)
    return len(text)

  def flush(self):
    if not self._lost:
      try:
        self._stream.flush()
      except OSError as e:
        self._lose(e)

  def _lose(self, error):
    """Points the stream's file descriptor at the null device, so that the buffered rest is
    flushed there (at exit too: no 'Exception ignored' traceback), and says why unless the
    reader just left."""
    self._lost = True
    try:
      null = os.open(os.devnull, os.O_WRONLY)
      os.dup2(null, self._stream.fileno())
      os.close(null)
      self._stream.flush()
    except (OSError, ValueError):
      pass
    if error.errno != errno.EPIPE and self._name == "stdout":
      sys.stderr.write(f"rsvqa-jax: standard output: {(error.strerror or str(error)).lower()}; "
                       "the printed lines are lost, the files are written as usual\n")

  def __getattr__(self, name):
    return getattr(self._stream, name)


def make_safe():
  """Closed streams become the null device; neither raises (_Unfailing); both escape what their
  encoding cannot write."""
  for name in ("stdout", "stderr"):
    stream = getattr(sys, name)
    if stream is None:  # `>&-` / `2>&-`: print() and tqdm would write to None
      stream = open(os.devnull, "w", encoding="utf-8")  # pylint: disable=consider-using-with
      setattr(sys, name, stream)
    try:
      stream.reconfigure(errors="backslashreplace")
    except (AttributeError, ValueError, OSError):
      pass
  sys.stderr = _Unfailing(sys.stderr, "stderr")  # first: stdout's failure is said there
  sys.stdout = _Unfailing(sys.stdout, "stdout")
