"""The built-in synthetic RSVQA dataset, written in the official LR or HR file layout.

Everything (training, audits, tests) runs on it without downloads, through the same readers as
the real data. Scenes come from `scenes`, questions from `questions`; this file splits images,
numbers everything by global id the way the official files do (split files list every id,
entries of other splits as `{"id": i, "active": false}`, a question's id equals its answer's
id), and writes the tiles (HR: in `Data/`, the official HR image folder), one mask file per
image under `masks/` and each question's answer grounding under `Grounding/`
(data/grounding.py; both outside the official layout) and a `synthetic.json` manifest.

As in the real LR set (~1% rural/urban questions at ~100 questions per image), every LR image
gets exactly one rural/urban question, and the LR test images are drawn half rural, half urban
(as far as the scenes allow), so the rural/urban test accuracy is not read off one class.

`plant` (off by default) plants shortcuts for the shortcut benchmark to find (questions.Plant:
a keyword or a land-cover class tied to an answer); a balanced set keeps the planted questions
out of balancing, so the plant is its only language shortcut.

Writing is all or nothing: a dataset is built in a temporary folder beside `out` and renamed
into place once complete, so a run killed at any moment leaves no half dataset under `out`.
The next run removes what a dead run left (a `.tmp-NAME-*` folder whose owner process is gone)
and replaces what it may replace: an earlier synthetic dataset (its manifest says so), an empty
folder, or a folder left half-written by a generator older than this one (no manifest, and
nothing but the names the generator writes, including its `masks/` folder of `<id>.npz` files,
which no official dataset has). Anything else under `out` is a user's folder and is refused.
Two runs generating the same dataset at once both succeed: the first to finish renames its
folder into place, the other finds it there and discards its own identical copy.
"""
import collections
import dataclasses
import json
import logging
import os
import re

import numpy as np

from rsvqa_jax import progress, storage
from rsvqa_jax.data import answers as answers_lib
from rsvqa_jax.data import grounding
from rsvqa_jax.data import images as images_lib
from rsvqa_jax.data import questions as questions_lib
from rsvqa_jax.data import records
from rsvqa_jax.data import scenes
from rsvqa_jax.data import split_files
from rsvqa_jax.data import synthetic_xben
from rsvqa_jax.errors import RSVQAError

_log = logging.getLogger(__name__)

MANIFEST = "synthetic.json"
MASK_DIR = "masks"
VERSION = 2  # 2: one rural/urban question per LR image, LR test half rural, balance per type
SPLIT_SHARES = {"val": 0.13, "test": 0.10}  # train takes the rest (~77%)
PHILI_SHARE = 0.08  # HR: share of images drawn from the unseen region for test_phili
BALANCED_POOL = 3  # balanced mode draws this many candidates per kept question
BALANCED_COUNT_OBJECTS = ("building", "residential building")  # see QuestionSampler
DATE0 = 1562000000.0
VARIANTS = ("lr", "hr", "xben")  # xben: a question set only (synthetic_xben.py)


@dataclasses.dataclass(frozen=True)
class Sensor:
  name: str
  res: str  # as written in res_x / res_y
  res_m: float
  origin: tuple[float, float]  # upper-left map x / y of tile 0


SENSORS = {
    ("lr", "default"): Sensor("Sentinel-2", "10m", 10.0, (500000.0, 5200000.0)),
    ("hr", "default"): Sensor("USGS", ".1524m", 0.1524, (560000.0, 4180000.0)),
    ("hr", "phili"): Sensor("unknown", ".1524m", 0.1524, (485000.0, 4420000.0)),
}


@dataclasses.dataclass
class Generated:
  """What the generator meant to write: the samples per split and each question's structure."""

  splits: dict  # split name -> records.Split
  questions: dict  # question id -> questions.Question


# Questions drawn per image at most: RSVQA's sets have about 100, RSVQAxBEN's 25; a typo of
# 100000000 would fill the memory before writing anything.
MAX_QUESTIONS_PER_IMAGE = 1000


