"""Answerability pools of splits too small for the configured pool size (issue 27).

`synth --answerability` on 30 images gives a validation split of 4 images and a test split of 3:
their pools shrink to 4 and 3 candidates with a WARNING each (train keeps 5), and training,
evaluation, `answerability score`, `select` and the Table 4 caption read pools of a size per
split. A split too small to hold the balance is drawn at balance 0, and one that cannot fill even
pools of 2 is a one-line error.
"""
import contextlib
import io
import json
import os
import shutil

import numpy as np
import pytest

from rsvqa_jax import cli
from rsvqa_jax import config as config_lib
from rsvqa_jax.bias import answerability as metrics_lib
from rsvqa_jax.data import answerability as pools_lib
from rsvqa_jax.data import records, rsvqa_json, scenes, tokenizers
from rsvqa_jax.errors import RSVQAError
from rsvqa_jax.eval import answerability as evaluation
from rsvqa_jax.train import answerability as train_lib
from rsvqa_jax.train.inputs import Features
from test_train_support import forbid_slow_stages

SIZES = {"train": 5, "val": 4, "test": 3}


def _cli(argv):
  """(exit status, stdout, stderr) of the CLI, the log lines on stderr."""
  out, err = io.StringIO(), io.StringIO()
  with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
    status = cli.main(argv)
  return status, out.getvalue(), err.getvalue()


def _config():
  c = config_lib.base_config()
  c.answerability = config_lib.answerability_section()
  c.answerability.batch_pools = 8
  c.text.checkpoint = config_lib.RANDOM
  c.text.word_dim, c.text.hidden_dim = 16, 32
  c.model.hidden_dim, c.model.classifier_dim = 32, 16
  c.optim.lr = c.optim.text_lr = 3e-3
  c.train.num_epochs = 2
  c.train.eval_batch_size = 16
  c.train.length_buckets = (32,)
  c.train.progress_bar = False
  return c


@pytest.fixture(scope="module")
def small(tmp_path_factory):
  """A 30-image synthetic set with pools at balance 0, a head trained on them and evaluated."""
  tmp = tmp_path_factory.mktemp("small")
  root = str(tmp / "ds")
  status, out, err = _cli(["synth", "--out", root, "--images", "30", "--questions-per-image", "5",
                           "--answerability", "--answerability-balance", "0"])
  assert status == 0, err
  dataset = rsvqa_json.read_dataset(root, "lr")
  ids = np.unique(np.concatenate([dataset.image_ids(s) for s in dataset.splits]))
  features = Features(np.random.default_rng(0).normal(size=(len(ids), 8)).astype(np.float32), ids)
  workdir = str(tmp / "run")
  summary = train_lib.train(_config(), workdir, dataset=dataset, features=features,
                            log=lambda m: None)
  record = evaluation.evaluate(workdir, "test", dataset=dataset, features=features)
  return {"root": root, "out": out, "err": err, "dataset": dataset, "features": features,
          "workdir": workdir, "summary": summary, "record": record, "tmp": tmp}


def test_small_splits_get_the_pools_they_can_fill_with_a_warning(small):
  assert len(small["dataset"].image_ids("val")) == 4
  assert len(small["dataset"].image_ids("test")) == 3
  warnings = [line for line in small["err"].splitlines() if "cannot fill" in line]
  assert warnings == ["WARNING: split val: 4 images cannot fill pools of 5 candidates (balance "
                      "0); its pools have 4",
                      "WARNING: split test: 3 images cannot fill pools of 5 candidates (balance "
                      "0); its pools have 3"]
  assert "answerability val: 8 pools of 4 candidates" in small["out"]
  with open(os.path.join(small["root"], pools_lib.MANIFEST)) as f:
    manifest = json.load(f)
  assert manifest["pool_size"] == 5  # as asked: what `ensure` compares
  for split, size in SIZES.items():
    assert manifest["splits"][split]["pool_size"] == size
    pool_ids = pools_lib.read_pools(pools_lib.pool_file(small["root"], split))[0]
    assert {len(rows) for rows in metrics_lib.pools(pool_ids)} == {size}


