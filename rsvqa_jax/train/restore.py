"""Restoring a trained workdir: its config, its Run, and its best (or last) checkpoint's state."""
import os

from rsvqa_jax.errors import RSVQAError
from rsvqa_jax.train import checkpointing
from rsvqa_jax.train import run as run_lib

CHECKPOINTS = ("best", "last")


def restore(workdir, splits, *, which="best", data_root=None, dataset=None, features=None):
  """(Run with the columns of `splits`, restored TrainState, its step) of a workdir.

  `which`: "best" (best on validation) or "last" (the latest periodic checkpoint);
  `data_root` replaces the recorded dataset folder (moved since training); `dataset` /
  `features` replace the ones the config names (in-memory tasks).
  """
  if which not in CHECKPOINTS:
    raise RSVQAError(f"checkpoint {which!r}: choose one of {', '.join(CHECKPOINTS)}")
  config = checkpointing.read_config(workdir)
  if data_root:
    config.data.root = data_root
  run = run_lib.build(config, workdir, splits, dataset=dataset, features=features)
  state = run_lib.new_state(run)
  folder = os.path.join(workdir, "best" if which == "best" else "checkpoints")
  mgr = checkpointing.Checkpoints(folder, 1 if which == "best" else config.train.keep_checkpoints)
  step = mgr.latest_step()
  if step is None:
    raise RSVQAError(f"{mgr.directory}: no checkpoint to evaluate (has training run?)")
  items, _ = mgr.restore(step, state.checkpoint_items())
  return run, state.replace(**items), int(step)
