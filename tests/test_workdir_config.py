"""A workdir's recorded config: refused when another run's, its paths following a moved folder."""
import json
import logging
import os
import shutil

import pytest

from rsvqa_jax.errors import RSVQAError
from rsvqa_jax import config as config_lib
from rsvqa_jax.data import split_files
from rsvqa_jax.train import checkpointing
from test_train_support import warnings_of_rsvqa_jax


def _config(root, cache):
  c = config_lib.base_config()
  c.data.root, c.data.cache_dir, c.text.checkpoint = root, cache, config_lib.RANDOM
  return c


def test_paths_follow_a_moved_tree_and_shared_ones_stay(tmp_path, caplog):
  old = tmp_path / "old"
  for sub in ("data", "cache", "runs/a"):
    os.makedirs(old / sub)
  elsewhere = tmp_path / "shared_cache"
  os.makedirs(elsewhere)
  workdir = str(old / "runs" / "a")
  assert checkpointing.check_or_record_config(workdir, _config(str(old / "data"), str(elsewhere)))
  with open(os.path.join(workdir, checkpointing.CONFIG_FILE)) as f:
    assert json.load(f)[checkpointing.RECORDED_IN] == workdir

  new = tmp_path / "new"
  shutil.move(str(old), str(new))
  moved = str(new / "runs" / "a")
  with warnings_of_rsvqa_jax(caplog, logging.INFO):
    config = checkpointing.read_config(moved)
    checkpointing.read_config(moved)  # said once
  assert config.data.root == str(new / "data")  # gone from the old place: follows the move
  # Said, so that a message naming the new place (a resume of "another config") is understood.
  assert [r.getMessage() for r in caplog.records] == [
      f"{moved}: data.root={old / 'data'} as recorded in {workdir} is read as {new / 'data'}, "
      "beside the workdir's new place"]
  assert config.data.cache_dir == str(elsewhere)  # still there: kept as recorded
  assert checkpointing.check_or_record_config(
      moved, _config(str(new / "data"), str(elsewhere))) is False
  with pytest.raises(RSVQAError, match="data.cache_dir"):
    checkpointing.check_or_record_config(moved, _config(str(new / "data"), str(new / "cache")))


def test_another_spelling_of_the_same_folders_is_the_same_run(tmp_path, monkeypatch):
  """'/x/ds/' and '../ds' from /x/runs were refused as "a run of another config"."""
  os.makedirs(tmp_path / "ds")
  os.makedirs(tmp_path / "runs")
  workdir = str(tmp_path / "runs" / "w")
  cache = str(tmp_path / "cache")
  assert checkpointing.check_or_record_config(workdir, _config(str(tmp_path / "ds"), cache))
  for root in (str(tmp_path / "ds") + "/", str(tmp_path / "runs" / ".." / "ds")):
    assert checkpointing.check_or_record_config(workdir, _config(root, cache)) is False
  monkeypatch.chdir(tmp_path / "runs")
  assert checkpointing.check_or_record_config("w", _config("../ds", "../cache")) is False
  with pytest.raises(RSVQAError, match="data.root"):
    checkpointing.check_or_record_config("w", _config("../other", "../cache"))


def test_relative_paths_are_recorded_absolute_and_a_gone_dataset_names_data_root(
    tmp_path, monkeypatch):
  """data.root=ds from /x was recorded as 'ds': evaluate from another folder looked for its
  dataset there ('config data.root=ds: folder does not exist', with no word of --data-root)."""
  os.makedirs(tmp_path / "ds")
  monkeypatch.chdir(tmp_path)
  assert checkpointing.check_or_record_config("w", _config("ds", "cache"))
  with open(tmp_path / "w" / checkpointing.CONFIG_FILE) as f:
    recorded = json.load(f)
  assert recorded["data"]["root"] == str(tmp_path / "ds")
  assert recorded["data"]["cache_dir"] == str(tmp_path / "cache")
  assert recorded["text"]["checkpoint"] == config_lib.RANDOM  # not a path: kept
  monkeypatch.chdir(tmp_path / "w")
  config = checkpointing.read_config(".")
  assert config.data.root == str(tmp_path / "ds")
  checkpointing.refuse_moved_dataset(config, ".")  # there: nothing to say
  os.rename(tmp_path / "ds", tmp_path / "ds2")
  with pytest.raises(RSVQAError, match=(
      rf"^\.: its dataset folder {tmp_path}/ds \(config data.root\) does not exist; moved\? give "
      r"its new place with --data-root \(load_run: data_root=\)$")):
    checkpointing.refuse_moved_dataset(checkpointing.read_config("."), ".")


def test_data_root_replaces_the_recorded_folder_and_is_refused_where_none_is_read(tmp_path):
  """evaluate --data-root: the dataset folder after a move; a synthetic workdir generates its data
  from its config, so a --data-root there would be ignored: refused instead."""
  data, elsewhere = tmp_path / "data", tmp_path / "moved_data"
  data.mkdir()
  elsewhere.mkdir()
  real = str(tmp_path / "real")
  assert checkpointing.check_or_record_config(real, _config(str(data), str(tmp_path / "cache")))
  assert checkpointing.read_config(real).data.root == str(data)
  assert checkpointing.read_config(real, str(elsewhere)).data.root == str(elsewhere)
  with pytest.raises(RSVQAError, match=r"^--data-root .*/nowhere: not a folder$"):
    checkpointing.read_config(real, str(tmp_path / "nowhere"))

  c = _config("", str(tmp_path / "cache"))
  c.data.synthetic, c.data.synthetic_images = True, 12
  synthetic = str(tmp_path / "synthetic")
  assert checkpointing.check_or_record_config(synthetic, c)
  assert checkpointing.read_config(synthetic).data.synthetic
  with pytest.raises(RSVQAError, match=r"trains on the synthetic dataset its config generates "
                                       r"\(.*synthetic_lr_12_0_q100\), not on a dataset folder"):
    checkpointing.read_config(synthetic, str(elsewhere))


