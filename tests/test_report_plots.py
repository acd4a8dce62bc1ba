"""Figure 5's error bars stay within [0, 100] (a blind model at 100.00 (18.86) once drew past 100)."""
import numpy as np

from rsvqa_jax.bias import plots


def test_error_bars_are_clipped_to_the_accuracy_range():
  bars = plots.error_bars([100.0, 95.0, 50.0, 3.0], [18.86, 10.0, 5.0, 4.0])
  np.testing.assert_allclose(bars, [[18.86, 10.0, 5.0, 3.0], [0.0, 5.0, 5.0, 4.0]])


def test_figure5_draws(tmp_path):
  stats = {"comp": (1.0, 0.2), "OA": (0.5, 0.1)}
  path = plots.figure5([("LM, frozen", [("Reference model", stats), ("Visual blind", stats)])],
                       ["comp", "OA"], str(tmp_path / "f.png"))
  with open(path, "rb") as f:
    assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_answers_that_print_as_nothing_are_drawn_without_a_warning(tmp_path):
  """RSVQAxBEN answers are kept as written: "yes\x00" drew no glyph and matplotlib printed a
  UserWarning with its source lines (twice per figure); a script the font lacks did the same."""
  import warnings  # pylint: disable=g-import-not-at-top
  from rsvqa_jax.data import records  # pylint: disable=g-import-not-at-top
  rows = [{"question_id": i, "image_id": 0, "qtype": "presence", "question": "Is there a road?",
           "answer": a, "raw_answer": a} for i, a in enumerate(["yes\x00", "no\u200b", "是"])]
  splits = {"train": records.Split.from_rows("train", rows)}
  assert plots.short_label("yes\x00") == "yes\\x00"
  with warnings.catch_warnings():
    warnings.simplefilter("error")
    path = plots.answer_distribution(splits, str(tmp_path / "f7.png"))
  with open(path, "rb") as f:
    assert f.read(8) == b"\x89PNG\r\n\x1a\n"
