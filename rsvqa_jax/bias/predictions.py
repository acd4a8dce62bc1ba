"""A model's answers as CSV files: written by our evaluators, read back to audit any model.

Format: a header row with (at least) the columns `question_id` and `prediction`, then one
row per question; extra columns are ignored. A file of K repeats (adversarial testing: K
substituted images per question) adds a `repeat` column numbered 0..K-1 and one row per
question and repeat; a file without it is one repeat.

Predictions go through the dataset's own answer normalisation (data/answers.py
`read_prediction`: LR counts and HR areas binned by question type, the original PyTorch code's
labels mapped, whitespace and case as the readers treat the files), so a model written in our
style, the original code's or with raw counts / areas scores the same. Predictions changed by it
are counted (`mapped`); predictions outside the training answer space are counted wrong and listed
(`outside`), never silently compared; so are predictions the normalisation refuses as answers of
their question's type (`foreign`: "1" / "0" to a yes / no question, "297" without m2 to an area
one), which HR's answer space (its counts) may hold. A question of the evaluated split with no row
counts as wrong and is reported (a split with no row at all is refused). A row naming a question in
none of the evaluated splits, a repeated question id (within a repeat), a missing column, a
non-integer id or repeat, repeats not numbered 0..K-1 and a file that is not UTF-8 CSV are errors,
as is what data/csv_columns.py refuses in any audit's CSV (a column named twice, a column named but
for case or spaces ('Question_ID ', 'Repeat'), a row with more values than the header, a value over
several lines). An optional `image_id` column (ours writes one) must name each question's image in
the dataset: the same question ids over other images are another dataset or version, refused; so is an
optional `type` column (ours writes one) giving a question another type than the dataset's. A
`repeat` or `substituted_image_id` column marks an adversarial file: refused as clean predictions.
An adversarial file must answer, in every repeat, the questions the clean file answers
(`check_same_questions`). An adversarial file without `substituted_image_id` is read with a
WARNING: which image each answer was given cannot be checked; so is one where it is every
question's own `image_id` (right only for the pixel kinds).
"""
import collections
import csv
import dataclasses
import logging

import numpy as np

from rsvqa_jax import storage
from rsvqa_jax.bias import tables
from rsvqa_jax.data import answers as answers_lib
from rsvqa_jax.data import csv_columns
from rsvqa_jax.errors import RSVQAError, short_repr

REQUIRED = ("question_id", "prediction")
REPEAT = "repeat"
IMAGE = "image_id"
TYPE = "type"
SUBSTITUTED = "substituted_image_id"
TOP = 5  # most common mapped / outside predictions listed
OTHER_FORM_SHARE = 0.9  # Aligned.other_form_types

_log = logging.getLogger(__name__)


def _per_repeat(values, shape):
  """[K, N] object array of one value per question ([N]) or per repeat and question ([K, N])."""
  out = np.empty(shape, dtype=object)
  out[:] = np.asarray(values, dtype=object)
  return out


def write(path, split, predicted, **extra):
  """Writes a model's answers on a records.Split as CSV.

  `predicted`: N answers, or K rows of N answers (K repeats: a `repeat` column 0..K-1 is
  added, rows repeat by repeat). Columns: question_id, [repeat,] image_id, the `extra` columns
  (name -> one value per question, or per repeat and question, e.g. substituted_image_id),
  type, prediction, answer.
  """
  predicted = np.asarray(predicted, dtype=object)
  repeats = predicted.ndim == 2
  shape = predicted.shape if repeats else (1, len(predicted))
  k, n = shape
  columns = [_per_repeat(split.question_id.tolist(), shape)]
  columns += [np.repeat(np.arange(k), n).reshape(shape)] if repeats else []
  columns += [_per_repeat(split.image_id.tolist(), shape)]
  columns += [_per_repeat(list(v), shape) for v in extra.values()]
  columns += [_per_repeat(split.qtype.tolist(), shape), _per_repeat(predicted, shape),
              _per_repeat(split.answer.tolist(), shape)]
  header = ["question_id", *([REPEAT] if repeats else []), "image_id", *extra, "type",
            "prediction", "answer"]
  with storage.replacing(path, newline="") as f:
    w = csv.writer(f)
    w.writerow(header)
    w.writerows(zip(*(c.reshape(-1).tolist() for c in columns)))


