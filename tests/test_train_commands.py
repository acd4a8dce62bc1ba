"""The train command's config handling and every shipped config file."""
import argparse
import glob
import os
import re
import shlex

import pytest

from rsvqa_jax import cli
from rsvqa_jax.commands import train as train_cmd
from rsvqa_jax.data import synthetic
from rsvqa_jax.errors import RSVQAError
from rsvqa_jax import config as config_lib
from rsvqa_jax.train import checkpointing, inputs, model_builder
from test_train_support import listing

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ARGS = {"lr_table1.py": ["", "skipthoughts,concat,frozen", "roberta,mutan,finetuned"],
        "lr_table2.py": ["baseline", "distilbert_finetuned_mult"],
        "lr_blind.py": ["skipthoughts,frozen"], "hr.py": [""], "xben.py": [""],
        "synthetic_tiny.py": ["", "blind,frozen"], "synthetic_small.py": ["", "frozen"]}


def _parse(argv):
  parser = argparse.ArgumentParser()
  train_cmd.add_arguments(parser)
  return parser.parse_args(argv)


def test_every_config_loads():
  files = sorted(os.path.basename(p) for p in glob.glob(os.path.join(ROOT, "configs", "[!_]*.py")))
  assert {"lr_table1.py", "lr_table2.py", "rsvqa_baseline.py", "lr_blind.py", "hr.py", "xben.py",
          "synthetic_tiny.py", "synthetic_small.py"} <= set(files)
  for name in files:
    for arg in ARGS.get(name, [""]):
      spec = os.path.join(ROOT, "configs", name) + (f":{arg}" if arg else "")
      c = config_lib.load(spec)
      assert c.train.batch_size > 0 and c.model.fusion in config_lib.FUSIONS
  c = config_lib.load(os.path.join(ROOT, "configs", "lr_table1.py:bert,mutan,finetuned"))
  assert (c.text.encoder, c.model.fusion, c.optim.text_lr, c.optim.lr) == ("bert", "mutan", 1e-6, 1e-5)
  c = config_lib.load(os.path.join(ROOT, "configs", "rsvqa_baseline.py"))
  assert (c.text.frozen, c.model.fusion, c.optim.lr) == (True, "mult", 1e-5)


def test_overrides_from_the_command_line():
  args = _parse(["--config", "configs/x.py", "--workdir", "w", "--config.model.fusion=mutan",
                 "--config.seed", "3"])
  assert args.config_overrides == ["model.fusion=mutan", "seed=3"]


def test_unknown_key_is_one_clear_error(tmp_path):
  args = _parse(["--config", os.path.join(ROOT, "configs", "synthetic_tiny.py"), "--workdir",
                 str(tmp_path / "w"), "--config.model.fusoin=mutan"])
  with pytest.raises(RSVQAError, match=r"^--config.model.fusoin: no key 'fusoin' in model"):
    train_cmd.run(args)


def test_real_data_config_needs_root(tmp_path):
  c = config_lib.load(os.path.join(ROOT, "configs", "lr_table1.py"))
  with pytest.raises(RSVQAError, match=r"config data.root is not set.*--config.data.root=PATH"):
    inputs.load_dataset(c, str(tmp_path / "w"))


def test_real_data_needs_weights_or_explicit_random(tmp_path):
  spec = os.path.join(ROOT, "configs", "lr_table1.py:skipthoughts,mult,frozen")
  argv = ["--config", spec, "--workdir", str(tmp_path / "w"), f"--config.data.root={tmp_path}"]
  with pytest.raises(RSVQAError, match=r"^config text.checkpoint and image.checkpoint are not "
                                       r"set: give the Skip-thoughts folder .*"
                                       r"--config.text.checkpoint=random; give the resnet152 "
                                       r"weights .*--config.image.checkpoint=random$"):
    train_cmd.run(_parse(argv))  # both at once: it named one per attempt
  with pytest.raises(RSVQAError, match=r"^config image.checkpoint is not set: give the resnet152 "
                                       r"weights .*--config.image.checkpoint=random"):
    # The failed run above recorded no config.json, so this is not "a run of another config".
    train_cmd.run(_parse(argv + ["--config.text.checkpoint=random"]))
  c = config_lib.load(spec)
  c.text.checkpoint = c.image.checkpoint = config_lib.RANDOM
  config_lib.check_weights(c)  # explicit: accepted
  c.image.checkpoint = ""
  config_lib.check_weights(c, image=False)  # features given in memory: the image side is unused
  for name in ("synthetic_tiny.py", "synthetic_small.py"):  # synthetic: random init is the default
    config_lib.check_weights(config_lib.load(os.path.join(ROOT, "configs", name)))
  bert = config_lib.load(os.path.join(ROOT, "configs", "lr_table1.py:bert,mult,frozen"))
  bert.text.checkpoint = config_lib.RANDOM
  with pytest.raises(RSVQAError, match=r"text.encoder=bert needs a local Hugging Face folder"):
    model_builder.load_text_encoder(bert.text, ["road"], None)


def test_a_run_that_fails_before_writing_leaves_no_workdir_behind(tmp_path, capsys):
  workdir = tmp_path / "w"
  argv = ["train", "--config", "configs/synthetic_tiny.py", "--workdir", str(workdir),
          "--config.data.synthetic=false", f"--config.data.root={tmp_path / 'none'}",
          "--config.text.checkpoint=random", "--config.image.checkpoint=random"]
  assert cli.main(argv) == 2
  assert "folder does not exist" in capsys.readouterr().err and not workdir.exists()
  workdir.mkdir()  # a folder the user made stays
  assert cli.main(argv) == 2 and workdir.exists()


