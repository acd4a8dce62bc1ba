"""Loads a local Hugging Face DistilBERT / BERT / RoBERTa folder into `BertEncoder`.

Reads config.json and the weights (`checkpoints.read_hf_weights`: model.safetensors or
pytorch_model.bin, either one sharded with its index; .bin files through
`torch.load(weights_only=True)` when torch is installed). Checkpoint keys may carry a head prefix
(`bert.`, `distilbert.`, `roberta.`) or none (bare `*Model`), and old BERT LayerNorms use
gamma/beta instead of weight/bias. config.json's model_type must be of the weights' family. Linear
`weight` [out, in] becomes our `kernel` [in, out]. Pooler and task-head keys are ignored.
The encoder is built with `nnx.eval_shape` (no initialisation) and filled by
`checkpoints.load_into`, which rejects any parameter the key map leaves out; a checkpoint key
inside the encoder that the map does not read (LoRA adapters, relative position embeddings) is
refused too, as are two encoders in one file.
"""
import json
import logging
import os
import re

from flax import nnx

from rsvqa_jax.errors import RSVQAError
from rsvqa_jax.models import checkpoints
from rsvqa_jax.models.bert import BertConfig, BertEncoder, family_of

_log = logging.getLogger(__name__)

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
    raise RSVQAError(f"{path}: reading a .bin weights file needs torch (pip install "
                     f"'rsvqa_jax[torch]'); or save the model as model.safetensors") from e
  state = checkpoints.load_torch_weights(path)
  if not isinstance(state, dict) or not all(isinstance(k, str) for k in state):
    raise RSVQAError(f"{path}: expected a state dict (tensors by name), found "
                     f"{type(state).__name__}" + (" with keys that are not names"
                                                 if isinstance(state, dict) else ""))
  return {k: checkpoints.torch_array(v, path, k) for k, v in state.items()
          if isinstance(v, torch.Tensor)}


def _read_weights(path):
  """One weights file of the folder (a shard too): safetensors, or a .bin through torch."""
  return _read_torch_bin(path) if path.endswith(".bin") else _read_safetensors(path)


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


# Where an encoder's weights lie: a key there that the key map leaves unread is a part of the
# model it would drop (keys elsewhere, a pooler or a task head, are left as documented).
_ENCODER_PARTS = ("embeddings.", "encoder.", "transformer.")
_BUFFERS = ("embeddings.position_ids", "embeddings.token_type_ids")  # saved by older versions
_LAYER_KEY = re.compile(r"(encoder|transformer)\.layer\.(\d+)\.")  # BERT, RoBERTa / DistilBERT
# The families whose model_type may come with weights of a key prefix, or of a layer stack.
_PREFIX_FAMILIES = {"bert.": ("bert",), "roberta.": ("roberta",), "distilbert.": ("distilbert",)}
_STACK_FAMILIES = {"encoder": ("bert", "roberta"), "transformer": ("distilbert",)}


def _prefix(tensors, source):
  """The key prefix of the checkpoint's one encoder ('', 'bert.', ...); two encoders (a
  distillation's student. and teacher., an encoder-decoder) are refused: either could be meant."""
  prefixes = sorted(k[:-len(_WORD_EMBEDDINGS)] for k in tensors if k.endswith(_WORD_EMBEDDINGS))
  if not prefixes:
    raise RSVQAError(f"{source}: no key ending in {_WORD_EMBEDDINGS}; not a BERT-family checkpoint")
  if len(prefixes) > 1:
    named = ", ".join(repr(p) for p in prefixes)
    raise RSVQAError(f"{source}: holds {len(prefixes)} BERT-family encoders (key prefixes "
                     f"{named}); save the state dict of the one meant")
  return prefixes[0]


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
  unread = sorted(k for k in tensors if k.startswith(tuple(prefix + s for s in _ENCODER_PARTS))
                  and k not in set(names.values()) and k[len(prefix):] not in _BUFFERS)
  if unread:
    raise RSVQAError(f"{source}: {len(unread)} key(s) inside the encoder that the model does not "
                     f"read, e.g. {unread[0]} (unmerged adapters such as LoRA, relative position "
                     "embeddings, cross-attention?); merge or remove them, or save the plain "
                     "encoder")
  return checkpoints.unflatten(flat), names


