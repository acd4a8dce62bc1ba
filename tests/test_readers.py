"""Official-layout readers: round trips from the generator, xBEN, and every kind of bad input."""
import json
import os
import pathlib
import re
import shutil
import threading

import numpy as np
import pytest
import tifffile

from rsvqa_jax.data import answers
from rsvqa_jax.data import records
from rsvqa_jax.data import rsvqa_json
from rsvqa_jax.data import split_files
from rsvqa_jax.data import synthetic
from rsvqa_jax.errors import RSVQAError
from test_train_support import warnings_of_rsvqa_jax


@pytest.fixture(scope="module")
def lr(tmp_path_factory):
  out = str(tmp_path_factory.mktemp("lr"))
  return out, synthetic.generate(out, "lr", images=12, seed=2, questions_per_image=25)


@pytest.fixture(scope="module")
def hr(tmp_path_factory):
  out = str(tmp_path_factory.mktemp("hr"))
  return out, synthetic.generate(out, "hr", images=8, seed=2, questions_per_image=20)


@pytest.fixture
def broken(lr, tmp_path):
  """A private copy of the tiny LR set's JSON files to damage (the readers open no image)."""
  root = str(tmp_path / "copy")
  shutil.copytree(lr[0], root, ignore=shutil.ignore_patterns("*.tif", "*.npz"))
  return root


def _assert_same(split, expected):
  assert len(split) == len(expected) > 0
  for col in records.COLUMNS:
    np.testing.assert_array_equal(getattr(split, col), getattr(expected, col), err_msg=col)


def test_lr_round_trip(lr):
  root, gen = lr
  assert split_files.detect_variant(root) == "lr"
  ds = rsvqa_json.read_dataset(root)
  assert ds.name == "lr" and list(ds.splits) == ["train", "val", "test"] and ds.image_size == (256, 256)
  for name, split in ds.splits.items():
    _assert_same(split, gen.splits[name])
  assert ds.image_path(3) == os.path.join(root, "Images_LR", "3.tif")
  assert set(ds["train"].answer.tolist()) <= {"yes", "no", "rural", "urban"} | set(answers.LR_COUNT_BINS)
  count = ds["train"].qtype == "count"
  assert all(a.isdigit() for a in ds["train"].raw_answer[count])


def test_hr_round_trip_both_test_sets(hr):
  root, gen = hr
  assert split_files.detect_variant(root) == "hr"
  ds = rsvqa_json.read_dataset(root, "hr")
  assert list(ds.splits) == ["train", "val", "test", "test_phili"] and ds.image_size == (512, 512)
  for name, split in ds.splits.items():
    _assert_same(split, gen.splits[name])
  assert not set(ds["test"].image_id.tolist()) & set(ds["test_phili"].image_id.tolist())
  area = ds["train"].qtype == "area"
  assert set(ds["train"].answer[area].tolist()) <= set(answers.HR_AREA_BINS)
  count = ds["train"].qtype == "count"
  np.testing.assert_array_equal(ds["train"].answer[count], ds["train"].raw_answer[count])
  assert ds.image_path(0) == os.path.join(root, "Data", "0.tif")


