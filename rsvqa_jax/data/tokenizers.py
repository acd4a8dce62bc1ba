"""Question tokenizers and length bucketing.

Two tokenizers share one batch interface, so the input pipeline does not care which encoder it
feeds: `WordTokenizer` (Skip-thoughts: dataset words mapped to ids, words outside the dictionary
to UNK; `strip_question_mark` drops "?" as the original RSVQA code does) and `HFTokenizer` (BERT
family: a Hugging Face tokenizer read from a local folder).
Calling either on a list of questions returns int32 `tokens` and `mask` arrays padded to a bucket
length, so jit compiles a handful of shapes instead of one per question length.
"""
import os
import re

import numpy as np

from rsvqa_jax import errors
from rsvqa_jax.errors import RSVQAError

DEFAULT_BUCKETS = (8, 16, 24, 32, 48, 64, 96, 128)
PAD = "<pad>"
UNK = "UNK"
QUESTION_MARK = "?"

_WORD_RE = re.compile(r"\w+|[^\w\s]")


def split_words(text, *, lowercase=True):
  """Words and punctuation marks of `text`: "Is there a road?" -> [is, there, a, road, ?]."""
  return _WORD_RE.findall(text.lower() if lowercase else text)


def word_list(texts):
  """Sorted distinct words of an iterable of questions."""
  words = set()
  for text in texts:
    words.update(split_words(text))
  return sorted(words)


def _is_word(token):
  """Whether a vocabulary entry holds a letter or digit (not punctuation alone)."""
  return any(c.isalnum() for c in token)


