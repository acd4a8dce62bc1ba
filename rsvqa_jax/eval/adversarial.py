"""Adversarial testing of a trained workdir: answer each question with a substituted image.

The paper's Section 3.3, vectorized: each question is answered with K substituted images in one
pass of the run's compiled eval step (the question vector computed once, the head run on the K
image rows; train/predict.py), so K = 10 costs little more than a clean pass and the clean and
adversarial numbers come from the same code, dtype and mesh.

Substitution kinds:
  random   an image drawn from a pool, never the question's own (the paper's
           in-distribution choice). Pool "dataset" (default, as the paper: "a random image
           of the entire dataset") is every image of every split of the dataset; "split"
           the images of the evaluated split only;
  shuffle  a permutation inside each batch of the evaluation order (the original code's). A
           batch's questions often share images, so some keep their own: counted in the
           JSON (own_image_kept), warned about, and refused when it is every question;
  white / black / noise   pixels replaced before the encoder: their features come from the
           feature cache of that kind (same row order as the clean ones), and each question
           reads its own image's row of that table.
Written to WORKDIR/eval/SPLIT/ (eval_last/ for the last checkpoint; eval/outputs.py):
  adversarial_KIND.json             bias/metrics.accuracy_table over the K substitutions (mean,
                                    std and every repeat's values), what was tested (kind,
                                    pool and pool_images for random, own_image_kept for
                                    shuffle, identical_image for both (substitutes whose
                                    features equal the own image's), seed, ...) and the
                                    predictions' audit (bias/predictions.Aligned.summary)
  adversarial_KIND_predictions.csv  every repeat's answers (question_id, repeat 0..K-1,
                                    image_id, substituted_image_id, type, prediction, answer),
                                    the format `rsvqa-jax analyze --adversarial-predictions`
                                    reads and averages over the repeats as the JSON does
"""
import logging
import os

import numpy as np

from rsvqa_jax import config as config_lib
from rsvqa_jax.errors import RSVQAError
from rsvqa_jax.eval import accuracy, outputs
from rsvqa_jax.train import checkpointing, inputs, predict, restore
from rsvqa_jax.train import run as run_lib

KINDS = ("random", "shuffle", "white", "black", "noise")
PIXEL_KINDS = ("white", "black", "noise")
POOLS = ("dataset", "split")
REPEATS = 10  # substitutions per question unless told: the paper's, and the CLI's default
# Every repeat answers alike: one image for all (white, black), or one per image (noise, drawn
# once per image with the seed).
SAME_EVERY_REPEAT = ("white", "black", "noise")


_log = logging.getLogger(__name__)


def chosen_repeats(kind, repeats, flag):
  """The repeats a `kind` runs: `repeats`, or unless told REPEATS (1 where every repeat is the
  same). More than one of such a kind is said in a WARNING: K times the work for one answer.
  `flag`: how the caller's user spells the setting."""
  if repeats is None:
    return 1 if kind in SAME_EVERY_REPEAT else REPEATS
  if kind in SAME_EVERY_REPEAT and repeats > 1:
    image = "one noise image per image" if kind == "noise" else f"one {kind} image for all"
    _log.warning(f"{flag} {repeats}: every {kind} repeat answers alike ({image}), so they take "
                 f"{repeats} times the work of one for the same numbers")
  return repeats


def substitution_rows(kind, rows, *, repeats, seed, batch_size=None, pool=None):
  """Feature rows to use instead of `rows` (the clean rows, one per question): [K, N].

  For random/shuffle the rows index the same feature array as `rows`; random draws from
  `pool` (sorted distinct rows holding every row of `rows`; None: the rows of `rows`, i.e. the
  split). For white/black/noise the rows are returned unchanged: the caller passes the
  features of that pixel kind, which are stored in the same row order as the clean ones.
  """
  rows = np.asarray(rows, dtype=np.int64)
  n = len(rows)
  rng = np.random.default_rng(seed)
  if kind in PIXEL_KINDS:
    return np.broadcast_to(rows, (repeats, n)).copy()
  if kind == "random":
    split_pool = pool is None
    pool = np.unique(rows) if split_pool else np.asarray(pool, dtype=np.int64)
    if len(pool) < 2:
      raise RSVQAError("random substitution needs at least two distinct images in its pool"
                       + ("; this split holds one: draw from the dataset's (--pool dataset)"
                          if split_pool else ""))
    # Draw from the pool minus the question's own image: shift a draw over n-1 slots.
    own = np.searchsorted(pool, rows)
    if np.any(own >= len(pool)) or np.any(pool[np.minimum(own, len(pool) - 1)] != rows):
      raise ValueError("the random pool must be sorted distinct rows holding every question's own")
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


def own_images_kept(kind, rows, sub_rows, where):
  """How many of the [K, N] substitutions give a question its own image back (shuffle only).

  A batch of the evaluation order that holds few images leaves many questions on their own
  image: that part of a "shuffle" score is a clean score. Warned about; refused when it is all.
  """
  if kind != "shuffle":
    return None
  kept = int(np.sum(sub_rows == np.asarray(rows)[None]))
  if kept == sub_rows.size:
    raise RSVQAError(f"{where}: shuffle substitution gives every question its own image back "
                     f"(each batch of train.eval_batch_size questions holds a single image, of "
                     f"{len(np.unique(rows))} in the split); use --adversarial random")
  if kept:
    _log.warning("%s: shuffle substitution gives %d of %d answers (%.1f%%) their own image back "
                 "(a batch's questions share images); --adversarial random never does", where,
                 kept, sub_rows.size, 100 * kept / sub_rows.size)
  return kept


