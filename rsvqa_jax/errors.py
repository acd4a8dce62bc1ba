"""User-facing errors: the CLI prints these as one line instead of a traceback."""
import os
import reprlib


class RSVQAError(Exception):
  """Bad input a user can fix (missing file, malformed JSON, unknown key, ...).

  The message must name the offending file or key and the problem, in one line.
  """


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
