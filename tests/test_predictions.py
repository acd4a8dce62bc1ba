"""Predictions-file mode: CSV reading, its errors, and `analyze` end to end."""
import argparse
import csv
import json

import pytest

from rsvqa_jax import cli
from rsvqa_jax.bias import predictions
from rsvqa_jax.commands import analyze
from rsvqa_jax.data import records
from rsvqa_jax.errors import RSVQAError

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
  assert preds == {1: "yes", 2: "no", 5: ""}
  split = records.Split.from_rows("test", [
      dict(question_id=q, image_id=0, qtype="t", question="q", answer=a, raw_answer=a)
      for q, a in [(1, "yes"), (2, "yes"), (3, "no"), (5, "")]])
  out = predictions.align(preds, {"test": split}, path)["test"]
  assert out.prediction.tolist() == ["yes", "no", None, ""]
  assert out.missing == 1
  assert out.correct(split.answer).tolist() == [True, False, False, True]


@pytest.mark.parametrize("header,rows,message", [
    (["id", "prediction"], [[1, "yes"]], "missing column.*question_id"),
    (["question_id", "answer"], [[1, "yes"]], "missing column.*prediction"),
    (["question_id", "prediction"], [[1, "yes"], [1, "no"]], r"p.csv:3: duplicate question_id 1"),
    (["question_id", "prediction"], [["one", "yes"]], r"p.csv:2: question_id 'one' is not an integer"),
    (["question_id", "prediction"], [[1]], r"p.csv:2: row has no prediction value"),
])
def test_bad_csv(tmp_path, header, rows, message):
  path = write_csv(tmp_path / "p.csv", header, rows)
  with pytest.raises(RSVQAError, match=message):
    predictions.read(path)


def test_missing_file_and_unknown_ids(tmp_path):
  with pytest.raises(RSVQAError, match="cannot read predictions"):
    predictions.read(str(tmp_path / "none.csv"))
  split = records.Split.from_rows("test", [dict(question_id=1, image_id=0, qtype="t", question="q",
                                                answer="a", raw_answer="a")])
  with pytest.raises(RSVQAError, match=r"2 question id\(s\) not in split\(s\) test, e.g. \[7, 9\]"):
    predictions.align({1: "a", 9: "b", 7: "c"}, {"test": split}, "p.csv")


def test_analyze_with_predictions_end_to_end(data, capsys):
  # Model: Yes/No all right (100%), counting 1 of 3 (one question without a row counts as wrong).
  pred = write_csv(data / "p.csv", ["question_id", "prediction"],
                   [[0, "yes"], [1, "no"], [2, "no"], [3, "3"], [5, "3"]])
  adv = write_csv(data / "a.csv", ["question_id", "prediction"],
                  [[0, "no"], [1, "no"], [2, "no"], [3, "3"], [4, "3"], [5, "3"]])
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
  assert (sc["AdTest_Acc (%)"], sc["IO_AdTest (%)"]) == ("66.67", "-100.00")
  assert (rows["Overall"]["RSVQA_Acc (%)"], rows["Overall"]["IO_Prior (%)"]) == ("66.67", "0.00")
  assert (rows["Average"]["RSVQA_Acc (%)"], rows["Average"]["IO_Prior (%)"]) == ("66.67", "0.00")
  md = (out / "types_train.md").read_text()
  assert "1 sample(s) without a row in the predictions file counted as wrong" in md
  for name in ("types_train.tex", "questions_train.csv", "questions_train.md", "answer_distribution.png"):
    assert (out / name).stat().st_size > 0


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
