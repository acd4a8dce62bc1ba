"""A model trained on a shortcut benchmark's data/ and scored by `evaluate --shortcuts`.

One tiny run (configs/synthetic_tiny.py on the re-split of a 12-image synthetic set, a few
steps, every checkpoint kept) serves all the checks: the IID-val checkpoint is the one training
chose, the scores agree with the predictions written beside them, and the Table 4 comparison
labels its OOD selections as adaptive overfitting and can only do as well or better on OOD test.
"""
import csv
import json
import logging
import math
import os
import pathlib
import shutil

import numpy as np
import pytest

from rsvqa_jax import cli
from rsvqa_jax import config as config_lib
from rsvqa_jax.bias import shortcuts as shortcuts_lib
from rsvqa_jax.data import synthetic
from rsvqa_jax.eval import shortcuts
from rsvqa_jax.train import loop
from rsvqa_jax.train import restore
from test_train_support import flip_bytes, warnings_of_rsvqa_jax

CONFIGS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "configs")


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
  base = tmp_path_factory.mktemp("shortcuts_eval")
  source, out = str(base / "lr"), str(base / "bench")
  synthetic.generate(source, "lr", images=12, seed=0, questions_per_image=8)
  assert cli.main(["shortcuts", "--data", source, "--out", out]) == 0
  config = config_lib.apply_overrides(config_lib.load(os.path.join(CONFIGS, "synthetic_tiny.py")), [
      "data.synthetic=false", f"data.root={out}/data", f"data.cache_dir={base}/cache",
      "text.checkpoint=random", "image.checkpoint=random", "train.num_epochs=3",
      "train.batch_size=16", "train.checkpoint_every_steps=2", "train.keep_checkpoints=20",
      "train.progress_bar=false"])
  workdir = str(base / "run")
  summary = loop.train(config, workdir, log=lambda m: None)
  return out, workdir, summary


def test_scores_the_iid_val_checkpoint_on_iid_and_ood(trained):
  out, workdir, summary = trained
  assert cli.main(["evaluate", "--workdir", workdir, "--shortcuts", out]) == 0
  result = json.loads(pathlib.Path(shortcuts.folder(workdir), "shortcuts.json").read_text())
  assert result["step"] == summary["best_step"] and result["checkpoint"] == "best"
  with open(os.path.join(shortcuts.folder(workdir), "predictions.csv"), newline="") as f:
    rows = list(csv.DictReader(f))
  right = {int(r["question_id"]): r["prediction"] == r["answer"] for r in rows}
  assert result["iid_test"]["oa"] == pytest.approx(sum(right.values()) / len(right))
  for c in shortcuts_lib.CONCEPTS:
    ids = json.loads(pathlib.Path(out, f"ood_{c}.json").read_text())
    r = result["ood"][c]
    assert r["n"] == len(ids)
    if ids:
      assert r["oa"] == pytest.approx(sum(right[q] for q in ids) / len(ids))
      assert r["gap_oa"] == pytest.approx(result["iid_test"]["oa"] - r["oa"])


def test_table4_selection_is_labelled_adaptive_overfitting(trained, monkeypatch):
  out, workdir, summary = trained
  result = shortcuts.evaluate(workdir, out, ood_selection=True)
  chosen = result["selection"]
  assert len(chosen["candidates"]) >= 3 and summary["best_step"] in chosen["candidates"]
  assert set(chosen["iid_val"]["steps"].values()) == {summary["best_step"]}
  for c in shortcuts_lib.CONCEPTS:
    protocol, peeked = chosen["iid_val"]["ood"][c], chosen["ood_test"]["ood"][c]
    if not math.isnan(protocol):
      assert peeked >= protocol
  text = pathlib.Path(shortcuts.folder(workdir), "shortcuts_selection.md").read_text()
  assert text.count("adaptive overfitting") >= 3 and "IID val (default)" in text
  assert set(chosen["ood_val_n"]) == set(shortcuts_lib.CONCEPTS)
  for c, n in chosen["ood_val_n"].items():  # an empty OOD val set selects nothing
    assert (chosen["ood_val"]["steps"][c] is None) == (n == 0), (c, n)
  _each_rule_picks_its_own_checkpoint(trained, monkeypatch)


