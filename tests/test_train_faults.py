"""What a damaged or contested workdir does: corrupted checkpoints are named and skipped, a best
checkpoint lost between two commits is rebuilt, a run diverging stops, one run per workdir."""
import dataclasses
import json
import logging
import os
import pathlib
import re
import subprocess
import sys

import jax
import numpy as np
import pytest

from rsvqa_jax import storage
from rsvqa_jax.errors import RSVQAError
from rsvqa_jax.eval import accuracy
from rsvqa_jax.train import checkpointing, loop, metrics_log, restore, run_record
from test_train_support import flip_bytes, held_by_another_process, tiny_config, tiny_task
from test_train_support import warnings_of_rsvqa_jax

QUIET = dict(log=lambda m: None)


def _config(**train):
  train = {"keep_checkpoints": 20, **train}  # every periodic checkpoint kept unless asked
  c = tiny_config(batch_size=16, num_epochs=3, checkpoint_every_steps=4, log_every_steps=2,
                  **train)
  c.optim.lr = c.optim.text_lr = 1e-2
  return c


@pytest.fixture(scope="module")
def task():
  return tiny_task(n_images=40)


@pytest.fixture(scope="module")
def reference(task, tmp_path_factory):
  """An uninterrupted run: its final parameters, best step and test accuracy."""
  workdir = str(tmp_path_factory.mktemp("ref") / "w")
  summary = loop.train(_config(), workdir, dataset=task[0], features=task[1], **QUIET)
  table = accuracy.evaluate(workdir, "test", dataset=task[0], features=task[1])
  return workdir, summary, table


def _params(summary):
  return [np.asarray(x) for x in jax.tree.leaves(jax.device_get(summary["state"].params))]


def test_corrupted_best_is_named_and_its_periodic_twin_used(task, reference, tmp_path, caplog):
  workdir, summary, table = reference
  copy = str(tmp_path / "w")
  subprocess.run(["cp", "-r", workdir, copy], check=True)
  best_step = summary["best_step"]
  flip_bytes(os.path.join(copy, "best", str(best_step)))
  lines = []
  run, state, step = restore.restore(copy, ["test"], dataset=task[0], features=task[1],
                                     warn=lines.append)
  assert step == best_step
  assert any("best/" in l and "skipped" in l for l in lines), lines
  assert any("the same state" in l for l in lines), lines
  with warnings_of_rsvqa_jax(caplog):  # the default: a warning, never silent
    restore.restore(copy, ["test"], dataset=task[0], features=task[1])
  assert any(r.levelno == logging.WARNING and "the same state" in r.getMessage()
             for r in caplog.records), caplog.records
  again = accuracy.evaluate(copy, "test", dataset=task[0], features=task[1])
  assert again["oa"] == table["oa"]  # the periodic checkpoint of that step: the same state
  subprocess.run(["rm", "-r", os.path.join(copy, "checkpoints", str(best_step))], check=True)
  with pytest.raises(RSVQAError, match=f"best step {best_step} has no checkpoint that verifies"):
    restore.restore(copy, ["test"], dataset=task[0], features=task[1], warn=lambda m: None)


