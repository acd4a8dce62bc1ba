"""tools/grounding_tables.py: the page's two tables come from the files the commands wrote.

The result files are written here by the evaluators' own summarizers (grounding summary.json,
accuracy.json, counterfactual.json) from made-up rows, so the assembly reads their real formats.
"""
import math
import os

import numpy as np
import pytest

from rsvqa_jax import storage
from rsvqa_jax.bias import metrics
from rsvqa_jax.errors import RSVQAError
from rsvqa_jax.eval import counterfactual, grounding, outputs
from tools import grounding_tables as gt

TYPES = ("presence", "count", "comp", "rural_urban")


def _write_grounding(directory, run, folder, presence_iou, accuracy):
  """A summary.json as `rsvqa-jax grounding` writes it: one scored question per type (presence
  at `presence_iou`, counting 0.5, comparison 0.3, rural/urban 0.2) and one with an empty truth."""
  ious = dict(zip(TYPES, (presence_iou, 0.5, 0.3, 0.2)))
  rows = [{"type": t, "answer": "yes", "correct": True, "confidence": 0.9 - 0.1 * k,
           "iou": ious[t], "iou_centre": 0.05, "iou_uniform": 0.04, "coverage": 0.1}
          for k, t in enumerate(TYPES)]
  rows.append({"type": "presence", "answer": "no", "correct": False, "confidence": 0.5,
               "iou": math.nan, "iou_centre": math.nan, "iou_uniform": math.nan,
               "coverage": math.nan})
  summary = grounding.summarize(rows)
  summary.update(split="test", method="attention", images="own", accuracy=accuracy)
  out = os.path.join(gt.workdir(directory, run), folder)
  os.makedirs(out)
  storage.write_json(os.path.join(out, "summary.json"), summary)


def _write_accuracy(directory, run, right_of_8):
  """accuracy.json as `rsvqa-jax evaluate` writes it: `right_of_8` of 8 questions right."""
  table = metrics.accuracy_table(np.arange(8) < right_of_8, np.repeat(TYPES, 2), TYPES)
  path = outputs.accuracy_paths(gt.workdir(directory, run), "test")[0]
  os.makedirs(os.path.dirname(path), exist_ok=True)
  storage.write_json(path, {**table, "split": "test"})


def _write_counterfactual(directory, run, as_demanded, controls_changed):
  """counterfactual.json as `evaluate --counterfactual` writes it: per type two edits (the first
  `as_demanded` follow the edit) and two controls (the first `controls_changed` change)."""
  rows = []
  for t in TYPES:
    rows += [{"type": t, "edit": "remove", "clean_id": 0, "demanded_id": 1,
              "edited_id": 1 if k < as_demanded else 0} for k in range(2)]
    rows += [{"type": t, "edit": "control", "clean_id": 0, "demanded_id": 0,
              "edited_id": 2 if k < controls_changed else 0} for k in range(2)]
  summary = counterfactual.summarize(rows)
  summary.update(split="test", n_questions=10, n_edited_images=7,
                 skipped={"question text does not parse": 1})
  path = counterfactual.paths(gt.workdir(directory, run), "test")[0]
  os.makedirs(os.path.dirname(path), exist_ok=True)
  storage.write_json(path, summary)


def _results(directory):
  for k, run in enumerate(gt.MODELS):
    _write_grounding(directory, run, "grounding", k / 100, accuracy=(k + 1) / 8)
    _write_accuracy(directory, run, k + 1)
  _write_grounding(directory, gt.FIRST, "grounding_shuffled", 0.01, accuracy=0.375)
  _write_grounding(directory, gt.FIRST, "grounding_gradcam", 0.02, accuracy=0.125)
  for run, (demanded, controls) in zip(gt.COUNTERFACTUAL, ((2, 1), (1, 0), (0, 0))):
    _write_counterfactual(directory, run, demanded, controls)


