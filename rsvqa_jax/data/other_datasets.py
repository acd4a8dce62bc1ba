"""Readers for the question files of FloodNet-VQA and RSIVQA (the paper's Table 5).

These datasets are only analysed (most-common-answer and uniform accuracies), so they are
read without images: `Dataset.image_path` is None.

FloodNet-VQA (FloodNet Challenge @ EarthVision 2021, Track 2). Each question file is one
JSON object keyed by question id:
  {"0": {"Image_ID": "10165.JPG", "Question": "...", "Ground_Truth": "flooded" | 3,
         "Question_Type": "Condition_Recognition" | "Yes_No" | "Simple_Counting" |
                          "Complex_Counting"}, ...}
The split of a file is taken from its name: Training*/Train* -> train, Valid*/Val* -> val,
Test* -> test (searched recursively under the root, case-insensitive, .json). Only the
training file has answers in the public release: a file none of whose entries has
"Ground_Truth" is skipped; a file where only some have it is an error. As in the paper,
Condition_Recognition is divided by its question into condition_road (the question names
the road) and condition_scene (the overall condition); the types read are
simple_counting, complex_counting, condition_yes_no (Yes_No), condition_road and
condition_scene ("Road_Condition_Recognition", found in derived files, maps to
condition_road). Answers are lower-cased strings ("Yes" -> "yes", 3 -> "3"), those of Yes_No
yes or no, those of the counting types whole numbers >= 0 without leading zeros ("03" -> "3";
a JSON number written 3.0 reads 3; "maybe" to a Yes_No question, -3, 2.5 or "three" to a
counting one is an error: data/answers.normalise); raw_answer keeps the
file's value as a string; a null or empty Image_ID, Question or Ground_Truth, or a
question id that is not an integer or is given twice (also as "3" and "03"), is an error.
Image ids are the numeric stems of Image_ID ("10165.JPG" -> 10165), or consecutive numbers
above the largest numeric stem, in first-seen order, when a stem is not numeric.

RSIVQA (spectralpublic/RSIVQA). Plain-text files, one sample per line, per source dataset
(UCM/ucm_vqa.txt, UCM/ucm_res.txt, Sydney/sydney_vqa.txt, AID/rsicd_vqa.txt,
HRRSD/opt_val_vqa.txt, DOTA/dota_{train,val}_vqa2.txt):
  <image name>:<question>?<answer>        e.g. "P0000: how many planes are there in this picture?21"
split at the first ":" and the last "?"; the question is kept stripped with its "?". All
*.txt files under the root are read (sorted by path) into one split "all" (RSIVQA publishes
no splits). Question types come from the question's start (case-insensitive): "how many" ->
count, "does this picture contain" / "is there" -> presence, "what is the location" /
"where" -> location, "what is the theme" -> scene; any other question is an error naming
file and line. Answers are stripped of surrounding spaces (the files have e.g. both
"everywhere" and "everywhere "), count answers of digits lose leading zeros ("07" -> "7");
raw_answer keeps the text as written; an empty answer is an
error naming file and line. Files are read as UTF-8. Question ids are
the sample's position (0-based) over the sorted files; image ids number the distinct
(file folder, image name) pairs in first-seen order.
"""
import os

from rsvqa_jax.data import answers as answers_lib
from rsvqa_jax.data import records, rsvqa_json, split_files
from rsvqa_jax.errors import RSVQAError

FLOODNET_TYPES = {
    "simple_counting": "simple_counting", "complex_counting": "complex_counting",
    "yes_no": "condition_yes_no", "road_condition_recognition": "condition_road",
}
RSIVQA_TYPES = (
    ("how many", "count"), ("does this picture contain", "presence"), ("is there", "presence"),
    ("what is the location", "location"), ("where", "location"), ("what is the theme", "scene"),
)
_FLOODNET_SPLITS = (("training", "train"), ("train", "train"), ("valid", "val"), ("val", "val"), ("test", "test"))


