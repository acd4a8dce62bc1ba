"""On-disk cache of frozen image-encoder features, versioned so stale features are never read.

A frozen encoder's output depends only on its parameters, the preprocessing and the pixels, so
it runs once per image (per augmentation variant, per adversarial pixel kind) and the result is
reused by every run and seed. One cache entry is a folder holding `features.npy` (raw float32
[N, D], opened with mmap_mode="r"), optionally `map.npy` ([N, h, w, C], the spatial map for the
original baseline's 1x1 conv) and `manifest.json` (image ids in row order and everything the
features depend on). The folder name ends in a key hashed from that identity: encoder parameters
(sha256 of the checkpoint file, or of the parameter tree for in-process encoders), architecture,
preprocessing, input size, variant, kind, dataset root and every image file's size and mtime.
Anything that changes the features changes the key, so an old entry is simply never looked up.
Entries are built in a temporary folder and renamed into place when complete; on open, the
manifest, array shapes and the features checksum are verified, and a bad entry is rebuilt.
"""
import concurrent.futures
import contextlib
import dataclasses
import functools
import hashlib
import json
import logging
import os
import re
import shutil
import tempfile
import time
from typing import Callable

import jax
import ml_collections
import numpy as np
from flax import nnx
from PIL import Image
from tqdm import tqdm

from rsvqa_jax.data.images import read_tif
from rsvqa_jax.errors import RSVQAError
from rsvqa_jax.models import resnet
from rsvqa_jax.models.checkpoints import jit_init
from rsvqa_jax.train.config_lib import is_random

FORMAT_VERSION = 1
VARIANTS = ("none", "hflip", "vflip", "rot90", "rot180", "rot270")
KINDS = ("clean", "white", "black", "noise")
_log = logging.getLogger(__name__)


def default_image_config():
  """The frozen image encoder and how its features are computed.

  arch: "resnet18" ... "resnet152" (checkpoint = a weights file or Hugging Face folder read by
    models.resnet_params.load_resnet; "random" or empty = random init from `seed` at stem
    `width`, an honest no-weights baseline that real-data training configs must ask for
    explicitly, see config_lib.check_weights) or "synthetic_resnet" (the small ResNet pretrained on the
    synthetic scenes' land cover, see train/pretrain_resnet.py, stored in `pretrained_dir`;
    an optional `pretrain` section overrides pretrain_resnet.default_pretrain_config()).
  image_size: side the tiles are resized to before the encoder (0 = native size; for
    synthetic_resnet 0 means the size it was pretrained at).
  map: also keep the final spatial map (for the original baseline's 1x1 conv; large on disk).
  """
  c = ml_collections.ConfigDict()
  c.arch = "resnet152"
  c.checkpoint = ""
  c.pretrained_dir = ""
  c.batch_size = 32
  c.map = False
  c.image_size = 0
  c.width = 64
  c.seed = 0
  return c


def file_sha256(path):
  """sha256 hex digest of a file's bytes."""
  h = hashlib.sha256()
  with open(path, "rb") as f:
    for chunk in iter(lambda: f.read(1 << 22), b""):
      h.update(chunk)
  return h.hexdigest()


def path_sha256(path):
  """sha256 of a file, or of a folder's relative file names and their contents' hashes."""
  if os.path.isfile(path):
    return file_sha256(path)
  h = hashlib.sha256()
  for folder, dirs, files in sorted(os.walk(path)):
    dirs.sort()
    for name in sorted(files):
      full = os.path.join(folder, name)
      h.update(f"{os.path.relpath(full, path)}:{file_sha256(full)};".encode())
  return h.hexdigest()


def tree_sha256(tree):
  """sha256 of a parameter tree: every leaf's path, dtype, shape and bytes, in path order."""
  h = hashlib.sha256()
  leaves = jax.tree_util.tree_flatten_with_path(tree)[0]
  for path, leaf in sorted(leaves, key=lambda kv: jax.tree_util.keystr(kv[0])):
    arr = np.ascontiguousarray(np.asarray(leaf))
    h.update(f"{jax.tree_util.keystr(path)}|{arr.dtype}|{arr.shape}|".encode())
    h.update(arr.tobytes())
  return h.hexdigest()


