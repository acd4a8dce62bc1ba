"""Every option of every command (and sub-command) has a help text, with its default shown, and
is in docs/commands.md; the top-level help speaks to a user; no command's help loads its heavy
modules."""
import argparse
import os
import re
import subprocess
import sys

import pytest

from rsvqa_jax import cli
import subprocess_env

_SUBPARSERS = argparse._SubParsersAction  # pylint: disable=protected-access
_HELP = argparse._HelpAction  # pylint: disable=protected-access
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _parsers(parser, path):
  """(command path, parser) of `parser` and every sub-command under it."""
  yield path, parser
  for action in parser._actions:  # pylint: disable=protected-access
    if isinstance(action, _SUBPARSERS):
      for name, sub in action.choices.items():
        yield from _parsers(sub, f"{path} {name}")


def _command_parser(name):
  top = cli.build_parser([name])
  actions = top._actions  # pylint: disable=protected-access
  sub = next(a for a in actions if isinstance(a, _SUBPARSERS))
  return sub.choices[name]


@pytest.mark.parametrize("name", sorted(cli.COMMANDS))
def test_every_option_has_help_and_shows_its_default(name):
  for path, parser in _parsers(_command_parser(name), name):
    formatter = parser._get_formatter()  # pylint: disable=protected-access
    for action in parser._actions:  # pylint: disable=protected-access
      if not action.option_strings or isinstance(action, _HELP):
        continue
      what = f"{path} {action.option_strings[-1]}"
      assert action.help and action.help.strip() and action.help != argparse.SUPPRESS, what
      if cli._has_default(action):  # pylint: disable=protected-access
        shown = formatter._expand_help(action)  # pylint: disable=protected-access
        assert "default" in shown, what


def test_defaults_are_added_once_and_help_text_is_for_users(capsys):
  parser = _command_parser("synth")
  text = " ".join(parser.format_help().split())  # the words, whatever the line breaks
  assert "(default: 100 for lr and hr" in text  # --questions-per-image, which had no help
  assert "byte-identical dataset (default: 0)" in text  # a default of 0 is shown too
  assert text.count("(default: 772 for lr, 400 for hr, 590326 for xben)") == 1  # said by the help
  with pytest.raises(SystemExit):
    cli.build_parser(["--help"]).parse_args(["--help"])
  top = capsys.readouterr().out
  assert "remote-sensing images" in top and "rsvqa-jax COMMAND --help" in top
  assert "first steps:" in top and "rsvqa-jax study --config configs/study_synthetic.py" in top


def _options(parser, path):
  """(command path, long option) of every option of `parser` and its sub-commands but --help."""
  for where, p in _parsers(parser, path):
    for action in p._actions:  # pylint: disable=protected-access
      if not isinstance(action, _HELP):
        yield from ((where, o) for o in action.option_strings if o.startswith("--"))


def test_every_option_is_in_the_commands_page():
  """`evaluate --adv-seed`, five `features` options, `convert --depth` ... were in --help alone."""
  with open(os.path.join(ROOT, "docs", "commands.md"), encoding="utf-8") as f:
    page = f.read()
  options = list(_options(cli.build_parser([]), "rsvqa-jax"))
  for name in cli.COMMANDS:
    options += _options(_command_parser(name), name)
  missing = [f"{path} {option}" for path, option in options
             if not re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", page)]
  assert not missing, f"not in docs/commands.md: {', '.join(missing)}"


def test_no_help_loads_matplotlib_or_jax():
  """`analyze --help` imported bias.plots (matplotlib) and took 3-5 times as long as the others:
  a command's heavy modules are imported when it runs."""
  code = ("import contextlib, io, sys\n"
          "from rsvqa_jax import cli\n"
          f"for name in {sorted(cli.COMMANDS)!r}:\n"
          "  with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
          "    cli.build_parser([name, '--help']).parse_args([name, '--help'])\n"
          "  heavy = [m for m in ('matplotlib', 'jax') if m in sys.modules]\n"
          "  assert not heavy, (name, heavy)\n")
  out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env=subprocess_env.env())
  assert out.returncode == 0, out.stderr[-2000:]
