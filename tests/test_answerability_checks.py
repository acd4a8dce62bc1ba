"""Refusals of the answerability commands before any work: `select --out` never writes over a
file it did not write, `synth`'s pool flags need --answerability and a bounded pools per image,
and a JSON file given for a CSV is named so in one short line (audit 4, findings B to E)."""
import json
import os

import pytest

from rsvqa_jax import cli
from rsvqa_jax import config as config_lib
from rsvqa_jax.data import answerability as pools_lib
from rsvqa_jax.errors import RSVQAError
from rsvqa_jax.eval import answerability as evaluation

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
POOL = "pool_id,question,image_id\n0,Is there a road?,1\n0,Is there a road?,2\n"


def _error(capsys, argv):
  """The one error line of a refused command (exit status 2)."""
  assert cli.main(argv) == 2
  lines = capsys.readouterr().err.strip().splitlines()
  assert len(lines) == 1, lines
  return lines[0]


@pytest.fixture(name="files")
def fixture_files(tmp_path):
  """A workdir (config.json), a dataset folder (answerability.json) and a pool file."""
  workdir, dataset = tmp_path / "run", tmp_path / "ds"
  workdir.mkdir()
  dataset.mkdir()
  (workdir / "config.json").write_text('{"x": 1}')
  (dataset / pools_lib.MANIFEST).write_text("{}")
  (tmp_path / "pool.csv").write_text(POOL)
  return tmp_path


def _select(files, out):
  return ["answerability", "select", "--workdir", str(files / "run"), "--pool",
          str(files / "pool.csv"), "--top", "3", "--out", str(out)]


@pytest.mark.parametrize("out, message", [
    ("pool.csv", "is the --pool file"),
    ("ds/../pool.csv", "is the --pool file"),
    ("link/pool.csv", "is the --pool file"),
    ("hard.csv", "is the --pool file"),
    ("run/config.json", "in a workdir's own folder"),
    ("run/selected.csv", "in a workdir's own folder"),
    ("ds/selected.csv", "in a dataset folder"),
    ("notes.csv", "exists and is not an earlier selection (header "
                  "pool_id,question,image_id,score,entropy); remove it or give another path"),
])
def test_select_out_never_replaces_what_it_did_not_write(files, capsys, out, message):
  os.symlink(files, files / "link")
  os.link(files / "pool.csv", files / "hard.csv")
  (files / "notes.csv").write_text("pool_id,question,image_id\n")
  before = {p: p.read_bytes() for p in files.rglob("*") if p.is_file()}
  line = _error(capsys, _select(files, files / out))
  assert line.startswith(f"rsvqa-jax answerability select: error: --out {files / out}: {message}")
  assert {p: p.read_bytes() for p in files.rglob("*") if p.is_file()} == before


def test_select_may_replace_an_earlier_selection(files):
  earlier = files / "top.csv"
  earlier.write_text(",".join(evaluation.SELECT_COLUMNS) + "\n0,q,1,0.5,1.0\n")
  check = evaluation._check_select_out  # pylint: disable=protected-access
  for out in (earlier, files / "new.csv"):
    check(str(out), str(files / "pool.csv"))  # no error


def test_pool_flags_need_answerability(tmp_path, capsys):
  out = tmp_path / "ds"
  assert _error(capsys, ["synth", "--out", str(out), "--images", "30", "--pool-size", "3"]) == (
      "rsvqa-jax synth: error: --pool-size needs --answerability (they shape its pools)")
  assert _error(capsys, ["synth", "--out", str(out), "--images", "30", "--pools-per-image", "2",
                         "--answerability-balance", "0.5"]) == (
      "rsvqa-jax synth: error: --pools-per-image, --answerability-balance need --answerability "
      "(they shape its pools)")
  assert not out.exists()


