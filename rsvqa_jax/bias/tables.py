"""The paper's table layouts (Tables 3, 4, 5, 7), written as CSV, Markdown and LaTeX.

Cell convention: a float is an accuracy-like fraction and is printed as a percentage with
two decimals; NaN (no sample) prints "n/a"; None prints "undefined" (IO with LB = 100%);
int and str print as they are; "" is a blank cell.
"""
import csv
import dataclasses
import io
import logging
import math
import os

import numpy as np

from rsvqa_jax import config as config_lib
from rsvqa_jax import storage
from rsvqa_jax.errors import RSVQAError

_log = logging.getLogger(__name__)

TYPE_NAMES = {
    "comp": "Comparison", "count": "Counting", "presence": "Presence", "rural_urban": "Rural/urban",
    "area": "Area", "yes_no": "Yes/No", "yes/no": "Yes/No", "lc": "Land cover", "land_cover": "Land cover",
    "location": "Location", "scene": "Scene", "simple_counting": "Simple Counting",
    "complex_counting": "Complex Counting", "condition_yes_no": "Condition Recognition - Yes/No",
    "condition_road": "Condition Recognition - Road", "condition_scene": "Condition Recognition - Scene",
}
LEVEL_NAMES = {"pattern": "pattern", "object": "object", "object_attr": "object (w/ attr)"}


DATASET_LABELS = {"lr": "RSVQA LR", "hr": "RSVQA HR", "xben": "RSVQAxBEN", "floodnet": "FloodNet",
                  "rsivqa": "RSIVQA"}


def dataset_label(name):
  """The paper's name of a dataset layout (lr -> RSVQA LR), or the name itself."""
  return DATASET_LABELS.get(name, name)


def type_name(qtype):
  """The displayed name of a question type key ('rural_urban' -> 'Rural/urban')."""
  return TYPE_NAMES.get(qtype.lower(), qtype)


def type_order(types):
  """Question types in the paper's column order: by displayed name (Comparison, Counting,
  Presence, Rural/urban; Area first for HR; Land cover, Presence for RSVQAxBEN, whose files
  call the paper's Yes/No type `presence`), as its tables."""
  return sorted(types, key=lambda t: (type_name(t).lower(), t))


@dataclasses.dataclass(frozen=True)
class Table:
  caption: str
  columns: tuple
  rows: tuple  # tuples of cells, one per column


def two_decimals(x):
  """`x` with two decimals; a value that rounds to zero is 0.00, never -0.00 (float noise such
  as 0.5750000000000001 - 0.575 would otherwise read as a loss)."""
  text = f"{x:.2f}"
  return "0.00" if text == "-0.00" else text


def cell(value):
  """A table cell's text: 'undefined' for None, a fraction in percent (two decimals; 'n/a' for
  NaN), else str."""
  if value is None:
    return "undefined"
  if isinstance(value, float):
    return "n/a" if math.isnan(value) else two_decimals(100.0 * value)
  return str(value)


def _table(table, render):
  """`table` if a Table; a notebook handing another object (a dict of tables, an analysis, the
  None of a table a dataset lacks) met an AttributeError deep inside."""
  if not isinstance(table, Table):
    why = " (None: the analysis has no such table, e.g. HR's objects)" if table is None else ""
    raise RSVQAError(f"{render}: expected a bias.tables.Table, got {type(table).__name__}"
                     f"{why}; e.g. analyze(...)[split]['types']")
  return table


def to_csv(table):
  """The Table as CSV text: a header row of its columns, then its rows (no caption)."""
  table = _table(table, "to_csv")
  buf = io.StringIO()
  writer = csv.writer(buf, lineterminator="\n")
  writer.writerow(table.columns)
  writer.writerows([cell(v) for v in row] for row in table.rows)
  return buf.getvalue()


def to_markdown(table):
  """The table in Markdown, its caption in bold above it (none for an empty caption)."""
  table = _table(table, "to_markdown")
  esc = lambda s: s.replace("|", "\\|")
  lines = [f"**{esc(table.caption)}**", ""] if table.caption else []
  lines += ["| " + " | ".join(esc(c) for c in table.columns) + " |",
            "|" + "|".join("---" for _ in table.columns) + "|"]
  lines += ["| " + " | ".join(esc(cell(v)) for v in row) + " |" for row in table.rows]
  return "\n".join(lines) + "\n"


_LATEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                  "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
                  "|": r"\textbar{}"}


def latex_escape(text):
  """`text` with LaTeX's special characters escaped."""
  return "".join(_LATEX_SPECIAL.get(ch, ch) for ch in text)


def to_latex(table):
  """The Table as a LaTeX table environment: its caption, then a tabular of its columns."""
  table = _table(table, "to_latex")
  align = "l" * 2 + "r" * (len(table.columns) - 2) if len(table.columns) > 2 else "l" * len(table.columns)
  lines = [r"\begin{table}[ht]", r"\centering", rf"\caption{{{latex_escape(table.caption)}}}",
           rf"\begin{{tabular}}{{{align}}}", r"\hline",
           " & ".join(latex_escape(c) for c in table.columns) + r" \\", r"\hline"]
  lines += [" & ".join(latex_escape(cell(v)) for v in row) + r" \\" for row in table.rows]
  lines += [r"\hline", r"\end{tabular}", r"\end{table}"]
  return "\n".join(lines) + "\n"


TABLE_EXTS = ("csv", "md", "tex")  # the files `write` writes of a table


def write(table, out_dir, stem):
  """Write `stem`.csv, .md and .tex under `out_dir`; returns the three paths."""
  os.makedirs(out_dir, exist_ok=True)
  paths = []
  for ext, render in zip(TABLE_EXTS, (to_csv, to_markdown, to_latex)):
    path = os.path.join(out_dir, f"{stem}.{ext}")
    with storage.replacing(path) as f:
      f.write(render(table))
    paths.append(path)
  return paths


def mean_std(values):
  """(mean, population std) of a list of fractions; NaN for an empty list."""
  values = np.asarray([v for v in values if v is not None and not math.isnan(v)], np.float64)
  if not len(values):
    return math.nan, math.nan
  return float(values.mean()), float(values.std())


def pct_over_runs(values):
  """'mean (std)' in percent of one value per run, the runs lacking it (None or NaN) said:
  '80.00 (1 of 2 runs)', '75.00 (5.00; 2 of 3 runs)'; 'n/a' when none has it (one run's value
  read '80.00 (0.00)', a mean and std over every run)."""
  have = [v for v in values if v is not None and not math.isnan(v)]
  if not have:
    return "n/a"
  m, s = mean_std(have)
  if len(have) == len(values):
    return pct(m, s)
  spread = "" if len(have) == 1 else f"{two_decimals(100 * s)}; "
  return f"{two_decimals(100 * m)} ({spread}{len(have)} of {len(values)} runs)"


def percent(fraction):
  """'81.23%' of a fraction in a line of text; 'n/a' for none, NaN, or a negative mark (a run's
  best validation OA before any validation)."""
  if fraction is None or math.isnan(fraction) or fraction < 0:
    return "n/a"
  return f"{pct(fraction)}%"


def pct(m, s=None):
  """'81.23 (0.45)' in percent; 'n/a' for NaN."""
  if m is None or math.isnan(m):
    return "n/a"
  return (two_decimals(100 * m) if s is None
          else f"{two_decimals(100 * m)} ({two_decimals(100 * s)})")


def run_columns(results):
  """{column: [value per run]} of accuracy tables: each question type, then AA and OA."""
  columns = {}
  for r in results:
    for name, v in [*r["per_type"].items(), ("AA", r["aa"]), ("OA", r["oa"])]:
      columns.setdefault(name, []).append(v)
  return columns


N_ROW = "N (questions)"


