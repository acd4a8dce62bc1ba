"""Training-time augmentation: positional questions, per-sample variant draws, resume, off."""
import dataclasses
import json
import os

import jax
import numpy as np
import pytest

from rsvqa_jax.data import records
from rsvqa_jax.errors import RSVQAError
from rsvqa_jax import config as config_lib
from rsvqa_jax.train import checkpointing, inputs, loop
from rsvqa_jax.train.inputs import Features
from test_train_support import tiny_config, tiny_task


def test_positional_questions_are_whole_words_of_the_lr_relations():
  questions = ["Is there a road on the left of a building?", "Is a water area on the right of "
               "a road?", "Is there a road at the top of a forest?", "How many buildings at the "
               "Bottom of a road?", "Is there a road next to a building?", "Is there a road?",
               "Is it a rural or an urban area", "Is the topology leftover?"]
  np.testing.assert_array_equal(inputs.positional_questions(questions),
                                [True, True, True, True, False, False, False, False])


def test_draws_keep_positional_clean_spread_variants_and_repeat_per_step():
  positional = np.arange(6000) % 3 == 0
  drawn = inputs.draw_variants(positional, 5, seed=3, step=7)
  assert (drawn[positional] == 0).all()
  counts = np.bincount(drawn[~positional], minlength=6)
  assert counts[0] == 0 and (np.abs(counts[1:] - 800) < 120).all()
  np.testing.assert_array_equal(drawn, inputs.draw_variants(positional, 5, seed=3, step=7))
  assert (drawn != inputs.draw_variants(positional, 5, seed=3, step=8)).any()
  assert (drawn != inputs.draw_variants(positional, 5, seed=4, step=7)).any()


def test_model_batch_reads_each_row_from_its_variant_table():
  tables = [np.arange(20, dtype=np.float32).reshape(10, 2) + 100 * v for v in range(3)]
  batch = {"image_index": np.array([4, 1, 4, 9]), "answer": np.zeros(4, np.int64),
           "tokens": np.zeros((4, 2), np.int32), "mask": np.ones((4, 2), np.int32)}
  variant = np.array([0, 2, 1, 2], np.int32)
  got = inputs.model_batch(batch, tables, variant=variant)["image_features"]
  np.testing.assert_array_equal(got, [tables[v][r] for v, r in zip(variant, [4, 1, 4, 9])])
  plain = inputs.model_batch(batch, tables[0])["image_features"]
  np.testing.assert_array_equal(plain, tables[0][[4, 1, 4, 9]])


def _config(variants=()):
  c = tiny_config(batch_size=16, num_epochs=2, checkpoint_every_steps=3, log_every_steps=3)
  c.data.augment_variants = tuple(variants)
  return c


@pytest.fixture(scope="module")
def task():
  dataset, features = tiny_task(n_images=40)
  rng = np.random.default_rng(1)
  given = {v: Features(rng.normal(size=features.features.shape).astype(np.float32),
                       features.image_ids) for v in ("hflip", "rot90")}
  return dataset, features, given


def _leaves(summary):
  return jax.tree.leaves(jax.device_get(summary["state"].params))


def _train(config, workdir, task, **kw):
  dataset, features, given = task
  kw.setdefault("augment_features", given)
  return loop.train(config, str(workdir), dataset=kw.pop("dataset", dataset), features=features,
                    log=lambda m: None, **kw)


@pytest.fixture(scope="module")
def augmented(task, tmp_path_factory):
  return _train(_config(("hflip", "rot90")), tmp_path_factory.mktemp("aug") / "w", task)


def test_kill_and_resume_with_augmentation_equals_uninterrupted(task, augmented, tmp_path):
  c = _config(("hflip", "rot90"))
  c.train.stop_after_steps = 4
  first = _train(c, tmp_path / "w", task)
  assert not first["finished"] and first["step"] == 4
  second = _train(_config(("hflip", "rot90")), tmp_path / "w", task)  # resumes from step 3
  assert second["finished"]
  for a, b in zip(_leaves(augmented), _leaves(second)):
    np.testing.assert_array_equal(a, b)


def test_augmentation_off_ignores_variants_and_on_changes_training(task, augmented, tmp_path):
  off = _train(_config(), tmp_path / "off", task)
  plain = _train(_config(), tmp_path / "plain", task, augment_features=None)
  for a, b in zip(_leaves(off), _leaves(plain)):
    np.testing.assert_array_equal(a, b)
  assert any(not np.array_equal(a, b) for a, b in zip(_leaves(off), _leaves(augmented)))


def test_only_non_positional_training_questions_read_variants(task, tmp_path):
  dataset, features, _ = task
  nan = {v: Features(np.full_like(features.features, np.nan), features.image_ids)
         for v in ("hflip", "rot90")}
  with pytest.raises(RSVQAError, match="diverged at step 1 .*loss is nan"):
    _train(_config(("hflip", "rot90")), tmp_path / "a", task, augment_features=nan)
  positional = {name: dataclasses.replace(split, question=np.array(
      [q.rstrip("?") + " on the left of a road?" for q in split.question.tolist()], object))
                for name, split in dataset.splits.items()}
  left = records.Dataset(name=dataset.name, root=dataset.root, splits=positional)
  summary = _train(_config(("hflip", "rot90")), tmp_path / "b", task, dataset=left,
                   augment_features=nan)
  assert summary["finished"] and all(np.isfinite(x).all() for x in _leaves(summary))


def test_bad_variants_are_refused(task, tmp_path):
  with pytest.raises(RSVQAError, match=r"config data.augment_variants=\('spin',\): 'spin' is not "
                                       r"one of them; choose one of none, hflip"):
    _train(_config(("spin",)), tmp_path / "a", task)
  with pytest.raises(RSVQAError, match=r"no features were given for variant 'vflip'"):
    _train(_config(("vflip",)), tmp_path / "b", task)
  assert not os.path.exists(tmp_path / "a" / checkpointing.CONFIG_FILE)


def test_workdirs_recorded_before_the_key_still_match(tmp_path):
  old = config_lib.to_dict(_config())
  del old["data"]["augment_variants"]
  os.makedirs(tmp_path / "w")
  with open(tmp_path / "w" / checkpointing.CONFIG_FILE, "w") as f:
    json.dump(old, f)
  assert checkpointing.check_or_record_config(str(tmp_path / "w"), _config()) is False
  with pytest.raises(RSVQAError, match=r"data.augment_variants is \[\] there"):
    checkpointing.check_or_record_config(str(tmp_path / "w"), _config(("hflip",)))
