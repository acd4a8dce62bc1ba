"""How NNX modules get their arrays: one compiled random init, or parameter trees from disk.

A tree is a nested dict of arrays as `nnx.to_pure_dict` gives it (list positions are int keys);
flattening joins the path with "." and unflattening turns all-digit parts back into ints.
`state_tree` / `load_into` move the parameters and BatchNorm statistics of an NNX module in
and out of that form, checking every key, shape and value (a NaN or an inf is refused on the way
in, not blamed later on training); files are safetensors (flattened "a.b.c" keys). `jit_init`
builds a randomly initialised module in one compiled program: eager construction compiles and
runs every initializer op by itself, which takes tens of seconds for a small ResNet on a CPU.
"""
import hashlib
import json
import os
import re
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import safetensors
import safetensors.numpy
from flax import nnx
from flax import traverse_util

from rsvqa_jax.errors import RSVQAError

_SAVED = (nnx.Param, nnx.BatchStat)
_FAST_COMPILE = {"xla_backend_optimization_level": 0, "xla_llvm_disable_expensive_passes": True}
_MAX_INIT_PROGRAMS = 16
_INIT_PROGRAMS = {}  # _program_key of an init program -> its compiled executable


def _dotted(tree):
  """Nested dict -> {"a.b.c": leaf} (integer keys, as NNX layer lists have, as digits)."""
  return {".".join(map(str, path)): v for path, v in traverse_util.flatten_dict(tree).items()}


def flatten(tree):
  """Nested dict -> {"a.b.c": np.ndarray}."""
  return {name: np.asarray(value) for name, value in _dotted(tree).items()}


def unflatten(flat):
  """{"a.0.c": x} -> {"a": {0: {"c": x}}}."""
  split = lambda name: tuple(int(p) if p.isdigit() else p for p in name.split("."))
  return traverse_util.unflatten_dict({split(name): value for name, value in flat.items()})


def jit_init(constructor, *seeds):
  """`constructor(*keys)`, building an NNX module from nnx.Rngs of the keys, run under jit.

  keys[i] = jax.random.key(seeds[i]), so nnx.Rngs(keys[i]) is nnx.Rngs(seeds[i]). The module's
  structure (graphdef) is taken from the trace; its arrays come from one compiled program, which
  is kept (keyed by its text) for later builds of the same structure with any seeds. The values
  are those of an eager build up to float rounding.
  """
  keys = [jax.random.key(s) for s in seeds]
  traced = {}

  def init(*k):
    traced["graphdef"], state = nnx.split(constructor(*k))
    return state

  traced_init = jax.jit(init).trace(*keys)
  key = _program_key(traced_init)
  if key not in _INIT_PROGRAMS:
    # The program runs once per build: on CPU, LLVM's optimisation of its many RNG ops costs
    # far more (45 s against 2.5 s for a width-8 ResNet-18) than it could ever save.
    options = _FAST_COMPILE if jax.default_backend() == "cpu" else None
    while len(_INIT_PROGRAMS) >= _MAX_INIT_PROGRAMS:
      _INIT_PROGRAMS.pop(next(iter(_INIT_PROGRAMS)))
    _INIT_PROGRAMS[key] = traced_init.lower().compile(compiler_options=options)
  return nnx.merge(traced["graphdef"], _INIT_PROGRAMS[key](*keys))


def _program_key(traced):
  """sha256 of what fixes a traced program and its result: the jaxpr's text, the values of the
  constants it closes over (the text names them only), and the output tree (the Variable types
  and metadata). Lowering it again at every build only to name it cost as much as the trace (a
  study builds 70 models of a few structures)."""
  h = hashlib.sha256(f"{traced.jaxpr}|{traced.out_tree}".encode())
  for const in traced.jaxpr.consts:
    if jnp.issubdtype(const.dtype, jax.dtypes.prng_key):
      const = jax.random.key_data(const)
    value = np.ascontiguousarray(np.asarray(const))
    h.update(f"|{value.dtype}{value.shape}|".encode())
    h.update(value.tobytes())
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


