"""Land-cover pretraining of the small ResNet: labels, loss, saved model, and better features."""
import os
import pathlib
import re
import shlex
import shutil

import numpy as np
import pytest
from flax import nnx

from rsvqa_jax.data import records, scenes
from rsvqa_jax.data.images import write_tif
from rsvqa_jax.errors import RSVQAError
from rsvqa_jax.models import checkpoints
from rsvqa_jax import config as config_lib
from rsvqa_jax.features import encoder as encoder_lib
from rsvqa_jax.features import image_cache
from rsvqa_jax.features import pretrain as pretrain_resnet
from rsvqa_jax.train import prepare

SCENE = 64


def _dataset(root, n_train=30, n_val=15):
  os.makedirs(os.path.join(root, "images"))
  os.makedirs(os.path.join(root, "masks"))
  splits = {}
  for split, ids in (("train", range(n_train)), ("val", range(n_train, n_train + n_val))):
    rows = []
    for i in ids:
      scene = scenes.make_scene(3, i, SCENE)
      write_tif(os.path.join(root, "images", f"{i}.tif"), scene.image)
      scenes.save_masks(os.path.join(root, "masks", f"{i}.npz"), scene)
      rows.append(dict(question_id=i, image_id=i, qtype="presence", question="q", answer="yes",
                       raw_answer="yes"))
    splits[split] = records.Split.from_rows(split, rows)
  return records.Dataset("lr", str(root), splits,
                         lambda i: os.path.join(root, "images", f"{i}.tif"), (SCENE, SCENE))


def _pcfg(**kw):
  cfg = config_lib.pretrain_section()
  cfg.update(dict(width=8, image_size=SCENE, epochs=12, batch_size=10, learning_rate=3e-3))
  cfg.update(kw)
  return cfg


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
  root = tmp_path_factory.mktemp("pretrain")
  ds = _dataset(root / "data")
  out = str(root / "model")
  return ds, out, pretrain_resnet.pretrain(ds, out, _pcfg())


def test_labels_from_masks_by_hand(tmp_path):
  ones = lambda h, w: np.ones((h, w), bool)
  objects = [scenes.SceneObject("road", None, None, (0, 0, 2, 8), ones(2, 8)),
             scenes.SceneObject("forest", None, None, (4, 4, 6, 6), ones(2, 2)),
             scenes.SceneObject("forest", None, None, (5, 5, 7, 7), ones(2, 2))]
  os.makedirs(tmp_path / "masks")
  scene = scenes.Scene(np.zeros((8, 8, 3), np.uint8), objects, "rural", "default")
  scenes.save_masks(str(tmp_path / "masks" / "4.npz"), scene)
  presence, fraction = pretrain_resnet.land_cover_labels(str(tmp_path), [4])
  classes = pretrain_resnet.CLASSES
  expected_p = np.zeros(len(classes))
  expected_f = np.zeros(len(classes))
  expected_p[[classes.index("road"), classes.index("forest")]] = 1
  expected_f[classes.index("road")] = 16 / 64
  expected_f[classes.index("forest")] = 7 / 64  # two 2x2 squares overlapping in one pixel
  np.testing.assert_array_equal(presence[0], expected_p)
  np.testing.assert_allclose(fraction[0], expected_f)
  with pytest.raises(RSVQAError, match="masks missing"):
    pretrain_resnet.land_cover_labels(str(tmp_path), [5])


def test_loss_goes_down_and_model_round_trips(trained):
  ds, out, manifest = trained
  losses = manifest["epoch_losses"]
  assert len(losses) == 12
  assert np.mean(losses[-3:]) < 0.8 * np.mean(losses[:3])
  assert manifest["dataset"]["train_images"] == 30
  assert set(manifest["metrics"]) == {"train", "val"}
  model = pretrain_resnet.load_pretrained(out)
  tree, meta = checkpoints.load_safetensors(os.path.join(out, pretrain_resnet.WEIGHTS))
  assert meta["kind"] == "resnet" and (meta["depth"], meta["width"]) == ("18", "8")
  np.testing.assert_array_equal(tree["conv1"]["kernel"], np.asarray(model.conv1.kernel[...]))
  ids = ds.image_ids("train")
  images = pretrain_resnet.load_images(ds, ids, SCENE)
  presence, fraction = pretrain_resnet.land_cover_labels(ds.root, ids)
  prob, frac = pretrain_resnet._predict_all(model, images, 10)
  metrics = pretrain_resnet.presence_metrics(prob, presence, frac, fraction, presence.mean(0))
  assert metrics["presence_accuracy"] == pytest.approx(
      manifest["metrics"]["train"]["presence_accuracy"])
  assert metrics["presence_accuracy"] > metrics["majority_accuracy"]


