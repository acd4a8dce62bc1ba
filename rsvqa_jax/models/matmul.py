"""Matmuls that reach a CPU's bfloat16 units: bf16 operands, float32 accumulation.

XLA:CPU computes a bf16 x bf16 -> bf16 product no faster than float32 (2048^3 on the 2-core
AMD EPYC with AVX512-BF16: about 75 GFLOP/s against 90 in float32), but the same product
accumulated into float32 (`preferred_element_type`) goes to the bf16 dot-product units: about
150-190 GFLOP/s there, 1011 against 150 in float32 on an Intel Xeon with AMX
(benchmarks/bf16_cpu.py). Differentiating such a product would transpose it into a float32 x
bf16 product, which XLA computes in float32, so the backward pass is written out here as the
same kind of product (and a left operand contracted over a major axis is transposed in memory
first, which XLA:CPU also needs to keep a product in bf16; a weight gradient puts the operand
cheaper to transpose on the left). The result is rounded to the
operands' dtype, as a bf16 layer's output is, or kept in float32 where the caller asks
(attention scores, which go to a float32 softmax). A layer's bias gradient (`add_bias`) is
likewise a bf16 product with a ones vector, accumulated in float32.

A layer's weights may come as float32 master copies (`matmul`, `add_bias`): they are cast to bf16
inside the product, and their gradients leave the float32 accumulator as they are. Cast before
the layer instead, each weight gradient was rounded to bf16 (the dtype of the cast's output) and
converted back to float32: two passes over every weight gradient and a gradient rounded to bf16.

On accelerators the plain bf16 product already accumulates in float32 inside the matrix units,
and float32 operands are not low precision: both take the plain jnp path, unchanged.
"""
import functools
import math

import jax
import jax.numpy as jnp

_LETTERS = "abcdefghijklmnopqrstuvwxyz"


def accumulates_in_float32(dtype):
  """Whether products of two `dtype` operands take the float32-accumulating path here."""
  return jnp.dtype(dtype) == jnp.bfloat16 and jax.default_backend() == "cpu"


def einsum(spec, a, b, out_dtype=None):
  """jnp.einsum(spec, a, b) of two operands, in `out_dtype` (default: the operands' dtype);
  bf16 operands on a CPU accumulate in float32.

  spec: explicit ("ab,bc->ac"), no ellipsis, every index of an operand also in the other
  operand or the output (true of every contraction in the models).
  """
  if a.dtype == b.dtype and accumulates_in_float32(a.dtype):
    return _accumulating_einsum(spec, out_dtype or a.dtype, a, b)
  y = jnp.einsum(spec, a, b)
  return y if out_dtype is None else y.astype(out_dtype)


def _accumulates(weight, dtype):
  """Whether `weight` takes the accumulating path for inputs of `dtype`: in that dtype, or a
  float32 master copy of a bf16 layer."""
  return accumulates_in_float32(dtype) and weight.dtype in (jnp.dtype(dtype), jnp.float32)


def matmul(a, b):
  """a [..., k] @ b [k, n] -> [..., n] in a's dtype, through `einsum`.

  b is a weight in a's dtype or a float32 master copy, cast to a's dtype in the product; its
  gradient comes back in b's dtype.
  """
  if not _accumulates(b, a.dtype):
    return a @ b.astype(a.dtype)
  lead = _LETTERS[:a.ndim - 1]
  return _accumulating_einsum(f"{lead}y,yz->{lead}z", a.dtype, a, b)


def add_bias(y, bias):
  """y [..., n] + bias [n] in y's dtype (bias: y's dtype or a float32 master copy); for bf16 on
  a CPU, the bias gradient is a ones-vector product.

  The gradient of a broadcast add is a sum over the rows. In bf16, XLA:CPU converts the rows
  to float32 in a pass of their own and sums them as a tree of reduce-window ops (its
  reductions are pairwise for accuracy); the product below reads the bf16 rows once in the dot
  library, accumulating in float32. Fine-tuned DistilBERT bf16 step: about 7% faster.
  """
  if not _accumulates(bias, y.dtype):
    return y + bias.astype(y.dtype)
  return y + _rows(bias, y.shape, y.dtype)


@functools.partial(jax.custom_vjp, nondiff_argnums=(1, 2))
def _rows(bias, shape, dtype):
  return jnp.broadcast_to(bias.astype(dtype), shape)


def _rows_forward(bias, shape, dtype):
  return _rows(bias, shape, dtype), dtype_token(bias)


def _rows_backward(shape, dtype, bias_dtype, g):
  del shape, dtype
  rows = g.reshape(-1, g.shape[-1])
  ones = jnp.ones(rows.shape[:1], rows.dtype)
  total = jnp.einsum("m,mn->n", ones, rows, preferred_element_type=jnp.float32)
  return (total.astype(bias_dtype.dtype),)


def dtype_token(x):
  """An empty array of x's dtype: a residual that tells a backward rule the dtype to return."""
  return jnp.zeros((0,), x.dtype)


_rows.defvjp(_rows_forward, _rows_backward)


