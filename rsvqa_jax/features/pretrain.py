"""Pretrains a small ResNet on the synthetic scenes' land cover, standing in for ImageNet weights.

No ImageNet checkpoint can be had offline, yet the RSVQA models expect a frozen encoder that
already knows what is in a picture. As ImageNet pretraining does for the real data, a reduced
ResNet-18 is trained on downsampled TRAIN-split images of a synthetic dataset to predict, per
land-cover class, whether it is present (multi-label) and which fraction of the pixels it covers,
both read from the generator's object masks (DIR/masks/{image_id}.npz). Validation images only
measure it. The result is stored in `pretrained_dir` (model.safetensors in the format of
models/checkpoints.py, loadable by resnet_params.load_resnet, + manifest.json) and then used
frozen through the feature cache (image.arch = "synthetic_resnet"). Until it ends, the state
after each whole epoch is kept in `pretrained_dir`/resume.safetensors, so a killed pretraining
resumes there and ends with the weights of one never stopped.

Pretraining is an explicit step (train/prepare.py: `rsvqa-jax features --pretrain`, the first
stage of `train` and of the study): looking features up never trains anything.
"""
import functools
import hashlib
import json
import logging
import os
import shutil
import time

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
from flax import nnx

from rsvqa_jax import progress, storage
from rsvqa_jax.data import scenes
from rsvqa_jax.errors import RSVQAError
from rsvqa_jax.features import pixels
from rsvqa_jax.models import checkpoints, resnet, resnet_params

FORMAT_VERSION = 2  # 2: weights written by models/checkpoints.py with ResNet metadata
CLASSES = tuple(scenes.CLASSES)
WEIGHTS = "model.safetensors"
RESUME = "resume.safetensors"  # model, optimizer and sampler after the last whole epoch

_log = logging.getLogger(__name__)


def land_cover_labels(root, image_ids):
  """(presence [N, C], fraction [N, C]) float32 per image from root/masks/{id}.npz."""
  presence = np.zeros((len(image_ids), len(CLASSES)), np.float32)
  fraction = np.zeros_like(presence)
  for row, image_id in enumerate(image_ids):
    path = os.path.join(root, "masks", f"{int(image_id)}.npz")
    if not os.path.exists(path):
      raise RSVQAError(f"{path}: object masks missing; synthetic_resnet pretraining needs a "
                       "synthetic dataset (rsvqa-jax synth) with its masks/ folder")
    m = scenes.load_masks(path)
    masks = m["masks"]
    for c, name in enumerate(CLASSES):
      picked = [i for i, cls in enumerate(m["classes"]) if cls == name]
      if picked:
        presence[row, c] = 1.0
        fraction[row, c] = masks[picked].any(axis=0).mean()
  return presence, fraction


def load_images(dataset, image_ids, size):
  """uint8 [N, size, size, 3], resized exactly as the feature cache resizes them."""
  load = pixels.loader(dataset, "none", "clean", 0, size)
  return np.stack([load(i) for i in image_ids])


def _augment(rng, images):
  """Random flips and quarter turns per image (land-cover labels do not depend on them)."""
  out = np.empty_like(images)
  for i, image in enumerate(images):
    image = np.rot90(image, k=int(rng.integers(4)))
    out[i] = image[:, ::-1] if rng.random() < 0.5 else image
  return out


def _loss(model, images, presence, fraction, fraction_weight):
  logits = model(resnet.preprocess(images), train=True)["logits"]
  c = presence.shape[1]
  lp = optax.sigmoid_binary_cross_entropy(logits[:, :c], presence).mean()
  lf = optax.sigmoid_binary_cross_entropy(logits[:, c:], fraction).mean()
  return lp + fraction_weight * lf


@functools.lru_cache(maxsize=8)
def _adamw(learning_rate, weight_decay):
  """One optax transform per setting: the graphdef that keys _train_step's program holds it,
  and a new one per pretraining (equal only to itself) traced the step again each time."""
  return optax.adamw(learning_rate, weight_decay=weight_decay)


@functools.partial(jax.jit, static_argnums=(0, 5), donate_argnums=(1,))
def _train_step(graphdef, state, images, presence, fraction, fraction_weight):
  """(loss, the model's and optimizer's next state): a plain jit of the split state, where
  nnx.jit walked the object graph at every step (a fifth of a step)."""
  model, optimizer = nnx.merge(graphdef, state)
  loss, grads = nnx.value_and_grad(_loss)(model, images, presence, fraction, fraction_weight)
  optimizer.update(model, grads)
  return loss, nnx.state((model, optimizer))


@nnx.jit
def _predict(model, images):
  """(presence probability, pixel fraction) [b, C] each, BatchNorm on running statistics."""
  logits = model(resnet.preprocess(images), train=False)["logits"]
  c = logits.shape[1] // 2
  return jax.nn.sigmoid(logits[:, :c]), jax.nn.sigmoid(logits[:, c:])


