"""Load ResNet weights into `resnet.ResNet`: torchvision state dicts, HF folders, our own files.

Accepted sources:
- a torchvision state dict: `.safetensors`, or `.pth`/`.pt` read with
  `torch.load(weights_only=True)` when PyTorch is installed (never a plain unpickle);
- a Hugging Face `microsoft/resnet-*` folder (config.json + model.safetensors or
  pytorch_model.bin, either sharded with its index), whose keys are first renamed to
  torchvision's, or a timm Hub folder (config.json naming an `architecture` resnetN, weights
  in torchvision's names);
- a `.safetensors` written by `rsvqa-jax convert` (our key names, architecture in its metadata).
Torchvision key <-> ours: conv `weight` (O,I,H,W) <-> `kernel` (H,W,I,O); fc `weight` (out,in)
<-> `kernel` (in,out); BN weight/bias/running_mean/running_var <-> scale/bias/mean/var;
`downsample.0`/`downsample.1` <-> `down_conv`/`down_bn`. `num_batches_tracked` is dropped.
"""
import json
import os
import re

import numpy as np
from flax import nnx

from rsvqa_jax.errors import RSVQAError
from rsvqa_jax.models import checkpoints
from rsvqa_jax.models.resnet import ARCHS, ResNet

_MODULES = {"down_conv": "downsample.0", "down_bn": "downsample.1"}
_LEAVES = {"kernel": "weight", "scale": "weight", "bias": "bias",
           "mean": "running_mean", "var": "running_var"}
_HF_RULES = [
    (r"embedder\.embedder\.convolution\.(\w+)", lambda m: f"conv1.{m[1]}"),
    (r"embedder\.embedder\.normalization\.(\w+)", lambda m: f"bn1.{m[1]}"),
    (r"encoder\.stages\.(\d+)\.layers\.(\d+)\.shortcut\.convolution\.(\w+)",
     lambda m: f"layer{int(m[1]) + 1}.{m[2]}.downsample.0.{m[3]}"),
    (r"encoder\.stages\.(\d+)\.layers\.(\d+)\.shortcut\.normalization\.(\w+)",
     lambda m: f"layer{int(m[1]) + 1}.{m[2]}.downsample.1.{m[3]}"),
    (r"encoder\.stages\.(\d+)\.layers\.(\d+)\.layer\.(\d+)\.convolution\.(\w+)",
     lambda m: f"layer{int(m[1]) + 1}.{m[2]}.conv{int(m[3]) + 1}.{m[4]}"),
    (r"encoder\.stages\.(\d+)\.layers\.(\d+)\.layer\.(\d+)\.normalization\.(\w+)",
     lambda m: f"layer{int(m[1]) + 1}.{m[2]}.bn{int(m[3]) + 1}.{m[4]}"),
    (r"classifier\.1\.(\w+)", lambda m: f"fc.{m[1]}"),
]


def torchvision_name(key):
  """Our flat key ("layer1.0.down_conv.kernel") -> torchvision's ("layer1.0.downsample.0.weight")."""
  *modules, leaf = key.split(".")
  return ".".join([_MODULES.get(m, m) for m in modules] + [_LEAVES[leaf]])


def _to_torch_layout(x):
  x = np.asarray(x)
  return x.transpose(3, 2, 0, 1) if x.ndim == 4 else x.T if x.ndim == 2 else x


def _from_torch_layout(x):
  x = np.asarray(x)
  return x.transpose(2, 3, 1, 0) if x.ndim == 4 else x.T if x.ndim == 2 else x


def _torch_shape(shape):
  if len(shape) == 4:
    return tuple(shape[i] for i in (3, 2, 0, 1))
  return tuple(reversed(shape)) if len(shape) == 2 else tuple(shape)


def to_torchvision(tree):
  """Our parameter tree -> torchvision state dict (numpy arrays in torch layout)."""
  return {torchvision_name(k): _to_torch_layout(v) for k, v in checkpoints.flatten(tree).items()}


