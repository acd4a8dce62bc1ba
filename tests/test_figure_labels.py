"""Figures and captions say what they show: titles, units, N, error bars and n/a cells.

Each figure is caught as it is saved (the module's save function wrapped), so its titles, axis
labels, legends, bars and colour bars are read from the matplotlib objects themselves.
"""
import math
import os
import re
import types

import numpy as np
import pytest
from matplotlib.container import ErrorbarContainer
from matplotlib.text import Text

from rsvqa_jax.bias import grounding as metrics
from rsvqa_jax.bias import plots, shortcut_report, shortcuts
from rsvqa_jax.data import records, rsvqa_json, synthetic
from rsvqa_jax.eval import grounding

NAMES = shortcuts.CONCEPT_NAMES


def caught(monkeypatch, module, name):
  """[(Figure, dpi)] of every figure `module.name(fig, path, dpi)` saves from now on."""
  figures, save = [], getattr(module, name)

  def keep(fig, path, dpi):
    figures.append((fig, dpi))
    return save(fig, path, dpi)
  monkeypatch.setattr(module, name, keep)
  return figures


def texts(fig):
  return [t.get_text() for t in fig.findobj(Text)]


def _split(name, rows):
  return records.Split.from_rows(name, [
      dict(question_id=i, image_id=i, qtype=t, question="q", answer=a, raw_answer=a)
      for i, (t, a) in enumerate(rows)])


# Figure 7 (plots.answer_distribution).

def test_numeric_answers_are_in_numeric_order_not_by_frequency():
  rows = ([("count", "between 11 and 100")] * 5 + [("count", "0")] * 3
          + [("count", "more than 1000")] * 4 + [("count", "between 1 and 10")] * 2)
  answers, shares = plots.distribution({"train": _split("train", rows)}, "count", top_k=8)
  assert answers == ["0", "between 1 and 10", "between 11 and 100", "more than 1000"]
  assert shares["train"].tolist() == pytest.approx([3 / 14, 2 / 14, 5 / 14, 4 / 14])
  raw = [("count", "10")] * 4 + [("count", "2")] * 3 + [("count", "0")] * 2 + [("count", "7")]
  answers, _ = plots.distribution({"train": _split("train", raw)}, "count", top_k=3)
  assert answers == ["0", "2", "10", plots.OTHER]  # the 3 most frequent, in numeric order
  areas = [("area", "between 11m2 and 100m2")] * 3 + [("area", "0m2")] * 2
  assert plots.distribution({"t": _split("t", areas)}, "area", 8)[0] == [
      "0m2", "between 11m2 and 100m2"]
  words = [("presence", "yes")] * 3 + [("presence", "no")] * 5
  assert plots.distribution({"t": _split("t", words)}, "presence", 8)[0] == ["no", "yes"]


def test_answer_distribution_says_share_of_the_type_and_n_per_split(tmp_path, monkeypatch):
  figures = caught(monkeypatch, plots, "save")
  splits = {"train": _split("train", [("presence", "yes")] * 6 + [("count", "0")] * 4),
            "test": _split("test", [("presence", "no")] * 3 + [("count", "0")])}
  plots.answer_distribution(splits, str(tmp_path / "a.png"))
  (fig, _), = figures
  panels = [ax for ax in fig.axes if ax.get_title()]
  for ax in panels:
    assert ax.get_ylabel() == "% of the type's questions in the split"
  legends = {ax.get_title(): [t.get_text() for t in ax.get_legend().get_texts()] for ax in panels}
  assert legends == {"Counting": ["train (N = 4)", "test (N = 1)"],
                     "Presence": ["train (N = 6)", "test (N = 3)"]}


# Figure 5 (plots.figure5).

def _error_bars(ax):
  return [c for c in ax.containers if isinstance(c, ErrorbarContainer)]


