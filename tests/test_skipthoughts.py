"""Tests for the Skip-thoughts GRU and its import from the original uni-skip files."""
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from benchmarks import hlo_dots
from rsvqa_jax.data import tokenizers
from rsvqa_jax.errors import RSVQAError
from rsvqa_jax.models import matmul as matmul_lib
from rsvqa_jax.models import skipthoughts_params
from rsvqa_jax.models.skipthoughts import SkipThoughts, gru_scan
from rsvqa_jax.train import model_builder

D, H = 6, 5
DICTIONARY = ["<eos>", "UNK", "is", "there", "a", "road", "in", "the", "image", "?", "how",
              "many", "buildings", "are"]
QUESTIONS = ["Is there a road in the image?", "How many buildings are there?",
             "Is there a zebra?", "road"]


def _load(folder, words, **kwargs):
  """(model, tokenizer, dataset words missing from the dictionary), as training builds them."""
  model, tok = model_builder.pretrained_skipthoughts(folder, words, **kwargs)
  return model, tok, len(tok.unknown_words)


def _arrays(seed=0, word_dim=D, hidden=H):
  rng = np.random.default_rng(seed)
  f = lambda *shape: (rng.standard_normal(shape) * 0.5).astype(np.float32)
  return {"encoder_W": f(word_dim, 2 * hidden), "encoder_b": f(2 * hidden),
          "encoder_U": f(hidden, 2 * hidden), "encoder_Wx": f(word_dim, hidden),
          "encoder_bx": f(hidden), "encoder_Ux": f(hidden, hidden)}


def _write_files(folder, arrays, table, pickled=False):
  np.savez(folder / "uni_skip.npz", Wemb=np.zeros((3, D), np.float32), **arrays)
  (folder / "dictionary.txt").write_text("\n".join(DICTIONARY) + "\n")
  if pickled:
    rows = np.empty(len(table), dtype=object)
    rows[:] = list(table)
    np.save(folder / "utable.npy", rows, allow_pickle=True)
  else:
    np.save(folder / "utable.npy", table)


@pytest.fixture(name="files")
def fixture_files(tmp_path):
  arrays = _arrays()
  table = np.random.default_rng(1).standard_normal((len(DICTIONARY), D)).astype(np.float32)
  _write_files(tmp_path, arrays, table)
  return tmp_path, arrays, table


def _word_vectors(question, table):
  index = {w: i for i, w in enumerate(DICTIONARY)}
  return np.stack([table[index.get(w, index["UNK"])] for w in tokenizers.split_words(question)])


def _numpy_uni_skip(x, a, mx=None, mh=None):
  """The Theano uni-skip recurrence, step by step, with optional per-gate masks."""
  mx = np.ones((3, x.shape[1])) if mx is None else mx
  mh = np.ones((3, H)) if mh is None else mh
  sig = lambda z: 1 / (1 + np.exp(-z))
  W, U, Wx, Ux = a["encoder_W"], a["encoder_U"], a["encoder_Wx"], a["encoder_Ux"]
  h, states = np.zeros(H), []
  for xt in x.astype(np.float64):
    pre = np.concatenate([(xt * mx[0]) @ W[:, :H] + (h * mh[0]) @ U[:, :H],
                          (xt * mx[1]) @ W[:, H:] + (h * mh[1]) @ U[:, H:]]) + a["encoder_b"]
    r, u = sig(pre[:H]), sig(pre[H:])
    candidate = np.tanh(r * ((h * mh[2]) @ Ux) + (xt * mx[2]) @ Wx + a["encoder_bx"])
    h = u * h + (1 - u) * candidate
    states.append(h)
  return np.stack(states)


def test_numpy_parity(files):
  folder, arrays, table = files
  model, tok, _ = _load(
      folder, tokenizers.word_list(QUESTIONS), rngs=nnx.Rngs(0))
  tokens, mask = tok(QUESTIONS)
  out = np.asarray(model(tokens, mask))
  states = np.asarray(model.hidden_states(tokens, mask))
  assert out.shape == (len(QUESTIONS), H) and model.out_dim == H
  for i, q in enumerate(QUESTIONS):
    ref = _numpy_uni_skip(_word_vectors(q, table), arrays)
    np.testing.assert_allclose(states[i, :len(ref)], ref, atol=1e-5)
    np.testing.assert_allclose(out[i], ref[-1], atol=1e-5)