def from_torchvision(state_dict, model, source):
  """Torchvision state dict -> our tree for `model` (possibly abstract), every key and shape checked."""
  label = f"ResNet-{model.depth} (width {model.width})"
  flat, used = {}, set()
  for key, shape in checkpoints.flat_shapes(model).items():
    name, want = torchvision_name(key), _torch_shape(shape)
    if name not in state_dict:
      raise RSVQAError(f"{source}: missing key {name!r} ({label} expects shape {want})")
    got = tuple(np.shape(state_dict[name]))
    if got != want:
      raise RSVQAError(f"{source}: key {name!r} has shape {got}, {label} expects {want}")
    flat[key] = _from_torch_layout(
        checkpoints.float32_weights(state_dict[name], f"{source}: key {name!r}"))
    used.add(name)
  extra = sorted(k for k in state_dict if k not in used and not k.endswith("num_batches_tracked"))
  if extra:
    raise RSVQAError(f"{source}: unexpected key {extra[0]!r} with shape "
                     f"{tuple(np.shape(state_dict[extra[0]]))} ({len(extra)} in all) for {label}")
  return checkpoints.unflatten(flat)


def hf_to_torchvision(state_dict):
  """Rename a Hugging Face ResNet state dict to torchvision keys (unknown keys kept as they are)."""
  renamed = {}
  for key, value in state_dict.items():
    key = key.removeprefix("resnet.")
    for pattern, rename in _HF_RULES:
      m = re.fullmatch(pattern, key)
      if m:
        key = rename(m)
        break
    renamed[key] = value
  return renamed


def read_state_dict(path):
  """{name: np.ndarray} from a .safetensors file, or a .pth/.pt/.bin file via torch (weights only).

  A torch file holding a training checkpoint is read through its `state_dict` entry, or else
  its `model` entry (what torchvision's reference scripts save).
  """
  path = os.fspath(path)
  if not os.path.isfile(path):
    raise RSVQAError(f"{path}: no such file")
  if path.endswith(".safetensors"):
    return _unwrapped(checkpoints.flatten(checkpoints.load_safetensors(path)[0]), path)
  try:
    import torch  # pylint: disable=g-import-not-at-top  (optional dependency)
  except ImportError:
    raise RSVQAError(f"{path}: reading a PyTorch file needs torch (pip install 'rsvqa_jax[torch]'); "
                     "or save the state dict as .safetensors") from None
  obj = checkpoints.load_torch_weights(path)
  if isinstance(obj, dict):  # a training checkpoint: Lightning's or timm's, torchvision's scripts'
    obj = next((obj[key] for key in ("state_dict", "model") if key in obj), obj)
  if not isinstance(obj, dict):
    raise RSVQAError(f"{path}: expected a state dict, found {type(obj).__name__}")
  for key, value in obj.items():
    if not isinstance(key, str):
      raise RSVQAError(f"{path}: entry {key!r} is named by a {type(key).__name__}, not a string")
    if not isinstance(value, torch.Tensor):
      raise RSVQAError(f"{path}: entry {key!r} is a {type(value).__name__}, not a tensor")
  return _unwrapped({k: checkpoints.torch_array(v, path, k) for k, v in obj.items()}, path)


def _unwrapped(state_dict, path):
  """Keys without the `module.` that a DataParallel / DistributedDataParallel wrapper adds, in
  either file form; a key present both ways is refused (which one is meant cannot be told)."""
  out = {}
  for key, value in state_dict.items():
    bare = key.removeprefix("module.")
    if bare in out:
      raise RSVQAError(f"{path}: holds both {bare!r} and 'module.{bare}'; keep one model's "
                       "weights")
    out[bare] = value
  return out


def _without_prefix(state_dict, source):
  """The state dict with its keys as torchvision names them. A ResNet found under one prefix
  (Lightning's `model.`) is taken when every key carries that prefix: the file holds nothing
  else, so nothing is guessed. Beside other keys (a loss's, an EMA copy's) or under several
  prefixes, which weights are meant cannot be told: the prefix is named instead."""
  stem = "conv1.weight"
  if stem in state_dict:
    return state_dict
  heads = {k[:-len(stem)] for k in state_dict if k.endswith("." + stem)}  # blocks' too
  prefixes = sorted(p for p in heads if f"{p}layer1.0.{stem}" in state_dict)
  if not prefixes:
    raise RSVQAError(f"{source}: missing key 'conv1.weight'; not a ResNet state dict")
  if len(prefixes) > 1:
    raise RSVQAError(f"{source}: missing key 'conv1.weight'; holds ResNets under "
                     f"{' and '.join(map(repr, prefixes))}: save the state dict of one")
  other = sorted(k for k in state_dict if not k.startswith(prefixes[0]))
  if other:
    raise RSVQAError(f"{source}: missing key 'conv1.weight'; its ResNet keys start with "
                     f"{prefixes[0]!r}, beside {len(other)} other key(s) (first {other[0]!r}): "
                     "save the ResNet's state dict alone, without that prefix")
  return {k.removeprefix(prefixes[0]): v for k, v in state_dict.items()}


