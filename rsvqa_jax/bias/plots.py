"""The paper's figures as PNG files: Figure 5 (accuracy per setup) and Figure 7 (answers).

Figures are drawn on matplotlib `Figure` objects and saved directly, never through pyplot's
global state, so importing this module changes no backend (inline plots in a notebook keep
working).

Figure 7: one panel per question type; in each, one group of bars per answer and one bar per
split, the height being the answer's share (%) of that type's samples in that split. Types with
many answers (HR counts, RSVQAxBEN land cover) show their `top_k` most frequent answers (over
all splits) and one "other" bar for the rest.
"""
import collections
import math
import os
import warnings

import numpy as np
from matplotlib.figure import Figure

from rsvqa_jax import storage
from rsvqa_jax.bias import tables

OTHER = "other"


def distribution(splits, qtype, top_k):
  """(answers, {split: shares}) for one question type; shares are fractions per split."""
  total = collections.Counter()
  per_split = {}
  for name, split in splits.items():
    counts = collections.Counter(split.answer[split.qtype == qtype].tolist())
    per_split[name] = counts
    total.update(counts)
  ranked = sorted(total, key=lambda a: (-total[a], a))
  shown = ranked[:top_k]
  answers = shown + ([OTHER] if len(ranked) > top_k else [])
  shares = {}
  for name, counts in per_split.items():
    n = sum(counts.values())
    row = [counts[a] for a in shown] + ([n - sum(counts[a] for a in shown)] if len(ranked) > top_k else [])
    shares[name] = np.asarray(row, dtype=np.float64) / n if n else np.zeros(len(answers))
  return answers, shares


LABEL_CHARS = 40  # a tick label longer than this is cut (a megabyte-long answer took minutes)


def short_label(text):
  return text if len(text) <= LABEL_CHARS else text[:LABEL_CHARS - 3] + "..."


def answer_distribution(splits, path, title="", top_k=8):
  """Write Figure 7 for `splits` (name -> records.Split) to `path` (PNG)."""
  qtypes = sorted({t for split in splits.values() for t in split.qtype.tolist()})
  if not qtypes:
    raise ValueError("no sample to plot")
  ncols = min(2, len(qtypes))
  nrows = math.ceil(len(qtypes) / ncols)
  fig = Figure(figsize=(7 * ncols, 3.6 * nrows))
  axes = fig.subplots(nrows, ncols, squeeze=False)
  width = 0.8 / len(splits)
  for ax, qtype in zip(axes.flat, qtypes):
    answers, shares = distribution(splits, qtype, top_k)
    x = np.arange(len(answers))
    for j, (name, share) in enumerate(shares.items()):
      bars = ax.bar(x + (j - (len(splits) - 1) / 2) * width, 100 * share, width, label=name)
      ax.bar_label(bars, labels=[f"{100 * s:.0f}" for s in share], fontsize=6, padding=1)
    ax.set_title(short_label(tables.type_name(qtype)))
    ax.set_xticks(x, [short_label(a) for a in answers], rotation=30, ha="right", fontsize=7)
    ax.set_ylabel("% of the split")
    ax.set_ylim(0, 110)
    ax.legend(fontsize=7)
  for ax in list(axes.flat)[len(qtypes):]:
    ax.axis("off")
  if title:
    fig.suptitle(title)
  return save(fig, path, dpi=120)


def save(fig, path, dpi):
  """Lays out and writes a Figure as PNG (creating its folder), through a temporary file;
  returns the path."""
  with warnings.catch_warnings():  # labels too long for a small figure: drawn as they are
    warnings.filterwarnings("ignore", "Tight layout not applied", UserWarning)
    fig.tight_layout()
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  with storage.replacing_path(path) as tmp:  # a kill never leaves half a PNG under its name
    fig.savefig(tmp, dpi=dpi, format="png")
  return path


def error_bars(means, stds):
  """[2, n] (below, above) bar lengths: one std each way, clipped to [0, 100] (an accuracy's
  spread never passes its bounds)."""
  means, stds = np.asarray(means, np.float64), np.asarray(stds, np.float64)
  return np.stack([np.minimum(stds, means), np.minimum(stds, 100 - means)])


def figure5(panels, columns, path):
  """Figure 5: per panel, bars per column for each setup, with std error bars.

  `panels`: [(title, [(setup label, {column: (mean, std)})])]; columns are question types
  (named as in the tables), AA and OA. Error bars are one std, clipped to [0, 100].
  """
  n = len(panels)
  ncols = min(2, n)
  nrows = math.ceil(n / ncols)
  fig = Figure(figsize=(6.5 * ncols, 3.6 * nrows))
  axes = fig.subplots(nrows, ncols, squeeze=False)
  for ax, (title, rows) in zip(axes.flat, panels):
    width = 0.8 / len(rows)
    x = np.arange(len(columns))
    for j, (label, stats) in enumerate(rows):
      means = np.asarray([100 * stats[c][0] for c in columns])
      stds = np.asarray([100 * (stats[c][1] or 0.0) for c in columns])  # None: one run, no bar
      ax.bar(x + (j - (len(rows) - 1) / 2) * width, means, width,
             yerr=error_bars(means, stds), capsize=2, label=label)
    ax.set_title(title)
    ax.set_xticks(x, [short_label(tables.type_name(c)) for c in columns], rotation=20, ha="right",
                  fontsize=8)
    ax.set_ylabel("test accuracy (%)")
    ax.set_ylim(0, 118)
    ax.legend(fontsize=7, loc="upper center", ncol=len(rows))
  for ax in list(axes.flat)[n:]:
    ax.axis("off")
  return save(fig, path, dpi=110)
