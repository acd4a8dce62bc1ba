"""A command killed between two writes leaves nothing a rerun or a reader takes for complete.

Each case stops a writer at the exact point a kill could land (a write that raises half-way
stands for the process dying there) and checks what is left on disk; no timing, no sleeps.
"""
import builtins
import errno
import os
import socket
import stat
import subprocess
import sys
import time

import pytest

from rsvqa_jax import storage
from rsvqa_jax.errors import RSVQAError
from rsvqa_jax.train import loop, metrics_log
import subprocess_env

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class _Killed(BaseException):
  """Stands for the process dying where it is raised (nothing catches it)."""


def _open_dying_on(path):
  """builtins.open, except a text file opened for writing at (or next to) `path` dies after its
  first line is written."""
  real = builtins.open

  def fake(file, mode="r", *args, **kwargs):
    f = real(file, mode, *args, **kwargs)
    if "w" in mode and str(file).startswith(str(path)):
      write = f.write

      def dying_writelines(lines):
        for line in lines:
          write(line)
          f.flush()
          raise _Killed
      f.writelines = dying_writelines
    return f
  return fake


def test_a_resume_killed_while_it_rewrites_metrics_jsonl_loses_no_record(tmp_path, monkeypatch):
  """A resume rewrites metrics.jsonl without the lines past the restored step: opened "w" in
  place, a kill between the truncation and the last line lost the earlier epochs' records (the
  best validation OA that `tables` and the study read among them)."""
  workdir = str(tmp_path)
  path = os.path.join(workdir, metrics_log.METRICS_FILE)
  records = [{"step": s, "split": "train", "loss": 1.0 / s} for s in (10, 20, 30)]
  records.append({"step": 30, "split": "val", "oa": 0.5})
  with open(path, "w") as f:
    f.writelines(storage.json_line(r) + "\n" for r in records + [{"step": 40, "loss": 0.1}])
  fake = _open_dying_on(path)
  monkeypatch.setattr(loop, "open", fake, raising=False)
  monkeypatch.setattr(storage, "open", fake, raising=False)
  with pytest.raises(_Killed):
    loop.MetricsWriter(workdir, resume_step=30)
  monkeypatch.undo()
  assert [r["step"] for r in metrics_log.read(workdir)] == [10, 20, 30, 30, 40]
  writer = loop.MetricsWriter(workdir, resume_step=30)  # the next resume drops step 40 whole
  writer.tb.close()
  assert metrics_log.read(workdir) == records
  assert sorted(os.listdir(workdir)) == [metrics_log.METRICS_FILE, "tensorboard"]


def test_a_figure_killed_while_it_is_written_leaves_no_half_png(tmp_path, monkeypatch):
  """plots.save wrote the PNG in place (fig.savefig(path)): `analyze`, `tables` of a study or the
  study's report killed there left a cut figure under its real name, read as the figure."""
  from matplotlib.figure import Figure  # pylint: disable=g-import-not-at-top
  from rsvqa_jax.bias import plots  # pylint: disable=g-import-not-at-top
  path = str(tmp_path / "figures" / "answer_distribution.png")
  real = Figure.savefig

  def dying_savefig(self, fname, **kwargs):
    real(self, fname, **kwargs)
    with open(fname, "r+b") as f:  # the process died with half the bytes out
      f.truncate(os.path.getsize(fname) // 2)
    raise _Killed

  monkeypatch.setattr(Figure, "savefig", dying_savefig)
  fig = Figure()
  fig.subplots().plot([0, 1], [1, 0])
  with pytest.raises(_Killed):
    plots.save(fig, path, dpi=50)
  assert not os.path.exists(path)
  monkeypatch.undo()
  assert plots.save(fig, path, dpi=50) == path
  with open(path, "rb") as f:
    assert f.read(8) == b"\x89PNG\r\n\x1a\n"
  assert os.listdir(os.path.dirname(path)) == ["answer_distribution.png"]


def _dead_pid():
  proc = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                        capture_output=True, text=True, check=True)
  return int(proc.stdout)