def runs_table(results, caption, setup=None):
  """Accuracy tables (%) of several runs, then their mean (std); question types by their displayed
  names (type_name) in the paper's order, the first row N, the questions of each type.

  `workdir` names each row, followed by `setup` when given (e.g. "adversarial white"), so an
  adversarial table's rows never read as the clean ones. A training type the split lacks
  (`types_absent`) is a column of N 0 and n/a, and the caption says AA leaves it out.
  """
  absent = list(dict.fromkeys(t for r in results for t in r.get("types_absent", ())))
  columns = [*type_order({t for r in results for t in [*r["per_type"], *absent]}), "AA", "OA"]
  counts = {**{t: 0 for t in absent}, **results[0].get("per_type_n", {})}
  rows = [(N_ROW, *(counts.get(c, "") for c in columns[:-2]), "", results[0]["n"])]
  caption = f"accuracy (%), {caption}"
  if absent:
    caption += _absent_note(absent, len(columns) - 2 - len(absent))
  name = lambda r: os.path.basename(r["workdir"]) + (f" ({setup})" if setup else "")
  rows += [(name(r), *({**r["per_type"], "AA": r["aa"], "OA": r["oa"]}.get(c, math.nan)
                       for c in columns)) for r in results]
  if len(results) > 1:
    stats = run_columns(results)
    rows.append(("mean (population std)",
                 *(pct(*mean_std(stats.get(c, []))) for c in columns)))
  return Table(caption=caption, columns=("run", *(type_name(c) for c in columns)),
               rows=tuple(rows))


def _absent_note(absent, others):
  """The caption's words for training types the split lacks: AA is over the `others`."""
  return (f"; no {', '.join(type_name(t) for t in type_order(absent))} question in the split: AA "
          f"over the other {others} type(s)")


def _blank(value):
  return "" if value is None else value


# What Table 3 / 5's rows other than the question types are (the paper names them only).
ROWS_NOTE = ("rows All: one most common answer for every question, whatever its type (no model "
             "column); Average: the unweighted mean over the types (AA); Overall: weighted by "
             "questions (OA)")
QUESTION_LEVEL_NOTE = ("; Question-level: each question's own most common answer, its type's "
                       "for a question unseen in training")


def type_table(analysis, dataset):
  """Tables 3 / 5: the analysis at the question-type level, with the model when given."""
  model = analysis.accuracy is not None
  adv = analysis.adversarial is not None
  columns = ["Question type", "N_s", "|A_s|", "Most common answer", "Prior_Acc (%)", "Uni_Acc (%)"]
  columns += ["RSVQA_Acc (%)", "IO_Prior (%)"] if model else []
  columns += ["AdTest_Acc (%)", "IO_AdTest (%)"] if adv else []
  rows = []
  for r in analysis.type_rows():
    label = type_name(r.label) if r.label in analysis.types else r.label
    row = [label, _blank(r.n), _blank(r.n_answers), _blank(r.prior), r.prior_acc, r.uni_acc]
    if model:
      row += ["", ""] if r.acc is None else [r.acc, r.io_prior]
    if adv:
      row += ["", ""] if r.acc is None or r.adv_acc is None else [r.adv_acc, r.io_adtest]
    rows.append(tuple(row))
  notes = [f"{dataset} {analysis.eval_split}: most common answers from split {analysis.fit_split} "
           f"({analysis.n_fit} samples) applied to {analysis.n_eval} samples"]
  notes.append(ROWS_NOTE + (QUESTION_LEVEL_NOTE if "question" in analysis.levels else ""))
  for name, scores in (("predictions", analysis.accuracy), ("adversarial predictions", analysis.adversarial)):
    if scores is not None and scores.missing:
      notes.append(f"{scores.missing} sample(s) without a row in the {name} file counted as wrong")
    if scores is not None and (scores.outside or scores.foreign):
      notes.append(f"{name}: {scores.outside} outside the training answer space and "
                   f"{scores.foreign} not of their question type's answer form, counted wrong")
  if note := analysis_note(analysis):
    notes.append(note)
  return Table(caption="; ".join(notes), columns=tuple(columns), rows=tuple(rows))


