"""The official RSVQA split files: layouts, file names, parsing with one-line errors, entries.

What every reader of the official layouts shares (rsvqa_json reads the files whole,
columnar streams them): which files a layout has, how a split file is parsed (a key given
twice, bad UTF-8, malformed JSON or a missing file is one RSVQAError naming the file), and
the checks of one entry (ids, `active`, id lists, non-empty texts).
"""
import dataclasses
import json
import logging
import os
import stat
import unicodedata

import numpy as np

from rsvqa_jax import errors
from rsvqa_jax.data import records
from rsvqa_jax.errors import RSVQAError, short_repr

LOG = logging.getLogger(__name__)  # columnar keeps what it warns of in its cache
# Unicode categories of a visible character: letters, numbers, punctuation, symbols (not marks
# alone, which have nothing to sit on, separators or controls).
VISIBLE = "LNPS"


@dataclasses.dataclass(frozen=True)
class Layout:
  prefix: str  # file name prefix: {prefix}_split_{split}_{kind}.json
  image_dir: str
  image_size: int
  splits: tuple[str, ...]
  # Question types of the layout; a question of another type is refused (a "Count" or a typo
  # would silently skip the answer binning of its type). None: not checked (RSVQAxBEN).
  question_types: tuple[str, ...] | None


LAYOUTS = {
    "lr": Layout("LR", "Images_LR", 256, ("train", "val", "test"),
                 ("comp", "count", "presence", "rural_urban")),
    # The official HR archive keeps its tiles in Data/ (as torchrs and the authors' loaders do).
    "hr": Layout("USGS", "Data", 512, ("train", "val", "test", "test_phili"),
                 ("area", "comp", "count", "presence")),
    "xben": Layout("RSVQAxBEN", "Images", 120, ("train", "val", "test"), None),
}
KINDS = ("images", "questions", "answers")


def split_file(root, name, split, kind):
  return os.path.join(root, f"{LAYOUTS[name].prefix}_split_{split}_{kind}.json")


def dataset_file(folder):
  """A dataset's train question file that `folder` holds, or None: no output goes there."""
  return next((p for name in LAYOUTS
               if os.path.lexists(p := split_file(folder, name, "train", "questions"))), None)


def refuse_dataset(folder, flag, what, *, inside=False):
  """RSVQAError when `folder` holds a dataset: `what` a command writes would land among (and
  could replace) the dataset's own files. `inside`: also when it lies inside one (its images or
  Grounding/ folder, say), for outputs that never belong there."""
  if found := dataset_file(folder):
    raise RSVQAError(f"{flag} {folder} holds a dataset ({os.path.basename(found)}); give {what} a "
                     "folder of its own")
  parent = os.path.dirname(os.path.realpath(folder))
  while inside and parent != os.path.dirname(parent):
    if dataset_file(parent):
      raise RSVQAError(f"{flag} {folder} lies inside the dataset {parent}; give {what} a folder "
                       "of its own")
    parent = os.path.dirname(parent)


def detect_variant(root, datasets=None):
  """Which official layout a folder holds, from its train question file. `datasets`: every name
  the caller's --dataset takes, offered when the folder holds none of the layouts (FloodNet and
  RSIVQA folders hold no file to tell them by)."""
  if not os.path.isdir(root):
    raise RSVQAError(f"{root}: dataset folder {errors.not_a_folder(root)}")
  found = held(root)
  if len(found) > 1:
    raise RSVQAError(f"{root}: cannot tell the dataset variant: it holds the train question "
                     f"files of several layouts ({', '.join(found)}); name one with --dataset")
  if not found:
    if hint := nested_hint(root) or parent_hint(root):
      raise RSVQAError(f"{root}: {hint}")
    if partial := _partial_layout(root):  # "holds none of" read as if it were another folder
      name, other = partial
      missing = os.path.basename(split_file(root, name, "train", "questions"))
      raise RSVQAError(f"{root}: {missing} is missing, beside other {name} split files (such as "
                       f"{other}): restore it (the {name} layout is told from it)")
    expected = ", ".join(os.path.basename(split_file(root, n, "train", "questions")) for n in LAYOUTS)
    offer = f"; name its layout with --dataset ({', '.join(datasets)})" if datasets else ""
    raise RSVQAError(f"{root}: cannot tell the dataset variant: it holds none of {expected}"
                     + offer)
  return found[0]


