"""tools/: the one-off utilities run as scripts."""
import os
import subprocess
import sys

import numpy as np

import subprocess_env

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run(*args):
  env = subprocess_env.env()
  return subprocess.run([sys.executable, os.path.join(ROOT, "tools", "convert_utable.py"), *args],
                        capture_output=True, text=True, env=env)


def test_convert_utable_writes_plain_table(tmp_path):
  table = np.arange(12, dtype=np.float64).reshape(4, 3)
  src = tmp_path / "utable.npy"
  obj = np.empty((), dtype=object)
  obj[()] = table
  np.save(src, obj, allow_pickle=True)
  dst = tmp_path / "utable_f32.npy"
  r = _run(str(src), str(dst))
  assert r.returncode == 0, r.stderr
  out = np.load(dst)  # loads without allow_pickle: a plain array
  assert out.dtype == np.float32
  np.testing.assert_array_equal(out, table.astype(np.float32))


def test_convert_utable_missing_file_is_one_line(tmp_path):
  r = _run(str(tmp_path / "nope.npy"), str(tmp_path / "out.npy"))
  assert r.returncode == 2
  assert r.stderr.strip().count("\n") == 0 and "no such file" in r.stderr


def test_cli_fuzz_tells_a_traceback_and_a_hang_from_a_one_line_error(tmp_path, monkeypatch):
  from tools import cli_fuzz  # pylint: disable=g-import-not-at-top
  python = [sys.executable, "-c"]
  assert cli_fuzz.outcome([*python, "raise ValueError('odd')"], tmp_path, 60)[:2] == (
      "ValueError: odd", 1)
  assert cli_fuzz.outcome([*python, "import time; time.sleep(60)"], tmp_path, 0.5) == (
      "no answer in 0.5 s", None, "")
  assert cli_fuzz.outcome([*python, "import sys; sys.exit('error: odd')"], tmp_path, 60) == (
      None, 1, "error: odd\n")
  assert cli_fuzz.with_option(["--out", "x"], "--out", "y") == ["--out", "y"]
  assert cli_fuzz.with_option(["--out", "x"], "--seed", "-1") == ["--out", "x", "--seed", "-1"]
  # One subcommand through the real command line: each of its options given two odd values.
  monkeypatch.setattr(cli_fuzz, "VALUES", ("nan", cli_fuzz.MISSING))
  said = []
  assert cli_fuzz.fuzz(str(tmp_path), ["config"], 120, said.append) == [], said
  assert "--config" in cli_fuzz.options("config")
  # A missing path a run creates (synth --out) is missing again for the next run.
  monkeypatch.setattr(cli_fuzz, "VALUES", (cli_fuzz.MISSING,))
  monkeypatch.setattr(cli_fuzz, "options", lambda command: ["--out"])
  monkeypatch.setattr(cli_fuzz, "base_arguments", lambda root: {"synth": [
      "--out", "o", "--images", "3", "--questions-per-image", "1"]})
  assert cli_fuzz.fuzz(str(tmp_path), ["synth"], 120, said.append) == [], said
  assert not (tmp_path / "missing").exists()


def test_file_fuzz_damages_each_value_and_reads_a_damaged_copy(tmp_path):
  from tools import file_fuzz  # pylint: disable=g-import-not-at-top
  parsed = {"questions": [{"id": 0, "active": True}, {"id": 1, "active": True}], "version": 2}
  damages = file_fuzz.value_damages(parsed)
  per_value = 1 + len(file_fuzz.VALUES)  # removed, or one odd value
  assert len(damages) == 4 + 3 * per_value  # the list's four, id, active and version's
  assert damages["questions/0/id removed"](parsed) == {
      "questions": [{"active": True}, {"id": 1, "active": True}], "version": 2}
  assert damages["questions: all inactive"](parsed)["questions"] == [
      {"id": 0, "active": False}, {"id": 1, "active": False}]
  assert damages["version=null#0"](parsed) == {**parsed, "version": None}
  assert parsed["questions"][0] == {"id": 0, "active": True}  # the original is left whole
  source = tmp_path / "source"
  source.mkdir()
  (source / "a.json").write_text("{}")
  (source / "b.json").write_text("[]")
  where = str(tmp_path / "case")
  file_fuzz.damaged_copy(str(source), where, "a.json", lambda b: b + b"x", link=True)
  assert (tmp_path / "case" / "a.json").read_bytes() == b"{}x"
  assert (source / "a.json").read_bytes() == b"{}"
  assert os.stat(os.path.join(where, "b.json")).st_ino == (source / "b.json").stat().st_ino
  file_fuzz.damaged_copy(str(source), where, "a.json", lambda b: "loop", link=False)
  assert os.readlink(os.path.join(where, "a.json")) == "a.json"
  assert os.stat(os.path.join(where, "b.json")).st_ino != (source / "b.json").stat().st_ino
  # A few damages of a synthetic set through the real command line; another kind's damaged copy
  # left by an earlier fuzz in the same folder goes (`tables --runs cases/` read it).
  (tmp_path / "fuzz" / "cases" / "run").mkdir(parents=True)
  assert file_fuzz.main(["--workdir", str(tmp_path / "fuzz"), "--commands", "validate",
                         "--sample", "6"]) == 0
  assert not (tmp_path / "fuzz" / "cases" / "run").exists()
