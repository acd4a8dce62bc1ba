"""DistilBERT, BERT and RoBERTa question encoders: one post-LN transformer, three embeddings.

The families differ only in the embeddings (DistilBERT has no token types; RoBERTa numbers
positions from padding_idx + 1 over real tokens) and in their checkpoint key names, which
`bert_params` maps. The question vector is the mean of the last hidden layer over real tokens.
Parameters stay float32; the matmuls run in `dtype` (jnp.bfloat16), or when it is None in the
dtype of the parameters they are given (the train step's compute_dtype casts them; bf16
products accumulate in float32 on a CPU, models/matmul), while the residual stream, LayerNorms and softmax stay float32.
"""
import dataclasses
import json
import os

import jax
import jax.numpy as jnp
from flax import nnx

from rsvqa_jax.errors import RSVQAError
from rsvqa_jax.models import activations
from rsvqa_jax.models import matmul as matmul_lib
from rsvqa_jax.models.dense import Dense
from rsvqa_jax.models.dropout import Dropout

FAMILIES = ("distilbert", "bert", "roberta")
_MODEL_TYPES = {"distilbert": "distilbert", "bert": "bert", "roberta": "roberta",
                "xlm-roberta": "roberta", "camembert": "roberta"}


def family_of(model_type):
  """The family (FAMILIES) of a config.json model_type, None for another or a non-string."""
  return _MODEL_TYPES.get(model_type) if isinstance(model_type, str) else None
# hidden_act -> the function's name in models/activations (looked up at each call).
_ACTIVATIONS = {"gelu": "gelu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh",
                "relu": "relu", "silu": "silu", "swish": "silu"}