def state_tree(model):
  """The parameters and batch statistics of an NNX module as a nested dict of arrays."""
  return nnx.to_pure_dict(nnx.state(model, _SAVED))


def flat_shapes(model):
  """{"a.b.c": shape} of what `state_tree` would return; works on `nnx.eval_shape` models too."""
  return {name: tuple(v.shape) for name, v in _dotted(state_tree(model)).items()}


def load_into(model, tree, source, names=None):
  """Copy `tree` into `model` in place; RSVQAError naming the key on a missing/extra/mismatched key.

  Values are loaded as float32 and one that is not floating point is refused (`float32_weights`).
  A non-finite value (NaN or inf) is refused too: it would turn every output into NaN, and the
  first sign of it would otherwise be a training run that "diverges" at its first step. `names`
  maps our keys to the checkpoint's own names, which the messages then use.
  """
  state = nnx.state(model, _SAVED)
  shapes = flat_shapes(model)
  given = flatten(tree)
  for key in shapes:
    if key not in given:
      raise RSVQAError(f"{source}: missing key {key!r} (expected shape {shapes[key]})")
    if given[key].shape != shapes[key]:
      raise RSVQAError(f"{source}: key {key!r} has shape {given[key].shape}, "
                       f"the model expects {shapes[key]}")
    what = f"{source}: key {(names or {}).get(key, key)!r}"
    given[key] = float32_weights(given[key], what)
    check_finite(given[key], what)
  extra = sorted(set(given) - set(shapes))
  if extra:
    raise RSVQAError(f"{source}: {len(extra)} unexpected key(s), first {extra[0]!r}")
  nnx.replace_by_pure_dict(state, unflatten({k: jnp.asarray(v) for k, v in given.items()}))
  nnx.update(model, state)


def float32_weights(value, what):
  """`value` as float32; RSVQAError "`what`: dtype D, ..." when it is not floating point.

  Weights stored as integers or booleans are a damaged or mislabelled file (a header whose
  dtype lies about F32 bytes reads them as huge integers): casting them would load nonsense.
  """
  value = np.asarray(value)
  if not jnp.issubdtype(value.dtype, jnp.floating):  # bfloat16 included
    raise RSVQAError(f"{what}: dtype {value.dtype}, expected floating-point weights; the file is "
                     "damaged or not a weights file: export or download it again")
  return value.astype(np.float32)


def check_finite(value, what):
  """RSVQAError "`what`: N of M values are not finite" when a float array holds a NaN or an inf."""
  value = np.asarray(value)
  if not np.issubdtype(value.dtype, np.inexact):
    return
  finite = np.isfinite(value)
  if not finite.all():
    raise RSVQAError(f"{what}: {finite.size - np.count_nonzero(finite)} of {finite.size} values "
                     "are not finite (NaN or inf); the weights are damaged: export or download "
                     "them again")


def save_safetensors(path, tree, metadata=None):
  """Write a tree as one safetensors file; `metadata` is a dict of strings kept in its header."""
  flat = {k: np.ascontiguousarray(v) for k, v in flatten(tree).items()}
  try:
    safetensors.numpy.save_file(flat, os.fspath(path), metadata=metadata)
  except safetensors.SafetensorError as e:  # its I/O errors: a full disk read as a bad input
    code = re.search(r"\(os error (\d+)\)", str(e))
    if code is None:
      raise
    raise OSError(int(code.group(1)), os.strerror(int(code.group(1))), os.fspath(path)) from None


