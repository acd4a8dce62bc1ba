"""Long work is never silent: where stderr is no terminal (a log file, a cluster job, a pipe) the
progress bars become plain lines, a bounded number of them; `grounding` and `synth` report
their stages; `synth --balanced` refuses a split it would leave empty.

The interval between lines is measured on progress._clock, which the tests replace, or set to 0:
no test waits or reads the wall clock.
"""
import argparse
import io
import logging
import os
import re

import pytest
from tqdm import std

from rsvqa_jax import cli, progress
from rsvqa_jax.data import synthetic


class _Terminal(io.StringIO):
  def isatty(self):
    return True


@pytest.fixture
def command_line(capsys):
  """The command line's logging (INFO lines on stderr, which capsys holds: no terminal), undone
  after the test; yields a function returning what stderr got since its last call."""
  logger = logging.getLogger("rsvqa_jax")
  saved = logger.level, list(logger.handlers), logger.propagate
  cli._logging(argparse.Namespace(verbose=False, quiet=False))  # pylint: disable=protected-access
  capsys.readouterr()
  yield lambda: capsys.readouterr().err
  logger.setLevel(saved[0])
  logger.handlers[:] = saved[1]
  logger.propagate = saved[2]


@pytest.fixture
def clock(monkeypatch):
  """A clock the test moves: [now]."""
  now = [1000.0]
  monkeypatch.setattr(progress, "_clock", lambda: now[0])
  return now


@pytest.fixture
def every_update(monkeypatch):
  monkeypatch.setattr(progress, "INTERVAL_S", 0.0)


LINE = re.compile(r"train: (\d+)/10000 step \(\d+%\), \d+:\d\d elapsed(, \d+:\d\d left)?"
                  r"(, loss=0\.5300, samples_s=210)?")


def _has(lines, pattern):
  return any(re.fullmatch(pattern, line) for line in lines)


def test_a_log_gets_a_bounded_number_of_plain_lines_with_the_postfix(command_line, clock):
  """10,000 steps over 100 s of the (test's) clock: a line at 30, 60 and 90 s and one at the
  end, whatever the number of steps; no carriage return."""
  with progress.bar(total=10_000, desc="train", unit="step") as bar:
    for step in range(1, 10_001):
      clock[0] += 0.01
      bar.update(1)
      if step % 100 == 0:
        bar.set_postfix(loss="0.5300", samples_s="210")
  err = command_line()
  assert "\r" not in err
  lines = err.splitlines()
  assert len(lines) == 4 and all(LINE.fullmatch(line) for line in lines), lines
  counts = [int(LINE.fullmatch(line).group(1)) for line in lines]
  assert counts == sorted(counts) and counts[-1] == 10_000
  assert all(" left, loss=0.5300, samples_s=210" in line for line in lines[:-1])
  assert lines[-1].startswith("train: 10000/10000 step (100%), ")
  assert lines[-1].endswith(" elapsed, loss=0.5300, samples_s=210")


def test_a_last_line_that_would_repeat_the_one_before_is_not_written(command_line, clock):
  """The study's bar of runs, each over 30 s, ended with its '3/3 run (100%)' line twice."""
  with progress.bar(total=3, desc="study runs", unit="run") as bar:
    for _ in range(3):
      clock[0] += progress.INTERVAL_S
      bar.update(1)
  lines = command_line().splitlines()
  assert [line.split(",")[0] for line in lines] == [
      "study runs: 1/3 run (33%)", "study runs: 2/3 run (66%)", "study runs: 3/3 run (100%)"]


def test_a_bar_done_within_the_interval_writes_nothing(command_line, clock):
  """The command's own line follows; the tests' exact stderr of short commands is kept."""
  for _ in progress.bar(range(500), desc="short"):
    clock[0] += 0.01
  assert command_line() == ""


def test_lines_without_a_total_or_a_description_and_a_transient_bar(command_line, clock):
  seen = []
  for i in progress.bar(iter(range(5)), unit="q", leave=False):
    seen.append(i)
    clock[0] += progress.INTERVAL_S if i == 2 else 0
  assert seen == [0, 1, 2, 3, 4]
  lines = command_line().splitlines()
  assert len(lines) == 1 and re.fullmatch(r"3 q, \d+:\d\d elapsed", lines[0])  # no final line


def test_a_terminal_keeps_the_bar_and_quiet_keeps_both_off(command_line, clock, every_update):
  bar = progress.bar(total=3, file=_Terminal())
  assert not isinstance(bar, progress.LogLines) and not bar.disable
  bar.close()
  cli._logging(argparse.Namespace(verbose=False, quiet=True))  # pylint: disable=protected-access
  with progress.bar(total=3, desc="quiet") as bar:
    assert bar.disable
    bar.update(3)
  assert command_line() == ""


