"""Grounding metrics on hand-built masks, AP worked by hand, and the score / stats commands."""
import csv
import json
import math

import numpy as np
import pytest

from rsvqa_jax import cli
from rsvqa_jax.bias import grounding as g

SIZE = 64


def box(y0, x0, y1, x1, size=SIZE):
  m = np.zeros((size, size), bool)
  m[y0:y1, x0:x1] = True
  return m


def disc(cy, cx, r, size=256):
  yy, xx = np.mgrid[:size, :size] + 0.5
  return (yy - cy) ** 2 + (xx - cx) ** 2 <= r * r


def test_iou_of_hand_built_masks():
  a = box(0, 0, 10, 10)
  assert g.iou(a, box(20, 20, 30, 30)) == 0.0  # disjoint
  assert g.iou(box(0, 0, 5, 10), a) == 0.5  # nested: 50 of 100 pixels
  assert g.iou(a, a) == 1.0  # identical
  assert g.iou(np.zeros_like(a), a) == 0.0  # empty prediction
  assert g.iou(None, a) == 0.0  # no prediction at all
  assert math.isnan(g.iou(a, np.zeros_like(a)))  # empty truth: undefined, left out
  assert g.iou(box(0, 0, 10, 20), box(0, 10, 10, 30)) == pytest.approx(100 / 300)


def test_statistics_of_a_disc_and_a_rectangle():
  s = g.statistics(disc(128, 64, 40))
  assert s["boundary_complexity"] == 0.0
  assert (s["centroid_x"], s["centroid_y"]) == (0.25, 0.5)
  assert s["coverage"] == pytest.approx(math.pi * 40 ** 2 / 256 ** 2, rel=0.01)
  # On its pixel contour a rectangle is not 0; on its four vertices (the paper's polygons) it is.
  assert g.statistics(box(10, 10, 50, 30))["boundary_complexity"] > 0.3
  # A 3 x 5 rectangle by hand: its contour is the 12 pixels around the 3 inner ones of the middle
  # row. From the centroid (offsets x -2..2, y -1..1) they lie at sqrt(5) (4 corners), 2 (the
  # left and right middle), sqrt(2) (4) and 1 (2, the top and bottom middle); over sqrt(5) that is
  # 1, 0.894, 0.632, 0.447: bins 9, 8, 6, 4 holding 4, 2, 4, 2 of 12.
  p = np.array([4, 2, 4, 2]) / 12
  assert g.statistics(box(4, 6, 7, 11, size=16))["boundary_complexity"] == pytest.approx(
      -(p * np.log(p)).sum() / np.log(10), abs=1e-12)
  assert g.polygon_boundary_complexity([(0, 0), (6, 0), (6, 2), (0, 2)]) == 0.0
  empty = g.statistics(np.zeros((8, 8), bool))
  assert empty["coverage"] == 0 and math.isnan(empty["boundary_complexity"])
  assert [g.bucket(c) for c in (0.1, 1 / 3, 0.5, 2 / 3, 1.0)] == [
      "small", "medium", "medium", "large", "large"]


def test_ap_on_four_samples_worked_by_hand():
  """Ranked by confidence, IoUs 0.8, 0.3, 0.6, 0.1. At t = 0.5 the hits are 1, 0, 1, 0: recall
  0.25, 0.25, 0.5, 0.5 and monotone precision 1, 2/3, 2/3, 1/2. Of the 101 recall points,
  0..0.25 (26) read 1, 0.26..0.50 (25) read 2/3, the rest 0. At t = 0.25 the hits are 1, 1, 1, 0
  (precision 1 up to recall 0.75: 76 points); at t = 0.75 one hit first (26 points)."""
  ious = [0.6, 0.8, 0.1, 0.3]
  conf = [0.7, 0.9, 0.6, 0.8]
  assert g.average_precision(ious, conf, 0.5) == pytest.approx((26 + 25 * 2 / 3) / 101)
  s = g.scores(ious, conf)
  assert s["ap_25"] == pytest.approx(76 / 101)
  assert s["ap_75"] == pytest.approx(26 / 101)
  # mAP 0.50:0.95: t 0.5, 0.55, 0.6 as t = 0.5; 0.65 .. 0.8 one hit first; 0.85 .. 0.95 none.
  expected = (3 * (26 + 25 * 2 / 3) / 101 + 4 * 26 / 101) / 10
  assert s["map_50_95"] == pytest.approx(expected)
  assert s["mean_iou"] == pytest.approx(0.45) and s["n"] == 4
  # A miss ranked first: hits 0, 1, precision 0, 1/2 at recall 0, 1/2. COCO reads at each recall
  # point the best precision at that recall or beyond, so recall 0 reads 1/2 too: points
  # 0..0.50 (51) read 1/2, the rest 0.
  assert g.average_precision([0.1, 0.9], [0.9, 0.8], 0.5) == pytest.approx(51 * 0.5 / 101)


