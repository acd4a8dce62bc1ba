"""Answer binning edge cases and the answer vocabulary."""
import json

import numpy as np
import pytest

from rsvqa_jax.data import answers
from rsvqa_jax.errors import RSVQAError


@pytest.mark.parametrize("raw,expected", [
    (0, "0"), ("0", "0"), (1, "between 1 and 10"), (10, "between 1 and 10"), (11, "between 11 and 100"),
    (100, "between 11 and 100"), (101, "between 101 and 1000"), (1000, "between 101 and 1000"),
    (1001, "more than 1000"), (" 7 ", "between 1 and 10"), ("123456", "more than 1000"),
])
def test_lr_count_bins(raw, expected):
  assert answers.bin_count_lr(raw) == expected
  assert answers.normalise("lr", "count", raw) == expected


@pytest.mark.parametrize("raw", ["-1", "2.5", "yes", "", "1e3"])
def test_lr_count_rejects_non_integers(raw):
  with pytest.raises(ValueError):
    answers.normalise("lr", "count", raw)


@pytest.mark.parametrize("raw,expected", [
    ("0m2", "0m2"), ("1m2", "between 1m2 and 10m2"), ("10m2", "between 1m2 and 10m2"),
    ("11m2", "between 11m2 and 100m2"), ("100m2", "between 11m2 and 100m2"), ("101m2", "between 101m2 and 1000m2"),
    ("1000m2", "between 101m2 and 1000m2"), ("1001m2", "more than 1000m2"), ("0.4m2", "between 1m2 and 10m2"),
    ("10.5m2", "between 11m2 and 100m2"), ("1000.5m2", "more than 1000m2"), (" 55m2 ", "between 11m2 and 100m2"),
])
def test_hr_area_bins(raw, expected):
  assert answers.bin_area_hr(raw) == expected
  assert answers.normalise("hr", "area", raw) == expected


@pytest.mark.parametrize("raw", ["12", "m2", "-3m2", "12 m", "twelve m2", "\u0661\u0662m2"])
def test_hr_area_rejects_malformed(raw):
  with pytest.raises(ValueError):
    answers.normalise("hr", "area", raw)


def test_hr_counts_are_kept_as_numbers_and_other_answers_untouched():
  assert answers.normalise("hr", "count", "0") == "0"
  assert answers.normalise("hr", "count", "1234") == "1234"
  assert answers.normalise("hr", "count", "007") == "7"
  assert answers.normalise("lr", "presence", " yes ") == "yes"
  assert answers.normalise("lr", "rural_urban", "urban") == "urban"
  assert answers.normalise("xben", "LC", "Coniferous forest, water bodies") == "Coniferous forest, water bodies"


def test_original_labels_map_onto_our_bins():
  ours = set(answers.LR_COUNT_BINS) | set(answers.HR_AREA_BINS)
  assert set(answers.ORIGINAL_LABELS.values()) <= ours
  assert len(answers.LR_COUNT_BINS) + 4 == 9  # with yes, no, rural, urban: the 9 LR classes


def test_vocab_order_encode_decode():
  vocab = answers.AnswerVocab.build(["no", "yes", "yes", "b", "a", "no", "yes"])
  assert vocab.answers == ("yes", "no", "a", "b")  # by frequency, ties alphabetical
  enc = vocab.encode(["no", "maybe", "a", "yes", "maybe"])
  assert enc.ids.dtype == np.int32
  np.testing.assert_array_equal(enc.ids, [1, -1, 2, 0, -1])
  assert enc.n_unknown == 2
  ids, n_unknown = vocab.encode([])
  assert ids.shape == (0,) and n_unknown == 0
  assert vocab.decode([1, -1, 3]) == ["no", answers.UNKNOWN, "b"]
  assert "a" in vocab and "maybe" not in vocab and len(vocab) == 4


def test_vocab_top_k_reports_dropped():
  train = ["a"] * 5 + ["b"] * 3 + ["c"] * 2 + ["d"]
  vocab = answers.AnswerVocab.build(train, max_size=2)
  assert vocab.answers == ("a", "b")
  assert vocab.dropped == {"c": 2, "d": 1}
  assert vocab.n_dropped_samples == 3
  assert vocab.encode(train).n_unknown == 3


def test_vocab_save_load(tmp_path):
  vocab = answers.AnswerVocab.build(["x", "y", "y", "z"], max_size=2)
  path = tmp_path / "answers.json"
  vocab.save(path)
  loaded = answers.AnswerVocab.load(path)
  assert loaded == vocab
  assert json.loads(path.read_text())["answers"] == ["y", "x"]