def test_torch_gru_parity(files):
  torch = pytest.importorskip("torch", reason="torch is needed for the torch.nn.GRU reference")
  folder, a, table = files
  model, tok, _ = _load(
      folder, tokenizers.word_list(QUESTIONS), rngs=nnx.Rngs(0))
  gru = torch.nn.GRU(D, H, batch_first=True)
  t = lambda x: torch.tensor(np.ascontiguousarray(x))
  with torch.no_grad():  # torch gate order r, z (= u), n; b_hn = 0 gives r * (h @ Ux).
    gru.weight_ih_l0.copy_(t(np.concatenate([a["encoder_W"], a["encoder_Wx"]], axis=1).T))
    gru.weight_hh_l0.copy_(t(np.concatenate([a["encoder_U"], a["encoder_Ux"]], axis=1).T))
    gru.bias_ih_l0.copy_(t(np.concatenate([a["encoder_b"], a["encoder_bx"]])))
    gru.bias_hh_l0.zero_()
  tokens, mask = tok(QUESTIONS)
  states = np.asarray(model.hidden_states(tokens, mask))
  out = np.asarray(model(tokens, mask))
  for i, q in enumerate(QUESTIONS):
    with torch.no_grad():
      ref, last = gru(t(_word_vectors(q, table))[None])
    np.testing.assert_allclose(states[i, :ref.shape[1]], ref[0].numpy(), atol=1e-5)
    np.testing.assert_allclose(out[i], last[0, 0].numpy(), atol=1e-5)


def test_unknown_words_share_the_unk_row(files):
  folder, _, table = files
  model, tok, n_unknown = _load(
      folder, tokenizers.word_list(QUESTIONS))
  assert n_unknown == 1 and tok.unknown_words == ["zebra"]
  assert "zebra" not in tok.vocab
  embedding = np.asarray(model.embed.embedding[...])
  np.testing.assert_array_equal(embedding[tok.pad_id], 0)
  np.testing.assert_array_equal(embedding[tok.unk_id], table[DICTIONARY.index("UNK")])
  np.testing.assert_array_equal(embedding[tok.vocab.index("road")], table[DICTIONARY.index("road")])
  assert embedding.shape == (tok.vocab_size, D)  # only the dataset's rows are kept
  _, tok, n_unknown = _load(folder, ["zebra", "lion"])
  assert n_unknown == 2 and tok.vocab == ["<pad>", "UNK"]


def test_pickled_utable_needs_explicit_opt_in(tmp_path):
  table = np.random.default_rng(2).standard_normal((len(DICTIONARY), D)).astype(np.float32)
  _write_files(tmp_path, _arrays(), table, pickled=True)
  words = tokenizers.word_list(QUESTIONS)
  with pytest.raises(RSVQAError, match="convert_utable"):
    _load(tmp_path, words)
  pickled_model, _, _ = _load(tmp_path, words, allow_pickle=True)
  skipthoughts_params.convert_utable(tmp_path / "utable.npy", tmp_path / "utable_f32.npy", chunk=4)
  np.testing.assert_array_equal(np.load(tmp_path / "utable_f32.npy"), table)
  plain_model, _, _ = _load(tmp_path, words)  # prefers the copy
  np.testing.assert_array_equal(plain_model.embed.embedding[...], pickled_model.embed.embedding[...])


def test_missing_and_mismatched_keys(tmp_path):
  table = np.zeros((len(DICTIONARY), D), np.float32)
  arrays = _arrays()
  arrays["encoder_Ux"] = np.zeros((H, H + 1), np.float32)
  _write_files(tmp_path, arrays, table)
  with pytest.raises(RSVQAError, match=r"encoder_Ux.*\(5, 6\).*\(5, 5\)"):
    _load(tmp_path, ["road"])
  del arrays["encoder_Ux"]
  _write_files(tmp_path, arrays, table)
  with pytest.raises(RSVQAError, match="missing key encoder_Ux"):
    _load(tmp_path, ["road"])
  with pytest.raises(RSVQAError, match="no path given"):
    _load({"uni_skip": tmp_path / "uni_skip.npz"}, ["road"])