def test_tied_confidences_are_one_threshold_whatever_the_sample_order():
  """One hit and one miss of equal confidence: ranked by sample order, AP was 51 or 25.5 of 101
  recall points by which question id held the hit. Read after the group: precision 1/2 up to
  recall 1/2 (51 points)."""
  assert g.average_precision([0.9, 0.1], [0.5, 0.5], 0.5) == pytest.approx(51 * 0.5 / 101)
  assert g.average_precision([0.1, 0.9], [0.5, 0.5], 0.5) == pytest.approx(51 * 0.5 / 101)
  # A tie after a hit: 1 at recall 1/3, then 2/3 at recall 2/3 (hit and miss of 0.5 together).
  assert g.average_precision([0.9, 0.1, 0.9], [0.8, 0.5, 0.5], 0.5) == pytest.approx(
      (34 + 33 * 2 / 3) / 101)
  assert g.average_precision([0.9, 0.9, 0.1], [0.8, 0.5, 0.5], 0.5) == pytest.approx(
      (34 + 33 * 2 / 3) / 101)
  # Questions without a map (NaN) are one group too, after everything.
  assert g.average_precision([0.9, 0.0, 0.0], [0.1, math.nan, math.nan], 0.5) == pytest.approx(
      34 / 101)


def test_binarize_resizes_normalises_and_reads_constant_maps():
  m = np.zeros((4, 4), np.uint8)
  m[:2, :2] = 200
  up = g.binarize(m, (8, 8))
  assert up.shape == (8, 8) and up[:3, :3].all() and not up[5:, :].any()
  assert g.binarize(np.full((3, 3), 7, np.uint8)).all()  # uniform: the whole image
  assert not g.binarize(np.zeros((3, 3), np.uint8)).any()  # all zero: empty
  x = np.random.default_rng(0).random((16, 16)).astype(np.float32)
  np.testing.assert_array_equal(g.binarize(g.to_uint8(x)), g.binarize(x))


def _write_masks(folder, masks):
  folder.mkdir(parents=True, exist_ok=True)
  for qid, m in masks.items():
    g.write_png(str(folder / f"{qid}.png"), np.asarray(m, np.uint8) * 255)


def test_masks_of_16_bits_keep_their_values_and_alpha_only_masks_are_refused(tmp_path):
  """PIL's grey conversion clips 16-bit values, so a 16-bit map read as one constant 255; scaled
  to 8 bits, a 16-bit 0/1 mask (or a map of low values) read as empty."""
  from PIL import Image  # pylint: disable=g-import-not-at-top
  ramp = np.arange(4 * 4, dtype=np.uint16).reshape(4, 4) * 4369  # 0 .. 65535 in 15 steps
  Image.fromarray(ramp).save(tmp_path / "16.png")
  assert Image.open(tmp_path / "16.png").mode == "I;16"
  np.testing.assert_array_equal(g.read_mask(str(tmp_path / "16.png")), ramp)
  truth = box(1, 1, 3, 3, size=4)
  for values in ((0, 1), (10, 110), (0, 65535)):
    Image.fromarray(np.where(truth, values[1], values[0]).astype(np.uint16)).save(
        tmp_path / "m.png")
    np.testing.assert_array_equal(g.binarize(g.read_mask(str(tmp_path / "m.png"))), truth)
  rgba = np.zeros((4, 4, 4), np.uint8)
  rgba[:2, :, 3] = 255
  Image.fromarray(rgba, "RGBA").save(tmp_path / "alpha.png")
  with pytest.raises(g.RSVQAError, match=r"alpha.png: the mask is drawn in the alpha channel only "
                                         r"\(over black its colour shows nothing\)"):
    g.read_mask(str(tmp_path / "alpha.png"))
  rgba[:2, :, :3] = 255  # drawn in colour as well: read as grey
  Image.fromarray(rgba, "RGBA").save(tmp_path / "both.png")
  assert g.read_mask(str(tmp_path / "both.png"))[:2].min() == 255


