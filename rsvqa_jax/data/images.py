"""Reading and writing the RSVQA image tiles (.tif) with checks that name the file.

Every dataset stores one RGB tile per image id; a tile of the wrong size or band count would
silently feed a wrong tensor to the model, so each read checks both and raises an RSVQAError.
"""
import os

import numpy as np
import tifffile

from rsvqa_jax.errors import RSVQAError


def _to_hwc(arr, path):
  """Puts a (bands, H, W) planar array in (H, W, bands) order; leaves HxWxC alone."""
  if arr.ndim == 3 and arr.shape[0] in (1, 3, 4) and arr.shape[-1] not in (1, 3, 4):
    return np.moveaxis(arr, 0, -1)
  if arr.ndim == 2:
    return arr[..., None]
  if arr.ndim != 3:
    raise RSVQAError(f"{path}: image has {arr.ndim} dimensions (shape {arr.shape}), expected HxWx3")
  return arr


def _check(shape, path, size, bands):
  height, width, nbands = shape
  if nbands != bands:
    raise RSVQAError(f"{path}: image has {nbands} bands, expected {bands}")
  if size is not None and (height, width) != tuple(size):
    raise RSVQAError(f"{path}: image is {height}x{width}, expected {size[0]}x{size[1]}")


def read_tif(path, size=None, bands=3):
  """Reads a tile as uint8 HxWxbands, checking its size (height, width) and band count."""
  if not os.path.exists(path):
    raise RSVQAError(f"{path}: image file missing")
  try:
    arr = tifffile.imread(path)
  except Exception as e:  # tifffile raises many types for corrupt files.
    raise RSVQAError(f"{path}: not a readable TIFF ({type(e).__name__}: {e})") from None
  arr = _to_hwc(np.asarray(arr), path)
  _check(arr.shape, path, size, bands)
  if arr.dtype != np.uint8:
    raise RSVQAError(f"{path}: image dtype is {arr.dtype}, expected uint8")
  return arr


def check_tif(path, size=None, bands=3):
  """Checks a tile's size, band count and dtype from its header, without decoding pixels."""
  if not os.path.exists(path):
    raise RSVQAError(f"{path}: image file missing")
  try:
    with tifffile.TiffFile(path) as tif:
      series = tif.series[0]
      shape, dtype = tuple(series.shape), np.dtype(series.dtype)
  except Exception as e:  # tifffile raises many types for corrupt files.
    raise RSVQAError(f"{path}: not a readable TIFF ({type(e).__name__}: {e})") from None
  if len(shape) == 3 and shape[0] in (1, 3, 4) and shape[-1] not in (1, 3, 4):
    shape = shape[1:] + shape[:1]
  elif len(shape) == 2:
    shape = shape + (1,)
  elif len(shape) != 3:
    raise RSVQAError(f"{path}: image has {len(shape)} dimensions (shape {shape}), expected HxWx3")
  _check(shape, path, size, bands)
  if dtype != np.uint8:
    raise RSVQAError(f"{path}: image dtype is {dtype}, expected uint8")


def write_tif(path, image):
  """Writes a uint8 HxWx3 tile uncompressed (fast, and readable by any TIFF reader)."""
  tifffile.imwrite(path, np.ascontiguousarray(image, dtype=np.uint8), photometric="rgb")
