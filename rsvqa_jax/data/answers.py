"""Answer normalisation (count / area binning) and the answer vocabulary built on train.

Classification over answers needs a closed answer space; this file defines it per dataset.

Where this differs from the original PyTorch RSVQA code (DESIGN.md section 3), and why:

- Bin labels. The original code maps an LR count n to "between 0 and 10" for 0 < n <= 10,
  "between 10 and 100" for 10 < n <= 100, "between 100 and 1000" for 100 < n <= 1000, and
  HR areas likewise to "between 0m2 and 10m2", ... . The intervals here are the same
  ((0, 10], (10, 100], (100, 1000], above 1000, and exactly 0), but the labels use the paper's
  wording, which does not overlap at the edges: "between 1 and 10", "between 11 and 100",
  "between 101 and 1000" (and "between 1m2 and 10m2", ...). Accuracies are identical;
  `ORIGINAL_LABELS` maps the original strings onto ours to compare predictions.
- What gets binned. The original bins any answer that parses as a number; here binning is
  decided by the question type (LR `count`, HR `area`), so a count answer that is not an
  integer raises an error instead of silently becoming its own class. HR counts are kept as
  numbers, as in the original. Areas may be written with decimals ("12.5m2"); the original
  `int()` parse would crash on those, here they fall in the interval containing the value.
- Vocabulary order. The original orders answers by training frequency with ties left in
  dictionary order; here ties are broken alphabetically so ids are reproducible.
- RSVQAxBEN. The 1,000 most frequent training answers are kept, as in the original; the
  training samples whose answer falls outside are reported (`AnswerVocab.dropped`) and encode
  to -1, so training skips them and evaluation counts them as wrong instead of crashing.
"""
import collections
import json
import math
import re
from typing import NamedTuple

import numpy as np

from rsvqa_jax.errors import RSVQAError

LR_COUNT_BINS = ("0", "between 1 and 10", "between 11 and 100", "between 101 and 1000", "more than 1000")
HR_AREA_BINS = ("0m2", "between 1m2 and 10m2", "between 11m2 and 100m2", "between 101m2 and 1000m2",
                "more than 1000m2")
XBEN_TOP_K = 1000
UNKNOWN = "<unk>"

ORIGINAL_LABELS = {
    "between 0 and 10": "between 1 and 10",
    "between 10 and 100": "between 11 and 100",
    "between 100 and 1000": "between 101 and 1000",
    "between 0m2 and 10m2": "between 1m2 and 10m2",
    "between 10m2 and 100m2": "between 11m2 and 100m2",
    "between 100m2 and 1000m2": "between 101m2 and 1000m2",
}

_AREA_RE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*m2\s*$")


def magnitude_bin(value):
  """Index of the bin of a non-negative number: 0, (0, 10], (10, 100], (100, 1000], > 1000."""
  if value < 0 or math.isnan(value):
    raise ValueError(f"negative or NaN quantity {value}")
  if value == 0:
    return 0
  return 1 + sum(value > edge for edge in (10, 100, 1000))


def bin_count_lr(raw):
  """LR count answer (an integer, as int or string) -> one of LR_COUNT_BINS."""
  text = str(raw).strip()
  if not text.isdigit():
    raise ValueError(f"count answer {raw!r} is not a non-negative integer")
  return LR_COUNT_BINS[magnitude_bin(int(text))]


def parse_area(raw):
  """HR area answer "NNNm2" -> the number of square metres as a float."""
  match = _AREA_RE.match(str(raw))
  if not match:
    raise ValueError(f"area answer {raw!r} is not of the form NNNm2")
  return float(match.group(1))


def bin_area_hr(raw):
  """HR area answer "NNNm2" -> one of HR_AREA_BINS."""
  return HR_AREA_BINS[magnitude_bin(parse_area(raw))]


def normalise(dataset, qtype, raw):
  """The class label of a raw answer: binned for LR counts and HR areas, else stripped text.

  Raises ValueError for a count/area answer that is not a number (readers add the file name).
  """
  if dataset == "lr" and qtype == "count":
    return bin_count_lr(raw)
  if dataset == "hr" and qtype == "area":
    return bin_area_hr(raw)
  if dataset == "hr" and qtype == "count":
    text = str(raw).strip()
    if not text.isdigit():
      raise ValueError(f"count answer {raw!r} is not a non-negative integer")
    return str(int(text))
  return str(raw).strip()


class Encoded(NamedTuple):
  ids: np.ndarray  # int32, -1 for answers outside the vocabulary
  n_unknown: int


class AnswerVocab:
  """Answer string <-> class id, built from the training split's normalised answers."""

  def __init__(self, answers, dropped=None):
    self.answers = tuple(answers)
    self._index = {a: i for i, a in enumerate(self.answers)}
    if len(self._index) != len(self.answers):
      raise ValueError("duplicate answers in vocabulary")
    self.dropped = dict(dropped or {})

  @classmethod
  def build(cls, answers, max_size=None):
    """Most frequent first (ties alphabetical); beyond `max_size` answers go to `dropped`."""
    counts = collections.Counter(answers)
    ordered = sorted(counts, key=lambda a: (-counts[a], a))
    keep = ordered if max_size is None else ordered[:max_size]
    dropped = {a: counts[a] for a in ordered[len(keep):]}
    return cls(keep, dropped)

  @classmethod
  def for_dataset(cls, dataset, train_split=None):
    """The vocabulary of a records.Dataset: its train answers, top 1000 for RSVQAxBEN."""
    split = train_split if train_split is not None else dataset["train"]
    return cls.build(split.answer.tolist(), XBEN_TOP_K if dataset.name == "xben" else None)

  def __len__(self):
    return len(self.answers)

  def __contains__(self, answer):
    return answer in self._index

  @property
  def n_dropped_samples(self):
    return sum(self.dropped.values())

  def encode(self, answers):
    """Answers -> Encoded(int32 ids with -1 for unknown answers, number of unknowns)."""
    ids = np.fromiter((self._index.get(a, -1) for a in answers), dtype=np.int32)
    return Encoded(ids, int(np.sum(ids < 0)))

  def decode(self, ids):
    """Ids -> answer strings; -1 (or any id outside the vocabulary) -> UNKNOWN."""
    n = len(self.answers)
    return [self.answers[i] if 0 <= i < n else UNKNOWN for i in np.asarray(ids).tolist()]

  def save(self, path):
    with open(path, "w") as f:
      json.dump({"answers": list(self.answers), "dropped": self.dropped}, f, indent=1)

  @classmethod
  def load(cls, path):
    try:
      with open(path) as f:
        data = json.load(f)
    except FileNotFoundError:
      raise RSVQAError(f"{path}: answer vocabulary file missing") from None
    except json.JSONDecodeError as e:
      raise RSVQAError(f"{path}: malformed JSON at line {e.lineno} column {e.colno}: {e.msg}") from None
    if not isinstance(data, dict) or not isinstance(data.get("answers"), list):
      raise RSVQAError(f"{path}: expected an object with an 'answers' list")
    return cls(data["answers"], data.get("dropped", {}))

  def __eq__(self, other):
    return isinstance(other, AnswerVocab) and (self.answers, self.dropped) == (other.answers, other.dropped)

  def __repr__(self):
    return f"AnswerVocab({len(self)} answers, {len(self.dropped)} dropped)"
