"""Ground-truth answer groundings of the synthetic questions (DESIGN.md 6.2).

The generator knows every object's mask, so each question gets the pixels that hold its answer:
for presence, counting and HR area questions the union of the objects its phrase matches (after
the attribute and relation filters: `SceneIndex.match`, the matcher that computed the answer),
for comparisons both phrases' objects, for rural/urban the built-up area (the classes the scene
generator reads land use from). Written beside the official layout as
`Grounding/{question_id}.png` (8-bit, 0 or 255, the image's size) for every question, and
`Grounding/index.json`: the questions whose grounding is empty (the answer is "no" or 0 because
nothing matches, a rural scene with nothing built) and why; scorers leave those out of IoU.

The masks are read back from the dataset's own `masks/{image_id}.npz`, so they are exactly the
objects the questions were asked about; questions that ground on the same pixels (the same objects
of one image, or nothing) share one file, hard-linked where the file system allows.
"""
import collections
import io
import os

import numpy as np
from PIL import Image

from rsvqa_jax import storage
from rsvqa_jax.data import questions as questions_lib
from rsvqa_jax.data import scenes

FOLDER = "Grounding"
INDEX = "index.json"
FORMAT = 1
BUILT_UP = scenes.BUILT_UP  # what scenes.land_use counts as built up


def scene_index(mask_path):
  """(questions.SceneIndex, image (height, width)) of an image's saved object masks."""
  m = scenes.load_masks(mask_path)
  objects = []
  for cls, size, shape, (y0, x0, y1, x1), full in zip(m["classes"], m["sizes"], m["shapes"],
                                                      m["boxes"].tolist(), m["masks"]):
    objects.append(scenes.SceneObject(cls, size or None, shape or None, (y0, x0, y1, x1),
                                      full[y0:y1, x0:x1]))
  height, width = m["masks"].shape[1:]
  scene = scenes.Scene(None, objects, m["land_use"], "default")
  # The sampler's "next to" distance (QuestionSampler: 4 px per 256 px of tile).
  return questions_lib.SceneIndex(scene, next_to_px=4 * height / 256), (height, width)


def grounded_objects(index, question):
  """(sorted object indices the answer rests on, why it is empty or None)."""
  if question.qtype == "rural_urban":
    picked = [i for i, o in enumerate(index.scene.objects) if o.cls in BUILT_UP]
    why = "no built-up area (buildings, roads, parkings, residential areas) in the image"
  else:
    picked = sorted({int(i) for p in question.phrases for i in np.flatnonzero(index.match(p))})
    names = " nor ".join(repr(p.with_attributes()) for p in question.phrases)
    why = f"no object matches {names}" if len(question.phrases) == 1 else f"neither {names} matches"
  return tuple(picked), None if picked else why


def union(objects, picked, shape):
  out = np.zeros(shape, bool)
  for i in picked:
    y0, x0, y1, x1 = objects[i].box
    out[y0:y1, x0:x1] |= objects[i].mask
  return out


def png_bytes(mask):
  """An 8-bit 0 / 255 PNG of a bool mask."""
  buf = io.BytesIO()
  Image.fromarray(mask.astype(np.uint8) * np.uint8(255), mode="L").save(buf, format="PNG",
                                                                      compress_level=1)
  return buf.getvalue()


def _link(source, path):
  """Hard-links `path` to the file `source` holding the same mask; False when it cannot."""
  if source is None:
    return False
  try:
    os.link(source, path)
    return True
  except OSError:
    return False


def write(root, variant, generated, mask_dir="masks"):
  """Writes root/Grounding/ for the questions of a `synthetic.Generated`; returns the index."""
  folder = os.path.join(root, FOLDER)
  os.makedirs(folder, exist_ok=True)
  by_image = collections.defaultdict(list)
  qtypes = {}
  for split in generated.splits.values():
    for qid, image_id, qtype in zip(split.question_id.tolist(), split.image_id.tolist(),
                                    split.qtype.tolist()):
      by_image[image_id].append(qid)
      qtypes[qid] = qtype
  empty, blank = [], {}  # blank: image size -> the first empty mask's file
  for image_id in sorted(by_image):
    index, shape = scene_index(os.path.join(root, mask_dir, f"{image_id}.npz"))
    written = {(): blank.get(shape)}  # object indices -> the first file of that mask
    for qid in sorted(by_image[image_id]):
      picked, why = grounded_objects(index, generated.questions[qid])
      path = os.path.join(folder, f"{qid}.png")
      if not _link(written.get(picked), path):
        with open(path, "wb") as f:
          f.write(png_bytes(union(index.scene.objects, picked, shape)))
        written[picked] = path
        if not picked:
          blank[shape] = path
      if why:
        empty.append({"question_id": qid, "image_id": image_id, "type": qtypes[qid],
                      "reason": why})
  result = {"format": FORMAT, "variant": variant, "n_questions": len(qtypes),
            "n_empty": len(empty),
            "empty_by_type": dict(sorted(collections.Counter(e["type"] for e in empty).items())),
            "empty": sorted(empty, key=lambda e: e["question_id"])}
  storage.write_json(os.path.join(folder, INDEX), result)
  return result


def read_index(root):
  """The dataset's Grounding/index.json, or None when it has none (not a synthetic dataset)."""
  return storage.read_manifest(os.path.join(root, FOLDER), INDEX, format=FORMAT)