def least_images(variant, enough=None):
  """One image per split (HR has a second test set, of the unseen region); with `enough`, a
  predicate on split_sizes(), the fewest images from there on whose splits it accepts."""
  n = 4 if variant == "hr" else 3
  while enough is not None and not enough(split_sizes(variant, n)):
    n += 1
  return n


def params(variant, images, seed, prior_strength=1.0, balanced=False, questions_per_image=100,
           plant=()):
  """The full parameter set of a synthetic dataset (what the manifest records).

  `plant`: shortcut plants (questions.PLANT_SYNTAX texts), recorded in canonical form, and only
  when there are some: a dataset without is the same, manifest included, as before plants.
  """
  if variant not in VARIANTS:
    raise RSVQAError(f"unknown synthetic variant {variant!r}: expected lr, hr or xben")
  min_images = least_images(variant)
  if images < min_images:
    raise RSVQAError(f"--images {images}: the {variant} variant needs at least {min_images} "
                     "images (one per split)")
  if prior_strength < 0:
    raise RSVQAError(f"--prior-strength {prior_strength}: must be >= 0")
  if not 1 <= questions_per_image <= MAX_QUESTIONS_PER_IMAGE:
    raise RSVQAError(f"--questions-per-image {questions_per_image}: must be from 1 to "
                     f"{MAX_QUESTIONS_PER_IMAGE} (RSVQA's sets have about 100 per image, "
                     "RSVQAxBEN's 25)")
  plants = questions_lib.parse_plants(plant)
  out = {"version": VERSION, "variant": variant, "images": int(images), "seed": int(seed),
         "prior_strength": float(prior_strength), "balanced": bool(balanced),
         "questions_per_image": int(questions_per_image)}
  return {**out, "plant": [p.spec for p in plants]} if plants else out


def regions(variant, n):
  """The region of each global image id: HR draws its last images from the unseen region."""
  n_phili = max(1, int(round(PHILI_SHARE * n))) if variant == "hr" else 0
  return ["default"] * (n - n_phili) + ["phili"] * n_phili


def split_sizes(variant, n):
  """{split: images} that plan() gives `n` images (the scenes decide which, never how many)."""
  region = regions(variant, n)
  m = region.count("default")
  n_val = max(1, int(round(SPLIT_SHARES["val"] * m)))
  n_test = max(1, int(round(SPLIT_SHARES["test"] * m)))
  sizes = {"train": m - n_val - n_test, "val": n_val, "test": n_test}
  return {**sizes, "test_phili": n - m} if variant == "hr" else sizes


