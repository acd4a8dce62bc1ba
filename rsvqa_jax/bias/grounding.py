"""Answer grounding scores and statistics (VizWiz-VQA-Grounding, DESIGN.md 6.2), pure NumPy.

A grounding is a boolean mask of the pixels that hold the answer. A relevance map (an 8-bit
PNG, an attention or Grad-CAM map) becomes one the same way everywhere: resized to the truth's
size (bilinear, half-pixel centres), min-max normalised, kept where >= 0.5. A constant map ranks
nothing: it is the whole image when positive (a uniform map, the floor of a model that looks
nowhere in particular) and empty at 0. An 8-bit map rounded from a float one keeps every pixel's
side of the threshold, so a model scored in memory and from its written PNGs agree.

Per sample: IoU with the truth (undefined, NaN, when the truth is empty: such questions are
counted apart, never averaged in), and of the truth mask its coverage (share of pixels; bucket
small < 1/3 <= medium < 2/3 <= large), centroid (x, y) in [0, 1] of width and height, and
boundary complexity: the entropy of the histogram (10 bins over [0, 1]) of the centroid-to-contour
distances divided by the largest one, over log 10 (contour: mask pixels with a 4-neighbour
outside the mask or the image). A disc scores 0; on polygon vertices (the paper's annotations,
`polygon_boundary_complexity`) a rectangle does too, on its pixel contour it does not.

Over samples: mean IoU, and with a confidence per sample AP at IoU 0.25 / 0.5 / 0.75 and mAP over
0.50:0.05:0.95: one prediction per sample ranked by confidence (ties: one threshold), a hit when
IoU >= t, precision made monotone and read at 101 recall points as COCO does; a sample without a
prediction is a miss (IoU 0).
"""
import csv
import io
import logging
import math
import os
import re

import numpy as np
from matplotlib.figure import Figure
from PIL import Image

from rsvqa_jax import errors
from rsvqa_jax import progress
from rsvqa_jax import storage
from rsvqa_jax.bias import tables
from rsvqa_jax.data import csv_columns
from rsvqa_jax.errors import RSVQAError

THRESHOLD = 0.5
_LUMA = np.array([0.299, 0.587, 0.114])  # PIL's grey conversion, which reads a colour map
_SAME_LUMA, _FAR_APART = 2.0, 64  # _colours: brightness levels, channel levels
AP_KEYS = {"ap_25": 0.25, "ap_50": 0.5, "ap_75": 0.75}
MAP_THRESHOLDS = tuple(round(0.5 + 0.05 * k, 2) for k in range(10))
RECALL_POINTS = np.linspace(0.0, 1.0, 101)
BUCKETS = ("small", "medium", "large")
BINS = 10
STATISTICS = ("coverage", "centroid_x", "centroid_y", "boundary_complexity")
CSV_COLUMNS = ("question_id", "iou") + STATISTICS
# \d alone also takes other scripts' digits; "7.PNG" (some tools' case) is question 7's mask
_PNG = re.compile(r"(\d+)\.png", re.ASCII | re.IGNORECASE)
SCORE_FIGURE = "iou_by_coverage.png"  # written by score_folders alone: marks its folders
_log = logging.getLogger(__name__)


def resize(x, shape):
  """Bilinear resize of a 2-D float map to `shape` (half-pixel centres, edges clamped)."""
  out = np.asarray(x, np.float32)
  for axis, n in enumerate(shape):
    m = out.shape[axis]
    if m == n:
      continue
    pos = np.clip((np.arange(n) + 0.5) * m / n - 0.5, 0, m - 1)
    lo = np.floor(pos).astype(np.int64)
    hi = np.minimum(lo + 1, m - 1)
    w = (pos - lo).astype(np.float32).reshape([-1 if a == axis else 1 for a in range(out.ndim)])
    out = np.take(out, lo, axis) * (1 - w) + np.take(out, hi, axis) * w
  return out


def to_uint8(relevance):
  """A relevance map as the 8-bit PNG values it is written with: min-max normalised to 0..255
  (a constant map: 255 when positive, else 0; the module docstring)."""
  x = np.asarray(relevance, np.float32)
  lo, hi = float(x.min()), float(x.max())
  if hi <= lo:
    return np.full(x.shape, 255 if hi > 0 else 0, np.uint8)
  return np.round((x - lo) * (255.0 / (hi - lo))).astype(np.uint8)


