"""The columnar form of an official dataset folder: built once from its JSON files, then mapped.

RSVQAxBEN has 14.7M questions over 590k images; parsed as Python objects its split files take
tens of GB. This builds, once per version of the files, a cache entry of per-split NumPy
columns (`{split}.{column}.npy`): question_id and image_id (int64) and int32 codes into the
interned strings of `vocab.json` (qtype, question, answer, raw_answer: RSVQAxBEN has a few
thousand distinct question strings and answers for millions of questions). Reading maps the
id columns (`mmap_mode="r"`) and expands the codes into records.Split's object columns, whose
rows all point at the same few string objects (8 bytes a row), so every consumer (validate,
analyze, training) reads the same records.Split as from the JSON reader, row for row.

The build streams each split file block by block (data/json_stream.py) and applies the JSON
reader's checks (split_files, rsvqa_json: ids, `active`, references between the three files,
non-empty types / questions / answers, the answer normalisation), vectorised over the columns
where they join the files; the first problem found is raised as the same kind of one-line
RSVQAError (when a file has several, it may name another one first than the JSON reader would).

The entry is named by storage.identity_key of the nine files' sha256 (storage.file_digests
hashes each file once and keeps the digest while its size, mtime, ctime and inode stay), so a
changed file gives a new entry and the old one is removed; it is written whole or not at all
(storage.cached), by one process at a time (a second one waits for the first's entry instead of
building it again). Its manifest also records the sha256 of each file of the entry, checked
(through storage.file_digests too) whenever the entry is opened: an entry with a file missing,
damaged or cut short is named in a WARNING and built again from the JSON files. The cache lives
in `.columnar/` inside the dataset folder, or, when that folder is read-only, under
$XDG_CACHE_HOME (default ~/.cache)/rsvqa_jax/columnar/. The build's WARNINGs (questions no
image lists, answers naming another question, questions of several answers) are kept in the
manifest and said again, with the entry named, each time the entry is read: the files still
have what they warn of.
"""
import array
import hashlib
import logging
import os
import shutil

import numpy as np

from rsvqa_jax import storage
from rsvqa_jax.data import answers as answers_lib
from rsvqa_jax.data import json_stream
from rsvqa_jax.data import records
from rsvqa_jax.data import split_files
from rsvqa_jax.errors import RSVQAError, short_repr

VERSION = 6  # 2: the manifest records the sha256 of each file; 3: and the build's warnings;
# 4: LR/HR question types checked against the layout's; 5: inactive listed questions warned of;
# 6: questions stripped and composed (NFC)
CACHE_DIR = ".columnar"
DIGESTS = "digests.json"
VOCAB = "vocab.json"
ID_COLUMNS = ("question_id", "image_id")
STRING_COLUMNS = ("qtype", "question", "answer", "raw_answer")


def cache_parent(root):
  """Where the columnar entries of dataset folder `root` live (see the module docstring)."""
  root = os.path.abspath(root)
  if os.access(root, os.W_OK):
    return os.path.join(root, CACHE_DIR)
  home = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
  key = hashlib.sha256(os.fsencode(root)).hexdigest()[:16]
  return os.path.join(home, "rsvqa_jax", "columnar", key)


def source_files(root, name):
  """The split files of layout `name` in `root`, in split then kind order."""
  return [split_files.split_file(root, name, s, k)
          for s in split_files.LAYOUTS[name].splits for k in split_files.KINDS]