def infer_depth(state_dict, source):
  """The torchvision depth whose block counts and block kind match the state dict's keys."""
  counts = []
  for stage in range(1, 5):
    blocks = {int(k.split(".")[1]) for k in state_dict
              if k.startswith(f"layer{stage}.") and k.split(".")[1].isdigit()}
    if not blocks:
      raise RSVQAError(f"{source}: no 'layer{stage}.*' keys; not a torchvision ResNet state dict")
    counts.append(max(blocks) + 1)
  kind = "bottleneck" if any(k.endswith("conv3.weight") for k in state_dict) else "basic"
  for depth, arch in ARCHS.items():
    if arch == (kind, tuple(counts)):
      return depth
  raise RSVQAError(f"{source}: {kind} blocks per stage {tuple(counts)} match no ResNet depth "
                   f"{sorted(ARCHS)}")


def _depth_if_known(state_dict, source):
  """infer_depth's answer, None where the keys match no depth (load_into then names the key)."""
  try:
    return infer_depth(state_dict, source)
  except RSVQAError:
    return None


def _folder_state_dict(folder):
  """(depth, state dict in torchvision's names, weights file or index) of a model folder: a
  transformers ResNet (model_type 'resnet', its own key names) or a timm Hub one (no
  model_type, `architecture` 'resnetN', torchvision's key names)."""
  path = os.path.join(folder, "config.json")
  try:
    with open(path, encoding="utf-8") as f:
      config = json.load(f)
  except ValueError as e:
    raise RSVQAError(f"{path}: not valid JSON ({e})") from None
  if not isinstance(config, dict):
    raise RSVQAError(f"{path}: expected a JSON object of config keys")
  timm = "model_type" not in config and "architecture" in config
  depth = _timm_depth(config, path) if timm else _hf_depth(config, path)
  state_dict, source = checkpoints.read_hf_weights(folder, read_state_dict)
  return depth, state_dict if timm else hf_to_torchvision(state_dict), source


def _timm_depth(config, path):
  arch = config["architecture"]
  names = [f"resnet{depth}" for depth in sorted(ARCHS)]
  if arch not in names:  # timm's resnet50d, resnetv2_50, ... have other layers
    raise RSVQAError(f"{path}: architecture {arch!r} is not one of {', '.join(names)} (timm's "
                     "ResNets in torchvision's layout); use a torchvision ResNet")
  return int(arch.removeprefix("resnet"))


def _hf_depth(config, path):
  if config.get("model_type") != "resnet":
    raise RSVQAError(f"{path}: model_type is {config.get('model_type')!r}, expected 'resnet'")
  for field, want in (("downsample_in_first_stage", False), ("downsample_in_bottleneck", False),
                      ("hidden_act", "relu"), ("num_channels", 3)):
    if config.get(field, want) != want:
      raise RSVQAError(f"{path}: {field}={config[field]!r} is not torchvision's ResNet "
                       f"(needs {want!r})")
  depths = config.get("depths", (3, 4, 6, 3))
  if not isinstance(depths, (list, tuple)):
    raise RSVQAError(f"{path}: depths {depths!r}: expected a list of blocks per stage")
  arch = (config.get("layer_type", "bottleneck"), tuple(depths))
  for depth, known in ARCHS.items():
    if known == arch:
      return depth
  raise RSVQAError(f"{path}: layer_type/depths {arch} match no ResNet depth {sorted(ARCHS)}")


def resnet_metadata(model):
  """Header strings that let `load_resnet` rebuild the model from a converted safetensors file."""
  return {"format": "rsvqa_jax", "kind": "resnet", "depth": str(model.depth),
          "width": str(model.width), "num_classes": str(model.num_classes or 0)}


def _abstract(depth, width, num_classes):
  return nnx.eval_shape(lambda r: ResNet(depth, rngs=r, num_classes=num_classes or None,
                                        width=width), nnx.Rngs(0))


def check_folder_source(path):
  """A folder is read as a Hugging Face (transformers or timm) ResNet: one without its config.json
  is refused before anything reads (or hashes) the files under it."""
  if os.path.isdir(path) and not os.path.isfile(os.path.join(path, "config.json")):
    raise RSVQAError(f"{path}: a folder source must be a Hugging Face ResNet with config.json "
                     "(transformers' or timm's); copy the config.json that came with the "
                     "weights, or give the weights file itself (.pth, .safetensors)")


