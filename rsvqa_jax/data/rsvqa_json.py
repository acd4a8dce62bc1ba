"""Readers for the official RSVQA JSON layouts (LR, HR, RSVQAxBEN) into records.Dataset.

A sample is image -> questions_ids -> question -> answers_ids[0], active entries only
(DESIGN.md section 3). Anything that would give a silently wrong dataset (missing split file,
malformed JSON, dangling ids, empty questions, non-numeric counts) raises a one-line
RSVQAError naming the file and the id: duplicate or non-integer ids, a non-boolean `active`,
null or empty answers and types, an id listed twice or naming no entry. An active question no
active image lists is left out, and an answer whose question_id names another question than the
one leading to it is used as answers_ids says, and a question of several answers_ids is
answered by its first, each with a WARNING counting them. Images are only located here;
`validate` decodes every one.
"""
import os

from rsvqa_jax.data import answers as answers_lib
from rsvqa_jax.data import columnar as columnar_lib
from rsvqa_jax.data import records
from rsvqa_jax.data import split_files
from rsvqa_jax.data.split_files import (
    KINDS, LAYOUTS, detect_variant, entry_id, id_list, load_json_list, make_dataset, nonempty_text,
    question_fields, split_file)
from rsvqa_jax.errors import RSVQAError, short_repr

COLUMNAR = ("xben",)  # layouts read_dataset reads through the columnar cache by default


def _active_by_id(entries, path, required):
  """id -> entry for the active entries, and the ids of all entries (active or not).

  A repeated id would silently replace an entry: it is refused.
  """
  active, position = {}, {}
  for pos, e in enumerate(entries):
    i, flag = entry_id(e, pos, path, required)
    if i in position:
      raise RSVQAError(f"{path}: id {i} appears twice (entries {position[i]} and {pos})")
    position[i] = pos
    if flag:
      active[i] = e
  return active, position.keys()


def _sample(name, qid, q, answers, answer_ids, q_path, a_path):
  """The row of an active question, checking every field it is built from."""
  qtype, text, ids = question_fields(q, qid, q_path, name)
  if ids[0] not in answers:
    raise RSVQAError(f"{q_path}: question {qid} has answers_ids {short_repr(ids)}: answer "
                     f"{ids[0]} points to no active answer of {os.path.basename(a_path)}")
  absent = next((a for a in ids if a not in answer_ids), None)
  if absent is not None:
    raise RSVQAError(f"{q_path}: question {qid} has answers_ids {short_repr(ids)}: answer {absent} "
                     f"does not exist in {os.path.basename(a_path)}")
  value = answers[ids[0]]["answer"]
  raw = nonempty_text(value)
  if raw is None:
    raise RSVQAError(f"{a_path}: answer {ids[0]} (question {qid}) is {short_repr(value)}: "
                     + split_files.text_problem(value))
  try:
    answer = answers_lib.normalise(name, qtype, raw)
  except ValueError as e:
    raise RSVQAError(f"{a_path}: answer {ids[0]} (question {qid}): {e}") from None
  return {"question_id": qid, "image_id": q["img_id"], "qtype": qtype, "question": text,
          "answer": answer, "raw_answer": raw}


def _mismatched_back_links(questions, answers, rows):
  """(answer id, question_id value, question id) of each sample's answer naming another
  question (split_files.warn_back_links)."""
  out = []
  for row in rows:
    qid = row["question_id"]
    aid = questions[qid]["answers_ids"][0]
    if split_files.back_link(answers[aid]) not in (split_files.NO_BACK_LINK, qid):
      out.append((aid, answers[aid]["question_id"], qid))
  return out


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
    if not records.is_id(img_id):
      raise RSVQAError(f"{q_path}: question {qid} has img_id {short_repr(img_id)}: "
                       + records.id_problem(img_id, "expected an integer id"))
    if img_id not in images:
      raise RSVQAError(f"{q_path}: question {qid} has img_id {short_repr(img_id)} that points to "
                       f"no active image of {os.path.basename(img_path)}")
    samples[qid] = _sample(name, qid, q, answers, answer_ids, q_path, a_path)
  rows, listed, inactive = [], set(), []
  for img_id, img in images.items():
    for qid in id_list(img["questions_ids"], img_path, f"image {img_id}", "questions_ids"):
      if qid not in question_ids:
        raise RSVQAError(f"{img_path}: image {img_id} lists question {qid} that does not exist in "
                         f"{os.path.basename(q_path)}")
      listed.add(qid)
      if qid not in samples:
        inactive.append(qid)
        continue
      if samples[qid]["image_id"] != img_id:
        raise RSVQAError(f"{q_path}: question {qid} is listed by image {img_id} but has img_id "
                         f"{samples[qid]['image_id']}")
      rows.append(samples[qid])
  split_files.warn_unlisted(q_path, img_path, [q for q in samples if q not in listed])
  split_files.warn_inactive_listed(img_path, q_path, inactive)
  split_files.warn_back_links(a_path, _mismatched_back_links(questions, answers, rows))
  split_files.warn_several_answers(q_path, [
      r["question_id"] for r in rows if len(questions[r["question_id"]]["answers_ids"]) > 1])
  return records.Split.from_rows(split, rows)


def read_dataset(root, name=None, columnar=None):
  """All splits of an official dataset folder; `name` is "lr", "hr" or "xben" (None: detect).

  `columnar`: read through the columnar cache of the folder (data/columnar.py, built on first
  use); None: for the layouts in COLUMNAR (RSVQAxBEN, 14.7M questions), plain JSON otherwise.
  """
  name = name or detect_variant(root)
  if name not in LAYOUTS:
    raise RSVQAError(f"unknown dataset {name!r}: expected one of {', '.join(LAYOUTS)}")
  split_files.check_layout(root, name)
  if columnar if columnar is not None else name in COLUMNAR:
    return columnar_lib.read_dataset(root, name)
  return make_dataset(root, name, {s: read_split(root, name, s) for s in LAYOUTS[name].splits})
