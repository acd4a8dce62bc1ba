"""Tests for building Skip-thoughts from the uni-skip files: shapes only, every array loaded."""
import jax
import numpy as np
import pytest
from flax import nnx

from rsvqa_jax.data import tokenizers
from rsvqa_jax.errors import RSVQAError
from rsvqa_jax.models import checkpoints, skipthoughts_params
from rsvqa_jax.models.skipthoughts import SkipThoughts
from rsvqa_jax.train import model_builder

D, H = 4, 3
DICTIONARY = ["<eos>", "UNK", "is", "there", "a", "road", "how", "many", "buildings", "are"]
QUESTIONS = ["Is there a road?", "How many buildings are there?", "road"]



@pytest.fixture(name="folder")
def fixture_folder(tmp_path):
  rng = np.random.default_rng(0)
  f = lambda *shape: (rng.standard_normal(shape) * 0.5).astype(np.float32)
  np.savez(tmp_path / "uni_skip.npz", encoder_W=f(D, 2 * H), encoder_b=f(2 * H),
           encoder_U=f(H, 2 * H), encoder_Wx=f(D, H), encoder_bx=f(H), encoder_Ux=f(H, H))
  (tmp_path / "dictionary.txt").write_text("\n".join(DICTIONARY) + "\n")
  np.save(tmp_path / "utable.npy", f(len(DICTIONARY), D))
  return tmp_path


def _load(folder, **kwargs):
  """(model, tokenizer, dataset words missing from the dictionary), as training builds them."""
  model, tok = model_builder.pretrained_skipthoughts(folder, tokenizers.word_list(QUESTIONS),
                                                     **kwargs)
  return model, tok, len(tok.unknown_words)


@pytest.mark.parametrize("bayesian", [True, False])
def test_dropout_after_loading_matches_a_fresh_build(folder, bayesian):
  model, tok, _ = _load(folder, bayesian=bayesian, dropout=0.5, rngs=nnx.Rngs(0, dropout=3))
  leaves = [v.get_value() for _, v in nnx.to_flat_state(nnx.state(model))]
  assert leaves and not any(isinstance(x, jax.ShapeDtypeStruct) for x in leaves)
  # The same weights in a model constructed with the same dropout seed: the masks agree.
  built = checkpoints.jit_init(lambda p, d: SkipThoughts(
      tok.vocab_size, word_dim=D, hidden_dim=H, dropout=0.5, bayesian=bayesian,
      rngs=nnx.Rngs(params=p, dropout=d)), 5, 3)
  checkpoints.load_into(built, checkpoints.state_tree(model), "loaded")
  train = nnx.jit(lambda m, t, k: m(t, k, deterministic=False))
  tokens, mask = tok(QUESTIONS)
  clean = np.asarray(model(tokens, mask))
  outs = []
  for _ in range(2):  # fresh masks at each call, the same in both models
    outs.append(np.asarray(train(model, tokens, mask)))
    np.testing.assert_array_equal(outs[-1], train(built, tokens, mask))
    assert not np.allclose(outs[-1], clean)
  assert not np.allclose(outs[0], outs[1])


def test_every_parameter_comes_from_the_files(folder):
  model, tok, _ = _load(folder)
  with np.load(folder / "uni_skip.npz") as npz:
    for ours, theirs in skipthoughts_params.ENCODER_KEYS.items():
      np.testing.assert_array_equal(getattr(model, ours)[...], npz[theirs])
  table = np.load(folder / "utable.npy")
  embedding = np.asarray(model.embed.embedding[...])
  np.testing.assert_array_equal(embedding[tok.pad_id], 0)
  for word in ("road", "buildings"):
    np.testing.assert_array_equal(embedding[tok.vocab.index(word)], table[DICTIONARY.index(word)])
  assert set(checkpoints.flatten(checkpoints.state_tree(model))) == {
      "W", "U", "b", "Wx", "Ux", "bx", "embed.embedding"}


