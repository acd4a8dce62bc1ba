"""The built-in synthetic RSVQA dataset, written in the official LR or HR file layout.

Everything (training, audits, tests) runs on it without downloads, through the same readers as
the real data. Scenes come from `scenes`, questions from `questions`; this file splits images,
numbers everything by global id the way the official files do (split files list every id,
entries of other splits as `{"id": i, "active": false}`, a question's id equals its answer's
id), and writes the tiles (HR: in `Data/`, the official HR image folder), one mask file per
image under `masks/` (outside the official layout) and a `synthetic.json` manifest.
"""
import collections
import dataclasses
import json
import os
import shutil

import numpy as np

from rsvqa_jax import storage
from rsvqa_jax.data import answers as answers_lib
from rsvqa_jax.data import images as images_lib
from rsvqa_jax.data import questions as questions_lib
from rsvqa_jax.data import records
from rsvqa_jax.data import rsvqa_json
from rsvqa_jax.data import scenes
from rsvqa_jax.errors import RSVQAError

MANIFEST = "synthetic.json"
MASK_DIR = "masks"
VERSION = 1
SPLIT_SHARES = {"val": 0.13, "test": 0.10}  # train takes the rest (~77%)
PHILI_SHARE = 0.08  # HR: share of images drawn from the unseen region for test_phili
BALANCED_POOL = 3  # balanced mode draws this many candidates per kept question
DATE0 = 1562000000.0


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


def params(variant, images, seed, prior_strength=1.0, balanced=False, questions_per_image=100):
  """The full parameter set of a synthetic dataset (what the manifest records)."""
  if variant not in ("lr", "hr"):
    raise RSVQAError(f"unknown synthetic variant {variant!r}: expected lr or hr")
  min_images = 4 if variant == "hr" else 3
  if images < min_images:
    raise RSVQAError(f"--images {images}: the {variant} variant needs at least {min_images} images (one per split)")
  if prior_strength < 0:
    raise RSVQAError(f"--prior-strength {prior_strength}: must be >= 0")
  if questions_per_image < 1:
    raise RSVQAError(f"questions_per_image {questions_per_image}: must be >= 1")
  return {"version": VERSION, "variant": variant, "images": int(images), "seed": int(seed),
          "prior_strength": float(prior_strength), "balanced": bool(balanced),
          "questions_per_image": int(questions_per_image)}


def plan(variant, n, seed):
  """(split name, region) per global image id."""
  rng = np.random.default_rng([seed, 7919])
  n_phili = max(1, int(round(PHILI_SHARE * n))) if variant == "hr" else 0
  m = n - n_phili
  n_val = max(1, int(round(SPLIT_SHARES["val"] * m)))
  n_test = max(1, int(round(SPLIT_SHARES["test"] * m)))
  names = np.asarray(["train"] * (m - n_val - n_test) + ["val"] * n_val + ["test"] * n_test, dtype=object)
  splits = list(names[rng.permutation(m)]) + ["test_phili"] * n_phili
  regions = ["default"] * m + ["phili"] * n_phili
  return splits, regions


def _distinct(sampler, n):
  """n questions about one image, avoiding (when the scene allows) texts it already has."""
  seen, out = set(), []
  for _ in range(n):
    q = sampler.sample(exclude=seen)
    seen.add(q.text)
    out.append(q)
  return out


def _balance(pool, rng):
  """Keeps, per (pattern, object with attributes) group, the same number of each answer.

  Numbers count by magnitude bin. Groups with a single answer are dropped: their answer could
  be guessed from the question.
  """
  groups = collections.defaultdict(lambda: collections.defaultdict(list))
  for k, q in enumerate(pool):
    levels = questions_lib.question_levels(q[1])
    groups[(levels.pattern, levels.object_with_attr)][questions_lib.answer_key(q[1].qtype, q[1].answer)].append(k)
  keep = []
  for by_answer in groups.values():
    if len(by_answer) < 2:
      continue
    m = min(len(v) for v in by_answer.values())
    for v in by_answer.values():
      keep.extend(v if len(v) == m else rng.choice(v, size=m, replace=False).tolist())
  return [pool[k] for k in sorted(keep)]


