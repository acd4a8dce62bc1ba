"""Every audit's CSV reader refuses what it would otherwise read wrongly without a word."""
import json

import pytest

from rsvqa_jax.bias import answerability as answerability_metrics
from rsvqa_jax.bias import grounding, predictions, shortcuts
from rsvqa_jax.data import answerability as pools_lib
from rsvqa_jax.data import csv_columns
from rsvqa_jax.errors import RSVQAError

READERS = {  # reader, a good header, a good row
    "predictions": (predictions.read, "question_id,prediction", "1,yes"),
    "confidence": (grounding.read_confidence, "question_id,confidence", "1,0.5"),
    "image labels": (shortcuts.csv_labels, "image_id,label", "1,forest"),
    "pools": (pools_lib.read_pools, "pool_id,question,image_id,label", "0,Is there a road?,1,2"),
}


def _file(tmp_path, text):
  path = tmp_path / "f.csv"
  path.write_text(text, encoding="utf-8")
  return str(path)


@pytest.mark.parametrize("name", READERS)
def test_each_reader_reads_its_good_file(tmp_path, name):
  read, header, row = READERS[name]
  assert read(_file(tmp_path, f"{header}\n{row}\n"))


@pytest.mark.parametrize("name", READERS)
def test_a_column_named_twice_is_ambiguous(tmp_path, name):
  read, header, row = READERS[name]
  last = header.split(",")[-1]
  with pytest.raises(RSVQAError, match=rf"f.csv: column {last} appears 2 times in the header"):
    read(_file(tmp_path, f"{header},{last}\n{row},{row.split(',')[-1]}\n"))


@pytest.mark.parametrize("name", READERS)
def test_an_unclosed_quote_or_an_extra_value_is_refused(tmp_path, name):
  read, header, row = READERS[name]
  with pytest.raises(RSVQAError, match=r"f.csv:3: a value runs over lines 3-4 \(an unclosed"):
    read(_file(tmp_path, f'{header}\n{row}\n{row.rsplit(",", 1)[0]},"x\n{row}"\n'))
  for end in ("\n", ""):  # never closed: it was read to the end of the file ('0,"car' as car)
    with pytest.raises(RSVQAError, match=r"^\S+f.csv:3: a quote opened on this row is never "
                                         r"closed \(its value would run to the end of the file\)$"):
      read(_file(tmp_path, f'{header}\n{row}\n{row.rsplit(",", 1)[0]},"x{end}'))
  with pytest.raises(RSVQAError, match=r"f.csv:2: row has more values than the header"):
    read(_file(tmp_path, f"{header}\n{row},extra\n"))
  assert read(_file(tmp_path, f"{header}\n{row},,\n"))  # a spreadsheet's trailing commas


@pytest.mark.parametrize("name", READERS)
def test_a_json_file_is_named_as_json_in_one_short_line(tmp_path, name):
  read = READERS[name][0]
  text = json.dumps([{"image_id": i, "label": "forest" * 20} for i in range(50)])
  with pytest.raises(RSVQAError, match="not a CSV file \\(it looks like JSON\\)") as e:
    read(_file(tmp_path, text))
  assert len(str(e.value)) < 200


def test_numbers_are_written_in_ascii_digits_without_underscores():
  assert csv_columns.integer(" 057 ") == 57 and csv_columns.integer("-3") == -3
  assert csv_columns.number("1e-3") == 1e-3 and csv_columns.number(" .5") == 0.5
  for bad in ("1_0", "\u0663", "", "1.5", None):
    with pytest.raises(ValueError):
      csv_columns.integer(bad)
  for bad in ("1_0", "\u0661.5", "x"):
    with pytest.raises(ValueError):
      csv_columns.number(bad)


def test_ids_and_scores_with_underscores_are_refused(tmp_path):
  with pytest.raises(RSVQAError, match=r"f.csv:2: question_id '1_0' or confidence"):
    grounding.read_confidence(_file(tmp_path, "question_id,confidence\n1_0,0.5\n"))
  with pytest.raises(RSVQAError, match=r"f.csv:2: question_id '1' or confidence '0_5' is not"):
    grounding.read_confidence(_file(tmp_path, "question_id,confidence\n1,0_5\n"))
  with pytest.raises(RSVQAError, match=r"f.csv:2: image_id '1_2' is not an integer"):
    shortcuts.csv_labels(_file(tmp_path, "image_id,label\n1_2,forest\n"))
  labels = str(tmp_path / "l.csv")
  with open(labels, "w") as f:
    f.write("pool_id,image_id,label\n0,1,2\n0,2,0\n")
  scores = _file(tmp_path, "pool_id,image_id,score\n0,1,0_5\n0,2,0.1\n")
  with pytest.raises(RSVQAError, match=r"f.csv:2: score '0_5' is not a number in \[0, 1\]"):
    answerability_metrics.score_files(scores, labels)
