"""The shortcut benchmark's folder, its statistics (the paper's Table 1, Figures 5 and 6) and the
tables of a model scored on it (IID vs OOD, Table 4's selection comparison, Table 2's layout).

`create` writes a benchmark folder O whole or not at all (built beside it, renamed into place;
an earlier benchmark there is replaced, any other folder, or an earlier benchmark holding
anything else too, refused):
  data/                    the re-split dataset in the source's official layout (data/resplit.py;
                           its test split is the IID test set)
  split.json               {"train", "val", "iid_test"}: question ids of the source dataset
  concepts.csv             question_id,split,qt,kw,kwp,qt_kw,ko,kop,qt_ko,kw_ko,qt_kw_ko
  ood_{concept}.json       the question ids of each concept's OOD test set
  shortcuts.json           what it was made from (source, seed, unit, labels) and the counts
  statistics.md            every table below, and the figures
  statistics/              splits, groups (Table 1), answer_shift (Figure 5), head_jaccard
                           (Figure 6a), ood_overlap (Figure 6b) as CSV / Markdown / LaTeX, and
                           groups.png, answer_shift.png, head_jaccard.png, ood_overlap.png
"""
import collections
import contextlib
import dataclasses
import logging
import math
import os
import textwrap
import time

import matplotlib
import numpy as np
from matplotlib.figure import Figure

from rsvqa_jax import storage
from rsvqa_jax.bias import plots
from rsvqa_jax.bias import shortcuts
from rsvqa_jax.bias import tables
from rsvqa_jax.data import resplit, split_files, synthetic
from rsvqa_jax.errors import RSVQAError

_log = logging.getLogger(__name__)

VERSION = shortcuts.VERSION
STATS_DIR = "statistics"
STATS_FILE = "statistics.md"
ADAPTIVE = "adaptive overfitting"
NAMES = shortcuts.CONCEPT_NAMES
TOP_K = 8  # answers shown per panel of the answer-shift figure


# Statistics of the benchmark itself.

def splits_table(bench, seed, unit, labels):
  pooled = sum(len(s) for s in bench.splits.values())
  rows = []
  for name in shortcuts.SPLITS:
    split = bench.splits[name]
    rows.append((name, len(split), len(np.unique(split.image_id)), len(split) / pooled,
                 len(set(split.answer.tolist()))))
  caption = (f"Re-split of train + val ({pooled} questions), seed {seed}, unit {unit}: questions, "
             f"images, share of the questions (%), distinct answers; image labels: "
             f"{labels['kind']} ({labels['images_labelled']} of {labels['images']} images "
             f"labelled, {labels['labels']} labels)")
  return tables.Table(caption=caption, columns=("split", "questions", "images", "share (%)",
                                                 "answers"), rows=tuple(rows))


def groups_table(bench):
  """Table 1: groups, imbalanced groups and OOD samples per concept, and what a prior scores."""
  train, test = bench.splits["train"], bench.splits["iid_test"]
  type_hits = shortcuts.type_prior(train, test).prediction == test.answer
  rows = []
  for c in shortcuts.CONCEPTS:
    rule, head = bench.test_rules[c], bench.train_rules[c]
    ood = rule.ood
    shortcut_hits = shortcuts.concept_prior(bench.concepts["train"][c], train,
                                            bench.concepts["iid_test"][c], test).prediction
    shortcut_hits = shortcut_hits == test.answer
    rows.append((NAMES[c], rule.n_groups, rule.n_imbalanced, int(ood.sum()), ood.mean(),
                 len(set(test.answer[ood].tolist())), head.n_groups, int(head.head.sum()),
                 type_hits.mean(), _mean(type_hits[ood]), shortcut_hits.mean(),
                 _mean(shortcut_hits[ood])))
  caption = (f"Concepts on the IID test split ({len(test)} questions): groups, imbalanced groups "
             f"(normalised answer entropy < {shortcuts.ENTROPY_THRESHOLD}), OOD samples (answers "
             f"with count < {float(shortcuts.TAIL_FACTOR)} x the group's mean); train groups and "
             "head-split samples; Prior_Acc = the question type's most common train answer, "
             "Shortcut_Acc = the concept group's most common train answer (the shortcut "
             "itself), on the IID test split and on the OOD set")
  return tables.Table(caption=caption, columns=(
      "concept", "groups", "imbalanced groups", "OOD samples", "OOD share (%)", "OOD answers",
      "train groups", "train head split", "Prior_Acc IID (%)", "Prior_Acc OOD (%)",
      "Shortcut_Acc IID (%)", "Shortcut_Acc OOD (%)"), rows=tuple(rows))