def _layer_keys(tensors, prefix):
  return [m for k in tensors if k.startswith(prefix) and (m := _LAYER_KEY.match(k[len(prefix):]))]


def check_model_type(tensors, config_path, source):
  """RSVQAError when config.json's model_type is not of the weights' family, told by their key
  prefix (`roberta.`) or, for bare keys, by their layer stack (`transformer.layer.N`:
  DistilBERT). RoBERTa weights under model_type 'bert' load and number positions from 0 (every
  hidden state wrong); a BERT config.json beside DistilBERT weights read as "missing key dim".
  Checked before config.json is read for sizes; a file that says no model_type is left to it."""
  try:
    with open(config_path, encoding="utf-8") as f:
      model_type = json.load(f).get("model_type")
  except (OSError, ValueError, AttributeError):
    return  # BertConfig.from_hf_json names what is wrong with the file
  family = family_of(model_type)
  prefix = _prefix(tensors, source)
  stacks = {m.group(1) for m in _layer_keys(tensors, prefix)}
  if prefix in _PREFIX_FAMILIES:
    families, keys = _PREFIX_FAMILIES[prefix], f"are prefixed {prefix!r}"
  elif len(stacks) == 1:
    stack = stacks.pop()
    families = _STACK_FAMILIES[stack]
    keys = f"hold '{stack}.layer.N' layers ({' or '.join(families)})"
  else:
    return
  if family is not None and family not in families:
    raise RSVQAError(f"{source}: the weights' keys {keys} but config.json says model_type "
                     f"{model_type!r}; use the config.json that came with these weights")
  if family in ("bert", "roberta") and len(families) == 2:
    _warn_if_other_family(tensors, prefix, family, model_type, source)


def _warn_if_other_family(tensors, prefix, family, model_type, source):
  """Bare `encoder.layer.N` keys are BERT's and RoBERTa's alike, and only model_type tells how
  positions are numbered; the token-type table hints otherwise: BERT's has 2 rows, RoBERTa's 1.
  A WARNING, not a refusal: a model of either family may have been trained with the other
  count."""
  types = tensors.get(prefix + "embeddings.token_type_embeddings.weight")
  rows = None if types is None else types.shape[0]
  hinted = {2: "bert", 1: "roberta"}.get(rows)
  if hinted is not None and hinted != family:
    _log.warning(f"{source}: config.json says model_type {model_type!r}, but the weights' "
                 f"token-type table has {rows} row(s), as {hinted} models have; bare keys cannot "
                 f"tell BERT from RoBERTa, which number positions differently: if these are "
                 f"{hinted} weights, use the config.json that came with them")


def check_layer_count(tensors, config, source):
  """RSVQAError when config.json's layer count is not the checkpoint's; checked before the model
  is built, as a damaged count (1e9 layers) would take hours to build."""
  prefix = _prefix(tensors, source)
  layers = {int(m.group(2)) for m in _layer_keys(tensors, prefix)}
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
  config_path = os.path.join(folder, "config.json")
  if not os.path.isfile(config_path):
    raise RSVQAError(f"{folder}: no config.json; copy the config.json that came with the weights")
  tensors, _ = checkpoints.read_hf_weights(folder, _read_weights)
  check_model_type(tensors, config_path, folder)
  config = BertConfig.from_hf_json(config_path)
  check_layer_count(tensors, config, folder)
  model = nnx.eval_shape(lambda: BertEncoder(config, rngs=nnx.Rngs(0), dtype=dtype))
  tree, names = hf_tree(model, tensors, folder)
  checkpoints.load_into(model, tree, folder, names)
  checkpoints.finish_abstract(model, rngs if rngs is not None else nnx.Rngs(0), folder)
  return model
