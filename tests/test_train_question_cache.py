"""Training on cached question vectors: once per distinct question, same run, invalidation."""
import json
import os

import numpy as np
import pytest

from rsvqa_jax.errors import RSVQAError
from rsvqa_jax.eval import accuracy
from rsvqa_jax.features import question_cache
from rsvqa_jax.train import inputs, loop, metrics_log
from rsvqa_jax.train import run as run_lib
from test_train_support import tiny_config, tiny_task


@pytest.fixture(scope="module")
def task():
  return tiny_task(n_images=40)


@pytest.fixture
def encoded(monkeypatch):
  """Records every question string the frozen encoder was run on, and its calls."""
  seen = {"calls": 0, "strings": []}
  original = question_cache.question_vectors

  def recording(questions, encoder, tokenize, *args, **kwargs):
    def counting_encoder(batch):
      seen["calls"] += 1
      return encoder(batch)

    def recording_tokenize(strings):
      seen["strings"] += list(strings)
      return tokenize(strings)

    return original(questions, counting_encoder, recording_tokenize, *args, **kwargs)

  monkeypatch.setattr(question_cache, "question_vectors", recording)
  return seen


def _frozen_config(cache_questions):
  c = tiny_config(num_epochs=3, log_every_steps=1, checkpoint_every_steps=7)
  c.text.frozen = True
  c.text.cache_questions = cache_questions
  c.optim.text_lr = 0.0
  c.optim.lr = 1e-2
  return c


def _train_losses(workdir):
  with open(os.path.join(workdir, metrics_log.METRICS_FILE)) as f:
    return [r["loss"] for r in map(json.loads, f) if r["split"] == "train"]


def test_frozen_run_encodes_each_question_once_and_matches_uncached(task, encoded, tmp_path):
  dataset, features = task
  quiet = dict(dataset=dataset, features=features, log=lambda m: None)
  cached_dir = str(tmp_path / "cached")
  cached = loop.train(_frozen_config(True), cached_dir, **quiet)
  distinct = {q for s in dataset.splits.values() for q in s.question.tolist()}
  batch = _frozen_config(True).train.eval_batch_size
  assert encoded["calls"] == -(-len(distinct) // batch)  # one pass over the distinct strings
  assert set(encoded["strings"]) == distinct
  assert cached["state"].frozen == {}  # the encoder is not in the trained state
  table = accuracy.evaluate(cached_dir, "test", dataset=dataset, features=features)
  assert encoded["calls"] == -(-len(distinct) // batch)  # evaluation hit the cache

  plain_dir = str(tmp_path / "plain")
  plain = loop.train(_frozen_config(False), plain_dir, **quiet)
  assert encoded["calls"] == -(-len(distinct) // batch)  # the uncached path has no cache
  losses, reference = _train_losses(cached_dir), _train_losses(plain_dir)
  assert len(losses) == cached["step"] == 21
  np.testing.assert_allclose(losses, reference, rtol=2e-5, atol=1e-6)
  assert losses[-1] < losses[0]
  assert (cached["best_oa"], cached["best_step"]) == (plain["best_oa"], plain["best_step"])
  plain_table = accuracy.evaluate(plain_dir, "test", dataset=dataset, features=features)
  assert table["oa"] == pytest.approx(plain_table["oa"])


def _write_skipthoughts(folder, words, seed, word_dim=8, hidden=16):
  """A tiny uni-skip folder: uni_skip.npz, a plain utable_f32.npy and dictionary.txt."""
  os.makedirs(folder, exist_ok=True)
  rng = np.random.default_rng(seed)
  normal = lambda *shape: (0.3 * rng.standard_normal(shape)).astype(np.float32)
  np.savez(os.path.join(folder, "uni_skip.npz"), encoder_W=normal(word_dim, 2 * hidden),
           encoder_b=normal(2 * hidden), encoder_U=normal(hidden, 2 * hidden),
           encoder_Wx=normal(word_dim, hidden), encoder_bx=normal(hidden),
           encoder_Ux=normal(hidden, hidden))
  vocab = ["UNK"] + sorted(words)
  np.save(os.path.join(folder, "utable_f32.npy"), normal(len(vocab), word_dim))
  with open(os.path.join(folder, "dictionary.txt"), "w") as f:
    f.write("\n".join(vocab) + "\n")


def test_changed_encoder_checkpoint_invalidates_the_cache(task, encoded, tmp_path):
  dataset, features = task
  words = inputs.dataset_words(dataset)
  folder = str(tmp_path / "uni_skip")
  _write_skipthoughts(folder, words, seed=0)
  c = _frozen_config(True)
  c.text.checkpoint = folder
  workdir = str(tmp_path / "w")
  first = run_lib.build(c, workdir, ["val"], dataset=dataset, features=features)
  calls = encoded["calls"]
  assert calls > 0
  again = run_lib.build(c, workdir, ["val"], dataset=dataset, features=features)
  assert encoded["calls"] == calls  # hit
  np.testing.assert_array_equal(again.question_vectors, first.question_vectors)

  _write_skipthoughts(folder, words, seed=1)  # new weights under the same path
  other = run_lib.build(c, str(tmp_path / "w2"), ["val"], dataset=dataset, features=features)
  assert encoded["calls"] > calls  # miss: recomputed with the new weights
  assert not np.allclose(other.question_vectors, first.question_vectors)
  with pytest.raises(RSVQAError, match="trained on question vectors of another frozen language"):
    run_lib.build(c, workdir, ["val"], dataset=dataset, features=features)
