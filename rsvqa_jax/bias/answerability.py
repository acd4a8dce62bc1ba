"""Answerability ranking metrics (ChiQA, DESIGN.md 6.3) of any model's scores, and their tables.

A pool is one question's candidate images, each labelled 2 (answers it), 1 (partly) or 0, and
scored in [0, 1] by a model. Ranking within a pool: by score; candidates of equal score are in
no order, so NDCG and MAP are their expected values over the random orders of each tie group
(McSherry & Najork 2008), exact and independent of the rows' order in the file: a question-only
model, scoring a pool's candidates alike, scores as a random ranking does. Without ties they are
the plain values.
  NDCG@k  gain 2^rel - 1, discount log2(i + 1), ideal DCG from the pool's own labels; a pool with
          no label > 0 has no ideal ranking and is left out (counted). Ties: each position of a
          tie group gains the group's mean gain (the expected gain there).
  MAP@k   label 2 relevant; AP@k = sum_{i <= k} P@i rel_i / min(k, R), R the pool's relevant
          candidates; a pool with R = 0 is left out (counted). Ties: P@i rel_i is replaced by
          its expectation, E[C_i rel_i] / i with C_i the relevant candidates in the first i: at
          position j (from 0) of a group of n holding r relevant, after c relevant above it,
          E[C_i rel_i] = r/n (c + 1) + j r (r - 1) / (n (n - 1)).
  ternary scores cut at 1/3 and 2/3 into 0 / 1 / 2; accuracy and macro-F1 over the three labels
          (a label never predicted right scores F1 0, as the paper's Majority row: 23.95 = 71.9/3;
          one in neither the truth nor the predictions is left out of the mean, as scikit-learn's
          f1_score leaves it).
  binary  2 against 1 / 0, positive when score >= t, t the validation score that maximises F1 on
          the validation pairs (ties: the highest such t), applied unchanged to the test pairs;
          a ratio over no pair is None (undefined, "n/a"), never 0: precision when nothing is
          predicted positive, recall when no pair is labelled 2, F1 when neither (F1 is 0 when
          either is and none is right). Without validation scores, or when no validation pair is
          labelled 2 (every t then has F1 0), the binary metrics are not reported (None): tuning
          t on the test pairs would flatter them.
Pools need not have one size (a small split's are smaller, data/answerability.py): @k past a
pool's size counts its whole ranking, so NDCG@5 of pools of 3 is their NDCG@3. A pool of one
candidate ranks nothing and is left out of both (counted).
A constant scorer (Majority) is thresholded like any other: on validation F1 is highest with
every pair positive, so its binary row is the all-positive guess, F1 = 2p / (1 + p).
"""
import math
import os
import textwrap

import numpy as np

from rsvqa_jax.bias import tables
from rsvqa_jax.data import answerability as pools_lib
from rsvqa_jax.data import csv_columns
from rsvqa_jax.errors import RSVQAError

KS = (1, 3, 5)
TERNARY_CUTS = (1 / 3, 2 / 3)
RANKING_KEYS = tuple(f"{m}@{k}" for m in ("ndcg", "map") for k in KS)
CLASS_KEYS = ("ternary_acc", "ternary_f1")
BINARY_KEYS = ("binary_acc", "binary_precision", "binary_recall", "binary_f1",
               "binary_threshold")
LEFT_OUT_KEYS = ("ndcg_pools_left_out", "map_pools_left_out")
KEYS = RANKING_KEYS + CLASS_KEYS + BINARY_KEYS + LEFT_OUT_KEYS
TABLE_COLUMNS = (("NDCG@1", "ndcg@1"), ("NDCG@3", "ndcg@3"), ("NDCG@5", "ndcg@5"),
                 ("MAP@1", "map@1"), ("MAP@3", "map@3"), ("MAP@5", "map@5"),
                 ("Ternary Acc", "ternary_acc"), ("Ternary F1", "ternary_f1"),
                 ("Binary Acc", "binary_acc"), ("Binary F1", "binary_f1"),
                 ("Binary Precision", "binary_precision"), ("Binary Recall", "binary_recall"))


def pools(pool_ids):
  """Row indices of each pool, pools and rows in file order."""
  out = {}
  for i, p in enumerate(np.asarray(pool_ids, object).tolist()):
    out.setdefault(p, []).append(i)
  return [np.asarray(v, np.int64) for v in out.values()]


def ranked(labels, scores):
  """(a pool's labels by descending score, each position's tie group: 0, 1, ... down the
  ranking, positions of equal score sharing one); the order within a group is arbitrary."""
  scores = np.asarray(scores, np.float64)
  order = np.argsort(-scores, kind="stable")
  s = scores[order]
  return np.asarray(labels)[order], np.concatenate([[0], np.cumsum(s[1:] != s[:-1])])


