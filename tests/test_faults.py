"""Killing `train`, `synth` or `study` loses nothing: the rerun ends as if never interrupted.

Each case starts `rsvqa-jax train` on a small synthetic config in a subprocess, waits for a
moment defined by what the run has done (its interrupt handler installed, its first metrics
line, its first checkpoint) rather than by a clock, freezes it there (SIGSTOP: a busy machine
that delays the test between seeing the moment and signalling cannot let the run finish in
between), sends SIGINT or SIGKILL and lets it go on (SIGCONT), checks the exit
(130 and one line for Ctrl-C), runs the same command again to the end and compares every
parameter with a run never interrupted. All runs share one cache, filled by the reference run.
`synth` killed before and while it writes leaves no half dataset and reruns to the same bytes;
a study killed while a model trains reruns to the same numbers.
"""
import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import jax
import numpy as np
import pytest

from rsvqa_jax import storage
from rsvqa_jax.train import restore
from test_synthetic import _files  # relative path -> bytes of every file under a folder
import subprocess_env

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG = os.path.join(ROOT, "configs", "synthetic_tiny.py")


def _command(workdir, cache):
  return [sys.executable, "-m", "rsvqa_jax.cli", "train", "--config", CONFIG, "--workdir", workdir,
          f"--config.data.cache_dir={cache}", "--config.train.progress_bar=false",
          "--config.train.num_epochs=3", "--config.train.checkpoint_every_steps=10"]


def _env():
  return subprocess_env.env()


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


def _state(pid):
  """The process's state letter in /proc (T: stopped)."""
  with open(f"/proc/{pid}/stat") as f:
    return f.read().rsplit(")", 1)[1].split()[0]


def _frozen_at(proc, seen, what, still=lambda: True):
  """Polls until `seen()`, then stops the child (SIGSTOP, waited for) and checks it is alive and
  `still()` holds: whatever the machine's load, the signal sent next finds it at that moment."""
  while not seen():
    assert proc.poll() is None, f"the run ended before {what}"
    time.sleep(0.01)
  os.kill(proc.pid, signal.SIGSTOP)
  while _state(proc.pid) not in ("T", "t"):
    assert proc.poll() is None, f"the run ended at {what}"
    time.sleep(0.001)
  assert proc.poll() is None and still(), f"the run went past {what} before it was stopped"


def _signal_frozen(proc, sig):
  """`sig` to a child _frozen_at stopped, delivered as it goes on."""
  proc.send_signal(sig)
  os.kill(proc.pid, signal.SIGCONT)  # not reaped yet: the pid is still the child's


def _wait_for(proc, moment, workdir):
  _frozen_at(proc, lambda: MOMENTS[moment](proc.pid, workdir), f"the moment {moment!r}")


def _params(workdir):
  _, state, step = restore.restore(workdir, ["val"], which="last", warn=lambda m: None)
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
    _signal_frozen(proc, sig)
    _, err = proc.communicate(timeout=300)
  finally:
    proc.kill()
  if sig == signal.SIGINT:
    assert proc.returncode == 130, err[-2000:]
    assert err.strip().splitlines()[-1].endswith("interrupted (SIGINT); run the same command "
                                                 "again: it keeps what was finished")
    assert "Traceback" not in err
  else:
    assert proc.returncode == -signal.SIGKILL
  lock = os.path.join(workdir, storage.LOCK)
  record = pathlib.Path(lock).read_text() if os.path.exists(lock) else ""
  # an interrupt empties the owner record (the resume warned the owner was killed); a kill can't
  assert bool(record) == (sig == signal.SIGKILL), record
  _run(workdir, cache)
  step, params = _params(workdir)
  assert step == ref_step
  for a, b in zip(params, ref_params):
    np.testing.assert_array_equal(a, b)
  with open(os.path.join(workdir, "metrics.jsonl")) as f:
    steps = [json.loads(line)["step"] for line in f if '"split": "train"' in line]
  assert steps == sorted(set(steps))  # no record written twice by the two runs


# --- synth and study --------------------------------------------------------------------------

# 150 images: 3 s of writing after the "writing" moment (3 images), not the 0.5 s of 30, should
# the test be slow to see it
SYNTH = ["synth", "--variant", "lr", "--images", "150", "--questions-per-image", "6", "--seed",
         "3"]


def _synth_command(out):
  return [sys.executable, "-m", "rsvqa_jax.cli", *SYNTH, "--out", out]


def _building_images(parent, name):
  """Images written so far by a generation of `name` in its temporary folder under `parent`."""
  count = 0
  for entry in os.listdir(parent):
    if entry.startswith(f".tmp-{name}-"):
      for _, _, names in os.walk(os.path.join(parent, entry)):
        count += sum(n.endswith(".tif") for n in names)
  return count


@pytest.mark.parametrize("sig,moment", [(signal.SIGINT, "started"), (signal.SIGKILL, "writing")],
                         ids=["int-started", "kill-writing"])
