"""Adversarial testing of a trained workdir: restore it, substitute images, write the results.

Glue between a training workdir and the vectorized evaluator (bias/adversarial.py): the best
(or last) checkpoint is restored into an NNX model, the question inputs come from the split's
encoded columns, each question's clean feature row is its image's row in the features array,
and for white / black / noise the features of that pixel kind come from the feature cache (same
row order as the clean ones). Written to WORKDIR/eval/SPLIT/:
  adversarial_KIND.json             OA, AA and per-type accuracy, mean and std over the K
                                    substitutions, and every repeat's values
  adversarial_KIND_predictions.csv  the first repeat's answers (question_id, image_id,
                                    substituted_image_id, type, prediction, answer), the
                                    format `rsvqa-jax analyze --adversarial-predictions` reads
"""
import csv
import json
import os

import numpy as np

from rsvqa_jax.bias import adversarial
from rsvqa_jax.errors import RSVQAError

PIXEL_KINDS = ("white", "black", "noise")


def output_paths(workdir, split, kind):
  """(json path, predictions csv path) of one adversarial evaluation."""
  out = os.path.join(workdir, "eval", split)
  return (os.path.join(out, f"adversarial_{kind}.json"),
          os.path.join(out, f"adversarial_{kind}_predictions.csv"))


def kind_features(config, dataset, workdir, kind, clean, *, noise_seed=0):
  """[R, D] features to substitute from: the clean ones for random/shuffle, else that kind's.

  The pixel kinds are read from (or written to) the feature cache over the same images as
  `clean` (every split), so a row means the same image in both arrays.
  """
  if kind not in PIXEL_KINDS:
    return np.asarray(clean.features)
  # Imported here: the cache pulls in the image encoders.
  from rsvqa_jax.train import data, feature_cache  # pylint: disable=g-import-not-at-top
  image_cfg = feature_cache.default_image_config()
  image_cfg.update(config.image)
  out = feature_cache.image_features(dataset, None, image_cfg,
                                     os.path.join(data.cache_dir(config, workdir), "features"),
                                     kind=kind, noise_seed=noise_seed)
  if not np.array_equal(out.image_ids, clean.image_ids):
    raise RSVQAError(f"{out.path}: {kind} features cover other images than the clean features "
                     "the model was evaluated with")
  return np.asarray(out.features)


def restore_model(s, workdir, which="best"):
  """(NNX model, step) of a workdir's best-on-validation or last checkpoint."""
  from rsvqa_jax.train import checkpointing, loop  # pylint: disable=g-import-not-at-top
  state, _ = loop.new_state(s)
  mgr = checkpointing.Checkpoints(
      os.path.join(workdir, "best" if which == "best" else "checkpoints"), 1)
  step = mgr.latest_step()
  if step is None:
    raise RSVQAError(f"{mgr.directory}: no checkpoint to evaluate (has training run?)")
  items, _ = mgr.restore(step, state.checkpoint_items())
  return state.replace(**items).model(), int(step)


def question_inputs(s, split):
  """The model's question inputs for every row of `split`: cached vectors, or tokens + mask."""
  cols = s.columns[split].columns
  if s.question_vectors is not None:
    return {"question_vector": np.asarray(s.question_vectors[cols["question_index"]], np.float32)}
  return {"tokens": cols["tokens"], "mask": cols["mask"]}


def summarize(predictions, answers, qtypes, types):
  """{"oa", "aa", "per_type"} as [mean, std] over repeats, and each repeat's values."""
  agg = adversarial.accuracy_over_repeats(predictions, answers, qtypes)
  repeats = [adversarial.accuracy_over_repeats(p[None], answers, qtypes) for p in predictions]
  present = [t for t in types if t in agg]
  return {
      "oa": list(agg["OA"]), "aa": list(agg["AA"]),
      "per_type": {t: list(agg[t]) for t in present},
      "per_repeat": {"oa": [r["OA"][0] for r in repeats], "aa": [r["AA"][0] for r in repeats],
                     "per_type": {t: [r[t][0] for r in repeats] for t in present}},
  }


def evaluate_workdir(workdir, split, kind, *, repeats=10, seed=0, which="best", data_root=None,
                     dataset=None, features=None):
  """Adversarial testing of one workdir on `split`; writes the JSON and CSV, returns the JSON.

  `dataset` / `features` replace the ones the workdir's config names (in-memory tasks).
  """
  if kind not in adversarial.KINDS:
    raise RSVQAError(f"--adversarial {kind}: choose one of {', '.join(adversarial.KINDS)}")
  if repeats < 1:
    raise RSVQAError(f"--repeats {repeats}: must be at least 1")
  from rsvqa_jax.train import checkpointing, loop  # pylint: disable=g-import-not-at-top
  config = checkpointing.read_config(workdir)
  if config.model.blind:
    raise RSVQAError(f"{workdir}: a visual-blind model never sees an image; adversarial testing "
                     "applies to reference models")
  if data_root:
    config.data.root = data_root
  s = loop.setup(config, workdir, [split], dataset=dataset, features=features)
  if split not in s.dataset.splits:
    raise RSVQAError(f"--split {split}: the dataset has splits {sorted(s.dataset.splits)}")
  model, step = restore_model(s, workdir, which)
  cols = s.columns[split].columns
  rows = np.asarray(cols["image_index"], np.int64)
  batch_size = config.train.eval_batch_size
  try:
    sub_rows = adversarial.substitution_rows(kind, rows, repeats=repeats, seed=seed,
                                             batch_size=batch_size)
  except ValueError as e:
    raise RSVQAError(f"split {split} of {workdir}: {e}") from None
  feats = kind_features(config, s.dataset, workdir, kind, s.features, noise_seed=seed)
  result = adversarial.evaluate_substituted(model, question_inputs(s, split), feats, sub_rows,
                                            batch_size=batch_size)
  records = s.dataset[split]
  summary = summarize(result.predictions, cols["answer"], records.qtype, records.qtypes)
  summary.update(kind=kind, split=split, repeats=int(repeats), seed=int(seed), checkpoint=which,
                 step=step, workdir=os.path.abspath(workdir))
  json_path, csv_path = output_paths(workdir, split, kind)
  os.makedirs(os.path.dirname(json_path), exist_ok=True)
  substituted = np.asarray(s.features.image_ids)[sub_rows[0]]
  with open(csv_path, "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["question_id", "image_id", "substituted_image_id", "type", "prediction", "answer"])
    for row in zip(records.question_id.tolist(), records.image_id.tolist(), substituted.tolist(),
                   records.qtype.tolist(), s.vocab.decode(result.predictions[0]),
                   records.answer.tolist()):
      w.writerow(row)
  with open(json_path, "w") as f:
    json.dump(summary, f, indent=1)
  return summary
