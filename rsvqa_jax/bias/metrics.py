"""Accuracy metrics and the paper's relative metric (Section 4, Equation 1).

Accuracies are fractions in [0, 1]; an empty set of samples has accuracy NaN (reported as
"n/a"), never an error.

  OA           correct / all samples.
  AA           unweighted mean of the per-question-type accuracies (types with no sample
               are left out of the mean).
  over K repeats (adversarial substitutions) each accuracy is computed per repeat, then
               reported as mean and population std over the repeats (accuracy_table).
  Prior_Acc_s  share of subset s whose answer equals the most common answer of s in the
               fit (training) split; among tied answers the lexicographically smallest
               wins, so the result does not depend on the order of the files.
  Uni_Acc_s    1 / |A_s|, A_s the distinct fit-split answers of the question type of s
               (every subset below the whole split nests in one type; at the whole split,
               all its answers): the chance of guessing uniformly among the answers a
               question of that type can take, as far as a model trained on that split can
               know them. Not the answers of s itself: a small subset seen with one answer
               would read 100%, above its own Prior_Acc (bias/analysis.py applies it).
  IO           (Acc - LB) / (1 - LB); LB = 1 leaves nothing to improve on and is undefined
               (None); a negative IO (a model below its lower bound) is returned as is.
"""
import collections
import dataclasses
import math

import numpy as np

from rsvqa_jax.errors import short_repr


def booleans(correct, name="correct"):
  """`correct` as a bool array: booleans, or numbers that are all 0 or 1. Anything else (answer
  strings, probabilities) is refused: cast to bool it would read as right in silence."""
  array = np.asarray(correct)
  if array.dtype == bool:
    return array
  if array.size and (not np.issubdtype(array.dtype, np.number)
                     or not np.isin(array, (0, 1)).all()):
    raise ValueError(f"{name}: expected booleans (whether each answer was right), got "
                     f"{array.dtype} values such as {short_repr(array.ravel()[0].item())}")
  return array.astype(bool)


def accuracy(correct):
  """Mean of a boolean array; NaN when it is empty."""
  correct = booleans(correct)
  return float(correct.mean()) if correct.size else math.nan


def average_accuracy(per_type):
  """AA: unweighted mean over the types that have samples; NaN if none has."""
  values = [v for v in per_type.values() if not math.isnan(v)]
  return float(np.mean(values)) if values else math.nan


def accuracy_table(correct, qtype, types):
  """The accuracy table of a split, for K repeats of predictions (K = 1: a clean evaluation).

  Every evaluator writes this one table: training validation, evaluation, adversarial testing
  (K substitutions per question) and the analysis of prediction files.

  Args:
    correct: bool [K, N] (or [N] for K = 1): whether repeat k answered question n right.
    qtype: [N] question type of each question.
    types: the question types to report, in order (a type without questions gets NaN and is
      left out of AA).

  Returns:
    {"oa", "aa", "per_type": {t}}: means over the repeats; "n" and "per_type_n" {t}: question
    counts; "repeats": K; "std": {"oa", "aa", "per_type"}: population std over the repeats;
    "per_repeat": {"oa": [K], "aa": [K], "per_type": {t: [K]}}.
  """
  correct = booleans(correct)
  correct = correct[None] if correct.ndim == 1 else correct
  qtype = np.asarray(qtype)
  if isinstance(types, str):
    raise ValueError(f"accuracy_table: types={types!r}; expected a list of question types")
  if correct.ndim != 2 or qtype.shape != correct.shape[1:]:
    raise ValueError(f"accuracy_table: correct of shape {list(correct.shape)} ([K, N] or [N]) "
                     f"and qtype of shape {list(qtype.shape)} ([N]) do not agree")
  per_type = {t: [accuracy(row[qtype == t]) for row in correct] for t in types}
  aa = [average_accuracy({t: per_type[t][k] for t in types}) for k in range(len(correct))]
  oa = [accuracy(row) for row in correct]
  stat = lambda values, f: float(f(values)) if values and not math.isnan(values[0]) else math.nan
  mean = lambda values: stat(values, np.mean)
  std = lambda values: stat(values, np.std)
  return {
      "oa": mean(oa), "aa": mean(aa), "per_type": {t: mean(v) for t, v in per_type.items()},
      "n": int(correct.shape[1]), "per_type_n": {t: int((qtype == t).sum()) for t in types},
      "repeats": int(len(correct)),
      "std": {"oa": std(oa), "aa": std(aa), "per_type": {t: std(v) for t, v in per_type.items()}},
      "per_repeat": {"oa": oa, "aa": aa, "per_type": per_type},
  }


# The keys of our result files (accuracy tables, shortcuts.json) whose values are accuracies,
# alone or nested: null there is a NaN the file could not hold (storage.json_safe). Elsewhere a
# null keeps its own meaning ("no pool", "no step chosen").
NUMBER_KEYS = frozenset({"oa", "aa", "per_type", "std", "per_repeat", "prior_acc", "gap_oa",
                         "mean_ood_oa", "mean_gap_oa", "iid_test", "ood", "mean_ood"})


def from_json(value, numbers=False):
  """A result file as read back: None -> NaN under NUMBER_KEYS (`numbers`: `value` is one)."""
  if isinstance(value, dict):
    return {k: from_json(v, numbers or k in NUMBER_KEYS) for k, v in value.items()}
  if isinstance(value, list):
    return [from_json(v, numbers) for v in value]
  return math.nan if numbers and value is None else value