def test_killed_synth_reruns_to_the_same_dataset(tmp_path, sig, moment):
  reference = str(tmp_path / "reference")
  assert subprocess.run(_synth_command(reference), cwd=ROOT, env=_env(), capture_output=True,
                        timeout=600).returncode == 0
  out = str(tmp_path / "lr")
  proc = subprocess.Popen(_synth_command(out), cwd=ROOT, env=_env(), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)
  moments = {"started": lambda: _handler_installed(proc.pid),
             "writing": lambda: _building_images(str(tmp_path), "lr") >= 3}
  try:  # still writing when stopped: its temporary folder not yet renamed to OUT
    _frozen_at(proc, moments[moment], f"the moment {moment!r}", still=moments[moment])
    _signal_frozen(proc, sig)
    _, err = proc.communicate(timeout=300)
  finally:
    proc.kill()
  if sig == signal.SIGINT:  # synth keeps nothing of a killed run: the line must not say it does
    assert proc.returncode == 130
    assert err.strip().splitlines()[-1].endswith(
        "interrupted (SIGINT); run the same command again: it writes the dataset again from the "
        "start"), err[-2000:]
  else:
    assert proc.returncode == -signal.SIGKILL
  assert not os.path.exists(os.path.join(out, "synthetic.json"))  # never a half dataset
  rerun = subprocess.run(_synth_command(out), cwd=ROOT, env=_env(), capture_output=True,
                         text=True, timeout=600)
  assert rerun.returncode == 0, rerun.stderr[-2000:]
  assert _files(out) == _files(reference)
  assert not [e for e in os.listdir(tmp_path) if e.startswith(".tmp-")]  # the leftover is gone


def _study_command(workdir):
  overrides = ["study.images=30", "study.questions_per_image=8",
               "study.language_models=('skipthoughts',)", "study.lm_weights=('finetuned',)",
               "study.seeds=(0,)", "study.repeats=2", "study.balanced.enabled=false",
               "study.shortcuts.enabled=false",
               "study.compilation_cache=false", "image.arch=resnet18", "image.checkpoint=random",
               "image.width=8", "image.image_size=32", "train.num_epochs=2",
               "train.batch_size=32", "train.eval_batch_size=64"]
  return [sys.executable, "-m", "rsvqa_jax.cli", "study", "--config",
          os.path.join(ROOT, "configs", "study_synthetic.py"), "--workdir", workdir,
          *(f"--config.{o}" for o in overrides)]


def _cells(workdir):
  """The study's numbers: every run's test accuracy table and adversarial means."""
  with open(os.path.join(workdir, "study.json")) as f:
    study = json.load(f)
  out = []
  for cell in study["cells"]:
    for role in ("reference", "blind"):
      for run in cell[role]:
        out.append((role, run["accuracy"]["oa"], run["accuracy"]["per_type"],
                    {k: v["oa"] for k, v in run["adversarial"].items()}))
  return out


def test_killed_study_reruns_to_the_same_numbers(tmp_path):
  reference = str(tmp_path / "reference")
  done = subprocess.run(_study_command(reference), cwd=ROOT, env=_env(), capture_output=True,
                        text=True, timeout=900)
  assert done.returncode == 0, done.stderr[-3000:]
  workdir = str(tmp_path / "study")
  proc = subprocess.Popen(_study_command(workdir), cwd=ROOT, env=_env(), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)
  blind = os.path.join(workdir, "runs", "skipthoughts_finetuned_blind", "seed0")
  try:  # the reference model is done, the blind one is training
    _frozen_at(proc, lambda: _train_records(blind) >= 1, "the blind model's training")
    _signal_frozen(proc, signal.SIGKILL)
    proc.communicate(timeout=300)
  finally:
    proc.kill()
  rerun = subprocess.run(_study_command(workdir), cwd=ROOT, env=_env(), capture_output=True,
                         text=True, timeout=900)
  assert rerun.returncode == 0, rerun.stderr[-3000:]
  assert _cells(workdir) == _cells(reference)
  assert os.path.exists(os.path.join(workdir, "report.md"))


def test_an_interrupt_while_storage_is_half_imported_still_ends_the_process():
  """A SIGINT that arrived while rsvqa_jax.storage was being imported (the module there, its
  functions not yet) raised AttributeError in the watcher thread: the interrupt was lost and the
  command ran to the end with status 0."""
  code = ("import os, signal, sys, time, types\n"
          "from rsvqa_jax import cli\n"
          "cli.exit_on_interrupt('rsvqa-jax test')\n"
          "sys.modules['rsvqa_jax.storage'] = types.ModuleType('rsvqa_jax.storage')\n"
          "os.kill(os.getpid(), signal.SIGINT)\n"
          "time.sleep(60)\n")
  out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=_env(), capture_output=True,
                       text=True, timeout=120)
  assert out.returncode == 130, out.stderr[-2000:]
  assert out.stderr.strip() == ("rsvqa-jax test: interrupted (SIGINT); run the same command "
                                "again: it keeps what was finished")