@pytest.mark.parametrize("given,message", [
    ([], "config data.root is not set: give the LR dataset folder with --config.data.root=PATH"),
    (["--config.data.root={tmp}/none"], "config data.root={tmp}/none: folder does not exist"),
    (["--config.data.root={tmp}/lr", "--config.data.name=hr"],
     "{tmp}/lr: no USGS_split_train_questions.json (dataset hr); the folder holds dataset lr"),
    (["--config.data.root={tmp}/lr", "--config.data.name=foo"],
     "config data.name='foo': choose one of lr, hr, xben")])
def test_the_data_is_refused_before_the_workdir_is_read_or_written(tmp_path, capsys, given,
                                                                  message):
  """data.root was looked at after the workdir: over a run of another config the refusal named
  that run, not the data; and a refused run left .lock in a folder it found."""
  synthetic.generate(str(tmp_path / "lr"), variant="lr", images=4, seed=0)
  given = [g.format(tmp=tmp_path) for g in given]
  argv = ["train", "--config", "configs/synthetic_tiny.py", "--config.data.synthetic=false",
          "--config.text.checkpoint=random", "--config.image.checkpoint=random", *given]
  other = config_lib.load(os.path.join(ROOT, "configs", "synthetic_tiny.py"))
  config_lib.apply_overrides(other, ["data.synthetic=false", f"data.root={tmp_path / 'lr'}",
                                     "text.checkpoint=random", "image.checkpoint=random",
                                     "seed=7"])
  ran = tmp_path / "ran"  # holds a run of another config (and no checkpoint yet)
  checkpointing.check_or_record_config(str(ran), other)
  fresh = tmp_path / "fresh"  # a folder the user made for the run
  fresh.mkdir()
  capsys.readouterr()
  for workdir in (ran, fresh):
    before = listing(workdir)
    assert cli.main([*argv, "--workdir", str(workdir)]) == 2
    assert capsys.readouterr().err.strip().startswith(
        f"rsvqa-jax train: error: {message.format(tmp=tmp_path)}")
    assert listing(workdir) == before


def test_the_evaluate_hint_quotes_a_workdir_with_a_space(tmp_path, capsys, monkeypatch):
  """The hint printed at the end is copied into a shell: unquoted, a space split the path, and a
  folder named -x was read as an option (`--workdir -x`: expected one argument)."""
  monkeypatch.chdir(tmp_path)
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  assert cli.main(["-q", "train", "--config", os.path.join(root, "configs", "synthetic_tiny.py"),
                   "--workdir=-my run", "--config.data.synthetic_images=12",
                   "--config.data.synthetic_questions_per_image=4", "--config.train.num_epochs=1",
                   f"--config.data.cache_dir={tmp_path / 'cache'}"]) == 0
  done, hint = capsys.readouterr().out.strip().split("evaluate with: ")
  assert hint == "rsvqa-jax evaluate --workdir='-my run'"
  # in percent, as every table prints accuracy
  assert re.fullmatch(r"-my run: done; best validation OA \d+\.\d\d% at step \d+; ", done)
  argv = shlex.split(hint)[1:]
  assert cli.build_parser(argv).parse_args(argv).workdir == "-my run"


def test_evaluate_after_the_dataset_moved_names_data_root(tmp_path, capsys, monkeypatch):
  """A run trained on `--config.data.root=ds` (relative) evaluates from any folder; once the
  dataset moved, evaluate names --data-root, which finds it again."""
  monkeypatch.chdir(tmp_path)
  assert cli.main(["-q", "synth", "--out", "ds", "--images", "12", "--questions-per-image",
                   "4"]) == 0
  assert cli.main(["-q", "train", "--config", os.path.join(ROOT, "configs", "synthetic_tiny.py"),
                   "--workdir", "w", "--config.data.synthetic=false", "--config.data.root=ds",
                   "--config.text.checkpoint=random", "--config.image.checkpoint=random",
                   "--config.train.num_epochs=1", "--config.data.cache_dir=cache"]) == 0
  monkeypatch.chdir(tmp_path / "w")
  assert cli.main(["-q", "evaluate", "--workdir", "."]) == 0
  os.rename(tmp_path / "ds", tmp_path / "moved")
  capsys.readouterr()
  assert cli.main(["evaluate", "--workdir", "."]) == 2
  assert capsys.readouterr().err.strip().splitlines() == [
      f"rsvqa-jax evaluate: error: .: its dataset folder {tmp_path}/ds (config data.root) does "
      "not exist; moved? give its new place with --data-root (load_run: data_root=)"]
  assert cli.main(["-q", "evaluate", "--workdir", ".", "--data-root", "../moved"]) == 0


def test_training_on_a_dataset_without_images_says_so(tmp_path, capsys):
  """A synthetic RSVQAxBEN has image ids only: 'Images/0.tif: image file missing' left a newcomer
  looking for one file."""
  data = str(tmp_path / "xb")
  assert cli.main(["-q", "synth", "--out", data, "--variant", "xben", "--images", "6",
                   "--questions-per-image", "2"]) == 0
  capsys.readouterr()
  assert cli.main(["train", "--config", "configs/synthetic_tiny.py", "--workdir",
                   str(tmp_path / "w"), "--config.data.synthetic=false", "--config.data.name=xben",
                   f"--config.data.root={data}", "--config.text.checkpoint=random",
                   "--config.image.checkpoint=random", "--config.train.batch_size=2",
                   f"--config.data.cache_dir={tmp_path / 'cache'}"]) == 2
  assert capsys.readouterr().err.strip() == (
      f"rsvqa-jax train: error: {data}/Images: image folder missing; the images of dataset "
      f"{data} are read there (`rsvqa-jax synth --variant xben` writes question sets with no "
      "images: analyze, validate --skip-images and shortcuts read them)")
  assert not (tmp_path / "w").exists()
