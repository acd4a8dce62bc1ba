"""Every text file the project opens names its encoding (UTF-8).

Without `encoding=`, Python reads and writes text in the locale's encoding: under a Latin-1
locale a UTF-8 file's `é` reads as `Ã©`. The project's JSON writers escape non-ASCII, so its own
files read alike either way, but files others write (a model folder's config.json) do not.
Checked on the syntax tree of every module of the package, the tools and the benchmarks: builtin
`open` in text mode, `os.fdopen` and `tempfile.NamedTemporaryFile` in text mode, and pathlib's
`read_text` / `write_text`.
"""
import ast
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TREES = ("rsvqa_jax", "tools", "benchmarks")


def _mode(call, position):
  """The call's mode argument as a string; 'r' when absent, '?' when not a literal."""
  node = call.args[position] if len(call.args) > position else None
  node = next((k.value for k in call.keywords if k.arg == "mode"), node)
  if node is None:
    return "r"
  return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else "?"


def text_opens_without_encoding(source, path="<source>"):
  """Line numbers of the calls in `source` that open a text file without naming its encoding."""
  lines = []
  for node in ast.walk(ast.parse(source, path)):
    if not isinstance(node, ast.Call) or any(k.arg == "encoding" for k in node.keywords):
      continue
    func = node.func
    if isinstance(func, ast.Name) and func.id == "open":
      mode = _mode(node, 1)
    elif isinstance(func, ast.Attribute) and func.attr in ("fdopen", "NamedTemporaryFile"):
      mode = _mode(node, 1 if func.attr == "fdopen" else 0)
      if func.attr == "NamedTemporaryFile" and mode == "r":
        mode = "w+b"  # its default mode is binary
    elif isinstance(func, ast.Attribute) and func.attr in ("read_text", "write_text"):
      # pathlib's methods; the project's own read_text(path, what) / write_text(path, text)
      # are plain functions of two arguments.
      if len(node.args) > (0 if func.attr == "read_text" else 1):
        continue
      mode = "r"
    else:
      continue
    if "b" not in mode:
      lines.append(node.lineno)
  return lines


def _python_files():
  for tree in TREES:
    for folder, _, files in os.walk(os.path.join(ROOT, tree)):
      for name in sorted(files):
        if name.endswith(".py"):
          yield os.path.join(folder, name)


@pytest.mark.parametrize("source, expected", [
    ("open(p)", [1]),
    ("open(p, 'a')", [1]),
    ("open(p, mode='w')", [1]),
    ("open(p, m)", [1]),
    ("open(p, 'rb')", []),
    ("open(p, encoding='utf-8')", []),
    ("os.fdopen(fd, 'w')", [1]),
    ("os.fdopen(fd, 'wb')", []),
    ("tempfile.NamedTemporaryFile('w')", [1]),
    ("tempfile.NamedTemporaryFile()", []),
    ("pathlib.Path(p).read_text()", [1]),
    ("pathlib.Path(p).write_text(t)", [1]),
    ("split_files.read_text(p, 'question file')", []),
    ("report.write_text(p, t)", []),
    ("Image.open(p)", []),
])
def test_the_check_finds_text_opens_without_encoding(source, expected):
  assert text_opens_without_encoding(source) == expected


def test_every_text_file_is_opened_with_an_encoding():
  found = []
  for path in _python_files():
    with open(path, encoding="utf-8") as f:
      source = f.read()
    found += [f"{os.path.relpath(path, ROOT)}:{line}"
              for line in text_opens_without_encoding(source, path)]
  assert not found, f"text opened in the locale's encoding: {found}"
