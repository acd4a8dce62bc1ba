"""The assembled RSVQA model and its visual-blind twin.

The frozen ResNet never runs inside the model: its pooled features are computed once and
cached (features/image_cache.py), so the model takes `image_features` [B, 2048]. The question
side takes either token ids (a trainable or frozen text encoder runs) or cached
`question_vector`s when the language model is frozen and its outputs were cached.

Batch keys read: image_features, and either question_vector or (tokens, mask).
"""
from flax import nnx

from rsvqa_jax.models.fusion import Classifier, Fusion


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


class RSVQAModel(nnx.Module):
  """Text encoder (optional when question vectors are cached) + VQA head."""

  def __init__(self, head, text_encoder=None):
    self.head = head
    self.text_encoder = text_encoder

  def question_vector(self, batch, *, deterministic):
    if "question_vector" in batch:
      return batch["question_vector"]
    if self.text_encoder is None:
      raise ValueError("batch has no question_vector and the model has no text encoder")
    return self.text_encoder(batch["tokens"], batch["mask"], deterministic=deterministic)

  def __call__(self, batch, *, deterministic=True):
    q = self.question_vector(batch, deterministic=deterministic)
    v = None if self.head.blind else batch["image_features"]
    return self.head(v, q, deterministic=deterministic)
