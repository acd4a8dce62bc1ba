"""Accuracy guard of compute_dtype bfloat16: the same run in float32 ends within 1 point of OA.

bf16 operands with float32 accumulation (models/matmul) and float32 master weights and Adam
must not cost accuracy. The val split holds 400 questions, so 1 point is 4 answers: a band
that rounding noise stays in but a bf16 path that fails to learn (or accumulates in bf16) would
leave.
"""
import json
import os

import pytest

from rsvqa_jax import cpu_units
from rsvqa_jax.train import loop
from test_train_support import tiny_config, tiny_task


@pytest.fixture(scope="module")
def task():
  return tiny_task(n_images=400)


def _final_val_oa(task, workdir, compute_dtype, log=lambda m: None):
  c = tiny_config(batch_size=64, num_epochs=4, checkpoint_every_steps=1000, log_every_steps=50,
                  compute_dtype=compute_dtype)
  c.optim.lr = 1e-2
  c.optim.text_lr = 1e-2
  summary = loop.train(c, workdir, dataset=task[0], features=task[1], log=log)
  assert summary["finished"]
  with open(os.path.join(workdir, "metrics.jsonl"), encoding="utf-8") as f:
    lines = [json.loads(line) for line in f]
  val = [line for line in lines if line["split"] == "val"][-1]
  train = [line for line in lines if line["split"] == "train"][-1]
  return val["oa"], {**val, "train_loss": train["loss"]}


def test_bf16_ends_within_one_point_of_float32(task, tmp_path, monkeypatch):
  """Also: on a CPU without bf16 units (flags patched), the bf16 run says so once, in one line,
  and the float32 run does not."""
  assert len(task[0]["val"]) == 400
  monkeypatch.setattr(cpu_units, "_cpu_flags", lambda cpuinfo_text=None: {"fpu", "avx2"})
  logs32, logs16 = [], []
  oa32, line32 = _final_val_oa(task, str(tmp_path / "f32"), "float32", logs32.append)
  oa16, line16 = _final_val_oa(task, str(tmp_path / "bf16"), "bfloat16", logs16.append)
  notes = [m for m in logs16 if "CPU without bf16 units" in m]
  assert len(notes) == 1 and "\n" not in notes[0], logs16
  assert not any("bf16 units" in m for m in logs32), logs32
  assert oa32 > 0.75, line32  # the run learns from the image, so the comparison means something
  assert abs(oa16 - oa32) <= 0.01, (line32, line16)
  assert line16["train_loss"] != line32["train_loss"]  # the bf16 run did compute in bf16
