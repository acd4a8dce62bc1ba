"""report.md of a study: its settings, Tables 2, 6 and 3 from one set of numbers, Figure 5, the
analysis, a reading and a summary the docs quote.

Input is the study's results dict (rsvqa_jax/study/): per (language model, LM weights) cell
the test accuracy tables of the reference and visual-blind runs over seeds and each reference
run's adversarial results. Reference and blind columns are mean (std) over seeds (population
std, as the paper); adversarial columns pool every seed's K substitutions (mean (std) over
seeds x repeats, so the spread of the random draws shows). A difference is the reference mean
minus the disturbed mean, in points (positive = the disturbance costs accuracy), as in Table 6.
Table 3's model columns are the same numbers for the reference cell with the best mean
validation OA, and its IO columns apply Equation 1 to those means, as the paper does (its
Table 3 row Comparison: (90.76 - 66.74) / (100 - 66.74) = 72.22).

Question types are in the paper's order (tables.type_order: Comparison, Counting, Presence,
Rural/urban, then AA and OA). Every table has an N row (questions of the evaluated split per
column; the adversarial rows rest on N x seeds x K draws of them) and marks with a dagger the columns with
fewer than study.min_questions questions. The reading's thresholds (study.reading) are stated in
the report.

`python -m rsvqa_jax.bias.report DIR --docs docs/audits/language_bias.md docs/audits/shortcuts.md`
copies DIR/summary.md between the study-summary markers of whichever page holds them, so the docs'
figures are the report's (and, when the study ran its shortcuts stage, DIR/shortcuts_summary.md
between the shortcuts-summary markers; the stage's section is bias/shortcut_report.study_section;
the grounding stage's is bias/grounding_report.study_section).
"""
import argparse
import math
import os
import re
import sys
import textwrap

from rsvqa_jax import storage
from rsvqa_jax.errors import RSVQAError
from rsvqa_jax.bias import metrics, plots, tables
from rsvqa_jax.bias import shortcut_report
from rsvqa_jax.bias.tables import mean_std, pct

SUMMARY = ("AA", "OA")
KIND_LABELS = {"random": "Adversarial (random image)", "shuffle": "Adversarial (in-batch shuffle)",
               "white": "Adversarial (white image)", "black": "Adversarial (black image)",
               "noise": "Adversarial (noise image)"}
FLAG = "†"
ANALYSIS_ROW = {"AA": "Average", "OA": "Overall"}  # the analysis row of a summary column
DOCS_BEGIN = ("<!-- study summary: begin (python -m rsvqa_jax.bias.report DIR --docs "
              "docs/audits/language_bias.md docs/audits/shortcuts.md) -->")
DOCS_END = "<!-- study summary: end -->"


def _runs(cells):
  return [run for cell in cells for run in cell["reference"] + cell.get("blind", [])]


def columns_of(cells):
  """Question types in the paper's order, then AA and OA. A training type the evaluated split
  lacks (accuracy.json's `types_absent`) is a column too: N 0, n/a, and a note (Flags)."""
  types = {t for run in _runs(cells)
           for t in [*run["accuracy"]["per_type"], *run["accuracy"].get("types_absent", ())]}
  return tables.type_order(types) + list(SUMMARY)


def counts_of(cells, columns):
  """{column: questions of the evaluated split} of the first run (every run of a study evaluates
  the same split); 0 for a type the split lacks."""
  acc = next(r["accuracy"] for cell in cells for r in cell["reference"])
  n = acc.get("per_type_n", {})
  return {c: acc.get("n") if c == "OA" else None if c == "AA" else n.get(c, 0) for c in columns}


def _spread(values):
  """(mean, std) of `values`; std None (the cell shows the value alone) for fewer than two: one
  seed's std of 0 would read as agreement, as `tables` has it."""
  kept = [v for v in values if v is not None and not math.isnan(v)]
  m, s = mean_std(kept)
  return m, (s if len(kept) > 1 else None)


def _over(n, what="seeds"):
  """'mean (std) over N seeds', or what one seed's cells are."""
  return f"mean (std) over {n} {what}" if n > 1 else f"one {what[:-1]}'s value (no std)"


def _seeds(n):
  return f"{n} seed{'s' if n != 1 else ''}"


def _pooled(n_seeds, draws_text, noun):
  """'mean (std) over 3 seeds x 10 draws', or what one seed's single draw is."""
  if n_seeds == 1 and draws_text == "1":
    return f"one seed's single {noun[:-1]} (no std)"
  return f"mean (std) over {_seeds(n_seeds)} x {draws_text} {noun}"


