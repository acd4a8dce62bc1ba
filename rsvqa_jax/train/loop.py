"""The training loop: steps over the input stream, validation, checkpoints, exact resume, metrics.

Without a dataset given, the explicit input stages run first (train/prepare.py). An epoch is
`steps_per_epoch` = shard rows // per-host batch steps of the continuous stream
(pipeline.batch_iterator); a batch the devices do not divide is padded with masked rows
(sharding.batch_layout: said in the log, recorded in each train record of metrics.jsonl);
validation runs at every epoch end and the best validation OA is kept in workdir/best (the test
split is never looked at). Checkpoints (workdir/checkpoints) are
written every `checkpoint_every_steps` and at each epoch end, and hold the data iterator's
position, so a run restarted from its workdir ends with the same parameters as one never
stopped. Metrics go to workdir/metrics.jsonl and TensorBoard events in workdir/tensorboard.
A diverging run (loss running away from its early level, a non-finite loss or gradient; see
Divergence) stops with the step it happened at; checkpoints after it are never written. With a frozen deterministic language model, its vectors are
computed once per distinct question (inputs.question_vectors) and the model trained and saved has
no text encoder at all: the steps read `question_vector`. With config.data.augment_variants,
training batches read each non-positional question's image row from a variant table drawn per
sample from (seed, step) (inputs.draw_variants); validation and test always read the clean table.
"""
import contextlib
import json
import logging
import math
import os
import shutil
import time

import jax
import numpy as np

from rsvqa_jax import config as config_lib
from rsvqa_jax import cpu_units, progress, storage
from rsvqa_jax.bias import tables
from rsvqa_jax.data import pipeline
from rsvqa_jax.errors import RSVQAError
from rsvqa_jax.train import checkpointing, inputs, metrics_log, prepare, run_record
from rsvqa_jax.train import tensorboard_events
from rsvqa_jax.train import predict as predict_lib
from rsvqa_jax.train import run as run_lib
from rsvqa_jax.train import sharding as shd

_log = logging.getLogger(__name__)

# metrics.jsonl keys that are no TensorBoard curve: positions, and the batch of a train record
# (train.batch_size or answerability.batch_pools, and the rows a step computes once padded over
# the devices: shd.batch_layout).
NOT_PLOTTED = ("step", "split", "epoch", "batch_size", "padded_batch_size", "batch_pools",
               "padded_batch_pools")


def validation_record(run, state, split):
  """The clean accuracy of `split` at this state, as metrics.jsonl keeps it."""
  table = predict_lib.accuracy(run, split, predict_lib.predict(run, state, split))
  return {k: v for k, v in table.items() if k not in ("repeats", "std", "per_repeat")}


class MetricsWriter:
  """JSON lines + TensorBoard, on host 0; on resume, lines past the restored step are dropped."""

  def __init__(self, workdir, resume_step):
    self.enabled = jax.process_index() == 0
    if not self.enabled:
      return
    self.path = os.path.join(workdir, metrics_log.METRICS_FILE)
    metrics_log.keep_until(workdir, resume_step)
    self.tb = tensorboard_events.EventWriter(os.path.join(workdir, "tensorboard"),
                                             purge_step=resume_step + 1)

  def write(self, record):
    if not self.enabled:
      return
    with open(self.path, "a", encoding="utf-8") as f:
      f.write(storage.json_line(record) + "\n")
    prefix = record["split"]
    for key, value in record.items():
      if key in NOT_PLOTTED:
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
  """(shd.BatchLayout of train.batch_size, steps per epoch, total steps)."""
  layout = shd.batch_layout(config.train.batch_size, mesh)
  shard_len = n_train // jax.process_count()
  if shard_len < layout.local:
    raise RSVQAError(f"config train.batch_size={config.train.batch_size}: larger than the "
                     f"{n_train} training samples; set train.batch_size to "
                     f"{shard_len * jax.process_count()} or less")
  steps_per_epoch = shard_len // layout.local
  return layout, steps_per_epoch, config.train.num_epochs * steps_per_epoch


