"""The columnar form (data/columnar.py), its streamed JSON (json_stream.py) and the RSVQAxBEN-size
synthetic question set (synthetic_xben.py): round trips against the JSON reader, rebuilds,
errors, and validate / analyze / training inputs on a small xben set."""
import fcntl
import json
import logging
import os
import shutil
import threading

import numpy as np
import pytest

from rsvqa_jax import cli
from rsvqa_jax.data import columnar
from rsvqa_jax.data import json_stream
from rsvqa_jax.data import pipeline
from rsvqa_jax.data import records
from rsvqa_jax.data import rsvqa_json
from rsvqa_jax.data import synthetic
from rsvqa_jax.data import split_files
from rsvqa_jax.data import synthetic_xben
from rsvqa_jax.data.answers import AnswerVocab
from rsvqa_jax.data.tokenizers import WordTokenizer
from rsvqa_jax.errors import RSVQAError
from rsvqa_jax.train import inputs
from test_train_support import warnings_of_rsvqa_jax


@pytest.fixture
def xben(tmp_path):
  """A synthetic xben question set of 120 images x 25 questions (3,000 questions)."""
  root = str(tmp_path / "xben")
  counts = synthetic.generate_xben(root, images=120, seed=3, questions_per_image=25)
  return root, counts


def _assert_same(a, b):
  assert list(a.splits) == list(b.splits)
  for split in a.splits:
    for col in records.COLUMNS:
      x, y = getattr(a[split], col), getattr(b[split], col)
      assert x.dtype == y.dtype, (split, col)
      assert x.tolist() == y.tolist(), (split, col)


def test_columnar_round_trips_the_json_reader(xben):
  root, counts = xben
  plain = rsvqa_json.read_dataset(root, "xben", columnar=False)
  mapped = rsvqa_json.read_dataset(root)  # xben: columnar by default
  assert {s: len(plain[s]) for s in plain.splits} == counts
  assert sum(counts.values()) == 3000
  _assert_same(plain, mapped)
  assert isinstance(mapped["train"].question_id, np.memmap)
  assert mapped.image_size == (120, 120)
  assert mapped.image_path(5) == os.path.join(root, "Images", "5.tif")


def test_columnar_round_trips_lr_and_the_hand_written_xben(tmp_path):
  root = str(tmp_path / "lr")
  synthetic.generate(root, "lr", images=6, seed=1, questions_per_image=20)
  # LR counts are binned: `answer` and `raw_answer` differ, both must come back
  _assert_same(rsvqa_json.read_dataset(root, "lr", columnar=False),
               rsvqa_json.read_dataset(root, "lr", columnar=True))


def test_columnar_is_built_once_and_rebuilt_when_a_file_changes(xben, monkeypatch):
  root, _ = xben
  first = columnar.ensure(root, "xben")
  assert os.path.dirname(first) == os.path.join(root, columnar.CACHE_DIR)
  calls = []
  real_build = columnar.build
  monkeypatch.setattr(columnar, "build", lambda *a: calls.append(a) or real_build(*a))
  assert columnar.ensure(root, "xben") == first and not calls  # cached
  path = split_files.split_file(root, "xben", "test", "answers")
  with open(path) as f:
    data = json.load(f)
  changed = data["answers"][0]
  changed["answer"] = "yes" if changed["answer"] != "yes" else "no"
  with open(path, "w") as f:
    json.dump(data, f)
  second = columnar.ensure(root, "xben")
  assert second != first and len(calls) == 1
  assert not os.path.exists(first)  # the entry of the old files is removed
  test = rsvqa_json.read_dataset(root)["test"]
  row = int(np.flatnonzero(test.question_id == changed["question_id"])[0])
  assert test.answer[row] == changed["answer"]
  _assert_same(rsvqa_json.read_dataset(root, columnar=False), rsvqa_json.read_dataset(root))


def test_a_cache_entry_without_its_manifest_is_rebuilt(xben):
  root, _ = xben
  folder = columnar.ensure(root, "xben")
  os.remove(os.path.join(folder, "manifest.json"))
  assert columnar.ensure(root, "xben") == folder
  _assert_same(rsvqa_json.read_dataset(root, columnar=False), rsvqa_json.read_dataset(root))


