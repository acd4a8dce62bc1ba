"""OA / AA / per-type accuracy, most-common-answer priors and IO, by hand."""
import json
import math

import numpy as np
import pytest

from rsvqa_jax import storage
from rsvqa_jax.bias import metrics


def _obj(values):
  out = np.empty(len(values), dtype=object)
  out[:] = values
  return out


def test_accuracy_and_empty():
  assert metrics.accuracy([True, False, True, True]) == 0.75
  assert math.isnan(metrics.accuracy([]))


def test_per_type_and_average():
  correct = np.array([True, False, True, True, False])
  qtype = _obj(["a", "a", "b", "b", "c"])
  table = metrics.accuracy_table(correct, qtype, ["a", "b", "c", "empty"])
  per_type = table["per_type"]
  assert per_type["a"] == 0.5 and per_type["b"] == 1.0 and per_type["c"] == 0.0
  assert math.isnan(per_type["empty"])
  # AA leaves the empty type out: (0.5 + 1 + 0) / 3.
  assert table["aa"] == pytest.approx(0.5) and table["oa"] == pytest.approx(0.6)
  assert table["per_type_n"] == {"a": 2, "b": 2, "c": 1, "empty": 0} and table["repeats"] == 1
  assert math.isnan(metrics.average_accuracy({"x": math.nan}))


def test_accuracy_over_repeats_by_hand():
  correct = np.array([[True, False, True, True], [True, True, False, False]])
  table = metrics.accuracy_table(correct, _obj(["a", "a", "b", "b"]), ["a", "b"])
  # repeat 0: a 1/2, b 2/2, OA 3/4, AA 3/4; repeat 1: a 2/2, b 0/2, OA 2/4, AA 2/4.
  assert table["per_repeat"] == {"oa": [0.75, 0.5], "aa": [0.75, 0.5],
                                 "per_type": {"a": [0.5, 1.0], "b": [1.0, 0.0]}}
  assert table["oa"] == pytest.approx(0.625) and table["std"]["oa"] == pytest.approx(0.125)
  assert table["per_type"] == pytest.approx({"a": 0.75, "b": 0.5})
  assert table["std"]["per_type"] == pytest.approx({"a": 0.25, "b": 0.5})
  assert table["repeats"] == 2 and table["n"] == 4


def test_io_lower_bound():
  assert metrics.io_lower_bound(0.85, 0.5) == pytest.approx(0.7)
  # Paper Table 3, Comparison: (90.76 - 66.74) / (100 - 66.74) = 72.22%.
  assert metrics.io_lower_bound(0.9076, 0.6674) == pytest.approx(0.7222, abs=1e-4)
  assert metrics.io_lower_bound(0.4, 0.5) == pytest.approx(-0.2)  # negative kept
  assert metrics.io_lower_bound(0.9, 1.0) is None  # undefined, no division by zero
  assert metrics.io_lower_bound(1.0, 1.0) is None
  assert math.isnan(metrics.io_lower_bound(math.nan, 0.5))
  assert math.isnan(metrics.io_lower_bound(0.5, math.nan))
  assert metrics.io_lower_bound(0.5, 0.0) == 0.5


def test_fit_priors_ties_are_lexicographic_and_order_free():
  keys = _obj([("k",)] * 5 + [("single",)] * 3)
  answers = _obj(["b", "a", "b", "a", "c", "yes", "yes", "yes"])
  priors = metrics.fit_priors(keys, answers)
  assert priors[("k",)] == metrics.SubsetPrior(answer="a", n_fit=5, n_answers=3,
                                               tied_with=("b",))  # 2 each; c once, not tied
  assert priors[("single",)] == metrics.SubsetPrior(answer="yes", n_fit=3, n_answers=1)
  rng = np.random.default_rng(0)
  for _ in range(5):
    order = rng.permutation(len(keys))
    assert metrics.fit_priors(keys[order], answers[order]) == priors


