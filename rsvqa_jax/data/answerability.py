"""Answerability pools (ChiQA, DESIGN.md 6.3): which of K candidate tiles can answer a question.

A pool is one presence question ("Is there a small building next to a  road?") and K tiles of
one split, each labelled from the tile's scene (questions.SceneIndex matches the Phrase):
  2  an object the whole phrase holds for, lying inside the tile;
  1  an object of the class is there, but its attribute or relation fails, or every object the
     phrase holds for touches the tile border (the tile may cut it);
  0  no object of the class.
Phrases are drawn from the scenes' own objects (so label 2 exists somewhere), roads never head
a phrase (every road crosses the tile) but may follow a relation. The scenes are redrawn from the
dataset's manifest: scenes.make_scene is deterministic in (seed, image id, size, region).

`balance` b steers the label shares: each candidate's label is drawn from (1 - b) x the
question's own label distribution over the split's tiles + b x uniform, then a tile with that
label. At b = 1 every pool's labels are uniform whatever its question, so the wording carries no
label information (a question-only model can do no better than the majority label); at b = 0
the candidates are random tiles and the wording predicts the label as the scenes make it
(attributes and relations make 1 likelier, rare classes 0). With b > 0 a question is kept only
when each label has at least K tiles, so a draw never runs short and never depends on the question.

Files: `Answerability_{split}.csv` (pool_id,question,image_id,label: a pool's rows together,
candidates in random order, pool ids unique over the splits) and `answerability.json` (the
parameters, and per split the pool size and balance used and the label shares; written last: files without
it are a stopped run's, regenerated).
"""
import csv
import hashlib
import logging
import os

import numpy as np

from rsvqa_jax import storage
from rsvqa_jax.data import csv_columns
from rsvqa_jax.data import questions as questions_lib
from rsvqa_jax.data import scenes, split_files, synthetic
from rsvqa_jax.errors import RSVQAError

_log = logging.getLogger(__name__)

COLUMNS = ("pool_id", "question", "image_id", "label")
LABELS = (0, 1, 2)
MANIFEST = "answerability.json"
VERSION = 1
ATTR_PROB = 0.5  # each of size and shape on a drawn phrase (the VQA questions: 0.07)
RELATION_PROB = 0.35
BUILDING_WORD_PROB = 0.4  # a house or office asked about as "building"
TRIES_PER_POOL = 60
SPLIT_ORDER = ("train", "val", "test")
# Pools per image at most (100 x K pairs per image, K x the questions of RSVQA's sets): pools are
# drawn one question at a time, so 1e9 ran for ever before writing anything.
MAX_POOLS_PER_IMAGE = 100


def is_dataset_folder(path):
  """Whether folder `path` holds a dataset: a generator's manifest (the synthetic set's, the
  pools') or an official split file; outputs never go there."""
  return (any(os.path.exists(os.path.join(path, name)) for name in (synthetic.MANIFEST, MANIFEST))
          or split_files.dataset_file(path) is not None)


def pool_file(folder, split):
  return os.path.join(folder, f"Answerability_{split}.csv")


def least_images(variant):
  """The fewest images of a synthetic `variant` whose every split gets 2 (the smallest pool):
  make_pools refuses a split of fewer, after the dataset is written."""
  return synthetic.least_images(variant, lambda sizes: min(sizes.values()) >= 2)


def params(pool_size=5, pools_per_image=2.0, balance=1.0, seed=0):
  """The pool generator's parameters (what the manifest records), checked."""
  if pool_size < 2:
    raise RSVQAError(f"pool size {pool_size}: a pool needs at least 2 candidate images")
  if not 0 < pools_per_image <= MAX_POOLS_PER_IMAGE:
    raise RSVQAError(f"pools per image {pools_per_image:g}: must be above 0 and at most "
                     f"{MAX_POOLS_PER_IMAGE} (each pool a distinct question of K images)")
  if not 0 <= balance <= 1:
    raise RSVQAError(f"answerability balance {balance}: must be in [0, 1]")
  return {"version": VERSION, "pool_size": int(pool_size),
          "pools_per_image": float(pools_per_image), "balance": float(balance), "seed": int(seed)}


class Tile:
  """A scene's phrase matcher and which of its objects touch the tile border."""

  def __init__(self, image_id, scene):
    self.image_id = image_id
    self.objects = scene.objects
    size = scene.image.shape[0]
    self.index = questions_lib.SceneIndex(scene, next_to_px=4 * size / 256)
    self.cut = np.array([_touches_border(o, size) for o in scene.objects], bool)

  def label(self, phrase):
    if (self.index.match(phrase) & ~self.cut).any():
      return 2
    return 1 if self.index.match(questions_lib.Phrase(phrase.obj)).any() else 0