def _mean(values):
  return float(np.mean(values)) if len(values) else math.nan


Shift = collections.namedtuple("Shift", "value answers train ood n_train n_ood")


def answer_shift(bench, concept, top_k=TOP_K):
  """Shift (group value, answers, train and OOD shares, and the questions they are of) of the
  group with the most OOD samples; None when the concept has no OOD sample."""
  rule = bench.test_rules[concept]
  if not rule.ood.any():
    return None
  counts = np.bincount(rule.group[rule.ood], minlength=rule.n_groups)
  value = rule.values[int(counts.argmax())]
  train, test = bench.splits["train"], bench.splits["iid_test"]
  picked = {"train": train.select(bench.concepts["train"][concept] == value),
            "OOD": test.select(rule.ood & (bench.concepts["iid_test"][concept] == value))}
  # One pseudo question type over the whole group, so plots.distribution ranks its answers.
  whole = {k: dataclasses.replace(v, qtype=np.full(len(v), "", object)) for k, v in picked.items()}
  answers, shares = plots.distribution(whole, "", top_k)
  return Shift(value, answers, shares["train"], shares["OOD"], len(picked["train"]),
               len(picked["OOD"]))


def answer_shift_table(bench):
  """Figure 5's shares; the caption gives each group's N, which a share of 100% needs."""
  rows, counts = [], []
  for c in shortcuts.CONCEPTS:
    shift = answer_shift(bench, c)
    if shift is None:
      rows.append((NAMES[c], "(no OOD sample)", "", "", ""))
      continue
    rows += [(NAMES[c], shift.value, a, t, o)
             for a, t, o in zip(shift.answers, shift.train, shift.ood)]
    counts.append(f"{NAMES[c]} {shift.n_train} / {shift.n_ood}")
  caption = ("Answer shares (%) in train and in the OOD set of each concept's group with the most "
             "OOD samples (Figure 5); N, the group's questions in train / in the OOD set: "
             + (", ".join(counts) or "none"))
  return tables.Table(caption=caption,
                      columns=("concept", "group", "answer", "train (%)", "OOD (%)"),
                      rows=tuple(rows))


# A concept's parts in words, for figure titles ("KWP = (none)" reads as no words at all).
PART_WORDS = {"qt": "question type", "kw": "keyword", "kwp": "keyword pair", "ko": "key object",
              "kop": "key object pair"}


def concept_words(concept):
  """'Question type + keyword (QT+KW)'."""
  words = " + ".join(PART_WORDS[p] for p in concept.split("_"))
  return f"{words[0].upper()}{words[1:]} ({NAMES[concept]})"


def group_words(concept, value):
  """A group's value in words: each part quoted, a missing one as 'no keyword' and the like."""
  parts = concept.split("_")
  values = value.split(shortcuts.JOIN) if len(parts) > 1 else [value]
  if len(values) != len(parts):  # a part holding the joiner itself: shown whole
    parts, values = [concept], [value]
  return " + ".join(f"no {PART_WORDS.get(p, 'value')}" if v == shortcuts.NONE
                    else f'"{v.replace(shortcuts.JOIN, " + ")}"' for p, v in zip(parts, values))


def matrices(bench):
  """(head-split Jaccard in train, OOD overlap |A and B| / |A|): [9, 9] each, rows = A."""
  heads = [bench.train_rules[c].head for c in shortcuts.CONCEPTS]
  oods = [bench.test_rules[c].ood for c in shortcuts.CONCEPTS]
  return (np.array([[shortcuts.jaccard(a, b) for b in heads] for a in heads]),
          np.array([[shortcuts.overlap(a, b) for b in oods] for a in oods]))


def matrix_table(matrix, caption):
  return tables.Table(caption=caption, columns=("", *(NAMES[c] for c in shortcuts.CONCEPTS)),
                      rows=tuple((NAMES[c], *map(float, row))
                                 for c, row in zip(shortcuts.CONCEPTS, matrix)))


JACCARD_CAPTION = ("Jaccard similarity (%) of the concepts' head splits in train (Figure 6a): "
                   "samples of head answers in imbalanced train groups")
OVERLAP_CAPTION = ("Overlap of the OOD sets (%, Figure 6b): row A, column B = |A and B| / |A|, "
                   "the share of A's OOD samples that are also in B's")