def test_a_killed_build_leaves_nothing_the_next_build_keeps(xben):
  root, _ = xben
  folder = columnar.ensure(root, "xben")
  parent, key = os.path.split(folder)
  shutil.rmtree(folder)
  stale, other = os.path.join(parent, f".tmp-{key}-killed"), os.path.join(parent, ".tmp-x-live")
  for tmp in (stale, other):
    os.makedirs(tmp)
    open(os.path.join(tmp, "train.question_id.npy"), "wb").close()
  assert columnar.ensure(root, "xben") == folder
  assert not os.path.exists(stale) and os.path.isdir(other)  # another entry's is not ours
  assert sorted(e for e in os.listdir(parent) if e.startswith(".tmp-")) == [".tmp-x-live"]


class _Said(logging.Handler):
  """Sets `event` when a record says `text`."""

  def __init__(self, text):
    super().__init__(logging.INFO)
    self.text, self.event = text, threading.Event()

  def emit(self, record):
    if record.getMessage() == self.text:
      self.event.set()


def test_a_second_builder_waits_and_uses_the_first_ones_entry(xben, tmp_path, monkeypatch):
  """Another process's build is the lock held on a second descriptor of this one (an flock is
  per open file): the builder waits, the entry appears, the lock is released, nothing is built."""
  root, _ = xben
  built = columnar.ensure(root, "xben", str(tmp_path / "elsewhere"))
  parent = str(tmp_path / "cache")
  key = os.path.basename(built)
  os.makedirs(parent)
  calls = []
  monkeypatch.setattr(columnar, "build", lambda *a: calls.append(a))
  said = _Said(f"{parent}/{key}: waiting for another process's build of it")
  logger = logging.getLogger("rsvqa_jax.storage")
  level = logger.level
  logger.addHandler(said)
  logger.setLevel(logging.INFO)
  other = os.open(os.path.join(parent, f".{key}.lock"), os.O_RDWR | os.O_CREAT)
  try:
    fcntl.flock(other, fcntl.LOCK_EX)
    result = []
    waiter = threading.Thread(target=lambda: result.append(columnar.ensure(root, "xben", parent)))
    waiter.start()
    assert said.event.wait(timeout=120), "the second builder never said it waits"
    shutil.copytree(built, os.path.join(parent, key))  # the other process's entry, complete
  finally:
    os.close(other)  # releases the flock
    logger.removeHandler(said)
    logger.setLevel(level)
  waiter.join()
  assert result == [os.path.join(parent, key)] and calls == []


def test_read_only_dataset_folder_caches_elsewhere(xben, tmp_path, monkeypatch):
  root, _ = xben
  monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
  monkeypatch.setattr(os, "access", lambda path, mode: False)
  assert columnar.cache_parent(root).startswith(str(tmp_path / "cache"))
  # A cache folder that cannot be made (XDG_CACHE_HOME=/dev/null, a read-only home) was
  # '/dev/null/rsvqa_jax: not a directory', naming no setting and no reason for a cache.
  (tmp_path / "file").write_text("")
  monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "file"))
  with pytest.raises(RSVQAError, match=rf"^{root} is read-only, so its columnar cache goes under "
                     r"\$XDG_CACHE_HOME .*: not a directory; set XDG_CACHE_HOME to a folder you "
                     "can write$"):
    columnar.ensure(root, "xben")


def test_blocks_cut_between_entries_only(tmp_path):
  entries = [{"id": i, "question": f"tricky }},{{ \"{i}\" [", "answers_ids": [i, {"x": [i]}]}
             for i in range(300)]
  path = tmp_path / "q.json"
  path.write_text(json.dumps({"questions": entries}, indent=1))
  read = [e for block in json_stream.blocks(str(path), "questions", block_bytes=97) for e in block]
  assert read == entries
  assert list(json_stream.blocks(str(tmp_path / "q.json"), "questions")) == [entries]
  path.write_text('{"questions": []}')
  assert [e for b in json_stream.blocks(str(path), "questions") for e in b] == []


def test_blocks_hand_other_forms_to_the_plain_reader(tmp_path):
  path = tmp_path / "q.json"
  path.write_text('{"info": 1, "questions": [{"id": 1}, {"id": 2}]}')
  assert [e for b in json_stream.blocks(str(path), "questions") for e in b] == [{"id": 1}, {"id": 2}]
  text = json.dumps({"questions": [{"id": i} for i in range(200)]})
  path.write_text(text[:700] + "#" + text[700:])
  with pytest.raises(RSVQAError, match=r"q.json: malformed JSON at line 1 column 701"):
    list(json_stream.blocks(str(path), "questions", block_bytes=64))
  path.write_text('{"questions": [{"id": 1, "id": 2}]}')
  with pytest.raises(RSVQAError, match="key 'id' appears twice"):
    list(json_stream.blocks(str(path), "questions"))


