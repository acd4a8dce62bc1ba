"""Damaged workdir state is a one-line error naming the file, never a traceback (issue 27).

A small trained synthetic workdir is copied and damaged: 64 bytes flipped in every file of every
checkpoint (orbax metadata, the OCDBT manifest and b-tree, array data, the record of checksums),
or one file flipped, cut or emptied. `evaluate` then skips each damaged checkpoint for an older
one that verifies (a WARNING naming the file; the folder moved to checkpoints.corrupted/), or
ends with exit status 2 and one error line naming it. A recorded config or answer vocabulary
that no longer makes sense, a resume on other training data and a damaged accuracy table are
one-line errors too; a damaged metrics line is left out.
"""
import dataclasses
import glob
import json
import math
import os
import pathlib
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

from rsvqa_jax import cli
from rsvqa_jax import config as config_lib
from rsvqa_jax import storage
from rsvqa_jax.bias import metrics
from rsvqa_jax.commands import tables as tables_cmd
from rsvqa_jax.data import answers
from rsvqa_jax.errors import RSVQAError
from rsvqa_jax.train import checkpointing, loop, metrics_log, restore, run_record
from test_train_support import array_chunks, tiny_config, tiny_task, warnings_of_rsvqa_jax
import subprocess_env

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
QUIET = dict(log=lambda m: None)


def flip_64_bytes(path):
  """Flips (XOR 0xFF) 64 bytes of a file (all of a shorter one), spread evenly from its first
  byte to its last: headers, JSON and checksummed blocks are hit as well as array data."""
  size = os.path.getsize(path)
  with open(path, "r+b") as f:
    data = bytearray(f.read())
    for at in {int(i) for i in np.linspace(0, size - 1, min(64, size))}:
      data[at] ^= 0xFF
    f.seek(0)
    f.write(data)


