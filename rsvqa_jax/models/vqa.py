"""The assembled RSVQA model, its visual-blind twin and the original RSVQA code's head.

The frozen ResNet never runs inside the model: its features are computed once and cached
(features/image_cache.py), so the model takes `image_features` [B, D]: the pooled 2048-d vector
for the paper's head, the flattened final map [B, h*w*C] for the original head (model.head =
"original"), whose trainable 1x1 conv must see the map before any pooling, and for the attention
head (models/attention.py), which weighs its positions. The question side
takes either token ids (a trainable or frozen text encoder runs) or cached `question_vector`s
when the language model is frozen and its outputs were cached.

Batch keys read: image_features, and either question_vector or (tokens, mask).
"""
import jax.numpy as jnp
from flax import nnx

from rsvqa_jax.errors import RSVQAError
from rsvqa_jax.models.attention import AttentionHead
from rsvqa_jax.models.dense import Dense
from rsvqa_jax.models.fusion import Classifier, Fusion, OriginalFusion

HEADS = ("paper", "original", "attention")
MAP_HEADS = ("original", "attention")  # heads whose image features are the flattened map


class VQAHead(nnx.Module):
  """Fusion + classifier on (image vector, question vector); blind models skip the image.

  `cfg` is a config's model section (config.model_section: fusion, hidden_dim, classifier_dim,
  dropout, mutan_rank, mutan_dim, mutan_normalize, blind).
  """

  def __init__(self, cfg, *, q_dim, v_dim, num_answers, rngs):
    self.blind = bool(cfg.blind)
    if self.blind:
      self.fusion = None
      in_dim = q_dim
    else:
      self.fusion = Fusion(cfg.fusion, v_dim, q_dim, hidden_dim=cfg.hidden_dim,
                           dropout=cfg.dropout, mutan_rank=cfg.mutan_rank,
                           mutan_dim=cfg.mutan_dim, mutan_normalize=cfg.mutan_normalize,
                           rngs=rngs)
      in_dim = self.fusion.out_dim
    self.classifier = Classifier(in_dim, num_answers, hidden_dim=cfg.classifier_dim,
                                 dropout=cfg.dropout, rngs=rngs)

  def __call__(self, image_vector, question_vector, *, deterministic):
    x = question_vector
    if not self.blind:
      x = self.fusion(image_vector, question_vector, deterministic=deterministic)
    return self.classifier(x, deterministic=deterministic)


class MapConv(nnx.Module):
  """The original baseline's visual branch: a trainable 1x1 conv over the frozen ResNet map.

  syvlo/RSVQA reduces ResNet-152's h x w x 2048 map to 2048 / (h * w) channels, so the
  flattened result has 2048 values again (8 x 8 x 32 on LR tiles). The input is the map
  flattened row-major, [..., h * w * C] (one row of the feature table); the output is flattened
  channel-first, as torch's `.view(-1, 2048)` of an NCHW tensor, so the original's next linear
  layer takes the same weights.
  """

  def __init__(self, map_shape, *, rngs):
    h, w, c = (int(d) for d in map_shape)
    if c % (h * w):
      raise RSVQAError(f"image map {h}x{w}x{c}: the original head's 1x1 conv keeps {c} values "
                       f"after flattening, so h * w = {h * w} must divide the {c} channels")
    self.map_shape = (h, w, c)
    self.conv = Dense(c, c // (h * w), rngs=rngs)  # a 1x1 conv is a matmul over channels
    self.out_dim = c

  def __call__(self, flat_map):
    x = self.conv(flat_map.reshape(flat_map.shape[:-1] + self.map_shape))
    x = jnp.moveaxis(x, -1, -3)  # [..., C', h, w]
    return x.reshape(x.shape[:-3] + (self.out_dim,))


class OriginalHead(nnx.Module):
  """The original RSVQA code's head (syvlo/RSVQA models/model.py), layer for layer.

  1x1 conv over the map, flattened; dropout -> linear 1200 -> tanh on each side; tanh of the
  product, dropout; linear 256 -> tanh -> dropout -> linear to the answers. Sizes and the one
  dropout rate come from the model section (hidden_dim, classifier_dim, dropout).
  """

  blind = False

  def __init__(self, cfg, *, q_dim, map_shape, num_answers, rngs):
    self.visual = MapConv(map_shape, rngs=rngs)
    self.fusion = OriginalFusion(self.visual.out_dim, q_dim, hidden_dim=cfg.hidden_dim,
                                 dropout=cfg.dropout, rngs=rngs)
    self.classifier = Classifier(cfg.hidden_dim, num_answers, hidden_dim=cfg.classifier_dim,
                                 dropout=cfg.dropout, rngs=rngs)

  def __call__(self, image_vector, question_vector, *, deterministic):
    x = self.fusion(self.visual(image_vector), question_vector, deterministic=deterministic)
    return self.classifier(x, deterministic=deterministic)


def make_head(cfg, *, q_dim, v_dim, num_answers, map_shape=None, rngs):
  """The head `cfg.head` names; the original one needs the image map's (h, w, C)."""
  if cfg.head == "paper":
    return VQAHead(cfg, q_dim=q_dim, v_dim=v_dim, num_answers=num_answers, rngs=rngs)
  if cfg.head == "attention":  # models/attention.py: the paper's fusion on an attended map
    if cfg.blind or map_shape is None:
      raise RSVQAError("config model.head=attention attends over the image map: the visual-blind "
                       "twin uses model.head=paper, and the map's shape must be given")
    body = VQAHead(cfg, q_dim=q_dim, v_dim=map_shape[-1], num_answers=num_answers, rngs=rngs)
    return AttentionHead(cfg.attention_dim, q_dim=q_dim, map_shape=map_shape, body=body,
                         rngs=rngs)
  if cfg.head != "original":
    raise RSVQAError(f"config model.head={cfg.head!r}: choose one of {HEADS}")
  if cfg.blind or cfg.fusion != "mult":
    raise RSVQAError("config model.head=original is the original code's e-mult model with an "
                     f"image (model.fusion={cfg.fusion}, model.blind={cfg.blind}); other "
                     "fusions and the visual-blind twin use model.head=paper")
  if map_shape is None:
    raise RSVQAError("config model.head=original reads the image map: no map shape was given")
  return OriginalHead(cfg, q_dim=q_dim, map_shape=map_shape, num_answers=num_answers, rngs=rngs)


class RSVQAModel(nnx.Module):
  """Text encoder (optional when question vectors are cached) + VQA head."""

  def __init__(self, head, text_encoder=None):
    self.head = head
    self.text_encoder = text_encoder

  def question_vector(self, batch, *, deterministic):
    """The batch's question vectors: given (a cached frozen encoder's), or encoded here."""
    if "question_vector" in batch:
      return batch["question_vector"]
    if self.text_encoder is None:
      raise ValueError("batch has no question_vector and the model has no text encoder")
    return self.text_encoder(batch["tokens"], batch["mask"], deterministic=deterministic)

  def __call__(self, batch, *, deterministic=True):
    q = self.question_vector(batch, deterministic=deterministic)
    v = None if self.head.blind else batch["image_features"]
    return self.head(v, q, deterministic=deterministic)