def test_a_mask_on_a_transparent_white_background_is_read_over_black(tmp_path):
  """Red opaque shape, transparent white elsewhere: grey alone read the background (255) as the
  mask and the shape (76) as outside it, an IoU of 0 for a perfect mask."""
  from PIL import Image  # pylint: disable=g-import-not-at-top
  truth = box(2, 1, 6, 5, size=8)
  rgba = np.zeros((8, 8, 4), np.uint8)
  rgba[...] = (255, 255, 255, 0)
  rgba[truth] = (255, 0, 0, 255)
  Image.fromarray(rgba, "RGBA").save(tmp_path / "1.png")
  np.testing.assert_array_equal(g.binarize(g.read_mask(str(tmp_path / "1.png"))), truth)
  grey_alpha = np.stack([np.full((8, 8), 200, np.uint8), truth.astype(np.uint8) * 255], -1)
  Image.fromarray(grey_alpha, "LA").save(tmp_path / "2.png")  # one colour, shape in alpha
  np.testing.assert_array_equal(g.binarize(g.read_mask(str(tmp_path / "2.png"))), truth)


def test_transparency_of_a_trns_chunk_is_read_over_black(tmp_path):
  """A palette or grey PNG marks its transparent pixels in a tRNS chunk, not an alpha band: read
  by colour alone, the transparent white background was the mask, an IoU of 0 for a perfect one."""
  from PIL import Image  # pylint: disable=g-import-not-at-top
  truth = box(2, 1, 6, 5, size=8)
  palette = Image.fromarray(truth.astype(np.uint8), "P")
  palette.putpalette([255, 255, 255, 255, 0, 0])  # 0: white, 1: red
  palette.save(tmp_path / "p.png", transparency=0)
  Image.fromarray(np.where(truth, 100, 255).astype(np.uint8), "L").save(tmp_path / "l.png",
                                                                        transparency=255)
  for name in ("p.png", "l.png"):
    assert "transparency" in Image.open(tmp_path / name).info
    np.testing.assert_array_equal(g.binarize(g.read_mask(str(tmp_path / name))), truth)
  clear = np.full((8, 8, 4), 255, np.uint8)
  clear[..., 3] = 0  # white everywhere, all of it transparent: nothing shows
  Image.fromarray(clear, "RGBA").save(tmp_path / "clear.png")
  assert not g.binarize(g.read_mask(str(tmp_path / "clear.png"))).any()


def _png_16_bit(path, pixels, colour_type):
  """A PNG of 16 bits per sample (PIL writes none of colour): `pixels` uint16 [H, W, C]."""
  import struct  # pylint: disable=g-import-not-at-top
  import zlib  # pylint: disable=g-import-not-at-top
  chunk = lambda kind, data: (struct.pack(">I", len(data)) + kind + data
                              + struct.pack(">I", zlib.crc32(kind + data)))
  h, w = pixels.shape[:2]
  rows = b"".join(b"\0" + row.astype(">u2").tobytes() for row in pixels)
  path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 16,
                                                                       colour_type, 0, 0, 0))
                   + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


@pytest.mark.parametrize("colour_type, channels", [(2, 3), (6, 4), (4, 2)])
def test_16_bit_colour_or_alpha_is_refused(tmp_path, colour_type, channels):
  """PIL opens these as 8-bit bands of each value's high byte: a 16-bit 0/1 mask read empty."""
  pixels = np.repeat(box(2, 2, 6, 6, size=8).astype(np.uint16)[..., None], channels, -1)
  pixels[..., -1] = np.where(channels in (2, 4), 65535, pixels[..., -1])  # alpha opaque
  _png_16_bit(tmp_path / "1.png", pixels, colour_type)
  with pytest.raises(g.RSVQAError, match=r"1.png: a 16-bit PNG of colour or alpha, whose values "
                                         r"read back cut to their high byte"):
    g.read_mask(str(tmp_path / "1.png"))
  _png_16_bit(tmp_path / "2.png", pixels[..., :1], 0)  # 16-bit grey: kept as it is
  np.testing.assert_array_equal(g.binarize(g.read_mask(str(tmp_path / "2.png"))),
                                box(2, 2, 6, 6, size=8))


