"""Shortcut OOD splits (VQA-VS; DESIGN.md section 6.1): re-split, nine concepts, OOD test sets.

Language bias is one shortcut among many: a model may answer from a keyword, a pair of words, an
object in the image or their combinations. One OOD test set per shortcut concept, cut from the
same IID test set the model is also scored on, shows which of them a model takes.

Definitions (the paper's, with the RSVQA choices DESIGN.md makes):
  re-split   train + val of the source pooled, then 70 / 5 / 25 % train / val / IID test drawn at
             random with a seed. Unit "image" (default): every question of an image goes with it,
             so no image is in two splits; unit "question": the paper's per-question draw. A
             split gets round(share x units) units (val and test at least one), train the rest.
  QT         the question's leading words: for an RSVQA template question the words before its
             first object slot, "an" read as "a" and "number" / "amount" merged (lr_templates), a
             trailing article dropped when two words remain ("is there", "how many", "is a",
             "are there more"); a question without a slot (rural / urban) is all QT. Other
             questions: their leading function words (LEADING_WORDS).
  KW         the question word, QT words and STOP_WORDS excluded, with the highest
             PMI(w, a) = log(N(w, a) K / (N(w) N(a))) with the sample's own answer, N counted in
             samples of the new train split (K of them); a word never seen with that answer in
             train has PMI -inf. Ties: higher N(w), then alphabetical. KWP: the two best words,
             sorted, joined by "+" (one word when the question has only one).
  KO / KOP   the same over the image's object labels (ImageLabels) instead of the words.
  QT+KW, QT+KO, KW+KO, QT+KW+KO   the parts joined by "+". A missing part reads "(none)".
  OOD set    per concept, the IID test samples grouped by concept value; a group is imbalanced
             when its normalised answer entropy H / log(n) < 0.9 (n answers present, H in nats;
             a one-answer group has no tail); in an imbalanced group the answers with count
             < 1.2 x the group's mean count per present answer are its tail, and their samples
             are OOD. The union over the groups is the concept's OOD set. The head split of a
             concept in train (Figure 6a) is the same rule's non-tail samples of the imbalanced
             train groups.
"""
import collections
import csv
import dataclasses
import logging
import math
import os
import re
import unicodedata
import zipfile
from fractions import Fraction

import numpy as np

from rsvqa_jax import storage
from rsvqa_jax.bias import lr_templates
from rsvqa_jax.bias import metrics
from rsvqa_jax.bias import subsets
from rsvqa_jax.data import csv_columns
from rsvqa_jax.data import json_stream
from rsvqa_jax.data import records
from rsvqa_jax.data import resplit
from rsvqa_jax.data import split_files
from rsvqa_jax.errors import RSVQAError, short_repr

_log = logging.getLogger(__name__)
CONCEPTS = ("qt", "kw", "kwp", "qt_kw", "ko", "kop", "qt_ko", "kw_ko", "qt_kw_ko")
CONCEPT_NAMES = {"qt": "QT", "kw": "KW", "kwp": "KWP", "qt_kw": "QT+KW", "ko": "KO", "kop": "KOP",
                 "qt_ko": "QT+KO", "kw_ko": "KW+KO", "qt_kw_ko": "QT+KW+KO"}
SPLITS = ("train", "val", "iid_test")
SHARES = {"train": 0.70, "val": 0.05, "iid_test": 0.25}
DATA_SPLIT = {"train": "train", "val": "val", "iid_test": "test"}  # names in O/data
UNITS = ("image", "question")
POOL = resplit.POOL
ENTROPY_THRESHOLD = 0.9
TAIL_FACTOR = Fraction(6, 5)  # 1.2, exact: tails are compared in integers
NONE = "(none)"
JOIN = "+"
LIST_SEPARATORS = (";", "|")  # a cell listing labels (commas appear in land-cover class names)
CSV_COLUMNS = ("question_id", "split") + CONCEPTS
ARTICLES = ("a", "an", "the")
# English function words, and "image" (RSVQA's template filler "in the image").
STOP_WORDS = frozenset("""
a about above after again all am an and any are as at be been being below between both but by
can could did do does doing down during each few for from further had has have having he her here
hers him his how i if in into is it its itself just me more most my no nor not now of off on once
only or other our out over own same she should so some such than that the their them then there
these they this those through to too under until up very was we were what when where which while
who whom why will with would you your image
""".split())
LEADING_WORDS = frozenset("""
what which who whose where when why how many much is are was were do does did can could has have
there it a an the some any this these that those
""".split())
_WORD = re.compile(r"[a-z0-9]+")