def _write_xben(root):
  """A hand-written RSVQAxBEN folder: 4 images, 7 questions, global ids with fillers."""
  os.makedirs(os.path.join(root, "Images"))
  split_of_image = ["train", "train", "val", "test"]
  qs = [(0, "LC", "Which land cover classes are in the image?", "Coniferous forest, Pastures"),
        (0, "presence", "Are there water bodies?", "no"),
        (1, "presence", "Is there some urban fabric?", "yes"),
        (1, "LC", "Which land cover classes are in the image?", "Pastures"),
        (2, "presence", "Are there water bodies?", "yes"),
        (3, "presence", "Is there some urban fabric?", "no"),
        (3, "LC", "Which land cover classes are in the image?", "Sea and ocean")]
  for i in range(4):
    tifffile.imwrite(os.path.join(root, "Images", f"{i}.tif"), np.full((120, 120, 3), 40 * i, np.uint8),
                     photometric="rgb")
  for split in ("train", "val", "test"):
    imgs = [{"id": i, "questions_ids": [q for q, e in enumerate(qs) if e[0] == i], "active": True}
            if split_of_image[i] == split else {"id": i, "active": False} for i in range(4)]
    active = [split_of_image[e[0]] == split for e in qs]
    questions = [{"id": q, "img_id": e[0], "type": e[1], "question": e[2], "answers_ids": [q], "active": True}
                 if active[q] else {"id": q, "active": False} for q, e in enumerate(qs)]
    answers_ = [{"id": q, "question_id": q, "answer": e[3], "active": True} if active[q] else
                {"id": q, "active": False} for q, e in enumerate(qs)]
    for kind, entries in (("images", imgs), ("questions", questions), ("answers", answers_)):
      with open(os.path.join(root, f"RSVQAxBEN_split_{split}_{kind}.json"), "w") as f:
        json.dump({kind: entries}, f)


def test_xben_reader_and_top_k(tmp_path, monkeypatch):
  root = str(tmp_path / "xben")
  _write_xben(root)
  assert split_files.detect_variant(root) == "xben"
  ds = rsvqa_json.read_dataset(root)
  assert ds.image_size == (120, 120) and ds.image_path(2) == os.path.join(root, "Images", "2.tif")
  train = ds["train"]
  assert train.question_id.tolist() == [0, 1, 2, 3] and train.image_id.tolist() == [0, 0, 1, 1]
  assert train.answer.tolist() == ["Coniferous forest, Pastures", "no", "yes", "Pastures"]
  assert ds["test"].question_id.tolist() == [5, 6] and ds["val"].qtype.tolist() == ["presence"]
  monkeypatch.setattr(answers, "XBEN_TOP_K", 2)
  vocab = answers.AnswerVocab.for_dataset(ds)
  assert vocab.answers == ("Coniferous forest, Pastures", "Pastures")  # all once: alphabetical
  assert vocab.dropped == {"no": 1, "yes": 1} and vocab.n_dropped_samples == 2
  assert vocab.encode(ds["test"].answer.tolist()).n_unknown == 2


def test_detect_variant_errors(tmp_path, lr):
  with pytest.raises(RSVQAError, match="holds none"):
    split_files.detect_variant(str(tmp_path))
  shutil.copy(os.path.join(lr[0], "LR_split_train_questions.json"), tmp_path)
  (tmp_path / "USGS_split_train_questions.json").write_text("{}")
  with pytest.raises(RSVQAError, match=r"several layouts \(lr, hr\); name one with --dataset$"):
    split_files.detect_variant(str(tmp_path))
  with pytest.raises(RSVQAError, match="unknown dataset"):
    rsvqa_json.read_dataset(lr[0], "floodnet")


@pytest.mark.parametrize("columnar", [False, True])
def test_a_folder_read_as_another_layout_names_its_own(lr, columnar):
  """An LR folder read as HR said only that USGS_split_train_images.json was missing."""
  for name in ("hr", "xben"):
    prefix = split_files.LAYOUTS[name].prefix
    with pytest.raises(RSVQAError, match=(
        f"^{re.escape(lr[0])}: no {prefix}_split_train_questions.json \\(dataset {name}\\); the "
        "folder holds dataset lr: name it with --dataset lr \\(dataset='lr' from Python; in a "
        "training config, data.name=lr\\)$")):
      rsvqa_json.read_dataset(lr[0], name, columnar=columnar)


def test_a_folder_of_two_layouts_read_as_a_third_names_both(lr, hr, tmp_path):
  for layout, (root, _) in (("lr", lr), ("hr", hr)):
    name = split_files.split_file(root, layout, "train", "questions")
    shutil.copy(name, tmp_path)
  with pytest.raises(RSVQAError, match=r"the folder holds datasets lr, hr: name one with "
                                       r"--dataset \(dataset= from Python; in a training "
                                       r"config, data.name\)$"):
    rsvqa_json.read_dataset(str(tmp_path), "xben")


