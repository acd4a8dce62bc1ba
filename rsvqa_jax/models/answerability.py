"""The answerability head (ChiQA): can this image answer the question, as one logit per pair.

It is the VQA model's head with a single output: the fused vector of (image, question), or the
question vector alone for the question-only (blind) twin, through the classifier's FC layer to
one logit, whose sigmoid is the score in [0, 1] that labels 2 / 1 / 0 are trained towards as
1 / 0.5 / 0. The question is encoded once per pool and broadcast over its K candidates, so a
fine-tuned language model costs one pass per question, not per pair.

Batch keys read: image_features [P, K, D] and either question_vector [P, Dq] or (tokens, mask)
[P, L]; the output is logits [P, K].
"""
import jax.numpy as jnp
from flax import nnx

from rsvqa_jax.models.vqa import RSVQAModel


class AnswerabilityHead(nnx.Module):
  """A one-output VQAHead (models/vqa.py) applied to each candidate of a pool."""

  def __init__(self, vqa_head):
    self.vqa = vqa_head
    self.blind = vqa_head.blind

  def __call__(self, image_features, question_vector, *, deterministic):
    pools, k = image_features.shape[:2]
    if self.blind:  # the same logit for every candidate: the words alone
      logit = self.vqa(None, question_vector, deterministic=deterministic)[:, 0]
      return jnp.broadcast_to(logit[:, None], (pools, k))
    q = jnp.broadcast_to(question_vector[:, None], (pools, k, question_vector.shape[-1]))
    return self.vqa(image_features, q, deterministic=deterministic)[..., 0]


class AnswerabilityModel(RSVQAModel):
  """Text encoder (optional when question vectors are cached) + answerability head."""

  def __call__(self, batch, *, deterministic=True):
    q = self.question_vector(batch, deterministic=deterministic)
    return self.head(batch["image_features"], q, deterministic=deterministic)


def from_vqa(model):
  """The AnswerabilityModel of an RSVQAModel built with one answer (its head and encoder)."""
  return AnswerabilityModel(AnswerabilityHead(model.head), model.text_encoder)
