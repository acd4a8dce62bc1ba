"""A model's answer grounding: the attention head, relevance maps, scores against the truth.

A small synthetic LR set is generated with its Grounding/; its image features are an oracle
map computed from the generator's object masks (per 8 x 8 cell, the share of each land-cover
class), so a model learns where the objects are in seconds, without a ResNet. The attention
model then grounds presence questions well above the centre-prior and uniform floors, and
answering each question with another image's map falls to the floor.
"""
import csv
import dataclasses
import json
import logging
import os
import shutil

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from rsvqa_jax import cli, progress
from rsvqa_jax.data import rsvqa_json, scenes, synthetic
from rsvqa_jax.errors import RSVQAError
from rsvqa_jax.eval import grounding
from rsvqa_jax.features.image_cache import ImageFeatures
from rsvqa_jax.models.vqa import RSVQAModel, make_head
from rsvqa_jax.train import inputs, loop, predict, restore
from test_train_support import tiny_config, warnings_of_rsvqa_jax

QUIET = dict(log=lambda m: None)
GRID = 8
CLASSES = tuple(scenes.CLASSES)


def oracle_features(root, image_ids):
  """ImageFeatures whose map holds, per GRID x GRID cell, each class's share of the cell."""
  maps = np.zeros((len(image_ids), GRID, GRID, len(CLASSES)), np.float32)
  for row, image_id in enumerate(image_ids):
    m = scenes.load_masks(os.path.join(root, synthetic.MASK_DIR, f"{image_id}.npz"))
    size = m["masks"].shape[1]
    for cls, mask in zip(m["classes"], m["masks"]):
      cells = mask.reshape(GRID, size // GRID, GRID, size // GRID).mean(axis=(1, 3))
      maps[row, :, :, CLASSES.index(cls)] += cells
  return ImageFeatures(maps.mean(axis=(1, 2)), np.asarray(image_ids, np.int64), "<memory>", maps)


@pytest.fixture(scope="module")
def task(tmp_path_factory):
  root = str(tmp_path_factory.mktemp("grounding_eval") / "data")
  synthetic.generate(root, "lr", images=90, seed=1, questions_per_image=20)
  dataset = rsvqa_json.read_dataset(root, "lr")
  ids = np.unique(np.concatenate([s.image_id for s in dataset.splits.values()]))
  return dataset, oracle_features(root, ids.tolist())


def _config(head="attention", blind=False):
  c = tiny_config(batch_size=32, num_epochs=12, checkpoint_every_steps=10_000)
  c.text.word_dim, c.text.hidden_dim = 32, 64
  c.model.head, c.model.blind, c.image.map = head, blind, True
  c.model.attention_dim = 32
  # 3e-3, not 1e-2: at 1e-2 the best checkpoint's presence IoU ranged 0.08-0.13 over seeds 0-2
  # (one CPU), under the floors for one; at 3e-3 it is 0.13-0.19, clear of 1.25x the floors
  # (0.11) whatever the seed, and so whatever the CPU's rounding.
  c.optim.lr = c.optim.text_lr = 3e-3
  return c


@pytest.fixture(scope="module")
def trained(task, tmp_path_factory):
  dataset, feats = task
  workdir = str(tmp_path_factory.mktemp("grounding_eval") / "attention")
  loop.train(_config(), workdir, dataset=dataset, features=feats, **QUIET)
  return workdir


def _evaluate(task, workdir, out, **kw):
  dataset, feats = task
  return grounding.evaluate(workdir, "test", str(out), dataset=dataset, features=feats, **kw)


def test_attention_head_weighs_positions_and_feeds_the_fusion():
  cfg = _config().model
  head = make_head(cfg, q_dim=6, v_dim=4 * 5, num_answers=3, map_shape=(2, 2, 5),
                   rngs=nnx.Rngs(0))
  rng = np.random.default_rng(0)
  v, q = rng.normal(size=(3, 20)).astype(np.float32), rng.normal(size=(3, 6)).astype(np.float32)
  weights = np.asarray(head.attention(v, q))
  assert weights.shape == (3, 4)
  np.testing.assert_allclose(weights.sum(-1), 1.0, rtol=1e-6)
  attended = (weights[..., None] * v.reshape(3, 4, 5)).sum(1)
  want = head.body(attended, q, deterministic=True)
  got = RSVQAModel(head)({"image_features": v, "question_vector": q})
  np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-6)
  with pytest.raises(RSVQAError, match="visual-blind twin uses model.head=paper"):
    make_head(_config(blind=True).model, q_dim=6, v_dim=20, num_answers=3, map_shape=(2, 2, 5),
              rngs=nnx.Rngs(0))


