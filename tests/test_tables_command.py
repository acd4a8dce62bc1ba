"""`rsvqa-jax tables`: Table 1 (24 cells), Table 2 (mean (std) over seeds) and the Figure 8 sweep
from a folder of workdirs, with missing cells marked; configs/lr_sweep.py."""
import json
import math
import os
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest

from rsvqa_jax import cli
from rsvqa_jax import config as config_lib
from rsvqa_jax.bias import tables
from rsvqa_jax.commands import tables as tables_cmd
from rsvqa_jax.errors import RSVQAError
from rsvqa_jax.train import run_record

import subprocess_env
from test_train_support import warnings_of_rsvqa_jax

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _workdir(root, name, *, lm="distilbert", frozen=False, fusion="mult", blind=False,
             head="paper", text_lr=1e-6, val=(0.5, 0.7), test=None, seed=0, checkpoint="best",
             record=None, lm_weights="/weights/lm"):
  """A workdir as `train` and `evaluate` leave it (config.json, metrics.jsonl, accuracy.json);
  `record` (epoch, best step): the JSON record of its newest checkpoint, the evaluation of that
  best step (else no checkpoint and an evaluation that names no step); `lm_weights`: its
  text.checkpoint (None: random init)."""
  c = config_lib.paper_config("lr", lm, fusion, frozen)
  c.model.blind, c.optim.text_lr, c.seed = blind, text_lr, seed
  c.text.checkpoint = lm_weights
  if "head" in c.model:
    c.model.head = head
  d = config_lib.to_dict(c)
  d["model"]["head"] = head
  w = os.path.join(root, name)
  os.makedirs(os.path.join(w, "checkpoints"))
  with open(os.path.join(w, "config.json"), "w") as f:
    json.dump(d, f)
  with open(os.path.join(w, "metrics.jsonl"), "w") as f:
    f.write(json.dumps({"step": 1, "split": "train", "loss": 1.0, "oa": 0.99}) + "\n")
    for step, oa in enumerate(val, 2):
      f.write(json.dumps({"step": step, "split": "val", "oa": oa}) + "\n")
    f.write('{"step": 9, "split": "val", "oa": 0.9')  # a line cut by a kill: skipped
  if test is not None:
    comp, count = test
    os.makedirs(os.path.join(w, "eval", "test"))
    acc = {"oa": (comp * 60 + count * 40) / 100, "aa": (comp + count) / 2, "n": 100,
           "per_type": {"count": count, "comp": comp}, "per_type_n": {"count": 40, "comp": 60},
           "checkpoint": checkpoint, **({"step": record[1]} if record else {})}
    with open(os.path.join(w, "eval", "test", "accuracy.json"), "w") as f:
      json.dump(acc, f)
  if record:
    _record(w, *record)
  return w


def _record(workdir, epoch, best_step, step=None):
  """Writes the JSON record of checkpoint `step` (default best_step) as train/checkpointing.py
  saves it."""
  folder = os.path.join(workdir, "checkpoints", str(step or best_step), "data")
  os.makedirs(folder, exist_ok=True)
  data = {"epoch": epoch, "loop": {"best_step": best_step, "best_oa": 0.5}, "shapes": {},
          "checksums": {}}
  with open(os.path.join(folder, "metadata"), "w") as f:
    json.dump({**data, run_record.RECORD_CHECKSUM: run_record.record_checksum(data)}, f)


def _run(root, capsys, *more):
  rc = cli.main(["tables", "--runs", str(root), *more])
  return rc, capsys.readouterr()


