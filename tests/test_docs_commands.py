"""Every command line in a code block of README.md and docs/ parses with the real parser.

Newcomers copy these lines: a renamed option, a misspelt choice or a value of the wrong type
reaches them as a usage error. Each `rsvqa-jax ...` line (and each `python -m benchmarks.X ...`
line) is split as the shell would and parsed by the parser its command builds; nothing runs.
Only what argparse checks is checked here: the rules a command applies after parsing (an
option that needs another one, a file that must exist) are left to the commands' own tests.
"""
import argparse
import contextlib
import glob
import importlib
import io
import os
import re
import shlex
from unittest import mock

import pytest

from rsvqa_jax import cli
from rsvqa_jax.commands import common
from rsvqa_jax.errors import RSVQAError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGES = ["README.md"] + sorted(
    os.path.relpath(p, ROOT)
    for p in glob.glob(os.path.join(ROOT, "docs", "**", "*.md"), recursive=True))
SEPARATORS = {";", "&&", "||", "|", "&"}
# Words before a command that are the shell's, not the command's: a prompt, a loop's `do`.
SHELL_WORDS = {"$", "do", "then", "else", "time", "exec"}
ENV_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
# A broken extractor finds few lines or none: it must not pass for finding nothing wrong.
MIN_COMMANDS = 20


def _code_lines(text):
  """(line number, line) of each logical line in a fenced code block: lines ending in a
  backslash joined to the next, snippet includes (`--8<--`) left out."""
  fence, pending, start = None, [], 0
  for number, line in enumerate(text.splitlines(), 1):
    match = FENCE.match(line)
    if fence is None:
      if match:
        fence = match.group(1)
      continue
    if match and match.group(1)[0] == fence[0] and len(match.group(1)) >= len(fence) \
        and not line.strip().strip(fence[0]):
      fence, pending = None, []
      continue
    if not pending:
      start = number
    if line.rstrip().endswith("\\"):
      pending.append(line.rstrip()[:-1])
      continue
    joined = " ".join(pending + [line])
    pending = []
    if "--8<--" not in joined:
      yield start, joined


def _words(line):
  """The line split as the shell splits it: quotes removed, `# comment` dropped, and `;`,
  `&&`, `|` ... as words of their own."""
  lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|")
  lexer.whitespace_split = True
  return list(lexer)


def _commands(text):
  """(line number, argv) of each `rsvqa-jax` or `python -m benchmarks.X` command in `text`."""
  for number, line in _code_lines(text):
    if "rsvqa-jax" not in line and "benchmarks." not in line:
      continue
    segment = []
    for word in _words(line) + [";"]:
      if word not in SEPARATORS:
        segment.append(word)
        continue
      while segment and (segment[0] in SHELL_WORDS or ENV_ASSIGNMENT.match(segment[0])):
        segment.pop(0)
      if segment[:1] == ["rsvqa-jax"] or (
          segment[:2] == ["python", "-m"] and segment[2:3]
          and segment[2].startswith("benchmarks.")):
        yield number, segment
      segment = []


def _docs_commands():
  found = []
  for page in PAGES:
    with open(os.path.join(ROOT, page), encoding="utf-8") as f:
      found += [(f"{page}:{number}", argv) for number, argv in _commands(f.read())]
  return found


DOCS_COMMANDS = _docs_commands()


class _Parsed(Exception):
  """Raised in place of running a benchmark once its arguments parsed."""


def _parse_benchmark(module, args):
  main = importlib.import_module(module).main
  parse_args = argparse.ArgumentParser.parse_args

  def parse_then_stop(self, *a, **k):
    parse_args(self, *a, **k)
    raise _Parsed

  with mock.patch.object(argparse.ArgumentParser, "parse_args", parse_then_stop):
    try:
      main(args)
    except _Parsed:
      return
  raise AssertionError(f"{module}.main(argv) returned without parsing its arguments")


