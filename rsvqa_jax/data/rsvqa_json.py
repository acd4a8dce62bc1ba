"""Readers for the official RSVQA JSON layouts (LR, HR, RSVQAxBEN) into records.Dataset.

A sample is image -> questions_ids -> question -> answers_ids[0], active entries only
(DESIGN.md section 3). Anything that would give a silently wrong dataset (missing split file,
malformed JSON, dangling ids, empty questions, non-numeric counts) raises a one-line
RSVQAError naming the file. Images are only located here; `validate` opens every one.
"""
import dataclasses
import json
import os

from rsvqa_jax.data import answers as answers_lib
from rsvqa_jax.data import records
from rsvqa_jax.errors import RSVQAError


@dataclasses.dataclass(frozen=True)
class Layout:
  prefix: str  # file name prefix: {prefix}_split_{split}_{kind}.json
  image_dir: str
  image_size: int
  splits: tuple[str, ...]


LAYOUTS = {
    "lr": Layout("LR", "Images_LR", 256, ("train", "val", "test")),
    # The official HR archive keeps its tiles in Data/ (as torchrs and the authors' loaders do).
    "hr": Layout("USGS", "Data", 512, ("train", "val", "test", "test_phili")),
    "xben": Layout("RSVQAxBEN", "Images", 120, ("train", "val", "test")),
}
KINDS = ("images", "questions", "answers")


def split_file(root, name, split, kind):
  return os.path.join(root, f"{LAYOUTS[name].prefix}_split_{split}_{kind}.json")


def detect_variant(root):
  """Which official layout a folder holds, from its train question file."""
  if not os.path.isdir(root):
    raise RSVQAError(f"{root}: dataset folder missing")
  found = [n for n in LAYOUTS if os.path.exists(split_file(root, n, "train", "questions"))]
  if len(found) != 1:
    expected = ", ".join(os.path.basename(split_file(root, n, "train", "questions")) for n in LAYOUTS)
    what = "holds several" if found else "holds none"
    raise RSVQAError(f"{root}: cannot tell the dataset variant: it {what} of {expected}")
  return found[0]


def load_json_list(path, key):
  """The list under `key` of a split file, e.g. {"images": [...]} -> [...]."""
  try:
    with open(path, encoding="utf-8") as f:
      data = json.load(f)
  except FileNotFoundError:
    raise RSVQAError(f"{path}: split file missing") from None
  except json.JSONDecodeError as e:
    raise RSVQAError(f"{path}: malformed JSON at line {e.lineno} column {e.colno}: {e.msg}") from None
  except UnicodeDecodeError as e:
    raise RSVQAError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
  if not isinstance(data, dict) or not isinstance(data.get(key), list):
    raise RSVQAError(f"{path}: expected a JSON object with a {key!r} list")
  return data[key]


def _active_by_id(entries, path, required):
  """id -> entry for active entries, checking each has the keys samples need."""
  out = {}
  for pos, e in enumerate(entries):
    if not isinstance(e, dict) or "id" not in e:
      raise RSVQAError(f"{path}: entry {pos} is not an object with an 'id'")
    if not e.get("active", False):
      continue
    missing = [k for k in required if k not in e]
    if missing:
      raise RSVQAError(f"{path}: entry id {e['id']} lacks key {missing[0]!r}")
    out[e["id"]] = e
  return out


def read_split(root, name, split):
  """One split as a records.Split (rows in image order, then questions_ids order)."""
  img_path, q_path, a_path = (split_file(root, name, split, k) for k in KINDS)
  images = _active_by_id(load_json_list(img_path, "images"), img_path, ("questions_ids",))
  questions = _active_by_id(load_json_list(q_path, "questions"), q_path,
                            ("img_id", "type", "question", "answers_ids"))
  answers = _active_by_id(load_json_list(a_path, "answers"), a_path, ("answer",))
  for qid, q in questions.items():
    if q["img_id"] not in images:
      raise RSVQAError(f"{q_path}: question {qid} has img_id {q['img_id']} that points to no active image of "
                       f"{os.path.basename(img_path)}")
  rows = []
  for img_id, img in images.items():
    for qid in img["questions_ids"]:
      q = questions.get(qid)
      if q is None:
        continue  # inactive or absent question: not part of this split
      if q["img_id"] != img_id:
        raise RSVQAError(f"{q_path}: question {qid} is listed by image {img_id} but has img_id {q['img_id']}")
      text = q["question"]
      if not isinstance(text, str) or not text.strip():
        raise RSVQAError(f"{q_path}: question {qid} has an empty question string")
      ids = q["answers_ids"]
      if not isinstance(ids, list) or not ids or ids[0] not in answers:
        first = ids[0] if isinstance(ids, list) and ids else None
        raise RSVQAError(f"{q_path}: question {qid} has answers_ids {ids!r}: answer {first} points to no active "
                         f"answer of {os.path.basename(a_path)}")
      raw = str(answers[ids[0]]["answer"]).strip()
      try:
        answer = answers_lib.normalise(name, q["type"], raw)
      except ValueError as e:
        raise RSVQAError(f"{a_path}: answer {ids[0]} (question {qid}): {e}") from None
      rows.append({"question_id": qid, "image_id": img_id, "qtype": q["type"], "question": text,
                   "answer": answer, "raw_answer": raw})
  return records.Split.from_rows(split, rows)


def read_dataset(root, name=None):
  """All splits of an official dataset folder; `name` is "lr", "hr" or "xben" (None: detect)."""
  name = name or detect_variant(root)
  if name not in LAYOUTS:
    raise RSVQAError(f"unknown dataset {name!r}: expected one of {', '.join(LAYOUTS)}")
  layout = LAYOUTS[name]
  splits = {s: read_split(root, name, s) for s in layout.splits}
  image_dir = os.path.join(root, layout.image_dir)
  return records.Dataset(name=name, root=root, splits=splits,
                         image_path=lambda i: os.path.join(image_dir, f"{i}.tif"),
                         image_size=(layout.image_size, layout.image_size))
