"""Predictions-file mode: CSV reading, its errors, and `analyze` end to end."""
import argparse
import csv
import json
import logging
import os
import re

import pytest

from rsvqa_jax import cli
from rsvqa_jax.bias import predictions
from rsvqa_jax.commands import analyze
from rsvqa_jax.data import answers, other_datasets, records, rsvqa_json, synthetic
from rsvqa_jax.errors import RSVQAError
from test_train_support import warnings_of_rsvqa_jax

YN = "Is the entire road flooded?"
SC = "How many buildings are in the image?"
# FloodNet-style training file: the only split, so priors are fitted and applied on it.
SAMPLES = [("Yes_No", YN, "Yes"), ("Yes_No", YN, "No"), ("Yes_No", YN, "No"),
           ("Simple_Counting", SC, 3), ("Simple_Counting", SC, 3), ("Simple_Counting", SC, 4)]


@pytest.fixture(name="data")
def fixture_data(tmp_path):
  entries = {str(i): {"Image_ID": f"{100 + i}.JPG", "Question": q, "Ground_Truth": a, "Question_Type": t}
             for i, (t, q, a) in enumerate(SAMPLES)}
  (tmp_path / "data").mkdir()
  (tmp_path / "data" / "Training_Question.json").write_text(json.dumps(entries))
  return tmp_path


