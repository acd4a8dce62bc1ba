"""The study end to end on a micro config, its resume, and the report's numbers by hand."""
import json
import logging
import math
import os
import pathlib
import re
import shutil
import types

import numpy as np
import pytest

from rsvqa_jax import cli, storage, study
from rsvqa_jax.bias import report, shortcut_report, shortcuts, tables
from rsvqa_jax.data import synthetic
from rsvqa_jax import config as config_lib
from rsvqa_jax.errors import RSVQAError
from rsvqa_jax.study import checks as study_checks
from rsvqa_jax.study import journal, recorded, reuse
from rsvqa_jax.train import checkpointing
from test_train_support import held_by_another_process, listing

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUNS = ("skipthoughts_finetuned_reference", "skipthoughts_finetuned_blind")
MUTAN = "skipthoughts_finetuned_mutan_reference"


def micro_config():
  """One LM, fine-tuned, one seed, random-init ResNet features, a tiny balanced twin."""
  c = config_lib.load(os.path.join(ROOT, "configs", "study_synthetic.py"))
  config_lib.apply_overrides(c, [
      "study.images=30", "study.questions_per_image=8", "study.language_models=('skipthoughts',)",
      "study.lm_weights=('finetuned',)", "study.seeds=(0,)", "study.repeats=2",
      "study.balanced.images=30", "study.balanced.questions_per_image=6",
      "study.compilation_cache=false", "image.arch=resnet18", "image.checkpoint=random",
      "image.width=8", "image.image_size=32", "train.num_epochs=1", "train.batch_size=32",
      "train.eval_batch_size=64", "study.frozen_epochs=0",
      "study.table2_rows=('skipthoughts,finetuned,mutan', 'skipthoughts,finetuned,mult')",
      "study.shortcuts.enabled=true", "study.shortcuts.images=30",
      "study.shortcuts.questions_per_image=6"])
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
  assert sorted(os.listdir(os.path.join(workdir, "runs"))) == sorted(RUNS + (MUTAN,))
  text = pathlib.Path(workdir, "report.md").read_text()
  for needle in ("Table 2 layout", "Table 6 layout", "| Visual blind |", "Adversarial (random image)",
                 "|  |  | Difference |", "Prior_Acc", "IO_AdTest", "Uni_Acc (uniform guess)",
                 "## Reading", "## Wall time", "](figures/figure5.png)", "## Settings",
                 "## Objects and patterns (Table 4 layout)",
                 "| N (test questions) |", "## Summary", "Thresholds of this reading",
                 "](figures/answer_distribution.png)",
                 "](figures/balanced_answer_distribution.png)",
                 "| Skip-thoughts GRU (random init) | finetuned | MUTAN |",
                 "`analysis/table2.csv`, `analysis/table2.tex`",
                 "`analysis/table6.csv`, `analysis/table6.tex`"):
    assert needle in text, needle
  header = next(l for l in text.splitlines() if l.startswith("| Language model |"))
  assert header.index("Comparison") < header.index("Counting") < header.index("Presence")
  assert pathlib.Path(workdir, "summary.md").read_text().strip() in text
  for stem in ("table2", "table6", "table3_test", "balanced"):
    for ext in ("csv", "md", "tex"):
      assert os.path.exists(os.path.join(workdir, "analysis", f"{stem}.{ext}")), (stem, ext)
  for fig in ("figure5.png", "answer_distribution.png", "balanced_answer_distribution.png"):
    with open(os.path.join(workdir, "figures", fig), "rb") as f:
      assert f.read(8) == b"\x89PNG\r\n\x1a\n"
  assert os.path.exists(os.path.join(workdir, "analysis", "types_test.md"))
  assert os.path.exists(os.path.join(workdir, "analysis", "objects_patterns_test.md"))
  assert result["trained_this_call"] == 7  # + the shortcuts stage's reference / blind pair
  # The report's reference OA is the run's own accuracy.json value.
  ref = result["cells"][0]["reference"][0]["accuracy"]["oa"]
  assert f"reference OA {100 * ref:.2f}%" in text
  assert sum("trained and evaluated" in l for l in lines) == 7
  # Table 2's e-mult row is the grid's run, its MUTAN row a run of its own.
  rows = {r["spec"]: r for r in result["table2"]}
  assert rows["skipthoughts,finetuned,mult"]["runs"] == result["cells"][0]["reference"]
  assert rows["skipthoughts,finetuned,mutan"]["runs"][0]["workdir"].endswith(
      os.path.join(MUTAN, "seed0"))


def test_shortcuts_stage_scores_a_planted_set(done):
  workdir, result, _ = done
  stage = result["shortcuts"]
  assert stage["plant"] == ["kw:parking=yes@0.9+1"]
  assert synthetic.read_manifest(os.path.join(workdir, "data", "shortcuts"))["plant"] == (
      stage["plant"])
  assert [m["role"] for m in stage["models"]] == ["reference", "blind"]
  for m in stage["models"]:
    run = m["runs"][0]
    assert set(run["ood"]) == set(shortcuts.CONCEPTS) and run["step"] > 0
    folder = os.path.join(workdir, "shortcuts", "runs", f"skipthoughts_finetuned_{m['role']}",
                          "seed0", "eval", "shortcuts")
    assert os.path.exists(os.path.join(folder, "shortcuts.json"))
  bench = os.path.join(workdir, "shortcuts", "benchmark")
  assert os.path.exists(os.path.join(bench, "ood_kw.json"))
  assert shortcuts.load(bench).manifest["questions"] == stage["questions"]
  text = pathlib.Path(workdir, "report.md").read_text()
  assert "## Shortcut OOD benchmark (VQA-VS)" in text and "| N (questions) |" in text
  assert "Skip-thoughts GRU (random init) finetuned, visual blind |" in text
  assert text.index("## Shortcut OOD benchmark") < text.index("## Wall time")
  for ext in ("csv", "md", "tex"):
    assert os.path.exists(os.path.join(workdir, "analysis", f"shortcuts_models.{ext}"))
  summary = pathlib.Path(workdir, shortcut_report.SUMMARY_FILE).read_text()
  assert summary.startswith("On the study's planted set (kw:parking=yes@0.9+1")


def test_every_json_file_of_a_study_is_strict_json_with_null_for_no_number(done):
  workdir, result, _ = done
  def refuse(constant):
    raise AssertionError(f"bare {constant} in a JSON file")
  files = [os.path.join(base, f) for base, _, names in os.walk(workdir) for f in names
           if f.endswith((".json", ".jsonl"))]
  assert any(f.endswith("metrics.jsonl") for f in files) and len(files) > 20
  for path in files:
    with open(path) as f:
      for line in (f if path.endswith(".jsonl") else [f.read()]):
        json.loads(line, parse_constant=refuse)
  # An OOD set without a question of some type: null in the file, NaN once read back.
  run = result["shortcuts"]["models"][0]["runs"][0]
  undefined = [(c, t) for c, r in run["ood"].items() for t, v in r["per_type"].items()
               if math.isnan(v)]
  assert undefined
  with open(os.path.join(run["workdir"], "eval", "shortcuts", "shortcuts.json")) as f:
    c, t = undefined[0]
    assert json.load(f)["ood"][c]["per_type"][t] is None


def test_shortcuts_stage_is_checked_before_anything_runs(tmp_path):
  c = micro_config()
  config_lib.apply_overrides(c, ["study.shortcuts.plant=('kw:wetland=no',)"])
  with pytest.raises(RSVQAError, match="study.shortcuts.plant: --plant 'kw:wetland=no'"):
    study.Study(c, str(tmp_path / "a"))
  assert not os.path.exists(tmp_path / "a")
  config_lib.apply_overrides(c, ["study.synthetic=false"])  # real data: the stage is skipped
  assert not study.Study(c, str(tmp_path / "b")).runs_shortcuts()


