"""Fusion of the image and question vectors, and the answer classifier (DESIGN.md section 4).

Both inputs are first projected to `hidden_dim` (1200 in the paper) with tanh and dropout;
the fusions then combine the two projections:
  mult    f = v * q                                   (the RSVQA baseline's e-mult)
  concat  f = [v; q]
  mutan   f = W_o (sum_r (W_v[r] v) * (W_q[r] q))     (Tucker / MUTAN, rank R), with optional
          signed square root and L2 normalisation of the sum before W_o.
`OriginalFusion` is the e-mult of the original RSVQA code (syvlo/RSVQA models/model.py), which
places dropout before each projection instead of after it and squashes the product with tanh.
"""
import jax.numpy as jnp
from flax import nnx

from rsvqa_jax.models import activations
from rsvqa_jax.models.dense import Dense
from rsvqa_jax.models.dropout import Dropout

FUSIONS = ("mult", "concat", "mutan")


class Projection(nnx.Module):
  """Linear -> tanh -> dropout: brings an encoder's vector to the fusion width."""

  def __init__(self, in_dim, out_dim, *, dropout, rngs):
    self.linear = Dense(in_dim, out_dim, rngs=rngs)
    self.dropout = Dropout(dropout, rngs=rngs)

  def __call__(self, x, *, deterministic):
    return self.dropout(activations.tanh(self.linear(x)), deterministic=deterministic)


class Mutan(nnx.Module):
  """Tucker-decomposed bilinear fusion of two vectors of the same width."""

  def __init__(self, dim, out_dim, *, rank, mm_dim, normalize, rngs):
    self.rank, self.mm_dim, self.normalize = rank, mm_dim, normalize
    self.v_factors = Dense(dim, rank * mm_dim, use_bias=False, rngs=rngs)
    self.q_factors = Dense(dim, rank * mm_dim, use_bias=False, rngs=rngs)
    self.out = Dense(mm_dim, out_dim, rngs=rngs)

  def __call__(self, v, q):
    shape = v.shape[:-1] + (self.rank, self.mm_dim)
    z = (self.v_factors(v).reshape(shape) * self.q_factors(q).reshape(shape)).sum(-2)
    if self.normalize:
      z = jnp.sign(z) * jnp.sqrt(jnp.abs(z) + 1e-12)
      z = z / jnp.maximum(jnp.linalg.norm(z, axis=-1, keepdims=True), 1e-12)
    return self.out(z)


class Fusion(nnx.Module):
  """Projects both vectors then fuses them; `out_dim` says the fused width."""

  def __init__(self, kind, v_dim, q_dim, *, hidden_dim=1200, dropout=0.5, mutan_rank=5,
               mutan_dim=1200, mutan_normalize=False, rngs):
    if kind not in FUSIONS:
      raise ValueError(f"unknown fusion {kind!r}; choose one of {FUSIONS}")
    self.kind = kind
    self.v_proj = Projection(v_dim, hidden_dim, dropout=dropout, rngs=rngs)
    self.q_proj = Projection(q_dim, hidden_dim, dropout=dropout, rngs=rngs)
    self.mutan = (Mutan(hidden_dim, hidden_dim, rank=mutan_rank, mm_dim=mutan_dim,
                        normalize=mutan_normalize, rngs=rngs) if kind == "mutan" else None)
    self.out_dim = 2 * hidden_dim if kind == "concat" else hidden_dim

  def __call__(self, v, q, *, deterministic):
    v = self.v_proj(v, deterministic=deterministic)
    q = self.q_proj(q, deterministic=deterministic)
    if self.kind == "mult":
      return v * q
    if self.kind == "concat":
      return jnp.concatenate([v, q], axis=-1)
    return self.mutan(v, q)


class OriginalFusion(nnx.Module):
  """The original code's e-mult: dropout -> linear -> tanh per side, then dropout(tanh(v * q)).

  Its classifier is the same as ours (linear, tanh, dropout, linear), so only this part differs.
  """

  def __init__(self, v_dim, q_dim, *, hidden_dim=1200, dropout=0.5, rngs):
    self.v_dropout = Dropout(dropout, rngs=rngs)
    self.q_dropout = Dropout(dropout, rngs=rngs)
    self.v_linear = Dense(v_dim, hidden_dim, rngs=rngs)
    self.q_linear = Dense(q_dim, hidden_dim, rngs=rngs)
    self.dropout = Dropout(dropout, rngs=rngs)
    self.out_dim = hidden_dim

  def __call__(self, v, q, *, deterministic):
    v = activations.tanh(self.v_linear(self.v_dropout(v, deterministic=deterministic)))
    q = activations.tanh(self.q_linear(self.q_dropout(q, deterministic=deterministic)))
    return self.dropout(activations.tanh(v * q), deterministic=deterministic)


class Classifier(nnx.Module):
  """FC `hidden_dim` (256 in the paper) with tanh and dropout, then one logit per answer."""

  def __init__(self, in_dim, num_answers, *, hidden_dim=256, dropout=0.5, rngs):
    self.hidden = Projection(in_dim, hidden_dim, dropout=dropout, rngs=rngs)
    self.logits = Dense(hidden_dim, num_answers, rngs=rngs)

  def __call__(self, x, *, deterministic):
    return self.logits(self.hidden(x, deterministic=deterministic))