def test_predict_with_fallback_and_accuracies():
  priors = metrics.fit_priors(_obj([("t", "q1")] * 3 + [("t", "q2")] * 2),
                              _obj(["yes", "yes", "no", "no", "no"]))
  type_priors = metrics.fit_priors(_obj([("t",)] * 3), _obj(["no", "no", "yes"]))
  coarse = metrics.predict(type_priors, _obj([("t",)] * 4))
  assert coarse.prediction.tolist() == ["no"] * 4 and coarse.n_answers.tolist() == [2] * 4
  keys = _obj([("t", "q1"), ("t", "q2"), ("t", "unseen"), ("t", "q1")])
  pred = metrics.predict(priors, keys, coarse)
  assert pred.subsets == [("t", "q1"), ("t", "q2"), ("t", "unseen")]
  assert pred.subset.tolist() == [0, 1, 2, 0]
  assert pred.prediction.tolist() == ["yes", "no", "no", "yes"]
  assert pred.n_answers.tolist() == [2, 1, 2, 2]
  assert pred.seen.tolist() == [True, True, False, True]
  answers = _obj(["yes", "yes", "no", "no"])
  assert metrics.prior_accuracy(pred, answers) == 0.5
  assert metrics.prior_accuracy(pred, answers, np.array([True, False, True, False])) == 1.0
  assert metrics.uniform_accuracy(pred) == pytest.approx((0.5 + 1 + 0.5 + 0.5) / 4)
  assert math.isnan(metrics.uniform_accuracy(pred, np.zeros(4, bool)))
  with pytest.raises(ValueError):
    metrics.predict(priors, keys)


def test_misused_inputs_are_refused_never_read_in_silence():
  """From Python, answer strings or probabilities cast to bool read as right, a string of types
  was iterated letter by letter, a percentage gave IO "undefined"."""
  with pytest.raises(ValueError, match=r"correct: expected booleans .* such as 'yes'"):
    metrics.accuracy(["yes", "no"])
  with pytest.raises(ValueError, match="float64 values such as 0.3"):
    metrics.accuracy([0.3, 0.1, 0.0])
  assert metrics.accuracy([1, 0, 1.0]) == pytest.approx(2 / 3)  # 0/1 numbers are booleans
  with pytest.raises(ValueError, match="types='count'; expected a list of question types"):
    metrics.accuracy_table([True, False], ["count", "count"], "count")
  with pytest.raises(ValueError, match=r"correct of shape \[1, 3\] .* qtype of shape \[2\]"):
    metrics.accuracy_table([True, False, True], ["count", "presence"], ["count"])
  for acc, bound in ((50.0, 30.0), (0.5, 1.5), (0.5, None), (-0.1, 0.2)):
    with pytest.raises(ValueError, match="accuracies are fractions in"):
      metrics.io_lower_bound(acc, bound)
  assert math.isnan(metrics.io_lower_bound(0.5, math.nan))
  assert metrics.fit_priors(["a", "a"], ["yes", "no"])["a"].answer == "no"  # lists, not arrays


def _same(a, b):
  """Equality with NaN equal to NaN, through dicts and lists."""
  if isinstance(a, dict):
    return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
  if isinstance(a, list):
    return isinstance(b, list) and len(a) == len(b) and all(map(_same, a, b))
  if isinstance(a, float) and math.isnan(a):
    return isinstance(b, float) and math.isnan(b)
  return a == b and type(a) is type(b)


def test_a_table_read_back_from_its_json_file_has_its_nans_again(tmp_path):
  table = metrics.accuracy_table(np.array([[True, False], [True, True]]), _obj(["a", "a"]),
                                 ["a", "empty"])
  table.update(pool=None, steps={"count": None, "mean": 3}, ood={"kw": {"oa": math.nan, "n": 0}},
               mean_ood_oa=math.nan)
  path = str(tmp_path / "accuracy.json")
  storage.write_json(path, table)
  with open(path) as f:
    assert "NaN" not in f.read()
  back = metrics.from_json(storage.read_json(path))
  assert _same(back, table)
  assert back["pool"] is None and back["steps"]["count"] is None  # null that is no number stays
  assert _same(metrics.from_json(json.loads(storage.json_line(table))), table)