def _predict_all(model, images, batch_size):
  outs = [_predict(model, images[i:i + batch_size]) for i in range(0, len(images), batch_size)]
  return tuple(np.concatenate([np.asarray(o[k]) for o in outs]) for k in range(2))


def presence_metrics(prob, presence, fraction_pred, fraction, train_prevalence):
  """Presence accuracy (mean over images x classes), the majority-per-class baseline, MAE."""
  majority = (train_prevalence >= 0.5).astype(np.float32)
  return {
      "presence_accuracy": float(((prob >= 0.5) == (presence >= 0.5)).mean()),
      "majority_accuracy": float((majority[None] == presence).mean()),
      "per_class_accuracy": {c: float(a) for c, a in
                             zip(CLASSES, ((prob >= 0.5) == (presence >= 0.5)).mean(axis=0))},
      "fraction_mae": float(np.abs(fraction_pred - fraction).mean()),
  }


def _hash_arrays(h, arrays):
  """h updated with each array's dtype, shape and bytes (so no two inputs hash alike)."""
  for a in arrays:
    h.update(f"{a.dtype}|{a.shape}|".encode())
    h.update(np.ascontiguousarray(a).tobytes())
  return h


def _run_key(dataset, cfg, arrays, state):
  """What a resumed pretraining must share with the one that saved its state: the settings,
  the dataset's folder, the training images and labels, and the state's structure."""
  h = _hash_arrays(hashlib.sha256(), arrays)
  for path, leaf in jax.tree_util.tree_flatten_with_path(state)[0]:
    h.update(f"{jax.tree_util.keystr(path)}|{leaf.dtype}|{leaf.shape}|".encode())
  return {"settings": cfg.to_dict(), "dataset": os.path.abspath(dataset.root),
          "train_sha256": h.hexdigest()}


def _inputs_sha256(cfg, split_arrays):
  """What alone decides a pretraining's weights and metrics: its settings and, per split it
  reads, the image ids, pixels and land-cover labels (not the folder, nor the questions: a
  study's balanced twin draws other questions about the main set's very images)."""
  h = hashlib.sha256(json.dumps({"format": FORMAT_VERSION, "settings": cfg.to_dict()},
                                sort_keys=True).encode())
  for split, arrays in split_arrays.items():
    h.update(f"{split}|".encode())
    _hash_arrays(h, arrays)
  return h.hexdigest()


def _twin(out_dir, inputs_sha256):
  """(folder, manifest) of a complete model beside out_dir pretrained on the same inputs (the
  cache keeps one folder per dataset's settings), else None; a folder unreadable is passed."""
  out_dir = os.path.abspath(out_dir)
  parent = os.path.dirname(out_dir)
  try:
    names = sorted(os.listdir(parent))
  except OSError:
    return None
  for name in names:
    folder = os.path.join(parent, name)
    if folder == out_dir or not os.path.isfile(os.path.join(folder, storage.MANIFEST)):
      continue
    try:  # the weights are hashed only for a manifest of these inputs
      if (storage.read_manifest(folder) or {}).get("inputs_sha256") != inputs_sha256:
        continue
      manifest = read_manifest(folder)
    except (OSError, RSVQAError):
      continue
    if manifest:
      return folder, manifest
  return None


def _copy_twin(out_dir, twin, dataset, train_split, started):
  """Writes the twin's weights and manifest into out_dir, naming this dataset and the copy;
  None (nothing written) where the bytes copied are not those its manifest names."""
  source, manifest = twin
  os.makedirs(out_dir, exist_ok=True)
  weights = os.path.join(out_dir, WEIGHTS)
  try:
    shutil.copyfile(os.path.join(source, WEIGHTS), weights + ".tmp")
    copied = storage.file_sha256(weights + ".tmp") == manifest["weights_sha256"]
  except OSError:  # the twin gone meanwhile: this run trains (a full disk fails it there)
    copied = False
  if not copied:  # or replaced meanwhile
    if os.path.exists(weights + ".tmp"):
      os.remove(weights + ".tmp")
    return None
  os.replace(weights + ".tmp", weights)
  storage.write_json(os.path.join(out_dir, storage.MANIFEST), {
      **manifest, "dataset": {**manifest["dataset"], "name": dataset.name,
                              "root": os.path.abspath(dataset.root), "train_split": train_split},
      "copied_from": source, "train_seconds": 0.0, "seconds": round(time.time() - started, 2)})
  if os.path.exists(os.path.join(out_dir, RESUME)):
    os.remove(os.path.join(out_dir, RESUME))
  return read_manifest(out_dir)


