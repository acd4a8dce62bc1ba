"""The answerability head end to end on small synthetic pools: losses, training, evaluation, select.

The pools are labelled from synthetic scenes at balance 1 (each pool's labels uniform whatever its
question: the wording carries no label information). The image features are the scenes' own
object counts per class, size and shape (an oracle standing in for the frozen encoder, so the
test checks the head, the training and the metrics in seconds, not a ResNet): the reference
model must beat its question-only twin, Random and Majority on NDCG@1 and binary F1, and the
question-only twin must stay near Majority. The docs' figures come from the study stage on
pixels (configs/answerability_study.py).
"""
import csv
import json
import logging
import os
import re
import shutil

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rsvqa_jax import config as config_lib
from rsvqa_jax import progress
from rsvqa_jax import storage
from rsvqa_jax.bias import answerability as metrics_lib
from rsvqa_jax.data import answerability as pools_lib
from rsvqa_jax.data import records, scenes, synthetic
from rsvqa_jax.errors import RSVQAError
from rsvqa_jax.eval import answerability as evaluation
from rsvqa_jax.train import answerability as train_lib
from rsvqa_jax.train import metrics_log, restore
from rsvqa_jax.train.inputs import Features
from test_train_support import warnings_of_rsvqa_jax

QUIET = dict(log=lambda m: None)
SPLITS = {"train": range(0, 70), "val": range(70, 100), "test": range(100, 130)}
POOLS_PER_IMAGE = {"train": 3, "val": 2, "test": 3}


def test_bce_and_listnet_by_hand():
  log2 = float(np.log(2))
  assert float(train_lib.bce(jnp.zeros(4), jnp.asarray([2, 1, 0, -1]))) == pytest.approx(log2)
  # BCE of logit 0 against 1 / 0.5 / 0 is log 2; -1 (padding) adds nothing.
  logits, labels = jnp.asarray([[0.0, 0.0, 100.0]]), jnp.asarray([[2, 0, -1]])
  assert float(train_lib.listnet(logits, labels)) == pytest.approx(log2)
  # target softmax([2, 0]) against uniform predictions: cross-entropy log 2 whatever the target.
  labels = jnp.asarray([[2, 0], [-1, -1]])
  perfect = float(train_lib.listnet(jnp.asarray([[50.0, -50.0], [0.0, 0.0]]), labels))
  target = np.exp([2.0, 0.0]) / np.exp([2.0, 0.0]).sum()
  assert perfect == pytest.approx(-(target[1] * -100.0), rel=1e-3)  # p(2) = 1: only q's tail


def _features(image_ids):
  """log(1 + count) of every (class, size, shape) of each scene, and of its cut objects."""
  names = list(scenes.CLASSES)
  rows = []
  for i in image_ids:
    scene = scenes.make_scene(0, int(i), 256)
    tile = pools_lib.Tile(int(i), scene)
    v = np.zeros((2, len(names), len(scenes.SIZES), len(scenes.SHAPES) + 1), np.float32)
    for o, cut in zip(scene.objects, tile.cut):
      size = scenes.SIZES.index(o.size) if o.size else 0
      shape = scenes.SHAPES.index(o.shape) + 1 if o.shape else 0
      v[int(cut), names.index(o.cls), size, shape] += 1
    rows.append(np.log1p(v).ravel())
  return Features(np.stack(rows), np.asarray(image_ids, np.int64))


def _config(folder, blind):
  c = config_lib.base_config()
  c.answerability = config_lib.answerability_section()
  c.answerability.pools = folder
  c.answerability.batch_pools = 16
  c.text.checkpoint = config_lib.RANDOM
  c.text.word_dim, c.text.hidden_dim = 16, 32
  c.model.hidden_dim, c.model.classifier_dim, c.model.dropout = 64, 32, 0.1
  c.model.blind = blind
  c.optim.lr = c.optim.text_lr = 3e-3
  c.train.num_epochs = 6
  c.train.eval_batch_size = 128
  c.train.length_buckets = (32,)  # one token width: one compiled train step
  c.train.log_every_steps = 50
  c.train.progress_bar = False
  return c


def _split(name, image_ids, question):
  """A split of one question per image (a question of the pools: it adds no word to theirs)."""
  return records.Split.from_rows(name, (
      dict(question_id=i, image_id=i, qtype="presence", question=question, answer="yes",
           raw_answer="yes") for i in image_ids))


