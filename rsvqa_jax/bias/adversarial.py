"""Vectorized adversarial testing: answer each question with a substituted image (paper 3.3).

The question vectors are computed once per batch; the image features of K substitutions are
then gathered from the feature array and pushed through the VQA head in one compiled call
(vmap over the K substitutions), so K = 10 costs little more than one clean pass.

Substitution kinds:
  random   an image drawn from the whole split, never the question's own (the paper's
           in-distribution choice);
  shuffle  a permutation inside each batch of the evaluation order (the original code's);
  white / black / noise   pixels replaced before the encoder: their features come from the
           feature cache of that kind, and this module only maps each question to its row.
"""
import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

KINDS = ("random", "shuffle", "white", "black", "noise")


def substitution_rows(kind, rows, *, repeats, seed, batch_size=None):
  """Feature rows to use instead of `rows` (the clean rows, one per question): [K, N].

  For random/shuffle the rows index the same feature array as `rows`. For white/black/noise
  the rows are returned unchanged: the caller passes the features of that pixel kind, which
  are stored in the same row order as the clean ones.
  """
  rows = np.asarray(rows, dtype=np.int64)
  n = len(rows)
  rng = np.random.default_rng(seed)
  if kind in ("white", "black", "noise"):
    return np.broadcast_to(rows, (repeats, n)).copy()
  if kind == "random":
    pool = np.unique(rows)
    if len(pool) < 2:
      raise ValueError("random substitution needs at least two distinct images in the split")
    # Draw from the pool minus the question's own image: shift a draw over n-1 slots.
    own = np.searchsorted(pool, rows)
    draw = rng.integers(0, len(pool) - 1, size=(repeats, n))
    draw = draw + (draw >= own)
    return pool[draw]
  if kind == "shuffle":
    if not batch_size:
      raise ValueError("shuffle substitution needs the batch size it permutes within")
    out = np.empty((repeats, n), dtype=np.int64)
    for k in range(repeats):
      for start in range(0, n, batch_size):
        block = rows[start:start + batch_size]
        out[k, start:start + batch_size] = block[rng.permutation(len(block))]
    return out
  raise ValueError(f"unknown adversarial kind {kind!r}; choose one of {KINDS}")


@nnx.jit
def _predict_substituted(model, batch, features):
  """Predictions [K, B] for one batch with K stacked image-feature sets [K, B, D]."""
  q = model.question_vector(batch, deterministic=True)
  head = lambda v: model.head(v, q, deterministic=True).argmax(-1)
  return jax.vmap(head)(features)


@dataclasses.dataclass
class AdversarialResult:
  """Predictions [K, N] of answer ids under K substitutions, and the rows used."""

  predictions: np.ndarray
  rows: np.ndarray


def evaluate_substituted(model, question_inputs, features, sub_rows, *, batch_size):
  """Run `model` on every question with each of the K substituted feature rows.

  Args:
    model: an RSVQAModel (reference, not blind).
    question_inputs: dict of arrays with first dim N: either question_vector, or tokens+mask.
    features: [R, D] image features (of the kind being tested).
    sub_rows: [K, N] rows into `features`, e.g. from `substitution_rows`.
    batch_size: questions per compiled call; the last batch is padded to keep one shape.
  """
  k, n = sub_rows.shape
  features = jnp.asarray(features)
  preds = np.empty((k, n), dtype=np.int32)
  for start in range(0, n, batch_size):
    stop = min(start + batch_size, n)
    pad = batch_size - (stop - start)
    take = np.concatenate([np.arange(start, stop), np.full(pad, stop - 1)])
    batch = {name: jnp.asarray(col[take]) for name, col in question_inputs.items()}
    feats = features[jnp.asarray(sub_rows[:, take])]
    preds[:, start:stop] = np.asarray(_predict_substituted(model, batch, feats))[:, :stop - start]
  return AdversarialResult(predictions=preds, rows=sub_rows)


def accuracy_over_repeats(predictions, answers, qtypes):
  """Per-type and overall accuracy: mean and std over the K substitutions.

  Returns {type: (mean, std)} plus "AA" (mean over types, per repeat) and "OA".
  """
  correct = np.asarray(predictions) == np.asarray(answers)[None, :]
  qtypes = np.asarray(qtypes)
  per_type = {}
  for t in dict.fromkeys(qtypes.tolist()):
    acc = correct[:, qtypes == t].mean(axis=1)
    per_type[t] = acc
  out = {t: (float(a.mean()), float(a.std())) for t, a in per_type.items()}
  aa = np.mean(np.stack(list(per_type.values())), axis=0)
  oa = correct.mean(axis=1)
  out["AA"] = (float(aa.mean()), float(aa.std()))
  out["OA"] = (float(oa.mean()), float(oa.std()))
  return out
