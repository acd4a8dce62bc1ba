"""The training loop: steps over the input stream, validation, checkpoints, exact resume, metrics.

An epoch is `steps_per_epoch` = shard rows // per-host batch steps of the continuous stream
(pipeline.batch_iterator); validation runs at every epoch end and the best validation OA is kept
in workdir/best (the test split is never looked at). Checkpoints (workdir/checkpoints) are
written every `checkpoint_every_steps` and at each epoch end, and hold the data iterator's
position, so a run restarted from its workdir ends with the same parameters as one never
stopped. Metrics go to workdir/metrics.jsonl and TensorBoard events in workdir/tensorboard.
A non-finite loss stops the run with the step it happened at; checkpoints after it are never
written, so the last one is good. With a frozen deterministic language model, its vectors are
computed once per distinct question (data.question_vectors) and the model trained and saved has
no text encoder at all: the steps read `question_vector`. With config.data.augment_variants,
training batches read each non-positional question's image row from a variant table drawn per
sample from (seed, step) (data.draw_variants); validation and test always read the clean table.
"""
import dataclasses
import functools
import json
import math
import os
import time

import jax
import ml_collections
import numpy as np
from tqdm import tqdm

from rsvqa_jax.bias import metrics as metrics_lib
from rsvqa_jax.data import pipeline
from rsvqa_jax.errors import RSVQAError
from rsvqa_jax.train import checkpointing, config_lib, data, model_builder, optimizers
from rsvqa_jax.train import sharding as shd
from rsvqa_jax.train import state as state_lib
from rsvqa_jax.train import steps as steps_lib

METRICS_FILE = "metrics.jsonl"


@dataclasses.dataclass
class Setup:
  """Everything built from a config before the first step."""

  config: object
  workdir: str
  dataset: object
  vocab: object
  features: object  # .features [N, D], .image_ids [N]
  tokenizer: object
  model: object  # no text_encoder when question_vectors is set
  columns: dict  # split name -> data.SplitColumns
  mesh: object
  question_vectors: object = None  # cached frozen-encoder vectors [Nq, Dq], rows in the columns
  augment_features: tuple = ()  # tables of config.data.augment_variants, rows as `features`

  def batch(self, local, features=None, variant=None):
    """data.model_batch of a pipeline batch (`features`: another image table, same rows).

    `variant` (data.draw_variants): table of each sample, 0 the clean one, i augment_features[i-1].
    """
    if variant is not None:
      tables = (self.features.features,) + tuple(self.augment_features)
      return data.model_batch(local, tables, self.question_vectors, variant)
    features = self.features.features if features is None else features
    return data.model_batch(local, features, self.question_vectors)


def setup(config, workdir, splits, *, dataset=None, features=None):
  """Dataset, vocabulary, features, model and encoded columns of `splits`."""
  shd.maybe_initialize_distributed()
  config_lib.check_weights(config, image=features is None)
  dataset = dataset if dataset is not None else data.load_dataset(config, workdir)
  vocab = data.answer_vocab(dataset, config, workdir)
  if features is None:  # every split's images: one cache entry serves training and evaluation
    features = data.image_features(config, dataset, workdir, None)
  model, tokenizer = model_builder.build(config, words=data.dataset_words(dataset),
                                         num_answers=len(vocab),
                                         image_dim=int(features.features.shape[1]))
  vectors, rows = None, {}
  if config_lib.caches_questions(config):
    vectors, rows = data.question_vectors(config, dataset, workdir, model.text_encoder, tokenizer)
    model.text_encoder = None  # never part of a step: not built into the state or checkpoints
  columns = {s: data.encode_split(dataset[s], vocab, tokenizer, features.image_ids,
                                  config.text.max_length, config.train.length_buckets, rows.get(s))
             for s in splits}
  return Setup(config, workdir, dataset, vocab, features, tokenizer, model, columns,
               shd.make_mesh(), vectors)


@functools.lru_cache(maxsize=32)
def _steps(optim_json, mesh, compute_dtype):
  optimizer = optimizers.make_optimizer(ml_collections.ConfigDict(json.loads(optim_json)))
  return (optimizer, steps_lib.make_train_step(optimizer, mesh, compute_dtype),
          steps_lib.make_eval_step(mesh, compute_dtype))


def compiled_steps(config, mesh):
  """(optimizer, train_step, eval_step) for these optimizer settings, mesh and compute dtype.

  The same jitted functions serve every run of the process (seeds, resumes, evaluations), so a
  model of the same shapes is compiled once.
  """
  optim = json.dumps(config_lib.to_dict(config)["optim"], sort_keys=True)
  return _steps(optim, mesh, config.train.compute_dtype)


