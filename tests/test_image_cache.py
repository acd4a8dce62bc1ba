"""Frozen image-feature cache: hit, miss, stale, corrupt and interrupted entries, variants, kinds.

A cache hit must read files only: the encoder is neither built nor run."""
import errno
import json
import logging
import os
import time

import numpy as np
import pytest
from flax import nnx

from rsvqa_jax.data import records
from rsvqa_jax.data.images import read_tif, write_tif
from rsvqa_jax.errors import RSVQAError
from rsvqa_jax.models import checkpoints, resnet
from rsvqa_jax import config as config_lib
from rsvqa_jax import storage
from rsvqa_jax.features import encoder, image_cache, pixels
from rsvqa_jax.features import pretrain as pretrain_resnet
from test_train_support import warnings_of_rsvqa_jax

SIZE = 32


def _dataset(root, n=5):
  os.makedirs(os.path.join(root, "img"), exist_ok=True)
  rng = np.random.default_rng(0)
  rows = []
  for i in range(n):
    image_id = 10 + 3 * i
    write_tif(os.path.join(root, "img", f"{image_id}.tif"),
              rng.integers(0, 256, (SIZE, SIZE, 3), dtype=np.uint8))
    rows.append(dict(question_id=i, image_id=image_id, qtype="presence", question="q",
                     answer="yes", raw_answer="yes"))
  splits = {"train": records.Split.from_rows("train", rows[:3]),
            "val": records.Split.from_rows("val", rows[3:])}
  return records.Dataset("lr", str(root), splits,
                         lambda i: os.path.join(root, "img", f"{i}.tif"), (SIZE, SIZE))


def write_model(out_dir, seed, width=4):
  """A synthetic_resnet folder with He-scaled NumPy random weights (no JAX init to compile)."""
  model = nnx.eval_shape(lambda: resnet.ResNet(18, width=width, num_classes=20, rngs=nnx.Rngs(0)))
  rng = np.random.default_rng(seed)
  flat = {}
  for name, shape in checkpoints.flat_shapes(model).items():
    if name.endswith((".var", ".scale")):
      value = np.ones(shape)
    elif name.endswith((".mean", ".bias")):
      value = 0.1 * rng.standard_normal(shape)
    else:
      value = rng.standard_normal(shape) * np.sqrt(2.0 / np.prod(shape[:-1]))
    flat[name] = np.asarray(value, np.float32)
  checkpoints.load_into(model, checkpoints.unflatten(flat), "test weights")
  pcfg = _pretrain_cfg(width)
  pretrain_resnet.save_pretrained(out_dir, model, {
      "format": pretrain_resnet.FORMAT_VERSION, "depth": 18, "width": width, "image_size": SIZE,
      "num_outputs": 20, "pretrain_config": pcfg.to_dict()})
  return model


def _pretrain_cfg(width=4):
  pcfg = config_lib.pretrain_section()
  pcfg.update(dict(width=width, image_size=SIZE))
  return pcfg


@pytest.fixture
def model_dir(tmp_path):
  path = str(tmp_path / "pretrained")
  write_model(path, 0)
  return path


def _cfg(pretrained_dir, **kw):
  cfg = config_lib.image_section()
  cfg.arch, cfg.pretrained_dir, cfg.batch_size = "synthetic_resnet", pretrained_dir, 4
  cfg.pretrain = _pretrain_cfg()
  cfg.update(kw)
  return cfg


@pytest.fixture
def calls(monkeypatch):
  """Counts ImageEncoder.encode calls (the frozen network running) and builds (`built`)."""
  counter = {"n": 0, "built": 0}
  original, load = encoder.ImageEncoder.encode, encoder.ImageEncoder._load

  def counting(self, images, pad_to=None):
    counter["n"] += 1
    return original(self, images, pad_to)

  def loading(self):
    counter["built"] += 1
    return load(self)

  monkeypatch.setattr(encoder.ImageEncoder, "encode", counting)
  monkeypatch.setattr(encoder.ImageEncoder, "_load", loading)
  return counter


