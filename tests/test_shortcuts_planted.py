"""Issue 15's "done when": the shortcut benchmark finds a shortcut planted in the data.

A balanced synthetic LR set (no answer follows from the words alone) gets one planted shortcut,
"Is there a parking?" tied to "yes" (kw:parking=yes@0.9+1: about 85% yes, the untied "no" answers
its tail), and is re-split and cut into the nine OOD sets. The model trained on it sees each
image's land cover exactly (every class's count and the land use) except the parkings, as a
model whose eyes miss small objects: it can answer from the image all but the parking question,
where the planted words are its best guess. The study's shortcuts section must then show the
largest IID - OOD gap on a concept of the planted keyword (KW, KWP or QT+KW, where its questions
form one group whose tail is OOD), and far smaller gaps on the concepts without the keyword.

"yes" rather than "no" is planted because parkings are absent from most scenes: the untied
answers, and so the tail, are many, and the tie holds in urban and rural scenes alike (a model
that guesses parkings from the buildings around them still does best with the plant's answer).
"""
import os

import numpy as np
import pytest

from rsvqa_jax import config as config_lib
from rsvqa_jax.bias import shortcut_report, shortcuts
from rsvqa_jax.data import rsvqa_json, scenes, synthetic
from rsvqa_jax.eval import shortcuts as shortcut_eval
from rsvqa_jax.train import inputs, loop

CONFIGS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "configs")
PLANT = "kw:parking=yes@0.9+1"
HIDDEN = "parking"
MIN_QUESTIONS = 20  # gaps of smaller OOD sets are not compared (one answer moves them 5 points)
KEYWORD_FREE = ("qt", "ko", "kop", "qt_ko")  # the concepts that do not hold the keyword


def _land_cover_features(root, ds):
  """inputs.Features: per image log(1 + count) of every class but HIDDEN, and urban (0 / 1)."""
  ids = np.unique(np.concatenate([ds[s].image_id for s in ds.splits]))
  classes = [c for c in scenes.CLASSES if c != HIDDEN]
  rows = []
  for image_id in ids.tolist():
    m = scenes.load_masks(os.path.join(root, synthetic.MASK_DIR, f"{image_id}.npz"))
    rows.append([np.log1p(m["classes"].count(c)) for c in classes]
                + [float(m["land_use"] == "urban")])
  return inputs.Features(np.asarray(rows, np.float32), ids.astype(np.int64))


@pytest.fixture(scope="module")
def scored(tmp_path_factory):
  base = tmp_path_factory.mktemp("planted")
  source, bench = str(base / "lr"), str(base / "bench")
  synthetic.generate(source, "lr", images=400, seed=0, balanced=True, questions_per_image=6,
                     plant=[PLANT])
  shortcut_report.create(rsvqa_json.read_dataset(source, "lr"), bench, seed=0, log=lambda _: None)
  ds = rsvqa_json.read_dataset(os.path.join(bench, shortcuts.DATA_DIR), "lr")
  features = _land_cover_features(source, ds)
  config = config_lib.apply_overrides(config_lib.load(os.path.join(CONFIGS, "synthetic_tiny.py")), [
      "data.synthetic=false", f"data.root={bench}/data", f"data.cache_dir={base}/cache",
      "text.checkpoint=random", "image.checkpoint=random", "train.num_epochs=12",
      "train.progress_bar=false"])
  workdir = str(base / "run")
  loop.train(config, workdir, dataset=ds, features=features, log=lambda _: None)
  result = shortcut_eval.evaluate(workdir, bench, dataset=ds, features=features)
  return bench, result


def test_the_planted_keyword_has_the_largest_gap(scored):
  _, result = scored
  gaps = {c: r["gap_oa"] for c, r in result["ood"].items() if r["n"] >= MIN_QUESTIONS}
  planted = shortcut_report.planted_concepts([PLANT])
  assert planted == ("kw", "kwp", "qt_kw")
  largest = max(gaps, key=gaps.get)
  assert largest in planted, gaps
  assert "kw" in gaps and all(c in gaps for c in ("ko", "kop")), gaps
  keyword_free = max(g for c, g in gaps.items() if c in KEYWORD_FREE)
  assert gaps["kw"] > keyword_free + 0.10, gaps  # KW's own gap, far above the others'
  assert gaps[largest] > 0.2, gaps


def test_the_study_section_reads_it_off_the_table(scored, tmp_path):
  bench, result = scored
  stage = {"benchmark": bench, "plant": [PLANT], "seeds": [0], "min_questions": MIN_QUESTIONS,
           "models": [{"role": "reference", "label": "land cover but parkings", "runs": [result]}]}
  text = "\n".join(shortcut_report.study_section(stage, str(tmp_path)))
  assert "land cover but parkings: IID OA" in text and "the model takes it" in text
  row = next(r for r in shortcut_report.models_table([("m", [result])]).rows if r[0] == "m")
  assert row[3 + shortcuts.CONCEPTS.index("kw")] == f"{100 * result['ood']['kw']['oa']:.2f}"
  summary = (tmp_path / shortcut_report.SUMMARY_FILE).read_text()
  assert summary.startswith(f"On the study's planted set ({PLANT}")
  assert max(map(len, summary.splitlines())) <= 100
