"""models/activations: jax.nn's functions computed in float32, with a one-array backward."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import special

from rsvqa_jax.models import activations

X64 = np.linspace(-9.0, 9.0, 3601)
REFERENCE = {  # float64 values and slopes, from the definitions
    "gelu": (lambda x: 0.5 * x * (1 + special.erf(x / np.sqrt(2))),
             lambda x: 0.5 * (1 + special.erf(x / np.sqrt(2)))
             + x * np.exp(-0.5 * x * x) / np.sqrt(2 * np.pi)),
    "gelu_tanh": (lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3))),
                  None),
    "silu": (lambda x: x * special.expit(x),
             lambda x: special.expit(x) * (1 + x * (1 - special.expit(x)))),
    "tanh": (np.tanh, lambda x: 1 - np.tanh(x) ** 2),
    "sigmoid": (special.expit, lambda x: special.expit(x) * (1 - special.expit(x))),
}
JAX_NN = {"gelu": lambda x: jax.nn.gelu(x, approximate=False),
          "gelu_tanh": lambda x: jax.nn.gelu(x, approximate=True),
          "silu": jax.nn.silu, "tanh": jnp.tanh, "sigmoid": jax.nn.sigmoid,
          "relu": jax.nn.relu}


def _slope(f, x):
  return jax.vmap(jax.grad(lambda v: f(v).astype(jnp.float32)))(x)


@pytest.mark.parametrize("name", sorted(JAX_NN))
def test_float32_values_and_gradients_are_jax_nn_s(name):
  ours, theirs = getattr(activations, name), JAX_NN[name]
  x = jnp.asarray(X64, jnp.float32)
  np.testing.assert_allclose(ours(x), theirs(x), rtol=2e-6, atol=2e-6)
  np.testing.assert_allclose(_slope(ours, x), _slope(theirs, x), rtol=2e-5, atol=5e-6)


@pytest.mark.parametrize("name", sorted(REFERENCE))
def test_against_float64_definitions(name):
  value, slope = REFERENCE[name]
  f = getattr(activations, name)
  x = jnp.asarray(X64, jnp.float32)
  np.testing.assert_allclose(f(x), value(X64), rtol=1e-5, atol=1e-6)
  if slope is not None:
    np.testing.assert_allclose(_slope(f, x), slope(X64), rtol=1e-5, atol=1e-6)
  else:  # the tanh form's slope, against a central difference of its float64 value
    h = 1e-5
    np.testing.assert_allclose(_slope(f, x), (value(X64 + h) - value(X64 - h)) / (2 * h),
                               rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", sorted(REFERENCE))
def test_bfloat16_in_bfloat16_out_within_one_rounding(name):
  """Computed in float32 from the bf16 input, then rounded once: as close as bf16 allows."""
  value, _ = REFERENCE[name]
  x = jnp.asarray(X64, jnp.bfloat16)
  y = getattr(activations, name)(x)
  assert y.dtype == jnp.bfloat16
  exact = value(np.asarray(x, np.float64))
  np.testing.assert_allclose(np.asarray(y, np.float64), exact, rtol=2 ** -8, atol=2e-6)
  g = jax.grad(lambda v: getattr(activations, name)(v).astype(jnp.float32).sum())(x)
  assert g.dtype == jnp.bfloat16


def test_the_backward_pass_keeps_one_array_in_the_input_dtype():
  """The residual of the bf16 GELU is its slope in bf16: no float32 copy, no second erf."""
  x = jnp.ones((4, 8), jnp.bfloat16)
  _, f_vjp = jax.vjp(activations.gelu, x)
  residuals = [a for a in jax.tree.leaves(f_vjp) if hasattr(a, "shape") and a.shape == x.shape]
  assert [r.dtype for r in residuals] == [jnp.bfloat16]
  backward = jax.jit(f_vjp).lower(jnp.ones_like(x)).as_text()
  assert "erf" not in backward and "exp" not in backward