def load_safetensors(path):
  """Read a tree written by `save_safetensors`: (tree, metadata dict)."""
  path = os.fspath(path)
  if not os.path.isfile(path):
    raise RSVQAError(f"{path}: no such file")
  try:
    with safetensors.safe_open(path, framework="np") as f:
      metadata = f.metadata() or {}
      flat = {k: _numpy_tensor(f, k, path) for k in f.keys()}
  except (OSError, safetensors.SafetensorError) as e:
    raise RSVQAError(f"{path}: not a readable safetensors file ({e})") from None
  # "a.b" beside "a.b.c" has no place in a tree (unflattening would fail on it)
  clash = next(((k, k[:i]) for k in flat for i, c in enumerate(k) if c == "." and k[:i] in flat),
               None)
  if clash is not None:
    raise RSVQAError(f"{path}: key {clash[0]!r} lies under key {clash[1]!r}, which is a tensor "
                     "itself; not a checkpoint of one model")
  return unflatten(flat), metadata


def _numpy_tensor(f, key, path):
  """f.get_tensor(key); a dtype NumPy has no type for (float8) is an RSVQAError naming it."""
  try:
    return f.get_tensor(key)
  except (AttributeError, TypeError) as e:
    raise RSVQAError(f"{path}: key {key}: a dtype NumPy cannot hold ({e}); save the weights in "
                     "float32, float16 or bfloat16") from None


def finish_abstract(model, rngs, source):
  """Gives the dropout streams of a filled `nnx.eval_shape` model real keys, in place.

  Each `nnx.Dropout` forks `rngs[rng_collection]` as its constructor does, in graph order (the
  construction order of our encoders, so the keys are those of an eager build with `rngs`).
  Any array still abstract afterwards (nothing in the checkpoint filled it) is an RSVQAError.
  """
  for _, node in nnx.iter_graph(model):
    if isinstance(node, nnx.Dropout) and node.rngs is not None:
      node.rngs = rngs[node.rng_collection].fork()
  for path, variable in nnx.to_flat_state(nnx.state(model)):
    if isinstance(variable.get_value(), jax.ShapeDtypeStruct):
      raise RSVQAError(f"{source}: {'.'.join(map(str, path))} was not filled from the checkpoint")


def load_torch_weights(path):
  """torch.load(path, weights_only=True) on the CPU; RSVQAError in one line if it fails.

  torch's own message for a file it refuses runs to several lines and suggests loading with
  weights_only=False or allowlisting the class (arbitrary code): only its reason is kept, never
  that advice; a pickled object (a whole model) is named, with how to save its state dict.
  """
  import torch  # pylint: disable=g-import-not-at-top  (optional dependency; callers checked it)
  try:
    with open(path, "rb") as f:
      head = f.read(4)
  except OSError as e:
    raise RSVQAError(f"{path}: cannot read ({e.strerror or e})") from None
  if not (head.startswith(b"PK\x03\x04") or head[:1] == b"\x80"):  # zip, or a legacy pickle
    raise RSVQAError(f"{path}: not a PyTorch weights file (neither a zip archive nor a pickle)")
  try:
    with warnings.catch_warnings():  # quantized tensors: torch's deprecation lines, 4 in all,
      warnings.simplefilter("ignore", UserWarning)  # before torch_array names the key itself
      return torch.load(path, map_location="cpu", weights_only=True)
  except Exception as e:  # pylint: disable=broad-except  (torch raises many kinds)
    text = str(e)
    pickled = re.search(r"Unsupported global: GLOBAL (\S+)", text)
    if pickled:  # torch.save(model): its advice (add_safe_globals) would unpickle code
      raise RSVQAError(f"{path}: holds a pickled {pickled[1]} object, not a state dict: load it "
                       "in PyTorch and save model.state_dict() (torch.save or safetensors)"
                       ) from None
    if "PytorchStreamReader failed" in text:  # a cut zip: torch adds a paragraph of guesses
      raise RSVQAError(f"{path}: not a readable PyTorch file ({text.split('. ', 1)[0].strip()}); "
                       "it is cut or damaged: download or save it again") from None
    if "Unpickler error:" in text:  # the reason follows torch's advice
      text = text.split("Unpickler error:", 1)[1]
    reason = next((l.strip() for l in text.splitlines() if l.strip()), type(e).__name__)
    raise RSVQAError(f"{path}: not a weights-only PyTorch file ({reason}); this tool never "
                     "unpickles other objects: save the weights as .safetensors") from None