def _touches_border(obj, size):
  y0, x0, y1, x1 = obj.box
  m = obj.mask
  return bool((y0 == 0 and m[0].any()) or (x0 == 0 and m[:, 0].any())
              or (y1 == size and m[-1].any()) or (x1 == size and m[:, -1].any()))


def _name(rng, obj):
  building = obj.cls in scenes.BUILDING_CLASSES and rng.random() < BUILDING_WORD_PROB
  return "building" if building else obj.cls


def _phrase(rng, tile):
  """A phrase about one of the tile's objects (its own attributes, maybe a relation), or None."""
  heads = [i for i, o in enumerate(tile.objects) if o.cls != "road"]
  if not heads:
    return None
  i = heads[int(rng.integers(len(heads)))]
  o = tile.objects[i]
  size = o.size if rng.random() < ATTR_PROB else None
  shape = o.shape if o.shape and rng.random() < ATTR_PROB else None
  phrase = questions_lib.Phrase(_name(rng, o), size, shape)
  if rng.random() < RELATION_PROB:
    relation = questions_lib.RELATIONS[int(rng.integers(len(questions_lib.RELATIONS)))]
    partners = np.flatnonzero(tile.index.relation[relation][i])
    if len(partners):
      p = tile.objects[int(partners[int(rng.integers(len(partners)))])]
      ref = questions_lib.Phrase(_name(rng, p), p.size if rng.random() < ATTR_PROB else None)
      det = "the" if tile.index.count(ref) == 1 else "a"
      phrase = questions_lib.Phrase(phrase.obj, size, shape, relation, ref, det)
  return phrase


def _question(rng, phrase):
  form = ("is_there", "is_present")[int(rng.integers(2))]
  in_image = bool(rng.random() < questions_lib.IN_IMAGE_PROB)
  return questions_lib.question_text(form, (phrase,), in_image)


def _candidates(rng, labels, size, balance):
  """Indices of `size` tiles with labels drawn as the module says, or None if too few."""
  counts = np.bincount(labels, minlength=len(LABELS))
  if balance == 0:
    return rng.permutation(len(labels))[:size]
  if counts.min() < size:
    return None
  target = (1 - balance) * counts / counts.sum() + balance / len(LABELS)
  left = {lab: rng.permutation(np.flatnonzero(labels == lab)).tolist() for lab in LABELS}
  return np.asarray([left[lab].pop() for lab in rng.choice(len(LABELS), size=size, p=target)])


def _largest_pool(n_tiles, balance):
  """The most candidates `n_tiles` images could give a pool: all of them, or at balance > 0 (a
  question needs that many images of each label) a third."""
  return n_tiles if balance == 0 else n_tiles // len(LABELS)


def make_pools(tiles, p, rng, n_pools, split="a split"):
  """([(question, [(image id, label)] * K)], balance) of one split's tiles: distinct questions.

  K is p["pool_size"], or the largest K >= 2 the split can fill when it cannot (a WARNING): a
  small validation split then still has pools to rank. A split too small to hold the balance at
  all (pools of 2 need 2 images of each label) is drawn at balance 0, as its scenes fall (a
  WARNING too); the balance used is returned and recorded per split.
  """
  want = p["pool_size"]
  for balance in dict.fromkeys((p["balance"], 0.0)):
    for k in range(min(want, _largest_pool(len(tiles), balance)), 1, -1):
      pools = _draw(tiles, balance, rng, n_pools, k)
      if not pools:
        continue
      if balance != p["balance"]:
        _log.warning(f"{split}: no question has 2 of its {len(tiles)} images with each label, so "
                     f"balance {p['balance']:g} cannot hold; its pools are drawn at balance 0, "
                     "as its scenes fall")
      if k < want:
        _log.warning(f"{split}: {len(tiles)} images cannot fill pools of {want} candidates "
                     f"(balance {balance:g}); its pools have {k}")
      return pools, balance
  raise RSVQAError(f"{split}: {len(tiles)} image(s) cannot fill pools of even 2 candidates: "
                   "use more images")


def _draw(tiles, balance, rng, n_pools, k):
  """Up to `n_pools` pools of `k` candidates (make_pools), [] when no question fills one."""
  pools, seen = [], set()
  for _ in range(TRIES_PER_POOL * n_pools):
    if len(pools) == n_pools:
      break
    phrase = _phrase(rng, tiles[int(rng.integers(len(tiles)))])
    if phrase is None:
      continue
    text = _question(rng, phrase)
    if text in seen:
      continue
    labels = np.array([t.label(phrase) for t in tiles])
    chosen = _candidates(rng, labels, k, balance)
    if chosen is None:
      continue
    seen.add(text)
    pools.append((text, [(tiles[i].image_id, int(labels[i])) for i in chosen.tolist()]))
  return pools