def test_corrupted_latest_checkpoint_is_skipped_on_resume(task, reference, tmp_path, caplog):
  """The skip is a WARNING of its own, not a line of the routine `log` (-q silences that)."""
  _, ref_summary, _ = reference
  workdir = str(tmp_path / "w")
  quiet = dict(dataset=task[0], features=task[1], **QUIET)
  loop.train(_config(stop_after_steps=10), workdir, **quiet)
  periodic = checkpointing.Checkpoints(os.path.join(workdir, "checkpoints"), 20)
  latest = periodic.latest_step()
  flip_bytes(os.path.join(workdir, "checkpoints", str(latest)))
  lines = []
  with warnings_of_rsvqa_jax(caplog):
    summary = loop.train(_config(), workdir, dataset=task[0], features=task[1], log=lines.append)
  warned = [(r.name, r.levelno, r.getMessage()) for r in caplog.records
            if r.name.startswith("rsvqa_jax")]
  assert len(warned) == 1, warned
  name, level, message = warned[0]
  assert (name, level) == ("rsvqa_jax.train.checkpointing", logging.WARNING)
  assert message.startswith(f"checkpoint {workdir}/checkpoints/{latest}: "), message
  assert message.endswith(f"; skipped, moved to {workdir}/checkpoints.corrupted/{latest}"), message
  assert not any("skipped" in l for l in lines), lines
  assert os.path.isdir(os.path.join(workdir, "checkpoints.corrupted", str(latest)))
  assert summary["finished"]
  for a, b in zip(_params(summary), _params(ref_summary)):
    np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_every_checkpoint_corrupted_is_an_error_not_a_restart(task, tmp_path):
  workdir = str(tmp_path / "w")
  loop.train(_config(stop_after_steps=4, keep_checkpoints=1), workdir, dataset=task[0],
             features=task[1], **QUIET)
  for step in checkpointing.Checkpoints(os.path.join(workdir, "checkpoints"), 1).steps():
    flip_bytes(os.path.join(workdir, "checkpoints", str(step)))
  with pytest.raises(RSVQAError, match="no older checkpoint .* verifies either"):
    loop.train(_config(keep_checkpoints=1), workdir, dataset=task[0], features=task[1], **QUIET)


def test_best_lost_between_commits_is_rebuilt(task, reference, tmp_path):
  """A kill after checkpoints/N committed but before best/N: resume and evaluate still agree."""
  workdir, summary, table = reference
  copy = str(tmp_path / "w")
  subprocess.run(["cp", "-r", workdir, copy], check=True)
  best_step = summary["best_step"]
  assert best_step in checkpointing.Checkpoints(os.path.join(copy, "checkpoints"), 20).steps()
  subprocess.run(["rm", "-r", os.path.join(copy, "best", str(best_step))], check=True)
  lines = []
  _, _, step = restore.restore(copy, ["test"], dataset=task[0], features=task[1],
                               warn=lines.append)
  assert step == best_step and any("the same state" in l for l in lines), lines


def test_a_periodic_commit_lost_resumes_from_the_best_of_that_step(task, reference, tmp_path,
                                                                   caplog):
  """best/N committed but checkpoints/N not (a kill or a full disk between the two commits of an
  epoch end): the run started over from an older periodic checkpoint, or from step 0 without a
  word. It resumes from best/N now, with a WARNING, and ends as the uninterrupted run."""
  workdir, summary, _ = reference
  copy = str(tmp_path / "w")
  subprocess.run(["cp", "-r", workdir, copy], check=True)
  best_step = summary["best_step"]
  periodic = os.path.join(copy, "checkpoints")
  for step in checkpointing.Checkpoints(periodic, 20).steps():
    if step >= best_step:
      subprocess.run(["rm", "-r", os.path.join(periodic, str(step))], check=True)
  with warnings_of_rsvqa_jax(caplog):
    again = loop.train(_config(), copy, dataset=task[0], features=task[1], **QUIET)
  assert [r.getMessage() for r in caplog.records] == [
      f"{periodic}: no checkpoint of step {best_step} (its save did not complete); resuming from "
      f"{copy}/best/{best_step}, the same state"]
  assert again["step"] == summary["step"] and again["best_step"] == best_step
  for a, b in zip(_params(again), _params(summary)):
    np.testing.assert_array_equal(a, b)


def test_divergence_stops_and_names_the_last_checkpoint(task, tmp_path):
  c = _config()
  c.optim.lr = c.optim.text_lr = 1e3
  c.train.divergence_steps = 3
  with pytest.raises(RSVQAError, match=r"training diverged at step \d+ .*(loss|gradient)"):
    loop.train(c, str(tmp_path / "w"), dataset=task[0], features=task[1], **QUIET)