def _check_questions(config, dataset):
  """Refusals from the questions alone, made before an encoder is pretrained or any feature
  extracted (prepare.run_inputs' checks): an empty train or val split, a train.batch_size
  larger than the train split. _schedule checks the batch again on the run's columns."""
  train_split, val_split = config.data.train_split, config.data.val_split
  for split in (train_split, val_split):
    if split in dataset.splits and not len(dataset[split]):
      key = "train_split" if split == train_split else "val_split"
      raise RSVQAError(f"{dataset.root}: split {split!r} has no active question; training needs "
                       f"questions in {train_split} and {val_split} (another split: "
                       f"--config.data.{key}=SPLIT)")
  if train_split in dataset.splits:
    _schedule(config, len(dataset[train_split]), shd.make_mesh())


def _build(config, workdir, dataset, read, features, augment_features, log):
  """(Run, positional flags of the train questions or None) after the explicit input stages
  (`read`: the real dataset prepare.real_dataset read, when `dataset` is None)."""
  if dataset is None:
    dataset = prepare.run_inputs(config, workdir, log, read,
                                 checks=lambda d: _check_questions(config, d))
  else:
    _check_questions(config, dataset)
  train_split, val_split = config.data.train_split, config.data.val_split
  run = run_lib.build(config, workdir, [train_split, val_split], dataset=dataset,
                      features=features)
  warn_if_degenerate(run, train_split, val_split)
  positional = None
  if config.data.augment_variants:
    run.augment_features = inputs.augment_tables(config, run.dataset, workdir, run.features,
                                                 augment_features)
    positional = inputs.positional_questions(run.dataset[train_split].question.tolist())
  return run, positional


def resume(periodic, best, state, iterator, log):
  """(state, loop record, step) of the newest verified periodic checkpoint, or the fresh ones.

  A corrupted checkpoint skipped is a WARNING (restore_latest), never only a line of `log`, the
  routine progress a quiet run silences. A best checkpoint the record names but `best/` lacks (a
  kill between the two commits of one epoch end) is written again from the periodic checkpoint
  of that step, the same state; a best checkpoint newer than every periodic one (the periodic
  commit of its epoch end failed: a kill, a full disk) is resumed from, with a WARNING, where
  the run started over from the older periodic one or from step 0.
  """
  found = periodic.restore_latest(state.checkpoint_items())
  newest = found[2] if found else 0
  if any(s > newest for s in best.steps()):
    try:
      from_best = best.restore_latest(state.checkpoint_items())
    except RSVQAError as e:  # none of them verifies: the periodic one stands
      _log.warning("%s", e)
      from_best = None
    if from_best is not None and from_best[2] > newest:
      _log.warning("%s: no checkpoint of step %d (its save did not complete); resuming from "
                   "%s/%d, the same state", periodic.directory, from_best[2], best.directory,
                   from_best[2])
      found = from_best
  if found is None:
    return state, {"best_oa": -1.0, "best_step": 0}, 0
  items, saved, step = found
  # Checkpoints hold host 0's iterator; hosts consume one batch each per step, so its position
  # is every host's, and only the shard differs.
  try:
    position = {**json.loads(saved["iterator"]), "shard_index": jax.process_index()}
    iterator.set_state(json.dumps(position).encode())
  except (KeyError, TypeError, ValueError) as e:  # a position of other training data
    raise RSVQAError(f"checkpoint {periodic.directory}/{step}: its data position does not fit the "
                     f"training data now ({e}); the dataset changed since: train in another "
                     "--workdir") from None
  state, loop = state.replace(**items), saved["loop"]
  if loop["best_step"] == step and step not in best.steps():
    log(f"{best.directory}: step {step} missing (interrupted save); written again from "
        f"{periodic.directory}/{step}")
    best.save(step, state.checkpoint_items(), saved)
    best.wait()
  return state, loop, step


def stopped(workdir, step, last_saved):
  """What train.stop_after_steps (a stop as if killed: nothing saved on the way out) leaves: the
  step the next run resumes at, so that steps past the last checkpoint are not lost unseen."""
  if last_saved == step:
    kept = "its checkpoint holds it"
  elif last_saved:
    kept = (f"the next run resumes at step {last_saved}, the last checkpoint (steps since are "
            "done again)")
  else:
    kept = "no checkpoint was written: the next run starts over"
  return (f"{workdir}: stopping at step {step} (train.stop_after_steps, as if killed); {kept} "
          "(train.checkpoint_every_steps sets how often one is)")