def _edit(root, split, kind, fn):
  path = split_files.split_file(root, "lr", split, kind)
  with open(path) as f:
    data = json.load(f)
  fn(data[kind])
  with open(path, "w") as f:
    json.dump(data, f)
  return path


def _first_active(entries):
  return next(e for e in entries if e["active"])


def test_missing_split_file(broken):
  path = split_files.split_file(broken, "lr", "val", "answers")
  os.remove(path)
  with pytest.raises(RSVQAError, match=f"^{path}: split file missing$"):
    rsvqa_json.read_dataset(broken, "lr")


def test_malformed_json(broken):
  path = split_files.split_file(broken, "lr", "test", "questions")
  with open(path, "w") as f:
    f.write('{"questions": [\n  {"id": 0, "active": false},\n  {"id": 1 "active": false}\n]}')
  with pytest.raises(RSVQAError, match=f"^{path}: malformed JSON at line 3 column 12: "):
    rsvqa_json.read_dataset(broken, "lr")


def test_wrong_top_level(broken):
  path = split_files.split_file(broken, "lr", "train", "images")
  with open(path, "w") as f:
    json.dump([{"id": 0}], f)
  with pytest.raises(RSVQAError, match="expected a JSON object with a 'images' list"):
    rsvqa_json.read_dataset(broken, "lr")


def test_question_img_id_points_nowhere(broken):
  def damage(qs):
    _first_active(qs)["img_id"] = 99999
  path = _edit(broken, "train", "questions", damage)
  with pytest.raises(RSVQAError, match=f"^{path}: question \\d+ has img_id 99999 that points to no active image"):
    rsvqa_json.read_dataset(broken, "lr")


def test_answers_ids_points_nowhere(broken):
  def damage(qs):
    _first_active(qs)["answers_ids"] = [123456]
  path = _edit(broken, "val", "questions", damage)
  with pytest.raises(RSVQAError, match=f"^{path}: question \\d+ has answers_ids \\[123456\\]"):
    rsvqa_json.read_dataset(broken, "lr")


def test_empty_answers_ids(broken):
  _edit(broken, "val", "questions", lambda qs: _first_active(qs).update(answers_ids=[]))
  with pytest.raises(RSVQAError, match="answers_ids \\[\\]"):
    rsvqa_json.read_dataset(broken, "lr")


@pytest.mark.parametrize("question, message", [
    ("  ", "has an empty question string \\(no visible character\\)"),
    ("\u200b\u00a0", "has an empty question string \\(no visible character\\)"),
    ("\u0301\u0301", "has an empty question string \\(no visible character\\)"),  # marks alone
    (123, "has question 123: expected a string"),  # it said "empty question string"
    (None, "has question None: expected a string")])
def test_empty_question(broken, question, message):
  path = _edit(broken, "test", "questions", lambda qs: _first_active(qs).update(question=question))
  with pytest.raises(RSVQAError, match=f"^{path}: question \\d+ {message}$"):
    rsvqa_json.read_dataset(broken, "lr")


def test_non_numeric_count_answer(broken, lr):
  split = lr[1].splits["train"]
  qid = int(split.question_id[split.qtype == "count"][0])
  path = _edit(broken, "train", "answers", lambda ans: ans[qid].update(answer="many"))
  with pytest.raises(RSVQAError, match=f"^{path}: answer {qid} \\(question {qid}\\): count answer 'many'"):
    rsvqa_json.read_dataset(broken, "lr")


def test_missing_key(broken):
  path = _edit(broken, "train", "questions", lambda qs: _first_active(qs).pop("type"))
  with pytest.raises(RSVQAError, match=f"^{path}: entry id \\d+ lacks key 'type'$"):
    rsvqa_json.read_dataset(broken, "lr")