def test_a_diverged_run_stays_diverged_and_is_named_so(task, tmp_path):
  """A run stopped for divergence with checkpoints written mid-runaway: the same command again
  counted the steps above the level from 0 and finished "done" (its last epochs too short to
  stop it), and evaluate called it unfinished, offering that rerun."""
  c = _config()
  c.optim.lr = c.optim.text_lr = 1e3
  c.train.checkpoint_every_steps, c.train.log_every_steps, c.train.divergence_steps = 2, 1, 14
  workdir = str(tmp_path / "w")
  with pytest.raises(RSVQAError) as first:
    loop.train(c, workdir, dataset=task[0], features=task[1], **QUIET)
  said = str(first.value)
  assert re.match(r"training diverged at step \d+ \(epoch \d\): loss \S+ stayed above 10 x its "
                  r"early level \S+ for 14 steps; stopped; the last checkpoint, step \d+, is in "
                  r".*\(the same config diverges again: train anew in another --workdir with a "
                  r"lower optim.lr / optim.text_lr\)$", said), said
  with pytest.raises(RSVQAError, match=r"^training diverged at step \d+ "):
    loop.train(c, workdir, dataset=task[0], features=task[1], **QUIET)
  lines = []
  restore.restore(workdir, ["test"], which="last", dataset=task[0], features=task[1],
                  warn=lines.append)
  assert len(lines) == 1 and lines[0].startswith(f"{workdir}: training diverged at step "), lines
  assert "finishes it" not in lines[0] and lines[0].endswith(
      "(the same config diverges again: train anew in another --workdir with a lower optim.lr "
      "/ optim.text_lr): these are the scores of an unfinished run"), lines


def test_a_divergence_record_holds_until_a_checkpoint_passes_its_step(tmp_path):
  """A resume that got past the recorded step and then stopped for another reason still read
  as diverged ("train anew"), though a rerun finishes it."""
  workdir = str(tmp_path)
  run_record.record_divergence(workdir, "training diverged at step 10 (epoch 2): loss is nan", 10)
  assert run_record.divergence(workdir).endswith("loss is nan")  # no checkpoint at all
  os.makedirs(os.path.join(workdir, "checkpoints", "8"))
  assert "diverged at step 10" in run_record.unfinished(workdir, 1, 3)
  os.makedirs(os.path.join(workdir, "checkpoints", "12"))
  assert run_record.divergence(workdir) is None
  assert run_record.unfinished(workdir, 2, 3).startswith("training stopped after epoch 2 of 3")
  run_record.record_divergence(workdir, None, 0)
  assert not os.path.exists(os.path.join(workdir, run_record.DIVERGED_FILE))


def test_a_run_refused_at_the_lock_removes_nothing(tmp_path, monkeypatch):
  """Two studies started together on a new folder: the one refused had found the folder
  missing, took the winner's fresh folder (only its .lock) for its own and removed it; a third
  study then got in beside the winner."""
  folder = str(tmp_path / "study")
  with held_by_another_process(folder, "study") as pid:
    monkeypatch.setattr(loop, "_missing_folders", lambda workdir: [folder])  # missing when seen
    with pytest.raises(RSVQAError, match=f"in use by study PID {pid} "):
      with loop.run_lock(folder, "study"):
        pass
    assert os.listdir(folder) == [storage.LOCK] and storage.lock_holder(folder)["pid"] == pid


def test_a_lock_held_before_its_record_is_written_still_has_a_holder(tmp_path):
  """Between the flock and the record, a reader took the folder for one nobody writes in."""
  folder = str(tmp_path)
  code = ("import fcntl, os, sys\n"
          f"fd = os.open(os.path.join({folder!r}, '.lock'), os.O_RDWR | os.O_CREAT)\n"
          "fcntl.flock(fd, fcntl.LOCK_EX)\nprint('held', flush=True)\nsys.stdin.read()\n")
  holder = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
  try:
    assert holder.stdout.readline().strip() == "held"
    assert storage.lock_holder(folder) == {"pid": "?", "since": "?"}
  finally:
    holder.communicate("")
  assert storage.lock_holder(folder) is None


def test_a_run_that_ends_above_the_divergence_level_is_warned_of(task, tmp_path, caplog):
  """Shorter than train.divergence_steps at a huge learning rate, it is not stopped: it
  finishes, but not as a run like any other."""
  c = _config()
  c.optim.lr = c.optim.text_lr = 1e3  # a loss thousands of times its early level, finite
  c.train.divergence_steps = 10_000
  with warnings_of_rsvqa_jax(caplog):
    summary = loop.train(c, str(tmp_path / "w"), dataset=task[0], features=task[1], **QUIET)
  assert summary["finished"]
  assert any(r.levelno == logging.WARNING and "the training loss ended at" in r.getMessage()
             and "it may have diverged" in r.getMessage() for r in caplog.records), caplog.records
  lines = []  # evaluate said nothing of it
  restore.restore(str(tmp_path / "w"), ["test"], dataset=task[0], features=task[1],
                  warn=lines.append)
  assert len(lines) == 1 and "the training loss ended at" in lines[0], lines
  assert lines[0].endswith(": these may be the scores of a diverged model (train anew in another "
                           "--workdir with a lower optim.lr / optim.text_lr)"), lines