def _integer(path, line, name, value):
  try:
    out = csv_columns.integer(value)
  except ValueError:
    hint = " (the dataset's integer image id; drop the column if yours names images otherwise)"
    raise RSVQAError(f"{path}:{line}: {name} {short_repr(value)} is not an integer"
                     + (hint if name == IMAGE else "")) from None
  if name == REPEAT and out < 0:
    raise RSVQAError(f"{path}:{line}: repeat {out} is negative")
  return out


@dataclasses.dataclass(frozen=True)
class File:
  """A predictions file as read: its answers, the images it names and its columns."""

  by_repeat: list  # [{question id: prediction as written}] per repeat
  image_ids: dict  # question id -> image_id column (empty without the column)
  types: dict  # question id -> type column as written (empty without the column)
  columns: tuple
  swapped: int = None  # rows whose substituted_image_id is not their image_id (None: no columns)
  substituted: frozenset = frozenset()  # the substituted_image_id values


def read(path):
  """[{question id: prediction as written}] per repeat (one dict for a file without repeats)."""
  return read_file(path).by_repeat


def read_file(path):
  """File of `path`, every row checked (see the module docstring)."""
  columns, rows = csv_columns.read(path, REQUIRED, (REPEAT, IMAGE, SUBSTITUTED, TYPE),
                                   "predictions file")
  by_repeat, image_ids, types, swapped, seen = collections.defaultdict(dict), {}, {}, 0, set()
  substituted_ids = set()
  for line, row in rows:
    qid = _integer(path, line, "question_id", row["question_id"])
    repeat = 0 if row[REPEAT] is None else _integer(path, line, REPEAT, row[REPEAT])
    if (repeat, qid) in seen:
      raise RSVQAError(f"{path}:{line}: duplicate question_id {qid}"
                       + (f" in repeat {repeat}" if REPEAT in columns else
                          f" (K answers per question, as adversarial files give, need a {REPEAT} "
                          "column numbering them)"))
    seen.add((repeat, qid))
    image, substituted = (None if row[c] is None else _integer(path, line, c, row[c])
                          for c in (IMAGE, SUBSTITUTED))
    by_repeat[repeat][qid] = row["prediction"]
    if image is not None:
      image_ids[qid] = image
    if row[TYPE] is not None:
      types[qid] = row[TYPE]
    swapped += substituted != image
    if substituted is not None:
      substituted_ids.add(substituted)
  repeats = sorted(by_repeat)
  if repeats != list(range(len(repeats))):
    raise RSVQAError(f"{path}: repeats {_listed(repeats)} are not numbered 0..K-1")
  return File(by_repeat=[by_repeat[k] for k in repeats] or [{}], image_ids=image_ids,
              types=types, columns=columns, swapped=swapped if {IMAGE, SUBSTITUTED} <= set(columns) else None,
              substituted=frozenset(substituted_ids))


def _listed(values, limit=TOP):
  values = list(values)
  more = f", ... ({len(values)} in all)" if len(values) > limit else ""
  return ", ".join(map(str, values[:limit])) + more


