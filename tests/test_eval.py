"""The evaluators over a restored run: clean accuracy and adversarial testing, one compiled step.

The substitutions are checked by hand, K substituted repeats against K separate clean
evaluations of swapped datasets, the command on cached features (random-init ResNet and the
pretrained synthetic ResNet of configs/synthetic_small.py), and that clean and adversarial
evaluation of a bfloat16 run agree exactly when the substitution is the identity.
"""
import argparse
import csv
import dataclasses
import functools
import json
import os
import pathlib
import types

import numpy as np
import pytest

from rsvqa_jax import cli
from rsvqa_jax import config as config_lib
from rsvqa_jax.bias import analysis, predictions, tables
from rsvqa_jax.commands import evaluate as evaluate_cmd
from rsvqa_jax.data import rsvqa_json
from rsvqa_jax.data.records import Split
from rsvqa_jax.errors import RSVQAError
from rsvqa_jax.eval import accuracy, adversarial, outputs
from rsvqa_jax.train import inputs, loop, predict, restore
from test_train_support import tiny_config, tiny_task, warnings_of_rsvqa_jax

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


def test_repeats_default_per_kind_and_alike_repeats_are_warned_of(caplog):
  """White and black use one image for all, noise one per image: their repeats answer alike,
  so K of them cost K times the work for the same numbers (given K, with a WARNING; unless told,
  1). Noise ran 10 alike repeats by default, and reported their std of 0 as a spread."""
  with warnings_of_rsvqa_jax(caplog):
    assert adversarial.chosen_repeats("random", None, "--repeats") == adversarial.REPEATS
    assert adversarial.chosen_repeats("shuffle", 5, "--repeats") == 5
    assert adversarial.chosen_repeats("white", None, "--repeats") == 1
    assert adversarial.chosen_repeats("noise", None, "--repeats") == 1
    assert adversarial.chosen_repeats("black", 1, "--repeats") == 1
    assert not caplog.records
    assert adversarial.chosen_repeats("white", 5, "--repeats") == 5
    assert adversarial.chosen_repeats("noise", 3, "--repeats") == 3
  assert [r.getMessage() for r in caplog.records] == [
      "--repeats 5: every white repeat answers alike (one white image for all), so they take 5 "
      "times the work of one for the same numbers",
      "--repeats 3: every noise repeat answers alike (one noise image per image), so they take 3 "
      "times the work of one for the same numbers"]


def test_random_never_picks_own_image_and_covers_pool():
  rows = np.repeat(np.arange(10), 20)
  sub = adversarial.substitution_rows("random", rows, repeats=5, seed=0)
  assert sub.shape == (5, 200)
  assert not np.any(sub == rows[None])
  assert set(np.unique(sub)) == set(range(10))