def _reference(model_path, images):
  """Pooled features straight from the network, outside the cache."""
  model = pretrain_resnet.load_pretrained(model_path)
  return np.asarray(model(resnet.preprocess(images))["pooled"])


def _pixels(ds, ids):
  return np.stack([read_tif(ds.image_path(i)) for i in ids])


def test_hit_miss_and_values(tmp_path, calls, model_dir):
  ds = _dataset(tmp_path / "data")
  cache = str(tmp_path / "cache")
  first = image_cache.image_features(ds, ["train", "val"], _cfg(model_dir), cache)
  assert calls["n"] == 2  # 5 images in batches of 4
  np.testing.assert_array_equal(first.image_ids, [10, 13, 16, 19, 22])
  assert isinstance(first.features, np.memmap) and first.features.mode == "r"
  assert first.features.dtype == np.float32 and first.features.shape == (5, 32)
  np.testing.assert_allclose(first.features, _reference(model_dir, _pixels(ds, first.image_ids)),
                             rtol=1e-4, atol=1e-5)
  assert calls["built"] == 1
  second = image_cache.image_features(ds, ["train", "val"], _cfg(model_dir), cache)
  assert calls["n"] == 2 and calls["built"] == 1  # hit: the encoder was neither built nor run
  assert second.path == first.path
  np.testing.assert_array_equal(second.features, first.features)
  image_cache.image_features(ds, ["train"], _cfg(model_dir), cache)  # other image set: miss
  assert calls["n"] == 3


def test_changed_checkpoint_bytes_never_read(tmp_path, calls, model_dir):
  ds = _dataset(tmp_path / "data")
  cache = str(tmp_path / "cache")
  a = image_cache.image_features(ds, None, _cfg(model_dir), cache)
  image_cache.image_features(ds, None, _cfg(model_dir), cache)
  assert calls["n"] == 2
  write_model(model_dir, 1)
  b = image_cache.image_features(ds, None, _cfg(model_dir), cache)
  assert calls["n"] == 4 and b.path != a.path
  assert not np.allclose(a.features, b.features)
  np.testing.assert_allclose(b.features, _reference(model_dir, _pixels(ds, b.image_ids)),
                             rtol=1e-4, atol=1e-5)


def test_changed_preprocessing_or_image_file_is_a_miss(tmp_path, calls, monkeypatch, model_dir):
  ds = _dataset(tmp_path / "data")
  cache = str(tmp_path / "cache")
  base = image_cache.image_features(ds, None, _cfg(model_dir), cache)
  resized = image_cache.image_features(ds, None, _cfg(model_dir, image_size=24), cache)
  assert calls["n"] == 4 and resized.path != base.path
  assert not np.allclose(resized.features, base.features)
  with monkeypatch.context() as m:
    m.setattr(resnet, "IMAGENET_MEAN", (0.5, 0.5, 0.5))
    assert image_cache.image_features(ds, None, _cfg(model_dir), cache).path != base.path
  assert calls["n"] == 6
  path = ds.image_path(16)
  before = os.stat(path)
  write_tif(path, np.full((SIZE, SIZE, 3), 7, np.uint8))  # same size...
  os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))  # ...and the same mtime
  assert (os.stat(path).st_size, os.stat(path).st_mtime_ns) == (before.st_size,
                                                                before.st_mtime_ns)
  changed = image_cache.image_features(ds, None, _cfg(model_dir), cache)
  assert changed.path != base.path and calls["n"] == 8
  row = int(np.searchsorted(changed.image_ids, 16))
  np.testing.assert_allclose(changed.features[row],
                             _reference(model_dir, np.full((1, SIZE, SIZE, 3), 7, np.uint8))[0],
                             rtol=1e-4, atol=1e-5)
  np.testing.assert_array_equal(np.delete(changed.features, row, 0),
                                np.delete(base.features, row, 0))


