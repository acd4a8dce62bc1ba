"""A model's answers as CSV files: written by our evaluators, read back to audit any model.

Format: a header row with (at least) the columns `question_id` and `prediction`, then one
row per question; extra columns are ignored. Predictions are compared as strings with the
dataset's normalised answers (the `answer` column of records.Split: LR counts binned, HR
areas binned), after stripping surrounding whitespace. A question of the evaluated split
with no row counts as wrong and is reported; a row naming a question that is not in the
evaluated split(s), a repeated question id, a missing column or a non-integer id is an error.
"""
import csv
import dataclasses

import numpy as np

from rsvqa_jax.errors import RSVQAError

REQUIRED = ("question_id", "prediction")


def write(path, split, predicted, **extra):
  """Writes a model's answers on a records.Split as CSV.

  Columns: question_id, image_id, the `extra` columns (name -> one value per question, e.g.
  substituted_image_id), type, prediction, answer.
  """
  names = list(extra)
  with open(path, "w", newline="", encoding="utf-8") as f:
    w = csv.writer(f)
    w.writerow(["question_id", "image_id", *names, "type", "prediction", "answer"])
    columns = [split.question_id.tolist(), split.image_id.tolist(),
               *(list(extra[n]) for n in names), split.qtype.tolist(), list(predicted),
               split.answer.tolist()]
    w.writerows(zip(*columns))


def read(path):
  """question id -> predicted answer, checked for format and duplicates."""
  try:
    f = open(path, newline="", encoding="utf-8-sig")
  except OSError as e:
    raise RSVQAError(f"{path}: cannot read predictions file ({e.strerror})") from e
  with f:
    reader = csv.DictReader(f)
    missing = [c for c in REQUIRED if c not in (reader.fieldnames or ())]
    if missing:
      raise RSVQAError(f"{path}: missing column(s) {', '.join(missing)} (header: {reader.fieldnames})")
    out = {}
    for row in reader:
      line = reader.line_num
      try:
        qid = int(row["question_id"])
      except (TypeError, ValueError):
        raise RSVQAError(f"{path}:{line}: question_id {row['question_id']!r} is not an integer") from None
      if qid in out:
        raise RSVQAError(f"{path}:{line}: duplicate question_id {qid}")
      if row["prediction"] is None:
        raise RSVQAError(f"{path}:{line}: row has no prediction value")
      out[qid] = row["prediction"].strip()
  return out


@dataclasses.dataclass(frozen=True)
class Aligned:
  """Predictions laid out along one split."""

  prediction: np.ndarray  # str per sample; None where the file has no row
  missing: int  # samples of the split with no prediction

  def correct(self, answers):
    return np.array([p is not None and p == a for p, a in zip(self.prediction.tolist(), answers.tolist())],
                    dtype=bool)


def align(predictions, splits, path):
  """Lay `predictions` out along each split of `splits` (name -> Split).

  Raises RSVQAError when a predicted question id is in none of the splits.
  """
  known = set()
  for split in splits.values():
    known.update(split.question_id.tolist())
  unknown = sorted(set(predictions) - known)
  if unknown:
    raise RSVQAError(f"{path}: {len(unknown)} question id(s) not in split(s) {', '.join(splits)}, "
                     f"e.g. {unknown[:5]}")
  out = {}
  for name, split in splits.items():
    values = np.empty(len(split), dtype=object)
    values[:] = [predictions.get(q) for q in split.question_id.tolist()]
    out[name] = Aligned(prediction=values, missing=int(sum(v is None for v in values.tolist())))
  return out


def load(path, splits):
  """Read `path` and align it along `splits`."""
  return align(read(path), splits, path)