@pytest.mark.parametrize("columnar", [False, True])
def test_questions_are_read_stripped_and_composed(broken, lr, columnar):
  """A trailing space made every test question another question than its train twin (the
  question-level prior fell back to the type's: 72.50 -> 62.50), and a decomposed accent other
  words than the composed one; answers were read stripped and composed already."""
  def spaced(qs):
    for q in qs:
      if q["active"]:
        q["question"] = f"  {q['question']} "
  _edit(broken, "test", "questions", spaced)
  _edit(broken, "val", "questions",
        lambda qs: _first_active(qs).update(question="Is there a fore\u0302t?"))
  ds = rsvqa_json.read_dataset(broken, "lr", columnar=columnar)
  np.testing.assert_array_equal(ds["test"].question, lr[1].splits["test"].question)
  assert "Is there a for\u00eat?" in ds["val"].question.tolist()


def test_inactive_entries_are_skipped(broken, lr):
  split = lr[1].splits["train"]
  qid = int(split.question_id[0])
  _edit(broken, "train", "questions", lambda qs: qs[qid].update(active=False))
  ds = rsvqa_json.read_dataset(broken, "lr")
  assert qid not in ds["train"].question_id and len(ds["train"]) == len(split) - 1


@pytest.mark.parametrize("columnar", [False, True])
def test_a_question_active_in_two_splits_is_warned_of(broken, caplog, columnar):
  """A test image and its questions copied into the train files, active there too: the test
  score is no longer held out, which nothing said."""
  read = lambda kind: json.loads(pathlib.Path(split_files.split_file(broken, "lr", "test", kind))
                                 .read_text())
  test = {kind: read(kind)[kind] for kind in split_files.KINDS}
  image = _active_image(test["images"])
  ids = {"images": [image["id"]], "questions": image["questions_ids"],
         "answers": [i for q in image["questions_ids"] for i in test["questions"][q]["answers_ids"]]}
  for kind in split_files.KINDS:
    _edit(broken, "train", kind, lambda entries, kind=kind: [
        entries.__setitem__(i, test[kind][i]) for i in ids[kind]])
  with warnings_of_rsvqa_jax(caplog):
    ds = rsvqa_json.read_dataset(broken, "lr", columnar=columnar)
  assert set(ids["questions"]) <= set(ds["train"].question_id.tolist())
  shared = [r.getMessage() for r in caplog.records if "active in both" in r.getMessage()]
  assert shared == [f"{broken}: {len(ids['questions'])} question(s) active in both train and test "
                    f"(the first: id {min(ids['questions'])}): test is not held out from train"]


def test_ids_shared_on_other_images_are_not_shared_questions(caplog):
  """Files numbered per split reuse ids on other images: only (id, image) pairs are the same
  question."""
  rows = lambda name, pairs: records.Split.from_rows(name, [
      dict(question_id=q, image_id=i, qtype="presence", question="q", answer="yes",
           raw_answer="yes") for q, i in pairs])
  splits = {"train": rows("train", [(5, 1), (3, 1), (9, 2)]),
            "test": rows("test", [(3, 7), (9, 2), (5, 1), (4, 7)])}
  with warnings_of_rsvqa_jax(caplog):
    split_files.warn_shared_questions("root", splits)
  assert [r.getMessage() for r in caplog.records] == [
      "root: 2 question(s) active in both train and test (the first: id 5): test is not held "
      "out from train"]


def test_no_warning_of_shared_questions_in_disjoint_splits(lr, caplog):
  with warnings_of_rsvqa_jax(caplog):
    rsvqa_json.read_dataset(lr[0], "lr")
  assert not [r for r in caplog.records if "active in both" in r.getMessage()]


def _active_image(imgs):
  return next(e for e in imgs if e["active"] and e["questions_ids"])


def _append_copy(entries):
  """A second entry with the id of an active one and other content: last must not win."""
  entries.append(dict(_first_active(entries), question="Is it a copy?", answer="copy",
                      questions_ids=[]))


