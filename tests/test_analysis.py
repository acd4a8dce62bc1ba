"""Dataset analysis, relative metrics, tables and Figure 7 on hand-built splits."""
import collections
import csv
import io
import math
import os
import pathlib

import pytest

from rsvqa_jax import cli
from rsvqa_jax.bias import analysis
from rsvqa_jax.bias import metrics
from rsvqa_jax.bias import plots
from rsvqa_jax.bias import predictions
from rsvqa_jax.bias import subsets
from rsvqa_jax.bias import tables
from rsvqa_jax.data import records
from rsvqa_jax.data import rsvqa_json
from rsvqa_jax.data import synthetic
from rsvqa_jax.errors import RSVQAError

ROAD = "Is there a road?"
MORE = "Are there more roads than buildings?"
COUNT = "How many roads are there?"
RU = "Is it a rural or an urban area"
B1 = "between 1 and 10"

TRAIN = [
    ("presence", ROAD, "yes"), ("presence", ROAD, "yes"), ("presence", ROAD, "no"),
    ("presence", "Is there a school?", "yes"),
    ("comp", MORE, "no"), ("comp", MORE, "yes"), ("comp", MORE, "no"), ("comp", MORE, "yes"),
    ("count", COUNT, "0"), ("count", COUNT, B1), ("count", COUNT, B1), ("count", COUNT, "more than 1000"),
    ("rural_urban", RU, "rural"),
]
TEST = [
    ("presence", ROAD, "yes"), ("presence", ROAD, "no"),
    ("presence", "Is there a forest?", "yes"), ("presence", "Is there a forest?", "no"),
    ("comp", MORE, "no"), ("comp", MORE, "no"), ("comp", MORE, "no"), ("comp", MORE, "yes"),
    ("count", COUNT, "0"), ("count", COUNT, B1), ("count", COUNT, "0"),
    ("rural_urban", RU, "rural"), ("rural_urban", RU, "rural"),
]

# TRAIN's comparison answers: 2 no, 2 yes. The prior takes "no", and says it broke a tie.
TIE = ("most common train answer tied (Comparison: 'no' over 'yes'; the alphabetically first is "
       "taken): Prior_Acc rests on that choice")