def binarize(relevance, shape=None):
  """bool mask of a relevance map or mask: resized to `shape`, min-max normalised, >= 0.5."""
  x = np.asarray(relevance)
  if shape is not None and x.shape != tuple(shape):
    x = resize(x, shape)
  if x.dtype == np.uint8:  # exact integer test: 2 x >= lo + hi
    lo, hi = int(x.min()), int(x.max())
    if hi <= lo:
      return np.full(x.shape, hi > 0)
    return 2 * x.astype(np.int16) >= lo + hi
  lo, hi = float(x.min()), float(x.max())
  if hi <= lo:
    return np.full(x.shape, hi > 0)
  return (x - lo) >= THRESHOLD * (hi - lo)


def _same_aspect(predicted, shape, path):
  """A predicted map of any size is resized onto its truth mask (a model's maps are often
  coarser), but one of another shape would be stretched: refused when the stretch moves an edge
  by more than one of its pixels."""
  (ph, pw), (th, tw) = predicted.shape[:2], shape
  if abs(ph * tw / th - pw) > 1:
    raise RSVQAError(f"{path}: a {ph}x{pw} map for a {th}x{tw} truth mask; resized onto it, it "
                     "would be stretched (give maps of the truth's aspect ratio)")
  return predicted


def iou(predicted, truth):
  """Intersection over union of two bool masks; NaN when the truth is empty."""
  t = np.count_nonzero(truth)
  if not t:
    return math.nan
  if predicted is None:
    return 0.0
  inter = np.count_nonzero(predicted & truth)
  return inter / (np.count_nonzero(predicted) + t - inter)


def bucket(coverage):
  """small < 1/3 <= medium < 2/3 <= large; None for NaN."""
  if math.isnan(coverage):
    return None
  return BUCKETS[min(2, int(coverage * 3))]


def _entropy_of_distances(distances):
  d = np.asarray(distances, np.float64)
  top = d.max(initial=0.0)
  if top <= 0:
    return 0.0
  counts = np.histogram(d / top, bins=BINS, range=(0.0, 1.0))[0]
  p = counts[counts > 0] / counts.sum()
  return float(max(0.0, -(p * np.log(p)).sum() / np.log(BINS)))


def polygon_boundary_complexity(vertices):
  """Boundary complexity of a polygon given by its (x, y) vertices, as the paper computes it on
  its annotations: distances from the vertices' mean to each vertex."""
  v = np.asarray(vertices, np.float64)
  return _entropy_of_distances(np.hypot(*(v - v.mean(axis=0)).T))


def statistics(mask):
  """{coverage, centroid_x, centroid_y, boundary_complexity} of a bool mask (NaN but coverage
  when it is empty)."""
  h, w = mask.shape
  n = np.count_nonzero(mask)
  if not n:
    return {"coverage": 0.0, "centroid_x": math.nan, "centroid_y": math.nan,
            "boundary_complexity": math.nan}
  rows, cols = mask.sum(axis=1), mask.sum(axis=0)
  cy = float(rows @ (np.arange(h) + 0.5)) / n
  cx = float(cols @ (np.arange(w) + 0.5)) / n
  padded = np.pad(mask, 1)
  inner = (padded[:-2, 1:-1] & padded[2:, 1:-1] & padded[1:-1, :-2] & padded[1:-1, 2:])
  ys, xs = np.nonzero(mask & ~inner)
  complexity = _entropy_of_distances(np.hypot(ys + 0.5 - cy, xs + 0.5 - cx))
  return {"coverage": float(n / (h * w)), "centroid_x": cx / w, "centroid_y": cy / h,
          "boundary_complexity": complexity}