def test_pools_per_image_is_bounded_before_anything_is_written(tmp_path, capsys):
  out = tmp_path / "ds"
  assert _error(capsys, ["synth", "--out", str(out), "--images", "30", "--answerability",
                         "--pools-per-image", "1e9"]) == (
      "rsvqa-jax synth: error: pools per image 1e+09: must be above 0 and at most 100 (each pool "
      "a distinct question of K images)")
  assert not out.exists()
  assert pools_lib.params(pools_per_image=100)["pools_per_image"] == 100.0
  for bad in (100.5, 0, float("nan")):
    with pytest.raises(RSVQAError, match="must be above 0 and at most 100"):
      pools_lib.params(pools_per_image=bad)
  c = config_lib.load(os.path.join(ROOT, "configs", "answerability_synthetic.py:skipthoughts"))
  c.answerability.pools_per_image = 100.0
  config_lib.check(c)
  c.answerability.pools_per_image = 1e9  # a config is checked before its run creates anything
  with pytest.raises(RSVQAError, match=r"^config answerability.pools_per_image=1000000000.0: must "
                     "be above 0 and at most 100$"):
    config_lib.check(c)


def test_a_json_file_for_a_csv_is_named_in_one_short_line(files, capsys):
  data = files / "pool.json"
  data.write_text(json.dumps([{"pool_id": i, "question": "Is there a road?" * 20, "image_id": i}
                              for i in range(100)]))
  assert _error(capsys, _select(files, files / "sel.csv")[:5] + [str(data), "--top", "3"]) == (
      f"rsvqa-jax answerability select: error: {data}: not a CSV file (it looks like JSON); give a CSV "
      "with the columns pool_id, question, image_id")
  labels = files / "labels.csv"
  labels.write_text("pool_id,image_id,label\n0,1,2\n")
  data.write_text("\n  " + json.dumps({"scores": list(range(500))}))  # blank first: still JSON
  line = _error(capsys, ["answerability", "score", "--scores", str(data), "--labels",
                         str(labels), "--out", str(files / "o")])
  assert line.endswith("not a CSV file (it looks like JSON); give a CSV with the columns "
                       "pool_id, image_id, score")
  wide = files / "wide.csv"
  wide.write_text(",".join(f"column_{i}" for i in range(100)) + "\n")
  line = _error(capsys, ["answerability", "score", "--scores", str(wide), "--labels",
                         str(labels), "--out", str(files / "o")])
  assert line.endswith("missing column(s) pool_id, image_id, score (header: "
                       f"'{','.join(f'column_{i}' for i in range(100))[:77]}...')")


def test_pools_found_drawn_with_other_settings_than_the_configs_are_a_warning(tmp_path, caplog):
  """synth --answerability-balance 0.5 wrote the dataset's pools; a config of balance 1.0 used
  them as they are, and its workdir recorded 1.0 without a word."""
  from rsvqa_jax.train import answerability  # pylint: disable=g-import-not-at-top
  from test_train_support import warnings_of_rsvqa_jax  # pylint: disable=g-import-not-at-top
  a = config_lib.answerability_section()
  (tmp_path / pools_lib.MANIFEST).write_text(json.dumps(
      {**pools_lib.params(balance=0.5, seed=3), "splits": {}}))
  with warnings_of_rsvqa_jax(caplog):
    answerability._warn_other_knobs(str(tmp_path), a)
  [message] = [r.getMessage() for r in caplog.records]
  assert "answerability.balance=1 (drawn with 0.5), answerability.pool_seed=0 (drawn with 3)" in \
      message and "applies only to pools this tool draws" in message
  caplog.clear()
  a.balance, a.pool_seed = 0.5, 3
  with warnings_of_rsvqa_jax(caplog):
    answerability._warn_other_knobs(str(tmp_path), a)
    answerability._warn_other_knobs(str(tmp_path / "none"), a)  # user pools without a manifest
  assert not caplog.records