@pytest.fixture(scope="module")
def task(tmp_path_factory):
  """Pools (balance 1), oracle features and a reference / question-only pair trained on them."""
  tmp = tmp_path_factory.mktemp("answerability")
  folder = str(tmp / "pools")
  os.makedirs(folder)
  p = pools_lib.params(pool_size=5, balance=1.0)
  next_id, splits = 0, {}
  for index, (split, ids) in enumerate(SPLITS.items()):
    tiles = [pools_lib.Tile(i, scenes.make_scene(0, i, 256)) for i in ids]
    pools, _ = pools_lib.make_pools(tiles, p, np.random.default_rng([3, index]),
                                 POOLS_PER_IMAGE[split] * len(tiles))
    pools_lib.write(pools_lib.pool_file(folder, split), pools_lib.rows_of(pools, next_id))
    next_id += len(pools)
    splits[split] = _split(split, ids, pools[0][0])
  feats = _features(range(130))
  dataset = records.Dataset(name="lr", root=str(tmp), splits=splits)
  runs = {}
  for role in ("reference", "blind"):
    workdir = str(tmp / role)
    summary = train_lib.train(_config(folder, role == "blind"), workdir, dataset=dataset,
                              features=feats, **QUIET)
    assert summary["finished"]
    runs[role] = evaluation.evaluate(workdir, "test", dataset=dataset, features=feats)
  return {"folder": folder, "dataset": dataset, "features": feats, "runs": runs, "tmp": tmp}


def test_reference_beats_question_only_and_baselines(task):
  ref, blind = (task["runs"][r]["metrics"] for r in ("reference", "blind"))
  base = evaluation.baselines(task["runs"]["reference"])
  for key in ("ndcg@1", "binary_f1"):
    others = {"blind": blind[key], **{name: b[key] for name, b in base.items()}}
    assert all(ref[key] > v for v in others.values()), (key, ref[key], others)


def test_question_only_stays_near_majority_when_wording_says_nothing(task):
  blind = task["runs"]["blind"]["metrics"]
  majority = evaluation.baselines(task["runs"]["blind"])["Majority"]
  assert blind["ndcg@1"] == pytest.approx(majority["ndcg@1"])  # both tie a whole pool: its mean
  assert abs(blind["ternary_acc"] - majority["ternary_acc"]) < 0.1
  assert abs(blind["binary_f1"] - majority["binary_f1"]) < 0.1


def test_evaluation_files_score_alike(task):
  """test_metrics.json holds exactly the keys, and the score command agrees with it."""
  workdir = task["runs"]["reference"]["workdir"]
  out = evaluation.folder(workdir)
  with open(os.path.join(out, "test_metrics.json")) as f:
    metrics = json.load(f)
  assert list(metrics) == list(evaluation.metrics_lib.KEYS)
  again = evaluation.metrics_lib.score_files(
      evaluation.scores_path(workdir, "test"), pools_lib.pool_file(task["folder"], "test"),
      evaluation.scores_path(workdir, "val"), pools_lib.pool_file(task["folder"], "val"))
  assert again == metrics
  assert train_lib.train(_config(task["folder"], False), workdir, dataset=task["dataset"],
                         features=task["features"], **QUIET)["finished"]  # resumes: done


def test_select_ranks_unlabelled_pairs_by_entropy(task):
  path = str(task["tmp"] / "unlabelled.csv")
  with open(pools_lib.pool_file(task["folder"], "test")) as f, open(path, "w") as g:
    rows = list(csv.reader(f))
    csv.writer(g).writerows(r[:3] for r in rows)  # no label column
  out, n, summary = evaluation.select(task["runs"]["reference"]["workdir"], path, 7,
                                      str(task["tmp"] / "top.csv"), dataset=task["dataset"],
                                      features=task["features"])
  assert summary["n_questions_with_unknown_words"] == 0  # the pools' words are the vocabulary's
  with open(out) as f:
    picked = list(csv.DictReader(f))
  assert n == len(picked) == 7
  entropy = [float(r["entropy"]) for r in picked]
  assert entropy == sorted(entropy, reverse=True)
  assert all(0 <= float(r["score"]) <= 1 for r in picked)
  # Against every pair's score (a selection of them all, in any order): the 7 picked are the 7 of
  # the highest binary entropy -(p log2 p + (1 - p) log2 (1 - p)), computed here.
  every, n_all, _ = evaluation.select(task["runs"]["reference"]["workdir"], path, 10 ** 6,
                                      str(task["tmp"] / "all.csv"), dataset=task["dataset"],
                                      features=task["features"])
  with open(every) as f:
    scored = list(csv.DictReader(f))
  assert n_all == len(scored) == len(rows) - 1  # the pool file's pairs, less its header
  p = np.clip(np.array([float(r["score"]) for r in scored]), 1e-12, 1 - 1e-12)
  by_hand = -(p * np.log2(p) + (1 - p) * np.log2(1 - p))
  np.testing.assert_allclose([float(r["entropy"]) for r in scored], by_hand, rtol=1e-9)
  top = np.sort(by_hand)[::-1][:7]
  assert top[0] > np.sort(by_hand)[0]  # the scores differ: the top 7 are not any 7
  np.testing.assert_allclose(entropy, top, rtol=1e-9)
  key = lambda r: (r["pool_id"], r["image_id"])
  assert {key(r) for r in picked} <= {key(r) for r in scored if float(r["entropy"]) >= top[-1]}
  # A pool file of another dataset was ranked with this workdir's images of the same ids.
  other = task["tmp"] / "other_dataset"
  other.mkdir(exist_ok=True)
  (other / synthetic.MANIFEST).write_text("{}")
  foreign = other / "Answerability_test.csv"
  shutil.copy(path, foreign)
  with pytest.raises(RSVQAError, match=(
      f"--pool {foreign}: lies in the dataset folder {other}, but the workdir trained on "
      ".*: its image ids name that dataset's images")):
    evaluation.select(task["runs"]["reference"]["workdir"], str(foreign), 7,
                      str(task["tmp"] / "top2.csv"), dataset=task["dataset"],
                      features=task["features"])
  with pytest.raises(RSVQAError, match="--top 0"):
    evaluation.select(task["runs"]["reference"]["workdir"], path, 0)
  with pytest.raises(RSVQAError, match=f"--out {task['tmp']}: is a folder; give the CSV file"):
    evaluation.select(task["runs"]["reference"]["workdir"], path, 1, str(task["tmp"]))