@dataclasses.dataclass(frozen=True)
class BertConfig:
  """Architecture of a BERT-family encoder (the fields of a Hugging Face config.json)."""

  family: str
  vocab_size: int
  hidden_size: int
  num_layers: int
  num_heads: int
  intermediate_size: int
  max_position_embeddings: int = 512
  type_vocab_size: int = 2
  layer_norm_eps: float = 1e-12
  pad_token_id: int = 0
  hidden_act: str = "gelu"
  dropout: float = 0.1

  def __post_init__(self):
    sizes = {"vocab_size": 1, "hidden_size": 1, "num_layers": 1, "num_heads": 1,
             "intermediate_size": 1, "max_position_embeddings": 1, "type_vocab_size": 0}
    for name, least in sizes.items():
      value = getattr(self, name)
      if not isinstance(value, int) or isinstance(value, bool) or value < least:
        raise RSVQAError(f"BERT config: {name} {value!r}: expected an integer >= {least}")
    if self.family not in FAMILIES:
      raise RSVQAError(f"BERT config: family {self.family!r} not one of {FAMILIES}")
    if not isinstance(self.hidden_act, str) or self.hidden_act not in _ACTIVATIONS:
      raise RSVQAError(f"BERT config: hidden_act {self.hidden_act!r} not one of "
                       f"{sorted(_ACTIVATIONS)}")
    if self.hidden_size % self.num_heads:
      raise RSVQAError(f"BERT config: hidden_size {self.hidden_size} not divisible by "
                       f"num_heads {self.num_heads}")
    number = lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)
    if not (number(self.layer_norm_eps) and 0 < self.layer_norm_eps < 1):
      raise RSVQAError(f"BERT config: layer_norm_eps {self.layer_norm_eps!r}: expected a number "
                       "in (0, 1)")
    if not (number(self.dropout) and 0 <= self.dropout < 1):
      raise RSVQAError(f"BERT config: dropout {self.dropout!r}: expected a number in [0, 1)")
    if (not isinstance(self.pad_token_id, int) or isinstance(self.pad_token_id, bool)
        or not 0 <= self.pad_token_id < self.vocab_size):
      raise RSVQAError(f"BERT config: pad_token_id {self.pad_token_id!r}: expected a token id in "
                       f"[0, vocab_size {self.vocab_size})")
    if self.max_tokens < 1:  # RoBERTa's positions start after the padding id
      raise RSVQAError(f"BERT config: max_position_embeddings {self.max_position_embeddings} "
                       f"leaves no position after pad_token_id {self.pad_token_id}")

  @property
  def max_tokens(self):
    """Longest token sequence the position table takes (RoBERTa's positions start at pad + 1)."""
    if self.family == "roberta":
      return self.max_position_embeddings - self.pad_token_id - 1
    return self.max_position_embeddings

  @classmethod
  def from_hf_json(cls, path):
    """Reads a Hugging Face config.json of a DistilBERT, BERT or RoBERTa model."""
    try:
      with open(path, encoding="utf-8") as f:
        cfg = json.load(f)
    except (OSError, ValueError) as e:
      raise RSVQAError(f"{path}: cannot read config ({e})") from e
    if not isinstance(cfg, dict):
      raise RSVQAError(f"{path}: expected a JSON object of config keys")
    if "model_type" not in cfg:
      raise RSVQAError(f"{path}: missing key model_type (distilbert, bert or roberta)")
    try:
      return cls._from_dict(cfg, path)
    except RSVQAError as e:
      message = str(e)
      raise RSVQAError(message if message.startswith(os.fspath(path)) else f"{path}: {message}"
                       ) from None

  @classmethod
  def _from_dict(cls, cfg, path):
    model_type = cfg.get("model_type")
    family = family_of(model_type)
    if family is None:
      raise RSVQAError(f"{path}: model_type {cfg.get('model_type')!r} is not a DistilBERT, "
                       f"BERT or RoBERTa model")
    if cfg.get("position_embedding_type", "absolute") != "absolute":
      raise RSVQAError(f"{path}: position_embedding_type {cfg['position_embedding_type']!r} "
                       f"unsupported (only absolute)")
    for key in ("is_decoder", "add_cross_attention"):  # a causal mask, cross-attention layers
      if cfg.get(key):
        raise RSVQAError(f"{path}: {key} is true: a decoder's config; the question encoder is "
                         "an encoder (bidirectional attention, no cross-attention)")

    def get(key, default=None):
      value = cfg.get(key)
      if value is None and default is None:
        raise RSVQAError(f"{path}: missing key {key}")
      return default if value is None else value

    if family == "distilbert":
      return cls(family=family, vocab_size=get("vocab_size"), hidden_size=get("dim"),
                 num_layers=get("n_layers"), num_heads=get("n_heads"),
                 intermediate_size=get("hidden_dim"),
                 max_position_embeddings=get("max_position_embeddings"), type_vocab_size=0,
                 layer_norm_eps=1e-12, pad_token_id=get("pad_token_id", 0),
                 hidden_act=get("activation", "gelu"), dropout=get("dropout", 0.1))
    return cls(family=family, vocab_size=get("vocab_size"), hidden_size=get("hidden_size"),
               num_layers=get("num_hidden_layers"), num_heads=get("num_attention_heads"),
               intermediate_size=get("intermediate_size"),
               max_position_embeddings=get("max_position_embeddings"),
               type_vocab_size=get("type_vocab_size", 2),
               layer_norm_eps=get("layer_norm_eps", 1e-12),
               pad_token_id=get("pad_token_id", 1 if family == "roberta" else 0),
               hidden_act=get("hidden_act", "gelu"), dropout=get("hidden_dropout_prob", 0.1))


def _layer_norm(config, rngs):
  return nnx.LayerNorm(config.hidden_size, epsilon=config.layer_norm_eps, use_fast_variance=False,
                       dtype=jnp.float32, rngs=rngs)


class Embeddings(nnx.Module):
  """Word + position (+ token type 0) embeddings, LayerNorm, dropout."""

  def __init__(self, config, *, rngs):
    self.family = config.family
    self.pad_token_id = config.pad_token_id
    self.max_position = config.max_position_embeddings - 1
    init = jax.nn.initializers.normal(0.02)
    self.word = nnx.Embed(config.vocab_size, config.hidden_size, embedding_init=init, rngs=rngs)
    self.position = nnx.Embed(config.max_position_embeddings, config.hidden_size,
                              embedding_init=init, rngs=rngs)
    self.token_type = (None if config.family == "distilbert" else
                       nnx.Embed(config.type_vocab_size, config.hidden_size, embedding_init=init,
                                 rngs=rngs))
    self.norm = _layer_norm(config, rngs)
    self.dropout = Dropout(config.dropout, rngs=rngs)

  def __call__(self, tokens, mask, *, deterministic):
    if self.family == "roberta":
      real = (mask != 0).astype(jnp.int32)
      positions = jnp.cumsum(real, axis=1) * real + self.pad_token_id
    else:
      positions = jnp.arange(tokens.shape[1])[None, :]
    # Pads of a bucket longer than the position table reuse the last row instead of NaNs.
    x = self.word(tokens) + self.position(jnp.minimum(positions, self.max_position))
    if self.token_type is not None:
      x = x + self.token_type.embedding[0]
    return self.dropout(self.norm(x), deterministic=deterministic)