def analysis_note(analysis):
  """The note of every rendering of Table 3 / 5 ("" when there is nothing to say):
  - evaluated types absent from the fit split: their "most common answer" is the overall prior;
  - samples whose answer is none of the fit answers of their type: Uni_Acc = 1/|A_s| is no
    uniform guess's score there (a guess among A_s never gets them right);
  - types whose most common answer is tied in the fit split: Prior_Acc rests on the tie break."""
  level = analysis.levels["type"]
  notes = []
  absent = [t for t in analysis.types if analysis.type_counts[t] and (t,) not in level.fit_priors]
  if absent:
    notes.append(f"{level.unseen_samples} sample(s) of types absent from {analysis.fit_split} "
                 f"({', '.join(type_name(t) for t in absent)}) predicted by the overall prior")
  outside = analysis.outside_answers
  if outside:
    counts = ", ".join(f"{type_name(t)} {n} of {analysis.type_counts[t]}"
                       for t, n in outside.items())
    notes.append(f"{sum(outside.values())} sample(s) with an answer no {analysis.fit_split} "
                 f"sample of their type has ({counts}): Uni_Acc = 1/|A_s| overstates a uniform "
                 "guess on them")
  tied = [(t, level.fit_priors[(t,)]) for t in analysis.types
          if (t,) in level.fit_priors and level.fit_priors[(t,)].tied_with]
  if tied:
    notes.append(f"most common {analysis.fit_split} answer tied ("
                 + ", ".join(f"{type_name(t)}: {p.answer!r} over "
                             + ", ".join(map(repr, p.tied_with)) for t, p in tied)
                 + "; the alphabetically first is taken): Prior_Acc rests on that choice")
  return "; ".join(notes)


def objects_patterns_table(analysis, dataset):
  """Table 4: the LR objects & patterns levels, per question type and overall."""
  columns = ("Question type", "Group", "Subsets", "Prior_Acc (%)", "Uni_Acc (%)")
  rows = []
  levels = [analysis.levels[name] for name in LEVEL_NAMES]
  for t in analysis.types:
    for level in levels:
      rows.append((type_name(t), LEVEL_NAMES[level.name], level.type_subsets[t],
                   level.type_prior_acc[t], level.type_uni_acc[t]))
  for level in levels:
    rows.append(("Overall", LEVEL_NAMES[level.name], len(level.subsets), level.prior_acc, level.uni_acc))
  unseen = ", ".join(f"{LEVEL_NAMES[lv.name]} {lv.unseen_subsets} ({lv.unseen_samples} samples)" for lv in levels)
  caption = (f"{dataset} {analysis.eval_split}: objects & patterns levels, priors from {analysis.fit_split}; "
             f"subsets absent from {analysis.fit_split} (predicted by their type's prior): {unseen}; "
             f"questions matching no template: {analysis.unparsed}")
  return Table(caption=caption, columns=columns, rows=tuple(rows))


def question_table(analysis, dataset):
  """Table 7: the analysis per single question."""
  level = analysis.levels["question"]
  columns = ("Question type", "Question", "Most common answer", "N_s", "|A_s|", "Prior_Acc (%)",
             "Uni_Acc (%)", f"In {analysis.fit_split}")
  rows = [(type_name(r.key[0]), r.key[1], r.prior, r.n, r.n_answers, r.prior_acc, r.uni_acc,
           "yes" if r.seen else "no") for r in level.subsets]
  rows.append(("Question-level, overall", "", "", analysis.n_eval, "", level.prior_acc, level.uni_acc, ""))
  caption = (f"{dataset} {analysis.eval_split}: accuracy of predicting the most common answer of each "
             f"question (from {analysis.fit_split})")
  return Table(caption=caption, columns=columns, rows=tuple(rows))


ANALYSIS_STEMS = ("types", "objects_patterns", "questions")  # write_analysis's tables


def analysis_files(split, prefix=""):
  """The names of every file write_analysis may write for `split` (some only for LR, or a split
  of few enough questions): a folder's earlier ones that a new analysis did not write are its
  readers' to drop, not to read as the new analysis's."""
  return [f"{prefix}{stem}_{split}.{ext}" for stem in ANALYSIS_STEMS for ext in TABLE_EXTS]


