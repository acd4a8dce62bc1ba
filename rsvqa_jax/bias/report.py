"""report.md of a study: Tables 2 and 6 as mean (std), differences, Figure 5, the analysis.

Input is the study's results dict (rsvqa_jax/study.py): per (language model, LM weights) cell
the test accuracy tables of the reference and visual-blind runs over seeds and each reference
run's adversarial results. Reference and blind columns are mean (std) over seeds (population
std, as the paper); adversarial columns pool every seed's K substitutions (mean (std) over
seeds x repeats, so the spread of the random draws shows). A difference is the reference mean
minus the disturbed mean, in points (positive = the disturbance costs accuracy), as in Table 6.
"""
import math
import os

from rsvqa_jax.bias import plots, tables
from rsvqa_jax.bias.tables import mean_std, pct

SUMMARY = ("AA", "OA")
KIND_LABELS = {"random": "Adversarial (random image)", "shuffle": "Adversarial (in-batch shuffle)",
               "white": "Adversarial (white image)", "black": "Adversarial (black image)",
               "noise": "Adversarial (noise image)"}


def columns_of(cells):
  """Question types in the order the accuracy tables list them, then AA and OA."""
  types = []
  for cell in cells:
    for run in cell["reference"] + cell["blind"]:
      types += [t for t in run["accuracy"]["per_type"] if t not in types]
  return types + list(SUMMARY)


def run_stats(runs, columns):
  """{column: (mean, std)} over the runs' clean test accuracies."""
  def value(acc, col):
    return acc[col.lower()] if col in SUMMARY else acc["per_type"].get(col, math.nan)
  return {c: mean_std([value(r["accuracy"], c) for r in runs]) for c in columns}


def adversarial_stats(runs, kind, columns):
  """{column: (mean, std)} over every seed's repeats of adversarial `kind`."""
  def values(adv, col):
    rep = adv["per_repeat"]
    return rep[col.lower()] if col in SUMMARY else rep["per_type"].get(col, [])
  return {c: mean_std([v for r in runs for v in values(r["adversarial"][kind], c)])
          for c in columns}


def _header(columns, first):
  names = first + [tables.type_name(c) for c in columns]
  return ["| " + " | ".join(names) + " |", "|" + "---|" * len(names)]


def table2(cells, columns, fusion):
  """Table 2 layout: the reference models' test accuracy, mean (std) over seeds."""
  lines = _header(columns, ["Language model", "LM weights", "fusion"])
  for cell in cells:
    stats = run_stats(cell["reference"], columns)
    lines.append(f"| {cell['label']} | {cell['weights']} | {fusion} | "
                 + " | ".join(pct(*stats[c]) for c in columns) + " |")
  return "\n".join(lines)


def setups(cell, columns, kinds):
  """[(setup label, {column: (mean, std)})] of one cell: reference, blind, adversarial kinds."""
  out = [("Reference model", run_stats(cell["reference"], columns)),
         ("Visual blind", run_stats(cell["blind"], columns))]
  for kind in kinds:
    out.append((KIND_LABELS[kind], adversarial_stats(cell["reference"], kind, columns)))
  return out


def difference(reference, disturbed, columns):
  """{column: reference mean - disturbed mean} in points."""
  return {c: 100 * (reference[c][0] - disturbed[c][0]) for c in columns}


def table6(cells, columns, kinds):
  """Table 6 layout: reference, visual blind, adversarial, each with its difference."""
  lines = _header(columns, ["Language model", "LM weights", "Setup"])
  for cell in cells:
    rows = setups(cell, columns, kinds)
    reference = rows[0][1]
    for i, (label, stats) in enumerate(rows):
      lines.append(f"| {cell['label'] if i == 0 else ''} | {cell['weights'] if i == 0 else ''} | "
                   f"{label} | " + " | ".join(pct(*stats[c]) for c in columns) + " |")
      if i:
        diff = difference(reference, stats, columns)
        lines.append("| | | Difference | " + " | ".join(
            "n/a" if math.isnan(diff[c]) else f"{diff[c]:.2f}" for c in columns) + " |")
  return "\n".join(lines)


