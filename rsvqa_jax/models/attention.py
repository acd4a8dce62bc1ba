"""The spatial head: question-guided soft attention over the image map's positions.

Pooling the ResNet map before the fusion throws away where things are, so a model can be right
without looking at the right pixels, and nothing tells. This head (model.head = "attention")
keeps the frozen map (cached with image.map) and lets the question weigh its h x w positions:
  a_i = softmax_i( w . (tanh(W_v v_i) * tanh(W_q q)) ),   v = sum_i a_i v_i,
then the paper's fusion and classifier (`body`, a models/vqa.VQAHead) take v in place of the
pooled vector. The weights a are the model's own answer grounding (eval/grounding.py upsamples
them to the image); one glimpse, no dropout inside the attention.

Input: the map flattened row-major, [..., h * w * C] (one row of the feature table, as for the
original head), so the pipeline, image swaps and evaluators run unchanged.
"""
import jax
import jax.numpy as jnp
from flax import nnx

from rsvqa_jax.models import activations
from rsvqa_jax.models.dense import Dense


class AttentionHead(nnx.Module):
  """Attention over the map's positions, then `body` on the attended C-d vector."""

  blind = False

  def __init__(self, attention_dim, *, q_dim, map_shape, body, rngs):
    h, w, c = (int(d) for d in map_shape)
    self.map_shape = (h, w, c)
    self.v_proj = Dense(c, attention_dim, rngs=rngs)
    self.q_proj = Dense(q_dim, attention_dim, rngs=rngs)
    self.score = Dense(attention_dim, 1, rngs=rngs)
    self.body = body

  def positions(self, flat_map):
    """[..., h * w * C] -> [..., h * w, C]."""
    h, w, c = self.map_shape
    return flat_map.reshape(flat_map.shape[:-1] + (h * w, c))

  def attention(self, flat_map, question_vector):
    """Softmax weights [..., h * w] of each position (row-major) for the question."""
    v = activations.tanh(self.v_proj(self.positions(flat_map)))
    q = activations.tanh(self.q_proj(question_vector))[..., None, :]
    logits = self.score(v * q)[..., 0].astype(jnp.float32)
    return jax.nn.softmax(logits, axis=-1)

  def __call__(self, image_vector, question_vector, *, deterministic):
    weights = self.attention(image_vector, question_vector)
    v = self.positions(image_vector)
    attended = (weights[..., None].astype(v.dtype) * v).sum(-2)
    return self.body(attended, question_vector, deterministic=deterministic)
