"""Frozen question-vector cache: one encoding per distinct string, hit / miss / stale / corrupt."""
import os

import numpy as np
import pytest
from flax import nnx

from rsvqa_jax.features import question_cache

QUESTIONS = np.asarray(["Is there a road?", "How many buildings are there?", "Is there a road?",
                        "Is it a rural or an urban area", "How many buildings are there?",
                        "Is there a road?", "Are there more forests than farmlands?"], dtype=object)


def tokenize(batch):
  """Character codes padded to the longest string, with a mask."""
  length = max(len(q) for q in batch)
  tokens = np.zeros((len(batch), length), np.int32)
  for i, q in enumerate(batch):
    tokens[i, :len(q)] = [ord(c) for c in q]
  return {"tokens": tokens, "mask": tokens > 0}


class CountingEncoder:
  """A deterministic stand-in for a frozen language model that records what it saw."""

  def __init__(self, scale=1.0):
    self.scale = scale
    self.calls = 0
    self.seen = []

  def __call__(self, batch):
    self.calls += 1
    tokens, mask = batch["tokens"], batch["mask"]
    self.seen.append(tokens.shape)
    return self.scale * np.stack([mask.sum(1), (tokens * mask).sum(1) / 100.0, tokens[:, 0]], 1)


def _expected(questions, scale=1.0):
  return np.stack([[len(q), sum(map(ord, q)) / 100.0, ord(q[0])] for q in questions]) * scale


def test_vectors_are_per_distinct_question_and_cached(tmp_path):
  enc = CountingEncoder()
  vectors, index = question_cache.question_vectors(QUESTIONS, enc, tokenize, str(tmp_path), "a",
                                                   batch_size=3)
  assert vectors.shape == (4, 3) and vectors.dtype == np.float32
  assert isinstance(vectors, np.memmap) and vectors.mode == "r"
  assert enc.calls == 2  # 4 distinct strings in batches of 3
  assert all(shape[0] == 3 for shape in enc.seen)  # last batch padded to the same size
  np.testing.assert_allclose(vectors[index], _expected(QUESTIONS), rtol=1e-6)
  assert len(set(index.tolist())) == 4 and index[0] == index[2] == index[5]
  again, index2 = question_cache.question_vectors(QUESTIONS, enc, tokenize, str(tmp_path), "a",
                                                  batch_size=3)
  assert enc.calls == 2  # hit
  np.testing.assert_array_equal(index2, index)
  np.testing.assert_array_equal(again, vectors)


def test_other_encoder_or_questions_is_a_miss(tmp_path):
  enc = CountingEncoder()
  question_cache.question_vectors(QUESTIONS, enc, tokenize, str(tmp_path), "a")
  other = CountingEncoder(scale=2.0)
  vectors, index = question_cache.question_vectors(QUESTIONS, other, tokenize, str(tmp_path), "b")
  assert other.calls == 1
  np.testing.assert_allclose(vectors[index], _expected(QUESTIONS, 2.0), rtol=1e-6)
  fewer = QUESTIONS[:2]
  vectors, index = question_cache.question_vectors(fewer, enc, tokenize, str(tmp_path), "a")
  assert enc.calls == 2 and vectors.shape == (2, 3)
  np.testing.assert_allclose(vectors[index], _expected(fewer), rtol=1e-6)


def test_encoder_identity_follows_params_and_tokenizer(tmp_path):
  vocab = tmp_path / "vocab.txt"
  vocab.write_text("[PAD]\nroad\n")
  model = nnx.Embed(10, 4, rngs=nnx.Rngs(0))
  base = question_cache.encoder_identity(nnx.state(model), [str(vocab)], family="toy", max_len=8)
  same = question_cache.encoder_identity(nnx.state(nnx.Embed(10, 4, rngs=nnx.Rngs(0))),
                                         [str(vocab)], family="toy", max_len=8)
  assert base == same
  model.embedding[...] = model.embedding[...] + 1e-3
  assert question_cache.encoder_identity(nnx.state(model), [str(vocab)], family="toy",
                                         max_len=8) != base
  vocab.write_text("[PAD]\nroads\n")
  assert question_cache.encoder_identity(nnx.state(nnx.Embed(10, 4, rngs=nnx.Rngs(0))),
                                         [str(vocab)], family="toy", max_len=8) != base
  assert question_cache.encoder_identity(nnx.state(nnx.Embed(10, 4, rngs=nnx.Rngs(0))),
                                         [str(tmp_path / "vocab.txt")], family="toy",
                                         max_len=9) != base


@pytest.mark.parametrize("damage", ["flip_bytes", "truncate", "no_manifest"])
def test_corrupted_entry_is_recomputed(tmp_path, damage):
  enc = CountingEncoder()
  vectors, _ = question_cache.question_vectors(QUESTIONS, enc, tokenize, str(tmp_path), "a")
  expected = np.array(vectors)
  (entry,) = [d for d in os.listdir(tmp_path) if d.startswith("questions_")]
  path = os.path.join(tmp_path, entry, "vectors.npy")
  del vectors
  if damage == "flip_bytes":
    with open(path, "r+b") as f:
      f.seek(-4, os.SEEK_END)
      f.write(b"\x7f\x7f\x7f\x7f")
  elif damage == "truncate":
    os.truncate(path, os.path.getsize(path) - 4)
  else:
    os.remove(os.path.join(tmp_path, entry, "manifest.json"))
  vectors, _ = question_cache.question_vectors(QUESTIONS, enc, tokenize, str(tmp_path), "a")
  assert enc.calls == 2
  np.testing.assert_array_equal(vectors, expected)


def test_interrupted_encoding_leaves_no_entry(tmp_path):
  def failing(batch):
    raise KeyboardInterrupt

  with pytest.raises(KeyboardInterrupt):
    question_cache.question_vectors(QUESTIONS, failing, tokenize, str(tmp_path), "a")
  assert [n for n in os.listdir(tmp_path) if not n.endswith(".lock")] == []  # the lock stays