def test_attention_grounds_presence_above_the_floors_and_shuffled_images_fall(task, trained,
                                                                              tmp_path):
  own = _evaluate(task, trained, tmp_path / "own")
  assert own["method"] == "attention" and own["map_size"] == [GRID, GRID]
  presence = own["by_type"]["presence"]
  floors = {f: own["floors"][f]["by_type"]["presence"]["mean_iou"] for f in ("centre", "uniform")}
  assert presence["n"] >= 30
  assert presence["mean_iou"] > 1.25 * max(floors.values()), (presence, floors)
  shuffled = _evaluate(task, trained, tmp_path / "shuffled", images="shuffled")
  assert shuffled["by_type"]["presence"]["mean_iou"] < max(floors.values()), (
      shuffled["by_type"]["presence"], floors)
  # The floors are the model's neighbours in every table.
  assert shuffled["floors"]["uniform"]["mean_iou"] == own["floors"]["uniform"]["mean_iou"]


def _listed(path):
  with open(path, newline="") as f:
    return sorted(int(r["question_id"]) for r in csv.DictReader(f))


def test_written_maps_rescore_to_the_summary(task, trained, tmp_path, capsys):
  """`grounding score` on the written PNGs and confidences, against the truth of the questions
  confidence.csv lists (as the docs say), gives the evaluation's numbers."""
  dataset, _ = task
  out = tmp_path / "own"
  summary = _evaluate(task, trained, out)
  truth = tmp_path / "truth"
  truth.mkdir()
  for qid in _listed(out / "confidence.csv"):
    shutil.copy(os.path.join(dataset.root, "Grounding", f"{qid}.png"), truth)
  assert cli.main(["grounding", "score", "--predicted", str(out / "maps"), "--truth", str(truth),
                   "--out", str(tmp_path / "s"), "--confidence", str(out / "confidence.csv")]) == 0
  rescored = json.loads((tmp_path / "s" / "summary.json").read_text())
  assert rescored["n_missing_prediction"] == 0 and "count as IoU 0" not in capsys.readouterr().out
  for key in ("n_questions", "n_scored", "n_empty_truth"):
    assert rescored[key] == summary[key], key
  for key in ("mean_iou", "ap_25", "ap_50", "ap_75", "map_50_95"):
    assert rescored[key] == pytest.approx(summary[key], abs=1e-9), key
  # The whole truth folder holds every split: questions outside the test split have no map, each
  # counts as IoU 0, and the command says so.
  assert cli.main(["grounding", "score", "--predicted", str(out / "maps"), "--truth",
                   os.path.join(dataset.root, "Grounding"), "--out", str(tmp_path / "s2"),
                   "--confidence", str(out / "confidence.csv")]) == 0
  whole = json.loads((tmp_path / "s2" / "summary.json").read_text())
  n_test = len(dataset["test"])
  with open(tmp_path / "s2" / "grounding.csv", newline="") as f:  # non-empty truths only
    unmapped = [r for r in csv.DictReader(f)
                if r["iou"] and not (out / "maps" / f"{r['question_id']}.png").exists()]
  assert whole["n_missing_prediction"] == len(unmapped) > 0
  assert whole["n_missing_prediction"] <= whole["n_questions"] - n_test
  assert whole["mean_iou"] < summary["mean_iou"]
  assert (f"{whole['n_missing_prediction']} truth mask(s) without a predicted map count as IoU 0"
          in capsys.readouterr().out)
  written = json.loads((out / "summary.json").read_text())
  assert written["warnings"] == []
  for key in ("ap_25", "ap_50", "ap_75", "map_50_95"):
    assert written[key] is not None
  assert written["n_scored"] + written["n_empty_truth"] == n_test
  assert 0 <= written["mean_iou_correct"] <= 1 and written["by_answer"]
  # mean_iou_correct is the mean IoU of the correctly answered rows of grounding.csv (empty
  # truths, a blank IoU, left out); the wrongly answered ones score otherwise.
  with open(out / "grounding.csv", newline="") as f:
    scored = [r for r in csv.DictReader(f) if r["iou"]]
  assert all(r["correct"] == str(int(r["prediction"] == r["answer"])) for r in scored)
  right = [float(r["iou"]) for r in scored if r["correct"] == "1"]
  wrong = [float(r["iou"]) for r in scored if r["correct"] == "0"]
  assert right and wrong and len(right) + len(wrong) == written["n_scored"]
  assert written["n_scored_correct"] == len(right)
  assert written["mean_iou_correct"] == pytest.approx(np.mean(right), abs=1e-12)
  assert np.mean(wrong) != pytest.approx(np.mean(right), abs=1e-6)
  assert set(written["by_coverage"]) == {"small", "medium", "large"}
  assert (out / "examples.png").stat().st_size > 0 and (out / "by_type.md").exists()