def torch_array(tensor, path, key):
  """A torch tensor of a weights file as NumPy (floating point as float32); RSVQAError for one
  that holds no plain values: on the meta device (no data), quantized, or sparse."""
  import torch  # pylint: disable=g-import-not-at-top  (optional dependency; callers checked it)
  if tensor.is_meta:
    raise RSVQAError(f"{path}: key {key} is on the meta device (shapes without values): save "
                     "the state dict of a model that holds its weights")
  if tensor.is_quantized:
    raise RSVQAError(f"{path}: key {key} is quantized ({tensor.dtype}): save the state dict of "
                     "the float model (or dequantize it) first")
  if tensor.layout != torch.strided:
    raise RSVQAError(f"{path}: key {key} is a {tensor.layout} tensor: save it dense")
  tensor = tensor.detach().cpu()  # state_dict(keep_vars=True) saves Parameters, which need grad
  if tensor.is_floating_point() and tensor.element_size() == 1:  # float8: as a safetensors file's
    raise RSVQAError(f"{path}: key {key}: dtype {tensor.dtype}, which NumPy cannot hold; save the "
                     "weights in float32, float16 or bfloat16")
  try:
    return (tensor.float() if tensor.is_floating_point() else tensor).numpy()
  except (TypeError, RuntimeError) as e:
    raise RSVQAError(f"{path}: key {key}: dtype {tensor.dtype} has no NumPy type ({e})") from None


# A Hugging Face folder's weights, in the order transformers prefers them: (one file, its index).
_HF_WEIGHTS = (("model.safetensors", "model.safetensors.index.json"),
              ("pytorch_model.bin", "pytorch_model.bin.index.json"))


def read_hf_weights(folder, read):
  """(checkpoint key -> array, the file or index read) of a Hugging Face model folder.

  `read(path)` reads one weights file (.safetensors or .bin); a sharded checkpoint's index
  (`*.index.json`) is read by `_read_index`.
  """
  for single, index in _HF_WEIGHTS:
    path = os.path.join(folder, single)
    if os.path.isfile(path):
      return read(path), path
    path = os.path.join(folder, index)
    if os.path.isfile(path):
      return _read_index(folder, path, read), path
  names = [name for pair in _HF_WEIGHTS for name in pair]
  raise RSVQAError(f"{folder}: no weights file ({', '.join(names[:-1])} or {names[-1]}); save the "
                   "model with save_pretrained")


def _read_index(folder, index, read):
  """The tensors of every shard a sharded checkpoint's index names, each read by `read`. Shards
  must be file names in `folder`: the index must not make us read files outside it."""
  try:
    with open(index, encoding="utf-8") as f:
      weight_map = json.load(f)["weight_map"]
  except (OSError, ValueError, KeyError, TypeError) as e:
    raise RSVQAError(f"{index}: cannot read the weight_map ({e})") from e
  if not (isinstance(weight_map, dict) and all(isinstance(v, str) for v in weight_map.values())):
    raise RSVQAError(f"{index}: weight_map must map tensor names to shard file names")
  shards = sorted(set(weight_map.values()))
  outside = [s for s in shards if os.path.basename(s) != s or s in ("", ".", "..")]
  if outside:
    raise RSVQAError(f"{index}: weight_map names {outside[0]!r}, not a file name in {folder}")
  tensors, held = {}, {}
  for shard in shards:
    for key, value in read(os.path.join(folder, shard)).items():
      if key in held:  # either could be the weights meant
        raise RSVQAError(f"{index}: key {key} is in two shards, {held[key]} and {shard}; save the "
                         "model again with save_pretrained")
      tensors[key], held[key] = value, shard
  return tensors