def write_analysis(result, dataset, out_dir, prefix="", max_question_rows=500):
  """Writes the tables of one analysed split (analysis.Analysis) under `out_dir`.

  {prefix}types_S (Tables 3 / 5), for LR {prefix}objects_patterns_S (Table 4), and
  {prefix}questions_S (Table 7) when the split has at most `max_question_rows` distinct
  questions; S is the evaluated split. Returns (type table, objects table or None, paths).
  """
  split = result.eval_split
  types, objects_patterns, questions = (f"{prefix}{stem}_{split}" for stem in ANALYSIS_STEMS)
  main = type_table(result, dataset)
  paths = write(main, out_dir, types)
  objects = None
  if result.unparsed is not None:
    objects = objects_patterns_table(result, dataset)
    paths += write(objects, out_dir, objects_patterns)
  if len(result.levels["question"].subsets) <= max_question_rows:
    paths += write(question_table(result, dataset), out_dir, questions)
  return main, objects, paths


# The paper's training-grid tables over a folder of workdirs (`rsvqa-jax tables`).

LM_LABELS = {"skipthoughts": "Skip-thoughts", "bert": "BERT", "distilbert": "distilBERT",
             "roberta": "roBERTa"}
LM_ORDER = ("skipthoughts", "bert", "distilbert", "roberta")
FUSION_ORDER = ("mult", "concat", "mutan")
FUSION_LABELS = {"mult": "e-mult", "concat": "concat", "mutan": "MUTAN"}
MISSING = "missing"
# Table 2's rows in the paper's order: (label, language model, frozen, fusion, model.head).
PAPER_TABLE2 = (
    ("RSVQA baseline", "skipthoughts", True, "mult", "original"),
    ("RNN Skip-thoughts", "skipthoughts", True, "mutan", "paper"),
    ("Transformer distilBERT", "distilbert", True, "mutan", "paper"),
    ("RNN Skip-thoughts", "skipthoughts", False, "mult", "paper"),
    ("Transformer distilBERT", "distilbert", False, "mult", "paper"),
)
HEAD_ORDER = ("original", "paper", "attention")  # Table 2's extra rows, by head first


@dataclasses.dataclass(frozen=True)
class RunRecord:
  """What the grid tables need of one training workdir."""

  workdir: str
  lm: str
  frozen: bool
  fusion: str
  blind: bool
  head: str  # model.head: "paper", "original" (the RSVQA baseline's) or "attention"
  text_lr: float
  val_oa: float  # best validation OA (NaN when none was recorded)
  accuracy: dict | None  # eval/SPLIT/accuracy.json (bias/metrics.accuracy_table), if evaluated
  identity: dict | None = None  # config.identity of its config (None: not compared)
  stopped: str | None = None  # why the run is unfinished (its checkpoints stop before its last
  # epoch), None when finished or not known
  dataset: str | None = None  # which data it trained on (its layout and folder, or the
  # synthetic generator's settings), None: not known
  random_init: bool = False  # its language model started from random weights (text.checkpoint
  # unset or "random"): not the paper's pretrained model of that name
  epochs: int | None = None  # whole epochs it trained (None: no readable checkpoint record)
  data: dict | None = None  # its data.json: the train and validation splits' sha256 (None: none)

  @property
  def weights(self):
    """'frozen' or 'fine-tuned': the language model's weights as the tables name them."""
    return "frozen" if self.frozen else "fine-tuned"


def best_validation_oa(records, val_split, source="metrics.jsonl"):
  """The best OA among metrics.jsonl records of the run's validation split `val_split` (NaN
  when there is none); an OA that is not a number in [0, 1] is skipped, counted in a WARNING."""
  scores, bad = [], 0
  for r in records:
    if r.get("split") != val_split or "oa" not in r:
      continue
    oa = r["oa"]
    if isinstance(oa, (int, float)) and not isinstance(oa, bool) and 0 <= oa <= 1:
      scores.append(float(oa))
    else:
      bad += 1
  if bad:
    _log.warning(f"{source}: {bad} record(s) of split {val_split} whose OA is not a number in "
                 "[0, 1], skipped")
  return max(scores, default=math.nan)