class SelfAttention(nnx.Module):
  """Multi-head self-attention; pads get a large negative score as keys."""

  def __init__(self, config, *, rngs, dtype):
    h = config.hidden_size
    self.num_heads = config.num_heads
    dense = lambda: Dense(h, h, dtype=dtype, rngs=rngs)
    self.query, self.key, self.value, self.output = dense(), dense(), dense(), dense()
    self.dropout = Dropout(config.dropout, rngs=rngs)

  def __call__(self, x, mask, *, deterministic):
    b, l, h = x.shape
    split = lambda t: t.reshape(b, l, self.num_heads, h // self.num_heads)
    q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
    scores = matmul_lib.einsum("bqhd,bkhd->bhqk", q, k, jnp.float32)
    scores = scores / jnp.sqrt(jnp.float32(h // self.num_heads))
    scores = jnp.where(mask[:, None, None, :] != 0, scores, jnp.finfo(jnp.float32).min)
    probs = self.dropout(jax.nn.softmax(scores, axis=-1), deterministic=deterministic)
    context = matmul_lib.einsum("bhqk,bkhd->bqhd", probs.astype(v.dtype), v).reshape(b, l, h)
    return self.output(context)


class Layer(nnx.Module):
  """Post-LN transformer layer: x = LN(x + attn(x)); x = LN(x + ffn(x))."""

  def __init__(self, config, *, rngs, dtype):
    self.family = config.family
    self.activation = _ACTIVATIONS[config.hidden_act]  # a name: see _ACTIVATIONS
    self.attention = SelfAttention(config, rngs=rngs, dtype=dtype)
    self.attention_norm = _layer_norm(config, rngs)
    self.ffn_in = Dense(config.hidden_size, config.intermediate_size, dtype=dtype, rngs=rngs)
    self.ffn_out = Dense(config.intermediate_size, config.hidden_size, dtype=dtype, rngs=rngs)
    self.ffn_norm = _layer_norm(config, rngs)
    self.dropout = Dropout(config.dropout, rngs=rngs)

  def __call__(self, x, mask, *, deterministic):
    a = self.attention(x, mask, deterministic=deterministic)
    if self.family != "distilbert":  # DistilBERT drops attention weights only.
      a = self.dropout(a, deterministic=deterministic)
    x = self.attention_norm(x + a)
    h = getattr(activations, self.activation)(self.ffn_in(x))
    f = self.dropout(self.ffn_out(h), deterministic=deterministic)
    return self.ffn_norm(x + f)


class BertEncoder(nnx.Module):
  """DistilBERT / BERT / RoBERTa encoder; `__call__` gives the masked mean [B, hidden]."""

  def __init__(self, config, *, rngs, dtype=None):
    self.config = config
    self.out_dim = config.hidden_size
    self.embeddings = Embeddings(config, rngs=rngs)
    self.layers = nnx.List([Layer(config, rngs=rngs, dtype=dtype)
                            for _ in range(config.num_layers)])

  def hidden_states(self, tokens, mask, *, deterministic=True):
    """Last hidden layer [B, L, hidden], float32."""
    x = self.embeddings(tokens, mask, deterministic=deterministic)
    for layer in self.layers:
      x = layer(x, mask, deterministic=deterministic)
    return x.astype(jnp.float32)

  def __call__(self, tokens, mask, *, deterministic=True):
    """Question vectors [B, hidden]: mean of the last hidden layer over real tokens."""
    x = self.hidden_states(tokens, mask, deterministic=deterministic)
    m = (mask != 0)[..., None]
    total = jnp.where(m, x, 0.0).sum(axis=1)
    return total / jnp.maximum(m.sum(axis=1), 1).astype(x.dtype)
