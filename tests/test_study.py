"""The study end to end on a micro config, its resume, and the report's numbers by hand."""
import math
import os
import shutil

import numpy as np
import pytest

from rsvqa_jax import study
from rsvqa_jax.bias import report
from rsvqa_jax import config as config_lib
from rsvqa_jax.train import checkpointing

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUNS = ("skipthoughts_finetuned_reference", "skipthoughts_finetuned_blind")


def micro_config():
  """One LM, fine-tuned, one seed, random-init ResNet features, a tiny balanced twin."""
  c = config_lib.load(os.path.join(ROOT, "configs", "study_synthetic.py"))
  config_lib.apply_overrides(c, [
      "study.images=30", "study.questions_per_image=8", "study.language_models=('skipthoughts',)",
      "study.lm_weights=('finetuned',)", "study.seeds=(0,)", "study.repeats=2",
      "study.balanced.images=30", "study.balanced.questions_per_image=6",
      "study.compilation_cache=false", "image.arch=resnet18", "image.checkpoint=random",
      "image.width=8", "image.image_size=32", "train.num_epochs=1", "train.batch_size=32",
      "train.eval_batch_size=64"])
  return c


@pytest.fixture(scope="module")
def done(tmp_path_factory):
  workdir = str(tmp_path_factory.mktemp("study") / "s")
  lines = []
  result = study.run_study(micro_config(), workdir, log=lines.append)
  return workdir, result, lines


def _checkpoint_mtimes(workdir):
  out = {}
  for base, _, files in os.walk(workdir):
    if "checkpoints" in base.split(os.sep) or "best" in base.split(os.sep):
      out.update({os.path.join(base, f): os.stat(os.path.join(base, f)).st_mtime_ns for f in files})
  return out


def test_study_end_to_end(done):
  workdir, result, lines = done
  for twin in ("runs", os.path.join("balanced", "runs")):
    for name in RUNS:
      run = os.path.join(workdir, twin, name, "seed0")
      assert os.path.exists(os.path.join(run, "eval", "test", "accuracy.json"))
      assert os.path.exists(os.path.join(run, "eval", "test", "predictions.csv"))
      adv = os.path.join(run, "eval", "test", "adversarial_random.json")
      assert os.path.exists(adv) == name.endswith("reference")
  assert sorted(os.listdir(os.path.join(workdir, "runs"))) == sorted(RUNS)
  text = open(os.path.join(workdir, "report.md")).read()
  for needle in ("Table 2 layout", "Table 6 layout", "| Visual blind |", "Adversarial (random image)",
                 "| | | Difference |", "Prior_Acc", "IO_AdTest", "Uni_Acc (uniform guess)",
                 "## Reading", "## Wall time", "](figures/figure5.png)",
                 "](figures/answer_distribution.png)", "](figures/balanced_answer_distribution.png)"):
    assert needle in text, needle
  for fig in ("figure5.png", "answer_distribution.png", "balanced_answer_distribution.png"):
    with open(os.path.join(workdir, "figures", fig), "rb") as f:
      assert f.read(8) == b"\x89PNG\r\n\x1a\n"
  assert os.path.exists(os.path.join(workdir, "analysis", "types_test.md"))
  assert os.path.exists(os.path.join(workdir, "analysis", "objects_patterns_test.md"))
  assert result["trained_this_call"] == 4
  # The report's reference OA is the run's own accuracy.json value.
  ref = result["cells"][0]["reference"][0]["accuracy"]["oa"]
  assert f"reference OA {100 * ref:.2f}%" in text
  assert sum("trained and evaluated" in l for l in lines) == 4


def test_resume_trains_nothing_and_reevaluates_what_is_missing(done):
  workdir, _, _ = done
  before = _checkpoint_mtimes(workdir)
  assert before
  acc = os.path.join(workdir, "runs", RUNS[1], "seed0", "eval", "test", "accuracy.json")
  adv = os.path.join(workdir, "runs", RUNS[0], "seed0", "eval", "test", "adversarial_random.json")
  os.remove(acc)  # as if the study stopped between training and evaluating this run
  os.remove(adv)
  lines = []
  result = study.run_study(micro_config(), workdir, log=lines.append)
  assert result["trained_this_call"] == 0
  assert os.path.exists(acc) and os.path.exists(adv)
  assert sum("done before, skipped" in l for l in lines) == 3
  assert _checkpoint_mtimes(workdir) == before


def test_moved_study_resumes_and_reevaluates_in_its_new_place(done, tmp_path):
  """Run configs record absolute paths; after a move they follow the study folder."""
  workdir, _, _ = done
  moved = str(tmp_path / "moved")
  hidden = workdir + ".away"
  shutil.copytree(workdir, moved)
  os.rename(workdir, hidden)  # the old place is gone, as after `mv`
  try:
    acc = os.path.join(moved, "runs", RUNS[1], "seed0", "eval", "test", "accuracy.json")
    os.remove(acc)  # evaluating reads the run's recorded config: its paths must follow
    result = study.run_study(micro_config(), moved, log=lambda _: None)
    assert result["trained_this_call"] == 0 and os.path.exists(acc)
    run = os.path.join(moved, "runs", RUNS[0], "seed0")
    assert checkpointing.read_config(run).data.cache_dir.startswith(moved)
  finally:
    os.rename(hidden, workdir)


def test_report_numbers_by_hand():
  def run(oa, aa, a, b, adv=None):
    out = {"accuracy": {"oa": oa, "aa": aa, "per_type": {"a": a, "b": b}}, "adversarial": {}}
    if adv:
      out["adversarial"]["random"] = {"per_repeat": {
          "oa": adv, "aa": adv, "per_type": {"a": adv, "b": adv}}}
    return out
  cell = {"label": "LM", "weights": "frozen",
          "reference": [run(0.8, 0.7, 0.9, 0.5, [0.5, 0.7]), run(0.6, 0.5, 0.7, 0.3, [0.4, 0.6])],
          "blind": [run(0.5, 0.5, 0.6, 0.4), run(0.5, 0.5, 0.6, 0.4)]}
  columns = report.columns_of([cell])
  assert columns == ["a", "b", "AA", "OA"]
  rows = dict(report.setups(cell, columns, ["random"]))
  ref = rows["Reference model"]
  assert ref["OA"] == pytest.approx((0.7, 0.1))
  adv = rows["Adversarial (random image)"]
  assert adv["OA"] == pytest.approx((0.55, np.std([0.5, 0.7, 0.4, 0.6])))  # seeds x repeats
  diff = report.difference(ref, rows["Visual blind"], columns)
  assert diff["OA"] == pytest.approx(20.0) and diff["a"] == pytest.approx(20.0)
  table = report.table6([cell], columns, ["random"])
  assert "| | | Difference | 20.00 | 0.00 | 10.00 | 20.00 |" in table
  assert "| LM | frozen | Reference model | 80.00 (10.00) |" in table
  assert report.pct(math.nan) == "n/a"
  assert all(math.isnan(v) for v in report.mean_std([]))
