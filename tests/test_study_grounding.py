"""The study's grounding stage on a micro config: every grid run scored, the floors beside them.

Kept apart from tests/test_study.py's fixture (one fine-tuned reference / blind pair, no twin,
no shortcuts stage) so that the stage adds nothing to that file's run.
"""
import json
import math
import os
import pathlib

import pytest

from rsvqa_jax import config as config_lib
from rsvqa_jax import study
from rsvqa_jax.bias import grounding_report, tables
from rsvqa_jax.errors import RSVQAError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def micro_config(*more):
  c = config_lib.load(os.path.join(ROOT, "configs", "study_synthetic.py"))
  return config_lib.apply_overrides(c, [
      "study.images=30", "study.questions_per_image=8", "study.language_models=('skipthoughts',)",
      "study.lm_weights=('finetuned',)", "study.seeds=(0,)", "study.repeats=1",
      "study.balanced.enabled=false", "study.shortcuts.enabled=false",
      "study.compilation_cache=false", "image.arch=resnet18", "image.checkpoint=random",
      "image.width=8", "image.image_size=64", "train.num_epochs=1", "train.batch_size=32",
      "train.eval_batch_size=64", "study.frozen_epochs=0", "study.grounding.enabled=true", *more])


@pytest.fixture(scope="module")
def done(tmp_path_factory):
  workdir = str(tmp_path_factory.mktemp("study_grounding") / "s")
  lines = []
  return workdir, study.run_study(micro_config(), workdir, log=lines.append), lines


def test_grounding_stage_scores_every_run_beside_the_floors(done):
  workdir, result, lines = done
  stage = result["grounding"]
  assert [(m["role"], len(m["runs"])) for m in stage["models"]] == [("reference", 1),
                                                                     ("blind", 1)]
  reference, blind = (m["runs"][0] for m in stage["models"])
  assert reference["method"] == "gradcam"  # the paper's pooled head: Grad-CAM on the map
  assert blind["method"] == "uniform (visual-blind)"
  # The blind twin's map is the whole image: exactly the uniform floor, type by type.
  assert blind["mean_iou"] == pytest.approx(stage["floors"]["uniform"]["mean_iou"], abs=1e-12)
  for t, v in blind["by_type"].items():
    assert v["mean_iou"] == pytest.approx(stage["floors"]["uniform"]["by_type"][t]["mean_iou"])
  for run in (reference, blind):
    with open(os.path.join(run["workdir"], "eval", "test", "grounding_auto",
                           "summary.json")) as f:
      assert json.load(f)["mean_iou"] == run["mean_iou"]
    assert 0.0 <= run["mean_iou"] <= 1.0
  text = pathlib.Path(workdir, "report.md").read_text()
  assert "## Answer grounding (VizWiz)" in text
  assert "| Centre prior |" in text and "visual blind (uniform map)" in text
  table = grounding_report.study_table(stage)
  assert table.rows[0][-2] == reference["mean_iou"]
  assert table.rows[-1][-2] == stage["floors"]["centre"]["mean_iou"]
  assert tables.to_markdown(table) in text
  assert os.path.exists(os.path.join(workdir, "analysis", "grounding.csv"))
  assert any("grounding scored" in line for line in lines)


def test_grounding_stage_resumes_without_rescoring(done):
  workdir, result, _ = done
  lines = []
  again = study.run_study(micro_config(), workdir, log=lines.append)
  assert again["grounding"] == json.loads(json.dumps(result["grounding"]))
  assert not any("grounding scored" in line for line in lines)


def _stage(ref, centre=0.2, uniform=0.1):
  floor = lambda v: {"mean_iou": v, "by_type": {"presence": {"mean_iou": v, "n": 10}}}
  run = lambda v: {"mean_iou": v, "mean_iou_correct": v, "by_type": {"presence": {
      "mean_iou": v, "n": 10}}}
  return {"split": "test", "method": "auto", "floors": {"centre": floor(centre),
                                                       "uniform": floor(uniform)},
          "models": [{"label": "LM", "weights": "finetuned", "role": "reference",
                      "runs": [run(v) for v in ref]},
                     {"label": "LM", "weights": "finetuned", "role": "blind",
                      "runs": [run(uniform)]}]}


def test_reading_and_table_by_hand():
  stage = _stage([0.30, 0.40])
  text = grounding_report.study_reading(stage, margin=5.0)
  assert "the centre prior (20.00" in text and "35.00 (clearly above it, +15.00 points)" in text
  table = grounding_report.study_table(stage)
  assert table.rows[0][1:3] == ("35.00 (5.00)", "35.00 (5.00)")  # two seeds: mean (std)
  assert table.rows[1][1] == 0.1 and table.rows[2][0] == "Centre prior"
  assert "barely above it, +2.00" in grounding_report.study_reading(_stage([0.22]), 5.0)
  assert "below it, -10.00" in grounding_report.study_reading(_stage([0.10]), 5.0)
  assert math.isnan(grounding_report.study_table(_stage([None])).rows[0][1])
  # No question scored: NaN compared false both ways and read as "barely above" the floor.
  text = grounding_report.study_reading(_stage([None]), 5.0)
  assert "(not comparable)" in text and "above it" not in text


def test_bad_grounding_method_is_refused_before_anything_runs(tmp_path):
  with pytest.raises(RSVQAError, match="study.grounding.method='saliency'"):
    study.Study(micro_config("study.grounding.method=saliency"), str(tmp_path / "s"))
  assert not os.path.exists(tmp_path / "s")
