"""The synthetic generator's ground-truth groundings: Grounding/{question_id}.png and index.json."""
import hashlib
import json
import os
import pathlib

import numpy as np
import pytest

from rsvqa_jax import cli
from rsvqa_jax.bias import grounding as metrics
from rsvqa_jax.data import grounding, questions, scenes, split_files, synthetic


@pytest.fixture(scope="module", params=["lr", "hr"])
def generated(request, tmp_path_factory):
  variant = request.param
  root = str(tmp_path_factory.mktemp(f"grounding_{variant}") / "data")
  images = 6 if variant == "lr" else 5
  return variant, root, synthetic.generate(root, variant, images=images, seed=3,
                                           questions_per_image=25)


def _scene_of(variant, root, image_id):
  """The image's scene drawn again from the generator (not read from its masks/)."""
  layout = split_files.LAYOUTS[variant]
  manifest = synthetic.read_manifest(root)
  region = synthetic.regions(variant, manifest["images"])[image_id]
  return scenes.make_scene(manifest["seed"], image_id, layout.image_size, region)


def test_every_question_has_a_mask_that_holds_its_answer(generated):
  variant, root, gen = generated
  folder = os.path.join(root, grounding.FOLDER)
  index = json.loads(pathlib.Path(folder, grounding.INDEX).read_text())
  empty = {e["question_id"]: e for e in index["empty"]}
  assert index["n_questions"] == len(gen.questions) and index["n_empty"] == len(empty)
  size = split_files.LAYOUTS[variant].image_size
  seen_types = set()
  for split in gen.splits.values():
    for qid, image_id in zip(split.question_id.tolist(), split.image_id.tolist()):
      q = gen.questions[qid]
      png = metrics.read_mask(os.path.join(folder, f"{qid}.png"))
      assert png.shape == (size, size) and png.dtype == np.uint8
      assert set(np.unique(png).tolist()) <= {0, 255}
      scene = _scene_of(variant, root, image_id)
      sampler_index = questions.SceneIndex(scene, next_to_px=4 * size / 256)
      if q.qtype == "rural_urban":
        picked = [o for o in scene.objects if o.cls in grounding.BUILT_UP]
      else:
        matched = np.any([sampler_index.match(p) for p in q.phrases], axis=0)
        picked = [o for o, m in zip(scene.objects, matched) if m]
      expected = np.zeros((size, size), bool)
      for o in picked:
        expected |= o.full_mask(size, size)
      np.testing.assert_array_equal(png > 0, expected, err_msg=f"question {qid}: {q.text}")
      assert (qid in empty) == (not expected.any())
      if q.qtype == "presence":
        assert (qid in empty) == (q.answer == "no")
      elif q.qtype == "count":
        assert (qid in empty) == (q.answer == "0")
      elif q.qtype == "area":
        assert (qid in empty) == (q.answer == "0m2")
      if qid in empty:
        assert empty[qid]["type"] == q.qtype and empty[qid]["reason"]
      seen_types.add(q.qtype)
  assert seen_types >= ({"presence", "count", "comp"} | ({"rural_urban"} if variant == "lr"
                                                          else {"area"}))


def _digests(root, skip):
  out = {}
  for folder, _, files in os.walk(root):
    if os.path.relpath(folder, root).split(os.sep)[0] == skip:
      continue
    for name in files:
      path = os.path.join(folder, name)
      out[os.path.relpath(path, root)] = hashlib.sha256(pathlib.Path(path).read_bytes()).hexdigest()
  return out


def test_groundings_leave_the_dataset_files_unchanged(generated, tmp_path, monkeypatch):
  """Questions, answers, images and masks are byte for byte those of a generation without them."""
  variant, root, _ = generated
  monkeypatch.setattr(grounding, "write", lambda *a, **k: None)
  manifest = synthetic.read_manifest(root)
  bare = str(tmp_path / "bare")
  synthetic.generate(bare, variant, images=manifest["images"], seed=manifest["seed"],
                     questions_per_image=manifest["questions_per_image"])
  assert not os.path.exists(os.path.join(bare, grounding.FOLDER))
  assert _digests(root, grounding.FOLDER) == _digests(bare, grounding.FOLDER)


def test_stats_of_a_synthetic_grounding_folder(generated, tmp_path, capsys):
  _, root, gen = generated
  out = tmp_path / "stats"
  assert cli.main(["grounding", "stats", "--truth", os.path.join(root, grounding.FOLDER),
                   "--out", str(out)]) == 0
  stats = json.loads((out / "statistics.json").read_text())
  index = grounding.read_index(root)
  assert stats["n"] == len(gen.questions) and stats["n_empty"] == index["n_empty"]
  assert 0 < stats["coverage"]["mean"] < 1
