"""The frozen image encoder a config names: its identity (for cache keys) and a batched forward.

The identity is read from files and settings only (the pretrained model's manifest, the
checkpoint's hash, or the random-init settings and library versions), so a cache hit never
builds or loads the network; it is built on the first `encode` call.
"""
import functools
import json
import logging
import re
import shlex
from typing import Callable

import flax
import jax
import numpy as np
from flax import nnx

from rsvqa_jax import config as config_lib
from rsvqa_jax import storage
from rsvqa_jax.errors import RSVQAError
from rsvqa_jax.features import pretrain
from rsvqa_jax.models import resnet
from rsvqa_jax.models.checkpoints import jit_init

_log = logging.getLogger(__name__)
_RANDOM_INIT_SAID = set()  # encoder identities whose random init was announced in this process


@functools.partial(jax.jit, static_argnums=(0, 3))
def _forward(graphdef, state, batch, keep_map):
  out = nnx.merge(graphdef, state)(resnet.preprocess(batch), train=False)
  return {"pooled": out["pooled"], **({"map": out["map"]} if keep_map else {})}


class ImageEncoder:
  """A frozen image encoder: its identity and a batched `encode`.

  With several devices the batch is split over a 'data' mesh axis when batch_size divides
  evenly.
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

  def encode(self, images_uint8, pad_to=None):
    """uint8 [b, H, W, 3] (b <= pad_to, default batch_size) -> dict(pooled=[b, D], map=[b, h,
    w, C] if kept). A set smaller than batch_size gives its own size as pad_to: padding 12
    images to a batch of 100,000 would ask for gigabytes of zeros."""
    if self._model is None:
      self._load()
    graphdef, state, sharding = self._model
    real = len(images_uint8)
    pad = (pad_to or self.batch_size) - real
    if pad > 0:  # one compiled shape: pad the last short batch with zeros
      images_uint8 = np.concatenate(
          [images_uint8, np.zeros((pad,) + images_uint8.shape[1:], images_uint8.dtype)])
    if sharding is not None and len(images_uint8) % sharding.mesh.size == 0:
      images_uint8 = jax.device_put(images_uint8, sharding)
    out = _forward(graphdef, state, images_uint8, self.keep_map)
    return {k: np.asarray(v, np.float32)[:real] for k, v in out.items()}


def _resnet_depth(arch):
  m = re.fullmatch(r"resnet(\d+)", arch)
  if not m or int(m.group(1)) not in resnet.ARCHS:
    raise RSVQAError(f"image.arch={arch!r}: expected synthetic_resnet or resnet"
                     f"{{{','.join(map(str, sorted(resnet.ARCHS)))}}}")
  return int(m.group(1))


def encoder_for(image_cfg):
  """The ImageEncoder an image section describes (config.image_section), not yet built.

  synthetic_resnet must have been pretrained into image_cfg.pretrained_dir already (an
  explicit step: features/pretrain.py); a missing model is an RSVQAError saying how.
  """
  common = dict(batch_size=image_cfg.batch_size, keep_map=image_cfg.map)
  if image_cfg.arch == "synthetic_resnet":
    if not image_cfg.pretrained_dir:
      raise RSVQAError("image.pretrained_dir: required for image.arch=synthetic_resnet")
    manifest = pretrain.current(image_cfg)
    if manifest is None:
      raise RSVQAError(f"{image_cfg.pretrained_dir}: no synthetic_resnet pretrained with this "
                       "config's image.pretrain settings; pretrain it first with rsvqa-jax "
                       "features --pretrain --data DATASET --config CONFIG --pretrained-dir "
                       f"{shlex.quote(image_cfg.pretrained_dir)} (train and study do it as their "
                       "first stage)")
    identity = {"arch": "synthetic_resnet", "depth": manifest["depth"], "width": manifest["width"],
                "params_sha256": manifest["weights_sha256"]}
    return ImageEncoder(identity, lambda: pretrain.load_pretrained(image_cfg.pretrained_dir),
                        image_size=image_cfg.image_size or manifest["image_size"], **common)
  depth = _resnet_depth(image_cfg.arch)
  config_lib.check_image_checkpoint(image_cfg)
  if not config_lib.is_random(image_cfg.checkpoint):
    path = image_cfg.checkpoint
    # Imported here: reading weights files pulls in safetensors (and torch for .pth).
    from rsvqa_jax.models import resnet_params  # pylint: disable=g-import-not-at-top
    resnet_params.check_folder_source(path)  # before hashing every file under it
    identity = {"arch": image_cfg.arch, "params_sha256": storage.path_sha256(path)}
    return ImageEncoder(identity, lambda: resnet_params.load_resnet(path, depth),
                        image_size=image_cfg.image_size, **common)
  # Random init is a pure function of the settings and of the libraries that draw it.
  identity = {"arch": image_cfg.arch, "width": image_cfg.width, "init": "random",
              "seed": image_cfg.seed, "jax": jax.__version__, "flax": flax.__version__}

  def build():
    said = json.dumps(identity, sort_keys=True)
    if said not in _RANDOM_INIT_SAID:  # once, though clean and white features each build one
      _RANDOM_INIT_SAID.add(said)
      _log.info("image encoder %s has no checkpoint: random-init weights (seed %d)",
                image_cfg.arch, image_cfg.seed)
    return jit_init(lambda key: resnet.ResNet(depth, width=image_cfg.width, rngs=nnx.Rngs(key)),
                    image_cfg.seed)
  return ImageEncoder(identity, build, image_size=image_cfg.image_size, **common)