def test_tables_from_a_folder_of_workdirs(tmp_path, capsys):
  runs = tmp_path / "runs"
  _workdir(runs, "db_ft/seed0", val=(0.8, 0.85), test=(0.9, 0.6))
  _workdir(runs, "db_ft/seed1", val=(0.87,), test=(0.8, 0.7), seed=1)
  _workdir(runs, "st_frozen_mutan/seed0", lm="skipthoughts", frozen=True, fusion="mutan",
           text_lr=0.0, val=(0.7,))  # trained, never evaluated
  _workdir(runs, "baseline/seed0", lm="skipthoughts", frozen=True, head="original", val=(0.6,),
           test=(0.5, 0.5))
  _workdir(runs, "blind/seed0", blind=True, val=(0.99,), test=(1.0, 1.0))  # in neither table
  _workdir(runs, "sweep/db_1e-5", text_lr=1e-5, val=(0.75,))
  # An attention head (configs/grounding_synthetic.py) sat in the paper's cells as its model.
  _workdir(runs, "attention/seed0", head="attention", val=(0.95,), test=(0.3, 0.3))
  (runs / "notes").mkdir()
  rc, out = _run(runs, capsys)
  assert rc == 0, out.err
  assert (f"Table 1: 1 run(s) fit none of its cells (attention head; Table 2 lists them), e.g. "
          f"{runs / 'attention' / 'seed0'}") in out.err
  assert (f"1 visual-blind workdir(s) under {runs} left out (the paper's tables hold models that "
          f"see the image; rsvqa-jax study compares each blind model with its reference in "
          f"report.md), e.g. {runs / 'blind' / 'seed0'}") in out.err
  t1 = (runs / "tables" / "table1.md").read_text()
  # 24 cells; fine-tuned distilBERT e-mult pools its three runs (seeds and the sweep's lr).
  assert "22 of 24 cells missing" in t1
  assert f"| LM fine-tuned | missing | missing | missing | missing | missing | missing | " \
         f"{tables.pct(*tables.mean_std([0.85, 0.87, 0.75]))} |" in t1
  assert "| LM frozen | missing | missing | 70.00 |" in t1
  t2 = (runs / "tables" / "table2.md").read_text()
  rows = [l for l in t2.splitlines() if l.startswith("| ")][1:]
  assert rows[0] == "| N (test questions) |  |  |  | 60 | 40 |  | 100 |"
  cells = lambda text: " | ".join([text] * 4) + " |"
  assert rows[1].startswith("| RSVQA baseline | frozen | e-mult | 1 | 50.00 | 50.00 |")
  assert rows[2] == "| RNN Skip-thoughts | frozen | MUTAN | 1 | " + cells("not evaluated")
  assert rows[3] == "| Transformer distilBERT | frozen | MUTAN | 0 | " + cells("missing")
  oa = [(0.9 * 60 + 0.6 * 40) / 100, (0.8 * 60 + 0.7 * 40) / 100]
  # Two seeds evaluated; the sweep's run (another learning rate) is no third seed of the row.
  assert rows[5] == ("| Transformer distilBERT | fine-tuned | e-mult | 2 | 85.00 (5.00) | "
                     f"65.00 (5.00) | 75.00 (0.00) | {tables.pct(np.mean(oa), np.std(oa))} |")
  assert rows[6].startswith("| distilBERT, attention head | fine-tuned | e-mult | 1 | 30.00 |")
  assert (f"{runs / 'sweep' / 'db_1e-5'} is not evaluated and is not counted among its runs: "
          in out.err) and "optim.text_lr is 1e-05 there" in out.err
  assert "Comparison | Counting" in t2  # the paper's column order
  for stem in ("table1", "table2", "figure8_lr"):
    for ext in ("csv", "md", "tex"):
      assert (runs / "tables" / f"{stem}.{ext}").exists()
  sweep = (runs / "tables" / "figure8_lr.md").read_text()
  assert "| LM | 1e-06 | 1e-05 |" in sweep and "| distilBERT | 86.00 (1.00) | 75.00 |" in sweep
  assert "\\begin{tabular}" in (runs / "tables" / "table2.tex").read_text()


def test_random_init_language_models_are_said_in_both_tables(tmp_path, capsys):
  """A run whose language model started from random weights is no pretrained Skip-thoughts:
  its Table 2 row and its Table 1 cell say so."""
  runs = tmp_path / "runs"
  _workdir(runs, "st/seed0", lm="skipthoughts", frozen=True, fusion="mutan", val=(0.6,),
           test=(0.5, 0.5), lm_weights=None)
  _workdir(runs, "db/seed0", val=(0.7,), test=(0.6, 0.6))
  rc, out = _run(runs, capsys)
  assert rc == 0, out.err
  t2 = (runs / "tables" / "table2.md").read_text()
  assert "| RNN Skip-thoughts (random init) | frozen | MUTAN | 1 | 50.00 |" in t2
  assert "| Transformer distilBERT | fine-tuned | e-mult | 1 | 60.00 |" in t2
  t1 = (runs / "tables" / "table1.md").read_text()
  assert ("cells over randomly initialised language models (no text.checkpoint), not the "
          "pretrained ones the columns name: Skip-thoughts MUTAN, LM frozen") in t1


def test_a_studys_random_init_stand_in_folders_are_random_init(tmp_path, capsys):
  """A synthetic study gives each run a generated random-init folder (DIR/cache/lm/..._random_KEY)
  as text.checkpoint: `tables` over its runs labelled them pretrained."""
  runs = tmp_path / "runs"
  stand_in = str(tmp_path / "cache" / "lm" / "distilbert_random_0123456789ab")
  _workdir(runs, "db/seed0", val=(0.7,), test=(0.6, 0.6), lm_weights=stand_in)
  _workdir(runs, "own/seed0", val=(0.7,), test=(0.5, 0.5), frozen=True,
           lm_weights=str(tmp_path / "models" / "distilbert_random_weights"))
  rc, out = _run(runs, capsys)
  assert rc == 0, out.err
  t2 = (runs / "tables" / "table2.md").read_text()
  assert "| Transformer distilBERT (random init) | fine-tuned | e-mult | 1 | 60.00 |" in t2
  assert "| distilBERT | frozen | e-mult | 1 | 50.00 |" in t2  # a folder of the user's own
  # Telling the stand-ins apart loaded the study package, and with it JAX (4.6 s, was 0.3 s).
  code = ("import sys; from rsvqa_jax import cli; rc = cli.main(['-q', 'tables', '--runs', "
          f"{str(runs)!r}]); print(rc, 'jax' in sys.modules)")
  done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                        env=subprocess_env.env(), check=False)
  assert done.stdout.split()[-2:] == ["0", "False"], done.stdout + done.stderr


def test_validation_oa_is_of_the_runs_validation_split_and_a_fraction(monkeypatch):
  """An OA of 5.0 read 500.00, and records of a split not named train (test) counted."""
  records = [{"split": "train", "oa": 0.99}, {"split": "test", "oa": 0.95},
             {"split": "val", "oa": 5.0}, {"split": "val", "oa": float("nan")},
             {"split": "val", "oa": 0.6}, {"oa": 0.97}, {"split": "val", "loss": 1.0}]
  warned = []
  monkeypatch.setattr(tables._log, "warning", warned.append)  # pylint: disable=protected-access
  assert tables.best_validation_oa(records, "val", "m.jsonl") == 0.6
  assert warned == ["m.jsonl: 2 record(s) of split val whose OA is not a number in [0, 1], skipped"]
  assert tables.best_validation_oa(records, "test") == 0.95
  assert math.isnan(tables.best_validation_oa(records[:1], "val"))


