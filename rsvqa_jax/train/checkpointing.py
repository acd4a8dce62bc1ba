"""A workdir's checkpoints: periodic ones for exact resume, the best one on validation.

Layout of a workdir:
  config.json       the run's config (and where the workdir was); another config is refused
  answers.json      the answer vocabulary the model's classes follow
  data.json         sizes and sha256 of the train and validation splits; other data is refused
  checkpoints/N/    every `checkpoint_every_steps` and at each epoch end, the last k kept
  best/N/           the checkpoint with the best validation OA so far (one kept)
Each checkpoint holds the state items (params, frozen, opt_state, step, rng) and a JSON item
with the loop position (epoch, data iterator state, best validation so far), the shape and
crc32 of every array and its own crc32: shapes are checked against the model before restoring
(a mismatch names its key), every file is read back before orbax restores (a damaged one is
named), checksums after (a corrupted checkpoint is named and skipped, never used).
"""
import contextlib
import itertools
import json
import logging
import os
import re
import shutil
import sys
import threading
import zlib

import jax
import numpy as np
import orbax.checkpoint as ocp
import tensorstore as ts

from rsvqa_jax import config as config_lib
from rsvqa_jax import errors
from rsvqa_jax import storage
from rsvqa_jax.data import split_files
from rsvqa_jax.errors import RSVQAError
from rsvqa_jax.train import run_record
from rsvqa_jax.train.run_record import RECORD_CHECKSUM, RECORD_FILE

_log = logging.getLogger(__name__)

CONFIG_FILE = run_record.CONFIG_FILE
RECORDED_IN = config_lib.RECORDED_IN


def _differing(value):
  """A config value of two that differ, long enough to show where (a tuple of buckets cut at 6
  read the same on both sides), short enough for one line."""
  return errors.short_repr(value, width=200, items=50)


def check_or_record_config(workdir, config, *, record=True):
  """Writes workdir/config.json on the first run (if `record`); later runs must match it.

  A dataset folder is refused as a new workdir: checkpoints and run files would land among
  (and could replace) the dataset's own.
  """
  path = os.path.join(workdir, CONFIG_FILE)
  if not os.path.exists(path):
    split_files.refuse_dataset(workdir, "--workdir", "the run")
    _refuse_inside_a_run(workdir)
  ours = _paths_resolved(config_lib.identity(config))
  if os.path.exists(path):
    theirs = _paths_resolved(config_lib.identity(_load_recorded(workdir)))
    diff = config_lib.differences(theirs, ours)
    if diff:
      key, old, new = diff[0]
      more = f" and {len(diff) - 1} more key(s)" if len(diff) > 1 else ""
      empty = ("; it holds no checkpoint, so deleting it loses nothing"
               if not _holds_checkpoint(workdir) else "")
      raise RSVQAError(f"{workdir} holds a run of another config: {key} is "
                       f"{_differing(old)} there, {_differing(new)} now{more}; use "
                       f"another --workdir or the same config{empty}")
    return False
  if not record:
    return True
  os.makedirs(workdir, exist_ok=True)
  if jax.process_index() == 0:
    recorded = _paths_resolved(config_lib.to_dict(config))  # a relative path read elsewhere
    storage.write_json(path, {**recorded, RECORDED_IN: os.path.abspath(workdir)}, sort_keys=True)
  return True


def _paths_resolved(identity):
  """An identity whose paths (config PATH_KEYS) are absolute, for comparing: '/data/lr/', '/data/lr'
  and '../lr' from /data/runs name one folder, so a run resumed with another spelling of its
  data is the same run."""
  for key in config_lib.PATH_KEYS:
    section, name = key.split(".")
    value = identity.get(section, {}).get(name)
    if isinstance(value, str) and value and not config_lib.is_random(value):
      identity[section][name] = os.path.abspath(value)
  return identity


