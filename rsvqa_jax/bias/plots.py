"""Figure 7: the distribution of answers per question type and split, as a PNG.

One panel per question type; in each, one group of bars per answer and one bar per split,
the height being the answer's share (%) of that type's samples in that split. Types with
many answers (HR counts, RSVQAxBEN land cover) show their `top_k` most frequent answers
(over all splits) and one "other" bar for the rest.
"""
import collections
import math
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top,wrong-import-position
import numpy as np

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


def answer_distribution(splits, path, title="", top_k=8):
  """Write Figure 7 for `splits` (name -> records.Split) to `path` (PNG)."""
  qtypes = sorted({t for split in splits.values() for t in split.qtype.tolist()})
  if not qtypes:
    raise ValueError("no sample to plot")
  ncols = min(2, len(qtypes))
  nrows = math.ceil(len(qtypes) / ncols)
  fig, axes = plt.subplots(nrows, ncols, figsize=(7 * ncols, 3.6 * nrows), squeeze=False)
  width = 0.8 / len(splits)
  for ax, qtype in zip(axes.flat, qtypes):
    answers, shares = distribution(splits, qtype, top_k)
    x = np.arange(len(answers))
    for j, (name, share) in enumerate(shares.items()):
      bars = ax.bar(x + (j - (len(splits) - 1) / 2) * width, 100 * share, width, label=name)
      ax.bar_label(bars, labels=[f"{100 * s:.0f}" for s in share], fontsize=6, padding=1)
    ax.set_title(tables.type_name(qtype))
    ax.set_xticks(x, answers, rotation=30, ha="right", fontsize=7)
    ax.set_ylabel("% of the split")
    ax.set_ylim(0, 110)
    ax.legend(fontsize=7)
  for ax in list(axes.flat)[len(qtypes):]:
    ax.axis("off")
  if title:
    fig.suptitle(title)
  fig.tight_layout()
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  fig.savefig(path, dpi=120)
  plt.close(fig)
  return path
