"""Dataset generation is all or nothing: interrupted, killed or concurrent runs never leave a
folder that a later run refuses (issue 14, item 1); a user's own folder is never written over."""
import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from rsvqa_jax import cli, storage
from rsvqa_jax.data import images, rsvqa_json, split_files, synthetic
from rsvqa_jax.errors import RSVQAError

CONFIGS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "configs")

SMALL = dict(variant="lr", images=4, seed=0, questions_per_image=3)
HOST = socket.gethostname()


def _interrupt_after(monkeypatch, n):
  """Makes the n+1-th image write raise KeyboardInterrupt, as a Ctrl-C halfway would."""
  real = images.write_tif
  calls = []

  def write_tif(*args, **kwargs):
    calls.append(1)
    if len(calls) > n:
      raise KeyboardInterrupt
    return real(*args, **kwargs)

  monkeypatch.setattr(images, "write_tif", write_tif)


def _dead_pid():
  proc = subprocess.Popen([sys.executable, "-c", "pass"])
  proc.wait()
  return proc.pid


def test_interrupted_generation_leaves_nothing_and_the_next_run_completes(tmp_path, monkeypatch):
  out = tmp_path / "data"
  _interrupt_after(monkeypatch, 2)
  with pytest.raises(KeyboardInterrupt):
    synthetic.ensure_synthetic(str(out), **SMALL)
  assert not out.exists() and os.listdir(tmp_path) == []
  monkeypatch.undo()
  assert synthetic.ensure_synthetic(str(out), **SMALL)
  assert synthetic.read_manifest(str(out))["images"] == 4


def test_interrupted_regeneration_keeps_the_previous_dataset(tmp_path, monkeypatch):
  out = str(tmp_path / "data")
  synthetic.generate(out, **SMALL)
  _interrupt_after(monkeypatch, 1)
  with pytest.raises(KeyboardInterrupt):
    synthetic.ensure_synthetic(out, **{**SMALL, "images": 5})
  assert synthetic.read_manifest(out)["images"] == 4  # the old one, whole
  monkeypatch.undo()
  synthetic.ensure_synthetic(out, **{**SMALL, "images": 5})
  assert synthetic.read_manifest(out)["images"] == 5 and sorted(os.listdir(tmp_path)) == ["data"]


def test_a_killed_runs_leftovers_are_cleaned(tmp_path):
  """SIGKILL runs no cleanup: its build folder stays beside the target until the next run."""
  dead = tmp_path / ".tmp-data-abc123"
  (dead / "Images_LR").mkdir(parents=True)
  (dead / storage.OWNER).write_text(json.dumps({"pid": _dead_pid(), "host": HOST}))
  live = tmp_path / ".tmp-data-live00"  # a run still going in this very process
  live.mkdir()
  (live / storage.OWNER).write_text(json.dumps({"pid": os.getpid(), "host": HOST}))
  other = tmp_path / ".tmp-otherdata-xyz"  # another dataset's: not ours to judge
  other.mkdir()
  aside = tmp_path / ".old-data-1-2"  # moved aside by a run killed before removing it
  aside.mkdir()
  synthetic.ensure_synthetic(str(tmp_path / "data"), **SMALL)
  assert sorted(os.listdir(tmp_path)) == [".tmp-data-live00", ".tmp-otherdata-xyz", "data"]


@pytest.mark.parametrize("folder", ["benchmark", "lm"])
def test_other_replaced_folders_clean_what_a_killed_build_left(tmp_path, folder):
  """A shortcut benchmark's build (and a study's stand-in language model's) killed left its
  temporary folder for good: hundreds of MB per kill at the paper's size."""
  from rsvqa_jax.bias import shortcut_report  # pylint: disable=g-import-not-at-top
  from rsvqa_jax.study import language_models  # pylint: disable=g-import-not-at-top
  dead = tmp_path / f".tmp-{folder}-abc123"
  dead.mkdir()
  (dead / storage.OWNER).write_text(json.dumps({"pid": _dead_pid(), "host": HOST}))
  if folder == "benchmark":  # a replaced folder: one moved aside by a killed replacement
    (tmp_path / f".old-{folder}-1-2").mkdir()
  live = tmp_path / f".tmp-{folder}-live00"
  live.mkdir()
  (live / storage.OWNER).write_text(json.dumps({"pid": os.getpid(), "host": HOST}))
  if folder == "benchmark":
    with shortcut_report.rebuilt(str(tmp_path / folder)) as tmp:
      (Path(tmp) / "shortcuts.json").write_text("{}")
  else:
    language_models.random_skipthoughts(str(tmp_path / folder), ["a", "road"], word_dim=4,
                                        hidden_dim=4)
  assert sorted(os.listdir(tmp_path)) == [f".tmp-{folder}-live00", folder]
  assert storage.OWNER not in os.listdir(tmp_path / folder)


