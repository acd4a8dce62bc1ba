"""What a study tells as it goes (one line per stage or run) and what it keeps of its timings
and of the WARNINGs its stages logged."""
import contextlib
import logging
import os
import sys
import time

from rsvqa_jax import storage


class Progress:
  """One line per stage or run, with the time since the study started."""

  def __init__(self, log):
    self.start = time.time()
    self.log = log

  def __call__(self, message):
    self.log(f"[study {time.time() - self.start:7.1f}s] {message}")


class Timings:
  """Seconds spent per unit of work, kept across invocations in DIR/timings.json."""

  def __init__(self, path):
    self.path = path
    self.values = storage.read_json(path) or {}

  def record(self, key, seconds):
    self.values[key] = round(float(seconds), 2)
    storage.write_json(self.path, self.values)


class Warnings(logging.Handler):
  """The WARNINGs rsvqa_jax logs while a study runs, counted per message and kept across
  invocations in DIR/warnings.json: the report lists them, those of runs an earlier invocation
  trained included, where a console scrolled past them (or a --quiet run's log was not kept)."""

  def __init__(self, path):
    super().__init__(logging.WARNING)
    self.path = path
    kept = storage.read_json(path)
    self.counts = ({m: c for m, c in kept.items() if isinstance(c, int) and c > 0}
                   if isinstance(kept, dict) else {})
    self.unwritable = False  # said once: the counts are kept in memory from then on
    self.folder_made = os.path.isdir(os.path.dirname(path))

  def emit(self, record):
    try:
      message = record.getMessage()
      self.counts[message] = self.counts.get(message, 0) + 1
      self.keep()
    except Exception:  # pylint: disable=broad-except
      self.handleError(record)  # logging's own way

  def keep(self, folder_made=False):
    """Writes the counts, once the study folder exists and there is one: a study makes the folder
    only after its datasets are checked, and WARNINGs reading them logged before are kept from
    then on; a study without any has no file (the docs say so)."""
    self.folder_made = self.folder_made or folder_made
    if not self.folder_made or self.unwritable or not self.counts:
      return
    try:
      storage.write_json(self.path, self.counts)
    except OSError as e:  # a full disk or a read-only folder must not stop the study here
      self.unwritable = True
      sys.stderr.write(f"{self.path}: not written ({e.strerror or e}); this invocation's "
                       "warnings are listed in its report but not kept for the next\n")

  @contextlib.contextmanager
  def caught(self):
    """Counts the package's WARNINGs (and worse) logged inside the block."""
    logger = logging.getLogger("rsvqa_jax")
    logger.addHandler(self)
    try:
      yield self
    finally:
      logger.removeHandler(self)

  def listed(self):
    """[{"message", "count"}] in the order first logged."""
    return [{"message": m, "count": c} for m, c in self.counts.items()]
