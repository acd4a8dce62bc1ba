"""Subset keys of the dataset analysis: which samples share a most-common answer.

A level assigns every sample of a split one key (a tuple of strings); the samples with
the same key form a subset s of the paper's Section 3.4.

  all          ("all",): the whole split.
  type         (qtype,): the question type.
  question     (qtype, question): one question string, as written (FloodNet, Table 7).
  pattern      (qtype, pattern)      \
  object       (qtype, object)        > LR objects & patterns levels, see lr_templates.
  object_attr  (qtype, object_attr)  /
Every level below "all" starts with the question type, so its subsets nest in the types.
Questions that match no LR template get the pattern/object key "(unparsed)".
"""
import numpy as np

from rsvqa_jax.bias import lr_templates

LEVELS = ("all", "type", "question", "pattern", "object", "object_attr")
TEMPLATE_LEVELS = ("pattern", "object", "object_attr")
UNPARSED = "(unparsed)"


def _column(values):
  out = np.empty(len(values), dtype=object)
  out[:] = values
  return out


def parse_questions(split):
  """question string -> ParsedQuestion or None, for the distinct questions of a split."""
  return {q: lr_templates.parse(q) for q in dict.fromkeys(split.question.tolist())}


def _template_key(parsed, level):
  if parsed is None:
    return UNPARSED
  if level == "pattern":
    return parsed.pattern
  if level == "object":
    return parsed.object_key
  return parsed.object_attr_key


def keys(split, level, parsed=None):
  """The key of every sample of `split` at `level`, as an object array of tuples.

  Args:
    split: a records.Split.
    level: one of LEVELS.
    parsed: for the template levels, the output of `parse_questions` covering the split's
      questions (computed here when not given).
  """
  if level == "all":
    return _column([("all",)] * len(split))
  if level == "type":
    return _column([(t,) for t in split.qtype.tolist()])
  if level == "question":
    return _column(list(zip(split.qtype.tolist(), split.question.tolist())))
  if level in TEMPLATE_LEVELS:
    parsed = parse_questions(split) if parsed is None else parsed
    return _column([(t, _template_key(parsed[q], level))
                    for t, q in zip(split.qtype.tolist(), split.question.tolist())])
  raise ValueError(f"unknown subset level {level!r} (known: {', '.join(LEVELS)})")


def count_unparsed(split, parsed=None):
  """Number of samples of `split` whose question matches no LR template."""
  parsed = parse_questions(split) if parsed is None else parsed
  return sum(parsed[q] is None for q in split.question.tolist())
