"""The in-memory columnar form every reader produces and every consumer reads.

One `Split` holds parallel NumPy columns, one row per (image, question, answer) sample.
A `Dataset` is the splits of one dataset folder plus what is needed to find its images.
Answers are stored twice: `raw_answer` as written in the files, `answer` after the dataset's
normalisation (LR count binning, HR area binning), which is what vocabularies are built on.
"""
import dataclasses
import hashlib
import os
from typing import Callable, Mapping

import numpy as np

from rsvqa_jax.errors import RSVQAError

COLUMNS = ("question_id", "image_id", "qtype", "question", "answer", "raw_answer")
MAX_ID = 2**63 - 1  # the id columns are int64


def is_id(value):
  """Whether a parsed JSON value is usable as a question/image/answer id.

  Only a JSON integer that fits the int64 columns: a float (3.0, 3.5), a boolean or a string
  would be cast or compared loosely (3.0 == 3, True == 1) and merge distinct entries.
  """
  return type(value) is int and 0 <= value <= MAX_ID


def id_problem(value, expected):
  """What is wrong with a value is_id refuses: `expected` (what an id is), or for a whole number
  past int64 that it is out of range (it is an integer, just too large to hold)."""
  if type(value) is int and value > MAX_ID:
    return "out of range: ids are whole numbers from 0 to 2**63-1"
  return expected


@dataclasses.dataclass(frozen=True)
class Split:
  """One split as columns. String columns are NumPy object arrays of `str`."""

  name: str
  question_id: np.ndarray  # int64
  image_id: np.ndarray  # int64
  qtype: np.ndarray  # str: presence, comp, count, rural_urban, area, ...
  question: np.ndarray  # str
  answer: np.ndarray  # str, normalised (binned) answer
  raw_answer: np.ndarray  # str, as in the files

  def __post_init__(self):
    n = len(self.question_id)
    for col in COLUMNS:
      if len(getattr(self, col)) != n:
        raise ValueError(f"split {self.name}: column {col} has {len(getattr(self, col))} rows, expected {n}")

  def __len__(self):
    return len(self.question_id)

  @property
  def qtypes(self):
    """Question types present, in first-seen order."""
    return list(dict.fromkeys(self.qtype.tolist()))

  def fingerprint(self, by_id=False):
    """sha256 of the rows (ids, type, question, answer; in order, or in question-id order when
    `by_id`, whichever order files list them): equal for the same data."""
    rows = self.select(np.argsort(self.question_id, kind="stable")) if by_id else self
    h = hashlib.sha256()
    for ids in (rows.question_id, rows.image_id):
      h.update(np.ascontiguousarray(ids, np.int64).tobytes())
    for column in (rows.qtype, rows.question, rows.answer):
      h.update("\x1f".join(map(str, column.tolist())).encode("utf-8", "surrogatepass") + b"\x1e")
    return h.hexdigest()

  def select(self, mask_or_index):
    """A new Split with the rows picked by a boolean mask or an index array."""
    return dataclasses.replace(self, **{c: getattr(self, c)[mask_or_index] for c in COLUMNS})

  @classmethod
  def from_rows(cls, name, rows):
    """Build from an iterable of dicts with the keys in COLUMNS."""
    rows = list(rows)
    cols = {}
    for col in COLUMNS:
      values = [r[col] for r in rows]
      if col in ("question_id", "image_id"):
        cols[col] = np.asarray(values, dtype=np.int64)
      else:
        arr = np.empty(len(values), dtype=object)
        arr[:] = values
        cols[col] = arr
    return cls(name=name, **cols)


@dataclasses.dataclass(frozen=True)
class Dataset:
  """The splits of one dataset folder.

  Attributes:
    name: "lr", "hr", "xben", "floodnet", "rsivqa", ...
    root: the folder it was read from.
    splits: split name -> Split ("train", "val", "test", and "test_phili" for HR).
    image_path: image id -> path of its image file (None for datasets read without images).
    image_size: (height, width) every image must have, or None if it varies.
  """

  name: str
  root: str
  splits: Mapping[str, Split]
  image_path: Callable[[int], str] | None = None
  image_size: tuple[int, int] | None = None

  def __getitem__(self, split):
    if split not in self.splits:
      raise KeyError(f"dataset {self.name} at {self.root} has no split {split!r} (has {sorted(self.splits)})")
    return self.splits[split]

  def image_ids(self, split):
    """Distinct image ids of a split, sorted."""
    return np.unique(self[split].image_id)

  def check_image_exists(self, image_id):
    path = self.image_path(image_id)
    if not os.path.exists(path):
      # Imported here: records stays free of the image libraries until an image is missing.
      from rsvqa_jax.data import images  # pylint: disable=g-import-not-at-top
      misplaced = images.misplaced(path)  # unzipped one folder deeper, another letter case
      if misplaced:
        raise RSVQAError(misplaced)
      folder = os.path.dirname(path)
      if not os.path.isdir(folder):  # no image of the dataset at all: say why it may have none
        synthetic = (" (`rsvqa-jax synth --variant xben` writes question sets with no images: "
                     "analyze, validate --skip-images and shortcuts read them)"
                     if self.name == "xben" else "")
        raise RSVQAError(f"{folder}: image folder missing; the images of dataset {self.root} "
                         f"are read there{synthetic}")
      raise RSVQAError(f"{path}: image file missing (image id {image_id})")
    return path
