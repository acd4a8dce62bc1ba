"""How the shell hands over the process: a reader that leaves (`| head -1`), standard output on a
full device or closed, an interrupt by a closed terminal, a deleted current folder, an ASCII
locale, JAX settings the runs are not made for. The work finishes, or one line says why not."""
import os
import signal
import stat
import subprocess
import sys

import pytest

from rsvqa_jax import cli
from rsvqa_jax.errors import RSVQAError
import subprocess_env

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _env(**more):
  return subprocess_env.env(**more)


def _cli(args, **kwargs):
  return subprocess.run([sys.executable, "-m", "rsvqa_jax.cli", *args], cwd=ROOT, env=_env(),
                        timeout=600, **kwargs)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
  out = str(tmp_path_factory.mktemp("streams") / "lr")
  _cli(["-q", "synth", "--variant", "lr", "--images", "30", "--questions-per-image", "6",
        "--out", out], check=True, capture_output=True)
  return out


def _files(folder):
  return sorted(os.path.relpath(os.path.join(d, f), folder)
                for d, _, files in os.walk(folder) for f in files)


def test_a_reader_that_left_neither_stops_the_work_nor_fails_the_command(dataset, tmp_path):
  """`analyze ... | head -1`: the command printed a table, then wrote its figure; a reader gone
  by then ended it with 'error: broken pipe' (status 2) before the figure, or with 'Exception
  ignored ... BrokenPipeError' (status 120) at exit."""
  complete = str(tmp_path / "complete")
  _cli(["-q", "analyze", "--data", dataset, "--out", complete], check=True, capture_output=True)
  read, write = os.pipe()
  os.close(read)  # the reader left before the first line
  try:
    out = _cli(["-q", "analyze", "--data", dataset, "--out", str(tmp_path / "piped")],
               stdout=write, stderr=subprocess.PIPE, text=True)
  finally:
    os.close(write)
  assert out.returncode == 0 and out.stderr == "", out.stderr[-2000:]
  assert _files(str(tmp_path / "piped")) == _files(complete)


def test_standard_output_on_a_full_device_is_said_once_and_the_files_are_written(dataset,
                                                                                 tmp_path):
  assert stat.S_ISCHR(os.stat("/dev/full").st_mode)  # a device, not a file left in its place
  with open("/dev/full", "w") as full:
    out = _cli(["-q", "analyze", "--data", dataset, "--out", str(tmp_path / "o")], stdout=full,
               stderr=subprocess.PIPE, text=True)
  assert out.returncode == 0
  assert out.stderr.splitlines() == ["rsvqa-jax: standard output: no space left on device; the "
                                     "printed lines are lost, the files are written as usual"]
  assert "answer_distribution.png" in os.listdir(tmp_path / "o")


def test_closed_standard_streams_do_not_fail_the_command(dataset):
  """`2>&-`: the progress bars and print() wrote to None, an AttributeError that stopped train
  before its first step."""
  out = _cli(["validate", "--data", dataset], stdin=subprocess.DEVNULL,
             preexec_fn=lambda: (os.close(1), os.close(2)))
  assert out.returncode == 0


def test_a_closed_terminal_ends_a_command_as_an_interrupt_does():
  """SIGHUP (an ssh session dropped) ended the process with no line and left its lock's owner
  record and temporary files, as a kill does."""
  code = ("import os, signal, time\n"
          "from rsvqa_jax import cli\n"
          "cli.exit_on_interrupt('rsvqa-jax test')\n"
          "os.kill(os.getpid(), signal.SIGHUP)\n"
          "time.sleep(60)\n")
  out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=_env(), capture_output=True,
                       text=True, timeout=120)
  assert out.returncode == 128 + signal.SIGHUP, out.stderr[-2000:]
  assert out.stderr.strip() == ("rsvqa-jax test: interrupted (SIGHUP); run the same command "
                                "again: it keeps what was finished")


@pytest.mark.parametrize("key,said", [
    ("JAX_ENABLE_X64", "JAX setting jax_enable_x64 is on (JAX_ENABLE_X64=1 in the environment, "
                       "or jax.config.update): rsvqa_jax computes in float32"),
    ("JAX_DISABLE_JIT", "JAX setting jax_disable_jit is on (JAX_DISABLE_JIT=1 in the "
                        "environment, or jax.config.update): rsvqa_jax compiles its steps"),
])
def test_jax_settings_the_runs_are_not_made_for_are_refused(tmp_path, key, said):
  """JAX_ENABLE_X64=1 trained and evaluated other numbers (OA 25 against 50 from one checkpoint)
  and refused a float32 run's resume naming shapes; JAX_DISABLE_JIT=1 failed in the AOT path.
  Refused where a run is built, so from Python too (a notebook that turned x64 on)."""
  out = subprocess.run([sys.executable, "-m", "rsvqa_jax.cli", "train", "--config",
                        os.path.join(ROOT, "configs", "synthetic_tiny.py"), "--workdir",
                        str(tmp_path / "run"), "--config.data.synthetic_images=12",
                        f"--config.data.cache_dir={tmp_path / 'cache'}"], cwd=ROOT,
                       env=_env(**{key: "1"}), capture_output=True, text=True, timeout=600)
  assert out.returncode == 2
  assert out.stderr.strip().splitlines()[-1].startswith(f"rsvqa-jax train: error: {said}")