def groups_figure(bench, path):
  """Table 1's counts: groups (left) and OOD questions (right) on axes of their own, log scale
  above 1 with 0 at the axis (a 0 draws no bar, its label says 0)."""
  fig = Figure(figsize=(13, 4.2))
  by_groups, by_samples = fig.subplots(1, 2, width_ratios=(3, 2))
  x = np.arange(len(shortcuts.CONCEPTS))
  rules = [bench.test_rules[c] for c in shortcuts.CONCEPTS]
  panels = ((by_groups, "number of groups",
             {"groups": [r.n_groups for r in rules],
              "imbalanced groups": [r.n_imbalanced for r in rules]}),
            (by_samples, "number of OOD questions",
             {"OOD samples": [int(r.ood.sum()) for r in rules]}))
  colours = iter(("tab:blue", "tab:orange", "tab:green"))
  for ax, ylabel, bars in panels:
    width = 0.8 / len(bars)
    for j, (label, values) in enumerate(bars.items()):
      drawn = ax.bar(x + (j - (len(bars) - 1) / 2) * width, values, width, label=label,
                     color=next(colours))
      ax.bar_label(drawn, labels=[str(v) for v in values], fontsize=7, padding=1)
    ax.set_yscale("symlog", linthresh=1)
    ax.set_ylim(0, 5 * max(1, *(v for values in bars.values() for v in values)))
    ax.set_xticks(x, [NAMES[c] for c in shortcuts.CONCEPTS], rotation=30, ha="right")
    ax.set_ylabel(f"{ylabel} (log scale above 1)")
    ax.legend(fontsize=8, loc="upper left")
  by_groups.set_title("Groups of each concept")
  by_samples.set_title("OOD set of each concept")
  fig.suptitle(f"Concepts on the IID test split ({len(bench.splits['iid_test'])} questions)")
  return plots.save(fig, path, dpi=120)


def answer_shift_figure(bench, path):
  fig = Figure(figsize=(13, 9.5))
  axes = fig.subplots(3, 3, squeeze=False)
  for ax, c in zip(axes.flat, shortcuts.CONCEPTS):
    shift = answer_shift(bench, c)
    if shift is None:
      ax.set_title(f"{concept_words(c)}:\nno OOD sample", fontsize=8)
      ax.axis("off")
      continue
    x = np.arange(len(shift.answers))
    for j, (label, share, n) in enumerate((("train", shift.train, shift.n_train),
                                           ("OOD", shift.ood, shift.n_ood))):
      ax.bar(x + (j - 0.5) * 0.4, 100 * share, 0.4, label=f"{label} (N = {n})")
    ax.set_title(f"{concept_words(c)}:\n{plots.short_label(group_words(c, shift.value))}",
                 fontsize=8)
    ax.set_xticks(x, [plots.short_label(a) for a in shift.answers], rotation=30, ha="right",
                  fontsize=7)
    ax.set_ylabel("% of the group")
    ax.set_ylim(0, 105)
    ax.legend(fontsize=7)
  fig.suptitle("Answers in train and in the OOD set, per concept's group with the most OOD "
               "samples (N: the group's questions)")
  return plots.save(fig, path, dpi=110)


NA_COLOUR = "lightgrey"  # n/a cells of the heatmaps: no colour of the scale


def matrix_figure(matrix, title, path):
  """A [9, 9] heatmap in %; n/a cells (an empty set) grey, apart from every value, 0 included."""
  fig = Figure(figsize=(6.4, 5.6))
  ax = fig.subplots()
  cmap = matplotlib.colormaps["viridis"].with_extremes(bad=NA_COLOUR)
  image = ax.imshow(np.ma.masked_invalid(100 * matrix), vmin=0, vmax=100, cmap=cmap)
  labels = [NAMES[c] for c in shortcuts.CONCEPTS]
  ax.set_xticks(range(len(labels)), labels, rotation=45, ha="right", fontsize=8)
  ax.set_yticks(range(len(labels)), labels, fontsize=8)
  for (i, j), v in np.ndenumerate(matrix):
    ax.text(j, i, "n/a" if math.isnan(v) else f"{100 * v:.0f}", ha="center", va="center",
            fontsize=6, color="black" if math.isnan(v) or v >= 0.6 else "white")
  fig.colorbar(image, ax=ax, label="% (grey: n/a, an empty set)")
  ax.set_title(title, fontsize=9)
  return plots.save(fig, path, dpi=120)