def words(text):
  """Lower-case alphanumeric words of a question."""
  return _WORD.findall(text.lower())


def question_type(question):
  """(QT value, the question's words that belong to its QT) of one question."""
  tokens = words(question)
  parsed = lr_templates.parse(question)
  if parsed is not None:
    prefix = words(parsed.pattern.split("[", 1)[0])
    own = tokens[:len(prefix)]  # "an" / "amount" where the pattern says "a" / "number"
  else:
    n = 0
    while n < len(tokens) and tokens[n] in LEADING_WORDS:
      n += 1
    prefix = own = tokens[:max(n, 1)]
  shown = prefix[:-1] if len(prefix) > 2 and prefix[-1] in ARTICLES else prefix
  return " ".join(shown) or NONE, frozenset(prefix) | frozenset(own)


class Cooccurrence:
  """Sample counts N(x), N(a), N(x, a) and K of items (words, labels) with answers, for PMI."""

  def __init__(self, items_per_sample, answers):
    self.k = len(answers)
    self.n_answer = collections.Counter(answers)
    self.n_item = collections.Counter()
    self.n_pair = collections.Counter()
    for items, answer in zip(items_per_sample, answers):
      self.n_item.update(items)
      self.n_pair.update((x, answer) for x in items)

  def pmi(self, item, answer):
    """Pointwise mutual information of `item` and `answer` over the samples; -inf if never
    seen together."""
    joint = self.n_pair.get((item, answer), 0)
    if not joint:
      return -math.inf
    return math.log(joint * self.k / (self.n_item[item] * self.n_answer[answer]))

  def ranked(self, items, answer, top=2):
    """The `top` items by PMI with `answer`; ties: higher N(x), then alphabetical."""
    return sorted(items, key=lambda x: (-self.pmi(x, answer), -self.n_item.get(x, 0), x))[:top]


def _best(ranked):
  """(single, pair) concept values from ranked items."""
  if not ranked:
    return NONE, NONE
  return ranked[0], JOIN.join(sorted(ranked))


def concepts(splits, labels):
  """{split: {concept: str object array}} of every sample; PMI counted over splits["train"].

  `splits`: name -> records.Split, one of them "train"; `labels`: image id -> tuple of labels.
  """
  parsed = {}
  for split in splits.values():
    for q in dict.fromkeys(split.question.tolist()):
      if q not in parsed:
        qt, own = question_type(q)
        parsed[q] = qt, tuple(sorted({w for w in words(q) if w not in own and w not in STOP_WORDS}))
  train = splits["train"]
  answers = train.answer.tolist()
  by_words = Cooccurrence([parsed[q][1] for q in train.question.tolist()], answers)
  by_labels = Cooccurrence([labels.get(i, ()) for i in train.image_id.tolist()], answers)
  out = {}
  kw_memo, ko_memo = {}, {}
  for name, split in splits.items():
    rows = []
    for q, image, answer in zip(split.question.tolist(), split.image_id.tolist(),
                                split.answer.tolist()):
      if (q, answer) not in kw_memo:
        kw_memo[q, answer] = _best(by_words.ranked(parsed[q][1], answer))
      if (image, answer) not in ko_memo:
        ko_memo[image, answer] = _best(by_labels.ranked(labels.get(image, ()), answer))
      qt = parsed[q][0]
      (kw, kwp), (ko, kop) = kw_memo[q, answer], ko_memo[image, answer]
      rows.append((qt, kw, kwp, JOIN.join((qt, kw)), ko, kop, JOIN.join((qt, ko)),
                   JOIN.join((kw, ko)), JOIN.join((qt, kw, ko))))
    columns = list(zip(*rows)) if rows else [()] * len(CONCEPTS)
    out[name] = {c: _objects(col) for c, col in zip(CONCEPTS, columns)}
  return out


def _objects(values):
  out = np.empty(len(values), dtype=object)
  out[:] = list(values)
  return out


