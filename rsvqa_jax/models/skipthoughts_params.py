"""Loads the original Skip-thoughts uni-skip files into `SkipThoughts`.

The files are `uni_skip.npz` (GRU arrays), `dictionary.txt` (one word per line, line number =
row of the word table) and `utable.npy` (the 930k x 620 word table). Only the rows of the words
of the caller's vocabulary are kept (the tokenizer built from the dataset's words and this
dictionary, data/tokenizers.py: row 0 padding, row 1 the dictionary's UNK row, then the words). `utable.npy` as distributed is a pickled object array: it is unpickled only when
the caller passes `allow_pickle=True` or runs inside `pickle_allowed()` (which the commands enter
only for their own `--allow-pickle` flag: the opt-in is never read from a config or a workdir),
and `convert_utable` writes a plain float32 copy once (memory-mapped afterwards, so only the
needed rows are read).

The encoder is built from shapes only (`nnx.eval_shape`) and every parameter is filled by
`checkpoints.load_into`.
"""
import contextlib
import contextvars
import logging
import os
import pickle
import zipfile

import numpy as np
from flax import nnx

from rsvqa_jax import storage
from rsvqa_jax.errors import RSVQAError
from rsvqa_jax.models import checkpoints
from rsvqa_jax.models.skipthoughts import SkipThoughts

_log = logging.getLogger(__name__)

UNI_SKIP = "uni_skip.npz"
UTABLE = "utable.npy"
PLAIN_UTABLE = "utable_f32.npy"
DICTIONARY = "dictionary.txt"
UNK = "UNK"  # the dictionary's word for unknown words
ENCODER_KEYS = {"W": "encoder_W", "U": "encoder_U", "b": "encoder_b",
                "Wx": "encoder_Wx", "Ux": "encoder_Ux", "bx": "encoder_bx"}


def resolve_files(folder_or_files):
  """{'uni_skip', 'utable', 'dictionary'} paths from a folder or a mapping with those keys.

  In a folder, a converted `utable_f32.npy` is preferred over the pickled `utable.npy`.
  """
  if isinstance(folder_or_files, (str, os.PathLike)):
    folder = os.fspath(folder_or_files)
    plain = os.path.join(folder, PLAIN_UTABLE)
    files = {"uni_skip": os.path.join(folder, UNI_SKIP),
             "utable": plain if os.path.exists(plain) else os.path.join(folder, UTABLE),
             "dictionary": os.path.join(folder, DICTIONARY)}
  else:
    files = dict(folder_or_files)
    missing = {"uni_skip", "utable", "dictionary"} - set(files)
    if missing:
      raise RSVQAError(f"skip-thoughts files: no path given for {sorted(missing)}")
  for path in files.values():
    if not os.path.exists(path):
      raise RSVQAError(f"{path}: skip-thoughts file missing")
  return files


def read_dictionary(path):
  """Word -> row of the word table (the line number; a repeated word keeps its last line)."""
  with open(path, encoding="utf-8", errors="replace") as f:
    dictionary = {line.rstrip("\r\n"): i for i, line in enumerate(f)}
  if not dictionary:  # every word would be unknown: a model that reads nothing
    raise RSVQAError(f"{path}: empty; the Skip-thoughts dictionary has one word a line")
  return dictionary


def read_uni_skip(path):
  """The encoder arrays of uni_skip.npz as float32, keyed by our names (W, U, b, Wx, Ux, bx)."""
  try:
    with open(path, "rb") as f:
      head = f.read(4)
  except OSError as e:
    raise RSVQAError(f"{path}: cannot read ({e.strerror or e})") from None
  if head != ZIP_MAGIC:  # else numpy takes it for a pickle and advises allow_pickle
    raise RSVQAError(f"{path}: not an .npz file (an .npz is a zip archive of arrays)")
  try:
    with storage.npz(path, allow_pickle=False) as npz:
      missing = [k for k in ENCODER_KEYS.values() if k not in npz.files]
      if missing:
        raise RSVQAError(f"{path}: missing key {missing[0]} (has {sorted(npz.files)[:10]})")
      arrays = {ours: checkpoints.float32_weights(npz[theirs], f"{path}: key {theirs}")
                for ours, theirs in ENCODER_KEYS.items()}
  except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:  # empty: EOFError
    raise RSVQAError(f"{path}: not a readable .npz of plain arrays ({e or 'empty'})") from e
  for ours, theirs in ENCODER_KEYS.items():  # the sizes of the model are read off these
    if arrays[ours].ndim != (1 if ours.startswith("b") else 2):
      raise RSVQAError(f"{path}: key {theirs} has shape {arrays[ours].shape}, expected "
                       f"{'a vector' if ours.startswith('b') else 'a matrix'}")
  return arrays


