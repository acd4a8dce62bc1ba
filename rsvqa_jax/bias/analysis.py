"""The dataset analysis of Section 3.4 and the relative metrics of Section 4.

For every level of subsets (subsets.py) the most common answer of each subset is taken
from the fit split (the training split; the evaluated split itself for a dataset without
splits) and predicted for every sample of the evaluated split that falls in that subset.

Definitions (all accuracies are fractions; the tables print percentages):
  - Per subset: Prior_Acc_s (Eq. 2) with the most common fit-split answer of s itself, and
    Uni_Acc_s = 1/|A_s| (Eq. 3) with A_s the distinct fit-split answers of the question type
    s belongs to (of the whole fit split at the "all" level). Every level below "all" nests
    in the types, so Uni_Acc is one definition at every level: the chance of a guess that
    knows which kind of answer the question takes and nothing else. It does not count the
    answers of s itself, which would give a subset seen once in training (one answer) a
    Uni_Acc of 100%, above its own Prior_Acc; the paper, too, gives one Uni_Acc per type in
    Tables 3 and 4. (Its FloodNet "Question-level, overall" Uni_Acc, 33.76 against 32.91 at
    the type level, counts each question's own answers; here both read the type's value.)
  - Per level, per question type and over the whole split, the aggregate is weighted by
    samples: Prior_Acc is the accuracy over all those samples when each one is predicted
    by its own subset's prior; Uni_Acc is the mean over those samples of 1/|A_s| of their
    subset (the expected accuracy of guessing uniformly within one's subset). At the type
    level over the whole split this is the paper's "Overall" row.
  - A subset of the evaluated split that does not occur in the fit split is predicted by
    the level it nests in: the question type's prior (and a type missing from the fit split
    by the all-level prior and |A|). Such subsets and their samples are counted
    (`unseen_subsets`, `unseen_samples`) and shown in the tables.
  - Uni_Acc_s is the score of a uniform guess among A_s only when the evaluated answers are in
    A_s: samples whose answer is not (a type with a single training answer, HR counts unseen in
    training) are counted per type (`outside_answers`) and noted under every table.
  - A question type with no evaluated sample (present in the fit split only) gets NaN
    accuracies, reported as "n/a", and is left out of the Average row.
  - Average row: unweighted mean over the types with samples of Prior_Acc, Uni_Acc and the
    model accuracies (AA); IO_Prior / IO_AdTest are Equation 1 applied to these means.
    Overall row: sample-weighted type-level Prior_Acc and Uni_Acc, OA, and Equation 1 on
    them (as in the paper's Table 3).
  - Model accuracies over K repeats (an adversarial predictions file) are the means over the
    repeats of each repeat's accuracy, as `rsvqa-jax evaluate` reports them
    (metrics.accuracy_table), so AdTest_Acc equals its JSON's mean.
"""
import dataclasses
import logging
import math

import numpy as np

from rsvqa_jax.bias import metrics
from rsvqa_jax.bias import subsets
from rsvqa_jax.errors import RSVQAError

_log = logging.getLogger(__name__)

BASE_LEVELS = ("all", "type", "question")
SPLIT_ORDER = ("train", "val", "test", "test_phili", "all")


@dataclasses.dataclass(frozen=True)
class SubsetRow:
  """One subset of the evaluated split at one level."""

  key: tuple[str, ...]
  n: int  # evaluated samples
  n_fit: int  # samples in the fit split (0 when unseen)
  n_answers: int  # |A_s| of Uni_Acc: the distinct fit answers of the subset's question type
  prior: str  # answer predicted for the subset (the fallback's when unseen)
  prior_acc: float
  uni_acc: float
  seen: bool


@dataclasses.dataclass(frozen=True)
class Level:
  """Prior_Acc and Uni_Acc of one level of subsets."""

  name: str
  subsets: tuple[SubsetRow, ...]  # the subsets of the evaluated split, sorted by key
  prior_acc: float  # over the whole evaluated split, sample-weighted
  uni_acc: float
  type_prior_acc: dict  # qtype -> sample-weighted Prior_Acc within the type
  type_uni_acc: dict
  type_subsets: dict  # qtype -> number of evaluated subsets of that type
  unseen_subsets: int
  unseen_samples: int
  fit_priors: dict  # key -> metrics.SubsetPrior, every subset of the fit split