def test_a_deleted_current_folder_is_one_line(tmp_path, capsys, monkeypatch):
  gone = tmp_path / "gone"
  gone.mkdir()
  monkeypatch.chdir(gone)
  gone.rmdir()
  assert cli.main(["config", "--config", os.path.join(ROOT, "configs", "synthetic_tiny.py")]) == 2
  assert capsys.readouterr().err.strip() == (
      "rsvqa-jax config: error: the current folder no longer exists (deleted or moved): cd to "
      "another one and run the command again")


def test_a_non_ascii_argument_under_an_ascii_locale_is_one_line(monkeypatch):
  """tensorstore could not open such a workdir ('Unable to cast Python instance'), and a
  dataset folder that exists was said to be missing."""
  monkeypatch.setattr(sys, "getfilesystemencoding", lambda: "ascii")
  with pytest.raises(RSVQAError, match="is not ASCII, and file names are read as ascii here"):
    cli.check_environment({}, ["train", "--workdir", "run \udce9"])
  cli.check_environment({}, ["train", "--workdir", "run"])
  monkeypatch.undo()
  cli.check_environment({}, ["train", "--workdir", "run \u00e9"])  # UTF-8 file names: fine


def test_a_current_folder_tensorstore_cannot_open_is_one_line(tmp_path, monkeypatch):
  """Under Latin-1, a relative workdir inside `café` was written to `cafÃ©` by tensorstore (its
  arrays apart from their metadata: 'done', with no checkpoint that restores); a folder name
  that is not UTF-8 printed a thousand lines of orbax's tracebacks after the first epoch."""
  accented = tmp_path / "caf\u00e9"
  accented.mkdir()
  monkeypatch.chdir(accented)
  cli.check_environment({}, ["train", "--workdir", "run"])  # UTF-8 file names: fine
  monkeypatch.setattr(sys, "getfilesystemencoding", lambda: "iso8859-1")
  with pytest.raises(RSVQAError) as e:
    cli.check_environment({}, ["train", "--workdir", "run"])
  assert str(e.value) == ("the current folder's path is not ASCII, and file names are read as "
                          "iso8859-1 here (the locale): run it with LC_ALL=C.UTF-8 (or "
                          "PYTHONUTF8=1)")
  monkeypatch.undo()
  undecodable = os.fsdecode(os.path.join(os.fsencode(str(tmp_path)), b"lat\xe9"))
  os.mkdir(undecodable)
  monkeypatch.chdir(undecodable)
  with pytest.raises(RSVQAError, match=r"^the current folder's path holds bytes that are not "
                     r"UTF-8 \(.*lat\\udce9\); rename it: tensorstore"):
    cli.check_environment({}, ["train", "--workdir", "run"])
  monkeypatch.chdir(tmp_path)
  with pytest.raises(RSVQAError, match=r"^a path or value of the command line holds bytes that "
                     r"are not UTF-8"):
    cli.check_environment({}, ["train", "--workdir", undecodable])


@pytest.mark.parametrize("key,value,said", [
    ("JAX_PLATFORMS", "nosuch", "environment JAX_PLATFORMS=nosuch: JAX could not start that "
                                "backend ("),
    ("JAX_ENABLE_X64", "maybe", "a JAX setting of the environment: ValueError: invalid truth "
                                "value 'maybe'"),
    ("JAX_DEFAULT_MATMUL_PRECISION", "bogus", "a JAX setting of the environment: ValueError: "
                                              "Invalid value \"bogus\""),
])
def test_a_jax_setting_jax_refuses_is_named_as_the_setting(tmp_path, key, value, said):
  """JAX_PLATFORMS=cuda on a machine without one failed as a bare 'AssertionError (an input this
  command does not check yet)'; values JAX refuses likewise, all blamed on the input."""
  out = subprocess.run([sys.executable, "-m", "rsvqa_jax.cli", "train", "--config",
                        os.path.join(ROOT, "configs", "synthetic_tiny.py"), "--workdir",
                        str(tmp_path / "run")], cwd=ROOT, env=_env(**{key: value}),
                       capture_output=True, text=True, timeout=600)
  assert out.returncode == 2
  assert out.stderr.startswith(f"rsvqa-jax train: error: {said}"), out.stderr[-2000:]
  assert "does not check yet" not in out.stderr and len(out.stderr.strip().splitlines()) == 1
  assert not (tmp_path / "run").exists()


def test_a_backend_that_cannot_start_is_named_wherever_jax_first_touched_it(monkeypatch):
  """`evaluate` first starts the backend in an array op, whose frame JAX's traceback filtering
  leaves in jax/_src/dispatch.py: its error read 'an input this command does not check yet'."""
  import types  # pylint: disable=g-import-not-at-top

  def devices():
    raise RuntimeError("Unable to initialize backend 'CPU'")

  error = RuntimeError("Unable to initialize backend 'CPU': ...")
  monkeypatch.setenv("JAX_PLATFORMS", "CPU")
  monkeypatch.setitem(sys.modules, "jax", types.SimpleNamespace(devices=devices))
  assert cli._jax_setting_error(error) == (  # pylint: disable=protected-access
      "environment JAX_PLATFORMS=CPU: JAX could not start that backend (RuntimeError: Unable to "
      "initialize backend 'CPU': ...); unset it, or install the jax build for that device")
  monkeypatch.setitem(sys.modules, "jax", types.SimpleNamespace(devices=lambda: ["cpu:0"]))
  assert cli._jax_setting_error(ValueError("ours")) is None  # pylint: disable=protected-access
