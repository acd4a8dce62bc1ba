"""Grounding scoring cost: `rsvqa-jax grounding score` on 10,000 masks of 256 x 256.

Truth masks (discs and rectangles of every size, a few empty) and predictions (the truth moved
and grown or shrunk, some missing) are written once as PNGs (not timed), with a confidence CSV;
then, per round, bias/grounding.score_folders reads both folders, scores IoU and the truth's
statistics, AP / mAP, and writes grounding.csv, summary.json and the box plot. The target is
under 30 s of wall time on the CPU. Toy mode scores 40 masks of 64 x 64.
"""
import os
import tempfile
import time

import numpy as np

from benchmarks import timing
from rsvqa_jax.bias import grounding

SIZES = {"full": (10_000, 256), "quick": (10_000, 256), "toy": (40, 64)}
ROUNDS = {"full": 3, "quick": 2, "toy": 2}


def _shape(rng, size):
  """A disc or a rectangle of random size and place (1 in 20 empty)."""
  m = np.zeros((size, size), bool)
  if rng.random() < 0.05:
    return m
  cy, cx = rng.uniform(0, size, 2)
  r = rng.uniform(0.02, 0.45) * size
  if rng.random() < 0.5:
    yy, xx = np.ogrid[:size, :size]
    return (yy + 0.5 - cy) ** 2 + (xx + 0.5 - cx) ** 2 <= r * r
  h, w = (rng.uniform(0.3, 1.0, 2) * 2 * r).astype(int) + 1
  y0, x0 = int(max(cy - h / 2, 0)), int(max(cx - w / 2, 0))
  m[y0:y0 + h, x0:x0 + w] = True
  return m


def write_sets(folder, n, size, seed=0):
  """Writes T/ and P/ ({id}.png) and confidence.csv under `folder`; returns their paths."""
  rng = np.random.default_rng(seed)
  truth, predicted = os.path.join(folder, "T"), os.path.join(folder, "P")
  os.makedirs(truth)
  os.makedirs(predicted)
  with open(os.path.join(folder, "confidence.csv"), "w", encoding="utf-8") as f:
    f.write("question_id,confidence\n")
    for qid in range(n):
      t = _shape(rng, size)
      grounding.write_png(os.path.join(truth, f"{qid}.png"), t * np.uint8(255))
      if rng.random() < 0.97:
        p = np.roll(t, tuple(rng.integers(-size // 8, size // 8 + 1, 2)), axis=(0, 1))
        grounding.write_png(os.path.join(predicted, f"{qid}.png"), p * np.uint8(255))
      f.write(f"{qid},{rng.random():.6f}\n")
  return truth, predicted, os.path.join(folder, "confidence.csv")


def run(mode, log=print):
  n, size = SIZES[mode]
  wall, cpu = [], []
  with tempfile.TemporaryDirectory(prefix="grounding_bench_") as tmp:
    log(f"  grounding: writing {n} truth and prediction masks of {size} x {size} (not timed)")
    truth, predicted, confidence = write_sets(tmp, n, size)
    for k in range(ROUNDS[mode]):
      start, start_cpu = time.perf_counter(), time.process_time()
      summary = grounding.score_folders(predicted, truth, os.path.join(tmp, f"O{k}"), confidence)
      wall.append(time.perf_counter() - start)
      cpu.append(time.process_time() - start_cpu)
  row = {"masks": n, "size": size, "scored": summary["n_scored"],
         "empty_truth": summary["n_empty_truth"], "mean_iou": summary["mean_iou"],
         "map_50_95": summary["map_50_95"], "wall_s": timing.summarize(wall, "s"),
         "cpu_s": timing.summarize(cpu, "s")}
  targets = [timing.target(f"grounding score of {n} masks of {size} x {size} (wall s)",
                           row["wall_s"], "<=", 30.0)]
  return {"rows": [row]}, targets