@dataclasses.dataclass(frozen=True)
class Scores:
  """A model's accuracy on the evaluated split."""

  per_type: dict  # qtype -> accuracy (mean over the file's repeats)
  overall: float  # OA
  average: float  # AA
  missing: int  # (repeat, sample) cells the predictions file had no row for
  repeats: int = 1
  mapped: int = 0  # predictions changed by the answer normalisation
  outside: int = 0  # predictions outside the training answer space (counted wrong)
  foreign: int = 0  # predictions not of their question type's answer form (counted wrong)


@dataclasses.dataclass(frozen=True)
class TypeRow:
  """One row of the question-type table (Tables 3 and 5)."""

  label: str  # "All", a qtype, "Average", "Overall", "Question-level, overall"
  n: int | None = None
  n_answers: int | None = None
  prior: str | None = None
  prior_acc: float = math.nan
  uni_acc: float = math.nan
  acc: float | None = None  # RSVQA_Acc; None where not applicable
  adv_acc: float | None = None  # AdTest_Acc; None where not applicable
  io_prior: float | None = None  # None with acc set means undefined (LB = 1)
  io_adtest: float | None = None


@dataclasses.dataclass(frozen=True)
class Analysis:
  """Everything the tables need about one evaluated split."""

  fit_split: str
  eval_split: str
  n_fit: int
  n_eval: int
  types: tuple[str, ...]  # sorted union of the fit and evaluated question types
  type_counts: dict  # qtype -> evaluated samples
  levels: dict  # level name -> Level
  unparsed: int | None  # evaluated samples matching no LR template; None if not parsed
  accuracy: Scores | None = None
  adversarial: Scores | None = None
  # qtype -> evaluated samples whose answer no fit sample of the type has (of all fit answers
  # for a type absent from the fit split): Uni_Acc's 1/|A_s| is no uniform guess's score there
  outside_answers: dict = dataclasses.field(default_factory=dict)

  def type_rows(self):
    """All / per type / Average / Overall / Question-level rows of Tables 3 and 5."""
    all_level, type_level = self.levels["all"], self.levels["type"]
    by_key = {row.key[0]: row for row in type_level.subsets}  # types with evaluated samples
    (everything,) = all_level.subsets
    rows = [TypeRow("All", n=everything.n, n_answers=everything.n_answers, prior=everything.prior,
                    prior_acc=everything.prior_acc, uni_acc=everything.uni_acc)]
    for t in self.types:
      sub = by_key.get(t)
      acc, adv = self._model_cells(lambda s: s.per_type[t])
      row = TypeRow(t, n=self.type_counts[t], prior_acc=type_level.type_prior_acc[t],
                    uni_acc=type_level.type_uni_acc[t], acc=acc, adv_acc=adv)
      if sub is not None:
        row = dataclasses.replace(row, n_answers=sub.n_answers, prior=sub.prior)
      else:
        fit_prior = type_level.fit_priors[(t,)]
        row = dataclasses.replace(row, n_answers=fit_prior.n_answers, prior=fit_prior.answer)
      rows.append(_with_io(row))
    with_samples = [t for t in self.types if self.type_counts[t]]
    mean = lambda d: float(np.mean([d[t] for t in with_samples])) if with_samples else math.nan
    acc, adv = self._model_cells(lambda s: s.average)
    rows.append(_with_io(TypeRow("Average", prior_acc=mean(type_level.type_prior_acc),
                                 uni_acc=mean(type_level.type_uni_acc), acc=acc, adv_acc=adv)))
    acc, adv = self._model_cells(lambda s: s.overall)
    rows.append(_with_io(TypeRow("Overall", n=self.n_eval, prior_acc=type_level.prior_acc,
                                 uni_acc=type_level.uni_acc, acc=acc, adv_acc=adv)))
    if "question" in self.levels:
      q = self.levels["question"]
      rows.append(TypeRow("Question-level, overall", n=self.n_eval, prior_acc=q.prior_acc, uni_acc=q.uni_acc))
    return rows

  def _model_cells(self, pick):
    return (None if self.accuracy is None else pick(self.accuracy),
            None if self.adversarial is None else pick(self.adversarial))


