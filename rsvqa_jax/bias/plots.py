"""The paper's figures as PNG files: Figure 5 (accuracy per setup) and Figure 7 (answers).

Figures are drawn on matplotlib `Figure` objects and saved directly, never through pyplot's
global state, so importing this module changes no backend (inline plots in a notebook keep
working).

Figure 7: one panel per question type; in each, one group of bars per answer and one bar per
split, the height being the answer's share (%) of that type's samples in that split (the legend
gives each split's N of them). Types with many answers (HR counts, RSVQAxBEN land cover) show
their `top_k` most frequent answers (over all splits) and one "other" bar for the rest; numeric
answers (counts, areas and their bins) in numeric order, others by frequency.
"""
import collections
import math
import os
import re
import textwrap
import warnings

import numpy as np
from matplotlib.figure import Figure

from rsvqa_jax import storage
from rsvqa_jax.bias import tables

OTHER = "other"
# A count, an area or their bins ("12", "0m2", "between 1 and 10", "more than 1000m2").
_NUMERIC = re.compile(r"(between |more than )?([0-9]+(?:\.[0-9]+)?)(?:m2)?(?: and [0-9]+(?:m2)?)?",
                      re.ASCII)


def numeric_key(answer):
  """Where a numeric answer sorts (a bin at its lower end, "more than X" just above X); None for
  any other answer."""
  m = _NUMERIC.fullmatch(answer)
  if not m:
    return None
  return float(m.group(2)) + (0.5 if m.group(1) == "more than " else 0.0)


def distribution(splits, qtype, top_k):
  """(answers, {split: shares}) for one question type; shares are fractions per split. The
  `top_k` most frequent answers are kept, in numeric order when all are numbers (a count read
  by frequency jumps 0, 1-10, 11-100 about), then OTHER."""
  total = collections.Counter()
  per_split = {}
  for name, split in splits.items():
    counts = collections.Counter(split.answer[split.qtype == qtype].tolist())
    per_split[name] = counts
    total.update(counts)
  ranked = sorted(total, key=lambda a: (-total[a], a))
  shown = ranked[:top_k]
  if all(numeric_key(a) is not None for a in shown):
    shown.sort(key=numeric_key)
  answers = shown + ([OTHER] if len(ranked) > top_k else [])
  shares = {}
  for name, counts in per_split.items():
    n = sum(counts.values())
    row = [counts[a] for a in shown] + ([n - sum(counts[a] for a in shown)] if len(ranked) > top_k else [])
    shares[name] = np.asarray(row, dtype=np.float64) / n if n else np.zeros(len(answers))
  return answers, shares


LABEL_CHARS = 40  # a tick label longer than this is cut (a megabyte-long answer took minutes)


def short_label(text):
  """A tick label: characters that print as nothing (a NUL or a zero-width space kept in an
  RSVQAxBEN answer, which is kept as written) shown as their escapes, since matplotlib draws no
  glyph for them and warned of each with its source lines; cut at LABEL_CHARS."""
  text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
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
      n = int(np.count_nonzero(splits[name].qtype == qtype))
      bars = ax.bar(x + (j - (len(splits) - 1) / 2) * width, 100 * share, width,
                    label=f"{name} (N = {n})")
      ax.bar_label(bars, labels=[f"{100 * s:.0f}" for s in share], fontsize=6, padding=1)
    ax.set_title(short_label(tables.type_name(qtype)))
    ax.set_xticks(x, [short_label(a) for a in answers], rotation=30, ha="right", fontsize=7)
    ax.set_ylabel("% of the type's questions in the split", fontsize=9)
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
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  with warnings.catch_warnings():  # labels too long for a small figure: drawn as they are
    warnings.filterwarnings("ignore", "Tight layout not applied", UserWarning)
    # A letter of a script the font lacks (an answer in Chinese): drawn as a box, no warning
    warnings.filterwarnings("ignore", r"Glyph \d+ .* missing from font", UserWarning)
    fig.tight_layout()
    with storage.replacing_path(path) as tmp:  # a kill never leaves half a PNG under its name
      fig.savefig(tmp, dpi=dpi, format="png")
  return path


def error_bars(means, stds):
  """[2, n] (below, above) bar lengths: one std each way, clipped to [0, 100] (an accuracy's
  spread never passes its bounds)."""
  means, stds = np.asarray(means, np.float64), np.asarray(stds, np.float64)
  return np.stack([np.minimum(stds, means), np.minimum(stds, 100 - means)])


def error_note(seeds=None, draws=None):
  """What Figure 5's error bars are (report.py's setups: reference and visual-blind bars over
  seeds, adversarial ones over seeds x draws), with the counts when given."""
  k = f"{draws} draws" if draws is not None else "draws"
  if seeds == 1 and str(draws) == "1":
    return "One seed, one draw: every bar is a single value (no error bar)."
  if seeds == 1:
    return ("Reference and visual blind: one seed's value (no error bar); adversarial: error bar "
            f"= one population std over the seed's {k}, clipped to [0, 100].")
  over = f"{seeds} seeds" if seeds else "seeds"
  return (f"Error bars: one population std, clipped to [0, 100], over {over} (reference, visual "
          f"blind) and over {over} x {k} (adversarial); a bar without one is a single value.")


def figure5(panels, columns, path, *, split=None, n=None, seeds=None, draws=None):
  """Figure 5: per panel, bars per column for each setup, with std error bars.

  `panels`: [(title, [(setup label, {column: (mean, std)})])]; columns are question types
  (named as in the tables), AA and OA. Error bars are one std, clipped to [0, 100]; a std of
  None (one seed) draws none: a zero-height bar would read as a measured spread. The title names
  `split` and its `n` questions, the footnote the `seeds` and adversarial `draws`, when given.
  """
  count = len(panels)
  ncols = min(2, count)
  nrows = math.ceil(count / ncols)
  fig = Figure(figsize=(6.5 * ncols, 3.6 * nrows + 0.9))
  axes = fig.subplots(nrows, ncols, squeeze=False)
  for ax, (title, rows) in zip(axes.flat, panels):
    width = 0.8 / len(rows)
    x = np.arange(len(columns))
    for j, (label, stats) in enumerate(rows):
      at = x + (j - (len(rows) - 1) / 2) * width
      means = np.asarray([100 * stats[c][0] for c in columns])
      measured = np.asarray([stats[c][1] is not None for c in columns])
      ax.bar(at, means, width, label=label)
      if measured.any():
        stds = np.asarray([100 * s for c in columns if (s := stats[c][1]) is not None])
        ax.errorbar(at[measured], means[measured], yerr=error_bars(means[measured], stds),
                    fmt="none", ecolor="black", elinewidth=1, capsize=2)
    ax.set_title(title)
    ax.set_xticks(x, [short_label(tables.type_name(c)) for c in columns], rotation=20, ha="right",
                  fontsize=8)
    ax.set_ylabel("accuracy (%)")
    ax.set_ylim(0, 118)
    ax.legend(fontsize=7, loc="upper center", ncol=len(rows))
  for ax in list(axes.flat)[count:]:
    ax.axis("off")
  on = f" on the {split} split" if split else ""
  of = f" (N = {n} questions)" if n is not None else ""
  fig.suptitle(f"Accuracy (%) per question type, AA and OA{on}{of}")
  fig.supxlabel(textwrap.fill(error_note(seeds, draws), 60 * ncols + 40), fontsize=8)
  return save(fig, path, dpi=110)