def _edit(root, split, kind, fn, layout="xben"):
  path = split_files.split_file(root, layout, split, kind)
  with open(path) as f:
    data = json.load(f)
  fn(data[kind])
  with open(path, "w") as f:
    json.dump(data, f)


@pytest.mark.parametrize("kind, fn, message", [
    ("images", lambda e: e[0]["questions_ids"].append(10**9), "lists question 1000000000 that "
     "does not exist in RSVQAxBEN_split_train_questions.json"),
    ("questions", lambda e: e[0].update(img_id=10**9), "has img_id 1000000000 that points to no "
     "active image"),
    ("questions", lambda e: e[0].update(answers_ids=[10**9]), "points to no active answer"),
    ("questions", lambda e: e[0].update(question=" "), "has an empty question string"),
    ("questions", lambda e: e[0].update(answers_ids=[]), r"has answers_ids \[\]: it names no"),
    ("questions", lambda e: e[0].update(img_id="0"), "has img_id '0': expected an integer id"),
    ("questions", lambda e: e[0].update(img_id=2**64), "has img_id 18446744073709551616: out of "
     r"range: ids are whole numbers from 0 to 2\*\*63-1$"),
    ("answers", lambda e: e[0].update(answer=None), "is None: expected a non-empty string"),
    ("answers", lambda e: e[0].update(answer="no\ud800"), r"is 'no\\ud800': not valid Unicode"),
    ("questions", lambda e: e[0].update(question="Is it\udc80?"), "not valid Unicode"),
    ("answers", lambda e: e.append(dict(e[0])), r"id \d+ appears twice \(entries 0 and \d+\)"),
    ("questions", lambda e: e[0].update(active="false"), "has active 'false'"),
    ("images", lambda e: e[0].pop("active"), "has no 'active' key"),
])
def test_columnar_refuses_what_the_json_reader_refuses(xben, kind, fn, message):
  root, _ = xben
  _edit(root, "train", kind, fn)
  for read_columnar in (False, True):
    with pytest.raises(RSVQAError, match=message):
      rsvqa_json.read_dataset(root, "xben", columnar=read_columnar)


def test_both_readers_refuse_a_question_type_outside_the_lr_layout(tmp_path):
  root = str(tmp_path / "lr")
  synthetic.generate(root, "lr", images=6, seed=0, questions_per_image=10)
  colour = lambda e: next(q for q in e if q["active"]).update(type="colour")
  _edit(root, "val", "questions", colour, "lr")
  for read_columnar in (False, True):
    with pytest.raises(RSVQAError, match=r"LR_split_val_questions.json: question \d+ has type "
                                         r"'colour': the LR layout's types are comp, count"):
      rsvqa_json.read_dataset(root, "lr", columnar=read_columnar)


def test_both_readers_name_the_questions_no_image_lists(xben, caplog):
  """A question its image does not list is left out (a sample is reached from its image), with a
  WARNING counting them, by the JSON reader and the columnar one alike."""
  root, _ = xben
  dropped = []

  def unlist(images):
    dropped.extend(images[0]["questions_ids"][:2])
    del images[0]["questions_ids"][:2]
  _edit(root, "train", "images", unlist)
  for read_columnar in (False, True):
    caplog.clear()
    with warnings_of_rsvqa_jax(caplog):
      train = rsvqa_json.read_dataset(root, "xben", columnar=read_columnar)["train"]
    assert not set(dropped) & set(train.question_id.tolist())
    warned = [m for m in (r.getMessage() for r in caplog.records) if "listed by no" in m]
    assert warned == [f"{split_files.split_file(root, 'xben', 'train', 'questions')}: 2 active "
                      "question(s) listed by no active image of RSVQAxBEN_split_train_images.json "
                      f"(the first: {dropped[0]}), left out of the split"], warned