def load_resnet(path, depth=None):
  """A `ResNet` holding the weights at `path` (see the module docstring for the sources).

  `depth` is inferred from the keys (or a folder's config.json) when None; when given it must
  match. The width and the classifier (`fc`, kept when present) follow the checkpoint.
  """
  path = os.fspath(path)
  check_folder_source(path)
  if os.path.isdir(path):
    inferred, state_dict, source = _folder_state_dict(path)
  else:
    source = path
    if path.endswith(".safetensors"):
      tree, meta = checkpoints.load_safetensors(path)
      if meta.get("format") == "rsvqa_jax":
        return _load_converted(path, tree, meta, depth)
      state_dict = _unwrapped(checkpoints.flatten(tree), path)
    else:
      state_dict = read_state_dict(path)
    inferred = None
  state_dict = _without_prefix(state_dict, source)
  if depth is None:
    depth = inferred or infer_depth(state_dict, source)
  elif depth not in ARCHS:
    raise RSVQAError(f"--depth {depth}: must be one of {sorted(ARCHS)}")
  elif (found := _depth_if_known(state_dict, source)) not in (None, depth):
    raise RSVQAError(f"{source}: holds a ResNet-{found}, not the ResNet-{depth} asked for: give "
                     f"ResNet-{depth} weights, or ask for resnet{found} (image.arch, --arch or "
                     "--depth)")
  width = _leading_size(state_dict, "conv1.weight", 4, source)
  if width < 1:  # the model would build and fail inside JAX
    raise RSVQAError(f"{source}: key 'conv1.weight' has shape "
                     f"{tuple(np.shape(state_dict['conv1.weight']))}: no output channels")
  num_classes = (_leading_size(state_dict, "fc.weight", 2, source) if "fc.weight" in state_dict
                 else None)
  model = _abstract(depth, width, num_classes)
  names = {key: torchvision_name(key) for key in checkpoints.flat_shapes(model)}
  _fill(model, from_torchvision(state_dict, model, source), source, names)
  return model


def _fill(model, tree, source, names=None):
  """`checkpoints.load_into`, then refuse a negative BatchNorm variance: it loads and trains,
  but sqrt(var + eps) turns every feature after it into NaN."""
  checkpoints.load_into(model, tree, source, names)
  for key, value in checkpoints.flatten(tree).items():
    negative = np.count_nonzero(np.asarray(value) < 0) if key.endswith(".var") else 0
    if negative:
      raise RSVQAError(f"{source}: key {(names or {}).get(key, key)!r}: {negative} of "
                       f"{np.size(value)} BatchNorm variances are negative (features would be "
                       "NaN); the weights are damaged: export or download them again")


def _leading_size(state_dict, key, rank, source):
  """The first dimension of `key`, which sizes the model (width, classes): checked to be of
  `rank` first, since a key of another rank would give a wrong size (and the error would name a
  later key) or none at all (an IndexError)."""
  shape = tuple(np.shape(state_dict[key]))
  if len(shape) != rank:
    raise RSVQAError(f"{source}: key {key!r} has shape {shape}, expected {rank} dimensions "
                     f"({'out, in, height, width' if rank == 4 else 'classes, features'}); the "
                     "file is damaged or not a ResNet state dict")
  return int(shape[0])


def _load_converted(path, tree, meta, depth):
  if meta.get("kind") != "resnet":
    raise RSVQAError(f"{path}: holds a converted {meta.get('kind')!r} model, not a ResNet")
  sizes = {}
  for field, least in (("depth", 1), ("width", 1), ("num_classes", 0)):
    value = meta.get(field, "")
    if not (value.isascii() and value.isdigit() and int(value) >= least):
      raise RSVQAError(f"{path}: header field {field}={meta.get(field)!r}: expected a whole "
                       f"number >= {least}; the file is damaged: convert it again")
    sizes[field] = int(value)
  saved = sizes["depth"]
  if saved not in ARCHS:
    raise RSVQAError(f"{path}: header field depth={saved} is no ResNet depth {sorted(ARCHS)}")
  if depth is not None and depth != saved:
    raise RSVQAError(f"{path}: holds a ResNet-{saved}, but depth {depth} was asked for")
  model = _abstract(saved, sizes["width"], sizes["num_classes"])
  _fill(model, tree, path)
  return model