def _refuse_inside_a_run(workdir):
  """RSVQAError when a new workdir lies inside another run's (a typo of runs/a/best for runs/b):
  its files would land among that run's checkpoints and evaluations."""
  folder = os.path.dirname(os.path.abspath(workdir))
  while True:
    if os.path.isfile(os.path.join(folder, CONFIG_FILE)) and _holds_checkpoint(folder):
      raise RSVQAError(f"--workdir {workdir} lies inside the training run {folder}; give the new "
                       "run a folder of its own")
    parent = os.path.dirname(folder)
    if parent == folder:
      return
    folder = parent


def _holds_checkpoint(workdir):
  """Whether a training wrote any checkpoint into `workdir` (a run that diverged or was refused
  before its first one leaves only its config)."""
  return any(os.path.isdir(os.path.join(workdir, folder)) and any(
      name.isdigit() for name in os.listdir(os.path.join(workdir, folder)))
             for folder in ("checkpoints", "best"))


def read_config(workdir, data_root=None, named="--data-root"):
  """The config recorded in a workdir, its paths following a move of the folders (see below).

  Its values are checked as a run's are (config.check): a damaged file fails here, naming
  itself and the key, not deep in the model build. `data_root` (evaluate's --data-root) replaces
  the recorded dataset folder; a workdir of generated synthetic data has none to replace, and
  ignoring it would evaluate on another dataset than the one named. `named`: how the caller's
  user spells it, for the errors.
  """
  path = os.path.join(workdir, CONFIG_FILE)
  if not os.path.exists(path):
    if not os.path.isdir(workdir):
      raise RSVQAError(f"{errors.shortened(workdir)}: {errors.not_a_folder(workdir)}; give a "
                       "training workdir")
    raise RSVQAError(f"{workdir}: no {CONFIG_FILE}; is it a training workdir?")
  config = _load_recorded(workdir)
  try:
    config_lib.check(config)
  except RSVQAError as e:
    raise RSVQAError(f"{path}: {e}") from None
  if data_root:
    if config.data.synthetic:
      raise RSVQAError(
          f"{named} {data_root}: {workdir} trains on the synthetic dataset its config "
          f"generates ({config_lib.synthetic_root(config, workdir)}), not on a dataset folder; "
          f"leave {named} out")
    if not os.path.isdir(data_root):
      raise RSVQAError(f"{named} {data_root}: not a folder")
    _check_layout_of(data_root, config.data.name, workdir, named)
    config.data.root = data_root
  return config


def _check_layout_of(data_root, name, workdir, named):
  """Refuses a dataset folder of another layout than the run trained on, or its parent, naming
  what to give: the readers' hints name --dataset and data.name, which a trained run fixes."""
  if name not in split_files.LAYOUTS:
    return
  held = split_files.held(data_root)
  if held and name not in held:
    raise RSVQAError(f"{named} {data_root}: the folder holds dataset {', '.join(held)}, and "
                     f"{workdir} trained on dataset {name} (its data.name): give {named} a "
                     f"folder of dataset {name}")
  if not held and (inside := split_files.nested(data_root, [name])):
    raise RSVQAError(f"{named} {data_root}: the dataset {name} files are in "
                     f"{' and '.join(inside)}: give {named} {inside[0]}")


def refuse_moved_dataset(config, workdir):
  """A recorded dataset folder that is gone, named as such: the user's fix is --data-root, not
  the config key a training run would be told to set."""
  root = config.data.root
  if not config.data.synthetic and root and not os.path.isdir(root):
    raise RSVQAError(f"{workdir}: its dataset folder {root} (config data.root) "
                     f"{errors.not_a_folder(root)}; moved? give its new place with --data-root "
                     "(load_run: data_root=)")


_RELOCATIONS_SAID = set()  # (recorded, read) of the paths read in another place, said once


