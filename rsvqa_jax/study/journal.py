"""What a study tells as it goes (one line per stage or run) and what it keeps of its timings."""
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