def _validation_cell(runs, label):
  """A cell of the runs' validation OAs: the value for one run, mean (std) for several, MISSING
  for none. A run without one (metrics.jsonl holds no readable record of its validation split)
  is left out with a WARNING naming it: the cell once read as the mean of all its runs."""
  values = [r.val_oa for r in runs if not math.isnan(r.val_oa)]
  lacking = [r.workdir for r in runs if math.isnan(r.val_oa)]
  if lacking:
    _log.warning(f"{label}: {len(lacking)} of its {len(runs)} run(s) have no validation OA in "
                 f"their metrics.jsonl, left out{' of its mean' if values else ''}: e.g. "
                 f"{lacking[0]}")
  return _over_runs(values) if values else MISSING


def _over_runs(values):
  """mean (std) of the runs' values; one run's value alone (its std would read as agreement)."""
  return pct(values[0]) if len(values) == 1 else pct(*mean_std(values))


def _reference(runs):
  return [r for r in runs if not r.blind]


def table1(runs):
  """Table 1: validation OA per LM x fusion x frozen / fine-tuned (24 cells), MISSING marked.

  Cells are the paper's models (its head, not the original one, not visual blind): mean (std)
  over the runs of a cell when there are several (seeds or learning rates: one cell, every run).
  Runs that differ in more than those (another dataset, batch size, ...) or repeat a seed at one
  learning rate make the cell read UNLIKE, with a WARNING. A run of another head (attention),
  language model or fusion fits no cell: a WARNING counts them (Table 2 lists them).
  """
  outside = [r for r in _reference(runs) if r.head != "original" and (
      r.head != "paper" or r.lm not in LM_ORDER or r.fusion not in FUSION_ORDER)]
  if outside:
    why = sorted({f"{r.head} head" if r.head != "paper" else f"{r.lm} {r.fusion}" for r in outside})
    _log.warning(f"Table 1: {len(outside)} run(s) fit none of its cells ({', '.join(why)}; Table 2 "
                 f"lists them), e.g. {outside[0].workdir}")
  columns = [f"{LM_LABELS[lm]} {FUSION_LABELS[f]}" for lm in LM_ORDER for f in FUSION_ORDER]
  rows = []
  for frozen in (True, False):
    weights = "frozen" if frozen else "fine-tuned"
    cells = []
    for lm in LM_ORDER:
      for fusion in FUSION_ORDER:
        mine = [r for r in _paper_models(runs)
                if (r.lm, r.frozen, r.fusion) == (lm, frozen, fusion)]
        label = f"Table 1 cell '{LM_LABELS[lm]} {FUSION_LABELS[fusion]}, LM {weights}'"
        cells.append(UNLIKE if _unlike(mine, label, free=(LR_KEY,))
                     else _validation_cell(mine, label))
    rows.append((f"LM {weights}", *cells))
  missing = sum(c == MISSING for row in rows for c in row[1:])
  random = sorted({f"{LM_LABELS[r.lm]} {FUSION_LABELS[r.fusion]}, LM {r.weights}"
                   for r in _paper_models(runs) if r.random_init and r.lm in LM_ORDER
                   and r.fusion in FUSION_ORDER})
  random = (f"; cells over randomly initialised language models (no text.checkpoint), not the "
            f"pretrained ones the columns name: {'; '.join(random)}" if random else "")
  return Table(caption=f"Table 1 layout: validation OA (%), mean (population std) over the runs "
                       f"of a cell (seeds and language-model learning rates; cells over other "
                       f"differences read {UNLIKE!r}); {missing} of 24 cells {MISSING}{random}",
               columns=("", *columns), rows=tuple(rows))


def _paper_models(runs):
  """The runs of the paper's grid: its head, not visual blind."""
  return [r for r in _reference(runs) if r.head == "paper"]


def _row_key(run):
  return (run.head, run.lm, run.frozen, run.fusion)


UNLIKE = "unlike runs"
LR_KEY = "optim.text_lr"  # the language model's learning rate, swept by configs/lr_sweep.py


