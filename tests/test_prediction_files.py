"""Prediction files as other people's tooling writes them: read exactly right, or refused in one
line, or counted in the printed line; never a silently different accuracy."""
import csv
import io

import pytest

from rsvqa_jax.bias import predictions
from rsvqa_jax.data import answers, records, rsvqa_json, synthetic
from rsvqa_jax.errors import RSVQAError
from test_predictions import run_analyze, write_csv


@pytest.fixture(name="lr", scope="module")
def fixture_lr(tmp_path_factory):
  root = tmp_path_factory.mktemp("lr")
  synthetic.generate(str(root), "lr", images=12, seed=0, questions_per_image=8)
  return root


def _text(header, rows, **kw):
  f = io.StringIO()
  w = csv.writer(f, **kw)
  w.writerow(header)
  w.writerows(rows)
  return f.getvalue()


_ORIGINAL = {ours: theirs for theirs, ours in answers.ORIGINAL_LABELS.items()}
# name -> what a tool writes of (question id, question type, answer, raw answer): file bytes.
_VARIANTS = {
    "utf-8 with BOM": lambda q: _text(["question_id", "prediction"],
                                      [[i, a] for i, _, a, _ in q]).encode("utf-8-sig"),
    "CRLF": lambda q: _text(["question_id", "prediction"], [[i, a] for i, _, a, _ in q],
                            lineterminator="\r\n").encode(),
    "CR only, no final newline": lambda q: _text(["question_id", "prediction"],
                                                 [[i, a] for i, _, a, _ in q],
                                                 lineterminator="\r").rstrip("\r").encode(),
    "a trailing empty line": lambda q: (_text(["question_id", "prediction"],
                                              [[i, a] for i, _, a, _ in q]) + "\n").encode(),
    "all quoted, other order, extra columns": lambda q: _text(
        ["score", "prediction", "type", "question_id"], [[0.5, a, t, i] for i, t, a, _ in q],
        quoting=csv.QUOTE_ALL).encode(),
    "ids ' 12' and '012'": lambda q: _text(["question_id", "prediction"],
                                           [[f" {i}" if i % 2 else f"0{i}", a]
                                            for i, _, a, _ in q]).encode(),
    "case, spaces, no-break spaces": lambda q: _text(["question_id", "prediction"],
                                                     [[i, f" {a.upper()}\u00a0"]
                                                      for i, _, a, _ in q]).encode(),
    "raw counts as 3.0 and 03": lambda q: _text(["question_id", "prediction"],
                                                [[i, (f"{r}.0" if i % 2 else f"0{r}")
                                                  if t == "count" else a]
                                                 for i, t, a, r in q]).encode(),
    "the original code's bins": lambda q: _text(["question_id", "prediction"],
                                                [[i, _ORIGINAL.get(a, a).title()]
                                                 for i, _, a, _ in q]).encode(),
}


@pytest.mark.parametrize("variant", _VARIANTS)
def test_what_tools_write_of_right_answers_scores_all_right(lr, tmp_path, variant):
  """Regression: every spelling of the right answers the readers accept scores 100%."""
  split = rsvqa_json.read_dataset(str(lr), "lr")["train"]
  questions = list(zip(split.question_id.tolist(), split.qtype.tolist(), split.answer.tolist(),
                       split.raw_answer.tolist()))
  path = tmp_path / "p.csv"
  path.write_bytes(_VARIANTS[variant](questions))
  out = predictions.load(str(path), {"train": split}, "lr", set(split.answer.tolist()))["train"]
  assert out.correct(split.answer).all() and out.missing == out.n_outside == out.n_foreign == 0


@pytest.mark.parametrize("header,message", [
    (["Question_ID ", "prediction"], r"column 'Question_ID ' is not read \(column names are "
     r"matched exactly\): rename it question_id$"),
    (["question_id", "Prediction"], r"column 'Prediction' is not read .*: rename it prediction$"),
    (["question id", "prediction"], r"column 'question id' is not read .*: rename it question_id$"),
    (["\ufeff\ufeffquestion_id", "prediction"], r"column '\\ufeffquestion_id' is not"),  # 2 BOMs
    # Ignored without a word: an adversarial file of one repeat read as clean predictions, the
    # image check skipped.
    (["question_id", "Repeat", "prediction"], r"column 'Repeat' is not read .*: rename it repeat$"),
    (["question_id", "Image_ID", "prediction"], r"column 'Image_ID' is not read .*: rename it "
     r"image_id$"),
    (["question_id", "substituted-image-id", "prediction"], r"rename it substituted_image_id$"),
    # Two spellings of the answer column: the exact one was read, whichever the user meant.
    (["question_id", "Prediction", "prediction"], r"p.csv: columns prediction and 'Prediction' "
     r"differ only in case or spaces; which one to read is ambiguous: rename or drop one$"),
])
def test_a_column_named_but_for_case_or_spaces_is_refused(tmp_path, header, message):
  path = write_csv(tmp_path / "p.csv", header, [[1] + ["0"] * (len(header) - 2) + ["yes"]])
  with pytest.raises(RSVQAError, match=message):
    predictions.read(path)


