"""Tests of the TFDS builders: build tiny official-layout folders without TensorFlow, read back."""
import io
import json
import os
import sys

import numpy as np
import pytest
import tifffile

from rsvqa_jax.data import pipeline
from rsvqa_jax.data import rsvqa_json
from rsvqa_jax.data import synthetic
from rsvqa_jax.data import tfds_builders
from rsvqa_jax.errors import RSVQAError

# Per dataset: file prefix, image folder, tile size, splits, and (type, raw answers) cycled
# through by the questions.
OFFICIAL = {
    "lr": ("LR", "Images_LR", 256, ("train", "val", "test"),
           [("presence", ["yes", "no"]), ("comp", ["no", "yes"]),
            ("count", ["0", "7", "15", "1234"]), ("rural_urban", ["rural", "urban"])]),
    "hr": ("USGS", "Data", 512, ("train", "val", "test", "test_phili"),
           [("presence", ["yes", "no"]), ("comp", ["no"]), ("count", ["3", "12"]),
            ("area", ["0m2", "57m2", "2500m2"])]),
    "xben": ("RSVQAxBEN", "Images", 120, ("train", "val", "test"),
             [("presence", ["yes", "no"]),
              ("LC", ["Coniferous forest, Pastures", "Sea and ocean"])]),
}


