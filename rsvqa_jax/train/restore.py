"""Restoring a trained workdir: its config, its Run, and its best (or last) checkpoint's state."""
import logging
import os

from rsvqa_jax import storage
from rsvqa_jax.errors import RSVQAError
from rsvqa_jax.train import checkpointing
from rsvqa_jax.train import run as run_lib
from rsvqa_jax.train import run_record

_log = logging.getLogger(__name__)

CHECKPOINTS = ("best", "last")


def restore(workdir, splits, *, which="best", data_root=None, dataset=None, features=None,
            warn=_log.warning):
  """(Run with the columns of `splits`, restored TrainState, its step) of a workdir.

  `which`: "best" (best on validation) or "last" (the newest periodic checkpoint that
  verifies); `data_root` replaces the recorded dataset folder (moved since training);
  `dataset` / `features` replace the ones the config names (in-memory tasks). Every checkpoint
  is verified against the checksums recorded when it was saved (train/checkpointing.py); `warn`
  gets one line per checkpoint skipped or stood in for (a WARNING: never silent, not even when
  the caller's routine progress is).
  """
  if which not in CHECKPOINTS:
    raise RSVQAError(f"checkpoint {which!r}: choose one of {', '.join(CHECKPOINTS)}")
  config = checkpointing.read_config(workdir, data_root)
  if "answerability" in config:  # its head ranks pools: the answer head's arrays are not there
    raise RSVQAError(f"{workdir}: an answerability workdir (its config has an answerability "
                     "section); score it with rsvqa-jax evaluate --answerability")
  if dataset is None:
    checkpointing.refuse_moved_dataset(config, workdir)
  run = run_lib.build(config, workdir, splits, dataset=dataset, features=features,
                      restored=True)
  like = run_lib.new_state(run)
  periodic = checkpointing.Checkpoints(os.path.join(workdir, "checkpoints"),
                                       config.train.keep_checkpoints, reader=True)
  if which == "last":
    found = periodic.restore_latest(like.checkpoint_items(), warn)
  else:
    found = best_checkpoint(workdir, periodic, like.checkpoint_items(), warn)
  if found is None:
    raise no_checkpoint(workdir, which, periodic, "evaluate")
  holder = storage.lock_holder(workdir)
  done = run_record.epochs_trained(periodic.directory)
  if done is not None and done < config.train.num_epochs and not holder:
    warn(f"{workdir}: {run_record.unfinished(workdir, done, config.train.num_epochs)}: these "
         "are the scores of an unfinished run")
  elif not holder:
    warn_if_diverged(workdir, warn)
  items, _, step = found
  if holder:
    warn(f"{workdir}: a run is writing there now (PID {holder.get('pid', '?')} since "
         f"{holder.get('since', '?')}): read at its {which} checkpoint so far, step {step}")
  return run, like.replace(**items), int(step)


def warn_if_diverged(workdir, warn):
  """A `warn` line when the workdir records that its run diverged (run_record.divergence)."""
  said = run_record.divergence(workdir)
  if said:
    warn(f"{workdir}: {said}: these may be the scores of a diverged model "
         f"({run_record.RETRAIN})")


def no_checkpoint(workdir, which, periodic, verb, why="no validation has run"):
  """The RSVQAError when `which` found nothing: a run stopped before its first validation has
  periodic checkpoints but no best one yet, and the last one can be named; `why` says why. A run
  writing there now is waited for, not told to start again."""
  steps = periodic.steps()
  if which == "best" and steps:
    return RSVQAError(f"{workdir}: no best checkpoint yet ({why}); checkpoint 'last' "
                      f"(--checkpoint last) uses step {steps[-1]}")
  holder = storage.lock_holder(workdir)
  if holder:
    return RSVQAError(f"{workdir}: no checkpoint to {verb} yet: a run is writing there now (PID "
                      f"{holder.get('pid', '?')} since {holder.get('since', '?')}); wait for its "
                      "first checkpoint (train.checkpoint_every_steps)")
  return RSVQAError(f"{workdir}: no checkpoint to {verb}: training stopped before its first one "
                    f"(train.checkpoint_every_steps); run rsvqa-jax train --workdir {workdir} "
                    "again with its config and overrides to go on")


def best_checkpoint(workdir, periodic, like, warn=_log.warning):
  """(items, data, step) of the best-on-validation state: best/N for the N the run recorded.

  The run's record (the newest periodic checkpoint's loop) names the best step; when best/
  lacks it (a kill between the two saves of an epoch end) or it does not verify, the periodic
  checkpoint of that step, the same state, stands in, with a `warn` line saying so; when that
  one does not verify either, the error names its damaged file.
  """
  best = checkpointing.Checkpoints(os.path.join(workdir, "best"), 1, reader=True)
  step = run_record.best_step(periodic.directory) or (best.steps() or [None])[-1]
  if step is None:
    return None
  if step in best.steps():
    try:
      items, data = best.restore(step, like)
      return items, data, step
    except checkpointing.CorruptCheckpoint as e:
      warn(f"{e}; skipped")
  twin = ""
  if step in periodic.steps():
    try:
      items, data = periodic.restore(step, like)
    except checkpointing.CorruptCheckpoint as e:
      twin = f" ({e})"
    else:
      warn(f"{best.directory}: step {step} missing or corrupted; its periodic checkpoint "
           f"{periodic.directory}/{step} (the same state) is used")
      return items, data, step
  holder = storage.lock_holder(workdir)
  if holder:  # best/ is replaced at each better validation: what was read may be gone since
    raise RSVQAError(f"{best.directory}: the run's best step {step} could not be read while a "
                     f"run writes there (PID {holder.get('pid', '?')}), which replaces it as it "
                     "validates; run the command again")
  fallback = next((s for s in reversed(periodic.steps()) if s != step and _verifies(periodic, s,
                                                                                    like)), None)
  hint = (f"the newest that does, step {fallback}, can be used instead (--checkpoint last)"
          if fallback is not None else "no other checkpoint of the run verifies either")
  raise RSVQAError(f"{best.directory}: the run's best step {step} has no checkpoint that "
                   f"verifies{twin}; {hint}")


def _verifies(checkpoints, step, like):
  """Whether checkpoint `step` restores (only asked once the best one failed)."""
  try:
    checkpoints.restore(step, like)
  except checkpointing.CorruptCheckpoint:
    return False
  return True