def test_file_digests_are_computed_once_per_file(tmp_path, monkeypatch):
  monkeypatch.setattr(storage, "MEMO_SETTLE_SECONDS", -1)  # files written just now are kept
  files = [tmp_path / f"{i}.bin" for i in range(3)]
  for i, f in enumerate(files):
    f.write_bytes(bytes([i]) * 10)
  index = str(tmp_path / "digests" / "index")
  first = storage.file_digests(files, index)
  hashed = []
  original = storage.file_sha256
  monkeypatch.setattr(storage, "file_sha256", lambda p: hashed.append(p) or original(p))
  assert storage.file_digests(files, index) == first and hashed == []
  files[1].write_bytes(b"\x09" * 10)
  second = storage.file_digests(files, index)
  assert hashed == [os.path.abspath(files[1])] and second[0] == first[0] and second[1] != first[1]


def test_a_file_changed_just_now_is_not_kept_in_the_digest_index(tmp_path, monkeypatch):
  """A file rewritten with the same size within one tick of a coarse file-system clock (1 s,
  2 s on FAT) after it was hashed keeps its stamp: a digest kept from that tick would be served
  for the new contents. Files changed in the last MEMO_SETTLE_SECONDS are hashed every time."""
  path = tmp_path / "a.bin"
  path.write_bytes(b"\x01" * 10)
  index = str(tmp_path / "index.json")
  assert storage.file_digests([path], index) == [storage.file_sha256(str(path))]
  assert not os.path.exists(index) or json.loads(open(index).read()) == {}
  now = time.time_ns
  monkeypatch.setattr(storage.time, "time_ns",
                      lambda: now() + int(storage.MEMO_SETTLE_SECONDS * 1e9) + 10**9)
  storage.file_digests([path], index)
  assert list(json.loads(open(index).read())) == [os.path.abspath(path)]


def test_a_digest_index_that_cannot_be_written_is_only_a_memo(tmp_path, monkeypatch, caplog):
  """A read-only or full cache folder: the index is not kept (said at DEBUG: a shared read-only
  cache is no fault), the digests are still given (a read of the cache failed with the index's
  OSError)."""
  monkeypatch.setattr(storage, "MEMO_SETTLE_SECONDS", -1)
  path = tmp_path / "a.bin"
  path.write_bytes(b"\x02" * 10)
  (tmp_path / "file").write_text("not a folder")
  index = str(tmp_path / "file" / "digests" / "index.json")
  with warnings_of_rsvqa_jax(caplog, logging.DEBUG):
    assert storage.file_digests([path], index) == [storage.file_sha256(str(path))]
  assert "not kept" in caplog.text


@pytest.mark.parametrize("damage", ['[1, 2]', '{"PATH": [1, 2]}', '{"PATH": "x"}'])
def test_a_damaged_digest_index_is_recomputed_and_gone_files_dropped(tmp_path, damage,
                                                                     monkeypatch):
  """The index is a memo: valid JSON of another shape is rebuilt, not a crash or a wrong digest;
  a rewrite keeps no row of a file that is gone."""
  monkeypatch.setattr(storage, "MEMO_SETTLE_SECONDS", -1)  # files written just now are kept
  files = [tmp_path / f"{i}.bin" for i in range(2)]
  for i, f in enumerate(files):
    f.write_bytes(bytes([i]) * 10)
  index = tmp_path / "index.json"
  index.write_text(damage.replace("PATH", str(files[0])))
  assert storage.file_digests(files, str(index)) == [storage.file_sha256(str(f)) for f in files]
  os.remove(files[1])
  files[0].write_bytes(b"\x05" * 10)
  storage.file_digests(files[:1], str(index))
  assert list(json.loads(index.read_text())) == [os.path.abspath(files[0])]


