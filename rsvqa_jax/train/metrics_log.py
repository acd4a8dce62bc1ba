"""A training run's metrics.jsonl, read back without JAX.

The training loop appends one JSON record per logged step (storage.json_line: null where a
metric is NaN). The loop on resume, `tables`, the study and shortcut selection read it back
through `read`, so they agree on which lines count: a kill can cut the last line, so an
unreadable line is left out, and unreadable lines before the last (which no kill explains) are
counted in a WARNING. A resume (`keep_until`) sets those aside in metrics.jsonl.damaged.
"""
import json
import logging
import os

from rsvqa_jax import storage
from rsvqa_jax.bias import metrics
from rsvqa_jax.bias import tables
from rsvqa_jax.errors import RSVQAError

METRICS_FILE = "metrics.jsonl"

_log = logging.getLogger(__name__)


def read(workdir):
  """The records of workdir/metrics.jsonl ([] when there is none): dicts with an integer
  "step", NaN where the file holds null under a metric key."""
  return [record for _, record in _parsed(workdir, "skipped") if record is not None]


def keep_until(workdir, step):
  """Rewrites workdir/metrics.jsonl with its records up to `step` (a resume drops those of the
  steps it trains again), through a temporary file: a kill here loses no earlier record.
  Unreadable lines before the last are appended to metrics.jsonl.damaged, never dropped."""
  path = os.path.join(workdir, METRICS_FILE)
  if not os.path.exists(path):
    return
  parsed = _parsed(workdir, f"moved to {METRICS_FILE}.damaged")
  damaged = [line for line, record in parsed if record is None]
  if damaged:
    with open(path + ".damaged", "ab") as f:
      f.writelines(line + b"\n" for line in damaged)
  with storage.replacing(path) as f:
    f.writelines(storage.json_line(r) + "\n" for _, r in parsed
                 if r is not None and r["step"] <= step)


def _parsed(workdir, fate):
  """[(line, record)] of workdir/metrics.jsonl: every readable record, and (line, None) for each
  unreadable line before the last, which no kill explains (a WARNING counts them, saying their
  `fate`); a cut last line is left out."""
  path = os.path.join(workdir, METRICS_FILE)
  try:
    with open(path, "rb") as f:  # each line decoded on its own: bad UTF-8 loses one line only
      lines = f.read().splitlines()
  except FileNotFoundError:
    return []
  except OSError as e:  # a folder or a link loop: the run would read "never validated"
    raise RSVQAError(f"{path}: unreadable ({e.strerror or e})") from None
  out, bad = [], []
  for number, line in enumerate(lines, 1):
    try:
      record = metrics.from_json(json.loads(line))
    except (ValueError, RecursionError):  # RecursionError: nested thousands deep
      record = None
    step = record.get("step") if isinstance(record, dict) else None
    if isinstance(step, int) and not isinstance(step, bool):
      out.append((line, record))
    elif line.strip():
      bad.append(number)
      if number != len(lines):
        out.append((line, None))
  damaged = [n for n in bad if n != len(lines)]
  if damaged:
    _log.warning("%s: %d of %d lines unreadable (the first: line %d), %s", path, len(bad),
                 len(lines), damaged[0], fate)
  return out


def best_validation(workdir, val_split):
  """The best validation OA in workdir/metrics.jsonl (NaN when none was written): what `tables`
  and the study report for a run."""
  return tables.best_validation_oa(read(workdir), val_split, os.path.join(workdir, METRICS_FILE))
