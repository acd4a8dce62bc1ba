"""The adversarial tests of one reference run: its images swapped at inference (study.adversarial:
a random image of the dataset, in-batch shuffle, white, black, noise), K draws per question
(one of white, black and noise: every draw alike).

A kind whose result file records the study's settings (reuse.py) is read back, not drawn again;
one of other settings (K, pool, seed, checkpoint) is drawn again.
"""
import time

from rsvqa_jax import storage
from rsvqa_jax.bias import metrics
from rsvqa_jax.eval import adversarial, outputs
from rsvqa_jax.study import reuse


def attack(study, workdir, ds, feats, label, epochs):
  """{kind: the run's adversarial result} for every kind of study.adversarial (`epochs`: the
  run's training length, reuse.behind)."""
  s = study.s
  results = {}
  for kind in s.adversarial:
    json_path, _ = outputs.adversarial_paths(workdir, s.split, kind)
    recorded = storage.read_json(json_path)
    why = (reuse.stale(recorded, reuse.adversarial_settings(s, kind))
           or reuse.behind(recorded, workdir, epochs))
    if why:
      started = time.time()
      k = reuse.draws(s, kind)
      adversarial.evaluate(workdir, s.split, kind, repeats=k, seed=s.adv_seed,
                           pool=s.adv_pool, dataset=ds, features=feats)
      study.timings.record(f"adversarial_{kind}/{label}", time.time() - started)
      again = "" if why == reuse.MISSING else f", evaluated again: {why}"
      study.progress(f"{label}: adversarial {kind} x{k} "
                     f"({time.time() - started:.1f}s{again})")
    results[kind] = metrics.from_json(storage.read_json(json_path))
  return results
