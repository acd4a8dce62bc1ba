"""`rsvqa-jax features` end to end through the CLI: entries written, reused, bad flags, weights.

--cache is the folder a config names as data.cache_dir: the entries go to CACHE/features and a
pretrained synthetic ResNet to CACHE/synthetic_resnet, where training looks for both.
"""
import os
import shutil

import numpy as np
import pytest
from flax import nnx

from rsvqa_jax import cli, storage
from rsvqa_jax.data import rsvqa_json, synthetic
from rsvqa_jax.data.images import read_tif
from rsvqa_jax.errors import RSVQAError
from rsvqa_jax.models import checkpoints, resnet
from rsvqa_jax import config as config_lib
from rsvqa_jax.features import encoder, image_cache, pixels
from rsvqa_jax.train import inputs, loop

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG = os.path.join(ROOT, "configs", "synthetic_tiny.py")  # random ResNet-18, width 8, 32x32


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
  out = str(tmp_path_factory.mktemp("synth") / "lr")
  assert cli.main(["synth", "--out", out, "--images", "6", "--questions-per-image", "2"]) == 0
  return out


@pytest.fixture(scope="module")
def real_dir(data_dir, tmp_path_factory):
  """The same files without the synthetic.json manifest: what a real dataset looks like."""
  out = str(tmp_path_factory.mktemp("real") / "lr")
  shutil.copytree(data_dir, out)
  os.remove(os.path.join(out, synthetic.MANIFEST))
  return out


def _features(data_dir, cache, capsys, *flags, layout="lr"):
  rc = cli.main(["features", "--data", data_dir, *(["--dataset", layout] if layout else []),
                 "--cache", cache, "--config", CONFIG, *flags])
  out = capsys.readouterr()
  return rc, out.out, out.err


def test_cache_created_then_reused(data_dir, tmp_path, capsys, monkeypatch):
  cache = str(tmp_path / "cache")
  rc, out, _ = _features(data_dir, cache, capsys, "--variants", "none,hflip", "--kinds",
                         "clean,white")
  assert rc == 0
  lines = [l for l in out.splitlines() if " -> " in l]
  assert [l.split(":")[0] for l in lines] == ["none/clean", "hflip/clean", "none/white"]
  paths = [l.split(" -> ")[1] for l in lines]
  assert all(l.split(": ")[1].startswith("6 images x 64 features") for l in lines)
  entries = {n for n in os.listdir(os.path.join(cache, "features"))
             if not n.startswith(".")} - {storage.DIGESTS_DIR}  # each entry's .NAME.lock aside
  assert sorted(entries) == sorted(os.path.basename(p) for p in paths)

  dataset = rsvqa_json.read_dataset(data_dir, "lr")
  ids = np.unique(np.concatenate([dataset[s].image_id for s in dataset.splits]))
  assert len(ids) == 6
  entry = image_cache._open_entry(paths[0], paths[0].rsplit("_", 1)[1], ids)
  images = np.stack([pixels.resize(read_tif(dataset.image_path(i)), 32)
                     for i in entry.image_ids])
  model = checkpoints.jit_init(lambda k: resnet.ResNet(18, width=8, rngs=nnx.Rngs(k)), 0)
  expected = np.asarray(model(resnet.preprocess(images))["pooled"])
  np.testing.assert_allclose(entry.features, expected, rtol=1e-4, atol=1e-5)
  flipped = image_cache._open_entry(paths[1], paths[1].rsplit("_", 1)[1], ids)
  assert not np.allclose(flipped.features, entry.features)

  calls = {"n": 0}
  original = encoder.ImageEncoder.encode

  def counting(self, images, pad_to=None):
    calls["n"] += 1
    return original(self, images, pad_to)

  monkeypatch.setattr(encoder.ImageEncoder, "encode", counting)
  mtimes = [os.stat(os.path.join(p, "features.npy")).st_mtime_ns for p in paths]
  rc, again, _ = _features(data_dir, cache, capsys, "--variants", "none,hflip", "--kinds",
                           "clean,white", layout=None)  # the layout detected: the same entries
  assert rc == 0 and calls["n"] == 0  # every entry was a hit: the encoder never ran
  assert [l.split(" -> ")[1] for l in again.splitlines() if " -> " in l] == paths
  assert [os.stat(os.path.join(p, "features.npy")).st_mtime_ns for p in paths] == mtimes


