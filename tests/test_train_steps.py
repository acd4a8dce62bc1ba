"""Train steps: learning-rate groups, frozen language model, bf16 compute, sharded == single."""
import json
import os
import re
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from benchmarks import update_order
from rsvqa_jax.models.bert import BertConfig, BertEncoder
from rsvqa_jax.models.dense import Dense
from rsvqa_jax.models.skipthoughts import SkipThoughts
from rsvqa_jax.models.vqa import RSVQAModel, VQAHead
from rsvqa_jax.train import inputs, model_builder, steps
from rsvqa_jax.train import run as run_lib
from rsvqa_jax.train import sharding as shd
import subprocess_env
from rsvqa_jax.train import state as state_lib
from test_train_support import tiny_config, tiny_task

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def _setup(tmp_path, config):
  dataset, features = tiny_task(n_images=40)
  s = run_lib.build(config, str(tmp_path), ["train"], dataset=dataset, features=features)
  state, optimizer = run_lib.new_state(s), run_lib.compiled_steps(config, s.mesh)[0]
  local = {k: v[:32] for k, v in s.columns["train"].columns.items()}
  batch = shd.global_batch(s.train_batch(local), s.mesh)
  return s, state, optimizer, batch


def _grads(s, state, batch):
  def loss(params):
    logits = steps.logits(state, params, batch, jnp.float32, deterministic=True)
    return steps.masked_cross_entropy(logits, batch["answer"])[0]
  return jax.jit(jax.grad(loss))(state.params)


def _no_dropout(config):
  config.model.dropout = 0.0
  return config


@pytest.mark.parametrize("text_lr", [0.01, 0.0])
def test_separate_learning_rates_under_sgd(tmp_path, text_lr):
  c = _no_dropout(tiny_config())
  c.optim.name, c.optim.lr, c.optim.text_lr = "sgd", 0.1, text_lr
  s, state, optimizer, batch = _setup(tmp_path, c)
  before = jax.device_get(state.params)
  grads = jax.device_get(_grads(s, state, batch))
  state, _ = steps.make_train_step(optimizer, s.mesh)(state, batch)
  after = jax.device_get(state.params)
  for group, lr in (("head", 0.1), ("text", text_lr)):
    for b, a, g in zip(*(jax.tree.leaves(t[group]) for t in (before, after, grads))):
      np.testing.assert_allclose(a - b, -lr * g, atol=1e-6)
  assert np.abs(jax.tree.leaves(grads["text"])[0]).max() > 0


@pytest.mark.parametrize("cache_questions", [False, True])
def test_frozen_language_model_is_not_trained(tmp_path, cache_questions):
  c = tiny_config()
  c.text.frozen = True
  c.text.cache_questions = cache_questions
  s, state, optimizer, batch = _setup(tmp_path, c)
  assert state.params["text"] == {}
  if cache_questions:  # no encoder in the state at all: the batch carries its output
    assert state.frozen == {} and s.model.text_encoder is None
    assert "tokens" not in batch and batch["question_vector"].shape == (32, 16)
    assert not any("text_encoder" in str(p) for p, _ in nnx.graph.iter_graph(state.model()))
  else:
    assert state.frozen["text"] and "tokens" in batch
  frozen = jax.device_get(state.frozen)
  head = jax.device_get(state.params["head"])
  step = steps.make_train_step(optimizer, s.mesh)
  for _ in range(3):
    state, _ = step(state, batch)
  for a, b in zip(jax.tree.leaves(frozen), jax.tree.leaves(jax.device_get(state.frozen))):
    np.testing.assert_array_equal(a, b)
  moved = [np.abs(a - b).max() for a, b in zip(jax.tree.leaves(head),
                                                jax.tree.leaves(jax.device_get(state.params["head"])))]
  assert max(moved) > 0
  n_text = sum(x.size for x in jax.tree.leaves(nnx.state(_text_encoder(s, c), nnx.Param)))
  n_opt = sum(x.size for x in jax.tree.leaves(state.opt_state))
  n_head = sum(x.size for x in jax.tree.leaves(head))
  assert n_opt < 2 * n_head + 10 < n_text + 2 * n_head  # Adam moments for the head only