@pytest.mark.parametrize("damage", ["truncate", "flip_bytes", "no_manifest", "bad_json",
                                    "map_nan", "ids_reversed"])
def test_corrupted_entry_is_recomputed(tmp_path, calls, damage, model_dir):
  """The map was never verified (NaN written into it was read by training and grounding), nor
  the manifest's image ids (reversed, each row was another image's)."""
  ds = _dataset(tmp_path / "data")
  cache = str(tmp_path / "cache")
  good = image_cache.image_features(ds, None, _cfg(model_dir, map=True), cache)
  expected, ids = np.array(good.features), np.array(good.image_ids)
  feats, manifest = (os.path.join(good.path, f) for f in ("features.npy", "manifest.json"))
  fmap = os.path.join(good.path, "map.npy")
  del good
  if damage == "truncate":
    os.truncate(feats, os.path.getsize(feats) - 40)
  elif damage == "flip_bytes":
    with open(feats, "r+b") as f:
      f.seek(-8, os.SEEK_END)
      f.write(b"\x00\x01\x02\x03\x04\x05\x06\x07")
  elif damage == "no_manifest":
    os.remove(manifest)
  elif damage == "map_nan":
    written = np.load(fmap, mmap_mode="r+")
    written[:] = np.nan
    written.flush()
    del written
  elif damage == "ids_reversed":
    record = json.loads(open(manifest).read())
    record["image_ids"] = record["image_ids"][::-1]
    with open(manifest, "w") as f:
      json.dump(record, f)
  else:
    with open(manifest, "w") as f:
      f.write('{"format": 1, "key": ')
  again = image_cache.image_features(ds, None, _cfg(model_dir, map=True), cache)
  assert calls["n"] == 4
  np.testing.assert_array_equal(again.features, expected)
  np.testing.assert_array_equal(again.image_ids, ids)
  assert np.isfinite(again.feature_map).all()


def test_interrupted_run_leaves_no_entry(tmp_path, monkeypatch, model_dir):
  ds = _dataset(tmp_path / "data")
  cache = str(tmp_path / "cache")
  original = encoder.ImageEncoder.encode
  seen = {"n": 0}

  def dies_on_second_batch(self, images, pad_to=None):
    seen["n"] += 1
    if seen["n"] == 2:
      raise KeyboardInterrupt
    return original(self, images, pad_to)

  monkeypatch.setattr(encoder.ImageEncoder, "encode", dies_on_second_batch)
  with pytest.raises(KeyboardInterrupt):
    image_cache.image_features(ds, None, _cfg(model_dir), cache)
  # Nothing but the entry's (empty) lock file, which stays for the next builder to take.
  assert [n for n in os.listdir(cache) if n != storage.DIGESTS_DIR
          and not n.endswith(".lock")] == []
  monkeypatch.setattr(encoder.ImageEncoder, "encode", original)
  entry = image_cache.image_features(ds, None, _cfg(model_dir), cache)
  assert entry.features.shape == (5, 32)


def test_non_finite_features_are_never_cached(tmp_path, monkeypatch, model_dir):
  """NaN features (damaged weights or pixels) are an error naming the first image, not an entry."""
  ds = _dataset(tmp_path / "data")
  cache = str(tmp_path / "cache")
  original = encoder.ImageEncoder.encode

  def nan_in_row_2(self, images, pad_to=None):  # rows 2 and 3 of the first batch: images 16 and 19
    pooled = np.array(original(self, images, pad_to)["pooled"])
    pooled[2:, 0] = np.nan
    return {"pooled": pooled}

  monkeypatch.setattr(encoder.ImageEncoder, "encode", nan_in_row_2)
  with pytest.raises(RSVQAError, match=r"^features lr_synthetic_resnet_none_clean: image 16 gives "
                                       r"NaN or inf features: the encoder weights \(image\."
                                       r"checkpoint\) or the image's pixels are damaged; nothing "
                                       "was cached$"):
    image_cache.image_features(ds, None, _cfg(model_dir), cache)
  monkeypatch.setattr(encoder.ImageEncoder, "encode",
                      lambda self, images, pad_to=None: {"pooled": np.full((len(images), 32),
                                                                            np.inf)})
  with pytest.raises(RSVQAError, match="_none_white: image 10 gives NaN or inf features"):
    image_cache.image_features(ds, None, _cfg(model_dir), cache, kind="white")
  assert [n for n in os.listdir(cache) if n != storage.DIGESTS_DIR
          and not n.endswith(".lock")] == []