def test_random_needs_two_images():
  with pytest.raises(RSVQAError, match=r"two distinct images in its pool; this split holds one: "
                                       r"draw from the dataset's \(--pool dataset\)$"):
    adversarial.substitution_rows("random", np.zeros(4, int), repeats=1, seed=0)
  with pytest.raises(RSVQAError, match="two distinct images in its pool$"):
    adversarial.substitution_rows("random", np.zeros(4, int), repeats=1, seed=0,
                                  pool=np.zeros(1, int))


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
  # The default pool: every image of the dataset (all of `feats`), never the question's own.
  sub = adversarial.substitution_rows("random", rows, repeats=k, seed=seed,
                                      pool=np.arange(len(feats.image_ids)))
  json_path, csv_path = outputs.adversarial_paths(workdir, "test", "random")
  with open(json_path) as f:
    assert json.load(f) == json.loads(json.dumps(out))
  assert (out["pool"], out["pool_images"]) == ("dataset", len(feats.image_ids))
  assert out["predictions"]["n_mapped"] == out["predictions"]["n_outside_answer_space"] == 0
  # which questions were scored: `tables` pools only evaluations of the same ones
  assert out["split_sha256"] == test.fingerprint()
  written = _read_csv(csv_path)
  assert [int(r["repeat"]) for r in written] == np.repeat(np.arange(k), len(test)).tolist()
  by_repeat = [written[j * len(test):(j + 1) * len(test)] for j in range(k)]
  for j, rows_j in enumerate(by_repeat):
    assert [int(r["question_id"]) for r in rows_j] == test.question_id.tolist()
    assert [int(r["substituted_image_id"]) for r in rows_j] == feats.image_ids[sub[j]].tolist()
    assert all(r["substituted_image_id"] != r["image_id"] for r in rows_j)
  assert not set(feats.image_ids[sub].ravel()) <= set(test.image_id.tolist())  # other splits too
  # Each repeat = a clean evaluation of the split with every question's image swapped.
  accs = []
  for j in range(k):
    swapped = dataclasses.replace(test, image_id=feats.image_ids[sub[j]])
    ds = dataclasses.replace(dataset, splits={**dataset.splits, "test": swapped})
    run, state, _ = restore.restore(workdir, ["test"], dataset=ds, features=feats)
    preds = predict.predict(run, state, "test")[0]
    answers = run.columns["test"].columns["answer"]
    accs.append(float(np.mean(preds == answers)))
    assert run.vocab.decode(preds) == [r["prediction"] for r in by_repeat[j]]
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
  empty = dataclasses.replace(dataset, splits={**dataset.splits,
                                               "test": Split.from_rows("test", [])})
  for evaluate in (accuracy.evaluate, functools.partial(adversarial.evaluate, kind="random")):
    with pytest.raises(RSVQAError, match=r"split 'test' has no active question: nothing to "
                       r"evaluate on$"):  # it read n/a everywhere and exited 0
      evaluate(workdir, "test", dataset=empty, features=feats)
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
  identity = lambda kind, rows, *, repeats, seed, **_: np.broadcast_to(
      rows, (repeats, len(rows))).copy()
  monkeypatch.setattr(adversarial, "substitution_rows", identity)
  adv = adversarial.evaluate(workdir, "test", "random", repeats=3, dataset=dataset,
                             features=feats)
  assert adv["per_repeat"]["oa"] == [clean["oa"]] * 3
  assert adv["per_repeat"]["per_type"] == {t: [v] * 3 for t, v in clean["per_type"].items()}
  _, clean_csv = outputs.accuracy_paths(workdir, "test")
  _, adv_csv = outputs.adversarial_paths(workdir, "test", "random")
  assert ([r["prediction"] for r in _read_csv(clean_csv)] * 3
          == [r["prediction"] for r in _read_csv(adv_csv)])


def _synthetic_config(name, tmp_path, *overrides):
  c = config_lib.load(os.path.join(CONFIGS, name))
  return config_lib.apply_overrides(c, [
      "data.synthetic_images=24", "data.synthetic_questions_per_image=8", "train.num_epochs=1",
      "train.batch_size=16", "train.progress_bar=false", f"data.cache_dir={tmp_path / 'cache'}",
      *overrides])