@dataclasses.dataclass(frozen=True)
class Grouping:
  """The entropy and tail rules applied to one concept's samples."""

  ood: np.ndarray  # bool per sample: a tail answer of an imbalanced group
  head: np.ndarray  # bool per sample: a non-tail answer of an imbalanced group
  group: np.ndarray  # int per sample: index into `values`
  values: list  # the groups' concept values, in first-seen order
  entropy: np.ndarray  # float per group: H / log(n) (NaN for a one-answer group)
  imbalanced: np.ndarray  # bool per group

  @property
  def n_groups(self):
    """How many groups (distinct concept values)."""
    return len(self.values)

  @property
  def n_imbalanced(self):
    """How many groups the entropy rule calls imbalanced."""
    return int(self.imbalanced.sum())


def group_rules(values, answers):
  """Grouping of samples by concept `values` with their `answers` (parallel sequences)."""
  group, group_values = metrics.factorize(list(values))
  answer, answer_values = metrics.factorize(list(answers))
  n_groups, n_answers = len(group_values), max(len(answer_values), 1)
  pairs, inverse, counts = np.unique(group * n_answers + answer, return_inverse=True,
                                     return_counts=True)
  pair_group = pairs // n_answers
  present = np.bincount(pair_group, minlength=n_groups)
  total = np.bincount(pair_group, weights=counts, minlength=n_groups).astype(np.int64)
  share = counts / total[pair_group]
  entropy = np.bincount(pair_group, weights=-share * np.log(share), minlength=n_groups)
  with np.errstate(divide="ignore", invalid="ignore"):
    normalised = np.where(present > 1, entropy / np.log(np.maximum(present, 2)), math.nan)
  imbalanced = (present > 1) & (normalised < ENTROPY_THRESHOLD)
  tail = counts * present[pair_group] * TAIL_FACTOR.denominator < (
      TAIL_FACTOR.numerator * total[pair_group])
  in_imbalanced = imbalanced[pair_group][inverse.reshape(-1)]
  ood = in_imbalanced & tail[inverse.reshape(-1)]
  return Grouping(ood=ood, head=in_imbalanced & ~ood, group=group, values=group_values,
                  entropy=normalised, imbalanced=imbalanced)


def unit_counts(n, what="units"):
  """{split: units}: round(share x n) for val and IID test (at least one each), train the rest."""
  if n < len(SPLITS):
    other = {"images": "; --unit question draws questions instead"}.get(what, "")
    raise RSVQAError(f"the re-split draws from the {' and '.join(POOL)} splits together: they "
                     f"hold {n} {what}, it needs at least {len(SPLITS)} (one per split); give a "
                     f"larger dataset{other}")
  val, test = (max(1, int(math.floor(SHARES[s] * n + 0.5))) for s in ("val", "iid_test"))
  return {"train": n - val - test, "val": val, "iid_test": test}


def resplit(pooled, seed, unit="image"):
  """{split: sorted row indices of `pooled`} drawn as the module docstring says."""
  if unit not in UNITS:
    raise RSVQAError(f"--unit {unit}: choose one of {', '.join(UNITS)}")
  if unit == "image":
    _, of_row = np.unique(pooled.image_id, return_inverse=True)
    n_units = int(of_row.max()) + 1 if len(of_row) else 0
  else:
    of_row, n_units = np.arange(len(pooled)), len(pooled)
  counts = unit_counts(n_units, f"{unit}s")
  order = np.random.default_rng(seed).permutation(n_units)
  assigned = np.empty(n_units, np.int64)
  start = 0
  for k, name in enumerate(SPLITS):
    assigned[order[start:start + counts[name]]] = k
    start += counts[name]
  of_row = assigned[of_row.reshape(-1)]
  return {name: np.flatnonzero(of_row == k) for k, name in enumerate(SPLITS)}


def pool(dataset):
  """The source's train and val splits as one records.Split (what the re-split draws from)."""
  parts = [dataset[name] for name in POOL]
  pooled = records.Split(name="pool", **{c: np.concatenate([getattr(p, c) for p in parts])
                                         for c in records.COLUMNS})
  ids, counts = np.unique(pooled.question_id, return_counts=True)
  if (counts > 1).any():
    raise RSVQAError(f"{dataset.root}: question {ids[counts > 1][0]} is in both train and val")
  return pooled


# Image object labels: where KO comes from.