@pytest.mark.parametrize("override, message", [
    ("--config.data.synthetic_images=8", "config data.synthetic_images=8: answerability pools "
     "need at least 15 lr images (2 in each split, the smallest pool); raise "
     "data.synthetic_images"),
    ("--config.answerability.pools=/nonexistent", "/nonexistent/Answerability_train.csv: no pools "
     "of split train (rsvqa-jax synth --answerability writes them; `rsvqa-jax answerability "
     "train` generates a synthetic config's)")])
def test_answerability_train_refuses_unusable_pools_before_any_stage(tmp_path, capsys, override,
                                                                     message):
  """Both failed in the pools stage, after the dataset was generated and the ResNet pretrained
  on it (a minute), and left the workdir with its .lock."""
  workdir = tmp_path / "w"
  assert cli.main(["answerability", "train", "--config", "configs/answerability_synthetic.py",
                   "--workdir", str(workdir), override,
                   f"--config.data.cache_dir={tmp_path / 'cache'}"]) == 2
  assert capsys.readouterr().err.strip() == f"rsvqa-jax answerability train: error: {message}"
  assert not workdir.exists() and not (tmp_path / "cache").exists()


def test_a_run_refused_inside_its_lock_leaves_no_folder_it_made(tmp_path):
  """A workdir made by a run that failed before recording its config is removed with its .lock;
  one that was there before, or holds a recorded config, stays."""
  from rsvqa_jax.train import loop  # pylint: disable=g-import-not-at-top
  made, there = tmp_path / "made", tmp_path / "there"
  there.mkdir()
  for workdir in (made, there):
    with pytest.raises(RSVQAError, match="refused"), loop.run_lock(str(workdir), "a test"):
      assert os.path.exists(workdir / ".lock")
      raise RSVQAError("refused")
  assert not made.exists() and there.exists()
  with pytest.raises(RSVQAError), loop.run_lock(str(made), "a test"):
    (made / "config.json").write_text("{}")
    raise RSVQAError("refused after its config was recorded")
  assert (made / "config.json").exists()


def test_a_refused_run_removes_the_empty_parent_folders_it_made(tmp_path):
  """--workdir runs/new/a on a refused run left runs/new behind; a parent that holds something
  else by the end (another run's folder) stays."""
  from rsvqa_jax.train import loop  # pylint: disable=g-import-not-at-top
  workdir = tmp_path / "runs" / "new" / "a"
  with pytest.raises(RSVQAError, match="refused"), loop.run_lock(str(workdir), "a test"):
    raise RSVQAError("refused")
  assert os.listdir(tmp_path) == []
  with pytest.raises(RSVQAError, match="refused"), loop.run_lock(str(workdir), "a test"):
    (tmp_path / "runs" / "other").mkdir()
    raise RSVQAError("refused")
  assert sorted(os.listdir(tmp_path / "runs")) == ["other"]


def test_answerability_train_names_a_missing_data_root_before_the_workdir(tmp_path, capsys):
  """The workdir was compared first: over a run of another config, the refusal named that run
  ("holds a run of another config"), not the missing folder."""
  from rsvqa_jax.train import checkpointing  # pylint: disable=g-import-not-at-top
  other = config_lib.load("configs/answerability_synthetic.py")
  config_lib.apply_overrides(other, ["seed=7"])
  ran = tmp_path / "ran"
  checkpointing.check_or_record_config(str(ran), other)
  before = {p: p.stat().st_mtime_ns for p in ran.iterdir()}
  assert cli.main(["answerability", "train", "--config", "configs/answerability_synthetic.py",
                   "--workdir", str(ran), "--config.data.synthetic=false",
                   f"--config.data.root={tmp_path / 'none'}"]) == 2
  assert capsys.readouterr().err.strip() == (
      f"rsvqa-jax answerability train: error: config data.root={tmp_path / 'none'}: folder does "
      "not exist")
  assert {p: p.stat().st_mtime_ns for p in ran.iterdir()} == before