def test_train_evaluate_and_score_on_pools_of_other_sizes(small, tmp_path):
  assert small["summary"]["finished"]
  record = small["record"]
  assert (record["pools"], record["pairs"]) == (6, 18)
  m = record["metrics"]
  assert 0 <= m["ndcg@1"] <= 1 and 0 <= m["ternary_acc"] <= 1
  assert m["ndcg@5"] == m["ndcg@3"]  # pools of 3: @5 ranks nothing more
  assert m["binary_threshold"] is not None  # from the val pools of 4
  status, _, err = _cli(["answerability", "score",
                         "--scores", evaluation.scores_path(small["workdir"], "test"),
                         "--labels", pools_lib.pool_file(small["root"], "test"),
                         "--val-scores", evaluation.scores_path(small["workdir"], "val"),
                         "--val-labels", pools_lib.pool_file(small["root"], "val"),
                         "--out", str(tmp_path)])
  assert status == 0, err
  assert json.loads((tmp_path / "metrics.json").read_text()) == m
  assert set(evaluation.baselines(record)) == {"Random", "Majority"}
  for _ in range(2):  # the second writes over the first: an earlier selection
    _, n, summary = evaluation.select(small["workdir"], pools_lib.pool_file(small["root"], "val"),
                                      5, str(tmp_path / "top.csv"), dataset=small["dataset"],
                                      features=small["features"])
    assert n == 5 and summary["n_questions_with_unknown_words"] == 0
  first = (tmp_path / "top.csv").read_text().splitlines()[0]
  assert first == "pool_id,question,image_id,score,entropy"


def test_select_counts_and_warns_of_words_outside_the_vocabulary(small, tmp_path, monkeypatch):
  """Unknown words are read as UNK: select counts them as the tokenizer splits and lowercases
  them, per question and pair, warns, and names them in its output and summary JSON."""
  a, b = small["features"].image_ids[:2].tolist()
  pool = tmp_path / "pool.csv"
  pool.write_text("pool_id,question,image_id\n" + "".join(
      f"{i},{q},{im}\n" for i, q in enumerate(["Is there a ZEBRA?", "Is there a road?",
                                               "Is there a qux zebra?"]) for im in (a, b)))
  select = evaluation.select
  monkeypatch.setattr(evaluation, "select", lambda *args, **kw: select(
      *args, **kw, dataset=small["dataset"], features=small["features"]))
  out = tmp_path / "top.csv"
  status, stdout, err = _cli(["answerability", "select", "--workdir", small["workdir"], "--pool",
                              str(pool), "--top", "4", "--out", str(out)])
  assert status == 0, err
  summary = json.loads((tmp_path / "top.json").read_text())
  assert summary["kind"] == evaluation.SUMMARY_KIND and summary["written"] == 4
  counted = ("questions", "n_questions_with_unknown_words", "n_pairs_with_unknown_words",
             "n_distinct_unknown_words")
  assert [summary[k] for k in counted] == [3, 2, 4, 2]
  assert summary["unknown_words"] == [["zebra", 2], ["qux", 1]]
  said = ("2 distinct word(s) (most common: 'zebra' in 2, 'qux' in 1) in 2 of the 3 questions "
          "(4 pairs)")
  assert f"WARNING: select: {said} of {pool} are outside the model's vocabulary" in err
  assert f"(read as unknown): {said}; summary written to {tmp_path / 'top.json'}" in stdout
  assert out.read_text().splitlines()[0] == ",".join(evaluation.SELECT_COLUMNS)


def test_unknown_words_as_the_tokenizer_reads_them():
  tok = tokenizers.WordTokenizer.build(["is", "there", "a", "road", "?"])
  assert tok.words_read_as_unknown("Is there a Zebra, a road?") == ["zebra", ","]
  stripped = tokenizers.WordTokenizer.build(["is", "a"], strip_question_mark=True)
  assert stripped.words_read_as_unknown("Is a road a road?") == ["road", "road"]
  kept_case = tokenizers.WordTokenizer.build(["Is", "a"], lowercase=False)
  assert kept_case.words_read_as_unknown("Is a Road") == ["Road"]


def test_select_refuses_a_summary_path_it_did_not_write(small, tmp_path):
  pool = pools_lib.pool_file(small["root"], "val")
  (tmp_path / "top.json").write_text('{"mine": 1}')
  with pytest.raises(RSVQAError, match=r"its summary .*top.json exists and is not an earlier "):
    evaluation.select(small["workdir"], pool, 2, str(tmp_path / "top.csv"))
  with pytest.raises(RSVQAError, match=r"ends in .json, the name of its summary"):
    evaluation.select(small["workdir"], pool, 2, str(tmp_path / "new.json"))
  assert (tmp_path / "top.json").read_text() == '{"mine": 1}'
  assert sorted(os.listdir(tmp_path)) == ["top.json"]