def test_evaluate_command_writes_json_and_csv(tmp_path, capsys):
  """`rsvqa-jax evaluate --adversarial` on a synthetic workdir (features from the cache), and
  `analyze` on its files: AdTest_Acc is the JSON's mean over the K = 3 repeats."""
  workdir = str(tmp_path / "run")
  c = _synthetic_config("synthetic_tiny.py", tmp_path)
  loop.train(c, workdir, **QUIET)
  parser = argparse.ArgumentParser()
  evaluate_cmd.add_arguments(parser)
  assert evaluate_cmd.run(parser.parse_args(["--workdir", workdir])) == 0
  best_json = outputs.accuracy_paths(workdir, "test")[0]
  best = pathlib.Path(best_json).read_text()
  # The last checkpoint's evaluation goes beside the best's, never over it.
  assert evaluate_cmd.run(parser.parse_args(["--workdir", workdir, "--checkpoint", "last"])) == 0
  assert pathlib.Path(best_json).read_text() == best
  last_json = outputs.accuracy_paths(workdir, "test", "last")[0]
  assert last_json == os.path.join(workdir, "eval_last", "test", "accuracy.json")
  with open(last_json) as f:
    assert json.load(f)["checkpoint"] == "last"
  printed = capsys.readouterr().out
  assert f"wrote {last_json}, " in printed
  assert f"wrote {', '.join(outputs.accuracy_paths(workdir, 'test'))}\n" in printed
  for kind in ("random", "white"):
    args = parser.parse_args(["--workdir", workdir, "--adversarial", kind, "--repeats", "3"])
    assert evaluate_cmd.run(args) == 0
    json_path, csv_path = outputs.adversarial_paths(workdir, "test", kind)
    with open(json_path) as f:
      out = json.load(f)
    assert out["kind"] == kind and out["repeats"] == 3 and len(out["per_repeat"]["oa"]) == 3
    assert out["pool"] == ("dataset" if kind == "random" else None)
    assert 0.0 <= out["oa"] <= 1.0
    rows = _read_csv(csv_path)
    assert rows and {"question_id", "repeat", "prediction"} <= set(rows[0])
    assert len(rows) == 3 * out["n"]
    if kind == "white":  # the features stay in place: each question keeps its own row
      assert all(r["substituted_image_id"] == r["image_id"] for r in rows)
      assert out["std"]["oa"] == 0.0  # white images are the same in every repeat
  printed = capsys.readouterr().out
  assert "std over the 3 repeats" in printed
  paths = outputs.adversarial_paths(workdir, "test", "white")
  assert f"wrote {', '.join(paths)}\n" in printed  # where the files an audit reads are
  assert evaluate_cmd.run(parser.parse_args(["--workdir", workdir, "--adversarial", "black"])) == 0
  with open(outputs.adversarial_paths(workdir, "test", "black")[0]) as f:
    assert json.load(f)["repeats"] == 1  # unless told: its repeats would all be alike
  printed = capsys.readouterr().out
  assert "std over the" not in printed and "mean over" not in printed  # one repeat: no spread
  with pytest.raises(RSVQAError, match="--pool applies to --adversarial random only"):
    evaluate_cmd.run(parser.parse_args(["--workdir", workdir, "--adversarial", "white", "--pool",
                                        "split"]))
  # analyze on the clean and the random files: its AdTest_Acc is evaluate's mean over repeats.
  json_path, adv_csv = outputs.adversarial_paths(workdir, "test", "random")
  with open(json_path) as f:
    adv = json.load(f)
  data = config_lib.synthetic_root(c, workdir)
  _, clean_csv = outputs.accuracy_paths(workdir, "test")
  out_dir = tmp_path / "audit"
  assert cli.main(["analyze", "--data", data, "--dataset", "lr", "--out", str(out_dir),
                   "--predictions", clean_csv, "--adversarial-predictions", adv_csv]) == 0
  assert "x 3 repeats, 0 mapped by the answer normalisation" in capsys.readouterr().out
  with open(out_dir / "types_test.csv") as f:
    table = {r["Question type"]: r for r in csv.DictReader(f)}
  assert table["Overall"]["AdTest_Acc (%)"] == tables.cell(adv["oa"])
  assert table["Average"]["AdTest_Acc (%)"] == tables.cell(adv["aa"])
  ds = rsvqa_json.read_dataset(data, "lr")
  evaluated = {"test": ds["test"]}
  result = analysis.analyze(ds["train"], ds["test"],
                            predictions=predictions.load(clean_csv, evaluated, "lr")["test"],
                            adversarial=predictions.load(adv_csv, evaluated, "lr",
                                                             adversarial=True)["test"])
  assert result.adversarial.overall == pytest.approx(adv["oa"], abs=1e-12)
  assert result.adversarial.average == pytest.approx(adv["aa"], abs=1e-12)
  per_type = {t: result.adversarial.per_type[t] for t in adv["per_type"]}  # test's types
  assert per_type == pytest.approx(adv["per_type"], abs=1e-12)
  assert evaluate_cmd.run(parser.parse_args(["--workdir", workdir, "--adversarial", "random",
                                             "--repeats", "1", "--pool", "split"])) == 0
  with open(json_path) as f:
    assert json.load(f)["pool"] == "split"


def test_random_pool_never_picks_own_image():
  rows = np.array([2, 2, 5, 5, 7])
  sub = adversarial.substitution_rows("random", rows, repeats=200, seed=0, pool=np.arange(10))
  assert not np.any(sub == rows[None])
  assert set(np.unique(sub)) == set(range(10))
  split = adversarial.substitution_rows("random", rows, repeats=200, seed=0)
  assert set(np.unique(split)) == {2, 5, 7}  # pool "split": the questions' own images
  np.testing.assert_array_equal(split, adversarial.substitution_rows(
      "random", rows, repeats=200, seed=0, pool=np.array([2, 5, 7])))
  for pool in ([2, 5, 8], [2, 5]):
    with pytest.raises(ValueError, match="every question's own"):
      adversarial.substitution_rows("random", rows, repeats=1, seed=0, pool=np.array(pool))