def _n_seeds(cells, role="reference"):
  return max((len(cell[role]) for cell in cells), default=0)


def run_stats(runs, columns):
  """{column: (mean, std)} over the runs' clean test accuracies."""
  def value(acc, col):
    return acc[col.lower()] if col in SUMMARY else acc["per_type"].get(col, math.nan)
  return {c: _spread([value(r["accuracy"], c) for r in runs]) for c in columns}


def adversarial_stats(runs, kind, columns):
  """{column: (mean, std)} over every seed's repeats of adversarial `kind`."""
  def values(adv, col):
    rep = adv["per_repeat"]
    return rep[col.lower()] if col in SUMMARY else rep["per_type"].get(col, [])
  return {c: _spread([v for r in runs for v in values(r["adversarial"][kind], c)])
          for c in columns}


def setups(cell, columns, kinds):
  """[(setup label, {column: (mean, std)})] of one cell: reference, blind, adversarial kinds."""
  out = [("Reference model", run_stats(cell["reference"], columns)),
         ("Visual blind", run_stats(cell["blind"], columns))]
  for kind in kinds:
    out.append((KIND_LABELS[kind], adversarial_stats(cell["reference"], kind, columns)))
  return out


def difference(reference, disturbed, columns):
  """{column: reference mean - disturbed mean} in points, float noise below 1e-9 points read as 0
  (equal means must be no win and no drop)."""
  return {c: round(100 * (reference[c][0] - disturbed[c][0]), 9) + 0.0 for c in columns}


class Flags:
  """Which columns rest on fewer than `minimum` questions of the evaluated `split`, and how
  cells show it."""

  def __init__(self, counts, minimum, split="test"):
    self.counts, self.minimum, self.split = counts, minimum, split
    self.small = [c for c, n in counts.items() if n is not None and 0 < n < minimum]
    self.absent = [c for c, n in counts.items() if n == 0 and c not in SUMMARY]

  def mark(self, column, text):
    return f"{text} {FLAG}" if column in self.small and text not in ("", "n/a") else text

  def cells(self, stats, columns):
    return [self.mark(c, pct(*stats[c])) for c in columns]

  def n_row(self, columns, lead):
    return (f"N ({self.split} questions)", *([""] * lead),
            *("" if self.counts[c] is None else str(self.counts[c]) for c in columns))

  def note(self):
    absent = (f" No {', '.join(tables.type_name(c) for c in self.absent)} question among the "
              f"{self.split} questions: such a column reads n/a, and AA averages the other "
              "types."
              if self.absent else "")
    if not self.small:
      which = "Every other column" if self.absent else "Every column"
      return (f"{which} has at least {self.minimum} {self.split} questions "
              f"(study.min_questions).{absent}")
    which = ", ".join(f"{tables.type_name(c)} (N = {self.counts[c]})" for c in self.small)
    fewest = min(self.counts[c] for c in self.small)
    return (f"{FLAG} fewer than {self.minimum} {self.split} questions (study.min_questions): "
            f"{which}; "
            f"one answer moves such a cell by 100 / N points ({100 / fewest:.1f} at N = "
            f"{fewest}): read it as indicative.{absent}")


def _names(columns):
  return tuple(tables.type_name(c) for c in columns)


def table2_rows(study):
  """[(label, weights, fusion, runs)] of Table 2: study.table2_rows, else the grid's references."""
  if study.get("table2"):
    return [(r["label"], r["weights"], r["fusion"], r["runs"]) for r in study["table2"]]
  return [(c["label"], c["weights"], study.get("fusion", "e-mult"), c["reference"])
          for c in study["cells"]]


def table2(rows, columns, flags):
  """Table 2 layout: reference models' test accuracy, mean (std) over seeds."""
  out = [flags.n_row(columns, 2)]
  for label, weights, fusion, runs in rows:
    out.append((label, weights, fusion, *flags.cells(run_stats(runs, columns), columns)))
  n_seeds = max(len(runs) for *_, runs in rows)
  return tables.Table(caption=f"Table 2 layout: {flags.split} accuracy (%) of the reference "
                              f"models, {_over(n_seeds)}",
                      columns=("Language model", "LM weights", "fusion", *_names(columns)),
                      rows=tuple(out))


