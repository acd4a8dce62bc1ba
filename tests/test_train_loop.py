"""The training loop end to end on a tiny task: learning, exact resume, evaluate, bad input."""
import collections
import csv
import dataclasses
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys

import jax
import numpy as np
import pytest

from rsvqa_jax.bias import tables
from rsvqa_jax.data.answers import AnswerVocab
from rsvqa_jax.eval import accuracy
from rsvqa_jax.errors import RSVQAError
from rsvqa_jax.train import checkpointing, loop, restore
from rsvqa_jax.train.inputs import Features
from test_tensorboard_events import scalars
from test_train_support import forbid_slow_stages, held_by_another_process, tiny_config
from test_train_support import tiny_task, warnings_of_rsvqa_jax


def _config():
  c = tiny_config(batch_size=32, num_epochs=4, checkpoint_every_steps=8, log_every_steps=4)
  c.optim.lr = 1e-2
  c.optim.text_lr = 1e-2
  return c


@pytest.fixture(scope="module")
def task():
  return tiny_task(n_images=160)


@pytest.fixture(scope="module")
def finished(task, tmp_path_factory):
  workdir = str(tmp_path_factory.mktemp("run") / "w")
  summary = loop.train(_config(), workdir, dataset=task[0], features=task[1], log=lambda m: None)
  return workdir, summary


def _leaves(summary):
  return jax.tree.leaves(jax.device_get(summary["state"].params))


def test_trains_above_majority_baseline(task, finished):
  workdir, summary = finished
  assert summary["finished"]
  val = task[0]["val"]
  majority = collections.Counter(val.answer.tolist()).most_common(1)[0][1] / len(val)
  assert summary["best_oa"] > majority + 0.15
  lines = [json.loads(l) for l in pathlib.Path(workdir, "metrics.jsonl").read_text().splitlines()]
  val_lines = [l for l in lines if l["split"] == "val"]
  assert len(val_lines) == 4 and {"oa", "aa", "per_type"} <= set(val_lines[0])
  assert set(val_lines[0]["per_type"]) == {"presence", "rural_urban"}
  curves = scalars(pathlib.Path(workdir, "tensorboard"))
  assert curves["val/oa"] == [(l["step"], pytest.approx(l["oa"])) for l in val_lines]
  assert curves["val/per_type/presence"][-1][1] == pytest.approx(val_lines[-1]["per_type"][
      "presence"])
  assert "train/loss" in curves and "val/step" not in curves and "train/batch_size" not in curves
  assert checkpointing.Checkpoints(os.path.join(workdir, "best"), 1).latest_step() == summary["best_step"]


def test_kill_and_resume_equals_uninterrupted(task, finished, tmp_path):
  workdir = str(tmp_path / "w")
  quiet = dict(dataset=task[0], features=task[1], log=lambda m: None)
  first = loop.train(_config_stop(11), workdir, **quiet)
  assert not first["finished"] and first["step"] == 11
  second = loop.train(_config(), workdir, **quiet)  # resumes mid-epoch from the step-8 checkpoint
  assert second["finished"]
  for a, b in zip(_leaves(finished[1]), _leaves(second)):
    np.testing.assert_array_equal(a, b)
  lines = pathlib.Path(workdir, "metrics.jsonl").read_text().splitlines()
  steps = [(l["step"], l["split"]) for l in map(json.loads, lines)]
  assert len(steps) == len(set(steps))
  messages = []
  again = loop.train(_config(), workdir, dataset=task[0], features=task[1], log=messages.append)
  assert again["finished"] and "finished" in messages[0]


def _config_stop(n):
  c = _config()
  c.train.stop_after_steps = n
  return c