def identical_swaps(features, rows, sub_rows, where, sampled=64):
  """How many of the [K, N] substitutions give a question another row whose features equal its
  own image's (the same picture under another id): its answer cannot change there.

  Rows are grouped by `sampled` of their columns, then compared whole where those agree.
  Warned about; refused when it is every substitution that changes the row (the score would
  be the clean one).
  """
  own = np.broadcast_to(np.asarray(rows, np.int64)[None], sub_rows.shape)
  other = sub_rows != own
  if not other.any():
    return 0
  used = np.unique(np.concatenate([own[0], sub_rows[other]]))
  columns = np.unique(np.linspace(0, features.shape[1] - 1, sampled).astype(np.int64))
  group = np.zeros(int(used.max()) + 1, np.int64)
  group[used] = np.unique(np.asarray(features[used[:, None], columns[None]]), axis=0,
                          return_inverse=True)[1].ravel()
  candidate = other & (group[sub_rows] == group[own])
  width = len(group)
  codes = own[candidate] * width + sub_rows[candidate]
  same = [c for c in np.unique(codes).tolist()
          if np.array_equal(features[c // width], features[c % width])]
  n = int(np.isin(codes, same).sum())
  if n and n == int(other.sum()):
    raise RSVQAError(f"{where}: every substituted image has the features of the question's own "
                     "image (the same picture under other ids?): the score would be the clean one")
  if n:
    _log.warning("%s: %d of %d substitutions (%.1f%%) give a question an image whose features "
                 "equal its own's (the same picture under another id): its answer cannot change "
                 "there", where, n, sub_rows.size, 100 * n / sub_rows.size)
  return n


def kind_features(run, kind, noise_seed):
  """[R, D] features to substitute from: the clean ones for random/shuffle, else that kind's.

  The pixel kinds come from the feature cache over every split's images, the rows of the clean
  table, so a row means the same image in both; they are read as the run's head reads its
  clean features (pooled vectors, or flattened maps for the original head).
  """
  if kind not in PIXEL_KINDS:
    return run.features.features
  out = inputs.image_features(run.config, run.dataset, run.workdir, None, kind=kind,
                              noise_seed=noise_seed)
  if not np.array_equal(out.image_ids, run.features.image_ids):
    raise RSVQAError(f"{out.path}: {kind} features cover other images than the clean features "
                     "the model was evaluated with")
  return run_lib.head_features(run.config, out)[0].features


def pool_rows(run, pool):
  """Sorted feature rows random substitution draws from; None for pool "split" (its own rows).

  "dataset": the rows of every image of every split of the run's dataset, all of which the
  features table must hold.
  """
  if pool == "split":
    return None
  ids = np.unique(np.concatenate([s.image_id for s in run.dataset.splits.values()]))
  rows = np.flatnonzero(np.isin(np.asarray(run.features.image_ids), ids))
  if len(rows) != len(ids):
    raise RSVQAError(f"the image features hold {len(rows)} of the dataset's {len(ids)} images; "
                     "the dataset pool needs them all (or use --pool split)")
  return rows


def evaluate(workdir, split, kind, *, repeats=REPEATS, seed=0, pool="dataset", which="best",
             data_root=None, dataset=None, features=None):
  """Adversarial testing of one workdir on `split`; writes the JSON and CSV, returns the table.

  `seed` draws the substitutions (and the noise images); `pool` ("dataset" or "split") is where
  random draws its images; `dataset` / `features` replace the ones the workdir's config names
  (in-memory tasks).
  """
  if kind not in KINDS:
    raise RSVQAError(f"--adversarial {kind}: choose one of {', '.join(KINDS)}")
  if pool not in POOLS:
    raise RSVQAError(f"--pool {pool}: choose one of {', '.join(POOLS)}")
  if not 1 <= repeats <= config_lib.MAX_REPEATS:
    raise RSVQAError(f"--repeats {repeats}: must be from 1 to {config_lib.MAX_REPEATS}")
  if checkpointing.read_config(workdir).model.blind:
    raise RSVQAError(f"{workdir}: a visual-blind model never sees an image; adversarial testing "
                     "applies to reference models")
  run, state, step = restore.restore(workdir, [split], which=which, data_root=data_root,
                                     dataset=dataset, features=features)
  clean = predict.clean_rows(run, split)[0]
  random = kind == "random"
  rows = pool_rows(run, pool) if random else None
  try:
    sub_rows = substitution_rows(kind, clean, repeats=repeats, seed=seed,
                                 batch_size=run.config.train.eval_batch_size, pool=rows)
  except RSVQAError as e:
    raise RSVQAError(f"split {split} of {workdir}: {e}") from None
  where = f"split {split} of {workdir}"
  kept = own_images_kept(kind, clean, sub_rows, where)
  same = None if kind in PIXEL_KINDS else identical_swaps(run.features.features, clean,
                                                          sub_rows, where)
  preds = predict.predict(run, state, split, image_rows=sub_rows,
                          features=kind_features(run, kind, seed),
                          desc=f"adversarial {kind} x{repeats} {split}")
  table = predict.accuracy(run, split, preds)
  n_pool = len(np.unique(clean)) if rows is None else len(rows)
  table.update(kind=kind, pool=pool if random else None, pool_images=n_pool if random else None,
               own_image_kept=kept, identical_image=same, split=split, seed=int(seed),
               checkpoint=which, step=step, workdir=os.path.abspath(workdir))
  substituted = np.asarray(run.features.image_ids)[sub_rows]
  return accuracy.write_results(run, split, preds, table,
                                *outputs.adversarial_paths(workdir, split, kind, which),
                                repeats=True,
                                substituted_image_id=substituted.tolist())
