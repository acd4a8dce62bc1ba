"""The Python API: the docs' example (docs/api.md) runs as written, and predict agrees with
evaluate."""
import csv
import logging
import os
import re
import reprlib
import shutil
import subprocess
import sys

import numpy as np
import pytest

import rsvqa_jax
from rsvqa_jax import config as config_lib
from rsvqa_jax.bias import tables
from rsvqa_jax.errors import RSVQAError
from rsvqa_jax.train import loop
from test_train_support import warnings_of_rsvqa_jax

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _docs_example():
  with open(os.path.join(ROOT, "docs", "api.md"), encoding="utf-8") as f:
    text = f.read()
  found = re.search(r"<!-- api example: begin -->\s*```python\n(.*?)```", text, re.S)
  assert found, "docs/api.md has no API example between its markers"
  return found.group(1)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
  """configs/synthetic_tiny.py trained into runs/tiny of a fresh folder, as the docs do."""
  base = tmp_path_factory.mktemp("api")
  c = config_lib.load(os.path.join(ROOT, "configs", "synthetic_tiny.py"))
  config_lib.apply_overrides(c, ["train.progress_bar=false", "train.num_epochs=2"])
  loop.train(c, str(base / "runs" / "tiny"), log=lambda m: None)
  return base


def test_docs_example_runs(tiny, monkeypatch, capsys):
  monkeypatch.chdir(tiny)
  exec(compile(_docs_example(), "docs/api.md", "exec"), {})  # pylint: disable=exec-used
  assert capsys.readouterr().out.strip()