def ensure(root, name, parent=None):
  """The folder of the columnar form of `root` (layout `name`), built now unless cached."""
  paths = source_files(root, name)
  for path in paths:
    if not os.path.isfile(path):
      split_files.load_json(path)  # its one-line error: missing, a directory, a link loop
  fallback = parent is None and not os.access(os.path.abspath(root), os.W_OK)
  parent = parent or cache_parent(root)
  _folder_or_absent(parent)
  if fallback:
    try:
      os.makedirs(parent, exist_ok=True)
    except OSError as e:
      raise RSVQAError(f"{root} is read-only, so its columnar cache goes under $XDG_CACHE_HOME "
                       f"(else ~/.cache), to {parent}: {(e.strerror or str(e)).lower()}; set "
                       "XDG_CACHE_HOME to a folder you can write") from None
  index = os.path.join(parent, DIGESTS)
  digests = storage.file_digests(paths, index)
  identity = {"version": VERSION, "dataset": name,
              "sources": {os.path.basename(p): d for p, d in zip(paths, digests)}}
  key = storage.identity_key(identity)
  _folder_or_absent(os.path.join(parent, key))

  built = []

  def write(tmp):
    with _WarningsKept(split_files.LOG) as kept:
      rows = build(root, name, tmp)
    files = {f: storage.file_sha256(os.path.join(tmp, f)) for f in sorted(os.listdir(tmp))}
    storage.write_json(os.path.join(tmp, storage.MANIFEST),
                       {**identity, "rows": rows, "files": files, "warnings": kept.messages})
    built.append(tmp)

  warned = []  # of the entry opened

  def open_entry(path):
    """`path` if its manifest is this identity's and every file it lists has its sha256."""
    manifest = storage.read_manifest(path, **identity) or {}
    files, messages = manifest.get("files"), manifest.get("warnings")
    if not isinstance(files, dict) or not isinstance(messages, list):
      return None
    try:
      found = storage.file_digests([os.path.join(path, f) for f in files], index)
    except OSError:  # a file missing, or a folder in its place
      return None
    if found != list(files.values()):
      return None
    warned[:] = messages
    return path

  folder = storage.cached(parent, key, open_entry, write, "columnar cache entry")
  if not built:  # read from the cache: what its build warned of is still in the files
    for message in warned:
      split_files.LOG.warning(f"{message} (columnar cache entry {folder})")
  for entry in os.listdir(parent):  # entries of earlier versions of the files
    if entry != key and len(entry) == len(key) and os.path.isdir(os.path.join(parent, entry)):
      shutil.rmtree(os.path.join(parent, entry), ignore_errors=True)
  return folder


class _WarningsKept(logging.Handler):
  """The WARNING messages `logger` emits inside the `with` block, in `messages` (still logged)."""

  def __init__(self, logger):
    super().__init__(logging.WARNING)
    self.logger, self.messages = logger, []

  def emit(self, record):
    self.messages.append(record.getMessage())

  def __enter__(self):
    self.logger.addHandler(self)
    return self

  def __exit__(self, *exc):
    self.logger.removeHandler(self)


def _folder_or_absent(path):
  """One-line RSVQAError when `path`, a folder of the columnar cache, is something else."""
  if os.path.lexists(path) and not os.path.isdir(path):
    raise RSVQAError(f"{path}: not a folder, where the columnar cache goes; remove it and run "
                     "again")


def read_dataset(root, name):
  """records.Dataset of official folder `root`, read from its columnar form (built if needed)."""
  folder = ensure(root, name)
  vocab = storage.read_json(os.path.join(folder, VOCAB))
  strings = {}
  for col in STRING_COLUMNS:
    strings[col] = np.empty(len(vocab[col]), dtype=object)
    strings[col][:] = vocab[col]
  splits = {}
  for split in split_files.LAYOUTS[name].splits:
    load = lambda col: np.load(os.path.join(folder, f"{split}.{col}.npy"), mmap_mode="r")
    columns = {c: load(c) for c in ID_COLUMNS}
    columns.update({c: strings[c][load(c)] for c in STRING_COLUMNS})
    splits[split] = records.Split(name=split, **columns)
  return split_files.make_dataset(root, name, splits)


class _Strings:
  """Interned strings: text -> code in first-seen order."""

  def __init__(self):
    self.codes = {}

  def code(self, text):
    return self.codes.setdefault(text, len(self.codes))

  def values(self):
    return list(self.codes)


def build(root, name, out):
  """Writes the columns of every split of `root` and the vocabularies into `out`; rows per split."""
  strings = {c: _Strings() for c in STRING_COLUMNS}
  rows = {}
  for split in split_files.LAYOUTS[name].splits:
    columns = _read_split(root, name, split, strings)
    for col, values in columns.items():
      np.save(os.path.join(out, f"{split}.{col}.npy"), values)
    rows[split] = int(len(columns["question_id"]))
  storage.write_json(os.path.join(out, VOCAB), {c: s.values() for c, s in strings.items()})
  return rows


def _ints(typecode="q"):
  return array.array(typecode)


def _np(values, dtype=np.int64):
  return np.frombuffer(values, dtype=dtype) if len(values) else np.zeros(0, dtype)