def test_a_selection_killed_before_its_summary_leaves_no_summary_of_an_earlier_one(
    task, monkeypatch):
  """select replaced its CSV, then the summary beside it: killed between them, an earlier
  selection's summary (of another pool, top or step) stayed beside the new CSV."""
  path = str(task["tmp"] / "unlabelled_kill.csv")
  with open(pools_lib.pool_file(task["folder"], "test")) as f, open(path, "w") as g:
    csv.writer(g).writerows(r[:3] for r in csv.reader(f))
  out = str(task["tmp"] / "kill_top.csv")
  where = {"dataset": task["dataset"], "features": task["features"]}
  workdir = task["runs"]["reference"]["workdir"]
  evaluation.select(workdir, path, 3, out, **where)
  summary = evaluation.summary_path(out)
  assert os.path.exists(summary)

  def killed(path, value, **kwargs):
    raise KeyboardInterrupt  # stands for the process dying here

  monkeypatch.setattr(evaluation.storage, "write_json", killed)
  with pytest.raises(KeyboardInterrupt):
    evaluation.select(workdir, path, 5, out, **where)
  monkeypatch.undo()
  with open(out) as f:
    assert len(list(csv.DictReader(f))) == 5
  assert not os.path.exists(summary)
  assert evaluation.select(workdir, path, 5, out, **where)[2]["written"] == 5  # rerun: whole


def test_listnet_trains(task):
  c = _config(task["folder"], False)
  c.answerability.loss = "listnet"
  c.train.stop_after_steps, c.train.log_every_steps = 3, 1
  workdir = str(task["tmp"] / "listnet")
  summary = train_lib.train(c, workdir, dataset=task["dataset"], features=task["features"],
                            **QUIET)
  assert summary["step"] == 3 and not summary["finished"]
  losses = [r["loss"] for r in metrics_log.read(workdir)]
  assert len(losses) == 3 and np.all(np.isfinite(losses))


def test_training_shows_a_bar_with_the_loss(task, caplog, monkeypatch, capsys):
  """35 s without a line, then one line at the end. capsys: stderr is no terminal, so the bar is
  log lines (one per update here)."""
  monkeypatch.setattr(progress, "INTERVAL_S", 0.0)
  c = _config(task["folder"], False)
  c.train.progress_bar, c.train.stop_after_steps, c.train.log_every_steps = True, 3, 1
  with warnings_of_rsvqa_jax(caplog, logging.INFO):
    train_lib.train(c, str(task["tmp"] / "bar"), dataset=task["dataset"],
                    features=task["features"], **QUIET)
  said = [r.getMessage() for r in caplog.records if r.name == "rsvqa_jax.progress"]
  assert any(re.match(r"answerability train: 3/\d+ step \(\d+%\), .*, loss=\d+\.\d{4}$", m)
             for m in said), said


def test_an_interrupted_run_resumes_from_its_last_periodic_checkpoint(task):
  """train.checkpoint_every_steps was not read: a run stopped inside an epoch had saved nothing,
  and started again from step 1."""
  c = _config(task["folder"], False)
  c.train.checkpoint_every_steps, c.train.log_every_steps, c.train.stop_after_steps = 2, 1, 5
  run = lambda workdir, log: train_lib.train(c, str(task["tmp"] / workdir),
                                             dataset=task["dataset"], features=task["features"],
                                             log=log)
  stopped = run("stopped", lambda m: None)
  assert stopped["step"] == 5 and not stopped["finished"]
  assert sorted(os.listdir(task["tmp"] / "stopped" / "checkpoints")) == ["2", "4"]
  said = []
  c.train.stop_after_steps = 2
  assert run("stopped", said.append)["step"] == 6
  assert any("resuming at step 4" in m for m in said), said
  c.train.stop_after_steps = 6
  assert run("straight", lambda m: None)["step"] == 6
  last = lambda w: train_lib.restore(str(task["tmp"] / w), ["val"], which="last",
                                     dataset=task["dataset"], features=task["features"])
  (*_, resumed, at), (*_, straight, at_too) = last("stopped"), last("straight")
  assert at == at_too == 6
  for x, y in zip(jax.tree.leaves(resumed.params), jax.tree.leaves(straight.params), strict=True):
    np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=1e-5, atol=1e-6)
  steps = [r["step"] for r in metrics_log.read(str(task["tmp"] / "stopped"))
           if r["split"] == "train"]
  assert steps == list(range(1, 7))