def _files(root, ext):
  if not os.path.isdir(root):
    raise RSVQAError(f"{root}: dataset folder not found")
  found = []
  for folder, _, names in os.walk(root):
    found += [os.path.join(folder, n) for n in names if n.lower().endswith(ext)]
  return sorted(found)


def _floodnet_type(raw_type, question, path, key):
  t = str(raw_type).strip().lower()
  if t == "condition_recognition":
    return "condition_road" if "road" in question.lower() else "condition_scene"
  if t not in FLOODNET_TYPES:
    raise RSVQAError(f"{path}: question {key}: unknown Question_Type {raw_type!r}")
  return FLOODNET_TYPES[t]


def _floodnet_entries(path):
  """question id -> entry of one question file, checked; None if no entry has an answer."""
  data = split_files.load_json(path, "FloodNet question file")
  if not isinstance(data, dict):
    raise RSVQAError(f"{path}: expected a JSON object keyed by question id")
  if not any(isinstance(v, dict) and "Ground_Truth" in v for v in data.values()):
    return None
  entries, keys = {}, {}
  for key, entry in data.items():
    missing = [k for k in ("Image_ID", "Question", "Ground_Truth", "Question_Type")
               if not isinstance(entry, dict) or k not in entry]
    if missing:
      raise RSVQAError(f"{path}: question {key}: missing {', '.join(missing)}")
    qid = int(key) if key.isascii() and key.isdigit() else None
    if not records.is_id(qid):
      raise RSVQAError(f"{path}: question id {key!r} is not a non-negative integer")
    if qid in entries:
      raise RSVQAError(f"{path}: question id {qid} appears twice (keys {keys[qid]!r} and {key!r})")
    truth = entry["Ground_Truth"]
    if isinstance(truth, float) and truth.is_integer() and abs(truth) <= 2 ** 53:
      entry = dict(entry, Ground_Truth=int(truth))  # 3.0: a count written by a float column
    for field in ("Image_ID", "Question", "Ground_Truth"):
      value = entry[field]
      if split_files.nonempty_text(value) is None:
        shown = split_files.short_repr(value)
        raise RSVQAError(f"{path}: question {key}: {field} is {shown}, "
                         f"{split_files.text_problem(value)}")
    entries[qid], keys[qid] = entry, key
  return entries


def _floodnet_image_ids(names, root):
  """Image_ID -> image id: its numeric stem, else the next number above every numeric stem.

  Numbering the others from 0 would give "img_a.JPG" the id of "0.JPG". Two Image_IDs of one
  numeric stem ("7000.JPG", "07000.jpg") are refused: read as one image, their questions were
  taken for one image's (a question "not held out" between splits that was).
  """
  stems = {n: os.path.splitext(n)[0] for n in names}
  ids = {n: int(s) for n, s in stems.items() if s.isascii() and s.isdigit() and len(s) <= 18}
  named = {}
  for n, i in ids.items():
    if named.setdefault(i, n) != n:
      raise RSVQAError(f"{root}: Image_IDs {named[i]!r} and {n!r} both read as image {i}; name "
                       "each image one way in the question files")
  next_id = max(ids.values(), default=-1) + 1
  for n in names:
    if n not in ids:
      ids[n], next_id = next_id, next_id + 1
  return ids


def _floodnet_split(split, path, entries, image_ids):
  rows = []
  for qid, entry in entries.items():
    question = str(entry["Question"]).strip()
    raw = str(entry["Ground_Truth"])
    qtype = _floodnet_type(entry["Question_Type"], question, path, qid)
    try:
      answer = answers_lib.normalise("floodnet", qtype, raw)
    except ValueError as e:
      raise RSVQAError(f"{path}: question {qid}: {e}") from None
    rows.append({"question_id": qid, "image_id": image_ids[str(entry["Image_ID"])],
                 "qtype": qtype, "question": question, "answer": answer, "raw_answer": raw})
  return records.Split.from_rows(split, rows)