def _check_unique(ids, path):
  """The JSON reader's "id appears twice" error for the first repeated id of a file, if any."""
  order = np.argsort(ids, kind="stable")
  ranked = ids[order]
  twice = np.flatnonzero(ranked[1:] == ranked[:-1]) + 1
  if len(twice):
    second = order[twice].min()
    i = ids[second]
    first = int(np.flatnonzero(ids == i)[0])
    raise RSVQAError(f"{path}: id {i} appears twice (entries {first} and {second})")


def _lookup(sorted_ids, order, wanted):
  """(found mask, position in the unsorted ids) of each of `wanted` among ids sorted by `order`."""
  pos = np.searchsorted(sorted_ids, wanted)
  pos = np.minimum(pos, max(len(sorted_ids) - 1, 0))
  found = sorted_ids[pos] == wanted if len(sorted_ids) else np.zeros(len(wanted), bool)
  return found, order[pos] if len(order) else pos


def _entries(path, key, required, all_ids):
  """(id, active, entry) of every entry of a split file, streamed; each id appended to all_ids."""
  pos = 0
  for block in json_stream.blocks(path, key):
    for e in block:
      i, flag = split_files.entry_id(e, pos, path, required)
      pos += 1
      all_ids.append(i)
      yield i, flag, e


def _read_images(path):
  """All ids, active ids, and the (image, question id) rows the active images list."""
  all_ids, active, row_image, row_question = _ints(), _ints(), _ints(), _ints()
  for i, flag, e in _entries(path, "images", ("questions_ids",), all_ids):
    if flag:
      qids = split_files.id_list(e["questions_ids"], path, f"image {i}", "questions_ids")
      active.append(i)
      row_question.extend(qids)
      row_image.extend([i] * len(qids))
  all_ids = _np(all_ids)
  _check_unique(all_ids, path)
  return all_ids, _np(active), _np(row_image), _np(row_question)


def _read_questions(path, name, strings):
  """All ids and the columns of the active questions: id, img_id, type, text, answers_ids[0]."""
  all_ids, qid, image, qtype, text, first = (_ints() for _ in range(6))
  more_answers, more_owner = _ints(), _ints()
  types, texts = strings["qtype"], strings["question"]
  required = ("img_id", "type", "question", "answers_ids")
  for i, flag, e in _entries(path, "questions", required, all_ids):
    if not flag:
      continue
    img = e["img_id"]
    if not records.is_id(img):
      raise RSVQAError(f"{path}: question {i} has img_id {short_repr(img)}: "
                       + records.id_problem(img, "expected an integer id"))
    t, q, ids = split_files.question_fields(e, i, path, name)
    qid.append(i)
    image.append(img)
    qtype.append(types.code(t))
    text.append(texts.code(q))
    first.append(ids[0])
    if len(ids) > 1:
      more_answers.extend(ids[1:])
      more_owner.extend([i] * (len(ids) - 1))
  all_ids = _np(all_ids)
  _check_unique(all_ids, path)
  return all_ids, {"question_id": _np(qid), "image_id": _np(image), "qtype": _np(qtype),
                   "question": _np(text), "first": _np(first), "more": _np(more_answers),
                   "more_owner": _np(more_owner)}


def _read_answers(path, strings):
  """All ids, active ids, their raw answer codes (-1: not a non-empty text) and those values,
  their question_id back-links (split_files.back_link) and the values of the odd ones."""
  all_ids, active, raw, back = _ints(), _ints(), _ints(), _ints()
  bad, odd, raws = {}, {}, strings["raw_answer"]
  for i, flag, e in _entries(path, "answers", ("answer",), all_ids):
    if flag:
      text = split_files.nonempty_text(e["answer"])
      active.append(i)
      back.append(split_files.back_link(e))
      if back[-1] == split_files.ODD_BACK_LINK:
        odd[i] = e["question_id"]
      if text is None:
        bad[i] = e["answer"]
        raw.append(-1)
      else:
        raw.append(raws.code(text))
  all_ids = _np(all_ids)
  _check_unique(all_ids, path)
  return all_ids, _np(active), _np(raw), _np(back), bad, odd


