"""The evaluators over a restored run: clean accuracy and adversarial testing, one compiled step.

The substitutions are checked by hand, K substituted repeats against K separate clean
evaluations of swapped datasets, the command on cached features (random-init ResNet and the
pretrained synthetic ResNet of configs/synthetic_small.py), and that clean and adversarial
evaluation of a bfloat16 run agree exactly when the substitution is the identity.
"""
import argparse
import csv
import dataclasses
import json
import os
import types

import numpy as np
import pytest

from rsvqa_jax import cli
from rsvqa_jax import config as config_lib
from rsvqa_jax.commands import evaluate as evaluate_cmd
from rsvqa_jax.data.records import Split
from rsvqa_jax.errors import RSVQAError
from rsvqa_jax.eval import accuracy, adversarial, outputs
from rsvqa_jax.train import loop, predict, restore
from test_train_support import tiny_config, tiny_task

QUIET = dict(log=lambda m: None)
CONFIGS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "configs")


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


def test_random_never_picks_own_image_and_covers_pool():
  rows = np.repeat(np.arange(10), 20)
  sub = adversarial.substitution_rows("random", rows, repeats=5, seed=0)
  assert sub.shape == (5, 200)
  assert not np.any(sub == rows[None])
  assert set(np.unique(sub)) == set(range(10))


def test_random_needs_two_images():
  with pytest.raises(RSVQAError, match="two distinct"):
    adversarial.substitution_rows("random", np.zeros(4, int), repeats=1, seed=0)


def test_shuffle_permutes_within_batches():
  rows = np.arange(10)
  sub = adversarial.substitution_rows("shuffle", rows, repeats=3, seed=1, batch_size=4)
  for k in range(3):
    for s in range(0, 10, 4):
      assert sorted(sub[k, s:s + 4]) == list(rows[s:s + 4])


def test_pixel_kinds_keep_rows():
  rows = np.array([3, 1, 2])
  np.testing.assert_array_equal(
      adversarial.substitution_rows("white", rows, repeats=2, seed=0), [rows, rows])


def test_out_of_vocabulary_answers_are_wrong_and_counted():
  rows = [dict(question_id=i, image_id=0, qtype=t, question="q", answer="a", raw_answer="a")
          for i, t in enumerate(["presence", "presence", "count", "count"])]
  split = Split.from_rows("test", rows)
  run = types.SimpleNamespace(
      columns={"test": types.SimpleNamespace(columns={"answer": np.array([0, -1, 1, -1])})},
      dataset={"test": split})
  preds = np.array([[0, -1, 1, 2]])  # a -1 prediction never matches a -1 answer
  table = predict.accuracy(run, "test", preds)
  assert table["n_out_of_vocabulary"] == 2
  assert table["oa"] == pytest.approx(0.5)
  assert table["per_type"] == pytest.approx({"presence": 0.5, "count": 0.5})


def test_random_repeats_equal_separate_evaluations(trained):
  dataset, feats, workdir = trained
  k, seed = 3, 7
  out = adversarial.evaluate(workdir, "test", "random", repeats=k, seed=seed, dataset=dataset,
                             features=feats)
  test = dataset["test"]
  # The substitutions the evaluator must have used: rows of each question's image in `feats`.
  rows = np.searchsorted(feats.image_ids, test.image_id)
  assert np.array_equal(feats.image_ids[rows], test.image_id)
  sub = adversarial.substitution_rows("random", rows, repeats=k, seed=seed)
  json_path, csv_path = outputs.adversarial_paths(workdir, "test", "random")
  with open(json_path) as f:
    assert json.load(f) == json.loads(json.dumps(out))
  first = _read_csv(csv_path)
  assert [int(r["question_id"]) for r in first] == test.question_id.tolist()
  assert [int(r["substituted_image_id"]) for r in first] == feats.image_ids[sub[0]].tolist()
  assert all(r["substituted_image_id"] != r["image_id"] for r in first)
  # Each repeat = a clean evaluation of the split with every question's image swapped.
  accs = []
  for j in range(k):
    swapped = dataclasses.replace(test, image_id=feats.image_ids[sub[j]])
    ds = dataclasses.replace(dataset, splits={**dataset.splits, "test": swapped})
    run, state, _ = restore.restore(workdir, ["test"], dataset=ds, features=feats)
    preds = predict.predict(run, state, "test")[0]
    answers = run.columns["test"].columns["answer"]
    accs.append(float(np.mean(preds == answers)))
    if j == 0:
      assert run.vocab.decode(preds) == [r["prediction"] for r in first]
  np.testing.assert_allclose(out["per_repeat"]["oa"], accs, atol=1e-12)
  assert out["oa"] == pytest.approx(np.mean(accs), abs=1e-12)
  assert out["std"]["oa"] == pytest.approx(np.std(accs), abs=1e-12)
  assert out["repeats"] == k and set(out["per_type"]) == {"presence", "rural_urban"}


def test_clean_evaluation_writes_its_table_and_predictions(trained):
  dataset, feats, workdir = trained
  table = accuracy.evaluate(workdir, "test", dataset=dataset, features=feats)
  json_path, csv_path = outputs.accuracy_paths(workdir, "test")
  with open(json_path) as f:
    assert json.load(f) == json.loads(json.dumps(table))
  rows = _read_csv(csv_path)
  right = [r["prediction"] == r["answer"] for r in rows]
  assert table["oa"] == pytest.approx(np.mean(right))
  assert table["n"] == len(rows) == len(dataset["test"]) and table["repeats"] == 1