def test_tables_errors_are_one_line(tmp_path, capsys):
  rc, out = _run(tmp_path, capsys)
  assert rc == 2 and "no training workdir" in out.err and len(out.err.strip().splitlines()) == 1
  runs = tmp_path / "runs"
  _workdir(runs, "db_ft/seed0")
  (tmp_path / "data").mkdir()
  (tmp_path / "data" / "LR_split_train_questions.json").write_text("{}")
  rc, out = _run(runs, capsys, "--out", str(tmp_path / "data"))
  assert rc == 2 and out.err.strip().endswith(
      "holds a dataset (LR_split_train_questions.json); give the tables a folder of its own")
  shutil.rmtree(runs)
  rc, out = _run(tmp_path / "nope", capsys)
  assert rc == 2 and "not a folder" in out.err
  w = tmp_path / "broken"
  (w / "checkpoints").mkdir(parents=True)
  (w / "config.json").write_text('{"text": {}}')
  rc, out = _run(tmp_path, capsys)
  assert rc == 2 and "not a training config" in out.err and len(out.err.strip().splitlines()) == 1


def test_lr_sweep_config():
  path = os.path.join(ROOT, "configs", "lr_sweep.py")
  c = config_lib.load(f"{path}:skipthoughts,3e-5")
  assert (c.text.encoder, c.text.frozen, c.model.fusion, c.optim.text_lr) == ("skipthoughts", False,
                                                                              "mult", 3e-5)
  assert config_lib.load(f"{path}:distilbert").optim.text_lr == 1e-6
  with pytest.raises(Exception, match="not a number"):
    config_lib.load(f"{path}:bert,fast")


def test_evaluate_table_labels_counts_and_adversarial_rows():
  """`evaluate`'s table: the report's type names in the paper's order, N per type, the
  adversarial rows named apart from the clean ones, mean (std) of the runs."""
  acc = lambda w, comp: {"workdir": f"/x/{w}", "oa": (comp * 6 + 0.5 * 4) / 10,
                         "aa": (comp + 0.5) / 2, "n": 10,
                         "per_type": {"rural_urban": 0.5, "comp": comp},
                         "per_type_n": {"rural_urban": 4, "comp": 6}}
  clean = tables.runs_table([acc("seed0", 0.5), acc("seed1", 1.0)], "test, clean")
  assert clean.columns == ("run", "Comparison", "Rural/urban", "AA", "OA")
  assert clean.rows[0] == ("N (questions)", 6, 4, "", 10)
  assert clean.rows[1][0] == "seed0" and clean.rows[2][0] == "seed1"
  assert clean.rows[3] == ("mean (population std)", "75.00 (25.00)", "50.00 (0.00)",
                           "62.50 (12.50)", "65.00 (15.00)")
  adv = tables.runs_table([acc("seed0", 0.25)], "test, white", setup="adversarial white")
  assert [r[0] for r in adv.rows] == ["N (questions)", "seed0 (adversarial white)"]
  text = tables.to_markdown(adv)
  assert "| run | Comparison | Rural/urban | AA | OA |" in text
  assert "| seed0 (adversarial white) | 25.00 | 50.00 | 37.50 | 35.00 |" in text
  assert "comp" not in text and "rural_urban" not in text


def test_evaluate_table_shows_a_training_type_the_split_lacks():
  """A split without Counting questions lost the column silently; its AA is over fewer types."""
  result = {"workdir": "/x/seed0", "oa": 0.5, "aa": 0.5, "n": 4, "per_type": {"comp": 0.5},
            "per_type_n": {"comp": 4}, "types_absent": ["count", "presence"]}
  table = tables.runs_table([result], "test, clean")
  assert table.columns == ("run", "Comparison", "Counting", "Presence", "AA", "OA")
  assert table.rows[0] == ("N (questions)", 4, 0, 0, "", 4)
  assert table.caption == ("accuracy (%), test, clean; no Counting, Presence question in the split: AA over "
                           "the other 1 type(s)")
  assert "| seed0 | 50.00 | n/a | n/a | 50.00 | 50.00 |" in tables.to_markdown(table)


def test_report_timings_use_the_one_markdown_emitter():
  from rsvqa_jax.bias import report  # pylint: disable=g-import-not-at-top
  timings = {"timings": {"train/a": 1.25, "train/b": 2.0, "analysis": 0.5}}
  text = report._timings(timings)  # pylint: disable=protected-access
  assert text.splitlines() == ["| stage | units | seconds |", "|---|---|---|",
                               "| train | 2 | 3.2 |", "| analysis | 1 | 0.5 |",
                               "| total | 3 | 3.8 |"]


def test_a_split_evaluated_at_the_last_checkpoint_only_is_said_so(tmp_path, capsys):
  """The error read "no workdir was evaluated on it (evaluated splits: test)" for test itself."""
  runs = tmp_path / "runs"
  _workdir(runs, "db_ft/seed0", test=(0.9, 0.6), checkpoint="last")
  rc, out = _run(runs, capsys)
  assert rc == 2 and out.err.strip().splitlines()[-1] == (
      f"rsvqa-jax tables: error: --split test: no workdir under {runs} has its best checkpoint "
      "evaluated on it, only another (--checkpoint last); rsvqa-jax evaluate --workdir W scores "
      "the best")