def _cut(path):
  with open(path, "r+b") as f:
    f.truncate(os.path.getsize(path) // 2)


def _empty(path):
  open(path, "wb").close()


def _files(folder):
  return sorted(os.path.join(d, f) for d, _, fs in os.walk(folder) for f in fs)


def _config(cache):
  c = config_lib.load(os.path.join(ROOT, "configs", "synthetic_tiny.py"))
  config_lib.apply_overrides(c, [
      "data.synthetic_images=24", "data.synthetic_questions_per_image=8", "train.num_epochs=2",
      "train.batch_size=16", "train.checkpoint_every_steps=3", "train.keep_checkpoints=20",
      "train.progress_bar=false", f"data.cache_dir={cache}"])
  return c


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
  """(workdir, periodic steps oldest first, best step) of a two-epoch synthetic_tiny run."""
  base = tmp_path_factory.mktemp("corrupt")
  workdir = str(base / "w")
  summary = loop.train(_config(base / "cache"), workdir, **QUIET)
  steps = checkpointing.Checkpoints(os.path.join(workdir, "checkpoints"), 20).steps()
  assert len(steps) >= 3 and summary["best_step"] in steps
  return workdir, steps, summary["best_step"]


def _copy(trained, tmp_path):
  copy = str(tmp_path / "w")
  shutil.copytree(trained[0], copy)
  return copy


def _evaluate(capsys, *args):
  """(exit status, stderr lines) of `rsvqa-jax -q evaluate ARGS` run in this process."""
  status = cli.main(["-q", "evaluate", *args])
  return status, capsys.readouterr().err.strip().splitlines()


def test_every_file_of_every_checkpoint_flipped(trained, tmp_path, capsys):
  """The issue's case, as a user runs it: one WARNING per checkpoint tried, then one error line
  naming the damaged file (no traceback, no line of orbax's); --checkpoint last tries every
  periodic checkpoint, sets each aside, and refuses to go on."""
  _, steps, best = trained
  copy = _copy(trained, tmp_path)
  for path in _files(os.path.join(copy, "best")) + _files(os.path.join(copy, "checkpoints")):
    flip_64_bytes(path)
  env = subprocess_env.env()
  out = subprocess.run([sys.executable, "-m", "rsvqa_jax.cli", "evaluate", "--workdir", copy],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
  assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr[-3000:]
  lines = out.stderr.strip().splitlines()
  assert len(lines) == 2, lines
  assert lines[0].startswith(f"WARNING: checkpoint {copy}/best/{best}: ") and lines[0].endswith("; skipped")
  error = lines[1]
  assert error.startswith(f"rsvqa-jax evaluate: error: {copy}/best: the run's best step {best} "
                          f"has no checkpoint that verifies (checkpoint {copy}/checkpoints/{best}: "
                          "_CHECKPOINT_METADATA unreadable ("), error
  assert error.endswith("; no other checkpoint of the run verifies either"), error

  status, lines = _evaluate(capsys, "--workdir", copy, "--checkpoint", "last")
  assert status == 2
  *warnings, error = lines
  assert [w.split(":")[1] for w in warnings] == [
      f" checkpoint {copy}/checkpoints/{s}" for s in reversed(steps)]
  assert all(w.startswith("WARNING: ") for w in warnings), warnings
  assert all(w.endswith(f"; skipped, moved to {copy}/checkpoints.corrupted/{s}")
             for w, s in zip(warnings, reversed(steps))), warnings
  assert error.startswith(f"rsvqa-jax evaluate: error: checkpoint {copy}/checkpoints/{steps[-1]}: ")
  assert error.endswith(f"no older checkpoint in {copy}/checkpoints verifies either (move "
                        f"{copy}/checkpoints and {copy}/checkpoints.corrupted away to start "
                        "over)"), error
  assert sorted(map(int, os.listdir(os.path.join(copy, "checkpoints.corrupted")))) == steps
  # Asked again, with every checkpoint set aside: it said "training stopped before its first
  # one", and `train` started over from step 0, replacing the run's metrics.
  status, lines = _evaluate(capsys, "--workdir", copy, "--checkpoint", "last")
  assert status == 2 and lines == [
      f"rsvqa-jax evaluate: error: {copy}/checkpoints: no checkpoint left but the {len(steps)} "
      f"corrupted one(s) set aside in {copy}/checkpoints.corrupted (the newest: step "
      f"{steps[-1]}); move {copy}/checkpoints and {copy}/checkpoints.corrupted away to start "
      "over"], lines
  metrics = pathlib.Path(copy, "metrics.jsonl").read_text()
  with pytest.raises(RSVQAError, match="no checkpoint left but the"):
    loop.train(_config(os.path.join(os.path.dirname(trained[0]), "cache")), copy, **QUIET)
  assert pathlib.Path(copy, "metrics.jsonl").read_text() == metrics


def test_a_damaged_best_step_names_the_newest_checkpoint_that_verifies(trained, tmp_path, capsys):
  _, steps, best = trained
  copy = _copy(trained, tmp_path)
  for folder in ("best", "checkpoints"):
    for path in _files(os.path.join(copy, folder, str(best))):
      flip_64_bytes(path)
  status, lines = _evaluate(capsys, "--workdir", copy)
  newest = max(s for s in steps if s != best)
  assert status == 2 and lines[-1].endswith(
      f"; the newest that does, step {newest}, can be used instead (--checkpoint last)"), lines
  assert not os.path.exists(os.path.join(copy, "checkpoints.corrupted"))  # nothing set aside


ARRAY_DATA = "state/ocdbt.process_0/d/CHUNKS"  # the data file of the largest chunk read
DAMAGES = {"flipped": flip_64_bytes, "cut": _cut, "emptied": _empty}


@pytest.mark.parametrize("name,damage", [
    *[(name, "flipped") for name in ("_CHECKPOINT_METADATA", "data/metadata", "state/_METADATA",
                                     "state/array_metadatas/process_0", "state/manifest.ocdbt",
                                     "state/d/*", ARRAY_DATA)],
    *[(name, damage) for name in ("data/metadata", "state/manifest.ocdbt", ARRAY_DATA)
      for damage in ("cut", "emptied")]])
def test_one_damaged_file_is_named_and_an_older_checkpoint_used(trained, tmp_path, capsys, name,
                                                                damage):
  _, steps, _ = trained
  copy = _copy(trained, tmp_path)
  latest = os.path.join(copy, "checkpoints", str(steps[-1]))
  if name == ARRAY_DATA:
    path = array_chunks(latest)[0][0]
  else:
    path, = glob.glob(os.path.join(latest, name))
  DAMAGES[damage](path)
  status, lines = _evaluate(capsys, "--workdir", copy, "--checkpoint", "last")
  assert status == 0 and len(lines) == 1, lines
  warning, = lines
  assert warning.startswith(f"WARNING: checkpoint {latest}: ")
  assert warning.endswith(f"; skipped, moved to {copy}/checkpoints.corrupted/{steps[-1]}"), warning
  if name != ARRAY_DATA:  # a damaged chunk is named by its array (in the message or its checksum)
    assert f"{os.path.relpath(path, latest)} unreadable (" in warning, warning
  with open(os.path.join(copy, "eval_last", "test", "accuracy.json")) as f:
    assert json.load(f)["step"] == steps[-2]


def _failing(times, error):
  """A stand-in for orbax's restore that raises `error` the first `times` calls, then reads."""
  calls = []

  def read(original, *args, **kwargs):
    calls.append(1)
    if len(calls) <= times:
      raise error
    return original(*args, **kwargs)
  return read, calls


def _interrupted_read(cause=None):
  """What orbax raised for a Ctrl-C reaching its reading threads: an error reading an array
  (raised from the interrupt, or from another error while the interrupt was handled)."""
  try:
    try:
      raise KeyboardInterrupt
    except KeyboardInterrupt as e:
      raise Exception("Encountered error while reading array index: (slice(0, 32, 1),)") from (
          cause or e)
  except Exception as e:  # pylint: disable=broad-exception-caught
    return e


def _wrapped(cause):
  """An error orbax raises from `cause`, which alone names what happened."""
  try:
    raise Exception("Encountered error while reading array index") from cause
  except Exception as e:  # pylint: disable=broad-exception-caught
    return e


@pytest.mark.parametrize("times, error, outcome", [
    (1, Exception("Encountered error while reading array index"), "restored"),
    (2, Exception("Encountered error while reading array index"), "corrupt"),
    (1, _interrupted_read(), "interrupt"),
    (1, _interrupted_read(cause=ValueError("DATA_LOSS")), "interrupt"),
    (2, ValueError('PERMISSION_DENIED: Error opening "zarr" driver: Error reading local file '
                   '".../d/1a2b": Failed to open: Permission denied'), "denied"),
    (2, _wrapped(PermissionError(13, "Permission denied")), "denied"),
])
def test_a_failed_read_is_damage_only_when_read_again_it_fails(trained, tmp_path, times, error,
                                                              outcome):
  """A Ctrl-C during load_run(checkpoint="last") came back from orbax as an error reading an
  array: the newest (good) checkpoint was set aside as corrupted and an older one returned. A
  file the user may not read was taken for damage too, and the checkpoint set aside."""
  _, steps, _ = trained
  copy = _copy(trained, tmp_path)
  periodic = checkpointing.Checkpoints(os.path.join(copy, "checkpoints"), 20, reader=True)
  like = restore.restore(copy, ["test"], which="last")[1].checkpoint_items()
  original = periodic.manager.restore
  stand_in, calls = _failing(times, error)
  periodic.manager.restore = lambda *a, **k: stand_in(original, *a, **k)
  if outcome == "restored":
    _, _, step = periodic.restore_latest(like)
    assert step == steps[-1] and len(calls) == 3  # the record failing, read again; the state
  elif outcome == "corrupt":
    with pytest.raises(checkpointing.CorruptCheckpoint, match=r": data/metadata unreadable "
                       r"\(Exception: Encountered error while reading array index"):
      periodic.restore(steps[-1], like)
  elif outcome == "denied":  # root reads whatever the permissions: the read is made to fail
    with pytest.raises(RSVQAError) as e:
      periodic.restore_latest(like)
    assert not isinstance(e.value, checkpointing.CorruptCheckpoint)
    assert str(e.value).startswith(f"checkpoint {copy}/checkpoints/{steps[-1]}: data/metadata "
                                   "cannot be read (permission denied: "), e.value
    assert str(e.value).endswith("); give this user read access to the workdir")
  else:
    with pytest.raises(KeyboardInterrupt):
      periodic.restore_latest(like)
  assert sorted(periodic.steps()) == steps  # nothing set aside
  assert not os.path.exists(os.path.join(copy, "checkpoints.corrupted"))


@pytest.mark.parametrize("failures", [1, checkpointing.READER_LISTINGS])
def test_a_step_removed_while_a_reader_lists_the_folder(trained, monkeypatch, failures):
  """A run writing there removed a step between the manager's listing and its look at the step:
  evaluate ended with "checkpoints/614: no such file or directory", load_run with a raw
  FileNotFoundError. The listing is taken again; a folder that keeps changing is one line."""
  workdir = trained[0]
  original, calls = checkpointing.ocp.CheckpointManager, []

  def listing(*args, **kwargs):
    calls.append(1)
    if len(calls) <= failures:
      raise FileNotFoundError(2, "No such file or directory", f"{workdir}/checkpoints/614")
    return original(*args, **kwargs)
  monkeypatch.setattr(checkpointing.ocp, "CheckpointManager", listing)
  folder = os.path.join(workdir, "checkpoints")
  if failures < checkpointing.READER_LISTINGS:
    assert checkpointing.Checkpoints(folder, 20, reader=True).steps() == trained[1]
  else:
    with pytest.raises(RSVQAError) as e:
      checkpointing.Checkpoints(folder, 20, reader=True)
    assert str(e.value) == (f"{folder}: {workdir}/checkpoints/614 was removed while listed (a run "
                            "writing there keeps only its newest ones); run the command again")


def test_a_record_changed_yet_still_json_is_not_trusted(trained, tmp_path):
  """The record (loop position, shapes, checksums) carries its own checksum; a record without
  one (written before it was kept) is trusted as before."""
  _, steps, _ = trained
  copy = _copy(trained, tmp_path)
  periodic = checkpointing.Checkpoints(os.path.join(copy, "checkpoints"), 20)
  path = os.path.join(copy, "checkpoints", str(steps[-1]), checkpointing.RECORD_FILE)
  with open(path) as f:
    record = json.load(f)
  assert checkpointing.RECORD_CHECKSUM in record
  with open(path, "w") as f:
    json.dump(dict(record, epoch=record["epoch"] + 1), f)
  assert run_record.record(periodic.directory, steps[-1]) is None
  with pytest.raises(checkpointing.CorruptCheckpoint,
                     match=r"data/metadata changed on disk since it was saved \(checksum"):
    periodic._record(steps[-1])  # pylint: disable=protected-access
  del record[checkpointing.RECORD_CHECKSUM]
  with open(path, "w") as f:
    json.dump(record, f)
  assert run_record.record(periodic.directory, steps[-1])["epoch"] == record["epoch"]


@pytest.mark.parametrize("edit,message", [
    (lambda d: d["model"].update(fusion="mutn"), r"config model\.fusion='mutn': choose one of"),
    (lambda d: d["train"].update(eval_batch_size=0), r"config train\.eval_batch_size=0: must be"),
    (lambda d: d["train"].update(batch_size="16"), r"config.json: train\.batch_size is '16', expected an integer; the workdir's config "
     r"is damaged$"),
    (lambda d: d.update(data=5), r"no 'data' section; the workdir's config is damaged$"),
    (lambda d: d.pop("model"), r"no 'model' section; the workdir's config is damaged$"),
    (lambda d: d["train"].update(epochs=3), r"holds train\.epochs, which no part of rsvqa-jax "),
    (lambda d: d["data"].update(cache_dir=7), r"data\.cache_dir is 7, expected a string;"),
    # ml_collections' own two-line "cannot be casted to type <class 'float'>" came through
    (lambda d: d["model"].update(dropout={}), r"model\.dropout is \{\}, expected a number; the "
     r"workdir's config is damaged$"),
    # a damaged 200,000-character value was echoed whole
    (lambda d: d["model"].update(classifier_dim="9" * 200_000),
     r"model\.classifier_dim is '9{12}\.\.\.9{13}', expected an integer; the workdir's config "
     r"is damaged$"),
    (lambda d: d["model"].update(hidden_dim=-3), r"config model\.hidden_dim=-3: must be positive$"),
    (lambda d: d["model"].update(hidden_dim=None), r"config model\.hidden_dim=None: must be "),
    (lambda d: d["model"].update(dropout=1.0),
     r"config model\.dropout=1\.0: must be a number in \[0, 1\)$"),
    (lambda d: d["optim"].update(lr=-1e-4), r"config optim\.lr=-0\.0001: must be a number >= 0$"),
    (lambda d: d["train"].update(compute_dtype=None),
     r"config train\.compute_dtype=None: choose one of float32, bfloat16$"),
], ids=["fusion", "eval_batch_size", "batch_size_text", "data_section", "no_model_section",
        "unknown_key", "cache_dir_number", "dropout_object", "huge_value",
        "negative_size", "null_size", "dropout_one", "negative_lr", "null_choice"])
def test_a_recorded_config_that_makes_no_sense_is_named(tmp_path, capsys, edit, message):
  workdir = tmp_path / "w"
  workdir.mkdir()
  recorded = {**config_lib.to_dict(config_lib.base_config()), "recorded_in": "/elsewhere/w"}
  edit(recorded)
  (workdir / "config.json").write_text(json.dumps(recorded))
  status, lines = _evaluate(capsys, "--workdir", str(workdir))
  assert status == 2 and len(lines) == 1, lines
  assert lines[0].startswith(f"rsvqa-jax evaluate: error: {workdir}/config.json: "), lines
  assert re.search(message, lines[0]), lines


def test_a_recorded_train_split_the_dataset_lacks_is_named(trained, tmp_path, capsys):
  """The answers are the train split's: a recorded null (a type config.json allows) named
  it only in a KeyError, as evaluate reads no other split of training."""
  copy = _copy(trained, tmp_path)
  path = os.path.join(copy, "config.json")
  recorded = storage.read_json(path)
  recorded["data"]["train_split"] = None
  storage.write_json(path, recorded)
  status, lines = _evaluate(capsys, "--workdir", copy)
  assert status == 2 and len(lines) == 1, lines
  assert re.fullmatch(r"rsvqa-jax evaluate: error: split None \(config data\.train_split\): the dataset "
                      r"at \S+ has splits "
                      r"\['test', 'train', 'val'\]", lines[0]), lines


def test_a_recorded_config_without_some_keys_says_it_takes_their_defaults(tmp_path, capsys):
  """A workdir of an older rsvqa-jax lacks the keys added since: their defaults are used, and
  the command says which (here before it stops at the missing checkpoint)."""
  workdir = tmp_path / "w"
  workdir.mkdir()
  recorded = config_lib.to_dict(config_lib.base_config())
  del recorded["train"]["eval_batch_size"], recorded["image"]["image_size"]
  (workdir / "config.json").write_text(json.dumps(recorded))
  assert config_lib.defaulted_keys(recorded) == ["image.image_size", "train.eval_batch_size"]
  status, lines = _evaluate(capsys, "--workdir", str(workdir))
  assert status == 2 and len(lines) == 2, lines
  assert lines[0] == (f"WARNING: {workdir}/config.json: has no image.image_size, "
                      "train.eval_batch_size; the defaults are used (written by an older "
                      "rsvqa-jax?)"), lines
  del recorded["model"]  # a whole section: each of its keys (the command refuses that workdir)
  model = [f"model.{k}" for k in config_lib.base_config().model]
  assert config_lib.defaulted_keys(recorded) == ["image.image_size", *model,
                                                 "train.eval_batch_size"]


@pytest.mark.parametrize("content,message", [
    ({"answers": ["yes", "no", "yes"]}, "'answers' must be distinct strings"),
    ({"answers": ["yes", 0]}, "'answers' must be distinct strings"),
    ({"answers": [{}, "no"]}, "'answers' must be distinct strings"),
    ({"answers": ["yes", "no"], "dropped": 5}, r"'dropped' must be an object"),
], ids=["duplicate", "number", "object", "dropped"])
def test_an_answer_vocabulary_that_makes_no_sense_is_named(tmp_path, content, message):
  path = tmp_path / "answers.json"
  path.write_text(json.dumps(content))
  with pytest.raises(RSVQAError, match=f"{path}: {message}"):
    answers.AnswerVocab.load(str(path))


def test_resuming_on_other_training_data_names_the_checkpoint(tmp_path):
  """One training question less: data.json's record says so; in a workdir trained before that
  record existed, the saved data position no longer fits (it was a ValueError)."""
  dataset, features = tiny_task(n_images=40)
  workdir = str(tmp_path / "w")
  c = tiny_config(batch_size=16, num_epochs=3, checkpoint_every_steps=4)
  c.train.stop_after_steps = 4
  loop.train(c, workdir, dataset=dataset, features=features, **QUIET)
  c.train.stop_after_steps = 0
  train = dataset.splits["train"]
  fewer = dataclasses.replace(dataset, splits={
      **dataset.splits, "train": train.select(np.arange(len(train)) > 0)})
  with pytest.raises(RSVQAError, match=rf"data.json: split train of <memory> is not the one "
                                       rf"{workdir} trained on \({len(train)} questions then, "
                                       rf"{len(train) - 1} now"):
    loop.train(c, workdir, dataset=fewer, features=features, **QUIET)
  os.remove(os.path.join(workdir, "data.json"))
  with pytest.raises(RSVQAError, match=rf"checkpoint {workdir}/checkpoints/4: its data position "
                                       r"does not fit the training data now .* dataset changed"):
    loop.train(c, workdir, dataset=fewer, features=features, **QUIET)


def test_a_damaged_metrics_line_is_left_out(tmp_path, caplog):
  """Bytes that are not UTF-8 in metrics.jsonl lose their line, as a cut line does (resume, the
  tables, shortcut selection read it through metrics_log.read); it was a UnicodeDecodeError. A
  record without an integer step is no record; damage before the last line is counted."""
  path = tmp_path / metrics_log.METRICS_FILE
  path.write_bytes(b'{"step": 1, "split": "train"}\n{"step": 2, "sp\xff\xfe": "val"}\n'
                   b'{"step": true, "split": "val"}\n{"split": "val"}\n'
                   b'{"step": 3, "split": "val", "oa": null}\n{"step": 4, "spl')
  with warnings_of_rsvqa_jax(caplog):
    records = metrics_log.read(str(tmp_path))
  assert [r["step"] for r in records] == [1, 3] and math.isnan(records[1]["oa"])
  assert [r.getMessage() for r in caplog.records] == [
      f"{path}: 4 of 6 lines unreadable (the first: line 2), skipped"]
  caplog.clear()
  path.write_bytes(b'{"step": 1, "split": "train"}\n{"step": 2, "spl')  # a kill's cut alone
  with warnings_of_rsvqa_jax(caplog):
    assert [r["step"] for r in metrics_log.read(str(tmp_path))] == [1]
  assert not caplog.records
  os.remove(path)
  assert metrics_log.read(str(tmp_path)) == []
  os.mkdir(path)
  with pytest.raises(RSVQAError, match=f"{path}: unreadable"):
    metrics_log.read(str(tmp_path))


def test_a_resume_sets_damaged_metrics_lines_aside(tmp_path, caplog):
  """A resume rewrote metrics.jsonl from its readable records: the damaged lines, which the
  WARNING said were "skipped", were gone for good. They go to metrics.jsonl.damaged now."""
  path = tmp_path / metrics_log.METRICS_FILE
  path.write_bytes(b'{"step": 1, "split": "train"}\n{"step": 2, "sp\xff": "val"}\n'
                   b'{"step": 3, "split": "train"}\n{"step": 5, "split": "train"}\n{"st')
  with warnings_of_rsvqa_jax(caplog):
    metrics_log.keep_until(str(tmp_path), 3)
  assert [r.getMessage() for r in caplog.records] == [
      f"{path}: 2 of 5 lines unreadable (the first: line 2), moved to metrics.jsonl.damaged"]
  assert [r["step"] for r in metrics_log.read(str(tmp_path))] == [1, 3]
  assert (tmp_path / "metrics.jsonl.damaged").read_bytes() == b'{"step": 2, "sp\xff": "val"}\n'
  caplog.clear()
  with warnings_of_rsvqa_jax(caplog):  # nothing damaged is left: no WARNING, nothing moved
    metrics_log.keep_until(str(tmp_path), 3)
  assert not caplog.records and [r["step"] for r in metrics_log.read(str(tmp_path))] == [1, 3]
  assert (tmp_path / "metrics.jsonl.damaged").read_bytes() == b'{"step": 2, "sp\xff": "val"}\n'


@pytest.mark.parametrize("content", [[], {"oa": 0.5}, {"oa": 0.5, "aa": 0.5, "n": 2,
                                                       "per_type": [], "per_type_n": {}}])
def test_an_accuracy_table_that_makes_no_sense_is_named(tmp_path, content):
  path = tmp_path / "accuracy.json"
  path.write_text(json.dumps(content))
  with pytest.raises(RSVQAError, match=f"{path}: not an accuracy table of rsvqa-jax evaluate"):
    tables_cmd._accuracy(str(path))  # pylint: disable=protected-access


GOOD_TABLE = {"oa": 0.5, "aa": 0.5, "n": 4, "per_type": {"count": 0.5, "comp": float("nan")},
              "per_type_n": {"count": 4, "comp": 0}}


@pytest.mark.parametrize("edit,named", [
    ({"oa": 5.0}, "oa is 5.0"), ({"oa": float("nan")}, "oa is nan"), ({"n": -1}, "n is -1"),
    ({"n": 2.5}, "n is 2.5"), ({"aa": -0.1}, "aa is -0.1"),
    ({"per_type": {"count": "a", "comp": 0.0}}, "per_type.count is 'a'"),
    ({"per_type": {"count": "a" * 100_000, "comp": 0.0}},  # was echoed whole
     f"per_type.count is '{'a' * 12}...{'a' * 13}'"),
    ({"per_type": {"count": float("nan"), "comp": 0.0}}, "per_type.count is nan"),
    ({"per_type": {"count": 0.5}}, "per_type has types ['count'] and per_type_n ['comp', 'count']"),
    ({"n": 5}, "n is 5 but per_type_n sums to 4"),
    # Table 2 read it unchecked: a string became a column per letter, a number a TypeError.
    ({"types_absent": "count"}, "types_absent is 'count'"),
    ({"types_absent": 5}, "types_absent is 5"), ({"types_absent": [["x"]]}, "types_absent is [['x']]"),
    ({"types_absent": ["count"]}, "types_absent is ['count']"),  # a type it has questions of
    ({"oa": 0.75}, "oa is 0.75 but per_type gives 0.5"),
    ({"per_type": {"count": 0.25, "comp": float("nan")}}, "oa is 0.5 but per_type gives 0.25"),
    ({"aa": 0.4}, "aa is 0.4 but per_type gives 0.5")])
def test_an_accuracy_table_with_impossible_values_is_named(tmp_path, edit, named):
  """Values no evaluation writes (Table 2 read an OA of 5.0 as 500.00) name the key; a type
  without questions may read NaN."""
  path = tmp_path / "accuracy.json"
  path.write_text(json.dumps(GOOD_TABLE))
  assert tables_cmd._accuracy(str(path)) is not None  # pylint: disable=protected-access
  path.write_text(json.dumps({**GOOD_TABLE, **edit}))
  with pytest.raises(RSVQAError, match=re.escape(f"{path}: {named}, which no evaluation writes")):
    tables_cmd._accuracy(str(path))  # pylint: disable=protected-access


def test_a_deleted_step_metadata_file_is_one_warning_of_ours(trained, tmp_path):
  """_CHECKPOINT_METADATA only says when the step was saved: without it the checkpoint is still
  used, with one line of ours instead of orbax's."""
  _, steps, _ = trained
  copy = _copy(trained, tmp_path)
  latest = os.path.join(copy, "checkpoints", str(steps[-1]))
  os.remove(os.path.join(latest, checkpointing.STEP_METADATA))
  env = subprocess_env.env()
  out = subprocess.run([sys.executable, "-m", "rsvqa_jax.cli", "evaluate", "--workdir", copy,
                        "--checkpoint", "last"], cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=600)
  assert out.returncode == 0, out.stderr[-3000:]
  assert out.stderr.strip().splitlines() == [
      f"WARNING: checkpoint {latest}: _CHECKPOINT_METADATA missing (orbax's record of when the step was "
      "saved); its arrays are verified and used"], out.stderr[-3000:]
  with open(os.path.join(copy, "eval_last", "test", "accuracy.json")) as f:
    assert json.load(f)["step"] == steps[-1]


def test_every_table_an_evaluation_writes_is_consistent(tmp_path):
  """The consistency checks hold for metrics.accuracy_table's own output: repeats, a type with
  no question (NaN, left out of AA), uneven type counts."""
  rng = np.random.default_rng(3)
  qtype = rng.choice(["count", "presence", "comp"], size=53, p=[0.6, 0.3, 0.1])
  table = metrics.accuracy_table(rng.random((3, 53)) < 0.6, qtype,
                                 ["count", "presence", "comp", "area"])
  path = tmp_path / "accuracy.json"
  path.write_text(json.dumps(table))
  assert tables_cmd._accuracy(str(path))["n"] == 53  # pylint: disable=protected-access