@dataclasses.dataclass(frozen=True)
class Aligned:
  """Predictions laid out along one split, normalised as the split's answers are."""

  prediction: np.ndarray  # str [K, N]: normalised; None where the file has no row
  missing: int  # (repeat, question) cells of the split with no prediction
  mapped: collections.Counter  # (as written, normalised) -> cells changed by normalisation
  outside: collections.Counter  # normalised prediction outside the answer space -> cells
  space: frozenset | None  # the training answer space (None: not checked)
  # (question type, prediction) -> cells the normalisation refuses as an answer of that type
  foreign: collections.Counter = dataclasses.field(default_factory=collections.Counter)
  # cells of `outside` equal to their question's answer: one no training question has, which no
  # model of this answer space can give (counted wrong for every model alike)
  outside_right: int = 0
  answered: collections.Counter = dataclasses.field(default_factory=collections.Counter)  # type ->
  # cells with a prediction

  def other_form_types(self, share=OTHER_FORM_SHARE):
    """The question types `share` or more of whose predictions are not of the type's form: a
    file of another convention ("1" / "0" for yes / no), not a model's mistakes, which a trained
    model or our own evaluations make on a few questions of a type."""
    by_type = collections.Counter()
    for (t, _), n in self.foreign.items():
      by_type[t] += n
    return sorted(t for t, n in by_type.items() if n >= share * self.answered[t])

  @property
  def repeats(self):
    """K: the predictions per question (adversarial substitutions; 1 for a clean file)."""
    return int(self.prediction.shape[0])

  @property
  def n_mapped(self):
    """Predictions the answer normalisation changed to an answer of the space."""
    return sum(self.mapped.values())

  @property
  def n_foreign(self):
    """Predictions not of their question type's answer form (counted wrong): "1" to a presence
    question, "297" (no m2) to an area one; inside the answer space, nothing else shows them."""
    return sum(self.foreign.values())

  @property
  def n_outside(self):
    """Predictions outside the training answer space (counted wrong)."""
    return sum(self.outside.values())

  def correct(self, answers):
    """bool [K, N]: answered, inside the answer space and equal to the answer."""
    space = self.space
    return np.array([[p is not None and (space is None or p in space) and p == a
                      for p, a in zip(row, answers.tolist())] for row in self.prediction.tolist()],
                    dtype=bool).reshape(self.prediction.shape)

  def summary(self):
    """The counts a user must see: {n_mapped, n_outside_answer_space, ...}, JSON-ready."""
    return {"repeats": self.repeats, "n_missing": self.missing, "n_mapped": self.n_mapped,
            "mapped_top": [[raw, norm, n] for (raw, norm), n in self.mapped.most_common(TOP)],
            "n_not_of_type_form": self.n_foreign,
            "not_of_type_form_top": [[t, a, n] for (t, a), n in self.foreign.most_common(TOP)],
            "n_outside_answer_space": self.n_outside,
            "n_outside_answer_space_equal_to_answer": self.outside_right,
            "outside_answer_space_top": [[a, n] for a, n in self.outside.most_common(TOP)]}

  def describe(self, label):
    """One line: how many predictions were mapped, not of their question type's form (where
    any), outside the answer space, missing."""
    k, n = self.prediction.shape
    text = f"{label}: {k * n - self.missing} prediction(s) for {n} question(s)"
    text += f" x {k} repeats" if k > 1 else ""
    text += f", {self.n_mapped} mapped by the answer normalisation"
    if self.mapped:  # short_repr: a 5,000-character prediction stays a short line
      text += " (" + ", ".join(f"{short_repr(raw)} -> {short_repr(norm)} x{count}"
                               for (raw, norm), count in self.mapped.most_common(TOP)) + ")"
    if self.foreign:
      text += (f", {self.n_foreign} not of their question type's answer form, counted wrong ("
               + ", ".join(f"{short_repr(a)} to {t} x{count}"
                           for (t, a), count in self.foreign.most_common(TOP)) + ")")
    text += f", {self.n_outside} outside the training answer space, counted wrong"
    if self.outside:
      text += " (" + ", ".join(f"{short_repr(a)} x{count}"
                               for a, count in self.outside.most_common(TOP)) + ")"
    if self.outside_right:
      text += (f" ({self.outside_right} of them equal to the question's answer, which no training "
               "question has: no model of this answer space can give it)")
    return text + f", {self.missing} missing, counted wrong"


def normalised(raw, split, dataset, space=None):
  """Aligned of raw predictions [K, N] (None: no row) on `split`.

  `dataset`: the dataset name whose normalisation applies (data/answers.py; None: whitespace
  only); `space`: the training answers, or None to skip that check.
  """
  raw = _per_repeat(raw, np.shape(raw))
  raw = raw[None] if raw.ndim == 1 else raw
  qtypes, truths = split.qtype.tolist(), split.answer.tolist()
  memo = {}  # (type, prediction) -> (normalised, of the type's form): few distinct answers
  values = np.empty(raw.shape, dtype=object)
  mapped, outside, foreign = collections.Counter(), collections.Counter(), collections.Counter()
  answered = collections.Counter()
  outside_right = 0
  for k, row in enumerate(raw.tolist()):
    for i, (p, t, truth) in enumerate(zip(row, qtypes, truths)):
      if p is None:
        continue
      if (t, p) not in memo:
        memo[t, p] = (answers_lib.read_prediction(dataset, t, p) if dataset
                      else (str(p).strip(), True))
      v, read = memo[t, p]
      values[k, i] = v
      answered[t] += 1
      if not read:
        foreign[t, v] += 1
      if v != p:
        mapped[p, v] += 1
      if space is not None and v not in space:
        outside[v] += 1
        outside_right += v == truth
  missing = sum(v is None for v in values.reshape(-1).tolist())
  return Aligned(prediction=values, missing=missing, mapped=mapped, outside=outside,
                 space=None if space is None else frozenset(space), foreign=foreign,
                 answered=answered,
                 outside_right=outside_right)