class Divergence:
  """Stops a run whose training loss runs away, before a diverged state is checkpointed.

  The early level is the loss of the run's first step, before any update (about log of the
  number of answers: a model that learned nothing), kept in the loop record so a resumed run
  compares against the same level; a run diverges when its loss stays above
  train.divergence_factor x that level for train.divergence_steps steps in a row, or when a
  loss or a gradient is not finite. The count of steps in a row is kept in the loop record too:
  started again, a run that stopped diverging counted from 0, and its last epochs ended "done".
  A stop, and a run that ends above the level, are recorded in the workdir
  (run_record.DIVERGED_FILE), so that evaluate and tables say so instead of offering a rerun.
  """

  def __init__(self, config, loop):
    self.factor = config.train.divergence_factor
    self.patience = config.train.divergence_steps
    self.early = loop.get("early_loss")
    self.run = loop.get("divergence_run", 0)
    self.last = loop.get("last_loss")

  def check(self, steps_metrics):
    """(step, reason) of the first divergence among [(step, fetched metrics)], else None."""
    for at, m in steps_metrics:
      loss = self.last = float(m["loss"])
      if self.early is None and np.isfinite(loss):
        self.early = loss
      if not np.isfinite(loss):
        return at, f"loss is {loss}"
      if not bool(m["finite_grads"]):
        return at, "a gradient is not finite"
      if self.early is None or not self.factor:
        continue
      self.run = self.run + 1 if loss > self.factor * self.early else 0
      if self.run >= self.patience:
        return at, (f"loss {loss:.4g} stayed above {self.factor:g} x its early level "
                    f"{self.early:.4g} for {self.patience} steps")
    return None

  def record(self, loop):
    """The loop record with the early level, so a resumed run keeps comparing against it."""
    return {**loop, "early_loss": self.early, "divergence_run": self.run, "last_loss": self.last}

  def start(self, workdir, step):
    """At the start of a run: started afresh (step 0), a record of an earlier attempt in this
    workdir says nothing of this one."""
    if not step:
      record_divergence(workdir, None, 0)

  def close(self, workdir, step):
    """At the end of a finished run: a WARNING and a record when its loss ended above the
    level (unsettled), else the record of an earlier stop removed."""
    said = self.unsettled()
    record_divergence(workdir, said, step)
    if said:
      _log.warning(f"{workdir}: {said} (lower optim.lr / optim.text_lr)")

  def unsettled(self):
    """What to say when the run ended with its loss above the divergence level, for fewer steps
    than stop it (a run shorter than train.divergence_steps at a huge learning rate finished
    as "done"), else None."""
    if not self.run:
      return None
    return (f"the training loss ended at {self.last:.4g}, above {self.factor:g} x its early level "
            f"{self.early:.4g} for its last {self.run} step(s) (the run stops at "
            f"train.divergence_steps={self.patience}): it may have diverged")


def record_divergence(workdir, said, step):
  """run_record.record_divergence on process 0; a file it cannot write is a WARNING, so the
  divergence itself is what the run ends with."""
  if jax.process_index() != 0:
    return
  try:
    run_record.record_divergence(workdir, said, step)
  except OSError as e:
    _log.warning(f"{workdir}: {run_record.DIVERGED_FILE} not written ({e})")


def train(config, workdir, *, dataset=None, features=None, log=_log.info, augment_features=None):
  """Trains (or resumes, or reports finished) the run of `config` in `workdir`; returns a summary.

  Without `dataset`, the explicit input stages run first (train/prepare.py: a synthetic
  config's dataset, a synthetic_resnet's pretraining). `augment_features`: {variant: Features}
  for config.data.augment_variants, instead of the feature cache (in-memory tasks). One run at
  a time per workdir: host 0 holds workdir/.lock while it trains.
  """
  config_lib.check(config)
  config_lib.check_weights(config, image=features is None)  # before any stage does work
  # The data before the workdir: a wrong data.root or data.name is named as such, and a refused
  # run writes nothing there.
  read = prepare.real_dataset(config, workdir) if dataset is None else None
  checkpointing.check_or_record_config(workdir, config, record=False)
  shd.maybe_initialize_distributed()  # before anything asks JAX about processes or devices
  with run_lock(workdir, "training"):
    return _train(config, workdir, dataset, read, features, augment_features, log)