def test_vocab_load_errors(tmp_path):
  with pytest.raises(RSVQAError, match="missing"):
    answers.AnswerVocab.load(tmp_path / "nope.json")
  bad = tmp_path / "bad.json"
  bad.write_text('{"answers": [1,')
  with pytest.raises(RSVQAError, match=r"bad.json: malformed JSON at line 1 column"):
    answers.AnswerVocab.load(bad)
  bad.write_text('["yes"]')
  with pytest.raises(RSVQAError, match="'answers' list"):
    answers.AnswerVocab.load(bad)


HUGE = "1" + "0" * 400  # 10^400: past a float, still an int Python parses


@pytest.mark.parametrize("dataset,qtype,raw,expected", [
    ("lr", "count", HUGE, "more than 1000"), ("lr", "count", "9" * 5000, "more than 1000"),
    ("lr", "count", "0" * 400 + "7", "between 1 and 10"), ("hr", "count", "00" + HUGE, HUGE),
    ("hr", "area", HUGE + "m2", "more than 1000m2"),
    ("hr", "area", HUGE + ".5m2", "more than 1000m2"),
])
def test_huge_quantities_fall_in_a_bin(dataset, qtype, raw, expected):
  assert answers.normalise(dataset, qtype, raw) == expected
  assert answers.magnitude_bin(10 ** 400) == 4  # no float conversion: no OverflowError


def test_huge_non_number_is_a_short_error():
  with pytest.raises(ValueError, match=r"count answer '10\^400' is not"):
    answers.normalise("lr", "count", "10^400")
  with pytest.raises(ValueError, match=r"\.\.\. \(5001 characters\) is not a non-negative") as info:
    answers.normalise("lr", "count", "x" + "9" * 5000)
  assert len(str(info.value)) < 120


@pytest.mark.parametrize("dataset,qtype,raw,expected", [
    ("lr", "count", "between 11 and 100", "between 11 and 100"),  # already ours
    ("lr", "count", " between 10 and 100 ", "between 11 and 100"),  # the original code's
    ("lr", "count", "more than 1000", "more than 1000"), ("lr", "count", "0", "0"),
    ("hr", "area", "between 100m2 and 1000m2", "between 101m2 and 1000m2"),
    ("hr", "area", "0m2", "0m2"), ("lr", "presence", " YES ", "yes"), ("hr", "comp", "No", "no"),
    ("lr", "rural_urban", "Urban", "urban"),  # closed answer sets: case folded
    ("floodnet", "Yes_No", " Yes ", "yes"), ("xben", "LC", " Water bodies ", "Water bodies"),
    ("floodnet", "simple_counting", "007", "7"), ("floodnet", "complex_counting", "0", "0"),
    ("rsivqa", "count", " 012", "12"), ("rsivqa", "count", "several", "several"),
])
def test_binned_and_original_labels_keep_their_bin(dataset, qtype, raw, expected):
  assert answers.normalise(dataset, qtype, raw) == expected
  assert answers.read_prediction(dataset, qtype, raw)[0] == expected


@pytest.mark.parametrize("dataset,qtype,raw,expected", [
    ("lr", "count", " yes ", "yes"), ("hr", "area", "407", "407"),  # wrong form: stays text
    ("hr", "area", "407m2", "between 101m2 and 1000m2"),
    ("lr", "count", "42", "between 11 and 100"),
    ("floodnet", "Simple_Counting", "Three", "three"),
    ("floodnet", "simple_counting", "3.0", "3"), ("floodnet", "simple_counting", "-3", "-3"),
    ("lr", "presence", "12", "12"), ("lr", "rural_urban", " Yes", "Yes"),  # outside the set
    ("lr", "presence", "between 0 and 10", "between 1 and 10"),  # original label: still mapped
    ("xben", "presence", "Yes", "Yes"),  # the RSVQAxBEN reader keeps case (no closed set)
])
def test_predictions_of_the_wrong_form_stay_text(dataset, qtype, raw, expected):
  assert answers.read_prediction(dataset, qtype, raw)[0] == expected


@pytest.mark.parametrize("raw,expected", [
    ("more than 1000 m2", "more than 1000m2"), ("Between 1 m2 and 10 m2", "between 1m2 and 10m2"),
    ("between 10 m2 and 100 m2", "between 11m2 and 100m2"),  # the original code's, spaced
    ("5 m2", "between 1m2 and 10m2"),  # a single area spaced so was read already
])
def test_area_bins_spaced_as_single_areas_are_read(raw, expected):
  """"5 m2" was binned but "more than 1000 m2" counted wrong as of another form."""
  assert answers.read_prediction("hr", "area", raw) == (expected, True)
  assert answers.read_prediction("hr", "count", raw) == (raw, False)  # no area question


