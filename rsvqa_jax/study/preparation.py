"""Data preparation: a study's datasets (generated when synthetic), the image encoder's
pretraining stage and the clean image features every run on a dataset shares."""
import logging
import os
import time

import jax

from rsvqa_jax import storage
from rsvqa_jax.data import rsvqa_json, synthetic
from rsvqa_jax.errors import RSVQAError
from rsvqa_jax.study import names, runs
from rsvqa_jax.train import inputs, prepare

_log = logging.getLogger(__name__)
_ENTRY = "-cache"  # JAX's name of an entry's file; its access time is KEY-atime beside it


def use_compilation_cache(cache):
  """XLA's persistent cache under `cache`/xla, every compile kept: seeds reuse compiled steps.
  Entries a kill cut short are removed first (_remove_cut_entries)."""
  _remove_cut_entries(os.path.join(cache, "xla"))
  jax.config.update("jax_compilation_cache_dir", os.path.join(cache, "xla"))
  jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
  jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


def _remove_cut_entries(folder):
  """Removes the cache entries that do not decompress: JAX writes an entry in place, so a kill
  mid-write left it cut for good (an existing entry is never written again), and every later
  compile of its function printed JAX's raw UserWarning instead of reading it. JAX's own reader
  judges; the files are small (a study's are a few MB)."""
  try:
    # pylint: disable-next=g-import-not-at-top
    from jax._src.compilation_cache import decompress_executable
  except ImportError:  # another JAX: its cache checks itself or warns
    return
  if not os.path.isdir(folder):
    return
  cut = []
  for name in sorted(os.listdir(folder)):
    if not name.endswith(_ENTRY):
      continue
    try:
      with open(os.path.join(folder, name), "rb") as f:
        decompress_executable(f.read())
    except Exception:  # pylint: disable=broad-exception-caught  (zlib's or zstd's error: cut)
      cut.append(name)
  for name in cut:
    for path in (name, name[:-len(_ENTRY)] + "-atime"):
      storage.remove(os.path.join(folder, path))
  if cut:
    _log.info("%s: removed %d compilation-cache entr%s cut short by a kill (compiled again)",
              folder, len(cut), "y" if len(cut) == 1 else "ies")


def sizes(ds):
  """"train N, val N, test N": a dataset's splits, for the log."""
  return ", ".join(f"{k} {len(v)}" for k, v in ds.splits.items())


def dataset(study, balanced):
  """(records.Dataset, root, name) of the main or balanced dataset, generated if synthetic
  (under DIR/data/main or DIR/data/balanced)."""
  s = study.s
  if not s.synthetic:
    root, name = study.config.data.root, study.config.data.name
    if not root or not os.path.isdir(root):
      raise RSVQAError(f"config data.root={root}: give the dataset folder (study.synthetic is "
                       "False)")
    return rsvqa_json.read_dataset(root, name), os.path.abspath(root), name
  root = os.path.join(study.dir, "data", "balanced" if balanced else "main")
  images = s.balanced.images if balanced else s.images
  qpi = s.balanced.questions_per_image if balanced else s.questions_per_image
  started = time.time()
  synthetic.ensure_synthetic(root, s.variant, images, s.data_seed,
                             f"study.{'balanced.' if balanced else ''}images",
                             prior_strength=s.prior_strength,
                             balanced=balanced or s.balanced_data, questions_per_image=qpi)
  if time.time() - started > 1:
    study.timings.record(f"data/{'balanced' if balanced else 'main'}", time.time() - started)
  ds = rsvqa_json.read_dataset(root, s.variant)
  _check_trainable(study, ds, balanced)
  return ds, root, s.variant


def _check_trainable(study, ds, balanced):
  """Refuses a generated dataset too small for the study's runs, naming the keys that size it,
  before any run trains on it (a run would stop on it later, the study half done)."""
  prefix = "study.balanced." if balanced else "study."
  images = study.s.balanced.images if balanced else study.s.images
  data = study.config.data
  for split in (data.train_split, data.val_split, study.s.split):
    if split in ds.splits and len(ds.splits[split]) == 0:
      off = " or set study.balanced.enabled=false" if balanced else ""
      raise RSVQAError(f"{ds.root}: {images} generated images ({prefix}images) left split "
                       f"{split!r} without a question; raise {prefix}images{off}")
  batch = study.config.train.batch_size
  n_train = len(ds.splits[data.train_split]) if data.train_split in ds.splits else 0
  if n_train < batch:
    raise RSVQAError(f"{ds.root}: {n_train} training questions from {images} generated images "
                     f"({prefix}images), fewer than train.batch_size={batch}; raise "
                     f"{prefix}images or set train.batch_size to {n_train} or less")


def features(study, ds, root, name):
  """Clean image features of every split of `ds`, after the image encoder's pretraining stage."""
  lm = study.s.language_models[0]
  # Its configured checkpoint: without one, a Skip-thoughts entry is built at random from its
  # sizes, which a paper study's entries (each naming its files) do not hold.
  cfg = runs.config_for(study.config, study.cache, lm, names.WEIGHTS[0], names.ROLES[0], 0, root,
                        name, study.s.lm[lm].checkpoint)
  workdir = os.path.join(study.dir, "runs", "_")
  started = time.time()
  if prepare.image_encoder(cfg.image, ds, log=study.progress):
    study.timings.record(f"pretrain/{os.path.basename(root)}", time.time() - started)
  started = time.time()
  feats = inputs.image_features(cfg, ds, workdir, None)
  if time.time() - started > 1:
    study.timings.record(f"features/{os.path.basename(root)}", time.time() - started)
  study.progress(f"image features {feats.features.shape} ready ({cfg.image.arch}; "
                 f"{time.time() - started:.1f}s)")
  return feats