def test_a_real_data_study_names_the_stages_it_leaves_out():
  """A study of a dataset folder skipped its switched-on balanced twin and shortcut benchmark,
  and its report never said so."""
  c = micro_config()
  assert study_checks.left_out(c.study) == []
  config_lib.apply_overrides(c, ["study.synthetic=false"])
  stages = study_checks.left_out(c.study)
  assert stages == ["the balanced twin (study.balanced.enabled)",
                    "the shortcut benchmark (study.shortcuts.enabled)"]
  assert report._left_out(stages) == (  # pylint: disable=protected-access
      " Left out, as they need a generated dataset: the balanced twin "
      "(study.balanced.enabled), the shortcut benchmark (study.shortcuts.enabled).")
  assert report._left_out([]) == ""  # pylint: disable=protected-access


def test_a_shortcut_set_too_small_to_re_split_is_refused_before_the_study_starts():
  """It was refused after the main stages (35 s at the smallest), naming no key, though
  study.shortcuts.images said "3 or more"."""
  c = micro_config()
  config_lib.apply_overrides(c, ["study.shortcuts.enabled=true", "study.shortcuts.images=3"])
  with pytest.raises(RSVQAError, match=r"^config study.shortcuts.images=3: must be a whole number "
                     r">= 4 \(the re-split draws its 3 splits from the set's train and val "
                     r"images\)$"):
    study_checks.check(c)
  config_lib.apply_overrides(c, ["study.shortcuts.images=4"])
  study_checks.check(c)
  config_lib.apply_overrides(c, ["study.variant=hr"])  # a fourth split, of another region
  with pytest.raises(RSVQAError, match="^config study.shortcuts.images=4: leaves the re-split 2 "
                     "train and val images, it needs 3; raise it to 5 or more$"):
    study_checks.check(c)
  config_lib.apply_overrides(c, ["study.shortcuts.images=5"])
  study_checks.check(c)


@pytest.mark.parametrize("overrides,message", [
    (["study.images=8", "study.questions_per_image=4"],
     r"data/main: 2\d training questions from 8 generated images \(study.images\), fewer than "
     r"train.batch_size=32; raise study.images or set train.batch_size to 2\d or less"),
    (["study.balanced.images=8", "study.balanced.questions_per_image=4"],
     r"data/balanced: 8 generated images \(study.balanced.images\) left split 'val' without a "
     r"question; raise study.balanced.images or set study.balanced.enabled=false")])
def test_generated_sets_too_small_are_refused_before_any_run_trains(tmp_path, overrides, message):
  """A synthetic study sized below its batch, or with a balanced twin whose validation split
  came out empty, stops at once naming the study keys to raise, not after the grid trained."""
  c = micro_config()
  config_lib.apply_overrides(c, overrides)
  with pytest.raises(RSVQAError, match=message):
    study.run_study(c, str(tmp_path / "s"), log=lambda _: None)
  assert not os.path.exists(tmp_path / "s" / "runs")  # refused before the grid's first run


def test_each_summary_goes_to_the_page_holding_its_markers(tmp_path):
  (tmp_path / "s").mkdir()
  (tmp_path / "s" / "summary.md").write_text("study\n")
  (tmp_path / "s" / shortcut_report.SUMMARY_FILE).write_text("shortcuts\n")
  bias_page, shortcuts_page = tmp_path / "bias.md", tmp_path / "shortcuts.md"
  bias_page.write_text(f"a\n{report.DOCS_BEGIN}\nold\n{report.DOCS_END}\n")
  shortcuts_page.write_text(f"b\n{shortcut_report.DOCS_BEGIN}\nold\n{shortcut_report.DOCS_END}\n")
  assert report.main([str(tmp_path / "s"), "--docs", str(bias_page), str(shortcuts_page)]) == 0
  assert bias_page.read_text() == f"a\n{report.DOCS_BEGIN}\nstudy\n{report.DOCS_END}\n"
  assert shortcuts_page.read_text() == (
      f"b\n{shortcut_report.DOCS_BEGIN}\nshortcuts\n{shortcut_report.DOCS_END}\n")
  # a summary whose markers no page holds: nothing is written
  bias_page.write_text(f"a\n{report.DOCS_BEGIN}\nold\n{report.DOCS_END}\n")
  assert report.main([str(tmp_path / "s"), "--docs", str(bias_page)]) == 2
  assert "old" in bias_page.read_text()
  text = pathlib.Path(ROOT, "docs", "audits", "shortcuts.md").read_text(encoding="utf-8")
  assert shortcut_report.DOCS_BEGIN in text and shortcut_report.DOCS_END in text


def test_table3_is_table6s_numbers(done):
  """Table 3's model columns are Table 6's reference and adversarial means, not one run's."""
  workdir, result, _ = done
  columns = report.columns_of(result["cells"])
  flags = report.Flags(report.counts_of(result["cells"], columns), 0)
  t3, cell = report.table3(result, columns, flags)
  t6 = report.table6(result["cells"], columns, result["adversarial"], flags)
  ref6 = next(r for r in t6.rows if r[2] == "Reference model" and r[0] == cell["label"])
  adv6 = next(r for r in t6.rows if r[2].startswith("Adversarial"))
  names = [r[0] for r in t3.rows]
  assert names == ["All", "Comparison", "Counting", "Presence", "Rural/urban", "Average", "Overall"]
  acc, adv = t3.columns.index("RSVQA_Acc (%)"), t3.columns.index("AdTest_Acc (%)")
  assert [r[acc] for r in t3.rows[1:]] == list(ref6[3:])
  assert [r[adv] for r in t3.rows[1:]] == list(adv6[3:])
  settings = dict((k, v) for k, v, _ in result["settings"])
  assert settings["batch / epochs"] == "32 / 1" and "random init" in settings["skipthoughts"]


def test_flags_mark_small_columns_and_say_so(done):
  _, result, _ = done
  columns = report.columns_of(result["cells"])
  counts = report.counts_of(result["cells"], columns)
  flags = report.Flags(counts, 10 ** 6)
  assert flags.small == [c for c in columns if c != "AA"]
  assert flags.mark("OA", "50.00 (1.00)") == "50.00 (1.00) " + report.FLAG
  assert "fewer than 1000000 test questions" in flags.note()
  assert report.Flags(counts, 0).small == [] and "at least 0" in report.Flags(counts, 0).note()
  # A study evaluated on val said "test questions" and "test accuracy" of its val split.
  val = report.Flags(counts, 10 ** 6, "val")
  assert "fewer than 1000000 val questions" in val.note() and "test" not in val.note()
  assert val.n_row(columns, 1)[0] == "N (val questions)"
  caption = report.table2(report.table2_rows(result), columns, val).caption
  assert caption.startswith("Table 2 layout: val accuracy (%) of the reference models")
  assert "fewer than 40 val questions are marked" in report.thresholds_text(
      {**result, "split": "val", "min_questions": 40})


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
  assert sum("done before, skipped" in l for l in lines) == 6  # + MUTAN, the shortcuts pair
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


def test_copied_study_resumes_on_its_own_files_beside_the_original(done, tmp_path, caplog):
  """A copy refused its runs ("another config": their cache paths named the original's) while
  the original stayed in place. A --config.data.cache_dir was ignored in silence (every run of a
  study uses DIR/cache): it is a WARNING, and report.md lists the WARNINGs of every invocation."""
  from test_train_support import warnings_of_rsvqa_jax  # pylint: disable=g-import-not-at-top
  workdir, _, _ = done
  copy = str(tmp_path / "copy")
  shutil.copytree(workdir, copy)
  acc = os.path.join(copy, "runs", RUNS[1], "seed0", "eval", "test", "accuracy.json")
  os.remove(acc)
  before = {w["message"]: w["count"] for w in done[1]["warnings"]}  # the original's, copied
  c = micro_config()
  config_lib.apply_overrides(c, [f"data.cache_dir={tmp_path / 'shared'}"])
  with warnings_of_rsvqa_jax(caplog):
    result = study.run_study(c, copy, log=lambda _: None)
  assert result["trained_this_call"] == 0 and os.path.exists(acc)
  run = os.path.join(copy, "runs", RUNS[0], "seed0")
  assert checkpointing.read_config(run).data.cache_dir.startswith(copy)
  said = (f"config data.cache_dir={tmp_path / 'shared'} is not read by a study: its caches live "
          f"in {copy}/cache")
  messages = [r.getMessage() for r in caplog.records]
  assert said in messages
  assert {w["message"]: w["count"] for w in result["warnings"]} == {
      m: before.get(m, 0) + messages.count(m) for m in {*before, *messages}}  # each counted
  result = study.run_study(micro_config(), copy, log=lambda _: None)  # kept across invocations
  assert {w["message"]: w["count"] for w in result["warnings"]}[said] == 1
  with open(os.path.join(copy, "report.md"), encoding="utf-8") as f:
    report = f.read()
  listed = report.split("## Warnings\n", 1)[1].split("## ", 1)[0]
  assert f"{said}\n" in listed and "over every invocation" in listed
  with open(os.path.join(workdir, "report.md"), encoding="utf-8") as f:
    assert "## Warnings" in f.read()


