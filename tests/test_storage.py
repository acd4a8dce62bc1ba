"""storage: cache entries (storage.cached, the one way an image, question or columnar entry is
opened or built) and JSON files (read_json, write_json)."""
import gc
import json
import logging
import math
import os
import pathlib
import stat
import warnings
import zipfile

import numpy as np
import pytest

from rsvqa_jax import storage
from rsvqa_jax.errors import RSVQAError
from test_train_support import warnings_of_rsvqa_jax


def _entry(builds):
  """(open_entry, build): the entry is the text of its `value` file; build counts its calls."""
  def open_entry(path):
    try:
      with open(os.path.join(path, "value")) as f:
        return f.read() or None  # an empty file stands for a corrupted entry
    except OSError:
      return None

  def build(tmp):
    builds.append(tmp)
    with open(os.path.join(tmp, "value"), "w") as f:
      f.write(f"built {len(builds)}")
  return open_entry, build


def test_built_once_then_opened(tmp_path):
  builds = []
  open_entry, build = _entry(builds)
  assert storage.cached(str(tmp_path), "e", open_entry, build, "test entry") == "built 1"
  assert storage.cached(str(tmp_path), "e", open_entry, build, "test entry") == "built 1"
  assert len(builds) == 1
  assert sorted(os.listdir(tmp_path)) == [".e.lock", "e"]  # no temporary folder left


def test_a_folder_that_cannot_be_made_is_named_not_its_temporary_twin(tmp_path):
  # A name of 250 characters fits the file system, `.tmp-NAME-x1y2z3w4` does not: the error
  # named that temporary folder, which the user never gave.
  name = "x" * 250
  with pytest.raises(OSError) as raised:
    with storage.building(str(tmp_path), name):
      pass
  assert raised.value.filename == os.path.join(str(tmp_path), name)
  assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("umask", [0o022, 0o027])
def test_a_built_folder_has_the_permissions_the_umask_gives(tmp_path, umask):
  """mkdtemp made every dataset, benchmark and cache entry 0700: unreadable to a lab's group."""
  old = os.umask(umask)
  try:
    with storage.building(str(tmp_path), "entry") as tmp:
      (pathlib.Path(tmp) / "file").write_text("x")
  finally:
    os.umask(old)
  assert stat.S_IMODE(os.stat(tmp_path / "entry").st_mode) == 0o777 & ~umask
  assert stat.S_IMODE(os.stat(tmp_path / "entry" / "file").st_mode) == 0o666 & ~umask


def test_a_cache_entry_built_or_read_is_a_debug_line(tmp_path, caplog):
  """`rsvqa-jax -v` showed nothing more than without it: these are what it shows."""
  builds = []
  open_entry, build = _entry(builds)
  with warnings_of_rsvqa_jax(caplog, level=logging.DEBUG):
    storage.cached(str(tmp_path), "e", open_entry, build, "test entry")
    storage.cached(str(tmp_path), "e", open_entry, build, "test entry")
  said = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG]
  assert len(said) == 2 and said[0].startswith(f"{tmp_path}/e: test entry built (")
  assert said[1] == f"{tmp_path}/e: test entry read from the cache"


def test_a_corrupted_entry_is_a_warning_and_built_again(tmp_path, caplog):
  builds = []
  open_entry, build = _entry(builds)
  os.makedirs(tmp_path / "e")
  (tmp_path / "e" / "value").write_text("")
  with warnings_of_rsvqa_jax(caplog):
    assert storage.cached(str(tmp_path), "e", open_entry, build, "test entry") == "built 1"
  warnings = {r.getMessage() for r in caplog.records if r.levelno == logging.WARNING}
  assert warnings == {f"{tmp_path}/e: incomplete or corrupted test entry, recomputing"}


def test_an_entry_unreadable_after_its_build_is_an_error(tmp_path):
  build = lambda tmp: open(os.path.join(tmp, "value"), "w").close()
  with pytest.raises(RSVQAError, match=r"/e: test entry unreadable right after writing it$"):
    storage.cached(str(tmp_path), "e", lambda path: None, build, "test entry")


