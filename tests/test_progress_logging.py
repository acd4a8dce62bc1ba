"""Routine messages go through `logging` at INFO, warnings only for real ones; progress bars show
where someone watches and follow -q; `synth` says on one line when it replaces a dataset."""
import argparse
import io
import logging
import os

import pytest

from rsvqa_jax import cli, progress
from rsvqa_jax import config as config_lib
from rsvqa_jax.data import rsvqa_json, synthetic
from rsvqa_jax.features import image_cache
from rsvqa_jax.train import prepare


class _Terminal(io.StringIO):
  def isatty(self):
    return True


@pytest.fixture
def logged(caplog):
  """Every record of the `rsvqa_jax` loggers (the command line's handler does not propagate)."""
  logger = logging.getLogger("rsvqa_jax")
  level, propagate = logger.level, logger.propagate
  logger.addHandler(caplog.handler)
  logger.setLevel(logging.DEBUG)
  logger.propagate = False  # else caplog's root handler sees each record a second time
  yield caplog
  logger.removeHandler(caplog.handler)
  logger.setLevel(level)
  logger.propagate = propagate


@pytest.fixture
def restore_level():
  logger = logging.getLogger("rsvqa_jax")
  level = logger.level
  yield logger
  logger.setLevel(level)


def test_progress_bar_shows_on_a_terminal_only_and_not_under_quiet(restore_level):
  restore_level.setLevel(logging.NOTSET)  # a library user who configured nothing
  with progress.bar(total=3, file=_Terminal()) as bar:
    assert not bar.disable
  with progress.bar(total=3, file=io.StringIO()) as bar:  # a log file or a pipe
    assert bar.disable
  with progress.bar(total=3, file=_Terminal(), enabled=False) as bar:  # train.progress_bar=False
    assert bar.disable
  cli._logging(argparse.Namespace(verbose=False, quiet=True))  # rsvqa-jax -q
  assert progress.quiet()
  out = _Terminal()
  with progress.bar(range(3), file=out) as bar:
    assert bar.disable and list(bar) == [0, 1, 2]
  assert out.getvalue() == ""
  cli._logging(argparse.Namespace(verbose=False, quiet=False))
  assert not progress.quiet()
  with progress.bar(total=3, file=_Terminal()) as bar:
    assert not bar.disable


def test_command_line_levels(restore_level):
  for verbose, quiet, level in ((False, False, logging.INFO), (True, False, logging.DEBUG),
                                (False, True, logging.WARNING)):
    cli._logging(argparse.Namespace(verbose=verbose, quiet=quiet))
    assert restore_level.level == level
  assert sum(isinstance(h, cli._Stderr) for h in restore_level.handlers) == 1  # one handler


def test_routine_stage_message_is_info_and_a_replaced_dataset_a_warning(tmp_path, logged):
  c = config_lib.load(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                   "configs", "synthetic_tiny.py"))
  c.data.synthetic_images, c.data.synthetic_questions_per_image = 3, 2
  folder = prepare.synthetic_dataset(c, str(tmp_path))
  stage = [r for r in logged.records if "stage dataset" in r.getMessage()]
  assert len(stage) == 1 and stage[0].levelno == logging.INFO
  assert stage[0].name.startswith("rsvqa_jax.")
  assert not [r for r in logged.records if r.levelno >= logging.WARNING]
  logged.clear()
  synthetic.generate(folder, "lr", 3, 0, questions_per_image=2)  # the same: nothing to say
  assert not [r for r in logged.records if r.levelno >= logging.WARNING]
  synthetic.generate(folder, "lr", 4, 0, questions_per_image=2)
  warned = [r for r in logged.records if r.levelno >= logging.WARNING]
  assert len(warned) == 1
  assert warned[0].getMessage() == (f"{folder}: replacing the synthetic dataset there "
                                    "(images 3 -> 4)")
  assert synthetic.read_manifest(folder)["images"] == 4


def test_synth_command_says_it_replaces_on_one_line(tmp_path, capsys):
  out = str(tmp_path / "d")
  args = ["synth", "--out", out, "--images", "3", "--questions-per-image", "2"]
  assert cli.main(args) == 0
  assert "replacing" not in capsys.readouterr().err
  assert cli.main(args[:-1] + ["3"]) == 0
  err = [l for l in capsys.readouterr().err.splitlines() if "replacing" in l]
  assert err == [f"WARNING: {os.path.abspath(out)}: replacing the synthetic dataset there "
                 "(questions_per_image 2 -> 3)"]  # labelled: the docs promise "a WARNING"


def test_random_init_encoder_is_announced_once_at_info(tmp_path, logged):
  """Clean and white features each build the encoder (evaluate --adversarial white): one line."""
  data = str(tmp_path / "data")
  synthetic.generate(data, "lr", 3, 0, questions_per_image=2)
  dataset = rsvqa_json.read_dataset(data, "lr")
  cfg = config_lib.image_section()
  cfg.arch, cfg.width, cfg.image_size, cfg.batch_size, cfg.seed = "resnet18", 4, 32, 4, 12345
  for kind in ("clean", "white"):
    image_cache.image_features(dataset, None, cfg, str(tmp_path / "cache"), kind=kind)
  said = [r for r in logged.records if "has no checkpoint" in r.getMessage()]
  assert [(r.levelno, r.getMessage()) for r in said] == [
      (logging.INFO, "image encoder resnet18 has no checkpoint: random-init weights (seed 12345)")]
  assert not [r for r in logged.records if r.levelno >= logging.WARNING]