def _partial_layout(root):
  """(layout, one of its split files) when `root` holds split files of exactly one layout but
  not its train question file, else None (one scandir, on the error path alone)."""
  try:
    with os.scandir(root) as entries:
      names = sorted(e.name for e in entries)
  except OSError:
    return None
  found = {n: f for n in LAYOUTS for f in names
           if f.startswith(f"{LAYOUTS[n].prefix}_split_") and f.endswith(".json")}
  return next(iter(found.items())) if len(found) == 1 else None


def held(root):
  """The layouts whose train question file `root` holds. lexists: a broken link or a link loop
  is found here and named by the reader."""
  return [n for n in LAYOUTS if os.path.lexists(split_file(root, n, "train", "questions"))]


def nested(root, names=LAYOUTS):
  """The direct subfolders of `root` holding one of the layouts `names` (an archive's top folder
  unpacked one level deeper): one scandir and three lexists each, on error paths alone."""
  try:
    with os.scandir(root) as entries:
      return sorted(e.path for e in entries if e.is_dir() and set(held(e.path)) & set(names))
  except OSError:  # unreadable: the reader names the missing file
    return []


def nested_hint(root, names=LAYOUTS):
  """'the dataset files are in X: give --data X ...' when subfolders of `root` hold one of the
  layouts `names`, else ''."""
  found = nested(root, names)
  if len(found) == 1:
    return (f"the dataset files are in {found[0]}: give --data {found[0]} (in a training config, "
            f"data.root={found[0]})")
  if found:
    return (f"the dataset files are in its subfolders {', '.join(found)}: give one of them with "
            "--data (in a training config, data.root)")
  return ""


def check_layout(root, name):
  """A one-line RSVQAError when folder `root` lacks the train question file of layout `name`
  but holds another layout's (an LR folder read as HR, say): the layouts it holds are named; or
  when a subfolder holds the files (nested_hint): the folder to give is named.
  A split file that is a pipe, socket or device is refused before any reader (or the columnar
  cache's hashing) blocks on it."""
  for split in LAYOUTS[name].splits:
    for kind in KINDS:
      refuse_special(split_file(root, name, split, kind), "split file")
  if not os.path.isdir(root) or os.path.lexists(split_file(root, name, "train", "questions")):
    return
  train = os.path.basename(split_file(root, name, "train", "questions"))
  missing = f"{root}: no {train} (dataset {name})"
  if hint := nested_hint(root, [name]):  # before another layout the folder holds besides
    raise RSVQAError(f"{missing}; {hint}")
  if hint := layout_hint(root):
    raise RSVQAError(f"{missing}{hint}")
  if hint := nested_hint(root) or parent_hint(root):
    raise RSVQAError(f"{missing}; {hint}")


def parent_hint(root):
  """'it lies inside the dataset folder X: give X ...' when the folder above `root` holds a layout
  (its image folder given for the dataset), else ''."""
  parent = os.path.dirname(os.path.abspath(root))
  if found := held(parent):
    return (f"it lies inside the dataset folder {parent} (dataset {', '.join(found)}): give "
            f"{parent} itself")
  return ""


def layout_hint(root):
  """'; the folder holds dataset lr: name it with ...' for the official layouts `root` holds,
  or '' when it holds none: what a reader of another layout adds to its 'no file' error."""
  found = held(root)
  if not found:
    return ""
  if len(found) == 1:
    return (f"; the folder holds dataset {found[0]}: name it with --dataset {found[0]} "
            f"(dataset={found[0]!r} from Python; in a training config, data.name={found[0]})")
  return (f"; the folder holds datasets {', '.join(found)}: name one with --dataset (dataset= "
          "from Python; in a training config, data.name)")