@contextlib.contextmanager
def run_lock(workdir, what):
  """Host 0 holds workdir/.lock while `what` runs. A workdir the run created is removed again
  when it fails (RSVQAError) before its config is recorded, with the parent folders it made
  while they stay empty: a refused run leaves no folder."""
  created = _missing_folders(workdir)
  first = jax.process_index() == 0
  # A run refused at the lock removes nothing: the folder it found missing may be the one the
  # run holding the lock has just made (two studies started together lost their lock so).
  with storage.locked(workdir, what) if first else contextlib.nullcontext():
    try:
      yield
    except RSVQAError:
      if (created and first and os.path.isdir(workdir)
          and set(os.listdir(workdir)) <= {storage.LOCK, inputs.ANSWERS_FILE}):
        shutil.rmtree(workdir)
        for folder in created[1:]:
          try:
            os.rmdir(folder)  # only an empty folder goes
          except OSError:
            break
      raise


def _missing_folders(workdir):
  """`workdir` and its ancestors that do not exist yet, innermost first."""
  missing, folder = [], os.path.abspath(workdir)
  while not os.path.lexists(folder):
    missing.append(folder)
    folder = os.path.dirname(folder)
  return missing


def warn_if_degenerate(run, train_split, val_split):
  """WARNINGs for settings a run can train with but learns or shows nothing from: a train split
  of one answer, a val split whose answers are all outside the training answers (OA 0), the
  train split as val split (the best checkpoint picked on what it trained on), optim.lr 0,
  images whose features are all alike (validate and training said nothing of a dataset of
  black images; only an adversarial test refused it, after every model of a study trained)."""
  if val_split == train_split:
    _log.warning("data.val_split is the train split %s: the best checkpoint is picked on the "
                 "questions it trains on, and validation OA overstates", train_split)
  if run.config.optim.lr == 0:
    _log.warning("optim.lr is 0: the answer head keeps its initial weights, so the run learns "
                 "nothing to answer with")
  if len(run.vocab) == 1:
    _log.warning("split %s has one answer (%r): every prediction is that answer, whatever the "
                 "image or question", train_split, run.vocab.answers[0])
  answers = np.asarray(run.columns[val_split].columns["answer"])
  if len(answers) and (answers < 0).all():
    _log.warning("none of the %d %s answers is among the %s answers: every prediction counts "
                 "wrong there, so validation OA reads 0 and picks no better checkpoint",
                 len(answers), val_split, train_split)
  table = run.features.features
  if len(table) > 1 and _rows_alike(table):
    _log.warning("every image gives the same features (%d images: all black, all one image, or "
                 "an encoder that ignores its input): the model cannot tell images apart, so its "
                 "scores are a visual-blind model's and swapping images changes nothing",
                 len(table))


