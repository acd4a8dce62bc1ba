"""Adversarial testing of a trained workdir: answer each question with a substituted image.

The paper's Section 3.3, vectorized: each question is answered with K substituted images in one
pass of the run's compiled eval step (the question vector computed once, the head run on the K
image rows; train/predict.py), so K = 10 costs little more than a clean pass and the clean and
adversarial numbers come from the same code, dtype and mesh.

Substitution kinds:
  random   an image drawn from the whole split, never the question's own (the paper's
           in-distribution choice);
  shuffle  a permutation inside each batch of the evaluation order (the original code's);
  white / black / noise   pixels replaced before the encoder: their features come from the
           feature cache of that kind (same row order as the clean ones), and each question
           reads its own image's row of that table.
Written to WORKDIR/eval/SPLIT/ (eval/outputs.py):
  adversarial_KIND.json             bias/metrics.accuracy_table over the K substitutions (mean,
                                    std and every repeat's values) and what was tested
  adversarial_KIND_predictions.csv  the first repeat's answers (question_id, image_id,
                                    substituted_image_id, type, prediction, answer), the
                                    format `rsvqa-jax analyze --adversarial-predictions` reads
"""
import json
import os

import numpy as np

from rsvqa_jax.bias import predictions as predictions_lib
from rsvqa_jax.errors import RSVQAError
from rsvqa_jax.eval import outputs
from rsvqa_jax.train import checkpointing, inputs, predict, restore

KINDS = ("random", "shuffle", "white", "black", "noise")
PIXEL_KINDS = ("white", "black", "noise")


def substitution_rows(kind, rows, *, repeats, seed, batch_size=None):
  """Feature rows to use instead of `rows` (the clean rows, one per question): [K, N].

  For random/shuffle the rows index the same feature array as `rows`. For white/black/noise
  the rows are returned unchanged: the caller passes the features of that pixel kind, which
  are stored in the same row order as the clean ones.
  """
  rows = np.asarray(rows, dtype=np.int64)
  n = len(rows)
  rng = np.random.default_rng(seed)
  if kind in PIXEL_KINDS:
    return np.broadcast_to(rows, (repeats, n)).copy()
  if kind == "random":
    pool = np.unique(rows)
    if len(pool) < 2:
      raise RSVQAError("random substitution needs at least two distinct images in the split")
    # Draw from the pool minus the question's own image: shift a draw over n-1 slots.
    own = np.searchsorted(pool, rows)
    draw = rng.integers(0, len(pool) - 1, size=(repeats, n))
    draw = draw + (draw >= own)
    return pool[draw]
  if kind == "shuffle":
    if not batch_size:
      raise RSVQAError("shuffle substitution needs the batch size it permutes within")
    out = np.empty((repeats, n), dtype=np.int64)
    for k in range(repeats):
      for start in range(0, n, batch_size):
        block = rows[start:start + batch_size]
        out[k, start:start + batch_size] = block[rng.permutation(len(block))]
    return out
  raise RSVQAError(f"adversarial kind {kind!r}: choose one of {', '.join(KINDS)}")


def kind_features(run, kind, noise_seed):
  """[R, D] features to substitute from: the clean ones for random/shuffle, else that kind's.

  The pixel kinds come from the feature cache over every split's images, the rows of the clean
  table, so a row means the same image in both.
  """
  if kind not in PIXEL_KINDS:
    return run.features.features
  out = inputs.image_features(run.config, run.dataset, run.workdir, None, kind=kind,
                              noise_seed=noise_seed)
  if not np.array_equal(out.image_ids, run.features.image_ids):
    raise RSVQAError(f"{out.path}: {kind} features cover other images than the clean features "
                     "the model was evaluated with")
  return out.features


def evaluate(workdir, split, kind, *, repeats=10, seed=0, which="best", data_root=None,
             dataset=None, features=None):
  """Adversarial testing of one workdir on `split`; writes the JSON and CSV, returns the table.

  `seed` draws the substitutions (and the noise images); `dataset` / `features` replace the
  ones the workdir's config names (in-memory tasks).
  """
  if kind not in KINDS:
    raise RSVQAError(f"--adversarial {kind}: choose one of {', '.join(KINDS)}")
  if repeats < 1:
    raise RSVQAError(f"--repeats {repeats}: must be at least 1")
  if checkpointing.read_config(workdir).model.blind:
    raise RSVQAError(f"{workdir}: a visual-blind model never sees an image; adversarial testing "
                     "applies to reference models")
  run, state, step = restore.restore(workdir, [split], which=which, data_root=data_root,
                                     dataset=dataset, features=features)
  clean = predict.clean_rows(run, split)[0]
  try:
    sub_rows = substitution_rows(kind, clean, repeats=repeats, seed=seed,
                                 batch_size=run.config.train.eval_batch_size)
  except RSVQAError as e:
    raise RSVQAError(f"split {split} of {workdir}: {e}") from None
  preds = predict.predict(run, state, split, image_rows=sub_rows,
                          features=kind_features(run, kind, seed))
  table = predict.accuracy(run, split, preds)
  table.update(kind=kind, split=split, seed=int(seed), checkpoint=which, step=step,
               workdir=os.path.abspath(workdir))
  json_path, csv_path = outputs.adversarial_paths(workdir, split, kind)
  os.makedirs(os.path.dirname(json_path), exist_ok=True)
  substituted = np.asarray(run.features.image_ids)[sub_rows[0]]
  predictions_lib.write(csv_path, run.dataset[split], run.vocab.decode(preds[0]),
                        substituted_image_id=substituted.tolist())
  with open(json_path, "w") as f:
    json.dump(table, f, indent=1)
  return table