def plan(variant, n, seed, land_use=None):
  """(split name, region) per global image id.

  With `land_use` (rural / urban per image), the test images are half urban and half rural
  (the rest of the scarcer kind filled with the other); the other images split at random.
  """
  rng = np.random.default_rng([seed, 7919])
  region = regions(variant, n)
  m = region.count("default")
  sizes = split_sizes(variant, n)
  n_val, n_test = sizes["val"], sizes["test"]
  order = rng.permutation(m)
  if land_use is not None:
    urban = [int(i) for i in order if land_use[i] == "urban"]
    rural = [int(i) for i in order if land_use[i] != "urban"]
    k = min(len(urban), max(n_test // 2, n_test - len(rural)))
    test = set(urban[:k] + rural[:n_test - k])
    order = [i for i in order if i in test] + [i for i in order if i not in test]
  names = ["test"] * n_test + ["val"] * n_val + ["train"] * (m - n_val - n_test)
  splits = [""] * m
  for i, name in zip(order, names):
    splits[int(i)] = name
  return splits + ["test_phili"] * (n - m), region


def _image_questions(sampler, variant, n):
  """n questions about one image: one of each per-image type, then distinct drawn ones.

  Drawn questions avoid (when the scene allows) texts the image already has.
  """
  out = [sampler.rural_urban()] if "rural_urban" in questions_lib.PER_IMAGE_TYPES[variant] else []
  seen = {q.text for q in out}
  while len(out) < n:
    q = sampler.sample(exclude=seen)
    seen.add(q.text)
    out.append(q)
  return out


def _balance(pool, rng):
  """Keeps, per (pattern, object with attributes) group and per question type, the same number
  of each answer.

  Numbers count by magnitude bin; answers outside the bins the prior draws from (REAL_PRIORS)
  are dropped. Groups with a single answer are dropped: their answer could be guessed from the
  question. Within a type, whole sets (one question of each answer of a
  group) are then dropped from the largest groups holding the type's most frequent answer but
  not its rarest, until every answer of the type is as frequent (counting: groups answered
  0 / 1-10 only give way to those that also reach 11-100).
  """
  groups = collections.defaultdict(lambda: collections.defaultdict(list))
  for k, (_, q) in enumerate(pool):
    key = questions_lib.answer_key(q.qtype, q.answer)
    if q.qtype in questions_lib.REAL_PRIORS and key not in questions_lib.REAL_PRIORS[q.qtype]:
      continue  # an answer never asked for on purpose (e.g. over 100 buildings): too rare to match
    levels = questions_lib.question_levels(q)
    groups[(q.qtype, levels.pattern, levels.object_with_attr)][key].append(k)
  sets = {g: min(len(v) for v in by_answer.values())
          for g, by_answer in groups.items() if len(by_answer) >= 2}
  for qtype in sorted({g[0] for g in sets}):
    mine = sorted(g for g in sets if g[0] == qtype)
    while True:
      totals = collections.Counter()
      for g in mine:
        for a in groups[g]:
          totals[a] += sets[g]
      ranked = sorted((n, str(a)) for a, n in totals.items() if n)
      if not ranked or ranked[0][0] == ranked[-1][0]:
        break
      (low, rare), (high, common) = ranked[0], ranked[-1]
      g = max((g for g in mine if sets[g] and common in map(str, groups[g])
               and rare not in map(str, groups[g])), key=lambda g: (sets[g], g))
      sets[g] -= min(sets[g], high - low)
  keep = []
  for g, m in sets.items():
    for v in groups[g].values():
      keep.extend(v if len(v) == m else rng.choice(v, size=m, replace=False).tolist())
  return [pool[k] for k in sorted(keep)]


def _image_entry(image_id, active, seed, variant, region, land_use, question_ids, size):
  if not active:
    return {"id": image_id, "active": False}
  sensor = SENSORS[(variant, region)]
  tile = sensor.res_m * size
  return {
      "id": image_id, "date_added": DATE0 + 60.0 * image_id,
      "original_name": f"synthetic_{variant}_{seed}_{image_id}.tif",
      "sensor": sensor.name, "upperleft_map_x": sensor.origin[0] + tile * (image_id % 32),
      "upperleft_map_y": sensor.origin[1] - tile * (image_id // 32), "res_x": sensor.res,
      "res_y": sensor.res,
      "people_id": 1, "type": land_use, "questions_ids": question_ids, "active": True,
  }


def _dump(path, key, entries):
  with open(path, "w", encoding="utf-8") as f:
    f.write(json.dumps({key: entries}, separators=(",", ":")))


def generate(out, variant="lr", images=772, seed=0, prior_strength=1.0, balanced=False,
             questions_per_image=100, plant=(), refuse_empty_splits=False):
  """Writes a synthetic dataset to `out`, all or nothing; returns what it wrote as a `Generated`.

  `refuse_empty_splits`: a train, val or test split that balancing left without a question is a
  one-line RSVQAError naming the synth command's options, and nothing is written; another split
  (HR's test_phili) left empty is a WARNING (the command line; a study checks its sets itself,
  naming its keys). RSVQAxBEN-size question sets are written by
  `generate_xben`.
  """
  if variant == "xben":
    raise RSVQAError("the xben variant is a question set of millions of questions: "
                     "generate_xben writes it (rsvqa-jax synth --variant xben)")
  p = params(variant, images, seed, prior_strength, balanced, questions_per_image, plant)

  def write(tmp):
    generated = _write_dataset(tmp, p, refuse_empty_splits)
    # About as long as drawing the images, after their bar: said, so the wait is not silent.
    _log.info(f"synth {variant}: writing the answer grounding masks of "
              f"{len(generated.questions)} questions ({grounding.FOLDER}/)")
    grounding.write(tmp, p["variant"], generated, MASK_DIR)  # Grounding/ (data/grounding.py)
    return generated
  return _atomically(out, p, write)


def generate_xben(out, images=synthetic_xben.IMAGES, seed=0,
                  questions_per_image=synthetic_xben.QUESTIONS_PER_IMAGE):
  """Writes an RSVQAxBEN-size question set (synthetic_xben.py) to `out`, all or nothing, with
  the same manifest and replacement rules as `generate`; returns {split: questions}."""
  p = params("xben", images, seed, questions_per_image=questions_per_image)
  # One pass of array draws and chunked writes, with no steps to count: said before it starts.
  _log.info(f"synth xben: drawing {images * questions_per_image} questions about {images} image "
            "ids and writing their files")
  return _atomically(out, p, lambda tmp: synthetic_xben.write(tmp, p, SPLIT_SHARES))


def _atomically(out, p, write):
  """Runs `write(folder)` in a build folder that becomes `out` (manifest `p`) once complete.
  An `out` that is a link is written through: the dataset lands where it points."""
  out = os.path.realpath(out)
  _check_replaceable(out)
  _say_if_replacing(out, p)
  parent, name = os.path.split(out)
  os.makedirs(parent, exist_ok=True)
  with storage.building_owned(parent, name, replace=True) as tmp:
    written = write(tmp)
    storage.write_json(os.path.join(tmp, MANIFEST), p)
    _check_replaceable(out)  # once more: files may have been put there while this one was built
  if read_manifest(out) != p:
    raise RSVQAError(f"{out}: another process wrote a different synthetic dataset there at the "
                     "same time; run again")
  return written


# The splits a run reads by default (data.train_split, val_split, test_split): a synthetic set
# without one is refused; HR's second test set (test_phili) may be empty, with a WARNING.
TRAINED_SPLITS = ("train", "val", "test")


def _write_dataset(out, p, refuse_empty_splits=False):
  """Draws the scenes and questions of parameters `p` and writes them into the empty `out`."""
  variant, images, seed = p["variant"], p["images"], p["seed"]
  layout = split_files.LAYOUTS[variant]
  os.makedirs(os.path.join(out, layout.image_dir))
  os.makedirs(os.path.join(out, MASK_DIR))
  region = regions(variant, images)
  strength = 0.0 if p["balanced"] else p["prior_strength"]
  per_image = p["questions_per_image"] * (BALANCED_POOL if p["balanced"] else 1)
  plants = questions_lib.parse_plants(p.get("plant", ()))
  land_use, drawn, planted = [], [], set()
  for image_id in progress.bar(range(images), desc=f"synth {variant} images", unit="img"):
    scene = scenes.make_scene(seed, image_id, layout.image_size, region[image_id])
    images_lib.write_tif(os.path.join(out, layout.image_dir, f"{image_id}.tif"), scene.image)
    scenes.save_masks(os.path.join(out, MASK_DIR, f"{image_id}.npz"), scene)
    res_m = SENSORS[(variant, region[image_id])].res_m
    sampler = questions_lib.QuestionSampler(
        scene, variant, res_m, np.random.default_rng([seed, image_id, 1]), prior_strength=strength,
        exclude_types=questions_lib.PER_IMAGE_TYPES[variant],
        count_objects=BALANCED_COUNT_OBJECTS if p["balanced"] else (), plants=plants)
    drawn.append(_image_questions(sampler, variant, per_image))
    planted.update((image_id, q) for q in drawn[-1] if plants and sampler.planted(q))
    land_use.append(scene.land_use)
  image_splits, _ = plan(variant, images, seed, land_use if variant == "lr" else None)
  pools = collections.defaultdict(list)  # split -> [(image id, Question)]
  for image_id, qs in enumerate(drawn):
    pools[image_splits[image_id]].extend((image_id, q) for q in qs)
  if p["balanced"]:  # the planted questions are kept out of balancing: it would undo them
    rng = np.random.default_rng([seed, 104729])
    pools = {s: _balance([x for x in pools[s] if x not in planted], rng)
             + [x for x in pools[s] if x in planted] for s in layout.splits}
    empty = [s for s in layout.splits if not pools[s]]
    if refuse_empty_splits and empty:
      counts = ", ".join(f"{s} {len(pools[s])}" for s in layout.splits)
      given = f"--images {images} --questions-per-image {p['questions_per_image']} --balanced"
      needed = [s for s in empty if s in TRAINED_SPLITS]
      if needed:  # training refuses an empty split later, far from here
        raise RSVQAError(f"{given}: balancing leaves split {needed[0]} without a question "
                         f"({counts}); raise --images or --questions-per-image")
      _log.warning(f"{given}: balancing leaves split {', '.join(empty)} without a question "
                   f"({counts}): train, evaluate, analyze and a study of the other splits "
                   f"work, and evaluate --split {empty[0]} refuses it; raise --images or "
                   "--questions-per-image to fill it")
  chosen = sorted((image_id, k, q) for s in layout.splits
                  for k, (image_id, q) in enumerate(pools[s]))
  by_image = collections.defaultdict(list)
  questions = {}
  for qid, (image_id, _, q) in enumerate(chosen):
    by_image[image_id].append(qid)
    questions[qid] = (image_id, q)
  _write_files(out, variant, seed, image_splits, region, land_use, by_image, questions)
  return _intended(variant, layout, image_splits, questions)


_IMAGE_NAME = re.compile(r"\d+\.tif")
_MASK_NAME = re.compile(r"\d+\.npz")


def _generator_names():
  """The files the generator writes at the top of a dataset, in either layout."""
  names = {MANIFEST}
  for variant in VARIANTS:
    names.update(os.path.basename(split_files.split_file("", variant, s, k))
                 for s in split_files.LAYOUTS[variant].splits for k in split_files.KINDS)
  return names


def _left_half_written(out):
  """Whether `out`, without a manifest, holds only what an interrupted generator writes.

  The generator's `masks/` folder of `<id>.npz` files must be there: no official dataset has it,
  so a user's copy of RSVQA LR or HR is never taken for a leftover.
  """
  folders = {MASK_DIR: _MASK_NAME}
  folders.update((split_files.LAYOUTS[v].image_dir, _IMAGE_NAME) for v in VARIANTS)
  names = os.listdir(out)
  if not os.path.isdir(os.path.join(out, MASK_DIR)):
    return False
  for name in names:
    path = os.path.join(out, name)
    if name in folders:
      if not os.path.isdir(path) or not all(folders[name].fullmatch(f) for f in os.listdir(path)):
        return False
    elif not os.path.isfile(path) or not (
        name in _generator_names() or name.startswith(MANIFEST + ".tmp-")):
      return False
  return True


def _replaceable(out):
  """Whether a generation may replace what `out` holds: nothing, a dataset or a leftover of ours."""
  if not os.path.exists(out):
    return True
  if not os.path.isdir(out):
    return False
  return not os.listdir(out) or read_manifest(out) is not None or _left_half_written(out)


def _check_replaceable(out):
  if os.path.lexists(out) and not os.path.isdir(out):
    raise RSVQAError(f"{out}: is a file, not a folder; give a folder for the synthetic dataset")
  if not _replaceable(out):
    # A manifest there that does not read as the generator's: said so, not "no synthetic.json"
    manifest = (f"its {MANIFEST} is not the generator's" if os.path.lexists(
        os.path.join(out, MANIFEST)) else f"no {MANIFEST}")
    raise RSVQAError(f"{out}: holds files that are not a synthetic dataset ({manifest}, not a "
                     "generator's leftover); refusing to write a synthetic dataset over it")


def _say_if_replacing(out, p):
  """One line when `out` holds a synthetic dataset of other parameters: it is about to go."""
  old = read_manifest(out)
  if old is None or old == p:
    return
  changed = ", ".join(f"{k} {old.get(k, '-')} -> {p.get(k, '-')}" for k in sorted({*old, *p})
                      if old.get(k) != p.get(k))
  _log.warning("%s: replacing the synthetic dataset there (%s)", out, changed)


def _write_files(out, variant, seed, image_splits, regions, land_use, by_image, questions):
  layout = split_files.LAYOUTS[variant]
  n_q = len(questions)
  for split in layout.splits:
    img_entries = [_image_entry(i, image_splits[i] == split, seed, variant, regions[i], land_use[i],
                                by_image[i], layout.image_size) for i in range(len(image_splits))]
    q_entries, a_entries = [], []
    for qid in range(n_q):
      image_id, q = questions[qid]
      if image_splits[image_id] != split:
        q_entries.append({"id": qid, "active": False})
        a_entries.append({"id": qid, "active": False})
        continue
      date = DATE0 + 60.0 * image_id + 0.5 * (qid % 100)
      q_entries.append({"id": qid, "date_added": date, "img_id": image_id, "people_id": 1,
                        "type": q.qtype, "question": q.text, "answers_ids": [qid], "active": True})
      a_entries.append({"id": qid, "date_added": date, "question_id": qid, "people_id": 1,
                        "answer": q.answer, "active": True})
    _dump(split_files.split_file(out, variant, split, "images"), "images", img_entries)
    _dump(split_files.split_file(out, variant, split, "questions"), "questions", q_entries)
    _dump(split_files.split_file(out, variant, split, "answers"), "answers", a_entries)


def _intended(variant, layout, image_splits, questions):
  rows = collections.defaultdict(list)
  for qid, (image_id, q) in questions.items():
    rows[image_splits[image_id]].append({
        "question_id": qid, "image_id": image_id, "qtype": q.qtype, "question": q.text,
        "answer": answers_lib.normalise(variant, q.qtype, q.answer), "raw_answer": q.answer})
  splits = {s: records.Split.from_rows(s, rows[s]) for s in layout.splits}
  return Generated(splits, {qid: q for qid, (_, q) in questions.items()})


def read_manifest(directory):
  """The generator's parameters recorded in `directory`, or None (none, or unreadable)."""
  return storage.read_manifest(directory, MANIFEST)


# Bytes written beside the pixels, measured on small sets and rounded down (the estimate refuses
# only what cannot fit): an image's scene and grounding masks, a question's JSON entries and its
# grounding PNG, a file of a few hundred bytes that takes a whole 4 KB block of the disk.
MASK_BYTES, QUESTION_BYTES, XBEN_QUESTION_BYTES = 8 << 10, 512 + 4096, 250


def needed_bytes(variant, images, per_image):
  """About what generating writes: uncompressed RGB tiles and the files beside them."""
  if variant == "xben":
    return images * per_image * XBEN_QUESTION_BYTES
  side = split_files.LAYOUTS[variant].image_size
  return images * (3 * side * side + MASK_BYTES + per_image * QUESTION_BYTES)


def ensure_room(out, variant, images, per_image, images_key):
  """One-line RSVQAError, before anything is written, when the set cannot fit beside `out`
  (10**9 images began writing 37 TB); `images_key`: the flag or config key to lower."""
  storage.ensure_free(os.path.dirname(os.path.abspath(out)),
                      needed_bytes(variant, images, per_image),
                      f"the synthetic {variant} set of {images} images",
                      f"free some space or ask for fewer images ({images_key})")


def ensure_synthetic(directory, variant, images, seed, images_key="data.synthetic_images",
                     **knobs):
  """Generates the dataset into `directory` unless it already holds one with these parameters.

  `knobs`: prior_strength, balanced, questions_per_image, plant; `images_key` names what sets
  `images` in the error of a set too large for the disk. Returns whether it generated.
  """
  wanted = params(variant, images, seed, **knobs)
  if read_manifest(directory) == wanted:
    return False
  ensure_room(directory, variant, images, wanted["questions_per_image"], images_key)
  if variant == "xben":
    generate_xben(directory, images, seed, wanted["questions_per_image"])
    return True
  generate(directory, **{k: v for k, v in wanted.items() if k != "version"})
  return True
