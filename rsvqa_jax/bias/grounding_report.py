"""The study's grounding stage in its report: each model's mean IoU beside the floors, read.

A reference model that uses the right pixels grounds its answers above two floors scored on the
same questions: its visual-blind twin (it never sees the image, so its map is uniform: the
whole image) and a centre-prior map (eval/grounding.centre_prior). The table has one row per
model (mean over seeds, with the population std when there are several) and the centre prior;
the reading says which reference models clear the higher floor by study.reading.margin points.
"""
import math
import os

from rsvqa_jax.bias import tables

ROLE_LABELS = {"reference": "reference", "blind": "visual blind (uniform map)"}


def _float(value):
  return math.nan if value is None else float(value)


def _cell(values):
  """A table cell of the runs' values: the fraction (one run) or 'mean (std)' (several; the
  runs lacking it said, tables.pct_over_runs)."""
  values = [_float(v) for v in values]
  return values[0] if len(values) == 1 else tables.pct_over_runs(values)


def _mean(values):
  return tables.mean_std([_float(v) for v in values])[0]


def _types(stage):
  by_type = stage["floors"]["centre"]["by_type"]
  return tables.type_order([t for t, v in by_type.items() if v["n"]])


def model_label(model):
  return f"{model['label']} {model['weights']}, {ROLE_LABELS[model['role']]}"


def study_table(stage):
  """Mean IoU per question type, over all scored questions and over correctly answered ones."""
  types = _types(stage)
  n = {t: stage["floors"]["centre"]["by_type"][t]["n"] for t in types}
  columns = ("Map", *[f"{tables.type_name(t)} (n={n[t]})" for t in types], "All",
             "Correct answers")
  rows = []
  for m in stage["models"]:
    runs = m["runs"]
    per_type = [_cell([r["by_type"].get(t, {}).get("mean_iou") for r in runs]) for t in types]
    rows.append((model_label(m), *per_type, _cell([r["mean_iou"] for r in runs]),
                 _cell([r["mean_iou_correct"] for r in runs])))
  centre = stage["floors"]["centre"]
  rows.append(("Centre prior", *[_float(centre["by_type"][t]["mean_iou"]) for t in types],
               _float(centre["mean_iou"]), ""))
  method = stage["method"]
  return tables.Table(f"Mean IoU of the relevance maps ({method}), {stage['split']} split",
                      columns, tuple(rows))


def study_reading(stage, margin):
  """Which reference models ground above the higher floor by `margin` points (of IoU x 100)."""
  floors = {"the centre prior": _float(stage["floors"]["centre"]["mean_iou"]),
            "the uniform map": _float(stage["floors"]["uniform"]["mean_iou"])}
  floor_name = max(floors, key=lambda k: floors[k])
  floor = floors[floor_name]
  parts = []
  for m in stage["models"]:
    if m["role"] != "reference":
      continue
    value = _mean([r["mean_iou"] for r in m["runs"]])
    gap = 100 * (value - floor)
    if math.isnan(gap):  # no question with a grounding scored: no verdict either way
      parts.append(f"{m['label']} {m['weights']}: {tables.pct(value)} (not comparable)")
      continue
    verdict = ("clearly above" if gap >= margin else "below" if gap < 0 else "barely above")
    parts.append(f"{m['label']} {m['weights']}: {tables.pct(value)} ({verdict} it, "
                 f"{gap:+.2f} points)")
  return (f"Mean IoU x 100 of the answer groundings. The higher floor is {floor_name} "
          f"({tables.pct(floor)}; the other {tables.pct(min(floors.values()))}); a visual-blind "
          f"twin's map is the uniform one. Reference models: " + "; ".join(parts) + ". "
          f"\"Clearly\" means by {margin:g} points or more (study.reading.margin); a model below "
          "its floors answers without looking where the answer is.")


def study_section(stage, directory, margin):
  """report.md lines of a study's grounding stage; writes its table under directory/analysis."""
  table = study_table(stage)
  tables.write(table, os.path.join(directory, "analysis"), "grounding")
  return ["## Answer grounding (VizWiz)", "",
          f"Relevance maps of every model of the grid (study.grounding.method={stage['method']}: "
          "auto takes the attention where a model has it, else Grad-CAM on the image feature "
          "map; a visual-blind model's is uniform) scored against the synthetic groundings "
          "(`Grounding/`); questions whose grounding is empty are left out. Each run's maps and "
          f"scores: `RUN/eval/{stage['split']}/grounding_{stage['method']}/`.", "",
          study_reading(stage, margin), "", tables.to_markdown(table), ""]