def test_divergence_rule_by_hand():
  c = _config()
  c.train.divergence_factor, c.train.divergence_steps = 10.0, 2
  d = loop.Divergence(c, {})
  assert d.check([(1, {"loss": 1.0, "finite_grads": True})]) is None and d.early == 1.0
  ok = {"loss": 5.0, "finite_grads": True}
  high = {"loss": 11.0, "finite_grads": True}
  assert d.check([(1, ok), (2, high), (3, ok), (4, high)]) is None  # never 2 in a row
  assert d.unsettled() == ("the training loss ended at 11, above 10 x its early level 1 for its "
                           "last 1 step(s) (the run stops at train.divergence_steps=2): it may "
                           "have diverged")
  assert loop.Divergence(c, {}).unsettled() is None
  resumed = loop.Divergence(c, d.record({"best_step": 3}))  # the count goes on after a resume
  assert resumed.unsettled() == d.unsettled()
  assert resumed.check([(5, high)]) == (5, "loss 11 stayed above 10 x its early level 1 for 2 "
                                           "steps")
  assert d.check([(5, high)]) == (5, "loss 11 stayed above 10 x its early level 1 for 2 steps")
  bad = loop.Divergence(c, {"early_loss": 1.0})
  assert bad.check([(7, {"loss": 1.0, "finite_grads": False})]) == (7, "a gradient is not finite")
  c.train.divergence_factor = 0.0  # off: a high loss goes on, a non-finite gradient still stops
  off = loop.Divergence(c, {"early_loss": 1.0})
  assert off.check([(8, high), (9, high), (10, high)]) is None
  assert off.check([(11, {"loss": 1.0, "finite_grads": False})]) == (11, "a gradient is not "
                                                                         "finite")


def test_one_run_per_workdir_and_a_dead_owner_is_taken_over(task, tmp_path, caplog):
  folder = str(tmp_path / "w")
  with storage.locked(folder, "training"):
    # In-memory inputs: with none, the config's missing weights are refused before the lock.
    with pytest.raises(RSVQAError, match=r"in use by training PID \d+ on .* since"):
      loop.train(_config(), folder, dataset=task[0], features=task[1], **QUIET)
  # A process that dies holding the lock: its record stays, its flock does not.
  code = ("import os, sys; from rsvqa_jax import storage\n"
          "with storage.locked(sys.argv[1], 'training'):\n  os._exit(0)\n")
  subprocess.run([sys.executable, "-c", code, folder], check=True)
  with open(os.path.join(folder, storage.LOCK)) as f:
    dead = json.load(f)["pid"]
  with warnings_of_rsvqa_jax(caplog), storage.locked(folder, "training"):
    pass
  assert any(r.levelno == logging.WARNING and f"taking over the lock of training PID {dead}"
             in r.getMessage() for r in caplog.records), caplog.records


def test_damaged_files_are_one_line_errors(task, tmp_path):
  workdir = str(tmp_path / "w")
  loop.train(_config(stop_after_steps=4), workdir, dataset=task[0], features=task[1], **QUIET)
  metrics = os.path.join(workdir, metrics_log.METRICS_FILE)
  with open(metrics, "a") as f:
    f.write('{"step": 99, "spl')  # a line cut by a kill
  summary = loop.train(_config(stop_after_steps=2), workdir, dataset=task[0], features=task[1],
                       **QUIET)
  assert summary["step"] > 4
  assert all(r["step"] <= summary["step"] for r in metrics_log.read(workdir))
  with open(os.path.join(workdir, checkpointing.CONFIG_FILE), "r+") as f:
    f.truncate(20)
  with pytest.raises(RSVQAError, match="config.json: unreadable"):
    loop.train(_config(), workdir, dataset=task[0], features=task[1], **QUIET)


