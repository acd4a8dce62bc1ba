"""Clean evaluation of a trained workdir: every question of a split with its own image.

Restores the best-on-validation (or last) checkpoint, predicts through the run's compiled eval
step and writes WORKDIR/eval/SPLIT/predictions.csv (question_id, image_id, type, prediction,
answer) and accuracy.json (bias/metrics.accuracy_table: OA, AA, per-type accuracy and counts).
"""
import json
import os

from rsvqa_jax.bias import predictions as predictions_lib
from rsvqa_jax.eval import outputs
from rsvqa_jax.train import predict, restore


def evaluate(workdir, split, *, which="best", data_root=None, dataset=None, features=None):
  """Writes predictions.csv and accuracy.json for one workdir; returns the accuracy table.

  `dataset` / `features` replace the ones the workdir's config names (in-memory tasks).
  """
  run, state, step = restore.restore(workdir, [split], which=which, data_root=data_root,
                                     dataset=dataset, features=features)
  preds = predict.predict(run, state, split)
  table = predict.accuracy(run, split, preds)
  table.update(split=split, checkpoint=which, step=step, workdir=os.path.abspath(workdir))
  json_path, csv_path = outputs.accuracy_paths(workdir, split)
  os.makedirs(os.path.dirname(json_path), exist_ok=True)
  predictions_lib.write(csv_path, run.dataset[split], run.vocab.decode(preds[0]))
  with open(json_path, "w") as f:
    json.dump(table, f, indent=1)
  return table