@dataclasses.dataclass(frozen=True)
class ImageLabels:
  """Object labels per image id, and where they came from (the benchmark reports it)."""

  labels: dict  # image id -> tuple of labels (sorted, distinct)
  kind: str  # "synthetic scenes", "image entries", "csv", "k-means clusters"
  source: str  # the folder, file or features they were read from

  def describe(self, image_ids):
    """What the labels cover of `image_ids`: their kind and source, and the counts of images
    labelled, labelled images outside `image_ids` and distinct labels."""
    have = sum(bool(self.labels.get(i)) for i in image_ids)
    known = set(image_ids)
    return {"kind": self.kind, "source": self.source, "images": len(image_ids),
            "images_labelled": have,
            "labelled_images_elsewhere": sum(i not in known for i in self.labels),
            "labels": len({x for i in image_ids for x in self.labels.get(i, ())})}


def _labels(pairs):
  """image id -> sorted distinct labels, from (image id, label) pairs."""
  out = collections.defaultdict(set)
  for image, label in pairs:
    out[int(image)].add(str(label))
  return {i: tuple(sorted(v)) for i, v in out.items()}


def mask_labels(root, image_ids):
  """ImageLabels of a synthetic dataset: each scene's object classes and its land use, read
  from masks/{id}.npz (the generator's record of what it drew; data/scenes.save_masks)."""
  pairs = []
  for image in image_ids:
    path = os.path.join(root, "masks", f"{int(image)}.npz")
    try:
      with storage.npz(path) as z:
        pairs += [(image, c) for c in z["classes"].tolist()] + [(image, str(z["land_use"]))]
    except (OSError, KeyError, ValueError, EOFError, zipfile.BadZipFile) as e:  # truncated too
      raise RSVQAError(f"{path}: cannot read the scene's objects ({e})") from None
  return ImageLabels(_labels(pairs), "synthetic scenes", os.path.join(root, "masks"))


def entry_labels(root, name, image_ids):
  """ImageLabels from a `labels` list on each image entry of the pool's split files
  (RSVQAxBEN's BigEarthNet labels, where the files carry them), or None when none has one.

  The files are streamed (data/json_stream.py): parsed whole, RSVQAxBEN's take several times
  their size."""
  wanted, pairs = set(int(i) for i in image_ids), []
  for split in POOL:
    path = split_files.split_file(root, name, split, "images")
    for entry in (e for block in json_stream.blocks(path, "images") for e in block):
      if isinstance(entry, dict) and entry.get("id") in wanted and "labels" in entry:
        found = entry["labels"]
        if not isinstance(found, list) or not all(isinstance(x, str) for x in found):
          raise RSVQAError(f"{path}: image {entry['id']} has labels {short_repr(found)}"
                           ": expected a list of strings")
        pairs += [(entry["id"], _label(x, f"{path}: image {entry['id']}")) for x in found]
  if not pairs:
    return None
  return ImageLabels(_labels(_one_spelling(pairs, root)), "image entries", root)


def _label(raw, where):
  """A user's label as the concepts read it: composed (NFC: an accent typed or composed is one
  label), stripped, inner spaces single; refused when empty, holding JOIN or a list separator,
  or spelling NONE (the value of an image without a label, which it would join)."""
  label = " ".join(unicodedata.normalize("NFC", raw).split())
  if not label or JOIN in label or label == NONE:
    raise RSVQAError(f"{where}: label {raw!r}: expected a non-empty label without {JOIN!r}, other "
                     f"than {NONE!r}")
  if listed := next((c for c in LIST_SEPARATORS if c in label), None):
    raise RSVQAError(f"{where}: label {raw!r} holds {listed!r}: one label each (image_id,label "
                     "twice for two labels)")
  return label


def csv_labels(path):
  """ImageLabels of a user CSV with columns image_id,label (one row per label of an image)."""
  pairs = []
  for line, row in csv_columns.read(path, ("image_id", "label"), (), "image labels")[1]:
    try:
      image = csv_columns.integer(row["image_id"])
    except ValueError:
      raise RSVQAError(f"{path}:{line}: image_id {row['image_id']!r} is not an integer") from None
    pairs.append((image, _label(row["label"], f"{path}:{line}")))
  return ImageLabels(_labels(_one_spelling(pairs, path)), "csv", os.path.abspath(path))