def write_statistics(bench, folder, seed, unit, labels):
  """The statistics tables (CSV / Markdown / LaTeX) and figures under `folder`; returns the
  Markdown of the tables, with the figures linked relative to the folder's parent."""
  jac, over = matrices(bench)
  named = {"splits": splits_table(bench, seed, unit, labels), "groups": groups_table(bench),
           "answer_shift": answer_shift_table(bench),
           "head_jaccard": matrix_table(jac, JACCARD_CAPTION),
           "ood_overlap": matrix_table(over, OVERLAP_CAPTION)}
  for stem, table in named.items():
    tables.write(table, folder, stem)
  base = os.path.basename(folder)
  figures = {"groups": groups_figure(bench, os.path.join(folder, "groups.png")),
             "answer_shift": answer_shift_figure(bench, os.path.join(folder, "answer_shift.png")),
             "head_jaccard": matrix_figure(jac, "Head splits in train: Jaccard (%)",
                                           os.path.join(folder, "head_jaccard.png")),
             "ood_overlap": matrix_figure(over, "OOD sets: |row and column| / |row| (%)",
                                          os.path.join(folder, "ood_overlap.png"))}
  parts = ["# Shortcut OOD benchmark: statistics", ""]
  for stem, table in named.items():
    parts.append(tables.to_markdown(table))
    if stem in figures:
      parts.append(f"![{stem}]({base}/{os.path.basename(figures[stem])})\n")
  return "\n".join(parts)


# The benchmark folder.

@contextlib.contextmanager
def rebuilt(folder):
  """Yields an empty temporary folder that replaces `folder` whole when the block completes
  (readers see the old folder or the new one, never a mix; a failed block changes nothing, and
  what a killed one left is removed by the next). A `folder` that is a link is replaced where
  it points, the link kept."""
  folder = os.path.realpath(folder)
  parent, name = os.path.split(folder)
  with storage.building_owned(parent, name, replace=True) as tmp:
    yield tmp


def _check_out(out, source):
  """RSVQAError unless `out` may be (re)written: absent, empty, or an earlier benchmark."""
  real_out, real_source = os.path.realpath(out), os.path.realpath(source)
  if real_source == real_out or real_source.startswith(real_out + os.sep):
    raise RSVQAError(f"--out {out}: holds the source dataset {source}; choose another folder")
  # Inside a dataset (the source's images, say) its data/ would be a dataset nested in another.
  split_files.refuse_dataset(out, "--out", "the benchmark", inside=True)
  if not os.path.exists(out):
    return
  if not os.path.isdir(out):
    raise RSVQAError(f"--out {out}: is a file, not a folder")
  if os.listdir(out) and not os.path.isfile(os.path.join(out, shortcuts.MANIFEST)):
    raise RSVQAError(f"{out}: holds files that are not a shortcut benchmark (no "
                     f"{shortcuts.MANIFEST}); refusing to write over it")
  # The folder is replaced whole: anything else in it (notes, a run's workdir) would be lost.
  foreign = sorted(set(os.listdir(out)) - set(own_entries()))
  if foreign:
    more = f" (and {len(foreign) - 1} more)" if len(foreign) > 1 else ""
    raise RSVQAError(f"--out {out} holds {foreign[0]}{more} besides an earlier benchmark; move "
                     "them or give another --out")


def own_entries():
  """The names `create` writes at the top of a benchmark folder (all it may replace)."""
  return (shortcuts.MANIFEST, shortcuts.SPLIT_FILE, shortcuts.CONCEPTS_FILE, shortcuts.DATA_DIR,
          STATS_DIR, STATS_FILE,
          *(os.path.basename(shortcuts.ood_file("", c)) for c in shortcuts.CONCEPTS))


