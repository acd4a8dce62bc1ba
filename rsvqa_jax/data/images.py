"""Reading and writing the RSVQA image tiles (.tif) with checks that name the file.

Every dataset stores one RGB tile per image id; a tile of the wrong size or band count would
silently feed a wrong tensor to the model, so each read checks both and raises an RSVQAError.
"""
import io
import logging
import os
import threading

import numpy as np
import tifffile
from PIL import Image

from rsvqa_jax.errors import RSVQAError


_log = logging.getLogger(__name__)
_reading = threading.local()  # .lines: tifffile's messages about the tile this thread parses


class _TiffLines(logging.Filter):
  """Holds back tifffile's own lines about a tile being parsed (a damaged header logs several,
  bare, before the refusal): `_parse` drops them when it refuses the tile, whose error names it,
  and else says them in one WARNING naming the file. Its line on a TIFF without an image is
  always dropped: `_parse` refuses that in one line."""

  def filter(self, record):
    message = record.getMessage()
    if message.endswith("contains no pages"):
      return False
    lines = getattr(_reading, "lines", None)
    if lines is None:
      return True
    lines.append(" ".join(message.split()))
    return False


logging.getLogger("tifffile").addFilter(_TiffLines())


def _bands_first(shape, page):
  """Whether a 3-D series stores its bands first: planar (one plane per band, as the header
  says), or pages of one band each, the pages fewer than a page's columns (a multispectral
  stack; more pages than columns are rows of an HxWxbands array written page by page). Guessing
  from the sizes alone took a 13-band 256x256 stack for a 13x256 image of 256 bands."""
  if len(shape) != 3:
    return False
  planar = page.planarconfig == tifffile.PLANARCONFIG.SEPARATE and page.samplesperpixel > 1
  paged = len(page.shape) == 2 and tuple(shape[1:]) == tuple(page.shape) and shape[0] < shape[-1]
  return planar or paged


def _hwc_shape(shape, path, bands_first=False):
  """(H, W, bands) of a stored shape: planar (bands, H, W) and greyscale HxW files included."""
  shape = tuple(shape)
  if len(shape) == 3 and (bands_first or shape[0] in (1, 3, 4) and shape[-1] not in (1, 3, 4)):
    return shape[1:] + shape[:1]
  if len(shape) == 2:
    return shape + (1,)
  if len(shape) != 3:
    raise RSVQAError(f"{path}: image has {len(shape)} dimensions (shape {shape}), expected HxWx3")
  return shape


_ALPHA = (tifffile.EXTRASAMPLE.ASSOCALPHA, tifffile.EXTRASAMPLE.UNASSALPHA)


def _check(shape, dtype, path, size, page, bands_first=False):
  """Refuses a tile the model cannot read as it is, saying how to convert it: a rescale or a
  dropped band is never guessed."""
  height, width, nbands = _hwc_shape(shape, path, bands_first)
  if nbands != 3 and page.photometric == tifffile.PHOTOMETRIC.PALETTE:
    raise RSVQAError(f"{path}: image is a palette (colour-mapped) image, expected 3 bands; "
                     "save it as RGB")
  if nbands != 3:
    raise RSVQAError(f"{path}: image has {nbands} band{'' if nbands == 1 else 's'}, expected "
                     "3" + (_extra_bands(page.extrasamples, nbands - 3)
                            or _band_hint(nbands, page)))
  if size is not None and (height, width) != tuple(size):
    raise RSVQAError(f"{path}: image is {height}x{width}, expected {size[0]}x{size[1]}")
  if dtype != np.uint8:
    raise RSVQAError(f"{path}: image dtype is {dtype}, expected uint8; convert it to 8-bit RGB "
                     "(e.g. gdal_translate -ot Byte -scale IN.tif OUT.tif)")


def _band_hint(nbands, page):
  """What to do with a tile of another band count that is not RGB plus alpha: '' when none fits."""
  if nbands == 1:
    return " (a greyscale image); save it as RGB"
  if nbands == 4 and page.photometric == tifffile.PHOTOMETRIC.SEPARATED:
    return " (a CMYK image); save it as RGB"
  if nbands > 4:
    return " (a multispectral image?); save its red, green and blue bands as an 8-bit RGB TIFF"
  return ""