def _run(oa, aa, a, b, adv=None, val=0.5):
  out = {"accuracy": {"oa": oa, "aa": aa, "per_type": {"comp": a, "rural_urban": b}, "n": 100,
                      "per_type_n": {"comp": 90, "rural_urban": 10}},
         "adversarial": {}, "val_oa": val}
  if adv:
    out["adversarial"]["random"] = {"per_repeat": {
        "oa": adv, "aa": adv, "per_type": {"comp": adv, "rural_urban": adv}}}
  return out


def test_report_numbers_by_hand():
  cell = {"label": "LM", "weights": "frozen",
          "reference": [_run(0.8, 0.7, 0.9, 0.5, [0.5, 0.7]), _run(0.6, 0.5, 0.7, 0.3, [0.4, 0.6])],
          "blind": [_run(0.5, 0.5, 0.6, 0.4), _run(0.5, 0.5, 0.6, 0.4)]}
  columns = report.columns_of([cell])
  assert columns == ["comp", "rural_urban", "AA", "OA"]
  rows = dict(report.setups(cell, columns, ["random"]))
  ref = rows["Reference model"]
  assert ref["OA"] == pytest.approx((0.7, 0.1))
  adv = rows["Adversarial (random image)"]
  assert adv["OA"] == pytest.approx((0.55, np.std([0.5, 0.7, 0.4, 0.6])))  # seeds x repeats
  diff = report.difference(ref, rows["Visual blind"], columns)
  assert diff["OA"] == pytest.approx(20.0) and diff["comp"] == pytest.approx(20.0)
  # equal means in float noise are no win and no drop, and print 0.00
  noise = report.difference({"OA": (0.575, 0.0)}, {"OA": (sum([0.575, 0.55, 0.6]) / 3, 0.0)},
                            ["OA"])
  assert noise == {"OA": 0.0} and report._difference_row(noise, ["OA"])[-1] == "0.00"
  flags = report.Flags(report.counts_of([cell], columns), 40)
  md = tables.to_markdown(report.table6([cell], columns, ["random"], flags))
  assert "|  |  | Difference | 20.00 | 0.00 | 10.00 | 20.00 |" in md
  assert ("reference and visual-blind rows mean (std) over 2 seeds, adversarial rows mean (std) "
          "over 2 seeds x 2 substitutions") in md
  three = {**cell, "reference": [_run(0.8, 0.7, 0.9, 0.5, [0.5, 0.7, 0.6])]}
  assert report.draws([cell, three], "random") == "2-3"  # runs that drew other counts
  assert "| LM | frozen | Reference model | 80.00 (10.00) | 40.00 (10.00) † |" in md
  assert "| N (test questions) |  |  | 90 | 10 |  | 100 |" in md
  assert report.pct(math.nan) == "n/a"
  assert all(math.isnan(v) for v in report.mean_std([]))


def test_report_shows_a_type_the_test_split_lacks_as_n_0_and_n_a_and_says_so():
  runs = [_run(0.8, 0.7, 0.9, 0.5, [0.5]), _run(0.6, 0.6, 0.7, 0.5)]
  for run in runs:
    run["accuracy"]["types_absent"] = ["presence"]
  cell = {"label": "LM", "weights": "frozen", "reference": runs[:1], "blind": runs[1:]}
  columns = report.columns_of([cell])
  assert columns == ["comp", "presence", "rural_urban", "AA", "OA"]
  flags = report.Flags(report.counts_of([cell], columns), 40)
  assert flags.absent == ["presence"] and flags.small == ["rural_urban"]
  md = tables.to_markdown(report.table2(report.table2_rows(_study([cell])), columns, flags))
  assert "| N (test questions) |  |  | 90 | 0 | 10 |  | 100 |" in md
  # One seed: the value alone (a std of 0.00 would read as agreement between seeds).
  assert "| LM | frozen | e-mult | 90.00 | n/a | 50.00 † | 70.00 |" in md
  assert "reference models, one seed's value (no std)" in md
  assert flags.note().endswith("No Presence question among the test questions: such a column "
                               "reads n/a, and AA averages the other types.")
  quiet = report.Flags(report.counts_of([cell], columns), 0)
  assert quiet.note().startswith("Every other column has at least 0 test questions")
  t6 = tables.to_markdown(report.table6([cell], columns, ["random"], flags))
  assert "| Difference | 40.00 | n/a | 0.00 |" in t6
  assert ("rows one seed's value (no std), adversarial rows one seed's single substitution (no "
          "std);") in t6
  t3, _ = report.table3(_study([cell]), columns, flags)
  assert "random substitution, one seed's single draw (no std);" in t3.caption
  twin = report.balanced_table({"cells": [cell], "analysis": {"rows": {}}}, columns, flags)
  assert twin.caption.startswith("Balanced twin: test accuracy (%), one seed's value (no std),")
  assert [r[0] for r in t3.rows] == ["All", "Comparison", "Presence", "Rural/urban", "Average",
                                     "Overall"]


def _study(cells, prior=0.6, balanced=None):
  return {"cells": cells, "adversarial": ["random"], "adv_pool": "dataset", "repeats": 2,
          "split": "test", "min_questions": 40,
          "reading": {"close": 2.0, "margin": 5.0, "guess": 3.0},
          "analysis": {"rows": {"Overall": {"prior_acc": prior, "uni_acc": 0.5, "n": 100}},
                       "fit_split": "train"},
          "balanced": balanced, "timings": {"train/a": 60.0}}


def test_reading_says_when_blind_beats_the_reference_and_when_aa_and_oa_disagree():
  # Reference wins by OA (+5) but loses by AA: the blind model is 30 points up on Rural/urban.
  cell = {"label": "LM", "weights": "frozen",
          "reference": [_run(0.75, 0.6, 0.8, 0.4, [0.6])], "blind": [_run(0.70, 0.7, 0.7, 0.7)]}
  study = _study([cell], prior=0.72)
  columns = report.columns_of([cell])
  flags = report.Flags(report.counts_of([cell], columns), 40)
  text = report.reading(study, columns, flags)
  assert "The blind model beats the reference on Rural/urban (LM frozen by 30.00 points)." in text
  assert "AA and OA disagree: by AA" in text and "win in 0 of 1 settings" in text
  assert "within 2 points" not in text  # a blind model 30 points up is not "within 2 points"
  assert "reference models less than 5 points above it" in text and "LM frozen (+3.00)" in text
  assert "Rural/urban (N = 10)" in text
  assert "close = 2 points" in report.thresholds_text(study)