def _list_first_question_twice(imgs):
  ids = _active_image(imgs)["questions_ids"]
  ids.append(ids[0])


def _set_first(**fields):
  return lambda entries: _first_active(entries).update(**fields)


def _float_img_id(qs):
  _first_active(qs)["img_id"] = float(_first_active(qs)["img_id"])


TWICE = r"id \d+ appears twice \(entries \d+ and \d+\)$"
NOT_IDS = r": expected a list of non-negative integers$"
# (file to damage, damage, message after "{path}: "): each would silently change the samples.
DAMAGES = {
    "duplicate question id": ("questions", _append_copy, TWICE),
    "duplicate image id": ("images", _append_copy, TWICE),
    "duplicate answer id": ("answers", _append_copy, TWICE),
    "question listed twice": ("images", _list_first_question_twice,
                              r"image \d+ lists id \d+ twice in questions_ids$"),
    "active as a string": ("questions", lambda qs: qs[-1].update(active="false"),
                           r"entry id \d+ has active 'false': expected true or false$"),
    "active as a number": ("images", lambda imgs: imgs[0].update(active=1),
                           r"entry id 0 has active 1: expected true or false$"),
    "no active key": ("answers", lambda answers: _first_active(answers).pop("active"),
                      r"entry id \d+ has no 'active' key: give each entry \"active\": true, or "
                      r"false outside the split$"),
    "null answer": ("answers", _set_first(answer=None),
                    r"answer (\d+) \(question \1\) is None: expected a non-empty string$"),
    "empty answer": ("answers", _set_first(answer="  "),
                     r"answer (\d+) \(question \1\) is '  ': expected a non-empty string$"),
    # A count a tool wrote as a float read "expected a non-empty string", which it is not.
    "float answer": ("answers", _set_first(answer=3.0),
                     r"answer (\d+) \(question \1\) is 3\.0: a JSON number with a decimal "
                     r"point; expected a string or a whole number \(\"3\", 3\)$"),
    "boolean answer": ("answers", _set_first(answer=True),
                       r"answer \d+ \(question \d+\) is True: expected a non-empty string$"),
    "answer with a lone surrogate": ("answers", _set_first(answer="yes\ud800"),
                                     r"answer (\d+) \(question \1\) is 'yes\\ud800': not valid "
                                     r"Unicode: it holds an unpaired surrogate"),
    "question with a lone surrogate": ("questions", _set_first(question="Is there a road\udc80?"),
                                       r"question \d+ has question 'Is there a road\\udc80\?': "
                                       r"not valid Unicode"),
    "null question type": ("questions", _set_first(type=None),
                           r"question \d+ has type None: expected a non-empty string$"),
    "capitalised question type": ("questions", _set_first(type="Count"),
                                  r"question \d+ has type 'Count': the LR layout's types are "
                                  r"comp, count, presence, rural_urban$"),
    "no answer id": ("questions", _set_first(answers_ids=[]),
                     r"question \d+ has answers_ids \[\]: it names no answer$"),
    "float img_id": ("questions", _float_img_id,
                     r"question \d+ has img_id \d+\.0: expected an integer id$"),
    "string img_id": ("questions", _set_first(img_id="0"),
                      r"question \d+ has img_id '0': expected an integer id$"),
    "img_id past int64": ("questions", _set_first(img_id=10**30),
                          r"question \d+ has img_id 10{30}: out of range: ids are whole numbers "
                          r"from 0 to 2\*\*63-1$"),
    "question id past int64": ("questions", _set_first(id=2**70),
                               r"entry \d+ has id \d+: out of range: ids are whole numbers from 0 "
                               r"to 2\*\*63-1$"),
    "answer id past int64": ("questions", _set_first(answers_ids=[0, 2**64]),
                             r"question \d+ has answers_ids \[0, \d+\]: out of range: ids are "
                             r"whole numbers from 0 to 2\*\*63-1$"),
    "float in questions_ids": ("images", lambda i: _active_image(i).update(questions_ids=[0.0]),
                               r"image \d+ has questions_ids \[0\.0\]" + NOT_IDS),
    "float in answers_ids": ("questions", _set_first(answers_ids=[1.5]),
                             r"question \d+ has answers_ids \[1\.5\]" + NOT_IDS),
    "dangling question id": ("images", lambda i: _active_image(i)["questions_ids"].append(999),
                             r"image \d+ lists question 999 that does not exist in "
                             r"LR_split_train_questions.json$"),
    "dangling second answer": ("questions", lambda qs: _first_active(qs)["answers_ids"].append(999),
                               r"question \d+ has answers_ids \[\d+, 999\]: answer 999 does not "
                               r"exist in LR_split_train_answers.json$"),
}


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_bad_ids_and_values(broken, damage):
  kind, fn, message = DAMAGES[damage]
  path = _edit(broken, "train", kind, fn)
  with pytest.raises(RSVQAError, match=f"^{path}: {message}") as e:
    rsvqa_json.read_dataset(broken, "lr")
  assert "\n" not in str(e.value)