def test_split_pool_and_features_missing_from_the_dataset_pool(trained):
  dataset, feats, workdir = trained
  test_ids = set(dataset["test"].image_id.tolist())
  out = adversarial.evaluate(workdir, "test", "random", repeats=2, seed=3, pool="split",
                             dataset=dataset, features=feats)
  assert (out["pool"], out["pool_images"]) == ("split", len(test_ids))
  rows = _read_csv(outputs.adversarial_paths(workdir, "test", "random")[1])
  assert {int(r["substituted_image_id"]) for r in rows} <= test_ids
  assert adversarial.evaluate(workdir, "test", "shuffle", repeats=1, dataset=dataset,
                              features=feats)["pool"] is None
  keep = ~np.isin(feats.image_ids, dataset["train"].image_id[:1])  # one training image less
  partial = type(feats)(feats.features[keep], feats.image_ids[keep])
  with pytest.raises(RSVQAError, match=r"hold 59 of the dataset's 60 images.*--pool split"):
    adversarial.evaluate(workdir, "test", "random", repeats=1, dataset=dataset, features=partial)
  with pytest.raises(RSVQAError, match="--pool everywhere: choose one of dataset, split"):
    adversarial.evaluate(workdir, "test", "random", pool="everywhere", dataset=dataset,
                         features=feats)


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
  # The answers each kind's run should give: the model fed that kind's features from the feature
  # cache (noise of seed 0, the default --adv-seed), each question its own image's row.
  run, state, _ = restore.restore(workdir, ["test"])
  assert run.config.model.head == "paper"  # the pooled vectors, as the cache holds them
  own = np.repeat(predict.clean_rows(run, "test"), 2, axis=0)
  clean = run.vocab.decode(predict.predict(run, state, "test", image_rows=own)[0])
  for kind in adversarial.PIXEL_KINDS:
    assert cli.main(["evaluate", "--workdir", workdir, "--adversarial", kind,
                     "--repeats", "2"]) == 0
    with open(outputs.adversarial_paths(workdir, "test", kind)[0]) as f:
      assert json.load(f)["kind"] == kind
    cached = inputs.image_features(run.config, run.dataset, workdir, None, kind=kind,
                                   noise_seed=0)
    np.testing.assert_array_equal(cached.image_ids, run.features.image_ids)
    assert not np.allclose(cached.features, run.features.features)
    want = [run.vocab.decode(p) for p in predict.predict(run, state, "test", image_rows=own,
                                                         features=cached.features)]
    assert want[0] != clean, kind  # the model answers some question otherwise on these pixels
    rows = _read_csv(outputs.adversarial_paths(workdir, "test", kind)[1])
    n = len(clean)
    assert len(rows) == 2 * n
    for repeat in range(2):
      got = rows[repeat * n:(repeat + 1) * n]
      assert {r["repeat"] for r in got} == {str(repeat)}
      assert [r["prediction"] for r in got] == list(want[repeat]), (kind, repeat)
      assert [r["substituted_image_id"] for r in got] == [r["image_id"] for r in got]


def test_shuffle_counts_refuses_and_warns_about_questions_left_on_their_own_image(caplog):
  rows = np.array([4, 4, 4, 4, 6, 6, 9, 6])  # first batch of 4 holds a single image
  sub = adversarial.substitution_rows("shuffle", rows, repeats=5, seed=0, batch_size=4)
  with warnings_of_rsvqa_jax(caplog):
    kept = adversarial.own_images_kept("shuffle", rows, sub, "split test of W")
  assert kept == int((sub == rows).sum()) and 20 <= kept < 40
  assert f"gives {kept} of 40 answers" in caplog.text and "--adversarial random" in caplog.text
  with pytest.raises(RSVQAError, match=r"split test of W: shuffle substitution gives every "
                                       r"question its own image back \(each batch of "
                                       r"train.eval_batch_size questions holds a single image, of "
                                       r"1 in the split\); use --adversarial random$"):
    adversarial.own_images_kept("shuffle", rows[:4], sub[:, :4], "split test of W")
  assert adversarial.own_images_kept("random", rows, sub, "W") is None


def test_substitutions_onto_an_identical_image_are_counted_warned_and_refused_when_all(caplog):
  """Byte-identical images under other ids: swapping them changes nothing, and the adversarial
  score read as a model ignoring the image."""
  rng = np.random.default_rng(0)
  features = rng.standard_normal((5, 300)).astype(np.float32)
  features[3] = features[1]  # the same picture as image row 1
  features[4] = features[0]
  features[4, 7] += 1  # equal in the sampled columns, not whole
  rows = np.array([1, 1, 2, 0])
  sub = np.array([[3, 2, 1, 4], [3, 3, 1, 3], [0, 3, 2, 4]])  # row 1 -> 3 four times
  with warnings_of_rsvqa_jax(caplog):
    assert adversarial.identical_swaps(features, rows, sub, "W") == 4
  assert "W: 4 of 12 substitutions (33.3%) give a question an image whose features equal" in \
      caplog.text
  assert adversarial.identical_swaps(features, rows, np.array([[0, 0, 0, 1]]), "W") == 0
  with pytest.raises(RSVQAError, match="W: every substituted image has the features of the "
                                       "question's own image"):
    adversarial.identical_swaps(features, rows[:2], np.array([[3, 1], [1, 3]]), "W")