def test_the_maps_and_the_scoring_are_counted(task, trained, tmp_path, caplog, monkeypatch,
                                              capsys):
  """`grounding --workdir` computed and scored its maps without a line (18 s for 800
  questions). capsys: stderr is no terminal, so the bars are log lines, one per update here."""
  monkeypatch.setattr(progress, "INTERVAL_S", 0.0)
  with warnings_of_rsvqa_jax(caplog, logging.INFO):
    _evaluate(task, trained, tmp_path / "o")
  said = [r.getMessage() for r in caplog.records if r.name == "rsvqa_jax.progress"]
  n = len(task[0]["test"])
  for stage in ("maps", "score"):
    assert any(m.startswith(f"grounding {stage} test: {n}/{n} q (100%), ") for m in said), said


def _gradcam_by_hand(task, workdir, reads):
  """(predicted ids [N], Grad-CAM maps [N, h * w]) of every test question, computed here: A is
  the question's image map [h * w, C] (the oracle's), the logits a function of A (reads="map":
  the head reads A flattened; "pooled": its mean over the positions), alpha_c the mean over
  positions of d logit[predicted] / d A_pc (jax.grad), the map relu(sum_c alpha_c A_pc)."""
  dataset, feats = task
  run, state, _ = restore.restore(workdir, ["test"], dataset=dataset, features=feats)
  assert run.config.train.compute_dtype == "float32"
  np.testing.assert_array_equal(run.features.image_ids, feats.image_ids)
  rows = predict.clean_rows(run, "test")[0]
  n = len(rows)
  (_, local), = inputs.eval_batches(run.columns["test"], n)  # every question in one batch
  batch = inputs.eval_model_batch(local, run.features.features, rows[None], run.question_vectors)
  question = {k: v for k, v in batch.items() if k not in ("image_features", "answer")}
  a = jnp.asarray(feats.feature_map[rows[local["row"]]], jnp.float32).reshape(n, GRID * GRID, -1)
  model = state.model()
  logits = lambda a: model({**question, "image_features": (
      a.reshape(n, -1) if reads == "map" else a.mean(1))}, deterministic=True)
  pred = jnp.argmax(logits(a), -1)
  grad = jax.grad(lambda a: jnp.take_along_axis(logits(a), pred[:, None], 1).sum())(a)
  alpha = grad.mean(1)  # [N, C]
  return np.asarray(pred), np.maximum(np.einsum("npc,nc->np", np.asarray(a), np.asarray(alpha)), 0)


def _relevance(task, workdir):
  """What the evaluation computes: (predicted ids, relevance maps [N, h * w]) on the test split."""
  dataset, feats = task
  run, state, _ = restore.restore(workdir, ["test"], dataset=dataset, features=feats)
  preds, _, rel = grounding.relevance(run, state, "test", "gradcam",
                                      predict.clean_rows(run, "test")[0])
  return preds, rel.reshape(len(rel), -1)