def _old_generator_leftover(folder):
  """What the generator before issue 14 left when killed: files written straight into place."""
  os.makedirs(os.path.join(folder, "Images_LR"))
  os.makedirs(os.path.join(folder, synthetic.MASK_DIR))
  with open(os.path.join(folder, "Images_LR", "0.tif"), "wb") as f:
    f.write(b"II*\0half")
  with open(os.path.join(folder, synthetic.MASK_DIR, "0.npz"), "wb") as f:
    f.write(b"PK")
  with open(split_files.split_file(folder, "lr", "train", "images"), "w") as f:
    f.write('{"images": [')


def test_half_written_folder_without_manifest_is_replaced(tmp_path):
  out = str(tmp_path / "data")
  _old_generator_leftover(out)
  assert synthetic.ensure_synthetic(out, **SMALL)
  assert synthetic.read_manifest(out)["images"] == 4
  assert len(rsvqa_json.read_dataset(out, "lr")["train"]) > 0


@pytest.mark.parametrize("extra", ["notes.txt", "masks/readme.md", "Images_LR/photo.jpg"])
def test_a_users_folder_is_refused(tmp_path, extra):
  out = str(tmp_path / "data")
  _old_generator_leftover(out)
  with open(os.path.join(out, extra), "w") as f:
    f.write("mine")
  with pytest.raises(RSVQAError, match="refusing"):
    synthetic.ensure_synthetic(out, **SMALL)
  assert os.path.exists(os.path.join(out, extra))


def test_an_official_layout_without_masks_is_refused(tmp_path):
  """A user's RSVQA LR copy has the generator's file names but never its masks/ folder."""
  out = str(tmp_path / "RSVQA_LR")
  _old_generator_leftover(out)
  os.remove(os.path.join(out, synthetic.MASK_DIR, "0.npz"))
  os.rmdir(os.path.join(out, synthetic.MASK_DIR))
  with pytest.raises(RSVQAError, match="refusing"):
    synthetic.generate(out, **SMALL)
  assert os.path.exists(os.path.join(out, "Images_LR", "0.tif"))


def test_two_generations_at_once_both_succeed(tmp_path):
  out = str(tmp_path / "data")
  errors, barrier = [], threading.Barrier(2)

  def run():
    try:
      barrier.wait()
      synthetic.ensure_synthetic(out, **SMALL)
    except BaseException as e:  # pylint: disable=broad-except
      errors.append(e)

  threads = [threading.Thread(target=run) for _ in range(2)]
  for t in threads:
    t.start()
  for t in threads:
    t.join()
  assert errors == []
  assert synthetic.read_manifest(out)["images"] == 4 and sorted(os.listdir(tmp_path)) == ["data"]
  assert len(rsvqa_json.read_dataset(out, "lr")["train"]) > 0


def test_two_synth_processes_at_once_both_succeed(tmp_path):
  out = str(tmp_path / "data")
  cmd = [sys.executable, "-m", "rsvqa_jax.cli", "synth", "--out", out, "--images", "4",
         "--questions-per-image", "3"]
  procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(2)]
  results = [p.communicate(timeout=300) + (p.returncode,) for p in procs]
  assert [rc for _, _, rc in results] == [0, 0], results
  assert synthetic.read_manifest(out)["images"] == 4 and sorted(os.listdir(tmp_path)) == ["data"]


def test_a_tilde_the_shell_left_is_the_home_folder_not_one_in_the_cwd(tmp_path, monkeypatch):
  # `--out=~/d` (one word) and a quoted "~/d" reach the command unexpanded: it wrote ./~/d.
  monkeypatch.setenv("HOME", str(tmp_path / "home"))
  monkeypatch.chdir(tmp_path)
  for out in ("--out=~/d", "--out=~/d/"):
    assert cli.main(["-q", "synth", out, "--images", "4", "--questions-per-image", "2"]) == 0
  assert sorted(os.listdir(tmp_path)) == ["home"]
  assert synthetic.read_manifest(str(tmp_path / "home" / "d")) is not None


def test_synth_command_refuses_a_users_folder_in_one_line(tmp_path, capsys):
  out = tmp_path / "mine"
  out.mkdir()
  (out / "notes.txt").write_text("mine")
  assert cli.main(["synth", "--out", str(out), "--images", "4"]) == 2
  err = capsys.readouterr().err.strip()
  assert len(err.splitlines()) == 1 and "refusing" in err