def identity_key(identity):
  """Short stable hash of a JSON-able identity dict."""
  blob = json.dumps(identity, sort_keys=True, separators=(",", ":")).encode()
  return hashlib.sha256(blob).hexdigest()[:20]


@contextlib.contextmanager
def building(cache_dir, name):
  """Yields a fresh temporary folder; it becomes cache_dir/name only if the block completes.

  A run killed midway leaves at most a `.tmp-*` folder, never a half entry under the real name.
  If another process completed the same entry first, theirs is kept.
  """
  os.makedirs(cache_dir, exist_ok=True)
  tmp = tempfile.mkdtemp(prefix=f".tmp-{name}-", dir=cache_dir)
  try:
    yield tmp
    try:
      os.rename(tmp, os.path.join(cache_dir, name))
    except OSError:
      if not os.path.isdir(os.path.join(cache_dir, name)):
        raise
  finally:
    shutil.rmtree(tmp, ignore_errors=True)


def write_manifest(folder, manifest):
  with open(os.path.join(folder, "manifest.json"), "w") as f:
    json.dump(manifest, f, indent=1)


def read_manifest(folder, key):
  """The folder's manifest if it parses and carries this format and key, else None."""
  try:
    with open(os.path.join(folder, "manifest.json")) as f:
      manifest = json.load(f)
  except (OSError, ValueError):
    return None
  if not isinstance(manifest, dict) or manifest.get("format") != FORMAT_VERSION:
    return None
  return manifest if manifest.get("key") == key else None


def open_array(path, shape, sha256=None):
  """Read-only float32 memmap of a .npy with this exact shape (and checksum), else None."""
  try:
    arr = np.load(path, mmap_mode="r")
  except (OSError, ValueError):
    return None
  if arr.dtype != np.float32 or arr.shape != tuple(shape):
    return None
  if sha256 is not None and file_sha256(path) != sha256:
    return None
  return arr


def resize(image, size):
  """uint8 HxWx3 -> size x size with PIL's antialiased bilinear filter (no-op at that size)."""
  if not size or image.shape[:2] == (size, size):
    return image
  return np.asarray(Image.fromarray(image).resize((size, size), Image.Resampling.BILINEAR))


