"""Errors raised below the Python API name the argument a Python caller gives, not only the
command-line flag: restore, adversarial testing, the data checks, the prediction files' reader
and the Skip-thoughts table word their advice for the commands (whose tests assert it), and
`rsvqa_jax.load_run` / `TrainedRun.evaluate` / `rsvqa_jax.analyze` told a Python user about
flags they never typed."""
import json
import os
import shutil

import numpy as np
import pytest

import rsvqa_jax
from rsvqa_jax import api
from rsvqa_jax import config as config_lib
from rsvqa_jax.errors import RSVQAError
from rsvqa_jax.models import skipthoughts_params
from rsvqa_jax.train import inputs, loop, prepare
from test_train_support import flip_bytes

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _tiny(*overrides):
  c = config_lib.load(os.path.join(ROOT, "configs", "synthetic_tiny.py"))
  config_lib.apply_overrides(c, ["train.progress_bar=false", *overrides])
  return c


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
  """(base folder, workdir, its dataset folder): a run on a copy of a 3-image synthetic dataset
  (one image per split), periodic checkpoints every 2 steps, all kept."""
  base = tmp_path_factory.mktemp("api_messages")
  c = _tiny("data.synthetic_images=3", f"data.cache_dir={base / 'cache'}")
  prepare.synthetic_dataset(c, str(base / "gen"))
  data = base / "data"
  shutil.copytree(config_lib.synthetic_root(c, str(base / "gen")), data)
  c = _tiny("train.num_epochs=2", "data.synthetic=false", f"data.root={data}",
            "text.checkpoint=random", "image.checkpoint=random", f"data.cache_dir={base / 'cache'}",
            "train.batch_size=4", "train.checkpoint_every_steps=2", "train.keep_checkpoints=20")
  workdir = base / "run"
  loop.train(c, str(workdir), log=lambda m: None)
  return base, workdir, data


def _copy(trained, name):
  base, workdir, _ = trained
  copy = base / name
  shutil.copytree(workdir, copy)
  return copy


def _steps(folder):
  return sorted(int(s) for s in os.listdir(folder) if s.isdigit())


def test_no_best_checkpoint_yet_names_checkpoint_last(trained):
  copy = _copy(trained, "no_best")
  best = _steps(copy / "best")[-1]
  shutil.rmtree(copy / "best")
  for step in _steps(copy / "checkpoints"):
    if step >= best:  # the checkpoints from the first validation on: none has run
      shutil.rmtree(copy / "checkpoints" / str(step))
  with pytest.raises(RSVQAError, match=r"no best checkpoint yet .*\(--checkpoint last; "
                                       r"checkpoint='last' in load_run\) uses step \d+$"):
    rsvqa_jax.load_run(str(copy))
  assert rsvqa_jax.load_run(str(copy), checkpoint="last").step < best


def test_a_best_step_that_does_not_verify_names_checkpoint_last(trained):
  copy = _copy(trained, "corrupt")
  best = _steps(copy / "best")[-1]
  flip_bytes(str(copy / "best" / str(best)))
  shutil.rmtree(copy / "checkpoints" / str(best))  # its periodic twin
  with pytest.raises(RSVQAError, match=r"has no checkpoint that verifies; the newest that does, "
                                       r"step \d+, can be used instead \(--checkpoint last; "
                                       r"checkpoint='last' in load_run\)$"):
    rsvqa_jax.load_run(str(copy))


def test_adversarial_advice_names_evaluate_arguments(trained):
  run = rsvqa_jax.load_run(str(trained[1]))
  with pytest.raises(RSVQAError, match=r"this split holds one: draw from the dataset's "
                                       r"\(--pool dataset; pool='dataset' in evaluate\)$"):
    run.evaluate("test", adversarial_kind="random", pool="split")
  with pytest.raises(RSVQAError, match=r"holds a single image, of 1 in the split\); use "
                                       r"--adversarial random \(adversarial_kind='random' in "
                                       r"evaluate\)$"):
    run.evaluate("test", adversarial_kind="shuffle")
  limit = config_lib.MAX_REPEATS
  with pytest.raises(RSVQAError, match=rf"^evaluate repeats={limit + 1}: must be from 1 to "
                                       rf"{limit}$"):  # it said --repeats
    run.evaluate("test", adversarial_kind="random", repeats=limit + 1)


def test_other_training_data_names_load_run_data_root(trained):
  base, workdir, data = trained
  other = base / "other"
  shutil.copytree(data, other)
  path = other / "LR_split_train_questions.json"
  files = json.loads(path.read_text())
  entry = next(e for e in files["questions"] if e["active"])
  entry["question"] += " again"
  path.write_text(json.dumps(files))
  with pytest.raises(RSVQAError, match=r"is not the one .* trained on .*: give the data it "
                                       r"trained on \(load_run data_root=\), or train in another "
                                       r"--workdir$"):
    rsvqa_jax.load_run(str(workdir), data_root=str(other))


def test_a_data_root_gone_since_load_run_is_named_as_load_run_names_it(trained):
  base, workdir, data = trained
  moved = base / "moved"
  shutil.copytree(data, moved)
  run = rsvqa_jax.load_run(str(workdir), data_root=str(moved))
  shutil.rmtree(moved)
  with pytest.raises(RSVQAError, match=rf"^load_run data_root {moved}: not a folder$"):
    run.evaluate("test")  # it said --data-root


