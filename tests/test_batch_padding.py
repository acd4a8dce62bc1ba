"""A training batch the devices do not divide (the paper's 70 on 8) is padded with masked rows.

The padded step must be the unpadded one: same loss, gradients and updated parameters as 70 rows
on one device (dropout off: its masks are drawn for the padded shape), and the run says so.
"""
import json
import os
import subprocess
import sys
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from rsvqa_jax.errors import RSVQAError
from rsvqa_jax.train import answerability, loop, metrics_log
from rsvqa_jax.train import sharding as shd
from test_train_support import tiny_config, tiny_task
import subprocess_env

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def _config():
  c = tiny_config(batch_size=70, num_epochs=2, log_every_steps=1)
  c.model.dropout = 0.0
  return c


SCRIPT = r"""
import json, sys
import jax, jax.numpy as jnp, numpy as np
sys.path.insert(0, {here!r})
from rsvqa_jax.train import loop, predict, run as run_lib, steps, sharding as shd
from test_batch_padding import _config
from test_train_support import tiny_task

assert jax.device_count() == 8, jax.devices()
dataset, features = tiny_task()
config = _config()
flat = lambda tree: [np.asarray(x).ravel().tolist() for x in jax.tree.leaves(jax.device_get(tree))]
out = {{}}
for n in (1, 8):
  s = run_lib.build(config, {workdir!r}, ["train"], dataset=dataset, features=features)
  s.mesh = shd.make_mesh(jax.devices()[:n])
  layout = shd.batch_layout(70, s.mesh)
  state, optimizer = run_lib.new_state(s), run_lib.compiled_steps(config, s.mesh)[0]
  local = {{k: v[:70] for k, v in s.columns["train"].columns.items()}}
  padded = shd.pad_rows(s.train_batch(local), layout.local_padded, "answer")
  batch = shd.global_batch(padded, s.mesh)
  def loss(params):
    logits = steps.logits(state, params, batch, jnp.float32, deterministic=True)
    return steps.masked_cross_entropy(logits, batch["answer"])[0]
  grads = jax.jit(jax.grad(loss))(state.params)
  state, m = steps.make_train_step(optimizer, s.mesh)(state, batch)
  out[n] = {{"rows": int(batch["answer"].shape[0]), "loss": float(m["loss"]), "n": int(m["n"]),
            "correct": int(m["correct"]), "grads": flat(grads), "params": flat(state.params)}}
lines = []
summary = loop.train(config, {workdir!r} + "/run", dataset=dataset, features=features,
                     log=lines.append)
out["log"], out["final"] = lines, flat(summary["state"].params)
# an eval batch of 7 on 1, 3 and 8 devices: rounded up to 7 / 9 / 8, the same answers
s = run_lib.build(config, {workdir!r} + "/run", ["val"], dataset=dataset, features=features)
host, out["eval"] = jax.device_get(summary["state"]), {{}}
for n in (1, 3, 8):
  s.mesh = shd.make_mesh(jax.devices()[:n])
  out["eval"][n] = predict.predict_columns(
      shd.replicate(host, s.mesh), s.columns["val"], mesh=s.mesh, batch_size=7,
      eval_step=run_lib.compiled_steps(config, s.mesh)[2], features=s.features.features,
      image_rows=predict.clean_rows(s, "val"), question_vectors=s.question_vectors).tolist()
print("RESULT" + json.dumps(out))
"""


@pytest.fixture(scope="module")
def eight(tmp_path_factory):
  """The subprocess's results on 8 host devices, and its workdir."""
  tmp = tmp_path_factory.mktemp("padding")
  env = subprocess_env.env(XLA_FLAGS="--xla_force_host_platform_device_count=8",
                           JAX_PLATFORMS="cpu")
  proc = subprocess.run([sys.executable, "-c", SCRIPT.format(here=HERE, workdir=str(tmp))],
                        env=env, cwd=ROOT, capture_output=True, text=True, timeout=600)
  assert proc.returncode == 0, proc.stderr[-3000:]
  return json.loads(proc.stdout.split("RESULT", 1)[1]), str(tmp / "run")


def _close(a, b):
  for x, y in zip(a, b, strict=True):
    np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-7)


def test_padded_step_equals_the_unpadded_single_device_step(eight):
  out, _ = eight
  single, padded = out["1"], out["8"]
  assert (single["rows"], padded["rows"]) == (70, 72)
  assert single["n"] == padded["n"] == 70 and single["correct"] == padded["correct"]
  assert padded["loss"] == pytest.approx(single["loss"], rel=1e-6)
  _close(single["grads"], padded["grads"])
  _close(single["params"], padded["params"])


