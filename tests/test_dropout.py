"""The hashed dropout: its keep rate, independence, scaling, gradient and RNG-stream behaviour."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from rsvqa_jax.models.dropout import Dropout, _fmix32, keep_mask


def test_fmix32_matches_murmur3_finalizer_by_hand():
  def reference(h):
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & 0xFFFFFFFF
    return h ^ (h >> 16)

  xs = np.array([0, 1, 2, 0x9E3779B9, 0xFFFFFFFF, 123456789], np.uint32)
  got = np.asarray(_fmix32(jnp.asarray(xs)))
  np.testing.assert_array_equal(got, [reference(int(x)) for x in xs])


@pytest.mark.parametrize("rate", [0.1, 0.5, 0.9])
def test_keep_rate_within_five_sigma(rate):
  n = 1 << 20
  keep = np.asarray(keep_mask(jax.random.key(3), (64, 128, 128), rate))
  sigma = np.sqrt(rate * (1 - rate) / n)
  assert abs(keep.mean() - (1 - rate)) < 5 * sigma


def test_masks_are_uncorrelated_across_keys_and_neighbours():
  a = np.asarray(keep_mask(jax.random.key(0), (256, 4096), 0.5), np.float64) - 0.5
  b = np.asarray(keep_mask(jax.random.key(1), (256, 4096), 0.5), np.float64) - 0.5
  bound = 5 / np.sqrt(a.size)  # correlation of independent fair coins: std 1 / sqrt(n)
  corr = lambda x, y: (x * y).mean() / 0.25
  assert abs(corr(a, b)) < bound
  assert abs(corr(a[:, 1:], a[:, :-1])) < bound  # next element
  assert abs(corr(a[1:], a[:-1])) < bound  # next row
  np.testing.assert_array_equal(a, np.asarray(keep_mask(jax.random.key(0), (256, 4096), 0.5),
                                              np.float64) - 0.5)


def test_layer_scales_kept_values_and_passes_the_mask_as_gradient():
  layer = Dropout(0.25, rngs=nnx.Rngs(dropout=7))
  x = jnp.arange(1.0, 2001.0).reshape(40, 50)
  y = layer(x)
  kept = np.asarray(y) != 0
  np.testing.assert_allclose(np.asarray(y)[kept], np.asarray(x)[kept] / 0.75, rtol=1e-6)
  assert 0.6 < kept.mean() < 0.9
  layer = Dropout(0.25, rngs=nnx.Rngs(dropout=7))  # the same stream again: the same mask
  g = nnx.grad(lambda m, v: m(v).sum(), argnums=1)(layer, x)
  np.testing.assert_allclose(np.asarray(g), kept / 0.75, rtol=1e-6)


def test_deterministic_rate_zero_and_one():
  x = jnp.ones((3, 4))
  assert Dropout(0.5, rngs=nnx.Rngs(0))(x, deterministic=True) is x
  assert Dropout(0.0, rngs=nnx.Rngs(0))(x) is x
  np.testing.assert_array_equal(Dropout(1.0, rngs=nnx.Rngs(0))(x), 0.0)


def test_stream_advances_and_reseed_reproduces():
  layer = Dropout(0.5, rngs=nnx.Rngs(dropout=1))
  x = jnp.ones((64, 64))
  first, second = layer(x), layer(x)
  assert not np.array_equal(first, second)  # each call draws a new key from the stream
  nnx.reseed(layer, dropout=1)
  np.testing.assert_array_equal(layer(x), first)


def test_a_padded_batch_draws_its_real_rows_masks_as_the_unpadded_one():
  """docs/training.md: the padding rows follow the real ones, and a mask is drawn from the
  element's row-major index, so a padded run on one host drops what a one-device run drops."""
  key = jax.random.key(3)
  real = keep_mask(key, (70, 5, 16), 0.3)
  padded = keep_mask(key, (72, 5, 16), 0.3)
  np.testing.assert_array_equal(np.asarray(padded[:70]), np.asarray(real))