def test_read_json_takes_a_missing_malformed_or_too_deep_file_for_none(tmp_path):
  deep = tmp_path / "deep.json"
  deep.write_text("[" * 100_000 + "]" * 100_000)  # RecursionError inside json, not ValueError
  bad = tmp_path / "bad.json"
  bad.write_text("{")
  good = tmp_path / "good.json"
  good.write_text('{"a": [1]}')
  assert [storage.read_json(str(p)) for p in (deep, bad, tmp_path / "none.json", good)] == [
      None, None, None, {"a": [1]}]


def _strict(text):
  """json.loads that refuses NaN / Infinity, as jq or JavaScript would."""
  def refuse(constant):
    raise ValueError(f"non-standard JSON number {constant}")
  return json.loads(text, parse_constant=refuse)


def test_json_files_and_lines_hold_null_where_there_is_no_number(tmp_path):
  value = {"oa": math.nan, "per_type": {"count": math.inf, "presence": 0.5}, "pool": None,
           "per_repeat": [-math.inf, 1.0], "n": 3}
  path = str(tmp_path / "a.json")
  storage.write_json(path, value)
  with open(path) as f:
    written = _strict(f.read())
  assert written == {"oa": None, "per_type": {"count": None, "presence": 0.5}, "pool": None,
                     "per_repeat": [None, 1.0], "n": 3}
  assert _strict(storage.json_line(value)) == written
  assert "\n" not in storage.json_line(value)
  assert value["oa"] != value["oa"]  # the caller's value is left as it was


def test_exchange_swaps_two_folders_in_one_step(tmp_path):
  (tmp_path / "a").mkdir()
  (tmp_path / "a" / "x").write_text("a")
  (tmp_path / "b").mkdir()
  assert storage.exchange(str(tmp_path / "a"), str(tmp_path / "b"))  # Linux, ext4 / tmpfs
  assert os.listdir(tmp_path / "a") == [] and (tmp_path / "b" / "x").read_text() == "a"


def _built_over(tmp_path, replace=True):
  """Builds folder tmp_path/d (holding `new`) over an earlier one (holding `old`)."""
  (tmp_path / "d").mkdir(exist_ok=True)
  (tmp_path / "d" / "old").write_text("")
  with storage.building(str(tmp_path), "d", replace=replace) as tmp:
    pathlib.Path(tmp, "new").write_text("")


def test_without_the_one_step_swap_a_folder_is_replaced_by_two_renames(tmp_path, monkeypatch):
  monkeypatch.setattr(storage, "exchange", lambda a, b: False)
  _built_over(tmp_path)
  assert os.listdir(tmp_path / "d") == ["new"] and os.listdir(tmp_path) == ["d"]
  (tmp_path / ".old-d-1-2").mkdir()  # what a kill between those renames left
  _built_over(tmp_path)
  assert os.listdir(tmp_path) == ["d"]


def test_a_folder_not_replaced_keeps_what_another_run_completed_first(tmp_path):
  _built_over(tmp_path, replace=False)
  assert sorted(os.listdir(tmp_path / "d")) == ["old"] and os.listdir(tmp_path) == ["d"]


def test_a_cut_npz_archive_leaves_no_file_open(tmp_path):
  """np.load opened the file of a cut archive and never closed it: a ResourceWarning per
  damaged mask or vocabulary file that the readers refuse (their one-line errors stand)."""
  whole = tmp_path / "whole.npz"
  np.savez(whole, a=np.arange(1000))
  cut = tmp_path / "cut.npz"
  cut.write_bytes(whole.read_bytes()[:2000])
  with storage.npz(whole) as archive:
    assert archive["a"].sum() == 499500
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always", ResourceWarning)
    with pytest.raises(zipfile.BadZipFile):
      with storage.npz(cut):
        pass
    gc.collect()
  assert [str(w.message) for w in caught] == []