def _each_rule_picks_its_own_checkpoint(trained, monkeypatch):
  """The run's checkpoints may all answer alike; here three stand-in checkpoints answer as set
  below, so that each rule picks a known, different one, and its values are that one's:
    step 10: val all wrong, test all right      -> best on OOD test (every set 1)
    step 20: val right but on the OOD val sets (U), test all wrong  -> best on IID val
    step 30: val right on U only, test right on its first half      -> best on OOD val"""
  out, workdir, _ = trained
  run, _, _ = restore.restore(workdir, ["val", "test"])
  saved = shortcuts_lib.load(out)
  answers = {s: np.asarray(run.columns[s].columns["answer"]) for s in ("val", "test")}
  assert all((a >= 0).all() for a in answers.values())  # every answer is one the model can give
  val_masks = shortcuts_lib.ood_masks(saved, run.dataset["val"], "val")
  union = np.any(list(val_masks.values()), axis=0)
  n_val, n_test = len(answers["val"]), len(answers["test"])
  assert 0 < union.sum() < n_val / 2  # IID val OA: 0, more than 1/2, less than 1/2
  first_half = np.arange(n_test) < n_test // 2
  right = {10: {"val": np.zeros(n_val, bool), "test": np.ones(n_test, bool)},
           20: {"val": ~union, "test": np.zeros(n_test, bool)},
           30: {"val": union, "test": first_half}}
  monkeypatch.setattr(shortcuts.predict, "predict", lambda run, state, split: np.where(
      right[state][split], answers[split], -2)[None])
  chosen = shortcuts.selection(run, [(step, step) for step in right], saved)
  assert chosen["candidates"] == [10, 20, 30]
  test_ids = run.dataset["test"].question_id
  ood_test = {c: np.isin(test_ids, saved.ood[c]) for c in shortcuts_lib.CONCEPTS}
  tested = [c for c in shortcuts_lib.CONCEPTS if ood_test[c].any()]
  assert tested
  # IID val: step 20 for every column, and step 20's test scores (all 0).
  assert chosen["iid_val"]["steps"] == dict.fromkeys((*shortcuts_lib.CONCEPTS, "mean"), 20)
  assert chosen["iid_val"]["iid_test"] == 0.0 and chosen["iid_val"]["mean_ood"] == 0.0
  assert {c: chosen["iid_val"]["ood"][c] for c in tested} == dict.fromkeys(tested, 0.0)
  # OOD test: step 10 (all right on test) where a set has questions, none where it is empty.
  assert chosen["ood_test"]["steps"] == {
      **{c: 10 if ood_test[c].any() else None for c in shortcuts_lib.CONCEPTS}, "mean": 10}
  assert chosen["ood_test"]["iid_test"] == 1.0 and chosen["ood_test"]["mean_ood"] == 1.0
  assert {c: chosen["ood_test"]["ood"][c] for c in tested} == dict.fromkeys(tested, 1.0)
  # OOD val: step 30 (all right on every OOD val set) where the val set has questions; its values
  # are step 30's on test: IID the first half's share, each OOD set its share of the first half.
  assert chosen["ood_val"]["steps"] == {
      **{c: 30 if val_masks[c].any() else None for c in shortcuts_lib.CONCEPTS}, "mean": 30}
  assert chosen["ood_val"]["iid_test"] == pytest.approx(first_half.mean())
  share = {c: first_half[ood_test[c]].mean() for c in tested}
  assert chosen["ood_val"]["mean_ood"] == pytest.approx(np.mean(list(share.values())))
  for c in shortcuts_lib.CONCEPTS:
    got = chosen["ood_val"]["ood"][c]
    if val_masks[c].any() and c in share:
      assert got == pytest.approx(share[c]), c
    else:
      assert math.isnan(got), c


def test_table4_caption_says_which_ood_val_sets_are_empty(trained):
  """A small benchmark's OOD val row read all n/a with no word of why."""
  from rsvqa_jax.bias import shortcut_report  # pylint: disable=g-import-not-at-top
  out, workdir, _ = trained
  chosen = shortcuts.evaluate(workdir, out, ood_selection=True)["selection"]
  concepts = shortcuts_lib.CONCEPTS
  caption = lambda counts: shortcut_report.selection_table({**chosen, "ood_val_n": counts}).caption
  assert "val split holds no" not in caption(dict.fromkeys(concepts, 3))
  assert caption(dict.fromkeys(concepts, 0)).endswith(
      "; the val split holds no question of any OOD set, so OOD val selects no checkpoint (its "
      "row is n/a)")
  first = shortcut_report.NAMES[concepts[0]]
  assert caption({**dict.fromkeys(concepts, 3), concepts[0]: 0}).endswith(
      f"; the val split holds no question of OOD {first}, so OOD val selects no checkpoint there "
      "(n/a), and its IID and mean columns take the checkpoint best on the mean of the other OOD "
      "val sets")


