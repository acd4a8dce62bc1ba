"""On-disk cache of frozen image-encoder features, versioned so stale features are never read.

A frozen encoder's output depends only on its parameters, the preprocessing and the pixels, so
it runs once per image (per augmentation variant, per adversarial pixel kind) and the result is
reused by every run and seed. One cache entry is a folder holding `features.npy` (raw float32
[N, D], opened with mmap_mode="r"), optionally `map.npy` ([N, h, w, C], the final spatial map)
and `manifest.json` (image ids in row order and everything the features depend on). The folder
name ends in a key hashed from that identity: the encoder's identity (features/encoder.py),
preprocessing, input size, variant, kind, dataset root and every image file's contents.
Anything that changes the features changes the key, so an old entry is simply never looked up.
Entries are built through storage.cached (by one process at a time, renamed into place when
complete); on open, the manifest, its image ids, array shapes and the checksums of the features
and the map are verified (a checksum is computed again only for a file whose stat stamp changed
since it last matched), and a bad entry is rebuilt. Features that are not finite (NaN or inf:
damaged weights, or an image that overflows the encoder) are never written, and an entry holding
any is rebuilt, so the error names the image instead of a training run diverging at its first
step.
A cache hit reads files only: the encoder is built on a miss.
"""
import contextlib
import dataclasses
import hashlib
import os
import time

import numpy as np

from rsvqa_jax import progress, storage
from rsvqa_jax.errors import RSVQAError
from rsvqa_jax.features import encoder as encoder_lib
from rsvqa_jax.features import pixels

FORMAT_VERSION = 1


@dataclasses.dataclass(frozen=True)
class ImageFeatures:
  """Cached features: row i of `features` belongs to `image_ids[i]` (sorted ascending)."""

  features: np.ndarray  # float32 [N, D], memory-mapped read-only
  image_ids: np.ndarray  # int64 [N]
  path: str  # the cache entry folder
  feature_map: np.ndarray | None = None  # float32 [N, h, w, C] when image.map is set


def _dataset_identity(dataset, image_ids, kind, cache_dir):
  """Dataset root and, for clean pixels, every image file's contents (hashed).

  The per-file digests are kept beside the cache entries (storage.file_digests), so they are
  computed once per file, and again only for a file that was rewritten.
  """
  root = os.path.abspath(dataset.root)
  ident = {"name": dataset.name, "root": root,
           "image_ids_sha256": hashlib.sha256(image_ids.astype("<i8").tobytes()).hexdigest()}
  if kind == "clean":
    paths = [dataset.check_image_exists(i) for i in image_ids.tolist()]
    index = os.path.join(cache_dir, storage.DIGESTS_DIR,
                         hashlib.sha256(os.fsencode(root)).hexdigest()[:20])
    h = hashlib.sha256()
    for i, path, digest in zip(image_ids.tolist(), paths, storage.file_digests(paths, index)):
      # fsencode: a file name undecodable in the locale is kept as its bytes
      h.update(f"{i}:".encode() + os.fsencode(os.path.basename(path)) + f":{digest};".encode())
    ident["files_sha256"] = h.hexdigest()
  else:
    ident["image_size"] = list(dataset.image_size)
  return ident


def _open_entry(path, key, image_ids):
  """The entry at `path` if complete and consistent with `key` and the rows of `image_ids` (in
  that order: an edited list would attach each row to another image), else None. The map is
  checked against its checksum like the features (its finiteness was checked when written);
  each checksum is computed again only for a file changed since it last matched
  (storage.file_digests)."""
  manifest = storage.read_manifest(path, format=FORMAT_VERSION, key=key)
  n = len(image_ids)
  digests = storage.entry_digests(path)
  try:
    ids = np.asarray(manifest["image_ids"], dtype=np.int64)
    feats = storage.open_array(os.path.join(path, "features.npy"), (n, manifest["feature_dim"]),
                               manifest["features_sha256"], digests)
    fmap = None
    if manifest["map_shape"]:
      fmap = storage.open_array(os.path.join(path, "map.npy"), (n, *manifest["map_shape"]),
                                manifest["map_sha256"], digests)
      if fmap is None:
        return None
  except (TypeError, KeyError, ValueError, OverflowError):
    return None
  if feats is None or not np.array_equal(ids, image_ids) or not np.isfinite(feats).all():
    return None
  return ImageFeatures(feats, ids, path, fmap)


def _check_finite(out, ids, desc):
  """RSVQAError naming the first image of `ids` whose encoder outputs hold a NaN or an inf."""
  for value in out.values():
    finite = np.isfinite(value.reshape(len(value), -1)).all(axis=1)
    if not finite.all():
      raise RSVQAError(f"features {desc}: image {ids[np.argmin(finite)]} gives NaN or inf "
                       "features: the encoder weights (image.checkpoint) or the image's pixels "
                       "are damaged; nothing was cached")