def test_table_caption_names_the_split_pool_size(small):
  with open(os.path.join(small["root"], pools_lib.MANIFEST)) as f:
    manifest = json.load(f)
  pool_set = {"name": "main", "balance": 0.0, "pool_size": 5, "splits": manifest["splits"],
              "rows": [], "baselines": evaluation.baselines(small["record"])}
  caption = metrics_lib.stage_table(pool_set, "test").caption
  assert "6 test pools of 3 candidates" in caption
  assert caption.endswith("; @3 and @5 rank whole pools of 3, so their NDCG and MAP are equal")


def test_the_whole_pool_note_is_true_and_only_where_columns_are_equal():
  rng = np.random.default_rng(0)
  for size in (2, 3, 4, 5, 8):
    pool_ids = np.repeat(np.arange(40), size)
    m = metrics_lib.ranking(pool_ids, rng.integers(0, 3, pool_ids.size), rng.random(pool_ids.size))
    equal = m["ndcg@3"] == m["ndcg@5"] and m["map@3"] == m["map@5"]
    assert equal == (size <= 3), size
    note = metrics_lib._whole_pool_note(size)  # pylint: disable=protected-access
    assert bool(note) == (size <= 3)


def _tiles(n):
  return [pools_lib.Tile(i, scenes.make_scene(0, i, 256)) for i in range(n)]


def test_a_split_too_small_even_for_two_is_refused():
  with pytest.raises(RSVQAError, match=r"^val: 1 image\(s\) cannot fill pools of even 2 "):
    pools_lib.make_pools(_tiles(1), pools_lib.params(balance=0.0), np.random.default_rng(0), 2,
                         "val")


def test_a_split_too_small_for_the_balance_is_drawn_as_its_scenes_fall(capsys):
  """At balance > 0 pools of 2 need 2 images of each label: 4 images never have them."""
  pools, balance = pools_lib.make_pools(_tiles(4), pools_lib.params(), np.random.default_rng(0),
                                        8, "val")
  assert balance == 0.0 and pools and {len(c) for _, c in pools} == {4}
  assert capsys.readouterr().err.splitlines() == [
      "WARNING: val: no question has 2 of its 4 images with each label, so balance 1 cannot "
      "hold; its pools are drawn at balance 0, as its scenes fall",
      "WARNING: val: 4 images cannot fill pools of 5 candidates (balance 0); its pools have 4"]


def test_synth_on_four_validation_images_at_the_default_balance(tmp_path):
  """The issue's case: the default balance (1) on a 30-image set, val 4 images, test 3."""
  root = tmp_path / "ds"
  status, out, err = _cli(["synth", "--out", str(root), "--images", "30",
                           "--questions-per-image", "2", "--answerability"])
  assert status == 0, err
  assert "split val: 4 images cannot fill pools of 5 candidates (balance 0); its pools have 4" in err
  manifest = json.loads((root / pools_lib.MANIFEST).read_text())
  assert manifest["balance"] == 1.0 and manifest["splits"]["train"]["balance"] == 1.0
  assert (manifest["splits"]["val"]["balance"], manifest["splits"]["val"]["pool_size"]) == (0, 4)
  assert "answerability val:" in out


@pytest.mark.parametrize("variant, least", [("lr", 15), ("hr", 19)])
def test_synth_refuses_too_few_images_before_writing_anything(tmp_path, variant, least):
  """Each split needs 2 images for pools of 2: checked before the dataset is written."""
  assert pools_lib.least_images(variant) == least
  out = tmp_path / "ds"
  for images in (3, least - 1):
    status, _, err = _cli(["synth", "--out", str(out), "--variant", variant, "--images",
                           str(images), "--questions-per-image", "2", "--answerability"])
    assert status == 2
    assert err.splitlines() == [
        f"rsvqa-jax synth: error: --images {images}: --answerability needs at least {least} "
        f"{variant} images (2 in each split, the smallest pool); raise --images"]
    assert not out.exists() and os.listdir(tmp_path) == []


def test_synth_at_the_least_images_writes_pools_of_every_split(tmp_path):
  out = tmp_path / "ds"
  least = pools_lib.least_images("lr")
  status, stdout, err = _cli(["synth", "--out", str(out), "--images", str(least),
                              "--questions-per-image", "2", "--answerability"])
  assert status == 0, err
  manifest = json.loads((out / pools_lib.MANIFEST).read_text())
  assert set(manifest["splits"]) == {"train", "val", "test"}
  assert min(s["pool_size"] for s in manifest["splits"].values()) == 2
  assert "answerability test:" in stdout


FIX = train_lib.FOREIGN_POOLS


def _build(small, tmp_path, dataset, folder=None):
  """train_lib.build on the pools in `folder` (default: those synth wrote into the set)."""
  c = _config()
  c.answerability.pools = folder or small["root"]
  return train_lib.build(c, str(tmp_path / "run"), ["train", "val", "test"], dataset=dataset,
                         features=small["features"])


