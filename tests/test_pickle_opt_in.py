"""A received workdir cannot run code: the pickle opt-in comes from the command line only.

A crafted workdir records text.allow_pickle=true (as older versions did) and points
text.checkpoint at a folder whose utable.npy is a pickle that creates a file when loaded:
`evaluate` must refuse without unpickling it, and only `--allow-pickle` on the command line lets
a trusted pickled table load.
"""
import json
import os
import pathlib

import numpy as np
import pytest

from rsvqa_jax import cli
from rsvqa_jax import config as config_lib
from rsvqa_jax.errors import RSVQAError
from rsvqa_jax.models import skipthoughts_params
from rsvqa_jax.train import inputs, loop, prepare

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class _Payload:
  """Unpickling this creates `marker`: the stand-in for code a crafted file would run."""

  def __init__(self, marker):
    self.marker = marker

  def __reduce__(self):
    return (pathlib.Path.touch, (pathlib.Path(self.marker),))


def _skipthoughts_folder(folder, words, table, w=4, h=3):
  os.makedirs(folder, exist_ok=True)
  rng = np.random.default_rng(0)
  normal = lambda *s: rng.standard_normal(s).astype(np.float32)
  np.savez(os.path.join(folder, "uni_skip.npz"), encoder_W=normal(w, 2 * h),
           encoder_b=normal(2 * h), encoder_U=normal(h, 2 * h), encoder_Wx=normal(w, h),
           encoder_bx=normal(h), encoder_Ux=normal(h, h))
  with open(os.path.join(folder, "dictionary.txt"), "w") as f:
    f.write("\n".join(["UNK"] + words) + "\n")
  np.save(os.path.join(folder, "utable.npy"), table, allow_pickle=True)


def test_recorded_opt_in_is_ignored_and_the_payload_never_runs(tmp_path, capsys):
  c = config_lib.load(os.path.join(ROOT, "configs", "synthetic_tiny.py"))
  config_lib.apply_overrides(c, [
      "data.synthetic_images=12", "data.synthetic_questions_per_image=4", "train.num_epochs=1",
      "train.batch_size=8", "train.progress_bar=false", f"data.cache_dir={tmp_path / 'cache'}",
      "text.frozen=true", "optim.text_lr=0.0"])
  workdir = str(tmp_path / "w")
  prepare.synthetic_dataset(c, workdir)
  words = inputs.dataset_words(inputs.load_dataset(c, workdir))
  folder = str(tmp_path / "skip")
  trusted = np.empty((), dtype=object)  # a pickled object array, as the original utable.npy is
  trusted[()] = np.random.default_rng(1).standard_normal((len(words) + 1, 4)).astype(np.float32)
  _skipthoughts_folder(folder, words, trusted)
  c.text.checkpoint = folder
  with pytest.raises(RSVQAError, match="pickled object array; run with --allow-pickle"):
    loop.train(c, workdir, log=lambda m: None)
  with skipthoughts_params.pickle_allowed():
    loop.train(c, workdir, log=lambda m: None)
  assert cli.main(["evaluate", "--workdir", workdir, "--allow-pickle"]) == 0
  capsys.readouterr()

  # The workdir is handed to someone else, with the opt-in recorded and a hostile table.
  marker = tmp_path / "pwned"
  hostile = np.empty((), dtype=object)
  hostile[()] = _Payload(str(marker))
  np.save(os.path.join(folder, "utable.npy"), hostile, allow_pickle=True)
  path = os.path.join(workdir, "config.json")
  with open(path) as f:
    recorded = json.load(f)
  recorded["text"]["allow_pickle"] = True
  with open(path, "w") as f:
    json.dump(recorded, f)
  assert "allow_pickle" not in config_lib.from_dict(recorded).text
  rc = cli.main(["evaluate", "--workdir", workdir])
  err = capsys.readouterr().err
  assert rc == 2 and "run with --allow-pickle" in err and "Traceback" not in err
  assert not marker.exists()


@pytest.mark.parametrize("content,message", [
    (b"", "not a readable .npy file"),
    (b"a text file, not a table\n", r"not a .npy file \(no NumPy header\)")])
def test_a_table_that_is_no_npy_is_named_as_such_never_as_a_pickle(tmp_path, content, message):
  """numpy takes any file without its header for a bare pickle: the message must not then
  suggest --allow-pickle (unpickling a file that is not even a table)."""
  path = tmp_path / "utable.npy"
  path.write_bytes(content)
  with pytest.raises(RSVQAError, match=f"{path}: {message}"):
    skipthoughts_params.read_table_rows(str(path), [0])
  npz = tmp_path / "uni_skip.npz"
  npz.write_bytes(content)
  with pytest.raises(RSVQAError, match=rf"{npz}: not an \.npz file \(an \.npz is a zip archive"):
    skipthoughts_params.read_uni_skip(str(npz))