def _table_rows(table, rows):
  """float32 rows of a word table stored as a 2-D array or as an object array of rows."""
  rows = np.asarray(rows, np.int64)
  if table.dtype == object and table.ndim == 0:
    return _table_rows(np.asarray(table.item()), rows)
  if table.dtype == object and table.ndim == 1:
    out = np.zeros((len(rows), np.asarray(table[0]).size), np.float32)
    for j, i in enumerate(rows):
      out[j] = np.asarray(table[i], np.float32).reshape(-1)
    return out
  return np.asarray(table[rows], np.float32).reshape(len(rows), table.shape[1])


NPY_MAGIC = b"\x93NUMPY"
ZIP_MAGIC = b"PK\x03\x04"
_PICKLE_ALLOWED = contextvars.ContextVar("rsvqa_pickle_allowed", default=False)


@contextlib.contextmanager
def pickle_allowed(allowed=True):
  """Within the block, a pickled utable.npy may be unpickled (the person running asked for it)."""
  token = _PICKLE_ALLOWED.set(bool(allowed))
  try:
    yield
  finally:
    _PICKLE_ALLOWED.reset(token)


def _npy_problem(path):
  """Why a .npy file numpy cannot map is unreadable, or None for a whole pickled object array:
  a cut header, or a plain array shorter than its header says (a download stopped part way,
  which the table's 2.3 GB make likely: numpy's own error would read as a pickled table)."""
  with open(path, "rb") as f:
    if f.read(len(NPY_MAGIC)) != NPY_MAGIC:  # numpy takes any other file for a bare pickle
      return "not a .npy file (no NumPy header)"
    f.seek(0)
    try:
      version = np.lib.format.read_magic(f)
      read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                     else np.lib.format.read_array_header_2_0)
      shape, _, dtype = read_header(f)
    except (ValueError, OSError) as e:
      return f"its NumPy header is unreadable ({e}); the file is cut or damaged: download it again"
    start = f.tell()
  if dtype.hasobject:
    return None
  want, have = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize, os.path.getsize(path) - start
  if have < want:
    return (f"cut short: its header gives a {dtype} array of shape {tuple(shape)} ({want} bytes), "
            f"the file holds {have}; download or convert it again")
  return None


def _open_table(path, allow_pickle):
  try:
    return np.load(path, mmap_mode="r", allow_pickle=False)
  except (OSError, EOFError) as e:  # an empty file: EOFError
    raise RSVQAError(f"{path}: not a readable .npy file ({e or 'empty'})") from None
  except ValueError as e:
    problem = _npy_problem(path)
    if problem:
      raise RSVQAError(f"{path}: {problem}") from None
    if not (allow_pickle or _PICKLE_ALLOWED.get()):
      raise RSVQAError(
          f"{path}: pickled object array; run with --allow-pickle only if you trust the file, or "
          f"convert it once with rsvqa_jax.models.skipthoughts_params.convert_utable(src, dst) "
          f"(writes a plain float32 {PLAIN_UTABLE})") from e
  try:
    return np.load(path, allow_pickle=True, encoding="latin1")
  except (pickle.UnpicklingError, EOFError, ValueError) as e:  # a cut pickle
    raise RSVQAError(f"{path}: the pickled word table is unreadable ({type(e).__name__}: {e}); "
                     "the file is cut or damaged: download it again") from None


def read_table_rows(path, rows, *, allow_pickle=False, dictionary=None):
  """Rows [len(rows), word_dim] of utable (plain .npy memory-mapped; pickled only on request).

  `dictionary`: (its path, its lines) to compare with the table's rows: words map to rows by
  line number, so a dictionary longer than the table (a header line, or another table's) reads
  every word with another word's vector, which no shape check sees (a WARNING naming both
  counts). A table of more rows than lines is left alone: rows no line names are never read."""
  table = _open_table(path, allow_pickle)
  if table.dtype != object and (table.ndim != 2 or not np.issubdtype(table.dtype, np.floating)):
    raise RSVQAError(f"{path}: a {table.dtype} array of shape {table.shape}, expected a float "
                     "matrix [words, word_dim]")
  size = len(np.asarray(table.item())) if table.dtype == object and table.ndim == 0 else len(table)
  if len(rows) and max(rows) >= size:
    raise RSVQAError(f"{path}: {size} rows, but the dictionary needs row {max(rows)}")
  if dictionary is not None and dictionary[1] > size:
    _log.warning(f"{dictionary[0]}: {dictionary[1]} lines, but the word table {path} has {size} "
                 "rows; a word's vector is the row of its line number, so every word may read "
                 "another's: are they the files of one model?")
  try:
    return _table_rows(table, rows)
  except (TypeError, ValueError) as e:  # a pickled table whose rows are not equal-sized numbers
    raise RSVQAError(f"{path}: the word table's rows are not vectors of one size ({e})") from None