def test_a_colour_scale_is_refused_and_shades_of_one_colour_read(tmp_path):
  """A jet-coloured map read by brightness scored an IoU of 0.51 for a map whose top values are
  the truth exactly (jet's top and bottom are both dark). Scales of rising brightness (viridis,
  plt.imsave's default) and shades of one colour read right as grey, resized ones too."""
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top
  from matplotlib import colormaps  # pylint: disable=g-import-not-at-top
  from PIL import Image  # pylint: disable=g-import-not-at-top
  values = np.linspace(0, 1, 256).reshape(16, 16)
  jet = (colormaps["jet"](values)[..., :3] * 255).round().astype(np.uint8)
  Image.fromarray(jet, "RGB").save(tmp_path / "jet.png")
  with pytest.raises(g.RSVQAError, match=r"jet.png: a colour map whose brightness does not "
                                         r"follow its colours \(a colour scale such as jet\?\)"):
    g.read_mask(str(tmp_path / "jet.png"))
  viridis = (colormaps["viridis"](values)[..., :3] * 255).round().astype(np.uint8)
  Image.fromarray(viridis, "RGB").save(tmp_path / "viridis.png")
  kept = g.binarize(g.read_mask(str(tmp_path / "viridis.png")))
  assert values[kept].min() > values[~kept].max()  # the highest values, where brightness puts them
  truth = box(16, 16, 48, 48)
  plt.imsave(tmp_path / "imsave.png", truth.astype(float))  # viridis: purple and yellow
  np.testing.assert_array_equal(g.binarize(g.read_mask(str(tmp_path / "imsave.png"))), truth)
  orange = np.zeros((SIZE, SIZE, 3), np.uint8)
  orange[truth] = (255, 128, 0)
  Image.fromarray(orange).resize((128, 128)).save(tmp_path / "orange.png")  # bicubic overshoot
  assert g.read_mask(str(tmp_path / "orange.png")).shape == (128, 128)
  red = np.zeros((16, 16, 3), np.uint8)
  red[..., 0] = np.round(values * 255).astype(np.uint8)  # red on black, graded: its brightness
  Image.fromarray(red, "RGB").save(tmp_path / "red.png")
  kept = g.binarize(g.read_mask(str(tmp_path / "red.png")))
  assert values[kept].min() > values[~kept].max() and abs(kept.mean() - 0.5) < 0.02


@pytest.mark.parametrize("kind", ["JPEG", "GIF", "BMP"])
def test_another_format_under_a_png_name_is_refused(tmp_path, kind):
  """PIL reads any format whatever the name: a JPEG's ringing moved the mask's edges."""
  from PIL import Image  # pylint: disable=g-import-not-at-top
  Image.fromarray(np.asarray(box(0, 0, 4, 4), np.uint8) * 255, "L").save(tmp_path / "3.png",
                                                                            format=kind)
  with pytest.raises(g.RSVQAError, match=rf"^{tmp_path}/3.png: a {kind} image under a .png name; "
                                         r"save the mask as a PNG \(lossless\)$"):
    g.read_mask(str(tmp_path / "3.png"))


def test_a_decompression_bomb_is_refused_in_one_line(tmp_path):
  """A PNG header claiming 20000 x 20000 pixels raised PIL's DecompressionBombError, which is
  no OSError."""
  import struct  # pylint: disable=g-import-not-at-top
  import zlib  # pylint: disable=g-import-not-at-top
  chunk = lambda kind, data: (struct.pack(">I", len(data)) + kind + data
                              + struct.pack(">I", zlib.crc32(kind + data)))
  header = struct.pack(">IIBBBBB", 20000, 20000, 8, 0, 0, 0, 0)
  (tmp_path / "1.png").write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
                                   + chunk(b"IDAT", zlib.compress(bytes(1000)))
                                   + chunk(b"IEND", b""))
  with pytest.raises(g.RSVQAError, match=r"1.png: not a readable PNG mask \(Image size"):
    g.read_mask(str(tmp_path / "1.png"))


def test_a_mask_named_in_other_digits_is_another_file(tmp_path):
  """\\d took '\u0661.png' (Arabic-Indic 1) as question 1: a file no one names so is counted
  among the files ignored, as csv_columns refuses such ids."""
  _write_masks(tmp_path / "P", {2: box(0, 0, 4, 4)})
  g.write_png(str(tmp_path / "P" / "\u0661.png"), np.zeros((SIZE, SIZE), np.uint8))
  assert list(g.mask_files(str(tmp_path / "P"), "--predicted")) == [2]
  assert g.other_files(str(tmp_path / "P")) == ["\u0661.png"]