def test_the_study_stage_reuses_a_finished_model_of_its_own_settings_only(tmp_path):
  """A finished model was skipped whatever its config: a study run again with another override
  wrote a report over models of the old settings (or of both)."""
  from rsvqa_jax.train import checkpointing  # pylint: disable=g-import-not-at-top
  c = _config(str(tmp_path / "pools"), False)
  workdir = str(tmp_path / "model")
  checkpointing.check_or_record_config(workdir, c)
  os.makedirs(evaluation.folder(workdir))
  with open(evaluation.metrics_path(workdir, "test"), "w") as f:
    json.dump({"ndcg@1": 0.5}, f)
  said = []
  study = type("Study", (), {"progress": staticmethod(said.append)})
  assert evaluation._run(study, c, workdir, None, None, "test", "m", ()) == {"ndcg@1": 0.5}
  assert said == ["m: done before, skipped"]
  c.train.num_epochs = 3
  with pytest.raises(RSVQAError, match=r"holds a run of another config: train.num_epochs is 6 "
                                       r"there, 3 now"):
    evaluation._run(study, c, workdir, None, None, "test", "m", ())


def test_bad_settings_are_one_line_errors(task):
  c = _config(task["folder"], False)
  c.answerability.loss = "pairwise"
  with pytest.raises(RSVQAError, match="answerability.loss='pairwise'"):
    train_lib.train(c, str(task["tmp"] / "bad"), dataset=task["dataset"],
                    features=task["features"], **QUIET)


def test_an_answerability_workdir_is_not_evaluated_as_an_answer_model(task):
  """Its checkpoints hold no answer head: the plain evaluation says which command scores it."""
  workdir = str(task["tmp"] / "reference")
  with pytest.raises(RSVQAError, match=f"{workdir}: an answerability workdir .*; score it with "
                     "rsvqa-jax evaluate --answerability"):
    restore.restore(workdir, ["test"], dataset=task["dataset"], features=task["features"])


def test_pools_other_than_those_trained_on_are_refused(task, tmp_path):
  """data.json records the train and val pools: the same pools with their labels swapped (0 <->
  2) are refused at evaluation, where they were scored beside the trained model unnoticed."""
  workdir = str(task["tmp"] / "reference")
  with open(os.path.join(workdir, "data.json")) as f:
    assert set(json.load(f)) == {"train", "val"}
  folder, moved = str(tmp_path / "pools"), str(tmp_path / "reference")
  os.makedirs(folder)
  for split in SPLITS:
    with open(pools_lib.pool_file(task["folder"], split)) as f:
      rows = list(csv.DictReader(f))
    if split == "train":
      for row in rows:
        row["label"] = str(2 - int(row["label"]))
    with open(pools_lib.pool_file(folder, split), "w", newline="") as f:
      writer = csv.DictWriter(f, fieldnames=list(rows[0]))
      writer.writeheader()
      writer.writerows(rows)
  os.makedirs(moved)
  for name in ("data.json", "config.json"):
    with open(os.path.join(workdir, name)) as f:
      text = f.read()
    with open(os.path.join(moved, name), "w") as f:
      f.write(text.replace(json.dumps(task["folder"]), json.dumps(folder)))
  with pytest.raises(RSVQAError, match=rf"data.json: split train of {folder} is not the one "
                     rf"{moved} trained on \(1050 questions then, 1050 now, other contents; "):
    evaluation.evaluate(moved, "test", dataset=task["dataset"], features=task["features"])


def test_val_pools_without_relevant_candidates_warn_and_leave_binary_metrics_undefined(
    task, tmp_path, caplog, capsys):
  """A val split with no candidate labelled 1 or 2 gave 'best validation ndcg@3 -1.0000 at step
  0', no best checkpoint and then 'no validation has run'; the threshold was picked 'from val'
  on no positive pair, and a test split without label 2 printed Binary Recall 0/0 as 0.00."""
  import argparse  # pylint: disable=g-import-not-at-top
  import shutil  # pylint: disable=g-import-not-at-top
  from rsvqa_jax.commands import answerability as command  # pylint: disable=g-import-not-at-top
  from test_train_support import warnings_of_rsvqa_jax  # pylint: disable=g-import-not-at-top
  folder = str(tmp_path / "pools")
  shutil.copytree(task["folder"], folder)
  val = pools_lib.pool_file(folder, "val")
  with open(val, newline="", encoding="utf-8") as f:
    rows = list(csv.DictReader(f))
  pools_lib.write(val, ([*{**r, "label": "0"}.values()] for r in rows), columns=list(rows[0]))
  c = _config(folder, False)
  c.train.num_epochs = 1
  workdir = str(tmp_path / "run")
  with warnings_of_rsvqa_jax(caplog):
    summary = train_lib.train(c, workdir, dataset=task["dataset"], features=task["features"],
                              **QUIET)
  said = [r.getMessage() for r in caplog.records]
  assert len(said) == 1 and "no val pool has a candidate labelled 1 or 2" in said[0], said
  assert "--checkpoint last" in said[0]
  assert summary["finished"] and summary["best_step"] == 0
  assert train_lib.best_reading(summary, "ndcg@3") == (
      "no validation gave a ndcg@3 (no relevant candidate in the val pools): no best checkpoint, "
      "only --checkpoint last")
  with pytest.raises(RSVQAError, match=r"no best checkpoint yet \(no validation has run, or none "
                                       r"gave a ndcg@3 \(val pools without relevant candidates\)\)"):
    evaluation.evaluate(workdir, "test", dataset=task["dataset"], features=task["features"])
  args = argparse.Namespace(adversarial=False, shortcuts=False, split="test")
  where = {"which": "last", "dataset": task["dataset"], "features": task["features"]}
  assert command.evaluate(args, [workdir], where) == 0
  out = capsys.readouterr().out
  assert "no binary threshold (no val pair labelled 2: binary metrics n/a)" in out, out
  last = evaluation.folder(workdir, "last")  # beside the best's folder, never over it
  assert last == os.path.join(workdir, "eval_last", "answerability")
  assert f"written to {last}\n" in out
  assert not os.path.exists(evaluation.folder(workdir))
  metrics = json.loads(open(os.path.join(last, "test_metrics.json")).read())
  assert all(metrics[k] is None for k in metrics_lib.BINARY_KEYS)
  assert metrics["ndcg@3"] is not None  # the test pools still rank