def _load_recorded(workdir):
  """workdir/config.json as a ConfigDict, with paths relocated.

  A recorded path (config PATH_KEYS) whose place relative to the workdir exists beside the workdir's
  new place is taken there (whether or not the old one still exists): a study folder (runs,
  data and caches side by side) or a workdir with its data beside it can be moved or copied and
  still resume and evaluate, a copy on its own files.
  """
  path = os.path.join(workdir, CONFIG_FILE)
  try:
    with open(path, encoding="utf-8") as f:
      recorded = json.load(f)
  except (OSError, ValueError, RecursionError) as e:
    raise RSVQAError(f"{path}: unreadable ({type(e).__name__}); the workdir's config is damaged"
                     ) from None
  if not isinstance(recorded, dict):
    raise RSVQAError(f"{path}: not a JSON object; the workdir's config is damaged")
  old = recorded.pop(RECORDED_IN, None)
  new = os.path.abspath(workdir)
  if isinstance(old, str) and old != new:
    for key in config_lib.PATH_KEYS:
      section, name = key.split(".")
      entries = recorded.get(section)
      value = entries.get(name) if isinstance(entries, dict) else None
      if not isinstance(value, str) or not os.path.isabs(value):
        continue
      moved = os.path.normpath(os.path.join(new, os.path.relpath(value, old)))
      if os.path.exists(moved):
        recorded[section][name] = moved
        if (value, moved) not in _RELOCATIONS_SAID and moved != value:  # once per process
          _RELOCATIONS_SAID.add((value, moved))  # a moved study's runs share their data
          _log.info("%s: %s=%s as recorded in %s is read as %s, beside the workdir's new place",
                    workdir, key, value, old, moved)
  missing = [s for s in config_lib.sections() if not isinstance(recorded.get(s), dict)]
  if missing:  # its defaults would build another model: a shape error at the restore, far away
    raise RSVQAError(f"{path}: no {missing[0]!r} section; the workdir's config is damaged")
  defaulted = config_lib.defaulted_keys(recorded)
  if defaulted:  # a workdir of an older rsvqa-jax, which lacked these keys
    more = f" and {len(defaulted) - 4} more" if len(defaulted) > 4 else ""
    _log.warning("%s: has no %s%s; the defaults are used (written by an older rsvqa-jax?)",
                 path, ", ".join(defaulted[:4]), more)
  try:
    config = config_lib.from_dict(recorded)
  except TypeError as e:  # a value of another type than the key's (from_dict names the key)
    raise RSVQAError(f"{path}: {e}; the workdir's config is damaged") from None
  unknown = config_lib.unknown_key(config)
  if unknown:
    raise RSVQAError(f"{path}: holds {unknown}, which no part of rsvqa-jax reads; the workdir's "
                     "config is damaged (or was written by a newer rsvqa-jax)")
  return config


def shapes(tree):
  """keypath -> [shape..., dtype] of every array of a pytree."""
  flat = jax.tree_util.tree_flatten_with_path(tree)[0]
  return {jax.tree_util.keystr(p): list(x.shape) + [str(x.dtype)] for p, x in flat}


_MANAGERS = itertools.count()


def checksums(tree):
  """keypath -> crc32 of every array's bytes (host copies), the integrity record of a save."""
  flat = jax.tree_util.tree_flatten_with_path(jax.device_get(tree))[0]
  return {jax.tree_util.keystr(p): zlib.crc32(np.ascontiguousarray(np.asarray(x)).tobytes())
          for p, x in flat}


class CorruptCheckpoint(RSVQAError):
  """A checkpoint whose files cannot be read back, or whose arrays changed since they were saved."""


# Orbax's JSON metadata files (at any depth of a step folder, and all of array_metadatas/).
STEP_METADATA = "_CHECKPOINT_METADATA"
ORBAX_JSON = (STEP_METADATA, "_METADATA", "_sharding", "metadata")
ZARR_METADATA = {b"/.zarray": "zarr", b"/zarr.json": "zarr3"}  # an array's key in OCDBT -> driver


def _check_json_files(where):
  """Parses every orbax JSON metadata file of the step folder `where`; names the first damaged.

  Orbax reads some of them while array reads are in flight (see _read_arrays), and only logs an
  unreadable _CHECKPOINT_METADATA (filtered out below: this check names it instead). That file
  only records when the step was saved, so a checkpoint without it is still used, with a WARNING.
  """
  if not os.path.exists(os.path.join(where, STEP_METADATA)):
    _log.warning(f"checkpoint {where}: {STEP_METADATA} missing (orbax's record of when the step "
                 "was saved); its arrays are verified and used")
  for parent, _, files in sorted(os.walk(where)):
    for name in sorted(files):
      if name not in ORBAX_JSON and os.path.basename(parent) != "array_metadatas":
        continue
      path = os.path.join(parent, name)
      try:
        with open(path, encoding="utf-8") as f:
          json.load(f)
      except (OSError, ValueError, RecursionError) as e:
        raise _unreadable(where, os.path.relpath(path, where), e) from None


