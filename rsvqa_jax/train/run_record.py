"""How far a training run went, read from its checkpoints' JSON records alone.

Each checkpoint keeps a JSON record beside its arrays (train/checkpointing.py): the loop's
position, its epoch, its best validation step. Reading the files directly, without orbax or
JAX, lets `tables` (which never starts JAX) and `evaluate --seeds` tell an unfinished run and a
stale evaluation without opening a checkpoint manager, which would also tidy the folder of a
run that may be writing there now.
"""
import json
import os
import zlib

from rsvqa_jax import storage
from rsvqa_jax.errors import RSVQAError

RECORD_FILE = os.path.join("data", "metadata")  # where orbax's JsonSave keeps the "data" item
RECORD_CHECKSUM = "record_checksum"  # the data record's own crc32, so it is verified like arrays


def record_checksum(record):
  """crc32 of a data record's JSON as written and read back (keys sorted; its own one left out)."""
  body = {k: v for k, v in record.items() if k != RECORD_CHECKSUM}
  return zlib.crc32(json.dumps(json.loads(json.dumps(body)), sort_keys=True).encode())


def steps(directory):
  """The committed steps in a checkpoint folder, oldest first (orbax writes a step under a
  temporary name and renames it to its number when complete)."""
  names = os.listdir(directory) if os.path.isdir(directory) else ()
  return sorted(int(n) for n in names if n.isdigit() and os.path.isdir(os.path.join(directory, n)))


def record(directory, step):
  """The record of checkpoint `step` if it reads and its checksum holds, else None."""
  try:
    with open(os.path.join(directory, str(step), RECORD_FILE), encoding="utf-8") as f:
      data = json.load(f)
  except (OSError, ValueError, RecursionError):
    return None
  if not isinstance(data, dict):
    return None
  recorded = data.get(RECORD_CHECKSUM)
  return data if recorded is None or recorded == record_checksum(data) else None


def epochs_trained(directory):
  """Whole epochs the newest checkpoint of `directory` had trained (its record's `epoch`; the
  last step of a finished run is saved and counts them all), or None when that is unknown: no
  checkpoint, a record that does not verify, or a newer checkpoint set aside as corrupted (an
  older one then says nothing of how far the run went)."""
  found, aside = steps(directory), steps(f"{directory}.corrupted")
  if not found or (aside and aside[-1] > found[-1]):
    return None
  data = record(directory, found[-1])
  epoch = data.get("epoch") if data else None
  return epoch if isinstance(epoch, int) and not isinstance(epoch, bool) else None


def best_step(directory):
  """The best validation step the newest readable record of `directory` names, or None."""
  for step in reversed(steps(directory)):
    data = record(directory, step)
    if data and isinstance(data.get("loop"), dict):
      return data["loop"].get("best_step")
  return None


CONFIG_FILE = "config.json"  # a training run's recorded config (train/checkpointing)


def refuse_run(folder, option, what):
  """An RSVQAError when `folder` holds a training run: `what` would land among (and could
  replace) its files."""
  if os.path.isfile(os.path.join(folder, CONFIG_FILE)):
    raise RSVQAError(f"{option} {folder} holds a training run ({CONFIG_FILE}); give {what} a "
                     "folder of its own")


DIVERGED_FILE = "diverged.json"  # {"said": how, "step": where}: the run diverged (loop.Divergence)
RETRAIN = "train anew in another --workdir with a lower optim.lr / optim.text_lr"
ANEW = f"the same config diverges again: {RETRAIN}"


def record_divergence(workdir, said, step):
  """Records in the workdir that its run diverged at `step` (`said`: how), or, with None, that
  it did not (a run started afresh, or finished with its loss back down)."""
  path = os.path.join(workdir, DIVERGED_FILE)
  if said:
    storage.write_json(path, {"said": said, "step": step})
  else:
    storage.remove(path)


def divergence(workdir):
  """How the workdir's run diverged, as recorded, or None; also None once a checkpoint was saved
  past the recorded step (a resume that got past it and then stopped for another reason)."""
  record = storage.read_json(os.path.join(workdir, DIVERGED_FILE))
  if not isinstance(record, dict) or not isinstance(record.get("said"), str):
    return None
  saved = steps(os.path.join(workdir, "checkpoints"))
  step = record.get("step")
  if saved and isinstance(step, int) and saved[-1] > step:
    return None
  return record["said"]


def unfinished(workdir, done, total):
  """What to say of a run stopped before its last epoch: a rerun finishes it, unless it
  diverged (a rerun diverges again)."""
  said = divergence(workdir)
  if said:
    return f"{said}; it stopped after epoch {done} of {total} ({ANEW})"
  return (f"training stopped after epoch {done} of {total} (rsvqa-jax train --workdir "
          f"{workdir} again, with its config, finishes it)")