def figure5(cells, columns, kinds, path):
  """Figure 5: per cell, bars per column for reference / blind / adversarial, std error bars."""
  panels = [(f"{cell['label']}, {cell['weights']}", setups(cell, columns, kinds)) for cell in cells]
  return plots.figure5(panels, columns, path)


def balanced_table(balanced, columns):
  """The balanced twin: reference and blind accuracy beside Prior_Acc and Uni_Acc per type."""
  cells = balanced["cells"]
  rows = balanced["analysis"]["rows"]
  key = lambda c: {"AA": "Average", "OA": "Overall"}.get(c, c)
  lines = _header(columns, ["Setup"])
  for cell in cells:
    for role, label in (("reference", "Reference model"), ("blind", "Visual blind")):
      stats = run_stats(cell[role], columns)
      lines.append(f"| {label} ({cell['label']}, {cell['weights']}) | "
                   + " | ".join(pct(*stats[c]) for c in columns) + " |")
  for metric, label in (("prior_acc", "Prior_Acc (most common answer)"),
                        ("uni_acc", "Uni_Acc (uniform guess)")):
    lines.append(f"| {label} | " + " | ".join(
        pct(rows.get(key(c), {}).get(metric, math.nan)) for c in columns) + " |")
  return "\n".join(lines)


def reading(study, columns):
  """A short paragraph read off the numbers."""
  kinds = study["adversarial"]
  parts = []
  gaps, adv_gaps, adv_below_blind = [], [], 0
  for cell in study["cells"]:
    rows = dict(setups(cell, columns, kinds))
    ref, blind = rows["Reference model"]["OA"][0], rows["Visual blind"]["OA"][0]
    gaps.append(100 * (ref - blind))
    text = (f"{cell['label']} {cell['weights']}: reference OA {pct(ref)}%, visual blind "
            f"{pct(blind)}% ({100 * (ref - blind):+.2f} points for the image)")
    if "random" in kinds:
      adv = rows[KIND_LABELS["random"]]["OA"][0]
      adv_gaps.append(100 * (ref - adv))
      adv_below_blind += adv < blind
      text += f", adversarial (random image) {pct(adv)}%"
    parts.append(text)
  out = ["; ".join(parts) + "."]
  if gaps:
    above = sum(g > 0 for g in gaps)
    if above == len(gaps):
      out.append(f"The reference models beat their visual-blind twins in every setting, by "
                 f"{min(gaps):.2f} to {max(gaps):.2f} points OA: that part of their accuracy needs "
                 "the image, the rest the question alone already gives.")
    else:
      out.append(f"The reference models beat their visual-blind twins in {above} of {len(gaps)} "
                 f"settings only (reference - blind: {min(gaps):.2f} to {max(gaps):.2f} points "
                 "OA): there the image adds nothing the question does not already give.")
  if adv_gaps:
    dropped = sum(g > 0 for g in adv_gaps)
    out.append(f"Swapping the image for a random one of the split costs the reference models "
               f"{min(adv_gaps):.2f} to {max(adv_gaps):.2f} points OA (a drop in {dropped} of "
               f"{len(adv_gaps)} settings: there the models do read the image) and leaves them "
               f"below the visual-blind model in {adv_below_blind} of {len(adv_gaps)} settings "
               "(the paper finds them below in every setting).")
  per_type = []
  for cell in study["cells"]:
    rows = dict(setups(cell, columns, kinds))
    diff = difference(rows["Reference model"], rows["Visual blind"], columns[:-2])
    per_type += [(d, t, cell) for t, d in diff.items() if not math.isnan(d)]
  if per_type:
    small = sorted({tables.type_name(t) for d, t, _ in per_type if d < 2.0})
    if small:
      out.append("Question types where the blind model comes within 2 points of the reference "
                 f"in some setting (a strong question/answer bias): {', '.join(small)}.")
  analysis = study["analysis"]["rows"]
  overall = analysis.get("Overall", {})
  if overall:
    out.append(f"On the test split, always answering the most common training answer of the "
               f"question type scores {pct(overall['prior_acc'])}% and a uniform guess "
               f"{pct(overall['uni_acc'])}% (Table 3 below).")
  balanced = study.get("balanced")
  if balanced:
    rows = balanced["analysis"]["rows"].get("Overall", {})
    for cell in balanced["cells"]:
      blind = run_stats(cell["blind"], ["OA"])["OA"][0]
      ref = run_stats(cell["reference"], ["OA"])["OA"][0]
      out.append(f"On the balanced twin the visual-blind model reaches {pct(blind)}% OA against a "
                 f"uniform accuracy of {pct(rows.get('uni_acc', math.nan))}% and a prior accuracy "
                 f"of {pct(rows.get('prior_acc', math.nan))}%, while the reference model keeps "
                 f"{pct(ref)}%: with the answer prior removed, the question alone is worth "
                 + ("about a guess." if blind - max(rows.get("uni_acc", 0), rows.get("prior_acc", 0))
                    < 0.03 else "more than a guess here (a bias the balancing left)."))
  return " ".join(out)