def test_scoring_the_val_split_reports_no_binary_metrics(task, tmp_path, capsys):
  """`evaluate --answerability --split val` chose the binary threshold on the very pairs it
  scored ('binary threshold ... from val'), for the model and both baselines."""
  import argparse  # pylint: disable=g-import-not-at-top
  import shutil  # pylint: disable=g-import-not-at-top
  from rsvqa_jax.commands import answerability as command  # pylint: disable=g-import-not-at-top
  workdir = str(tmp_path / "reference")
  shutil.copytree(task["runs"]["reference"]["workdir"], workdir)
  with open(evaluation.metrics_path(workdir, "test")) as f:
    test_metrics = f.read()
  args = argparse.Namespace(adversarial=False, shortcuts=False, split="val")
  where = {"dataset": task["dataset"], "features": task["features"]}
  assert command.evaluate(args, [workdir], where) == 0
  out = capsys.readouterr().out
  assert ("no binary threshold (chosen on val, the split scored here: binary metrics n/a)"
          in out), out
  with open(evaluation.metrics_path(workdir, "test")) as f:  # val was written over test's
    assert f.read() == test_metrics
  record = json.loads(open(evaluation.evaluation_path(workdir, "val")).read())
  assert record["split"] == "val" and record["metrics"]["ndcg@1"] is not None
  for metrics in (record["metrics"], *evaluation.baselines(record).values()):
    assert all(metrics[k] is None for k in metrics_lib.BINARY_KEYS), metrics


def test_several_workdirs_get_a_mean_std_row(task, tmp_path, capsys):
  """`evaluate --answerability --seeds W1 W2` printed each run's row and no aggregate, where the
  accuracy tables give mean (population std) over the runs."""
  import argparse  # pylint: disable=g-import-not-at-top
  from rsvqa_jax.commands import answerability as command  # pylint: disable=g-import-not-at-top
  workdirs = []
  for role in ("reference", "blind"):
    workdirs.append(str(tmp_path / role))
    shutil.copytree(task["runs"][role]["workdir"], workdirs[-1])
  args = argparse.Namespace(adversarial=False, shortcuts=False, split="test")
  where = {"dataset": task["dataset"], "features": task["features"]}
  assert command.evaluate(args, workdirs, where) == 0
  rows = {r.split("|")[1].strip(): [c.strip() for c in r.split("|")[2:-1]]
          for r in capsys.readouterr().out.splitlines() if r.startswith("| ")}
  values = [task["runs"][role]["metrics"]["ndcg@1"] for role in ("reference", "blind")]
  mean, std = np.mean(values), np.std(values)
  assert std > 0  # two different models: the std is not a placeholder
  assert rows["mean (population std)"][0] == f"{100 * mean:.2f} ({100 * std:.2f})"
  command.evaluate(args, workdirs[:1], where)  # one workdir: no such row
  assert "mean (population std)" not in capsys.readouterr().out


def _copy_reference(task, tmp_path, folder=None):
  """A copy of the trained reference workdir, its config pointed at `folder` when given."""
  workdir = str(tmp_path / "reference")
  shutil.copytree(task["runs"]["reference"]["workdir"], workdir)
  if folder:
    path = os.path.join(workdir, "config.json")
    with open(path) as f:
      text = f.read()
    with open(path, "w") as f:
      f.write(text.replace(json.dumps(task["folder"]), json.dumps(folder)))
  return workdir


def _test_scores(workdir):
  with open(evaluation.scores_path(workdir, "test")) as f:
    return [float(r["score"]) for r in csv.DictReader(f)]


