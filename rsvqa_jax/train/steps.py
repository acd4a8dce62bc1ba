"""The jit-compiled train and eval steps, sharded over a data-parallel mesh.

Batches are sharded on their leading axis ('data'), the state is replicated and donated to the
train step. The loss is the cross-entropy over answer classes averaged over the samples whose
label is not -1 (answers outside the vocabulary, the padding rows of a last eval batch, and
those topping a training batch up to a multiple of the devices: sharding.pad_rows).
Dropout draws from fold_in(rng, step), so a step's randomness depends only on the run's seed
and the step number: resumed and uninterrupted runs see the same masks.
"""
import jax
import jax.numpy as jnp
import optax
from flax import nnx

from rsvqa_jax.models.dense import Dense
from rsvqa_jax.models.skipthoughts import SkipThoughts
from rsvqa_jax.train import sharding as shd

MODEL_INPUTS = ("image_features", "question_vector", "tokens", "mask")
DTYPES = {"float32": jnp.float32, "bfloat16": jnp.bfloat16}
MASTER_WEIGHTS = (Dense, SkipThoughts)  # modules computing in their `dtype` from float32 weights


def computing_model(state, params, dtype):
  """A fresh model of `state` with `params` merged in, computing in `dtype`.

  Floating parameters (a frozen text encoder's too) are cast to `dtype`, except
  - embedding tables (`nnx.Embed.embedding`): the looked-up rows are cast instead. The gradient
    of a lookup is a scatter-add colliding on the few rows of a question vocabulary, which in
    bfloat16 doubled the GPU time of a Skip-thoughts step (benchmarks/results/gpu_h200, docs
    performance/gpu.md);
  - the parameters of Dense layers and of the Skip-thoughts GRU, which are told to compute in
    `dtype` and take their float32 parameters as master copies (models/matmul): each weight
    gradient comes back in float32 from the product's accumulator instead of rounded to bf16
    and converted back.
  """
  model = state.model(params)
  if dtype == jnp.float32:
    return model
  for _, module in nnx.iter_modules(model):
    if isinstance(module, MASTER_WEIGHTS):
      module.dtype = module.dtype or dtype
      continue
    for name, variable in vars(module).items():
      if (isinstance(variable, nnx.Param) and name != "embedding"
          and jnp.issubdtype(variable.dtype, jnp.floating)):
        variable.set_value(variable[...].astype(dtype))
  return model


def masked_cross_entropy(logits, labels):
  """(mean cross-entropy over labels >= 0, number of such labels); 0 loss for none."""
  valid = labels >= 0
  ce = optax.softmax_cross_entropy_with_integer_labels(logits, jnp.where(valid, labels, 0))
  n = valid.sum()
  return jnp.where(valid, ce, 0.0).sum() / jnp.maximum(n, 1), n


def all_finite(tree):
  """Whether every element of every leaf is finite (True for no elements).

  One max |x| per leaf, then one isfinite over those maxima (max propagates NaN). The per-leaf
  isfinite(x).all() it replaces became XLA:CPU tree reductions over booleans (reduce-window
  ops), about 10% of a fine-tuned DistilBERT step's op time in a profile and 2.7x slower than
  this alone over DistilBERT's gradients.
  """
  peaks = [jnp.max(jnp.abs(x)).astype(jnp.float32) for x in jax.tree.leaves(tree) if x.size]
  return jnp.isfinite(jnp.stack(peaks)).all() if peaks else jnp.asarray(True)


def finite_update(optimizer, grads, opt_state, params):
  """(params, optimizer state, all_finite(grads)) after one optimizer update.

  The parameters take the update only when every gradient is finite (the training loop stops
  the run at such a step, before a checkpoint; the optimizer state is updated either way).
  Gating on that flag also orders each parameter's in-place update (the state is donated) after
  every product that reads the parameter: XLA:CPU runs independent ops concurrently and orders a
  buffer's reuse by data dependency only, so a weight read by a backward product dx = dy @ W.T,
  which W's own gradient does not depend on, was copied whole every step to keep it intact
  (13% of the op time of a float32 frozen MUTAN step; benchmarks/update_order.py). The flag
  depends on every gradient, hence on every such product.
  """
  updates, opt_state = optimizer.update(grads, opt_state, params)
  finite = all_finite(grads)
  new_params = jax.tree.map(lambda new, old: jnp.where(finite, new, old),
                            optax.apply_updates(params, updates), params)
  return new_params, opt_state, finite