def test_bad_flags_are_one_line_errors(data_dir, tmp_path, capsys):
  rc, _, err = _features(data_dir, str(tmp_path / "c"), capsys, "--variants", "rot45")
  assert rc == 2 and "--variants=rot45: expected 'all' or a comma list" in err
  rc, _, err = _features(data_dir, str(tmp_path / "c"), capsys, "--splits", "nope")
  assert rc == 2 and "no split 'nope'" in err
  rc, _, err = _features(data_dir, str(tmp_path / "c"), capsys, "--splits", ",")
  assert rc == 2 and "--splits ',': names no split (leave it out for all)" in err
  rc, _, err = _features(data_dir, str(tmp_path / "c"), capsys, "--pretrained-dir", "p")
  assert rc == 2 and "--pretrained-dir: only a synthetic_resnet is read from it" in err
  rc, _, err = _features(data_dir, data_dir, capsys)  # features/ landed among its files
  assert rc == 2 and err.strip().endswith("holds a dataset (LR_split_train_questions.json); give "
                                          "the cache a folder of its own")
  assert not os.path.exists(tmp_path / "c")


def test_variants_without_the_clean_kind_are_refused(data_dir, tmp_path, capsys):
  """Variants augment clean images only: with white alone, hflip was silently dropped."""
  for variants, kinds in (("hflip", "white"), ("none,rot90", "white,noise")):
    rc, out, err = _features(data_dir, str(tmp_path / "c"), capsys, "--variants", variants,
                             "--kinds", kinds)
    assert rc == 2 and out == ""
    assert err.strip().splitlines() == [
        f"rsvqa-jax features: error: --variants {variants} --kinds {kinds}: the variants augment "
        "clean images only (white, black and noise are never flipped or rotated); add clean to "
        "--kinds or leave --variants out"]
  assert not os.path.exists(tmp_path / "c")


def test_non_finite_weights_are_refused_before_any_feature_is_cached(data_dir, tmp_path, capsys):
  """NaN weights once gave an all-NaN entry with rc 0, and training then blamed the lr."""
  import safetensors.numpy  # pylint: disable=g-import-not-at-top
  from rsvqa_jax.models import resnet_params  # pylint: disable=g-import-not-at-top
  model = nnx.eval_shape(lambda r: resnet.ResNet(18, rngs=r, width=8), nnx.Rngs(0))
  flat = {k: np.full(s, np.nan if k == "conv1.kernel" else 0.5, np.float32)
          for k, s in checkpoints.flat_shapes(model).items()}
  weights = tmp_path / "r18_nan.safetensors"
  safetensors.numpy.save_file({k: np.ascontiguousarray(v) for k, v in
                               resnet_params.to_torchvision(checkpoints.unflatten(flat)).items()},
                              str(weights))
  cache = str(tmp_path / "c")
  rc, out, err = _features(data_dir, cache, capsys, "--checkpoint", str(weights))
  assert rc == 2 and out == ""
  assert err.strip().splitlines() == [
      f"rsvqa-jax features: error: {weights}: key 'conv1.weight': 1176 of 1176 values are not "
      "finite (NaN or inf); the weights are damaged: export or download them again"]
  assert [n for n in os.listdir(os.path.join(cache, "features"))  # no entry; the digest memo
          if not n.startswith(".") and n != storage.DIGESTS_DIR] == []  # only of older files


def test_a_checkpoint_folder_without_config_json_is_refused_before_it_is_read(
    real_dir, tmp_path, capsys, monkeypatch):
  """Every file under it was hashed first: --checkpoint /usr read for 20 s, then named a
  dangling link somewhere under it."""
  folder = tmp_path / "weights"
  (folder / "sub").mkdir(parents=True)
  os.symlink(folder / "nowhere", folder / "sub" / "dangling")
  monkeypatch.setattr(encoder.storage, "path_sha256", lambda p: pytest.fail("hashed"))
  rc, _, err = _features(real_dir, str(tmp_path / "cache"), capsys, "--checkpoint", str(folder))
  assert rc == 2 and err.strip().endswith(
      f"{folder}: a folder source must be a Hugging Face ResNet with config.json (transformers' "
      "or timm's); copy the config.json that came with the weights, or give the weights file "
      "itself (.pth, .safetensors)")