def test_both_readers_count_inactive_questions_an_active_image_lists(xben, caplog):
  """An inactive question its active image lists is left out, as its flag says, with a WARNING
  counting them (the original loader reads no question's flag and would keep it)."""
  root, _ = xben
  before = rsvqa_json.read_dataset(root, "xben", columnar=False)["train"]
  off = []

  def deactivate(questions):
    for q in [q for q in questions if q["active"]][:3]:
      q["active"] = False
      off.append(q["id"])
  _edit(root, "train", "questions", deactivate)
  for read_columnar in (False, True):
    caplog.clear()
    with warnings_of_rsvqa_jax(caplog):
      train = rsvqa_json.read_dataset(root, "xben", columnar=read_columnar)["train"]
    assert len(train) == len(before) - 3 and not set(off) & set(train.question_id.tolist())
    warned = [m for m in (r.getMessage() for r in caplog.records) if "inactive in" in m]
    assert warned == [f"{split_files.split_file(root, 'xben', 'train', 'images')}: active images "
                      "list 3 question(s) that are inactive in RSVQAxBEN_split_train_questions.json"
                      f" (the first: {off[0]}), left out of the split (the original RSVQA loader "
                      "keeps them)"], warned


def test_a_cached_entry_says_again_what_its_build_warned_of(xben, caplog):
  """The warnings come from the files, which still hold what they warn of when the columnar
  form is read from its cache: each read says them again, naming the cache entry."""
  root, _ = xben
  _edit(root, "train", "images", lambda images: images[0]["questions_ids"].pop(0))
  said = []
  for _ in range(3):
    caplog.clear()
    with warnings_of_rsvqa_jax(caplog):
      rsvqa_json.read_dataset(root, "xben", columnar=True)
    said.append([m for m in (r.getMessage() for r in caplog.records) if "listed by no" in m])
  folder = columnar.ensure(root, "xben")
  assert len(said[0]) == 1 and said[0][0].endswith("left out of the split"), said
  assert said[1] == said[2] == [f"{said[0][0]} (columnar cache entry {folder})"], said


def _read_by_both_readers(root, caplog, needle):
  """(train split, its WARNINGs holding `needle`) as the JSON reader, then the columnar one,
  read the folder."""
  for read_columnar in (False, True):
    caplog.clear()
    with warnings_of_rsvqa_jax(caplog):
      train = rsvqa_json.read_dataset(root, "xben", columnar=read_columnar)["train"]
    yield train, [m for m in (r.getMessage() for r in caplog.records) if needle in m]


def test_both_readers_count_answers_naming_another_question(xben, caplog):
  """An answer whose question_id is not the question leading to it (another id, or null) keeps
  its sample, as answers_ids says, with one WARNING counting them; an answer with no question_id
  is not counted."""
  root, _ = xben
  before = rsvqa_json.read_dataset(root, "xben", columnar=False)["train"]

  def relink(answers):
    answers[0]["question_id"] += 1
    answers[1]["question_id"] = None
    del answers[2]["question_id"]
  _edit(root, "train", "answers", relink)
  a_path = split_files.split_file(root, "xben", "train", "answers")
  said = []
  for train, warned in _read_by_both_readers(root, caplog, "question_id other"):
    assert train.question_id.tolist() == before.question_id.tolist()
    assert train.answer.tolist() == before.answer.tolist()
    assert len(warned) == 1 and warned[0].startswith(
        f"{a_path}: 2 answer(s) with a question_id other than the question whose answers_ids "
        "lead to them (the first: answer "), warned
    assert warned[0].endswith("; the answers_ids link is used"), warned
    said.append(warned[0])
  assert said[0] == said[1], said  # the same first answer named by both readers
  assert ", not an integer id" not in said[0]  # answer 0 names another question's id
  caplog.clear()
  with warnings_of_rsvqa_jax(caplog):
    split_files.warn_back_links(a_path, [(0, "0", 0)])
  assert "answer 0 has question_id '0', not an integer id, reached from question 0)" in caplog.text


def test_both_readers_count_questions_of_several_answers(xben, caplog):
  """A question listing several answers_ids is answered by its first, as before, with one
  WARNING counting such questions (the others were dropped unseen)."""
  root, _ = xben
  before = rsvqa_json.read_dataset(root, "xben", columnar=False)["train"]
  chosen = []

  def more_answers(questions):
    for q in questions[:2]:
      q["answers_ids"].append(questions[5]["answers_ids"][0])
      chosen.append(q["id"])
  _edit(root, "train", "questions", more_answers)
  q_path = split_files.split_file(root, "xben", "train", "questions")
  said = []
  for train, warned in _read_by_both_readers(root, caplog, "several answers_ids"):
    assert train.answer.tolist() == before.answer.tolist()
    assert len(warned) == 1, warned
    head = f"{q_path}: 2 question(s) list several answers_ids (the first: question "
    tail = "); each is answered by its first one, the others are not read"
    assert warned[0].startswith(head) and warned[0].endswith(tail), warned
    said.append(int(warned[0][len(head):-len(tail)]))
  assert said[0] == said[1] and said[0] in chosen, said


