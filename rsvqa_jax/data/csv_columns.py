"""CSV files handed to an audit (predictions, pools, scores, labels, confidences), read one way.

Each problem is one short line naming the file and line: a missing column is named with the
header cut to HEADER_CHARS, a JSON file (which csv reads as one row of its whole text) is named
as JSON. What would be read wrongly without a word is refused too: a column the reader uses
named twice in the header, a row with more (non-empty) values than the header (a comma inside
an unquoted answer would cut it) or fewer than the columns read, a value running over several
lines (an unclosed quote swallows the rows after it; on the last line, the end of the file),
and numbers Python's int() and float() take but a person would not write for one ('1_0' for
10, digits of other scripts).
"""
import csv

from rsvqa_jax.errors import RSVQAError

HEADER_CHARS = 80  # of a CSV header quoted in an error


def check(path, required, header, optional=()):
  """Refuses a CSV whose `header` (its first row, a list) lacks a `required` column, or names a
  column it reads (`required` or `optional`) twice."""
  header = header or ()
  twice = [c for c in (*required, *optional) if header.count(c) > 1]
  if twice:
    raise RSVQAError(f"{path}: column {twice[0]} appears {header.count(twice[0])} times in the "
                     "header; which one to read is ambiguous")
  missing = [c for c in required if c not in header]
  if not missing:
    return
  with open(path, encoding="utf-8-sig", errors="replace") as f:
    if f.read(4096).lstrip()[:1] in ("{", "["):
      raise RSVQAError(f"{path}: not a CSV file (it looks like JSON); give a CSV with the columns "
                       f"{', '.join(required)}")
  text = ",".join(header)
  text = text if len(text) <= HEADER_CHARS else text[:HEADER_CHARS - 3] + "..."
  raise RSVQAError(f"{path}: missing column(s) {', '.join(missing)} (header: {text!r})")


def read(path, required, optional=(), what="CSV file"):
  """(header, [(line number, {column: text as written})]): every row's `required` columns and
  the `optional` ones the file has (None where it lacks the column); `what` names the file in
  the errors."""
  try:
    f = open(path, newline="", encoding="utf-8-sig")
  except OSError as e:
    raise RSVQAError(f"{path}: cannot read {what} ({e.strerror or e})") from None
  rows, last = [], 0  # last: the line the previous row ended on (0: none read yet)
  with f:
    reader = csv.DictReader(f, strict=True)  # a quote left open at the end: refused, not taken
    try:
      check(path, required, reader.fieldnames, optional)
      present = [c for c in (*required, *optional) if c in reader.fieldnames]
      last = reader.line_num
      for row in reader:
        line, first, last = reader.line_num, last + 1, reader.line_num
        if any(row[c] is None for c in present):  # a cut row: its optional values read as absent
          raise RSVQAError(f"{path}:{line}: row has fewer values than the header")
        if any(v.strip() for v in row.get(None, ())):  # trailing empty values cut nothing
          raise RSVQAError(f"{path}:{line}: row has more values than the header (a comma in an "
                           "unquoted value? quote it)")
        if first != line and any("\n" in v or "\r" in v for v in row.values() if v):
          raise RSVQAError(f"{path}:{first}: a value runs over lines {first}-{line} (an unclosed "
                           "quote?)")
        rows.append((line, {c: row[c] if c in present else None for c in (*required, *optional)}))
    except UnicodeDecodeError:
      raise RSVQAError(f"{path}: not UTF-8 text ({_first_bad_byte(path)}); save it as UTF-8 "
                       "CSV") from None
    except csv.Error as e:
      if "end of data" in str(e):  # strict: a quoted value still open at the end of the file
        raise RSVQAError(f"{path}:{last + 1}: a quote opened on this row is never closed (its "
                         "value would run to the end of the file)") from None
      raise RSVQAError(f"{path}:{reader.line_num}: not a readable CSV row ({e})") from None
  return tuple(reader.fieldnames or ()), rows


def _first_bad_byte(path):
  """Where a file stops being UTF-8, for the error message (the reader decodes in blocks)."""
  with open(path, "rb") as f:
    data = f.read()
  try:
    data.decode("utf-8-sig")
  except UnicodeDecodeError as e:
    line = data.count(b"\n", 0, e.start) + 1
    return f"byte {data[e.start]:#04x} on line {line}"
  return "a bad byte"


def _plain(text):
  if not isinstance(text, str) or not text.isascii() or "_" in text:
    raise ValueError(text)
  return text


def integer(text):
  """int of a cell written in ASCII digits (ValueError otherwise: int() also takes '1_0')."""
  return int(_plain(text))


def number(text):
  """float of a cell written in ASCII (ValueError otherwise: float() also takes '1_0')."""
  return float(_plain(text))