def test_paths_follow_a_copied_tree_while_the_original_stays(tmp_path):
  """A copy resumes on its own files: the synthetic ResNet's folder (image.pretrained_dir) and
  the data follow it, though the original's are still there."""
  old = tmp_path / "old"
  for sub in ("data", "cache/resnet", "runs/a"):
    os.makedirs(old / sub)
  workdir = str(old / "runs" / "a")
  c = _config(str(old / "data"), str(old / "cache"))
  c.image.pretrained_dir = str(old / "cache" / "resnet")
  checkpointing.check_or_record_config(workdir, c)
  shutil.copytree(old, tmp_path / "copy")
  config = checkpointing.read_config(str(tmp_path / "copy" / "runs" / "a"))
  assert (config.data.root, config.data.cache_dir, config.image.pretrained_dir) == (
      str(tmp_path / "copy" / "data"), str(tmp_path / "copy" / "cache"),
      str(tmp_path / "copy" / "cache" / "resnet"))


def test_an_answer_vocabulary_that_changed_names_the_first_class_that_differs(tmp_path):
  from rsvqa_jax.data.answers import AnswerVocab  # pylint: disable=g-import-not-at-top
  from rsvqa_jax.train import inputs  # pylint: disable=g-import-not-at-top
  from test_train_support import tiny_config, tiny_task  # pylint: disable=g-import-not-at-top
  dataset, _ = tiny_task()
  config = tiny_config()
  vocab = AnswerVocab.for_dataset(dataset, dataset[config.data.train_split])
  path = tmp_path / inputs.ANSWERS_FILE
  (tmp_path / "config.json").write_text("{}")  # a trained workdir's (before: a refused run's)
  AnswerVocab(vocab.answers[:1] + ("purple",) + vocab.answers[2:]).save(str(path))
  with pytest.raises(RSVQAError, match=rf"trained on {len(vocab)} answer classes, the dataset "
                                       rf"now gives {len(vocab)}; class 1 is 'purple' there, "
                                       rf"'{vocab.answers[1]}' now: dataset changed\?"):
    inputs.answer_vocab(dataset, config, str(tmp_path))
  AnswerVocab(vocab.answers[:-1]).save(str(path))
  with pytest.raises(RSVQAError, match=rf"class {len(vocab) - 1} is no answer there, "):
    inputs.answer_vocab(dataset, config, str(tmp_path))


def test_configs_of_other_question_counts_generate_in_other_folders(tmp_path):
  """Two configs sharing a cache folder, 20 and 10 questions per image, replaced each other's
  dataset there, and the first one's runs could no longer be evaluated."""
  a, b = _config("", str(tmp_path / "cache")), _config("", str(tmp_path / "cache"))
  a.data.synthetic_questions_per_image, b.data.synthetic_questions_per_image = 20, 10
  roots = {config_lib.synthetic_root(c, str(tmp_path / "w")) for c in (a, b)}
  assert len(roots) == 2 and all(os.path.dirname(r) == str(tmp_path / "cache") for r in roots)


def test_a_new_workdir_inside_another_run_is_refused(tmp_path):
  """runs/a/best/x (a typo) became a run among run a's checkpoints; a folder beside a config.json
  of something else (no checkpoint) is not a run's."""
  run = tmp_path / "runs" / "a"
  assert checkpointing.check_or_record_config(str(run), _config(str(tmp_path), str(tmp_path)))
  inside = str(run / "best" / "x")
  assert checkpointing.check_or_record_config(inside, _config(str(tmp_path), str(tmp_path)))
  shutil.rmtree(inside)  # a run that never saved a checkpoint does not hold the folder
  os.makedirs(run / "best" / "8")
  with pytest.raises(RSVQAError, match=rf"^--workdir {inside} lies inside the training run {run}; "
                                       r"give the new run a folder of its own$"):
    checkpointing.check_or_record_config(inside, _config(str(tmp_path), str(tmp_path)))
  assert not os.path.exists(inside)


def test_data_root_of_another_layout_or_its_parent_names_what_to_give(tmp_path):
  """evaluate --data-root given an HR folder for an LR run was told to name it with --dataset hr,
  an option evaluate lacks (the run is LR); a folder one level up was told to give --data."""
  real = str(tmp_path / "real")
  assert checkpointing.check_or_record_config(real, _config(str(tmp_path), str(tmp_path / "c")))
  def holding(folder, name):
    path = split_files.split_file(str(folder), name, "train", "questions")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    open(path, "w").close()
    return str(folder)
  hr = holding(tmp_path / "hr", "hr")
  with pytest.raises(RSVQAError, match=rf"^--data-root {hr}: the folder holds dataset hr, and "
                     rf"{real} trained on dataset lr \(its data.name\): give --data-root a folder "
                     "of dataset lr$"):
    checkpointing.read_config(real, hr)
  top = tmp_path / "download"
  lr = holding(top / "RSVQA_LR", "lr")
  holding(top / "RSVQA_HR", "hr")
  with pytest.raises(RSVQAError, match=rf"^--data-root {top}: the dataset lr files are in {lr}: "
                     rf"give --data-root {lr}$"):
    checkpointing.read_config(real, str(top))
  assert checkpointing.read_config(real, lr).data.root == lr