def _text_encoder(s, config):
  """The text encoder the config builds (also when the setup dropped it for cached vectors)."""
  return model_builder.build(config, words=inputs.dataset_words(s.dataset), num_answers=len(s.vocab),
                             image_dim=8)[0].text_encoder


def test_bfloat16_compute_keeps_float32_params(tmp_path):
  c = tiny_config(compute_dtype="bfloat16")
  s, state, optimizer, batch = _setup(tmp_path, c)
  state, m = steps.make_train_step(optimizer, s.mesh, "bfloat16")(state, batch)
  assert np.isfinite(float(m["loss"]))
  assert {x.dtype for x in jax.tree.leaves(state.params)} == {jnp.dtype(jnp.float32)}


SHARDED_SCRIPT = r"""
import json, sys
import jax, numpy as np
sys.path.insert(0, {here!r})
from rsvqa_jax.data import pipeline
from rsvqa_jax.train import run as run_lib, steps, sharding as shd
from rsvqa_jax.train.inputs import model_batch
from test_train_support import tiny_config, tiny_task

assert jax.device_count() == 8, jax.devices()
dataset, features = tiny_task(n_images=40)
config = tiny_config()
out = {{}}
for n in (1, 8):
  s = run_lib.build(config, {workdir!r}, ["train"], dataset=dataset, features=features)
  s.mesh = shd.make_mesh(jax.devices()[:n])
  state, optimizer = run_lib.new_state(s), run_lib.compiled_steps(config, s.mesh)[0]
  step = steps.make_train_step(optimizer, s.mesh)
  cols = s.columns["train"]
  it = pipeline.batch_iterator(cols.columns, batch_size=16, shuffle=True, seed=0, num_epochs=3,
                               drop_remainder=True, length_buckets=cols.buckets, lengths=cols.lengths)
  losses = []
  for batch in it:
    state, m = step(state, shd.global_batch(model_batch(batch, features.features), s.mesh))
    losses.append(float(m["loss"]))
  out[n] = {{"losses": losses,
            "params": [np.asarray(x).ravel()[:50].tolist() for x in jax.tree.leaves(state.params)]}}
print("RESULT" + json.dumps(out))
"""


def test_sharded_over_8_devices_matches_single_device(tmp_path):
  env = subprocess_env.env(XLA_FLAGS="--xla_force_host_platform_device_count=8",
                           JAX_PLATFORMS="cpu")
  script = SHARDED_SCRIPT.format(here=HERE, workdir=str(tmp_path))
  proc = subprocess.run([sys.executable, "-c", script], env=env, cwd=ROOT, capture_output=True,
                        text=True, timeout=600)
  assert proc.returncode == 0, proc.stderr[-3000:]
  out = json.loads(proc.stdout.split("RESULT", 1)[1])
  single, sharded = out["1"], out["8"]
  assert len(single["losses"]) >= 10
  np.testing.assert_allclose(single["losses"], sharded["losses"], rtol=1e-5, atol=1e-6)
  for a, b in zip(single["params"], sharded["params"]):
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6)
  assert single["losses"][-1] < single["losses"][0]


def _in_bf16(module):
  """`module` as the bf16 train step computes it (all of its parameters trainable)."""
  state = state_lib.create(module, optax.sgd(0.1), seed=0, freeze_text=False)
  return steps.computing_model(state, state.params, jnp.bfloat16)


def _param_dtypes(module):
  return {jax.tree_util.keystr(p): x.dtype for p, x in
          jax.tree_util.tree_flatten_with_path(nnx.to_pure_dict(nnx.state(module, nnx.Param)))[0]}