def apply_variant(image, variant):
  """One of VARIANTS applied to an HxWxC image (rotations counter-clockwise)."""
  if variant == "none":
    return image
  if variant == "hflip":
    return image[:, ::-1]
  if variant == "vflip":
    return image[::-1]
  if variant in ("rot90", "rot180", "rot270"):
    return np.rot90(image, k=int(variant[3:]) // 90)
  raise ValueError(f"unknown image variant {variant!r}; expected one of {VARIANTS}")


def noise_image(seed, image_id, shape):
  """Uniform uint8 noise, a pure function of (seed, image id, shape)."""
  rng = np.random.default_rng([seed, int(image_id)])
  return rng.integers(0, 256, size=shape, dtype=np.uint8)


def preprocessing_description(image_size):
  """What happens to the pixels between the file and the encoder (part of the cache key)."""
  resized = f"PIL bilinear resize to {image_size}x{image_size}" if image_size else "native size"
  return (f"{resized}; x/255; (x - {tuple(resnet.IMAGENET_MEAN)}) / {tuple(resnet.IMAGENET_STD)};"
          " NHWC float32")


@functools.partial(jax.jit, static_argnums=(0, 3))
def _forward(graphdef, state, batch, keep_map):
  out = nnx.merge(graphdef, state)(resnet.preprocess(batch), train=False)
  return {"pooled": out["pooled"], **({"map": out["map"]} if keep_map else {})}


class ImageEncoder:
  """A frozen image encoder: its identity (for cache keys) and a batched `encode`.

  The network is built on the first `encode` call, so a cache hit never loads it. With several
  devices the batch is split over a 'data' mesh axis when batch_size divides evenly.
  """

  def __init__(self, identity, build: Callable[[], nnx.Module], *, batch_size, keep_map,
               image_size):
    self.identity = identity
    self.batch_size = int(batch_size)
    self.keep_map = bool(keep_map)
    self.image_size = int(image_size or 0)
    self._build = build
    self._model = None

  def _load(self):
    graphdef, state = nnx.split(self._build())
    sharding = None
    devices = jax.device_count()
    if devices > 1 and self.batch_size % devices == 0:
      mesh = jax.make_mesh((devices,), ("data",))
      sharding = jax.NamedSharding(mesh, jax.P("data"))
      state = jax.device_put(state, jax.NamedSharding(mesh, jax.P()))
    self._model = (graphdef, state, sharding)

  def encode(self, images_uint8):
    """uint8 [b, H, W, 3] (b <= batch_size) -> dict(pooled=[b, D], map=[b, h, w, C] if kept)."""
    if self._model is None:
      self._load()
    graphdef, state, sharding = self._model
    real = len(images_uint8)
    pad = self.batch_size - real
    if pad > 0:  # one compiled shape: pad the last short batch with zeros
      images_uint8 = np.concatenate(
          [images_uint8, np.zeros((pad,) + images_uint8.shape[1:], images_uint8.dtype)])
    if sharding is not None:
      images_uint8 = jax.device_put(images_uint8, sharding)
    out = _forward(graphdef, state, images_uint8, self.keep_map)
    return {k: np.asarray(v, np.float32)[:real] for k, v in out.items()}


def _resnet_depth(arch):
  m = re.fullmatch(r"resnet(\d+)", arch)
  if not m or int(m.group(1)) not in resnet.ARCHS:
    raise RSVQAError(f"image.arch={arch!r}: expected synthetic_resnet or resnet"
                     f"{{{','.join(map(str, sorted(resnet.ARCHS)))}}}")
  return int(m.group(1))


def build_encoder(image_cfg, dataset=None):
  """The ImageEncoder described by `image_cfg` (see default_image_config).

  For synthetic_resnet with no model in `pretrained_dir` yet, the model is pretrained first on
  `dataset`'s train split (train/pretrain_resnet.py).
  """
  common = dict(batch_size=image_cfg.batch_size, keep_map=image_cfg.map)
  if image_cfg.arch == "synthetic_resnet":
    # Imported here: pretrain_resnet builds on this module's image helpers.
    from rsvqa_jax.train import pretrain_resnet  # pylint: disable=g-import-not-at-top
    if not image_cfg.pretrained_dir:
      raise RSVQAError("image.pretrained_dir: required for image.arch=synthetic_resnet")
    manifest = pretrain_resnet.ensure_pretrained(image_cfg, dataset)
    size = image_cfg.image_size or manifest["image_size"]
    identity = {"arch": "synthetic_resnet", "depth": manifest["depth"], "width": manifest["width"],
                "params_sha256": manifest["weights_sha256"]}
    return ImageEncoder(identity, lambda: pretrain_resnet.load_pretrained(image_cfg.pretrained_dir),
                        image_size=size, **common)
  depth = _resnet_depth(image_cfg.arch)
  if not is_random(image_cfg.checkpoint):
    path = image_cfg.checkpoint
    if not os.path.exists(path):
      raise RSVQAError(f"image.checkpoint={path}: file or folder not found")
    from rsvqa_jax.models import resnet_params  # pylint: disable=g-import-not-at-top
    identity = {"arch": image_cfg.arch, "params_sha256": path_sha256(path)}
    return ImageEncoder(identity, lambda: resnet_params.load_resnet(path, depth),
                        image_size=image_cfg.image_size, **common)
  model = jit_init(lambda key: resnet.ResNet(depth, width=image_cfg.width, rngs=nnx.Rngs(key)),
                   image_cfg.seed)
  _log.warning("image encoder %s has no checkpoint: using random-init weights (seed %d)",
               image_cfg.arch, image_cfg.seed)
  identity = {"arch": image_cfg.arch, "width": image_cfg.width,
              "params_sha256": tree_sha256(nnx.state(model))}
  return ImageEncoder(identity, lambda: model, image_size=image_cfg.image_size, **common)


@dataclasses.dataclass(frozen=True)
class ImageFeatures:
  """Cached features: row i of `features` belongs to `image_ids[i]` (sorted ascending)."""

  features: np.ndarray  # float32 [N, D], memory-mapped read-only
  image_ids: np.ndarray  # int64 [N]
  path: str  # the cache entry folder
  feature_map: np.ndarray | None = None  # float32 [N, h, w, C] when image.map is set

  def rows(self, image_ids):
    """Row index of each image id; an RSVQAError naming the cache if one is not in it."""
    ids = np.asarray(image_ids, dtype=np.int64)
    pos = np.minimum(np.searchsorted(self.image_ids, ids), len(self.image_ids) - 1)
    missing = self.image_ids[pos] != ids if len(self.image_ids) else np.ones(ids.shape, bool)
    if missing.any():
      bad = np.unique(ids[missing])
      raise RSVQAError(f"{self.path}: feature cache has no row for image id(s) "
                       f"{bad[:5].tolist()}{' ...' if len(bad) > 5 else ''} ({len(bad)} missing)")
    return pos.astype(np.int64)


def _dataset_identity(dataset, image_ids, kind):
  """Dataset root and, for clean pixels, every image file's size and mtime (hashed)."""
  ident = {"name": dataset.name, "root": os.path.abspath(dataset.root),
           "image_ids_sha256": hashlib.sha256(image_ids.astype("<i8").tobytes()).hexdigest()}
  if kind == "clean":
    h = hashlib.sha256()
    for i in image_ids.tolist():
      path = dataset.check_image_exists(i)
      st = os.stat(path)
      h.update(f"{i}:{os.path.basename(path)}:{st.st_size}:{st.st_mtime_ns};".encode())
    ident["files_sha256"] = h.hexdigest()
  else:
    ident["image_size"] = list(dataset.image_size)
  return ident


def _pixel_loader(dataset, variant, kind, noise_seed, size):
  """image id -> the uint8 pixels fed to the encoder (kind replaced, variant, resize)."""
  def load(image_id):
    if kind == "clean":
      image = read_tif(dataset.image_path(image_id), size=dataset.image_size)
    elif kind == "noise":
      image = noise_image(noise_seed, image_id, tuple(dataset.image_size) + (3,))
    else:
      image = np.full(tuple(dataset.image_size) + (3,), 255 if kind == "white" else 0, np.uint8)
    return resize(np.ascontiguousarray(apply_variant(image, variant)), size)
  return load


def _batches(load, image_ids, batch_size):
  """Stacked pixel batches, the next batch read by a thread pool while this one is encoded."""
  with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
    submit = lambda start: [pool.submit(load, i) for i in image_ids[start:start + batch_size]]
    pending = submit(0)
    for start in range(0, len(image_ids), batch_size):
      batch = np.stack([f.result() for f in pending])
      pending = submit(start + batch_size)
      yield batch


def _open_entry(path, key, n):
  """The entry at `path` if complete and consistent with `key` and `n` rows, else None."""
  manifest = read_manifest(path, key)
  try:
    ids = np.asarray(manifest["image_ids"], dtype=np.int64)
    feats = open_array(os.path.join(path, "features.npy"), (n, manifest["feature_dim"]),
                       manifest["features_sha256"])
    fmap = None
    if manifest["map_shape"]:
      fmap = open_array(os.path.join(path, "map.npy"), (n, *manifest["map_shape"]))
      if fmap is None:
        return None
  except (TypeError, KeyError, ValueError):
    return None
  if feats is None or ids.shape != (n,):
    return None
  return ImageFeatures(feats, ids, path, fmap)


def _compute_entry(tmp, encoder, load, image_ids, constant, desc):
  """Writes features.npy (and map.npy) into `tmp`; returns (feature_dim, map_shape)."""
  n = len(image_ids)
  arrays = {}
  if constant:  # white / black: every row is the same image
    out = encoder.encode(np.stack([load(image_ids[0])]))
    for name, value in out.items():
      arr = np.lib.format.open_memmap(os.path.join(tmp, f"{name}.npy"), mode="w+",
                                      dtype=np.float32, shape=(n,) + value.shape[1:])
      arr[:] = value[0]
      arrays[name] = arr
  else:
    start = 0
    with tqdm(total=n, desc=f"features {desc}", unit="img", dynamic_ncols=True) as bar:
      for batch in _batches(load, image_ids, encoder.batch_size):
        out = encoder.encode(batch)
        for name, value in out.items():
          if name not in arrays:
            arrays[name] = np.lib.format.open_memmap(
                os.path.join(tmp, f"{name}.npy"), mode="w+", dtype=np.float32,
                shape=(n,) + value.shape[1:])
          arrays[name][start:start + len(value)] = value
        start += len(batch)
        bar.update(len(batch))
  for arr in arrays.values():
    arr.flush()
  feature_dim = int(arrays["pooled"].shape[1])
  map_shape = list(arrays["map"].shape[1:]) if "map" in arrays else None
  del arrays
  os.replace(os.path.join(tmp, "pooled.npy"), os.path.join(tmp, "features.npy"))
  return feature_dim, map_shape


def image_features(dataset, split_names, image_cfg, cache_dir, *, variant="none", kind="clean",
                   noise_seed=0, encoder=None):
  """Frozen-encoder features of every image of `split_names`, from the cache or computed once.

  Args:
    dataset: a records.Dataset with image_path / image_size.
    split_names: splits whose images are included (None: all); rows are the sorted union of
      their image ids. Pass every split a run needs at once, so one entry serves them all.
    image_cfg: see default_image_config.
    cache_dir: folder holding the cache entries (created if needed).
    variant: augmentation applied to the pixels (VARIANTS); only with kind="clean".
    kind: "clean" (the image files) or an adversarial replacement: "white", "black", "noise"
      (uniform noise, a pure function of noise_seed and the image id).
    noise_seed: seed of the noise kind.
    encoder: an ImageEncoder to use instead of building one from image_cfg.

  Returns:
    ImageFeatures whose arrays are read-only memmaps.
  """
  if variant not in VARIANTS:
    raise RSVQAError(f"image variant {variant!r}: expected one of {VARIANTS}")
  if kind not in KINDS:
    raise RSVQAError(f"image kind {kind!r}: expected one of {KINDS}")
  if kind != "clean" and variant != "none":
    raise RSVQAError(f"image kind {kind!r} takes no augmentation variant (got {variant!r})")
  if kind != "clean" and dataset.image_size is None:
    raise RSVQAError(f"{dataset.root}: kind {kind!r} needs a dataset with a fixed image size")
  splits = list(dataset.splits) if split_names is None else list(split_names)
  image_ids = np.unique(np.concatenate([dataset[s].image_id for s in splits])).astype(np.int64)
  if not len(image_ids):
    raise RSVQAError(f"{dataset.root}: splits {splits} hold no images")
  encoder = encoder or build_encoder(image_cfg, dataset)
  identity = {
      "format": FORMAT_VERSION,
      "encoder": encoder.identity,
      "preprocessing": preprocessing_description(encoder.image_size),
      "keep_map": encoder.keep_map,
      "variant": variant,
      "kind": kind,
      "noise_seed": int(noise_seed) if kind == "noise" else None,
      "dataset": _dataset_identity(dataset, image_ids, kind),
  }
  key = identity_key(identity)
  name = f"{dataset.name}_{encoder.identity['arch']}_{variant}_{kind}_{key}"
  path = os.path.join(cache_dir, name)
  if os.path.isdir(path):
    entry = _open_entry(path, key, len(image_ids))
    if entry is not None:
      return entry
    _log.warning("%s: incomplete or corrupted feature cache entry, recomputing", path)
    shutil.rmtree(path, ignore_errors=True)
  with building(cache_dir, name) as tmp:
    started = time.time()
    load = _pixel_loader(dataset, variant, kind, noise_seed, encoder.image_size)
    feature_dim, map_shape = _compute_entry(tmp, encoder, load, image_ids,
                                            kind in ("white", "black"), name.rsplit("_", 1)[0])
    write_manifest(tmp, {
        "format": FORMAT_VERSION, "key": key, "identity": identity,
        "image_ids": image_ids.tolist(), "feature_dim": feature_dim, "map_shape": map_shape,
        "features_sha256": file_sha256(os.path.join(tmp, "features.npy")),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S"), "seconds": round(time.time() - started, 3),
    })
  entry = _open_entry(path, key, len(image_ids))
  if entry is None:
    raise RSVQAError(f"{path}: feature cache entry unreadable right after writing it")
  return entry
