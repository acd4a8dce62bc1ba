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
  assert s.image_id[5] == 10171  # "img_a": above every numeric stem


def test_floodnet_splits_sharing_questions_are_warned_of(tmp_path, caplog):
  """The RSVQA layouts warned of a test split holding train questions; FloodNet did not."""
  from test_train_support import warnings_of_rsvqa_jax  # pylint: disable=g-import-not-at-top
  write_json(tmp_path / "Training_Question.json", FLOODNET_TRAIN)
  write_json(tmp_path / "Test_Question.json", FLOODNET_TRAIN)
  with warnings_of_rsvqa_jax(caplog):
    ds = other_datasets.read_floodnet(str(tmp_path))
  assert list(ds.splits) == ["train", "test"]
  assert [r.getMessage() for r in caplog.records] == [
      f"{tmp_path}: 6 question(s) active in both train and test (the first: id 0): test is not "
      "held out from train"]


def test_floodnet_non_numeric_image_never_shares_an_id(tmp_path):
  first = dict(FLOODNET_TRAIN["0"], Image_ID="img_a.JPG")
  second = dict(FLOODNET_TRAIN["1"], Image_ID="0.JPG")
  write_json(tmp_path / "Training_Question.json", {"0": first, "1": second})
  assert other_datasets.read_floodnet(str(tmp_path))["train"].image_id.tolist() == [1, 0]


@pytest.mark.parametrize("other", ["07000.jpg", "7000.jpg"])
def test_floodnet_image_ids_of_one_number_are_refused(tmp_path, other):
  """'7000.JPG' and '07000.jpg' were read as one image: a question of each, in train and val,
  was then warned of as 'not held out'."""
  first = dict(FLOODNET_TRAIN["0"], Image_ID="7000.JPG")
  second = dict(FLOODNET_TRAIN["1"], Image_ID=other)
  write_json(tmp_path / "Training_Question.json", {"0": first, "1": second})
  with pytest.raises(RSVQAError, match=rf"^{tmp_path}: Image_IDs '7000.JPG' and '{other}' both "
                                       r"read as image 7000; name each image one way"):
    other_datasets.read_floodnet(str(tmp_path))


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
  with pytest.raises(RSVQAError, match="Training_Question.json: malformed JSON at line 1 column 2"):
    other_datasets.read_floodnet(str(tmp_path / "d"))


def _floodnet_error(tmp_path, text, message):
  path = tmp_path / "Training_Question.json"
  path.write_bytes(text if isinstance(text, bytes) else text.encode())
  with pytest.raises(RSVQAError, match=f"^{path}: {message}") as e:
    other_datasets.read_floodnet(str(tmp_path))
  assert "\n" not in str(e.value)


def _floodnet_text(entries):
  """A training file of FLOODNET_TRAIN["0"] under each key (keys may repeat), edited by fields."""
  return "{" + ", ".join(f"{json.dumps(k)}: {json.dumps(dict(FLOODNET_TRAIN['0'], **fields))}"
                         for k, fields in entries) + "}"


@pytest.mark.parametrize("entries,message", [
    ([("3", {}), ("03", {})], "question id 3 appears twice \\(keys '3' and '03'\\)$"),
    ([("0", {}), ("0", {})], "key '0' appears twice in one JSON object$"),
    ([("3.5", {})], "question id '3.5' is not a non-negative integer$"),
    ([("x", {})], "question id 'x' is not a non-negative integer$"),
    ([("9" * 20, {})], f"question id '{'9' * 20}' is not a non-negative integer$"),
    ([("0", {"Ground_Truth": None})], "question 0: Ground_Truth is None, expected a non-empty "),
    ([("0", {"Ground_Truth": " "})], "question 0: Ground_Truth is ' ', expected a non-empty "),
    ([("0", {"Question": None})], "question 0: Question is None, expected a non-empty string$"),
    ([("0", {"Image_ID": ""})], "question 0: Image_ID is '', expected a non-empty string$"),
    ([("0", {"Ground_Truth": "yes\ud800"})], "question 0: Ground_Truth is 'yes\\\\ud800', not valid "
                                             "Unicode"),
])
def test_floodnet_bad_ids_and_values(tmp_path, entries, message):
  _floodnet_error(tmp_path, _floodnet_text(entries), message)


COUNTING = {"Question": "How many buildings are there?", "Question_Type": "Simple_Counting"}


@pytest.mark.parametrize("truth,message", [
    (-3, "count answer '-3' is not a non-negative integer$"),
    ("three", "count answer 'three' is not a non-negative integer$"),
    (2.5, "Ground_Truth is 2.5, a JSON number with a decimal point; expected a string or a whole "
          "number"),
    (1e30, "Ground_Truth is 1e\\+30, a JSON number with a decimal point"),
])
def test_floodnet_counts_that_are_no_whole_number_are_refused(tmp_path, truth, message):
  """-3 was read as an answer of its own."""
  _floodnet_error(tmp_path, _floodnet_text([("0", dict(COUNTING, Ground_Truth=truth))]),
                  "question 0: " + message)