def test_a_library_user_gets_lines_where_logging_was_configured(caplog, clock, every_update):
  logger = logging.getLogger("rsvqa_jax")
  saved = logger.level, list(logger.handlers), logger.propagate
  logger.handlers[:], logger.propagate = [], True
  try:
    logger.setLevel(logging.NOTSET)  # configured nothing: the root logger drops INFO
    with caplog.at_level(logging.WARNING):
      with progress.bar(total=2, desc="x", file=io.StringIO()) as bar:
        assert bar.disable
    with caplog.at_level(logging.INFO):  # logging.basicConfig(level=logging.INFO), say
      with progress.bar(total=2, desc="x", file=io.StringIO()) as bar:
        bar.update(2)
    assert [r.name for r in caplog.records][-1] == "rsvqa_jax.progress"
    assert caplog.records[-1].getMessage().startswith("x: 2/2 it (100%), ")
  finally:
    logger.setLevel(saved[0])
    logger.handlers[:] = saved[1]
    logger.propagate = saved[2]


def test_a_notebook_keeps_its_widget(command_line, monkeypatch):
  class Widget(std.tqdm):
    pass
  Widget.__module__ = "tqdm.notebook"
  monkeypatch.setattr(progress.auto, "tqdm", Widget)
  bar = progress.bar(total=3)
  assert type(bar) is Widget  # pylint: disable=unidiomatic-typecheck
  bar.close()


def test_synth_says_what_its_stages_do(tmp_path, command_line, every_update):
  out = str(tmp_path / "d")
  assert cli.main(["synth", "--out", out, "--images", "3", "--questions-per-image", "2"]) == 0
  err = command_line()
  assert "\r" not in err
  lines = err.splitlines()
  assert _has(lines, r"synth lr images: 3/3 img \(100%\), \d+:\d\d elapsed")
  assert "synth lr: writing the answer grounding masks of 6 questions (Grounding/)" in lines
  assert cli.main(["synth", "--out", str(tmp_path / "x"), "--variant", "xben", "--images", "6",
                   "--questions-per-image", "2"]) == 0
  lines = command_line().splitlines()
  assert "synth xben: drawing 12 questions about 6 image ids and writing their files" in lines
  # its files counted entry by entry: 6 images, then 12 questions and 12 answers
  assert _has(lines, r"synth xben files: 30/30 entry \(100%\), \d+:\d\d elapsed")


def test_synth_balanced_refuses_a_split_it_would_leave_empty(tmp_path, command_line):
  """It wrote "train 114, val 0, test 5", which training refused later for its empty val."""
  out = tmp_path / "a4"
  assert cli.main(["synth", "--out", str(out), "--images", "30", "--questions-per-image", "5",
                   "--balanced"]) == 2
  assert command_line().splitlines()[-1] == (
      "rsvqa-jax synth: error: --images 30 --questions-per-image 5 --balanced: balancing leaves "
      "split val without a question (train 114, val 0, test 5); raise --images or "
      "--questions-per-image")
  assert os.listdir(tmp_path) == []
  # The library keeps its rule: a study checks its sets itself, naming its own keys.
  gen = synthetic.generate(str(out), "lr", 30, 0, balanced=True, questions_per_image=5)
  assert len(gen.splits["val"]) == 0


def test_synth_balanced_hr_may_leave_its_second_test_set_empty(tmp_path, command_line):
  """HR's test_phili, a split no default run reads, left empty refused the whole set."""
  out = str(tmp_path / "hr")
  assert cli.main(["synth", "--out", out, "--variant", "hr", "--images", "24",
                   "--questions-per-image", "5", "--balanced"]) == 0
  assert ("WARNING: --images 24 --questions-per-image 5 --balanced: balancing leaves split "
          "test_phili without a question (train 54, val 6, test 4, test_phili 0): train, evaluate, "
          "analyze and a study of the other splits work, and evaluate --split test_phili refuses it; raise "
          "--images or --questions-per-image to fill it") in command_line().splitlines()
  assert synthetic.read_manifest(out)["images"] == 24


def test_grounding_stats_and_score_report_their_masks(tmp_path, command_line, every_update):
  data = str(tmp_path / "d")
  synthetic.generate(data, "lr", 3, 0, questions_per_image=4)
  truth = os.path.join(data, "Grounding")
  command_line()
  assert cli.main(["grounding", "stats", "--truth", truth, "--out", str(tmp_path / "s")]) == 0
  assert _has(command_line().splitlines(),
              r"grounding stats: 12/12 mask \(100%\), \d+:\d\d elapsed")
  assert cli.main(["grounding", "score", "--predicted", truth, "--truth", truth, "--out",
                   str(tmp_path / "o")]) == 0
  assert _has(command_line().splitlines(),
              r"grounding score: 12/12 mask \(100%\), \d+:\d\d elapsed")
