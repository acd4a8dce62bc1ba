"""The adversarial tests of one reference run: its images swapped at inference (study.adversarial:
a random image of the dataset, in-batch shuffle, white, black, noise), K draws per question.

A kind whose result file exists is read back, not drawn again.
"""
import os
import time

from rsvqa_jax import storage
from rsvqa_jax.eval import adversarial, outputs


def attack(study, workdir, ds, feats, label):
  """{kind: the run's adversarial result} for every kind of study.adversarial."""
  s = study.s
  results = {}
  for kind in s.adversarial:
    json_path, _ = outputs.adversarial_paths(workdir, s.split, kind)
    if not os.path.exists(json_path):
      started = time.time()
      adversarial.evaluate(workdir, s.split, kind, repeats=s.repeats, seed=s.adv_seed,
                           pool=s.adv_pool, dataset=ds, features=feats)
      study.timings.record(f"adversarial_{kind}/{label}", time.time() - started)
      study.progress(f"{label}: adversarial {kind} x{s.repeats} "
                     f"({time.time() - started:.1f}s)")
    results[kind] = storage.read_json(json_path)
  return results