def _rows_alike(table, chunk_bytes=64 << 20):
  """Whether every row of `table` equals its first. A cached table may be a memory map of
  gigabytes, its rows flattened maps of megabytes: the second row first (a real table differs
  there), then chunks of at most `chunk_bytes`."""
  first = np.asarray(table[0])
  if not np.array_equal(np.asarray(table[1]), first):
    return False
  rows = max(1, chunk_bytes // max(first.nbytes, 1))
  return not any((np.asarray(table[i:i + rows]) != first).any()
                 for i in range(2, len(table), rows))


def _train(config, workdir, dataset, read, features, augment_features, log):
  t = config.train
  run, positional = _build(config, workdir, dataset, read, features, augment_features, log)
  train_cols = run.columns[config.data.train_split]
  layout, steps_per_epoch, total_steps = _schedule(config, len(train_cols.lengths), run.mesh)
  checkpointing.check_or_record_config(workdir, config)  # recorded once the config proved usable
  inputs.record_data(workdir, run.dataset, config)
  periodic = checkpointing.Checkpoints(os.path.join(workdir, "checkpoints"), t.keep_checkpoints)
  best = checkpointing.Checkpoints(os.path.join(workdir, "best"), 1)
  iterator = pipeline.batch_iterator(
      train_cols.columns, batch_size=layout.local, shuffle=True, seed=config.seed,
      num_epochs=t.num_epochs, drop_remainder=True, length_buckets=train_cols.buckets,
      lengths=train_cols.lengths)
  state, loop, step = resume(periodic, best, run_lib.new_state(run), iterator, log)
  if step >= total_steps:
    log(f"{workdir}: finished ({step} of {total_steps} steps); best validation OA "
        f"{tables.percent(loop['best_oa'])} at step {loop['best_step']}")
    return {"finished": True, "step": step, **loop}
  if step:
    log(f"{workdir}: resuming at step {step} of {total_steps}")
  if layout.padded != layout.size:
    log(f"{workdir}: {layout.describe('train.batch_size')} (weight 0: loss, gradients and "
        "metrics are those of the configured batch)")
  note = cpu_units.bf16_note(jax.default_backend(), t.compute_dtype)
  if note:
    log(f"{workdir}: {note}")
  if run.vocab.dropped:  # RSVQAxBEN's protocol keeps 1,000 answers: said, not warned
    val_answers = np.asarray(run.columns[config.data.val_split].columns["answer"])
    log(f"{workdir}: split {config.data.train_split}: {run.vocab.n_dropped_samples} sample(s) of "
        f"{len(run.vocab.dropped)} answer(s) beyond the answer vocabulary's {len(run.vocab)} most "
        f"frequent are left out of training, and {int((val_answers < 0).sum())} of the "
        f"{len(val_answers)} {config.data.val_split} answers are outside it (counted wrong); "
        "their list: answers.json, 'dropped'")

  train_step = run_lib.compiled_steps(config, run.mesh)[1]
  writer = MetricsWriter(workdir, step)
  val_split = config.data.val_split
  divergence = Divergence(config, loop)
  divergence.start(workdir, step)
  last_saved = step

  def save(mgr, at):
    mgr.save(at, state.checkpoint_items(),
             {"iterator": iterator.get_state().decode(), "loop": loop, "epoch": at // steps_per_epoch})

  pending, window_start, window_samples = [], time.time(), 0
  bar = progress.bar(total=total_steps, initial=step, desc="train", unit="step",
                     enabled=t.progress_bar and jax.process_index() == 0)
  start_step = step
  try:
    while step < total_steps:
      batch = shd.agree_on_width(next(iterator), train_cols.columns,
                                 pipeline.DEFAULT_BUCKET_COLUMNS)
      variant = None if positional is None else inputs.draw_variants(
          positional[batch["index"]], len(run.augment_features), config.seed, step)
      batch = shd.pad_rows(run.train_batch(batch, variant), layout.local_padded, "answer")
      state, m = train_step(state, shd.global_batch(batch, run.mesh))
      step += 1
      pending.append((step, m))
      window_samples += t.batch_size
      bar.update(1)
      epoch_end = step % steps_per_epoch == 0 or step == total_steps
      ckpt_due = step % t.checkpoint_every_steps == 0 or epoch_end
      if step % t.log_every_steps == 0 or ckpt_due:
        got = jax.device_get([mm for _, mm in pending])
        diverged = divergence.check([(at, mm) for (at, _), mm in zip(pending, got)])
        if diverged:
          at, reason = diverged
          kept = (f"the last checkpoint, step {last_saved}, is in {periodic.directory}"
                  if last_saved else "no checkpoint was written before it")
          said = (f"training diverged at step {at} (epoch {(at - 1) // steps_per_epoch + 1}): "
                  f"{reason}")
          record_divergence(workdir, said, at)
          raise RSVQAError(f"{said}; stopped; {kept} ({run_record.ANEW})")
        loop = divergence.record(loop)
        elapsed = max(time.time() - window_start, 1e-9)
        n = sum(int(mm["n"]) for mm in got)
        record = {"step": step, "epoch": step / steps_per_epoch, "split": "train",
                  "loss": float(np.mean([mm["loss"] for mm in got])),
                  "accuracy": sum(int(mm["correct"]) for mm in got) / max(n, 1),
                  "samples_per_s": window_samples / elapsed, "batch_size": layout.size,
                  "padded_batch_size": layout.padded}
        writer.write(record)
        bar.set_postfix(loss=f"{record['loss']:.4f}", samples_s=f"{record['samples_per_s']:.0f}")
        pending, window_start, window_samples = [], time.time(), 0
      if epoch_end:
        table = validation_record(run, state, val_split)
        writer.write({"step": step, "epoch": step / steps_per_epoch, "split": val_split, **table})
        if table["oa"] > loop["best_oa"]:
          loop = {**loop, "best_oa": table["oa"], "best_step": step}
          if step not in best.steps():
            save(best, step)
        window_start = time.time()
      if ckpt_due:
        save(periodic, step)
        last_saved = step
      if t.stop_after_steps and step - start_step >= t.stop_after_steps and step < total_steps:
        log(stopped(workdir, step, last_saved))
        break
  finally:
    bar.close()
    periodic.wait()
    best.wait()
    writer.close()
  if step >= total_steps:
    divergence.close(workdir, step)
  return {"finished": step >= total_steps, "step": step, **loop, "state": state}