def _unlike(runs, label, free=()):
  """True (with a WARNING naming them) when runs are not one model over distinct seeds (and
  values of the `free` keys), or mix unfinished runs with finished ones: the cells over them
  then read UNLIKE instead of a mean."""
  compared = [(r.workdir, r.identity) for r in runs if r.identity is not None]
  problem = config_lib.unlike_seed_runs(compared, free) if len(compared) > 1 else None
  stopped = [r for r in runs if r.stopped]
  if not problem and stopped and len(stopped) < len(runs):  # evaluate --seeds refuses them too
    problem = f"{stopped[0].workdir}: {stopped[0].stopped}; a mean would mix it with finished runs"
  lengths = sorted({r.epochs for r in runs if r.epochs is not None})
  if not problem and len(lengths) > 1:  # every one stopped, at different epochs
    problem = f"runs of {' and '.join(map(str, lengths))} epochs of training" + (
        f" (e.g. {stopped[0].workdir}: {stopped[0].stopped})" if stopped else "")
  data = [r for r in runs if r.data is not None]
  other = next((r for r in data if r.data != data[0].data), None)
  if not problem and other is not None:  # the folder's data replaced between the runs
    problem = (f"{other.workdir} trained on other data than {data[0].workdir} (their data.json "
               "record other train or validation splits)")
  if problem:
    _log.warning(f"{label}: {problem}; it reads {UNLIKE!r} instead of a mean: keep one model's "
                 "runs under --runs")
  return bool(problem)


def _other_data(runs):
  """Why runs' evaluations are not of the same questions, or None: another version of the split
  (evaluate --data-root) scored other samples. The split's fingerprint decides where both
  evaluations recorded it, the counts otherwise."""
  first = runs[0].accuracy
  counts = lambda a: (a["n"], sorted(a["per_type_n"].items()))
  for run in runs[1:]:
    acc = run.accuracy
    hashes = (first.get("split_sha256"), acc.get("split_sha256"))
    if counts(first) != counts(acc) or (None not in hashes and hashes[0] != hashes[1]):
      return (f"{run.workdir} was evaluated on other questions than {runs[0].workdir} "
              f"({acc['n']} against {first['n']}" + (")" if acc["n"] != first["n"]
                                                      else ", other data)"))
  return None


def _pending_seeds(evaluated, pending, what):
  """The runs of `pending` (not evaluated) that are further seeds of the evaluated runs' model,
  so a row's 'E of N' counts them (a WARNING names the evaluate command); any other (another
  dataset or setting, a seed run twice) is left out of N with a WARNING saying why. All of them
  when nothing is evaluated, or when the evaluated runs are unlike already (the row then reads
  UNLIKE)."""
  base = [(r.workdir, r.identity) for r in evaluated if r.identity is not None]
  if not pending or not base or (len(base) > 1 and config_lib.unlike_seed_runs(base)):
    return pending
  kept = []
  for run in pending:
    problem = (config_lib.unlike_seed_runs([*base, (run.workdir, run.identity)])
               if run.identity is not None else None)
    if problem:
      _log.warning(f"{what}: {run.workdir} is not evaluated and is not counted among its runs: "
                   f"{problem}")
    else:
      kept.append(run)
  if kept:
    _log.warning(f"{what}: {len(kept)} of its {len(evaluated) + len(kept)} seeds not evaluated, "
                 f"its cells are the others': rsvqa-jax evaluate --workdir {kept[0].workdir}"
                 + (f" (and {len(kept) - 1} more)" if len(kept) > 1 else ""))
  return kept