def align(predictions, splits, path, dataset=None, space=None, others=None, image_ids=None):
  """Lay `predictions` (read's list of per-repeat dicts, or one dict) out along each split.

  `splits`: name -> records.Split; `dataset` / `space` as in `normalised`. Raises RSVQAError
  when a predicted question id is in none of the splits, naming the split of `others` (the
  dataset's other splits) that holds them, unless the file's `image_ids` (question id ->
  image_id column) put them over other images than that split does: another dataset's file.
  """
  predictions = [predictions] if isinstance(predictions, dict) else list(predictions)
  known = set()
  for split in splits.values():
    known.update(split.question_id.tolist())
  unknown = sorted(set().union(*predictions) - known)
  if unknown:
    raise RSVQAError(f"{path}: {len(unknown)} question id(s) not in split(s) {', '.join(splits)}, "
                     f"e.g. {unknown[:5]}" + _held_by(unknown, splits, others, image_ids or {}))
  out = {}
  for name, split in splits.items():
    qids = split.question_id.tolist()
    raw = [[by_id.get(q) for q in qids] for by_id in predictions]
    out[name] = normalised(_per_repeat(raw, (len(raw), len(qids))), split, dataset, space)
  return out


def check_same_questions(clean, adversarial, clean_path, adversarial_path):
  """RSVQAError unless each repeat of `adversarial` answers exactly the questions `clean`
  answers, split by split ({split: Aligned} of `load`).

  IO_AdTest compares one model on the same questions, clean and over swapped images: a question
  without an adversarial row counted wrong would read as a model that looks at the image (half
  a blind model's adversarial file gave it an IO_AdTest of 43%), and one without a clean row
  compares two sets of questions."""
  for name, adv in adversarial.items():
    if name not in clean:
      continue  # no clean accuracy on that split, so no IO_AdTest either
    answered = np.array([p is not None for p in clean[name].prediction[0].tolist()], bool)
    for k, row in enumerate(adv.prediction.tolist()):
      given = np.array([p is not None for p in row], bool)
      if (given == answered).all():
        continue
      lacking, extra = int((answered & ~given).sum()), int((given & ~answered).sum())
      where = f" (repeat {k})" if adv.repeats > 1 else ""
      raise RSVQAError(
          f"{adversarial_path}{where} on {name}: {lacking} question(s) answered in "
          f"{clean_path} without an adversarial answer and {extra} answered only here; IO_AdTest "
          "compares the model on the same questions, clean and over swapped images: give both "
          "files the same questions (every repeat too)")


def _held_by(unknown, splits, others, image_ids):
  """align's hint: the other split whose questions the unknown ids are, where the file's
  image_id column agrees with it; a split numbering them alike over other images is no hint."""
  holds, elsewhere = [], []
  for name, split in (others or {}).items():
    on = dict(zip(split.question_id.tolist(), split.image_id.tolist()))
    held = [q for q in unknown if q in on]
    if name in splits or not held:
      continue
    wrong = [q for q in held if q in image_ids and image_ids[q] != on[q]]
    (elsewhere if wrong else holds).append(name)
  if holds:
    return f"; they are questions of {', '.join(holds)}: analyze that split (--split {holds[0]})"
  if elsewhere:
    return (f"; split {elsewhere[0]} has questions of these ids, over other images than the "
            "file's image_id column: predictions of another dataset or version?")
  return ""


def check_shared_ids(question_ids, splits, path):
  """Refuses a file whose question ids are questions of two of `splits` (a dataset numbering each
  split's questions from 0): which of them it answers cannot be told, and scoring it on both
  would grade one split with answers given about other images."""
  seen = {}
  for name, split in splits.items():
    for qid in question_ids.intersection(split.question_id.tolist()):
      if qid in seen:
        raise RSVQAError(f"{path}: question {qid} is a question of both {seen[qid]} and {name} "
                         "(the dataset numbers their questions alike), so which one the file "
                         f"answers cannot be told: analyze one split alone (--split {seen[qid]}; "
                         f"split={seen[qid]!r} in Python)")
      seen[qid] = name


def _check_column(found, splits, path, column, ours, same, what, own_way):
  """Refuses a file whose optional `column` ({question id: value}, `found`) disagrees with
  `splits` (`ours`: the split's array to compare, `same`: whether two values agree): the same
  question ids over other images or questions are another dataset or version."""
  if not found:
    return
  wrong = [(qid, found[qid], value) for split in splits.values()
           for qid, value in zip(split.question_id.tolist(), ours(split).tolist())
           if qid in found and not same(found[qid], value)]
  if wrong:
    qid, theirs, value = wrong[0]
    raise RSVQAError(f"{path}: {len(wrong)} question(s) {what} than in the dataset (question "
                     f"{qid}: {column} {theirs!r} in the file, {value!r} in the dataset): "
                     f"predictions of another dataset or version? (if your file {own_way}, drop "
                     f"its {column} column)")