def test_seeds_refuses_a_workdir_twice_a_repeated_seed_and_another_config(tmp_path, capsys):
  from rsvqa_jax.train import checkpointing  # pylint: disable=g-import-not-at-top

  def workdir(name, seed, **train):
    c = tiny_config(**train)
    c.data.synthetic, c.seed = True, seed
    path = str(tmp_path / name)
    checkpointing.check_or_record_config(path, c)
    return path

  a, b, same_seed = workdir("a", 0), workdir("b", 1, num_epochs=3), workdir("c", 0)
  cases = [([a, a], f"--seeds: {a} is given twice"),
           ([str(tmp_path / "[ab]"), a], f"--seeds: {a} is given twice"),
           ([a, same_seed], f"--seeds: {a} and {same_seed} were both trained with seed 0"),
           ([a, b], f"--seeds: {b} is not {a}'s model over another seed: train.num_epochs is 3 "
                    "there, 6 in")]
  for seeds, message in cases:
    assert cli.main(["evaluate", "--seeds", *seeds]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err, err


def test_a_dataset_folder_is_refused_as_a_new_workdir(tmp_path, capsys):
  from rsvqa_jax.data import synthetic  # pylint: disable=g-import-not-at-top
  data = str(tmp_path / "data")
  synthetic.generate(data, "lr", images=6, seed=0, questions_per_image=4)
  before = sorted(os.listdir(data))
  assert cli.main(["train", "--config", "configs/synthetic_tiny.py", "--workdir", data]) == 2
  assert (f"--workdir {data} holds a dataset (LR_split_train_questions.json); give the run a "
          "folder of its own") in capsys.readouterr().err
  assert sorted(os.listdir(data)) == before


def test_analyze_refuses_to_write_its_tables_into_a_dataset_folder(tmp_path, capsys):
  from rsvqa_jax.data import synthetic  # pylint: disable=g-import-not-at-top
  data = str(tmp_path / "data")
  synthetic.generate(data, "lr", images=6, seed=0, questions_per_image=4)
  before = sorted(os.listdir(data))
  assert cli.main(["analyze", "--data", data, "--dataset", "lr", "--out", data]) == 2
  assert (f"--out {data} holds a dataset (LR_split_train_questions.json); give the tables a "
          "folder of its own") in capsys.readouterr().err
  inside = os.path.join(data, "analysis")
  assert cli.main(["analyze", "--data", data, "--dataset", "lr", "--out", inside]) == 2
  assert (f"--out {inside} lies inside the dataset {data}; give the tables a folder of its "
          "own") in capsys.readouterr().err
  assert sorted(os.listdir(data)) == before


def test_a_restored_run_is_not_asked_again_for_the_image_weights_it_trained_with(tmp_path):
  """A study trains its runs on its own synthetic data with in-memory features, so a ResNet
  without image.checkpoint (random init) is recorded unset; evaluate then refused the run,
  asking for --config.image.checkpoint, which it does not take."""
  from rsvqa_jax.data import synthetic  # pylint: disable=g-import-not-at-top
  from rsvqa_jax.train import run as run_lib  # pylint: disable=g-import-not-at-top
  data = str(tmp_path / "data")
  synthetic.generate(data, "lr", images=6, seed=0, questions_per_image=4)
  config = config_lib.apply_overrides(config_lib.load("synthetic_tiny"), [
      "data.synthetic=false", f"data.root={data}", f"data.cache_dir={tmp_path / 'cache'}",
      "text.checkpoint=random", "image.arch=resnet18", "image.width=8", "image.image_size=32"])
  assert config.image.checkpoint == ""
  with pytest.raises(RSVQAError, match="config image.checkpoint is not set"):
    run_lib.build(config, str(tmp_path / "w"), ["test"])
  run = run_lib.build(config, str(tmp_path / "w"), ["test"], restored=True)
  assert len(run.columns["test"].lengths) == len(run.dataset["test"])