def table2(runs, split="test"):
  """Table 2: test accuracy per type, AA, OA, mean (std) over seeds; the paper's five rows
  first (MISSING or "not evaluated" where so), then any other reference model found. A training
  type the split lacks (accuracy.json's `types_absent`) is a column of N 0 and n/a, and the
  caption says AA leaves it out (as `evaluate`'s table does)."""
  ref = _reference(runs)
  present = {t for r in ref if r.accuracy for t in r.accuracy["per_type"]}
  absent = {t for r in ref if r.accuracy for t in r.accuracy.get("types_absent", ())} - present
  types = type_order(present | absent)
  keys = [(h, lm, f, fu) for _, lm, f, fu, h in PAPER_TABLE2]
  rank = lambda k: (HEAD_ORDER.index(k[0]) if k[0] in HEAD_ORDER else 9,
                    LM_ORDER.index(k[1]) if k[1] in LM_ORDER else 9, not k[2], k[3])
  keys += sorted({_row_key(r) for r in ref} - set(keys), key=rank)
  labels = {(h, lm, f, fu): label for label, lm, f, fu, h in PAPER_TABLE2}
  rows = []
  scored = [r for r in ref if r.accuracy]
  if scored and (problem := _other_data(scored)):
    _log.warning(f"Table 2 of {split}: {problem}; its N row counts {scored[0].workdir}'s "
                 "questions")
  counts = scored[0].accuracy if scored else None
  if counts:
    rows.append((f"N ({split} questions)", "", "", "",
                 *(counts["per_type_n"].get(t, 0 if t in absent else "") for t in types), "",
                 counts["n"]))
  for key in keys:
    head, lm, frozen, fusion = key
    mine = [r for r in ref if _row_key(r) == key]
    name = LM_LABELS.get(lm, lm)
    label = labels.get(key) or (f"RSVQA baseline ({name})" if head == "original" else
                                name if head == "paper" else f"{name}, {head} head")
    if any(r.random_init for r in mine):
      label += " (random init)"
    what = f"Table 2 row {label!r}"
    evaluated = [r for r in mine if r.accuracy]
    done = [r.accuracy for r in evaluated]
    counted = evaluated + _pending_seeds(evaluated, [r for r in mine if not r.accuracy], what)
    count = (str(len(counted)) if len(done) in (0, len(counted))
             else f"{len(done)} of {len(counted)}")
    lead = (label, "frozen" if frozen else "fine-tuned", FUSION_LABELS.get(fusion, fusion), count)
    problem = _other_data(evaluated) if done else None
    if problem:
      _log.warning(f"{what}: {problem}; it reads {UNLIKE!r} instead of a mean: evaluate its runs "
                   "on one dataset")
    if (not mine or not done or problem
        or _unlike(evaluated, f"{what} (evaluate --seeds refuses its runs too)")):
      cell = MISSING if not mine else "not evaluated" if not done else UNLIKE
      rows.append((*lead, *([cell] * (len(types) + 2))))
      continue
    value = lambda acc, c: acc[c.lower()] if c in ("AA", "OA") else acc["per_type"].get(c, math.nan)
    rows.append((*lead, *(_over_runs([value(a, c) for a in done])
                          for c in [*types, "AA", "OA"])))
  caption = (f"Table 2 layout: {split} accuracy (%), mean (population std) over seeds, the value "
             "alone for one run (runs: how many workdirs, 'E of N' when E of them were "
             f"evaluated; rows without an evaluation say so, rows of unlike runs read {UNLIKE!r})")
  if absent:
    caption += _absent_note(absent, len(types) - len(absent))
  return Table(caption=caption,
               columns=("Language model", "LM weights", "fusion", "runs",
                        *(type_name(t) for t in types), "AA", "OA"), rows=tuple(rows))


def lr_sweep_table(runs):
  """Figure 8's data: validation OA of the fine-tuned e-mult models per language-model lr, mean
  (std) over the seeds of one model (UNLIKE, with a WARNING, over anything else)."""
  mine = [r for r in _paper_models(runs) if not r.frozen and r.fusion == "mult"]
  lrs = sorted({r.text_lr for r in mine})
  lms = [lm for lm in LM_ORDER if any(r.lm == lm for r in mine)]
  def cell(lm, lr):
    runs = [r for r in mine if (r.lm, r.text_lr) == (lm, lr)]
    label = f"Figure 8 cell '{LM_LABELS[lm]}, lr {lr:g}'"
    return UNLIKE if _unlike(runs, label) else _validation_cell(runs, label)

  rows = [(LM_LABELS[lm], *(cell(lm, lr) for lr in lrs)) for lm in lms]
  return Table(caption="Figure 8 layout: validation OA (%) of fine-tuned e-mult models per "
                       "language-model learning rate", columns=("LM", *(f"{lr:g}" for lr in lrs)),
               rows=tuple(rows))
