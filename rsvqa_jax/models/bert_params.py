"""Loads a local Hugging Face DistilBERT / BERT / RoBERTa folder into `BertEncoder`.

Reads config.json and the weights (model.safetensors, a sharded safetensors index, or
pytorch_model.bin through `torch.load(weights_only=True)` when torch is installed). Checkpoint keys may carry a head prefix (`bert.`, `distilbert.`, `roberta.`) or
none (bare `*Model`), and old BERT LayerNorms use gamma/beta instead of weight/bias. Linear
`weight` [out, in] becomes our `kernel` [in, out]. Pooler and task-head keys are ignored.
The encoder is built with `nnx.eval_shape` (no initialisation) and filled by
`checkpoints.load_into`, which rejects any parameter the key map leaves out.
"""
import json
import os
import re

from flax import nnx

from rsvqa_jax.errors import RSVQAError
from rsvqa_jax.models import checkpoints
from rsvqa_jax.models.bert import BertConfig, BertEncoder

SAFETENSORS = "model.safetensors"
SAFETENSORS_INDEX = "model.safetensors.index.json"
TORCH_BIN = "pytorch_model.bin"
_WORD_EMBEDDINGS = "embeddings.word_embeddings.weight"
_LINEARS = {
    "bert": ("attention.self.query", "attention.self.key", "attention.self.value",
             "attention.output.dense", "intermediate.dense", "output.dense"),
    "distilbert": ("attention.q_lin", "attention.k_lin", "attention.v_lin", "attention.out_lin",
                   "ffn.lin1", "ffn.lin2"),
}
_NORMS = {"bert": ("attention.output.LayerNorm", "output.LayerNorm"),
          "distilbert": ("sa_layer_norm", "output_layer_norm")}


def _read_safetensors(path):
  from safetensors import SafetensorError  # pylint: disable=g-import-not-at-top
  from safetensors.numpy import load_file  # pylint: disable=g-import-not-at-top
  try:
    return load_file(path)
  except (OSError, ValueError, SafetensorError) as e:
    raise RSVQAError(f"{path}: not a readable safetensors file ({e})") from e


def _read_torch_bin(path):
  try:
    import torch  # pylint: disable=g-import-not-at-top
  except ImportError as e:
    raise RSVQAError(f"{path}: reading pytorch_model.bin needs torch (pip install "
                     f"'rsvqa_jax[torch]'); or save the model as model.safetensors") from e
  state = checkpoints.load_torch_weights(path)
  if not isinstance(state, dict) or not all(isinstance(k, str) for k in state):
    raise RSVQAError(f"{path}: expected a state dict (tensors by name), found "
                     f"{type(state).__name__}" + (" with keys that are not names"
                                                 if isinstance(state, dict) else ""))
  return {k: checkpoints.torch_array(v, path, k) for k, v in state.items()
          if isinstance(v, torch.Tensor)}


def read_hf_weights(folder):
  """Checkpoint key -> NumPy array from a Hugging Face model folder."""
  single = os.path.join(folder, SAFETENSORS)
  index = os.path.join(folder, SAFETENSORS_INDEX)
  if os.path.exists(single):
    return _read_safetensors(single)
  if os.path.exists(index):
    try:
      with open(index, encoding="utf-8") as f:
        weight_map = json.load(f)["weight_map"]
    except (OSError, ValueError, KeyError, TypeError) as e:
      raise RSVQAError(f"{index}: cannot read the weight_map ({e})") from e
    if not (isinstance(weight_map, dict) and all(isinstance(v, str) for v in weight_map.values())):
      raise RSVQAError(f"{index}: weight_map must map tensor names to shard file names")
    shards = sorted(set(weight_map.values()))
    outside = [s for s in shards if os.path.basename(s) != s or s in ("", ".", "..")]
    if outside:  # the index must not make us read files outside the model folder
      raise RSVQAError(f"{index}: weight_map names {outside[0]!r}, not a file name in {folder}")
    tensors = {}
    for shard in shards:
      tensors.update(_read_safetensors(os.path.join(folder, shard)))
    return tensors
  if os.path.exists(os.path.join(folder, TORCH_BIN)):
    return _read_torch_bin(os.path.join(folder, TORCH_BIN))
  raise RSVQAError(f"{folder}: no {SAFETENSORS}, {SAFETENSORS_INDEX} or {TORCH_BIN}")


def _norm_targets(ours, name):
  yield f"{ours}.scale", (f"{name}.weight", f"{name}.gamma"), False
  yield f"{ours}.bias", (f"{name}.bias", f"{name}.beta"), False