def _model_inputs(batch, compute_dtype):
  """The model's inputs of a batch, floating ones in the compute dtype."""
  inputs = {k: batch[k] for k in MODEL_INPUTS if k in batch}
  return {k: v.astype(compute_dtype) if jnp.issubdtype(v.dtype, jnp.floating) else v
          for k, v in inputs.items()}


def logits(state, params, batch, compute_dtype, *, deterministic, key=None):
  """Float32 logits of the model in `state` with `params`, computed in the compute dtype."""
  model = computing_model(state, params, compute_dtype)
  if key is not None:
    nnx.reseed(model, dropout=key)
  inputs = _model_inputs(batch, compute_dtype)
  return model(inputs, deterministic=deterministic).astype(jnp.float32)


def gradients(state, batch, dtype):
  """((loss, (float32 logits, labelled samples)), gradients of the trainable parameters) of
  one training step: the forward and backward pass, dropout drawn from the step's key."""
  key = jax.random.fold_in(jax.random.wrap_key_data(state.rng), state.step)
  run = state.replace(frozen=jax.lax.stop_gradient(state.frozen))

  def loss_fn(params):
    scores = logits(run, params, batch, dtype, deterministic=False, key=key)
    loss, n = masked_cross_entropy(scores, batch["answer"])
    return loss, (scores, n)

  return jax.value_and_grad(loss_fn, has_aux=True)(state.params)


def make_train_step(optimizer, mesh, compute_dtype="float32"):
  """jit(state, batch) -> (state, {"loss", "n", "correct", "finite_grads"}); state donated."""
  dtype = DTYPES[compute_dtype]

  def step(state, batch):
    (loss, (scores, n)), grads = gradients(state, batch, dtype)
    params, opt_state, finite = finite_update(optimizer, grads, state.opt_state, state.params)
    correct = ((scores.argmax(-1) == batch["answer"]) & (batch["answer"] >= 0)).sum()
    new_state = state.replace(params=params, opt_state=opt_state, step=state.step + 1)
    return new_state, {"loss": loss, "n": n, "correct": correct, "finite_grads": finite}

  rep, data = shd.replicated(mesh), shd.batch_sharding(mesh)
  return jax.jit(step, in_shardings=(rep, data), out_shardings=(rep, rep), donate_argnums=0)


def make_eval_step(mesh, compute_dtype="float32"):
  """jit(state, batch) -> predicted answer ids [B, K], replicated on every device/host.

  The batch's image_features are [B, K, D]: K image rows per question (K = 1 for clean
  evaluation, K substitutions for adversarial testing). The question vector is computed once
  per question and the head runs on each of the K image rows (vmap), so every evaluator shares
  this step, its dtype and its mesh.
  """
  dtype = DTYPES[compute_dtype]

  def step(state, batch):
    model = computing_model(state, state.params, dtype)
    inputs = _model_inputs(batch, dtype)
    q = model.question_vector(inputs, deterministic=True)
    images = inputs["image_features"]
    if model.head.blind:
      scores = jnp.repeat(model.head(None, q, deterministic=True)[:, None], images.shape[1], 1)
    else:
      head = lambda v: model.head(v, q, deterministic=True)
      scores = jax.vmap(head, in_axes=1, out_axes=1)(images)
    return scores.astype(jnp.float32).argmax(-1)

  rep, data = shd.replicated(mesh), shd.batch_sharding(mesh)
  return jax.jit(step, in_shardings=(rep, data), out_shardings=rep)
