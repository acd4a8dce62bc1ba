"""Readers for the official RSVQA JSON layouts (LR, HR, RSVQAxBEN) into records.Dataset.

A sample is image -> questions_ids -> question -> answers_ids[0], active entries only
(DESIGN.md section 3). Anything that would give a silently wrong dataset (missing split file,
malformed JSON, dangling ids, empty questions, non-numeric counts) raises a one-line
RSVQAError naming the file and the id: duplicate or non-integer ids, a non-boolean `active`,
null or empty answers and types, an id listed twice or naming no entry. Images are only
located here; `validate` decodes every one.
"""
import dataclasses
import json
import os
import reprlib

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
  # lexists: a broken link or a link loop is found here and named by the reader.
  found = [n for n in LAYOUTS if os.path.lexists(split_file(root, n, "train", "questions"))]
  if len(found) != 1:
    expected = ", ".join(os.path.basename(split_file(root, n, "train", "questions")) for n in LAYOUTS)
    what = "holds several" if found else "holds none"
    raise RSVQAError(f"{root}: cannot tell the dataset variant: it {what} of {expected}")
  return found[0]


def read_text(path, what):
  """The text of a UTF-8 file `what` ("split file", ...), or a one-line RSVQAError naming it.

  A directory, a symlink loop or an unreadable file must not surface as an OSError traceback.
  """
  try:
    with open(path, "rb") as f:
      data = f.read()
  except FileNotFoundError:
    raise RSVQAError(f"{path}: {what} missing") from None
  except IsADirectoryError:
    raise RSVQAError(f"{path}: {what} is a directory, not a file") from None
  except OSError as e:  # a symlink loop (ELOOP), permissions, I/O errors
    raise RSVQAError(f"{path}: cannot read {what} ({e.strerror or e})") from None
  try:
    return data.decode("utf-8")
  except UnicodeDecodeError as e:
    line = data.count(b"\n", 0, e.start) + 1
    problem = f"not UTF-8 text ({e.reason} at byte {e.start}, line {line})"
  raise RSVQAError(f"{path}: {problem}")


class _DuplicateKey(Exception):
  pass


def _unique_keys(pairs):
  """json object_pairs_hook: a key given twice would otherwise silently keep the last value."""
  obj = dict(pairs)
  if len(obj) != len(pairs):
    seen = set()
    raise _DuplicateKey(next(k for k, _ in pairs if k in seen or seen.add(k)))
  return obj


def load_json(path, what="split file"):
  """The parsed JSON file `path`, used by every reader so all fail the same way: one line.

  Nesting is limited by Python's recursion limit (about 1,000 levels; the dataset files nest
  at most 4 deep): a deeper file is refused instead of raising RecursionError.
  """
  text = read_text(path, what)
  try:
    return json.loads(text, object_pairs_hook=_unique_keys)
  except json.JSONDecodeError as e:
    problem = f"malformed JSON at line {e.lineno} column {e.colno}: {e.msg}"
  except ValueError as e:  # an integer of more than 4,300 digits
    problem = f"cannot read JSON ({e})"
  except RecursionError:
    problem = "JSON nested too deeply to read"
  except _DuplicateKey as e:
    problem = f"key {short_repr(e.args[0])} appears twice in one JSON object"
  raise RSVQAError(f"{path}: {problem}")


def load_json_list(path, key):
  """The list under `key` of a split file, e.g. {"images": [...]} -> [...]."""
  data = load_json(path)
  if not isinstance(data, dict) or not isinstance(data.get(key), list):
    raise RSVQAError(f"{path}: expected a JSON object with a {key!r} list")
  return data[key]


def short_repr(value):
  """A value for a one-line message: shortened, quoted, newlines escaped."""
  return reprlib.repr(value)


def _active_by_id(entries, path, required):
  """id -> entry for the active entries, and the ids of all entries (active or not).

  Ids must be unique integers and `active` a JSON boolean: a repeated id would silently
  replace an entry, a float id would be cast, and the string "false" would count as active.
  """
  active, position = {}, {}
  for pos, e in enumerate(entries):
    if not isinstance(e, dict) or "id" not in e:
      raise RSVQAError(f"{path}: entry {pos} is not an object with an 'id'")
    i = e["id"]
    if not records.is_id(i):
      raise RSVQAError(f"{path}: entry {pos} has id {short_repr(i)}: expected a non-negative "
                       "integer")
    if i in position:
      raise RSVQAError(f"{path}: id {i} appears twice (entries {position[i]} and {pos})")
    position[i] = pos
    flag = e.get("active", False)
    if not isinstance(flag, bool):
      raise RSVQAError(f"{path}: entry id {i} has active {short_repr(flag)}: expected true or "
                       "false")
    if not flag:
      continue
    missing = [k for k in required if k not in e]
    if missing:
      raise RSVQAError(f"{path}: entry id {i} lacks key {missing[0]!r}")
    active[i] = e
  return active, position.keys()