def check_images(image_ids, splits, path):
  """Refuses a file whose image_id column puts a question on another image than `splits` do."""
  _check_column(image_ids, splits, path, IMAGE, lambda s: s.image_id, lambda a, b: a == b,
                "on another image", "numbers images its own way")


# Names a type column may give a question of these keys besides the key and its table name: the
# paper calls RSVQAxBEN's presence questions Yes/No.
TYPE_ALIASES = {"presence": ("yes/no", "yes_no")}
# The layouts whose files give our own type keys: FloodNet's and RSIVQA's readers rename theirs
# (FloodNet's Yes_No is condition_yes_no here), so their files' names are not compared.
TYPED_LAYOUTS = (None, "lr", "hr", "xben")


def check_types(types, splits, path, dataset=None):
  """Refuses a file whose type column gives a question another type than `splits` do (the key,
  'rural_urban', or its displayed name, 'Rural/urban', in any case): LR and HR number questions
  and images alike, and their answers would be scored against these."""
  if dataset not in TYPED_LAYOUTS:
    return
  names = {}
  def same(theirs, qtype):
    if qtype not in names:
      names[qtype] = {qtype.lower(), tables.type_name(qtype).lower(), *TYPE_ALIASES.get(qtype, ())}
    return theirs.strip().lower() in names[qtype]
  _check_column(types, splits, path, TYPE, lambda s: s.qtype, same, "of another type",
                "names types its own way")


def load(path, splits, dataset=None, space=None, *, adversarial=False, chosen=True,
         others=None):
  """Read `path` and align it along `splits`, normalised for `dataset`, checked against `space`
  (`others`: the dataset's splits, named when the file answers questions of another).

  `adversarial`: the file answers questions over substituted images; without a
  substituted_image_id column that cannot be checked, which is a WARNING. A split none of whose
  questions has a row is refused (every answer would count wrong) when `chosen` (the user named
  the splits); when they are the defaults (HR: test and test_phili) it is left out of the result
  with an INFO line, as long as the file answers another (evaluate writes one split per file).
  """
  file = read_file(path)
  marks = [c for c in (REPEAT, SUBSTITUTED) if c in file.columns]
  if not adversarial and marks:  # K = 1 substitution reads like a clean file but for these
    raise RSVQAError(f"{path}: a '{marks[0]}' column: answers given over substituted images "
                     "(evaluate --adversarial writes it); --predictions takes the clean "
                     "predictions.csv, this file goes to --adversarial-predictions (from Python: "
                     "predictions= and adversarial_predictions=)")
  check_shared_ids(set().union(*file.by_repeat), splits, path)
  check_images(file.image_ids, splits, path)
  check_types(file.types, splits, path, dataset)
  if adversarial and SUBSTITUTED not in file.columns:
    _log.warning(f"{path}: no {SUBSTITUTED} column, so which image each answer was given cannot "
                 "be checked: IO_AdTest assumes the images were swapped")
  images = {i for split in (others or splits).values() for i in split.image_id.tolist()}
  strangers = sorted(file.substituted - images)
  if adversarial and strangers:
    _log.warning(f"{path}: {len(strangers)} {SUBSTITUTED} value(s) name no image of the dataset "
                 f"(e.g. {strangers[0]}): substitutions drawn from another dataset or version?")
  if adversarial and file.swapped == 0 and file.image_ids:
    _log.warning(f"{path}: every row's {SUBSTITUTED} is its own {IMAGE}: unless the images' "
                 "pixels were replaced (white, black, noise), IO_AdTest compares the model with "
                 "itself on clean images")
  out = align(file.by_repeat, splits, path, dataset, space, others, file.image_ids)
  unanswered = [name for name, a in out.items()
                if a.prediction.size and a.missing == a.prediction.size]
  answered = [name for name in out if name not in unanswered]
  if unanswered and answered and not chosen:
    _log.info(f"{path} answers no question of {', '.join(unanswered)}: scored on "
              f"{', '.join(answered)} only")
    return {name: out[name] for name in answered}
  if unanswered:
    raise RSVQAError(f"{path}: no prediction for any question of split(s) {', '.join(unanswered)}"
                     + (f"; it answers {', '.join(answered)}: analyze that alone (--split "
                        f"{answered[0]}; split={answered[0]!r} in Python)" if answered else ""))
  return out