def _difference_row(diff, columns):
  return ("", "", "Difference",
          *("n/a" if math.isnan(diff[c]) else tables.two_decimals(diff[c]) for c in columns))


def draws(cells, kind):
  """How many substitutions per question the reference runs' results of `kind` hold ("10", or
  "1-10" where runs differ): a study draws study.repeats, one of white, black and noise."""
  counts = sorted({len(r["adversarial"][kind]["per_repeat"]["oa"])
                   for cell in cells for r in cell["reference"]})
  return "-".join(str(k) for k in sorted({counts[0], counts[-1]})) if counts else "0"


def _draws_by_kind(cells, kinds):
  """'10', or '10 (white, black: 1)' when the kinds hold other counts than the first's."""
  counts = {kind: draws(cells, kind) for kind in kinds}
  first = counts[kinds[0]] if kinds else ""
  others = {}
  for kind, k in counts.items():
    if k != first:
      others.setdefault(k, []).append(kind)
  return first + "".join(f" ({', '.join(ks)}: {k})" for k, ks in others.items())


def table6(cells, columns, kinds, flags):
  """Table 6 layout: reference, visual blind, adversarial; each disturbed row has a difference."""
  out = [flags.n_row(columns, 2)]
  for cell in cells:
    rows = setups(cell, columns, kinds)
    reference = rows[0][1]
    for i, (label, stats) in enumerate(rows):
      lead = (cell["label"], cell["weights"]) if i == 0 else ("", "")
      out.append((*lead, label, *flags.cells(stats, columns)))
      if i:
        out.append(_difference_row(difference(reference, stats, columns), columns))
  n_seeds = _n_seeds(cells)
  caption = (f"Table 6 layout: {flags.split} accuracy (%); reference and visual-blind rows "
             f"{_over(n_seeds)}"
             + (f", adversarial rows "
                f"{_pooled(n_seeds, _draws_by_kind(cells, kinds), 'substitutions')}"
                if kinds else "")
             + "; Difference = reference - row, in points")
  return tables.Table(caption=caption, columns=("Language model", "LM weights", "Setup",
                                                *_names(columns)), rows=tuple(out))


def best_cell(cells):
  """The reference cell with the best mean validation OA over its seeds (Table 3's model)."""
  def val(cell):
    scores = [r["val_oa"] for r in cell["reference"] if not math.isnan(r["val_oa"])]
    return sum(scores) / len(scores) if scores else -math.inf
  return max(cells, key=val)


def table3(study, columns, flags):
  """Table 3 layout: the dataset's priors beside the best reference cell's accuracy, mean (std)
  over seeds, and its adversarial accuracy over seeds x draws, with IO_Prior and IO_AdTest."""
  cell = best_cell(study["cells"])
  ref = run_stats(cell["reference"], columns)
  kinds = study["adversarial"]
  kind = "random" if "random" in kinds else (kinds[0] if kinds else None)
  adv = adversarial_stats(cell["reference"], kind, columns) if kind else None
  rows_in = study["analysis"]["rows"]
  out = []
  everything = rows_in.get("All", {})
  out.append(("All", everything.get("n", ""), everything.get("n_answers", ""),
              everything.get("prior", ""), everything.get("prior_acc", math.nan),
              everything.get("uni_acc", math.nan), "", "", *(("", "") if adv else ())))
  for c in columns:
    r = rows_in.get(ANALYSIS_ROW.get(c, c), {})
    label = ANALYSIS_ROW.get(c) or tables.type_name(c)
    n = "" if c == "AA" else r.get("n", "")
    prior = r.get("prior_acc", math.nan)
    row = [label, flags.mark(c, str(n)) if n != "" else "", r.get("n_answers") or "",
           r.get("prior") or "", prior, r.get("uni_acc", math.nan), flags.mark(c, pct(*ref[c])),
           metrics.io_lower_bound(ref[c][0], prior)]
    if adv:
      row += [flags.mark(c, pct(*adv[c])), metrics.io_lower_bound(ref[c][0], adv[c][0])]
    out.append(tuple(row))
  names = ["Question type", "N_s", "|A_s|", "Most common answer", "Prior_Acc (%)", "Uni_Acc (%)",
           "RSVQA_Acc (%)", "IO_Prior (%)"] + (["AdTest_Acc (%)", "IO_AdTest (%)"] if adv else [])
  n_seeds = len(cell["reference"])
  caption = (f"Table 3 layout: {study['split']} split, most common answers from "
             f"{study['analysis'].get('fit_split', 'train')}; model columns: "
             f"{cell['label']}, {cell['weights']} (best mean validation OA), {_over(n_seeds)}"
             + (f"; AdTest_Acc: {kind} substitution, "
                f"{_pooled(n_seeds, draws([cell], kind), 'draws')}" if adv else "")
             + f"; IO = Eq. 1 on the means (as the paper's Table 3); {tables.ROWS_NOTE}")
  if note := study["analysis"].get("note"):  # tables.analysis_note
    caption += f"; {note}"
  return tables.Table(caption=caption, columns=tuple(names), rows=tuple(out)), cell