def test_the_temporary_file_of_a_killed_write_is_removed_by_the_next_one(tmp_path):
  """A SIGKILL between the write of `PATH.tmp-TOKEN-PID-HOST` and its rename left that file for
  good (a copy the size of the output: an adversarial predictions CSV of K repeats); the next
  write of PATH removes it once its process is gone, and leaves a live or recent writer's alone,
  and another host's whatever its age (its pid means nothing here; its clock may lag)."""
  path = str(tmp_path / "accuracy.json")
  old = time.time() - 10 * storage.STALE_SECONDS
  host = socket.gethostname()
  dead, recent, live, elsewhere = (f"{path}.tmp-ab12cd34-{_dead_pid()}-{host}",
                                   f"{path}.tmp-ab12cd35-{_dead_pid()}-{host}",
                                   f"{path}.tmp-ab12cd36-{os.getppid()}-{host}",
                                   f"{path}.tmp-ab12cd37-{_dead_pid()}-{host}-x.example")
  for tmp in (dead, recent, live, elsewhere):
    with open(tmp, "w") as f:
      f.write('{"oa": 0.')
  for tmp in (dead, live, elsewhere):
    os.utime(tmp, (old, old))
  other = str(tmp_path / f"predictions.csv.tmp-ab12cd38-{_dead_pid()}-{host}")  # not this write's
  open(other, "w").close()
  os.utime(other, (old, old))
  storage.write_json(path, {"oa": 0.5})
  assert storage.read_json(path) == {"oa": 0.5}
  assert sorted(os.listdir(tmp_path)) == sorted(
      ["accuracy.json"] + [os.path.basename(p) for p in (recent, live, elsewhere, other)])


