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