def balanced_table(balanced, columns, flags):
  """The balanced twin: reference and blind accuracy beside Prior_Acc and Uni_Acc per type."""
  rows = balanced["analysis"]["rows"]
  out = [flags.n_row(columns, 0)]
  for cell in balanced["cells"]:
    for role, label in (("reference", "Reference model"), ("blind", "Visual blind")):
      out.append((f"{label} ({cell['label']}, {cell['weights']})",
                  *flags.cells(run_stats(cell[role], columns), columns)))
  value = lambda c, metric: rows.get(ANALYSIS_ROW.get(c, c), {}).get(metric, math.nan)
  for metric, label in (("prior_acc", "Prior_Acc (most common answer)"),
                        ("uni_acc", "Uni_Acc (uniform guess)")):
    out.append((label, *(flags.mark(c, pct(value(c, metric))) for c in columns)))
  n_seeds = max(_n_seeds(balanced["cells"]), _n_seeds(balanced["cells"], "blind"))
  return tables.Table(caption=f"Balanced twin: {flags.split} accuracy (%), {_over(n_seeds)}, "
                              "beside the dataset's lower bounds",
                      columns=("Setup", *_names(columns)), rows=tuple(out))


def figure5(cells, columns, kinds, path, split=None):
  """Figure 5: per cell, bars per column for reference / blind / adversarial, std error bars."""
  panels = [(f"{cell['label']}, {cell['weights']}", setups(cell, columns, kinds)) for cell in cells]
  return plots.figure5(panels, columns, path, split=split, n=counts_of(cells, columns).get("OA"),
                       seeds=_n_seeds(cells),
                       draws=_draws_by_kind(cells, kinds) if kinds else None)


# The reading.


def _ranges(values):
  """'a to b' over the values (one value when they agree to the printed digits)."""
  if not values:
    return "n/a"
  low, high = tables.two_decimals(min(values)), tables.two_decimals(max(values))
  return low if low == high else f"{low} to {high}"


def _reference_vs_blind(study, columns, thresholds):
  """Sentences on reference vs blind, by OA and AA, and per question type."""
  kinds = study["adversarial"]
  out, wins = [], {"OA": [], "AA": []}
  below_blind, close = {}, {}  # type name -> ["setting by x points"]
  for cell in study["cells"]:
    rows = dict(setups(cell, columns, kinds))
    diff = difference(rows["Reference model"], rows["Visual blind"], columns)
    name = f"{cell['label']} {cell['weights']}"
    for col in wins:
      wins[col].append((diff[col], name))
    for t in columns[:-2]:
      d = diff[t]
      if d < 0:
        below_blind.setdefault(tables.type_name(t), []).append(f"{name} by {-d:.2f} points")
      elif d < thresholds["close"] and rows["Visual blind"][t][0] > 0:  # both at 0: no evidence
        close.setdefault(tables.type_name(t), []).append(f"{name}: {d:.2f} points below")
  n = len(study["cells"])
  won = {col: {name for d, name in v if d > 0} for col, v in wins.items()}
  by = {col: len(v) for col, v in won.items()}
  oa_gaps = [d for d, _ in wins["OA"]]
  if by["OA"] == n:
    out.append(f"By OA the reference models beat their visual-blind twins in every setting, by "
               f"{_ranges(oa_gaps)} points: that part of their accuracy needs the image, the rest "
               "the question alone already gives.")
  else:
    lost = ", ".join(name for d, name in wins["OA"] if d <= 0)
    out.append(f"By OA the reference models beat their visual-blind twins in {by['OA']} of {n} "
               f"settings only (reference - blind: {_ranges(oa_gaps)} points); the blind model "
               f"is as good or better in: {lost}.")
  if won["AA"] != won["OA"]:
    lost = ", ".join(name for d, name in wins["AA"] if d <= 0)
    out.append(f"AA and OA disagree: by AA (every question type weighing the same) the reference "
               f"models win in {by['AA']} of {n} settings (reference - blind: "
               f"{_ranges([d for d, _ in wins['AA']])} points; not in: {lost or 'none'}).")
  else:
    out.append(f"AA agrees (reference - blind: {_ranges([d for d, _ in wins['AA']])} points).")
  per_type = lambda found: "; ".join(f"{t} ({', '.join(v)})" for t, v in found.items())
  if below_blind:
    out.append(f"The blind model beats the reference on {per_type(below_blind)}.")
  if close:
    out.append(f"The blind model comes within {thresholds['close']:g} points of the reference "
               f"(a strong question/answer bias) on {per_type(close)}.")
  return out