def _centroid_accuracy(train_x, train_y, test_x, test_y):
  """Nearest-centroid presence accuracy, averaged over classes with both labels in train."""
  mu, sd = train_x.mean(0), train_x.std(0) + 1e-6
  train_x, test_x = (train_x - mu) / sd, (test_x - mu) / sd
  accs = []
  for c in range(train_y.shape[1]):
    pos, neg = train_y[:, c] > 0, train_y[:, c] == 0
    if pos.sum() < 2 or neg.sum() < 2:
      continue
    d_pos = ((test_x - train_x[pos].mean(0)) ** 2).sum(1)
    d_neg = ((test_x - train_x[neg].mean(0)) ** 2).sum(1)
    accs.append(((d_pos < d_neg) == (test_y[:, c] > 0)).mean())
  return float(np.mean(accs))


def test_pretrained_features_beat_random_init(trained, tmp_path):
  ds, out, _ = trained
  cfg = config_lib.image_section()
  cfg.update(dict(arch="synthetic_resnet", pretrained_dir=out, batch_size=10))
  cfg.pretrain = _pcfg()
  cache = str(tmp_path / "cache")
  pretrained = image_cache.image_features(ds, None, cfg, cache)
  random_cfg = config_lib.image_section()
  random_cfg.update(dict(arch="resnet18", width=8, batch_size=10, checkpoint="random"))
  random = image_cache.image_features(ds, None, random_cfg, cache)
  assert pretrained.features.shape == random.features.shape == (45, 64)
  tr, va = ds.image_ids("train"), ds.image_ids("val")
  ytr, _ = pretrain_resnet.land_cover_labels(ds.root, tr)
  yva, _ = pretrain_resnet.land_cover_labels(ds.root, va)
  scores = {}
  for name, entry in (("pretrained", pretrained), ("random", random)):
    x = np.asarray(entry.features)
    rows = lambda ids: np.searchsorted(entry.image_ids, ids)
    scores[name] = _centroid_accuracy(x[rows(tr)], ytr, x[rows(va)], yva)
  # Held-out images: the pretrained features must carry more land-cover information.
  assert scores["pretrained"] > scores["random"] + 0.03, scores


def test_pretraining_step_reuses_or_retrains(trained, monkeypatch):
  ds, out, manifest = trained
  cfg = config_lib.image_section()
  cfg.update(dict(arch="synthetic_resnet", pretrained_dir=out))
  cfg.pretrain = _pcfg()

  def no_training(*args, **kwargs):
    raise AssertionError("retrained although the model matched")

  monkeypatch.setattr(pretrain_resnet, "pretrain", no_training)
  assert not prepare.image_encoder(cfg, ds)  # current: nothing to do
  assert pretrain_resnet.current(cfg)["weights_sha256"] == manifest["weights_sha256"]
  cfg.pretrain.epochs = 13
  assert pretrain_resnet.current(cfg) is None  # other settings: not this model
  with pytest.raises(RSVQAError, match=re.escape(  # the whole command, with the folder to fill
      f"features --pretrain --data DATASET --config CONFIG --pretrained-dir {shlex.quote(out)} ")):
    encoder_lib.encoder_for(cfg)
  with pytest.raises(AssertionError, match="retrained"):
    prepare.image_encoder(cfg, ds)


def _same_images_other_questions(ds, root, changed=None):
  """A copy of `ds` in `root` whose questions differ; `changed`: an image id drawn anew."""
  shutil.copytree(ds.root, root)
  if changed is not None:
    scene = scenes.make_scene(4, changed, SCENE)
    write_tif(os.path.join(root, "images", f"{changed}.tif"), scene.image)
    scenes.save_masks(os.path.join(root, "masks", f"{changed}.npz"), scene)
  splits = {name: records.Split.from_rows(name, [
      dict(question_id=q, image_id=i, qtype="presence", question="another", answer="no",
           raw_answer="no") for q, i in zip(split.question_id, split.image_id)])
            for name, split in ds.splits.items()}
  return records.Dataset("lr", str(root), splits,
                         lambda i: os.path.join(root, "images", f"{i}.tif"), (SCENE, SCENE))