@pytest.mark.parametrize("bad_id", [3.0, 3.5, True, "3", None, -1, 2**63])
@pytest.mark.parametrize("kind", split_files.KINDS)
def test_non_integer_ids(broken, kind, bad_id):
  path = _edit(broken, "val", kind, lambda entries: entries[3].update(id=bad_id))
  expected = f"{path}: entry 3 has id {bad_id!r}: " + (
      "out of range: ids are whole numbers from 0 to 2**63-1" if bad_id == 2**63
      else "expected a non-negative integer")
  with pytest.raises(RSVQAError, match=f"^{re.escape(expected)}$"):
    rsvqa_json.read_dataset(broken, "lr")


def _write(path, data):
  with open(path, "wb") as f:
    f.write(data)


def test_duplicate_key_in_one_object(broken):
  path = split_files.split_file(broken, "lr", "test", "answers")
  with open(path) as f:
    text = f.read()
  _write(path, text.replace('"active":true', '"active":true,"active":false', 1).encode())
  with pytest.raises(RSVQAError, match=f"^{path}: key 'active' appears twice in one JSON object$"):
    rsvqa_json.read_dataset(broken, "lr")


@pytest.mark.parametrize("text,message", [
    (b"[" * 100000, "JSON nested too deeply to read$"),
    (b'{"a":' * 100000, "JSON nested too deeply to read$"),
    ('{"questions": [\n"caf\u00e9"]}'.encode("latin-1"),
     r"not UTF-8 text \(invalid continuation byte at byte 20, line 2\)$"),
    (b'{"questions": [{"id": 1' + b"0" * 5000 + b"}]}",
     r"cannot read JSON: it holds a number of more than 4,300 digits$"),
], ids=["deep arrays", "deep objects", "latin-1", "5001 digits"])
def test_unreadable_json_text(broken, text, message):
  path = split_files.split_file(broken, "lr", "val", "questions")
  _write(path, text)
  with pytest.raises(RSVQAError, match=f"^{path}: {message}"):
    rsvqa_json.read_dataset(broken, "lr")


def test_split_file_is_a_directory(broken):
  path = split_files.split_file(broken, "lr", "val", "images")
  os.remove(path)
  os.mkdir(path)
  with pytest.raises(RSVQAError, match=f"^{path}: split file is a directory, not a file$"):
    rsvqa_json.read_dataset(broken, "lr")


def test_split_file_is_a_symlink_loop(broken):
  path = split_files.split_file(broken, "lr", "train", "questions")
  os.remove(path)
  os.symlink(os.path.basename(path), path)  # points at itself
  with pytest.raises(RSVQAError, match=f"^{path}: cannot read split file \\(.+\\)$"):
    rsvqa_json.read_dataset(broken)  # the variant is still detected from the looping file


