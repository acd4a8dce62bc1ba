"""The shortcuts stage (synthetic studies, study.shortcuts): the shortcut OOD benchmark of a
synthetic set with a planted shortcut, and a reference / visual-blind pair trained on its
re-split data (checkpoints selected on IID val), scored on the IID test split and the nine OOD
sets.

Layout: DIR/data/shortcuts/ (the planted set), DIR/shortcuts/benchmark/ (as `rsvqa-jax
shortcuts` writes it), DIR/shortcuts/runs/... Runs trained on another benchmark (the plant,
sizes or seed changed since) are removed, never reused.
"""
import os
import shutil
import time

from rsvqa_jax import storage
from rsvqa_jax.bias import metrics, shortcut_report
from rsvqa_jax.data import rsvqa_json, synthetic
from rsvqa_jax.eval import shortcuts as shortcut_eval
from rsvqa_jax.study import language_models, names, preparation, reuse, runs


def stage(study):
  """The stage's benchmark, scored runs and model labels, for study.json."""
  s, sc = study.s, study.s.shortcuts
  root = os.path.join(study.dir, "data", "shortcuts")
  stage_dir = os.path.join(study.dir, "shortcuts")
  bench = os.path.join(stage_dir, "benchmark")
  manifest, identity = _benchmark(study, root, stage_dir, bench)
  data_root = os.path.join(bench, "data")
  ds = rsvqa_json.read_dataset(data_root, s.variant)
  feats = preparation.features(study, ds, data_root, s.variant)
  lm, weights = sc.language_model, sc.lm_weights
  checkpoint = language_models.checkpoint(lm, s.lm[lm], ds, study.cache)
  models = []
  for role in names.ROLES:
    results = []
    for seed in sc.seeds:
      workdir = os.path.join(stage_dir, "runs", names.run_name(lm, weights, role), f"seed{seed}")
      label = os.path.relpath(workdir, study.dir)
      cfg = runs.config_for(study.config, study.cache, lm, weights, role, seed, data_root,
                            s.variant, checkpoint)
      runs.run_one(study, cfg, workdir, ds, feats, label, attack=False)
      results.append(_scored(study, workdir, bench, ds, feats, label))
    models.append({"role": role, "runs": results,
                   "label": f"{s.lm[lm].label} {weights}, {names.ROLE_LABELS[role]}"})
  study.progress(f"shortcuts stage: {bench} scored")
  return {"benchmark": bench, "plant": identity["data"].get("plant", []),
          "seeds": list(sc.seeds), "min_questions": sc.min_questions,
          "questions": manifest["questions"], "ood": manifest["ood"], "models": models}


def _benchmark(study, root, stage_dir, bench):
  """(the benchmark's manifest, its identity): the planted set generated and the benchmark
  built once; rebuilt, and the runs removed, when the identity recorded beside it differs."""
  s, sc = study.s, study.s.shortcuts
  runs_dir = os.path.join(stage_dir, "runs")
  started = time.time()
  synthetic.ensure_synthetic(root, s.variant, sc.images, s.data_seed, "study.shortcuts.images",
                             prior_strength=s.prior_strength, balanced=sc.balanced,
                             questions_per_image=sc.questions_per_image, plant=tuple(sc.plant))
  source = rsvqa_json.read_dataset(root, s.variant)
  identity = {"data": synthetic.read_manifest(root), "seed": sc.seed,
              "version": shortcut_report.VERSION}
  identity_path = os.path.join(stage_dir, "identity.json")
  if storage.read_json(identity_path) != identity:
    if os.path.isdir(runs_dir):
      study.progress(f"{runs_dir}: trained on an earlier benchmark; removed")
      shutil.rmtree(runs_dir)
    manifest = shortcut_report.create(source, bench, seed=sc.seed, log=study.progress)
    storage.write_json(identity_path, identity)
  else:
    manifest = shortcut_report.ensure(source, bench, seed=sc.seed, log=study.progress)
  if time.time() - started > 1:
    study.timings.record("data/shortcuts", time.time() - started)
  return manifest, identity


def _scored(study, workdir, bench, ds, feats, label):
  """The run's shortcuts.json, scored on the benchmark unless already (with the OOD-selected
  checkpoint too when study.shortcuts.ood_selection)."""
  sc = study.s.shortcuts
  path = os.path.join(shortcut_eval.folder(workdir), "shortcuts.json")
  result = metrics.from_json(storage.read_json(path))
  stale = reuse.stale(result, {"checkpoint": reuse.CHECKPOINT})  # evaluate --checkpoint last
  if stale or (sc.ood_selection and "selection" not in result):
    started = time.time()
    shortcut_eval.evaluate(workdir, bench, ood_selection=sc.ood_selection, dataset=ds,
                           features=feats)
    study.timings.record(f"shortcut_eval/{label}", time.time() - started)
    result = metrics.from_json(storage.read_json(path))
  return result