def create(dataset, out, *, seed=0, unit="image", labels=None, log=_log.info):
  """Writes the benchmark folder `out` of a records.Dataset read from its official layout.

  `labels`: a shortcuts.ImageLabels (None: the dataset's own, shortcuts.find_labels). Returns
  its manifest (shortcuts.json).
  """
  started = time.time()
  out = os.path.abspath(out)
  _check_out(out, dataset.root)
  pooled = shortcuts.pool(dataset)
  image_ids = np.unique(pooled.image_id).tolist()
  labels = labels or shortcuts.find_labels(dataset.root, dataset.name, image_ids)
  described = labels.describe(image_ids)
  if not described["images_labelled"]:
    raise RSVQAError(f"{labels.source}: labels none of the {len(image_ids)} images of "
                     f"{dataset.root}'s train and val splits (image ids of another dataset?)")
  log(f"image labels: {described['kind']} from {described['source']} "
      f"({described['images_labelled']} of {described['images']} images labelled)")
  if described["images_labelled"] < described["images"]:
    _log.warning(f"{labels.source}: {described['images'] - described['images_labelled']} of the "
                 f"{described['images']} train and val images have no label: their questions' "
                 f"key object reads {shortcuts.NONE!r}")
  if described["labelled_images_elsewhere"]:
    _log.warning(f"{labels.source}: {described['labelled_images_elsewhere']} labelled image(s) "
                 f"are not among the {len(image_ids)} train and val images the benchmark "
                 "re-splits; their labels are not used")
  bench = shortcuts.build(dataset, seed, labels.labels, unit)
  if not any(bench.test_rules[c].ood.any() for c in shortcuts.CONCEPTS):
    _log.warning(f"every OOD set is empty: no group of the {len(bench.splits['iid_test'])} IID "
                 "test questions is imbalanced enough to have a tail, so nothing will be scored "
                 "out of distribution (a larger dataset gives groups that are)")
  log(f"re-split {len(pooled)} questions: " + ", ".join(
      f"{s} {len(bench.splits[s])}" for s in shortcuts.SPLITS) + "; OOD sets: " + ", ".join(
      f"{NAMES[c]} {int(bench.test_rules[c].ood.sum())}" for c in shortcuts.CONCEPTS))
  with rebuilt(out) as tmp:
    split_of = {q: shortcuts.DATA_SPLIT[s] for s in shortcuts.SPLITS
                for q in bench.splits[s].question_id.tolist()}
    images = resplit.write(dataset.root, dataset.name, os.path.join(tmp, shortcuts.DATA_DIR),
                           split_of)
    shortcuts.write_files(tmp, bench)
    text = write_statistics(bench, os.path.join(tmp, STATS_DIR), seed, unit, described)
    with storage.replacing(os.path.join(tmp, STATS_FILE)) as f:
      f.write(text)
    manifest = {
        "version": VERSION, "source": os.path.abspath(dataset.root), "dataset": dataset.name,
        shortcuts.SOURCE_MANIFEST: synthetic.read_manifest(dataset.root),
        "seed": int(seed), "unit": unit, "shares": shortcuts.SHARES,
        "entropy_threshold": shortcuts.ENTROPY_THRESHOLD,
        "tail_factor": float(shortcuts.TAIL_FACTOR), "labels": described,
        "questions": {s: len(bench.splits[s]) for s in shortcuts.SPLITS},
        shortcuts.ROWS_SHA256: {s: bench.splits[s].fingerprint(by_id=True)
                                for s in shortcuts.SPLITS},
        shortcuts.FILES_SHA256: {os.path.basename(p): storage.file_sha256(p)
                                 for p in shortcuts.benchmark_files(tmp)},
        "images": {s: images[shortcuts.DATA_SPLIT[s]] for s in shortcuts.SPLITS},
        "ood": {c: int(bench.test_rules[c].ood.sum()) for c in shortcuts.CONCEPTS},
        "seconds": round(time.time() - started, 2)}
    storage.write_json(os.path.join(tmp, shortcuts.MANIFEST), manifest)
  log(f"wrote {out} ({manifest['seconds']:.1f}s; statistics in {os.path.join(out, STATS_FILE)})")
  return manifest


def ensure(dataset, out, *, seed=0, unit="image", labels=None, log=_log.info):
  """The manifest of benchmark `out`, created unless it already holds this dataset's benchmark
  with this seed, unit and kind of labels (a resumed study must not rewrite the data it trains
  on). A synthetic source is known by its generator settings, so a study moved with its
  benchmark keeps it."""
  manifest = storage.read_json(os.path.join(out, shortcuts.MANIFEST))
  wanted = {"version": VERSION, "dataset": dataset.name, "seed": int(seed), "unit": unit}
  if (isinstance(manifest, dict) and all(manifest.get(k) == v for k, v in wanted.items())
      and _same_source(manifest, dataset.root)
      and (labels is None or manifest.get("labels", {}).get("kind") == labels.kind)):
    return manifest
  return create(dataset, out, seed=seed, unit=unit, labels=labels, log=log)