def test_an_entry_is_hashed_again_only_when_its_files_changed(tmp_path, calls, monkeypatch,
                                                                model_dir):
  """Every open hashed features.npy and map.npy in full (a ResNet-152 map of RSVQA-HR is
  gigabytes); the checksums are now kept with the files' stat stamps (storage.file_digests)."""
  monkeypatch.setattr(storage, "MEMO_SETTLE_SECONDS", -1)  # files written just now are kept
  ds = _dataset(tmp_path / "data")
  cache = str(tmp_path / "cache")
  cfg = _cfg(model_dir, map=True)
  path = image_cache.image_features(ds, None, cfg, cache).path
  hashed = []
  sha256 = storage.file_sha256
  monkeypatch.setattr(storage, "file_sha256", lambda p: hashed.append(p) or sha256(p))
  for _ in range(2):
    entry = image_cache.image_features(ds, None, cfg, cache)
  assert entry.path == path and calls["n"] == 2 and not [
      p for p in hashed if p.startswith(path)]
  fmap = os.path.join(path, "map.npy")
  written = np.load(fmap, mmap_mode="r+")  # same size, same name: only the stamp tells
  written[0] += 1.0
  written.flush()
  del written, entry
  again = image_cache.image_features(ds, None, cfg, cache)
  assert fmap in hashed and calls["n"] == 4  # the map no longer matched: rebuilt
  np.testing.assert_allclose(again.feature_map.mean(axis=(1, 2)), again.features, rtol=1e-5)


def test_an_entry_holding_nan_is_rebuilt(tmp_path, calls, model_dir):
  """An entry written before NaN features were refused is not served (checksum or no)."""
  ds = _dataset(tmp_path / "data")
  cache = str(tmp_path / "cache")
  good = image_cache.image_features(ds, None, _cfg(model_dir), cache)
  expected, path = np.array(good.features), good.path
  del good
  feats = os.path.join(path, "features.npy")
  np.save(feats, np.full_like(expected, np.nan))
  with open(os.path.join(path, "manifest.json"), encoding="utf-8") as f:
    manifest = json.load(f)
  manifest["features_sha256"] = storage.file_sha256(feats)
  with open(os.path.join(path, "manifest.json"), "w", encoding="utf-8") as f:
    json.dump(manifest, f)
  again = image_cache.image_features(ds, None, _cfg(model_dir), cache)
  assert calls["n"] == 4  # two batches each time
  np.testing.assert_array_equal(again.features, expected)


def test_variants_are_separate_entries(tmp_path, model_dir):
  ds = _dataset(tmp_path / "data")
  cache = str(tmp_path / "cache")
  images = _pixels(ds, ds.image_ids("train"))
  paths = set()
  for variant, fn in [("hflip", lambda x: x[:, :, ::-1]), ("vflip", lambda x: x[:, ::-1]),
                      ("rot90", lambda x: np.rot90(x, 1, axes=(1, 2))),
                      ("rot180", lambda x: x[:, ::-1, ::-1]),
                      ("rot270", lambda x: np.rot90(x, 3, axes=(1, 2)))]:
    entry = image_cache.image_features(ds, ["train"], _cfg(model_dir), cache, variant=variant)
    np.testing.assert_allclose(entry.features,
                               _reference(model_dir, np.ascontiguousarray(fn(images))),
                               rtol=1e-4, atol=1e-5)
    paths.add(entry.path)
  assert len(paths) == 5
  with pytest.raises(RSVQAError, match="variant"):
    image_cache.image_features(ds, ["train"], _cfg(model_dir), cache, variant="rot45")