def test_bfloat16_compute_keeps_tables_and_dense_weights_float32_and_casts_the_rest():
  """Lookups stay float32 (their gradient is a scatter-add), Dense layers and the GRU compute in
  bf16 from float32 master weights, every other parameter (LayerNorms') goes bfloat16."""
  gru = _in_bf16(SkipThoughts(12, word_dim=4, hidden_dim=6, rngs=nnx.Rngs(0)))
  bert = _in_bf16(BertEncoder(BertConfig(family="bert", vocab_size=12, hidden_size=8,
                                         num_layers=1, num_heads=2, intermediate_size=16),
                              rngs=nnx.Rngs(0)))
  tokens, mask = jnp.array([[3, 4, 0]]), jnp.array([[1, 1, 0]])
  for model in (gru, bert):
    dtypes = _param_dtypes(model)
    kept = {k for k in dtypes if k.endswith("['embedding']")}
    masters = [m for _, m in nnx.iter_modules(model) if isinstance(m, steps.MASTER_WEIGHTS)]
    assert masters and all(m.dtype == jnp.bfloat16 for m in masters)
    kept |= {k for k in dtypes for name in ("query", "key", "value", "output", "ffn_in", "ffn_out")
             if f"['{name}']" in k}
    kept |= {k for k in dtypes if model is gru}
    assert kept and all(dtypes[k] == jnp.float32 for k in kept)
    assert all(v == jnp.bfloat16 for k, v in dtypes.items() if k not in kept), dtypes
  assert len([m for _, m in nnx.iter_modules(bert) if isinstance(m, Dense)]) == 6
  assert any("norm" in k and v == jnp.bfloat16 for k, v in _param_dtypes(bert).items())
  h = gru.hidden_states(tokens, mask)
  assert h.dtype == jnp.bfloat16 and np.isfinite(np.asarray(h, np.float32)).all()
  assert np.isfinite(np.asarray(bert(tokens, mask))).all()


def test_bfloat16_compute_applies_to_a_frozen_text_encoder_too():
  """compute_dtype is the dtype of the whole forward: a frozen encoder that runs every step (a
  Bayesian uni-skip drawing its masks, questions not cached) computes in it as well."""
  encoder = BertEncoder(BertConfig(family="distilbert", vocab_size=12, hidden_size=8,
                                   num_layers=1, num_heads=2, intermediate_size=16,
                                   type_vocab_size=0), rngs=nnx.Rngs(0))
  head = VQAHead(tiny_config().model, q_dim=8, v_dim=6, num_answers=3, rngs=nnx.Rngs(1))
  state = state_lib.create(RSVQAModel(head, encoder), optax.sgd(0.1), seed=0, freeze_text=True)
  assert state.frozen["text"] and not state.params["text"]
  computing = steps.computing_model(state, state.params, jnp.bfloat16)
  dense = lambda m: [d for _, d in nnx.iter_modules(m) if isinstance(d, Dense)]
  for part in (computing.text_encoder, computing.head):
    assert dense(part) and all(d.dtype == jnp.bfloat16 for d in dense(part))
  norms = {k: v for k, v in _param_dtypes(computing.text_encoder).items() if "norm" in k}
  assert norms and all(v == jnp.bfloat16 for v in norms.values())
  assert all(x.dtype == jnp.float32 for x in jax.tree.leaves(state.frozen))  # stored float32
  batch = {"tokens": jnp.array([[3, 4]]), "mask": jnp.array([[1, 1]]),
           "image_features": jnp.ones((1, 6))}
  assert computing(batch).dtype == jnp.bfloat16


def test_bfloat16_compute_makes_bfloat16_matmuls_on_float32_inputs():
  """A LayerNorm's float32 output must not drag the next matmul back to float32."""
  bert = _in_bf16(BertEncoder(BertConfig(family="distilbert", vocab_size=12, hidden_size=8,
                                         num_layers=1, num_heads=2, intermediate_size=16,
                                         type_vocab_size=0), rngs=nnx.Rngs(0)))
  jaxpr = jax.make_jaxpr(lambda t, m: bert(t, m))(jnp.array([[3, 4]]), jnp.array([[1, 1]]))
  dots = _dot_generals(jaxpr.jaxpr)
  assert len(dots) == 8  # q, k, v, scores, context, output, ffn in, ffn out
  assert {e.invars[0].aval.dtype for e in dots} == {jnp.dtype(jnp.bfloat16)}
  assert {e.invars[1].aval.dtype for e in dots} == {jnp.dtype(jnp.bfloat16)}
  # On the CPU they accumulate in float32 (models/matmul), the way XLA reaches the bf16 units.
  assert {e.outvars[0].aval.dtype for e in dots} == {jnp.dtype(jnp.float32)}


