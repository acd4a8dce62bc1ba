"""A re-split dataset written in its source's official layout, so `train` and `evaluate` read it
unchanged.

The shortcut benchmark (bias/shortcuts.py) pools a dataset's train and val splits and draws new
train / val / test splits from them. This writes that draw as a dataset folder: the source's
image, question and answer entries of the pool, copied as they are (ids, dates, every field),
each active in the new split its questions went to; an image whose questions went to several
splits (the per-question draw) is active in each, listing only its pooled questions. The
source's own test split is left out (it took no part in the draw); HR's test_phili (another
region, never pooled) is kept as it was. Image tiles, and a synthetic dataset's masks/, are hard
links to the source files where the file system allows, else copies: never moved, and a link
survives the source folder being moved or removed.
"""
import collections
import json
import os
import shutil

from rsvqa_jax.data import split_files
from rsvqa_jax.errors import RSVQAError

POOL = ("train", "val")
SPLITS = ("train", "val", "test")
KEPT = ("test_phili",)  # source splits written unchanged
MASK_DIR = "masks"


def link_or_copy(src, dst):
  """dst becomes a hard link to src, or a copy of it where links cannot be made."""
  if not os.path.isfile(src):
    raise RSVQAError(f"{src}: file missing (the re-split dataset needs it)")
  try:
    os.link(src, dst)
  except OSError:
    shutil.copy2(src, dst)


def _dump(path, key, entries):
  with open(path, "w", encoding="utf-8") as f:
    f.write(json.dumps({key: entries}, separators=(",", ":")))


def _active_entries(root, name, kind):
  """id -> entry of every active entry of the pool's split files of `kind`."""
  out = {}
  for split in POOL:
    path = split_files.split_file(root, name, split, kind)
    for entry in split_files.load_json_list(path, kind):
      if isinstance(entry, dict) and entry.get("active") is True:
        out[entry["id"]] = entry
  return out


def write(source, name, out, split_of):
  """Writes the re-split of dataset folder `source` (layout `name`) into the empty folder `out`.

  `split_of`: question id -> new split ("train", "val" or "test") for every pooled question
  (the source must have been read by rsvqa_json.read_dataset, which checked its references).
  Returns {split: number of images active in it}.
  """
  layout = split_files.LAYOUTS[name]
  os.makedirs(out, exist_ok=True)
  questions = _active_entries(source, name, "questions")
  answers = _active_entries(source, name, "answers")
  images = _active_entries(source, name, "images")
  image_splits, answer_splits = collections.defaultdict(set), collections.defaultdict(set)
  for qid, split in split_of.items():
    q = questions[qid]
    image_splits[q["img_id"]].add(split)
    for a in q["answers_ids"]:
      answer_splits[a].add(split)
  images = {i: {**images[i], "questions_ids": [q for q in images[i]["questions_ids"]
                                                if q in split_of]} for i in image_splits}
  question_splits = {q: {s} for q, s in split_of.items()}
  for split in SPLITS:
    for kind, full, splits_of in (("images", images, image_splits),
                                  ("questions", questions, question_splits),
                                  ("answers", answers, answer_splits)):
      _dump(split_files.split_file(out, name, split, kind), kind,
            [{**full[i], "active": True} if split in splits_of[i] else {"id": i, "active": False}
             for i in sorted(splits_of)])
  image_ids = set(image_splits)
  for split in KEPT:
    if split not in layout.splits:
      continue
    for kind in split_files.KINDS:
      link_or_copy(split_files.split_file(source, name, split, kind),
                   split_files.split_file(out, name, split, kind))
    kept = split_files.load_json_list(split_files.split_file(source, name, split, "images"), "images")
    image_ids.update(e["id"] for e in kept if isinstance(e, dict) and e.get("active") is True)
  folders = [layout.image_dir]
  if os.path.isdir(os.path.join(source, MASK_DIR)):
    folders.append(MASK_DIR)
  for folder in folders:
    os.makedirs(os.path.join(out, folder))
    ext = "tif" if folder == layout.image_dir else "npz"
    for i in sorted(image_ids):
      file_name = f"{i}.{ext}"
      link_or_copy(os.path.join(source, folder, file_name), os.path.join(out, folder, file_name))
  return {s: sum(s in v for v in image_splits.values()) for s in SPLITS}