def ndcg_at(ranked_labels, groups, k):
  """Expected NDCG@k of one ranking over the orders of its tie groups, or None when no label is
  > 0; a position's expected gain is its group's mean (exactly the gain when untied)."""
  gains = 2.0 ** np.asarray(ranked_labels, np.float64) - 1
  expected = (np.bincount(groups, weights=gains) / np.bincount(groups))[groups]
  discount = 1 / np.log2(np.arange(2, min(k, len(gains)) + 2))
  ideal = (np.sort(gains)[::-1][:k] * discount).sum()
  return None if ideal == 0 else float((expected[:k] * discount).sum() / ideal)


def average_precision_at(ranked_labels, groups, k):
  """Expected AP@k (label 2 relevant) of one ranking over the orders of its tie groups (the
  module's closed form), or None when the pool has none relevant."""
  rel = np.asarray(ranked_labels) == 2
  if not rel.any():
    return None
  n = np.bincount(groups)[groups].astype(np.float64)  # size of each position's group
  r = np.bincount(groups, weights=rel)[groups]  # relevant candidates in it
  first = np.flatnonzero(np.diff(groups, prepend=-1))[groups]  # its first position
  above = np.concatenate([[0], np.cumsum(rel)])[first]  # relevant candidates above it
  j = np.arange(len(rel)) - first
  hits = r / n * (above + 1) + j * r * (r - 1) / (n * np.maximum(n - 1, 1))  # E[C_i rel_i]
  precision = hits[:k] / np.arange(1, min(k, len(rel)) + 1)
  return float(precision.sum() / min(k, rel.sum()))


def ranking(pool_ids, labels, scores):
  """NDCG@k and MAP@k (k in KS) averaged over pools, and the pools each left out."""
  per = {key: [] for key in RANKING_KEYS}
  left = {"ndcg": 0, "map": 0}
  for rows in pools(pool_ids):
    if len(rows) < 2:  # one candidate: no ranking to score (it would read 1 whatever its score)
      left = {name: n + 1 for name, n in left.items()}
      continue
    order, groups = ranked(np.asarray(labels)[rows], np.asarray(scores)[rows])
    for name, fn in (("ndcg", ndcg_at), ("map", average_precision_at)):
      values = [fn(order, groups, k) for k in KS]
      if values[0] is None:
        left[name] += 1
        continue
      for k, v in zip(KS, values):
        per[f"{name}@{k}"].append(v)
  out = {key: float(np.mean(v)) if v else None for key, v in per.items()}
  return {**out, "ndcg_pools_left_out": left["ndcg"], "map_pools_left_out": left["map"]}


def _f1(true, pred):
  tp = int((true & pred).sum())
  wrong = int((pred != true).sum())  # false positives and false negatives
  return 0.0 if tp == 0 else 2 * tp / (2 * tp + wrong)


def ternary(labels, scores):
  """(accuracy, macro-F1 over labels 0, 1, 2) of the scores cut at TERNARY_CUTS."""
  labels = np.asarray(labels)
  pred = np.searchsorted(np.asarray(TERNARY_CUTS), np.asarray(scores, np.float64), side="right")
  f1 = [_f1(labels == c, pred == c) for c in pools_lib.LABELS if (labels == c).any() or
        (pred == c).any()]  # a label in neither has no F1 (0 would lower a perfect scorer's)
  return float((pred == labels).mean()), float(np.mean(f1))


def binary(labels, scores, threshold):
  """{binary_acc, precision, recall, f1, threshold} of score >= threshold against label 2."""
  true = np.asarray(labels) == 2
  pred = np.asarray(scores, np.float64) >= threshold
  tp = int((true & pred).sum())
  return {"binary_acc": float((true == pred).mean()),
          "binary_precision": tp / int(pred.sum()) if pred.any() else None,
          "binary_recall": tp / int(true.sum()) if true.any() else None,
          "binary_f1": _f1(true, pred) if true.any() or pred.any() else None,
          "binary_threshold": float(threshold)}


def best_threshold(labels, scores):
  """The score t (among the given ones) whose `score >= t` maximises F1 for label 2; ties: the
  highest such t."""
  true = np.asarray(labels) == 2
  scores = np.asarray(scores, np.float64)
  candidates = np.unique(scores)[::-1]  # highest first: the first maximum wins ties
  f1 = [_f1(true, scores >= t) for t in candidates]
  return float(candidates[int(np.argmax(f1))])


