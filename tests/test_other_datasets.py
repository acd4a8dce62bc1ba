"""FloodNet-VQA and RSIVQA question-file readers on small hand-written files."""
import json

import pytest

from rsvqa_jax.data import other_datasets
from rsvqa_jax.errors import RSVQAError

FLOODNET_TRAIN = {
    "0": {"Image_ID": "10165.JPG", "Question": "What is the overall condition of the given image?",
          "Ground_Truth": "flooded", "Question_Type": "Condition_Recognition"},
    "1": {"Image_ID": "10165.JPG", "Question": "How many buildings can be seen in the image?",
          "Ground_Truth": 3, "Question_Type": "Simple_Counting"},
    "2": {"Image_ID": "10165.JPG", "Question": "Is the entire road non flooded?", "Ground_Truth": "Yes",
          "Question_Type": "Yes_No"},
    "3": {"Image_ID": "10170.JPG", "Question": "What is the condition of road?", "Ground_Truth": "non flooded",
          "Question_Type": "Condition_Recognition"},
    "7": {"Image_ID": "10170.JPG", "Question": "How many buildings are non flooded?", "Ground_Truth": 4,
          "Question_Type": "Complex_Counting"},
    "8": {"Image_ID": "img_a.JPG", "Question": "What is the condition of the road in this image?",
          "Ground_Truth": "flooded", "Question_Type": "Road_Condition_Recognition"},
}
FLOODNET_VALID = {
    "0": {"Image_ID": "10169.JPG", "Question": "Is the entire road flooded?", "Question_Type": "Yes_No"},
}


def write_json(path, data):
  path.parent.mkdir(parents=True, exist_ok=True)
  path.write_text(json.dumps(data))


def test_floodnet(tmp_path):
  write_json(tmp_path / "Questions" / "Training_Question.json", FLOODNET_TRAIN)
  write_json(tmp_path / "Questions" / "Valid_Question.json", FLOODNET_VALID)  # no answers: skipped
  ds = other_datasets.read_floodnet(str(tmp_path))
  assert ds.name == "floodnet" and list(ds.splits) == ["train"] and ds.image_path is None
  s = ds["train"]
  assert s.question_id.tolist() == [0, 1, 2, 3, 7, 8]
  assert s.qtype.tolist() == ["condition_scene", "simple_counting", "condition_yes_no", "condition_road",
                              "complex_counting", "condition_road"]
  assert s.answer.tolist() == ["flooded", "3", "yes", "non flooded", "4", "flooded"]
  assert s.raw_answer.tolist() == ["flooded", "3", "Yes", "non flooded", "4", "flooded"]
  assert s.image_id.tolist()[:5] == [10165, 10165, 10165, 10170, 10170]
  assert s.image_id[5] not in (10165, 10170)


def test_floodnet_errors(tmp_path):
  with pytest.raises(RSVQAError, match="no FloodNet question file"):
    other_datasets.read_floodnet(str(tmp_path))
  with pytest.raises(RSVQAError, match="not found"):
    other_datasets.read_floodnet(str(tmp_path / "missing"))
  partial = dict(FLOODNET_TRAIN, **{"9": {"Image_ID": "1.JPG", "Question": "Is the entire road flooded?",
                                          "Question_Type": "Yes_No"}})
  write_json(tmp_path / "a" / "Training_Question.json", partial)
  with pytest.raises(RSVQAError, match=r"question 9: missing Ground_Truth"):
    other_datasets.read_floodnet(str(tmp_path / "a"))
  bad_type = {"0": dict(FLOODNET_TRAIN["0"], Question_Type="Colour")}
  write_json(tmp_path / "b" / "Training_Question.json", bad_type)
  with pytest.raises(RSVQAError, match="unknown Question_Type 'Colour'"):
    other_datasets.read_floodnet(str(tmp_path / "b"))
  write_json(tmp_path / "c" / "Valid_Question.json", FLOODNET_VALID)
  with pytest.raises(RSVQAError, match="has answers"):
    other_datasets.read_floodnet(str(tmp_path / "c"))
  (tmp_path / "d").mkdir()
  (tmp_path / "d" / "Training_Question.json").write_text("{not json")
  with pytest.raises(RSVQAError, match="cannot read"):
    other_datasets.read_floodnet(str(tmp_path / "d"))


def test_rsivqa(tmp_path):
  (tmp_path / "DOTA").mkdir()
  (tmp_path / "UCM").mkdir()
  (tmp_path / "DOTA" / "dota_train_vqa2.txt").write_text(
      "P0000: how many planes are there in this picture?21\n"
      "P0000: does this picture contain ship?no\n"
      "\n"
      "P0001: does this picture contain plane?yes\n")
  (tmp_path / "UCM" / "ucm_vqa.txt").write_text(
      "1.tif:What is the theme of this picture?farmland\n"
      "1.tif:What is the location of the  in this picture?everywhere \n"
      "P0000:How many cars in the picture?fourteen\n")
  ds = other_datasets.read_rsivqa(str(tmp_path))
  assert list(ds.splits) == ["all"]
  s = ds["all"]
  assert s.question_id.tolist() == list(range(6))
  assert s.qtype.tolist() == ["count", "presence", "presence", "scene", "location", "count"]
  assert s.question.tolist()[0] == "how many planes are there in this picture?"
  assert s.answer.tolist() == ["21", "no", "yes", "farmland", "everywhere", "fourteen"]
  assert s.raw_answer[4] == "everywhere "
  # Image ids: per (folder, name); UCM's P0000 is not DOTA's P0000.
  assert s.image_id.tolist() == [0, 0, 1, 2, 2, 3]


def test_rsivqa_errors(tmp_path):
  with pytest.raises(RSVQAError, match="no RSIVQA"):
    other_datasets.read_rsivqa(str(tmp_path))
  (tmp_path / "x.txt").write_text("1.tif:what is the theme of this picture?farmland\nno separator here\n")
  with pytest.raises(RSVQAError, match=r"x.txt:2: expected 'image:question\?answer'"):
    other_datasets.read_rsivqa(str(tmp_path))
  (tmp_path / "x.txt").write_text("1.tif:why is the sky blue?because\n")
  with pytest.raises(RSVQAError, match=r"x.txt:1: question type"):
    other_datasets.read_rsivqa(str(tmp_path))