def _with_io(row):
  io_prior = None if row.acc is None else metrics.io_lower_bound(row.acc, row.prior_acc)
  io_adtest = None if row.acc is None or row.adv_acc is None else metrics.io_lower_bound(row.acc, row.adv_acc)
  return dataclasses.replace(row, io_prior=io_prior, io_adtest=io_adtest)


def _level(name, fit, evaluated, fit_keys, eval_keys, fallback, types, answer_sets=None):
  """One level; `answer_sets`: the LevelPrediction whose |A| Uni_Acc uses (None: its own)."""
  priors = metrics.fit_priors(fit_keys, fit.answer)
  pred = metrics.predict(priors, eval_keys, fallback)
  if answer_sets is not None:
    pred = dataclasses.replace(pred, n_answers=answer_sets.n_answers)
  correct = (pred.prediction == evaluated.answer).astype(np.float64)
  n_subsets = len(pred.subsets)
  n = np.bincount(pred.subset, minlength=n_subsets)
  hits = np.bincount(pred.subset, weights=correct, minlength=n_subsets)
  _, first = np.unique(pred.subset, return_index=True)  # a sample of each subset
  rows = []
  for code in sorted(range(n_subsets), key=lambda c: pred.subsets[c]):
    key, i = pred.subsets[code], first[code]
    prior = priors.get(key)
    rows.append(SubsetRow(key=key, n=int(n[code]), n_fit=prior.n_fit if prior else 0,
                          n_answers=int(pred.n_answers[i]), prior=pred.prediction[i],
                          prior_acc=float(hits[code] / n[code]), uni_acc=float(1.0 / pred.n_answers[i]),
                          seen=prior is not None))
  masks = {t: evaluated.qtype == t for t in types}
  return Level(
      name=name, subsets=tuple(rows),
      prior_acc=metrics.prior_accuracy(pred, evaluated.answer),
      uni_acc=metrics.uniform_accuracy(pred),
      type_prior_acc={t: metrics.prior_accuracy(pred, evaluated.answer, m) for t, m in masks.items()},
      type_uni_acc={t: metrics.uniform_accuracy(pred, m) for t, m in masks.items()},
      type_subsets={t: sum(r.key[0] == t for r in rows) for t in types} if name != "all" else {},
      unseen_subsets=sum(not r.seen for r in rows),
      unseen_samples=int((~pred.seen).sum()),
      fit_priors=priors), pred


def _scores(aligned, evaluated, types):
  table = metrics.accuracy_table(aligned.correct(evaluated.answer), evaluated.qtype, types)
  return Scores(per_type=table["per_type"], overall=table["oa"], average=table["aa"],
                missing=aligned.missing, repeats=table["repeats"], mapped=aligned.n_mapped,
                outside=aligned.n_outside, foreign=aligned.n_foreign)