def test_missing_split_file_is_one_line(xben):
  root, _ = xben
  os.remove(split_files.split_file(root, "xben", "val", "images"))
  with pytest.raises(RSVQAError, match="RSVQAxBEN_split_val_images.json: split file missing"):
    rsvqa_json.read_dataset(root)


def test_xben_synth_answers_follow_the_image_labels(tmp_path, capsys):
  root = str(tmp_path / "x")
  assert cli.main(["synth", "--variant", "xben", "--images", "40", "--out", root]) == 0
  assert "wrote 40 image ids and 1000 questions" in capsys.readouterr().out
  assert split_files.detect_variant(root) == "xben"
  manifest = synthetic.read_manifest(root)
  assert manifest["variant"] == "xben" and manifest["questions_per_image"] == 25
  assert not os.path.exists(os.path.join(root, "Images"))  # image ids only
  labels = {}
  for split in ("train", "val", "test"):
    for e in split_files.load_json_list(split_files.split_file(root, "xben", split, "images"), "images"):
      labels[e["id"]] = e["labels"]
  assert len(labels) == 40 and all(1 <= len(v) <= 6 for v in labels.values())
  ds = rsvqa_json.read_dataset(root)
  checked = 0
  for split in ds.splits.values():
    for image, qtype, question, answer in zip(split.image_id.tolist(), split.qtype.tolist(),
                                              split.question.tolist(), split.answer.tolist()):
      own = labels[image]
      if question in synthetic_xben.LC_FORMS:
        assert qtype == "LC" and answer == ", ".join(own)
        checked += 1
      elif question.startswith("Are there ") and question.count("?") == 1 and " or " not in \
          question and " and " not in question and not question.startswith("Are there no "):
        subject = question[len("Are there "):-1].replace(" in the image", "")
        if subject in [c.lower() for c in synthetic_xben.CLASSES]:
          assert qtype == "presence"
          assert answer == ("yes" if subject in [c.lower() for c in own] else "no"), question
          checked += 1
  assert checked > 100
  assert cli.main(["synth", "--variant", "xben", "--out", root, "--balanced"]) == 2
  assert "--plant, --balanced and --answerability are for lr and hr" in capsys.readouterr().err


def test_validate_and_analyze_on_xben(xben, tmp_path, capsys):
  root, counts = xben
  assert cli.main(["validate", "--data", root, "--skip-images"]) == 0
  out = capsys.readouterr().out
  assert "dataset xben" in out and str(counts["train"]) in out and out.strip().endswith("ok")
  assert cli.main(["analyze", "--data", root, "--dataset", "xben", "--out", str(tmp_path / "a")]) == 0
  with open(tmp_path / "a" / "types_test.csv") as f:
    text = f.read()
  assert f"All,{counts['test']}," in text and "\nLand cover," in text and "\nPresence," in text


def test_encode_split_tokenises_distinct_questions_as_each_one(xben, caplog):
  root, _ = xben
  ds = rsvqa_json.read_dataset(root)
  vocab = AnswerVocab.for_dataset(ds)
  tokenizer = WordTokenizer.build(inputs.dataset_words(ds))
  image_ids = np.unique(np.concatenate([s.image_id for s in ds.splits.values()]))
  got = inputs.encode_split(ds["train"], vocab, tokenizer, image_ids, 50, (8, 16, 24, 32, 48, 64))
  one_by_one = [tokenizer.encode(q) for q in ds["train"].question.tolist()]
  assert got.lengths.tolist() == [len(x) for x in one_by_one]
  for row, ids in zip(got.columns["tokens"], one_by_one):
    assert row[:len(ids)].tolist() == ids and not row[len(ids):].any()
  assert got.columns["image_index"].tolist() == np.searchsorted(
      image_ids, ds["train"].image_id).tolist()
  longest = max(len(x) for x in one_by_one)
  questions = ds["train"].question.tolist()
  cut = sum(len(x) == longest for x in one_by_one)
  distinct = len({q for q, x in zip(questions, one_by_one) if len(x) == longest})
  with warnings_of_rsvqa_jax(caplog, logging.INFO):
    short = inputs.encode_split(ds["train"], vocab, tokenizer, image_ids, longest - 1, (8,))
  assert short.lengths.max() == longest - 1
  assert [r.getMessage() for r in caplog.records] == [  # the cut was silent
      f"split train: {cut} question(s) ({distinct} distinct) longer than "
      f"text.max_length={longest - 1} tokens, cut to it"]


