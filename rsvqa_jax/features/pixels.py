"""The pixels an image encoder sees: resizing, augmentation variants, adversarial replacements.

Everything between an image file and the encoder's input batch, shared by the feature cache and
the synthetic ResNet's pretraining so both see the same pixels.
"""
import concurrent.futures

import numpy as np
from PIL import Image

from rsvqa_jax.data.images import read_tif
from rsvqa_jax.errors import RSVQAError
from rsvqa_jax.models import resnet

VARIANTS = ("none", "hflip", "vflip", "rot90", "rot180", "rot270")
KINDS = ("clean", "white", "black", "noise")


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
  raise RSVQAError(f"image variant {variant!r}: expected one of {VARIANTS}")


def noise_image(seed, image_id, shape):
  """Uniform uint8 noise, a pure function of (seed, image id, shape)."""
  rng = np.random.default_rng([seed, int(image_id)])
  return rng.integers(0, 256, size=shape, dtype=np.uint8)


def preprocessing_description(image_size):
  """What happens to the pixels between the file and the encoder (part of the cache key)."""
  resized = f"PIL bilinear resize to {image_size}x{image_size}" if image_size else "native size"
  return (f"{resized}; x/255; (x - {tuple(resnet.IMAGENET_MEAN)}) / {tuple(resnet.IMAGENET_STD)};"
          " NHWC float32")


def loader(dataset, variant, kind, noise_seed, size):
  """image id -> the uint8 pixels fed to the encoder (kind replaced, variant, resize)."""
  if kind not in KINDS:
    raise RSVQAError(f"image kind {kind!r}: expected one of {KINDS}")

  def load(image_id):
    if kind == "clean":
      image = read_tif(dataset.image_path(image_id), size=dataset.image_size)
    elif kind == "noise":
      image = noise_image(noise_seed, image_id, tuple(dataset.image_size) + (3,))
    else:
      image = np.full(tuple(dataset.image_size) + (3,), 255 if kind == "white" else 0, np.uint8)
    return resize(np.ascontiguousarray(apply_variant(image, variant)), size)
  return load


def batches(load, image_ids, batch_size):
  """Stacked pixel batches, the next batch read by a thread pool while this one is encoded."""
  with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
    submit = lambda start: [pool.submit(load, i) for i in image_ids[start:start + batch_size]]
    pending = submit(0)
    for start in range(0, len(image_ids), batch_size):
      batch = np.stack([f.result() for f in pending])
      pending = submit(start + batch_size)
      yield batch
