"""A plain `pip install .` ships the configs (found by name from any folder) and no benchmarks."""
import os
import shutil
import subprocess
import sys

import pytest

from rsvqa_jax import config as config_lib
from rsvqa_jax.errors import RSVQAError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_configs_are_found_by_name_from_any_folder(tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  for name in ("configs/study_synthetic.py:quick", "study_synthetic.py:quick", "study_synthetic"):
    assert config_lib.load(name).study.language_models
  with pytest.raises(RSVQAError, match="nosuch.py: config file not found"):
    config_lib.load("configs/nosuch.py")


def test_a_path_into_another_folder_is_not_replaced_by_the_installed_config(tmp_path,
                                                                            monkeypatch):
  """A mistyped folder (myexpp/ for myexp/) ran the installed config of the same file name in
  place of the user's own edited copy, silently."""
  monkeypatch.chdir(tmp_path)
  (tmp_path / "myexp").mkdir()
  with open(os.path.join(ROOT, "configs", "synthetic_tiny.py")) as f:
    (tmp_path / "myexp" / "synthetic_tiny.py").write_text(
        f.read().replace("c.train.num_epochs = 5", "c.train.num_epochs = 77"))
  assert config_lib.load("myexp/synthetic_tiny.py").train.num_epochs == 77
  for typo in ("myexpp/synthetic_tiny.py", str(tmp_path / "myexpp" / "synthetic_tiny.py")):
    with pytest.raises(RSVQAError, match=r"synthetic_tiny.py: config file not found \(the "
                       r"installed config of that name is found as synthetic_tiny.py or "
                       r"configs/synthetic_tiny.py\)"):
      config_lib.load(typo + ":blind")
  assert config_lib.load("./configs/synthetic_tiny.py").train.num_epochs == 5
  (tmp_path / "synthetic_tiny").mkdir()  # a workdir named after its config
  assert config_lib.load("synthetic_tiny").train.num_epochs == 5
  with pytest.raises(RSVQAError, match="myexp: is a folder; give a config file"):
    config_lib.load("myexp")


def test_a_plain_install_ships_configs_and_no_benchmarks(tmp_path):
  # built from a copy: setuptools leaves build/ in the tree it builds, whose stale files a later
  # build of the checkout would ship
  source = tmp_path / "source"
  shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
      ".git", "build", "dist", "*.egg-info", "__pycache__", ".pytest_cache", "runs", "site"))
  target = tmp_path / "site"
  out = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                        "--no-build-isolation", "--target", str(target), str(source)],
                       capture_output=True, text=True, timeout=600)
  assert out.returncode == 0, out.stderr[-2000:]
  installed = set(os.listdir(target))
  assert "rsvqa_jax" in installed and "benchmarks" not in installed
  configs = set(os.listdir(target / "rsvqa_jax" / "configs"))
  assert {"study_synthetic.py", "synthetic_tiny.py", "lr_table1.py"} <= configs
  code = ("import sys; sys.path.insert(0, sys.argv[1]); from rsvqa_jax import config; "
          "print(config.config_path('configs/synthetic_tiny.py'))")
  found = subprocess.run([sys.executable, "-c", code, str(target)], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120, env={
                             **os.environ, "PYTHONPATH": ""})
  assert found.returncode == 0, found.stderr[-2000:]
  assert found.stdout.strip().startswith(str(target))


def test_version_and_verbosity_flags(capsys):
  import logging  # pylint: disable=g-import-not-at-top
  import rsvqa_jax  # pylint: disable=g-import-not-at-top
  from rsvqa_jax import cli  # pylint: disable=g-import-not-at-top
  with pytest.raises(SystemExit) as done:
    cli.main(["--version"])
  assert done.value.code == 0 and capsys.readouterr().out.strip() == (
      f"rsvqa-jax {rsvqa_jax.__version__}")
  spec = os.path.join(ROOT, "configs", "hr.py")
  assert cli.main(["-q", "config", "--config", spec]) == 0
  assert logging.getLogger("rsvqa_jax").level == logging.WARNING
  capsys.readouterr()
  assert cli.main(["-v", "config", "--config", spec]) == 0
  assert logging.getLogger("rsvqa_jax").level == logging.DEBUG
  # -v shows debug lines (it once showed nothing more: nothing was logged at DEBUG)
  assert f"DEBUG: config file {spec}\n" in capsys.readouterr().err
  assert cli.main(["config", "--config", spec]) == 0
  assert logging.getLogger("rsvqa_jax").level == logging.INFO
  assert "DEBUG" not in capsys.readouterr().err


def test_the_repository_root_holds_source_only():
  """No wheel, archive or build output is committed beside the sources (a stray pyflakes wheel
  once was)."""
  listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)
  if listed.returncode != 0:  # an sdist, not a checkout: nothing is committed to check
    return
  at_root = [p for p in listed.stdout.splitlines() if "/" not in p]
  allowed = (".md", ".py", ".txt", ".toml", ".yml", ".cfg", ".gitignore")
  assert at_root and all(p.endswith(allowed) for p in at_root), at_root