def _same_source(manifest, root):
  """Whether a benchmark's manifest was built from the dataset folder `root`: its path, or, for a
  synthetic dataset, its generator settings wherever it now lies."""
  if manifest.get("source") == os.path.abspath(root):
    return True
  recorded = manifest.get(shortcuts.SOURCE_MANIFEST)
  return isinstance(recorded, dict) and recorded == synthetic.read_manifest(root)


# A model scored on the benchmark.

def _label(key):
  return "IID test" if key == "iid_test" else f"OOD {NAMES[key]}"


def _mean_label(result):
  """The mean row's label, saying how many OOD sets it averages when some held no question."""
  n, empty = len(result["ood"]), sum(r["n"] == 0 for r in result["ood"].values())
  return "Mean of the OOD sets" + (f" ({n - empty} of {n}; {empty} empty)" if empty else "")


def ood_table(result, caption):
  """Accuracy per question type, AA, OA on IID test and each OOD set, the gap, Prior_Acc."""
  types = tables.type_order(result["types"])
  rows = []
  for key, r in [("iid_test", result["iid_test"]), *result["ood"].items()]:
    rows.append((_label(key), r["n"], *(r["per_type"][t] for t in types), r["aa"], r["oa"],
                 "" if key == "iid_test" else r["gap_oa"], r["prior_acc"]))
  rows.append((_mean_label(result), "", *[""] * len(types), "", result["mean_ood_oa"],
               result["mean_gap_oa"], ""))
  return tables.Table(caption=caption, columns=(
      "set", "N", *(tables.type_name(t) for t in types), "AA (%)", "OA (%)",
      "IID - OOD gap (OA points)", "Prior_Acc (%)"), rows=tuple(rows))


SELECTIONS = (("iid_val", "IID val (default)"),
              ("ood_val", f"OOD val ({ADAPTIVE})"),
              ("ood_test", f"OOD test ({ADAPTIVE})"))


def _empty_ood_val(selection):
  """The caption's note on OOD val sets without a question (their OOD val cells select nothing)."""
  counts = selection.get("ood_val_n")
  empty = [NAMES[c] for c in shortcuts.CONCEPTS if counts and not counts[c]]
  if not empty:
    return ""
  if len(empty) == len(shortcuts.CONCEPTS):
    return ("; the val split holds no question of any OOD set, so OOD val selects no checkpoint "
            "(its row is n/a)")
  return (f"; the val split holds no question of OOD {', '.join(empty)}, so OOD val selects no "
          "checkpoint there (n/a), and its IID and mean columns take the checkpoint best on the "
          "mean of the other OOD val sets")


def selection_table(selection):
  """The paper's Table 4: test OA of the checkpoint each rule selects; the rules that look at OOD
  data (a checkpoint per OOD set; for IID and the mean, one on the nine sets' mean) are labelled
  adaptive overfitting."""
  rows = []
  for key, label in SELECTIONS:
    picked = selection[key]
    rows.append((label, picked["iid_test"], *(picked["ood"][c] for c in shortcuts.CONCEPTS),
                 picked["mean_ood"]))
  steps = ", ".join(map(str, selection["candidates"]))
  return tables.Table(
      caption=(f"Table 4 comparison, {ADAPTIVE}: test OA (%) of the checkpoint each rule selects "
               f"among the workdir's kept checkpoints (steps {steps}); selecting on OOD val or "
               f"OOD test looks at OOD data ({ADAPTIVE}): only IID val selection is the protocol"
               + _empty_ood_val(selection)),
      columns=("selected on", "IID test", *(f"OOD {NAMES[c]}" for c in shortcuts.CONCEPTS),
               "mean OOD"), rows=tuple(rows))