@functools.partial(jax.custom_vjp, nondiff_argnums=(0, 1))
def _accumulating_einsum(spec, out_dtype, a, b):
  b = b.astype(a.dtype)  # a float32 master weight (matmul)
  spec, a = _contracted_minor(spec, a)
  inputs, out = spec.split("->")
  spec_a, spec_b = inputs.split(",")
  # The product's own order: batch, then a's free indices, then b's. Asked for another order,
  # XLA may swap the operands to produce it, putting a's contracted major axis on the left again.
  natural = "".join([i for i in spec_a if i in spec_b and i in out] +
                    [i for i in spec_a if i not in spec_b] + [i for i in spec_b if i not in spec_a])
  y = jnp.einsum(f"{spec_a},{spec_b}->{natural}", a, b, preferred_element_type=jnp.float32)
  return jnp.transpose(y.astype(out_dtype), [natural.index(i) for i in out])


def _contracted_minor(spec, a):
  """(spec, a) with a's contracted indices moved last in memory.

  XLA:CPU computes a bf16 product whose left operand is contracted over a major axis (x.T @ g,
  the weight gradient of a layer) in float32. A plain transpose would be folded back into the
  product's dimension numbers, so the transposed copy is materialised behind a barrier.
  """
  inputs, out = spec.split("->")
  spec_a, spec_b = inputs.split(",")
  contracted = "".join(i for i in spec_a if i in spec_b and i not in out)
  if not contracted or spec_a.endswith(contracted):
    return spec, a
  order = "".join(i for i in spec_a if i not in contracted) + contracted
  moved = jnp.transpose(a, [spec_a.index(i) for i in order])
  moved = jax.lax.optimization_barrier(moved.reshape(-1)).reshape(moved.shape)
  return f"{order},{spec_b}->{out}", moved


def _operand_specs(spec):
  inputs, out = spec.split("->")
  spec_a, spec_b = inputs.split(",")
  for own, other in ((spec_a, spec_b), (spec_b, spec_a)):
    if "." in spec or not set(own) <= set(other) | set(out):
      raise ValueError(f"einsum {spec!r}: no transpose as one product")
  return spec_a, spec_b, out


def _forward(spec, out_dtype, a, b):
  _operand_specs(spec)
  return _accumulating_einsum(spec, out_dtype, a, b), (a, b.astype(a.dtype), dtype_token(b))


def _backward(spec, out_dtype, residuals, g):
  del out_dtype
  a, b, b_dtype = residuals
  spec_a, spec_b, out = _operand_specs(spec)
  g = g.astype(a.dtype)
  return (_accumulating_einsum(f"{out},{spec_b}->{spec_a}", a.dtype, g, b),
          _right_gradient(spec_a, out, spec_b, a, g, b_dtype.dtype))


# The weight of the float32 result's elements against the operands' in output_gradient_first:
# empirical. Timed alone, a materialised float32 transpose costs about twice a bf16 one per
# element, yet DistilBERT's second FFN layer is 1.5x faster with dy first, where the result's
# transpose stays in the product's program (benchmarks/results/weight_gradients).
BF16_TRANSPOSE_COST = 4


def output_gradient_first(spec_a, spec_g, spec_b, a, g, dtype):
  """Whether _right_gradient puts the output gradient g on the left: a float32 result without
  batch indices, g's contracted axes major (it needs a transpose too), and g plus the result
  (at its cheaper rate) fewer elements to transpose than a."""
  contracted = "".join(i for i in spec_g if i in spec_a)
  if dtype != jnp.float32 or spec_g.endswith(contracted) or set(spec_a) & set(spec_g) & set(spec_b):
    return False
  result = math.prod(a.shape[spec_a.index(i)] if i in spec_a else g.shape[spec_g.index(i)]
                     for i in spec_b)
  return g.size + result // BF16_TRANSPOSE_COST < a.size


def _right_gradient(spec_a, spec_g, spec_b, a, g, dtype):
  """einsum(f"{spec_a},{spec_g}->{spec_b}", a, g) in `dtype`: the gradient of a product's
  right operand (a layer's weight: x.T @ dy).

  Both operands are contracted over their major axes (the batch's rows), so XLA:CPU needs the
  left one transposed in memory first (_contracted_minor). For a float32 weight gradient
  without batch indices, the output gradient goes on the left instead when it is the smaller
  operand by enough, and the float32 product is transposed after: DistilBERT's second FFN
  layer transposes its [2240, 768] output gradient and a [3072, 768] float32 result instead of
  its [2240, 3072] input: the whole weight gradient 1.5x faster on the AMD EPYC, the same
  result (benchmarks/results/weight_gradients).
  """
  if not output_gradient_first(spec_a, spec_g, spec_b, a, g, dtype):
    return _accumulating_einsum(f"{spec_a},{spec_g}->{spec_b}", dtype, a, g)
  contracted = [i for i in spec_a if i in spec_g]
  natural = "".join(i for i in spec_g if i not in contracted) + "".join(
      i for i in spec_a if i not in contracted)
  y = _accumulating_einsum(f"{spec_g},{spec_a}->{natural}", dtype, g, a)
  # Without the barrier, XLA folds the transpose into the product's output layout, which its
  # bf16 dot library does not take (the product fails in XLA:CPU's fallback dot).
  return jnp.transpose(jax.lax.optimization_barrier(y), [natural.index(i) for i in spec_b])


_accumulating_einsum.defvjp(_forward, _backward)
