"""Fusions and the assembled model: MUTAN against the Tucker formula, shapes, blind twin, and
where the original RSVQA code's e-mult drops out."""
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from rsvqa_jax.models.fusion import Fusion, Mutan, OriginalFusion
from rsvqa_jax.config import model_section
from rsvqa_jax.models.vqa import RSVQAModel, VQAHead


def _np(x):
  return np.asarray(x, dtype=np.float64)


@pytest.mark.parametrize("normalize", [False, True])
def test_mutan_parity_with_tucker_formula(normalize):
  rank, dim, mm, out = 3, 6, 5, 4
  m = Mutan(dim, out, rank=rank, mm_dim=mm, normalize=normalize, rngs=nnx.Rngs(0))
  rng = np.random.default_rng(0)
  v, q = rng.normal(size=(2, dim)).astype(np.float32), rng.normal(size=(2, dim)).astype(np.float32)
  got = np.asarray(m(jnp.asarray(v), jnp.asarray(q)))

  wv = _np(m.v_factors.kernel[...]).reshape(dim, rank, mm)
  wq = _np(m.q_factors.kernel[...]).reshape(dim, rank, mm)
  expected = []
  for b in range(2):
    z = np.zeros(mm)
    for r in range(rank):
      z += (_np(v[b]) @ wv[:, r, :]) * (_np(q[b]) @ wq[:, r, :])
    if normalize:
      z = np.sign(z) * np.sqrt(np.abs(z))
      z = z / np.linalg.norm(z)
    expected.append(z @ _np(m.out.kernel[...]) + _np(m.out.bias[...]))
  np.testing.assert_allclose(got, np.stack(expected), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind,width", [("mult", 8), ("concat", 16), ("mutan", 8)])
def test_fusion_widths(kind, width):
  f = Fusion(kind, 5, 3, hidden_dim=8, mutan_rank=2, mutan_dim=4, dropout=0.0, rngs=nnx.Rngs(0))
  out = f(jnp.ones((4, 5)), jnp.ones((4, 3)), deterministic=True)
  assert out.shape == (4, width) == (4, f.out_dim)
  if kind == "concat":  # [tanh projection of v; tanh projection of q]
    v, q = jnp.arange(10.0).reshape(2, 5) / 10, jnp.arange(6.0).reshape(2, 3) / 10
    pv = jnp.tanh(v @ f.v_proj.linear.kernel[...] + f.v_proj.linear.bias[...])
    pq = jnp.tanh(q @ f.q_proj.linear.kernel[...] + f.q_proj.linear.bias[...])
    got = np.asarray(f(v, q, deterministic=True))
    np.testing.assert_allclose(got[:, :8], pv, rtol=1e-6)
    np.testing.assert_allclose(got[:, 8:], pq, rtol=1e-6)


def test_mult_is_product_of_tanh_projections():
  f = Fusion("mult", 5, 3, hidden_dim=8, dropout=0.0, rngs=nnx.Rngs(1))
  v, q = jnp.arange(10.0).reshape(2, 5) / 10, jnp.arange(6.0).reshape(2, 3) / 10
  pv = jnp.tanh(v @ f.v_proj.linear.kernel[...] + f.v_proj.linear.bias[...])
  pq = jnp.tanh(q @ f.q_proj.linear.kernel[...] + f.q_proj.linear.bias[...])
  np.testing.assert_allclose(f(v, q, deterministic=True), pv * pq, rtol=1e-6)


class _Seen(nnx.Module):
  """Stands in for a Dropout and records what it was given."""

  def __init__(self, seen, name):
    self.seen, self.name = seen, name

  def __call__(self, x, *, deterministic):
    self.seen[self.name] = x
    return x


def test_original_fusion_drops_before_projecting_and_after_the_tanh_product():
  f = OriginalFusion(5, 3, hidden_dim=8, dropout=0.5, rngs=nnx.Rngs(1))
  seen = {}
  for name in ("v_dropout", "q_dropout", "dropout"):
    setattr(f, name, _Seen(seen, name))
  v, q = jnp.arange(10.0).reshape(2, 5) / 10, jnp.arange(6.0).reshape(2, 3) / 10
  out = f(v, q, deterministic=False)
  np.testing.assert_array_equal(seen["v_dropout"], v)
  np.testing.assert_array_equal(seen["q_dropout"], q)
  pv = jnp.tanh(v @ f.v_linear.kernel[...] + f.v_linear.bias[...])
  pq = jnp.tanh(q @ f.q_linear.kernel[...] + f.q_linear.bias[...])
  np.testing.assert_allclose(seen["dropout"], jnp.tanh(pv * pq), rtol=1e-6)
  assert out is seen["dropout"]


def _head(blind, **kw):
  cfg = model_section()
  cfg.update(dict(hidden_dim=8, classifier_dim=6, blind=blind, **kw))
  return VQAHead(cfg, q_dim=3, v_dim=5, num_answers=4, rngs=nnx.Rngs(0))


def test_blind_model_ignores_image():
  model = RSVQAModel(_head(blind=True))
  q = jnp.ones((2, 3))
  a = model({"question_vector": q, "image_features": jnp.zeros((2, 5))})
  b = model({"question_vector": q, "image_features": jnp.ones((2, 5))})
  np.testing.assert_array_equal(a, b)
  assert model.head.fusion is None


def test_reference_model_uses_image_and_dropout_needs_rng():
  model = RSVQAModel(_head(blind=False, fusion="mutan", mutan_rank=2, mutan_dim=4))
  q = jnp.ones((2, 3))
  a = model({"question_vector": q, "image_features": jnp.zeros((2, 5))})
  b = model({"question_vector": q, "image_features": jnp.ones((2, 5))})
  assert a.shape == (2, 4) and not np.allclose(a, b)
  d1 = model({"question_vector": q, "image_features": jnp.ones((2, 5))}, deterministic=False)
  d2 = model({"question_vector": q, "image_features": jnp.ones((2, 5))}, deterministic=False)
  assert not np.allclose(d1, d2)  # dropout draws fresh masks from the module's rng stream


def test_missing_question_input_is_reported():
  model = RSVQAModel(_head(blind=True))
  with pytest.raises(ValueError, match="question_vector"):
    model({"image_features": jnp.zeros((2, 5))})