def models_table(entries):
  """Rows: [(model label, [score() result per seed])]; columns IID, the nine OOD sets, mean.

  The first row is N, the questions of each set (every run is scored on the same sets). The
  caption says what a cell is over (one seed: its value, as bias/report.py's Table 2)
  and that mean OOD weighs each non-n/a OOD set alike, whatever its N.
  """
  first = entries[0][1][0]
  rows = [("N (questions)", "", first["iid_test"]["n"],
           *(first["ood"][c]["n"] for c in shortcuts.CONCEPTS), "")]
  for label, results in entries:
    cells = [[r["iid_test"]["oa"] for r in results]]
    cells += [[r["ood"][c]["oa"] for r in results] for c in shortcuts.CONCEPTS]
    cells += [[r["mean_ood_oa"] for r in results]]
    rows.append((label, len(results), *(tables.pct_over_runs(v) if len(v) > 1
                                         else tables.pct(v[0]) for v in cells)))
  runs = {len(results) for _, results in entries}
  if runs == {1}:
    over = "one seed's value (no std)"
  else:
    over = (f"mean (std) over {max(runs)} seeds" if len(runs) == 1
            else "mean (std) over the row's seeds (runs)")
    over += "; a row of one run: its value (no std)" if 1 in runs else ""
  caption = ("Shortcut benchmark (Table 2 layout): OA (%) on the IID test split and the nine "
             f"OOD sets, {over}; mean OOD: the unweighted mean of the OOD sets' OA, over the "
             "sets that are not n/a (each set counts alike, whatever its N)")
  return tables.Table(caption=caption, columns=(
      "model", "runs", "IID", *(NAMES[c] for c in shortcuts.CONCEPTS), "mean OOD"),
      rows=tuple(rows))


def mean_gaps(results):
  """{concept: IID - OOD OA gap, mean over the runs (NaN when no run has that OOD set)}."""
  return {c: tables.mean_std([r["ood"][c]["gap_oa"] for r in results])[0]
          for c in shortcuts.CONCEPTS}


def largest_gaps(result, k=3, min_questions=0):
  """[(concept, IID - OOD OA gap)] of the k largest gaps, largest first, of one score() result
  or a list of them (gaps averaged); NaN gaps and OOD sets under `min_questions` left out."""
  results = result if isinstance(result, list) else [result]
  gaps = [(c, g) for c, g in mean_gaps(results).items()
          if not math.isnan(g) and results[0]["ood"][c]["n"] >= min_questions]
  return sorted(gaps, key=lambda g: -g[1])[:k]


# A study's shortcuts stage (study/shortcuts.py): its section of report.md and its summary.

# The concepts in which a plant's questions form one group of their own, whose tail is OOD
# (data/questions.Plant): a kw plant's "Is there a WORD?" has WORD as its only content word, so
# KW = KWP = WORD and QT+KW = "is there+WORD" whatever its answer. A ko plant has none: its class
# is the KO of the tied answers only (KO is the label with the highest PMI with the question's
# own answer, and the class's PMI with the other answers is low), so its tail lands in the groups
# of other labels, where it is no tail, and its class's KO group holds one answer.
PLANTED_CONCEPTS = {"kw": ("kw", "kwp", "qt_kw"), "ko": ()}
KO_PLANT_NOTE = ("A ko plant's tail is in no OOD set: KO is the label with the highest PMI with "
                 "the question's own answer, so the planted class is the KO of the tied answers "
                 "only, a one-answer group, and the other answers go to other labels' groups. ")
SUMMARY_FILE = "shortcuts_summary.md"
DOCS_BEGIN = ("<!-- shortcuts summary: begin (python -m rsvqa_jax.bias.report DIR --docs "
              "docs/audits/language_bias.md docs/audits/shortcuts.md) -->")
DOCS_END = "<!-- shortcuts summary: end -->"


def planted_concepts(plants):
  """The concepts the planted shortcuts (canonical specs, "kw:..." / "ko:...") should show in."""
  return tuple(dict.fromkeys(c for spec in plants for c in PLANTED_CONCEPTS[spec[:2]]))


def _gap_list(gaps):
  return ", ".join(f"{NAMES[c]} {100 * g:+.2f}" for c, g in gaps) or "none (no OOD set so large)"


def model_reading(label, results, plants, min_questions):
  """One sentence: which shortcuts a model takes, by its largest IID - OOD gaps."""
  gaps = largest_gaps(results, k=3, min_questions=min_questions)
  iid = tables.mean_std([r["iid_test"]["oa"] for r in results])[0]
  text = (f"{label}: IID OA {tables.percent(iid)}, largest IID - OOD gaps (points) "
          f"{_gap_list(gaps)}")
  planted = planted_concepts(plants)
  if not gaps or not planted:
    return text + "."
  if gaps[0][0] in planted:
    return text + (f": the largest is a concept of the planted shortcut ({', '.join(plants)}): "
                   "the model takes it.")
  mine = largest_gaps(results, k=len(shortcuts.CONCEPTS), min_questions=min_questions)
  best = next(((c, g) for c, g in mine if c in planted), None)
  where = f"theirs at most {NAMES[best[0]]} {100 * best[1]:+.2f}" if best else "none large enough"
  return text + (f": the largest is not a concept of the planted shortcut ({where}): the model "
                 f"fails {NAMES[gaps[0][0]]}'s tail answers more than the planted one's.")