def test_a_split_no_workdir_was_evaluated_on_and_unreadable_metrics_are_said(tmp_path, capsys):
  runs = tmp_path / "runs"
  w = _workdir(runs, "db_ft/seed0", val=(0.8,), test=(0.9, 0.6))
  rc, out = _run(runs, capsys, "--split", "tset")
  assert rc == 2 and out.err.strip() == (f"rsvqa-jax tables: error: --split tset: no workdir "
                                         f"under {runs} was evaluated on it (evaluated splits: "
                                         "test)")
  with open(os.path.join(w, "metrics.jsonl"), "a") as f:
    f.write('\n{"step": 10, "split": "val", "oa": 0.5}\ngarbage\n[1, 2]\n{"step": 11, "spl')
  rc, out = _run(runs, capsys)
  assert rc == 0
  assert "metrics.jsonl: 4 of 7 lines unreadable (the first: line 3), skipped" in out.err


def test_table1_pools_seeds_and_learning_rates_of_one_model_only(tmp_path, capsys):
  """Two runs of one seed on other datasets were averaged into a Table 1 cell as if seeds (runs
  of another dataset are refused now, test_workdirs_of_two_datasets_are_refused)."""
  runs = tmp_path / "runs"
  _workdir(runs, "db/seed0", val=(0.8,))
  _workdir(runs, "db/lr1e-5", val=(0.6,), text_lr=1e-5)  # the sweep's runs pool, as before
  other = _workdir(runs, "elsewhere/seed0", val=(0.2,))
  config = json.loads(pathlib.Path(other, "config.json").read_text())
  config["train"]["batch_size"], config["optim"]["lr"] = 35, 0.5
  pathlib.Path(other, "config.json").write_text(json.dumps(config))
  cell = lambda: (runs / "tables" / "table1.md").read_text().splitlines()[-1].split(" | ")[7]
  rc, out = _run(runs, capsys)
  assert rc == 0 and cell() == "unlike runs"
  assert ("Table 1 cell 'distilBERT e-mult, LM fine-tuned': " in out.err
          and f"{other} is not " in out.err and "model over another seed: optim.lr is "
          "0.5 there" in out.err and "and 1 more key(s)" in out.err)
  config["optim"]["lr"] = json.loads(pathlib.Path(runs, "db", "seed0",
                                                      "config.json").read_text())["optim"]["lr"]
  config["train"]["batch_size"] = 70
  pathlib.Path(other, "config.json").write_text(json.dumps(config))
  rc, out = _run(runs, capsys)
  assert rc == 0 and cell() == "unlike runs"
  assert "were both trained with seed 0 (and the same optim.text_lr)" in out.err
  config["seed"] = 1
  pathlib.Path(other, "config.json").write_text(json.dumps(config))
  rc, out = _run(runs, capsys)
  assert rc == 0 and "unlike" not in out.err
  assert cell() == tables.pct(*tables.mean_std([0.8, 0.6, 0.2]))
  sweep = lambda: (runs / "tables" / "figure8_lr.md").read_text()
  assert "| distilBERT | 50.00 (30.00) | 60.00 |" in sweep()  # lr 1e-6: seeds 0 and 1
  config["seed"], config["optim"]["lr"] = 0, 0.5
  pathlib.Path(other, "config.json").write_text(json.dumps(config))
  rc, out = _run(runs, capsys)  # a Figure 8 cell averaged runs of another model, seeds repeated
  assert rc == 0 and "| distilBERT | unlike runs | 60.00 |" in sweep()
  assert "Figure 8 cell 'distilBERT, lr 1e-06': " in out.err


def _data(workdir, **data):
  """Sets the data section keys of a workdir's config.json."""
  path = os.path.join(workdir, "config.json")
  config = json.loads(pathlib.Path(path).read_text())
  config["data"].update(data)
  pathlib.Path(path).write_text(json.dumps(config))


def test_workdirs_of_two_datasets_are_refused(tmp_path, capsys):
  """A study folder holds its main runs and its balanced twin's: one table over both counted
  the twin's questions in its N row beside rows of the main dataset's models."""
  study = tmp_path / "study"
  main = _workdir(study / "runs", "db_ft/seed0", test=(0.9, 0.6))
  _data(main, root=str(study / "data" / "main"))
  twin = _workdir(study / "balanced" / "runs", "db_ft/seed0", test=(0.5, 0.5))
  _data(twin, root=str(study / "data" / "balanced") + "/")
  blind = _workdir(study / "blind", "db_ft/seed0", blind=True)  # in no table: never counted
  _data(blind, synthetic=True)
  rc, out = _run(study, capsys)
  assert rc == 2 and len(out.err.strip().splitlines()) == 1
  assert (f"workdirs of 2 datasets (RSVQA LR at {study}/data/balanced: 1 workdir, e.g. {twin}; "
          f"RSVQA LR at {study}/data/main: 1 workdir, e.g. {main}); a table is of one dataset"
          in out.err)
  assert not (study / "tables").exists()
  rc, out = _run(study / "runs", capsys)
  assert rc == 0 and "| Transformer distilBERT | fine-tuned | e-mult | 1 | 90.00 | 60.00 |" in \
      out.out
  _data(twin, root=str(study / "data" / "main"))  # the same folder spelt alike: one dataset
  rc, out = _run(study, capsys)
  assert rc == 0, out.err