def _against_prior(study, thresholds):
  """Whether each reference model clearly beats answering the most common answer per type."""
  prior = study["analysis"]["rows"].get("Overall", {}).get("prior_acc", math.nan)
  if math.isnan(prior):
    return []
  margins = [(100 * (run_stats(c["reference"], ["OA"])["OA"][0] - prior),
              f"{c['label']} {c['weights']}") for c in study["cells"]]
  weak = [f"{name} ({m:+.2f})" for m, name in margins if m < thresholds["margin"]]
  head = (f"Always answering the most common training answer of the question type scores "
          f"{pct(prior)}% OA on the {study.get('split', 'test')} split (Prior_Acc, Table 3)")
  if not weak:
    return [f"{head}; every reference model beats it by at least {thresholds['margin']:g} points "
            f"({_ranges([m for m, _ in margins])}), so the models do learn the task."]
  return [f"{head}; reference models less than {thresholds['margin']:g} points above it (under-"
          f"trained or blind to the image: their gaps to the blind twins prove little): "
          f"{', '.join(weak)}."]


def _adversarial(study, columns):
  kinds = study["adversarial"]
  if "random" not in kinds:
    return []
  gaps, below = [], 0
  for cell in study["cells"]:
    rows = dict(setups(cell, columns, kinds))
    ref, blind = rows["Reference model"]["OA"][0], rows["Visual blind"]["OA"][0]
    adv = rows[KIND_LABELS["random"]]["OA"][0]
    gaps.append(100 * (ref - adv))
    below += adv < blind
  pool = {"dataset": "the dataset", "split": "the split"}.get(study.get("adv_pool"), "the dataset")
  dropped = sum(g > 0 for g in gaps)
  drops = (f"a drop in {dropped} of {len(gaps)} settings: there the models do read the image"
           if dropped else f"a drop in none of the {len(gaps)} settings: nothing shows that the "
           "models read the image")
  return [f"Swapping the image for a random one of {pool} costs the reference models "
          f"{_ranges(gaps)} points OA ({drops}) and leaves them below the visual-blind model in "
          f"{below} of {len(gaps)} settings (the paper finds them below in every setting)."]


def _balanced(study, thresholds):
  balanced = study.get("balanced")
  if not balanced:
    return []
  rows = balanced["analysis"]["rows"].get("Overall", {})
  prior, uni = rows.get("prior_acc", math.nan), rows.get("uni_acc", math.nan)
  out = []
  for cell in balanced["cells"]:
    blind = run_stats(cell["blind"], ["OA"])["OA"][0]
    ref = run_stats(cell["reference"], ["OA"])["OA"][0]
    gap = 100 * (blind - prior)
    level = (f"within {thresholds['guess']:g} points of it: with the answer prior removed, the "
             "question alone is worth a guess" if abs(gap) < thresholds["guess"] else
             f"{gap:+.2f} points from it: a bias the balancing left" if gap > 0 else
             f"{gap:+.2f} points from it: below a guess (under-trained)")
    out.append(f"On the balanced twin every answer of a question type is equally frequent, so the "
               f"most common answer scores {pct(prior)}% OA, the uniform guess {pct(uni)}%; the "
               f"visual-blind model reaches {pct(blind)}% ({level}), the reference model "
               f"{pct(ref)}% ({100 * (ref - blind):+.2f} points from the image).")
  return out