def test_reading_close_types_and_prior_margin():
  cell = {"label": "LM", "weights": "finetuned",
          "reference": [_run(0.9, 0.85, 0.91, 0.8, [0.7])], "blind": [_run(0.8, 0.75, 0.9, 0.6)]}
  study = _study([cell], prior=0.6)
  columns = report.columns_of([cell])
  text = report.reading(study, columns, report.Flags(report.counts_of([cell], columns), 5))
  assert ("comes within 2 points of the reference (a strong question/answer bias) on Comparison "
          "(LM finetuned: 1.00 points below)") in text
  assert "every reference model beats it by at least 5 points (30.00)" in text
  assert "AA agrees" in text and "beat their visual-blind twins in every setting" in text
  # Both at 0 on a type: no evidence of a bias (it read "a strong question/answer bias").
  both_fail = {"label": "LM", "weights": "finetuned", "reference": [_run(0.9, 0.4, 0.0, 0.8, [0.7])],
               "blind": [_run(0.8, 0.3, 0.0, 0.6)]}
  text = report.reading(_study([both_fail], prior=0.6), columns,
                        report.Flags(report.counts_of([both_fail], columns), 5))
  assert "Comparison (LM finetuned" not in text


def test_summary_and_reading_of_a_study_where_the_image_changes_nothing():
  """The words for no win and no drop: they read "(by 0.00 points OA)" and "a drop in 0 of 1
  settings: there the models do read the image"."""
  cell = {"label": "LM", "weights": "finetuned",
          "reference": [_run(0.6, 0.6, 0.6, 0.6, [0.6])], "blind": [_run(0.6, 0.6, 0.6, 0.6)]}
  study, columns = _study([cell]), report.columns_of([cell])
  assert " ".join(report.summary(study, columns).split()).startswith(  # wrapped at 100
      "0 of 1 reference models beat their visual-blind twins (reference minus visual-blind: "
      "0.00 points OA); 0 of 1 beat answering the most common answer per question type (60.00% "
      "OA; reference minus it: 0.00 points). Swapping the image for a random one lowers the OA "
      "of 0 of 1 reference models (reference minus swapped: 0.00 points).")
  # They read "... and answering ... by 0.00 points" and ", and loses 0.00 points OA when its
  # image is swapped" (of "0 of 1 reference models").
  gains = {"label": "LM", "weights": "finetuned",
           "reference": [_run(0.9, 0.85, 0.91, 0.8, [0.95])], "blind": [_run(0.8, 0.75, 0.9, 0.6)]}
  text = " ".join(report.summary(_study([gains]), report.columns_of([gains])).split())
  assert "swapped" not in text.split(". ")[0]  # it read "and loses -5.00 points OA"
  assert ("Swapping the image for a random one lowers the OA of 0 of 1 reference models "
          "(reference minus swapped: -5.00 points).") in text
  # It counted the units as stages ("Its 52 stages" above a table of 7).
  assert text.endswith("Its 1 stage recorded 1.0 min of work over 1 unit (report.md, Wall "
                       "time).")
  three = {**_study([gains]), "timings": {"train/a": 30.0, "train/b": 30.0, "data/main": 60.0}}
  assert " ".join(report.summary(three, report.columns_of([gains])).split()).endswith(
      "Its 2 stages recorded 2.0 min of work over 3 units (report.md, Wall time).")
  text = report.reading(study, columns, report.Flags(report.counts_of([cell], columns), 5))
  assert "a drop in none of the 1 settings: nothing shows that the models read the image" in text


def test_summary_says_the_prior_is_beaten_in_a_sentence_of_its_own_when_a_twin_wins():
  """With a blind twin ahead but the prior beaten it read "0 of 1 reference models beat their
  visual-blind twins (...) and answering the most common answer ... by 20.00 points": as if 0
  beat the prior too."""
  cell = {"label": "LM", "weights": "finetuned",
          "reference": [_run(0.7, 0.7, 0.7, 0.7, [0.6])], "blind": [_run(0.72, 0.72, 0.72, 0.72)]}
  text = " ".join(report.summary(_study([cell], prior=0.5), report.columns_of([cell])).split())
  assert text.startswith(
      "0 of 1 reference models beat their visual-blind twins (reference minus visual-blind: "
      "-2.00 points OA). Every reference model beats answering the most common answer per "
      "question type (50.00% OA) by 20.00 points. Swapping the image for a random one lowers "
      "the OA of 1 of 1 reference models (reference minus swapped: 10.00 points).")


def test_summary_goes_into_the_readme_between_its_markers(tmp_path):
  cell = {"label": "LM", "weights": "finetuned",
          "reference": [_run(0.9, 0.85, 0.91, 0.8, [0.7])], "blind": [_run(0.8, 0.75, 0.9, 0.6)]}
  text = report.summary(_study([cell]), report.columns_of([cell]))
  assert text.startswith("Every reference model beats its visual-blind twin (by 10.00 points OA)")
  assert max(map(len, text.splitlines())) <= 100
  (tmp_path / "s").mkdir()
  (tmp_path / "s" / "summary.md").write_text(text + "\n")
  page = tmp_path / "page.md"
  page.write_text(f"intro\n{report.DOCS_BEGIN}\nold figures\n{report.DOCS_END}\nrest\n")
  assert report.main([str(tmp_path / "s"), "--readme", str(page)]) == 0  # the old spelling
  assert page.read_text() == f"intro\n{report.DOCS_BEGIN}\n{text}\n{report.DOCS_END}\nrest\n"
  page.write_text("no markers")
  assert report.main([str(tmp_path / "s"), "--docs", str(page)]) == 2


def test_the_docs_quote_a_summary_block():
  text = pathlib.Path(ROOT, "docs", "audits", "language_bias.md").read_text(encoding="utf-8")
  assert report.DOCS_BEGIN in text and report.DOCS_END in text


def test_paper_study_refuses_without_real_data_and_weights(tmp_path, monkeypatch):
  c = config_lib.load(os.path.join(ROOT, "configs", "study_paper.py"))
  assert (c.train.batch_size, c.train.num_epochs, c.optim.lr) == (70, 50, 1e-5)
  assert (c.model.hidden_dim, c.model.classifier_dim, c.model.dropout) == (1200, 256, 0.5)
  assert (c.study.lm.skipthoughts.text_lr, c.study.lm.distilbert.text_lr) == (1e-4, 1e-6)
  assert c.image.arch == "resnet152" and "baseline" in c.study.table2_rows
  with pytest.raises(RSVQAError) as e:
    study.Study(c, str(tmp_path / "w"))
  message = str(e.value)
  assert "\n" not in message and not (tmp_path / "w").exists()  # refused before creating anything
  for flag in ("--config.data.root=", "--config.image.checkpoint=",
               "--config.study.lm.skipthoughts.checkpoint=",
               "--config.study.lm.distilbert.checkpoint="):
    assert flag in message, flag
  # Each option pastes as one word: it read "=/path/to/resnet152 weights".
  assert "--config.image.checkpoint=/path/to/resnet152.pth " in message
  for name in ("data", "resnet152.pth", "skipthoughts", "distilbert"):
    (tmp_path / name).mkdir()
  config_lib.apply_overrides(c, [
      f"data.root={tmp_path / 'data'}", f"image.checkpoint={tmp_path / 'resnet152.pth'}",
      f"study.lm.skipthoughts.checkpoint={tmp_path / 'skipthoughts'}",
      f"study.lm.distilbert.checkpoint={tmp_path / 'distilbert'}"])
  s = study.Study(c, str(tmp_path / "w"))  # everything given: it would start
  settings = dict((k, v) for k, v, _ in s.settings(str(tmp_path / "data")))
  assert settings["batch / epochs"] == "70 / 50" and settings["optimiser"] == "adam, lr 1e-05"
  # Its first stage, the image features, stopped on "AttributeError: 'word_dim'": it asked for
  # the first language model's random-init sizes, which an entry naming its files lacks.
  from rsvqa_jax.study import preparation  # pylint: disable=g-import-not-at-top
  asked = []
  monkeypatch.setattr(preparation.prepare, "image_encoder", lambda image, ds, log: False)
  monkeypatch.setattr(preparation.inputs, "image_features",
                      lambda cfg, *args: asked.append(cfg) or types.SimpleNamespace(
                          features=np.zeros((3, 2048), np.float32)))
  s.features(None, str(tmp_path / "data"), "lr")
  assert asked[0].image.checkpoint == str(tmp_path / "resnet152.pth")
  config_lib.apply_overrides(c, ["image.checkpoint=random"])
  with pytest.raises(RSVQAError, match="image.checkpoint"):
    study.Study(c, str(tmp_path / "w"))


