"""Shortcut benchmark cost: re-split, nine concepts and OOD sets of a full-LR-size dataset.

A synthetic LR set of 772 images x 100 questions (~77k questions, the official LR size) is
generated once (not timed); then, per round, the dataset is read, the images' object labels are
read from masks/, and bias/shortcuts.build draws the 70/5/25 re-split, labels every question with
its nine concepts (PMI over the new train split) and applies the entropy and tail rules. The
target is that work in under a minute of CPU (process time); writing the whole benchmark folder
(`rsvqa-jax shortcuts`: the re-split dataset, concepts.csv, tables and figures) is timed once
beside it. Toy mode runs 30 images x 20 questions.
"""
import os
import tempfile
import time

import numpy as np

from benchmarks import timing
from rsvqa_jax.bias import shortcut_report, shortcuts
from rsvqa_jax.data import rsvqa_json, synthetic

SIZES = {"full": (772, 100), "quick": (772, 100), "toy": (30, 20)}
ROUNDS = {"full": 3, "quick": 2, "toy": 2}


def measure(root, rounds):
  """{stage: [CPU seconds per round]}, and the wall seconds of the labels + build rounds."""
  cpu = {"read": [], "labels": [], "split_concepts_ood": []}
  wall = []
  for _ in range(rounds):
    start = time.process_time()
    dataset = rsvqa_json.read_dataset(root, "lr")
    read = time.process_time()
    image_ids = np.unique(shortcuts.pool(dataset).image_id).tolist()
    labels = shortcuts.find_labels(root, "lr", image_ids)
    labelled, labelled_wall = time.process_time(), time.perf_counter()
    bench = shortcuts.build(dataset, 0, labels.labels)
    cpu["read"].append(read - start)
    cpu["labels"].append(labelled - read)
    cpu["split_concepts_ood"].append(time.process_time() - labelled)
    wall.append(time.perf_counter() - labelled_wall)
  return cpu, wall, dataset, labels, bench


def run(mode, log=print):
  images, per_image = SIZES[mode]
  with tempfile.TemporaryDirectory(prefix="shortcuts_bench_") as tmp:
    root = os.path.join(tmp, "lr")
    log(f"  shortcuts: generating {images} x {per_image} synthetic LR questions (not timed)")
    synthetic.generate(root, "lr", images=images, seed=0, questions_per_image=per_image)
    cpu, wall, dataset, labels, bench = measure(root, ROUNDS[mode])
    start, start_wall = time.process_time(), time.perf_counter()
    shortcut_report.create(dataset, os.path.join(tmp, "bench"), labels=labels, log=lambda m: None)
    create_cpu, create_wall = time.process_time() - start, time.perf_counter() - start_wall
  split = {s: len(bench.splits[s]) for s in shortcuts.SPLITS}
  together = [a + b for a, b in zip(cpu["labels"], cpu["split_concepts_ood"])]
  row = {"questions": sum(len(s) for s in dataset.splits.values()),
         "pooled_questions": sum(split.values()), "images": images, "split": split,
         "ood": {c: int(bench.test_rules[c].ood.sum()) for c in shortcuts.CONCEPTS},
         **{f"{k}_cpu_s": timing.summarize(v, "s") for k, v in cpu.items()},
         "labels_split_concepts_ood_cpu_s": timing.summarize(together, "s"),
         "split_concepts_ood_wall_s": timing.summarize(wall, "s"),
         "create_folder_cpu_s": create_cpu, "create_folder_wall_s": create_wall}
  targets = [timing.target(f"shortcut re-split + concepts + OOD sets of a {row['questions']}-"
                           "question LR set (CPU s)", row["labels_split_concepts_ood_cpu_s"],
                           "<=", 60.0)]
  return {"rows": [row]}, targets