def write_official_folder(root, name, images_per_split=2, questions_per_image=3, seed=0):
  """Writes a tiny dataset in the official layout of `name` ("lr", "hr", "xben").

  Every split file lists all global ids, those of other splits as inactive fillers; a
  question's id equals its answer's id. Returns split -> list of the active samples as dicts
  (question_id, image_id, type, question, raw_answer), in file order.
  """
  prefix, image_dir, size, splits, answer_cycle = OFFICIAL[name]
  rng = np.random.default_rng(seed)
  os.makedirs(os.path.join(root, image_dir), exist_ok=True)
  images, questions, answers, split_of_image = [], [], [], []
  expected = {s: [] for s in splits}
  for s, split in enumerate(splits):
    for _ in range(images_per_split):
      image_id = len(images)
      tifffile.imwrite(os.path.join(root, image_dir, f"{image_id}.tif"),
                       rng.integers(0, 256, size=(size, size, 3), dtype=np.uint8),
                       photometric="rgb")
      qids = []
      for _ in range(questions_per_image):
        qid = len(questions)
        qtype, choices = answer_cycle[qid % len(answer_cycle)]
        raw = choices[(qid // len(answer_cycle)) % len(choices)]
        text = f"Is there a road number {qid} in the image?"
        questions.append({"id": qid, "date_added": 1.0, "img_id": image_id, "people_id": 0,
                          "type": qtype, "question": text, "answers_ids": [qid]})
        answers.append({"id": qid, "date_added": 1.0, "question_id": qid, "people_id": 0,
                        "answer": raw})
        expected[split].append({"question_id": qid, "image_id": image_id, "type": qtype,
                                "question": text, "raw_answer": raw})
        qids.append(qid)
      images.append({"id": image_id, "date_added": 1.0, "original_name": f"tile_{image_id}",
                     "sensor": "synthetic", "upperleft_map_x": 0.0, "upperleft_map_y": 0.0,
                     "res_x": "10m", "res_y": "10m", "people_id": 0, "type": "tile",
                     "questions_ids": qids})
      split_of_image.append(split)
  split_of_question = {q["id"]: split_of_image[q["img_id"]] for q in questions}
  for split in splits:
    for kind, entries, owner in (("images", images, lambda e: split_of_image[e["id"]]),
                                 ("questions", questions, lambda e: split_of_question[e["id"]]),
                                 ("answers", answers, lambda e: split_of_question[e["id"]])):
      listed = [dict(e, active=True) if owner(e) == split else {"id": e["id"], "active": False}
                for e in entries]
      with open(os.path.join(root, f"{prefix}_split_{split}_{kind}.json"), "w") as f:
        json.dump({kind: listed}, f)
  return expected


def _sorted_rows(split):
  order = np.argsort(split.question_id)
  return [{c: (int(v) if c.endswith("_id") else v) for c, v in
           (("question_id", split.question_id[i]), ("image_id", split.image_id[i]),
            ("qtype", split.qtype[i]), ("question", split.question[i]),
            ("answer", split.answer[i]), ("raw_answer", split.raw_answer[i]))}
          for i in order]


@pytest.fixture(scope="module", params=sorted(OFFICIAL))
def built(request, tmp_path_factory):
  """(name, manual_dir, expected samples, data_dir, builder of the questions config)."""
  name = request.param
  tmp = tmp_path_factory.mktemp(name)
  manual = str(tmp / "manual")
  expected = write_official_folder(manual, name)
  builder = tfds_builders.build(name, manual, tmp / "tfds")
  return name, manual, expected, tmp / "tfds", builder


def test_questions_match_reader_and_fixture(built):
  name, manual, expected, _, builder = built
  assert "tensorflow" not in sys.modules
  sources = builder.as_data_source()
  assert "tensorflow" not in sys.modules
  assert set(sources) == set(OFFICIAL[name][3])
  dataset = rsvqa_json.read_dataset(manual, name)
  for split_name, source in sources.items():
    assert len(source) == len(expected[split_name]) == 6
    got = tfds_builders.to_split(source, split_name)
    assert _sorted_rows(got) == _sorted_rows(dataset[split_name])
    fixture = sorted(expected[split_name], key=lambda r: r["question_id"])
    np.testing.assert_array_equal(got.question_id, [r["question_id"] for r in fixture])
    assert got.raw_answer.tolist() == [r["raw_answer"] for r in fixture]
    assert got.qtype.tolist() == [r["type"] for r in fixture]
    assert got.question.tolist() == [r["question"] for r in fixture]
    for i in range(len(source)):
      ex = source[i]
      path = os.path.join(manual, ex["image_path"].decode())
      assert path == dataset.image_path(int(ex["image_id"]))
      assert os.path.exists(path)
  assert "tensorflow" not in sys.modules


def test_answers_are_normalised(built):
  name, _, _, _, builder = built
  rows = {}
  for split_name, source in builder.as_data_source().items():
    split = tfds_builders.to_split(source, split_name)
    rows.update(zip(split.raw_answer.tolist(), split.answer.tolist()))
  if name == "lr":
    assert rows["1234"] == "more than 1000" and rows["15"] == "between 11 and 100"
    assert rows["0"] == "0" and rows["7"] == "between 1 and 10"
  elif name == "hr":
    assert rows["57m2"] == "between 11m2 and 100m2" and rows["2500m2"] == "more than 1000m2"
    assert rows["12"] == "12"
  else:
    assert rows["Sea and ocean"] == "Sea and ocean"


def test_images_config_stores_each_tile_once(built, tmp_path):
  name, manual, expected, _, _ = built
  builder = tfds_builders.build(name, manual, tmp_path, config="images")
  dataset = rsvqa_json.read_dataset(manual, name)
  for split_name, source in builder.as_data_source().items():
    tiles = tfds_builders.image_bytes(source)
    assert sorted(tiles) == sorted({r["image_id"] for r in expected[split_name]})
    for image_id, encoded in tiles.items():
      image = tfds_builders.decode_image(encoded)
      size = OFFICIAL[name][2]
      assert image.shape == (size, size, 3) and image.dtype == np.uint8
      np.testing.assert_array_equal(image, tifffile.imread(dataset.image_path(image_id)))
  assert "tensorflow" not in sys.modules


def test_decode_image_reads_tiles_as_read_tif():
  """A band-interleaved tile decodes HxWx3 as a tile file does; broken bytes are one line."""
  image = np.arange(3 * 4 * 5, dtype=np.uint8).reshape(3, 4, 5)
  buf = io.BytesIO()
  tifffile.imwrite(buf, image, photometric="rgb", planarconfig="separate")
  decoded = tfds_builders.decode_image(buf.getvalue())
  assert decoded.shape == (4, 5, 3)
  np.testing.assert_array_equal(decoded, np.moveaxis(image, 0, -1))
  with pytest.raises(RSVQAError, match=r"^TIFF bytes: not a readable TIFF \("):
    tfds_builders.decode_image(b"not a tiff")


def test_rebuild_reuses_files(built):
  name, manual, _, data_dir, builder = built
  files = sorted(p for p in os.listdir(builder.data_dir) if ".array_record" in p)
  assert len(files) == len(OFFICIAL[name][3])
  mtimes = [os.path.getmtime(os.path.join(builder.data_dir, p)) for p in files]
  again = tfds_builders.build(name, manual, data_dir)
  assert again.data_dir == builder.data_dir
  assert [os.path.getmtime(os.path.join(builder.data_dir, p)) for p in files] == mtimes


def test_bad_folder_raises_reader_error(tmp_path):
  manual = str(tmp_path / "manual")
  write_official_folder(manual, "lr", images_per_split=1, questions_per_image=1)
  os.remove(os.path.join(manual, "LR_split_val_answers.json"))
  with pytest.raises(RSVQAError, match="LR_split_val_answers.json: split file missing"):
    tfds_builders.build("lr", manual, tmp_path / "tfds")


def test_synthetic_hr_to_tfds_to_grain(tmp_path):
  """The issue's end-to-end check: generator -> TFDS files -> columns -> grain batches."""
  manual = str(tmp_path / "manual")
  synthetic.generate(manual, "hr", images=8, seed=0, questions_per_image=5)
  dataset = rsvqa_json.read_dataset(manual, "hr")
  builder = tfds_builders.build("hr", manual, tmp_path / "tfds")
  sources = builder.as_data_source()
  assert set(sources) == {"train", "val", "test", "test_phili"}
  for split_name, source in sources.items():
    assert _sorted_rows(tfds_builders.to_split(source, split_name)) == _sorted_rows(
        dataset[split_name])
  train = tfds_builders.to_split(sources["train"], "train")
  vocab = {a: i for i, a in enumerate(sorted(set(train.answer.tolist())))}
  lengths = np.array([len(q.split()) for q in train.question])
  tokens = np.zeros((len(train), lengths.max()), np.int32)
  for i, n in enumerate(lengths):
    tokens[i, :n] = np.arange(1, n + 1)
  columns = pipeline.split_columns(
      train, dataset.image_ids("train"), [vocab[a] for a in train.answer], tokens, lengths)
  loader = pipeline.make_loader(columns, batch_size=4, shuffle=True, seed=0, num_epochs=1,
                                shard_index=0, shard_count=1, drop_remainder=False)
  batches = list(loader)
  qids = np.concatenate([b["question_id"] for b in batches])
  np.testing.assert_array_equal(np.sort(qids), np.sort(train.question_id))
  image_ids = dataset.image_ids("train")
  for b in batches:
    np.testing.assert_array_equal(image_ids[b["image_index"]], train.image_id[b["index"]])
  assert "tensorflow" not in sys.modules
