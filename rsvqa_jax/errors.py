"""User-facing errors: the CLI prints these as one line instead of a traceback."""
import errno
import os
import reprlib


class RSVQAError(Exception):
  """Bad input a user can fix (missing file, malformed JSON, unknown key, ...).

  The message must name the offending file or key and the problem, in one line: a line break
  of what it quotes (a path holding one) is written as \\n.
  """

  def __init__(self, message=""):
    super().__init__(one_line(str(message)))


def one_line(text):
  """`text` with its line breaks written as \\n and \\r."""
  return text.replace("\r", "\\r").replace("\n", "\\n")


def os_error_line(error):
  """'PATH: what' of an OSError from the system (a file where a folder is expected, a folder
  where a file is, no permission, ...), as one line."""
  paths = [p for p in (error.filename, error.filename2) if p is not None]
  what = (error.strerror or str(error)).lower()
  if error.errno in (errno.EEXIST, errno.ENOTDIR):
    what += " (a file stands where a folder is needed)"
  elif error.errno == errno.EISDIR:
    what += " (a folder stands where a file is needed)"
  return one_line(f"{' -> '.join(map(str, paths))}: {what}" if paths else what)


def not_a_folder(path):
  """Why an expected folder is unusable: it "is a file, not a folder" or "does not exist"."""
  return "is a file, not a folder" if os.path.lexists(path) else "does not exist"


def short_repr(value, width=30, items=None):
  """`value`'s repr for a one-line message: quoted, newlines escaped, shortened past `width`
  characters and `items` items of a list, tuple or dict (default: reprlib's 6, 4 of a dict): a
  damaged 200,000-character value was echoed whole."""
  shortener = reprlib.Repr()
  shortener.maxstring = shortener.maxother = width
  if items is not None:
    shortener.maxlist = shortener.maxtuple = shortener.maxdict = shortener.maxset = items
  return shortener.repr(value)


def shortened(text, width=300):
  """`text` (a path) for a one-line message, its middle cut past `width` characters: no real
  path is that long, and a damaged one was echoed whole."""
  text = str(text)
  return text if len(text) <= width else f"{text[:width // 2]}...{text[-width // 2:]}"