def convert_utable(src, dst, *, chunk=65536):
  """Unpickles `src` (an explicit, one-time request) and writes it as a plain float32 .npy."""
  table = np.load(src, allow_pickle=True, encoding="latin1")
  if table.dtype == object and table.ndim == 0:
    table = np.asarray(table.item())
  dim = _table_rows(table, [0]).shape[1]
  with storage.writing_npy(dst, (len(table), dim)) as write:  # a full disk: an OSError, no SIGBUS
    for start in range(0, len(table), chunk):
      write(_table_rows(table, range(start, min(start + chunk, len(table)))))


def uni_skip_tree(model, arrays, word_rows, source):
  """Our parameter tree for `model` (possibly abstract) from read_uni_skip arrays and word rows.

  A shape mismatch raises RSVQAError naming the checkpoint key and both shapes.
  """
  shapes = checkpoints.flat_shapes(model)
  given = {**{ours: (arrays[ours], theirs) for ours, theirs in ENCODER_KEYS.items()},
           "embed.embedding": (word_rows, "utable rows")}
  for ours, (value, theirs) in given.items():
    if tuple(value.shape) != shapes[ours]:
      raise RSVQAError(f"{source}: key {theirs} has checkpoint shape {tuple(value.shape)}, "
                       f"model expects {shapes[ours]}")
  return checkpoints.unflatten({ours: value for ours, (value, _) in given.items()})


def read_dictionary_of(folder_or_files):
  """The word -> row dictionary of a Skip-thoughts folder (or files mapping)."""
  return read_dictionary(resolve_files(folder_or_files)["dictionary"])


def load_skipthoughts(folder_or_files, vocab, *, dictionary=None, allow_pickle=False, dropout=0.0,
                      bayesian=False, rngs=None):
  """Skip-thoughts encoder whose word table follows `vocab`.

  Args:
    folder_or_files: folder with uni_skip.npz, utable.npy (or utable_f32.npy) and
      dictionary.txt; or a mapping with keys uni_skip, utable, dictionary.
    vocab: the tokenizer's words by id: vocab[0] padding (a zero row), vocab[1] unknown words
      (the dictionary's UNK row, zeros if it has none), vocab[2:] words of the dictionary.
    dictionary: the file's word -> row mapping when the caller has read it already.
    allow_pickle: allow unpickling a pickled utable.npy (only for trusted files).
    rngs: default nnx.Rngs(0); it seeds only the dropout stream (the model is built from shapes
      and every parameter comes from the files).
  """
  rngs = rngs if rngs is not None else nnx.Rngs(0)
  files = resolve_files(folder_or_files)
  dictionary = dictionary if dictionary is not None else read_dictionary(files["dictionary"])
  missing = [w for w in vocab[2:] if w not in dictionary]
  if missing:
    raise RSVQAError(f"{files['dictionary']}: has no word {missing[0]!r} of the vocabulary "
                     f"({len(missing)} missing)")
  arrays = read_uni_skip(files["uni_skip"])
  needed = [dictionary[w] for w in vocab[2:]]
  if UNK in dictionary:
    needed.append(dictionary[UNK])
  table = read_table_rows(files["utable"], needed, allow_pickle=allow_pickle,
                          dictionary=(files["dictionary"], max(dictionary.values()) + 1))
  checkpoints.check_finite(table, f"{files['utable']}: the rows of the vocabulary's words")
  word_dim, hidden_dim = arrays["W"].shape[0], arrays["Ux"].shape[0]
  if table.shape[1] != word_dim:
    raise RSVQAError(f"{files['utable']}: word vectors of size {table.shape[1]}, "
                     f"encoder_W expects {word_dim}")
  word_rows = np.zeros((len(vocab), word_dim), np.float32)
  word_rows[2:] = table[:len(vocab) - 2]
  if UNK in dictionary:
    word_rows[1] = table[-1]
  model = nnx.eval_shape(lambda: SkipThoughts(
      len(vocab), word_dim=word_dim, hidden_dim=hidden_dim, dropout=dropout,
      bayesian=bayesian, rngs=nnx.Rngs(0)))
  checkpoints.load_into(model, uni_skip_tree(model, arrays, word_rows, files["uni_skip"]),
                        files["uni_skip"], ENCODER_KEYS)
  checkpoints.finish_abstract(model, rngs, files["uni_skip"])
  return model