def test_gradcam_for_the_attention_and_the_pooled_model_and_a_uniform_blind_map(task, trained,
                                                                                  tmp_path):
  dataset, feats = task
  cam = _evaluate(task, trained, tmp_path / "cam", method="gradcam")
  assert cam["method"] == "gradcam" and cam["n_scored"] > 0
  # The attention head reads the map: its Grad-CAM is the formula's, map for map.
  want_pred, want = _gradcam_by_hand(task, trained, "map")
  got_pred, got = _relevance(task, trained)
  np.testing.assert_array_equal(got_pred, want_pred)
  assert (want.max(1) > 0).mean() > 0.5  # most maps have a positive cell
  np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6 * want.max())
  pooled = str(tmp_path / "pooled")
  pooled_config, blind_config = _config(head="paper"), _config(head="paper", blind=True)
  for c in (pooled_config, blind_config):  # what is asserted of them holds whatever they learned
    c.train.num_epochs = 1
  loop.train(pooled_config, pooled, dataset=dataset, features=feats, **QUIET)
  result = _evaluate(task, pooled, tmp_path / "pooled_maps")
  assert result["method"] == "gradcam" and result["map_size"] == [GRID, GRID]
  # The pooled head: alpha is d logit / d pooled, h * w times the mean over positions of
  # d logit / d A (the min-max normalisation of the written map removes the factor).
  want_pred, want = _gradcam_by_hand(task, pooled, "pooled")
  got_pred, got = _relevance(task, pooled)
  np.testing.assert_array_equal(got_pred, want_pred)
  assert (want.max(1) > 0).mean() > 0.5
  np.testing.assert_allclose(got, GRID * GRID * want, rtol=1e-4,
                             atol=1e-6 * GRID * GRID * want.max())
  with pytest.raises(RSVQAError, match="has no attention map"):
    _evaluate(task, pooled, tmp_path / "x", method="attention")
  blind = str(tmp_path / "blind")
  loop.train(blind_config, blind, dataset=dataset, features=feats, **QUIET)
  floor = _evaluate(task, blind, tmp_path / "blind_maps")
  assert floor["method"].startswith("uniform")
  assert floor["mean_iou"] == pytest.approx(floor["floors"]["uniform"]["mean_iou"])
  assert floor["warnings"] == []  # its 1 x 1 map is uniform by design, not too coarse


def test_a_dataset_without_groundings_is_refused(task, trained, tmp_path):
  dataset, feats = task
  bare = dataclasses.replace(dataset, root=str(tmp_path))
  with pytest.raises(RSVQAError, match="no ground-truth groundings"):
    grounding.evaluate(trained, "test", str(tmp_path / "o"), dataset=bare, features=feats)


def test_a_second_evaluation_replaces_the_maps_whole_and_foreign_files_are_refused(task, trained,
                                                                                    tmp_path):
  """Run on another split into the same OUT, the maps are that split's only, as confidence.csv
  says, and what a killed evaluation left in OUT is removed; a maps folder holding a file the
  evaluation would not write is refused untouched."""
  dataset, feats = task
  out = tmp_path / "g"
  _evaluate(task, trained, out)
  for left in (".tmp-maps-killed", ".old-maps-123-456"):  # killed while writing, while swapping
    (out / left).mkdir()
    (out / left / "7.png").write_bytes(b"half")
  grounding.evaluate(trained, "val", str(out), dataset=dataset, features=feats)
  val = sorted(dataset["val"].question_id.tolist())
  assert sorted(int(n[:-4]) for n in os.listdir(out / "maps")) == val
  assert _listed(out / "confidence.csv") == val
  assert json.loads((out / "summary.json").read_text())["split"] == "val"
  assert not [n for n in os.listdir(out) if n.startswith((".tmp-", ".old-"))]
  (out / "maps" / "notes.txt").write_text("mine")
  (out / "maps" / "sub").mkdir()
  before = sorted(os.listdir(out / "maps"))
  with pytest.raises(RSVQAError, match=r"maps/ holds notes\.txt \(and 1 more\), not a map of an "
                                       r"earlier grounding evaluation; move them"):
    _evaluate(task, trained, out)
  assert sorted(os.listdir(out / "maps")) == before
  assert json.loads((out / "summary.json").read_text())["split"] == "val"


