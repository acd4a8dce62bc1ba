"""The balanced twin (synthetic studies, study.balanced): a balanced copy of the dataset, where
the most common answer is the uniform guess, with a reference / visual-blind pair of its own;
the blind model should fall to that guess. Runs go to DIR/balanced/runs/, as the grid's."""
import os

from rsvqa_jax.study import dataset_analysis, grid, preparation


def stage(study):
  """The twin's grid cell, dataset analysis and split sizes, for study.json."""
  s = study.s
  ds, root, name = preparation.dataset(study, balanced=True)
  study.progress(f"balanced dataset {root}: {preparation.sizes(ds)}")
  feats = preparation.features(study, ds, root, name)
  cells = [(s.balanced.language_model, s.balanced.lm_weights)]
  results = grid.train(study, os.path.join(study.dir, "balanced", "runs"), cells,
                       s.balanced.seeds, ds, root, name, feats)
  return {"cells": results, "analysis": dataset_analysis.analyse(study, ds, name, "balanced_"),
          "sizes": {k: len(v) for k, v in ds.splits.items()}}