def test_bad_values_and_empty_splits_refused_before_anything_is_written(task, tmp_path):
  c = _config()
  c.model.fusion = "mutn"
  with pytest.raises(RSVQAError, match=r"model.fusion='mutn': choose one of mult, concat, mutan"):
    loop.train(c, str(tmp_path / "a"), dataset=task[0], features=task[1], **QUIET)
  assert not os.path.exists(tmp_path / "a")
  dataset, features = task
  empty = dataset.splits["val"].select(np.zeros(len(dataset["val"]), bool))
  import dataclasses  # pylint: disable=g-import-not-at-top
  no_val = dataclasses.replace(dataset, splits={**dataset.splits, "val": empty})
  with pytest.raises(RSVQAError, match=r"split 'val' has no active question; training needs "
                                       r"questions in train and val \(another split: "
                                       r"--config.data.val_split=SPLIT\)$"):
    loop.train(_config(), str(tmp_path / "b"), dataset=no_val, features=features, **QUIET)


def _answers_replaced(split, answer):
  """`split` with every answer set to `answer`."""
  rows = [dict(question_id=q, image_id=i, qtype=t, question=x, answer=answer, raw_answer=answer)
          for q, i, t, x in zip(split.question_id.tolist(), split.image_id.tolist(),
                                split.qtype.tolist(), split.question.tolist())]
  return type(split).from_rows(split.name, rows)


def _one_epoch():
  c = _config()
  c.train.num_epochs = 1
  return c


def _warnings_of_runs(tmp_path, caplog, features, runs):
  """{name: the rsvqa_jax WARNINGs of training `runs[name]` = (config, dataset)}."""
  said = {}
  for name, (config, data) in runs.items():
    caplog.clear()
    with warnings_of_rsvqa_jax(caplog):
      loop.train(config, str(tmp_path / name), dataset=data, features=features, **QUIET)
    said[name] = [r.getMessage() for r in caplog.records]
  return said


def test_data_a_run_learns_nothing_from_is_a_warning(task, tmp_path, caplog):
  """A train split of one answer, or val answers none of which is a training answer, trained
  in silence (validation OA 0 at every epoch, only `validate` told)."""
  dataset, features = task
  one = dataclasses.replace(dataset, splits={**dataset.splits,
                                             "train": _answers_replaced(dataset["train"], "yes")})
  foreign = dataclasses.replace(dataset, splits={**dataset.splits,
                                                 "val": _answers_replaced(dataset["val"], "7")})
  said = _warnings_of_runs(tmp_path, caplog, features, {
      "one": (_one_epoch(), one), "foreign": (_one_epoch(), foreign),
      "plain": (_one_epoch(), dataset)})
  assert said["one"] == ["split train has one answer ('yes'): every prediction is that answer, "
                         "whatever the image or question"]
  n_val = len(dataset["val"])
  assert said["foreign"] == [f"none of the {n_val} val answers is among the train answers: every "
                             "prediction counts wrong there, so validation OA reads 0 and picks "
                             "no better checkpoint"]
  assert said["plain"] == []


def test_answers_beyond_the_vocabulary_are_said(task, tmp_path, monkeypatch):
  """RSVQAxBEN keeps its 1,000 most frequent answers: the samples of the others were left out of
  the loss (label -1) and validation answers outside it counted wrong, with no word at train time
  (`validate` and answers.json alone told). The paper's protocol: a line of the run, no WARNING."""
  import collections  # pylint: disable=g-import-not-at-top
  from rsvqa_jax.data import answers  # pylint: disable=g-import-not-at-top
  dataset, features = task
  monkeypatch.setattr(answers, "XBEN_TOP_K", 2)
  xben = dataclasses.replace(dataset, name="xben")
  counts = collections.Counter(dataset["train"].answer.tolist())
  kept = sorted(counts, key=lambda a: (-counts[a], a))[:2]
  outside = sum(a not in kept for a in dataset["val"].answer.tolist())
  lines, workdir = [], str(tmp_path / "xben")
  loop.train(_one_epoch(), workdir, dataset=xben, features=features, log=lines.append)
  assert (f"{workdir}: split train: {sum(n for a, n in counts.items() if a not in kept)} sample(s) "
          f"of {len(counts) - 2} answer(s) beyond the answer vocabulary's 2 most frequent are left "
          f"out of training, and {outside} of the {len(dataset['val'])} val answers are outside it "
          "(counted wrong); their list: answers.json, 'dropped'") in lines, lines