def _save_progress(out_dir, key, state, progress_record):
  """Writes the state after a whole epoch; the file is replaced whole, and names its sha256."""
  leaves = {str(i): np.asarray(leaf) for i, leaf in enumerate(jax.tree.leaves(state))}
  path = os.path.join(out_dir, RESUME)
  checkpoints.save_safetensors(path + ".tmp", leaves, {"progress": json.dumps(
      {**progress_record, "key": key, "tree_sha256": checkpoints.tree_sha256(leaves)})})
  os.replace(path + ".tmp", path)


def _restore_progress(out_dir, key, state):
  """(state, progress record) saved by a pretraining of the same key, else None (a file of
  another run, or one that does not verify, is set aside with a WARNING)."""
  path = os.path.join(out_dir, RESUME)
  if not os.path.exists(path):
    return None
  try:
    tree, metadata = checkpoints.load_safetensors(path)
    record = json.loads(metadata["progress"])
    leaves = [tree[i] for i in range(len(tree))]
    if record.pop("key") != key:
      _log.warning("%s: saved by a pretraining of other settings or images: starting over", path)
      return None
    if record.pop("tree_sha256") != checkpoints.tree_sha256({str(i): v for i, v in
                                                             enumerate(leaves)}):
      raise ValueError("its arrays do not match the sha256 it records")
  except (RSVQAError, ValueError, KeyError, TypeError) as e:
    _log.warning("%s: unreadable (%s): starting over", path, e)
    return None
  # Scalars come back 1-d (safetensors stores none); the key vouched for every shape.
  like = jax.tree.leaves(state)
  return jax.tree.unflatten(jax.tree.structure(state), [
      jnp.asarray(v).reshape(t.shape) for v, t in zip(leaves, like)]), record


def pretrain(dataset, out_dir, cfg, *, train_split="train", eval_split="val"):
  """Trains on `train_split` images, measures on `eval_split`, writes out_dir; returns manifest.

  Resumes from out_dir/resume.safetensors when a pretraining of the same settings and images
  left it there; removes it once the model is written. A model beside out_dir pretrained with
  the same settings on the same images and labels of both splits is copied instead (its
  weights are what this run would train).
  """
  started = time.time()
  split_ids = {train_split: dataset.image_ids(train_split)}
  if eval_split in dataset.splits:
    split_ids[eval_split] = dataset.image_ids(eval_split)
  split_arrays = {}
  for split, ids in split_ids.items():
    split_arrays[split] = (np.asarray(ids), load_images(dataset, ids, cfg.image_size),
                           *land_cover_labels(dataset.root, ids))
  inputs_sha256 = _inputs_sha256(cfg, split_arrays)
  twin = _twin(out_dir, inputs_sha256)
  copied = twin and _copy_twin(out_dir, twin, dataset, train_split, started)
  if copied:
    _log.info("pretrain synthetic_resnet: %s was pretrained with these settings on the same "
              "images and labels: its weights copied", twin[0])
    return copied
  train_ids, images, presence, fraction = split_arrays[train_split]
  num_classes = len(CLASSES)
  model = checkpoints.jit_init(lambda key: resnet.ResNet(
      cfg.depth, width=cfg.width, num_classes=2 * num_classes, rngs=nnx.Rngs(key)), cfg.seed)
  optimizer = nnx.Optimizer(
      model, _adamw(cfg.learning_rate, cfg.weight_decay), wrt=nnx.Param)
  rng = np.random.default_rng(cfg.seed)
  batch_size = min(cfg.batch_size, len(train_ids))
  steps = len(train_ids) // batch_size  # drop the remainder: one shape, full BatchNorm batches
  os.makedirs(out_dir, exist_ok=True)
  key = _run_key(dataset, cfg, (np.asarray(train_ids), images, presence, fraction),
                 nnx.state((model, optimizer)))
  losses, earlier_seconds = [], 0.0
  restored = _restore_progress(out_dir, key, nnx.state((model, optimizer)))
  if restored is not None:
    state, record = restored
    nnx.update((model, optimizer), state)
    rng.bit_generator.state = record["rng"]
    losses, earlier_seconds = record["losses"], record["seconds"]
    _log.info("pretrain synthetic_resnet: resuming after epoch %d of %d", len(losses), cfg.epochs)
  # The state is donated to each step: model and optimizer hold deleted arrays until the
  # nnx.update after the loop, and nothing may read them before it.
  graphdef, state = nnx.split((model, optimizer))
  with progress.bar(total=cfg.epochs * steps, initial=len(losses) * steps,
                    desc="pretrain synthetic_resnet", unit="step") as bar:
    for _ in range(len(losses), cfg.epochs):
      order = rng.permutation(len(train_ids))
      epoch_loss = 0.0
      for s in range(steps):
        take = order[s * batch_size:(s + 1) * batch_size]
        loss, state = _train_step(graphdef, state, _augment(rng, images[take]), presence[take],
                                  fraction[take], float(cfg.fraction_weight))
        loss = float(loss)
        if not np.isfinite(loss):  # the weights are NaN from here on: nothing worth keeping
          raise _diverged(f"loss {loss} at step {s + 1} of epoch {len(losses) + 1}", cfg)
        epoch_loss += loss
        bar.set_postfix(loss=f"{loss:.4f}")
        bar.update()
      losses.append(epoch_loss / steps)
      if len(losses) < cfg.epochs:
        _save_progress(out_dir, key, state, {
            "rng": rng.bit_generator.state, "losses": losses,
            "seconds": earlier_seconds + time.time() - started})
  nnx.update((model, optimizer), state)
  if not all(np.isfinite(x).all() for x in jax.tree.leaves(checkpoints.state_tree(model))):
    raise _diverged(f"weights NaN or inf after epoch {len(losses)}", cfg)  # the last update's
  train_seconds = earlier_seconds + time.time() - started
  prevalence = presence.mean(axis=0)
  metrics = {}
  for split, (_, imgs, pres, frac) in split_arrays.items():
    prob, frac_pred = _predict_all(model, imgs, batch_size)
    metrics[split] = presence_metrics(prob, pres, frac_pred, frac, prevalence)
  manifest = {
      "format": FORMAT_VERSION, "arch": "synthetic_resnet", "depth": cfg.depth,
      "width": cfg.width, "image_size": cfg.image_size, "classes": list(CLASSES),
      "num_outputs": 2 * num_classes, "pretrain_config": cfg.to_dict(),
      "dataset": {"name": dataset.name, "root": os.path.abspath(dataset.root),
                  "train_split": train_split, "train_images": len(train_ids)},
      "epoch_losses": losses, "metrics": metrics,
      "inputs_sha256": inputs_sha256,
      "train_seconds": round(train_seconds, 2),
      "seconds": round(earlier_seconds + time.time() - started, 2),
  }
  save_pretrained(out_dir, model, manifest)
  if os.path.exists(os.path.join(out_dir, RESUME)):
    os.remove(os.path.join(out_dir, RESUME))
  return read_manifest(out_dir)