def _official(small, tmp_path, name="lr", **splits):
  """The small set as an official folder (no synthetic.json) of dataset `name`; `splits`
  replace some of its splits."""
  return records.Dataset(name=name, root=str(tmp_path / "official"),
                         splits={**small["dataset"].splits, **splits})


def test_the_tools_pools_are_read_for_an_official_copy_of_their_dataset(small, tmp_path):
  _, pools = _build(small, tmp_path, _official(small, tmp_path))
  assert set(pools) == {"train", "val", "test"}


def test_pools_drawn_for_another_dataset_are_refused(small, tmp_path):
  """answerability.json records the dataset the pools were drawn for: LR pools on an HR folder
  trained an HR model on LR questions, labels and held-out images, rc 0 and no warning."""
  manifest = os.path.join(small["root"], pools_lib.MANIFEST)
  official = str(tmp_path / "official")
  ds = small["dataset"]
  with pytest.raises(RSVQAError) as error:
    _build(small, tmp_path, _official(small, tmp_path, "hr"))
  assert str(error.value) == (f"{manifest}: its pools were drawn from a synthetic lr dataset (30 "
                              f"images, seed 0), not dataset {official} (hr); {FIX}")
  with pytest.raises(RSVQAError) as error:
    _build(small, tmp_path, _official(small, tmp_path, val=ds["test"], test=ds["val"]))
  assert str(error.value) == (f"{manifest}: its pools were drawn for other images or splits than "
                              f"those of dataset {official} (lr) (image_ids_sha256 differs); {FIX}")
  folder = str(tmp_path / "pools")
  shutil.copytree(small["root"], folder, ignore=lambda d, names: [
      n for n in names if not n.startswith("Answerability_")])
  found = json.loads(open(manifest).read())
  found["dataset"]["images"] = 31
  with open(os.path.join(folder, pools_lib.MANIFEST), "w") as f:
    json.dump(found, f)
  with pytest.raises(RSVQAError) as error:
    _build(small, tmp_path, ds, folder)
  assert str(error.value) == (f"{folder}/{pools_lib.MANIFEST}: its pools were drawn from a "
                              f"synthetic dataset of images=31, but dataset {small['root']} (lr) "
                              f"is one of images=30 (synthetic.json); {FIX}")



@pytest.mark.parametrize("case", ["manifest", "split"])
def test_foreign_pools_are_refused_before_the_encoder_is_pretrained(small, tmp_path, monkeypatch,
                                                                    case):
  """A synthetic config on pools of another dataset generated its dataset, pretrained its ResNet
  (minutes) and extracted its features, and only then refused the pools."""
  forbid_slow_stages(monkeypatch)
  cache, workdir = tmp_path / "cache", tmp_path / "w"
  if case == "manifest":  # drawn from the 30-image set, not the config's 15
    folder, images, questions = small["root"], 15, 2
    root = cache / "synthetic_lr_15_0_q2"
    message = (f"{os.path.join(folder, pools_lib.MANIFEST)}: its pools were drawn from a "
               "synthetic dataset of images=30, questions_per_image=5, but dataset "
               f"{root} (lr) is one of images=15, questions_per_image=2 (synthetic.json); {FIX}")
  else:  # the config's own dataset, train pools of its test images
    folder, images, questions = str(tmp_path / "pools"), 30, 5
    root = cache / "synthetic_lr_30_0_q5"
    os.makedirs(folder)
    for split in SIZES:
      shutil.copy(pools_lib.pool_file(small["root"], split), folder)
    path = pools_lib.pool_file(folder, "train")
    shutil.copy(pools_lib.pool_file(small["root"], "test"), path)
    first = int(pools_lib.read_pools(path)[2][0])
    message = (f"{path}: image id {first} is not an image of split train of dataset {root} "
               f"(lr): it is in its split test; {FIX}")
  status, _, err = _cli(["answerability", "train", "--config", "configs/answerability_synthetic.py",
                         "--workdir", str(workdir), f"--config.data.cache_dir={cache}",
                         f"--config.data.synthetic_images={images}",
                         f"--config.data.synthetic_questions_per_image={questions}",
                         f"--config.answerability.pools={folder}"])
  assert status == 2, err
  assert err.strip().splitlines()[-1] == f"rsvqa-jax answerability train: error: {message}"
  assert "stage pretrain" not in err
  assert not workdir.exists() and sorted(os.listdir(cache)) == [root.name]