def _image_entry(image_id, active, seed, variant, region, land_use, question_ids, size):
  if not active:
    return {"id": image_id, "active": False}
  sensor = SENSORS[(variant, region)]
  tile = sensor.res_m * size
  return {
      "id": image_id, "date_added": DATE0 + 60.0 * image_id, "original_name": f"synthetic_{variant}_{seed}_{image_id}.tif",
      "sensor": sensor.name, "upperleft_map_x": sensor.origin[0] + tile * (image_id % 32),
      "upperleft_map_y": sensor.origin[1] - tile * (image_id // 32), "res_x": sensor.res, "res_y": sensor.res,
      "people_id": 1, "type": land_use, "questions_ids": question_ids, "active": True,
  }


def _clear(out):
  """Removes what an earlier generation (of either variant) wrote, manifest first."""
  paths = [os.path.join(out, MANIFEST), os.path.join(out, MASK_DIR)]
  for variant in ("lr", "hr"):
    layout = rsvqa_json.LAYOUTS[variant]
    paths.append(os.path.join(out, layout.image_dir))
    paths += [rsvqa_json.split_file(out, variant, s, k) for s in layout.splits for k in rsvqa_json.KINDS]
  for path in paths:
    if os.path.isdir(path):
      shutil.rmtree(path)
    elif os.path.exists(path):
      os.remove(path)


def _prepare(out, variant):
  if os.path.isdir(out) and os.listdir(out) and not os.path.exists(os.path.join(out, MANIFEST)):
    raise RSVQAError(f"{out}: folder is not empty and holds no {MANIFEST}; refusing to write a synthetic "
                     "dataset over it")
  _clear(out)
  layout = rsvqa_json.LAYOUTS[variant]
  os.makedirs(os.path.join(out, layout.image_dir), exist_ok=True)
  os.makedirs(os.path.join(out, MASK_DIR), exist_ok=True)


def _dump(path, key, entries):
  with open(path, "w", encoding="utf-8") as f:
    f.write(json.dumps({key: entries}, separators=(",", ":")))


def generate(out, variant="lr", images=772, seed=0, prior_strength=1.0, balanced=False, questions_per_image=100):
  """Writes a synthetic dataset to `out`; returns what it wrote as a `Generated`."""
  p = params(variant, images, seed, prior_strength, balanced, questions_per_image)
  layout = rsvqa_json.LAYOUTS[variant]
  _prepare(out, variant)
  image_splits, regions = plan(variant, images, seed)
  strength = 0.0 if balanced else prior_strength
  per_image = questions_per_image * (BALANCED_POOL if balanced else 1)
  land_use = []
  pools = collections.defaultdict(list)  # split -> [(image id, Question)]
  for image_id in range(images):
    scene = scenes.make_scene(seed, image_id, layout.image_size, regions[image_id])
    images_lib.write_tif(os.path.join(out, layout.image_dir, f"{image_id}.tif"), scene.image)
    scenes.save_masks(os.path.join(out, MASK_DIR, f"{image_id}.npz"), scene)
    res_m = SENSORS[(variant, regions[image_id])].res_m
    sampler = questions_lib.QuestionSampler(scene, variant, res_m, np.random.default_rng([seed, image_id, 1]),
                                            prior_strength=strength)
    pools[image_splits[image_id]].extend((image_id, q) for q in _distinct(sampler, per_image))
    land_use.append(scene.land_use)
  if balanced:
    rng = np.random.default_rng([seed, 104729])
    pools = {s: _balance(pools[s], rng) for s in layout.splits}
  chosen = sorted((image_id, k, q) for s in layout.splits for k, (image_id, q) in enumerate(pools[s]))
  by_image = collections.defaultdict(list)
  questions = {}
  for qid, (image_id, _, q) in enumerate(chosen):
    by_image[image_id].append(qid)
    questions[qid] = (image_id, q)
  _write_files(out, variant, seed, image_splits, regions, land_use, by_image, questions)
  storage.write_json(os.path.join(out, MANIFEST), p)
  return _intended(variant, layout, image_splits, questions)


def _write_files(out, variant, seed, image_splits, regions, land_use, by_image, questions):
  layout = rsvqa_json.LAYOUTS[variant]
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
      q_entries.append({"id": qid, "date_added": date, "img_id": image_id, "people_id": 1, "type": q.qtype,
                        "question": q.text, "answers_ids": [qid], "active": True})
      a_entries.append({"id": qid, "date_added": date, "question_id": qid, "people_id": 1, "answer": q.answer,
                        "active": True})
    _dump(rsvqa_json.split_file(out, variant, split, "images"), "images", img_entries)
    _dump(rsvqa_json.split_file(out, variant, split, "questions"), "questions", q_entries)
    _dump(rsvqa_json.split_file(out, variant, split, "answers"), "answers", a_entries)


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


def ensure_synthetic(directory, variant, images, seed, **knobs):
  """Generates the dataset into `directory` unless it already holds one with these parameters.

  `knobs`: prior_strength, balanced, questions_per_image. Returns whether it generated.
  """
  wanted = params(variant, images, seed, **knobs)
  if read_manifest(directory) == wanted:
    return False
  generate(directory, **{k: v for k, v in wanted.items() if k != "version"})
  return True