def new_state(s):
  optimizer = compiled_steps(s.config, s.mesh)[0]
  state = state_lib.create(s.model, optimizer, seed=s.config.seed,
                           freeze_text=s.config.text.frozen)
  return shd.replicate(state, s.mesh), optimizer


def predict(s, state, split, eval_step=None):
  """Predicted answer ids for every row of `split` (ordered as the split)."""
  eval_step = eval_step or compiled_steps(s.config, s.mesh)[2]
  batch_size = s.config.train.eval_batch_size
  shd.check_batch_size(batch_size, s.mesh, "train.eval_batch_size")
  preds = np.full(len(s.columns[split].lengths), -1, np.int64)
  for rows, local in data.eval_batches(s.columns[split], batch_size):
    batch = shd.global_batch(s.batch(local), s.mesh)
    out = np.asarray(jax.device_get(eval_step(state, batch)))
    preds[rows[rows >= 0]] = out[rows >= 0]
  return preds


def accuracy_table(split, preds, answers):
  """{"oa", "aa", "per_type", ...} of predicted ids against the vocabulary ids.

  An answer outside the training vocabulary (id -1) is never right; it is counted in
  n_out_of_vocabulary so the user sees it.
  """
  correct = (preds == answers) & (answers >= 0)
  per_type = metrics_lib.per_type_accuracy(correct, split.qtype, split.qtypes)
  return {"oa": metrics_lib.accuracy(correct), "aa": metrics_lib.average_accuracy(per_type),
          "per_type": per_type, "n": int(len(correct)),
          "n_out_of_vocabulary": int((answers < 0).sum())}


class MetricsWriter:
  """JSON lines + TensorBoard, on host 0; on resume, lines past the restored step are dropped."""

  def __init__(self, workdir, resume_step):
    self.enabled = jax.process_index() == 0
    if not self.enabled:
      return
    self.path = os.path.join(workdir, METRICS_FILE)
    if os.path.exists(self.path):
      with open(self.path) as f:
        kept = [line for line in f if json.loads(line)["step"] <= resume_step]
      with open(self.path, "w") as f:
        f.writelines(kept)
    # Imported here: only the training loop writes TensorBoard events.
    from tensorboardX import SummaryWriter  # pylint: disable=g-import-not-at-top
    self.tb = SummaryWriter(os.path.join(workdir, "tensorboard"), purge_step=resume_step + 1)

  def write(self, record):
    if not self.enabled:
      return
    with open(self.path, "a") as f:
      f.write(json.dumps(record) + "\n")
    prefix = record["split"]
    for key, value in record.items():
      if key in ("step", "split", "epoch"):
        continue
      values = value if isinstance(value, dict) else {key: value}
      for name, v in values.items():
        if isinstance(v, (int, float)) and not math.isnan(v):
          tag = f"{prefix}/{key}/{name}" if isinstance(value, dict) else f"{prefix}/{name}"
          self.tb.add_scalar(tag, v, record["step"])
    self.tb.flush()

  def close(self):
    if self.enabled:
      self.tb.close()


def _schedule(config, n_train, mesh):
  local_bs = shd.check_batch_size(config.train.batch_size, mesh)
  shard_len = n_train // jax.process_count()
  if shard_len < local_bs:
    raise RSVQAError(f"config train.batch_size={config.train.batch_size}: larger than the "
                     f"{n_train} training samples")
  steps_per_epoch = shard_len // local_bs
  return local_bs, steps_per_epoch, config.train.num_epochs * steps_per_epoch