def test_real_size_shapes():
  model = nnx.eval_shape(lambda: SkipThoughts(10, rngs=nnx.Rngs(0)))
  shapes = {k: tuple(getattr(model, k).shape) for k in ("W", "U", "b", "Wx", "Ux", "bx")}
  assert shapes == {"W": (620, 4800), "U": (2400, 4800), "b": (4800,), "Wx": (620, 2400),
                    "Ux": (2400, 2400), "bx": (2400,)}
  assert model.out_dim == 2400 and model.embed.embedding.shape == (10, 620)


def test_random_init_mode_runs():
  model = SkipThoughts(12, word_dim=D, hidden_dim=H, rngs=nnx.Rngs(0))
  out = model(np.array([[2, 3, 0]], np.int32), np.array([[1, 1, 0]], np.int32))
  assert out.shape == (1, H) and np.all(np.isfinite(out)) and np.any(out != 0)


def test_padding_invariance_and_jit(files):
  folder = files[0]
  model, tok, _ = _load(folder, tokenizers.word_list(QUESTIONS))
  short = tok(QUESTIONS)
  long = tok(QUESTIONS, length=19)
  np.testing.assert_allclose(model(*short), model(*long), atol=1e-6)
  jitted = nnx.jit(lambda m, t, k: m(t, k))
  np.testing.assert_allclose(jitted(model, *long), model(*short), atol=1e-6)
  # A zero-length question encodes to the zero initial state.
  np.testing.assert_array_equal(model(*tok([""])), 0)


def test_bayesian_masks_fixed_over_time(files):
  folder, arrays, table = files
  model, tok, _ = _load(
      folder, tokenizers.word_list(QUESTIONS), bayesian=True, rngs=nnx.Rngs(0, dropout=3))
  tokens, mask = tok(QUESTIONS)
  mx, mh = nnx.clone(model).dropout_masks(len(QUESTIONS), deterministic=False)
  mx, mh = np.asarray(mx), np.asarray(mh)
  assert set(np.unique(np.concatenate([mx.ravel(), mh.ravel()]))) == {0.0, np.float32(1 / 0.75)}
  out = np.asarray(model(tokens, mask, deterministic=False))
  for i, q in enumerate(QUESTIONS):  # the reference applies one mask per gate at every step
    ref = _numpy_uni_skip(_word_vectors(q, table), arrays, mx[:, i], mh[:, i])
    np.testing.assert_allclose(out[i], ref[-1], atol=1e-5)
  np.testing.assert_allclose(model(tokens, mask, deterministic=True)[0],
                             _numpy_uni_skip(_word_vectors(QUESTIONS[0], table), arrays)[-1],
                             atol=1e-5)
  again = np.asarray(model(tokens, mask, deterministic=False))
  assert not np.allclose(again, out)  # fresh masks for each batch
  assert jax.tree.leaves(nnx.state(model, nnx.Param))  # still a plain NNX module


def _autodiff_gru(x, mask, W, U, b, Wx, Ux, bx, masks=None):
  """The recurrence written step by step in jnp (per-gate masks), differentiated by JAX."""
  ones = lambda n: jnp.ones((3, x.shape[0], n))
  mx, mh = masks if masks is not None else (ones(x.shape[-1]), ones(H))
  h, states = jnp.zeros((x.shape[0], H)), []
  for t in range(x.shape[1]):
    xt = x[:, t]
    r = jax.nn.sigmoid((xt * mx[0]) @ W[:, :H] + (h * mh[0]) @ U[:, :H] + b[:H])
    u = jax.nn.sigmoid((xt * mx[1]) @ W[:, H:] + (h * mh[1]) @ U[:, H:] + b[H:])
    c = jnp.tanh(r * ((h * mh[2]) @ Ux) + (xt * mx[2]) @ Wx + bx)
    h = jnp.where(mask[:, t, None] != 0, u * h + (1 - u) * c, h)
    states.append(h)
  return h, jnp.stack(states, 1)