@pytest.mark.parametrize("data,message", [
    (b"question_id;prediction\n1;yes\n", r"p.csv: missing column\(s\) question_id, prediction "
     r"\(header: 'question_id;prediction'\); the header is separated by semicolons: save the file "
     r"comma-separated$"),
    (b"question_id\tprediction\n1\tyes\n", r"; the header is separated by tabs: save the file "
     r"comma-separated$"),
    (b"sep=;\nquestion_id;prediction\n1;yes\n", r"\(header: 'sep=;'\); its first line is Excel's "
     r"separator line: remove it and save the file comma-separated$"),
    ("question_id,prediction\n1,yes\n".encode("utf-16"), r"p.csv: not UTF-8 text \(UTF-16 text: "
     r"it begins with a UTF-16 byte order mark\); save it as UTF-8 CSV$"),
    # Python < 3.13's csv refuses the NUL bytes before the header is looked at.
    ("question_id,prediction\n1,yes\n".encode("utf-16-le"),
     r"(; the header holds NUL bytes: UTF-16 text\? save it as UTF-8 CSV|not a readable CSV row)"),
])
def test_a_spreadsheets_separator_or_utf16_is_named(tmp_path, data, message):
  path = tmp_path / "p.csv"
  path.write_bytes(data)
  with pytest.raises(RSVQAError, match=message) as info:
    predictions.read(str(path))
  assert "\n" not in str(info.value)


def test_predictions_not_of_their_question_types_form_are_counted():
  """Yes / no written 1 / 0, an area without its m2: wrong answers the dataset's reader would
  refuse. Where they fall inside the answer space (HR's counts hold "0" and "1") no count
  showed them: a tool writing booleans as 1 / 0 lost every yes / no question without a word."""
  rows = [("presence", "yes", "1"), ("comp", "no", "0"), ("count", "3", "3"),
          ("area", "between 11m2 and 100m2", "45"), ("presence", "no", "0"),
          ("area", "between 11m2 and 100m2", "45m2")]
  split = records.Split.from_rows("test", [
      dict(question_id=q, image_id=0, qtype=t, question="q", answer=a, raw_answer=a)
      for q, (t, a, _) in enumerate(rows)])
  space = {"yes", "no", "0", "1", "3", "between 11m2 and 100m2"}
  out = predictions.normalised([[p for *_, p in rows]], split, "hr", space)
  assert out.correct(split.answer).tolist() == [[False, False, True, False, False, True]]
  assert out.foreign == {("presence", "1"): 1, ("comp", "0"): 1, ("area", "45"): 1,
                         ("presence", "0"): 1}
  assert out.outside == {"45": 1}
  assert out.summary()["n_not_of_type_form"] == 4
  assert out.summary()["not_of_type_form_top"][0] == ["presence", "1", 1]
  assert out.describe("p.csv on test") == (
      "p.csv on test: 6 prediction(s) for 6 question(s), 1 mapped by the answer normalisation "
      "('45m2' -> 'between 11m2 and 100m2' x1), 4 not of their question type's answer form, "
      "counted wrong ('1' to presence x1, '0' to comp x1, '45' to area x1, '0' to presence x1), "
      "1 outside the training answer space, counted wrong ('45' x1), 0 missing, counted wrong")


@pytest.mark.parametrize("dataset", ["lr", "hr"])
def test_analyze_prints_yes_no_written_as_1_0(tmp_path, dataset, capsys):
  data = tmp_path / "data"
  synthetic.generate(str(data), dataset, images=12, seed=0, questions_per_image=8)
  split = rsvqa_json.read_dataset(str(data), dataset)["train"]
  flags = {"yes": "1", "no": "0"}
  rows = [[q, flags.get(a, a)] for q, a in zip(split.question_id.tolist(), split.answer.tolist())]
  n = sum(a in flags for a in split.answer.tolist())
  path = write_csv(tmp_path / "p.csv", ["question_id", "prediction"], rows)
  assert run_analyze(["--data", str(data), "--dataset", dataset, "--out", str(tmp_path / "out"),
                      "--split", "train", "--predictions", path]) == 0
  assert f", {n} not of their question type's answer form, counted wrong (" in (
      capsys.readouterr().out)


def test_a_huge_id_or_value_is_a_short_error_on_its_line(tmp_path):
  """A 5,000-digit id was quoted whole (a 5,000-character line); a value over csv's field limit
  was blamed on the line before its own."""
  path = tmp_path / "p.csv"
  path.write_text("question_id,prediction\n1,yes\n" + "9" * 5000 + ",yes\n")
  with pytest.raises(RSVQAError, match=r"p.csv:3: question_id '9+\.\.\.9+' is not an integer$") as e:
    predictions.read(str(path))
  assert len(str(e.value)) < len(str(path)) + 80
  path.write_text("question_id,prediction\n1,yes\n2," + "y" * 200_000 + "\n")
  with pytest.raises(RSVQAError, match=r"p.csv:3: not a readable CSV row \(field larger than "):
    predictions.read(str(path))