def test_run_config_frozen_epochs_fusion_and_row_overrides(tmp_path):
  c = micro_config()
  config_lib.apply_overrides(c, ["study.frozen_epochs=7", "train.num_epochs=2"])
  s = study.Study(c, str(tmp_path / "w"))
  frozen = s.run_config("skipthoughts", "frozen", "reference", 0, "/d", "lr", "")
  tuned = s.run_config("skipthoughts", "finetuned", "blind", 1, "/d", "lr", "", "mutan",
                       ("model.head=original", "text.max_length=20"))
  assert (frozen.train.num_epochs, frozen.optim.text_lr, frozen.model.fusion) == (7, 0.0, "mult")
  assert (tuned.train.num_epochs, tuned.model.fusion, tuned.model.blind) == (2, "mutan", True)
  assert (tuned.model.head, tuned.text.max_length, tuned.seed) == ("original", 20, 1)
  with pytest.raises(RSVQAError, match="table2_rows"):
    config_lib.apply_overrides(c, ["study.table2_rows=('skipthoughts,frozen,gru',)"])
    study.Study(c, str(tmp_path / "w"))
  # The row as a newcomer types it, split at its commas: the message shows the form that works.
  config_lib.apply_overrides(c, ["study.table2_rows=skipthoughts,frozen,mutan"])
  with pytest.raises(RSVQAError, match=re.escape(
      "'skipthoughts' is not 'baseline' or LM,frozen|finetuned,mult|concat|mutan (a list "
      "override splits at commas: give each row as a quoted string, --config.study.table2_rows="
      "'(\"skipthoughts,frozen,mutan\",)')")):
    study.Study(c, str(tmp_path / "w"))
  config_lib.apply_overrides(c, ['study.table2_rows=("skipthoughts,frozen,mutan",)'])
  study.Study(c, str(tmp_path / "w"))


def test_random_skipthoughts_keeps_a_questions_first_words(tmp_path):
  """Frozen, the final state must still tell "How many roads / forests are there in the image ?"
  apart: far more than at the model's own init (small weights) or with its gates shut (bias 0)."""
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  from flax import nnx  # pylint: disable=g-import-not-at-top
  from rsvqa_jax.models import skipthoughts, skipthoughts_params  # pylint: disable=g-import-not-at-top
  words = ["how", "many", "roads", "forests", "are", "there", "in", "the", "image", "?"]
  vocab = ["<pad>", "<unk>"] + words
  ids = {w: i for i, w in enumerate(vocab)}
  a = [ids[w] for w in "how many roads are there in the image ?".split()]
  b = [ids[w] for w in "how many forests are there in the image ?".split()]
  tokens, mask = jnp.asarray([a, b]), jnp.ones((2, len(a)), bool)

  def gap(model):
    """(distance of the two questions' vectors, the same relative to their norm)."""
    v = np.asarray(model(tokens, mask))
    return np.linalg.norm(v[0] - v[1]), np.linalg.norm(v[0] - v[1]) / np.linalg.norm(v[0])

  def folder(bias):
    out = study.random_skipthoughts(str(tmp_path / f"st{bias}"), words, word_dim=32,
                                    hidden_dim=64, update_bias=bias)
    return skipthoughts_params.load_skipthoughts(out, vocab)

  gated, shut = gap(folder(2.0)), gap(folder(0.0))
  plain = gap(skipthoughts.SkipThoughts(len(vocab), word_dim=32, hidden_dim=64, rngs=nnx.Rngs(0)))
  assert gated[0] > 5 * plain[0] and gated[1] > 2.5 * shut[1]
  arrays = skipthoughts_params.read_uni_skip(str(tmp_path / "st2.0" / skipthoughts_params.UNI_SKIP))
  assert np.all(arrays["b"][64:] == 2.0) and np.all(arrays["b"][:64] == 0.0)  # update gate only
  path = str(tmp_path / "st2.0")
  assert study.random_skipthoughts(path, words, word_dim=32, hidden_dim=64) == path  # kept


def test_reading_compares_which_settings_win_by_aa_and_by_oa():
  """One win each by AA and by OA, in different settings: that is a disagreement too."""
  a = {"label": "A", "weights": "frozen", "reference": [_run(0.75, 0.6, 0.8, 0.4, [0.6])],
       "blind": [_run(0.70, 0.7, 0.7, 0.7)]}  # wins by OA, loses by AA
  b = {"label": "B", "weights": "frozen", "reference": [_run(0.70, 0.8, 0.7, 0.9, [0.6])],
       "blind": [_run(0.75, 0.7, 0.8, 0.6)]}  # loses by OA, wins by AA
  columns = report.columns_of([a, b])
  text = report.reading(_study([a, b], prior=0.5), columns,
                        report.Flags(report.counts_of([a, b], columns), 0))
  assert "AA and OA disagree" in text and "not in: A frozen" in text


def test_a_synthetic_studys_splits_are_those_of_study_variant():
  """An HR study's test_phili was refused with the LR splits data.name left at its default."""
  c = micro_config()
  config_lib.apply_overrides(c, ["study.variant=hr", "study.split=test_phili"])
  study_checks._check_split(c.study, c.data)
  c.study.synthetic, c.data.name = False, "lr"  # a real dataset's layout is data.name's
  with pytest.raises(RSVQAError, match=r"the lr layout \(data.name\) has the splits"):
    study_checks._check_split(c.study, c.data)


@pytest.mark.parametrize("override,message", [
    ("study.fusion=zz", "config study.fusion='zz': choose one of mult, concat, mutan"),
    ("study.adversarial=('random', 'zzz')", "'zzz' is not one of random, shuffle"),
    ("study.seeds=(0, 0)", r"config study.seeds=\(0, 0\): 0 is given twice, and would be "
     "counted twice in the report"),
    # Each was accepted, and the report listed the one setting twice ("0 of 2 settings").
    ("study.language_models=('skipthoughts', 'skipthoughts')",
     r"config study.language_models=\('skipthoughts', 'skipthoughts'\): 'skipthoughts' is given "
     "twice"),
    ("study.lm_weights=('frozen', 'frozen')", r"config study.lm_weights=.*'frozen' is given twice"),
    ("study.adversarial=('random', 'random')", r"config study.adversarial=.*'random' is given"),
    ("study.split=train", r"config study.split='train': the models train on it"),
    ("study.split=nope", r"config study.split='nope': the lr layout \(study.variant\) has the "
     "splits train, val, test$"),
    # a synthetic study's layout is study.variant's, whatever data.name says
    ("study.split=test_phili;data.name=hr", r"config study.split='test_phili': the lr layout "
     r"\(study.variant\) has the splits"),
    ("study.repeats=0", "config study.repeats=0: must be a whole number from 1 to 1000"),
    ("study.min_questions=-5", "config study.min_questions=-5: must be a number >= 0"),
    ("study.reading.margin=-1.0", "config study.reading.margin=-1.0: must be a number >= 0"),
    ("study.variant=foo", "config study.variant='foo': choose one of lr, hr"),
    ("study.balanced.lm_weights=x", "config study.balanced.lm_weights='x': choose one of frozen"),
    ("study.lm.skipthoughts.text_lr=-1", r"config study.lm.skipthoughts.text_lr=-1.0: must be a "
     "finite number >= 0"),
    ("study.lm.skipthoughts.word_dim=-5", r"config study.lm.skipthoughts \(frozen runs\): config "
     "text.word_dim=-5: must be positive"),
    ("study.table2_rows=('baseline',);study.baseline.overrides=('foo',)",
     r"config study.baseline.overrides: 'foo' is not a usable KEY=VALUE setting of its runs "
     r"\(--config.foo: give a value"),
    ("study.table2_rows=('baseline',);study.baseline.overrides=('model.dropout=2',)",
     r"'model.dropout=2' is not a usable KEY=VALUE setting of its runs \(config model.dropout="
     r"2.0: must be a number in \[0, 1\)\)"),
])
def test_protocol_settings_are_checked_before_anything_runs(tmp_path, override, message):
  """Each was refused (or not at all) only by the stage using it, after the runs before it (and
  after the folder recorded its study section, which then refused the corrected rerun)."""
  c = micro_config()
  config_lib.apply_overrides(c, override.split(";"))
  with pytest.raises(RSVQAError, match=message):
    study.Study(c, str(tmp_path / "s"))
  assert not os.path.exists(tmp_path / "s")