def test_non_finite_arrays_are_refused_naming_the_file_and_key(folder):
  """A NaN in uni_skip.npz is named by its key there; one in a word's utable row by the table."""
  with np.load(folder / "uni_skip.npz") as npz:
    arrays = dict(npz)
  good = {k: v.copy() for k, v in arrays.items()}
  arrays["encoder_Ux"][0, 0] = np.inf
  np.savez(folder / "uni_skip.npz", **arrays)
  with pytest.raises(RSVQAError, match=r"uni_skip\.npz: key 'encoder_Ux': 1 of 9 values are not "
                                       r"finite \(NaN or inf\)"):
    _load(folder)
  np.savez(folder / "uni_skip.npz", **good)
  table = np.load(folder / "utable.npy")
  table[DICTIONARY.index("road"), 2] = np.nan
  np.save(folder / "utable.npy", table)
  with pytest.raises(RSVQAError, match=r"utable\.npy: the rows of the vocabulary's words: 1 of "):
    _load(folder)
  table[DICTIONARY.index("road"), 2] = 0.0
  table[DICTIONARY.index("<eos>")] = np.nan  # a row no word of the vocabulary reads
  np.save(folder / "utable.npy", table)
  _load(folder)


def test_damaged_uni_skip_arrays_are_one_line_errors(folder):
  with np.load(folder / "uni_skip.npz") as npz:
    arrays = dict(npz)
  raw = (folder / "uni_skip.npz").read_bytes()
  (folder / "uni_skip.npz").write_bytes(raw[:len(raw) // 2])
  with pytest.raises(RSVQAError, match=r"uni_skip\.npz: not a readable \.npz of plain arrays"):
    _load(folder)
  for value, message in ((np.float32(1), r"key encoder_W has shape \(\), expected a matrix"),
                         (arrays["encoder_W"].astype(np.int32),
                          "key encoder_W: dtype int32, expected floating-point weights")):
    np.savez(folder / "uni_skip.npz", **{**arrays, "encoder_W": value})
    with pytest.raises(RSVQAError, match=message):
      _load(folder)


@pytest.mark.parametrize("shape,dtype,message", [
    ((len(DICTIONARY) * D,), np.float32, r"float32 array of shape \(40,\)"),
    ((len(DICTIONARY), D, 1), np.float32, r"float32 array of shape \(10, 4, 1\)"),
    ((len(DICTIONARY), D), np.int64, r"int64 array of shape \(10, 4\)")])
def test_a_word_table_that_is_not_a_float_matrix_is_refused(folder, shape, dtype, message):
  np.save(folder / "utable.npy", np.ones(shape, dtype))
  with pytest.raises(RSVQAError, match=rf"utable\.npy: a {message}, expected a float matrix"):
    _load(folder)


def test_a_pickled_word_table_with_rows_of_other_sizes_is_refused(folder):
  rows = [np.ones(D, np.float32)] + [np.ones(D - 1, np.float32)] * (len(DICTIONARY) - 1)
  np.save(folder / "utable.npy", np.array(rows, dtype=object), allow_pickle=True)
  with pytest.raises(RSVQAError, match=r"utable\.npy: the word table's rows are not vectors of one "
                                       "size"):
    _load(folder, allow_pickle=True)


@pytest.mark.parametrize("allow_pickle", [False, True])
def test_a_cut_word_table_is_named_as_cut_not_as_pickled(folder, allow_pickle):
  """A download stopped part way: numpy cannot map it, which once read 'pickled object array'
  (and with --allow-pickle raised numpy's ValueError); a cut header and a cut pickle alike."""
  path = folder / "utable.npy"
  whole = path.read_bytes()
  path.write_bytes(whole[:len(whole) - 20])
  with pytest.raises(RSVQAError, match=r"utable\.npy: cut short: its header gives a float32 array "
                                       r"of shape \(10, 4\) \(160 bytes\), the file holds 140"):
    _load(folder, allow_pickle=allow_pickle)
  path.write_bytes(whole[:40])
  with pytest.raises(RSVQAError, match=r"utable\.npy: its NumPy header is unreadable"):
    _load(folder, allow_pickle=allow_pickle)
  rows = np.array([np.ones(D, np.float32)] * len(DICTIONARY), dtype=object)
  np.save(path, rows, allow_pickle=True)
  pickled = path.read_bytes()
  path.write_bytes(pickled[:len(pickled) // 2])
  if allow_pickle:
    with pytest.raises(RSVQAError, match=r"utable\.npy: the pickled word table is unreadable "
                                         r"\(UnpicklingError"):
      _load(folder, allow_pickle=True)
  else:  # a pickle is never read without the opt-in, cut or not
    with pytest.raises(RSVQAError, match=r"utable\.npy: pickled object array; run with "):
      _load(folder)


def test_an_empty_dictionary_is_refused(folder):
  (folder / "dictionary.txt").write_text("")
  with pytest.raises(RSVQAError, match=r"dictionary\.txt: empty"):
    _load(folder)