def test_settings_a_run_learns_nothing_from_are_warnings(task, tmp_path, caplog):
  """Validation on the train split, and a learning rate of 0, trained and reported in silence."""
  dataset, features = task
  on_train, frozen = _one_epoch(), _one_epoch()
  on_train.data.val_split, frozen.optim.lr = "train", 0.0
  said = _warnings_of_runs(tmp_path, caplog, features, {
      "on_train": (on_train, dataset), "frozen": (frozen, dataset)})
  assert said["on_train"] == ["data.val_split is the train split train: the best checkpoint is "
                              "picked on the questions it trains on, and validation OA overstates"]
  assert said["frozen"] == ["optim.lr is 0: the answer head keeps its initial weights, so the run "
                            "learns nothing to answer with"]


def test_full_disk_is_one_line_naming_the_path_and_the_bytes(task, tmp_path, monkeypatch):
  import collections  # pylint: disable=g-import-not-at-top
  import shutil  # pylint: disable=g-import-not-at-top
  usage = collections.namedtuple("usage", "total used free")
  real = shutil.disk_usage
  monkeypatch.setattr(shutil, "disk_usage", lambda p: usage(10**9, 10**9 - 1000, 1000))
  workdir = str(tmp_path / "w")
  with pytest.raises(RSVQAError, match=r"checkpoints: no space for checkpoint 4: it needs about "
                                       r"[\d.]+ (KB|MB), 1000 bytes are free"):
    loop.train(_config(), workdir, dataset=task[0], features=task[1], **QUIET)
  monkeypatch.setattr(shutil, "disk_usage", real)
  assert loop.train(_config(), workdir, dataset=task[0], features=task[1], **QUIET)["finished"]


def test_the_command_line_reports_a_full_disk_in_one_line(tmp_path, capsys, monkeypatch):
  import errno  # pylint: disable=g-import-not-at-top
  from rsvqa_jax import cli  # pylint: disable=g-import-not-at-top
  from rsvqa_jax.data import synthetic  # pylint: disable=g-import-not-at-top

  def full(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "d" / "x.json"))

  monkeypatch.setattr(synthetic, "generate", full)
  assert cli.main(["synth", "--out", str(tmp_path / "d"), "--images", "4"]) == 2
  err = capsys.readouterr().err.strip().splitlines()
  assert len(err) == 1 and "x.json: no space left on device" in err[0]


def test_training_data_changed_since_is_refused_on_resume_and_evaluate(task, reference,
                                                                        tmp_path):
  """A yes and a no swapped keep every size and the answer classes, so the data position and
  answers.json still fit: the recorded fingerprint of the train and validation splits tells."""
  dataset, features = task
  train = dataset["train"]
  swapped = train.answer.copy()
  yes, no = np.flatnonzero(swapped == "yes")[0], np.flatnonzero(swapped == "no")[0]
  swapped[[yes, no]] = swapped[[no, yes]]
  changed = dataclasses.replace(dataset, splits={**dataset.splits, "train": dataclasses.replace(
      train, answer=swapped)})
  workdir = str(tmp_path / "w")
  loop.train(_config(stop_after_steps=4), workdir, dataset=dataset, features=features, **QUIET)
  recorded = json.loads(pathlib.Path(workdir, "data.json").read_text())
  assert set(recorded) == {"train", "val"} and recorded["train"]["questions"] == len(train)
  message = lambda w: (f"data.json: split train of {dataset.root} is not the one {w} trained "
                       f"on \\({len(train)} questions then, {len(train)} now, other contents; or files "
                       "whose questions have surrounding spaces or decomposed accents")
  with pytest.raises(RSVQAError, match=message(workdir)):
    loop.train(_config(), workdir, dataset=changed, features=features, **QUIET)
  with pytest.raises(RSVQAError, match=message(reference[0])):
    accuracy.evaluate(reference[0], "test", dataset=changed, features=features)
  assert accuracy.evaluate(reference[0], "test", dataset=dataset, features=features)["n"] > 0