def test_predict_agrees_with_evaluate(tiny):
  run = rsvqa_jax.load_run(str(tiny / "runs" / "tiny"))
  table = run.evaluate("test")
  with open(tiny / "runs" / "tiny" / "eval" / "test" / "predictions.csv") as f:
    rows = list(csv.DictReader(f))[:12]
  folder = os.path.join(run.config.data.cache_dir or str(tiny / "runs" / "rsvqa_cache"),
                        "synthetic_lr_40_0_q20", "Images_LR")
  questions = {}
  from rsvqa_jax.data import rsvqa_json  # pylint: disable=g-import-not-at-top
  test = rsvqa_json.read_dataset(os.path.dirname(folder), "lr")["test"]
  for qid, q in zip(test.question_id.tolist(), test.question.tolist()):
    questions[qid] = q
  images = [os.path.join(folder, f"{r['image_id']}.tif") for r in rows]
  answers = run.predict(images, [questions[int(r["question_id"])] for r in rows])
  assert answers == [r["prediction"] for r in rows]
  assert 0.0 <= table["oa"] <= 1.0 and set(table["per_type"]) <= {"count", "presence", "comp",
                                                                 "rural_urban"}
  with pytest.raises(RSVQAError, match=r"^predict: 2 image\(s\) for 1 question\(s\); give one "
                                       "image per question"):
    run.predict(images[:2], ["Is there a road?"])
  with pytest.raises(RSVQAError, match=r"image 1: shape \(4, 4\) and dtype uint8, expected uint8 "
                                       "H x W x 3"):
    run.predict([images[0], np.zeros((4, 4), np.uint8)], ["Is there a road?"] * 2)
  with pytest.raises(RSVQAError, match="image 0: a bytes object .*; give a path as str"):
    run.predict([os.fsencode(images[0])], ["Is there a road?"])
  with pytest.raises(RSVQAError, match="expected uint8 H x W x 3"):
    run.predict([np.zeros((0, 0, 3), np.uint8)], ["Is there a road?"])
  with pytest.raises(RSVQAError, match="predict: images is one image; give a list"):
    run.predict(images[0], ["Is there a road?"])
  with pytest.raises(RSVQAError, match="predict: questions is one question; give a list"):
    run.predict(images[:1], "Is there a road?")
  with pytest.raises(RSVQAError, match="predict: images is one image"):
    run.predict(np.zeros((8, 8, 3), np.uint8), ["Is there a road?"])
  assert len(run.predict(np.zeros((1, 8, 8, 3), np.uint8), np.array(["Is there a road?"]))) == 1
  with pytest.raises(RSVQAError, match="question None is a NoneType, not a string"):
    run.predict(images[:1], [None])
  text = tiny / "notes.png"
  text.write_text("not an image")
  with pytest.raises(RSVQAError, match=f"{text}: not an image file"):
    run.predict([str(text)], ["Is there a road?"])
  from PIL import Image  # pylint: disable=g-import-not-at-top
  pixels = np.random.default_rng(0).integers(0, 4000, (16, 16), dtype=np.uint16)
  for mode, array in (("I;16", pixels), ("L", (pixels // 16).astype(np.uint8)),
                      ("RGBA", np.zeros((16, 16, 4), np.uint8))):
    Image.fromarray(array, mode=None if mode == "I;16" else mode).save(tiny / "odd.png")
    with pytest.raises(RSVQAError, match=rf"odd.png: image mode {re.escape(mode)}, expected "
                                         "8-bit RGB"):  # a 16-bit PNG was clipped to 255
      run.predict([str(tiny / "odd.png")], ["Is there a road?"])
  Image.fromarray(np.full((16, 16, 3), 7, np.uint8)).save(tiny / "rgb.png")
  assert run.predict([str(tiny / "rgb.png")], ["Is there a road?"]) == run.predict(
      [np.full((16, 16, 3), 7, np.uint8)], ["Is there a road?"])
  with pytest.raises(RSVQAError, match=f"{tiny}: a folder, not an image file"):
    run.predict([str(tiny)], ["Is there a road?"])
  with pytest.raises(RSVQAError, match="predict: images is a NoneType; give a list"):
    run.predict(None, ["Is there a road?"])
  with pytest.raises(RSVQAError, match="predict: questions is a int; give a list"):
    run.predict(images[:1], 3)
  for kwargs, message in [(dict(adversarial_kind="xyz"), "evaluate adversarial_kind='xyz': "
                           "choose one of"), (dict(adversarial_kind="random", pool="all"),
                                              "evaluate pool='all'"),
                          (dict(adversarial_kind="random", repeats="2"), "^evaluate repeats='2'"),
                          (dict(adversarial_kind="random", pool=None),
                           "^evaluate pool=None: choose one of"),  # it said --pool None
                          (dict(adversarial_kind="white", pool="split"), "evaluate pool='split': "
                           "applies to adversarial_kind='random' only"),
                          (dict(adversarial_kind="random", seed=-1), "^evaluate seed=-1"),
                          (dict(repeats=5), "apply to an adversarial_kind only"),
                          (dict(split=["test"]), r"evaluate split=\['test'\]: expected one "
                                                 "split name"),
                          (dict(split=""), "evaluate split='': expected one split name")]:
    with pytest.raises(RSVQAError, match=message):
      run.evaluate(**{"split": "test", **kwargs})
  seeded = run.evaluate("test", adversarial_kind="random", seed=np.int64(1))
  assert seeded["seed"] == 1 and seeded["repeats"] == 10  # the CLI's default (it was 1)
  with pytest.raises(RSVQAError, match="load_run workdir: expected a path"):
    rsvqa_jax.load_run(None)
  assert rsvqa_jax.RSVQAError is RSVQAError and "RSVQAError" in rsvqa_jax.__all__
  with pytest.raises(RSVQAError, match=r"^load_run data_root .*nosuch: .*tiny trains on the "
                     r"synthetic dataset .*; leave load_run data_root out$"):
    rsvqa_jax.load_run(str(tiny / "runs" / "tiny"), data_root=str(tiny / "nosuch"))


def test_evaluate_says_when_it_scored_another_step_than_the_run_loaded(tiny, caplog):
  """run.evaluate reads the workdir's checkpoint as it is now: for a run loaded mid-training
  and trained on since, it scored a later step than run.predict answers with, unsaid."""
  run = rsvqa_jax.load_run(str(tiny / "runs" / "tiny"))
  with warnings_of_rsvqa_jax(caplog):
    assert run.evaluate("test")["step"] == run.step
  assert not caplog.records
  loaded = run.step
  run.step = loaded - 1  # as if loaded at an earlier best step
  with warnings_of_rsvqa_jax(caplog):
    assert run.evaluate("test")["step"] == loaded
  assert [r.getMessage() for r in caplog.records] == [
      f"{run.workdir}: evaluated at step {loaded}, the workdir's best checkpoint now; this run "
      f"was loaded at step {loaded - 1} (the run trained on since): load_run again for predict "
      "to match"]


def test_load_run_says_what_is_wrong_with_the_folder(tmp_path):
  (tmp_path / "file").write_text("x")
  (tmp_path / "empty").mkdir()
  for name, message in (("nosuch", "does not exist"), ("file", "is a file, not a folder")):
    with pytest.raises(RSVQAError, match=f"{name}: {message}; give a training workdir$"):
      rsvqa_jax.load_run(str(tmp_path / name))
  with pytest.raises(RSVQAError, match="empty: no config.json; is it a training workdir"):
    rsvqa_jax.load_run(str(tmp_path / "empty"))


def test_api_calls_leave_the_root_logger_as_they_found_it(monkeypatch):
  """absl (imported with orbax) runs logging.basicConfig() at its first message: a notebook's own
  basicConfig() after load_run then did nothing."""
  from rsvqa_jax import caller_logging  # pylint: disable=g-import-not-at-top
  root = logging.getLogger()
  monkeypatch.setattr(root, "handlers", [])  # a fresh interpreter's (pytest adds its own)
  assert caller_logging.keeping(logging.basicConfig)() is None
  assert root.handlers == []
  mine = logging.NullHandler()
  root.handlers.append(mine)  # the user's configuration is theirs: kept whole
  caller_logging.keeping(logging.basicConfig)()
  assert root.handlers == [mine]


def test_overlapping_api_calls_in_threads_put_the_levels_back():
  """The second of two overlapping calls recorded the level the first had raised and put it
  back last: absl stayed at WARNING for good."""
  import importlib  # pylint: disable=g-import-not-at-top
  import threading  # pylint: disable=g-import-not-at-top
  importlib.import_module("absl.logging")  # kept() holds absl's logger once absl is imported
  from rsvqa_jax import caller_logging  # pylint: disable=g-import-not-at-top
  held = logging.getLogger("absl")
  before = held.level
  steps = [threading.Event() for _ in range(3)]

  def first():
    with caller_logging.kept():
      steps[0].set()  # inside
      steps[1].wait()  # the second call is inside too
  thread = threading.Thread(target=first)
  thread.start()
  steps[0].wait()
  with caller_logging.kept():
    steps[1].set()
    thread.join()  # the first call ends before this one
    assert held.level == max(before, logging.WARNING)
  assert held.level == before


def test_the_first_use_of_the_api_leaves_the_root_logger_alone():
  """Importing orbax (on the first touch of rsvqa_jax.load_run) logs through absl, which then
  ran basicConfig(): a notebook's own basicConfig() after it did nothing."""
  assert "USER mine" in _fresh_python_stderr(
      "import logging, rsvqa_jax\n"
      "rsvqa_jax.load_run\n"
      "assert logging.getLogger().handlers == [], logging.getLogger().handlers\n"
      "logging.basicConfig(level=logging.INFO, format='USER %(message)s')\n"
      "logging.getLogger('notebook').info('mine')\n")


def _fresh_python_stderr(code):
  """The standard error of `code` run in a fresh interpreter, which must succeed."""
  done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600,
                        check=False)
  assert done.returncode == 0, done.stderr[-2000:]
  return done.stderr


def test_orbax_routine_lines_are_held_back_in_a_notebook_logging_at_info(tiny, caplog):
  """A notebook at INFO got dozens of absl lines per load_run and evaluate (orbax's checkpoint
  manager), burying the library's own; its WARNINGs still show, and absl's level is restored."""
  absl = logging.getLogger("absl")
  level = absl.level
  with caplog.at_level(logging.INFO):
    run = rsvqa_jax.load_run(str(tiny / "runs" / "tiny"))
    run.evaluate("test")
    held = [r for r in caplog.records if r.name == "absl"]
    from rsvqa_jax import caller_logging  # pylint: disable=g-import-not-at-top
    with caller_logging.kept():
      absl.warning("a warning of absl's")
  assert [r.getMessage() for r in held] == [] and absl.level == level
  assert "a warning of absl's" in [r.getMessage() for r in caplog.records]


def test_a_notebook_logging_at_info_sees_no_backend_probe_of_jax(tiny):
  """jax's first use logs at INFO that it found no TPU ("Unable to initialize backend 'tpu':
  ... libtpu.so"), which read as a fault in a notebook that set basicConfig(level=INFO) to
  see the library's own lines; jax's WARNINGs still show, and its level is restored."""
  err = _fresh_python_stderr(
      "import logging, rsvqa_jax\n"
      "logging.basicConfig(level=logging.INFO, format='USER %(name)s %(message)s')\n"
      f"run = rsvqa_jax.load_run({str(tiny / 'runs' / 'tiny')!r})\n"
      "from rsvqa_jax import caller_logging\n"
      "with caller_logging.kept():\n"
      "  logging.getLogger('jax._src.xla_bridge').warning('a warning of jax')\n"
      "assert logging.getLogger('jax').level == logging.NOTSET\n")
  assert "USER jax._src.xla_bridge a warning of jax" in err
  assert not [l for l in err.splitlines() if l.startswith("USER jax")
              and "a warning of jax" not in l], err[-2000:]


def test_a_level_the_user_gave_jax_is_kept(monkeypatch, caplog):
  """JAX_LOGGING_LEVEL=DEBUG (or the user's own setLevel) asks for jax's lines: kept() holds
  back only a jax logger left at NOTSET."""
  from rsvqa_jax import caller_logging  # pylint: disable=g-import-not-at-top
  jax_logger = logging.getLogger("jax")
  monkeypatch.setattr(jax_logger, "level", logging.DEBUG)
  with caplog.at_level(logging.DEBUG), caller_logging.kept():
    logging.getLogger("jax._src.xla_bridge").info("asked for")
  assert "asked for" in [r.getMessage() for r in caplog.records]
  assert jax_logger.level == logging.DEBUG


def test_predict_builds_the_image_encoder_once(tiny, monkeypatch):
  """Each call rebuilt (and re-initialised) the encoder: seconds per call in a notebook."""
  from rsvqa_jax import api  # pylint: disable=g-import-not-at-top
  built = []
  real = api.encoder_lib.encoder_for
  monkeypatch.setattr(api.encoder_lib, "encoder_for", lambda cfg: built.append(1) or real(cfg))
  run = rsvqa_jax.load_run(str(tiny / "runs" / "tiny"))
  built.clear()  # what restoring the run built
  image = np.zeros((32, 32, 3), np.uint8)
  answers = [run.predict([image], ["Is there a road?"]) for _ in range(3)]
  assert len(built) == 1 and answers[0] == answers[1] == answers[2]


def test_predict_at_native_size_takes_the_dataset_tiles_size_only(tiny):
  """With image.image_size=0 the encoder reads tiles at their size: an image of another size
  reached it unresized and was answered, unlike anything the run trained on."""
  run = rsvqa_jax.load_run(str(tiny / "runs" / "tiny"))
  run._run.config.image.image_size = 0  # pylint: disable=protected-access  (as a run trained at native size, the real-data configs)
  size = run._run.dataset.image_size  # pylint: disable=protected-access
  tile = np.full(tuple(size) + (3,), 90, np.uint8)
  assert len(run.predict([tile], ["Is there a road?"])) == 1
  with pytest.raises(RSVQAError, match=rf"^predict: image 1 is 64x48; this run's encoder reads "
                                       rf"the dataset's {size[0]}x{size[1]} tiles at their size"):
    run.predict([tile, tile[:64, :48]], ["Is there a road?", "Is there a road?"])


def test_predict_resizes_an_image_of_another_size_than_the_tiles_with_a_warning(tiny, caplog):
  """Resized to image.image_size as the tiles were, a 64x48 image was answered without a word,
  though its pixels cover another ground area than the tiles' did."""
  run = rsvqa_jax.load_run(str(tiny / "runs" / "tiny"))
  size = run._run.dataset.image_size  # pylint: disable=protected-access
  tile = np.full(tuple(size) + (3,), 90, np.uint8)
  with warnings_of_rsvqa_jax(caplog):
    assert len(run.predict([tile, tile[:64, :48]], ["Is there a road?"] * 2)) == 2
  assert [r.getMessage() for r in caplog.records] == [
      f"predict: 1 image(s) not of the dataset's {size[0]}x{size[1]} tile size (e.g. image 1, "
      f"64x48): resized to {run.config.image.image_size}x{run.config.image.image_size} as the "
      "tiles were, but each pixel then covers another ground area than in training"]


def test_predict_warns_of_questions_without_a_known_word(tiny, caplog):
  """A question of words the model never saw is all UNK: it is answered, and a WARNING says so."""
  run = rsvqa_jax.load_run(str(tiny / "runs" / "tiny"))
  size = run._run.dataset.image_size  # pylint: disable=protected-access
  image = np.zeros(tuple(size) + (3,), np.uint8)
  with warnings_of_rsvqa_jax(caplog):
    assert len(run.predict([image], ["Is there a road?"])) == 1
    assert not caplog.records
    assert len(run.predict([image, image], ["Is there a road?", "Quelle est cette zorgle?"])) == 2
  assert [r.getMessage() for r in caplog.records] == [
      "predict: 1 question(s) hold no word the model knows (e.g. 'Quelle est cette zorgle?'): "
      "their answers rest on the image and the question's length alone"]
  caplog.clear()
  long = " ".join(["is there a road"] * 20) + "?"  # as training cuts them, never silently
  with warnings_of_rsvqa_jax(caplog):  # a WARNING: a notebook shows no INFO line
    assert len(run.predict([image, image], [long, "Is there a road?"])) == 2
  limit = run.config.text.max_length
  assert [r.getMessage() for r in caplog.records] == [
      f"predict: 1 question(s) longer than text.max_length={limit} tokens, cut to it (e.g. "
      f"{reprlib.repr(long)})"]


def test_the_config_of_a_loaded_run_is_read_only_and_its_data_root_absolute(tiny, tmp_path,
                                                                           monkeypatch):
  """A changed run.config changed predict's answers (not evaluate's) without a word; a relative
  data_root was lost after os.chdir; allow_pickle='no' (truthy) allowed unpickling."""
  run = rsvqa_jax.load_run(str(tiny / "runs" / "tiny"))
  with pytest.raises(AttributeError, match="immutable"):
    run.config.text.max_length = 2
  editable = run.config.as_configdict()
  editable.text.max_length = 2
  assert run.config.text.max_length != 2  # a copy: the run is unchanged
  with pytest.raises(RSVQAError, match=r"^load_run allow_pickle='no': expected True or False$"):
    rsvqa_jax.load_run(str(tiny / "runs" / "tiny"), allow_pickle="no")
  # A run on a dataset folder, loaded with the folder's new place given relative to the cwd.
  shutil.copytree(tiny / "runs" / "rsvqa_cache" / "synthetic_lr_40_0_q20", tmp_path / "data")
  c = config_lib.load(os.path.join(ROOT, "configs", "synthetic_tiny.py"))
  config_lib.apply_overrides(c, ["train.progress_bar=false", "train.num_epochs=1",
                                 "data.synthetic=false", f"data.root={tmp_path / 'data'}",
                                 "text.checkpoint=random", "image.checkpoint=random",
                                 f"data.cache_dir={tmp_path / 'cache'}"])
  loop.train(c, str(tmp_path / "real"), log=lambda m: None)
  shutil.move(tmp_path / "data", tmp_path / "moved")
  monkeypatch.chdir(tmp_path)
  moved = rsvqa_jax.load_run("real", data_root="moved")
  monkeypatch.chdir(tiny)
  assert moved.evaluate("test")["n"] == len(moved._run.dataset["test"])  # pylint: disable=protected-access


def test_table_renderers_name_what_they_were_given_instead(tiny):
  root = str(tiny / "runs" / "rsvqa_cache" / "synthetic_lr_40_0_q20")
  out = rsvqa_jax.analyze(root, "lr")
  assert tables.to_markdown(out["test"]["types"]).startswith("**")
  for render in (tables.to_markdown, tables.to_csv, tables.to_latex):
    with pytest.raises(RSVQAError, match=rf"^{render.__name__}: expected a bias.tables.Table, got "
                                         "dict; e.g. analyze"):
      render(out["test"])
  with pytest.raises(RSVQAError, match=r"got NoneType \(None: the analysis has no such table"):
    tables.to_csv(None)


def test_analyze_returns_tables(tiny):
  root = str(tiny / "runs" / "rsvqa_cache" / "synthetic_lr_40_0_q20")
  out = rsvqa_jax.analyze(root, "lr")
  assert set(out) == {"test"}
  types = out["test"]["types"]
  assert types.columns[0] == "Question type" and types.rows
  assert out["test"]["objects"] is not None
  from rsvqa_jax.data import rsvqa_json  # pylint: disable=g-import-not-at-top
  assert out["test"]["analysis"].n_eval == len(rsvqa_json.read_dataset(root, "lr")["test"])
  # the layout told from the folder, as the command tells it; a misspelt one names the folder's
  assert rsvqa_jax.analyze(root)["test"]["analysis"].n_eval == out["test"]["analysis"].n_eval
  with pytest.raises(RSVQAError, match=r"unknown dataset 'LR': expected one of lr, hr, xben, "
                     r"floodnet, rsivqa; the folder holds dataset lr: name it with --dataset lr "
                     r"\(dataset='lr' from Python"):
    rsvqa_jax.analyze(root, "LR")
  with pytest.raises(RSVQAError, match="no split 'nosuch'"):
    rsvqa_jax.analyze(root, "lr", split="nosuch")
  # The layout asked for, and a dataset one folder down, in Python's words too (they named
  # --dataset and --data alone).
  empty = tiny / "not_a_dataset"
  empty.mkdir(exist_ok=True)
  with pytest.raises(RSVQAError, match=r"name its layout with --dataset \(lr, hr, xben, floodnet, "
                     r"rsivqa; dataset= in analyze\)$"):
    rsvqa_jax.analyze(str(empty))
  with pytest.raises(RSVQAError, match=r"the dataset files are in .*synthetic_lr_40_0_q20: give "
                     r"--data \S+ \(data_root= in Python; in a training config, data.root="):
    rsvqa_jax.analyze(os.path.dirname(root))
  two = tiny / "two_datasets"
  two.mkdir(exist_ok=True)
  for name in ("a", "b"):
    if not (two / name).exists():
      os.symlink(root, two / name)
  with pytest.raises(RSVQAError, match=r"give one of them with --data \(data_root= in Python; "
                     r"in a training config, data.root\)$"):
    rsvqa_jax.analyze(str(two))
  with pytest.raises(RSVQAError, match="analyze data_root: expected a path"):
    rsvqa_jax.analyze(None, "lr")
  with pytest.raises(RSVQAError, match="expected one split name"):
    rsvqa_jax.analyze(root, "lr", split=["test", "val"])
  with pytest.raises(RSVQAError, match="analyze split='': expected one split name"):
    rsvqa_jax.analyze(root, "lr", split="")
  with pytest.raises(RSVQAError, match="analyze predictions: an empty path"):
    rsvqa_jax.analyze(root, "lr", predictions="")
  with pytest.raises(RSVQAError, match="adversarial_predictions needs predictions"):
    rsvqa_jax.analyze(root, "lr", adversarial_predictions="a.csv")


def test_evaluate_seeds_says_what_it_scored(tiny, monkeypatch, capsys):
  """The --seeds summary JSON read alike for clean and adversarial runs, and no printed line
  named the checkpoint or step scored. It is strict JSON: a question type that no run's split
  holds (NaN in every run) printed a bare NaN, which jq and JavaScript refuse."""
  import json  # pylint: disable=g-import-not-at-top
  import shutil  # pylint: disable=g-import-not-at-top
  from rsvqa_jax import cli  # pylint: disable=g-import-not-at-top
  from rsvqa_jax.bias import tables  # pylint: disable=g-import-not-at-top
  columns = tables.run_columns
  monkeypatch.setattr(tables, "run_columns",
                      lambda results: {**columns(results), "absent": [float("nan")] * 2})
  monkeypatch.chdir(tiny)
  other = tiny / "runs" / "tiny_s1"  # beside runs/tiny: the same cache folder
  shutil.copytree(tiny / "runs" / "tiny", other)
  config = json.loads((other / "config.json").read_text())
  config["seed"] = 1
  (other / "config.json").write_text(json.dumps(config))
  try:
    assert cli.main(["evaluate", "--seeds", "runs/tiny", str(other), "--adversarial", "random",
                     "--repeats", "2"]) == 0
  finally:
    shutil.rmtree(other)
  out = capsys.readouterr().out
  summary = json.loads(out.strip().splitlines()[-1], parse_constant=pytest.fail)
  assert summary["mean"]["absent"] is None and summary["std"]["absent"] is None
  assert {k: summary[k] for k in ("split", "checkpoint", "adversarial", "repeats", "adv_seed",
                                  "pool")} == {"split": "test", "checkpoint": "best",
                                               "adversarial": "random", "repeats": 2,
                                               "adv_seed": 0, "pool": "dataset"}
  assert re.search(r"runs/tiny: \d+ test questions \(best checkpoint, step \d+\)", out), out


def test_analyze_refuses_an_adversarial_file_as_predictions_and_warns_of_answers_counted_wrong(
    tiny, tmp_path, caplog):
  """From Python, a file of K adversarial repeats given as predictions was averaged into
  RSVQA_Acc and IO_Prior without a word (the command refused it), and answers outside the
  answer space were counted wrong in silence (the command prints how many)."""
  root = str(tiny / "runs" / "rsvqa_cache" / "synthetic_lr_40_0_q20")
  run = rsvqa_jax.load_run(str(tiny / "runs" / "tiny"))
  run.evaluate("test")
  run.evaluate("test", adversarial_kind="random", repeats=2)
  folder = tiny / "runs" / "tiny" / "eval" / "test"
  with pytest.raises(RSVQAError, match=r"a 'repeat' column: answers given over substituted "
                                       "images"):
    rsvqa_jax.analyze(root, "lr", predictions=str(folder / "adversarial_random_predictions.csv"))
  with open(folder / "predictions.csv", encoding="utf-8") as f:
    rows = list(csv.DictReader(f))
  rows[0]["prediction"] = "banana"
  odd = tmp_path / "odd.csv"
  with open(odd, "w", encoding="utf-8", newline="") as f:
    writer = csv.DictWriter(f, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
  with warnings_of_rsvqa_jax(caplog):
    rsvqa_jax.analyze(root, "lr", predictions=str(odd))
  [message] = [r.getMessage() for r in caplog.records]
  assert f"{odd} on test:" in message and "1 outside the training answer space" in message
  # A count question answered "yes" (in the space, of another type's form) is a model's mistake,
  # counted wrong, INFO; every count question so is a file of another convention: a WARNING (it
  # went out at INFO, and the result had no count of such answers).
  for row in rows:
    row["prediction"] = row["answer"]
  counts = [r for r in rows if r["type"] == "count"]
  for wrong_form, warned in ((counts[:1], False), (counts, True)):
    for row in wrong_form:
      row["prediction"] = "yes"
    with open(odd, "w", encoding="utf-8", newline="") as f:
      writer = csv.DictWriter(f, fieldnames=list(rows[0]))
      writer.writeheader()
      writer.writerows(rows)
    caplog.clear()
    with warnings_of_rsvqa_jax(caplog):
      out = rsvqa_jax.analyze(root, "lr", predictions=str(odd))
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == warned and all(
        f"{len(wrong_form)} not of their question type's answer form" in m for m in messages)
    scores = out["test"]["analysis"].accuracy
    assert (scores.foreign, scores.outside) == (len(wrong_form), 0)
    assert scores.overall == pytest.approx(1 - len(wrong_form) / len(rows))
    assert (f"predictions: 0 outside the training answer space and {len(wrong_form)} not of their "
            "question type's answer form, counted wrong") in out["test"]["types"].caption


def test_analyze_refuses_an_adversarial_file_of_other_questions(tiny, tmp_path):
  """IO_AdTest of an adversarial file lacking questions the clean one answers: those counted
  wrong made a model look as if it read the image."""
  root = str(tiny / "runs" / "rsvqa_cache" / "synthetic_lr_40_0_q20")
  run = rsvqa_jax.load_run(str(tiny / "runs" / "tiny"))
  run.evaluate("test")
  run.evaluate("test", adversarial_kind="random", repeats=2)
  folder = tiny / "runs" / "tiny" / "eval" / "test"
  adv = folder / "adversarial_random_predictions.csv"
  out = rsvqa_jax.analyze(root, "lr", predictions=str(folder / "predictions.csv"),
                          adversarial_predictions=str(adv))
  assert out["test"]["analysis"].adversarial.missing == 0
  with open(adv, encoding="utf-8") as f:
    rows = list(csv.DictReader(f))
  half = tmp_path / "half.csv"
  with open(half, "w", encoding="utf-8", newline="") as f:
    writer = csv.DictWriter(f, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows[1:])
  with pytest.raises(RSVQAError, match=r"half.csv \(repeat \d\) on test: 1 question\(s\) "
                                       r"answered in .*predictions.csv without an adversarial"):
    rsvqa_jax.analyze(root, "lr", predictions=str(folder / "predictions.csv"),
                      adversarial_predictions=str(half))


def test_a_run_prints_in_one_short_line_and_the_package_lists_its_lazy_names(tiny):
  run = rsvqa_jax.load_run(str(tiny / "runs" / "tiny"))
  text = repr(run)  # the dataclass's repr printed the whole state: 155,000 characters
  assert text.startswith("TrainedRun(workdir=") and "checkpoint='best'" in text
  assert len(text) < 300 and "\n" not in text
  assert {"load_run", "analyze", "TrainedRun", "RSVQAError"} <= set(dir(rsvqa_jax))
