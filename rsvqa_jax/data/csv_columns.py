"""The columns of a CSV file handed to an audit (predictions, pools, scores), checked in one
short line: a missing column is named with the header cut to HEADER_CHARS, and a JSON file (which
csv reads as one row of its whole text) is named as JSON."""
from rsvqa_jax.errors import RSVQAError

HEADER_CHARS = 80  # of a CSV header quoted in an error


def check(path, required, header):
  """Refuses a CSV whose `header` (its first row, a list) lacks a `required` column, in one short
  line: a JSON file reads as one row of its whole text, so it is named as JSON, and any other
  header is cut to HEADER_CHARS."""
  missing = [c for c in required if c not in (header or ())]
  if not missing:
    return
  with open(path, encoding="utf-8-sig", errors="replace") as f:
    if f.read(4096).lstrip()[:1] in ("{", "["):
      raise RSVQAError(f"{path}: not a CSV file (it looks like JSON); give a CSV with the columns "
                       f"{', '.join(required)}")
  text = ",".join(header or ())
  text = text if len(text) <= HEADER_CHARS else text[:HEADER_CHARS - 3] + "..."
  raise RSVQAError(f"{path}: missing column(s) {', '.join(missing)} (header: {text!r})")