def make_split(name, triples, first_id=0):
  return records.Split.from_rows(name, [
      dict(question_id=first_id + i, image_id=i // 3, qtype=t, question=q, answer=a, raw_answer=a)
      for i, (t, q, a) in enumerate(triples)])


def aligned(split, answers):
  """predictions.Aligned from a list of answers (None = no prediction)."""
  preds = {int(q): a for q, a in zip(split.question_id, answers) if a is not None}
  return predictions.align(preds, {split.name: split}, "mem.csv")[split.name]


@pytest.fixture(name="result")
def fixture_result():
  train, test = make_split("train", TRAIN), make_split("test", TEST, first_id=100)
  # Model: presence 3/4 (one missing), comp 2/4, count 3/3, rural_urban 2/2.
  model = aligned(test, ["yes", "no", "yes", None, "no", "no", "yes", "no", "0", B1, "0", "rural", "rural"])
  # Adversarial: presence 2/4, comp 1/4, count 1/3, rural_urban 2/2.
  adv = aligned(test, ["yes", "yes", "yes", "yes", "no", "yes", "yes", "no", "0", "0", B1, "rural", "rural"])
  return analysis.analyze(train, test, templates=True, predictions=model, adversarial=adv)


def test_type_level_by_hand(result):
  rows = {r.label: r for r in result.type_rows()}
  assert [r.label for r in result.type_rows()] == [
      "All", "comp", "count", "presence", "rural_urban", "Average", "Overall", "Question-level, overall"]
  # All: training prior "yes" (5 of 13), 6 distinct training answers; 3 of 13 test answers are yes.
  assert (rows["All"].n, rows["All"].n_answers, rows["All"].prior) == (13, 6, "yes")
  assert rows["All"].prior_acc == pytest.approx(3 / 13)
  assert rows["All"].uni_acc == pytest.approx(1 / 6)
  # comp: tie no/yes in training -> "no" (lexicographic); 3 of 4 test answers are no.
  assert (rows["comp"].prior, rows["comp"].n_answers, rows["comp"].prior_acc) == ("no", 2, 0.75)
  assert (rows["count"].prior, rows["count"].n_answers) == (B1, 3)
  assert rows["count"].prior_acc == pytest.approx(1 / 3) and rows["count"].uni_acc == pytest.approx(1 / 3)
  assert (rows["presence"].prior, rows["presence"].prior_acc) == ("yes", 0.5)
  # Single-answer subset: |A| = 1, Uni_Acc = 100%.
  assert (rows["rural_urban"].n_answers, rows["rural_urban"].prior_acc, rows["rural_urban"].uni_acc) == (1, 1.0, 1.0)
  assert rows["Overall"].prior_acc == pytest.approx(8 / 13)
  assert rows["Overall"].uni_acc == pytest.approx(7 / 13)
  assert rows["Average"].prior_acc == pytest.approx((0.5 + 0.75 + 1 / 3 + 1) / 4)
  assert rows["Average"].uni_acc == pytest.approx((0.5 + 0.5 + 1 / 3 + 1) / 4)


def test_relative_metrics_by_hand(result):
  rows = {r.label: r for r in result.type_rows()}
  assert result.accuracy.missing == 1
  assert rows["presence"].acc == 0.75 and rows["presence"].io_prior == pytest.approx(0.5)
  assert rows["comp"].acc == 0.5 and rows["comp"].io_prior == pytest.approx(-1.0)  # negative kept
  assert rows["count"].io_prior == pytest.approx(1.0)
  assert rows["rural_urban"].acc == 1.0 and rows["rural_urban"].io_prior is None  # LB = 100%
  assert rows["comp"].adv_acc == 0.25 and rows["comp"].io_adtest == pytest.approx(1 / 3)
  assert rows["presence"].io_adtest == pytest.approx(0.5)
  assert rows["rural_urban"].io_adtest is None
  aa, mean_prior = (0.75 + 0.5 + 1 + 1) / 4, (0.5 + 0.75 + 1 / 3 + 1) / 4
  assert rows["Average"].acc == pytest.approx(aa)
  assert rows["Average"].io_prior == pytest.approx((aa - mean_prior) / (1 - mean_prior))
  assert rows["Overall"].acc == pytest.approx(10 / 13)
  assert rows["Overall"].io_prior == pytest.approx((10 / 13 - 8 / 13) / (1 - 8 / 13))
  adv_oa = 6 / 13
  assert rows["Overall"].io_adtest == pytest.approx((10 / 13 - adv_oa) / (1 - adv_oa))
  assert rows["All"].acc is None and rows["All"].io_prior is None


def test_unseen_subsets_use_the_type_prior(result):
  q = result.levels["question"]
  forest = next(r for r in q.subsets if r.key == ("presence", "Is there a forest?"))
  assert not forest.seen and forest.n_fit == 0
  assert (forest.prior, forest.n_answers, forest.prior_acc) == ("yes", 2, 0.5)
  assert (q.unseen_subsets, q.unseen_samples) == (1, 2)
  road = next(r for r in q.subsets if r.key == ("presence", ROAD))
  assert road.seen and road.n_fit == 3 and road.prior == "yes"
  obj = result.levels["object"]
  assert {r.key for r in obj.subsets if not r.seen} == {("presence", "forest")}
  assert obj.type_subsets["presence"] == 2
  assert result.unparsed == 0


def test_uni_acc_counts_the_type_answers_at_every_level():
  """The failing example: a subset seen in training with one answer ("school": yes, once)."""
  train = make_split("train", TRAIN)
  school = "Is there a school?"
  test = make_split("test", [("presence", school, "no"), ("presence", school, "no"),
                             ("presence", school, "yes"), ("presence", ROAD, "yes")], first_id=100)
  result = analysis.analyze(train, test, templates=True)
  for name in ("question", "pattern", "object", "object_attr"):
    level = result.levels[name]
    for row in level.subsets:  # presence answers in train: yes, no
      assert (row.n_answers, row.uni_acc) == (2, 0.5), (name, row.key)
    assert level.type_uni_acc["presence"] == level.uni_acc == 0.5
  obj = {r.key: r for r in result.levels["object"].subsets}
  school_row = obj[("presence", "school")]
  assert school_row.prior == "yes" and school_row.prior_acc == pytest.approx(1 / 3)
  assert school_row.uni_acc < 1.0 and result.levels["type"].uni_acc == 0.5
  assert metrics.fit_priors(subsets.keys(train, "object", subsets.parse_questions(train)),
                            train.answer)[("presence", "school")].n_answers == 1  # its own: 1


def test_adversarial_repeats_average_as_evaluate_does():
  """AdTest_Acc over K = 2 repeats: the mean of each repeat's accuracy (OA, AA and per type)."""
  train, test = make_split("train", TRAIN), make_split("test", TEST, first_id=100)
  answers = test.answer.tolist()
  wrong = {"yes": "no", "no": "yes", "0": B1, B1: "0", "rural": "urban"}
  # Repeat 0 all right; repeat 1 wrong on every comp and count question: 6 of 13, AA 2/4.
  flip = [wrong[a] if t in ("comp", "count") else a for t, a in zip(test.qtype.tolist(), answers)]
  preds = [{int(q): a for q, a in zip(test.question_id, row)} for row in (answers, flip)]
  adv = predictions.align(preds, {"test": test}, "mem.csv")["test"]
  clean = aligned(test, answers)
  result = analysis.analyze(train, test, predictions=clean, adversarial=adv)
  rows = {r.label: r for r in result.type_rows()}
  assert rows["comp"].adv_acc == rows["count"].adv_acc == 0.5  # (1 + 0) / 2
  assert rows["presence"].adv_acc == 1.0
  assert rows["Overall"].adv_acc == pytest.approx((1 + 6 / 13) / 2)
  assert rows["Average"].adv_acc == pytest.approx((1 + 0.5) / 2)  # repeat AAs 1 and 2/4
  assert result.adversarial.repeats == 2 and result.accuracy.repeats == 1
  table = metrics.accuracy_table(adv.correct(test.answer), test.qtype, result.types)
  assert (table["oa"], table["aa"]) == (rows["Overall"].adv_acc, rows["Average"].adv_acc)


def test_empty_type_and_type_unseen_in_train():
  train = make_split("train", TRAIN + [("area", "What is the area covered by roads?", "0m2")])
  test = make_split("test", TEST + [("scene", "What is the theme?", "yes")])
  result = analysis.analyze(train, test)
  rows = {r.label: r for r in result.type_rows()}
  assert rows["area"].n == 0 and math.isnan(rows["area"].prior_acc) and math.isnan(rows["area"].uni_acc)
  assert rows["area"].prior == "0m2"  # known from training, though no test sample
  # scene is absent from train: predicted by the all-level prior "yes", |A| = all answers (7).
  assert (rows["scene"].prior, rows["scene"].prior_acc, rows["scene"].n_answers) == ("yes", 1.0, 7)
  assert result.levels["type"].unseen_samples == 1
  with_samples = [rows[t].prior_acc for t in ("comp", "count", "presence", "rural_urban", "scene")]
  assert rows["Average"].prior_acc == pytest.approx(sum(with_samples) / 5)
  table = tables.type_table(result, "toy")
  area_row = next(r for r in table.rows if r[0] == "Area")
  assert [tables.cell(v) for v in area_row[4:6]] == ["n/a", "n/a"]
  assert "absent from train" in table.caption
  # the rows the paper only names are said (All, Average, Overall, and Question-level if shown)
  assert tables.ROWS_NOTE in table.caption
  assert (tables.QUESTION_LEVEL_NOTE in table.caption) == ("question" in result.levels)


def test_a_type_absent_from_train_is_noted_wherever_table_3_is_rendered(result):
  """Its "most common answer" is the overall prior: the analysis table and the study report's
  Table 3 say so with the same note (tables.analysis_note), naming the type."""
  from rsvqa_jax.bias import report  # pylint: disable=g-import-not-at-top
  from rsvqa_jax.study import dataset_analysis  # pylint: disable=g-import-not-at-top
  train = make_split("train", [r for r in TRAIN if r[0] != "presence"])
  evaluated = analysis.analyze(train, make_split("test", TEST, first_id=100))
  note = tables.analysis_note(evaluated)
  assert note == ("4 sample(s) of types absent from train (Presence) predicted by the overall "
                  f"prior; {TIE}")
  assert note in tables.type_table(evaluated, "toy").caption
  assert tables.analysis_note(result) == TIE  # every type and answer seen in train: the tie only
  per_type = {t: 0.5 for t in evaluated.types}
  run = {"accuracy": {"oa": 0.5, "aa": 0.5, "per_type": per_type, "n": 13}, "val_oa": 0.5,
         "adversarial": {}}
  study = {"cells": [{"label": "LM", "weights": "frozen", "reference": [run], "blind": [run]}],
           "split": "test", "adversarial": [], "repeats": 1,
           "analysis": {"fit_split": "train", **dataset_analysis.table3_inputs(evaluated)}}
  columns = report.columns_of(study["cells"])
  t3, _ = report.table3(study, columns, report.Flags(report.counts_of(study["cells"], columns), 0))
  assert t3.caption.endswith("; " + note)
  assert note in tables.to_markdown(t3)  # report.md and analysis/table3_test.md
  presence = next(r for r in t3.rows if r[0] == "Presence")
  assert presence[3] == evaluated.levels["all"].subsets[0].prior  # the overall prior, noted


def test_answers_outside_their_types_training_answers_are_noted():
  """A type whose training split holds one answer read Uni_Acc 100% above a Prior_Acc of 0 with
  nothing said: 1/|A_s| is a uniform guess's score only over answers in A_s."""
  test = [r for r in TEST if r[0] not in ("rural_urban", "count")]
  test += [("rural_urban", RU, "urban"), ("rural_urban", RU, "rural"), ("count", COUNT, "0"),
           ("count", COUNT, "between 11 and 100")]
  result = analysis.analyze(make_split("train", TRAIN), make_split("test", test, first_id=100))
  assert result.outside_answers == {"rural_urban": 1, "count": 1}
  rural = next(r for r in result.type_rows() if r.label == "rural_urban")
  assert (rural.prior_acc, rural.uni_acc) == (0.5, 1.0)  # Eq. 3 as the paper, now noted
  note = tables.analysis_note(result)
  assert note == ("2 sample(s) with an answer no train sample of their type has (Counting 1 of "
                  "2, Rural/urban 1 of 2): Uni_Acc = 1/|A_s| overstates a uniform guess on them; "
                  + TIE)
  assert tables.type_table(result, "toy").caption.endswith("; " + note)


def test_empty_split_is_an_error():
  with pytest.raises(RSVQAError):
    analysis.analyze(make_split("train", TRAIN), make_split("test", []))


def _markdown_cells(line):
  return [c.strip() for c in line.replace("\\|", "").strip().strip("|").split("|")]


def test_type_table_in_three_formats(result, tmp_path):
  table = tables.type_table(result, "toy")
  paths = tables.write(table, str(tmp_path), "types_test")
  assert [os.path.basename(p) for p in paths] == ["types_test.csv", "types_test.md", "types_test.tex"]
  with open(paths[0]) as f:
    rows = list(csv.reader(f))
  assert rows[0] == ["Question type", "N_s", "|A_s|", "Most common answer", "Prior_Acc (%)", "Uni_Acc (%)",
                     "RSVQA_Acc (%)", "IO_Prior (%)", "AdTest_Acc (%)", "IO_AdTest (%)"]
  by_label = {r[0]: r for r in rows[1:]}
  assert set(by_label) == {"All", "Comparison", "Counting", "Presence", "Rural/urban", "Average", "Overall",
                           "Question-level, overall"}
  assert by_label["Comparison"][4:] == ["75.00", "50.00", "50.00", "-100.00", "25.00", "33.33"]
  assert by_label["Rural/urban"][7] == "undefined" and by_label["Rural/urban"][9] == "undefined"
  assert by_label["Overall"][4] == "61.54" and by_label["Overall"][7] == "40.00"
  assert by_label["All"][6:] == ["", "", "", ""]
  md = pathlib.Path(paths[1]).read_text().splitlines()
  table_lines = [l for l in md if l.startswith("|")]
  assert all(len(_markdown_cells(l)) == 10 for l in table_lines)
  assert any(_markdown_cells(l)[0] == "Average" for l in table_lines)
  assert any(_markdown_cells(l)[0] == "Overall" for l in table_lines)
  tex = pathlib.Path(paths[2]).read_text()
  assert tex.count(r"\begin{tabular}{llrrrrrrrr}") == 1 and r"\end{tabular}" in tex
  body = [l for l in tex.splitlines() if l.endswith(r"\\")]
  assert len(body) == 1 + len(rows) - 1
  assert all(l.count(" & ") == 9 for l in body)
  assert r"\textbar{}A\_s\textbar{}" in tex and r"Prior\_Acc (\%)" in tex
  assert any(l.startswith("Average &") for l in body) and any(l.startswith("Overall &") for l in body)


def test_objects_patterns_and_question_tables(result):
  op = tables.objects_patterns_table(result, "toy")
  groups = [(r[0], r[1]) for r in op.rows]
  assert ("Presence", "object (w/ attr)") in groups and ("Overall", "pattern") in groups
  pres_obj = next(r for r in op.rows if r[:2] == ("Presence", "object"))
  assert pres_obj[2] == 2 and pres_obj[3] == 0.5  # road (yes) 1/2 + forest (type prior yes) 1/2
  assert "object 1 (2 samples)" in op.caption
  qt = tables.question_table(result, "toy")
  assert qt.rows[-1][0] == "Question-level, overall"
  forest = next(r for r in qt.rows if r[1] == "Is there a forest?")
  assert forest[-1] == "no"
  assert len(list(csv.reader(io.StringIO(tables.to_csv(qt))))) == len(qt.rows) + 1


def test_cells():
  assert tables.cell(0.123456) == "12.35"
  assert tables.cell(-0.5) == "-50.00"
  assert tables.cell(None) == "undefined"
  assert tables.cell(math.nan) == "n/a"
  # float noise around zero (an IO of 0.5750000000000001 vs 0.575) is no loss: never "-0.00"
  io = metrics.io_lower_bound(23 / 40, sum([23 / 40, 21 / 40, 25 / 40]) / 3)
  assert io < 0 and tables.cell(io) == "0.00" and tables.cell(-0.00004) == "0.00"
  assert tables.pct(-1e-18, 0.0) == "0.00 (0.00)" and tables.cell(-0.0001) == "-0.01"
  assert tables.cell(7) == "7" and tables.cell("") == ""
  assert tables.latex_escape("a_b & 50% #1 {x} ~ ^ \\") == (
      r"a\_b \& 50\% \#1 \{x\} \textasciitilde{} \textasciicircum{} \textbackslash{}")


def test_answer_distribution_png(tmp_path):
  splits = {"train": make_split("train", TRAIN), "test": make_split("test", TEST)}
  answers, shares = plots.distribution(splits, "count", top_k=2)
  assert answers == ["0", B1, plots.OTHER]  # 3 each over both splits: tie broken by the answer
  assert shares["train"].tolist() == pytest.approx([0.25, 0.5, 0.25])
  assert shares["test"].tolist() == pytest.approx([2 / 3, 1 / 3, 0.0])
  path = plots.answer_distribution(splits, str(tmp_path / "fig" / "answers.png"), title="toy")
  with open(path, "rb") as f:
    head = f.read(8)
  assert head == b"\x89PNG\r\n\x1a\n" and os.path.getsize(path) > 5000


def test_a_long_answer_is_cut_on_its_tick_label():
  """A megabyte-long answer (a damaged answers file) took matplotlib minutes to lay out."""
  assert plots.short_label("yes") == "yes"
  assert plots.short_label("a" * 100) == "a" * (plots.LABEL_CHARS - 3) + "..."
  assert len(plots.short_label("b" * 2**20)) == plots.LABEL_CHARS


def test_default_splits():
  mk = lambda *names: records.Dataset(name="x", root="/r", splits={n: make_split(n, TRAIN) for n in names})
  assert analysis.default_splits(mk("train", "val", "test", "test_phili")) == ("train", ["test", "test_phili"])
  assert analysis.default_splits(mk("train")) == ("train", ["train"])
  assert analysis.default_splits(mk("all")) == ("all", ["all"])
  with pytest.raises(RSVQAError):
    analysis.default_splits(mk("a", "b"))


def test_an_empty_default_split_is_left_out_with_a_warning_and_refused_when_asked_for(
    tmp_path, capsys):
  """`synth --variant hr --balanced` may leave test_phili empty and says the other splits work,
  but `analyze` (and rsvqa_jax.analyze) without --split refused the whole dataset for it."""
  from rsvqa_jax import api  # pylint: disable=g-import-not-at-top
  from rsvqa_jax.data import synthetic  # pylint: disable=g-import-not-at-top
  data = str(tmp_path / "hr")
  synthetic.generate(data, variant="hr", images=18, seed=0, balanced=True, questions_per_image=20)
  assert cli.main(["analyze", "--data", data, "--out", str(tmp_path / "out")]) == 0
  err = capsys.readouterr().err
  assert (f"WARNING: {data}: split test_phili holds no question and is left out of the analysis "
          "of test") in err
  assert (tmp_path / "out" / "types_test.md").exists()
  assert not (tmp_path / "out" / "types_test_phili.md").exists()
  assert list(api.analyze(data)) == ["test"]
  assert cli.main(["analyze", "--data", data, "--out", str(tmp_path / "out2"),
                   "--split", "test_phili"]) == 2
  assert capsys.readouterr().err.strip().splitlines()[-1] == (
      f"rsvqa-jax analyze: error: {data}: split 'test_phili' holds no question to analyse (its hr "
      "files hold none, or none active)")
  with pytest.raises(RSVQAError, match="split 'test_phili' holds no question to analyse"):
    api.analyze(data, split="test_phili")



def test_analyze_synthetic_end_to_end(tmp_path):
  """`analyze` on a small dataset written by the synthetic generator, LR layout."""
  data, out = tmp_path / "data", tmp_path / "out"
  synthetic.generate(str(data), "lr", images=16, seed=3, questions_per_image=12)
  # the layout detected: LR, its templates
  assert cli.main(["analyze", "--data", str(data), "--out", str(out)]) == 0
  for stem in ("types_test", "objects_patterns_test"):
    for ext in ("csv", "md", "tex"):
      assert (out / f"{stem}.{ext}").stat().st_size > 0
  assert (out / "answer_distribution.png").stat().st_size > 5000
  assert "questions matching no template: 0" in (out / "objects_patterns_test.md").read_text()
  with open(out / "types_test.csv") as f:
    rows = {r["Question type"]: r for r in csv.DictReader(f)}
  assert {"All", "Average", "Overall"} <= set(rows)
  # Recompute the Overall Prior_Acc directly from the splits.
  ds = rsvqa_json.read_dataset(str(data), "lr")
  counts = collections.defaultdict(collections.Counter)
  for t, a in zip(ds["train"].qtype, ds["train"].answer):
    counts[t][a] += 1
  prior = {t: min(c, key=lambda a: (-c[a], a)) for t, c in counts.items()}
  test = ds["test"]
  hits = sum(prior.get(t) == a for t, a in zip(test.qtype, test.answer))
  assert rows["Overall"]["Prior_Acc (%)"] == f"{100 * hits / len(test):.2f}"


def test_a_folder_of_no_detectable_layout_asks_for_dataset(tmp_path, capsys):
  (tmp_path / "flood").mkdir()
  assert cli.main(["analyze", "--data", str(tmp_path / "flood"), "--out",
                   str(tmp_path / "out")]) == 2
  err = capsys.readouterr().err.strip()
  assert len(err.splitlines()) == 1 and "cannot tell the dataset variant" in err
  assert err.endswith("name its layout with --dataset (lr, hr, xben, floodnet, rsivqa)")


def test_a_split_with_no_question_names_the_dataset_folder(tmp_path, capsys):
  """An RSIVQA folder whose .txt files are empty said "split 'all' has no sample to analyse",
  naming neither the folder nor why."""
  (tmp_path / "rsivqa" / "UCM").mkdir(parents=True)
  (tmp_path / "rsivqa" / "UCM" / "ucm_vqa.txt").write_text("\n")
  assert cli.main(["analyze", "--data", str(tmp_path / "rsivqa"), "--dataset", "rsivqa", "--out",
                   str(tmp_path / "out")]) == 2
  assert capsys.readouterr().err.strip() == (
      f"rsvqa-jax analyze: error: {tmp_path / 'rsivqa'}: split 'all' holds no question to analyse "
      "(its rsivqa files hold none, or none active)")


def test_a_tiny_set_plots_without_a_raw_warning(tmp_path, recwarn):
  """Three image ids of RSVQAxBEN: the answer-distribution figure is too small to lay its labels
  out, and matplotlib's UserWarning reached the user's terminal with its source line."""
  from rsvqa_jax.data import synthetic  # pylint: disable=g-import-not-at-top
  synthetic.generate_xben(str(tmp_path / "x"), 3, 0, 3)
  assert cli.main(["analyze", "--data", str(tmp_path / "x"), "--dataset", "xben",
                   "--out", str(tmp_path / "out")]) == 0
  assert (tmp_path / "out" / "answer_distribution.png").is_file()
  assert not [w for w in recwarn if "layout" in str(w.message)]


def test_analyze_never_writes_its_tables_into_a_training_workdir(tmp_path, capsys):
  """--out a training run's workdir scattered ten tables and figures among its checkpoints
  (study and grounding refused such a folder already)."""
  data = str(tmp_path / "lr")
  synthetic.generate(data, "lr", images=8, seed=0, questions_per_image=5)
  run = tmp_path / "run"
  run.mkdir()
  (run / "config.json").write_text("{}")
  capsys.readouterr()
  assert cli.main(["-q", "analyze", "--data", data, "--out", str(run)]) == 2
  assert capsys.readouterr().err.strip() == (
      f"rsvqa-jax analyze: error: --out {run} holds a training run (config.json); give the "
      "tables a folder of its own")
  assert os.listdir(run) == ["config.json"]
