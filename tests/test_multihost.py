"""Two processes on this machine (2 CPU devices each, gloo collectives) train one model together.

They meet through jax.distributed, started by the train loop from JAX_COORDINATOR_ADDRESS /
JAX_NUM_PROCESSES / JAX_PROCESS_ID as on a real cluster. Each host loads its own share of every
global batch and buckets its rows itself, so the hosts must agree on one token width per step
(sharding.agree_on_width); the length buckets below make them disagree often. Both processes
must end with the same parameters, write one set of checkpoints, and find the run finished when
started again.
"""
import json
import os
import socket
import subprocess
import sys

import numpy as np
import pytest

from rsvqa_jax.errors import RSVQAError
from rsvqa_jax.train import sharding
import subprocess_env

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

SCRIPT = r"""
import json, sys
import jax, numpy as np
sys.path.insert(0, {here!r})
from rsvqa_jax.train import loop, sharding
from test_train_support import tiny_config, tiny_task

recut = []
agree = sharding.agree_on_width
def counting(batch, columns, names):
  out = agree(batch, columns, names)
  recut.append(out["tokens"].shape[1] != batch["tokens"].shape[1])
  return out
sharding.agree_on_width = counting

# Presence questions take 5 or 6 tokens, rural/urban 8: at some steps one host's 4 rows fit the
# 5-token bucket while the other's need 8.
dataset, features = tiny_task(n_images=45)
config = tiny_config(length_buckets=(5, 8), batch_size=8, num_epochs=2)
out = loop.train(config, {workdir!r}, dataset=dataset, features=features, log=lambda m: None)
params = [np.asarray(x).ravel()[:20].tolist() for x in jax.tree.leaves(out["state"].params)]
again = loop.train(config, {workdir!r}, dataset=dataset, features=features, log=lambda m: None)
print("RESULT" + json.dumps({{
    "process": jax.process_index(), "processes": jax.process_count(),
    "devices": jax.device_count(), "step": out["step"], "best_oa": out["best_oa"],
    "finished_again": again["finished"], "recut": sum(recut), "steps_seen": len(recut),
    "params": params}}))
"""


def _free_port():
  with socket.socket() as s:
    s.bind(("localhost", 0))
    return s.getsockname()[1]


def test_two_processes_train_one_model(tmp_path):
  workdir = str(tmp_path / "run")
  script = SCRIPT.format(here=HERE, workdir=workdir)
  port = _free_port()
  procs = []
  for pid in range(2):
    env = subprocess_env.env(XLA_FLAGS="--xla_force_host_platform_device_count=2",
                             JAX_PLATFORMS="cpu", JAX_COORDINATOR_ADDRESS=f"localhost:{port}",
                             JAX_NUM_PROCESSES="2", JAX_PROCESS_ID=str(pid))
    procs.append(subprocess.Popen([sys.executable, "-c", script], env=env, cwd=ROOT,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
  outputs, results = [], []
  try:
    for p in procs:
      try:
        results.append(p.communicate(timeout=600))
      except subprocess.TimeoutExpired:
        for q in procs:
          q.kill()
        tails = [q.communicate()[1][-2000:] for q in procs]
        pytest.fail("a process hung; stderr tails:\n" + "\n-----\n".join(tails))
  finally:
    for p in procs:
      p.kill()
  for p, (stdout, stderr) in zip(procs, results):
    assert p.returncode == 0, stderr[-3000:]
    outputs.append(json.loads(stdout.split("RESULT", 1)[1]))
  first, second = sorted(outputs, key=lambda o: o["process"])
  assert (first["processes"], first["devices"]) == (2, 4)
  assert first["step"] == second["step"] > 0 and first["best_oa"] == second["best_oa"]
  assert first["recut"] + second["recut"] > 0  # the hosts did disagree on a width
  assert first["steps_seen"] == second["steps_seen"] == first["step"]
  for a, b in zip(first["params"], second["params"]):
    np.testing.assert_array_equal(a, b)
  assert first["finished_again"] and second["finished_again"]
  steps = sorted(int(d) for d in os.listdir(os.path.join(workdir, "checkpoints")) if d.isdigit())
  assert steps and steps[-1] == first["step"]
  with open(os.path.join(workdir, "metrics.jsonl"), encoding="utf-8") as f:
    train_steps = [json.loads(line)["step"] for line in f if '"split": "train"' in line]
  assert len(train_steps) == len(set(train_steps))  # written by one process only


@pytest.mark.parametrize("processes,process_id,message", [
    ("abc", "0", r"environment JAX_NUM_PROCESSES='abc': must be a whole number >= 1$"),
    ("0", "0", r"environment JAX_NUM_PROCESSES='0': must be a whole number >= 1$"),
    ("2", "2", r"environment JAX_PROCESS_ID='2': must be a whole number from 0 to 1$"),
    ("2", "-1", r"environment JAX_PROCESS_ID='-1': must be a whole number from 0 to 1$"),
], ids=["text", "zero", "id_too_large", "negative_id"])
def test_a_mistyped_process_count_or_id_is_named(monkeypatch, processes, process_id, message):
  """Refused before jax.distributed starts (which would wait, then crash, on a wrong count)."""
  monkeypatch.setenv("JAX_COORDINATOR_ADDRESS", "localhost:1")
  monkeypatch.setenv("JAX_NUM_PROCESSES", processes)
  monkeypatch.setenv("JAX_PROCESS_ID", process_id)
  with pytest.raises(RSVQAError, match=message):
    sharding.maybe_initialize_distributed()