@pytest.mark.parametrize("dataset,qtype,raw,message", [
    ("lr", "presence", "12", "presence answer '12' is not one of yes, no"),
    ("hr", "comp", "maybe", "comp answer 'maybe' is not one of yes, no"),
    ("lr", "rural_urban", "yes", "rural_urban answer 'yes' is not one of rural, urban"),
])
def test_closed_answer_sets_refuse_other_answers(dataset, qtype, raw, message):
  """They became classes of their own: a dataset's 'Yes ' and 'yes' were two answers."""
  with pytest.raises(ValueError, match=f"^{message}$"):
    answers.normalise(dataset, qtype, raw)


def test_readers_and_normalise_agree(tmp_path):
  """The function predictions go through gives every dataset answer its reader's value."""
  from rsvqa_jax.data import other_datasets, synthetic  # pylint: disable=g-import-not-at-top
  for variant in ("lr", "hr"):
    synthetic.generate(str(tmp_path / variant), variant, images=6, seed=0, questions_per_image=6)
  entries = {str(i): {"Image_ID": f"{i}.JPG", "Question": "Is it?", "Ground_Truth": a,
                      "Question_Type": "Yes_No"} for i, a in enumerate(["Yes", " no", "NO"])}
  (tmp_path / "flood").mkdir()
  (tmp_path / "flood" / "Training_Question.json").write_text(json.dumps(entries))
  for root, name in (("lr", "lr"), ("hr", "hr"), ("flood", "floodnet")):
    dataset = other_datasets.read_any(str(tmp_path / root), name)
    for split in dataset.splits.values():
      assert [answers.normalise(name, t, r) for t, r in zip(split.qtype, split.raw_answer)] == \
          split.answer.tolist()


def test_a_dataset_count_of_10_pow_400_is_binned(tmp_path):
  from rsvqa_jax.data import rsvqa_json, synthetic  # pylint: disable=g-import-not-at-top
  synthetic.generate(str(tmp_path), "lr", images=6, seed=0, questions_per_image=6)
  questions = json.loads((tmp_path / "LR_split_train_questions.json").read_text())["questions"]
  qid = next(q["id"] for q in questions if q.get("active", True) and q.get("type") == "count")
  path = tmp_path / "LR_split_train_answers.json"
  data = json.loads(path.read_text())
  for a in data["answers"]:
    if a.get("id") == qid:
      a["answer"] = 10 ** 400
  path.write_text(json.dumps(data))
  split = rsvqa_json.read_dataset(str(tmp_path), "lr")["train"]
  assert split.answer[split.question_id == qid].tolist() == ["more than 1000"]


@pytest.mark.parametrize("dataset,qtype,raw,expected", [
    ("lr", "count", "3.0", "between 1 and 10"),  # pandas' int column holding a NaN
    ("hr", "count", "12.00", "12"), ("lr", "count", "0.", "0"),
    ("lr", "count", "Between 1 And 10", "between 1 and 10"),  # a bin label in another case
    ("lr", "count", "Between 10 And 100", "between 11 and 100"),  # the original code's
    ("hr", "area", "More Than 1000M2", "more than 1000m2"),
    ("lr", "count", "4.000000e+00", "between 1 and 10"), ("hr", "count", "1e3", "1000"),
    ("hr", "count", "1.2E+01", "12"), ("hr", "count", "0e0", "0"),  # a float format's exponents
    ("lr", "count", "3.5", "3.5"), ("hr", "count", "2.5e0", "2.5e0"),  # not integral: wrong
    ("hr", "count", "1,000", "1,000"),  # a thousands separator or a decimal comma: refused
    ("hr", "count", "1e25", "1e25"),  # past any count: no 25-digit answer built
])
def test_predictions_read_integral_floats_and_bin_labels_in_any_case(dataset, qtype, raw,
                                                                     expected):
  """'3.0', '4.000000e+00' and 'Between 1 And 10' counted wrong while '03' and 'YES' were
  read."""
  assert answers.read_prediction(dataset, qtype, raw)[0] == expected
  with pytest.raises(ValueError):  # a dataset's own files stay strict
    answers.normalise(dataset, qtype, raw)


def test_an_answer_is_read_in_one_unicode_form():
  """'café' typed with a combining accent (NFD: macOS file names, some editors) printed like the
  dataset's 'café' and was counted a wrong answer."""
  composed, decomposed = "caf\u00e9", "cafe\u0301"
  assert answers.normalise("xben", "land_cover", decomposed) == composed
  assert answers.read_prediction("xben", "land_cover", f" {decomposed} ") == (composed, True)
