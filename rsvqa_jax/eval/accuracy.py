"""Clean evaluation of a trained workdir: every question of a split with its own image.

Restores the best-on-validation (or last) checkpoint, predicts through the run's compiled eval
step and writes WORKDIR/eval/SPLIT/predictions.csv (question_id, image_id, type, prediction,
answer) and accuracy.json (bias/metrics.accuracy_table: OA, AA, per-type accuracy and counts;
under "predictions" the audit `analyze` applies to the same file: how many predictions the
answer normalisation maps and how many fall outside the training answer space; under
"split_sha256" the evaluated split's fingerprint, records.Split.fingerprint).
"""
import logging
import os

from rsvqa_jax import storage
from rsvqa_jax.bias import predictions as predictions_lib
from rsvqa_jax.eval import outputs
from rsvqa_jax.train import predict, restore

_log = logging.getLogger(__name__)


def write_results(run, split, preds, table, json_path, csv_path, *, repeats, **extra):
  """Writes the predictions CSV of answer ids [K, N] and the JSON `table` with their audit.

  `repeats`: write every repeat with a `repeat` column (else the only one, K = 1); `extra`:
  more CSV columns (bias/predictions.write). The audit passes our own answers through the
  normalisation and answer-space check `analyze` applies to any file, so both agree.
  `types_absent`: the training split's question types that `split` lacks, so that a table says
  its AA averages fewer types (found here, once per evaluation, not at every validation).
  """
  records = run.dataset[split]
  present = set(records.qtypes)
  table["types_absent"] = [t for t in run.dataset[run.config.data.train_split].qtypes
                           if t not in present]
  decoded = [run.vocab.decode(p) for p in preds]
  audit = predictions_lib.normalised(decoded, records, run.dataset.name, set(run.vocab.answers))
  table["predictions"] = audit.summary()
  table["split_sha256"] = records.fingerprint()  # which data: `tables` pools alike
  folder = os.path.dirname(json_path)
  os.makedirs(folder, exist_ok=True)
  # One pair at a time: two evaluations of a workdir at once (one started while it trained, at
  # another best step) left one's JSON beside the other's CSV.
  with storage.building_alone(folder, os.path.basename(json_path)):
    storage.remove(json_path)  # an earlier evaluation's must not vouch for the CSV replaced next
    predictions_lib.write(csv_path, records, decoded if repeats else decoded[0], **extra)
    storage.write_json(json_path, table)  # last: its presence says the evaluation is complete
  return table


def evaluate(workdir, split, *, which="best", data_root=None, dataset=None, features=None):
  """Writes predictions.csv and accuracy.json for one workdir; returns the accuracy table.

  `dataset` / `features` replace the ones the workdir's config names (in-memory tasks).
  """
  run, state, step = restore.restore(workdir, [split], which=which, data_root=data_root,
                                     dataset=dataset, features=features)
  if split == run.config.data.train_split:
    _log.warning(f"{workdir}: split {split} is the one it trained on (data.train_split={split}): "
                 "this score measures memory, not what it learnt")
  elif which == "best" and split == run.config.data.val_split:
    _log.warning(f"{workdir}: split {split} is the one its best checkpoint was chosen on "
                 f"(data.val_split={split}): this score is optimistic")
  trained = set(run.dataset[run.config.data.train_split].qtypes)
  untrained = [t for t in run.dataset[split].qtypes if t not in trained]
  if untrained:  # analyze said so of the same data; evaluate's AA averaged them in unsaid
    _log.warning(f"{workdir}: split {split} has question type(s) {', '.join(untrained)} that "
                 f"the training split {run.config.data.train_split} has none of: the model "
                 "answers them untrained, and AA averages them in")
  preds = predict.predict(run, state, split)
  table = predict.accuracy(run, split, preds)
  table.update(split=split, checkpoint=which, step=step, workdir=os.path.abspath(workdir))
  return write_results(run, split, preds, table, *outputs.accuracy_paths(workdir, split, which),
                       repeats=False)