def io_lower_bound(acc, lower_bound):
  """Equation 1. None when lower_bound == 1 (undefined); NaN when an input is NaN; a value
  outside [0, 1] (a percentage) is refused."""
  for value, name in ((acc, "acc"), (lower_bound, "lower_bound")):
    if not isinstance(value, (int, float, np.floating, np.integer)) or value < 0 or value > 1:
      if not (isinstance(value, (float, np.floating)) and math.isnan(value)):
        raise ValueError(f"io_lower_bound: {name}={value!r}; accuracies are fractions in [0, 1]")
  if math.isnan(acc) or math.isnan(lower_bound):
    return math.nan
  if lower_bound >= 1.0 - 1e-12:
    return None
  return (acc - lower_bound) / (1.0 - lower_bound)


@dataclasses.dataclass(frozen=True)
class SubsetPrior:
  """What the fit split says about one subset."""

  answer: str  # most common answer, ties -> lexicographically smallest
  n_fit: int  # samples of the subset in the fit split
  n_answers: int  # |A_s|: distinct answers of the subset in the fit split
  tied_with: tuple = ()  # the other answers as common as `answer` (sorted): the tie it broke


def factorize(values):
  """(int64 codes, distinct values in first-seen order) of a sequence of hashables."""
  index = dict.fromkeys(values)
  for code, value in enumerate(index):
    index[value] = code
  codes = np.fromiter(map(index.__getitem__, values), dtype=np.int64, count=len(values))
  return codes, list(index)


def fit_priors(keys, answers):
  """subset key -> SubsetPrior, from parallel arrays of keys and answers."""
  key_codes, key_list = factorize(np.asarray(keys).tolist())
  answer_codes, answer_list = factorize(np.asarray(answers).tolist())
  if not key_list:
    return {}
  ranked = sorted(answer_list)  # rank order = lexicographic order, for the tie break
  position = {a: i for i, a in enumerate(ranked)}
  rank = np.array([position[a] for a in answer_list], dtype=np.int64)
  n_ranks = len(ranked)
  pairs, counts = np.unique(key_codes * n_ranks + rank[answer_codes], return_counts=True)
  key_of, rank_of = pairs // n_ranks, pairs % n_ranks
  order = np.lexsort((rank_of, -counts, key_of))  # per key: most frequent first, then smallest answer
  best = order[np.r_[0, np.flatnonzero(np.diff(key_of[order])) + 1]]
  n_fit = np.bincount(key_codes, minlength=len(key_list))
  n_answers = np.bincount(key_of, minlength=len(key_list))
  top = np.zeros(len(key_list), np.int64)
  top[key_of[best]] = counts[best]
  tied = collections.defaultdict(list)  # key code -> answers as common as its top one
  for pair in np.flatnonzero(counts == top[key_of]).tolist():
    tied[int(key_of[pair])].append(ranked[rank_of[pair]])
  return {key: SubsetPrior(answer=ranked[rank_of[b]], n_fit=int(n_fit[i]),
                           n_answers=int(n_answers[i]),
                           tied_with=tuple(sorted(tied[i]))[1:])
          for i, (key, b) in enumerate(zip(key_list, best))}


@dataclasses.dataclass(frozen=True)
class LevelPrediction:
  """Per-sample outcome of predicting each sample by its own subset's prior."""

  prediction: np.ndarray  # str: the answer predicted for the sample
  n_answers: np.ndarray  # int: |A| of the subset whose prior was used (analysis.py replaces
                         # it by the type's below the type level: the Uni_Acc definition)
  seen: np.ndarray  # bool: the sample's own subset occurs in the fit split
  subset: np.ndarray  # int: code of the sample's subset, an index into `subsets`
  subsets: list  # subset keys of the predicted samples, in first-seen order


def predict(priors, keys, fallback=None):
  """Predict each sample by the prior of its subset.

  A subset absent from the fit split takes, sample by sample, the prediction and |A| of
  `fallback` (the coarser level it nests in, e.g. its question type).
  """
  codes, key_list = factorize(keys.tolist())
  found = [priors.get(k) for k in key_list]
  by_code = np.empty(len(key_list), dtype=object)
  by_code[:] = [p.answer if p else None for p in found]
  seen = np.array([p is not None for p in found], dtype=bool)[codes]
  prediction = by_code[codes]
  n_answers = np.array([p.n_answers if p else 0 for p in found], dtype=np.int64)[codes]
  if not seen.all():
    if fallback is None:
      raise ValueError(f"subset {key_list[codes[~seen][0]]} is not in the fit split and has no fallback level")
    prediction[~seen] = fallback.prediction[~seen]
    n_answers[~seen] = fallback.n_answers[~seen]
  return LevelPrediction(prediction=prediction, n_answers=n_answers, seen=seen, subset=codes, subsets=key_list)


def prior_accuracy(prediction, answers, mask=None):
  """Prior_Acc over the samples picked by `mask` (all when None)."""
  correct = prediction.prediction == answers
  return accuracy(correct if mask is None else correct[mask])


def uniform_accuracy(prediction, mask=None):
  """Uni_Acc aggregated by samples: mean of 1/|A_s| over the picked samples."""
  n_answers = prediction.n_answers if mask is None else prediction.n_answers[mask]
  return float(np.mean(1.0 / n_answers)) if n_answers.size else math.nan