def _extra_bands(extrasamples, surplus):
  """'; save it without the alpha band' when the surplus bands are the tile's extra samples (an
  RGBA tile's alpha, say), else ''."""
  if surplus <= 0 or len(extrasamples) != surplus:
    return ""
  kind = "alpha" if all(s in _ALPHA for s in extrasamples) else "extra"
  count, plural = ("an", "") if surplus == 1 else (surplus, "s")
  return f" (RGB and {count} {kind} band{plural}); save it without the {kind} band{plural}"


# Colour spaces whose bands are read as they are stored: RGB, and grey bands (a GeoTIFF's
# multi-band tiles are often tagged so). A JPEG-compressed YCbCr tile is decoded to RGB.
_AS_STORED = (tifffile.PHOTOMETRIC.RGB, tifffile.PHOTOMETRIC.MINISBLACK)
_JPEG = (tifffile.COMPRESSION.JPEG, tifffile.COMPRESSION.OJPEG)


def _check_colours(page, name):
  """Refuses a tile whose three bands are another colour space (YCbCr, CIE L*a*b*): tifffile
  hands their raw values back, which the model would read as red, green and blue."""
  photometric = page.photometric
  if photometric in _AS_STORED or (photometric == tifffile.PHOTOMETRIC.YCBCR
                                   and page.compression in _JPEG):
    return
  label = photometric.name if hasattr(photometric, "name") else str(photometric)
  raise RSVQAError(f"{name}: image colour space is {label}, expected RGB; save the tile as RGB")


def misplaced(path):
  """Where the images are when tile `path` is missing but its folder says why, as a one-line
  message naming the fix, else None: unzipped one folder deeper, named in another letter case
  (the names are read exactly) or with another extension (.tiff, .png), or the folder still
  zipped beside it. One scandir: asked of one tile (validate asks it of the first), never of
  each."""
  if os.path.lexists(path):
    return None
  folder, file = os.path.split(path)
  folder = folder or os.curdir
  if not os.path.isdir(folder):
    parent, name = os.path.split(folder)
    entries = _entries(parent or os.curdir)
    if other := next((e for e in entries if e.name.lower() == name.lower() and e.is_dir()), None):
      return (f"{folder}: image folder missing; {other.path} differs in letter case only: rename "
              f"it to {name}")
    if archive := next((e for e in entries if e.name.lower() == f"{name.lower()}.zip"), None):
      return f"{folder}: image folder missing; {archive.path} lies beside it: unzip it there"
    return None
  entries = _entries(folder)
  if other := next((e for e in entries if e.name.lower() == file.lower()), None):
    return (f"{path}: image file missing; {folder} holds {other.name} (another letter case): "
            f"rename the image files to <id>{os.path.splitext(file)[1]}")
  stem, ext = os.path.splitext(file)
  padded = next((e for e in entries if stem.isdigit() and os.path.splitext(e.name)[0].isdigit()
                 and os.path.splitext(e.name)[0].lstrip("0") == stem.lstrip("0")
                 and os.path.splitext(e.name)[1].lower() == ext.lower()), None)
  if padded is not None:  # 000.tif for image 0: the names are the JSON's ids, unpadded
    return (f"{path}: image file missing; {folder} holds {padded.name} (the id padded with "
            f"zeros): rename the image files to <id>{ext}, the id as the JSON files write it")
  if other := next((e for e in entries if os.path.splitext(e.name)[0] == stem), None):
    theirs = os.path.splitext(other.name)[1]  # 0.tiff, 0.png: read as missing, without a word
    fix = (f"rename the image files to <id>{ext}" if theirs.lower() in (".tif", ".tiff")
           else f"convert the images to TIFF files named <id>{ext}")
    return f"{path}: image file missing; {folder} holds {other.name} (another extension): {fix}"
  deeper = [e.path for e in entries if e.is_dir() and os.path.lexists(os.path.join(e.path, file))]
  if len(deeper) == 1:
    return f"{folder}: the images are in {deeper[0]}: move them up one folder"
  if deeper:
    return (f"{folder}: the images are in its subfolders {', '.join(deeper)}: move those of one "
            "of them up one folder")
  return None