def refuse_special(path, what):
  """RSVQAError when `path` is a pipe, socket or device: opening a pipe waits for a writer, so
  a reader would hang without a word."""
  try:
    mode = os.stat(path).st_mode
  except OSError:  # missing, a loop, unreadable: the reader names it
    return
  if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
    raise RSVQAError(f"{path}: {what} is a pipe, socket or device, not a file")


def read_text(path, what):
  """The text of a UTF-8 file `what` ("split file", ...), or a one-line RSVQAError naming it.

  A leading byte-order mark (some Windows editors write one) is dropped. A directory, a
  symlink loop or an unreadable file must not surface as an OSError traceback.
  """
  refuse_special(path, what)
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
    return data.decode("utf-8-sig")
  except UnicodeDecodeError as e:
    line = data.count(b"\n", 0, e.start) + 1
    problem = f"not UTF-8 text ({e.reason} at byte {e.start}, line {line})"
  raise RSVQAError(f"{path}: {problem}")


class DuplicateKey(Exception):
  """A JSON object gives one key twice (parse_json)."""


def _unique_keys(pairs):
  """json object_pairs_hook: a key given twice would otherwise silently keep the last value."""
  obj = dict(pairs)
  if len(obj) != len(pairs):
    seen = set()
    raise DuplicateKey(next(k for k, _ in pairs if k in seen or seen.add(k)))
  return obj


def parse_json(text):
  """json.loads refusing a key given twice (DuplicateKey), as every split file is parsed."""
  return json.loads(text, object_pairs_hook=_unique_keys)


def load_json(path, what="split file"):
  """The parsed JSON file `path`, used by every reader so all fail the same way: one line.

  Nesting is limited by Python's recursion limit (about 1,000 levels; the dataset files nest
  at most 4 deep): a deeper file is refused instead of raising RecursionError.
  """
  text = read_text(path, what)
  try:
    return parse_json(text)
  except json.JSONDecodeError as e:
    problem = f"malformed JSON at line {e.lineno} column {e.colno}: {e.msg}"
  except ValueError:  # Python reads no integer of more than 4,300 digits (no id is one)
    problem = "cannot read JSON: it holds a number of more than 4,300 digits"
  except RecursionError:
    problem = "JSON nested too deeply to read"
  except DuplicateKey as e:
    problem = f"key {short_repr(e.args[0])} appears twice in one JSON object"
  raise RSVQAError(f"{path}: {problem}")


def load_json_list(path, key):
  """The list under `key` of a split file, e.g. {"images": [...]} -> [...]."""
  data = load_json(path)
  if not isinstance(data, dict) or not isinstance(data.get(key), list):
    raise RSVQAError(f"{path}: expected a JSON object with a {key!r} list")
  return data[key]


def entry_id(e, pos, path, required):
  """(id, active) of entry `pos` of a split file, checked as every reader checks it.

  Ids must be non-negative integers and `active` a JSON boolean (a float id would be cast,
  and the string "false" would count as active); an active entry must hold `required`. An
  entry without `active` is refused too: the official files flag every entry, and read as
  inactive it would leave the split unwarned.
  """
  if not isinstance(e, dict) or "id" not in e:
    raise RSVQAError(f"{path}: entry {pos} is not an object with an 'id'")
  i = e["id"]
  if not records.is_id(i):
    raise RSVQAError(f"{path}: entry {pos} has id {short_repr(i)}: "
                     + records.id_problem(i, "expected a non-negative integer"))
  if "active" not in e:
    raise RSVQAError(f"{path}: entry id {i} has no 'active' key: give each entry \"active\": "
                     "true, or false outside the split")
  flag = e["active"]
  if not isinstance(flag, bool):
    raise RSVQAError(f"{path}: entry id {i} has active {short_repr(flag)}: expected true or "
                     "false")
  if flag:
    missing = [k for k in required if k not in e]
    if missing:
      raise RSVQAError(f"{path}: entry id {i} lacks key {missing[0]!r}")
  return i, flag


