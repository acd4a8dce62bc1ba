"""User-facing errors: the CLI prints these as one line instead of a traceback."""
import os


class RSVQAError(Exception):
  """Bad input a user can fix (missing file, malformed JSON, unknown key, ...).

  The message must name the offending file or key and the problem, in one line.
  """


def not_a_folder(path):
  """Why an expected folder is unusable: it "is a file, not a folder" or "does not exist"."""
  return "is a file, not a folder" if os.path.lexists(path) else "does not exist"