def _one_spelling(pairs, path):
  """Labels that differ in case only ('Forest', 'forest') read as one: the spelling most rows
  give (ties: the first in sort order), with a WARNING naming the others."""
  spellings = collections.defaultdict(collections.Counter)
  for _, label in pairs:
    spellings[label.casefold()][label] += 1
  chosen = {}
  for counts in spellings.values():
    best = min(counts, key=lambda x: (-counts[x], x))
    chosen.update(dict.fromkeys(counts, best))
    if len(counts) > 1:
      others = ", ".join(repr(x) for x in sorted(counts) if x != best)
      _log.warning(f"{path}: labels {others} read as {best!r} (they differ in case only)")
  return [(image, chosen[label]) for image, label in pairs]


def _nearest(x, centres, chunk):
  """(index, squared distance) of each row's nearest centre, computed `chunk` rows at a time
  (a memory-mapped [N, D] feature table is never loaded whole)."""
  index, distance = np.empty(len(x), np.int64), np.empty(len(x))
  norms = (centres * centres).sum(1)
  for start in range(0, len(x), chunk):
    rows = np.asarray(x[start:start + chunk], np.float64)
    d = (rows * rows).sum(1)[:, None] - 2 * rows @ centres.T + norms[None]
    index[start:start + chunk] = d.argmin(1)
    distance[start:start + chunk] = np.maximum(d.min(1), 0)
  return index, distance


def kmeans(features, k, seed=0, iterations=100, chunk=1 << 14):
  """Cluster of each row of `features` [N, D]: k-means++ start, then Lloyd steps (float64)."""
  n = len(features)
  if not 2 <= k <= n:
    raise RSVQAError(f"--image-clusters {k}: needs 2 <= K <= the {n} images")
  rng = np.random.default_rng(seed)
  centres = np.asarray(features[int(rng.integers(n))], np.float64)[None]
  _, nearest = _nearest(features, centres, chunk)
  while len(centres) < k:
    pick = rng.choice(n, p=nearest / nearest.sum()) if nearest.sum() > 0 else rng.integers(n)
    centres = np.concatenate([centres, np.asarray(features[int(pick)], np.float64)[None]])
    nearest = np.minimum(nearest, _nearest(features, centres[-1:], chunk)[1])
  assign = None
  for _ in range(iterations):
    new, _ = _nearest(features, centres, chunk)
    if assign is not None and np.array_equal(new, assign):
      break
    assign = new
    sums = np.zeros_like(centres)
    for start in range(0, n, chunk):
      members = np.eye(k)[assign[start:start + chunk]]  # one-hot rows: a matmul sums them
      sums += members.T @ np.asarray(features[start:start + chunk], np.float64)
    counts = np.bincount(assign, minlength=k)
    centres = np.where(counts[:, None] > 0, sums / np.maximum(counts, 1)[:, None], centres)
  return assign


def cluster_labels(image_ids, features, k, seed, source):
  """ImageLabels "cluster c" per image from k-means of its features (rows follow image_ids)."""
  assign = kmeans(features, k, seed)
  return ImageLabels({int(i): (f"cluster {int(c)}",) for i, c in zip(image_ids, assign)},
                     f"k-means clusters (K={k})", source)


def find_labels(root, name, image_ids):
  """The labels a dataset carries itself: a synthetic scene's masks/, else image entries'
  `labels`; a one-line RSVQAError when it has none (give a CSV or clusters instead)."""
  if os.path.isdir(os.path.join(root, "masks")):
    return mask_labels(root, image_ids)
  found = entry_labels(root, name, image_ids)
  if found is None:
    raise RSVQAError(f"{root}: no image object labels for the KO concepts (no synthetic masks/ "
                     "folder, no 'labels' on the image entries); give --image-labels CSV "
                     "(columns image_id,label) or --image-clusters K")
  return found


# The benchmark: the re-split, its concepts and the rules applied.

@dataclasses.dataclass(frozen=True)
class Benchmark:
  """A re-split dataset's samples, their concepts, and the rules applied to train and IID test."""

  splits: dict  # SPLITS name -> records.Split (rows in pool order)
  concepts: dict  # SPLITS name -> {concept: str array}
  test_rules: dict  # concept -> Grouping of the IID test samples (the OOD sets)
  train_rules: dict  # concept -> Grouping of the train samples (the head splits)

  def ood_ids(self, concept):
    """The sorted question ids of the IID test split that form `concept`'s OOD set."""
    test = self.splits["iid_test"]
    return np.sort(test.question_id[self.test_rules[concept].ood])


