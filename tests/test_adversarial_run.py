"""Adversarial testing of trained workdirs: the glue (rows, repeats) and the evaluate command."""
import argparse
import csv
import dataclasses
import json
import os

import numpy as np
import pytest

from rsvqa_jax.bias import adversarial, adversarial_run
from rsvqa_jax.commands import evaluate
from rsvqa_jax.errors import RSVQAError
from rsvqa_jax.train import config_lib, loop
from test_train_support import tiny_config, tiny_task

QUIET = dict(log=lambda m: None)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
  """An in-memory task (image ids 100.., not feature rows) and a reference model trained on it."""
  dataset, feats = tiny_task(n_images=60)
  workdir = str(tmp_path_factory.mktemp("adv") / "ref")
  c = tiny_config(batch_size=16, num_epochs=3)
  c.optim.lr = c.optim.text_lr = 1e-2
  loop.train(c, workdir, dataset=dataset, features=feats, **QUIET)
  return dataset, feats, workdir


def _read_csv(path):
  with open(path, newline="") as f:
    return list(csv.DictReader(f))


def test_random_repeats_equal_separate_evaluations(trained):
  dataset, feats, workdir = trained
  k, seed = 3, 7
  out = adversarial_run.evaluate_workdir(workdir, "test", "random", repeats=k, seed=seed,
                                         dataset=dataset, features=feats)
  test = dataset["test"]
  # The substitutions the glue must have used: rows of each question's image in `feats`.
  rows = np.searchsorted(feats.image_ids, test.image_id)
  assert np.array_equal(feats.image_ids[rows], test.image_id)
  sub = adversarial.substitution_rows("random", rows, repeats=k, seed=seed)
  json_path, csv_path = adversarial_run.output_paths(workdir, "test", "random")
  with open(json_path) as f:
    assert json.load(f) == json.loads(json.dumps(out))
  first = _read_csv(csv_path)
  assert [int(r["question_id"]) for r in first] == test.question_id.tolist()
  assert [int(r["substituted_image_id"]) for r in first] == feats.image_ids[sub[0]].tolist()
  assert all(r["substituted_image_id"] != r["image_id"] for r in first)
  # Each repeat = a clean evaluation of the split with every question's image swapped.
  config = config_lib.from_dict(json.load(open(os.path.join(workdir, "config.json"))))
  accs = []
  for j in range(k):
    swapped = dataclasses.replace(test, image_id=feats.image_ids[sub[j]])
    ds = dataclasses.replace(dataset, splits={**dataset.splits, "test": swapped})
    s = loop.setup(config, workdir, ["test"], dataset=ds, features=feats)
    state, _ = loop.new_state(s)
    preds = loop.predict(s, _restored(s, workdir, state), "test")
    answers = s.columns["test"].columns["answer"]
    accs.append(float(np.mean(preds == answers)))
    if j == 0:
      assert s.vocab.decode(preds) == [r["prediction"] for r in first]
  np.testing.assert_allclose(out["per_repeat"]["oa"], accs, atol=1e-12)
  np.testing.assert_allclose(out["oa"], [np.mean(accs), np.std(accs)], atol=1e-12)
  assert set(out["per_type"]) == {"presence", "rural_urban"}


def _restored(s, workdir, state):
  from rsvqa_jax.train import checkpointing  # pylint: disable=g-import-not-at-top
  mgr = checkpointing.Checkpoints(os.path.join(workdir, "best"), 1)
  items, _ = mgr.restore(mgr.latest_step(), state.checkpoint_items())
  return state.replace(**items)


def test_summarize_by_hand():
  preds = np.array([[1, 0, 1, 1], [0, 0, 1, 0]])
  answers = np.array([1, 0, 0, 1])
  qtypes = np.array(["a", "a", "b", "b"])
  out = adversarial_run.summarize(preds, answers, qtypes, ("a", "b", "c"))
  # repeat 0: a 2/2, b 1/2, OA 3/4; repeat 1: a 1/2, b 0/2, OA 1/4.
  assert out["per_repeat"]["oa"] == [0.75, 0.25]
  assert out["per_repeat"]["per_type"] == {"a": [1.0, 0.5], "b": [0.5, 0.0]}
  assert out["oa"] == [0.5, 0.25]
  assert out["aa"] == [0.5, 0.25]
  assert set(out["per_type"]) == {"a", "b"}


def test_blind_workdir_and_bad_kind_refused(trained, tmp_path):
  dataset, feats, workdir = trained
  with pytest.raises(RSVQAError, match="choose one of"):
    adversarial_run.evaluate_workdir(workdir, "test", "sepia", dataset=dataset, features=feats)
  blind = str(tmp_path / "blind")
  c = tiny_config(batch_size=16, num_epochs=1)
  c.model.blind = True
  loop.train(c, blind, dataset=dataset, features=feats, **QUIET)
  with pytest.raises(RSVQAError, match="visual-blind"):
    adversarial_run.evaluate_workdir(blind, "test", "random", dataset=dataset, features=feats)


def test_evaluate_command_writes_json_and_csv(tmp_path, capsys):
  """`rsvqa-jax evaluate --adversarial` on a synthetic workdir (features from the cache)."""
  c = config_lib.load(os.path.join(os.path.dirname(__file__), "..", "configs",
                                   "synthetic_tiny.py"))
  config_lib.apply_overrides(c, ["data.synthetic_images=24", "data.synthetic_questions_per_image=8",
                                 "train.num_epochs=1", "train.batch_size=16",
                                 "train.progress_bar=false", "data.cache_dir=" + str(tmp_path / "cache")])
  workdir = str(tmp_path / "run")
  loop.train(c, workdir, **QUIET)
  parser = argparse.ArgumentParser()
  evaluate.add_arguments(parser)
  for kind in ("random", "white"):
    args = parser.parse_args(["--workdir", workdir, "--adversarial", kind, "--repeats", "2"])
    assert evaluate.run(args) == 0
    json_path, csv_path = adversarial_run.output_paths(workdir, "test", kind)
    with open(json_path) as f:
      out = json.load(f)
    assert out["kind"] == kind and out["repeats"] == 2 and len(out["per_repeat"]["oa"]) == 2
    assert 0.0 <= out["oa"][0] <= 1.0
    rows = _read_csv(csv_path)
    assert rows and {"question_id", "prediction"} <= set(rows[0])
    if kind == "white":  # the features stay in place: each question keeps its own row
      assert all(r["substituted_image_id"] == r["image_id"] for r in rows)
      assert out["oa"][1] == 0.0  # white images are the same in every repeat
  assert "mean (std) over repeats" in capsys.readouterr().out