def test_a_workdir_of_other_data_is_refused(trained, tmp_path, capsys):
  out, workdir, _ = trained
  other = tmp_path / "other"
  other.mkdir()
  for name in ("shortcuts.json", "split.json", "concepts.csv"):
    (other / name).write_bytes(pathlib.Path(out, name).read_bytes())
  split = json.loads(pathlib.Path(out, "split.json").read_text())
  split["iid_test"] = split["iid_test"][1:]
  (other / "split.json").write_text(json.dumps(split))
  for c in shortcuts_lib.CONCEPTS:
    (other / f"ood_{c}.json").write_text("[]")
  assert cli.main(["evaluate", "--workdir", workdir, "--shortcuts", str(other)]) == 2
  reseeded = str(tmp_path / "seed1")  # the same source re-split with another seed
  assert cli.main(["shortcuts", "--data", os.path.join(os.path.dirname(out), "lr"), "--out",
                   reseeded, "--seed", "1"]) == 0
  capsys.readouterr()
  assert cli.main(["evaluate", "--workdir", workdir, "--shortcuts", reseeded]) == 2
  # evaluate has no --data: the advice names what it takes.
  assert capsys.readouterr().err.strip().endswith(
      "the run trained on other data: give --shortcuts the benchmark whose data/ it trained on "
      "(or train a run on this one's)")
  (other / "ood_kw.json").write_text("[1, 2, 3.5]")
  assert cli.main(["evaluate", "--workdir", workdir, "--shortcuts", str(other)]) == 2


def test_a_corrupted_checkpoint_is_a_warning_under_quiet(trained, tmp_path, caplog):
  """-q silences routine messages, never a checkpoint skipped or stood in for: best/ of the
  chosen step is damaged, so restoring it and the OOD selection's pass both say so."""
  out, workdir, summary = trained
  copy, best = str(tmp_path / "run"), summary["best_step"]
  shutil.copytree(workdir, copy)
  flip_bytes(os.path.join(copy, "best", str(best)))
  with warnings_of_rsvqa_jax(caplog):
    assert cli.main(["-q", "evaluate", "--workdir", copy, "--shortcuts", out,
                     "--ood-selection"]) == 0
  warned = [(r.name, r.levelno, r.getMessage()) for r in caplog.records
            if r.name.startswith("rsvqa_jax")]
  assert [(n, l) for n, l, _ in warned] == [
      ("rsvqa_jax.train.restore", logging.WARNING), ("rsvqa_jax.train.restore", logging.WARNING),
      ("rsvqa_jax.eval.shortcuts", logging.WARNING)], warned
  skipped, stood_in, not_selectable = (m for _, _, m in warned)
  for message in (skipped, not_selectable):
    assert message.startswith(f"checkpoint {copy}/best/{best}: "), message
    assert message.endswith("; skipped"), message
  assert stood_in == (f"{copy}/best: step {best} missing or corrupted; its periodic checkpoint "
                      f"{copy}/checkpoints/{best} (the same state) is used")
  result = json.loads(pathlib.Path(shortcuts.folder(copy), "shortcuts.json").read_text())
  assert result["step"] == best


def test_table4_with_one_kept_checkpoint_says_it_compares_nothing(trained, tmp_path, caplog):
  """A workdir that kept one epoch-end checkpoint gave three equal Table 4 rows, read as no
  adaptive overfitting, with no word that there was nothing to choose among."""
  out, workdir, summary = trained
  copy, best = str(tmp_path / "run"), summary["best_step"]
  shutil.copytree(workdir, copy)
  shutil.rmtree(os.path.join(copy, "checkpoints"))  # best/ alone: one candidate
  with warnings_of_rsvqa_jax(caplog):
    chosen = shortcuts.evaluate(copy, out, ood_selection=True)["selection"]
  assert chosen["candidates"] == [best]
  warned = [r.getMessage() for r in caplog.records if r.name == "rsvqa_jax.eval.shortcuts"]
  assert warned == [f"{copy}: --ood-selection has one kept checkpoint at an epoch end to select "
                    f"among (step {best}), so every rule picks it and the comparison shows "
                    "nothing; train with a larger train.keep_checkpoints"]
  caplog.clear()
  with warnings_of_rsvqa_jax(caplog):  # several candidates: no such warning
    assert len(shortcuts.evaluate(workdir, out, ood_selection=True)["selection"]["candidates"]) > 1
  assert not [r for r in caplog.records if r.name == "rsvqa_jax.eval.shortcuts"]


def test_the_reading_says_when_the_planted_concepts_ood_sets_are_empty():
  """It said the keyword questions' OOD sets "hold its tail" when KW, KWP and QT+KW held none."""
  from rsvqa_jax.bias import shortcut_report  # pylint: disable=g-import-not-at-top
  def result(n):
    return {"iid_test": {"oa": 0.8}, "ood": {c: {"n": n, "oa": math.nan if not n else 0.5,
                                                 "gap_oa": math.nan if not n else 0.3}
                                             for c in shortcuts_lib.CONCEPTS}}
  stage = lambda n: {"plant": ["kw:parking=yes@0.9+1"], "min_questions": 40,
                     "models": [{"label": "M", "runs": [result(n)]}]}
  assert "but those OOD sets hold no question here" in shortcut_report.study_reading(stage(0))
  text = shortcut_report.study_reading(stage(50))
  assert "form one group of their own in KW, KWP, QT+KW, whose OOD sets hold its tail" in text