def train(config, workdir, *, dataset=None, features=None, log=print, augment_features=None):
  """Trains (or resumes, or reports finished) the run of `config` in `workdir`; returns a summary.

  `augment_features`: {variant: Features} for config.data.augment_variants, instead of the
  feature cache (in-memory tasks).
  """
  checkpointing.check_or_record_config(workdir, config, record=False)
  t = config.train
  train_split, val_split = config.data.train_split, config.data.val_split
  s = setup(config, workdir, [train_split, val_split], dataset=dataset, features=features)
  positional = None
  if config.data.augment_variants:
    s.augment_features = data.augment_tables(config, s.dataset, workdir, s.features,
                                             augment_features)
    positional = data.positional_questions(s.dataset[train_split].question.tolist())
  checkpointing.check_or_record_config(workdir, config)  # recorded once the config proved usable
  train_cols = s.columns[train_split]
  local_bs, steps_per_epoch, total_steps = _schedule(config, len(train_cols.lengths), s.mesh)
  state, _ = new_state(s)
  periodic = checkpointing.Checkpoints(os.path.join(workdir, "checkpoints"), t.keep_checkpoints)
  best = checkpointing.Checkpoints(os.path.join(workdir, "best"), 1)
  iterator = pipeline.batch_iterator(
      train_cols.columns, batch_size=local_bs, shuffle=True, seed=config.seed,
      num_epochs=t.num_epochs, drop_remainder=True, length_buckets=train_cols.buckets,
      lengths=train_cols.lengths)
  loop = {"best_oa": -1.0, "best_step": 0}
  step = 0
  latest = periodic.latest_step()
  if latest is not None:
    items, saved = periodic.restore(latest, state.checkpoint_items())
    state = state_lib.replace_items(state, items)
    # Checkpoints hold host 0's iterator; hosts consume one batch each per step, so its
    # position is every host's, and only the shard differs.
    position = {**json.loads(saved["iterator"]), "shard_index": jax.process_index()}
    iterator.set_state(json.dumps(position).encode())
    loop = saved["loop"]
    step = int(latest)
  if step >= total_steps:
    log(f"{workdir}: finished ({step} of {total_steps} steps); best validation OA "
        f"{loop['best_oa']:.4f} at step {loop['best_step']}")
    return {"finished": True, "step": step, **loop}
  if step:
    log(f"{workdir}: resuming at step {step} of {total_steps}")

  _, train_step, eval_step = compiled_steps(config, s.mesh)
  writer = MetricsWriter(workdir, step)
  val_split_rows = s.dataset[val_split]
  val_answers = s.columns[val_split].columns["answer"]
  last_saved = latest or 0

  def save(mgr, at):
    mgr.save(at, state.checkpoint_items(),
             {"iterator": iterator.get_state().decode(), "loop": loop, "epoch": at // steps_per_epoch})

  pending, window_start, window_samples = [], time.time(), 0
  bar = tqdm(total=total_steps, initial=step, unit="step", dynamic_ncols=True,
             disable=not t.progress_bar or jax.process_index() != 0)
  start_step = step
  try:
    while step < total_steps:
      batch = shd.agree_on_width(next(iterator), train_cols.columns,
                                 pipeline.DEFAULT_BUCKET_COLUMNS)
      variant = None if positional is None else data.draw_variants(
          positional[batch["index"]], len(s.augment_features), config.seed, step)
      state, m = train_step(state, shd.global_batch(s.batch(batch, variant=variant), s.mesh))
      step += 1
      pending.append((step, m))
      window_samples += t.batch_size
      bar.update(1)
      epoch_end = step % steps_per_epoch == 0 or step == total_steps
      ckpt_due = step % t.checkpoint_every_steps == 0 or epoch_end
      if step % t.log_every_steps == 0 or ckpt_due:
        got = jax.device_get([mm for _, mm in pending])
        for (at, _), mm in zip(pending, got):
          if not np.isfinite(mm["loss"]):
            kept = (f"the last good checkpoint is step {last_saved} in {periodic.directory}"
                    if last_saved else "no checkpoint was written before it")
            raise RSVQAError(f"loss is {float(mm['loss'])} at step {at} (epoch "
                             f"{(at - 1) // steps_per_epoch + 1}): training stopped; {kept}")
        elapsed = max(time.time() - window_start, 1e-9)
        n = sum(int(mm["n"]) for mm in got)
        record = {"step": step, "epoch": step / steps_per_epoch, "split": "train",
                  "loss": float(np.mean([mm["loss"] for mm in got])),
                  "accuracy": sum(int(mm["correct"]) for mm in got) / max(n, 1),
                  "samples_per_s": window_samples / elapsed}
        writer.write(record)
        bar.set_postfix(loss=f"{record['loss']:.4f}", samples_s=f"{record['samples_per_s']:.0f}")
        pending, window_start, window_samples = [], time.time(), 0
      if epoch_end:
        table = accuracy_table(val_split_rows, predict(s, state, val_split, eval_step), val_answers)
        writer.write({"step": step, "epoch": step / steps_per_epoch, "split": val_split, **table})
        if table["oa"] > loop["best_oa"]:
          loop = {"best_oa": table["oa"], "best_step": step}
          if step not in (best.manager.all_steps() or []):
            save(best, step)
        window_start = time.time()
      if ckpt_due:
        save(periodic, step)
        last_saved = step
      if t.stop_after_steps and step - start_step >= t.stop_after_steps and step < total_steps:
        log(f"{workdir}: stopping at step {step} (train.stop_after_steps)")
        break
  finally:
    bar.close()
    periodic.wait()
    best.wait()
    writer.close()
  return {"finished": step >= total_steps, "step": step, **loop, "state": state}