def test_figure5_one_seed_draws_no_error_bar_and_says_what_bars_are(tmp_path, monkeypatch):
  figures = caught(monkeypatch, plots, "save")
  one = {"comp": (0.8, None), "OA": (0.7, None)}  # one seed: std None (bias/report.py)
  adversarial = {"comp": (0.5, 0.1), "OA": (0.4, 0.05)}  # over the seed's draws
  panels = [("LM, frozen", [("Reference model", one), ("Visual blind", one),
                            ("Adversarial (random image)", adversarial)])]
  plots.figure5(panels, ["comp", "OA"], str(tmp_path / "f.png"))
  (bars,) = _error_bars(figures[0][0].axes[0])  # the adversarial bars' alone, not a 0 for one seed
  _, caps, _ = bars.lines
  assert len(caps[0].get_xdata()) == 2  # one per column
  plots.figure5(panels, ["comp", "OA"], str(tmp_path / "g.png"), split="test", n=160, seeds=1,
                draws=10)
  fig = figures[1][0]
  assert fig.get_suptitle() == ("Accuracy (%) per question type, AA and OA on the test split "
                                "(N = 160 questions)")
  note = fig.get_supxlabel().replace("\n", " ")
  assert "one seed's value (no error bar)" in note and "std over the seed's 10 draws" in note


def test_figure5_footnote_names_seeds_and_draws(tmp_path, monkeypatch):
  figures = caught(monkeypatch, plots, "save")
  stats = {"comp": (1.0, 0.2), "OA": (0.5, 0.1)}
  plots.figure5([("LM, frozen", [("Reference model", stats), ("Visual blind", stats)])],
                ["comp", "OA"], str(tmp_path / "f.png"))
  plots.figure5([("LM, frozen", [("Reference model", stats)])], ["comp", "OA"],
                str(tmp_path / "g.png"), seeds=3, draws="10")
  (plain, _), (counted, _) = figures
  assert len(_error_bars(plain.axes[0])) == 2
  assert "over seeds (reference, visual blind) and over seeds x draws (adversarial)" in (
      plain.get_supxlabel().replace("\n", " "))
  assert "over 3 seeds (reference, visual blind) and over 3 seeds x 10 draws" in (
      counted.get_supxlabel().replace("\n", " "))
  # one seed and one draw (white, black, noise): no bar has an error bar, and it says so
  assert plots.error_note(1, "1") == "One seed, one draw: every bar is a single value (no error bar)."


# Grounding: by_type caption, examples.png, statistics.

def _summary(map_size, blind_like):
  """A summary as evaluate() has it when type_table is called: 3 presence and 2 counting
  questions scored, 2 empty truths; the model's IoU the uniform floor's when `blind_like`."""
  rows = []
  for k, (t, iou) in enumerate([("presence", 0.2), ("presence", 0.4), ("presence", 0.1),
                                ("count", 0.3), ("count", 0.05), ("presence", math.nan),
                                ("count", math.nan)]):
    rows.append({"type": t, "answer": "yes", "correct": True, "confidence": 0.9 - 0.1 * k,
                 "iou": iou if not blind_like or math.isnan(iou) else iou / 2, "iou_centre": iou,
                 "iou_uniform": iou / 2, "coverage": 0.1})
  summary = grounding.summarize(rows)
  summary.update(split="test", method="gradcam", map_size=list(map_size))
  return summary


def test_type_table_caption_gives_the_unit_the_n_and_the_uniform_floor():
  table = grounding.type_table(_summary((1, 1), True), "run, test, gradcam, own images")
  caption = table.caption
  assert caption.startswith("Mean IoU (%) by question type: run, test, gradcam, own images")
  assert table.columns == ("map", "Counting (n=2)", "Presence (n=3)", "all")  # CSV: unchanged
  total = sum(int(n) for n in re.findall(r"\(n=(\d+)\)", " ".join(table.columns)))
  assert (f"non-empty truth mask, {total} in all; 2 of the split's 7 questions have an empty "
          "truth") in caption
  assert caption.endswith("; the model row equals the uniform floor: its relevance maps are 1 x 1 "
                          "cells, constant, which cannot localise the answer")
  fine = grounding.type_table(_summary((8, 8), True), "r").caption
  assert "uniform floor" not in fine and "Mean IoU (%)" in fine


