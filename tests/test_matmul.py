"""Tests for models/matmul: bf16 products accumulated in float32, forward and backward."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from benchmarks import hlo_dots
from rsvqa_jax.models import matmul as matmul_lib
from rsvqa_jax.models.dense import Dense

BF16 = jnp.bfloat16


def _random(shape, seed):
  return jax.random.normal(jax.random.key(seed), shape, jnp.float32).astype(BF16)


def test_bf16_sum_that_a_bf16_accumulator_loses_is_exact():
  # 1 + 256 * 2^-8 = 2: each 2^-8 is half a bf16 step at 1, so a bf16 running sum stays at 1.
  a = jnp.ones((1, 257), BF16)
  b = jnp.full((257, 1), 2.0 ** -8, BF16).at[0, 0].set(1.0)
  assert float(matmul_lib.einsum("ik,kj->ij", a, b, jnp.float32)[0, 0]) == 2.0
  assert float(matmul_lib.matmul(a, b)[0, 0]) == 2.0


def test_equals_float32_product_of_the_rounded_operands():
  a, b = _random((3, 40, 96), 0), _random((96, 24), 1)
  want = np.asarray(a, np.float32) @ np.asarray(b, np.float32)
  got = matmul_lib.einsum("tbk,kn->tbn", a, b, jnp.float32)
  assert got.dtype == jnp.float32
  np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6, atol=1e-5)
  rounded = matmul_lib.matmul(a, b)
  assert rounded.dtype == BF16 and rounded.shape == (3, 40, 24)
  np.testing.assert_array_equal(np.asarray(rounded), np.asarray(want.astype(BF16)))


def test_float32_operands_take_the_plain_path():
  a = jax.random.normal(jax.random.key(0), (5, 7))
  b = jax.random.normal(jax.random.key(1), (7, 3))
  assert not matmul_lib.accumulates_in_float32(jnp.float32)
  np.testing.assert_array_equal(matmul_lib.matmul(a, b), a @ b)
  np.testing.assert_array_equal(matmul_lib.einsum("ik,kj->ij", a, b), jnp.einsum("ik,kj->ij", a, b))
  layer = Dense(7, 3, rngs=nnx.Rngs(0))
  plain = nnx.Linear(7, 3, rngs=nnx.Rngs(0))
  np.testing.assert_array_equal(layer(a), plain(a))


@pytest.mark.parametrize("spec,shape_a,shape_b", [
    ("bqhd,bkhd->bhqk", (2, 5, 3, 8), (2, 6, 3, 8)),
    ("bhqk,bkhd->bqhd", (2, 3, 5, 6), (2, 6, 3, 8)),
    ("tbh,tbk->hk", (4, 3, 8), (4, 3, 12)),
])
def test_gradients_match_float32_autodiff_of_the_rounded_operands(spec, shape_a, shape_b):
  a, b = _random(shape_a, 2), _random(shape_b, 3)
  out_shape = jnp.einsum(spec, a, b).shape
  weights = _random(out_shape, 4).astype(jnp.float32)
  loss = lambda x, y: (matmul_lib.einsum(spec, x, y).astype(jnp.float32) * weights).sum()
  reference = lambda x, y: (jnp.einsum(spec, x, y) * weights).sum()
  got = jax.grad(loss, argnums=(0, 1))(a, b)
  want = jax.grad(reference, argnums=(0, 1))(a.astype(jnp.float32), b.astype(jnp.float32))
  for g, w, x in zip(got, want, (a, b)):
    assert g.dtype == BF16 and g.shape == x.shape
    np.testing.assert_allclose(np.asarray(g, np.float32), np.asarray(w), rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("spec,shape_a,shape_b", [
    ("mk,kn->mn", (32, 16), (16, 8)),
    # Attention scores: the key gradient once fell back to a float32 product (XLA swapped its
    # operands to produce the asked output order).
    ("bqhd,bkhd->bhqk", (4, 16, 3, 8), (4, 16, 3, 8)),
])
def test_every_dot_of_forward_and_backward_is_bf16_into_float32(spec, shape_a, shape_b):
  a, b = _random(shape_a, 5), _random(shape_b, 6)
  loss = lambda x, y: jnp.tanh(matmul_lib.einsum(spec, x, y, jnp.float32)).sum()
  grad = jax.jit(jax.grad(loss, argnums=(0, 1)))
  dots = hlo_dots.module_dots(grad.lower(a, b).compile().as_text())
  labels = [label for label, _ in dots.values()]
  assert len(labels) >= 3, labels
  for label in labels:
    operands, result = label.split(", contracting")[0].split(" -> ")
    assert operands.count("bf16[") == 2 and result.startswith("f32["), label


def test_dense_with_float32_master_weights_gives_unrounded_float32_gradients():
  # A bf16 layer holding float32 weights casts them inside the product: the weight gradients
  # come out of the float32 accumulator, not rounded to bf16 (2^-9 relative) and back.
  x = jax.random.normal(jax.random.key(7), (8, 16))
  layer = Dense(16, 4, dtype=BF16, rngs=nnx.Rngs(0))
  graph, params = nnx.split(layer)
  assert all(p.dtype == jnp.float32 for p in jax.tree.leaves(params))

  def loss(p):
    return (nnx.merge(graph, p)(x).astype(jnp.float32) ** 2).sum()

  got = jax.grad(loss)(params)
  plain = nnx.Linear(16, 4, rngs=nnx.Rngs(0))
  rounded = jax.tree.map(lambda v: v.astype(BF16).astype(jnp.float32), nnx.split(plain)[1])
  x_rounded = x.astype(BF16).astype(jnp.float32)
  y = nnx.merge(nnx.split(plain)[0], rounded)(x_rounded)
  g_y = (2 * y.astype(BF16)).astype(BF16).astype(jnp.float32)  # the bf16 output's cotangent
  want = {"kernel": x_rounded.T @ g_y, "bias": g_y.sum(0)}
  for name in ("kernel", "bias"):
    g = got[name]
    assert g.dtype == jnp.float32
    np.testing.assert_allclose(np.asarray(g), np.asarray(want[name]), rtol=1e-5, atol=1e-5)
    assert not np.array_equal(np.asarray(g), np.asarray(g.astype(BF16).astype(jnp.float32)))


@pytest.mark.parametrize("shape_x,fan_out,gradient_first", [
    ((4, 24, 96), 8, True),  # BERT's second FFN layer: dy [96, 8] much smaller than x [96, 96]
    ((96, 8), 96, False),  # the first: x is the smaller
    ((96, 16), 16, False),  # alike: dy plus the result is no fewer elements than x
])
def test_weight_gradient_transposes_the_smaller_operand(shape_x, fan_out, gradient_first):
  """x.T @ dy of a float32 master weight puts dy on the left (and transposes the float32 result
  after) when that moves fewer elements; the gradient is the same, and every product stays
  bf16 into float32."""
  spec_x = "abcy"[-len(shape_x):]
  spec_g = spec_x[:-1] + "z"
  operands = jnp.zeros(shape_x, BF16), jnp.zeros(shape_x[:-1] + (fan_out,), BF16)
  x = _random(shape_x, 8)
  w = jax.random.normal(jax.random.key(9), (shape_x[-1], fan_out), jnp.float32) * 0.1
  assert matmul_lib.output_gradient_first(spec_x, spec_g, "yz", *operands,
                                          jnp.float32) is gradient_first
  loss = lambda v: (matmul_lib.matmul(x, v).astype(jnp.float32) ** 2).sum()
  got = jax.jit(jax.grad(loss))(w)
  y = matmul_lib.matmul(x, w)
  g_y = (2 * y.astype(jnp.float32)).astype(BF16).astype(jnp.float32)
  want = jnp.einsum(f"{spec_x},{spec_g}->yz", x.astype(jnp.float32), g_y)
  assert got.dtype == jnp.float32
  np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-5, atol=1e-5)
  dots = hlo_dots.module_dots(jax.jit(jax.grad(loss)).lower(w).compile().as_text())
  labels = [label for label, _ in dots.values()]
  rows = math.prod(shape_x[:-1])
  left = f"bf16[{fan_out},{rows}]" if gradient_first else f"bf16[{shape_x[-1]},{rows}]"
  assert any(label.startswith(left) for label in labels), labels
  for label in labels:
    operands, result = label.split(", contracting")[0].split(" -> ")
    assert operands.count("bf16[") == 2 and result.startswith("f32["), label


def test_spec_without_a_one_product_transpose_is_refused():
  a, b = _random((3, 4), 8), _random((4, 5), 9)
  with pytest.raises(ValueError, match="no transpose"):
    jax.grad(lambda x: matmul_lib.einsum("ik,kj->j", x, b).astype(jnp.float32).sum())(a)


def test_bias_gradient_is_the_row_sum_accumulated_in_float32():
  # 512 rows of 2^-8 on top of a row of 1: a bf16 running sum stalls at 1, float32 gives 3.
  g = jnp.full((2, 257, 3), 2.0 ** -8, BF16).at[0, 0].set(1.0)
  bias = _random((3,), 10)
  y = _random((2, 257, 3), 11)
  np.testing.assert_array_equal(matmul_lib.add_bias(y, bias), y + bias)
  _, pullback = jax.vjp(matmul_lib.add_bias, y, bias)
  dy, dbias = pullback(g)
  assert dbias.dtype == BF16 and dbias.shape == (3,)
  np.testing.assert_array_equal(np.asarray(dbias, np.float32), [3.0, 3.0, 3.0])
  np.testing.assert_array_equal(dy, g)
  dots = hlo_dots.module_dots(jax.jit(pullback).lower(g).compile().as_text())
  assert any("[514,3]" in label for label, _ in dots.values()), dots  # a product, not a reduce
  # A float32 master bias: added in bf16, its gradient returned in float32 unrounded (bf16: 3).
  master = bias.astype(jnp.float32) + 2.0 ** -12  # not a bf16 value
  y_master, pullback = jax.vjp(matmul_lib.add_bias, y, master)
  assert y_master.dtype == BF16
  np.testing.assert_array_equal(y_master, y + master.astype(BF16))
  assert pullback(g)[1].dtype == jnp.float32
  np.testing.assert_array_equal(pullback(g)[1], [1 + 513 * 2.0 ** -8] * 3)