def build(dataset, seed, labels, unit="image"):
  """The Benchmark of a records.Dataset's train + val re-split with `seed`."""
  pooled = pool(dataset)
  rows = resplit(pooled, seed, unit)
  splits = {name: dataclasses.replace(pooled.select(rows[name]), name=name) for name in SPLITS}
  values = concepts(splits, labels)
  rules = lambda split: {c: group_rules(values[split][c], splits[split].answer) for c in CONCEPTS}
  return Benchmark(splits=splits, concepts=values, test_rules=rules("iid_test"),
                   train_rules=rules("train"))


def jaccard(a, b):
  """|A and B| / |A or B| of two boolean masks (NaN when both are empty)."""
  union = int((a | b).sum())
  return int((a & b).sum()) / union if union else math.nan


def overlap(a, b):
  """|A and B| / |A| of two boolean masks: the share of A also in B (NaN for an empty A)."""
  size = int(a.sum())
  return int((a & b).sum()) / size if size else math.nan


def type_prior(fit, split):
  """metrics.LevelPrediction of each sample of `split` by its question type's most common
  `fit` answer (a type absent from `fit`: the overall most common answer)."""
  overall = metrics.predict(metrics.fit_priors(subsets.keys(fit, "all"), fit.answer),
                            subsets.keys(split, "all"))
  return metrics.predict(metrics.fit_priors(subsets.keys(fit, "type"), fit.answer),
                         subsets.keys(split, "type"), fallback=overall)


def concept_prior(fit_values, fit, values, split):
  """Each sample predicted by its concept group's most common `fit` answer (the shortcut itself;
  a group absent from `fit`: its question type's)."""
  return metrics.predict(metrics.fit_priors(np.asarray(fit_values, object), fit.answer),
                         np.asarray(values, object), fallback=type_prior(fit, split))


# Files of a benchmark folder O (written by bias/shortcut_report.py, read back here).

SPLIT_FILE = "split.json"
CONCEPTS_FILE = "concepts.csv"
MANIFEST = "shortcuts.json"
VERSION = 1  # of a benchmark folder's files and rules, recorded in its manifest
DATA_DIR = "data"
SOURCE_MANIFEST = "source_manifest"  # the source's synthetic.json, null for a real dataset
# Per split, records.Split.fingerprint(by_id=True) of its rows as cut: question ids alone
# matched another dataset numbered alike, whose questions were then scored on these OOD sets.
ROWS_SHA256 = "rows_sha256"
# File name -> sha256 of benchmark_files as written: a question moved from one OOD set to another
# or a concept value edited kept the counts, which were all that was checked.
FILES_SHA256 = "files_sha256"


def data_source(root):
  """What identifies `root` when it is the data folder of a benchmark built from a synthetic
  dataset, wherever the two lie: the source's generator settings and the re-split's seed and
  unit (the split depends on nothing else). None for any other folder, whose path identifies
  it. An encoder pretrained on the folder is keyed by this (train/inputs.folder_source): keyed
  by the path, a moved study's shortcut runs were refused as runs of another config."""
  if os.path.basename(os.path.normpath(root)) != DATA_DIR:
    return None
  manifest = storage.read_json(os.path.join(os.path.dirname(os.path.abspath(root)), MANIFEST))
  if not isinstance(manifest, dict) or not isinstance(manifest.get(SOURCE_MANIFEST), dict):
    return None
  return {"shortcut_benchmark": {key: manifest.get(key) for key in
                                 ("version", "dataset", "seed", "unit", SOURCE_MANIFEST)}}


def ood_file(out, concept):
  """The path of a concept's OOD set file in the benchmark folder `out`."""
  return os.path.join(out, f"ood_{concept}.json")


def benchmark_files(out):
  """The files of a benchmark folder whose sha256 its manifest records (FILES_SHA256)."""
  return [os.path.join(out, SPLIT_FILE), os.path.join(out, CONCEPTS_FILE),
          *(ood_file(out, c) for c in CONCEPTS)]


