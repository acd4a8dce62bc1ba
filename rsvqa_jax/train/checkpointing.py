"""A workdir's checkpoints: periodic ones for exact resume, the best one on validation.

Layout of a workdir:
  config.json       the run's config (and where the workdir was); another config is refused
  answers.json      the answer vocabulary the model's classes follow
  checkpoints/N/    every `checkpoint_every_steps` and at each epoch end, the last k kept
  best/N/           the checkpoint with the best validation OA so far (one kept)
Each checkpoint holds the state items (params, frozen, opt_state, step, rng) and a JSON item
with the loop position (epoch, data iterator state, best validation so far) and the shape of
every array, checked against the model before restoring so a mismatch names its key.
"""
import itertools
import json
import os

import jax
import orbax.checkpoint as ocp

from rsvqa_jax import config as config_lib
from rsvqa_jax.errors import RSVQAError

CONFIG_FILE = "config.json"
RECORDED_IN = "recorded_in"  # config.json's extra key: the workdir's absolute path when written
PATH_KEYS = ("data.root", "data.cache_dir", "text.checkpoint", "image.checkpoint")


def _differences(a, b, prefix=""):
  """Dotted keys whose values differ between two nested dicts."""
  out = []
  for key in sorted(set(a) | set(b)):
    va, vb = a.get(key, "<missing>"), b.get(key, "<missing>")
    if isinstance(va, dict) and isinstance(vb, dict):
      out += _differences(va, vb, f"{prefix}{key}.")
    elif va != vb:
      out.append((f"{prefix}{key}", va, vb))
  return out


def check_or_record_config(workdir, config, *, record=True):
  """Writes workdir/config.json on the first run (if `record`); later runs must match it."""
  path = os.path.join(workdir, CONFIG_FILE)
  ours = config_lib.identity(config)
  if os.path.exists(path):
    theirs = config_lib.identity(_load_recorded(workdir))
    diff = _differences(theirs, ours)
    if diff:
      key, old, new = diff[0]
      more = f" and {len(diff) - 1} more key(s)" if len(diff) > 1 else ""
      raise RSVQAError(f"{workdir} holds a run of another config: {key} is {old!r} there, {new!r} "
                       f"now{more}; use another --workdir or the same config")
    return False
  if not record:
    return True
  os.makedirs(workdir, exist_ok=True)
  if jax.process_index() == 0:
    with open(path, "w") as f:
      json.dump({**config_lib.to_dict(config), RECORDED_IN: os.path.abspath(workdir)}, f,
                indent=1, sort_keys=True)
  return True


def read_config(workdir):
  """The config recorded in a workdir, its paths following a move of the folders (see below)."""
  if not os.path.exists(os.path.join(workdir, CONFIG_FILE)):
    raise RSVQAError(f"{workdir}: no {CONFIG_FILE}; is it a training workdir?")
  return _load_recorded(workdir)


def _load_recorded(workdir):
  """workdir/config.json as a ConfigDict, with paths relocated.

  A recorded path (PATH_KEYS) that no longer exists, while the same path relative to the
  workdir's new place does, is taken there: a study folder (runs, data and caches side by side)
  or a workdir with its data beside it can be moved or copied and still resume and evaluate.
  """
  with open(os.path.join(workdir, CONFIG_FILE)) as f:
    recorded = json.load(f)
  old = recorded.pop(RECORDED_IN, None)
  new = os.path.abspath(workdir)
  if old and old != new:
    for key in PATH_KEYS:
      section, name = key.split(".")
      value = recorded.get(section, {}).get(name)
      if not value or not os.path.isabs(value) or os.path.exists(value):
        continue
      moved = os.path.normpath(os.path.join(new, os.path.relpath(value, old)))
      if os.path.exists(moved):
        recorded[section][name] = moved
  return config_lib.from_dict(recorded)


def shapes(tree):
  """keypath -> [shape..., dtype] of every array of a pytree."""
  flat = jax.tree_util.tree_flatten_with_path(tree)[0]
  return {jax.tree_util.keystr(p): list(x.shape) + [str(x.dtype)] for p, x in flat}


_MANAGERS = itertools.count()


class Checkpoints:
  """One orbax CheckpointManager over a folder (periodic: keep k; best: keep 1).

  The periodic and best managers save the same step at an epoch end, and orbax names the
  barriers of a background commit after the step folder ("async_write_complete.16"): without a
  prefix of their own, the two commits of a multi-host run met at each other's barriers (a
  coordination-service barrier id is used once), and a run hung waiting for a host that had
  passed it. Every manager gets a prefix of its own, numbered in creation order, which every
  host follows alike.
  """

  def __init__(self, directory, keep):
    self.directory = os.path.abspath(directory)
    prefix = f"rsvqa_{os.path.basename(self.directory)}_{next(_MANAGERS)}"
    self.manager = ocp.CheckpointManager(
        self.directory, item_names=("state", "data"),
        options=ocp.CheckpointManagerOptions(
            max_to_keep=keep, create=True,
            multiprocessing_options=ocp.options.MultiprocessingOptions(
                barrier_sync_key_prefix=prefix)))

  def latest_step(self):
    return self.manager.latest_step()

  def save(self, step, items, data):
    data = dict(data, shapes=shapes(items))
    self.manager.save(int(step), args=ocp.args.Composite(
        state=ocp.args.StandardSave(items), data=ocp.args.JsonSave(data)), force=True)

  def wait(self):
    self.manager.wait_until_finished()

  def restore(self, step, like):
    """(items, data) of checkpoint `step`, shaped and placed like the pytree `like`."""
    where = os.path.join(self.directory, str(step))
    data = self.manager.restore(step, args=ocp.args.Composite(data=ocp.args.JsonRestore()))["data"]
    stored, wanted = data.get("shapes", {}), shapes(like)
    for key, shape in wanted.items():
      if key not in stored:
        raise RSVQAError(f"checkpoint {where}: has no array {key} the model needs")
      if stored[key] != shape:
        raise RSVQAError(f"checkpoint {where}: {key} has shape/dtype {stored[key]}, the model "
                         f"built from the config expects {shape}")
    extra = sorted(set(stored) - set(wanted))
    if extra:
      raise RSVQAError(f"checkpoint {where}: holds {extra[0]} which the model does not have")
    abstract = jax.tree.map(
        lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=x.sharding), like)
    items = self.manager.restore(step, args=ocp.args.Composite(
        state=ocp.args.StandardRestore(abstract)))["state"]
    return items, data
