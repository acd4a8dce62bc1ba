"""CSV files handed to an audit (predictions, pools, scores, labels, confidences), read one way.

Each problem is one short line naming the file and line: a missing column is named with the
header cut to HEADER_CHARS, a JSON file (which csv reads as one row of its whole text) is named
as JSON. What would be read wrongly without a word is refused too: a column the reader uses
named twice in the header, a row with more (non-empty) values than the header (a comma inside
an unquoted answer would cut it) or fewer than the columns read, a value running over several
lines (an unclosed quote swallows the rows after it; on the last line, the end of the file),
a header name that is a column read but for case, spaces or hyphens ('Question_ID ', 'Repeat':
names are matched exactly, so it was a missing or an ignored column), and numbers Python's int()
and float() take but a person would not write for one ('1_0' for 10, digits of other scripts).
A header that is one value holding semicolons or tabs (a spreadsheet's export in many locales),
Excel's 'sep=' line and UTF-16 text are named as such.
"""
import csv
import re

from rsvqa_jax.errors import RSVQAError

HEADER_CHARS = 80  # of a CSV header quoted in an error
SEPARATORS = {";": "semicolons", "\t": "tabs", "|": "vertical bars"}  # named when a header uses one
_INVISIBLE = dict.fromkeys(map(ord, "\ufeff\u200b\u200c\u200d\u2060"))  # BOM, zero-width marks


def _alike(name):
  """A column name as a person reads it: case, spaces, hyphens, invisible marks not told apart."""
  return re.sub(r"[\s_-]+", "_", name.translate(_INVISIBLE).strip().casefold())


def _near_misses(path, header, columns):
  """Refuses a header name that is one of `columns` but for case, spaces or hyphens: without a
  word, 'Question_ID ' was a missing column, 'Repeat' an ignored one (an adversarial file read as
  clean predictions), 'Image_ID' an image check skipped, and 'Prediction' beside 'prediction'
  an ambiguity settled by the exact spelling."""
  for column in columns:
    alike = [h for h in header if h != column and _alike(h) == _alike(column)]
    if not alike:
      continue
    if column in header:
      raise RSVQAError(f"{path}: columns {column} and {alike[0]!r} differ only in case or spaces; "
                       "which one to read is ambiguous: rename or drop one")
    raise RSVQAError(f"{path}: column {alike[0]!r} is not read (column names are matched "
                     f"exactly): rename it {column}")


def _header_hint(header):
  """Why a header lacks the columns, where the file shows it: another separator, UTF-16 text."""
  if any("\x00" in h for h in header):
    return "; the header holds NUL bytes: UTF-16 text? save it as UTF-8 CSV"
  if header and header[0].strip().lower().startswith("sep="):
    return ("; its first line is Excel's separator line: remove it and save the file "
            "comma-separated")
  for sep, name in SEPARATORS.items():
    if len(header) == 1 and sep in header[0]:
      return f"; the header is separated by {name}: save the file comma-separated"
  return ""


def check(path, required, header, optional=()):
  """Refuses a CSV whose `header` (its first row, a list) lacks a `required` column, or names a
  column it reads (`required` or `optional`) twice, or but for case, spaces or hyphens."""
  header = header or ()
  twice = [c for c in (*required, *optional) if header.count(c) > 1]
  if twice:
    raise RSVQAError(f"{path}: column {twice[0]} appears {header.count(twice[0])} times in the "
                     "header; which one to read is ambiguous")
  _near_misses(path, header, (*required, *optional))
  missing = [c for c in required if c not in header]
  if not missing:
    return
  with open(path, encoding="utf-8-sig", errors="replace") as f:
    if f.read(4096).lstrip()[:1] in ("{", "["):
      raise RSVQAError(f"{path}: not a CSV file (it looks like JSON); give a CSV with the columns "
                       f"{', '.join(required)}")
  text = ",".join(header)
  text = text if len(text) <= HEADER_CHARS else text[:HEADER_CHARS - 3] + "..."
  raise RSVQAError(f"{path}: missing column(s) {', '.join(missing)} (header: {text!r})"
                   + _header_hint(header))


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
      # line_num is not yet counted when csv stops inside a line (a value over its field limit)
      raise RSVQAError(f"{path}:{max(reader.line_num, last + 1)}: not a readable CSV row "
                       f"({e})") from None
  return tuple(reader.fieldnames or ()), rows


def _first_bad_byte(path):
  """Where a file stops being UTF-8, for the error message (the reader decodes in blocks)."""
  with open(path, "rb") as f:
    data = f.read()
  if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
    return "UTF-16 text: it begins with a UTF-16 byte order mark"
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