def reading(study, columns, flags):
  """A paragraph read off the numbers; every threshold it uses is stated in the report."""
  thresholds = study.get("reading") or {"close": 2.0, "margin": 5.0, "guess": 3.0}
  kinds = study["adversarial"]
  parts = []
  for cell in study["cells"]:
    rows = dict(setups(cell, columns, kinds))
    ref, blind = rows["Reference model"]["OA"][0], rows["Visual blind"]["OA"][0]
    text = (f"{cell['label']} {cell['weights']}: reference OA {pct(ref)}%, visual blind "
            f"{pct(blind)}% ({100 * (ref - blind):+.2f} points for the image)")
    if "random" in kinds:
      text += f", adversarial (random image) {pct(rows[KIND_LABELS['random']]['OA'][0])}%"
    parts.append(text)
  out = ["; ".join(parts) + "."]
  out += _reference_vs_blind(study, columns, thresholds)
  out += _against_prior(study, thresholds)
  out += _adversarial(study, columns)
  if flags.small:
    out.append(flags.note())
  out += _balanced(study, thresholds)
  return " ".join(out)


def thresholds_text(study):
  t = study.get("reading") or {}
  return (f"Thresholds of this reading (config `study.reading`, `study.min_questions`): a blind "
          f"model within close = {t.get('close', 2.0):g} points of its reference shows a strong "
          f"bias; a reference model clearly beats the most common answer when margin = "
          f"{t.get('margin', 5.0):g} points above it; a balanced-twin blind model within guess = "
          f"{t.get('guess', 3.0):g} points of the most common answer is guessing; columns with "
          f"fewer than {study.get('min_questions', 0)} {study.get('split', 'test')} questions are "
          f"marked {FLAG}.")


def summary(study, columns):
  """The few sentences the docs quote (between their study-summary markers)."""
  kinds = study["adversarial"]
  gaps, adv_gaps, prior_gaps = [], [], []
  prior = study["analysis"]["rows"].get("Overall", {}).get("prior_acc", math.nan)
  for cell in study["cells"]:
    rows = dict(setups(cell, columns, kinds))
    ref = rows["Reference model"]["OA"][0]
    gaps.append(100 * (ref - rows["Visual blind"]["OA"][0]))
    prior_gaps.append(100 * (ref - prior))
    if "random" in kinds:
      adv_gaps.append(100 * (ref - rows[KIND_LABELS["random"]]["OA"][0]))
  n = len(gaps)
  won = sum(g > 0 for g in gaps)
  out = [f"Every reference model beats its visual-blind twin (by {_ranges(gaps)} points OA)"
         if won == n else f"{won} of {n} reference models beat their visual-blind twins "
         f"(reference minus visual-blind: {_ranges(gaps)} points OA)"]
  every = won == n  # the sentence is still of "every reference model"
  if prior_gaps and not math.isnan(prior):
    above = sum(g > 0 for g in prior_gaps)
    if above == n:
      beaten = (f"answering the most common answer per question type ({pct(prior)}% OA) by "
                f"{_ranges(prior_gaps)} points")
      if every:
        out[-1] += f" and {beaten}"
      else:  # "0 of 1 ... beat their twins ... and answering ..." read as 0 beating the prior
        out[-1] += "."
        out.append(f"Every reference model beats {beaten}")
    else:  # "beat ... and answering the most common answer by -65 points" read as a win
      every = False
      out[-1] += (f"; {above} of {n} beat answering the most common answer per question type "
                  f"({pct(prior)}% OA; reference minus it: {_ranges(prior_gaps)} points)")
  if adv_gaps:
    lost = sum(g > 0 for g in adv_gaps)
    if every and lost == n:
      out[-1] += f", and loses {_ranges(adv_gaps)} points OA when its image is swapped"
    else:  # "0 of 1 reference models beat ..., and loses 0.00 points" (or -2.00) read as a loss
      out[-1] += "."
      out.append(f"Swapping the image for a random one lowers the OA of {lost} of {n} reference "
                 f"models (reference minus swapped: {_ranges(adv_gaps)} points)")
  out[-1] += "."
  balanced = study.get("balanced")
  if balanced:
    rows = balanced["analysis"]["rows"].get("Overall", {})
    for cell in balanced["cells"]:
      blind = run_stats(cell["blind"], ["OA"])["OA"][0]
      ref = run_stats(cell["reference"], ["OA"])["OA"][0]
      out.append(f"On the balanced twin the visual-blind model scores {pct(blind)}% OA, against "
                 f"{pct(rows.get('prior_acc', math.nan))}% for the most common answer (there "
                 f"the uniform guess, {pct(rows.get('uni_acc', math.nan))}%) and {pct(ref)}% for "
                 "the reference model.")
  timings = study.get("timings", {})
  stages, units = len({_stage(key) for key in timings}), len(timings)  # as _timings counts
  out.append(f"Its {stages} stage{'' if stages == 1 else 's'} recorded "
             f"{sum(timings.values()) / 60:.1f} min of work over {units} "
             f"unit{'' if units == 1 else 's'} (report.md, Wall time).")
  return textwrap.fill(" ".join(out), width=100, break_on_hyphens=False)