def id_list(value, path, owner, key):
  """Checks that `owner`'s `key` (questions_ids, answers_ids) is a list of distinct ids."""
  if not isinstance(value, list) or not all(records.is_id(v) for v in value):
    bad = next((v for v in value if not records.is_id(v)), None) if isinstance(value, list) else None
    raise RSVQAError(f"{path}: {owner} has {key} {short_repr(value)}: "
                     + records.id_problem(bad, "expected a list of non-negative integers"))
  if len(set(value)) != len(value):
    seen = set()
    twice = next(v for v in value if v in seen or seen.add(v))
    raise RSVQAError(f"{path}: {owner} lists id {twice} twice in {key}")
  return value


def question_fields(q, qid, path, name):
  """(type, question string, answers_ids) of an active question entry of layout `name`, each
  checked: the one check the JSON reader and the columnar reader share, so they refuse the same
  entries."""
  qtype = q["type"]
  if nonempty_text(qtype) is None or not isinstance(qtype, str):
    raise RSVQAError(f"{path}: question {qid} has type {short_repr(qtype)}: "
                     + text_problem(qtype))
  known = LAYOUTS[name].question_types
  if known and qtype not in known:
    raise RSVQAError(f"{path}: question {qid} has type {short_repr(qtype)}: the {name.upper()} "
                     f"layout's types are {', '.join(known)}")
  text = q["question"]
  if not isinstance(text, str):
    raise RSVQAError(f"{path}: question {qid} has question {short_repr(text)}: expected a string")
  if not valid_unicode(text):
    raise RSVQAError(f"{path}: question {qid} has question {short_repr(text)}: "
                     + text_problem(text))
  if not any(unicodedata.category(c)[0] in VISIBLE for c in text):
    raise RSVQAError(f"{path}: question {qid} has an empty question string (no visible "
                     "character)")
  # As answers are read (data/answers.py): a question with a trailing space was another question
  # than its train twin (question-level priors fell back to the type's), a decomposed accent
  # other words than the composed one.
  text = unicodedata.normalize("NFC", text).strip()
  ids = id_list(q["answers_ids"], path, f"question {qid}", "answers_ids")
  if not ids:
    raise RSVQAError(f"{path}: question {qid} has answers_ids []: it names no answer")
  return qtype, text, ids


def warn_unlisted(q_path, img_path, unlisted):
  """A WARNING naming the active questions that no active image lists: a sample is reached from
  its image (DESIGN.md section 3), so they are left out of the split; never silently."""
  if len(unlisted):
    LOG.warning(f"{q_path}: {len(unlisted)} active question(s) listed by no active image of "
                 f"{os.path.basename(img_path)} (the first: {int(unlisted[0])}), left out of the "
                 "split")


def warn_inactive_listed(img_path, q_path, inactive):
  """A WARNING counting the inactive questions that active images list: they are left out, as
  the flag says, where the original RSVQA loader (which reads no question's flag) keeps them;
  sample counts then differ from its, never silently."""
  if len(inactive):
    LOG.warning(f"{img_path}: active images list {len(inactive)} question(s) that are inactive in "
                f"{os.path.basename(q_path)} (the first: {int(inactive[0])}), left out of the "
                "split (the original RSVQA loader keeps them)")


NO_BACK_LINK = -2  # an answer without a question_id key: nothing to cross-check
ODD_BACK_LINK = -1  # a question_id that is not an id (null, "3", 3.0)


def back_link(answer):
  """An answer entry's `question_id` as an id, or NO_BACK_LINK / ODD_BACK_LINK."""
  if "question_id" not in answer:
    return NO_BACK_LINK
  value = answer["question_id"]
  return value if records.is_id(value) else ODD_BACK_LINK