@pytest.mark.parametrize("bayesian", [False, True])
def test_gradients_match_autodiff_of_the_plain_recurrence(bayesian):
  """The hand-written VJP of the scan against JAX autodiff of a step-by-step transcription,
  with padding (lengths 4, 2, 0) and a loss reading both the last state and all states."""
  rng = np.random.default_rng(3)
  f = lambda *shape: jnp.asarray(rng.standard_normal(shape) * 0.5, jnp.float32)
  x = f(3, 4, D)
  arrays = (f(D, 2 * H), f(H, 2 * H), f(2 * H), f(D, H), f(H, H), f(H))
  mask = jnp.asarray([[1, 1, 1, 1], [1, 1, 0, 0], [0, 0, 0, 0]], jnp.int32)
  masks = None
  if bayesian:
    keep = lambda *shape: jnp.asarray((rng.random(shape) > 0.25) / 0.75, jnp.float32)
    masks = (keep(3, 3, D), keep(3, 3, H))
  weights_last, weights_all = f(3, H), f(3, 4, H)

  def loss(fn):
    def value(x, *arrays):
      last, states = fn(x, mask, *arrays, masks=masks)
      return jnp.sum(last * weights_last) + jnp.sum(jnp.tanh(states) * weights_all)
    return jax.value_and_grad(value, argnums=tuple(range(7)))(x, *arrays)

  (ours, grads), (ref, ref_grads) = loss(jax.jit(gru_scan)), loss(_autodiff_gru)
  np.testing.assert_allclose(ours, ref, rtol=1e-5)
  for name, g, r in zip(["x", "W", "U", "b", "Wx", "Ux", "bx"], grads, ref_grads):
    assert np.abs(np.asarray(r)).max() > 0, name
    np.testing.assert_allclose(g, r, rtol=1e-4, atol=1e-5, err_msg=name)
  np.testing.assert_array_equal(grads[0][2], 0)  # an empty question gets no input gradient


@pytest.mark.parametrize("bayesian", [False, True])
def test_bf16_gradients_are_bf16_products_close_to_float32(bayesian):
  """In bf16 (a CPU's float32-accumulating products), the scan's value and gradients stay within
  bf16 rounding of float32 autodiff of the rounded inputs, and every product takes bf16 operands
  (the recurrent input gradient once ran in float32 inside the backward loop)."""
  rng = np.random.default_rng(4)
  bf16 = lambda *shape: jnp.asarray(rng.standard_normal(shape) * 0.5, jnp.bfloat16)
  x, mask = bf16(3, 4, D), jnp.asarray([[1, 1, 1, 1], [1, 1, 1, 0], [1, 0, 0, 0]], jnp.int32)
  arrays = (bf16(D, 2 * H), bf16(H, 2 * H), bf16(2 * H), bf16(D, H), bf16(H, H), bf16(H))
  masks = None
  if bayesian:
    keep = lambda *shape: jnp.asarray((rng.random(shape) > 0.25) / 0.75, jnp.bfloat16)
    masks = (keep(3, 3, D), keep(3, 3, H))
  weights = jnp.asarray(rng.standard_normal((3, 4, H)), jnp.float32)

  def loss(fn, dtype):
    def value(x, *arrays):
      cast = lambda t: None if t is None else jax.tree.map(lambda a: a.astype(dtype), t)
      _, states = fn(cast(x), mask, *cast(arrays), masks=cast(masks))
      return jnp.sum(jnp.tanh(states.astype(jnp.float32)) * weights)
    return jax.grad(value, argnums=tuple(range(7)))

  grads = jax.jit(loss(gru_scan, jnp.bfloat16))(x, *arrays)
  ref_grads = loss(_autodiff_gru, jnp.float32)(x, *arrays)
  f32 = lambda t: None if t is None else jax.tree.map(lambda a: a.astype(jnp.float32), t)
  states = jax.jit(gru_scan)(x, mask, *arrays, masks=masks)[1]
  ref_states = _autodiff_gru(f32(x), mask, *f32(arrays), masks=f32(masks))[1]
  assert states.dtype == jnp.bfloat16
  np.testing.assert_allclose(np.asarray(states, np.float32), ref_states, atol=2e-2)
  for name, g, r in zip(["x", "W", "U", "b", "Wx", "Ux", "bx"], grads, ref_grads):
    scale = np.abs(np.asarray(r, np.float32)).max()
    assert g.dtype == jnp.bfloat16 and scale > 0, name
    np.testing.assert_allclose(np.asarray(g, np.float32), r, atol=3e-2 * scale, err_msg=name)
  if not matmul_lib.accumulates_in_float32(jnp.bfloat16):
    return
  # Products of these tiny sizes run in float32 whatever their dtype: look at wider ones.
  d, h = 32, 48
  x, mask = bf16(8, 4, d), jnp.ones((8, 4), jnp.int32)
  arrays = (bf16(d, 2 * h), bf16(h, 2 * h), bf16(2 * h), bf16(d, h), bf16(h, h), bf16(h))
  masks = (bf16(3, 8, d), bf16(3, 8, h)) if bayesian else None
  value = lambda x, *arrays: jnp.sum(gru_scan(x, mask, *arrays, masks=masks)[1]).astype(jnp.float32)
  grad = jax.jit(jax.grad(value, argnums=tuple(range(7))))
  dots = hlo_dots.module_dots(grad.lower(x, *arrays).compile().as_text())
  assert len(dots) >= 4, dots
  for label, _ in dots.values():
    if ",1] x " in label:  # the bias gradient's ones-vector product (models/matmul.add_bias)
      continue
    assert label.split(" -> ")[0].count("bf16[") == 2, label