def _compute_entry(tmp, encoder, load, image_ids, constant, desc):
  """Writes features.npy (and map.npy) into `tmp`; returns (feature_dim, map_shape)."""
  n = len(image_ids)
  shapes = {}
  with contextlib.ExitStack() as files:
    writers = {}

    def write(out):
      if not writers:  # the first batch gives the row shapes
        shapes.update({name: value.shape[1:] for name, value in out.items()})
        row_bytes = sum(v[0].nbytes for v in out.values())
        storage.ensure_free(os.path.dirname(tmp), n * row_bytes + (1 << 20),
                            f"the features of {n} images")
        for name, value in out.items():
          writers[name] = files.enter_context(storage.writing_npy(
              os.path.join(tmp, f"{name}.npy"), (n,) + value.shape[1:]))
      for name, value in out.items():
        writers[name](value)

    if constant:  # white / black: every row is the same image
      out = encoder.encode(np.stack([load(image_ids[0])]), pad_to=1)
      _check_finite(out, image_ids[:1], desc)
      for start in range(0, n, CONSTANT_ROWS):
        write({k: np.broadcast_to(v[:1], (min(CONSTANT_ROWS, n - start),) + v.shape[1:])
               for k, v in out.items()})
    else:
      start = 0
      with progress.bar(total=n, desc=f"features {desc}", unit="img") as bar:
        size = min(encoder.batch_size, n)
        for batch in pixels.batches(load, image_ids, size):
          out = encoder.encode(batch, pad_to=size)
          _check_finite(out, image_ids[start:start + len(batch)], desc)
          write(out)
          start += len(batch)
          bar.update(len(batch))
  os.replace(os.path.join(tmp, "pooled.npy"), os.path.join(tmp, "features.npy"))
  return int(shapes["pooled"][0]), (list(shapes["map"]) if "map" in shapes else None)


CONSTANT_ROWS = 4096  # rows of a white / black entry written at once


def image_features(dataset, split_names, image_cfg, cache_dir, *, variant="none", kind="clean",
                   noise_seed=0, encoder=None):
  """Frozen-encoder features of every image of `split_names`, from the cache or computed once.

  Args:
    dataset: a records.Dataset with image_path / image_size.
    split_names: splits whose images are included (None: all); rows are the sorted union of
      their image ids. Pass every split a run needs at once, so one entry serves them all.
    image_cfg: an image section with its paths resolved (config.image_config).
    cache_dir: folder holding the cache entries (created if needed).
    variant: augmentation applied to the pixels (pixels.VARIANTS); only with kind="clean".
    kind: "clean" (the image files) or an adversarial replacement: "white", "black", "noise"
      (uniform noise, a pure function of noise_seed and the image id).
    noise_seed: seed of the noise kind.
    encoder: an encoder.ImageEncoder to use instead of the one image_cfg describes.

  Returns:
    ImageFeatures whose arrays are read-only memmaps.
  """
  if variant not in pixels.VARIANTS:
    raise RSVQAError(f"image variant {variant!r}: expected one of {pixels.VARIANTS}")
  if kind not in pixels.KINDS:
    raise RSVQAError(f"image kind {kind!r}: expected one of {pixels.KINDS}")
  if kind != "clean" and variant != "none":
    raise RSVQAError(f"image kind {kind!r} takes no augmentation variant (got {variant!r})")
  if kind != "clean" and dataset.image_size is None:
    raise RSVQAError(f"{dataset.root}: kind {kind!r} needs a dataset with a fixed image size")
  splits = list(dataset.splits) if split_names is None else list(split_names)
  image_ids = np.unique(np.concatenate([dataset[s].image_id for s in splits])).astype(np.int64)
  if not len(image_ids):
    raise RSVQAError(f"{dataset.root}: splits {splits} hold no images")
  encoder = encoder or encoder_lib.encoder_for(image_cfg)
  identity = {
      "format": FORMAT_VERSION,
      "encoder": encoder.identity,
      "preprocessing": pixels.preprocessing_description(encoder.image_size),
      "keep_map": encoder.keep_map,
      "variant": variant,
      "kind": kind,
      "noise_seed": int(noise_seed) if kind == "noise" else None,
      "dataset": _dataset_identity(dataset, image_ids, kind, cache_dir),
  }
  key = storage.identity_key(identity)
  name = f"{dataset.name}_{encoder.identity['arch']}_{variant}_{kind}_{key}"

  def build(tmp):
    started = time.time()
    load = pixels.loader(dataset, variant, kind, noise_seed, encoder.image_size)
    feature_dim, map_shape = _compute_entry(tmp, encoder, load, image_ids,
                                            kind in ("white", "black"), name.rsplit("_", 1)[0])
    storage.write_json(os.path.join(tmp, storage.MANIFEST), {
        "format": FORMAT_VERSION, "key": key, "identity": identity,
        "image_ids": image_ids.tolist(), "feature_dim": feature_dim, "map_shape": map_shape,
        "features_sha256": storage.file_sha256(os.path.join(tmp, "features.npy")),
        "map_sha256": (storage.file_sha256(os.path.join(tmp, "map.npy")) if map_shape
                       else None),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S"), "seconds": round(time.time() - started, 3),
    })

  return storage.cached(cache_dir, name, lambda path: _open_entry(path, key, image_ids),
                        build, "feature cache entry")