def test_a_run_stopped_before_its_first_validation_names_its_last_checkpoint(task, tmp_path):
  """It has periodic checkpoints and no best one yet: 'no checkpoint' would be wrong."""
  workdir, said = str(tmp_path / "w"), []
  loop.train(_config_stop(11), workdir, dataset=task[0], features=task[1], log=said.append)
  assert said[-1] == (f"{workdir}: stopping at step 11 (train.stop_after_steps, as if killed); "
                      "the next run resumes at step 8, the last checkpoint (steps since are done "
                      "again) (train.checkpoint_every_steps sets how often one is)"), said
  assert checkpointing.Checkpoints(os.path.join(workdir, "best"), 1).latest_step() is None
  with pytest.raises(RSVQAError, match=r"w: no best checkpoint yet \(no validation has run\); "
                     r"checkpoint 'last' \(--checkpoint last\) uses step 8$"):
    restore.restore(workdir, ["test"], dataset=task[0], features=task[1])
  assert restore.restore(workdir, ["test"], which="last", dataset=task[0],
                         features=task[1])[2] == 8


def test_a_run_stopped_before_its_first_checkpoint_says_how_to_go_on(task, tmp_path):
  """'no checkpoint to evaluate (has training run?)' though it had; and orbax's cleanup thread,
  still running when the error ended the command, printed a traceback under it at times."""
  workdir, said = str(tmp_path / "w"), []
  loop.train(_config_stop(1), workdir, dataset=task[0], features=task[1], log=said.append)
  assert said[-1].endswith("as if killed); no checkpoint was written: the next run starts over "
                           "(train.checkpoint_every_steps sets how often one is)"), said
  with pytest.raises(RSVQAError, match=(
      r"w: no checkpoint to evaluate: training stopped before its first one "
      r"\(train.checkpoint_every_steps\); run rsvqa-jax train --workdir \S+ again with its "
      r"config and overrides to go on$")):
    restore.restore(workdir, ["test"], which="last", dataset=task[0], features=task[1])
  manager = checkpointing.Checkpoints(os.path.join(workdir, "checkpoints"), 1).manager
  assert manager._cleanup_tmp_directory_future is None  # pylint: disable=protected-access


def test_workdir_of_another_config_is_refused(task, finished):
  c = _config()
  c.model.fusion = "mutan"
  with pytest.raises(RSVQAError, match=r"holds a run of another config: model.fusion is 'mult' "
                     r"there, 'mutan' now; use another --workdir or the same config$"):
    loop.train(c, finished[0], dataset=task[0], features=task[1])


def test_another_configs_huge_value_is_shortened(tmp_path):
  """A damaged 200,000-character value was echoed whole, twice; a real path keeps 200
  characters."""
  workdir = str(tmp_path / "w")
  checkpointing.check_or_record_config(workdir, _config())
  other = _config()
  other.data.cache_dir = "/x" * 100_000
  with pytest.raises(RSVQAError) as error:
    checkpointing.check_or_record_config(workdir, other)
  assert len(str(error.value)) < 600, len(str(error.value))
  assert re.search(r"data.cache_dir is \S+ there, '(/x){48}/\.\.\.(/x){49}/?x?' now; ",
                   str(error.value)), str(error.value)
  # Cut at 6 items, two tuples differing in their 8th read the same on both sides.
  other = _config()
  other.train.length_buckets = (*_config().train.length_buckets, 128)
  with pytest.raises(RSVQAError, match=re.escape(
      f"train.length_buckets is {list(_config().train.length_buckets)} there, "
      f"{list(other.train.length_buckets)} now; ")):
    checkpointing.check_or_record_config(workdir, other)


def test_a_workdir_without_a_checkpoint_says_deleting_it_loses_nothing(tmp_path):
  """A run that diverged before its first checkpoint leaves its config alone: the rerun with a
  lower learning rate is refused, and the message says the folder holds nothing to keep."""
  workdir = str(tmp_path / "diverged")
  checkpointing.check_or_record_config(workdir, _config())
  os.makedirs(os.path.join(workdir, "checkpoints"))
  lower = _config()
  lower.optim.lr = _config().optim.lr / 10
  with pytest.raises(RSVQAError, match=r"holds a run of another config: optim.lr .*; use another "
                     r"--workdir or the same config; it holds no checkpoint, so deleting it loses "
                     r"nothing$"):
    checkpointing.check_or_record_config(workdir, lower)