def warn_back_links(a_path, mismatched):
  """A WARNING counting the answers whose question_id names another question than the one whose
  answers_ids[0] leads to them: the sample follows answers_ids (DESIGN.md section 3), but a
  damaged or hand-edited file shows here, never silently. `mismatched`: (answer id, its
  question_id value, the question that reached it) per such answer."""
  if mismatched:
    aid, value, qid = mismatched[0]
    LOG.warning(f"{a_path}: {len(mismatched)} answer(s) with a question_id other than the "
                 f"question whose answers_ids lead to them (the first: answer {aid} has "
                 f"question_id {short_repr(value)}"
                 + ("" if records.is_id(value) else ", not an integer id")
                 + f", reached from question {qid}); the answers_ids "
                 "link is used")


def warn_several_answers(q_path, owners):
  """A WARNING counting the questions of a split whose answers_ids list more than one answer:
  the sample takes the first (DESIGN.md section 3), and a file of several answers per question
  (as VQA's) would otherwise train on one of them unseen. `owners`: those questions' ids."""
  if len(owners):
    LOG.warning(f"{q_path}: {len(owners)} question(s) list several answers_ids (the first: "
                f"question {int(owners[0])}); each is answered by its first one, the others "
                "are not read")


def nonempty_text(value):
  """A JSON string (or integer) as stripped non-empty text, else None (null, "", " ", true, and
  text that is not valid Unicode: text_problem)."""
  if isinstance(value, bool) or not isinstance(value, (str, int)) or not valid_unicode(value):
    return None
  return str(value).strip() or None


def valid_unicode(value):
  """False for a string holding an unpaired surrogate: JSON's "\\ud800" escape decodes to one,
  which every reader takes and every writer (a table, a figure, a CSV) refuses later."""
  try:
    str(value).encode("utf-8")
  except UnicodeEncodeError:
    return False
  return True


def text_problem(value):
  """Why `value` is no text a sample can hold (nonempty_text gave None), for a message."""
  if isinstance(value, str) and not valid_unicode(value):
    return "not valid Unicode: it holds an unpaired surrogate (a lone \\ud800-style escape)"
  if isinstance(value, float):  # 3.0: a count written by a tool that holds numbers as floats
    return "a JSON number with a decimal point; expected a string or a whole number (\"3\", 3)"
  return "expected a non-empty string"


def warn_shared_questions(root, splits):
  """A WARNING per pair of splits that hold the same question (id and image): the files index
  questions by global id, so such a question is in both, and a split scored after training on
  the other is not held out (a re-split may share images between splits, never questions).
  Ids alone could meet in files numbered per split, on other images. np.isin looks ids up in a
  table over their range (RSVQAxBEN's three splits: 0.1 s, where sorting them took 2.5 s)."""
  names = list(splits)
  for pos, first in enumerate(names):
    for second in names[pos + 1:]:
      a, b = splits[first], splits[second]
      in_b = np.isin(a.question_id, b.question_id)
      if not in_b.any():
        continue
      ids = a.question_id[in_b]
      order = np.argsort(b.question_id)
      at = order[np.searchsorted(b.question_id, ids, sorter=order)]
      shared = np.sort(ids[a.image_id[in_b] == b.image_id[at]])
      if len(shared):
        LOG.warning(f"{root}: {len(shared)} question(s) active in both {first} and {second} "
                    f"(the first: id {int(shared[0])}): {second} is not held out from {first}")


def make_dataset(root, name, splits):
  """The records.Dataset of official folder `root` of layout `name` with these splits."""
  warn_shared_questions(root, splits)
  layout = LAYOUTS[name]
  image_dir = os.path.join(root, layout.image_dir)
  return records.Dataset(name=name, root=root, splits=splits,
                         image_path=lambda i: os.path.join(image_dir, f"{i}.tif"),
                         image_size=(layout.image_size, layout.image_size))