def test_score_command(tmp_path, capsys):
  truth = {1: box(0, 0, 10, 10), 2: box(20, 20, 40, 60), 3: box(0, 0, 64, 50),
           4: np.zeros((SIZE, SIZE), bool), 5: box(5, 5, 9, 9)}
  predicted = {1: box(0, 0, 10, 10), 2: box(20, 20, 40, 40), 3: np.zeros((SIZE, SIZE), bool),
               4: box(0, 0, 3, 3), 9: box(0, 0, 1, 1)}
  _write_masks(tmp_path / "T", truth)
  _write_masks(tmp_path / "P", predicted)
  (tmp_path / "T" / "index.json").write_text("{}")  # other files are ignored
  (tmp_path / "P" / "notes.txt").write_text("x")  # ignored and counted
  conf = tmp_path / "c.csv"
  conf.write_text("question_id,confidence\n1,0.9\n2,0.8\n3,0.7\n4,0.1\n9,0.5\n")
  out = tmp_path / "O"
  assert cli.main(["grounding", "score", "--predicted", str(tmp_path / "P"), "--truth",
                   str(tmp_path / "T"), "--out", str(out), "--confidence", str(conf)]) == 0
  printed = capsys.readouterr().out
  assert "mean IoU 37.50%" in printed  # in percent, as the tables print it
  assert (f"--predicted {tmp_path / 'P'}: ignored 1 mask(s) of questions without a truth mask and "
          "1 file(s) not named {question_id}.png") in printed
  assert f"--truth {tmp_path / 'T'}: ignored 1 file(s) not named {{question_id}}.png" in printed
  assert f"--confidence {conf}: ignored 1 row(s) of questions without a truth mask" in printed
  with open(out / "grounding.csv", newline="") as f:
    rows = list(csv.DictReader(f))
  assert list(rows[0]) == ["question_id", "iou", "coverage", "centroid_x", "centroid_y",
                           "boundary_complexity"]
  by_id = {int(r["question_id"]): r for r in rows}
  assert [float(by_id[q]["iou"]) for q in (1, 2, 3, 5)] == [1.0, 0.5, 0.0, 0.0]
  assert by_id[4]["iou"] == "" and by_id[4]["coverage"] == "0.0"  # empty truth
  assert float(by_id[2]["centroid_x"]) == pytest.approx(40 / 64)
  s = json.loads((out / "summary.json").read_text())
  assert (s["n_questions"], s["n_scored"], s["n_empty_truth"], s["n_missing_prediction"],
          s["n_extra_prediction"], s["n_other_files"], s["n_other_truth_files"],
          s["n_extra_confidence"]) == (5, 4, 1, 1, 1, 1, 1, 1)
  # Two files naming one question: either could be the mask meant.
  g.write_png(str(tmp_path / "P" / "002.png"), np.zeros((SIZE, SIZE), np.uint8))
  assert cli.main(["grounding", "score", "--predicted", str(tmp_path / "P"), "--truth",
                   str(tmp_path / "T"), "--out", str(out)]) == 2
  assert (f"--predicted {tmp_path / 'P'}: 002.png and 2.png both name question 2; keep one"
          in capsys.readouterr().err)
  assert s["mean_iou"] == pytest.approx(0.375)
  # ranked 1 (hit), 2 (hit at 0.5), 3 (miss), 5 (no prediction: last, a miss)
  assert s["ap_50"] == pytest.approx(51 / 101) and s["ap_75"] == pytest.approx(26 / 101)
  assert s["by_coverage"]["large"]["n"] == 1 and s["by_coverage"]["small"]["n"] == 3
  assert (out / "iou_by_coverage.png").stat().st_size > 0


def test_score_errors_are_one_line(tmp_path, capsys):
  _write_masks(tmp_path / "T", {1: box(0, 0, 4, 4)})
  _write_masks(tmp_path / "P", {1: box(0, 0, 4, 4)})
  conf = tmp_path / "c.csv"
  conf.write_text("question_id,confidence\n2,0.5\n")
  base = ["grounding", "score", "--predicted", str(tmp_path / "P"), "--truth", str(tmp_path / "T"),
          "--out", str(tmp_path / "O")]
  assert cli.main(base + ["--confidence", str(conf)]) == 2
  assert "no confidence for question 1" in capsys.readouterr().err
  conf.write_text("question_id,score\n1,0.5\n")
  assert cli.main(base + ["--confidence", str(conf)]) == 2
  assert "missing column(s) confidence" in capsys.readouterr().err
  (tmp_path / "P" / "1.png").write_bytes(b"not a png")
  assert cli.main(base) == 2
  assert "1.png: not a readable PNG mask" in capsys.readouterr().err
  assert cli.main(["grounding", "score", "--truth", str(tmp_path / "T"), "--out", "x"]) == 2
  assert cli.main(["grounding", "stats", "--truth", str(tmp_path / "nope"), "--out", "x"]) == 2
  assert "--truth" in capsys.readouterr().err
  # a predictions folder with no mask of a truth question scored mean IoU 0 and exited 0
  (tmp_path / "E").mkdir()
  (tmp_path / "P" / "1.png").unlink()
  _write_masks(tmp_path / "P", {7: box(0, 0, 4, 4)})
  for folder, message in (("E", f"--predicted {tmp_path / 'E'}: holds no {{question_id}}.png "
                                "mask"),
                          ("P", f"--predicted {tmp_path / 'P'}: none of its 1 mask(s) is of a "
                                "question of --truth (e.g. 7.png there, 1.png in --truth)")):
    base[3] = str(tmp_path / folder)
    assert cli.main(base) == 2
    assert capsys.readouterr().err.strip().endswith(message)
  assert not (tmp_path / "O").exists()