def test_a_folder_with_an_unreadable_manifest_is_not_said_to_have_none(tmp_path, capsys):
  """A damaged synthetic.json read "(no synthetic.json, ...)" beside the file itself."""
  out = tmp_path / "mine"
  out.mkdir()
  (out / synthetic.MANIFEST).write_text("{bad")
  assert cli.main(["synth", "--out", str(out), "--images", "4"]) == 2
  assert capsys.readouterr().err.strip() == (
      f"rsvqa-jax synth: error: {out}: holds files that are not a synthetic dataset (its "
      f"{synthetic.MANIFEST} is not the generator's, not a generator's leftover); refusing to "
      "write a synthetic dataset over it")
  assert (out / synthetic.MANIFEST).read_text() == "{bad"


def test_a_set_that_cannot_fit_on_the_disk_is_refused_before_writing(tmp_path, capsys):
  """`--images 100000000` started writing 37 TB of tiles into a disk of a few GB, and
  `--images 99999999999999999999` was an OverflowError: both are one line, nothing written."""
  free = storage.shutil.disk_usage(tmp_path).free
  for variant in ("lr", "hr", "xben"):
    one = synthetic.needed_bytes(variant, 1, 25)
    too_many = free // one + 1
    out = tmp_path / variant
    assert cli.main(["synth", "--out", str(out), "--variant", variant, "--images",
                     str(too_many), "--questions-per-image", "25"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"rsvqa-jax synth: error: {tmp_path}: no space for the synthetic "
                          f"{variant} set of {too_many} images: it needs about ") and err.endswith(
                              "are free; free some space or ask for fewer images (--images)"), err
    assert not out.exists()
  # An estimate that never refuses what fits, of the disk's blocks (a grounding PNG of 400 bytes
  # takes 4 KB: a set of 9 MB of files took 12 MB, and a disk with room for 9 failed late).
  assert synthetic.needed_bytes("lr", 12, 4) <= sum(
      f.stat().st_blocks * 512 for f in _synth_lr(tmp_path / "fits").rglob("*") if f.is_file())
  assert cli.main(["synth", "--out", str(tmp_path / "huge"), "--images",
                   "99999999999999999999"]) == 2
  assert "no space for the synthetic lr set" in capsys.readouterr().err
  # Training's own synthetic stage: 10**20 images was an OverflowError, 10**9 wrote until killed.
  assert cli.main(["-q", "train", "--config", os.path.join(CONFIGS, "synthetic_tiny.py"),
                   "--workdir", str(tmp_path / "run"), f"--config.data.cache_dir={tmp_path}/c",
                   "--config.data.synthetic_images=1000000000"]) == 2
  err = capsys.readouterr().err.strip()
  assert err.startswith("rsvqa-jax train: error: ") and err.endswith(
      "are free; free some space or ask for fewer images (data.synthetic_images)"), err


def _synth_lr(out):
  assert cli.main(["-q", "synth", "--out", str(out), "--images", "12", "--questions-per-image",
                   "4"]) == 0
  return out


def test_sizes_are_said_in_the_largest_unit_below_1024():
  assert [storage._size(n) for n in (10, 5000, 3 * 2**30, 2 * 2**40, 5 * 2**50)] == [
      "10 bytes", "4.9 KB", "3.0 GB", "2.0 TB", "5,120.0 TB"]


@pytest.mark.parametrize("folder", ["data", "benchmark", "maps"])
def test_a_replaced_folder_is_never_missing_its_name(tmp_path, monkeypatch, folder):
  """A dataset, benchmark or grounding maps folder being replaced was renamed aside, then the
  new one into place: a kill between the two renames (simulated after the first) left nothing
  under the name."""
  from rsvqa_jax.bias import shortcut_report  # pylint: disable=g-import-not-at-top
  from rsvqa_jax.eval import grounding  # pylint: disable=g-import-not-at-top
  target = tmp_path / folder
  if folder == "data":
    synthetic.generate(str(target), **SMALL)
  else:
    target.mkdir()
    (target / "old").write_text("")
  rename = os.rename

  def killed_after(src, dst):
    rename(src, dst)
    raise KeyboardInterrupt
  monkeypatch.setattr(os, "rename", killed_after)
  if folder == "data":
    synthetic.ensure_synthetic(str(target), **{**SMALL, "images": 5})
    assert synthetic.read_manifest(str(target))["images"] == 5
  else:
    replacing = shortcut_report.rebuilt(str(target)) if folder == "benchmark" else (
        grounding.replacing_maps(str(tmp_path)))
    with replacing as tmp:
      (Path(tmp) / "new").write_text("")
    assert os.listdir(target) == ["new"]
  assert not [n for n in os.listdir(tmp_path) if n.startswith((".tmp-", ".old-"))]