def test_examples_figure_is_titled_for_its_questions_with_a_colour_bar(tmp_path, monkeypatch):
  figures = caught(monkeypatch, metrics, "save_figure")
  monkeypatch.setattr(grounding.pixels, "loader",
                      lambda *a: lambda image_id: np.full((16, 16, 3), 90, np.uint8))
  truth, maps = tmp_path / "truth", tmp_path / "maps"
  rows = []
  for qid in range(1, 10):
    mask = np.zeros((16, 16), np.uint8)
    mask[:qid, :8] = 255
    for folder in (truth, maps):
      os.makedirs(folder, exist_ok=True)
      metrics.write_png(str(folder / f"{qid}.png"), mask)
    rows.append({"question_id": qid, "image_id": qid, "iou": qid / 10, "answer": "yes",
                 "prediction": "no"})
  rows.append({"question_id": 10, "image_id": 10, "iou": math.nan, "answer": "no",
               "prediction": "no"})
  records_ = types.SimpleNamespace(question_id=np.arange(1, 11),
                                   question=np.asarray([f"Is there {q}?" for q in range(1, 11)]))
  grounding.examples_figure(str(tmp_path / "e.png"), rows, None, records_, str(maps), str(truth),
                            "run, test, attention, own images")
  (fig, dpi), = figures
  assert fig.get_suptitle() == ("The 3 best and 3 worst of 9 scored questions by IoU, best first: "
                                "run, test, attention, own images")
  shown = [t for t in texts(fig) if t.startswith("map, IoU")]
  assert shown == [f"map, IoU {q / 10:.3f}" for q in (9, 8, 7, 3, 2, 1)]
  bars = [ax for ax in fig.axes if hasattr(ax, "_colorbar")]
  assert len(bars) == 1 and "relevance" in bars[0].get_xlabel()
  # Legible: question text at least 13 px tall, on a figure at least 1000 px wide.
  assert fig.get_figwidth() * dpi >= 1000
  assert not [t.get_text() for t in fig.findobj(Text)
              if t.get_text() and t.get_fontsize() * dpi / 72 < 13]


def test_statistics_have_3_significant_digits_units_and_a_panel_per_unit(tmp_path, monkeypatch):
  stats = {"n": 5, "n_empty": 1,
           **{k: metrics.describe([0.01, 0.02, 0.03, 0.1]) for k in metrics.STATISTICS}}
  table = metrics.statistics_table({"T": stats}, "Grounding statistics of T")
  assert table.rows[0][2] == "0.0400 +- 0.0354 (median 0.0250)"
  assert "coverage: fraction of the image area" in table.caption
  figures = caught(monkeypatch, metrics, "save_figure")
  os.makedirs(tmp_path / "T")
  for qid, size in ((1, 4), (2, 9)):
    mask = np.zeros((32, 32), np.uint8)
    mask[:size, :size] = 255
    metrics.write_png(str(tmp_path / "T" / f"{qid}.png"), mask)
  metrics.stats_folder(str(tmp_path / "T"), str(tmp_path / "S"))
  (fig, _), = figures
  labels = [ax.get_ylabel() for ax in fig.axes]
  assert labels == [metrics.UNITS[k] for k in metrics.STATISTICS]
  assert "fraction of the image area" in labels[0] and "unitless" in labels[3]


# Shortcut statistics and tables.

@pytest.fixture(scope="module")
def bench(tmp_path_factory):
  root = str(tmp_path_factory.mktemp("figure_labels") / "lr")
  synthetic.generate(root, "lr", images=40, seed=0, questions_per_image=20)
  dataset = rsvqa_json.read_dataset(root, "lr")
  pooled = shortcuts.pool(dataset)
  labels = shortcuts.find_labels(root, "lr", np.unique(pooled.image_id).tolist())
  return shortcuts.build(dataset, 1, labels.labels)