def test_real_data_needs_a_named_or_explicitly_random_checkpoint(real_dir, data_dir, tmp_path,
                                                                 capsys):
  cache = str(tmp_path / "cache")
  rc, out, err = _features(real_dir, cache, capsys)
  assert rc == 2 and out == "" and len(err.strip().splitlines()) == 1
  assert "image.checkpoint is not set" in err and "--checkpoint PATH" in err
  assert "--checkpoint random" in err and "Traceback" not in err
  assert not os.path.exists(cache)
  damaged = tmp_path / "damaged"  # a synthetic.json cut short made the folder synthetic
  shutil.copytree(real_dir, damaged)
  (damaged / synthetic.MANIFEST).write_text("{")
  rc, out, err = _features(str(damaged), cache, capsys)
  assert rc == 2 and f"not a synthetic dataset ({synthetic.MANIFEST} unreadable or not a JSON " \
      "object) and image.checkpoint is not set" in err
  rc, out, _ = _features(real_dir, cache, capsys, "--checkpoint", "random")
  assert rc == 0
  random_entry = [l.split(" -> ")[1] for l in out.splitlines() if " -> " in l]
  rc, out, _ = _features(data_dir, str(tmp_path / "synth_cache"), capsys)  # manifest: allowed
  assert rc == 0
  synth_entry = [l.split(" -> ")[1] for l in out.splitlines() if " -> " in l]
  assert len(random_entry) == len(synth_entry) == 1  # same random-init ResNet on the same pixels
  np.testing.assert_array_equal(np.load(os.path.join(random_entry[0], "features.npy")),
                                np.load(os.path.join(synth_entry[0], "features.npy")))


def test_synthetic_resnet_needs_no_checkpoint(real_dir, tmp_path, capsys, monkeypatch):
  seen = {}

  def stop(cfg):
    seen["arch"] = cfg.arch
    raise RSVQAError("encoder reached")

  monkeypatch.setattr(encoder, "encoder_for", stop)
  rc, _, err = _features(real_dir, str(tmp_path / "c"), capsys, "--arch", "synthetic_resnet")
  assert rc == 2 and "encoder reached" in err and seen == {"arch": "synthetic_resnet"}


def test_synthetic_resnet_is_pretrained_only_on_request(data_dir, tmp_path, capsys):
  cache = str(tmp_path / "cache")
  small = ["--arch", "synthetic_resnet", "--batch-size", "4"]
  rc, _, err = _features(data_dir, cache, capsys, *small)
  assert rc == 2 and "features --pretrain" in err and not os.path.exists(
      os.path.join(cache, "synthetic_resnet"))


def test_features_takes_config_overrides_as_train_does(tmp_path):
  """They were refused by the top-level parser: an encoder pretrained under an override could
  not be rebuilt with `features --pretrain`, as its error suggests."""
  import argparse  # pylint: disable=g-import-not-at-top
  from rsvqa_jax.commands import features  # pylint: disable=g-import-not-at-top
  parser = argparse.ArgumentParser()
  features.add_arguments(parser)
  base = ["--data", "d", "--dataset", "lr", "--cache", str(tmp_path), "--config", CONFIG]
  image, _ = features.settings(parser.parse_args(base + ["--config.image.image_size=16",
                                                         "--config.image.pretrain.width", "4"]))
  assert (image.image_size, image.pretrain.width) == (16, 4)
  image, _ = features.settings(parser.parse_args(base + ["--config.image.image_size=16",
                                                         "--image-size", "24"]))
  assert image.image_size == 24  # the flags come last, as documented
  with pytest.raises(RSVQAError, match="no key 'nosuch' in image"):
    features.settings(parser.parse_args(base + ["--config.image.nosuch=1"]))