def _dot_generals(jaxpr):
  """The dot_general equations of a jaxpr and of the jaxprs inside it (custom_vjp calls)."""
  found = []
  for e in jaxpr.eqns:
    if e.primitive.name == "dot_general":
      found.append(e)
    for v in e.params.values():
      inner = getattr(v, "jaxpr", v)
      if hasattr(inner, "eqns"):
        found += _dot_generals(inner)
  return found


@pytest.mark.parametrize("bad", [jnp.nan, jnp.inf, -jnp.inf])
def test_all_finite_finds_one_non_finite_element(bad):
  tree = {"a": jnp.ones((4, 3)), "b": [jnp.zeros(5, jnp.bfloat16), jnp.full((2,), 3e38)]}
  assert bool(jax.jit(steps.all_finite)(tree))
  for path in (("a",), ("b", 0), ("b", 1)):
    broken = jax.tree.map(lambda x: x, tree)
    leaf = broken[path[0]] if len(path) == 1 else broken[path[0]][path[1]]
    leaf = leaf.at[(1,) * leaf.ndim].set(bad)
    if len(path) == 1:
      broken[path[0]] = leaf
    else:
      broken[path[0]][path[1]] = leaf
    assert not bool(jax.jit(steps.all_finite)(broken)), path
  assert bool(steps.all_finite({})) and bool(steps.all_finite({"e": jnp.zeros((0, 3))}))


def test_finite_step_takes_exactly_the_optax_update(tmp_path):
  s, state, optimizer, batch = _setup(tmp_path, _no_dropout(tiny_config()))
  before = jax.device_get(state.params)
  grads = _grads(s, state, batch)
  updates, _ = jax.jit(optimizer.update)(grads, state.opt_state, state.params)
  expected = jax.device_get(jax.jit(optax.apply_updates)(state.params, updates))
  state, metrics = steps.make_train_step(optimizer, s.mesh)(state, batch)
  assert bool(metrics["finite_grads"])
  for want, got in zip(jax.tree.leaves(expected), jax.tree.leaves(jax.device_get(state.params))):
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
  assert any(np.abs(w - b).max() > 1e-4 for w, b in zip(jax.tree.leaves(expected),
                                                       jax.tree.leaves(before)))


def test_step_with_a_non_finite_gradient_leaves_the_parameters_unchanged(tmp_path):
  s, state, optimizer, batch = _setup(tmp_path, tiny_config())
  before = jax.device_get(state.params)
  broken = dict(batch, image_features=batch["image_features"].at[3].set(jnp.nan))
  state, metrics = steps.make_train_step(optimizer, s.mesh)(state, broken)
  assert not bool(metrics["finite_grads"]) and int(state.step) == 1
  for b, a in zip(jax.tree.leaves(before), jax.tree.leaves(jax.device_get(state.params))):
    np.testing.assert_array_equal(a, b)


def test_train_step_copies_no_weight_matrix_before_updating_it(tmp_path):
  """A weight read by a backward product dx = dy @ W.T is updated in place, not copied first."""
  c = tiny_config()
  c.model.fusion = "mutan"
  s, state, optimizer, batch = _setup(tmp_path, c)
  hlo = steps.make_train_step(optimizer, s.mesh).lower(state, batch).compile().as_text()
  copied = update_order.copied_param_shapes(hlo)
  assert not [shape for shape in copied if len(shape) > 1], copied
  reads = re.findall(r"fusion\([^)]*%state_params\w*mutan\w*kernel", hlo)
  assert reads  # the assertion above looked at the parameters the products read