def test_adversarial_kinds(tmp_path, calls, model_dir):
  ds = _dataset(tmp_path / "data")
  cache = str(tmp_path / "cache")
  cfg = _cfg(model_dir)
  white = image_cache.image_features(ds, None, cfg, cache, kind="white")
  assert calls["n"] == 1  # one image encoded, broadcast to every row
  full_white = np.full((1, SIZE, SIZE, 3), 255, np.uint8)
  np.testing.assert_allclose(white.features, np.repeat(_reference(model_dir, full_white), 5, 0),
                             rtol=1e-4, atol=1e-5)
  black = image_cache.image_features(ds, None, cfg, cache, kind="black")
  assert not np.allclose(black.features, white.features)
  n1 = image_cache.image_features(ds, None, cfg, cache, kind="noise", noise_seed=1)
  n1_again = image_cache.image_features(ds, None, cfg, str(tmp_path / "other"), kind="noise",
                                          noise_seed=1)
  n2 = image_cache.image_features(ds, None, cfg, cache, kind="noise", noise_seed=2)
  np.testing.assert_array_equal(n1.features, n1_again.features)
  assert not np.allclose(n1.features, n2.features)
  assert not np.allclose(n1.features[0], n1.features[1])  # noise differs per image
  noise = pixels.noise_image(1, 13, (SIZE, SIZE, 3))
  np.testing.assert_allclose(n1.features[int(np.searchsorted(n1.image_ids, 13))], _reference(model_dir, noise[None])[0],
                             rtol=1e-4, atol=1e-5)
  with pytest.raises(RSVQAError, match="no augmentation"):
    image_cache.image_features(ds, None, cfg, cache, kind="white", variant="hflip")


def test_a_batch_larger_than_the_set_pads_to_the_set(tmp_path, monkeypatch, model_dir):
  """5 images at image.batch_size 10**20 are one batch of 5, not a request for 10**20 rows of
  zeros (numpy's 'Maximum allowed dimension exceeded'); a white image is a batch of one."""
  ds = _dataset(tmp_path / "data")
  original, shapes = encoder.ImageEncoder.encode, []

  def recording(self, images, pad_to=None):
    out = original(self, images, pad_to)
    shapes.append((len(images), pad_to))
    return out

  monkeypatch.setattr(encoder.ImageEncoder, "encode", recording)
  cfg = _cfg(model_dir, batch_size=10**20)
  entry = image_cache.image_features(ds, None, cfg, str(tmp_path / "c"))
  white = image_cache.image_features(ds, None, cfg, str(tmp_path / "c"), kind="white")
  assert shapes == [(5, 5), (1, 1)]
  np.testing.assert_allclose(entry.features, _reference(model_dir, _pixels(ds, entry.image_ids)),
                             rtol=1e-4, atol=1e-5)
  assert white.features.shape == (5, 32)


def test_map_is_kept_when_asked(tmp_path, model_dir):
  ds = _dataset(tmp_path / "data")
  entry = image_cache.image_features(ds, None, _cfg(model_dir, map=True), str(tmp_path / "c"))
  assert entry.feature_map.shape == (5, 1, 1, 32)
  np.testing.assert_allclose(entry.feature_map.mean(axis=(1, 2)), entry.features, rtol=1e-5)


def test_tree_hash_sees_values_and_names():
  a = {"x": np.zeros(3, np.float32), "y": np.ones((2, 2), np.float32)}
  assert checkpoints.tree_sha256(a) == checkpoints.tree_sha256(dict(reversed(a.items())))
  assert checkpoints.tree_sha256(a) != checkpoints.tree_sha256({**a, "x": np.full(3, 1e-7)})
  assert checkpoints.tree_sha256(a) != checkpoints.tree_sha256({"z": a["x"], "y": a["y"]})