def test_tables_are_assembled_from_the_result_files(tmp_path):
  _results(str(tmp_path))
  first = storage.read_json(os.path.join(tmp_path, "skipthoughts_mult", "grounding",
                                         "summary.json"))
  assert gt.grounding_table(str(tmp_path)).splitlines() == [
      "| model | test OA | Presence (n=1) | Counting (n=1) | Comparison (n=1) | Rural/urban (n=1) "
      "| all (n=4) |",
      "|---|---|---|---|---|---|---|",
      "| Skip-thoughts, e-mult, attention | 12.50 | 0.00 | 50.00 | 30.00 | 20.00 | 25.00 |",
      "| Skip-thoughts, e-mult, pooled | 25.00 | 1.00 | 50.00 | 30.00 | 20.00 | 25.25 |",
      "| Skip-thoughts, MUTAN, attention | 37.50 | 2.00 | 50.00 | 30.00 | 20.00 | 25.50 |",
      "| Skip-thoughts, MUTAN, pooled | 50.00 | 3.00 | 50.00 | 30.00 | 20.00 | 25.75 |",
      "| DistilBERT, e-mult, attention | 62.50 | 4.00 | 50.00 | 30.00 | 20.00 | 26.00 |",
      "| DistilBERT, e-mult, pooled | 75.00 | 5.00 | 50.00 | 30.00 | 20.00 | 26.25 |",
      "| DistilBERT, MUTAN, attention | 87.50 | 6.00 | 50.00 | 30.00 | 20.00 | 26.50 |",
      "| DistilBERT, MUTAN, pooled | 100.00 | 7.00 | 50.00 | 30.00 | 20.00 | 26.75 |",
      "| Skip-thoughts, e-mult, attention, shuffled images (OA of those answers) | 37.50 | 1.00 "
      "| 50.00 | 30.00 | 20.00 | 25.25 |",
      "| Skip-thoughts, e-mult, attention, by Grad-CAM | 12.50 | 2.00 | 50.00 | 30.00 | 20.00 "
      "| 25.50 |",
      "| centre prior |  | 5.00 | 5.00 | 5.00 | 5.00 | 5.00 |",
      "| uniform map (the visual-blind floor) |  | 4.00 | 4.00 | 4.00 | 4.00 | 4.00 |",
      "",
      f"n: test questions with a non-empty truth, of 5. First row: mAP@0.50:0.95 "
      f"{100 * first['map_50_95']:.2f}%, AP@0.25 {100 * first['ap_25']:.2f}%; 4 of its 4 "
      "truths are small (coverage < 1/3)."]
  assert gt.counterfactual_table(str(tmp_path)).splitlines() == [
      "| model | Presence | Counting | Comparison | Rural/urban | all |",
      "|---|---|---|---|---|---|",
      "| Skip-thoughts, e-mult, attention | 100.00 / 50.00 | 100.00 / 50.00 | 100.00 / 50.00 "
      "| 100.00 / 50.00 | 100.00 / 50.00 |",
      "| Skip-thoughts, e-mult, pooled | 50.00 / 0.00 | 50.00 / 0.00 | 50.00 / 0.00 "
      "| 50.00 / 0.00 | 50.00 / 0.00 |",
      "| Skip-thoughts, e-mult, visual blind | 0.00 / 0.00 | 0.00 / 0.00 | 0.00 / 0.00 "
      "| 0.00 / 0.00 | 0.00 / 0.00 |",
      "",
      "Edits that change the answer / controls: Presence 2 / 2, Counting 2 / 2, Comparison 2 / 2,"
      " Rural/urban 2 / 2; all 8 / 8, on 7 edited images; 1 of the 10 test questions left out."]


def test_docs_replaces_only_the_marker_blocks(tmp_path, capsys):
  _results(str(tmp_path))
  (g_begin, g_end), (c_begin, c_end) = gt.BLOCKS.values()
  page = tmp_path / "page.md"
  page.write_text(f"intro\n\n{g_begin}\n| old | 1 |\n{g_end}\n\nmiddle 22.2%\n\n"
                  f"{c_begin}\n| old | 2 |\n{c_end}\nend\n", encoding="utf-8")
  gt.write_tables(str(tmp_path), str(page))
  grounding_md = (tmp_path / gt.GROUNDING_TABLE).read_text(encoding="utf-8")
  counterfactual_md = (tmp_path / gt.COUNTERFACTUAL_TABLE).read_text(encoding="utf-8")
  assert grounding_md == gt.grounding_table(str(tmp_path))
  assert page.read_text(encoding="utf-8") == (
      f"intro\n\n{g_begin}\n{grounding_md.strip()}\n{g_end}\n\nmiddle 22.2%\n\n"
      f"{c_begin}\n{counterfactual_md.strip()}\n{c_end}\nend\n")
  assert capsys.readouterr().out.endswith(f"{page}: grounding and counterfactual tables updated\n")


def test_a_missing_result_file_is_named_and_quick_runs_never_reach_the_page(tmp_path):
  with pytest.raises(RSVQAError, match=r"summary.json: missing .*rsvqa-jax grounding"):
    gt.write_tables(str(tmp_path))
  with pytest.raises(SystemExit):
    gt.main(["--workdir", str(tmp_path), "--quick", "--docs", "docs/audits/grounding.md"])