def test_answer_shift_gives_each_groups_n_and_titles_in_words(bench, tmp_path, monkeypatch):
  caption = shortcut_report.answer_shift_table(bench).caption
  shifts = {c: shortcut_report.answer_shift(bench, c) for c in shortcuts.CONCEPTS}
  assert any(shifts.values())
  for c, shift in shifts.items():
    if shift is None:
      continue
    assert f"{NAMES[c]} {shift.n_train} / {shift.n_ood}" in caption
    counts = shift.ood * shift.n_ood  # shares of N questions: whole counts
    assert np.allclose(counts, np.round(counts)) and shift.n_ood >= 1
  figures = caught(monkeypatch, plots, "save")
  shortcut_report.answer_shift_figure(bench, str(tmp_path / "s.png"))
  (fig, _), = figures
  titles = [ax.get_title() for ax in fig.axes]
  assert titles[2].startswith("Keyword pair (KWP):\n")
  assert titles[3].startswith("Question type + keyword (QT+KW):\n")
  assert not [t for t in titles if " = " in t or shortcuts.NONE in t]
  for ax, (c, shift) in zip(fig.axes, shifts.items()):
    if shift is not None:
      assert [t.get_text() for t in ax.get_legend().get_texts()] == [
          f"train (N = {shift.n_train})", f"OOD (N = {shift.n_ood})"]


def test_group_words_spell_out_missing_parts():
  assert shortcut_report.group_words("kwp", "(none)") == "no keyword pair"
  assert shortcut_report.group_words("qt_kw", "is there+(none)") == '"is there" + no keyword'
  assert shortcut_report.group_words("kop", "farm+lake") == '"farm + lake"'


def test_matrix_n_a_cells_are_grey_not_the_colour_of_0(tmp_path, monkeypatch):
  figures = caught(monkeypatch, plots, "save")
  matrix = np.zeros((9, 9))
  matrix[0, 0] = 1.0
  matrix[8] = math.nan
  shortcut_report.matrix_figure(matrix, "t", str(tmp_path / "m.png"))
  (fig, _), = figures
  image = fig.axes[0].images[0]
  masked = np.ma.getmaskarray(image.get_array())
  assert masked[8].all() and not masked[:8].any()
  assert image.cmap.get_bad().tolist() != list(image.cmap(0.0))  # n/a: no colour of the scale
  cells = [t.get_text() for t in fig.axes[0].texts]
  assert cells.count("n/a") == 9 and cells.count("0") == 71


def test_groups_figure_draws_no_bar_for_0_and_keeps_groups_and_questions_apart(tmp_path,
                                                                                  monkeypatch):
  figures = caught(monkeypatch, plots, "save")
  rule = lambda groups, imbalanced, ood: types.SimpleNamespace(
      n_groups=groups, n_imbalanced=imbalanced, ood=np.arange(60) < ood)
  bench_ = types.SimpleNamespace(
      test_rules={c: rule(10 + k, k % 3, 0 if k % 2 else 7 * k) for k, c in
                  enumerate(shortcuts.CONCEPTS)}, splits={"iid_test": [0] * 60})
  shortcut_report.groups_figure(bench_, str(tmp_path / "g.png"))
  (fig, _), = figures
  by_groups, by_samples = fig.axes
  assert "groups" in by_groups.get_ylabel() and "OOD questions" in by_samples.get_ylabel()
  heights = {ax: [p.get_height() for p in ax.patches] for ax in fig.axes}
  want_samples = [0 if k % 2 else 7 * k for k in range(9)]
  assert heights[by_samples] == want_samples  # a 0 is no bar (the log axis drew 0.8)
  assert heights[by_groups] == [10 + k for k in range(9)] + [k % 3 for k in range(9)]
  labels = [t.get_text() for t in by_samples.texts]
  assert labels == [str(v) for v in want_samples]


def _result(oa):
  return {"iid_test": {"n": 10, "oa": oa}, "mean_ood_oa": oa,
          "ood": {c: {"n": 3, "oa": oa} for c in shortcuts.CONCEPTS}}


def test_models_table_caption_says_one_seed_and_how_mean_ood_is_made():
  one = shortcut_report.models_table([("m", [_result(0.5)])]).caption
  assert "one seed's value (no std)" in one and "mean (std)" not in one
  assert "unweighted mean of the OOD sets' OA, over the sets that are not n/a" in one
  two = shortcut_report.models_table([("m", [_result(0.5), _result(0.6)])]).caption
  assert "mean (std) over 2 seeds" in two and "one seed" not in two
  mixed = shortcut_report.models_table([("a", [_result(0.5)]),
                                        ("b", [_result(0.5), _result(0.6)])]).caption
  assert "a row of one run: its value (no std)" in mixed