def test_xben_synth_is_deterministic_and_the_benchmark_renders(tmp_path):
  a, b = str(tmp_path / "a"), str(tmp_path / "b")
  synthetic.generate_xben(a, images=30, seed=5, questions_per_image=4)
  synthetic.generate_xben(b, images=30, seed=5, questions_per_image=4)
  for split in ("train", "val", "test"):
    for kind in split_files.KINDS:
      with open(split_files.split_file(a, "xben", split, kind), "rb") as f, \
          open(split_files.split_file(b, "xben", split, kind), "rb") as g:
        assert f.read() == g.read()
  from benchmarks import run  # pylint: disable=g-import-not-at-top
  row = {"stage": "epoch", "wall_s": 2.0, "cpu_s": 1.5, "peak_rss_bytes": 3 * 2**30, "batches": 7}
  text = "\n".join(run.RENDER["xben_scale"]({"images": 30, "questions": 120, "cpu": "x",
                                               "rows": [row]}))
  assert "| epoch | 2 | 1.5 | 3 | batches 7 |" in text


def test_row_table_indexes_like_the_full_column():
  table = np.array([[1, 2, 0], [3, 0, 0]], np.int32)
  col = pipeline.RowTable(table, [1, 0, 1])
  full = np.array([[3, 0, 0], [1, 2, 0], [3, 0, 0]], np.int32)
  assert col.shape == (3, 3) and col.ndim == 2 and col.dtype == np.int32 and len(col) == 3
  np.testing.assert_array_equal(np.asarray(col), full)
  for key in (0, 2, [2, 1], np.array([0, 0, 1]), slice(1, 3), ([0, 1], slice(None, 2)),
              (1, slice(None, 1))):
    np.testing.assert_array_equal(col[key], full[key])


def test_split_columns_with_token_rows_give_the_same_batches(xben):
  root, _ = xben
  split = rsvqa_json.read_dataset(root)["val"]
  image_ids = np.unique(split.image_id)
  texts, codes = np.unique(split.question.astype(str), return_inverse=True)
  lengths = np.array([len(t.split()) for t in texts])
  table = np.zeros((len(texts), 32), np.int32)
  for i, n in enumerate(lengths):
    table[i, :n] = np.arange(1, n + 1) + i
  answers = np.zeros(len(split), np.int32)
  shared = pipeline.split_columns(split, image_ids, answers, table, lengths, token_rows=codes)
  full = pipeline.split_columns(split, image_ids, answers, table[codes], lengths[codes])
  kwargs = dict(batch_size=16, shuffle=True, seed=1, num_epochs=1, drop_remainder=False,
                length_buckets=(8, 16, 32), lengths=lengths[codes])
  pairs = zip(pipeline.batch_iterator(shared, **kwargs), pipeline.batch_iterator(full, **kwargs))
  n = 0
  for a, b in pairs:
    assert a.keys() == b.keys()
    for k in a:
      np.testing.assert_array_equal(a[k], b[k])
    n += len(a["index"])
  assert n == len(split)


def test_both_readers_read_a_split_file_with_a_byte_order_mark(tmp_path):
  root = str(tmp_path / "lr")
  synthetic.generate(root, "lr", images=6, seed=0, questions_per_image=10)
  plain = rsvqa_json.read_dataset(root, "lr", columnar=False)
  path = split_files.split_file(root, "lr", "train", "questions")
  with open(path, "rb") as f:
    data = f.read()
  with open(path, "wb") as f:
    f.write(b"\xef\xbb\xbf" + data)
  for read_columnar in (False, True):
    again = rsvqa_json.read_dataset(root, "lr", columnar=read_columnar)
    np.testing.assert_array_equal(again.splits["train"].question_id,
                                  plain.splits["train"].question_id)