def analyze(fit, evaluated, templates=False, predictions=None, adversarial=None):
  """Run the dataset analysis of `evaluated` with priors from `fit`.

  Args:
    fit: records.Split the most common answers are taken from (training split, or the
      evaluated split itself for a dataset without splits).
    evaluated: records.Split the priors are applied to.
    templates: also compute the LR objects & patterns levels.
    predictions: predictions.Aligned of a model on `evaluated` (adds RSVQA_Acc, IO_Prior).
    adversarial: predictions.Aligned of the same model under adversarial testing, one or K
      repeats (adds AdTest_Acc, IO_AdTest: means over the repeats).
  """
  for split in (fit, evaluated):
    if len(split) == 0:
      raise RSVQAError(f"split {split.name!r} has no sample to analyse")
  types = tuple(sorted(set(fit.qtype.tolist()) | set(evaluated.qtype.tolist())))
  names = BASE_LEVELS + (subsets.TEMPLATE_LEVELS if templates else ())
  parsed = None
  if templates:
    parsed = subsets.parse_questions(fit)
    parsed.update(subsets.parse_questions(evaluated))
  levels, preds = {}, {}
  for name in names:
    fallback = {"all": None, "type": "all"}.get(name, "type")
    levels[name], preds[name] = _level(
        name, fit, evaluated, subsets.keys(fit, name, parsed), subsets.keys(evaluated, name, parsed),
        preds[fallback] if fallback else None, types,
        answer_sets=preds["type"] if name not in ("all", "type") else None)
  return Analysis(
      fit_split=fit.name, eval_split=evaluated.name, n_fit=len(fit), n_eval=len(evaluated), types=types,
      type_counts={t: int((evaluated.qtype == t).sum()) for t in types}, levels=levels,
      unparsed=subsets.count_unparsed(evaluated, parsed) if templates else None,
      accuracy=None if predictions is None else _scores(predictions, evaluated, types),
      adversarial=None if adversarial is None else _scores(adversarial, evaluated, types),
      outside_answers=_outside_answers(fit, evaluated, types))


def _outside_answers(fit, evaluated, types):
  """{qtype: evaluated samples whose answer is none of the fit answers of their type}, the types
  with such samples only."""
  out = {}
  for t in types:
    # A set, not np.isin: on string arrays isin took 95 s over RSVQAxBEN's 385,000 answers.
    known = set((fit.answer[fit.qtype == t] if (fit.qtype == t).any() else fit.answer).tolist())
    outside = sum(a not in known for a in evaluated.answer[evaluated.qtype == t].tolist())
    if outside:
      out[t] = outside
  return out


def default_splits(dataset):
  """(fit split name, evaluated split names) for a records.Dataset.

  The fit split is "train" when present, else the dataset's only split. The evaluated
  splits are those whose name starts with "test" (HR: test and test_phili), or the fit
  split itself when there is none (FloodNet: train only; RSIVQA: the whole set).
  """
  names = sorted(dataset.splits)
  if "train" in dataset.splits:
    fit = "train"
  elif len(names) == 1:
    fit = names[0]
  else:
    raise RSVQAError(f"{dataset.root}: dataset {dataset.name} has no 'train' split among {names}")
  tests = [n for n in names if n.startswith("test")]
  return fit, tests or [fit]


def analysed_splits(dataset, given=(), where=None):
  """(fit split name, evaluated split names) of an analysis of records.Dataset `dataset`.

  `given`: the splits asked for (each must exist and hold a question); none: default_splits'
  evaluated splits, less those holding no question, named in a WARNING (`synth --hr --balanced`
  may leave test_phili empty, and says the other splits work). `where`: the folder as the user
  gave it, for the messages.
  """
  where = where or dataset.root
  fit, defaults = default_splits(dataset)
  for name in given:
    if name not in dataset.splits:
      raise RSVQAError(f"{where}: no split {name!r} (has {', '.join(sorted(dataset.splits))})")
  empty = lambda name: len(dataset[name]) == 0
  names = list(dict.fromkeys(given)) or [n for n in defaults if not empty(n)] or defaults[:1]
  for name in dict.fromkeys((fit, *names)):
    if empty(name):
      raise RSVQAError(f"{where}: split {name!r} holds no question to analyse (its "
                       f"{dataset.name} files hold none, or none active)")
  left = [n for n in defaults if not given and empty(n)]
  if left:
    _log.warning(f"{where}: split {', '.join(left)} holds no question and is left out of the "
                 f"analysis of {', '.join(names)}")
  return fit, names


def ordered_splits(dataset):
  """{name: Split} of a records.Dataset in the usual order (train, val, test, ...), then by name."""
  rank = lambda s: (SPLIT_ORDER.index(s) if s in SPLIT_ORDER else len(SPLIT_ORDER), s)
  return {s: dataset[s] for s in sorted(dataset.splits, key=rank)}