def _read_split(root, name, split, strings):
  """The columns of one split (rows in image order, then questions_ids order), as the JSON
  reader's read_split gives them, with its checks."""
  img_path, q_path, a_path = (split_files.split_file(root, name, split, k)
                              for k in split_files.KINDS)
  _, active_images, row_image, row_question = _read_images(img_path)
  q_all, q = _read_questions(q_path, name, strings)
  a_all, a_active, a_raw, a_back, bad, odd = _read_answers(a_path, strings)
  a_base = os.path.basename(a_path)

  # every active question: its image is active, its answers exist, the first one active
  img_sorted = np.sort(active_images)
  found, _ = _lookup(img_sorted, np.arange(len(img_sorted)), q["image_id"])
  if not found.all():
    k = int(np.flatnonzero(~found)[0])
    raise RSVQAError(f"{q_path}: question {q['question_id'][k]} has img_id {q['image_id'][k]} "
                     f"that points to no active image of {os.path.basename(img_path)}")
  a_order = np.argsort(a_active, kind="stable")
  found, where = _lookup(a_active[a_order], a_order, q["first"])
  if not found.all():
    k = int(np.flatnonzero(~found)[0])
    raise RSVQAError(f"{q_path}: question {q['question_id'][k]} has answers_ids starting with "
                     f"{q['first'][k]}: answer {q['first'][k]} points to no active answer of "
                     f"{a_base}")
  known = np.isin(q["more"], a_all)
  if not known.all():
    k = int(np.flatnonzero(~known)[0])
    raise RSVQAError(f"{q_path}: question {q['more_owner'][k]} has answers_ids with answer "
                     f"{q['more'][k]}, which does not exist in {a_base}")
  raw = a_raw[where]
  if (raw < 0).any():
    k = int(np.flatnonzero(raw < 0)[0])
    aid = int(q["first"][k])
    raise RSVQAError(f"{a_path}: answer {aid} (question {q['question_id'][k]}) is "
                     f"{short_repr(bad[aid])}: {split_files.text_problem(bad[aid])}")
  answer = _normalised(name, q, raw, strings, a_path)

  # the rows: each active image's questions_ids that are active questions of this split
  exists = np.isin(row_question, q_all)
  if not exists.all():
    k = int(np.flatnonzero(~exists)[0])
    raise RSVQAError(f"{img_path}: image {row_image[k]} lists question {row_question[k]} that "
                     f"does not exist in {os.path.basename(q_path)}")
  split_files.warn_unlisted(q_path, img_path,
                            q["question_id"][~np.isin(q["question_id"], row_question)])
  q_order = np.argsort(q["question_id"], kind="stable")
  active, at = _lookup(q["question_id"][q_order], q_order, row_question)
  split_files.warn_inactive_listed(img_path, q_path, row_question[~active])
  at, row_image = at[active], row_image[active]
  wrong = q["image_id"][at] != row_image
  if wrong.any():
    k = int(np.flatnonzero(wrong)[0])
    raise RSVQAError(f"{q_path}: question {q['question_id'][at[k]]} is listed by image "
                     f"{row_image[k]} but has img_id {q['image_id'][at[k]]}")
  qids, back, first = q["question_id"][at], a_back[where][at], q["first"][at]
  mismatched = np.flatnonzero((back != split_files.NO_BACK_LINK) & (back != qids))
  split_files.warn_back_links(a_path, [
      (int(first[k]), odd.get(int(first[k]), int(back[k])), int(qids[k])) for k in mismatched])
  split_files.warn_several_answers(q_path, qids[np.isin(qids, q["more_owner"])])
  return {"question_id": qids, "image_id": row_image,
          "qtype": q["qtype"][at].astype(np.int32), "question": q["question"][at].astype(np.int32),
          "answer": answer[at].astype(np.int32), "raw_answer": raw[at].astype(np.int32)}


def _normalised(name, q, raw, strings, a_path):
  """The code of each active question's normalised answer (answers.normalise per distinct
  (type, raw answer) pair)."""
  types, raws = strings["qtype"].values(), strings["raw_answer"].values()
  pairs, first, inverse = np.unique(q["qtype"] * len(raws) + raw, return_index=True,
                                    return_inverse=True)
  codes = np.empty(len(pairs), np.int64)
  for n, (pair, k) in enumerate(zip(pairs.tolist(), first.tolist())):
    qtype, text = types[pair // len(raws)], raws[pair % len(raws)]
    try:
      codes[n] = strings["answer"].code(answers_lib.normalise(name, qtype, text))
    except ValueError as e:
      raise RSVQAError(f"{a_path}: answer {q['first'][k]} (question {q['question_id'][k]}): "
                       f"{e}") from None
  return codes[inverse.reshape(-1)]