def test_a_refused_batch_size_leaves_the_workdir_free_for_a_fixed_config(task, tmp_path):
  """A config refused before training (a batch larger than the training set) is not recorded:
  rerun with the value the error offers, the same workdir trains instead of being 'a run of
  another config'."""
  workdir = str(tmp_path / "w")
  c = _config()
  c.train.batch_size = 4096
  with pytest.raises(RSVQAError, match=r"train.batch_size=4096: larger than the (\d+) training "
                     r"samples; set train.batch_size to \1 or less"):
    loop.train(c, workdir, dataset=task[0], features=task[1])
  # The folder it made (lock and answer classes only) is gone: a run on other data may use it.
  assert not os.path.exists(workdir)
  os.makedirs(workdir)  # one the user made stays, without a recorded config
  with pytest.raises(RSVQAError, match="larger than the"):
    loop.train(c, workdir, dataset=task[0], features=task[1])
  assert not os.path.exists(os.path.join(workdir, checkpointing.CONFIG_FILE))
  # The refused run's answer classes are not a trained run's: other data may train there.
  AnswerVocab(["a", "b"]).save(os.path.join(workdir, "answers.json"))
  c.train.batch_size, c.train.num_epochs = len(task[0]["train"]), 1
  assert loop.train(c, workdir, dataset=task[0], features=task[1], log=lambda m: None)["finished"]


def test_checkpoint_with_other_shapes_is_refused(finished):
  mgr = checkpointing.Checkpoints(os.path.join(finished[0], "checkpoints"), 2)
  items = jax.device_get(finished[1]["state"].checkpoint_items())
  items["params"]["head"]["head"]["classifier"]["logits"]["kernel"] = np.zeros((3, 3), np.float32)
  like = jax.tree.map(jax.numpy.asarray, items)
  with pytest.raises(RSVQAError, match=r"\['params'\]\['head'\]\['head'\]\['classifier'\]\['logits'\]\['kernel'\] "
                                       r"has shape/dtype \[16, 4, 'float32'\], the model built from the config expects \[3, 3"):
    mgr.restore(mgr.latest_step(), like)


def test_nan_loss_stops_and_names_the_step(task, tmp_path):
  dataset, features = task
  feats = np.array(features.features)
  feats[:] = np.nan
  c = _config()
  with pytest.raises(RSVQAError, match=r"training diverged at step 1 \(epoch 1\): loss is nan; "
                                       "stopped; no checkpoint was written"):
    loop.train(c, str(tmp_path / "w"), dataset=dataset, features=Features(feats, features.image_ids))
  assert checkpointing.Checkpoints(str(tmp_path / "w" / "checkpoints"), 2).latest_step() is None


def test_evaluate_writes_predictions_and_aggregates(task, finished):
  workdir = finished[0]
  table = accuracy.evaluate(workdir, "test", dataset=task[0], features=task[1])
  with open(os.path.join(workdir, "eval", "test", "predictions.csv")) as f:
    rows = list(csv.DictReader(f))
  test = task[0]["test"]
  assert [int(r["question_id"]) for r in rows] == test.question_id.tolist()
  assert set(rows[0]) == {"question_id", "image_id", "type", "prediction", "answer"}
  assert table["oa"] == pytest.approx(np.mean([r["prediction"] == r["answer"] for r in rows]))
  per_type = {t: np.mean([r["prediction"] == r["answer"] for r in rows if r["type"] == t])
              for t in ("presence", "rural_urban")}
  assert table["aa"] == pytest.approx(np.mean(list(per_type.values())))
  other = dict(table, oa=table["oa"] - 0.1)
  assert tables.mean_std(tables.run_columns([table, other])["OA"]) == pytest.approx(
      (table["oa"] - 0.05, 0.05))
  text = tables.to_markdown(tables.runs_table([table, other], "seeds"))
  assert f"| {100 * (table['oa'] - 0.05):.2f} (5.00) |" in text.splitlines()[-1]