def _id_list(value, path, owner, key):
  """Checks that `owner`'s `key` (questions_ids, answers_ids) is a list of distinct ids."""
  if not isinstance(value, list) or not all(records.is_id(v) for v in value):
    raise RSVQAError(f"{path}: {owner} has {key} {short_repr(value)}: expected a list of "
                     "non-negative integers")
  if len(set(value)) != len(value):
    seen = set()
    twice = next(v for v in value if v in seen or seen.add(v))
    raise RSVQAError(f"{path}: {owner} lists id {twice} twice in {key}")
  return value


def nonempty_text(value):
  """A JSON string (or integer) as stripped non-empty text, else None (null, "", " ", true)."""
  if isinstance(value, bool) or not isinstance(value, (str, int)):
    return None
  return str(value).strip() or None


def _sample(name, qid, q, answers, answer_ids, q_path, a_path):
  """The row of an active question, checking every field it is built from."""
  qtype = q["type"]
  if not isinstance(qtype, str) or not qtype.strip():
    raise RSVQAError(f"{q_path}: question {qid} has type {short_repr(qtype)}: expected a non-empty "
                     "string")
  text = q["question"]
  if not isinstance(text, str) or not text.strip():
    raise RSVQAError(f"{q_path}: question {qid} has an empty question string")
  ids = _id_list(q["answers_ids"], q_path, f"question {qid}", "answers_ids")
  if not ids or ids[0] not in answers:
    raise RSVQAError(f"{q_path}: question {qid} has answers_ids {short_repr(ids)}: answer "
                     f"{ids[0] if ids else None} points to no active answer of "
                     f"{os.path.basename(a_path)}")
  absent = next((a for a in ids if a not in answer_ids), None)
  if absent is not None:
    raise RSVQAError(f"{q_path}: question {qid} has answers_ids {short_repr(ids)}: answer {absent} "
                     f"does not exist in {os.path.basename(a_path)}")
  value = answers[ids[0]]["answer"]
  raw = nonempty_text(value)
  if raw is None:
    raise RSVQAError(f"{a_path}: answer {ids[0]} (question {qid}) is {short_repr(value)}: "
                     "expected a non-empty string")
  try:
    answer = answers_lib.normalise(name, qtype, raw)
  except ValueError as e:
    raise RSVQAError(f"{a_path}: answer {ids[0]} (question {qid}): {e}") from None
  return {"question_id": qid, "image_id": q["img_id"], "qtype": qtype, "question": text,
          "answer": answer, "raw_answer": raw}


def read_split(root, name, split):
  """One split as a records.Split (rows in image order, then questions_ids order)."""
  img_path, q_path, a_path = (split_file(root, name, split, k) for k in KINDS)
  images, _ = _active_by_id(load_json_list(img_path, "images"), img_path, ("questions_ids",))
  questions, question_ids = _active_by_id(load_json_list(q_path, "questions"), q_path,
                                          ("img_id", "type", "question", "answers_ids"))
  answers, answer_ids = _active_by_id(load_json_list(a_path, "answers"), a_path, ("answer",))
  samples = {}
  for qid, q in questions.items():
    img_id = q["img_id"]
    if not records.is_id(img_id) or img_id not in images:
      raise RSVQAError(f"{q_path}: question {qid} has img_id {short_repr(img_id)} that points to "
                       f"no active image of {os.path.basename(img_path)}")
    samples[qid] = _sample(name, qid, q, answers, answer_ids, q_path, a_path)
  rows = []
  for img_id, img in images.items():
    for qid in _id_list(img["questions_ids"], img_path, f"image {img_id}", "questions_ids"):
      if qid not in question_ids:
        raise RSVQAError(f"{img_path}: image {img_id} lists question {qid} that does not exist in "
                         f"{os.path.basename(q_path)}")
      if qid not in samples:
        continue  # an inactive question: part of another split
      if samples[qid]["image_id"] != img_id:
        raise RSVQAError(f"{q_path}: question {qid} is listed by image {img_id} but has img_id "
                         f"{samples[qid]['image_id']}")
      rows.append(samples[qid])
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