def test_stats_command(tmp_path, capsys):
  masks = {1: disc(128, 128, 60), 2: disc(64, 192, 20), 3: np.zeros((256, 256), bool)}
  _write_masks(tmp_path / "T", masks)
  out = tmp_path / "S"
  assert cli.main(["grounding", "stats", "--truth", str(tmp_path / "T"), "--out", str(out)]) == 0
  printed = capsys.readouterr().out
  s = json.loads((out / "statistics.json").read_text())
  c = s["coverage"]
  sig = g.significant
  assert (f"3 masks (1 empty): coverage {sig(100 * c['mean'])}% +- {sig(100 * c['std'])}% of the "
          "image area") in printed
  assert s["boundary_complexity"]["mean"] == 0.0 and s["coverage"]["n"] == 2
  assert s["centroid_x"]["mean"] == pytest.approx((0.5 + 0.75) / 2)
  row = next(l for l in (out / "statistics.md").read_text().splitlines() if l.startswith("| T "))
  assert row.startswith("| T | 2 | ") and "+- " in row  # n: the masks it is over (it read 3)
  assert (out / "boxplots.png").exists() and (out / "statistics.csv").exists()


def test_benchmark_row_in_toy_mode():
  from benchmarks import grounding as family, run
  section, targets = family.run("toy", log=lambda m: None)
  (row,) = section["rows"]
  assert row["masks"] == 40 and row["scored"] + row["empty_truth"] == 40
  assert targets[0]["status"] in ("PASS", "MISS") and "wall s" in targets[0]["name"]
  assert "| 40 | 64 |" in "\n".join(run.RENDER["grounding"](section))


def test_all_empty_truths_are_said_so_not_scored_as_nan(tmp_path, capsys):
  """Questions whose answer shows nowhere have empty truths: nothing to score or to describe."""
  empty = np.zeros((SIZE, SIZE), bool)
  _write_masks(tmp_path / "T", {1: empty, 2: empty})
  _write_masks(tmp_path / "P", {1: box(0, 0, 4, 4)})
  assert cli.main(["grounding", "score", "--predicted", str(tmp_path / "P"), "--truth",
                   str(tmp_path / "T"), "--out", str(tmp_path / "O")]) == 2
  assert capsys.readouterr().err.strip().endswith(
      "all 2 truth mask(s) are empty (questions whose answer shows nowhere): no grounding to score")
  assert not (tmp_path / "O").exists()
  assert cli.main(["grounding", "stats", "--truth", str(tmp_path / "T"),
                   "--out", str(tmp_path / "S")]) == 0
  printed = capsys.readouterr().out
  assert "2 masks, all empty: no coverage or boundary complexity to report" in printed
  assert "nan" not in printed


@pytest.mark.parametrize("action,flags", [
    ("stats", ["--split", "test"]), ("stats", ["--images", "shuffled"]),
    ("score", ["--checkpoint", "last"]), ("score", ["--method", "gradcam"]),
    ("stats", ["--data-root", "d"]), ("score", ["--allow-pickle"])])
def test_mask_forms_refuse_the_workdir_forms_options(tmp_path, capsys, action, flags):
  """`grounding stats --split test` counted every mask of --truth, and said nothing of it."""
  argv = ["grounding", action, "--truth", str(tmp_path), "--out", str(tmp_path / "O")]
  argv += ["--predicted", str(tmp_path)] if action == "score" else []
  assert cli.main(argv + flags) == 2
  assert capsys.readouterr().err.strip().endswith(f"{flags[0]} does not apply to grounding "
                                                  f"{action}")
  assert not (tmp_path / "O").exists()


def test_score_and_stats_never_write_into_a_mask_folder_or_a_dataset(tmp_path, capsys):
  from rsvqa_jax.data import synthetic  # pylint: disable=g-import-not-at-top
  _write_masks(tmp_path / "T", {1: box(0, 0, 10, 10)})
  _write_masks(tmp_path / "P", {1: box(0, 0, 10, 10)})
  base = ["grounding", "score", "--predicted", str(tmp_path / "P"), "--truth", str(tmp_path / "T")]
  for flag in ("--truth", "--predicted"):
    folder = tmp_path / flag.lstrip("-")[0].upper()
    assert cli.main([*base, "--out", str(folder)]) == 2
    assert capsys.readouterr().err.strip().endswith(
        f"--out {folder} is the {flag} folder; give the scores a folder of its own")
  assert sorted(p.name for p in (tmp_path / "T").iterdir()) == ["1.png"]
  data = tmp_path / "data"
  synthetic.generate(str(data), "lr", images=3, seed=0, questions_per_image=2)
  assert cli.main(["grounding", "stats", "--truth", str(tmp_path / "T"), "--out", str(data)]) == 2
  assert "holds a dataset (LR_split_train_questions.json); give the statistics a folder of its " \
         "own" in capsys.readouterr().err
  for inside in (data / "Grounding", data / "Images_LR", data / "Grounding" / "sub"):
    assert cli.main(["grounding", "stats", "--truth", str(tmp_path / "T"), "--out",
                     str(inside)]) == 2
    assert capsys.readouterr().err.strip().endswith(
        f"--out {inside} lies inside the dataset {data}; give the statistics a folder of its own")
  assert not (data / "Grounding" / "sub").exists()


