"""Predictions of a run's state on a split, through its one compiled eval step, and their accuracy.

Clean evaluation is one image row per question (K = 1); adversarial testing passes K
substituted rows per question and, for pixel replacements, another features table with the same
rows. Both go through the same jitted step (train/steps.make_eval_step), so their numbers
differ only by the images, never by the dtype, the mesh or the code path.
"""
import jax
import numpy as np

from rsvqa_jax import progress
from rsvqa_jax.bias import metrics as metrics_lib
from rsvqa_jax.train import inputs
from rsvqa_jax.train import run as run_lib
from rsvqa_jax.train import sharding as shd


def clean_rows(run, split):
  """int [1, N]: each question's own image row in the run's features table."""
  return np.asarray(run.columns[split].columns["image_index"], np.int64)[None]


def predict(run, state, split, *, image_rows=None, features=None, desc=None):
  """Answer ids [K, N] for every question of `split` (in the split's order).

  Args:
    run: a train.run.Run whose columns hold `split`.
    state: its TrainState (placed on run.mesh).
    split: split name.
    image_rows: int [K, N] rows of `features` each question sees in each of K repeats
      (default: its own image, K = 1).
    features: [R, D] table the rows index (default: the run's clean features).
    desc: the progress bar's label (default: "predict SPLIT").
  """
  return predict_columns(
      state, run.columns[split], eval_step=run_lib.compiled_steps(run.config, run.mesh)[2],
      mesh=run.mesh, batch_size=run.config.train.eval_batch_size,
      features=run.features.features if features is None else features,
      image_rows=clean_rows(run, split) if image_rows is None else image_rows,
      question_vectors=run.question_vectors, desc=desc or f"predict {split}")


def predict_columns(state, split_columns, *, eval_step, mesh, batch_size, features, image_rows,
                    question_vectors=None, desc="predict"):
  """`predict` over encoded columns (inputs.SplitColumns) with an eval step of steps.py; a
  progress bar labelled `desc` counts the questions."""
  image_rows = np.asarray(image_rows)
  preds = np.full(image_rows.shape, -1, np.int64)
  with progress.bar(total=image_rows.shape[1], desc=desc, unit="q", leave=False,
                    enabled=jax.process_index() == 0) as bar:
    for rows, local in inputs.eval_batches(split_columns, shd.eval_width(batch_size, mesh)):
      batch = inputs.eval_model_batch(local, features, image_rows, question_vectors)
      out = np.asarray(jax.device_get(eval_step(state, shd.global_batch(batch, mesh))))
      preds[:, rows[rows >= 0]] = out[rows >= 0].T
      bar.update(int((rows >= 0).sum()))
  return preds


def accuracy(run, split, preds):
  """The accuracy table (bias/metrics.accuracy_table) of answer ids [K, N] on `split`.

  An answer outside the training vocabulary (id -1) is never right; it is counted in
  n_out_of_vocabulary so the user sees it.
  """
  answers = run.columns[split].columns["answer"]
  records = run.dataset[split]
  table = metrics_lib.accuracy_table((preds == answers) & (answers >= 0), records.qtype,
                                     records.qtypes)
  return {**table, "n_out_of_vocabulary": int((answers < 0).sum())}