def _read_arrays(where, item):
  """How many arrays the OCDBT database of `where`/`item` holds, each read once, synchronously.

  Orbax restores the arrays concurrently on an asyncio loop that it closes at the first failed
  read; the reads still in flight then end on the closed loop, each printing a traceback
  ("Event loop is closed") around or after the one-line error. Reading them here first, through
  tensorstore futures waited on in turn, fails on a damaged file before orbax starts, naming
  it, with nothing left in flight. The bytes then come from the page cache for orbax.
  """
  folder = os.path.join(where, item)
  kvstore = {"driver": "ocdbt", "base": {"driver": "file", "path": folder + "/"}}
  context = ts.Context()
  found = 0
  try:
    for key in ts.KvStore.open(kvstore, context=context).result().list().result():
      for suffix, driver in ZARR_METADATA.items():
        if key.endswith(suffix):
          name = key[:-len(suffix)].decode("utf-8", "replace")
          spec = {"driver": driver, "kvstore": dict(kvstore, path=name + "/")}
          ts.open(spec, context=context, read=True).result().read().result()
          found += 1
  except ValueError as e:  # tensorstore's errors: the last file named is the damaged one
    files = re.findall(r'local file "([^"]+)"', str(e))
    what = os.path.relpath(files[-1], where) if files else item
    raise _unreadable(where, what, e) from None
  return found


def _unreadable(where, what, error):
  """The error for a file `what` of checkpoint `where` that could not be read: a
  CorruptCheckpoint (skipped and set aside), or an RSVQAError where the system refused the read
  (a permission), which says nothing of the checkpoint: one it set aside was a good one."""
  if any(isinstance(e, PermissionError) or "PERMISSION_DENIED" in str(e) for e in _chain(error)):
    return RSVQAError(f"checkpoint {where}: {what} cannot be read (permission denied: "
                      f"{_first_line(error)}); give this user read access to the workdir")
  return CorruptCheckpoint(f"checkpoint {where}: {what} unreadable ({_first_line(error)})")


class _StepMetadataLines(logging.Filter):
  """Drops orbax's lines about an unreadable or missing _CHECKPOINT_METADATA: logged by every
  manager that opens the folder (an unreadable one with the file's whole content), while the
  restore names that file in one line of its own (_check_json_files)."""

  def filter(self, record):
    head = record.getMessage().split(", ", 1)[0]  # "Failed to read Metadata file: PATH"
    return not (head.startswith(("Failed to read Metadata file", "Failed to json parse Metadata",
                                 "Metadata file does not exist"))
                and head.endswith(STEP_METADATA))


logging.getLogger("absl").addFilter(_StepMetadataLines())

# Set once a checkpoint commit failed for want of space: the main thread then says so in one line
# (Checkpoints.save / wait), and the dozens of tracebacks orbax's and tensorstore's threads print
# on the way down (each thread's error, the event loops closed under them) are left out.
_COMMIT_FAILED = threading.Event()


def _write_failure(error):
  """What failed, when `error` or one it was raised from is a write that failed (a full disk or
  quota: an OSError, or tensorstore's ValueError 'RESOURCE_EXHAUSTED: Error writing ...'), else
  None."""
  seen = set()
  while error is not None and id(error) not in seen:
    seen.add(id(error))
    if isinstance(error, OSError) and error.errno in storage.WRITE_ERRNOS:
      return (error.strerror or str(error)).lower()
    text = str(error)
    if isinstance(error, ValueError) and text.startswith("RESOURCE_EXHAUSTED") and (
        "Error writing" in text or "Failed writing" in text):
      return "no space left on device (RESOURCE_EXHAUSTED)"
    error = error.__cause__ or error.__context__
  return None


