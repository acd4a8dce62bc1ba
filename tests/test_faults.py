"""Killing `train` at any moment loses nothing: the rerun ends with the uninterrupted parameters.

Each case starts `rsvqa-jax train` on a small synthetic config in a subprocess, waits for a
moment defined by what the run has done (its interrupt handler installed, its first metrics
line, its first checkpoint) rather than by a clock, sends SIGINT or SIGKILL, checks the exit
(130 and one line for Ctrl-C), runs the same command again to the end and compares every
parameter with a run never interrupted. All runs share one cache, filled by the reference run.
"""
import json
import os
import signal
import subprocess
import sys
import time

import jax
import numpy as np
import pytest

from rsvqa_jax.train import restore

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG = os.path.join(ROOT, "configs", "synthetic_tiny.py")


def _command(workdir, cache):
  return [sys.executable, "-m", "rsvqa_jax.cli", "train", "--config", CONFIG, "--workdir", workdir,
          f"--config.data.cache_dir={cache}", "--config.train.progress_bar=false",
          "--config.train.num_epochs=3", "--config.train.checkpoint_every_steps=10"]


def _env():
  return dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))


def _run(workdir, cache):
  out = subprocess.run(_command(workdir, cache), cwd=ROOT, env=_env(), capture_output=True,
                       text=True, timeout=900)
  assert out.returncode == 0, out.stderr[-3000:]
  return out


def _handler_installed(pid):
  """Whether the CLI's interrupt handler is in place: it catches SIGTERM, installed last."""
  with open(f"/proc/{pid}/status") as f:
    caught = next(int(line.split()[1], 16) for line in f if line.startswith("SigCgt:"))
  return bool(caught & (1 << (signal.SIGTERM - 1)))


def _train_records(workdir):
  try:
    with open(os.path.join(workdir, "metrics.jsonl")) as f:
      return sum('"split": "train"' in line for line in f)
  except OSError:
    return 0


MOMENTS = {
    # the handler is in place, nothing has run yet (imports, data reading, compilation ahead)
    "started": lambda pid, workdir: _handler_installed(pid),
    # in the middle of training, before any checkpoint
    "training": lambda pid, workdir: _train_records(workdir) >= 1,
    # a checkpoint has been committed (and the next ones are being written)
    "checkpointed": lambda pid, workdir: os.path.isdir(os.path.join(workdir, "checkpoints", "10")),
}


def _wait_for(proc, moment, workdir):
  while not MOMENTS[moment](proc.pid, workdir):
    assert proc.poll() is None, f"the run ended before the moment {moment!r}"
    time.sleep(0.01)


def _params(workdir):
  _, state, step = restore.restore(workdir, ["val"], which="last", log=lambda m: None)
  return step, [np.asarray(x) for x in jax.tree.leaves(jax.device_get(state.params))]


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
  base = tmp_path_factory.mktemp("faults")
  cache = str(base / "cache")
  workdir = str(base / "reference")
  _run(workdir, cache)
  return base, cache, _params(workdir)


@pytest.mark.parametrize("sig,moment", [
    (signal.SIGINT, "started"), (signal.SIGINT, "training"), (signal.SIGINT, "checkpointed"),
    (signal.SIGKILL, "training"), (signal.SIGKILL, "checkpointed")],
                         ids=["int-started", "int-training", "int-checkpointed",
                              "kill-training", "kill-checkpointed"])
def test_killed_train_resumes_to_the_same_parameters(reference, sig, moment):
  base, cache, (ref_step, ref_params) = reference
  workdir = str(base / f"{signal.Signals(sig).name}_{moment}")
  proc = subprocess.Popen(_command(workdir, cache), cwd=ROOT, env=_env(),
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
  try:
    _wait_for(proc, moment, workdir)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=300)
  finally:
    proc.kill()
  if sig == signal.SIGINT:
    assert proc.returncode == 130, err[-2000:]
    assert err.strip().splitlines()[-1].endswith("interrupted (SIGINT); run the same command "
                                                 "again to resume")
    assert "Traceback" not in err
  else:
    assert proc.returncode == -signal.SIGKILL
  _run(workdir, cache)
  step, params = _params(workdir)
  assert step == ref_step
  for a, b in zip(params, ref_params):
    np.testing.assert_array_equal(a, b)
  with open(os.path.join(workdir, "metrics.jsonl")) as f:
    steps = [json.loads(line)["step"] for line in f if '"split": "train"' in line]
  assert steps == sorted(set(steps))  # no record written twice by the two runs