def test_bad_config_is_a_clear_error(tmp_path, model_dir):
  ds = _dataset(tmp_path / "data")
  with pytest.raises(RSVQAError, match="image.arch"):
    image_cache.image_features(ds, None, _cfg(model_dir, arch="vgg16"), str(tmp_path / "c"))
  with pytest.raises(RSVQAError, match="image.checkpoint"):
    image_cache.image_features(ds, None, _cfg(model_dir, arch="resnet18",
                                                checkpoint=str(tmp_path / "nope.pth")),
                                 str(tmp_path / "c"))


def test_random_init_hit_builds_nothing(tmp_path, calls, monkeypatch):
  """A random-init encoder's identity is its settings: a hit never draws the weights."""
  ds = _dataset(tmp_path / "data")
  cache = str(tmp_path / "cache")
  cfg = config_lib.image_section()
  cfg.update(dict(arch="resnet18", width=4, batch_size=8, checkpoint="random"))
  first = image_cache.image_features(ds, None, cfg, cache)
  assert calls["built"] == 1
  monkeypatch.setattr(encoder, "jit_init", lambda *a, **k: pytest.fail("built on a hit"))
  again = image_cache.image_features(ds, None, cfg, cache)
  assert again.path == first.path and calls["built"] == 1
  cfg.seed = 1
  with pytest.raises(pytest.fail.Exception, match="built on a hit"):  # another seed: a miss
    image_cache.image_features(ds, None, cfg, cache)


def test_missing_synthetic_resnet_is_an_error_not_a_pretraining(tmp_path):
  ds = _dataset(tmp_path / "data")
  with pytest.raises(RSVQAError, match="features --pretrain"):
    image_cache.image_features(ds, None, _cfg(str(tmp_path / "none")), str(tmp_path / "c"))
  assert not os.path.exists(tmp_path / "none")


class _FullDisk:
  """open() of the storage module whose .npy files take `room` bytes, then fail as a full disk
  does (ENOSPC, naming no file)."""

  def __init__(self, room):
    self.room = room

  def __call__(self, path, mode="r", *args, **kwargs):
    f = open(path, mode, *args, **kwargs)  # pylint: disable=unspecified-encoding
    if not (str(path).endswith(".npy") and "w" in mode):
      return f
    room, write = self.room, f.write

    def full(data):
      nonlocal room
      if len(data) > room:
        raise OSError(errno.ENOSPC, "No space left on device")
      room -= len(data)
      return write(data)

    f.write = full
    return f


@pytest.mark.parametrize("kind", ["white", "clean"])
def test_a_disk_full_while_features_are_written_is_an_error_naming_the_entry(
    tmp_path, monkeypatch, model_dir, kind):
  """The arrays were written through memory maps: a disk filled after the free-space check (or
  never checked: white / black) ended the process with SIGBUS and no message. Plain writes make
  it an OSError, named as the entry the user can find, not its removed temporary folder."""
  ds = _dataset(tmp_path / "data")
  cache = str(tmp_path / "cache")
  monkeypatch.setattr(storage, "open", _FullDisk(200), raising=False)
  with pytest.raises(OSError) as e:
    image_cache.image_features(ds, None, _cfg(model_dir), cache, kind=kind)
  assert e.value.errno == errno.ENOSPC
  entry, file = os.path.split(e.value.filename)
  assert file == "pooled.npy" and os.path.dirname(entry) == cache
  assert os.path.basename(entry).startswith(f"{ds.name}_synthetic_resnet_none_{kind}_")
  assert not [n for n in os.listdir(cache) if n.startswith(".tmp-")]
  monkeypatch.undo()
  again = image_cache.image_features(ds, None, _cfg(model_dir), cache, kind=kind)
  assert again.features.shape[0] == 5