def test_a_one_cell_map_warns_that_it_is_the_uniform_floor(task, tmp_path, caplog):
  """A 1 x 1 feature map (a 32 px tile through a ResNet) cannot localise: one WARNING, recorded
  in summary.json, and the model's row is the uniform floor."""
  dataset, feats = task
  one = ImageFeatures(feats.features, feats.image_ids, "<memory>",
                      feats.feature_map.mean(axis=(1, 2), keepdims=True))
  c = _config()
  c.train.num_epochs = 1
  workdir = str(tmp_path / "one")
  loop.train(c, workdir, dataset=dataset, features=one, **QUIET)
  with warnings_of_rsvqa_jax(caplog):
    result = grounding.evaluate(workdir, "test", str(tmp_path / "g"), dataset=dataset,
                                features=one)
  coarse = [r.getMessage() for r in caplog.records if "cannot localise" in r.getMessage()]
  assert len(coarse) == 1 and "relevance maps of 1 x 1 cells" in coarse[0], caplog.records
  assert result["map_size"] == [1, 1]
  assert json.loads((tmp_path / "g" / "summary.json").read_text())["warnings"] == coarse
  assert result["mean_iou"] == pytest.approx(result["floors"]["uniform"]["mean_iou"])


def test_a_dataset_or_a_training_workdir_is_refused_as_out(tmp_path):
  """Their own files would have had summary.json and maps/ written among them."""
  data = tmp_path / "data"
  synthetic.generate(str(data), variant="lr", images=4, seed=0)
  with pytest.raises(RSVQAError, match=f"--out {data} holds a dataset"):
    grounding.check_maps(str(data))
  (tmp_path / "run").mkdir()
  (tmp_path / "run" / "config.json").write_text("{}")
  with pytest.raises(RSVQAError, match="holds a training run \\(config.json\\)"):
    grounding.check_maps(str(tmp_path / "run"))
  grounding.check_maps(str(tmp_path / "fresh"))  # absent: fine
  (tmp_path / "file").write_text("x")  # refused before the maps are computed, not after
  with pytest.raises(RSVQAError, match="file: a file, not a folder; give the folder to write"):
    grounding.check_maps(str(tmp_path / "file"))


def test_a_grounding_score_folder_is_refused_as_out(tmp_path):
  """Its grounding.csv and summary.json would be replaced by the evaluation's."""
  (tmp_path / "scored").mkdir()
  (tmp_path / "scored" / "iou_by_coverage.png").write_bytes(b"png")
  with pytest.raises(RSVQAError, match="holds the results of `grounding score`"):
    grounding.check_maps(str(tmp_path / "scored"))


def test_shuffled_images_on_a_one_image_split_name_no_foreign_flag():
  """The draw is as adversarial testing's, but its advice (--pool dataset) is no flag here."""
  assert grounding.shuffled_rows(np.array([3, 3, 5]), "test", 0).tolist() == [5, 5, 3]
  with pytest.raises(RSVQAError) as e:
    grounding.shuffled_rows(np.array([4, 4]), "test", 0)
  assert "--pool" not in str(e.value) and "give a split of two images or more" in str(e.value)


def test_an_evaluation_killed_before_its_summary_leaves_no_summary_of_an_earlier_one(
    task, trained, tmp_path, monkeypatch):
  """OUT/summary.json is written last, after maps/ and grounding.csv are replaced: killed
  between them, an earlier evaluation's summary (here of shuffled images) stayed beside the new
  maps, and the study's grounding stage, which skips a run whose summary.json reads, kept it."""
  out = tmp_path / "out"
  _evaluate(task, trained, out, images="shuffled")
  assert json.loads((out / "summary.json").read_text())["images"] == "shuffled"

  def killed(path, value, **kwargs):
    raise KeyboardInterrupt  # stands for the process dying here

  monkeypatch.setattr(grounding.storage, "write_json", killed)
  with pytest.raises(KeyboardInterrupt):
    _evaluate(task, trained, out, images="own")
  monkeypatch.undo()
  assert (out / "grounding.csv").exists() and (out / "maps").is_dir()
  assert not (out / "summary.json").exists()
  assert _evaluate(task, trained, out, images="own")["images"] == "own"
  assert json.loads((out / "summary.json").read_text())["images"] == "own"