def test_blind_workdir_and_bad_kind_refused(trained, tmp_path):
  dataset, feats, workdir = trained
  with pytest.raises(RSVQAError, match="choose one of"):
    adversarial.evaluate(workdir, "test", "sepia", dataset=dataset, features=feats)
  with pytest.raises(RSVQAError, match="split 'nosuch'"):
    accuracy.evaluate(workdir, "nosuch", dataset=dataset, features=feats)
  blind = str(tmp_path / "blind")
  c = tiny_config(batch_size=16, num_epochs=1)
  c.model.blind = True
  loop.train(c, blind, dataset=dataset, features=feats, **QUIET)
  with pytest.raises(RSVQAError, match="visual-blind"):
    adversarial.evaluate(blind, "test", "random", dataset=dataset, features=feats)


def test_bfloat16_identity_substitution_equals_clean_evaluation(tmp_path, monkeypatch):
  """Same compiled step, same dtype: swapping each image for itself changes no answer."""
  dataset, feats = tiny_task(n_images=40)
  workdir = str(tmp_path / "bf16")
  c = tiny_config(batch_size=16, num_epochs=2, compute_dtype="bfloat16")
  c.model.fusion = "mutan"
  loop.train(c, workdir, dataset=dataset, features=feats, **QUIET)
  clean = accuracy.evaluate(workdir, "test", dataset=dataset, features=feats)
  identity = lambda kind, rows, *, repeats, seed, batch_size=None: np.broadcast_to(
      rows, (repeats, len(rows))).copy()
  monkeypatch.setattr(adversarial, "substitution_rows", identity)
  adv = adversarial.evaluate(workdir, "test", "random", repeats=3, dataset=dataset,
                             features=feats)
  assert adv["per_repeat"]["oa"] == [clean["oa"]] * 3
  assert adv["per_repeat"]["per_type"] == {t: [v] * 3 for t, v in clean["per_type"].items()}
  _, clean_csv = outputs.accuracy_paths(workdir, "test")
  _, adv_csv = outputs.adversarial_paths(workdir, "test", "random")
  assert ([r["prediction"] for r in _read_csv(clean_csv)]
          == [r["prediction"] for r in _read_csv(adv_csv)])


def _synthetic_config(name, tmp_path, *overrides):
  c = config_lib.load(os.path.join(CONFIGS, name))
  return config_lib.apply_overrides(c, [
      "data.synthetic_images=24", "data.synthetic_questions_per_image=8", "train.num_epochs=1",
      "train.batch_size=16", "train.progress_bar=false", f"data.cache_dir={tmp_path / 'cache'}",
      *overrides])


def test_evaluate_command_writes_json_and_csv(tmp_path, capsys):
  """`rsvqa-jax evaluate --adversarial` on a synthetic workdir (features from the cache)."""
  workdir = str(tmp_path / "run")
  loop.train(_synthetic_config("synthetic_tiny.py", tmp_path), workdir, **QUIET)
  parser = argparse.ArgumentParser()
  evaluate_cmd.add_arguments(parser)
  for kind in ("random", "white"):
    args = parser.parse_args(["--workdir", workdir, "--adversarial", kind, "--repeats", "2"])
    assert evaluate_cmd.run(args) == 0
    json_path, csv_path = outputs.adversarial_paths(workdir, "test", kind)
    with open(json_path) as f:
      out = json.load(f)
    assert out["kind"] == kind and out["repeats"] == 2 and len(out["per_repeat"]["oa"]) == 2
    assert 0.0 <= out["oa"] <= 1.0
    rows = _read_csv(csv_path)
    assert rows and {"question_id", "prediction"} <= set(rows[0])
    if kind == "white":  # the features stay in place: each question keeps its own row
      assert all(r["substituted_image_id"] == r["image_id"] for r in rows)
      assert out["std"]["oa"] == 0.0  # white images are the same in every repeat
  assert "std over the 2 repeats" in capsys.readouterr().out


def test_pixel_kinds_on_a_synthetic_resnet_workdir(tmp_path):
  """configs/synthetic_small.py's encoder (pretrained synthetic ResNet) under every pixel kind."""
  c = _synthetic_config(
      "synthetic_small.py", tmp_path, "image.pretrain.epochs=1", "image.pretrain.image_size=32",
      "image.pretrain.width=8", "image.pretrain.batch_size=8", "image.batch_size=8",
      "text.word_dim=16", "text.hidden_dim=16", "model.hidden_dim=16", "model.classifier_dim=8",
      "train.eval_batch_size=32")
  workdir = str(tmp_path / "small")
  loop.train(c, workdir, **QUIET)
  assert os.path.isdir(os.path.join(tmp_path, "cache", config_lib.PRETRAINED_DIR))
  for kind in adversarial.PIXEL_KINDS:
    assert cli.main(["evaluate", "--workdir", workdir, "--adversarial", kind,
                     "--repeats", "2"]) == 0
    with open(outputs.adversarial_paths(workdir, "test", kind)[0]) as f:
      assert json.load(f)["kind"] == kind
