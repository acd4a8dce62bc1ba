"""Table 2's other rows (study.table2_rows): other fusions and the original RSVQA baseline,
trained and evaluated as reference models over seeds, without adversarial testing (the paper
tests e-mult models only).

A row of the grid's (same LM, weights and study.fusion) reuses the grid's runs; the others go
to RUNS_DIR/<lm>_<weights>_<fusion>_reference/ or RUNS_DIR/baseline_reference/.
"""
import os

from rsvqa_jax.study import language_models, names, runs


def train(study, runs_dir, grid, ds, root, name, feats):
  """Table 2's rows, each with its reference runs over seeds; [] when none is set."""
  s = study.s
  rows = []
  for spec in s.table2_rows:
    lm, weights, fusion = names.parse_row(spec)
    row = {"spec": spec, "weights": weights}
    if lm == names.BASELINE:
      lm, fusion = s.baseline.language_model, "mult"
      row.update(label=s.baseline.label, fusion="e-mult", baseline=True)
      folder, overrides, row_feats = "baseline_reference", tuple(s.baseline.overrides), None
    else:
      row.update(label=s.lm[lm].label, fusion=names.FUSION_LABELS[fusion], baseline=False)
      cell = next((c for c in grid if (c["lm"], c["weights"]) == (lm, weights)), None)
      if fusion == s.fusion and cell is not None:
        rows.append({**row, "runs": cell["reference"]})
        continue
      folder, overrides, row_feats = names.run_name(lm, weights, "reference", fusion), (), feats
    checkpoint = language_models.checkpoint(lm, s.lm[lm], ds, study.cache)
    results = []
    for seed in s.seeds:
      workdir = os.path.join(runs_dir, folder, f"seed{seed}")
      cfg = runs.config_for(study.config, study.cache, lm, weights, "reference", seed, root, name,
                            checkpoint, fusion, overrides)
      results.append(runs.run_one(study, cfg, workdir, ds, row_feats,
                                  os.path.relpath(workdir, study.dir), attack=False))
    rows.append({**row, "runs": results})
  return rows
