"""A workdir's recorded config: refused when another run's, its paths following a moved folder."""
import json
import os
import shutil

import pytest

from rsvqa_jax.errors import RSVQAError
from rsvqa_jax import config as config_lib
from rsvqa_jax.train import checkpointing


def _config(root, cache):
  c = config_lib.base_config()
  c.data.root, c.data.cache_dir, c.text.checkpoint = root, cache, config_lib.RANDOM
  return c


def test_paths_follow_a_moved_tree_and_only_when_the_old_ones_are_gone(tmp_path):
  old = tmp_path / "old"
  for sub in ("data", "cache", "runs/a"):
    os.makedirs(old / sub)
  elsewhere = tmp_path / "shared_cache"
  os.makedirs(elsewhere)
  workdir = str(old / "runs" / "a")
  assert checkpointing.check_or_record_config(workdir, _config(str(old / "data"), str(elsewhere)))
  with open(os.path.join(workdir, checkpointing.CONFIG_FILE)) as f:
    assert json.load(f)[checkpointing.RECORDED_IN] == workdir

  new = tmp_path / "new"
  shutil.move(str(old), str(new))
  moved = str(new / "runs" / "a")
  config = checkpointing.read_config(moved)
  assert config.data.root == str(new / "data")  # gone from the old place: follows the move
  assert config.data.cache_dir == str(elsewhere)  # still there: kept as recorded
  assert checkpointing.check_or_record_config(
      moved, _config(str(new / "data"), str(elsewhere))) is False
  with pytest.raises(RSVQAError, match="data.cache_dir"):
    checkpointing.check_or_record_config(moved, _config(str(new / "data"), str(new / "cache")))