@pytest.mark.parametrize("bayesian", [False, True])
def test_bf16_gate_math_runs_in_float32(bayesian):
  """sigmoid and tanh of bf16 arrays run two to three times slower on XLA:CPU: the scans take
  their gate functions in float32."""
  rng = np.random.default_rng(6)
  bf16 = lambda *shape: jnp.asarray(rng.standard_normal(shape) * 0.5, jnp.bfloat16)
  x, mask = bf16(3, 4, D), jnp.ones((3, 4), jnp.int32)
  arrays = (bf16(D, 2 * H), bf16(H, 2 * H), bf16(2 * H), bf16(D, H), bf16(H, H), bf16(H))
  masks = (bf16(3, 3, D), bf16(3, 3, H)) if bayesian else None
  value = lambda x, *arrays: jnp.sum(gru_scan(x, mask, *arrays, masks=masks)[1]).astype(jnp.float32)
  text = jax.jit(jax.grad(value, argnums=tuple(range(7)))).lower(x, *arrays).as_text()
  gates = [line for line in text.splitlines()
           if re.search(r"stablehlo\.(tanh|logistic|exponential)", line)]
  assert len(gates) >= 3
  assert not [line for line in gates if "bf16" in line], gates


def test_bf16_scan_on_float32_master_weights_returns_float32_gradients():
  """The GRU of a bf16 train step keeps float32 weights (train.steps.computing_model): they are
  cast once for the scan and their gradients come back in float32, not rounded to bf16."""
  rng = np.random.default_rng(5)
  x = jnp.asarray(rng.standard_normal((3, 4, D)) * 0.5, jnp.bfloat16)
  mask = jnp.asarray([[1, 1, 1, 1], [1, 1, 1, 0], [1, 0, 0, 0]], jnp.int32)
  arrays = tuple(jnp.asarray(rng.standard_normal(s) * 0.5, jnp.float32)
                 for s in ((D, 2 * H), (H, 2 * H), (2 * H,), (D, H), (H, H), (H,)))
  value = lambda *arrays: jnp.sum(jnp.tanh(gru_scan(x, mask, *arrays)[1].astype(jnp.float32)))
  grads = jax.jit(jax.grad(value, argnums=tuple(range(6))))(*arrays)
  rounded = [a.astype(jnp.bfloat16) for a in arrays]
  want = jax.jit(jax.grad(value, argnums=tuple(range(6))))(*rounded)
  assert gru_scan(x, mask, *arrays)[1].dtype == jnp.bfloat16
  for name, g, w in zip(["W", "U", "b", "Wx", "Ux", "bx"], grads, want):
    assert g.dtype == jnp.float32, name
    scale = np.abs(np.asarray(w, np.float32)).max()
    np.testing.assert_allclose(np.asarray(g), np.asarray(w, np.float32), atol=1e-2 * scale,
                               err_msg=name)
  u = np.asarray(grads[1])
  assert not np.array_equal(u, np.asarray(grads[1].astype(jnp.bfloat16), np.float32))