def study_reading(stage):
  """The reading of a study's shortcuts stage (`stage`: its study.json entry)."""
  plants, n = stage["plant"], stage["min_questions"]
  concepts = planted_concepts(plants)
  head = (f"The data plant {', '.join(plants)} (data/questions.Plant). " if plants else
          "No shortcut is planted. ")
  runs = [r for m in stage["models"] for r in m["runs"]]
  empty = [c for c in concepts if runs and all(not r["ood"][c]["n"] for r in runs)]
  named = ", ".join(NAMES[c] for c in concepts)
  if concepts and empty == list(concepts):
    head += (f"Its keyword questions would form one group of their own in {named}, but those "
             "OOD sets hold no question here (the tail is too small a share of this dataset). ")
  elif concepts:
    head += (f"Its keyword questions form one group of their own in {named}, whose OOD sets "
             "hold its tail. ")
  if any(p.startswith("ko:") for p in plants):
    head += KO_PLANT_NOTE
  parts = [model_reading(m["label"], m["runs"], plants, n) for m in stage["models"]]
  return (head + " ".join(parts) + f" Gaps are ranked over the OOD sets of at least {n} "
          "questions (study.shortcuts.min_questions); smaller sets move by 100 / N points per "
          "answer.")


def study_summary(stage):
  """The sentence the docs quote: each model's largest gap on the planted set."""
  n = stage["min_questions"]
  parts = []
  for m in stage["models"]:
    top = largest_gaps(m["runs"], k=2, min_questions=n)
    iid = tables.mean_std([r["iid_test"]["oa"] for r in m["runs"]])[0]
    parts.append(f"{m['label']} (IID OA {tables.percent(iid)}): {_gap_list(top)}")
  where = ", ".join(stage["plant"]) or "no plant"
  planted = ", ".join(NAMES[c] for c in planted_concepts(stage["plant"]))
  text = (f"On the study's planted set ({where}; its concepts: {planted or 'none'}) the largest "
          f"IID - OOD gaps in OA points (OOD sets of at least {n} questions) are: "
          + "; ".join(parts) + ".")
  return textwrap.fill(text, width=100, break_on_hyphens=False)


def study_section(stage, directory):
  """report.md lines of a study's shortcuts stage; writes its tables under directory/analysis."""
  entries = [(m["label"], m["runs"]) for m in stage["models"]]
  table = models_table(entries)
  out_dir = os.path.join(directory, "analysis")
  tables.write(table, out_dir, "shortcuts_models")
  lines = ["## Shortcut OOD benchmark (VQA-VS)", "",
           f"Reference and visual-blind models trained on the re-split of a synthetic set with a "
           f"planted shortcut ({', '.join(stage['plant']) or 'none'}; "
           f"`{os.path.relpath(stage['benchmark'], directory)}`, its statistics in "
           f"`{os.path.relpath(os.path.join(stage['benchmark'], STATS_FILE), directory)}`), "
           "checkpoints selected on IID val, scored on the IID test split and the nine OOD sets.",
           "", study_reading(stage), "", tables.to_markdown(table)]
  for m in stage["models"]:
    selection = m["runs"][0].get("selection")
    if selection:
      named = selection_table(selection)
      tables.write(named, out_dir, f"shortcuts_selection_{m['role']}")
      lines += [f"{m['label']}, seed {stage['seeds'][0]}:", "", tables.to_markdown(named)]
  with storage.replacing(os.path.join(directory, SUMMARY_FILE)) as f:
    f.write(study_summary(stage) + "\n")
  return lines + [""]


def write_evaluation(result, folder, caption, selection=None, prefix="shortcuts"):
  """{prefix}.json (the result, and the selection) and {prefix}_ood (and {prefix}_selection)
  tables under `folder`; returns (the tables, the paths written)."""
  os.makedirs(folder, exist_ok=True)
  written = [ood_table(result, caption)]
  paths = tables.write(written[0], folder, f"{prefix}_ood")
  if selection is not None:
    written.append(selection_table(selection))
    paths += tables.write(written[1], folder, f"{prefix}_selection")
  paths.append(os.path.join(folder, f"{prefix}.json"))
  storage.write_json(paths[-1], {**result, **({"selection": selection} if selection else {})})
  return written, paths