@pytest.mark.parametrize("columnar", [False, True])
def test_split_file_that_is_a_pipe_is_refused_without_waiting(broken, columnar):
  """Opening a pipe waits for a writer: validate hung there without a word."""
  path = split_files.split_file(broken, "lr", "test", "answers")
  os.remove(path)
  os.mkfifo(path)
  outcome = []

  def read():
    try:
      rsvqa_json.read_dataset(broken, "lr", columnar=columnar)
    except RSVQAError as e:
      outcome.append(str(e))
  reader = threading.Thread(target=read, daemon=True)
  reader.start()
  reader.join(120)
  if reader.is_alive():  # let the hung reader go: a writer closing at once gives it an empty file
    with open(path, "wb"):
      pass
  assert outcome == [f"{path}: split file is a pipe, socket or device, not a file"]


def test_a_subfolder_of_the_asked_layout_wins_over_the_layout_beside_it(lr, hr, tmp_path):
  """An LR folder holding RSVQA_HR/, read as hr, was told to name itself lr, never its HR
  subfolder."""
  top = str(tmp_path / "both")
  shutil.copytree(lr[0], top, ignore=shutil.ignore_patterns("*.tif", "*.npz"))
  inner = os.path.join(top, "RSVQA_HR")
  shutil.copytree(hr[0], inner, ignore=shutil.ignore_patterns("*.tif", "*.npz"))
  with pytest.raises(RSVQAError, match=re.escape(
      f"{top}: no USGS_split_train_questions.json (dataset hr); the dataset files are in "
      f"{inner}: give --data {inner}")):
    rsvqa_json.read_dataset(top, "hr")


def test_a_dataset_folder_given_one_level_too_deep_names_its_parent(lr, tmp_path):
  """Its image folder given for the dataset said only that no split file was there."""
  root = str(tmp_path / "RSVQA_LR")
  shutil.copytree(lr[0], root, ignore=shutil.ignore_patterns("*.tif", "*.npz"))
  images = os.path.join(root, "Images_LR")
  os.makedirs(images, exist_ok=True)
  hint = f"it lies inside the dataset folder {root} (dataset lr): give {root} itself"
  with pytest.raises(RSVQAError, match=f"^{re.escape(f'{images}: {hint}')}$"):
    split_files.detect_variant(images)
  with pytest.raises(RSVQAError, match=re.escape(
      f"{images}: no LR_split_train_questions.json (dataset lr); {hint}") + "$"):
    rsvqa_json.read_dataset(images, "lr")


@pytest.mark.parametrize("columnar", [False, True])
def test_a_dataset_one_folder_deeper_is_named(lr, hr, tmp_path, columnar):
  """A zip's top folder unpacked one level deeper said only that no split file was there."""
  top = str(tmp_path / "top")
  inner = os.path.join(top, "RSVQA_LR")
  shutil.copytree(lr[0], inner, ignore=shutil.ignore_patterns("*.tif", "*.npz"))
  os.mkdir(os.path.join(top, "notes"))
  hint = (f"the dataset files are in {inner}: give --data {inner} (in a training config, "
          f"data.root={inner})")
  with pytest.raises(RSVQAError, match=f"^{re.escape(f'{top}: {hint}')}$"):
    split_files.detect_variant(top)
  with pytest.raises(RSVQAError, match=re.escape(
      f"{top}: no LR_split_train_questions.json (dataset lr); {hint}") + "$"):
    rsvqa_json.read_dataset(top, "lr", columnar=columnar)
  other = os.path.join(top, "RSVQA_HR")
  shutil.copytree(hr[0], other, ignore=shutil.ignore_patterns("*.tif", "*.npz"))
  with pytest.raises(RSVQAError, match=re.escape(
      f"{top}: the dataset files are in its subfolders {other}, {inner}: give one of them with "
      "--data (in a training config, data.root)") + "$"):
    split_files.detect_variant(top)
