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
- One normalisation for answers and predictions. `normalise` also accepts an answer already binned
  (our labels or the original code's, `ORIGINAL_LABELS`), so a model's predictions, in our style,
  the original code's or as raw counts / areas, go through the very function the readers apply to
  the files (`read_prediction`, which also says whether it was read as an answer of its
  question's type, which the audit counts). Text is composed to Unicode NFC and whitespace
  stripped, and case folded for
  FloodNet, as its reader does, and for the LR / HR types whose answers are a closed set (yes /
  no, rural / urban: `CLOSED_ANSWERS`), where any other answer is an error too ("12" to a presence
  question is no class of its own), as it is for FloodNet's Yes_No questions. Counts are binned by
  their digits, so an answer of 10^400 falls in the top bin instead of overflowing a float.
  FloodNet's counting answers are counts as HR's are (leading zeros dropped, anything but a whole
  number >= 0 an error: "03" and "3" were two answers, -3 one of its own); RSIVQA's count answers
  drop leading zeros when they are digits and stay text otherwise (its files are plain text,
  unchecked).
- Vocabulary order. The original orders answers by training frequency with ties left in
  dictionary order; here ties are broken alphabetically so ids are reproducible.
- RSVQAxBEN. The 1,000 most frequent training answers are kept, as in the original; the
  training samples whose answer falls outside are reported (`AnswerVocab.dropped`) and encode
  to -1, so training skips them and evaluation counts them as wrong instead of crashing.
"""
import collections
import decimal
import json
import math
import re
import unicodedata
from typing import NamedTuple

import numpy as np

from rsvqa_jax import storage
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

# The question types (as the readers name them) whose answers are counts: whole numbers >= 0.
COUNT_TYPES = {"hr": ("count",), "floodnet": ("simple_counting", "complex_counting")}

# Question types whose answer set is closed, per dataset: another answer is an error, as a
# count answer that is not a number is, instead of becoming a class of its own; case is folded.
_RSVQA_CLOSED = {"presence": ("yes", "no"), "comp": ("yes", "no"),
                 "rural_urban": ("rural", "urban")}
CLOSED_ANSWERS = {"lr": _RSVQA_CLOSED, "hr": _RSVQA_CLOSED,
                  "floodnet": {"condition_yes_no": ("yes", "no")}}

_AREA_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*m2\s*$")  # ASCII digits, as counts


def magnitude_bin(value):
  """Index of the bin of a non-negative number: 0, (0, 10], (10, 100], (100, 1000], > 1000."""
  if value != value or value < 0:  # NaN test that also holds for ints too large for a float
    raise ValueError(f"negative or NaN quantity {value}")
  if value == 0:
    return 0
  return 1 + sum(value > edge for edge in (10, 100, 1000))


def _shown(raw, limit=40):
  """repr of a raw answer, cut so that an error about it stays one short line."""
  text = repr(raw)
  return text if len(text) <= limit else f"{text[:limit]}... ({len(str(raw))} characters)"


# "more than 1000 m2": a bin label spaced as a single area may be ("5 m2")
_SPACED_M2 = re.compile(r"\s+m2\b")
_INTEGRAL_FLOAT = re.compile(r"[0-9]+\.0*")
_EXPONENT_FLOAT = re.compile(r"[0-9]+(?:\.[0-9]*)?[eE][+-]?[0-9]{1,4}")


def count_digits(raw):
  """The digits of a non-negative integer answer without leading zeros ("0" for zero).

  Kept as text: int() refuses more than 4300 digits and a float overflows past 10^308.
  """
  text = str(raw).strip()
  if not (text.isascii() and text.isdigit()):
    raise ValueError(f"count answer {_shown(raw)} is not a non-negative integer")
  return text.lstrip("0") or "0"


def bin_count_lr(raw):
  """LR count answer (an integer, as int or string) -> one of LR_COUNT_BINS."""
  digits = count_digits(raw)
  return LR_COUNT_BINS[magnitude_bin(int(digits) if len(digits) <= 5 else math.inf)]


def parse_area(raw):
  """HR area answer "NNNm2" -> the number of square metres as a float (inf beyond 10^308)."""
  match = _AREA_RE.match(str(raw))
  if not match:
    raise ValueError(f"area answer {_shown(raw)} is not of the form NNNm2")
  return float(match.group(1))


def bin_area_hr(raw):
  """HR area answer "NNNm2" -> one of HR_AREA_BINS."""
  return HR_AREA_BINS[magnitude_bin(parse_area(raw))]


def _surface(dataset, raw):
  """Unicode composed (NFC: an accent typed as its own code point is the same answer),
  whitespace stripped, case folded for FloodNet (as its reader does), original labels mapped."""
  text = unicodedata.normalize("NFC", str(raw)).strip()
  if dataset == "floodnet":
    return text.lower()
  return ORIGINAL_LABELS.get(text, text) if dataset in ("lr", "hr") else text


def normalise(dataset, qtype, raw):
  """The class label of a raw answer: binned for LR counts and HR areas, else stripped text.

  An answer already binned (ours or `ORIGINAL_LABELS`) keeps its bin. Raises ValueError for a
  count/area answer that is not a number, or a closed type's answer outside its set (readers
  add the file name).
  """
  text = _surface(dataset, raw)
  if dataset == "lr" and qtype == "count":
    return text if text in LR_COUNT_BINS else bin_count_lr(text)
  if dataset == "hr" and qtype == "area":
    return text if text in HR_AREA_BINS else bin_area_hr(text)
  if qtype.lower() in COUNT_TYPES.get(dataset, ()):
    return count_digits(text)
  if dataset == "rsivqa" and qtype == "count" and text.isascii() and text.isdigit():
    return count_digits(text)
  closed = CLOSED_ANSWERS.get(dataset, {}).get(qtype)
  if closed:
    if text.lower() not in closed:
      raise ValueError(f"{qtype} answer {_shown(raw)} is not one of {', '.join(closed)}")
    return text.lower()
  return text


def read_prediction(dataset, qtype, raw):
  """(A model's answer in the dataset's answer form, whether `normalise` read it as an answer of
  its question's type).

  The label is `normalise`'s, or the surface text where that refuses it (a prediction of the
  wrong form is a wrong answer, not a broken file): False for what the readers would refuse in
  the dataset's own files (a presence answer "1", an LR count "three", an HR area "297" without
  m2), a wrong answer the audit counts. Where `normalise` refuses it, the spellings a model's
  tooling writes are read too: a count written as an integral float ("3.0": pandas writes an int
  column holding a NaN so; "4.000000e+00" or "1e3" with a float format), and a bin label in
  another case ("Between 1 And 10") or spaced as a single area is ("more than 1000 m2"). A
  thousands separator ("1,000") stays refused: a decimal comma in other locales."""
  for text in (raw, *_prediction_spellings(raw)):
    try:
      return normalise(dataset, qtype, text), True
    except ValueError:
      continue
  return _surface(dataset, raw), False


def _prediction_spellings(raw):
  text = str(raw).strip()
  yield text.lower()
  yield _SPACED_M2.sub("m2", text.lower())
  if _INTEGRAL_FLOAT.fullmatch(text):
    yield text.split(".")[0]
  elif _EXPONENT_FLOAT.fullmatch(text):
    value = decimal.Decimal(text)
    # Below 10^19: a longer count is no answer of any dataset, and 1e999999 no int to build.
    if value.adjusted() < 19 and value == value.to_integral_value():
      yield str(int(value))



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
    storage.write_json(path, {"answers": list(self.answers), "dropped": self.dropped})

  @classmethod
  def load(cls, path):
    try:
      with open(path, encoding="utf-8") as f:
        data = json.load(f)
    except FileNotFoundError:
      raise RSVQAError(f"{path}: answer vocabulary file missing") from None
    except json.JSONDecodeError as e:
      raise RSVQAError(f"{path}: malformed JSON at line {e.lineno} column {e.colno}: {e.msg}") from None
    except (OSError, UnicodeDecodeError, RecursionError) as e:
      raise RSVQAError(f"{path}: unreadable answer vocabulary ({type(e).__name__})") from None
    if not isinstance(data, dict) or not isinstance(data.get("answers"), list):
      raise RSVQAError(f"{path}: expected an object with an 'answers' list")
    answers, dropped = data["answers"], data.get("dropped", {})
    if not all(isinstance(a, str) for a in answers) or len(set(answers)) != len(answers):
      raise RSVQAError(f"{path}: 'answers' must be distinct strings")
    if not isinstance(dropped, dict):
      raise RSVQAError(f"{path}: 'dropped' must be an object (answer -> count)")
    return cls(answers, dropped)

  def __eq__(self, other):
    return isinstance(other, AnswerVocab) and (self.answers, self.dropped) == (other.answers, other.dropped)

  def __repr__(self):
    return f"AnswerVocab({len(self)} answers, {len(self.dropped)} dropped)"