def test_table2_averages_only_evaluations_of_the_same_questions(tmp_path, capsys):
  """A seed evaluated on another version of the test split (evaluate --data-root) was averaged
  with the others: the N row was the first run's and AA / OA mixed question sets."""
  runs = tmp_path / "runs"
  first = _workdir(runs, "db_ft/seed0", test=(0.9, 0.6))
  other = _workdir(runs, "db_ft/seed1", test=(0.5, 0.5), seed=1)
  _workdir(runs, "st_ft/seed0", lm="skipthoughts", test=(0.5, 0.5))
  table2 = lambda: (runs / "tables" / "table2.md").read_text()
  row = lambda: next(l for l in table2().splitlines()
                     if l.startswith("| Transformer distilBERT | fine-tuned"))
  rc, out = _run(runs, capsys)
  assert rc == 0 and "| 2 | 70.00 (20.00) |" in row() and "other questions" not in out.err
  assert "mean (population std) over seeds" in table2()  # 20.00: 0.9 and 0.5, ddof 0
  assert "mean (population std) over the runs of a cell" in (runs / "tables" / "table1.md"
                                                             ).read_text()
  path = os.path.join(other, "eval", "test", "accuracy.json")
  acc = json.loads(pathlib.Path(path).read_text())
  acc.update(n=90, per_type_n={"count": 30, "comp": 60})  # the split without 10 questions
  pathlib.Path(path).write_text(json.dumps(acc))
  rc, out = _run(runs, capsys)
  assert rc == 0 and row().endswith("| unlike runs | unlike runs |")
  assert (f"Table 2 row 'Transformer distilBERT': {other} was evaluated on other questions than "
          f"{first} (90 against 100); it reads 'unlike runs' instead of a mean") in out.err
  assert f"its N row counts {first}'s questions" in out.err
  assert "| RNN Skip-thoughts | fine-tuned | e-mult | 1 | 50.00 |" in table2()
  acc.update(n=100, per_type_n={"count": 40, "comp": 60}, split_sha256="b" * 64)
  pathlib.Path(path).write_text(json.dumps(acc))
  rc, out = _run(runs, capsys)  # the same counts, where only one recorded its data: alike
  assert rc == 0 and "| 2 | 70.00 (20.00) |" in row() and "other questions" not in out.err
  assert "mean (population std) over seeds" in table2()  # 20.00: 0.9 and 0.5, ddof 0
  assert "mean (population std) over the runs of a cell" in (runs / "tables" / "table1.md"
                                                             ).read_text()
  first_path = os.path.join(first, "eval", "test", "accuracy.json")
  first_file = pathlib.Path(first_path)
  other_data = {**json.loads(first_file.read_text()), "split_sha256": "a" * 64}
  first_file.write_text(json.dumps(other_data))
  rc, out = _run(runs, capsys)  # the same counts of other questions
  assert rc == 0 and row().endswith("| unlike runs | unlike runs |")
  assert f"{other} was evaluated on other questions than {first} (100 against 100, other data)" \
      in out.err


def test_table2_averages_only_seeds_of_one_model_evaluated_on_the_best(tmp_path, capsys):
  """Runs on other data, a copied seed and a last-checkpoint evaluation were averaged into a
  row as if they were seeds of one model's best checkpoint."""
  runs = tmp_path / "runs"
  _workdir(runs, "db_ft/seed0", test=(0.9, 0.6))
  last = _workdir(runs, "db_ft/seed1", test=(0.1, 0.1), seed=1, checkpoint="last")
  _workdir(runs, "st_ft/seed0", lm="skipthoughts", test=(0.5, 0.5))
  rc, out = _run(runs, capsys)
  assert rc == 0
  assert (f"{last}/eval/test/accuracy.json: scores the 'last' checkpoint, Table 2 the best: left "
          f"out (rsvqa-jax evaluate --workdir {last} scores the best)") in out.err
  row = lambda: next(l for l in (runs / "tables" / "table2.md").read_text().splitlines()
                     if l.startswith("| Transformer distilBERT | fine-tuned"))
  assert "| 1 of 2 | 90.00 | 60.00 |" in row()  # seed0's alone, counted so
  copy = _workdir(runs, "db_ft/seed0_copy", test=(0.9, 0.6))
  rc, out = _run(runs, capsys)
  assert rc == 0 and "were both trained with seed 0" in out.err
  assert "Table 2 row 'Transformer distilBERT'" in out.err and "reads 'unlike runs'" in out.err
  assert row().endswith("| unlike runs | unlike runs |")
  assert "| RNN Skip-thoughts | fine-tuned | e-mult | 1 | 50.00 |" in (
      runs / "tables" / "table2.md").read_text()  # the other rows as before
  config = json.loads(pathlib.Path(copy, "config.json").read_text())
  config["seed"], config["optim"]["lr"] = 2, 0.5
  config["train"]["eval_batch_size"] = 7  # bookkeeping: not what makes runs unlike
  config["data"]["cache_dir"] = "/another/cache"  # where the caches are, likewise
  pathlib.Path(copy, "config.json").write_text(json.dumps(config))
  rc, out = _run(runs, capsys)
  assert rc == 0 and (f"{copy} is not {runs / 'db_ft' / 'seed0'}'s model over another seed: "
                      "optim.lr is 0.5 there") in out.err
  config["optim"]["lr"] = json.loads(pathlib.Path(runs, "db_ft", "seed0",
                                                    "config.json").read_text())["optim"]["lr"]
  pathlib.Path(copy, "config.json").write_text(json.dumps(config))
  rc, out = _run(runs, capsys)
  assert rc == 0 and "unlike" not in out.err and "| 2 of 3 |" in row()