def test_evaluate_names_a_training_type_the_split_lacks(task, finished):
  dataset, features = task
  test = dataset["test"]
  kept = test.select(test.qtype != "rural_urban")
  without = dataclasses.replace(dataset, splits={**dataset.splits, "test": kept})
  table = accuracy.evaluate(finished[0], "test", dataset=without, features=features)
  assert "rural_urban" in dataset["train"].qtypes and table["types_absent"] == ["rural_urban"]
  assert set(table["per_type"]) == set(kept.qtypes) and table["n"] == len(kept)
  whole = accuracy.evaluate(finished[0], "test", dataset=dataset, features=features)
  assert whole["types_absent"] == []


def test_evaluate_names_a_split_type_training_lacks(task, tmp_path, caplog):
  """analyze said so of such data; evaluate averaged the untrained type into AA unsaid."""
  dataset, features = task
  train = dataset["train"]
  without = dataclasses.replace(dataset, splits={
      **dataset.splits, "train": train.select(train.qtype != "rural_urban")})
  c = _config()
  c.train.num_epochs = 1
  workdir = str(tmp_path / "w")
  loop.train(c, workdir, dataset=without, features=features, log=lambda m: None)
  with warnings_of_rsvqa_jax(caplog):
    table = accuracy.evaluate(workdir, "test", dataset=without, features=features)
  assert "rural_urban" in table["per_type"]
  assert [r.getMessage() for r in caplog.records] == [
      f"{workdir}: split test has question type(s) rural_urban that the training split train "
      "has none of: the model answers them untrained, and AA averages them in"]


def test_two_evaluations_at_once_write_their_files_a_pair_at_a_time(task, finished, tmp_path):
  """One evaluation's accuracy.json stood beside another's predictions.csv (the second wrote its
  CSV between the first's CSV and JSON): the pair is written under a lock."""
  import logging  # pylint: disable=g-import-not-at-top
  import threading  # pylint: disable=g-import-not-at-top
  workdir = str(tmp_path / "w")
  shutil.copytree(finished[0], workdir)
  folder = os.path.join(workdir, "eval", "test")
  shutil.rmtree(folder, ignore_errors=True)  # an earlier test's evaluation of the run
  os.makedirs(folder)
  code = ("import fcntl, os, sys\n"
          f"fd = os.open(os.path.join({folder!r}, '.accuracy.json.lock'), os.O_RDWR | os.O_CREAT)\n"
          "fcntl.flock(fd, fcntl.LOCK_EX)\nprint('held', flush=True)\nsys.stdin.read()\n")
  holder = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
  waiting = threading.Event()

  class Waiting(logging.Handler):
    def emit(self, record):
      if "waiting for another process" in record.getMessage():
        waiting.set()
  handler, storage_log = Waiting(), logging.getLogger("rsvqa_jax.storage")
  storage_log.addHandler(handler)
  level, storage_log.level = storage_log.level, logging.INFO
  try:
    assert holder.stdout.readline().strip() == "held"
    done = []
    thread = threading.Thread(target=lambda: done.append(
        accuracy.evaluate(workdir, "test", dataset=task[0], features=task[1])))
    thread.start()
    while thread.is_alive() and not waiting.wait(0.05):
      pass
    assert waiting.is_set() and not os.path.exists(os.path.join(folder, "predictions.csv"))
    holder.communicate("")  # the other pair is written: this one goes on
    thread.join()
  finally:
    storage_log.removeHandler(handler)
    storage_log.setLevel(level)
    if holder.poll() is None:
      holder.communicate("")
  with open(os.path.join(folder, "accuracy.json"), encoding="utf-8") as f:
    assert json.load(f)["step"] == done[0]["step"]
  assert os.path.exists(os.path.join(folder, "predictions.csv"))


