"""Reading and writing the RSVQA image tiles (.tif) with checks that name the file.

Every dataset stores one RGB tile per image id; a tile of the wrong size or band count would
silently feed a wrong tensor to the model, so each read checks both and raises an RSVQAError.
"""
import io
import logging
import os

import numpy as np
import tifffile
from PIL import Image

from rsvqa_jax.errors import RSVQAError


class _NoPagesLine(logging.Filter):
  """Drops tifffile's own line on a TIFF without an image: `_parse` refuses it in one line."""

  def filter(self, record):
    return not record.getMessage().endswith("contains no pages")


logging.getLogger("tifffile").addFilter(_NoPagesLine())


def _hwc_shape(shape, path):
  """(H, W, bands) of a stored shape: planar (bands, H, W) and greyscale HxW files included."""
  shape = tuple(shape)
  if len(shape) == 3 and shape[0] in (1, 3, 4) and shape[-1] not in (1, 3, 4):
    return shape[1:] + shape[:1]
  if len(shape) == 2:
    return shape + (1,)
  if len(shape) != 3:
    raise RSVQAError(f"{path}: image has {len(shape)} dimensions (shape {shape}), expected HxWx3")
  return shape


def _check(shape, dtype, path, size, bands):
  height, width, nbands = _hwc_shape(shape, path)
  if nbands != bands:
    raise RSVQAError(f"{path}: image has {nbands} bands, expected {bands}")
  if size is not None and (height, width) != tuple(size):
    raise RSVQAError(f"{path}: image is {height}x{width}, expected {size[0]}x{size[1]}")
  if dtype != np.uint8:
    raise RSVQAError(f"{path}: image dtype is {dtype}, expected uint8")


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


def _load(path, size, bands, decode):
  """Checks a tile from its header, then decodes it if `decode`; one-line errors naming it."""
  if not os.path.exists(path):
    raise RSVQAError(f"{path}: image file missing")
  return _parse(path, path, size, bands, decode)


def _parse(source, name, size, bands, decode):
  """`_load` of an open source (a path or a file object) named `name` in errors.

  The header comes first so that a wrong or corrupt one (which may claim a huge image) is
  reported before any pixel buffer is allocated.
  """
  try:
    with tifffile.TiffFile(source) as tif:
      if not tif.series:  # a TIFF header with no image (tifffile logs "contains no pages")
        raise RSVQAError(f"{name}: a TIFF holding no image")
      series = tif.series[0]
      _check(series.shape, np.dtype(series.dtype), name, size, bands)
      _check_colours(tif.pages[0], name)
      return _pixels(series, source) if decode else None
  except RSVQAError:
    raise
  except Exception as e:  # tifffile (and zlib, ...) raise many types for corrupt files.
    why = f"{type(e).__name__}: {e}".replace("\n", " ")
    raise RSVQAError(f"{name}: not a readable TIFF ({why})") from None


def _pixels(series, source):
  """The decoded pixels; a tile tifffile would need its optional imagecodecs for (LZW or JPEG
  compression, common in GeoTIFF exports) is decoded by Pillow instead."""
  try:
    return series.asarray()
  except ValueError as e:
    if "imagecodecs" not in str(e):
      raise
  if hasattr(source, "seek"):
    source.seek(0)
  with Image.open(source) as im:
    return np.asarray(im)


def _hwc(arr, name):
  """A decoded tile as HxWxbands: greyscale and planar (bands, H, W) files included."""
  if arr.ndim == 2:
    return arr[..., None]
  return arr if _hwc_shape(arr.shape, name) == arr.shape else np.moveaxis(arr, 0, -1)


def read_tif(path, size=None, bands=3):
  """Reads a tile as uint8 HxWxbands, checking its size (height, width) and band count.

  Decoding every strip is what finds a truncated file or corrupt compressed pixels.
  """
  return _hwc(_load(path, size, bands, decode=True), path)


def decode_tif(encoded, name="TIFF bytes", bands=3):
  """`read_tif` of a tile's encoded bytes (a TFDS `images` example), `name` in its errors."""
  return _hwc(_parse(io.BytesIO(encoded), name, None, bands, decode=True), name)


def check_tif(path, size=None, bands=3):
  """Checks a tile's size, band count and dtype from its header, without decoding pixels."""
  _load(path, size, bands, decode=False)


def write_tif(path, image):
  """Writes a uint8 HxWx3 tile uncompressed (fast, and readable by any TIFF reader)."""
  tifffile.imwrite(path, np.ascontiguousarray(image, dtype=np.uint8), photometric="rgb")
