"""User-facing errors: the CLI prints these as one line instead of a traceback."""


class RSVQAError(Exception):
  """Bad input a user can fix (missing file, malformed JSON, unknown key, ...).

  The message must name the offending file or key and the problem, in one line.
  """