class _FailedCommitLines(logging.Filter):
  """Drops orbax's (absl) and asyncio's error records from a commit that failed for want of space,
  and every later one: the command's own line says what failed (Checkpoints.save / wait)."""

  def filter(self, record):
    if record.exc_info and _write_failure(record.exc_info[1]):
      _COMMIT_FAILED.set()
    return not (_COMMIT_FAILED.is_set() and record.levelno >= logging.ERROR)


for _name in ("absl", "asyncio"):
  logging.getLogger(_name).addFilter(_FailedCommitLines())


def _quiet_after_failed_commit(hook):
  """sys.unraisablehook, which C threads' callbacks report through (tensorstore's, scheduling on
  an event loop closed by the failure): silent for their RuntimeErrors once a commit failed."""

  def quiet(unraisable):
    if not (_COMMIT_FAILED.is_set() and isinstance(unraisable.exc_value, RuntimeError)):
      hook(unraisable)

  return quiet


sys.unraisablehook = _quiet_after_failed_commit(sys.unraisablehook)


READER_LISTINGS = 3  # how many times a reader lists a folder a run is removing steps from


class Checkpoints:
  """One orbax CheckpointManager over a folder (periodic: keep k; best: keep 1).

  Every save records each array's shape and crc32; every restore reads every file once
  (_check_json_files, _read_arrays), then the arrays through orbax, and compares, so a checkpoint
  whose bytes changed on disk (a bit flip, a truncated or emptied file) is named in one line and
  never used: `restore_latest` skips it for the newest checkpoint that verifies. Temporary
  folders of a save that was killed are removed when a writer's manager opens the folder; a
  `reader` (evaluate, load_run) removes nothing, as a run may be writing there now: it removed
  the save in progress under a live training, which then died.

  The periodic and best managers save the same step at an epoch end, and orbax names the
  barriers of a background commit after the step folder ("async_write_complete.16"): without a
  prefix of their own, the two commits of a multi-host run met at each other's barriers (a
  coordination-service barrier id is used once), and a run hung waiting for a host that had
  passed it. Every manager gets a prefix of its own, numbered in creation order, which every
  host follows alike.
  """

  def __init__(self, directory, keep, *, reader=False):
    self.directory = os.path.abspath(directory)
    self.reader = reader
    if os.path.lexists(self.directory) and not os.path.isdir(self.directory):
      raise RSVQAError(f"{self.directory}: a file stands where the run's checkpoint folder "
                       "belongs; move it away")  # orbax's own threads would print a traceback
    prefix = f"rsvqa_{os.path.basename(self.directory)}_{next(_MANAGERS)}"
    options = ocp.CheckpointManagerOptions(
        max_to_keep=keep, create=True, cleanup_tmp_directories=not reader,
        multiprocessing_options=ocp.options.MultiprocessingOptions(barrier_sync_key_prefix=prefix))
    # The manager lists the steps, then reads each one's folder: a run writing there removes
    # old ones meanwhile (max_to_keep), and a reader's listing is then taken again.
    for attempt in range(READER_LISTINGS if reader else 1):
      try:
        self.manager = ocp.CheckpointManager(self.directory, item_names=("state", "data"),
                                             options=options)
        break
      except FileNotFoundError as e:
        if not reader:
          raise
        if attempt == READER_LISTINGS - 1:
          raise RSVQAError(f"{self.directory}: {e.filename or 'a checkpoint'} was removed while "
                           "listed (a run writing there keeps only its newest ones); run the "
                           "command again") from None
    # Orbax removes those temporary folders on a thread of its own; a command that then stops at
    # once (an RSVQAError: no checkpoint yet) left it running into the interpreter's shutdown,
    # which printed its traceback under the one-line error. The folder listing is short: wait.
    if not reader:
      self.manager._maybe_await_cleanup_tmp_directory()  # pylint: disable=protected-access

  def steps(self):
    """Saved steps, oldest first."""
    return sorted(self.manager.all_steps())

  def latest_step(self):
    return self.manager.latest_step()

  def save(self, step, items, data):
    nbytes = sum(x.nbytes for x in jax.tree.leaves(items))
    storage.ensure_free(self.directory, int(1.1 * nbytes) + (1 << 20), f"checkpoint {step}")
    data = dict(data, shapes=shapes(items), checksums=checksums(items))
    data[RECORD_CHECKSUM] = run_record.record_checksum(data)
    with self._commit_failures():  # saving waits for the commit before it
      self.manager.save(int(step), args=ocp.args.Composite(
          state=ocp.args.StandardSave(items), data=ocp.args.JsonSave(data)), force=True)

  def wait(self):
    with self._commit_failures():
      self.manager.wait_until_finished()

  @contextlib.contextmanager
  def _commit_failures(self):
    """A background commit that failed for want of space, raised here, as one line."""
    try:
      yield
    except Exception as e:  # pylint: disable=broad-exception-caught
      what = _write_failure(e)
      if what is None:
        raise
      _COMMIT_FAILED.set()
      raise RSVQAError(f"{self.directory}: a checkpoint could not be written ({what}); free some "
                       "space and run the same command again: it resumes from the last "
                       "checkpoint written") from None

  def restore(self, step, like):
    """(items, data) of checkpoint `step`, shaped and placed like the pytree `like`.

    Raises CorruptCheckpoint when one of its files cannot be read or an array's checksum differs
    from the one recorded at save time, RSVQAError when it holds another model.
    """
    where = os.path.join(self.directory, str(step))
    _check_json_files(where)
    data = self._record(step)
    stored, wanted = data["shapes"], shapes(like)
    for key, shape in wanted.items():
      if key not in stored:
        raise RSVQAError(f"checkpoint {where}: has no array {key} the model needs")
      if stored[key] != shape:
        raise RSVQAError(f"checkpoint {where}: {key} has shape/dtype {stored[key]}, the model "
                         f"built from the config expects {shape}")
    extra = sorted(set(stored) - set(wanted))
    if extra:
      raise RSVQAError(f"checkpoint {where}: holds {extra[0]} which the model does not have")
    found = _read_arrays(where, "state")
    if found != len(wanted):
      raise CorruptCheckpoint(f"checkpoint {where}: state holds {found} of its {len(wanted)} "
                              "arrays (a file is missing)")
    abstract = jax.tree.map(
        lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=x.sharding), like)
    items = self._orbax_restore(step, "state", state=ocp.args.StandardRestore(abstract))["state"]
    recorded = data.get("checksums")
    if recorded is not None:  # checkpoints written before checksums were kept are trusted
      for key, crc in checksums(items).items():
        if recorded.get(key) != crc:
          raise CorruptCheckpoint(f"checkpoint {where}: array {key} changed on disk since it "
                                  "was saved (checksum mismatch)")
    return items, data

  def _record(self, step):
    """The verified JSON record of checkpoint `step`; CorruptCheckpoint names what is wrong."""
    where = os.path.join(self.directory, str(step))
    data = self._orbax_restore(step, RECORD_FILE, data=ocp.args.JsonRestore())["data"]
    if not isinstance(data, dict):
      raise CorruptCheckpoint(f"checkpoint {where}: {RECORD_FILE} is not a JSON object")
    recorded = data.pop(RECORD_CHECKSUM, None)
    if recorded is not None and recorded != run_record.record_checksum(data):
      raise CorruptCheckpoint(f"checkpoint {where}: {RECORD_FILE} changed on disk since it was "
                              "saved (checksum mismatch)")
    if not isinstance(data.get("shapes"), dict) or not isinstance(data.get("checksums", {}), dict):
      raise CorruptCheckpoint(f"checkpoint {where}: {RECORD_FILE} lacks its shapes or checksums")
    return data

  def _orbax_restore(self, step, what, **items):
    """Orbax's restore of `items` of checkpoint `step`; an error counts as damage (a
    CorruptCheckpoint naming `what`) only when a second read fails too. A Ctrl-C reaching
    orbax's reading threads came back as an error reading an array, and `restore_latest` set a
    good checkpoint aside; an interrupt found in the error's chain is raised as one."""
    for attempt in range(2):
      try:
        return self.manager.restore(step, args=ocp.args.Composite(**items))
      except Exception as e:  # pylint: disable=broad-exception-caught
        if _interrupt_in(e):
          raise KeyboardInterrupt from None
        if attempt:
          raise _unreadable(os.path.join(self.directory, str(step)), what, e) from None
        _log.debug("checkpoint %s: read again after %s", step, _first_line(e))

  def restore_latest(self, like, warn=_log.warning):
    """(items, data, step) of the newest checkpoint that verifies, or None if there is none.

    Each corrupted one is named in one `warn` line (a WARNING, whatever the caller's routine
    progress channel) and skipped; if every checkpoint is corrupted, the error names the newest
    one instead of starting over silently, and so does every later call while none is left but
    those set aside (a run that started over would replace the work they hold).
    """
    first_error, tried = None, set()
    while True:
      # Asked again after each failure: a run writing there now saves newer steps and removes
      # older ones (max_to_keep) meanwhile, so the newest untried one is read next.
      untried = [step for step in self.steps() if step not in tried]
      if not untried:
        break
      step = untried[-1]
      tried.add(step)
      try:
        items, data = self.restore(step, like)
        return items, data, step
      except CorruptCheckpoint as e:
        first_error = first_error or e
        aside = self._set_aside(step)
        warn(f"{e}; skipped, " + (f"moved to {aside}" if aside else "left in place (a run is "
                                  "writing there now: it may have removed it while read)"))
    writer = self.reader and storage.lock_holder(os.path.dirname(self.directory))
    if first_error is not None and writer:
      raise RSVQAError(f"{first_error}; no other checkpoint in {self.directory} read while a run "
                       f"writes there (PID {writer.get('pid', '?')}): run the command again once "
                       "it has saved its next one")
    start_over = f"move {self.directory} and {self.directory}.corrupted away to start over"
    if first_error is not None:
      raise RSVQAError(f"{first_error}; no older checkpoint in {self.directory} verifies either "
                       f"({start_over})")
    aside = self.set_aside_steps()
    if aside and not self.steps():
      raise RSVQAError(f"{self.directory}: no checkpoint left but the {len(aside)} corrupted "
                       f"one(s) set aside in {self.directory}.corrupted (the newest: step "
                       f"{aside[-1]}); {start_over}")
    return None

  def set_aside_steps(self):
    """The steps of the corrupted checkpoints set aside in DIRECTORY.corrupted, oldest first."""
    return run_record.steps(f"{self.directory}.corrupted")


  def _set_aside(self, step):
    """Moves a corrupted step out of the manager's folder (a later save may reuse its number);
    the target, or None where a reader finds a run writing in the workdir (the step may be one
    that run's max_to_keep removed while it was read: the writer's folder is the writer's)."""
    if self.reader and storage.lock_holder(os.path.dirname(self.directory)):
      # The steps the writer saved and removed meanwhile; a step removed while listed leaves the
      # listing as it was, whose steps that are gone fail to read and are passed over.
      with contextlib.suppress(FileNotFoundError):
        self.manager.reload()
      return None
    target = os.path.join(f"{self.directory}.corrupted", str(step))
    if jax.process_index() == 0:
      os.makedirs(os.path.dirname(target), exist_ok=True)
      shutil.rmtree(target, ignore_errors=True)
      os.replace(os.path.join(self.directory, str(step)), target)
    self.manager.reload()
    return target


def _interrupt_in(error):
  """Whether a KeyboardInterrupt is among `error`, its causes and contexts."""
  return any(isinstance(e, KeyboardInterrupt) for e in _chain(error))


def _chain(error):
  """`error` and every error it was raised from or while handling, each once."""
  seen, todo = set(), [error]
  while todo:
    e = todo.pop()
    if e is not None and id(e) not in seen:
      seen.add(id(e))
      yield e
      todo += [e.__cause__, e.__context__]


def _first_line(error):
  text = str(error).strip().splitlines()
  return f"{type(error).__name__}: {text[0] if text else ''}"[:300]
