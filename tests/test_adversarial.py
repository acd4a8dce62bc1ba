"""Adversarial evaluator: substitutions are valid and the vectorized pass equals K plain passes."""
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from rsvqa_jax.bias import adversarial
from rsvqa_jax.models.vqa import RSVQAModel, VQAHead, head_config


def _model():
  cfg = head_config()
  cfg.update(dict(hidden_dim=16, classifier_dim=8, fusion="mutan", mutan_rank=2, mutan_dim=8))
  return RSVQAModel(VQAHead(cfg, q_dim=6, v_dim=5, num_answers=7, rngs=nnx.Rngs(3)))


def test_random_never_picks_own_image_and_covers_pool():
  rows = np.repeat(np.arange(10), 20)
  sub = adversarial.substitution_rows("random", rows, repeats=5, seed=0)
  assert sub.shape == (5, 200)
  assert not np.any(sub == rows[None])
  assert set(np.unique(sub)) == set(range(10))


def test_random_needs_two_images():
  with pytest.raises(ValueError, match="two distinct"):
    adversarial.substitution_rows("random", np.zeros(4, int), repeats=1, seed=0)


def test_shuffle_permutes_within_batches():
  rows = np.arange(10)
  sub = adversarial.substitution_rows("shuffle", rows, repeats=3, seed=1, batch_size=4)
  for k in range(3):
    for s in range(0, 10, 4):
      assert sorted(sub[k, s:s + 4]) == list(rows[s:s + 4])


def test_pixel_kinds_keep_rows():
  rows = np.array([3, 1, 2])
  np.testing.assert_array_equal(
      adversarial.substitution_rows("white", rows, repeats=2, seed=0), [rows, rows])


def test_vectorized_equals_separate_evaluations():
  model = _model()
  rng = np.random.default_rng(0)
  n, k = 23, 4
  q = rng.normal(size=(n, 6)).astype(np.float32)
  feats = rng.normal(size=(9, 5)).astype(np.float32)
  rows = rng.integers(0, 9, size=n)
  sub = adversarial.substitution_rows("random", rows, repeats=k, seed=2)
  res = adversarial.evaluate_substituted(model, {"question_vector": q}, feats, sub, batch_size=8)
  for i in range(k):
    logits = model({"question_vector": jnp.asarray(q), "image_features": jnp.asarray(feats[sub[i]])})
    np.testing.assert_array_equal(res.predictions[i], np.asarray(logits.argmax(-1)))


def test_accuracy_over_repeats_by_hand():
  preds = np.array([[0, 1, 1, 0], [0, 0, 1, 1]])
  answers = np.array([0, 1, 1, 1])
  types = np.array(["a", "a", "b", "b"])
  acc = adversarial.accuracy_over_repeats(preds, answers, types)
  assert acc["a"] == pytest.approx((0.75, 0.25))
  assert acc["b"] == pytest.approx((0.75, 0.25))
  assert acc["OA"] == pytest.approx((0.75, 0.0))
  assert acc["AA"] == pytest.approx((0.75, 0.0))