def _entries(folder):
  """The entries of `folder` (scandir's, sorted by name), or [] when it cannot be read."""
  try:
    with os.scandir(folder) as entries:
      return sorted(entries, key=lambda e: e.name)
  except OSError:
    return []


def _load(path, size, decode):
  """Checks a tile from its header, then decodes it if `decode`; one-line errors naming it."""
  if not os.path.exists(path):
    raise RSVQAError(f"{path}: image file missing")
  if os.path.isdir(path):  # else "not a readable TIFF (IsADirectoryError: [Errno 21] ...)"
    raise RSVQAError(f"{path}: a folder, not an image file; put the image's TIFF there")
  return _parse(path, path, size, decode)


def _parse(source, name, size, decode):
  """`_load` of an open source (a path or a file object) named `name` in errors.

  The header comes first so that a wrong or corrupt one (which may claim a huge image) is
  reported before any pixel buffer is allocated.
  """
  _reading.lines = []
  try:
    with tifffile.TiffFile(source) as tif:
      if not tif.series:  # a TIFF header with no image (tifffile logs "contains no pages")
        raise RSVQAError(f"{name}: a TIFF holding no image")
      series = tif.series[0]
      _check(series.shape, np.dtype(series.dtype), name, size, tif.pages[0],
             _bands_first(series.shape, tif.pages[0]))
      _check_colours(tif.pages[0], name)
      pixels = _pixels(series, source, name) if decode else None
  except RSVQAError:
    raise
  except Exception as e:  # tifffile (and zlib, ...) raise many types for corrupt files.
    why = f"{type(e).__name__}: {e}".replace("\n", " ")
    raise RSVQAError(f"{name}: not a readable TIFF ({why})") from None
  finally:
    lines, _reading.lines = _reading.lines, None
  if lines:
    _log.warning(f"{name}: read, but tifffile says of it: {'; '.join(dict.fromkeys(lines))}")
  return pixels


def _pixels(series, source, name):
  """The decoded pixels; a tile tifffile would need its optional imagecodecs for (LZW or JPEG
  compression, common in GeoTIFF exports) is decoded by Pillow instead."""
  try:
    return series.asarray()
  except ValueError as e:
    if "imagecodecs" not in str(e):
      raise
    needs = str(e)
  if hasattr(source, "seek"):
    source.seek(0)
  try:
    with Image.open(source) as im:
      return np.asarray(im)
  except (OSError, ValueError) as e:  # Pillow cannot either (3 bands tagged greyscale, say)
    raise RSVQAError(f"{name}: its compression needs the imagecodecs package ({needs}), and "
                     "Pillow cannot read it either; pip install imagecodecs, or save the tile "
                     "as an uncompressed RGB TIFF") from e


def _hwc(arr, name):
  """A decoded tile as HxWxbands: greyscale and planar (bands, H, W) files included."""
  if arr.ndim == 2:
    return arr[..., None]
  return arr if _hwc_shape(arr.shape, name) == arr.shape else np.moveaxis(arr, 0, -1)


def read_tif(path, size=None):
  """Reads a tile as uint8 HxWx3, checking its size (height, width) and band count.

  Decoding every strip is what finds a truncated file or corrupt compressed pixels.
  """
  return _hwc(_load(path, size, decode=True), path)


def decode_tif(encoded, name="TIFF bytes"):
  """`read_tif` of a tile's encoded bytes (a TFDS `images` example), `name` in its errors."""
  return _hwc(_parse(io.BytesIO(encoded), name, None, decode=True), name)


def check_tif(path, size=None):
  """Checks a tile's size, band count and dtype from its header, without decoding pixels."""
  _load(path, size, decode=False)


def write_tif(path, image):
  """Writes a uint8 HxWx3 tile uncompressed (fast, and readable by any TIFF reader)."""
  tifffile.imwrite(path, np.ascontiguousarray(image, dtype=np.uint8), photometric="rgb")