def average_precision(ious, confidences, threshold):
  """COCO's 101-point interpolated AP of one prediction per sample ranked by confidence (NaN:
  no prediction, ranked after every prediction, even one of confidence -inf).

  Equal confidences are one threshold: precision and recall are read after the whole group, as
  no order among them is known (ranked by sample order, a model of one confidence for every
  question scored what its question ids happened to put first)."""
  ious = np.asarray(ious, np.float64)
  n = len(ious)
  if not n:
    return math.nan
  conf = np.asarray(confidences, np.float64)
  order = np.argsort(-conf, kind="stable")
  ranked = conf[order]
  tp = np.cumsum(ious[order] >= threshold)
  ends = np.flatnonzero(np.append((ranked[1:] != ranked[:-1])
                                  & ~(np.isnan(ranked[1:]) & np.isnan(ranked[:-1])), True))
  precision = tp[ends] / (ends + 1)
  recall = tp[ends] / n
  precision = np.maximum.accumulate(precision[::-1])[::-1]
  at = np.searchsorted(recall, RECALL_POINTS, side="left")
  return float(np.where(at < len(ends), precision[np.minimum(at, len(ends) - 1)], 0.0).mean())


def scores(ious, confidences=None):
  """{n, mean_iou} of the samples' IoUs (NaN ones, empty truths, left out), with AP_KEYS and
  map_50_95 when `confidences` are given."""
  ious = np.asarray(ious, np.float64)
  kept = ~np.isnan(ious)
  out = {"n": int(kept.sum()), "mean_iou": float(ious[kept].mean()) if kept.any() else math.nan}
  if confidences is not None:
    conf = np.asarray(confidences, np.float64)[kept]
    out.update({k: average_precision(ious[kept], conf, t) for k, t in AP_KEYS.items()})
    out["map_50_95"] = float(np.mean([average_precision(ious[kept], conf, t)
                                      for t in MAP_THRESHOLDS]))
  return out


def breakdown(ious, groups, confidences=None):
  """{group: scores} over the samples of each group value (None: left out), sorted by value."""
  groups = np.asarray(groups, dtype=object)
  out = {}
  for g in sorted({g for g in groups.tolist() if g is not None}, key=str):
    sel = groups == g
    out[str(g)] = scores(np.asarray(ious)[sel],
                         None if confidences is None else np.asarray(confidences)[sel])
  return out


def coverage_breakdown(ious, coverages, confidences=None):
  """breakdown by coverage bucket, every bucket listed (n 0 when none falls in it)."""
  found = breakdown(ious, [bucket(c) for c in coverages], confidences)
  return {b: found.get(b, {"n": 0, "mean_iou": math.nan}) for b in BUCKETS}


