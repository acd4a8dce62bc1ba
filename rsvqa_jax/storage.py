"""Folders written whole or not at all, JSON manifests, content hashes.

Every cache entry, generated dataset and pretrained model shares these: a folder is built under
a temporary name and renamed into place only when complete (a killed run leaves at most a
`.tmp-*` folder, never a half entry under the real name), a manifest says what the folder holds,
and a reader that finds a manifest missing, malformed or of another version gets None and
rebuilds instead of trusting it.
"""
import contextlib
import hashlib
import json
import os
import shutil
import tempfile

import numpy as np

MANIFEST = "manifest.json"


@contextlib.contextmanager
def building(parent, name):
  """Yields a fresh temporary folder; it becomes parent/name only if the block completes.

  If another process completed the same entry first, theirs is kept.
  """
  os.makedirs(parent, exist_ok=True)
  tmp = tempfile.mkdtemp(prefix=f".tmp-{name}-", dir=parent)
  try:
    yield tmp
    try:
      os.rename(tmp, os.path.join(parent, name))
    except OSError:
      if not os.path.isdir(os.path.join(parent, name)):
        raise
  finally:
    shutil.rmtree(tmp, ignore_errors=True)


def read_json(path):
  """The parsed JSON file, or None when it is missing or malformed."""
  try:
    with open(path, encoding="utf-8") as f:
      return json.load(f)
  except (OSError, ValueError):
    return None


def write_json(path, value):
  """Writes `value` as JSON through a temporary file, so readers never see half a file."""
  tmp = f"{path}.tmp-{os.getpid()}"
  with open(tmp, "w", encoding="utf-8") as f:
    json.dump(value, f, indent=1)
  os.replace(tmp, path)


def read_manifest(folder, name=MANIFEST, **expected):
  """folder/name as a dict if it parses and each `expected` key has that value, else None."""
  manifest = read_json(os.path.join(folder, name))
  if not isinstance(manifest, dict):
    return None
  if any(manifest.get(k) != v for k, v in expected.items()):
    return None
  return manifest


def file_sha256(path):
  """sha256 hex digest of a file's bytes."""
  with open(path, "rb") as f:
    return hashlib.file_digest(f, "sha256").hexdigest()


def path_sha256(path):
  """sha256 of a file, or of a folder's relative file names and their contents' hashes."""
  if os.path.isfile(path):
    return file_sha256(path)
  h = hashlib.sha256()
  for folder, dirs, files in sorted(os.walk(path)):
    dirs.sort()
    for name in sorted(files):
      full = os.path.join(folder, name)
      h.update(f"{os.path.relpath(full, path)}:{file_sha256(full)};".encode())
  return h.hexdigest()


def identity_key(identity):
  """Short stable hash of a JSON-able identity dict (a cache entry's name ends in it)."""
  blob = json.dumps(identity, sort_keys=True, separators=(",", ":")).encode()
  return hashlib.sha256(blob).hexdigest()[:20]


def open_array(path, shape, sha256=None):
  """Read-only float32 memmap of a .npy with this exact shape (and checksum), else None."""
  try:
    arr = np.load(path, mmap_mode="r")
  except (OSError, ValueError):
    return None
  if arr.dtype != np.float32 or arr.shape != tuple(shape):
    return None
  if sha256 is not None and file_sha256(path) != sha256:
    return None
  return arr