def test_reading_a_workdir_a_run_is_writing_says_so(task, finished):
  """evaluate scored a run still training at its checkpoint so far, with no word of it."""
  workdir, summary = finished
  with held_by_another_process(workdir) as pid:
    said = []
    restore.restore(workdir, ["test"], dataset=task[0], features=task[1], warn=said.append)
    assert len(said) == 1 and said[0].startswith(f"{workdir}: a run is writing there now (PID "
                                                 f"{pid} since "), said
    assert said[0].endswith(f"read at its best checkpoint so far, step {summary['best_step']}")
  said = []
  restore.restore(workdir, ["test"], dataset=task[0], features=task[1], warn=said.append)
  assert said == []


def test_a_reader_leaves_a_running_trainings_folders_alone(task, finished, tmp_path):
  """An evaluate beside a training removed the save in progress (orbax's temporary folder of
  the step being written) and the training died; a checkpoint that failed to read while the
  run wrote (its max_to_keep may remove it meanwhile) was moved away from under the run, and
  when none read, the error said to move the run's folders away."""
  workdir = str(tmp_path / "w")
  shutil.copytree(finished[0], workdir)
  saving = pathlib.Path(workdir, "checkpoints", "999.orbax-checkpoint-tmp", "state")
  saving.mkdir(parents=True)
  (saving / "part").write_bytes(b"being written")
  steps = checkpointing.Checkpoints(os.path.join(workdir, "checkpoints"), 1, reader=True).steps()
  newest = pathlib.Path(workdir, "checkpoints", str(steps[-1]))
  (newest / "_CHECKPOINT_METADATA").write_bytes(b"")
  with held_by_another_process(workdir) as pid:
    said = []
    _, _, step = restore.restore(workdir, ["test"], which="last", dataset=task[0],
                                 features=task[1], warn=said.append)
    assert step == steps[-2] and (saving / "part").read_bytes() == b"being written"
    assert newest.is_dir() and not os.path.exists(f"{workdir}/checkpoints.corrupted")
    assert said[0].startswith(f"checkpoint {newest}: _CHECKPOINT_METADATA unreadable ("), said
    assert said[0].endswith("; skipped, left in place (a run is writing there now: it may have "
                            "removed it while read)"), said
    damaged = pathlib.Path(workdir, "checkpoints", str(steps[-2]), "_CHECKPOINT_METADATA")
    kept = damaged.read_bytes()
    for step in steps:  # none reads
      pathlib.Path(workdir, "checkpoints", str(step), "_CHECKPOINT_METADATA").write_bytes(b"")
    with pytest.raises(RSVQAError) as e:
      restore.restore(workdir, ["test"], which="last", dataset=task[0], features=task[1],
                      warn=lambda m: None)
    assert str(e.value).endswith(f"; no other checkpoint in {workdir}/checkpoints read while a "
                                 f"run writes there (PID {pid}): run the command again once it "
                                 "has saved its next one"), e.value
    assert checkpointing.Checkpoints(os.path.join(workdir, "checkpoints"), 1,
                                     reader=True).steps() == steps
  for step in steps[:-1]:
    pathlib.Path(workdir, "checkpoints", str(step), "_CHECKPOINT_METADATA").write_bytes(kept)
  said = []
  restore.restore(workdir, ["test"], which="last", dataset=task[0], features=task[1],
                  warn=said.append)  # no run writing: a damaged checkpoint is set aside
  assert said[0].endswith(f"; skipped, moved to {workdir}/checkpoints.corrupted/{steps[-1]}")
  # A training run opening the folder removes what a killed save left.
  checkpointing.Checkpoints(os.path.join(workdir, "checkpoints"), 1)
  assert not saving.parent.exists()