def read_mask(path):
  """A PNG as a 2-D array: colour converted to grey (uint8), 16-bit grey kept as it is (uint16:
  binarize min-max normalises either, where scaling to 8 bits read a 0/1 mask as empty), a mask
  with transparency (an alpha channel, or a tRNS colour or palette entry) read over black (a
  transparent pixel shows nothing, whatever colour it keeps); RSVQAError if unreadable, if its
  shape is in the alpha channel alone (over black it is blank), if it is another format under a
  .png name (a JPEG's compression blurs the edges the IoU is measured on), a 16-bit PNG of
  colour or alpha (PIL keeps the high byte: a 0/1 mask read empty) or a colour scale
  (`_colours`)."""
  try:
    if _sixteen_bit_colour(path):
      raise RSVQAError(f"{path}: a 16-bit PNG of colour or alpha, whose values read back cut to "
                       "their high byte; save the mask as a 16-bit grey PNG without alpha, or "
                       "as an 8-bit PNG")
    with Image.open(path) as im:
      if im.format != "PNG":
        raise RSVQAError(f"{path}: a {im.format} image under a .png name; save the mask as a "
                         "PNG (lossless)")
      if im.mode.startswith("I;16"):
        return np.asarray(im).astype(np.uint16)
      if im.mode in ("I", "F"):
        raise RSVQAError(f"{path}: a 32-bit {'float' if im.mode == 'F' else 'integer'} image; "
                         "save the mask as an 8-bit or 16-bit grey PNG")
      if "transparency" in im.info:  # a tRNS chunk: transparent pixels without an alpha band
        im = im.convert("RGBA")
      alpha = np.asarray(im.getchannel("A")) if "A" in im.getbands() else None
      if im.mode not in ("L", "LA", "1"):
        _colours(path, np.asarray(im.convert("RGB")), alpha)
      grey = np.asarray(im if im.mode == "L" else im.convert("L"))
      if alpha is not None and alpha.max() == 0:  # wholly transparent: nothing shows
        return np.zeros_like(grey)
      if alpha is not None and alpha.min() != alpha.max():
        grey = ((grey.astype(np.uint32) * alpha + 127) // 255).astype(np.uint8)
        if grey.min() == grey.max():
          raise RSVQAError(f"{path}: the mask is drawn in the alpha channel only (over black "
                           "its colour shows nothing); save it as a grey PNG")
      return grey
  except (OSError, ValueError, Image.DecompressionBombError) as e:  # a bomb: a header of 1e10 px
    raise RSVQAError(f"{path}: not a readable PNG mask ({e})") from None


def _sixteen_bit_colour(path):
  """Whether a PNG's header (IHDR) gives 16 bits per sample with colour or alpha (colour types
  2, 4, 6), which PIL opens as 8-bit bands of the high bytes."""
  with open(path, "rb") as f:
    head = f.read(26)
  return (head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR" and len(head) == 26
          and head[24] == 16 and head[25] in (2, 4, 6))


def _colours(path, rgb, alpha):
  """RSVQAError when the colours shown over black (`alpha`: None when opaque) are a colour scale
  whose brightness does not follow its values, as jet's (dark at both ends): two colours of one
  brightness far apart. Grey, shades of one colour (a red mask on black, anti-aliased or resized)
  and scales of rising brightness (viridis, a two-colour plt.imsave mask) read right as grey."""
  if alpha is not None:
    rgb = (rgb.astype(np.uint32) * alpha[..., None] + 127) // 255
  rgb = rgb.astype(np.uint32)
  if (rgb[..., 0] == rgb[..., 1]).all() and (rgb[..., 1] == rgb[..., 2]).all():
    return
  packed = np.unique((rgb[..., 0] << 16) | (rgb[..., 1] << 8) | rgb[..., 2])
  colours = np.stack([packed >> 16, (packed >> 8) & 255, packed & 255], 1).astype(np.float64)
  luma = colours @ _LUMA
  order = np.argsort(luma, kind="stable")
  colours, luma = colours[order], luma[order]
  last = np.searchsorted(luma, luma + _SAME_LUMA, side="right")  # colours of about one brightness
  for i in np.flatnonzero(last - np.arange(len(luma)) > 1):
    if np.abs(colours[i + 1:last[i]] - colours[i]).max() > _FAR_APART:
      raise RSVQAError(f"{path}: a colour map whose brightness does not follow its colours (a "
                       f"colour scale such as jet?): {tuple(int(v) for v in colours[i])} and "
                       "another colour of its brightness are far apart; save the map as a grey "
                       "PNG (8- or 16-bit), brighter meaning more")


def _saved(path, save):
  """Runs save(temporary path, format="PNG"), then renames it to `path`: never half a file
  there (storage.replacing_path)."""
  with storage.replacing_path(path) as tmp:
    save(tmp, format="PNG")
  return path


def write_png(path, values):
  """An 8-bit grey PNG, written atomically."""
  return _saved(path, Image.fromarray(np.asarray(values, np.uint8), mode="L").save)


def mask_files(folder, flag):
  """{question id: path} of the `{question_id}.png` files of `folder` (other files ignored;
  two files of one question, 7.png and 007.png, refused: either could be the mask meant)."""
  if not os.path.isdir(folder):
    raise RSVQAError(f"{flag} {folder}: folder {errors.not_a_folder(folder)}")
  found = {}
  for name in sorted(os.listdir(folder)):
    if m := _PNG.fullmatch(name):
      qid = int(m.group(1))
      if qid in found:
        raise RSVQAError(f"{flag} {folder}: {os.path.basename(found[qid])} and {name} both name "
                         f"question {qid}; keep one")
      found[qid] = os.path.join(folder, name)
  return found


def other_files(folder):
  """The names of a mask folder's files not named {question_id}.png (ignored), sorted."""
  return sorted(n for n in os.listdir(folder) if not _PNG.fullmatch(n))


def required_masks(folder, flag):
  """mask_files of a folder that must hold some (every score over none would read 0 or n/a)."""
  files = mask_files(folder, flag)
  if not files:
    raise RSVQAError(f"{flag} {folder}: holds no {{question_id}}.png mask")
  return files


def read_confidence(path):
  """{question id: confidence} of a CSV with columns question_id,confidence."""
  out = {}
  for line, row in csv_columns.read(path, ("question_id", "confidence"), (),
                                    "confidence file")[1]:
    try:
      qid, value = csv_columns.integer(row["question_id"]), csv_columns.number(row["confidence"])
    except ValueError:
      raise RSVQAError(f"{path}:{line}: question_id {row['question_id']!r} or confidence "
                       f"{row['confidence']!r} is not a number") from None
    if qid in out:
      raise RSVQAError(f"{path}:{line}: duplicate question_id {qid}")
    if math.isnan(value):
      raise RSVQAError(f"{path}:{line}: confidence of question {qid} is NaN")
    out[qid] = value
  return out


def _cell(value):
  """A CSV cell: NaN and None blank, booleans 0 / 1, floats at full precision."""
  if value is None or (isinstance(value, float) and math.isnan(value)):
    return ""
  if isinstance(value, (bool, np.bool_)):
    return int(value)
  return repr(float(value)) if isinstance(value, (float, np.floating)) else value


def write_rows(path, rows, columns=CSV_COLUMNS):
  """CSV of dict rows, written atomically."""
  with storage.replacing(path, newline="") as f:
    w = csv.writer(f)
    w.writerow(columns)
    w.writerows([_cell(r[c]) for c in columns] for r in rows)


def score_masks(pairs):
  """Rows of CSV_COLUMNS from (question id, predicted bool mask or None, truth bool mask)."""
  rows = []
  for qid, predicted, truth in pairs:
    rows.append({"question_id": qid, "iou": iou(predicted, truth), **statistics(truth)})
  return rows


def summarize(rows, confidences=None, **extra):
  """summary.json of scored rows: counts, scores (AP keys with `confidences`, one per row) and
  the coverage breakdown; `extra` entries are added as they are."""
  ious = [r["iou"] for r in rows]
  out = {"n_questions": len(rows), "n_empty_truth": int(np.isnan(ious).sum()) if rows else 0}
  all_scores = scores(ious, confidences)
  out["n_scored"] = all_scores.pop("n")
  out.update(all_scores)
  out.update(extra)
  out["by_coverage"] = coverage_breakdown(ious, [r["coverage"] for r in rows], confidences)
  return out


def framed(mask):
  """Whether a bool mask is the object along its whole border around some background: how a
  dark object drawn on a white background reads, bright being the object."""
  return bool(mask[0].all() and mask[-1].all() and mask[:, 0].all() and mask[:, -1].all()
              and not mask.all())


class _Framed:
  """Counts the binarized masks of a folder that read as a frame (`framed`): most likely drawn
  dark on white, which read inverted and would score without a word."""

  def __init__(self, flag, folder):
    self.flag, self.folder, self.found, self.read = flag, folder, [], 0

  def __call__(self, path, mask):
    self.read += 1
    if framed(mask):
      self.found.append(path)
    return mask

  def warn(self):
    if self.found:
      _log.warning(f"{self.flag} {self.folder}: {len(self.found)} of {self.read} mask(s) are the "
                   f"object along their whole border around a background inside (e.g. "
                   f"{self.found[0]}); bright pixels are read as the object, so a dark object "
                   "drawn on white reads inverted: invert those masks if so (a class covering "
                   "all but an inner patch is right as it is)")


class _Truths:
  """Reads --truth masks as binarize does, and counts those of more than two values: a truth
  is binary (0 and 255), so these are relevance maps, --predicted and --truth swapped most
  likely, which would score without a word; and those that read as a frame (_Framed)."""

  def __init__(self, truth):
    self.truth, self.graded, self.read = truth, [], 0
    self.framed = _Framed("--truth", truth)

  def __call__(self, path):
    mask = read_mask(path)
    self.read += 1
    if ((mask != mask.min()) & (mask != mask.max())).any():
      self.graded.append(path)
    return self.framed(path, binarize(mask))

  def warn(self):
    if self.graded:
      _log.warning(f"--truth {self.truth}: {len(self.graded)} of {self.read} truth mask(s) hold "
                   f"more than two values (e.g. {self.graded[0]}); truth masks are binary (0 and "
                   "255): are --predicted and --truth swapped?")
    self.framed.warn()


def score_folders(predicted, truth, out, confidence=None):
  """`rsvqa-jax grounding score`: O/grounding.csv, O/summary.json and O/iou_by_coverage.png."""
  truth_files = required_masks(truth, "--truth")
  predicted_files = required_masks(predicted, "--predicted")
  qids = sorted(truth_files)
  if not set(qids) & set(predicted_files):  # every IoU would read 0
    raise RSVQAError(f"--predicted {predicted}: none of its {len(predicted_files)} mask(s) is of "
                     f"a question of --truth (e.g. {min(predicted_files)}.png there, {qids[0]}.png "
                     "in --truth)")
  conf = read_confidence(confidence) if confidence else None

  read_truth, framed_predictions = _Truths(truth), _Framed("--predicted", predicted)

  def pairs():
    for qid in progress.bar(qids, desc="grounding score", unit="mask"):
      t = read_truth(truth_files[qid])
      p = predicted_files.get(qid)
      yield qid, None if p is None else framed_predictions(
          p, binarize(_same_aspect(read_mask(p), t.shape, p), t.shape)), t

  rows = score_masks(pairs())
  read_truth.warn()
  framed_predictions.warn()
  confidences = None
  if conf is not None:
    lacking = [r["question_id"] for r in rows if r["question_id"] in predicted_files
               and r["question_id"] not in conf and not math.isnan(r["iou"])]
    if lacking:
      raise RSVQAError(f"{confidence}: no confidence for question {lacking[0]} ({len(lacking)} "
                       "scored questions lack one)")
    # A question without a map is a miss ranked after every prediction, its confidence or not:
    # ranked by one, the same maps scored two ways.
    confidences = [conf.get(r["question_id"], math.nan) if r["question_id"] in predicted_files
                   else math.nan for r in rows]
  scored = {r["question_id"] for r in rows if not math.isnan(r["iou"])}  # empty truths: apart
  unmapped = [] if conf is None else sorted(set(conf) & scored - set(predicted_files))
  if all(math.isnan(r["iou"]) for r in rows):
    raise RSVQAError(f"--truth {truth}: all {len(rows)} truth mask(s) are empty (questions whose "
                     "answer shows nowhere): no grounding to score")
  # Only a non-empty truth counts against a missing map (an empty one is scored apart).
  missing = sum(r["question_id"] not in predicted_files and not math.isnan(r["iou"]) for r in rows)
  summary = summarize(rows, confidences, n_missing_prediction=missing,
                      n_extra_prediction=len(set(predicted_files) - set(truth_files)),
                      n_other_files=len(other_files(predicted)),
                      n_other_truth_files=len(other_files(truth)),
                      **({} if conf is None else
                         {"n_extra_confidence": len(set(conf) - set(truth_files)),
                          "n_confidence_without_map": len(unmapped)}),
                      predicted=os.path.abspath(predicted), truth=os.path.abspath(truth))
  os.makedirs(out, exist_ok=True)
  write_rows(os.path.join(out, "grounding.csv"), rows)
  box_plot(os.path.join(out, SCORE_FIGURE),
           {b: [r["iou"] for r in rows if bucket(r["coverage"]) == b] for b in BUCKETS},
           "IoU by coverage of the truth", "IoU")
  storage.write_json(os.path.join(out, "summary.json"), summary)
  return summary


def describe(values):
  """{n, mean, std, median, q25, q75} of the non-NaN values (population std)."""
  v = np.asarray([x for x in values if not math.isnan(x)], np.float64)
  if not len(v):
    return {"n": 0, **dict.fromkeys(("mean", "std", "median", "q25", "q75"), math.nan)}
  q25, median, q75 = np.percentile(v, [25, 50, 75]).tolist()
  return {"n": len(v), "mean": float(v.mean()), "std": float(v.std()), "median": median,
          "q25": q25, "q75": q75}


# What each statistic is a fraction of (statistics.md's caption, boxplots.png's axes).
UNITS = {"coverage": "fraction of the image area",
         "centroid_x": "fraction of the width from the left",
         "centroid_y": "fraction of the height from the top",
         "boundary_complexity": "normalised entropy, unitless (a disc: 0)"}


def significant(x):
  """`x` to 3 significant digits (a coverage about 0.05 read 0.06 +- 0.07 at 2 decimals)."""
  return f"{x:#.3g}"


def statistics_table(stats, caption):
  """Mean +- std and median of each statistic (the paper's Table 1), one row per mask set, to 3
  significant digits, the caption ending with their units; n counts the masks they are over
  (empty masks left out)."""
  rows = []
  for name, s in stats.items():
    row = [name, s["n"] - s["n_empty"]]
    for key in STATISTICS:
      d = s[key]
      row.append("n/a" if not d["n"] else f"{significant(d['mean'])} +- {significant(d['std'])} "
                 f"(median {significant(d['median'])})")
    rows.append(tuple(row))
  units = "; ".join(f"{k}: {v}" for k, v in UNITS.items())
  return tables.Table(f"{caption}; mean +- std (median), 3 significant digits; {units}",
                      ("masks", "n") + STATISTICS, tuple(rows))


def save_figure(fig, path, dpi):
  """A matplotlib Figure as a 256-colour PNG (a fifth of the bytes of its RGB rendering),
  written through a temporary file. Octree, not median cut: median cut spends the palette on
  the images and left a colour bar a few flat bands of other hues."""
  buf = io.BytesIO()
  fig.savefig(buf, dpi=dpi, format="png")
  with Image.open(buf) as im:
    return _saved(path, im.convert("RGB").quantize(256, method=Image.Quantize.FASTOCTREE).save)


def _boxes(ax, groups, ylabel):
  """One box per group of values on `ax` (NaN left out; whiskers at 1.5 IQR, outliers drawn)."""
  names = list(groups)
  data = [[v for v in groups[n] if not math.isnan(v)] for n in names]
  ax.boxplot([d or [math.nan] for d in data], showfliers=True)
  ax.set_xticks(range(1, len(names) + 1), [f"{n}\n(n={len(d)})" for n, d in zip(names, data)],
                fontsize=8)
  ax.set_ylabel(ylabel, fontsize=9)
  ax.set_ylim(-0.02, 1.02)


def box_plot(path, groups, title, ylabel):
  """One box per group of values, on one axis of unit `ylabel`."""
  fig = Figure(figsize=(1.2 + 1.1 * len(groups), 3.4))
  ax = fig.subplots()
  _boxes(ax, groups, ylabel)
  ax.set_title(title, fontsize=9)
  fig.tight_layout()
  return save_figure(fig, path, 120)


def statistics_plot(path, values, title):
  """One box per statistic, each on an axis of its own unit (UNITS): they are fractions of
  different things."""
  fig = Figure(figsize=(2.4 * len(values), 3.6))
  for ax, (key, v) in zip(fig.subplots(1, len(values), squeeze=False)[0], values.items()):
    _boxes(ax, {key: v}, UNITS[key])
  fig.suptitle(title, fontsize=10)
  fig.tight_layout()
  return save_figure(fig, path, 120)


def stats_folder(truth, out):
  """`rsvqa-jax grounding stats`: O/statistics.csv, statistics.json, statistics.md, boxplots.png.

  The masks' statistics (empty masks counted apart), as the paper's Table 1 and Figure 2.
  """
  files = required_masks(truth, "--truth")
  read_truth = _Truths(truth)
  rows = [{"question_id": q, **statistics(read_truth(files[q]))}
          for q in progress.bar(sorted(files), desc="grounding stats", unit="mask")]
  read_truth.warn()
  kept = [r for r in rows if r["coverage"] > 0]
  stats = {"n": len(rows), "n_empty": len(rows) - len(kept)}
  stats.update({k: describe([r[k] for r in kept]) for k in STATISTICS})
  stats["by_coverage"] = {b: sum(bucket(r["coverage"]) == b for r in kept) for b in BUCKETS}
  os.makedirs(out, exist_ok=True)
  write_rows(os.path.join(out, "statistics.csv"), rows, ("question_id",) + STATISTICS)
  table = statistics_table({os.path.basename(os.path.abspath(truth)): stats},
                           f"Grounding statistics of {truth} ({stats['n_empty']} empty masks "
                           "left out)")
  with storage.replacing(os.path.join(out, "statistics.md")) as f:
    f.write(tables.to_markdown(table))
  statistics_plot(os.path.join(out, "boxplots.png"), {k: [r[k] for r in kept] for k in STATISTICS},
                  f"Grounding statistics ({len(kept)} masks, {stats['n_empty']} empty ones left "
                  "out)")
  storage.write_json(os.path.join(out, "statistics.json"), stats)
  return stats