def test_a_write_that_fails_names_the_file_not_its_temporary_twin(tmp_path, monkeypatch):
  """A full disk while a result file was written named `PATH.tmp-...`, a file the user never
  gave (and that was already removed)."""
  path = str(tmp_path / "accuracy.json")

  def full(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")

  monkeypatch.setattr(storage.json, "dump", full)
  with pytest.raises(OSError) as e:
    storage.write_json(path, {"oa": 0.5})
  assert e.value.errno == errno.ENOSPC and e.value.filename == path
  assert os.listdir(tmp_path) == []


def test_a_figure_that_fills_the_disk_names_its_file(tmp_path, monkeypatch):
  """PIL's close of a PNG on a full disk raises ENOSPC naming no file: analyze and the study's
  figures ended with "a file: no space left on device"."""
  import matplotlib  # pylint: disable=g-import-not-at-top
  matplotlib.use("Agg")
  from matplotlib import figure  # pylint: disable=g-import-not-at-top
  from rsvqa_jax.bias import plots  # pylint: disable=g-import-not-at-top

  def full(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")

  fig = figure.Figure()
  monkeypatch.setattr(fig, "savefig", full)
  path = str(tmp_path / "figures" / "answer_distribution.png")
  with pytest.raises(OSError) as e:
    plots.save(fig, path, 50)
  assert e.value.errno == errno.ENOSPC and e.value.filename == path
  assert os.listdir(tmp_path / "figures") == []


def _run(code):
  """The finished `python -c code` (its status, stdout and stderr)."""
  return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                        env=subprocess_env.env())


def _interrupted_inside(block, tail="  os.kill(os.getpid(), signal.SIGINT)\n  time.sleep(60)\n"):
  """Runs `block` (code ending in an indented suite) under the CLI's interrupt handler, where
  `tail` sends itself SIGINT (by default at the suite's end), and checks it ended with 130."""
  out = _run("import os, signal, sys, time\n"
             "from rsvqa_jax import cli, storage\n"
             "cli.exit_on_interrupt('rsvqa-jax test')\n"
             f"{block}{tail}")
  assert out.returncode == 130, out.stderr[-2000:]


def test_an_interrupt_while_a_file_is_written_leaves_no_temporary_file(tmp_path):
  """Ctrl-C ends the process with os._exit, which skips `replacing`'s cleanup: the half-written
  `PATH.tmp-PID` stayed beside PATH (SIGINT at the write of predictions.csv, accuracy.json)."""
  path = str(tmp_path / "predictions.csv")
  _interrupted_inside(f"with storage.replacing({path!r}) as f:\n"
                      "  f.write('question_id,prediction\\n1,')\n"
                      "  f.flush()\n")
  assert os.listdir(tmp_path) == []


def test_an_interrupt_while_a_folder_is_built_leaves_no_temporary_folder(tmp_path):
  """The same for the `.tmp-NAME-*` folder of a dataset or cache entry being built: an
  interrupted synth left 60 MB there until the next build of the same name."""
  _interrupted_inside(f"with storage.building({str(tmp_path)!r}, 'lr') as tmp:\n"
                      "  os.makedirs(os.path.join(tmp, 'Images_LR'))\n"
                      "  open(os.path.join(tmp, 'Images_LR', '0.tif'), 'w').close()\n")
  assert os.listdir(tmp_path) == []


def test_an_interrupt_while_a_command_writes_a_folder_ends_in_its_own_line(tmp_path):
  """The watcher removed the folder the main thread was still writing into: the write's "no such
  file" (of a dataset file the user never had) was printed as the command's error, and its status
  2 raced the interrupt's 130 (a third of the Ctrl-Cs during a study's dataset generation)."""
  code = ("import os, signal, sys, threading, time\n"
          "from rsvqa_jax import cli, storage\n"
          "from rsvqa_jax.commands import synth\n"
          "def run(args):  # writes into a folder being built until interrupted\n"
          f"  with storage.building({str(tmp_path)!r}, 'lr') as tmp:\n"
          "    threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT)).start()\n"
          "    for i in range(10**9):\n"
          "      with open(os.path.join(tmp, f'{i % 50}.tif'), 'w') as f:\n"
          "        f.write('x')\n"
          "synth.run = run\n"
          "cli.exit_on_interrupt('rsvqa-jax synth')\n"
          f"sys.exit(cli.main(['synth', '--out', {str(tmp_path / 'lr')!r}]))\n")
  for _ in range(3):  # the race was lost one time in three
    out = _run(code)
    assert (out.returncode, out.stderr.strip()) == (130, (
        "rsvqa-jax synth: interrupted (SIGINT); run the same command again: it keeps what was "
        "finished")), out.stderr[-2000:]
    assert os.listdir(tmp_path) == []


def test_an_interrupt_inside_a_commit_still_ends_the_process(tmp_path):
  """The main thread parked by the interrupt's handler inside a commit held the commit lock,
  which the watcher waited on for good: the process never ended, not even on SIGTERM."""
  path = str(tmp_path / "accuracy.json")
  _interrupted_inside("real = os.replace\n"
                      "def replace(*args):\n"
                      "  real(*args)\n"
                      "  if storage._COMMIT.locked():  # its handler runs before the lock is let go\n"
                      "    os.kill(os.getpid(), signal.SIGINT)\n"
                      "os.replace = replace\n"
                      f"with storage.replacing_path({path!r}) as tmp:\n"
                      "  open(tmp, 'w').close()\n", tail="time.sleep(60)\n")
  assert os.listdir(tmp_path) == ["accuracy.json"]  # put in place before the interrupt


def test_nothing_is_put_in_place_once_an_interrupt_cleans_up(tmp_path):
  """A block that completed while the interrupt removed its temporary folder renamed what was
  left of it into place: a dataset half deleted under its final name."""
  code = ("import os, threading\n"
          "from rsvqa_jax import storage\n"
          "written, cleaned = threading.Event(), threading.Event()\n"
          "def build():\n"
          f"  with storage.building({str(tmp_path)!r}, 'lr') as tmp:\n"
          "    open(os.path.join(tmp, 'a'), 'w').close()\n"
          "    written.set()\n"
          "    cleaned.wait()\n"
          "t = threading.Thread(target=build, daemon=True)\n"
          "t.start()\n"
          "written.wait()\n"
          "storage.remove_unfinished()\n"
          "cleaned.set()\n"
          "t.join(2)\n"
          f"print(t.is_alive(), sorted(os.listdir({str(tmp_path)!r})))\n")
  out = _run(code)
  assert out.stdout.strip() == "True []", out.stdout + out.stderr[-2000:]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
  """An in-memory task and a model trained on it (as tests/test_eval.py's)."""
  from test_train_support import tiny_config, tiny_task  # pylint: disable=g-import-not-at-top
  dataset, feats = tiny_task(n_images=40)
  workdir = str(tmp_path_factory.mktemp("kill") / "ref")
  loop.train(tiny_config(batch_size=16, num_epochs=1), workdir, dataset=dataset, features=feats,
             log=lambda m: None)
  return dataset, feats, workdir


def test_an_evaluation_killed_between_its_csv_and_its_json_leaves_no_json_of_another(
    trained, monkeypatch):
  """write_results replaced the predictions CSV, then the JSON: killed between the two, an
  earlier evaluation's JSON (of other repeats, seed or step) stayed beside the new CSV and
  `tables`, the study's reuse check or a reader of the pair took it for the CSV's."""
  import csv  # pylint: disable=g-import-not-at-top
  from rsvqa_jax.eval import accuracy, adversarial, outputs  # pylint: disable=g-import-not-at-top
  dataset, feats, workdir = trained
  adversarial.evaluate(workdir, "test", "random", repeats=2, dataset=dataset, features=feats)
  json_path, csv_path = outputs.adversarial_paths(workdir, "test", "random")
  assert storage.read_json(json_path)["repeats"] == 2

  def killed(path, value, **kwargs):
    raise _Killed

  monkeypatch.setattr(accuracy.storage, "write_json", killed)
  with pytest.raises(_Killed):
    adversarial.evaluate(workdir, "test", "random", repeats=3, dataset=dataset, features=feats)
  monkeypatch.undo()
  with open(csv_path, newline="") as f:
    assert {r["repeat"] for r in csv.DictReader(f)} == {"0", "1", "2"}  # the new CSV
  assert not os.path.exists(json_path)  # so the evaluation reads as not done
  adversarial.evaluate(workdir, "test", "random", repeats=3, dataset=dataset, features=feats)
  assert storage.read_json(json_path)["repeats"] == 3


def test_the_entry_point_imports_nothing_heavy_before_its_interrupt_handler():
  """The console script imports rsvqa_jax.cli, then `entry` installs the interrupt handler: a
  Ctrl-C while cli's own imports ran (tqdm, and rsvqa_jax.config through argument_types: a
  tenth of a second, more under load) printed a KeyboardInterrupt traceback of 20 to 40 lines
  instead of the one line. Only the standard library may load before the handler."""
  code = ("import sys\n"
          "before = set(sys.modules)\n"
          "import rsvqa_jax.cli\n"
          "print('\\n'.join(sorted(set(sys.modules) - before)))\n")
  out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       check=True, env=subprocess_env.env())
  loaded = out.stdout.split()
  ours = sorted(m for m in loaded if m.split(".")[0] == "rsvqa_jax")
  assert ours == ["rsvqa_jax", "rsvqa_jax.cli", "rsvqa_jax.errors", "rsvqa_jax.jax_environment",
                  "rsvqa_jax.streams"], ours
  heavy = [m for m in loaded if m.split(".")[0] in ("tqdm", "numpy", "jax", "ml_collections")]
  assert not heavy, heavy


