"""Evaluation accuracy: answers outside the training vocabulary count as wrong and are reported."""
import numpy as np
import pytest

from rsvqa_jax.data.records import Split
from rsvqa_jax.train import loop


def test_out_of_vocabulary_answers_are_wrong_and_counted():
  rows = [dict(question_id=i, image_id=0, qtype=t, question="q", answer="a", raw_answer="a")
          for i, t in enumerate(["presence", "presence", "count", "count"])]
  split = Split.from_rows("test", rows)
  answers = np.array([0, -1, 1, -1])
  preds = np.array([0, -1, 1, 2])  # a -1 prediction never matches a -1 answer
  table = loop.accuracy_table(split, preds, answers)
  assert table["n_out_of_vocabulary"] == 2
  assert table["oa"] == pytest.approx(0.5)
  assert table["per_type"] == pytest.approx({"presence": 0.5, "count": 0.5})
