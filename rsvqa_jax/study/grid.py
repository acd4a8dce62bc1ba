"""The grid: per (language model, LM weights) cell, a reference model (image + question,
study.fusion) and its visual-blind twin trained over seeds, evaluated and attacked.

Runs go to RUNS_DIR/<lm>_<frozen|finetuned>_<reference|blind>/seed<k>/.
"""
import os

import jax

from rsvqa_jax import progress
from rsvqa_jax.study import language_models, names, runs


def train(study, runs_dir, cells, seeds, ds, root, name, feats):
  """Results of every (lm, weights) cell: {"reference": [...], "blind": [...]} over seeds."""
  s = study.s
  bar = progress.bar(total=len(cells) * len(names.ROLES) * len(seeds), unit="run",
                     desc=f"study {os.path.relpath(runs_dir, study.dir)}",
                     enabled=jax.process_index() == 0)
  results = []
  for lm, weights in cells:
    checkpoint = language_models.checkpoint(lm, s.lm[lm], ds, study.cache)
    cell = {"lm": lm, "label": s.lm[lm].label, "weights": weights}
    for role in names.ROLES:
      role_runs = []
      for seed in seeds:
        folder = os.path.join(names.run_name(lm, weights, role), f"seed{seed}")
        label = os.path.join(os.path.relpath(runs_dir, study.dir), folder)
        cfg = runs.config_for(study.config, study.cache, lm, weights, role, seed, root, name,
                              checkpoint)
        workdir = os.path.join(runs_dir, folder)
        role_runs.append(runs.run_one(study, cfg, workdir, ds, feats, label))
        bar.update()
      cell[role] = role_runs
    results.append(cell)
  bar.close()
  return results