def read_floodnet(root):
  """FloodNet-VQA question files under `root` -> records.Dataset (splits with answers)."""
  by_split = {}
  for path in _files(root, ".json"):
    name = os.path.basename(path).lower()
    split = next((s for prefix, s in _FLOODNET_SPLITS if name.startswith(prefix)), None)
    if split is None:
      continue
    if split in by_split:
      raise RSVQAError(f"{path}: second question file for split {split} (first: {by_split[split]})")
    by_split[split] = path
  if not by_split:
    raise RSVQAError(f"{root}: no FloodNet question file (Training_Question.json, Valid_..., "
                     f"Test_...){split_files.layout_hint(root)}")
  order = list(dict.fromkeys(s for _, s in _FLOODNET_SPLITS))  # train, val, test
  read = {s: (by_split[s], _floodnet_entries(by_split[s])) for s in order if s in by_split}
  read = {s: (p, e) for s, (p, e) in read.items() if e is not None}
  if not read:
    raise RSVQAError(f"{root}: no FloodNet question file has answers (Ground_Truth)")
  image_ids = _floodnet_image_ids(list(dict.fromkeys(
      str(entry["Image_ID"]) for _, entries in read.values() for entry in entries.values())), root)
  splits = {s: _floodnet_split(s, p, e, image_ids) for s, (p, e) in read.items()}
  split_files.warn_shared_questions(root, splits)  # as the RSVQA layouts: a test not held out
  return records.Dataset(name="floodnet", root=root, splits=splits)


def _rsivqa_type(question, path, line_no):
  q = question.lower()
  for prefix, qtype in RSIVQA_TYPES:
    if q.startswith(prefix):
      return qtype
  raise RSVQAError(f"{path}:{line_no}: question type of {question!r} not recognised")


def read_rsivqa(root):
  """RSIVQA *.txt question files under `root` -> records.Dataset with one split "all"."""
  paths = _files(root, ".txt")
  if not paths:
    raise RSVQAError(f"{root}: no RSIVQA .txt question file{split_files.layout_hint(root)}")
  rows, image_ids = [], {}
  for path in paths:
    folder = os.path.relpath(os.path.dirname(path), root)
    text = split_files.read_text(path, "RSIVQA question file")
    # Universal newlines, as text-mode iteration over the file gave.
    for line_no, line in enumerate(text.replace("\r\n", "\n").replace("\r", "\n").split("\n"), 1):
      if not line.strip():
        continue
      image, sep, rest = line.partition(":")
      question, qmark, answer = rest.rpartition("?")
      if not sep or not qmark:
        raise RSVQAError(f"{path}:{line_no}: expected 'image:question?answer', got {line!r}")
      if not answer.strip():
        raise RSVQAError(f"{path}:{line_no}: empty answer in {line!r}")
      question = question.strip() + "?"
      key = (folder, image.strip())
      image_ids.setdefault(key, len(image_ids))
      qtype = _rsivqa_type(question, path, line_no)
      rows.append({"question_id": len(rows), "image_id": image_ids[key], "qtype": qtype,
                   "question": question, "answer": answers_lib.normalise("rsivqa", qtype, answer),
                   "raw_answer": answer})
  return records.Dataset(name="rsivqa", root=root, splits={"all": records.Split.from_rows("all", rows)})


# The datasets `analyze` reads: the official RSVQA layouts and the two others of the paper.
NAMES = (*split_files.LAYOUTS, "floodnet", "rsivqa")


def read_any(root, name):
  """records.Dataset of `root` in the layout `name`: lr, hr, xben, floodnet or rsivqa."""
  if name == "floodnet":
    return read_floodnet(root)
  if name == "rsivqa":
    return read_rsivqa(root)
  if name not in split_files.LAYOUTS:
    raise RSVQAError(f"unknown dataset {name!r}: expected one of {', '.join(NAMES)}"
                     + split_files.layout_hint(root))
  return rsvqa_json.read_dataset(root, name)