def write_csv(path, header, rows):
  with open(path, "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(header)
    w.writerows(rows)
  return str(path)


def run_analyze(argv):
  if "analyze" in cli.COMMANDS:
    return cli.main(["analyze", *argv])
  parser = argparse.ArgumentParser()
  analyze.add_arguments(parser)
  return analyze.run(parser.parse_args(argv))


def test_read_and_align(tmp_path):
  path = write_csv(tmp_path / "p.csv", ["question_id", "prediction", "score"],
                   [[1, " yes ", 0.9], [2, "no", 0.1], [5, "", 0.0]])
  preds = predictions.read(path)
  assert preds == [{1: " yes ", 2: "no", 5: ""}]
  split = records.Split.from_rows("test", [
      dict(question_id=q, image_id=0, qtype="t", question="q", answer=a, raw_answer=a)
      for q, a in [(1, "yes"), (2, "yes"), (3, "no"), (5, "")]])
  out = predictions.align(preds, {"test": split}, path)["test"]
  assert out.prediction.tolist() == [["yes", "no", None, ""]]
  assert out.missing == 1 and out.repeats == 1
  assert out.mapped == {(" yes ", "yes"): 1}  # whitespace stripped, as the readers do
  assert out.correct(split.answer).tolist() == [[True, False, False, True]]


def test_repeats_are_read_and_aligned(tmp_path):
  path = write_csv(tmp_path / "p.csv", ["question_id", "repeat", "prediction"],
                   [[1, 1, "no"], [1, 0, "yes"], [2, 0, "no"], [2, 1, "yes"], [3, 1, "no"]])
  preds = predictions.read(path)
  assert preds == [{1: "yes", 2: "no"}, {1: "no", 2: "yes", 3: "no"}]
  split = records.Split.from_rows("test", [
      dict(question_id=q, image_id=0, qtype="t", question="q", answer="yes", raw_answer="yes")
      for q in (1, 2, 3)])
  out = predictions.align(preds, {"test": split}, path)["test"]
  assert out.repeats == 2 and out.missing == 1
  assert out.correct(split.answer).tolist() == [[True, False, False], [False, True, False]]


@pytest.mark.parametrize("header,rows,message", [
    (["id", "prediction"], [[1, "yes"]], "missing column.*question_id"),
    (["question_id", "answer"], [[1, "yes"]], "missing column.*prediction"),
    (["question_id", "prediction"], [[1, "yes"], [1, "no"]], r"p.csv:3: duplicate question_id 1 "
     r"\(K answers per question, as adversarial files give, need a repeat column numbering them\)$"),
    (["question_id", "prediction"], [["one", "yes"]], r"p.csv:2: question_id 'one' is not an integer"),
    (["question_id", "prediction"], [[1]], r"p.csv:2: row has fewer values than the header"),
    # A row cut before its optional repeat was read as repeat 0.
    (["question_id", "prediction", "repeat"], [[1, "a", 1], [1, "b"]],
     r"p.csv:3: row has fewer values than the header"),
    (["question_id", "repeat", "prediction"], [[1, 0, "a"], [1, 0, "b"]],
     r"p.csv:3: duplicate question_id 1 in repeat 0"),
    (["question_id", "repeat", "prediction"], [[1, "x", "a"]], r"p.csv:2: repeat 'x' is not an integer"),
    (["question_id", "repeat", "prediction"], [[1, -1, "a"]], r"p.csv:2: repeat -1 is negative"),
    (["question_id", "repeat", "prediction"], [[1, 0, "a"], [1, 2, "a"]],
     r"p.csv: repeats 0, 2 are not numbered 0..K-1"),
    # What int() takes and no one writes for an id: 2_30 read as 230, Arabic-Indic digits.
    (["question_id", "prediction"], [["2_30", "yes"]], r"p.csv:2: question_id '2_30' is not an "),
    (["question_id", "prediction"], [["\u0663", "yes"]], r"p.csv:2: question_id '\u0663' is not"),
    # Two prediction columns: the last was read without a word.
    (["question_id", "prediction", "prediction"], [[1, "yes", "no"]],
     r"p.csv: column prediction appears 2 times in the header; which one to read is ambiguous"),
    # An unquoted comma in an answer cut it to its first part.
    (["question_id", "prediction"], [[1, "yes", " there is"]],
     r"p.csv:2: row has more values than the header \(a comma in an unquoted value\? quote it\)"),
])
def test_bad_csv(tmp_path, header, rows, message):
  path = write_csv(tmp_path / "p.csv", header, rows)
  with pytest.raises(RSVQAError, match=message):
    predictions.read(path)


def test_an_unclosed_quote_is_refused_not_read_as_one_answer(tmp_path):
  """`2,"no` swallowed every row after it into one prediction, the rest counted missing."""
  path = tmp_path / "p.csv"
  path.write_text('question_id,prediction\n1,yes\n2,"no\n3,yes\n4,no\n')
  with pytest.raises(RSVQAError, match=r"p.csv:3: a quote opened on this row is never closed"):
    predictions.read(str(path))
  path.write_text('question_id,prediction\n1,"yes\nno"\n')
  with pytest.raises(RSVQAError, match=r"p.csv:2: a value runs over lines 2-3"):
    predictions.read(str(path))


def test_a_json_file_or_a_long_header_is_a_short_error(tmp_path):
  """A one-line JSON file is one CSV row: its whole text was quoted as the header."""
  questions = tmp_path / "questions.json"
  questions.write_text(json.dumps({"questions": [{"id": i, "question": "Is there a road?" * 9}
                                                 for i in range(200)]}))
  with pytest.raises(RSVQAError) as info:
    predictions.read(str(questions))
  assert str(info.value) == (f"{questions}: not a CSV file (it looks like JSON); give a CSV with "
                             "the columns question_id, prediction")
  path = write_csv(tmp_path / "wide.csv", ["id"] + [f"column_{i}" for i in range(100)], [])
  with pytest.raises(RSVQAError, match=r"missing column\(s\) question_id, prediction \(header: "
                                       r"'id,column_0,.*\.\.\.'\)$") as info:
    predictions.read(path)
  assert len(str(info.value)) < len(path) + 160


def test_unreadable_bytes_are_one_line_errors(tmp_path):
  latin = tmp_path / "latin.csv"
  latin.write_bytes("question_id,prediction\n1,r\u00e9sidentiel\n".encode("latin-1"))
  message = r"latin.csv: not UTF-8 text \(byte 0xe9 on line 2\)"
  with pytest.raises(RSVQAError, match=message) as info:
    predictions.read(str(latin))
  assert "\n" not in str(info.value)
  nul = tmp_path / "nul.csv"
  nul.write_bytes(b"question_id,prediction\n1,y\x00es\n")
  try:
    assert predictions.read(str(nul)) == [{1: "y\x00es"}]  # Python >= 3.13 reads NUL
  except RSVQAError as e:
    assert "nul.csv:" in str(e) and "not a readable CSV row" in str(e)


def test_missing_file_and_unknown_ids(tmp_path):
  with pytest.raises(RSVQAError, match="cannot read predictions"):
    predictions.read(str(tmp_path / "none.csv"))
  split = records.Split.from_rows("test", [dict(question_id=1, image_id=0, qtype="t", question="q",
                                                answer="a", raw_answer="a")])
  with pytest.raises(RSVQAError, match=r"2 question id\(s\) not in split\(s\) test, e.g. \[7, 9\]$"):
    predictions.align({1: "a", 9: "b", 7: "c"}, {"test": split}, "p.csv")
  # A file of another split's answers names that split.
  val = records.Split.from_rows("val", [dict(question_id=q, image_id=0, qtype="t", question="q",
                                             answer="a", raw_answer="a") for q in (7, 9)])
  with pytest.raises(RSVQAError, match=r"e.g. \[7, 9\]; they are questions of val: analyze that "
                                       r"split \(--split val\)$"):
    predictions.align({1: "a", 9: "b", 7: "c"}, {"test": split}, "p.csv",
                      others={"test": split, "val": val}, image_ids={1: 0, 9: 0})
  # ... unless the file's image_id column puts them over other images: another version's file,
  # which analyzing val would refuse too.
  with pytest.raises(RSVQAError, match=r"e.g. \[7, 9\]; split val has questions of these ids, "
                                       r"over other images .*another dataset or version\?$"):
    predictions.align({1: "a", 9: "b", 7: "c"}, {"test": split}, "p.csv",
                      others={"test": split, "val": val}, image_ids={1: 0, 9: 5})


def test_analyze_with_predictions_end_to_end(data, capsys):
  # Model: Yes/No all right (100%), counting 1 of 3 (one question without a row counts as wrong).
  pred = write_csv(data / "p.csv", ["question_id", "prediction"],
                   [[0, "yes"], [1, "no"], [2, "no"], [3, "3"], [5, "3"]])
  adv = write_csv(data / "a.csv", ["question_id", "prediction"],
                  [[0, "no"], [1, "no"], [2, "no"], [3, "3"], [5, "3"]])  # the same questions
  out = data / "out"
  rc = run_analyze(["--data", str(data / "data"), "--dataset", "floodnet", "--out", str(out),
                    "--predictions", pred, "--adversarial-predictions", adv])
  assert rc == 0
  printed = capsys.readouterr().out
  assert "| Overall |" in printed and "IO_Prior" in printed
  with open(out / "types_train.csv") as f:
    rows = {r["Question type"]: r for r in csv.DictReader(f)}
  yn, sc = rows["Condition Recognition - Yes/No"], rows["Simple Counting"]
  # Prior "no" (2 of 3) and "3" (2 of 3); IO_Prior = (100 - 66.67) / 33.33 = 100%, (33.33 - 66.67) / 33.33 = -100%.
  assert (yn["Most common answer"], yn["Prior_Acc (%)"], yn["RSVQA_Acc (%)"], yn["IO_Prior (%)"]) == (
      "no", "66.67", "100.00", "100.00")
  assert (sc["Prior_Acc (%)"], sc["RSVQA_Acc (%)"], sc["IO_Prior (%)"]) == ("66.67", "33.33", "-100.00")
  assert (yn["AdTest_Acc (%)"], yn["IO_AdTest (%)"]) == ("66.67", "100.00")
  assert (sc["AdTest_Acc (%)"], sc["IO_AdTest (%)"]) == ("33.33", "0.00")  # (33.33 - 33.33) / 66.67
  assert (rows["Overall"]["RSVQA_Acc (%)"], rows["Overall"]["IO_Prior (%)"]) == ("66.67", "0.00")
  assert (rows["Average"]["RSVQA_Acc (%)"], rows["Average"]["IO_Prior (%)"]) == ("66.67", "0.00")
  md = (out / "types_train.md").read_text()
  assert "1 sample(s) without a row in the predictions file counted as wrong" in md
  assert "1 sample(s) without a row in the adversarial predictions file counted as wrong" in md
  for name in ("types_train.tex", "questions_train.csv", "questions_train.md", "answer_distribution.png"):
    assert (out / name).stat().st_size > 0


@pytest.mark.parametrize("clean, adversarial, message", [
    # Half a blind model's adversarial file: the missing half counted wrong read as a model that
    # looks at the image (IO_AdTest 43% on the LR test split instead of 0).
    (range(6), [(0, q) for q in range(3)], r"a.csv on train: 3 question\(s\) answered in \S*p.csv "
     r"without an adversarial answer and 0 answered only here; IO_AdTest compares"),
    (range(3), [(0, q) for q in range(6)], r"a.csv on train: 0 question\(s\) answered in \S*p.csv "
     r"without an adversarial answer and 3 answered only here"),
    (range(6), [(k, q) for k in range(2) for q in range(6) if (k, q) != (1, 4)],
     r"a.csv \(repeat 1\) on train: 1 question\(s\) answered in \S*p.csv without"),
])
def test_an_adversarial_file_of_other_questions_than_the_clean_one_is_refused(
    data, capsys, clean, adversarial, message):
  base = ["--data", str(data / "data"), "--dataset", "floodnet", "--out", str(data / "out")]
  pred = write_csv(data / "p.csv", ["question_id", "prediction"], [[q, "no"] for q in clean])
  adv = write_csv(data / "a.csv", ["question_id", "repeat", "prediction"],
                  [[q, k, "no"] for k, q in adversarial])
  assert run_analyze(base + ["--predictions", pred, "--adversarial-predictions", adv]) != 0
  printed = capsys.readouterr()
  assert re.search("error: .*" + message, printed.err), printed.err
  assert "missing, counted wrong" in printed.out  # the counts, printed before
  assert not (data / "out").exists()


def test_analyze_errors(data):
  base = ["--data", str(data / "data"), "--dataset", "floodnet", "--out", str(data / "out")]
  parser = argparse.ArgumentParser()
  analyze.add_arguments(parser)
  adv = write_csv(data / "a.csv", ["question_id", "prediction"], [[0, "no"]])
  with pytest.raises(RSVQAError, match="needs --predictions"):
    analyze.run(parser.parse_args(base + ["--adversarial-predictions", adv]))
  unknown = write_csv(data / "u.csv", ["question_id", "prediction"], [[0, "no"], [99, "yes"]])
  with pytest.raises(RSVQAError, match=r"not in split\(s\) train, e.g. \[99\]"):
    analyze.run(parser.parse_args(base + ["--predictions", unknown]))
  with pytest.raises(RSVQAError, match="no split 'test'"):
    analyze.run(parser.parse_args(base + ["--split", "test"]))


@pytest.mark.parametrize("column", ["repeat", "substituted_image_id"])
def test_an_adversarial_file_of_one_repeat_is_refused_as_predictions(data, column):
  """K = 1 substitutions (evaluate --adversarial white) read like a clean file but for its
  repeat and substituted_image_id columns: it was scored as the model's RSVQA_Acc."""
  base = ["--data", str(data / "data"), "--dataset", "floodnet", "--out", str(data / "out")]
  parser = argparse.ArgumentParser()
  analyze.add_arguments(parser)
  adv = write_csv(data / "a.csv", ["question_id", column, "prediction"], [[0, 0, "no"], [1, 0, "no"]])
  with pytest.raises(RSVQAError, match=rf"^{adv}: a '{column}' column: answers given over "
                                       "substituted images \\(evaluate --adversarial writes it\\); "
                                       "--predictions takes the clean predictions.csv"):
    analyze.run(parser.parse_args(base + ["--predictions", adv]))
  pred = write_csv(data / "p.csv", ["question_id", "prediction"], [[0, "yes"], [1, "no"]])
  assert analyze.run(parser.parse_args(base + ["--predictions", pred,
                                               "--adversarial-predictions", adv])) == 0


def _styles(split, dataset):
  """Predictions of the same answers in our style, the original code's, and raw counts / areas.

  Question i is answered with the answer of the next question of its type (a mix of right and
  wrong), the first with "banana" (outside the answer space); the last has no row.
  """
  original = {ours: theirs for theirs, ours in answers.ORIGINAL_LABELS.items()}
  qtype, answer, raw = split.qtype.tolist(), split.answer.tolist(), split.raw_answer.tolist()
  n = len(qtype)
  nxt = [next(j % n for j in range(i + 1, i + n + 1) if qtype[j % n] == qtype[i]) for i in range(n)]
  binned = {"lr": ("count",), "hr": ("area", "count")}[dataset]
  ours = [answer[j] for j in nxt]
  theirs = [original.get(a, a) for a in ours]
  raws = [("0" + raw[j] if qtype[i] == "count" else raw[j]) if qtype[i] in binned else answer[j]
          for i, j in enumerate(nxt)]
  expected = [answer[j] == answer[i] for i, j in enumerate(nxt)][1:-1]
  return [["banana", *p[1:-1]] for p in (ours, theirs, raws)], expected


@pytest.mark.parametrize("dataset", ["lr", "hr"])
def test_three_prediction_styles_give_identical_tables(tmp_path, dataset, capsys):
  data = tmp_path / "data"
  synthetic.generate(str(data), dataset, images=12, seed=0, questions_per_image=8)
  split = rsvqa_json.read_dataset(str(data), dataset)["train"]
  styles, expected = _styles(split, dataset)
  qids = split.question_id.tolist()[:-1]
  outputs, printed = [], []
  for k, preds in enumerate(styles):
    path = write_csv(tmp_path / f"p{k}.csv", ["question_id", "prediction"], list(zip(qids, preds)))
    out = tmp_path / f"out{k}"
    assert run_analyze(["--data", str(data), "--dataset", dataset, "--out", str(out), "--split",
                        "train", "--predictions", path]) == 0
    printed.append(capsys.readouterr().out)
    outputs.append({f: (out / f).read_text() for f in os.listdir(out) if f.endswith(".csv")})
  assert outputs[0] == outputs[1] == outputs[2]
  with open(tmp_path / "out0" / "types_train.csv") as f:
    overall = next(r for r in csv.DictReader(f) if r["Question type"] == "Overall")
  assert overall["RSVQA_Acc (%)"] == f"{100 * sum(expected) / len(split) + 1e-9:.2f}"
  tail = (", 1 outside the training answer space, counted wrong ('banana' x1), 1 missing, "
          "counted wrong")
  n_mapped = [sum(a != b for a, b in zip(styles[0], p)) for p in styles]
  assert n_mapped[0] == 0 and n_mapped[1] > 0 and n_mapped[2] > 0
  for text, mapped in zip(printed, n_mapped):
    assert (f"on train: {len(qids)} prediction(s) for {len(split)} question(s), {mapped} mapped by "
            "the answer normalisation") in text
    assert tail in text


def test_outside_answer_space_is_wrong_and_listed(data, capsys):
  # Ground truth 3 is right for question 3, but "Banana" -> "banana" is no training answer.
  pred = write_csv(data / "p.csv", ["question_id", "prediction"],
                   [[0, "YES"], [1, "Banana"], [2, "banana"], [3, " 3"], [4, "kiwi"], [5, "3"]])
  split = other_datasets.read_any(str(data / "data"), "floodnet")["train"]
  out = predictions.load(pred, {"train": split}, "floodnet", {"yes", "no", "4"})["train"]
  assert out.prediction.tolist() == [["yes", "banana", "banana", "3", "kiwi", "3"]]
  assert out.n_mapped == 3 and out.outside == {"banana": 2, "kiwi": 1, "3": 2}
  assert out.correct(split.answer).tolist() == [[True, False, False, False, False, False]]
  assert out.summary()["outside_answer_space_top"] == [["banana", 2], ["3", 2], ["kiwi", 1]]
  line = out.describe("p.csv on train")
  assert line == ("p.csv on train: 6 prediction(s) for 6 question(s), 3 mapped by the answer "
                  "normalisation ('YES' -> 'yes' x1, 'Banana' -> 'banana' x1, ' 3' -> '3' x1), 3 "
                  "not of their question type's answer form, counted wrong ('banana' to "
                  "condition_yes_no x2, 'kiwi' to simple_counting x1), 5 outside the training "
                  "answer space, counted wrong ('banana' x2, '3' x2, 'kiwi' x1) (1 of them equal "
                  "to the question's answer, which no training question has: no model of this "
                  "answer space can give it), 0 missing, counted wrong")
  assert out.summary()["n_outside_answer_space_equal_to_answer"] == 1  # question 3's "3"


def test_adversarial_repeats_are_averaged_and_clean_files_keep_one(data):
  base = ["--data", str(data / "data"), "--dataset", "floodnet", "--out", str(data / "out")]
  pred = write_csv(data / "p.csv", ["question_id", "prediction"],
                   [[i, a] for i, a in enumerate(["yes", "no", "no", "3", "3", "4"])])
  # Repeat 0: yes/no 1 of 3, counting 3 of 3; repeat 1: yes/no 3 of 3, counting 0 of 3.
  adv = write_csv(data / "a.csv", ["question_id", "repeat", "prediction"],
                  [[i, 0, a] for i, a in enumerate(["no", "yes", "no", "3", "3", "4"])]
                  + [[i, 1, a] for i, a in enumerate(["yes", "no", "no", "4", "4", "3"])])
  assert run_analyze(base + ["--predictions", pred, "--adversarial-predictions", adv]) == 0
  with open(data / "out" / "types_train.csv") as f:
    rows = {r["Question type"]: r for r in csv.DictReader(f)}
  assert rows["Condition Recognition - Yes/No"]["AdTest_Acc (%)"] == "66.67"  # (1/3 + 1) / 2
  assert rows["Simple Counting"]["AdTest_Acc (%)"] == "50.00"  # (1 + 0) / 2
  assert rows["Overall"]["AdTest_Acc (%)"] == "58.33"  # (4/6 + 3/6) / 2
  parser = argparse.ArgumentParser()
  analyze.add_arguments(parser)
  with pytest.raises(RSVQAError, match=r"a.csv: a 'repeat' column: answers given over substituted"):
    analyze.run(parser.parse_args(base + ["--predictions", adv]))


def test_huge_count_predictions_are_binned_and_shown_short():
  split = records.Split.from_rows("test", [
      dict(question_id=i, image_id=0, qtype="count", question="How many roads are there?",
           answer="more than 1000", raw_answer="2000") for i in range(2)])
  huge = ["1" + "0" * 400, "9" * 5000]  # past a float; past int()'s 4300 digits
  out = predictions.normalised(huge, split, "lr", {"0", "more than 1000"})
  assert out.prediction.tolist() == [["more than 1000"] * 2] and out.n_outside == 0
  assert out.correct(split.answer).tolist() == [[True, True]]
  assert len(out.describe("p.csv on test")) < 300


def _split_on_images():
  return records.Split.from_rows("test", [
      dict(question_id=q, image_id=i, qtype="t", question="q", answer="yes", raw_answer="yes")
      for q, i in [(1, 10), (2, 10), (3, 11)]])


def test_an_image_id_column_must_name_the_datasets_images(tmp_path):
  """The same question ids over other images are another dataset (LR and HR both number their
  questions from 0): refused, not scored."""
  split = _split_on_images()
  good = write_csv(tmp_path / "good.csv", ["question_id", "image_id", "prediction"],
                   [[1, 10, "yes"], [2, 10, "no"], [3, 11, "yes"]])
  out = predictions.load(good, {"test": split})["test"]
  assert out.correct(split.answer).tolist() == [[True, False, True]]
  bad = write_csv(tmp_path / "bad.csv", ["question_id", "image_id", "prediction"],
                  [[1, 10, "yes"], [2, 12, "no"], [3, 13, "yes"]])
  with pytest.raises(RSVQAError, match=r"bad.csv: 2 question\(s\) on another image than in the "
                     r"dataset \(question 2: image_id 12 in the file, 10 in the dataset\)"):
    predictions.load(bad, {"test": split})
  named = write_csv(tmp_path / "named.csv", ["question_id", "image_id", "prediction"],
                    [[1, "10.tif", "yes"]])
  with pytest.raises(RSVQAError, match=r"named.csv:2: image_id '10.tif' is not an integer .*drop "
                     "the column"):
    predictions.load(named, {"test": split})


def test_a_type_column_must_give_the_datasets_types(tmp_path):
  """LR and HR number questions and images alike: a file of the other whose ids match is told
  by its type column (ours writes the key; the displayed name and any case read the same)."""
  split = records.Split.from_rows("test", [
      dict(question_id=q, image_id=10, qtype=t, question="q", answer="yes", raw_answer="yes")
      for q, t in [(1, "rural_urban"), (2, "presence"), (3, "count")]])
  good = write_csv(tmp_path / "good.csv", ["question_id", "type", "prediction"],
                   [[1, "rural_urban", "yes"], [2, " Presence", "no"], [3, "counting", "yes"]])
  out = predictions.load(good, {"test": split})["test"]
  assert out.correct(split.answer).tolist() == [[True, False, True]]
  other = write_csv(tmp_path / "other.csv", ["question_id", "image_id", "type", "prediction"],
                    [[1, 10, "area", "0m2"], [2, 10, "presence", "no"], [3, 10, "comp", "yes"]])
  with pytest.raises(RSVQAError, match=r"other.csv: 2 question\(s\) of another type than in the "
                     r"dataset \(question 1: type 'area' in the file, 'rural_urban' in the dataset\)"
                     r": predictions of another dataset or version\?"):
    predictions.load(other, {"test": split})
  # the paper's name of RSVQAxBEN's presence type; FloodNet files name theirs as FloodNet does
  paper = write_csv(tmp_path / "paper.csv", ["question_id", "type", "prediction"],
                    [[1, "rural_urban", "yes"], [2, "Yes/No", "no"], [3, "count", "yes"]])
  assert predictions.load(paper, {"test": split}, "xben")["test"].correct(split.answer).any()
  assert predictions.load(other, {"test": split}, "floodnet")["test"]


def test_an_adversarial_file_that_does_not_show_swapped_images_is_a_warning(tmp_path, caplog):
  split = _split_on_images()
  plain = write_csv(tmp_path / "plain.csv", ["question_id", "prediction"],
                    [[1, "yes"], [2, "no"], [3, "yes"]])
  with warnings_of_rsvqa_jax(caplog):
    predictions.load(plain, {"test": split})
    assert not caplog.records  # a clean file needs no substituted image
    predictions.load(plain, {"test": split}, adversarial=True)
  assert [r.getMessage() for r in caplog.records] == [
      f"{plain}: no substituted_image_id column, so which image each answer was given cannot "
      "be checked: IO_AdTest assumes the images were swapped"]
  caplog.clear()
  swapped = write_csv(tmp_path / "swapped.csv",
                      ["question_id", "image_id", "substituted_image_id", "prediction"],
                      [[1, 10, 11, "yes"], [2, 10, 11, "no"], [3, 11, 10, "yes"]])
  with warnings_of_rsvqa_jax(caplog):
    predictions.load(swapped, {"test": split}, adversarial=True)
  assert not caplog.records
  stranger = write_csv(tmp_path / "stranger.csv",  # image 99 is none of the dataset's
                       ["question_id", "image_id", "substituted_image_id", "prediction"],
                       [[1, 10, 99, "yes"], [2, 10, 11, "no"], [3, 11, 10, "yes"]])
  with warnings_of_rsvqa_jax(caplog):
    predictions.load(stranger, {"test": split}, adversarial=True)
  assert [r.getMessage() for r in caplog.records] == [
      f"{stranger}: 1 substituted_image_id value(s) name no image of the dataset (e.g. 99): "
      "substitutions drawn from another dataset or version?"]
  caplog.clear()
  own = write_csv(tmp_path / "own.csv",
                  ["question_id", "repeat", "image_id", "substituted_image_id", "prediction"],
                  [[q, r, i, i, "yes"] for r in (0, 1) for q, i in ((1, 10), (2, 10), (3, 11))])
  with pytest.raises(RSVQAError, match="own.csv: a .repeat. column: answers given over"):
    predictions.load(own, {"test": split})
  with warnings_of_rsvqa_jax(caplog):
    predictions.load(own, {"test": split}, adversarial=True)
  assert [r.getMessage() for r in caplog.records] == [
      f"{own}: every row's substituted_image_id is its own image_id: unless the images' pixels "
      "were replaced (white, black, noise), IO_AdTest compares the model with itself on clean "
      "images"]


def test_a_split_without_any_prediction_is_refused(tmp_path, caplog):
  """Every answer of such a split would count wrong: a file of HR's test split analyzed with
  --split test_phili too, or a file with a header alone. Among the default splits (no --split)
  an unanswered one is left unscored, with a line saying so."""
  test, phili = _split_on_images(), records.Split.from_rows("test_phili", [
      dict(question_id=q, image_id=20, qtype="t", question="q", answer="no", raw_answer="no")
      for q in (7, 8)])
  splits = {"test": test, "test_phili": phili}
  header = write_csv(tmp_path / "header.csv", ["question_id", "prediction"], [])
  with pytest.raises(RSVQAError, match=r"header.csv: no prediction for any question of split\(s\) "
                     r"test, test_phili$"):
    predictions.load(header, splits)
  some = write_csv(tmp_path / "some.csv", ["question_id", "prediction"], [[1, "yes"]])
  with pytest.raises(RSVQAError, match=r"of split\(s\) test_phili; it answers test: analyze that "
                     r"alone \(--split test; split='test' in Python\)"):
    predictions.load(some, splits)
  out = predictions.load(some, {"test": test})["test"]
  assert out.missing == 2  # a split partly answered: the rest counted wrong, and reported
  with warnings_of_rsvqa_jax(caplog, logging.INFO):
    defaults = predictions.load(some, splits, chosen=False)  # HR's default test splits
  assert list(defaults) == ["test"] and defaults["test"].missing == 2
  assert f"{some} answers no question of test_phili: scored on test only" in caplog.text
  with pytest.raises(RSVQAError, match=r"header.csv: no prediction for any question"):
    predictions.load(header, splits, chosen=False)  # answering none is refused all the same
  none = records.Split.from_rows("test_phili", [])
  assert predictions.load(some, {"test": test, "test_phili": none})["test_phili"].missing == 0


def test_a_file_of_question_ids_two_splits_share_is_refused(tmp_path):
  """A dataset numbering each split's questions from 0: a file of test's answers would also
  grade test_phili's questions of the same ids, about other images (it did, in silence)."""
  test = _split_on_images()
  phili = records.Split.from_rows("test_phili", [
      dict(question_id=q, image_id=20, qtype="t", question="q", answer="no", raw_answer="no")
      for q in (2, 3, 7)])
  splits = {"test": test, "test_phili": phili}
  shared = write_csv(tmp_path / "shared.csv", ["question_id", "prediction"],
                     [[1, "yes"], [2, "no"], [3, "yes"]])
  for chosen in (True, False):
    with pytest.raises(RSVQAError, match=r"shared.csv: question 2 is a question of both test and "
                       r"test_phili .* analyze one split alone \(--split test; split='test' in "
                       r"Python\)$"):
      predictions.load(shared, splits, chosen=chosen)
  assert predictions.load(shared, {"test": test})["test"].missing == 0
  apart = write_csv(tmp_path / "apart.csv", ["question_id", "prediction"], [[1, "yes"], [7, "no"]])
  assert set(predictions.load(apart, splits)) == {"test", "test_phili"}  # ids of one split each