def rows_of(pools, first_id=0):
  """The CSV rows (pool_id, question, image_id, label) of make_pools' pools, numbered from
  `first_id`."""
  return [(first_id + n, text, image_id, label)
          for n, (text, cands) in enumerate(pools) for image_id, label in cands]


def shares(labels):
  """[share of label 0, 1, 2] of a label list (NaN when empty)."""
  counts = np.bincount(np.asarray(labels, np.int64), minlength=len(LABELS))[:len(LABELS)]
  return (counts / counts.sum()).tolist() if counts.sum() else [float("nan")] * len(LABELS)


def _ids_sha256(image_ids):
  h = hashlib.sha256()
  for split in sorted(image_ids):
    h.update(f"{split}:{','.join(map(str, sorted(map(int, image_ids[split]))))};".encode())
  return h.hexdigest()


def check_drawn_for(folder, dataset, fix):
  """A one-line RSVQAError when the MANIFEST in `folder` records pools drawn from another dataset
  than `dataset` (records.Dataset): that dataset's scenes labelled them and their ids name its
  images. `fix`: what to do instead."""
  path = os.path.join(folder, MANIFEST)
  found = storage.read_json(path)
  drawn = found.get("dataset") if isinstance(found, dict) else None
  if not isinstance(drawn, dict):
    return
  own, where = synthetic.read_manifest(dataset.root), f"dataset {dataset.root} ({dataset.name})"
  if own is not None and own != drawn:
    keys = [k for k in sorted({*drawn, *own}) if drawn.get(k) != own.get(k)]
    said = lambda m: ", ".join(f"{k}={m.get(k)}" for k in keys)
    raise RSVQAError(f"{path}: its pools were drawn from a synthetic dataset of {said(drawn)}, but "
                     f"{where} is one of {said(own)} ({synthetic.MANIFEST}); {fix}")
  if own is None and drawn.get("variant") != dataset.name:
    raise RSVQAError(f"{path}: its pools were drawn from a synthetic {drawn.get('variant')} "
                     f"dataset ({drawn.get('images')} images, seed {drawn.get('seed')}), not "
                     f"{where}; {fix}")
  splits = found.get("splits")
  if isinstance(splits, dict) and found.get("image_ids_sha256") != _ids_sha256(
      {s: dataset.image_ids(s) for s in splits if s in dataset.splits}):
    raise RSVQAError(f"{path}: its pools were drawn for other images or splits than those of "
                     f"{where} (image_ids_sha256 differs); {fix}")


def check_images(path, image_ids, dataset, split, fix):
  """A one-line RSVQAError naming the first of pool file `path`'s `image_ids` that is no image of
  `split` of `dataset` (None: of any split): pools of another dataset or split would train or be
  scored on the wrong images, or on held-out ones, in silence. `fix`: what to do instead."""
  names = list(dataset.splits) if split is None else [split]
  own = [dataset.image_ids(s) for s in names if s in dataset.splits]
  out = ~np.isin(image_ids, np.concatenate([np.zeros(0, np.int64), *own]))
  if not out.any():
    return
  image, where = int(image_ids[np.argmax(out)]), f"dataset {dataset.root} ({dataset.name})"
  if split is None:
    raise RSVQAError(f"{path}: image id {image} is not an image of {where}; {fix}")
  held = [s for s in dataset.splits if image in dataset.image_ids(s)]
  found = f"it is in its split {', '.join(held)}" if held else "the dataset has no such image"
  missing = "" if split in dataset.splits else f", and it has no split {split}"
  raise RSVQAError(f"{path}: image id {image} is not an image of split {split} of {where}: "
                   f"{found}{missing}; {fix}")


def _wanted(dataset_root, image_ids, p):
  dataset = synthetic.read_manifest(dataset_root)
  if dataset is None:
    raise RSVQAError(f"{dataset_root}: not a synthetic dataset (no {synthetic.MANIFEST}); "
                     "answerability pools are labelled from the generator's scenes")
  return {**p, "dataset": dataset, "image_ids_sha256": _ids_sha256(image_ids)}