def test_the_run_says_which_batch_it_used(eight):
  out, workdir = eight
  assert [l for l in out["log"] if "padded" in l] == [
      f"{workdir}: train.batch_size 70 padded to 72 over 8 devices; 2 masked rows per step "
      "(weight 0: loss, gradients and metrics are those of the configured batch)"]
  with open(os.path.join(workdir, "metrics.jsonl"), encoding="utf-8") as f:
    train = [json.loads(l) for l in f if '"split": "train"' in l]
  assert train and all((r["batch_size"], r["padded_batch_size"]) == (70, 72) for r in train)
  with open(os.path.join(workdir, "config.json"), encoding="utf-8") as f:
    assert json.load(f)["train"]["batch_size"] == 70  # the experiment's batch, unchanged


def test_padded_run_trains_like_one_device(eight, tmp_path):
  """The whole loop (2 epochs of 2 steps, validation, checkpoints) on 1 device here."""
  out, workdir = eight
  dataset, features = tiny_task()
  lines = []
  summary = loop.train(_config(), str(tmp_path), dataset=dataset, features=features,
                       log=lines.append)
  assert not [l for l in lines if "padded" in l]
  _close(out["final"], [np.asarray(x).ravel() for x in
                        jax.tree.leaves(jax.device_get(summary["state"].params))])
  losses = lambda w: [r["loss"] for r in metrics_log.read(w) if r["split"] == "train"]
  np.testing.assert_allclose(losses(workdir), losses(str(tmp_path)), rtol=1e-5)


def _mesh(devices):
  return types.SimpleNamespace(devices=np.empty(devices))


def test_layout_per_host(monkeypatch):
  assert shd.batch_layout(64, _mesh(8)) == (64, 64, 64, 64, 8)
  assert shd.batch_layout(70, _mesh(8)).describe() == (
      "batch 70 padded to 72 over 8 devices; 2 masked rows per step")
  assert shd.batch_layout(7, _mesh(8)).describe() == (
      "batch 7 padded to 8 over 8 devices; 1 masked row per step")
  monkeypatch.setattr(shd.jax, "process_count", lambda: 2)
  assert shd.batch_layout(70, _mesh(8)) == (70, 35, 36, 72, 8)  # each host tops up its own 35
  with pytest.raises(RSVQAError, match=r"train.batch_size=71 must be a multiple of the host "
                                       r"count \(2\)"):
    shd.batch_layout(71, _mesh(8))


def test_an_eval_batch_is_rounded_up_to_the_device_count(monkeypatch):
  assert shd.eval_width(280, _mesh(8)) == 280 and shd.eval_width(7, _mesh(1)) == 7
  assert shd.eval_width(70, _mesh(8)) == 72 and shd.eval_width(64, _mesh(3)) == 66
  monkeypatch.setattr(shd.jax, "process_count", lambda: 4)
  assert shd.eval_width(5, _mesh(16)) == 16 and shd.eval_width(17, _mesh(4)) == 20


def test_any_device_count_evaluates_a_run_alike(eight):
  """An eval batch the devices did not divide was refused, after a training epoch, and no
  device count but a divisor could evaluate or resume the run."""
  out, _ = eight
  answers = out["eval"]
  assert len(answers["1"][0]) == len(tiny_task()[0]["val"]) and min(answers["1"][0]) >= 0
  assert answers["1"] == answers["3"] == answers["8"]


def test_pad_rows_copies_rows_with_label_minus_one():
  batch = {"answer": np.array([3, 4, 5]), "x": np.arange(6.0).reshape(3, 2)}
  out = shd.pad_rows(batch, 8, "answer")
  assert out["answer"].tolist() == [3, 4, 5, -1, -1, -1, -1, -1]
  assert out["x"][3:].tolist() == [[0, 1], [2, 3], [4, 5], [0, 1], [2, 3]]
  assert batch["answer"].tolist() == [3, 4, 5]  # the caller's arrays untouched
  assert shd.pad_rows(batch, 3, "answer") is batch


@pytest.mark.parametrize("loss", sorted(answerability.LOSS_FNS))
def test_padded_pools_add_nothing_to_the_answerability_losses(loss):
  """answerability.batch_pools is padded the same way: whole pools labelled -1."""
  rng = np.random.default_rng(0)
  batch = {"logits": rng.normal(size=(3, 5)).astype(np.float32),
           "labels": rng.integers(0, 3, (3, 5))}
  padded = shd.pad_rows(batch, 8, "labels")
  fn = jax.value_and_grad(answerability.LOSS_FNS[loss])
  value, grad = fn(jnp.asarray(batch["logits"]), jnp.asarray(batch["labels"]))
  value_p, grad_p = fn(jnp.asarray(padded["logits"]), jnp.asarray(padded["labels"]))
  assert float(value_p) == pytest.approx(float(value), rel=1e-6)
  np.testing.assert_allclose(np.asarray(grad_p)[:3], np.asarray(grad), rtol=1e-6)
  assert not np.asarray(grad_p)[3:].any()