def test_scoring_the_split_the_checkpoint_was_chosen_on_warns(task, reference, caplog):
  with warnings_of_rsvqa_jax(caplog):
    accuracy.evaluate(reference[0], "test", dataset=task[0], features=task[1])
    assert not caplog.records
    accuracy.evaluate(reference[0], "val", dataset=task[0], features=task[1])
    accuracy.evaluate(reference[0], "train", dataset=task[0], features=task[1])
  assert [r.getMessage() for r in caplog.records] == [
      f"{reference[0]}: split val is the one its best checkpoint was chosen on "
      "(data.val_split=val): this score is optimistic",
      f"{reference[0]}: split train is the one it trained on (data.train_split=train): this "
      "score measures memory, not what it learnt"]


def test_an_unfinished_run_is_scored_with_a_warning_and_kept_out_of_a_mean(task, reference,
                                                                            tmp_path, caplog):
  """A run stopped after its first epoch was scored in silence, and `evaluate --seeds`
  averaged it with finished runs."""
  from rsvqa_jax.commands import evaluate as evaluate_cmd  # pylint: disable=g-import-not-at-top
  per_epoch = reference[1]["step"] // 3
  c = _config(stop_after_steps=per_epoch + 1)
  c.seed = 1
  stopped = str(tmp_path / "stopped")
  loop.train(c, stopped, dataset=task[0], features=task[1], **QUIET)
  with warnings_of_rsvqa_jax(caplog):
    accuracy.evaluate(stopped, "test", dataset=task[0], features=task[1])
    accuracy.evaluate(reference[0], "test", dataset=task[0], features=task[1])
  assert [r.getMessage() for r in caplog.records] == [
      f"{stopped}: training stopped after epoch 1 of 3 (rsvqa-jax train --workdir {stopped} "
      "again, with its config, finishes it): these are the scores of an unfinished run"]
  with pytest.raises(RSVQAError, match=f"--seeds: {stopped}: training stopped after epoch 1 of 3 "
                                       r".*; a mean over seeds would mix it with finished runs"):
    evaluate_cmd._check_seed_runs([reference[0], stopped], None)  # pylint: disable=protected-access


def test_a_commit_that_fails_for_want_of_space_is_one_line(tmp_path, capsys, caplog):
  """A disk filled by another process during a checkpoint's background commit (past the
  free-space check): orbax's and tensorstore's threads printed up to 1,000 lines of tracebacks
  around the command's line, which named "a file". Now: the checkpoint folder, in one line, and
  their records and the closed event loops' unraisable errors are left out."""
  import errno  # pylint: disable=g-import-not-at-top
  mgr = checkpointing.Checkpoints(str(tmp_path / "checkpoints"), 1)

  def full(*args, **kwargs):
    try:
      raise OSError(errno.ENOSPC, "No space left on device")
    except OSError as e:
      raise ValueError("a commit future failed") from e  # as orbax re-raises it

  mgr.manager.save = full
  try:
    items = {"w": np.zeros(3, np.float32)}
    with pytest.raises(RSVQAError, match=rf"^{tmp_path}/checkpoints: a checkpoint could not be "
                       r"written \(no space left on device\); free some space and run the same "
                       "command again: it resumes from the last checkpoint written$"):
      mgr.save(1, items, {})
    with caplog.at_level(logging.ERROR):
      try:
        raise OSError(errno.ENOSPC, "No space left on device")
      except OSError:
        logging.getLogger("absl").error("background save thread failed", exc_info=True)
      logging.getLogger("asyncio").error("Task exception was never retrieved")
      sys.unraisablehook(type("U", (), {"exc_value": RuntimeError("Event loop is closed"),
                                        "exc_type": RuntimeError, "exc_traceback": None,
                                        "err_msg": None, "object": None})())
    assert not caplog.records and "Event loop is closed" not in capsys.readouterr().err
  finally:
    checkpointing._COMMIT_FAILED.clear()  # pylint: disable=protected-access
  with caplog.at_level(logging.ERROR):
    logging.getLogger("absl").error("an error of another kind")  # still said
  assert [r.getMessage() for r in caplog.records] == ["an error of another kind"]