def test_a_best_step_replaced_while_read_is_not_called_damage(task, finished, tmp_path):
  """A run validating better replaced best/ while an evaluate read it: the error said the run's
  best step had no checkpoint that verifies and offered an older step."""
  workdir = str(tmp_path / "w")
  shutil.copytree(finished[0], workdir)
  best = finished[1]["best_step"]
  for folder in ("best", "checkpoints"):  # gone while read
    shutil.rmtree(os.path.join(workdir, folder, str(best), "state"), ignore_errors=True)
  with held_by_another_process(workdir) as pid:
    with pytest.raises(RSVQAError) as e:
      restore.restore(workdir, ["test"], dataset=task[0], features=task[1], warn=lambda m: None)
  assert str(e.value) == (f"{workdir}/best: the run's best step {best} could not be read while "
                          f"a run writes there (PID {pid}), which replaces it as it validates; "
                          "run the command again")


def test_a_run_writing_its_first_checkpoint_is_waited_for_not_restarted(task, tmp_path):
  workdir = str(tmp_path / "w")
  os.makedirs(workdir)
  periodic = checkpointing.Checkpoints(os.path.join(workdir, "checkpoints"), 1, reader=True)
  with held_by_another_process(workdir) as pid:
    error = str(restore.no_checkpoint(workdir, "last", periodic, "evaluate"))
    assert error.startswith(f"{workdir}: no checkpoint to evaluate yet: a run is writing there "
                            f"now (PID {pid} since "), error
    assert error.endswith("); wait for its first checkpoint (train.checkpoint_every_steps)")
  assert "run rsvqa-jax train --workdir" in str(
      restore.no_checkpoint(workdir, "last", periodic, "evaluate"))


def test_a_batch_larger_than_the_train_split_is_refused_before_pretraining(tmp_path, monkeypatch):
  """From a dataset folder, the refusal came after the synthetic ResNet's pretraining and the
  feature extraction (minutes on a real set), where the question count alone decides it."""
  from rsvqa_jax import config as config_lib  # pylint: disable=g-import-not-at-top
  from rsvqa_jax.data import synthetic  # pylint: disable=g-import-not-at-top
  root = str(tmp_path / "lr")
  synthetic.generate(root, "lr", images=6, seed=0, questions_per_image=2)
  configs = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "configs")
  c = config_lib.apply_overrides(config_lib.load(os.path.join(configs, "synthetic_tiny.py")), [
      "data.synthetic=false", f"data.root={root}", f"data.cache_dir={tmp_path}/cache",
      "text.checkpoint=random", "image.arch=synthetic_resnet", "train.batch_size=32"])
  forbid_slow_stages(monkeypatch)
  with pytest.raises(RSVQAError) as e:
    loop.train(c, str(tmp_path / "w"), log=lambda m: None)
  assert str(e.value) == ("config train.batch_size=32: larger than the 8 training samples; set "
                          "train.batch_size to 8 or less")
  assert not os.path.exists(tmp_path / "w") and not os.path.exists(tmp_path / "cache")


def test_images_that_all_give_the_same_features_are_warned_of(task, tmp_path, caplog):
  """A dataset of black images trained and validated without a word; only an adversarial test
  refused it, after every model of a study had trained."""
  dataset, features = task
  same = Features(np.repeat(features.features[:1], len(features.features), axis=0),
                  features.image_ids)
  c = _config()
  c.train.num_epochs = 1
  with warnings_of_rsvqa_jax(caplog):
    loop.train(c, str(tmp_path / "same"), dataset=dataset, features=same, log=lambda m: None)
  said = [r.getMessage() for r in caplog.records]
  assert any(m.startswith(f"every image gives the same features ({len(same.features)} images: ")
             for m in said), said
  caplog.clear()
  with warnings_of_rsvqa_jax(caplog):
    loop.train(c, str(tmp_path / "own"), dataset=dataset, features=features, log=lambda m: None)
  assert not any("the same features" in r.getMessage() for r in caplog.records)
  alike = loop._rows_alike  # pylint: disable=protected-access
  assert alike(np.ones((9000, 3))) and alike(np.ones((9000, 3)), chunk_bytes=24)
  last_differs = np.concatenate([np.ones((8999, 3)), np.zeros((1, 3))])
  assert not alike(last_differs) and not alike(last_differs, chunk_bytes=24)