def test_an_unfinished_seed_beside_a_finished_one_reads_unlike_runs(tmp_path, capsys):
  """evaluate --seeds refuses to average a run stopped before its last epoch with finished ones;
  Table 2 (and Table 1) averaged them with no word."""
  runs = tmp_path / "runs"
  epochs = config_lib.paper_config("lr", "distilbert", "mult", False).train.num_epochs
  _workdir(runs, "db_ft/seed0", test=(0.9, 0.6), record=(epochs, 40))
  stopped = _workdir(runs, "db_ft/seed1", test=(0.5, 0.5), seed=1, record=(1, 8))
  rc, out = _run(runs, capsys)
  assert rc == 0
  assert (f"Table 2 row 'Transformer distilBERT' (evaluate --seeds refuses its runs too): "
          f"{stopped}: training stopped after epoch 1 of {epochs} (rsvqa-jax train --workdir "
          f"{stopped} again, with its config, finishes it); a mean would mix it with finished "
          "runs; it reads 'unlike runs'") in out.err
  assert "Table 1 cell 'distilBERT e-mult, LM fine-tuned'" in out.err
  row = next(l for l in (runs / "tables" / "table2.md").read_text().splitlines()
             if l.startswith("| Transformer distilBERT | fine-tuned"))
  assert row.endswith("| 2 | unlike runs | unlike runs | unlike runs | unlike runs |"), row
  _record(stopped, epochs, 8, step=20)  # trained to its end; its best step did not change
  rc, out = _run(runs, capsys)
  assert rc == 0 and "unlike" not in out.err
  assert "| 2 | 70.00 (20.00) | 55.00 (5.00) |" in (runs / "tables" / "table2.md").read_text()


def test_seeds_stopped_at_different_epochs_are_not_averaged(tmp_path, capsys, caplog):
  """Every run unfinished, one after epoch 1, one after epoch 2: Table 1 read 45.00 (8.00) and
  evaluate --seeds a mean (std), as if one training length."""
  from rsvqa_jax.commands import evaluate  # pylint: disable=g-import-not-at-top
  runs = tmp_path / "runs"
  one = _workdir(runs, "db_ft/seed0", test=(0.9, 0.6), record=(1, 8))
  two = _workdir(runs, "db_ft/seed1", test=(0.5, 0.5), seed=1, record=(2, 16))
  rc, out = _run(runs, capsys)
  assert rc == 0 and "runs of 1 and 2 epochs of training (e.g. " in out.err
  assert "Table 1 cell 'distilBERT e-mult, LM fine-tuned'" in out.err
  row = next(l for l in (runs / "tables" / "table2.md").read_text().splitlines()
             if l.startswith("| Transformer distilBERT | fine-tuned"))
  assert row.endswith("| unlike runs | unlike runs | unlike runs | unlike runs |"), row
  with pytest.raises(RSVQAError, match=r"^--seeds: runs of 1 and 2 epochs of training \(e\.g\. "):
    evaluate._check_seed_runs([one, two], None)  # pylint: disable=protected-access
  # A run whose checkpoints/ is gone (pruned to keep best/): how far it went is unknown.
  shutil.rmtree(os.path.join(two, "checkpoints"))
  os.makedirs(os.path.join(two, "checkpoints"))
  epochs = config_lib.paper_config("lr", "distilbert", "mult", False).train.num_epochs
  _record(one, epochs, 8)  # seed0 trained to its end
  with warnings_of_rsvqa_jax(caplog):
    evaluate._check_seed_runs([one, two], None)  # pylint: disable=protected-access
  assert [r.getMessage() for r in caplog.records] == [
      f"--seeds: {two}: how far it trained cannot be read (no readable checkpoint record under "
      "checkpoints/): taken as finished"]


def test_runs_of_data_replaced_in_their_folder_are_not_averaged(tmp_path, capsys):
  """The dataset folder regenerated between two seeds: Table 1 pooled the validation OA of two
  datasets (Table 2 and evaluate --seeds refused them: their evaluations or data.json differ)."""
  runs = tmp_path / "runs"
  for seed, sha in ((0, "aa"), (1, "bb")):
    w = _workdir(runs, f"db_ft/seed{seed}", seed=seed)
    pathlib.Path(w, "data.json").write_text(json.dumps(
        {"train": {"questions": 10, "sha256": sha}, "val": {"questions": 5, "sha256": "cc"}}))
  rc, out = _run(runs, capsys)
  assert rc == 0 and (f"{runs / 'db_ft' / 'seed1'} trained on other data than "
                      f"{runs / 'db_ft' / 'seed0'} (their data.json record other train or "
                      "validation splits); it reads 'unlike runs'") in out.err


def test_an_evaluation_of_a_best_step_the_run_has_replaced_is_left_out(tmp_path, capsys):
  """A run trained on after its evaluation (resumed, more epochs) found a better checkpoint: the
  accuracy.json of the old one was read as the run's."""
  runs = tmp_path / "runs"
  epochs = config_lib.paper_config("lr", "distilbert", "mult", False).train.num_epochs
  w = _workdir(runs, "db_ft/seed0", test=(0.9, 0.6), record=(epochs, 19))
  _record(w, epochs, 57, step=57)
  _workdir(runs, "st_ft/seed0", lm="skipthoughts", test=(0.5, 0.5))  # a table to write
  rc, out = _run(runs, capsys)
  assert rc == 0, out.err
  assert (f"{w}/eval/test/accuracy.json: scores step 19, and the run's best checkpoint is now "
          f"step 57 (it trained on after the evaluation): left out (rsvqa-jax evaluate "
          f"--workdir {w} scores it)") in out.err
  row = next(l for l in (runs / "tables" / "table2.md").read_text().splitlines()
             if l.startswith("| Transformer distilBERT | fine-tuned"))
  assert "| 1 | not evaluated |" in row, row