def test_each_pretrain_setting_and_dataset_has_its_own_encoder_folder(tmp_path):
  """Two configs of other image.pretrain settings shared CACHE/synthetic_resnet: the second
  one's pretraining replaced the encoder the first one's runs read, and they could no longer be
  evaluated. Two datasets shared it too: a run on 40 images of seed 0 read the encoder
  pretrained on the train split of 80 images of seed 0, which holds pictures of its test split."""
  a = config_lib.load(os.path.join(ROOT, "configs", "synthetic_small.py"))
  b = config_lib.load(os.path.join(ROOT, "configs", "synthetic_small.py"))
  b.image.pretrain.image_size = a.image.pretrain.image_size // 2
  config_lib.apply_overrides(a, ["data.cache_dir=/cache"])
  config_lib.apply_overrides(b, ["data.cache_dir=/cache"])
  folder = lambda c: inputs.resolved_image(c, "/runs/x").pretrained_dir
  assert folder(a) != folder(b)
  assert {os.path.dirname(folder(a)), os.path.dirname(folder(b))} == {"/cache/synthetic_resnet"}
  b.image.pretrain.image_size = a.image.pretrain.image_size
  b.image.batch_size = a.image.batch_size + 1  # not a pretraining setting
  assert folder(a) == folder(b)
  b.data.synthetic_images = a.data.synthetic_images + 1
  assert folder(a) != folder(b)
  # the same dataset in a folder of its own (a study's, synth --out) reads the config's encoder
  data = str(tmp_path / "data")
  synthetic.generate(data, "lr", 12, 0, questions_per_image=4)
  c = config_lib.load(os.path.join(ROOT, "configs", "synthetic_small.py"))
  config_lib.apply_overrides(c, ["data.cache_dir=/cache", "data.synthetic_images=12",
                                 "data.synthetic_questions_per_image=4"])
  mine = config_lib.load(os.path.join(ROOT, "configs", "synthetic_small.py"))
  config_lib.apply_overrides(mine, ["data.cache_dir=/cache", "data.synthetic=false",
                                    f"data.root={data}"])
  assert folder(mine) == folder(c) != folder(a)


def test_features_and_training_agree_on_the_cache(tmp_path, capsys, monkeypatch):
  """features --pretrain writes the encoder and features where training reads them."""
  c = config_lib.load(os.path.join(ROOT, "configs", "synthetic_small.py"))
  cache = str(tmp_path / "cache")
  config_lib.apply_overrides(c, [
      "data.synthetic_images=12", "data.synthetic_questions_per_image=4", f"data.cache_dir={cache}",
      "image.pretrain.epochs=1", "image.pretrain.image_size=32", "image.pretrain.width=8",
      "image.pretrain.batch_size=4", "image.batch_size=4", "text.word_dim=8",
      "text.hidden_dim=8", "model.hidden_dim=8", "model.classifier_dim=8",
      "train.num_epochs=1", "train.batch_size=8", "train.progress_bar=false"])
  data = config_lib.synthetic_root(c, str(tmp_path / "run"))
  synthetic.generate(data, "lr", 12, 0, questions_per_image=4)
  overrides = tmp_path / "small.py"
  overrides.write_text("\n".join([
      "from rsvqa_jax import config",
      "def get_config():",
      f"  return config.from_dict({config_lib.to_dict(c)!r})", ""]))
  rc = cli.main(["features", "--data", data, "--dataset", "lr", "--config", str(overrides),
                 "--pretrain"])
  captured = capsys.readouterr()
  out = captured.out
  assert rc == 0 and "stage pretrain" in captured.err
  pretrained = inputs.resolved_image(c, str(tmp_path / "run")).pretrained_dir
  assert os.path.dirname(pretrained) == os.path.join(cache, "synthetic_resnet")
  assert os.path.isfile(os.path.join(pretrained, "model.safetensors"))
  entry = [l.split(" -> ")[1] for l in out.splitlines() if " -> " in l][0]
  assert os.path.dirname(entry) == os.path.join(cache, "features")
  from rsvqa_jax.features import pretrain  # pylint: disable=g-import-not-at-top
  monkeypatch.setattr(pretrain, "pretrain", lambda *a, **k: pytest.fail("pretrained twice"))
  monkeypatch.setattr(encoder.ImageEncoder, "encode",
                      lambda *a, **k: pytest.fail("features computed twice"))
  summary = loop.train(c, str(tmp_path / "run"), log=lambda m: None)
  assert summary["finished"]