def warnings_section(warnings):
  """The report's list of the WARNINGs logged while the study ran (study/journal.Warnings)."""
  if not warnings:
    return ["## Warnings", "", "None: no WARNING was logged while this folder's study ran.", ""]
  listed = [w["message"] + (f"  [logged {w['count']} times]" if w["count"] > 1 else "")
            for w in warnings]
  return ["## Warnings", "", f"{len(warnings)} distinct WARNING(s) logged while this folder's "
          "study ran, over every invocation (also in warnings.json); read them before the "
          "numbers:", "", "```text", *listed, "```", ""]


def _stage(timing_key):
  """The stage (data, pretrain, train, ...) a timing is of: "train/runs/x/seed0" -> "train"."""
  return timing_key.split("/")[0]


def _timings(study):
  values = study["timings"]
  groups = {}
  for key, seconds in values.items():
    groups.setdefault(_stage(key), []).append(seconds)
  rows = [(name, len(secs), f"{sum(secs):.1f}") for name, secs in groups.items()]
  rows.append(("total", len(values), f"{sum(values.values()):.1f}"))
  return tables.to_markdown(tables.Table("", ("stage", "units", "seconds"), tuple(rows)))


def settings_table(study):
  rows = tuple(tuple(r) for r in study.get("settings", ()))
  return tables.Table(caption="Settings these models were trained with, beside the paper's",
                      columns=("setting", "this study", "paper"), rows=rows)


def _also_as(stem):
  """Where a table of the report is also written for spreadsheets and papers (_write_tables)."""
  return f"Also as CSV and LaTeX: `analysis/{stem}.csv`, `analysis/{stem}.tex`."


def _write_tables(directory, named):
  out_dir = os.path.join(directory, "analysis")
  for stem, table in named.items():
    tables.write(table, out_dir, stem)


def write_report(directory, study):
  """Writes directory/report.md, summary.md, figures/figure5.png and the report's tables under
  analysis/ (CSV, Markdown, LaTeX); returns the report's path."""
  cells = study["cells"]
  columns = columns_of(cells)
  kinds = study["adversarial"]
  flags = Flags(counts_of(cells, columns), study.get("min_questions", 0), study["split"])
  fig5 = figure5(cells, columns, kinds, os.path.join(directory, "figures", "figure5.png"),
                 study["split"])
  ds = study["dataset"]
  sizes = ", ".join(f"{k} {v}" for k, v in ds["sizes"].items())
  t2 = table2(table2_rows(study), columns, flags)
  t6 = table6(cells, columns, kinds, flags)
  t3, _ = table3(study, columns, flags)
  named = {"table2": t2, "table6": t6, f"table3_{study['split']}": t3}
  text = summary(study, columns)
  lines = [
      "# Language-bias study", "",
      f"Dataset: {ds['label']} at `{ds['root']}` ({sizes} questions); evaluated on the "
      f"{study['split']} split. Seeds: {', '.join(map(str, study['seeds']))}."
      + _left_out(study.get("left_out")), "",
      "## Summary", "", text, "",
      *warnings_section(study.get("warnings", [])),
      "## Reading", "", reading(study, columns, flags), "", thresholds_text(study), "",
      "## Settings", "", tables.to_markdown(settings_table(study)),
      "## Reference models (Table 2 layout)", "", tables.to_markdown(t2), flags.note(), "",
      _also_as("table2"), "",
      "## Visual blind and adversarial testing (Table 6 layout)", "", tables.to_markdown(t6),
      flags.note(), "", _also_as("table6"), "",
      f"![Figure 5]({os.path.relpath(fig5, directory)})", "",
      "Figure 5: the Table 6 numbers as bars. " + plots.error_note(
          _n_seeds(cells), _draws_by_kind(cells, kinds) if kinds else None), "",
      "## Dataset analysis (Table 3 layout)", "", tables.to_markdown(t3), flags.note(), "",
  ]
  if study["analysis"]["objects_table"] is not None:
    lines += ["## Objects and patterns (Table 4 layout)", "",
              tables.to_markdown(study["analysis"]["objects_table"])]
  lines += [f"![Figure 7]({study['analysis']['figure']})", ""]
  if study.get("balanced"):
    bcells = study["balanced"]["cells"]
    bcolumns = columns_of(bcells)
    bflags = Flags(counts_of(bcells, bcolumns), study.get("min_questions", 0), study["split"])
    tb = balanced_table(study["balanced"], bcolumns, bflags)
    named["balanced"] = tb
    lines += ["## Balanced synthetic twin", "",
              "Same generator with the answer prior removed: within each question pattern and "
              "object, and within each question type, every answer is equally frequent, so the "
              "most common answer scores the uniform guess and the visual-blind model should fall "
              "to it.", "", tables.to_markdown(tb), bflags.note(), "",
              tables.to_markdown(study["balanced"]["analysis"]["type_table"]),
              f"![Figure 7, balanced]({study['balanced']['analysis']['figure']})", ""]
  if study.get("shortcuts"):
    lines += shortcut_report.study_section(study["shortcuts"], directory)
  if study.get("grounding"):  # the grounding stage (eval/grounding.study_stage)
    from rsvqa_jax.bias import grounding_report  # pylint: disable=g-import-not-at-top
    lines += grounding_report.study_section(study["grounding"], directory,
                                            study["reading"]["margin"])
  if study.get("answerability"):  # the answerability stage (eval/answerability.py)
    from rsvqa_jax.bias import answerability  # pylint: disable=g-import-not-at-top
    lines += answerability.study_section(study["answerability"])
  lines += ["## Wall time", "",
            f"Seconds of work recorded per stage (over every invocation of this study; runs "
            f"trained in the last one: {study['trained_this_call']}).", "", _timings(study), ""]
  _write_tables(directory, named)
  write_text(os.path.join(directory, "summary.md"), text + "\n")
  path = os.path.join(directory, "report.md")
  write_text(path, "\n".join(lines))
  return path