def write_files(out, bench):
  """split.json, concepts.csv and ood_{concept}.json of `bench` under `out`."""
  storage.write_json(os.path.join(out, SPLIT_FILE),
                     {s: bench.splits[s].question_id.tolist() for s in SPLITS})
  with storage.replacing(os.path.join(out, CONCEPTS_FILE), newline="") as f:
    writer = csv.writer(f, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for s in SPLITS:
      cols = [bench.concepts[s][c].tolist() for c in CONCEPTS]
      writer.writerows(zip(bench.splits[s].question_id.tolist(), [s] * len(cols[0]), *cols))
  for c in CONCEPTS:
    storage.write_json(ood_file(out, c), bench.ood_ids(c).tolist())


@dataclasses.dataclass(frozen=True)
class Saved:
  """A benchmark folder read back: what evaluation needs of it."""

  root: str
  manifest: dict
  split_ids: dict  # SPLITS name -> int64 question ids
  concepts: dict  # question id -> {concept: value}
  ood: dict  # concept -> sorted int64 question ids of its OOD test set

  def values(self, split, concept):
    """Concept values of a records.Split's samples (each must be in concepts.csv)."""
    try:
      return [self.concepts[q][concept] for q in split.question_id.tolist()]
    except KeyError as e:
      raise RSVQAError(f"{os.path.join(self.root, CONCEPTS_FILE)}: no row for question "
                       f"{e.args[0]}") from None

  def check_split(self, split, name, what, hint=None):
    """RSVQAError unless records.Split `split` holds exactly the benchmark's `name` questions;
    `hint` ends the message (default: give --data the benchmark's data folder)."""
    want = self.split_ids[name]
    have = np.sort(split.question_id)
    fix = hint or f"give --data {os.path.join(self.root, DATA_DIR)}"
    if not np.array_equal(have, np.sort(want)):
      raise RSVQAError(f"{what}: its {split.name} split ({len(have)} questions) is not the "
                       f"{name} split of {self.root} ({len(want)} questions); {fix}")
    recorded = (self.manifest.get(ROWS_SHA256) or {}).get(name)  # none: cut before it was kept
    if recorded is not None and recorded != split.fingerprint(by_id=True):
      raise RSVQAError(f"{what}: its {split.name} split has the question ids of the {name} split "
                       f"of {self.root} but other questions, images or answers (another dataset "
                       f"numbered alike, or files edited since the benchmark was cut); {fix}")


def _ids(value, path):
  """The question ids of a benchmark list; one listed twice would be scored twice: refused."""
  if not isinstance(value, list) or not all(records.is_id(v) for v in value):
    raise RSVQAError(f"{path}: expected a list of question ids")
  ids = np.asarray(value, np.int64)
  unique, counts = np.unique(ids, return_counts=True)
  if (counts > 1).any():
    raise RSVQAError(f"{path}: question {unique[counts > 1][0]} is listed twice")
  return ids


def _check_counts(out, manifest, counts):
  """Refuses files whose question counts are not the manifest's: a folder edited or mixed."""
  for (name, key, entry), n in counts.items():
    recorded = manifest.get(key, {}).get(entry) if isinstance(manifest.get(key), dict) else None
    if recorded != n:
      raise RSVQAError(f"{os.path.join(out, name)}: {n} questions in {entry}, {MANIFEST} records "
                       f"{recorded!r}: the folder was edited or mixed with another; build it "
                       "again with rsvqa-jax shortcuts")


def load(out):
  """Saved of benchmark folder `out`: a one-line RSVQAError naming a missing or malformed file."""
  manifest = storage.read_json(os.path.join(out, MANIFEST))
  if not isinstance(manifest, dict):
    raise RSVQAError(f"{out}: not a shortcut benchmark folder ({MANIFEST} missing or malformed; "
                     "rsvqa-jax shortcuts writes one)")
  if manifest.get("version") != VERSION:
    raise RSVQAError(f"{os.path.join(out, MANIFEST)}: version {manifest.get('version')!r}, this "
                     f"rsvqa-jax reads version {VERSION}; build the benchmark again with "
                     "rsvqa-jax shortcuts")
  path = os.path.join(out, SPLIT_FILE)
  split = split_files.load_json(path, "split file")
  if not isinstance(split, dict) or set(split) != set(SPLITS):
    raise RSVQAError(f"{path}: expected an object with the lists {', '.join(SPLITS)}")
  split_ids = {s: _ids(split[s], path) for s in SPLITS}
  path = os.path.join(out, CONCEPTS_FILE)
  values = {}
  try:
    with open(path, newline="", encoding="utf-8") as f:
      reader = csv.reader(f)
      if tuple(next(reader, ())) != CSV_COLUMNS:
        raise RSVQAError(f"{path}: header is not {','.join(CSV_COLUMNS)}")
      for row in reader:  # ids in ASCII digits: isdigit() also takes '²', which int() refuses
        if len(row) != len(CSV_COLUMNS) or not (row[0].isascii() and row[0].isdigit()):
          raise RSVQAError(f"{path}:{reader.line_num}: malformed row")
        if int(row[0]) in values:  # which row's concepts to read would be a guess
          raise RSVQAError(f"{path}:{reader.line_num}: question {int(row[0])} has a row already")
        values[int(row[0])] = dict(zip(CONCEPTS, row[2:]))
  except OSError as e:
    raise RSVQAError(f"{path}: cannot read ({e.strerror or e})") from None
  except (UnicodeDecodeError, csv.Error) as e:  # edited by hand, or damaged
    raise RSVQAError(f"{path}: not the UTF-8 CSV rsvqa-jax shortcuts writes ({e}); build the "
                     "benchmark again") from None
  ood = {c: np.sort(_ids(split_files.load_json(ood_file(out, c), "OOD set"), ood_file(out, c)))
         for c in CONCEPTS}
  for c, ids in ood.items():
    stray = np.setdiff1d(ids, split_ids["iid_test"])
    if len(stray):
      raise RSVQAError(f"{ood_file(out, c)}: question {stray[0]} is not in the IID test split")
  for path in benchmark_files(out):
    recorded = (manifest.get(FILES_SHA256) or {}).get(os.path.basename(path))  # none: cut before
    if recorded is not None and recorded != storage.file_sha256(path):
      raise RSVQAError(f"{path}: edited since the benchmark was cut (its sha256 is not the one "
                       f"{MANIFEST} records); build it again with rsvqa-jax shortcuts")
  _check_counts(out, manifest, {**{(SPLIT_FILE, "questions", s): len(split_ids[s]) for s in SPLITS},
                                **{(os.path.basename(ood_file(out, c)), "ood", c): len(ood[c])
                                   for c in CONCEPTS}})
  return Saved(root=out, manifest=manifest, split_ids=split_ids, concepts=values, ood=ood)


# Scoring a model's answers on the IID test split and the OOD sets.

def _table(correct, qtype, types, prior):
  table = metrics.accuracy_table(correct, qtype, types)
  keep = {k: table[k] for k in ("oa", "aa", "per_type", "n", "per_type_n")}
  return {**keep, "prior_acc": metrics.accuracy(prior)}


def score(saved, fit, test, correct):
  """Accuracy per question type, AA and OA on the IID test split and on each OOD set, the IID-OOD
  gap in OA, and Prior_Acc (each question answered with its type's most common `fit` answer).

  `fit`, `test`: the benchmark's train and IID test records.Split; `correct`: bool [N] per test
  question. Returns a JSON-ready dict: {"types", "iid_test", "ood": {concept}, "mean_ood_oa"}.
  """
  correct = np.asarray(correct, bool)
  types = sorted(set(fit.qtype.tolist()) | set(test.qtype.tolist()))
  prior = type_prior(fit, test).prediction == test.answer
  out = {"types": types, "iid_test": _table(correct, test.qtype, types, prior), "ood": {}}
  for c in CONCEPTS:
    mask = np.isin(test.question_id, saved.ood[c])
    row = _table(correct[mask], test.qtype[mask], types, prior[mask])
    row["gap_oa"] = out["iid_test"]["oa"] - row["oa"]
    out["ood"][c] = row
  oas = [r["oa"] for r in out["ood"].values() if not math.isnan(r["oa"])]
  out["mean_ood_oa"] = float(np.mean(oas)) if oas else math.nan
  out["mean_gap_oa"] = out["iid_test"]["oa"] - out["mean_ood_oa"]
  return out


def ood_masks(saved, split, name):
  """{concept: bool mask} over `split`'s samples: the benchmark's OOD test sets for the IID test
  split; for the val split, the same rules applied to its own samples (the OOD val sets of the
  paper's Table 4)."""
  if name == "iid_test":
    return {c: np.isin(split.question_id, saved.ood[c]) for c in CONCEPTS}
  return {c: group_rules(saved.values(split, c), split.answer).ood for c in CONCEPTS}