def _parse_error(argv):
  """None when `argv` parses, else what argparse said (on stderr) when it exited."""
  err = io.StringIO()
  with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
    try:
      if argv[0] == "rsvqa-jax":
        cli.build_parser(argv[1:]).parse_args(argv[1:])
      else:
        _parse_benchmark(argv[2], argv[3:])
    except SystemExit as e:
      if e.code:
        return err.getvalue().strip() or f"exit status {e.code}"
  return None


def test_enough_command_lines_are_found():
  assert len(DOCS_COMMANDS) >= MIN_COMMANDS, DOCS_COMMANDS
  assert sum(argv[0] == "rsvqa-jax" for _, argv in DOCS_COMMANDS) >= MIN_COMMANDS


@pytest.mark.parametrize("where,argv", DOCS_COMMANDS, ids=[w for w, _ in DOCS_COMMANDS])
def test_docs_command_parses(where, argv):
  error = _parse_error(argv)
  assert error is None, f"{where}: {shlex.join(argv)}\n{error}"


def test_extractor_reads_chains_loops_continuations_and_comments():
  text = "\n".join([
      "rsvqa-jax outside a block is prose",
      "```bash",
      "$ pip install -e . && rsvqa-jax synth --out d   # a comment",
      "for s in 0 1; do rsvqa-jax train --config 'c.py:a,b' \\",
      "  --workdir w$s; done",
      '--8<-- "a/file.txt"',
      "JAX_PLATFORMS=cpu python -m benchmarks.run --out o | tee log",
      "```",
  ])
  assert list(_commands(text)) == [
      (3, ["rsvqa-jax", "synth", "--out", "d"]),
      (4, ["rsvqa-jax", "train", "--config", "c.py:a,b", "--workdir", "w$s"]),
      (7, ["python", "-m", "benchmarks.run", "--out", "o"])]


def test_wrong_options_choices_and_numbers_are_caught():
  assert "--varaint" in _parse_error(["rsvqa-jax", "synth", "--out", "d", "--varaint", "lr"])
  assert "invalid choice" in _parse_error(["rsvqa-jax", "evaluate", "--workdir", "w",
                                           "--adversarial", "swap"])
  assert "N" in _parse_error(["rsvqa-jax", "answerability", "select", "--workdir", "w",
                              "--pool", "p.csv", "--top", "N"])
  assert "invalid choice" in _parse_error(["rsvqa-jax", "tain", "--config", "c.py"])
  assert "--sise" in _parse_error(["python", "-m", "benchmarks.xben_scale", "--sise", "quick"])


def test_rules_applied_after_parsing_are_not_checked():
  # Each needs another option, which the command asks for when it runs, not argparse.
  assert _parse_error(["rsvqa-jax", "train", "--config", "c.py"]) is None  # --workdir
  assert _parse_error(["rsvqa-jax", "grounding", "score", "--out", "o"]) is None  # --predicted
  assert _parse_error(["rsvqa-jax", "evaluate", "--workdir", "w", "--repeats", "3"]) is None


CONFIG_COMMANDS = [(where, argv) for where, argv in DOCS_COMMANDS
                   if argv[0] == "rsvqa-jax" and "--config" in argv
                   and not any("$" in a for a in argv)]  # a shell loop's variable: no value here


@pytest.mark.parametrize("where,argv", CONFIG_COMMANDS, ids=[w for w, _ in CONFIG_COMMANDS])
def test_docs_config_and_its_overrides_load(where, argv, monkeypatch):
  """The config a docs line names loads, and each --config.KEY=VALUE names a real key with a
  value of its type (a misspelt key is refused when the command runs, after argparse)."""
  monkeypatch.chdir(ROOT)
  args = cli.build_parser(argv[1:]).parse_args(argv[1:])
  try:
    common.load_config(args)
  except RSVQAError as e:
    pytest.fail(f"{where}: {shlex.join(argv)}\n{e}")


def test_enough_config_lines_are_loaded():
  assert len(CONFIG_COMMANDS) >= 5, CONFIG_COMMANDS