def metrics(pool_ids, labels, scores, val=None):
  """Every KEYS value of the scores of one split; `val` = (labels, scores) of the validation
  pairs, which alone choose the binary threshold (binary metrics None without them, or when
  none of them is labelled 2)."""
  labels, scores = np.asarray(labels, np.int64), np.asarray(scores, np.float64)
  out = ranking(pool_ids, labels, scores)
  out["ternary_acc"], out["ternary_f1"] = ternary(labels, scores)
  if val is None or not (np.asarray(val[0]) == 2).any():
    out.update(dict.fromkeys(BINARY_KEYS))
  else:
    out.update(binary(labels, scores, best_threshold(*val)))
  return {k: out[k] for k in KEYS}


# Files.

def _scores(path):
  rows = pools_lib.read(path, ("pool_id", "image_id", "score"))
  keys, values = [], []
  for line, row in rows:
    if not row["pool_id"]:  # blank in both files it still matched: one pool of all such rows
      raise RSVQAError(f"{path}:{line}: empty pool_id")
    try:
      s = csv_columns.number(row["score"])
    except ValueError:
      s = math.nan
    if not 0 <= s <= 1:
      raise RSVQAError(f"{path}:{line}: score {row['score']!r} is not a number in [0, 1]")
    keys.append((line, (row["pool_id"], pools_lib.parse_image_id(path, line, row["image_id"]))))
    values.append(s)
  return keys, values


def _labels(path):
  out = {}
  for line, row in pools_lib.read(path, ("pool_id", "image_id", "label")):
    key = (row["pool_id"], pools_lib.parse_image_id(path, line, row["image_id"]))
    if key in out:
      raise RSVQAError(f"{path}:{line}: pool {key[0]} lists image {key[1]} twice")
    out[key] = pools_lib.parse_label(path, line, row["label"])
  return out


def aligned(scores_path, labels_path):
  """(pool ids, labels, scores) of the pairs of a scores file and a labels file, in the scores
  file's order; every pair must be in both files, once (pool ids compared as text, none blank;
  image ids as the pool files read them, integers: "012" is image 12)."""
  keys, values = _scores(scores_path)
  labels = _labels(labels_path)
  for path, rows in ((scores_path, keys), (labels_path, labels)):
    if not rows:
      raise RSVQAError(f"{path}: no rows")
  seen = set()
  for line, key in keys:
    if key in seen:
      raise RSVQAError(f"{scores_path}:{line}: pool {key[0]} scores image {key[1]} twice")
    if key not in labels:
      raise RSVQAError(f"{scores_path}:{line}: pool {key[0]}, image {key[1]} is not in "
                       f"{labels_path}")
    seen.add(key)
  missing = [k for k in labels if k not in seen]
  if missing:
    raise RSVQAError(f"{scores_path}: no score for {len(missing)} labelled pair(s) of "
                     f"{labels_path}, e.g. pool {missing[0][0]}, image {missing[0][1]}")
  pool_ids = np.asarray([k[0] for _, k in keys], object)
  return pool_ids, np.asarray([labels[k] for _, k in keys], np.int64), np.asarray(values)


def score_files(scores, labels, val_scores=None, val_labels=None):
  """metrics() of a scores / labels pair of files, the threshold from the validation pair."""
  if (val_scores is None) != (val_labels is None):
    raise RSVQAError("give both validation files (--val-scores and --val-labels) or neither")
  val = None if val_scores is None else aligned(val_scores, val_labels)[1:]
  if val is not None:  # pool ids name one pool across splits: a shared pair is a scored one
    shared = sorted(set(_labels(val_labels)) & set(_labels(labels)))
    if shared:
      raise RSVQAError(f"--val-labels {val_labels} shares {len(shared)} pair(s) with --labels "
                       f"{labels} (e.g. pool {shared[0][0]}, image {shared[0][1]}): the binary "
                       "threshold would be tuned on the pairs it scores; give the validation "
                       "split's files")
  return metrics(*aligned(scores, labels), val=val)


# Baselines and tables.

def random_scores(n, seed):
  """The Random baseline: a label drawn uniformly from 2 / 1 / 0 per pair, as score label / 2."""
  return np.random.default_rng([int(seed), 5281]).integers(0, len(pools_lib.LABELS), n) / 2


def majority_score(train_labels):
  """The Majority baseline's one score: the most common training label / 2 (ties: lowest)."""
  counts = np.bincount(np.asarray(train_labels, np.int64), minlength=len(pools_lib.LABELS))
  return int(np.argmax(counts)) / 2