def _timings(study):
  values = study["timings"]
  groups = {}
  for key, seconds in values.items():
    groups.setdefault(key.split("/")[0], []).append(seconds)
  lines = ["| stage | units | seconds |", "|---|---|---|"]
  for name, secs in groups.items():
    lines.append(f"| {name} | {len(secs)} | {sum(secs):.1f} |")
  lines.append(f"| total | {len(values)} | {sum(values.values()):.1f} |")
  return "\n".join(lines)


def write_report(directory, study):
  """Writes directory/report.md (and figures/figure5.png); returns the report's path."""
  cells = study["cells"]
  columns = columns_of(cells)
  kinds = study["adversarial"]
  fig5 = figure5(cells, columns, kinds, os.path.join(directory, "figures", "figure5.png"))
  ds = study["dataset"]
  enc = study["image_encoder"]
  sizes = ", ".join(f"{k} {v}" for k, v in ds["sizes"].items())
  fusion = "e-mult"
  lines = [
      "# Language-bias study", "",
      f"Dataset: {ds['label']} at `{ds['root']}` ({sizes} questions); evaluated on the "
      f"{study['split']} split. Seeds: {', '.join(map(str, study['seeds']))}. All models use "
      f"{fusion} fusion (Figure 5). Image encoder: " + ", ".join(f"{k} {v}" for k, v in enc.items())
      + ".", "",
      "## Reading", "", reading(study, columns), "",
      "## Reference models (Table 2 layout): test accuracy (%), mean (std) over seeds", "",
      table2(cells, columns, fusion), "",
      "## Visual blind and adversarial testing (Table 6 layout)", "",
      f"Reference and visual-blind rows: mean (std) over seeds; adversarial rows: mean (std) over "
      f"seeds x {study['repeats']} substitutions; Difference = reference - row, in points.", "",
      table6(cells, columns, kinds), "",
      f"![Figure 5]({os.path.relpath(fig5, directory)})", "",
      "## Dataset analysis (Table 3 layout)", "",
      f"Model columns: the best-on-validation reference model `{os.path.relpath(study['analysis']['best_run'], directory)}`"
      f" (clean test predictions; AdTest with the {study['analysis']['adversarial_kind']} "
      "substitution, first repeat).", "",
      tables.to_markdown(study["analysis"]["type_table"]),
  ]
  if study["analysis"]["objects_table"] is not None:
    lines += [tables.to_markdown(study["analysis"]["objects_table"])]
  lines += [f"![Figure 7]({study['analysis']['figure']})", ""]
  if study.get("balanced"):
    lines += ["## Balanced synthetic twin", "",
              "Same generator with the answer prior removed (balanced answers per question "
              "form): the visual-blind model should fall to the uniform accuracy.", "",
              balanced_table(study["balanced"], columns_of(study["balanced"]["cells"])), "",
              tables.to_markdown(study["balanced"]["analysis"]["type_table"]),
              f"![Figure 7, balanced]({study['balanced']['analysis']['figure']})", ""]
  lines += ["## Wall time", "",
            f"Seconds of work recorded per stage (over every invocation of this study; runs "
            f"trained in the last one: {study['trained_this_call']}).", "", _timings(study), ""]
  path = os.path.join(directory, "report.md")
  with open(path, "w", encoding="utf-8") as f:
    f.write("\n".join(lines))
  return path
