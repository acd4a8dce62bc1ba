"""A damaged columnar cache entry (data/columnar.py) is checked against the sha256 of each file its
manifest records: rebuilt from the JSON files with a WARNING, never read as it is; a file where a
folder of the cache goes is a one-line error."""
import json
import logging
import os
import shutil

import numpy as np
import pytest

from rsvqa_jax.data import columnar
from rsvqa_jax.data import rsvqa_json
from rsvqa_jax.errors import RSVQAError

from test_columnar import _assert_same, xben  # pylint: disable=unused-import


def _resave(fn):
  return lambda path: np.save(path, fn(np.load(path)))


def _empty(path):
  open(path, "wb").close()


def _folder(path):
  os.remove(path)
  os.mkdir(path)


DAMAGE = {
    "valid npy of zeros": ("train.answer.npy", _resave(np.zeros_like)),
    "codes out of range": ("train.question.npy", _resave(lambda a: a + 10**6)),
    "npy emptied": ("train.answer.npy", _empty),
    "npy deleted": ("val.qtype.npy", os.remove),
    "npy cut to 5 rows": ("train.question_id.npy", _resave(lambda a: a[:5])),
    "vocab emptied": (columnar.VOCAB, _empty),
    "vocab a folder": (columnar.VOCAB, _folder),
}


@pytest.fixture
def warnings(caplog, monkeypatch):
  """caplog, holding the WARNINGs of rsvqa_jax.storage (whose records the CLI's logging setup
  stops at the rsvqa_jax logger, so its handler is added here, and once only)."""
  logger = logging.getLogger("rsvqa_jax.storage")
  monkeypatch.setattr(logger, "propagate", False)
  logger.addHandler(caplog.handler)
  try:  # at_level restores the handler's level: it is the session's, shared by later tests
    with caplog.at_level(logging.WARNING, logger=logger.name):
      yield caplog
  finally:
    logger.removeHandler(caplog.handler)


@pytest.mark.parametrize("file, damage", DAMAGE.values(), ids=list(DAMAGE))
def test_a_damaged_entry_is_rebuilt_from_the_json_files(xben, warnings, file, damage):
  root, _ = xben
  folder = columnar.ensure(root, "xben")
  damage(os.path.join(folder, file))
  read = columnar.read_dataset(root, "xben")
  _assert_same(rsvqa_json.read_dataset(root, "xben", columnar=False), read)
  assert warnings.messages == [
      f"{folder}: incomplete or corrupted columnar cache entry, recomputing"]
  assert columnar.ensure(root, "xben") == folder and len(warnings.messages) == 1  # whole again


def test_an_entry_of_the_version_without_file_digests_is_rebuilt(xben, monkeypatch):
  root, _ = xben
  monkeypatch.setattr(columnar, "VERSION", 1)
  old = columnar.ensure(root, "xben")
  manifest = os.path.join(old, "manifest.json")
  with open(manifest) as f:
    written = json.load(f)
  del written["files"]  # the manifest of version 1: the sources' sha256 only
  with open(manifest, "w") as f:
    json.dump(written, f)
  monkeypatch.undo()
  new = columnar.ensure(root, "xben")
  assert new != old and not os.path.exists(old)
  assert "files" in columnar.storage.read_json(os.path.join(new, "manifest.json"))
  _assert_same(rsvqa_json.read_dataset(root, "xben", columnar=False),
               columnar.read_dataset(root, "xben"))


@pytest.mark.parametrize("which", ["cache folder", "entry"])
def test_a_file_where_a_cache_folder_goes_is_one_line(xben, which):
  root, _ = xben
  folder = columnar.ensure(root, "xben")
  path = os.path.dirname(folder) if which == "cache folder" else folder
  shutil.rmtree(path)
  with open(path, "w") as f:
    f.write("not a folder\n")
  with pytest.raises(RSVQAError, match=f"^{path}: not a folder"):
    columnar.read_dataset(root, "xben")