@pytest.mark.parametrize("truth", ["Maybe", "flooded", "3"])
def test_floodnet_yes_no_answers_are_yes_or_no(tmp_path, truth):
  """Any text was read as an answer of its own under Yes_No, a third class in its priors."""
  yes_no = FLOODNET_TRAIN["2"]
  _floodnet_error(tmp_path, _floodnet_text([("2", dict(yes_no, Ground_Truth=truth))]),
                  f"question 2: condition_yes_no answer '{truth}' is not one of yes, no$")
  write_json(tmp_path / "ok" / "Training_Question.json",
             {"2": yes_no, "3": dict(yes_no, Ground_Truth=" NO ")})
  assert other_datasets.read_floodnet(str(tmp_path / "ok"))["train"].answer.tolist() == [
      "yes", "no"]


def test_floodnet_and_rsivqa_counts_are_spelt_one_way(tmp_path):
  """'03', 3 and 3.0 (a count column pandas wrote as floats) were up to three answers."""
  write_json(tmp_path / "flood" / "Training_Question.json",
             {str(i): dict(FLOODNET_TRAIN["1"], Ground_Truth=t)
              for i, t in enumerate(["03", 3, 3.0, " 0 ", "10"])})
  split = other_datasets.read_floodnet(str(tmp_path / "flood"))["train"]
  assert split.answer.tolist() == ["3", "3", "3", "0", "10"]
  assert split.raw_answer.tolist() == ["03", "3", "3", " 0 ", "10"]
  (tmp_path / "rsivqa").mkdir()
  (tmp_path / "rsivqa" / "ucm_vqa.txt").write_text(
      "1: how many planes are there?07\n2: how many planes are there?7\n"
      "3: how many planes are there? many\n4: is there a plane?007\n")
  split = other_datasets.read_rsivqa(str(tmp_path / "rsivqa"))["all"]
  assert split.answer.tolist() == ["7", "7", "many", "007"]  # presence answers stay text


@pytest.mark.parametrize("text,message", [
    ("[" * 100000, "JSON nested too deeply to read$"),
    ('{"0": {"Question": "caf\u00e9"}}'.encode("latin-1"),
     "not UTF-8 text \\(.+ at byte 23, line 1\\)$"),
], ids=["deep", "latin-1"])
def test_floodnet_unreadable_text(tmp_path, text, message):
  _floodnet_error(tmp_path, text, message)


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


@pytest.mark.parametrize("data,message", [
    (b"1.tif:is there a road?yes\n2.tif:is there a caf\xe9?no\n",
     ": not UTF-8 text \\(invalid continuation byte at byte 46, line 2\\)$"),
    (b"1.tif:is there a road?yes\r\n2.tif:is there a house? \r\n",
     ":2: empty answer in '2.tif:is there a house\\? '$"),
])
def test_rsivqa_unreadable_lines(tmp_path, data, message):
  path = tmp_path / "x.txt"
  path.write_bytes(data)
  with pytest.raises(RSVQAError, match=f"^{path}{message}"):
    other_datasets.read_rsivqa(str(tmp_path))


def test_rsivqa_line_endings(tmp_path):
  (tmp_path / "x.txt").write_bytes(b"1.tif:is there a road?yes\r\n\r\n2.tif:where is it?left\r"
                                   b"3.tif:is there a car?no")
  s = other_datasets.read_rsivqa(str(tmp_path))["all"]
  assert s.answer.tolist() == s.raw_answer.tolist() == ["yes", "left", "no"]


def test_an_official_folder_read_as_floodnet_or_rsivqa_names_its_layout(tmp_path):
  """An LR folder given --dataset floodnet said only that no FloodNet file was there."""
  from rsvqa_jax.data import synthetic  # pylint: disable=g-import-not-at-top
  root = str(tmp_path / "lr")
  synthetic.generate(root, "lr", images=4, seed=0, questions_per_image=2)
  hint = ("; the folder holds dataset lr: name it with --dataset lr (dataset='lr' from Python; "
          "in a training config, data.name=lr)")
  for name, message in (("floodnet", "no FloodNet question file"), ("rsivqa", "no RSIVQA")):
    with pytest.raises(RSVQAError, match=message) as info:
      other_datasets.read_any(root, name)
    assert str(info.value).endswith(hint), info.value
  with pytest.raises(RSVQAError) as info:  # a folder of no layout: no hint
    other_datasets.read_any(str(tmp_path), "floodnet")
  assert "the folder holds" not in str(info.value)