def baselines(train_labels, pool_ids, labels, val_labels, seed=0):
  """{"Random": metrics, "Majority": metrics} on one split, thresholded on validation like a
  model (Random draws its validation scores too; Majority scores every pair alike); without
  `val_labels` (None), no binary metrics, as a model's."""
  majority = majority_score(train_labels)
  n = len(labels)
  val = lambda scores: None if val_labels is None else (val_labels, scores(len(val_labels)))
  return {"Random": metrics(pool_ids, labels, random_scores(n, seed),
                            val=val(lambda m: random_scores(m, seed + 1))),
          "Majority": metrics(pool_ids, labels, np.full(n, majority),
                              val=val(lambda m: np.full(m, majority)))}


def binary_entropy(scores):
  """Predictive entropy in bits of each score read as P(answerable): 1 at 0.5, 0 at 0 and 1."""
  p = np.clip(np.asarray(scores, np.float64), 1e-12, 1 - 1e-12)
  return -(p * np.log2(p) + (1 - p) * np.log2(1 - p))


def table4(rows, caption):
  """The paper's Table 4 layout: one row per (name, metrics dict or [metrics over seeds])."""
  out = []
  for name, values in rows:
    runs = values if isinstance(values, list) else [values]
    cells = []
    for _, key in TABLE_COLUMNS:
      if len(runs) > 1:
        cells.append(tables.pct_over_runs([r[key] for r in runs]))
      else:
        cells.append(math.nan if runs[0][key] is None else runs[0][key])
    out.append((name, *cells))
  return tables.Table(caption=caption, columns=("model", *(c for c, _ in TABLE_COLUMNS)),
                      rows=tuple(out))


def words_of(question):
  """A question's words: lower case, split at every character that is not a letter or digit."""
  return [w for w in "".join(c if c.isalnum() else " " for c in question.lower()).split()]


def word_bias(questions, labels, blind_scores=None, *, min_count=20, top=10, what="pairs"):
  """Which question words predict the label without the image.

  For each word in at least `min_count` pairs: the label shares of the pairs whose question holds
  it, their total-variation distance from the shares of all pairs (0: the word says nothing
  about the label; 1: it fixes it), and the question-only model's mean score on those pairs
  beside the pairs' mean label / 2. Returns (Table of the `top` words by distance, ties by
  count then word, its caption naming `what`; the largest distance).
  """
  labels = np.asarray(labels, np.int64)
  overall = np.asarray(pools_lib.shares(labels))
  by_word = {}
  for i, q in enumerate(np.asarray(questions, object).tolist()):
    for w in set(words_of(q)):
      by_word.setdefault(w, []).append(i)
  rows = []
  for w, idx in by_word.items():
    if len(idx) < min_count:
      continue
    s = np.asarray(pools_lib.shares(labels[idx]))
    tv = float(0.5 * np.abs(s - overall).sum())
    blind = math.nan if blind_scores is None else float(np.mean(np.asarray(blind_scores)[idx]))
    rows.append((w, len(idx), *s.tolist(), tv, float(labels[idx].mean() / 2), blind))
  rows.sort(key=lambda r: (-r[5], -r[1], r[0]))
  table = tables.Table(
      caption=f"Question words against the label, {what} (words in >= {min_count} pairs; top "
              f"{top} by distance from the overall label shares)",
      columns=("word", "pairs", "label 0", "label 1", "label 2", "distance", "mean label / 2",
               "question-only score"),
      rows=tuple(rows[:top]))
  return table, (rows[0][5] if rows else math.nan)


# A study stage's tables and reading (eval/answerability.study_stage builds `sets`).

ROLE_NAMES = {"reference": "reference", "blind": "question-only"}
SET_NAMES = {"main": "main", "no_info": "no-information"}


def stage_table(pool_set, split):
  """Table 4 layout of one pool set of a study stage: the baselines, then every model."""
  rows = [(name, m) for name, m in pool_set["baselines"].items()]
  rows += [(f"{r['label']}, {ROLE_NAMES[r['role']]}", r["runs"]) for r in pool_set["rows"]]
  stats = pool_set["splits"][split]
  size = stats.get("pool_size", pool_set["pool_size"])  # manifests before per-split sizes
  balance = stats.get("balance", pool_set["balance"])  # a split too small for it: 0
  return table4(rows, f"Answerability, {SET_NAMES.get(pool_set['name'], pool_set['name'])} pools "
                      f"(balance {balance:g}): {stats['pools']} {split} pools of "
                      f"{size} candidates (Table 4 layout){_whole_pool_note(size)}")


def _whole_pool_note(size):
  """A caption's word that the cut-offs at or past the pool size rank whole pools, so their
  NDCG and MAP columns are equal (pools of 2: @3 = @5), lest they read as two findings."""
  whole = [f"@{k}" for k in KS if k >= size]
  if len(whole) < 2:
    return ""
  return f"; {' and '.join(whole)} rank whole pools of {size}, so their NDCG and MAP are equal"