def _left_out(stages):
  """The sentence naming the stages a study of a real dataset skipped, or ''."""
  if not stages:
    return ""
  return f" Left out, as they need a generated dataset: {', '.join(stages)}."


def write_text(path, text):
  """Writes through a temporary file renamed into place: a reader never sees half a report."""
  with storage.replacing(path) as f:
    f.write(text)


def block_pattern(begin, end):
  """The block quote_into replaces: text between `begin` and `end`, each on a line of its own."""
  return re.compile(re.escape(begin) + r"\n.*?\n" + re.escape(end), re.S)


def quote_into(paths, blocks):
  """Replaces, in every file of `paths` that holds a block's markers, the text between them with
  the block's text ((begin, end, text) triples), so the docs' figures are a run's, never typed.

  A block whose markers none of the files holds is an error naming them: nothing is written.
  """
  texts = {}
  for path in paths:
    with open(path, encoding="utf-8") as f:
      texts[path] = f.read()
  for begin, end, body in blocks:
    pattern = block_pattern(begin, end)
    holders = [path for path, text in texts.items() if pattern.search(text)]
    if not holders:
      raise RSVQAError(f"{', '.join(paths)}: no block between {begin!r} and {end!r}")
    for path in holders:
      texts[path] = pattern.sub(lambda _: f"{begin}\n{body.strip()}\n{end}", texts[path], 1)
  for path, text in texts.items():
    write_text(path, text)


def main(argv=None):
  parser = argparse.ArgumentParser(description="Copy a study's summaries into the docs.")
  parser.add_argument("study_dir", help="the study folder (holds summary.md)")
  parser.add_argument("--docs", "--readme", dest="docs", nargs="+", required=True,
                      help="the pages to update in place (each summary goes to the page holding "
                      "its markers)")
  args = parser.parse_args(argv)
  try:
    blocks = [(DOCS_BEGIN, DOCS_END, _read(os.path.join(args.study_dir, "summary.md")))]
    shortcuts_path = os.path.join(args.study_dir, shortcut_report.SUMMARY_FILE)
    if os.path.exists(shortcuts_path):  # the shortcuts stage ran: its summary too
      blocks.append((shortcut_report.DOCS_BEGIN, shortcut_report.DOCS_END, _read(shortcuts_path)))
    quote_into(args.docs, blocks)
  except (OSError, RSVQAError) as e:
    print(f"report: error: {e}", file=sys.stderr)
    return 2
  return 0


def _read(path):
  with open(path, encoding="utf-8") as f:
    return f.read()


if __name__ == "__main__":
  sys.exit(main())