def _targets(config):
  """(our flat key, candidate checkpoint keys without prefix, transpose) for every parameter."""
  family = "distilbert" if config.family == "distilbert" else "bert"
  yield "embeddings.word.embedding", (_WORD_EMBEDDINGS,), False
  yield "embeddings.position.embedding", ("embeddings.position_embeddings.weight",), False
  if config.family != "distilbert":
    yield "embeddings.token_type.embedding", ("embeddings.token_type_embeddings.weight",), False
  yield from _norm_targets("embeddings.norm", "embeddings.LayerNorm")
  stack = "transformer.layer" if family == "distilbert" else "encoder.layer"
  for i in range(config.num_layers):
    base, ours = f"{stack}.{i}.", f"layers.{i}."
    linears = ("attention.query", "attention.key", "attention.value", "attention.output",
               "ffn_in", "ffn_out")
    for linear, name in zip(linears, _LINEARS[family]):
      yield f"{ours}{linear}.kernel", (f"{base}{name}.weight",), True
      yield f"{ours}{linear}.bias", (f"{base}{name}.bias",), False
    for norm, name in zip(("attention_norm", "ffn_norm"), _NORMS[family]):
      yield from _norm_targets(ours + norm, base + name)


_LAYER_KEY = re.compile(r"(?:encoder|transformer)\.layer\.(\d+)\.")  # BERT / DistilBERT


def _prefix(tensors, source):
  prefixes = [k[:-len(_WORD_EMBEDDINGS)] for k in tensors if k.endswith(_WORD_EMBEDDINGS)]
  if not prefixes:
    raise RSVQAError(f"{source}: no key ending in {_WORD_EMBEDDINGS}; not a BERT-family checkpoint")
  return min(prefixes, key=len)


def hf_tree(model, tensors, source="checkpoint"):
  """Hugging Face tensors -> (our parameter tree for `model` (possibly abstract), names).

  `names` maps our keys to the checkpoint's, so `checkpoints.load_into` names a NaN by the key
  the file holds. A missing or mismatched checkpoint key raises RSVQAError naming it.
  """
  prefix = _prefix(tensors, source)
  shapes = checkpoints.flat_shapes(model)
  flat, names = {}, {}
  for ours, candidates, transpose in _targets(model.config):
    stored = shapes[ours][::-1] if transpose else shapes[ours]
    key = next((prefix + c for c in candidates if prefix + c in tensors), None)
    if key is None:
      raise RSVQAError(f"{source}: missing key {prefix + candidates[0]} (model expects shape "
                       f"{stored})")
    value = checkpoints.float32_weights(tensors[key], f"{source}: key {key}")
    if value.shape != stored:
      raise RSVQAError(f"{source}: key {key} has shape {value.shape}, model expects {stored}")
    flat[ours], names[ours] = (value.T if transpose else value), key
  return checkpoints.unflatten(flat), names


def check_layer_count(tensors, config, source):
  """RSVQAError when config.json's layer count is not the checkpoint's; checked before the model
  is built, as a damaged count (1e9 layers) would take hours to build."""
  prefix = _prefix(tensors, source)
  layers = {int(m.group(1)) for k in tensors if k.startswith(prefix)
            and (m := _LAYER_KEY.match(k[len(prefix):]))}
  if max(layers, default=-1) + 1 != config.num_layers:
    raise RSVQAError(f"{source}: the checkpoint holds {max(layers, default=-1) + 1} layers, "
                     f"config.json asks for {config.num_layers}")


def load_bert(folder, *, rngs=None, dtype=None):
  """BertEncoder from a local Hugging Face folder; never downloads.

  The encoder is built from shapes only and every parameter comes from the checkpoint; `rngs`
  (default nnx.Rngs(0)) seeds only the dropout streams. The folder's tokenizer files are read
  by data/tokenizers.HFTokenizer, with at most `model.config.max_tokens` tokens.
  """
  folder = os.fspath(folder)
  config = BertConfig.from_hf_json(os.path.join(folder, "config.json"))
  tensors = read_hf_weights(folder)
  check_layer_count(tensors, config, folder)
  model = nnx.eval_shape(lambda: BertEncoder(config, rngs=nnx.Rngs(0), dtype=dtype))
  tree, names = hf_tree(model, tensors, folder)
  checkpoints.load_into(model, tree, folder, names)
  checkpoints.finish_abstract(model, rngs if rngs is not None else nnx.Rngs(0), folder)
  return model