def test_a_model_pretrained_on_the_same_images_beside_it_is_copied_not_retrained(
    trained, tmp_path, monkeypatch):
  """A study's balanced twin asks other questions about the main set's very images: it
  pretrained the same encoder again (a tenth of the default study). A model of the same
  settings, images and labels beside the folder is copied; one image of either split drawn
  anew (or other settings) trains."""
  ds, out, manifest = trained

  def no_training(*args):
    raise AssertionError("trained")

  monkeypatch.setattr(pretrain_resnet, "_train_step", no_training)
  beside = os.path.join(os.path.dirname(out), "beside")
  twin = _same_images_other_questions(ds, tmp_path / "twin")
  copied = pretrain_resnet.pretrain(twin, beside, _pcfg())
  assert copied["copied_from"] == out
  assert copied["dataset"]["root"] == os.path.abspath(twin.root)
  assert copied["weights_sha256"] == manifest["weights_sha256"]
  assert (copied["metrics"], copied["epoch_losses"], copied["inputs_sha256"]) == (
      manifest["metrics"], manifest["epoch_losses"], manifest["inputs_sha256"])
  assert pretrain_resnet.read_manifest(beside) == copied
  for name, changed in (("train_image", 3), ("val_image", 40)):
    other = _same_images_other_questions(ds, tmp_path / name, changed)
    with pytest.raises(AssertionError, match="trained"):
      pretrain_resnet.pretrain(other, os.path.join(os.path.dirname(out), name), _pcfg())
  with pytest.raises(AssertionError, match="trained"):
    pretrain_resnet.pretrain(twin, os.path.join(os.path.dirname(out), "lr"),
                             _pcfg(learning_rate=1e-3))
  damaged = tmp_path / "cache" / "damaged"  # weights that are not the ones its manifest names
  shutil.copytree(out, damaged)
  data = bytearray((damaged / pretrain_resnet.WEIGHTS).read_bytes())
  data[-1] ^= 0xFF
  (damaged / pretrain_resnet.WEIGHTS).write_bytes(bytes(data))
  with pytest.raises(AssertionError, match="trained"):
    pretrain_resnet.pretrain(twin, str(tmp_path / "cache" / "new"), _pcfg())


def test_pretrainings_of_one_setting_share_one_compiled_step(tmp_path):
  """Each pretraining built its own optax transform, which the step's graphdef holds and which
  equals only itself: the step was traced and compiled again for each (the study's three)."""
  ds = _dataset(tmp_path / "data", n_train=10, n_val=5)
  step = pretrain_resnet._train_step  # pylint: disable=protected-access
  step.clear_cache()
  for name in ("a", "b"):  # folders apart: the second is not a copy of the first
    pretrain_resnet.pretrain(ds, str(tmp_path / name / "model"), _pcfg(epochs=1))
  assert step._cache_size() == 1  # pylint: disable=protected-access


def _weights(out):
  return checkpoints.load_safetensors(os.path.join(out, pretrain_resnet.WEIGHTS))[0]


def test_killed_pretraining_resumes_after_its_last_epoch_to_the_same_weights(tmp_path,
                                                                              monkeypatch):
  """A pretraining killed in its third epoch restarts there (two epochs kept) and ends with the
  weights, losses and metrics of one never stopped; the resume file goes once the model is in."""
  ds = _dataset(tmp_path / "data", n_train=20, n_val=10)
  cfg = _pcfg(epochs=4)
  whole = pretrain_resnet.pretrain(ds, str(tmp_path / "a" / "whole"), cfg)
  out = str(tmp_path / "b" / "killed")  # not beside it: it would be copied
  step, calls = pretrain_resnet._train_step, []  # pylint: disable=protected-access

  def dies_in_epoch_3(*args):
    calls.append(1)
    if len(calls) == 2 * 2 + 1:  # 20 images, batches of 10: 2 steps an epoch
      raise KeyboardInterrupt
    return step(*args)

  monkeypatch.setattr(pretrain_resnet, "_train_step", dies_in_epoch_3)
  with pytest.raises(KeyboardInterrupt):
    pretrain_resnet.pretrain(ds, out, cfg)
  assert os.path.exists(os.path.join(out, pretrain_resnet.RESUME))
  assert pretrain_resnet.read_manifest(out) is None
  calls.clear()
  resumed = pretrain_resnet.pretrain(ds, out, cfg)
  assert len(calls) == 2 * 2  # only epochs 3 and 4 ran again
  assert not os.path.exists(os.path.join(out, pretrain_resnet.RESUME))
  assert resumed["epoch_losses"] == whole["epoch_losses"]
  assert checkpoints.tree_sha256(_weights(out)) == checkpoints.tree_sha256(
      _weights(str(tmp_path / "a" / "whole")))
  assert resumed["metrics"] == whole["metrics"]