@pytest.mark.parametrize("encoder,sizes,message", [
    ("distilbert", dict(dim=10, layers=1, heads=3, hidden_dim=8),
     "config study.lm.mini: dim=10 is not a multiple of heads=3"),
    ("distilbert", dict(dim=8, layers=0, heads=2, hidden_dim=8),
     r"config study.lm.mini.layers=0: must be a positive integer \(the random-init encoder's"),
    ("bert", {}, "config study.lm.mini.checkpoint is empty: random init is offered for "
     "skipthoughts and distilbert only"),
    ("skipthoughts", {}, "config study.lm.mini has no word_dim: a random-init Skip-thoughts")])
def test_a_random_init_language_model_is_checked_before_anything_runs(tmp_path, encoder, sizes,
                                                                       message):
  c = micro_config()
  c.study.lm.mini = config_lib.lm_entry(encoder, "mini", 0.1, **sizes)
  c.study.language_models = ("mini",)
  c.study.table2_rows = ()
  with pytest.raises(RSVQAError, match=message):
    study.Study(c, str(tmp_path / "s"))
  assert not os.path.exists(tmp_path / "s")


def test_a_study_folder_another_study_works_in_is_refused(tmp_path):
  """Two studies started together on one folder regenerated its dataset under each other, and
  the second, refused only at its first run, left a report of both datasets."""
  folder = str(tmp_path / "s")
  os.makedirs(folder)
  with held_by_another_process(folder, "study") as pid:
    with pytest.raises(RSVQAError, match=rf"^{folder}: in use by study PID {pid} on .* since "
                       r".*; wait for it to end$"):
      study.run_study(micro_config(), folder)
    assert os.listdir(folder) == [storage.LOCK]  # nothing generated


def test_a_training_workdir_or_a_dataset_is_refused_as_the_study_folder(tmp_path):
  """The study's report, cache and runs would land among their files."""
  c = micro_config()
  run = tmp_path / "run"
  run.mkdir()
  (run / "config.json").write_text("{}")
  with pytest.raises(RSVQAError, match=f"--workdir {run} holds a training run \\(config.json\\); "
                     "give the study a folder of its own"):
    study.Study(c, str(run))
  assert sorted(os.listdir(run)) == ["config.json"]
  data = tmp_path / "data"
  synthetic.generate(str(data), variant="lr", images=4, seed=0)
  with pytest.raises(RSVQAError, match=f"--workdir {data} holds a dataset"):
    study.Study(c, str(data))
  runs = tmp_path / "runs"  # a folder of workdirs, or a study's runs/: not a study's folder
  (runs / "a" / "seed0").mkdir(parents=True)
  (runs / "a" / "seed0" / "config.json").write_text("{}")
  with pytest.raises(RSVQAError, match=f"--workdir {runs} holds training runs "
                     rf"\({runs / 'a' / 'seed0'}\)"):
    study.Study(c, str(runs))


def test_an_evaluation_is_reused_only_with_the_settings_the_study_reports():
  s = micro_config().study
  wanted = reuse.adversarial_settings(s, "random")
  recorded = {"kind": "random", "split": "test", "checkpoint": "best", "repeats": 2,
              "pool": "dataset", "seed": 0, "oa": 0.5}
  assert reuse.stale(recorded, wanted) == ""
  assert reuse.stale(None, wanted) == reuse.MISSING
  assert reuse.stale({**recorded, "repeats": 10}, wanted) == "repeats 10 recorded, 2 now"
  assert reuse.stale({**recorded, "pool": "split"}, wanted) == "pool split recorded, dataset now"
  assert reuse.stale({**recorded, "seed": 7}, wanted) == "seed 7 recorded, 0 now"
  assert reuse.adversarial_settings(s, "white")["pool"] is None  # only random draws from a pool
  # every white draw answers alike: one is drawn, and a file of any count stands for it
  assert (reuse.draws(s, "white"), reuse.draws(s, "random")) == (1, 2)
  white = {**recorded, "kind": "white", "pool": None, "repeats": 10}
  assert reuse.stale(white, reuse.adversarial_settings(s, "white")) == ""
  clean = {"split": "test", "checkpoint": "last", "oa": 0.9}  # `evaluate --checkpoint last`
  assert reuse.stale(clean, reuse.accuracy_settings("test")) == "checkpoint last recorded, best now"


def _copied(done, tmp_path):
  """(a copy of the finished study, its first run's eval folder, accuracy.json and random
  adversarial file there, and that accuracy as read)."""
  copy = str(tmp_path / "copy")
  shutil.copytree(done[0], copy)
  run = os.path.join(copy, "runs", RUNS[0], "seed0", "eval", "test")
  acc_path = os.path.join(run, "accuracy.json")
  return (copy, run, acc_path, os.path.join(run, "adversarial_random.json"),
          storage.read_json(acc_path))


def test_rerun_evaluates_again_what_other_settings_or_checkpoints_wrote(done, tmp_path):
  """A changed study.repeats / adv_seed, or `evaluate --checkpoint last` over a run's accuracy
  file, is computed again: the report describes what was computed, not what is on disk."""
  copy, run, acc_path, adv_path, best = _copied(done, tmp_path)
  storage.write_json(acc_path, {**best, "checkpoint": "last", "oa": 0.0})
  shortcut_path = os.path.join(copy, "shortcuts", "runs", "skipthoughts_finetuned_reference",
                               "seed0", "eval", "shortcuts", "shortcuts.json")
  storage.write_json(shortcut_path, {**storage.read_json(shortcut_path), "checkpoint": "last"})
  c = micro_config()
  config_lib.apply_overrides(c, ["study.repeats=3", "study.adv_seed=7",
                                 "study.adversarial=('random', 'white')"])
  lines = []
  result = study.run_study(c, copy, log=lines.append)
  assert result["trained_this_call"] == 0
  assert storage.read_json(acc_path)["checkpoint"] == "best"
  assert result["cells"][0]["reference"][0]["accuracy"]["oa"] == best["oa"]
  adv = storage.read_json(adv_path)
  assert (adv["repeats"], adv["seed"], adv["pool"]) == (3, 7, "dataset")
  assert any(f"{RUNS[0]}/seed0: evaluated again (checkpoint last recorded, best now" in l
             for l in lines)
  assert sum("evaluated again: repeats 2 recorded, 3 now" in l for l in lines) == 2  # + balanced
  white = storage.read_json(os.path.join(run, "adversarial_white.json"))
  assert white["repeats"] == 1 and any(f"{RUNS[0]}/seed0: adversarial white x1 (" in l
                                       for l in lines)
  with open(os.path.join(copy, "report.md"), encoding="utf-8") as f:
    text = f.read()
  assert ("random, white: K = 3 draws per question (white: 1, every draw alike; pool: dataset, "
          "seed 7)") in text
  assert ("reference and visual-blind rows one seed's value (no std), adversarial rows mean (std) "
          "over 1 seed x 3 (white: 1) substitutions") in text
  assert ("Figure 5: the Table 6 numbers as bars. Reference and visual blind: one seed's value (no "
          "error bar); adversarial: error bar = one population std over the seed's 3 (white: 1) "
          "draws") in text
  assert storage.read_json(shortcut_path)["checkpoint"] == "best"