def generate(dataset_root, out, image_ids, **knobs):
  """Writes the pools of each split of `image_ids` ({split: ids}) of the synthetic dataset at
  `dataset_root` into folder `out`; returns the manifest (with label shares per split)."""
  wanted = _wanted(dataset_root, image_ids, params(**knobs))
  variant, n_images, seed = (wanted["dataset"][k] for k in ("variant", "images", "seed"))
  size = split_files.LAYOUTS[variant].image_size
  region = synthetic.regions(variant, n_images)
  os.makedirs(out, exist_ok=True)
  if os.path.exists(os.path.join(out, MANIFEST)):
    os.remove(os.path.join(out, MANIFEST))  # files without a manifest are never trusted
  stats, files, next_id = {}, {}, 0
  order = sorted(image_ids, key=lambda s: (SPLIT_ORDER.index(s) if s in SPLIT_ORDER else 9, s))
  for index, split in enumerate(order):  # pool ids and draws follow the splits, not the caller
    ids = sorted(int(i) for i in image_ids[split])
    tiles = [Tile(i, scenes.make_scene(seed, i, size, region[i])) for i in ids]
    rng = np.random.default_rng([wanted["seed"], seed, 7727, index])
    n_pools = max(1, int(round(wanted["pools_per_image"] * len(ids))))
    pools, balance = make_pools(tiles, wanted, rng, n_pools, f"split {split}")
    rows = rows_of(pools, next_id)
    next_id += len(pools)
    files[pool_file(out, split)] = rows
    stats[split] = {"pools": len(pools), "pool_size": len(pools[0][1]), "balance": balance,
                    "pairs": len(rows), "shares": shares([r[3] for r in rows])}
  for path, rows in files.items():  # every split's pools made first: none written if one fails
    write(path, rows)
  storage.write_json(os.path.join(out, MANIFEST), {**wanted, "splits": stats})
  return {**wanted, "splits": stats}


def ensure(dataset_root, out, image_ids, **knobs):
  """The manifest of the pools in `out`, generated first unless they are there with these
  parameters; returns (manifest, whether it generated)."""
  wanted = _wanted(dataset_root, image_ids, params(**knobs))
  found = storage.read_json(os.path.join(out, MANIFEST))
  if isinstance(found, dict) and {k: found.get(k) for k in wanted} == wanted:
    return found, False
  return generate(dataset_root, out, image_ids, **knobs), True


def write(path, rows, columns=COLUMNS):
  """A CSV with `columns` through a temporary file (readers never see half a file)."""
  with storage.replacing(path, newline="") as f:
    w = csv.writer(f, lineterminator="\n")
    w.writerow(columns)
    w.writerows(rows)


def read(path, required, optional=()):
  """[(line number, {column: text stripped})] of a CSV holding the `required` columns (one-line
  errors naming the file and line); `optional` columns read as None when the file lacks them."""
  return [(line, {c: v if v is None else v.strip() for c, v in row.items()})
          for line, row in csv_columns.read(path, required, optional, "pool file")[1]]


def parse_label(path, line, value):
  if value not in ("0", "1", "2"):
    raise RSVQAError(f"{path}:{line}: label {value!r} is not 0, 1 or 2")
  return int(value)


def parse_image_id(path, line, value):
  """An image id of a pool, scores or labels file as an int ("012" is image 12 in all three)."""
  try:
    image = csv_columns.integer(value)
  except ValueError:
    raise RSVQAError(f"{path}:{line}: image_id {value!r} is not an integer") from None
  if not 0 <= image < 2**63:  # ids are held as int64, and a dataset's are never negative
    raise RSVQAError(f"{path}:{line}: image_id {image} is out of the range of image ids")
  return image


def read_pools(path, *, labelled=True):
  """(pool ids [N] str, questions [N] str, image ids [N] int64, labels [N] int64 (-1 unlabelled))
  of a pool file; a pool's rows must stand together, ask one question, and list a (pool, image)
  pair only once."""
  rows = read(path, COLUMNS if labelled else COLUMNS[:3], () if labelled else ("label",))
  pools, texts, images, labels = [], [], [], []
  seen, closed, last, asked = set(), set(), None, {}
  for line, row in rows:
    pool = row["pool_id"]
    if not pool:
      raise RSVQAError(f"{path}:{line}: empty pool_id")
    if pool != last:
      if pool in closed:
        raise RSVQAError(f"{path}:{line}: pool {pool}'s rows are not together")
      closed.add(last)
      last = pool
    image = parse_image_id(path, line, row["image_id"])
    if (pool, image) in seen:
      raise RSVQAError(f"{path}:{line}: pool {pool} lists image {image} twice")
    seen.add((pool, image))
    if not row["question"]:
      raise RSVQAError(f"{path}:{line}: empty question")
    first = asked.setdefault(pool, row["question"])
    if row["question"] != first:
      raise RSVQAError(f"{path}:{line}: pool {pool} asks {row['question']!r} here and {first!r} "
                       "on its first row; a pool ranks images for one question")
    label = row.get("label")
    pools.append(pool)
    texts.append(row["question"])
    images.append(image)
    labels.append(parse_label(path, line, label) if labelled or label else -1)
  if not pools:
    raise RSVQAError(f"{path}: no rows")
  return (np.asarray(pools, object), np.asarray(texts, object), np.asarray(images, np.int64),
          np.asarray(labels, np.int64))