def test_table2_counts_only_unevaluated_runs_that_are_seeds_of_its_model(tmp_path, capsys):
  """An unevaluated run of another model (of another dataset until those were refused) beside an
  evaluated one read '1 of 2', a pending seed, with no word."""
  runs = tmp_path / "runs"
  _workdir(runs, "db_ft/seed0", test=(0.9, 0.6))
  pending = _workdir(runs, "db_ft/seed1", seed=1)
  other = _workdir(runs, "db_ft_other/seed0")
  config = json.loads(pathlib.Path(other, "config.json").read_text())
  config["optim"]["lr"] = 0.5
  pathlib.Path(other, "config.json").write_text(json.dumps(config))
  rc, out = _run(runs, capsys)
  row = next(l for l in (runs / "tables" / "table2.md").read_text().splitlines()
             if l.startswith("| Transformer distilBERT | fine-tuned"))
  assert rc == 0 and "| 1 of 2 | 90.00 | 60.00 |" in row, row  # seed1 pending, the other not
  assert (f"Table 2 row 'Transformer distilBERT': {other} is not evaluated and is not counted "
          f"among its runs: {other} is not {runs / 'db_ft' / 'seed0'}'s model over another seed: "
          "optim.lr is 0.5 there") in out.err
  assert (f"Table 2 row 'Transformer distilBERT': 1 of its 2 seeds not evaluated, its cells are "
          f"the others': rsvqa-jax evaluate --workdir {pending}") in out.err


def test_answerability_workdirs_are_left_out_of_the_paper_tables(tmp_path, capsys):
  """An answerability workdir made Table 1's cell 'unlike runs' and read as a Table 2 run 'not
  evaluated', whose evaluate command refuses it."""
  runs = tmp_path / "runs"
  _workdir(runs, "st/seed0", lm="skipthoughts", val=(0.37,), test=(0.5, 0.5))
  ranking = _workdir(runs, "ranking", lm="skipthoughts")
  config = json.loads(pathlib.Path(ranking, "config.json").read_text())
  config["answerability"] = {"batch_pools": 16}
  pathlib.Path(ranking, "config.json").write_text(json.dumps(config))
  rc, out = _run(runs, capsys)
  assert rc == 0 and "unlike" not in out.err and "1 workdir read" in out.out
  assert f"1 answerability workdir(s) under {runs} left out" in out.err
  assert "| RNN Skip-thoughts | fine-tuned | e-mult | 1 | 50.00 |" in (
      runs / "tables" / "table2.md").read_text()
  rc, out = _run(runs / "ranking", capsys)
  assert rc == 2 and "only answerability ones" in out.err


@pytest.mark.parametrize("edit, error", [
    (lambda d: d["text"].update(frozen="no"), "text.frozen is 'no', not true or false"),
    (lambda d: d["model"].update(blind="false"), "model.blind is 'false', not true or false"),
    (lambda d: d["model"].update(fusion=[]), "model.fusion is [], not a string")],
    ids=["frozen-text", "blind-text", "fusion-list"])
def test_a_config_flag_of_another_type_is_refused(tmp_path, capsys, edit, error):
  """bool('false') is True: a hand-edited flag put the run in another cell without a word (a
  list for the fusion was a TypeError)."""
  w = _workdir(tmp_path / "runs", "db_ft/seed0", test=(0.9, 0.6))
  path = os.path.join(w, "config.json")
  config = json.loads(pathlib.Path(path).read_text())
  edit(config)
  with open(path, "w") as f:
    json.dump(config, f)
  rc, out = _run(tmp_path / "runs", capsys)
  assert rc == 2 and out.err.strip() == f"rsvqa-jax tables: error: {path}: {error}"


@pytest.mark.parametrize("edit, error", [
    (lambda d: [d], "the file is a list, not an object of keys; not a training config (rsvqa-jax "
                    "train writes it): train the run again"),
    (lambda d: d.update(text=None), "text is null, not an object of keys; not a training config "
                                    "(rsvqa-jax train writes it): train the run again"),
    (lambda d: d["optim"].__delitem__("text_lr"), "no key optim.text_lr; not a training config "
                                          "(rsvqa-jax train writes it): train the run again"),
    (lambda d: d["optim"].update(text_lr="abc"), "optim.text_lr is 'abc', not a finite number"),
    (lambda d: d["optim"].update(text_lr=math.nan), "optim.text_lr is nan, not a finite number"),
    (lambda d: d["train"].update(num_epochs="50"), "train.num_epochs is '50', not a whole number"),
    (lambda d: d["data"].update(val_split=None), "data.val_split is null, not a string")],
    ids=["list", "section-null", "no-key", "lr-text", "lr-nan", "epochs-text", "val-split-null"])
def test_a_config_json_of_another_shape_names_the_key(tmp_path, capsys, edit, error):
  """A config.json of another shape was "not a training config (TypeError('list indices must be
  integers or slices, not str') missing or wrong)", or read: a NaN learning rate, a text epoch
  count or a null validation split put the run in an 'unlike runs' cell, or no cell, without
  naming the key."""
  w = _workdir(tmp_path / "runs", "db_ft/seed0", test=(0.9, 0.6))
  _workdir(tmp_path / "runs", "db_ft/seed1", test=(0.8, 0.7), seed=1)
  path = os.path.join(w, "config.json")
  config = json.loads(pathlib.Path(path).read_text())
  config = edit(config) or config  # an edit in place returns None
  with open(path, "w") as f:
    json.dump(config, f)
  rc, out = _run(tmp_path / "runs", capsys)
  assert rc == 2 and out.err.strip() == f"rsvqa-jax tables: error: {path}: {error}"


