"""Report assembly: the study's results (DIR/study.json) and DIR/report.md (bias/report.py)."""
import json
import os

from rsvqa_jax import storage
from rsvqa_jax.bias import report, tables
from rsvqa_jax.study import checks, names, settings


def results(study, ds, root, name, *, cells, table2, analysis, balanced, shortcuts):
  """The study's results from its stages' outputs, with its settings and timings.

  `timings` is the study's own dict: stages that run after this (grounding, answerability)
  still land in it.
  """
  s = study.s
  return {"dataset": {"name": name, "root": root, "label": tables.dataset_label(name),
                      "sizes": {k: len(v) for k, v in ds.splits.items()}},
          "split": s.split, "seeds": list(s.seeds), "repeats": s.repeats,
          "adversarial": list(s.adversarial), "adv_pool": s.adv_pool, "cells": cells,
          "table2": table2, "fusion": names.FUSION_LABELS[s.fusion], "analysis": analysis,
          "balanced": balanced, "timings": study.timings.values,
          "image_encoder": settings.image_encoder(study.config, study.cache, root),
          "settings": settings.rows(study.config, study.cache, root),
          "min_questions": s.min_questions, "reading": s.reading.to_dict(),
          "trained_this_call": study.trained, "shortcuts": shortcuts,
          "left_out": checks.left_out(s)}


def write(folder, study):
  """Writes FOLDER/study.json and FOLDER/report.md from `study`; the report's path."""
  storage.write_json(os.path.join(folder, "study.json"),
                     json.loads(json.dumps(study, default=_jsonable)))
  return report.write_report(folder, study)


def _jsonable(obj):
  if isinstance(obj, tables.Table):
    return {"caption": obj.caption, "columns": list(obj.columns),
            "rows": [[tables.cell(v) for v in row] for row in obj.rows]}
  raise TypeError(f"not JSON serialisable: {type(obj).__name__}")