def test_resume_file_of_other_settings_or_damaged_is_not_used(tmp_path, monkeypatch):
  ds = _dataset(tmp_path / "data", n_train=20, n_val=10)
  out = str(tmp_path / "model")
  step, calls = pretrain_resnet._train_step, []  # pylint: disable=protected-access

  def dies_in_epoch_2(*args):
    calls.append(1)
    if len(calls) == 3:
      raise KeyboardInterrupt
    return step(*args)

  monkeypatch.setattr(pretrain_resnet, "_train_step", dies_in_epoch_2)
  with pytest.raises(KeyboardInterrupt):
    pretrain_resnet.pretrain(ds, out, _pcfg(epochs=2))
  resume = os.path.join(out, pretrain_resnet.RESUME)
  kept = pathlib.Path(resume).read_bytes()
  monkeypatch.setattr(pretrain_resnet, "_train_step", step)
  warned = []  # the warnings' text (a CLI test before may have detached the logger from caplog)
  monkeypatch.setattr(pretrain_resnet._log, "warning",  # pylint: disable=protected-access
                      lambda message, *args: warned.append(message % args))
  other = pretrain_resnet.pretrain(ds, out, _pcfg(epochs=2, learning_rate=1e-3))
  assert [w.split(": ", 1)[1] for w in warned] == [
      "saved by a pretraining of other settings or images: starting over"]
  assert other["pretrain_config"]["learning_rate"] == 1e-3
  with open(resume, "wb") as f:  # a flipped byte in the arrays
    f.write(kept[:-5] + bytes([kept[-5] ^ 0xFF]) + kept[-4:])
  warned.clear()
  monkeypatch.setattr(pretrain_resnet, "_train_step", lambda *a: (calls.append(1), step(*a))[1])
  calls.clear()
  pretrain_resnet.pretrain(ds, out, _pcfg(epochs=2))
  assert len(warned) == 1 and "do not match the sha256" in warned[0]
  assert len(calls) == 4  # both epochs again


def test_a_diverged_pretraining_is_refused_and_writes_no_model(tmp_path, monkeypatch):
  """A learning rate of 1000 gave NaN weights that were saved as the pretrained encoder; the
  features step then blamed image.checkpoint or the image's pixels."""
  ds = _dataset(tmp_path / "data", n_train=20, n_val=10)
  out = str(tmp_path / "model")
  step, calls = pretrain_resnet._train_step, []  # pylint: disable=protected-access

  def nan_in_epoch_2(*args):
    calls.append(1)
    loss, state = step(*args)
    return (float("nan") if len(calls) == 4 else loss), state

  monkeypatch.setattr(pretrain_resnet, "_train_step", nan_in_epoch_2)
  with pytest.raises(RSVQAError, match=r"^pretrain synthetic_resnet diverged \(loss nan at step 2 "
                                       r"of epoch 2\); lower image.pretrain.learning_rate \(now "
                                       r"0.003\)$"):
    pretrain_resnet.pretrain(ds, out, _pcfg(epochs=3))
  assert pretrain_resnet.read_manifest(out) is None
  assert not os.path.exists(os.path.join(out, pretrain_resnet.WEIGHTS))


def test_weights_made_non_finite_by_the_last_update_are_refused(tmp_path, monkeypatch):
  """The loss is measured before each update: the last one can leave NaN weights behind a
  finite loss."""
  ds = _dataset(tmp_path / "data", n_train=20, n_val=10)
  out = str(tmp_path / "model")
  step, calls = pretrain_resnet._train_step, []  # pylint: disable=protected-access

  def nan_weights_at_the_end(graphdef, *args):
    calls.append(1)
    loss, state = step(graphdef, *args)
    if len(calls) == 2:
      model, optimizer = nnx.merge(graphdef, state)
      model.conv1.kernel[...] = model.conv1.kernel[...] * np.nan
      state = nnx.state((model, optimizer))
    return loss, state

  monkeypatch.setattr(pretrain_resnet, "_train_step", nan_weights_at_the_end)
  with pytest.raises(RSVQAError, match=r"^pretrain synthetic_resnet diverged \(weights NaN or inf "
                                       r"after epoch 1\); lower image.pretrain.learning_rate"):
    pretrain_resnet.pretrain(ds, out, _pcfg(epochs=1))
  assert pretrain_resnet.read_manifest(out) is None