def test_predictions_of_another_split_name_analyze_split(trained):
  _, workdir, data = trained
  rsvqa_jax.load_run(str(workdir)).evaluate("val")
  predictions = str(workdir / "eval" / "val" / "predictions.csv")
  for split in (None, "test"):
    with pytest.raises(RSVQAError, match=r"they are questions of val: analyze that split "
                                         r"\(--split val; split='val' in Python\)$"):
      rsvqa_jax.analyze(str(data), "lr", predictions=predictions, split=split)
  assert set(rsvqa_jax.analyze(str(data), "lr", predictions=predictions, split="val")) == {"val"}


def test_a_pickled_word_table_names_allow_pickle(tmp_path):
  c = _tiny("data.synthetic_images=3", "data.synthetic_questions_per_image=8",
            "train.num_epochs=1", "train.batch_size=8", f"data.cache_dir={tmp_path / 'cache'}",
            "text.frozen=true", "optim.text_lr=0.0")
  workdir = str(tmp_path / "w")
  prepare.synthetic_dataset(c, workdir)
  words = inputs.dataset_words(inputs.load_dataset(c, workdir))
  folder = tmp_path / "skip"
  folder.mkdir()
  rng = np.random.default_rng(0)
  normal = lambda *s: rng.standard_normal(s).astype(np.float32)
  np.savez(folder / "uni_skip.npz", encoder_W=normal(4, 6), encoder_b=normal(6),
           encoder_U=normal(3, 6), encoder_Wx=normal(4, 3), encoder_bx=normal(3),
           encoder_Ux=normal(3, 3))
  (folder / "dictionary.txt").write_text("\n".join(["UNK"] + words) + "\n")
  table = np.empty((), dtype=object)  # pickled, as the original utable.npy is
  table[()] = normal(len(words) + 1, 4)
  np.save(folder / "utable.npy", table, allow_pickle=True)
  c.text.checkpoint = str(folder)
  with skipthoughts_params.pickle_allowed():
    loop.train(c, workdir, log=lambda m: None)
  with pytest.raises(RSVQAError, match=r"pickled object array; run with --allow-pickle "
                                       r"\(allow_pickle=True in load_run\) only if you trust"):
    rsvqa_jax.load_run(workdir)
  assert rsvqa_jax.load_run(workdir, allow_pickle=True).step >= 1


def test_other_errors_pass_unchanged():
  error = RSVQAError("x: no such thing (--out elsewhere)")

  def fails():
    raise error

  with pytest.raises(RSVQAError) as caught:
    api._worded_for_python(fails)()  # pylint: disable=protected-access
  assert caught.value is error


def test_odd_images_paths_and_arguments_are_one_line_errors(trained, tmp_path):
  """Each raised something other than an RSVQAError, a message of two lines, or nothing: a
  ragged list (numpy's ValueError), a PNG PIL will not decode (DecompressionBombError), a path
  holding a line break, an unhashable or empty dataset= (TypeError; "" read as None), a seed the
  command line refuses, a long path echoed whole."""
  from PIL import Image  # pylint: disable=g-import-not-at-top
  _, workdir, data = trained
  run = rsvqa_jax.load_run(str(workdir))
  question = ["Is there a road?"]
  with pytest.raises(RSVQAError, match=r"^image 0: not an array of pixels \(setting an array "
                     r"element with a sequence\..*expected uint8 H x W x 3 \(or a file path\)$"):
    run.predict([[[0, 0], [0]]], question)
  Image.new("1", (20000, 20000)).save(tmp_path / "bomb.png")
  with pytest.raises(RSVQAError, match=f"^{tmp_path}/bomb.png: too large to read \\(Image size "
                     r"\(400000000 pixels\) exceeds limit"):
    run.predict([str(tmp_path / "bomb.png")], question)
  for call in (lambda: run.predict(["a\nb.tif"], question),
               lambda: rsvqa_jax.load_run("ru\nns"), lambda: rsvqa_jax.analyze("no\npe")):
    with pytest.raises(RSVQAError) as error:
      call()
    assert "\n" not in str(error.value) and "\\n" in str(error.value), str(error.value)
  for dataset in (["lr"], {"lr": 1}, "", 0):
    with pytest.raises(RSVQAError, match=r"^analyze dataset=.*: expected one of lr, hr, xben, "
                       r"floodnet, rsivqa \(or None: told from the folder\)$"):
      rsvqa_jax.analyze(str(data), dataset)
  with pytest.raises(RSVQAError, match=r"^evaluate seed=1180591620717411303424: must be from 0 "
                     "to 4294967295$"):
    run.evaluate("test", adversarial_kind="random", repeats=1, seed=2 ** 70)
  for call in (lambda: run.predict(["x" * 5000 + ".tif"], question),
               lambda: rsvqa_jax.load_run("x" * 5000)):
    with pytest.raises(RSVQAError) as error:
      call()
    assert len(str(error.value)) < 400, len(str(error.value))


def test_a_file_where_an_evaluation_folder_belongs_is_one_line(trained):
  """The command line said "not a directory (a file stands where a folder is needed)"; the API
  raised NotADirectoryError and IsADirectoryError."""
  copy = _copy(trained, "blocked_eval")
  shutil.rmtree(copy / "eval", ignore_errors=True)
  (copy / "eval").write_text("")
  run = rsvqa_jax.load_run(str(copy))
  with pytest.raises(RSVQAError, match=f"^{copy}/eval/test: not a directory \\(a file stands "
                     "where a folder is needed\\)$"):
    run.evaluate("test")
  (copy / "eval").unlink()
  (copy / "eval" / "test" / "accuracy.json").mkdir(parents=True)
  with pytest.raises(RSVQAError, match="accuracy.json: is a directory \\(a folder stands where a "
                     "file is needed\\)$"):
    run.evaluate("test")