def test_a_changed_data_size_is_refused_naming_the_study_key_before_regenerating(done):
  workdir, _, _ = done
  manifest = synthetic.read_manifest(os.path.join(workdir, "data", "main"))
  c = micro_config()
  config_lib.apply_overrides(c, ["study.images=31"])
  with pytest.raises(RSVQAError, match=r"holds a study made with study.images=30 \(now 31\) "
                     r"\(study_config.json\); use another --workdir, or the same settings"):
    study.run_study(c, workdir, log=lambda _: None)
  assert synthetic.read_manifest(os.path.join(workdir, "data", "main")) == manifest  # kept
  assert storage.read_json(os.path.join(workdir, recorded.FILE))["images"] == 30
  section = config_lib.to_dict(micro_config().study)
  now = config_lib.to_dict(micro_config().study)
  now.update(repeats=5, seeds=[0, 1], adv_pool="split")  # evaluated or trained again: allowed
  now["lm"]["skipthoughts"]["label"] = "another label"
  now["lm"]["bert"] = {"encoder": "bert"}  # a language model added
  assert recorded.changed(section, now) == []
  now["lm"]["skipthoughts"]["word_dim"] = 16
  assert recorded.changed(section, now) == [("study.lm.skipthoughts.word_dim", 32, 16)]


def test_the_same_checkpoint_named_from_another_folder_is_the_same_study(tmp_path, monkeypatch):
  """A study run from w/ with ../models/st was refused when run again from its parent with
  models/st, the same files: the record kept the text as typed."""
  (tmp_path / "w").mkdir()
  c = micro_config()
  monkeypatch.chdir(tmp_path / "w")
  config_lib.apply_overrides(c, ["study.lm.skipthoughts.checkpoint=../models/st"])
  recorded.record(c.study, str(tmp_path))
  assert storage.read_json(str(tmp_path / recorded.FILE))["lm"]["skipthoughts"]["checkpoint"] == (
      str(tmp_path / "models" / "st"))
  monkeypatch.chdir(tmp_path)
  config_lib.apply_overrides(c, ["study.lm.skipthoughts.checkpoint=models/st"])
  recorded.check(c.study, str(tmp_path))  # the same folder: no refusal
  config_lib.apply_overrides(c, ["study.lm.skipthoughts.checkpoint=models/other"])
  with pytest.raises(RSVQAError, match="study.lm.skipthoughts.checkpoint="):
    recorded.check(c.study, str(tmp_path))


def test_a_split_of_one_image_is_refused_for_swaps_before_any_run():
  """It was refused only when the adversarial stage ran, after the grid had trained."""
  from rsvqa_jax.data import records  # pylint: disable=g-import-not-at-top
  from rsvqa_jax.study import checks  # pylint: disable=g-import-not-at-top
  s = micro_config().study
  one = records.Split.from_rows(s.split, [
      dict(question_id=q, image_id=7, qtype="comp", question="q", answer="yes", raw_answer="yes")
      for q in range(3)])
  ds = records.Dataset(name="lr", root="<memory>", splits={s.split: one})
  s.adversarial, s.adv_pool = ("random",), "dataset"
  checks.check_split(s, ds)  # the dataset pool holds other images
  s.adv_pool = "split"
  with pytest.raises(RSVQAError) as e:
    checks.check_split(s, ds)
  # The key that makes random read the split alone is named, and its other value as a fix.
  assert str(e.value) == (f"config study.adversarial=('random',): split {s.split} holds 1 "
                          "image(s), so random substitution has no other image to give from it "
                          "(study.adv_pool=split: set study.adv_pool=dataset, raise "
                          "study.images, or drop that kind)")
  s.adversarial = ("shuffle",)
  with pytest.raises(RSVQAError, match="so shuffle substitution"):
    checks.check_split(s, ds)
  s.adversarial = ("random", "shuffle")  # no pool helps shuffle: it is the one named
  with pytest.raises(RSVQAError) as e:
    checks.check_split(s, ds)
  assert str(e.value).endswith("so shuffle substitution has no other image to give (raise "
                               "study.images, or drop that kind)")


def test_shuffle_over_batches_of_one_image_is_refused_before_any_run():
  """It was refused by the first reference run's adversarial test, after pretraining and
  training, naming evaluate's --adversarial flag instead of the study's keys."""
  from rsvqa_jax.data import records  # pylint: disable=g-import-not-at-top
  from rsvqa_jax.study import checks  # pylint: disable=g-import-not-at-top
  s = micro_config().study
  rows = [dict(question_id=q, image_id=7 + q // 3, qtype="comp", question="q", answer="yes",
               raw_answer="yes") for q in range(6)]  # images 7, 7, 7, 8, 8, 8
  ds = records.Dataset(name="lr", root="<memory>",
                       splits={s.split: records.Split.from_rows(s.split, rows)})
  s.adversarial = ("shuffle",)
  with pytest.raises(RSVQAError) as e:  # batches [7, 7, 7] and [8, 8, 8]
    checks.check_split(s, ds, 3)
  assert str(e.value) == (
      "config study.adversarial=('shuffle',): shuffle permutes the images within each batch of "
      f"train.eval_batch_size=3 questions of split {s.split}, and every batch holds one image, so "
      "no question would get another (raise train.eval_batch_size, or set study.adversarial to "
      "random)")
  for size in (2, 4, 6):  # [7, 7] [7, 8] [8, 8]; [7, 7, 7, 8] [8, 8]; one batch of both
    checks.check_split(s, ds, size)
  s.adversarial = ("random",)  # random draws from the dataset: no batch matters
  checks.check_split(s, ds, 3)


def test_warnings_that_cannot_be_kept_are_said_once_and_still_counted(tmp_path, capsys):
  """A full disk or a read-only study folder made every WARNING print logging's own traceback
  ('--- Logging error ---'): one line now, once, and the counts still reach the report."""
  (tmp_path / "file").write_text("not a folder")
  warnings = journal.Warnings(str(tmp_path / "file" / "warnings.json"))
  warnings.keep(folder_made=True)
  with warnings.caught():
    for _ in range(3):
      logging.getLogger("rsvqa_jax.study").warning("a warning")
  err = capsys.readouterr().err
  assert err.count("not written") == 1 and "Traceback" not in err and "Logging error" not in err
  assert warnings.listed() == [{"message": "a warning", "count": 3}]


def test_a_study_without_a_warning_writes_no_warnings_file(tmp_path):
  """It wrote `{}`: the docs say the file is written once a first WARNING is logged."""
  path = tmp_path / "study" / "warnings.json"
  path.parent.mkdir()
  warnings = journal.Warnings(str(path))
  warnings.keep(folder_made=True)
  assert not path.exists()
  with warnings.caught():
    logging.getLogger("rsvqa_jax.study").warning("first")
  assert json.loads(path.read_text()) == {"first": 1}


def test_warnings_logged_before_the_study_folder_exists_are_kept_once_it_does(tmp_path, capsys):
  """A real-data study on a new --workdir makes its folder after reading the dataset: a WARNING
  of the reading made warnings.json unwritable for the whole run (and printed 'not written')."""
  path = tmp_path / "study" / "warnings.json"
  warnings = journal.Warnings(str(path))
  with warnings.caught():
    logging.getLogger("rsvqa_jax.data").warning("read early")
    assert not path.parent.exists()
    path.parent.mkdir()
    warnings.keep(folder_made=True)
    assert json.loads(path.read_text()) == {"read early": 1}
    logging.getLogger("rsvqa_jax.study").warning("later")
  assert "not written" not in capsys.readouterr().err
  assert json.loads(path.read_text()) == {"read early": 1, "later": 1}


@pytest.mark.parametrize("overrides,message", [
    ([], "config data.root=None: give the dataset folder"),
    (["data.root={tmp}/none"], "config data.root={tmp}/none: give the dataset folder"),
    (["data.root={tmp}/lr", "data.name=hr"],
     "{tmp}/lr: no USGS_split_train_questions.json (dataset hr); the folder holds dataset lr")])