def test_a_map_of_another_aspect_ratio_is_refused_not_stretched(tmp_path, capsys):
  _write_masks(tmp_path / "T", {1: box(0, 0, 32, 32)})
  (tmp_path / "P").mkdir()
  g.write_png(str(tmp_path / "P" / "1.png"), np.zeros((SIZE, SIZE // 4), np.uint8))
  base = ["grounding", "score", "--predicted", str(tmp_path / "P"), "--truth", str(tmp_path / "T")]
  assert cli.main([*base, "--out", str(tmp_path / "O")]) == 2
  assert f"1.png: a {SIZE}x{SIZE // 4} map for a {SIZE}x{SIZE} truth mask" in capsys.readouterr().err
  g.write_png(str(tmp_path / "P" / "1.png"), np.full((8, 8), 255, np.uint8))  # coarser, square
  assert cli.main([*base, "--out", str(tmp_path / "O")]) == 0


def test_a_missing_prediction_ranks_after_one_of_confidence_minus_inf(tmp_path, capsys):
  """A log-probability confidence can be -inf; a question without a map must still rank last
  (a miss ranked first would halve AP here: 26 of 101 recall points instead of 51)."""
  _write_masks(tmp_path / "T", {1: box(0, 0, 10, 10), 2: box(0, 0, 10, 10)})
  _write_masks(tmp_path / "P", {2: box(0, 0, 10, 10)})
  conf = tmp_path / "c.csv"
  conf.write_text("question_id,confidence\n2,-inf\n")
  out = tmp_path / "O"
  assert cli.main(["grounding", "score", "--predicted", str(tmp_path / "P"), "--truth",
                   str(tmp_path / "T"), "--out", str(out), "--confidence", str(conf)]) == 0
  assert json.loads((out / "summary.json").read_text())["ap_50"] == pytest.approx(51 / 101)


def test_a_confidence_of_a_question_without_a_map_is_ignored_and_counted(tmp_path, capsys):
  """Question 2 has a truth and no map: a miss ranked after every prediction. Its row in the
  confidence file ranked it at 0.5, before question 3's hit: the same maps scored two ways."""
  _write_masks(tmp_path / "T", {1: box(0, 0, 10, 10), 2: box(0, 0, 10, 10), 3: box(5, 5, 9, 9)})
  _write_masks(tmp_path / "P", {1: box(0, 0, 10, 10)})
  g.write_png(str(tmp_path / "P" / "3.PNG"), np.asarray(box(5, 5, 9, 9), np.uint8) * 255)
  (tmp_path / "P" / "0.jpg").write_bytes(b"x")
  results = []
  for rows in ("1,0.9\n3,0.2\n", "1,0.9\n2,0.5\n3,0.2\n"):
    conf = tmp_path / "c.csv"
    conf.write_text("question_id,confidence\n" + rows)
    out = tmp_path / "O"
    assert cli.main(["grounding", "score", "--predicted", str(tmp_path / "P"), "--truth",
                     str(tmp_path / "T"), "--out", str(out), "--confidence", str(conf)]) == 0
    results.append(json.loads((out / "summary.json").read_text()))
  printed = capsys.readouterr().out
  assert results[0]["ap_50"] == results[1]["ap_50"] == pytest.approx(67 / 101)  # 1 to recall 2/3
  assert (results[1]["n_confidence_without_map"], results[1]["n_missing_prediction"]) == (1, 1)
  assert ("ignored 0 row(s) of questions without a truth mask and 1 of questions without a "
          "predicted map (a miss, ranked after every prediction)") in printed
  assert "1 file(s) not named {question_id}.png (e.g. '0.jpg')" in printed  # 3.PNG: question 3's


def test_score_never_replaces_a_workdir_evaluation(tmp_path, capsys):
  """The evaluation's docstring rescores O/maps; --out O would replace its grounding.csv and
  summary.json with the score's."""
  _write_masks(tmp_path / "T", {1: box(0, 0, 10, 10)})
  _write_masks(tmp_path / "O" / "maps", {1: box(0, 0, 10, 10)})
  (tmp_path / "O" / "summary.json").write_text("{}")
  assert cli.main(["grounding", "score", "--predicted", str(tmp_path / "O" / "maps"), "--truth",
                   str(tmp_path / "T"), "--out", str(tmp_path / "O")]) == 2
  assert capsys.readouterr().err.strip().endswith(
      f"--out {tmp_path / 'O'} holds a grounding evaluation (maps/); give the scores a folder of "
      "its own")
  assert (tmp_path / "O" / "summary.json").read_text() == "{}"
  assert not (tmp_path / "O" / "grounding.csv").exists()


def test_truth_masks_of_more_than_two_values_are_named_as_a_likely_swap(tmp_path, caplog):
  """--predicted and --truth swapped scored relevance maps as the truth without a word."""
  from test_train_support import warnings_of_rsvqa_jax  # pylint: disable=g-import-not-at-top
  truth = {1: box(0, 0, 10, 10), 2: box(20, 20, 40, 60)}
  _write_masks(tmp_path / "T", truth)
  ramp = np.tile(np.arange(SIZE, dtype=np.uint8) * 4, (SIZE, 1))  # a relevance map
  (tmp_path / "M").mkdir()
  g.write_png(str(tmp_path / "M" / "1.png"), ramp)
  g.write_png(str(tmp_path / "M" / "2.png"), truth[2].astype(np.uint8) * 255)
  score = ["grounding", "score", "--out", str(tmp_path / "O")]
  with warnings_of_rsvqa_jax(caplog):
    assert cli.main(score + ["--predicted", str(tmp_path / "M"), "--truth",
                             str(tmp_path / "T")]) == 0
    assert not caplog.records
    assert cli.main(score + ["--predicted", str(tmp_path / "T"), "--truth",
                             str(tmp_path / "M")]) == 0
    assert cli.main(["grounding", "stats", "--truth", str(tmp_path / "M"), "--out",
                     str(tmp_path / "S")]) == 0
  assert [r.getMessage() for r in caplog.records] == [
      f"--truth {tmp_path / 'M'}: 1 of 2 truth mask(s) hold more than two values (e.g. "
      f"{tmp_path / 'M' / '1.png'}); truth masks are binary (0 and 255): are --predicted and "
      "--truth swapped?"] * 2


def test_masks_drawn_dark_on_white_are_named_as_likely_inverted(tmp_path, caplog):
  """Bright is the object: a black-on-white mask read as its complement, an IoU near 0 without a
  word. A frame of object around background inside is how such a mask reads."""
  from test_train_support import warnings_of_rsvqa_jax  # pylint: disable=g-import-not-at-top
  assert g.framed(~box(20, 20, 40, 40)) and not g.framed(box(20, 20, 40, 40))
  assert not g.framed(np.ones((SIZE, SIZE), bool)) and not g.framed(box(0, 0, SIZE, 40))
  truth = {1: box(20, 20, 40, 40), 2: box(0, 0, 10, 10)}
  _write_masks(tmp_path / "T", truth)
  _write_masks(tmp_path / "P", {1: ~truth[1], 2: truth[2]})  # 1 drawn black on white
  score = ["grounding", "score", "--out", str(tmp_path / "O"), "--truth"]
  with warnings_of_rsvqa_jax(caplog):
    assert cli.main(score + [str(tmp_path / "T"), "--predicted", str(tmp_path / "T")]) == 0
    assert not caplog.records
    assert cli.main(score + [str(tmp_path / "T"), "--predicted", str(tmp_path / "P")]) == 0
    assert cli.main(["grounding", "stats", "--truth", str(tmp_path / "P"), "--out",
                     str(tmp_path / "S")]) == 0
  named = (f"{tmp_path / 'P'}: 1 of 2 mask(s) are the object along their whole border around a "
           f"background inside (e.g. {tmp_path / 'P' / '1.png'}); bright pixels are read as the "
           "object, so a dark object drawn on white reads inverted: invert those masks if so (a "
           "class covering all but an inner patch is right as it is)")
  assert [r.getMessage() for r in caplog.records] == [f"--predicted {named}", f"--truth {named}"]


def test_a_grounding_mean_over_runs_says_when_some_runs_lack_the_value():
  """A mean IoU one seed lacks (no correct answer to score) read "50.00 (0.00)": one run's value
  shown as a mean and std over both."""
  from rsvqa_jax.bias import grounding_report  # pylint: disable=g-import-not-at-top
  cell = grounding_report._cell  # pylint: disable=protected-access
  assert cell([0.5, None]) == "50.00 (1 of 2 runs)"
  assert cell([0.5, 0.7]) == "60.00 (10.00)" and cell([0.5]) == 0.5