def test_a_pool_file_added_after_training_leaves_the_word_list_as_trained(task, tmp_path, caplog):
  """The word list was rebuilt from every pool file of the folder at each restore: a pool file
  added after training with a new word changed the word table's shape, and restore failed. (Its
  pools, of test images, are no split of the dataset: evaluated as split `extra`, refused.)"""
  from test_train_support import warnings_of_rsvqa_jax  # pylint: disable=g-import-not-at-top
  reference = task["runs"]["reference"]["workdir"]
  with open(os.path.join(reference, train_lib.WORDS_FILE)) as f:
    recorded = json.load(f)
  questions = [q for s in SPLITS for q in train_lib.Pools.read(
      pools_lib.pool_file(task["folder"], s)).questions.tolist()]
  assert recorded == train_lib.word_list(questions)
  folder = str(tmp_path / "pools")
  shutil.copytree(task["folder"], folder)
  workdir = _copy_reference(task, tmp_path, folder)
  test = train_lib.Pools.read(pools_lib.pool_file(folder, "test"))
  rows = [(9000 + i // 5, "Is there a zebra quokka in the image?", im, label)
          for i, (im, label) in enumerate(zip(test.image_ids[:20].tolist(),
                                              test.labels[:20].tolist()))]
  extra = pools_lib.pool_file(folder, "extra")
  pools_lib.write(extra, rows)
  with warnings_of_rsvqa_jax(caplog):
    record = evaluation.evaluate(workdir, "test", dataset=task["dataset"],
                                 features=task["features"])
  said = [r.getMessage() for r in caplog.records]
  assert said == [f"{folder}: 2 word(s) of Answerability_extra.csv (e.g. 'quokka', 'zebra') are "
                  f"not in the word list {workdir} trained on (answerability_words.json): read "
                  "as its unknown token"], said
  assert record["pairs"] == len(test.image_ids)
  np.testing.assert_allclose(_test_scores(workdir), _test_scores(reference), rtol=1e-6)
  with pytest.raises(RSVQAError, match=r"Answerability_extra.csv: image id \d+ is not an image "
                     r"of split extra of dataset .*: it is in its split test, and it has no split "
                     r"extra; likely pools of another dataset or split"):
    evaluation.evaluate(workdir, "extra", dataset=task["dataset"], features=task["features"])
  _, _, summary = evaluation.select(workdir, extra, 3, str(tmp_path / "top.csv"),
                                    dataset=task["dataset"], features=task["features"])
  assert summary["unknown_words"] == [["quokka", 4], ["zebra", 4]]


def test_a_workdir_without_its_word_list_rebuilds_it_with_a_warning(task, tmp_path, caplog):
  """A workdir trained before answerability_words.json existed keeps working, as it did."""
  from test_train_support import warnings_of_rsvqa_jax  # pylint: disable=g-import-not-at-top
  workdir = _copy_reference(task, tmp_path)
  os.remove(os.path.join(workdir, train_lib.WORDS_FILE))
  with warnings_of_rsvqa_jax(caplog):
    evaluation.evaluate(workdir, "test", dataset=task["dataset"], features=task["features"])
  said = [r.getMessage() for r in caplog.records]
  assert said == [f"{workdir}: no answerability_words.json (trained before it was recorded): the "
                  "text encoder's word list is rebuilt from the dataset and every pool file of "
                  f"{task['folder']}, so a pool file added there since training changes it"], said
  np.testing.assert_allclose(_test_scores(workdir),
                             _test_scores(task["runs"]["reference"]["workdir"]), rtol=1e-6)
  assert not os.path.exists(os.path.join(workdir, train_lib.WORDS_FILE))  # no list guessed


@pytest.mark.parametrize("text", ["[\"a\", \"b\"", "{\"words\": []}", "[\"a\", 3]"])
def test_a_damaged_word_list_is_a_one_line_error(task, tmp_path, text):
  workdir = _copy_reference(task, tmp_path)
  path = os.path.join(workdir, train_lib.WORDS_FILE)
  with open(path, "w") as f:
    f.write(text)
  with pytest.raises(RSVQAError) as error:
    evaluation.evaluate(workdir, "test", dataset=task["dataset"], features=task["features"])
  assert str(error.value) == (f"{path}: unreadable; the workdir's record of its text encoder's "
                              "word list is damaged")


def test_an_evaluation_killed_after_its_scores_leaves_no_metrics_of_an_earlier_one(
    task, tmp_path, monkeypatch):
  """evaluate replaced SPLIT_scores.csv, then SPLIT_evaluation.json and SPLIT_metrics.json (last:
  the study skips a run that has it): killed between them, an earlier evaluation's metrics stayed
  beside the new scores and read as theirs."""
  workdir = str(tmp_path / "reference")
  shutil.copytree(task["runs"]["reference"]["workdir"], workdir)
  metrics = evaluation.metrics_path(workdir, "test")
  assert os.path.exists(metrics)  # the earlier evaluation's

  def killed(path, value, **kwargs):
    raise KeyboardInterrupt  # stands for the process dying here

  monkeypatch.setattr(evaluation.storage, "write_json", killed)
  with pytest.raises(KeyboardInterrupt):
    evaluation.evaluate(workdir, "test", dataset=task["dataset"], features=task["features"])
  monkeypatch.undo()
  assert os.path.exists(evaluation.scores_path(workdir, "test"))
  assert not os.path.exists(metrics)
  assert not os.path.exists(evaluation.evaluation_path(workdir, "test"))
  record = evaluation.evaluate(workdir, "test", dataset=task["dataset"],
                               features=task["features"])
  with open(metrics) as f:
    assert json.load(f) == json.loads(json.dumps(record["metrics"]))


def test_scores_of_another_step_rewritten_for_the_threshold_take_their_metrics_away(
    task, tmp_path):
  """Evaluating test rewrites val_scores.csv too (the threshold is chosen on val): val's metrics
  from an evaluation of another checkpoint step stayed beside scores they no longer described.
  Those of the same step (the same scores again) are kept."""
  workdir = _copy_reference(task, tmp_path)
  where = {"dataset": task["dataset"], "features": task["features"]}
  val = evaluation.evaluate(workdir, "val", **where)
  val_files = (evaluation.evaluation_path(workdir, "val"), evaluation.metrics_path(workdir, "val"))
  evaluation.evaluate(workdir, "test", **where)
  assert all(os.path.exists(p) for p in val_files)  # the same step: still theirs
  storage.write_json(val_files[0], dict(val, step=val["step"] - 1))  # as of another checkpoint
  evaluation.evaluate(workdir, "test", **where)
  assert not any(os.path.exists(p) for p in val_files)


FIX = train_lib.FOREIGN_POOLS


def _pools_with(task, tmp_path, split, rows):
  """A copy of the task's pools folder whose `split` file holds `rows` (pool file rows)."""
  folder = str(tmp_path / "pools")
  shutil.copytree(task["folder"], folder)
  pools_lib.write(pools_lib.pool_file(folder, split), rows)
  return folder, pools_lib.pool_file(folder, split)


def _rows(task, split, shift=0):
  p = train_lib.Pools.read(pools_lib.pool_file(task["folder"], split))
  return [(pool, q, im + shift, label) for pool, q, im, label in zip(
      p.pool_ids.tolist(), p.questions.tolist(), p.image_ids.tolist(), p.labels.tolist())]


def test_train_pools_of_another_split_are_refused_before_training(task, tmp_path):
  """Train pools drawn on the test split's images trained on held-out images, rc 0 and no
  warning: refused in one line naming the file, the first such image and the split it is in."""
  folder, path = _pools_with(task, tmp_path, "train", _rows(task, "test"))
  first = _rows(task, "test")[0][2]
  workdir = str(tmp_path / "run")
  with pytest.raises(RSVQAError) as error:
    train_lib.train(_config(folder, False), workdir, dataset=task["dataset"],
                    features=task["features"], **QUIET)
  assert str(error.value) == (f"{path}: image id {first} is not an image of split train of "
                              f"dataset {task['tmp']} (lr): it is in its split test; {FIX}")
  assert not os.path.exists(os.path.join(workdir, "config.json"))


@pytest.mark.parametrize("source, shift, found", [
    ("train", 0, "it is in its split train"),
    ("test", 1000, "the dataset has no such image"),
])
def test_evaluation_refuses_pools_of_other_images_than_its_splits(task, tmp_path, source, shift,
                                                                   found):
  """Test pools of training images were scored in silence; of images the dataset lacks, the only
  error was 'image id N has no row in the image features'."""
  rows = _rows(task, source, shift)
  folder, path = _pools_with(task, tmp_path, "test", rows)
  workdir = _copy_reference(task, tmp_path, folder)
  with pytest.raises(RSVQAError) as error:
    evaluation.evaluate(workdir, "test", dataset=task["dataset"], features=task["features"])
  assert str(error.value) == (f"{path}: image id {rows[0][2]} is not an image of split test of "
                              f"dataset {task['tmp']} (lr): {found}; {FIX}")


def test_select_refuses_a_pool_of_images_outside_the_dataset(task, tmp_path):
  """select ranks pairs of any split's images, but none of another dataset's."""
  pool = tmp_path / "pool.csv"
  pool.write_text("pool_id,question,image_id\n0,Is there a road?,3\n0,Is there a road?,130\n")
  with pytest.raises(RSVQAError) as error:
    evaluation.select(task["runs"]["reference"]["workdir"], str(pool), 1,
                      str(tmp_path / "top.csv"), dataset=task["dataset"],
                      features=task["features"])
  assert str(error.value) == (f"{pool}: image id 130 is not an image of dataset {task['tmp']} "
                              "(lr); likely a pool file of another dataset: give one of this "
                              "dataset's images")
  assert not os.path.exists(tmp_path / "top.csv")



def test_a_workdir_trained_on_pools_of_another_split_is_not_evaluated(task, tmp_path,
                                                                      monkeypatch):
  """A workdir trained before pools were checked, on train pools of test images: its evaluation
  (and the Majority read from its train pools) is refused, though its val and test pools hold."""
  folder, path = _pools_with(task, tmp_path, "train", _rows(task, "test"))
  c = _config(folder, False)
  c.train.num_epochs = 1
  workdir = str(tmp_path / "run")
  monkeypatch.setattr(pools_lib, "check_images", lambda *args: None)  # as before the check
  assert train_lib.train(c, workdir, dataset=task["dataset"], features=task["features"],
                         **QUIET)["finished"]
  monkeypatch.undo()
  with pytest.raises(RSVQAError) as error:
    evaluation.evaluate(workdir, "test", dataset=task["dataset"], features=task["features"])
  assert str(error.value) == (f"{path}: image id {_rows(task, 'test')[0][2]} is not an image of "
                              f"split train of dataset {task['tmp']} (lr): it is in its split "
                              f"test; {FIX}")


def _forbid_model(monkeypatch):
  """Building the features or the model fails the test: a refusal from files alone comes first."""
  def forbidden(name):
    def call(*args, **kwargs):
      raise AssertionError(f"{name} ran before the refusal")
    return call

  monkeypatch.setattr(train_lib.model_builder, "build", forbidden("model_builder.build"))
  monkeypatch.setattr(train_lib.inputs, "image_features", forbidden("inputs.image_features"))


def test_train_pools_fewer_than_a_batch_are_refused_before_the_model_is_built(task, tmp_path,
                                                                              monkeypatch):
  """Refused after the features and the model were built, with the workdir's config recorded."""
  _forbid_model(monkeypatch)
  c = _config(task["folder"], False)
  c.answerability.batch_pools = 10000
  n = len(metrics_lib.pools(train_lib.Pools.read(pools_lib.pool_file(task["folder"],
                                                                      "train")).pool_ids))
  workdir = str(tmp_path / "run")
  with pytest.raises(RSVQAError) as error:
    train_lib.train(c, workdir, dataset=task["dataset"], features=task["features"], **QUIET)
  assert str(error.value) == (f"config answerability.batch_pools=10000: more than the {n} "
                              "training pools")
  assert not os.path.exists(workdir)


def test_select_refuses_a_pool_of_another_dataset_folder_before_the_model_is_built(
    task, tmp_path, monkeypatch):
  """The pool's folder was checked after the workdir was restored: features, model, checkpoint."""
  other = tmp_path / "other_dataset"
  other.mkdir()
  (other / synthetic.MANIFEST).write_text("{}")
  pool = other / "pool.csv"
  pool.write_text("pool_id,question,image_id\n0,Is there a road?,3\n0,Is there a road?,4\n")
  _forbid_model(monkeypatch)
  workdir = task["runs"]["reference"]["workdir"]
  with pytest.raises(RSVQAError) as error:
    evaluation.select(workdir, str(pool), 1, str(tmp_path / "top.csv"), dataset=task["dataset"],
                      features=task["features"])
  assert str(error.value) == (f"--pool {pool}: lies in the dataset folder {other}, but the "
                              f"workdir trained on {task['folder']}: its image ids name that "
                              "dataset's images; give a pool file of the workdir's dataset")
  assert not os.path.exists(tmp_path / "top.csv")


@pytest.mark.parametrize("which", ["best", "last"])
def test_a_workdir_without_checkpoints_is_refused_before_the_model_is_built(task, tmp_path,
                                                                            monkeypatch, which):
  """No checkpoint to restore was found after the features and the model were built."""
  workdir = _copy_reference(task, tmp_path)
  for name in ("checkpoints", "best"):
    shutil.rmtree(os.path.join(workdir, name))
  _forbid_model(monkeypatch)
  with pytest.raises(RSVQAError) as error:
    evaluation.evaluate(workdir, "test", which=which, dataset=task["dataset"],
                        features=task["features"])
  assert str(error.value).startswith(f"{workdir}: no checkpoint to score: training stopped "
                                     "before its first one")


@pytest.mark.parametrize("content", [None, "# a page without the markers\n"])
def test_a_docs_page_the_stage_cannot_quote_into_is_refused_before_it_runs(
    tmp_path, monkeypatch, capsys, content):
  """`answerability study --docs PAGE` trained every model, then found PAGE missing or without
  its markers."""
  from rsvqa_jax import cli  # pylint: disable=g-import-not-at-top
  from rsvqa_jax.commands import answerability as command  # pylint: disable=g-import-not-at-top

  def forbidden(*args, **kwargs):
    raise AssertionError("the stage ran before the refusal")

  monkeypatch.setattr(evaluation, "study_stage", forbidden)
  page = tmp_path / "page.md"
  if content is not None:
    page.write_text(content)
  configs = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "configs")
  assert cli.main(["answerability", "study", "--config",
                   os.path.join(configs, "answerability_study.py"), "--workdir",
                   str(tmp_path / "study"), "--docs", str(page)]) == 2
  why = ("no such file or directory" if content is None else
         f"no block between {command.DOCS_BEGIN!r} and {command.DOCS_END!r} (put the two markers "
         "where the summary goes)")
  assert capsys.readouterr().err.strip().endswith(f"error: --docs {page}: {why}")
  assert not os.path.exists(tmp_path / "study")