def test_a_run_without_a_validation_oa_is_said_to_be_left_out_of_its_cell(tmp_path, capsys):
  """A seed whose metrics.jsonl holds no validation record (empty, or lines of another split)
  was dropped from its Table 1 cell's mean without a word: the cell read one run's OA."""
  runs = tmp_path / "runs"
  _workdir(runs, "db_ft/seed0", val=(0.8,), test=(0.9, 0.6))
  bare = _workdir(runs, "db_ft/seed1", val=(0.6,), test=(0.8, 0.7), seed=1)
  open(os.path.join(bare, "metrics.jsonl"), "w").close()
  rc, out = _run(runs, capsys)
  assert rc == 0 and "| 80.00 |" in out.out
  assert out.err.strip() == (
      "WARNING: Table 1 cell 'distilBERT e-mult, LM fine-tuned': 1 of its 2 run(s) have no "
      f"validation OA in their metrics.jsonl, left out of its mean: e.g. {bare}")


@pytest.mark.parametrize("name", ["config.json", "eval/test/accuracy.json", "metrics.jsonl"])
def test_json_nested_too_deep_or_an_unreadable_metrics_file_is_one_line(tmp_path, capsys, name):
  """A file nested 100,000 deep raised RecursionError; a metrics.jsonl that is a folder read as
  no validation at all (Table 1's cell "missing", without a word)."""
  w = _workdir(tmp_path / "runs", "db_ft/seed0", test=(0.9, 0.6))
  path = os.path.join(w, name)
  with open(path, "w") as f:
    f.write("[" * 100_000 + "]" * 100_000)
  rc, out = _run(tmp_path / "runs", capsys)
  if name == "metrics.jsonl":  # its one line (the last, as a kill leaves it) is skipped
    assert rc == 0, out.err
    os.remove(path)
    os.mkdir(path)
    rc, out = _run(tmp_path / "runs", capsys)
  assert rc == 2 and out.err.strip().startswith(f"rsvqa-jax tables: error: {path}: unreadable (")
  assert len(out.err.strip().splitlines()) == 1


def test_a_fraction_in_a_line_of_text_is_a_percent_or_n_a():
  """Console lines print accuracies as the tables do; a NaN or the loop's -1 mark (no validation
  yet) printed 'n/a%' and '-100.00%'."""
  assert tables.percent(0.4) == "40.00%"
  assert [tables.percent(x) for x in (math.nan, -1.0, None)] == ["n/a"] * 3


def test_the_n_row_names_the_split_the_tables_score():
  """`tables --split val` read "N (test questions)" over the counts of its val split."""
  accuracy = {"oa": 0.5, "aa": 0.5, "per_type": {"presence": 0.5}, "n": 10,
              "per_type_n": {"presence": 10}}
  run = tables.RunRecord(workdir="w", lm="distilbert", frozen=False, fusion="mult", blind=False,
                         head="paper", text_lr=1e-6, val_oa=0.5, accuracy=accuracy)
  for split in ("val", "test"):
    assert tables.table2([run], split).rows[0][0] == f"N ({split} questions)"


def test_table2_keeps_a_training_type_the_split_lacks_as_evaluate_does(tmp_path, capsys):
  """A 3-image set's test split without a Counting question: Table 2 dropped the column and said
  nothing, its AA silently over fewer types; `evaluate` shows N 0, n/a and says so."""
  runs = tmp_path / "runs"
  w = _workdir(runs, "st_ft/seed0", lm="skipthoughts", test=(0.5, 0.5))
  path = os.path.join(w, "eval", "test", "accuracy.json")
  pathlib.Path(path).write_text(json.dumps({
      "oa": 0.5, "aa": 0.5, "n": 60, "per_type": {"comp": 0.5}, "per_type_n": {"comp": 60},
      "checkpoint": "best", "types_absent": ["count"]}))
  rc, out = _run(runs, capsys)
  assert rc == 0, out.err
  table2 = (runs / "tables" / "table2.md").read_text()
  assert "; no Counting question in the split: AA over the other 1 type(s)**" in table2
  assert "| runs | Comparison | Counting | AA | OA |" in table2
  assert "| N (test questions) |  |  |  | 60 | 0 |  | 60 |" in table2
  assert "| RNN Skip-thoughts | fine-tuned | e-mult | 1 | 50.00 | n/a | 50.00 | 50.00 |" in table2


def test_workdirs_reached_through_links_are_read_once(tmp_path, capsys):
  """A folder of symbolic links to runs held 'no training workdir'; two links to one run, or a
  link back up the tree, must not count it twice."""
  _workdir(tmp_path / "runs", "st_ft/seed0", lm="skipthoughts", test=(0.5, 0.5))
  links = tmp_path / "links"
  links.mkdir()
  (links / "a").symlink_to(tmp_path / "runs" / "st_ft")
  (links / "b").symlink_to(tmp_path / "runs" / "st_ft" / "seed0")
  (links / "up").symlink_to(links)
  assert tables_cmd.workdirs(str(links)) == [str(links / "a" / "seed0")]
  rc, out = _run(links, capsys)
  assert rc == 0, out.err
  assert "| RNN Skip-thoughts | fine-tuned | e-mult | 1 | 50.00 |" in (
      links / "tables" / "table2.md").read_text()