def _diverged(what, cfg):
  return RSVQAError(f"pretrain synthetic_resnet diverged ({what}); lower "
                    f"image.pretrain.learning_rate (now {cfg.learning_rate:g})")


def save_pretrained(out_dir, model, manifest):
  """Writes the weights, then the manifest naming their sha256; each file replaced atomically."""
  os.makedirs(out_dir, exist_ok=True)
  weights = os.path.join(out_dir, WEIGHTS)
  checkpoints.save_safetensors(weights + ".tmp", checkpoints.state_tree(model),
                               resnet_params.resnet_metadata(model))
  os.replace(weights + ".tmp", weights)
  storage.write_json(os.path.join(out_dir, storage.MANIFEST),
                     {**manifest, "weights_sha256": storage.file_sha256(weights)})


def read_manifest(out_dir):
  """The manifest if out_dir holds a complete model whose weights match it, else None."""
  manifest = storage.read_manifest(out_dir, format=FORMAT_VERSION)
  try:
    if manifest and storage.file_sha256(os.path.join(out_dir, WEIGHTS)) == manifest["weights_sha256"]:
      return manifest
  except (OSError, KeyError):
    pass
  return None


def load_pretrained(out_dir):
  """The pretrained ResNet (with its land-cover head) from out_dir, ready to run frozen."""
  manifest = read_manifest(out_dir)
  if manifest is None:
    raise RSVQAError(f"{out_dir}: no complete synthetic_resnet model ({storage.MANIFEST} + "
                     f"{WEIGHTS}); pretrain it with rsvqa-jax features --pretrain")
  path = os.path.join(out_dir, WEIGHTS)
  model = resnet_params.load_resnet(path)
  if (model.depth, model.width, model.num_classes) != (
      manifest["depth"], manifest["width"], manifest["num_outputs"]):
    raise RSVQAError(f"{path}: holds a ResNet-{model.depth} of width {model.width} with "
                     f"{model.num_classes} outputs, {storage.MANIFEST} says {manifest['depth']}, "
                     f"{manifest['width']}, {manifest['num_outputs']}")
  return model


def settings(image_cfg):
  """The pretraining settings of an image section (its `pretrain` subsection)."""
  return ml_collections.ConfigDict(image_cfg.pretrain.to_dict())


def current(image_cfg):
  """The manifest of image_cfg.pretrained_dir if it holds a model of these settings, else None.

  A model trained with the same pretraining settings is kept whatever dataset it was trained
  on (the manifest says which).
  """
  manifest = read_manifest(image_cfg.pretrained_dir)
  if manifest is not None and manifest["pretrain_config"] == settings(image_cfg).to_dict():
    return manifest
  return None