def test_a_study_refused_for_its_data_leaves_its_folder_as_it_was(tmp_path, capsys, overrides,
                                                                  message):
  """study_config.json and cache/ were written first: the folder then recorded a study that
  never ran."""
  synthetic.generate(str(tmp_path / "lr"), variant="lr", images=4, seed=0)
  fresh, kept = tmp_path / "fresh", tmp_path / "kept"
  kept.mkdir()
  (kept / "notes.txt").write_text("mine")
  c = micro_config()
  config_lib.apply_overrides(c, ["study.synthetic=false"] +
                             [o.format(tmp=tmp_path) for o in overrides])
  for folder in (fresh, kept):
    before = listing(folder)
    with pytest.raises(RSVQAError) as refused:
      study.run_study(c, str(folder), log=lambda _: None)
    assert str(refused.value).startswith(message.format(tmp=tmp_path))
    assert listing(folder) == before
  capsys.readouterr()
  # From the command line too, as `rsvqa-jax study` runs it.
  argv = ["study", "--config", "configs/study_synthetic.py:quick", "--workdir", str(fresh),
          "--config.study.synthetic=false", f"--config.data.root={tmp_path / 'lr'}",
          "--config.data.name=hr"]
  assert cli.main(argv) == 2
  assert "no USGS_split_train_questions.json (dataset hr)" in capsys.readouterr().err
  assert not fresh.exists()


def test_a_generated_set_too_small_does_not_bind_the_folder(tmp_path):
  """Its refusal came after study_config.json recorded study.images, which then refused the
  corrected rerun ("holds a study made with study.images=4")."""
  c = micro_config()
  config_lib.apply_overrides(c, ["study.images=4", "study.questions_per_image=2"])
  with pytest.raises(RSVQAError, match=r"4 training questions from 4 generated images "
                     r"\(study.images\), fewer than train.batch_size=32"):
    study.run_study(c, str(tmp_path / "s"), log=lambda _: None)
  left = os.listdir(tmp_path / "s")  # the set stays: a resized rerun generates it again
  assert "data" in left and recorded.FILE not in left and "cache" not in left


def _study_args(*overrides, workdir="s"):
  import argparse  # pylint: disable=g-import-not-at-top
  from rsvqa_jax.commands import study as study_cmd  # pylint: disable=g-import-not-at-top
  parser = argparse.ArgumentParser()
  study_cmd.add_arguments(parser)
  return parser.parse_args(["--config", os.path.join(ROOT, "configs", "study_paper.py"),
                            "--workdir", workdir, *overrides])


def test_command_line_keys_win_over_the_baseline_rows_settings(tmp_path):
  """study.baseline.overrides' train.num_epochs=150 outlived --config.train.num_epochs=1, without
  a word: a study shortened from the command line still trained its baseline row 150 epochs."""
  from rsvqa_jax.commands import common  # pylint: disable=g-import-not-at-top
  from rsvqa_jax.study import runs  # pylint: disable=g-import-not-at-top

  def baseline_run(c):
    return runs.config_for(c, "cache", c.study.baseline.language_model, "frozen", "reference", 0,
                           "data", "lr", "st", overrides=c.study.baseline.overrides)

  short = common.load_config(_study_args("--config.train.num_epochs=1"))
  assert "train.num_epochs=150" not in short.study.baseline.overrides
  run = baseline_run(short)
  assert (run.train.num_epochs, run.text.max_length, run.model.head) == (1, 20, "original")
  assert baseline_run(common.load_config(_study_args())).train.num_epochs == 150  # the file's
  given = common.load_config(_study_args(
      "--config.train.num_epochs=1", "--config.study.baseline.overrides=('train.num_epochs=3',)"))
  assert baseline_run(given).train.num_epochs == 3  # the command line's own list, as given
  # Resumed with the same command line: the folder's record and the row's run config match.
  folder, workdir = str(tmp_path), str(tmp_path / "runs" / "baseline_reference" / "seed0")
  recorded.record(short.study, folder)
  checkpointing.check_or_record_config(workdir, run)
  again = common.load_config(_study_args("--config.train.num_epochs=1"))
  recorded.check(again.study, folder)
  assert checkpointing.check_or_record_config(workdir, baseline_run(again), record=False) is False
  with pytest.raises(RSVQAError, match=r"holds a study made with study.baseline.overrides="):
    recorded.check(common.load_config(_study_args()).study, folder)  # its row trained 1 epoch


def test_a_study_on_a_dataset_folder_makes_its_new_workdir(tmp_path, monkeypatch):
  """Its record was written before any folder was made: a study of a real dataset (nothing
  generated into the workdir first) failed on a new --workdir with 'study_config.json: no such
  file or directory'."""
  synthetic.generate(str(tmp_path / "lr"), variant="lr", images=30, seed=0)
  c = micro_config()
  config_lib.apply_overrides(c, ["study.synthetic=false", f"data.root={tmp_path / 'lr'}"])

  def stop(*args, **kwargs):
    raise RSVQAError("stopped after the record")
  monkeypatch.setattr(study.Study, "features", stop)
  workdir = tmp_path / "runs" / "new"
  with pytest.raises(RSVQAError, match="stopped after the record"):
    study.run_study(c, str(workdir), log=lambda _: None)
  assert recorded.check(c.study, str(workdir)) is None
  assert (workdir / recorded.FILE).is_file() and (workdir / "cache").is_dir()


def test_compilation_cache_entries_cut_by_a_kill_are_removed(tmp_path):
  """JAX writes an entry in place and never writes an existing one again: a kill mid-write left
  it cut for good, and every later compile of its function printed JAX's raw UserWarning."""
  from jax._src.compilation_cache import compress_executable  # pylint: disable=g-import-not-at-top
  from rsvqa_jax.study import preparation  # pylint: disable=g-import-not-at-top
  whole = compress_executable(bytes(range(256)) * 40)
  (tmp_path / "jit_step-aa-cache").write_bytes(whole)
  (tmp_path / "jit_step-aa-atime").write_bytes(b"1")
  (tmp_path / "jit_step-bb-cache").write_bytes(whole[:len(whole) // 2])
  (tmp_path / "jit_step-bb-atime").write_bytes(b"1")
  preparation._remove_cut_entries(str(tmp_path))  # pylint: disable=protected-access
  assert sorted(os.listdir(tmp_path)) == ["jit_step-aa-atime", "jit_step-aa-cache"]


def test_an_evaluation_the_run_outgrew_is_made_again(done, tmp_path):
  """An evaluation of a best step the run has since replaced (it trained on after `evaluate`)
  kept its old clean and adversarial scores in the report, where `tables` leaves it out."""
  copy, run, acc_path, adv_path, best = _copied(done, tmp_path)
  storage.write_json(acc_path, {**best, "step": 1, "oa": 0.0})
  storage.write_json(adv_path, {**storage.read_json(adv_path), "step": 1})
  lines = []
  result = study.run_study(micro_config(), copy, log=lines.append)
  assert result["trained_this_call"] == 0
  assert storage.read_json(acc_path)["step"] == best["step"]
  assert result["cells"][0]["reference"][0]["accuracy"]["oa"] == best["oa"]
  moved = f"step 1 scored, the best checkpoint is now step {best['step']}"
  assert any(f"{RUNS[0]}/seed0: evaluated again ({moved}" in l for l in lines), lines
  assert any(f"{RUNS[0]}/seed0: adversarial random x2 (" in l and moved in l for l in lines)
  assert storage.read_json(adv_path)["step"] == best["step"]


def test_an_evaluation_of_an_unfinished_run_is_not_reused(tmp_path):
  """A run stopped early (train.stop_after_steps) and evaluated by hand was attacked and averaged
  as it was by the next study call."""
  folder = tmp_path / "checkpoints"
  for step, epoch in ((5, 1), (10, 2)):
    (folder / str(step) / "data").mkdir(parents=True)
    (folder / str(step) / "data" / "metadata").write_text(
        json.dumps({"epoch": epoch, "loop": {"best_step": 5}}))
  recorded = {"split": "test", "checkpoint": "best", "step": 5}
  assert reuse.behind(recorded, str(tmp_path), 3) == "the run had trained 2 of 3 epochs"
  assert reuse.behind(recorded, str(tmp_path), 2) == ""
  assert reuse.behind({**recorded, "step": 10}, str(tmp_path), 2) == (
      "step 10 scored, the best checkpoint is now step 5")
