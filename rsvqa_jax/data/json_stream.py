"""The entries of a split file's list, read block by block instead of as one parsed document.

RSVQAxBEN's split files hold millions of entries in one `{"questions": [...]}` object: parsed
whole, the Python objects take several times the file's size. Here the list is cut after
`},` into blocks of about BLOCK_BYTES and each block is parsed by the stdlib's C decoder as
`[...]`, so memory holds one block's entries at a time. A cut inside a string or inside a
nested value leaves text that is not a valid JSON list, so a block that parses is exactly a
run of whole entries; one that does not is grown (up to MAX_TRIES blocks) until it parses.
Anything outside that fast path (other keys beside the list, a byte-order mark, malformed JSON,
invalid UTF-8, a key given twice) is handed to the plain reader (split_files.load_json_list),
which reads the whole file and raises its usual one-line error, or returns the list.
(No streaming JSON parser, such as ijson, is among the dependencies; the stdlib's C decoder
over blocks parses a question entry in about 3 us here, its key check included.)
"""
import codecs
import json
import re

from rsvqa_jax.data import split_files

BLOCK_BYTES = 1 << 23
MAX_TRIES = 4
_SPACE = re.compile(r"\s*")
_TAIL = re.compile(r"\]\s*\}\s*\Z")
_CUT = re.compile(r"\}\s*,")


class _Fallback(Exception):
  """The fast path cannot read this file: the plain reader reads it (or names its error)."""


def blocks(path, key, block_bytes=BLOCK_BYTES):
  """Yields lists of the entries of the list under `key` of split file `path`, in file order."""
  done = 0
  try:
    for entries in _fast_blocks(path, key, block_bytes):
      done += len(entries)
      yield entries
  except _Fallback:
    # Entries already yielded were whole and in order; the plain reader checks the whole
    # file and gives the rest, or raises the file's error.
    rest = split_files.load_json_list(path, key)[done:]
    if rest:
      yield rest


def _decode(text):
  try:
    return split_files.parse_json(text)
  except (ValueError, RecursionError, split_files.DuplicateKey):
    raise _Fallback() from None


def _fast_blocks(path, key, block_bytes):
  decoder = codecs.getincrementaldecoder("utf-8-sig")()  # a byte-order mark read as read_text does
  try:
    f = open(path, "rb")
  except OSError:
    raise _Fallback() from None
  with f:
    def read():
      data = f.read(block_bytes)
      try:
        return decoder.decode(data, final=not data), not data
      except UnicodeDecodeError:
        raise _Fallback() from None

    buf, eof = read()
    head = re.compile(r"\s*\{\s*" + re.escape(json.dumps(key)) + r"\s*:\s*\[")
    while not eof and len(buf) < 256:
      more, eof = read()
      buf += more
    match = head.match(buf)
    if not match:
      raise _Fallback()
    buf = buf[match.end():]
    tries = 0
    while True:
      while not eof and len(buf) < block_bytes * (tries + 1):
        more, eof = read()
        buf += more
      if eof:
        tail = _TAIL.search(buf)
        if not tail:
          raise _Fallback()
        entries = _decode("[" + buf[:tail.start()] + "]")
        yield entries
        return
      cut = _last_cut(buf)
      if cut is None:
        tries += 1
        if tries > MAX_TRIES:
          raise _Fallback()
        continue
      try:
        entries = _decode("[" + buf[:cut.start() + 1] + "]")
      except _Fallback:
        tries += 1
        if tries > MAX_TRIES:
          raise
        continue
      tries = 0
      buf = buf[_SPACE.match(buf, cut.end()).end():]
      yield entries


def _last_cut(text):
  """The last `},` of `text` (the end of an entry if it lies at the list's top level)."""
  end = len(text)
  while True:
    i = text.rfind("}", 0, end)
    if i < 0:
      return None
    cut = _CUT.match(text, i)
    if cut:
      return cut
    end = i
