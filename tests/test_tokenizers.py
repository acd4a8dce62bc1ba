"""Tests for question tokenizers and length bucketing."""
import numpy as np
import pytest

from rsvqa_jax.data import tokenizers
from rsvqa_jax.errors import RSVQAError


def test_split_words_and_word_list():
  assert tokenizers.split_words("Is there a Road in the image?") == [
      "is", "there", "a", "road", "in", "the", "image", "?"]
  assert tokenizers.split_words("Is A", lowercase=False) == ["Is", "A"]
  assert tokenizers.word_list(["How many roads?", "Is there a road?"]) == [
      "?", "a", "how", "is", "many", "road", "roads", "there"]


@pytest.mark.parametrize("n,expected", [(0, 8), (1, 8), (8, 8), (9, 16), (24, 24), (25, 32),
                                        (128, 128), (129, 256), (300, 384)])
def test_bucket_length(n, expected):
  assert tokenizers.bucket_length(n) == expected


def test_bucket_length_custom_buckets():
  assert tokenizers.bucket_length(5, buckets=(4, 6)) == 6
  assert tokenizers.bucket_length(7, buckets=(4, 6)) == 12


def test_pad_batch():
  tokens, mask = tokenizers.pad_batch([[5, 6, 7], [9]], pad_id=1, buckets=(2, 4))
  np.testing.assert_array_equal(tokens, [[5, 6, 7, 1], [9, 1, 1, 1]])
  np.testing.assert_array_equal(mask, [[1, 1, 1, 0], [1, 0, 0, 0]])
  assert tokens.dtype == np.int32 and mask.dtype == np.int32
  tokens, _ = tokenizers.pad_batch([[5]], pad_id=0, length=3)
  assert tokens.shape == (1, 3)
  with pytest.raises(RSVQAError, match="fixed length 2"):
    tokenizers.pad_batch([[1, 2, 3]], pad_id=0, length=2)


def test_word_tokenizer_unknown_words():
  dictionary = {"UNK": 0, "is": 1, "there": 2, "a": 3, "road": 4, "?": 5}
  words = tokenizers.word_list(["Is there a road?", "Is there a zebra?"])
  tok = tokenizers.WordTokenizer.build(words, dictionary)
  assert tok.vocab == ["<pad>", "UNK", "?", "a", "is", "road", "there"]
  assert tok.unknown_words == ["zebra"]
  assert tok.encode("Is there a zebra?") == [4, 6, 3, 1, 2]
  assert tok.encode("a zebra and a lion").count(tok.unk_id) == 3
  assert tok.only_unknown(tok.encode("zebra lion?")) and tok.only_unknown([])
  assert not tok.only_unknown(tok.encode("a zebra?"))
  tokens, mask = tok(["Is there a road?", "road"])
  np.testing.assert_array_equal(tokens, [[4, 6, 3, 5, 2, 0, 0, 0], [5, 0, 0, 0, 0, 0, 0, 0]])
  np.testing.assert_array_equal(mask.sum(1), [5, 1])


def test_word_tokenizer_without_dictionary_keeps_all_words():
  tok = tokenizers.WordTokenizer.build(["b", "a", "a"])
  assert tok.vocab == ["<pad>", "UNK", "a", "b"]
  assert tok.unknown_words == []
  assert tok.encode("c b") == [1, 3]


def test_word_tokenizer_strips_question_marks_as_the_original_code():
  words = tokenizers.word_list(["Is there a road?", "How many roads?"])
  tok = tokenizers.WordTokenizer.build(words, strip_question_mark=True)
  assert "?" not in tok.vocab and tok.strip_question_mark
  assert tok.encode("Is there a road?") == tok.encode("Is there a road")
  assert tok.unk_id not in tok.encode("Is there a road?")
  kept = tokenizers.WordTokenizer.build(words)
  assert len(kept.encode("Is there a road?")) == 5 and kept.vocab != tok.vocab


def test_hf_tokenizer_from_folder(tmp_path):
  transformers = pytest.importorskip("transformers")
  words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "is", "there", "a", "road", "?"]
  transformers.BertTokenizer(vocab={w: i for i, w in enumerate(words)}).save_pretrained(tmp_path)
  tok = tokenizers.HFTokenizer.from_folder(str(tmp_path), max_length=6)
  assert tok.pad_id == 0
  assert tok.encode("Is there a road?") == [2, 5, 6, 7, 8, 3]  # "?" cut, [SEP] kept
  tokens, mask = tok(["Is there a road?", "road"], buckets=(4, 8))
  np.testing.assert_array_equal(tokens, [[2, 5, 6, 7, 8, 3, 0, 0], [2, 8, 3, 0, 0, 0, 0, 0]])
  np.testing.assert_array_equal(mask.sum(1), [6, 3])
  assert tok.only_unknown(tok.encode("zebra lion?"))  # [CLS] [UNK] [UNK] ? [SEP]
  assert not tok.only_unknown(tok.encode("zebra road"))


def test_hf_tokenizer_missing_folder(tmp_path):
  with pytest.raises(RSVQAError, match="does not exist"):
    tokenizers.HFTokenizer.from_folder(str(tmp_path / "nope"))


@pytest.mark.parametrize("files", [
    {"vocab.txt": "[PAD]\n[UNK]\ncaf\xe9\n".encode("latin-1"),  # WordPiece reads UTF-8 only
     "config.json": b'{"model_type": "bert"}'},
    {"vocab.json": b"{nope", "merges.txt": b"#version: 0.2\n",
     "tokenizer_config.json": b'{"tokenizer_class": "RobertaTokenizer"}'},
    {"vocab.json": b'{"a": 0}', "merges.txt": b"abc\n",
     "tokenizer_config.json": b'{"tokenizer_class": "RobertaTokenizer"}'}])
def test_hf_tokenizer_damaged_vocabulary_files(tmp_path, files):
  """The Rust tokenizers library raises a bare Exception for these: still one RSVQAError line."""
  pytest.importorskip("transformers")
  for name, data in files.items():
    (tmp_path / name).write_bytes(data)
  with pytest.raises(RSVQAError, match=f"^{tmp_path}: cannot load a tokenizer "):
    tokenizers.HFTokenizer.from_folder(str(tmp_path))