def test_an_analysis_that_fails_part_way_leaves_the_last_set_whole(tmp_path, monkeypatch):
  """analyze over its earlier --out, on a disk that filled part-way: the types tables of the new
  dataset stood beside the questions tables and figure of the old one, nothing telling them
  apart. The new set is written aside and moved in only once complete."""
  from rsvqa_jax import cli  # pylint: disable=g-import-not-at-top
  from rsvqa_jax.bias import plots  # pylint: disable=g-import-not-at-top
  out = tmp_path / "analysis"
  for seed in (0, 1):
    assert cli.main(["-q", "synth", "--variant", "lr", "--images", "30", "--questions-per-image",
                     "6", "--seed", str(seed), "--out", str(tmp_path / f"lr{seed}")]) == 0
  assert cli.main(["-q", "analyze", "--data", str(tmp_path / "lr0"), "--out", str(out)]) == 0
  before = {p.name: p.read_bytes() for p in out.iterdir()}

  def full(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")

  monkeypatch.setattr(plots, "answer_distribution", full)  # the last file written
  assert cli.main(["-q", "analyze", "--data", str(tmp_path / "lr1"), "--out", str(out)]) == 2
  assert {p.name: p.read_bytes() for p in out.iterdir()} == before
  monkeypatch.undo()
  assert cli.main(["-q", "analyze", "--data", str(tmp_path / "lr1"), "--out", str(out)]) == 0
  after = {p.name: p.read_bytes() for p in out.iterdir()}
  assert set(after) == set(before) and after["types_test.csv"] != before["types_test.csv"]


def test_a_device_given_as_an_output_is_refused_not_replaced(tmp_path):
  """An output path naming a device (`--out /dev/full`, `/dev/stdout`) was written through a
  temporary file renamed over it: the device became a regular file for every later process."""
  for device in ("/dev/null", "/dev/full"):
    if not os.path.exists(device):
      continue
    with pytest.raises(RSVQAError, match=f"^{device}: not a regular file"):
      storage.write_json(device, {"oa": 0.5})
    assert stat.S_ISCHR(os.stat(device).st_mode)
  fifo = str(tmp_path / "fifo")
  os.mkfifo(fifo)
  with pytest.raises(RSVQAError, match="not a regular file"):
    with storage.replacing(fifo) as f:
      f.write("x")
  assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_an_analysis_drops_the_tables_of_an_earlier_one_it_has_not(tmp_path):
  """analyze of RSVQA-HR over the --out of an RSVQA-LR analysis left LR's objects_patterns_*
  tables (Table 4, LR only) beside HR's types tables, read as HR's."""
  from rsvqa_jax import cli  # pylint: disable=g-import-not-at-top
  out = tmp_path / "analysis"
  for variant in ("lr", "hr"):
    assert cli.main(["-q", "synth", "--variant", variant, "--images", "30",
                     "--questions-per-image", "6", "--out", str(tmp_path / variant)]) == 0
  (out / "notes.txt").parent.mkdir()
  (out / "notes.txt").write_text("the user's")
  assert cli.main(["-q", "analyze", "--data", str(tmp_path / "lr"), "--out", str(out)]) == 0
  assert (out / "objects_patterns_test.csv").exists()
  assert cli.main(["-q", "analyze", "--data", str(tmp_path / "hr"), "--out", str(out)]) == 0
  assert not [p.name for p in out.iterdir() if p.name.startswith("objects_patterns_")]
  assert (out / "types_test.csv").exists() and (out / "notes.txt").read_text() == "the user's"