def _mean(runs, key):
  values = [r[key] for r in runs if r[key] is not None]
  return float(np.mean(values)) if values else math.nan


def _span(rows, key):
  values = sorted(_mean(r["runs"], key) for r in rows)
  if not values:
    return "n/a"
  low, high = tables.pct(values[0]), tables.pct(values[-1])
  return low if low == high else f"{low} to {high}"


def _pair(m, keys=("ndcg@1", "binary_f1")):
  return " / ".join(tables.pct(_mean([m], k)) for k in keys)


def summary(sets, split, seconds=None):
  """The stage's reading, computed from its numbers (percent); `seconds`: its models' recorded
  training and evaluation time."""
  out = []
  for s in sets:
    ref = [r for r in s["rows"] if r["role"] == "reference"]
    blind = [r for r in s["rows"] if r["role"] == "blind"]
    rnd, maj = s["baselines"]["Random"], s["baselines"]["Majority"]
    shares = " / ".join(f"{100 * x:.1f}%" for x in s["splits"][split]["shares"])
    balance = s["splits"][split].get("balance", s["balance"])
    fell_back = "" if balance == s["balance"] else (
        f", its {split} pools at balance {balance:g}: too few {split} images for "
        f"{s['balance']:g}" + (", so they carry label information like the main set's"
                               if s["balance"] == 1 else ""))
    text = (f"**{SET_NAMES.get(s['name'], s['name']).capitalize()} pools** (balance "
            f"{s['balance']:g}{fell_back}; {split} labels 0 / 1 / 2: {shares}). NDCG@1 / binary F1: "
            f"reference models {_span(ref, 'ndcg@1')} / {_span(ref, 'binary_f1')}, question-only "
            f"twins {_span(blind, 'ndcg@1')} / {_span(blind, 'binary_f1')}, Random "
            f"{_pair(rnd)}, Majority {_pair(maj)}.")
    losers = [r["label"] for r in ref for key in ("ndcg@1", "binary_f1")
              if not _mean(r["runs"], key) > max(
                  [_mean(b["runs"], key) for b in blind if b["lm"] == r["lm"]]
                  + [_mean([rnd], key), _mean([maj], key)])]
    text += (" Every reference model beats its question-only twin and both baselines on both."
             if not losers else f" Not above its twin and both baselines on both: "
             f"{', '.join(dict.fromkeys(losers))}.")
    lead = "Here the wording carries no label information: t" if balance == 1 else "T"
    text += (f" {lead}ernary accuracy / binary F1 of the question-only models "
             f"{_span(blind, 'ternary_acc')} / {_span(blind, 'binary_f1')}, Majority "
             f"{_pair(maj, ('ternary_acc', 'binary_f1'))}.")
    rows = s["words"].rows[:3]
    if rows and s["balance"] == 1:  # the words are read on the train pairs, drawn at this balance
      text += (f" No word tells the label: the largest distance of a word's label shares from all "
               f"train pairs' is {100 * s['max_distance']:.1f} points ('{rows[0][0]}', "
               f"{rows[0][1]} pairs), sampling noise.")
    elif rows:
      text += (" Words that predict the label without the image (train pairs; label shares 0 / 1 "
               "/ 2, distance from all pairs' shares): " + "; ".join(
                   f"'{w}' {100 * a:.0f} / {100 * b:.0f} / {100 * c:.0f}% ({100 * d:.1f} points)"
                   for w, _, a, b, c, d, *_ in rows) + ".")
    out.append(text)
  out.append("A question-only model scores every candidate of a pool alike, so its NDCG and MAP "
             "are those expected of a random order of the pool, like Majority's, and its bias "
             "shows in the ternary and binary metrics."
             + (f" The {sum(len(r['runs']) for s in sets for r in s['rows'])} models took "
                f"{seconds / 60:.1f} min to train and evaluate (timings.json)." if seconds else ""))
  return "\n\n".join(textwrap.fill(p, 100, break_long_words=False, break_on_hyphens=False)
                     for p in out)


def study_section(stage):
  """The report.md lines of a study's answerability stage (eval/answerability.study_stage)."""
  split = stage["split"]
  lines = ["## Answerability ranking", "", stage["summary"], ""]
  for s in stage["sets"]:
    lines += [tables.to_markdown(stage_table(s, split)), tables.to_markdown(s["words"])]
  return lines + [f"Pools, runs and these tables: `{os.path.dirname(stage['report'])}/`.", ""]