def bucket_length(n, buckets=DEFAULT_BUCKETS):
  """Smallest bucket >= n; beyond the last bucket, the next multiple of the last bucket."""
  for b in buckets:
    if n <= b:
      return b
  last = buckets[-1]
  return -(-n // last) * last


def pad_batch(seqs, pad_id, *, buckets=DEFAULT_BUCKETS, length=None):
  """Right-pads id sequences to `length` (default: the bucket of the longest one).

  Returns:
    (tokens, mask), both int32 [len(seqs), length]; mask is 1 on real tokens.
  """
  longest = max((len(s) for s in seqs), default=0)
  if length is None:
    length = bucket_length(longest, buckets)
  elif longest > length:
    raise RSVQAError(f"a question has {longest} tokens, more than the fixed length {length}")
  tokens = np.full((len(seqs), length), pad_id, np.int32)
  mask = np.zeros((len(seqs), length), np.int32)
  for i, s in enumerate(seqs):
    tokens[i, :len(s)] = s
    mask[i, :len(s)] = 1
  return tokens, mask


class WordTokenizer:
  """Word-level tokenizer over a fixed vocabulary: id 0 is padding, id 1 is UNK.

  Attributes:
    vocab: the words, index = id.
    unknown_words: dataset words left out of the vocabulary because the dictionary lacks them.
    strip_question_mark: "?" is dropped from questions and left out of the vocabulary (so a
      vocabulary hash tells the two tokenisations apart).
  """

  pad_id = 0
  unk_id = 1

  def __init__(self, vocab, *, unknown_words=(), lowercase=True, strip_question_mark=False):
    vocab = list(vocab)
    if vocab[:2] != [PAD, UNK]:
      raise ValueError(f"vocabulary must start with {PAD!r}, {UNK!r}, got {vocab[:2]}")
    self.vocab = vocab
    self.unknown_words = list(unknown_words)
    self.lowercase = lowercase
    self.strip_question_mark = strip_question_mark
    self._ids = {w: i for i, w in enumerate(vocab)}

  @classmethod
  def build(cls, words, dictionary=None, *, lowercase=True, strip_question_mark=False):
    """Vocabulary of the dataset words found in `dictionary` (all of them when it is None)."""
    words = sorted(set(words) - {PAD, UNK} - ({QUESTION_MARK} if strip_question_mark else set()))
    known = [w for w in words if dictionary is None or w in dictionary]
    unknown = [] if dictionary is None else [w for w in words if w not in dictionary]
    return cls([PAD, UNK] + known, unknown_words=unknown, lowercase=lowercase,
               strip_question_mark=strip_question_mark)

  @property
  def vocab_size(self):
    return len(self.vocab)

  def encode(self, text):
    """Ids of the words of one question, UNK for words outside the vocabulary."""
    words = split_words(text, lowercase=self.lowercase)
    if self.strip_question_mark:
      words = [w for w in words if w != QUESTION_MARK]
    return [self._ids.get(w, self.unk_id) for w in words]

  def only_unknown(self, ids):
    """True when `ids` (one question's encode) hold no known word (punctuation aside)."""
    return not any(i != self.unk_id and _is_word(self.vocab[i]) for i in ids)

  def words_read_as_unknown(self, text):
    """The words of `text`, as encode splits them, that it reads as UNK (each occurrence)."""
    return [w for w in split_words(text, lowercase=self.lowercase)
            if self._ids.get(w, self.unk_id) == self.unk_id
            and not (self.strip_question_mark and w == QUESTION_MARK)]

  def __call__(self, texts, *, buckets=DEFAULT_BUCKETS, length=None):
    return pad_batch([self.encode(t) for t in texts], self.pad_id, buckets=buckets, length=length)


VOCABULARY_FILES = ("vocab.txt", "tokenizer.json", "vocab.json")  # WordPiece, fast, BPE


def hf_transformers():
  """transformers, imported here alone (it is slow to import and only its tokenizers are read)
  and without its advice that PyTorch is missing: the models are ours, and the line
  ("Models won't be available") read as a failure in the middle of a first study."""
  name, before = "TRANSFORMERS_NO_ADVISORY_WARNINGS", os.environ.get(
      "TRANSFORMERS_NO_ADVISORY_WARNINGS")
  os.environ[name] = "1"  # read when the advice is given, at the first import
  try:
    import transformers  # pylint: disable=g-import-not-at-top
  finally:
    if before is None:
      os.environ.pop(name, None)
    else:
      os.environ[name] = before
  return transformers


class HFTokenizer:
  """A Hugging Face tokenizer from a local folder, with special tokens and bucketed padding."""

  def __init__(self, hf_tokenizer, max_length):
    self.hf = hf_tokenizer
    self.max_length = max_length
    if hf_tokenizer.pad_token_id is None:
      raise RSVQAError(f"tokenizer {hf_tokenizer.name_or_path}: no pad token defined")
    self.pad_id = hf_tokenizer.pad_token_id

  @classmethod
  def from_folder(cls, folder, *, max_length=512):
    """Loads the tokenizer files of `folder` (never downloads)."""
    auto_tokenizer = hf_transformers().AutoTokenizer
    if not os.path.isdir(folder):
      raise RSVQAError(f"{folder}: tokenizer folder {errors.not_a_folder(folder)}")
    if not any(os.path.isfile(os.path.join(folder, f)) for f in VOCABULARY_FILES):
      # transformers would build a tokenizer of its 5 special tokens: every word unknown
      raise RSVQAError(f"{folder}: no tokenizer vocabulary ({', '.join(VOCABULARY_FILES)})")
    try:
      hf = auto_tokenizer.from_pretrained(folder, local_files_only=True)
    except Exception as e:  # pylint: disable=broad-except  (the Rust `tokenizers` raises a bare
      # Exception for a damaged vocab.txt / vocab.json / merges.txt / tokenizer.json)
      reason = next((l.strip() for l in str(e).splitlines() if l.strip()), type(e).__name__)
      raise RSVQAError(f"{folder}: cannot load a tokenizer ({reason})") from e
    return cls(hf, max_length)

  @property
  def vocab_size(self):
    return len(self.hf)

  def encode(self, text):
    """Ids of one question with the model's special tokens, truncated to max_length."""
    return self.hf(text, truncation=True, max_length=self.max_length)["input_ids"]

  def only_unknown(self, ids):
    """True when `ids` (one question's encode) hold no known word (special tokens and
    punctuation aside)."""
    special = set(self.hf.all_special_ids) | {self.hf.unk_token_id}
    return not any(i not in special and _is_word(t)
                   for i, t in zip(ids, self.hf.convert_ids_to_tokens(ids)))

  def words_read_as_unknown(self, text):
    """The words of `text` whose tokens hold the unknown token, each encoded alone (none for a
    byte-level BPE, which has no unknown token)."""
    unk = self.hf.unk_token_id
    if unk is None:
      return []
    return [w for w in split_words(text, lowercase=False) if unk in self.encode(w)]

  def __call__(self, texts, *, buckets=DEFAULT_BUCKETS, length=None):
    ids = self.hf(list(texts), truncation=True, max_length=self.max_length)["input_ids"]
    return pad_batch(ids, self.pad_id, buckets=buckets, length=length)
