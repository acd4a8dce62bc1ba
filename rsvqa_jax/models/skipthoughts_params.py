"""Loads the original Skip-thoughts uni-skip files into `SkipThoughts`.

The files are `uni_skip.npz` (GRU arrays), `dictionary.txt` (one word per line, line number =
row of the word table) and `utable.npy` (the 930k x 620 word table). Only the rows of the words
in the dataset's word list are kept; dataset words missing from the dictionary share the UNK row
and are counted. `utable.npy` as distributed is a pickled object array: it is unpickled only when
the caller passes `allow_pickle=True`, and `convert_utable` writes a plain float32 copy once
(memory-mapped afterwards, so only the needed rows are read).

With files, the encoder is built from shapes only (`nnx.eval_shape`) and every parameter is
filled by `checkpoints.load_into`. The random-init model is built in one `nnx.jit` program from
the caller's `rngs`, which, unlike `checkpoints.jit_init`, also works under an outer trace
such as `nnx.eval_shape`.
"""
import os

import numpy as np
from flax import nnx

from rsvqa_jax.data.tokenizers import UNK, WordTokenizer
from rsvqa_jax.errors import RSVQAError
from rsvqa_jax.models import checkpoints
from rsvqa_jax.models.skipthoughts import SkipThoughts

UNI_SKIP = "uni_skip.npz"
UTABLE = "utable.npy"
PLAIN_UTABLE = "utable_f32.npy"
DICTIONARY = "dictionary.txt"
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
    return {line.rstrip("\r\n"): i for i, line in enumerate(f)}


def read_uni_skip(path):
  """The encoder arrays of uni_skip.npz as float32, keyed by our names (W, U, b, Wx, Ux, bx)."""
  try:
    with np.load(path, allow_pickle=False) as npz:
      missing = [k for k in ENCODER_KEYS.values() if k not in npz.files]
      if missing:
        raise RSVQAError(f"{path}: missing key {missing[0]} (has {sorted(npz.files)[:10]})")
      return {ours: np.asarray(npz[theirs], np.float32) for ours, theirs in ENCODER_KEYS.items()}
  except (OSError, ValueError) as e:
    raise RSVQAError(f"{path}: not a readable .npz of plain arrays ({e})") from e


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


def _open_table(path, allow_pickle):
  try:
    return np.load(path, mmap_mode="r", allow_pickle=False)
  except ValueError as e:
    if not allow_pickle:
      raise RSVQAError(
          f"{path}: pickled object array; pass allow_pickle=True only if you trust the file, or "
          f"convert it once with rsvqa_jax.models.skipthoughts_params.convert_utable(src, dst) "
          f"(writes a plain float32 {PLAIN_UTABLE})") from e
    return np.load(path, allow_pickle=True, encoding="latin1")


def read_table_rows(path, rows, *, allow_pickle=False):
  """Rows [len(rows), word_dim] of utable (plain .npy memory-mapped; pickled only on request)."""
  table = _open_table(path, allow_pickle)
  size = len(np.asarray(table.item())) if table.dtype == object and table.ndim == 0 else len(table)
  if len(rows) and max(rows) >= size:
    raise RSVQAError(f"{path}: {size} rows, but the dictionary needs row {max(rows)}")
  return _table_rows(table, rows)


def convert_utable(src, dst, *, chunk=65536):
  """Unpickles `src` (an explicit, one-time request) and writes it as a plain float32 .npy."""
  table = np.load(src, allow_pickle=True, encoding="latin1")
  if table.dtype == object and table.ndim == 0:
    table = np.asarray(table.item())
  dim = _table_rows(table, [0]).shape[1]
  out = np.lib.format.open_memmap(dst, mode="w+", dtype=np.float32, shape=(len(table), dim))
  for start in range(0, len(table), chunk):
    stop = min(start + chunk, len(table))
    out[start:stop] = _table_rows(table, range(start, stop))
  out.flush()
  del out


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


def load_skipthoughts(folder_or_files, words, *, allow_pickle=False, dropout=0.0, bayesian=False,
                      lowercase=True, rngs=None):
  """Skip-thoughts encoder and word tokenizer for a dataset's word list.

  Args:
    folder_or_files: folder with uni_skip.npz, utable.npy (or utable_f32.npy) and
      dictionary.txt; or a mapping with keys uni_skip, utable, dictionary; or None for a randomly
      initialised model of the pretrained shapes (one compiled program, `rngs` as in an
      eager build).
    words: the dataset's word list (see `rsvqa_jax.data.tokenizers.word_list`).
    allow_pickle: allow unpickling a pickled utable.npy (only for trusted files).
    rngs: default nnx.Rngs(0); with files, it seeds only the dropout stream (the model is built
      from shapes and every parameter comes from the files).

  Returns:
    (SkipThoughts, WordTokenizer, number of dataset words missing from the dictionary).
  """
  rngs = rngs if rngs is not None else nnx.Rngs(0)
  if folder_or_files is None:
    tokenizer = WordTokenizer.build(words, lowercase=lowercase)
    model = nnx.jit(lambda r: SkipThoughts(tokenizer.vocab_size, dropout=dropout,
                                           bayesian=bayesian, rngs=r))(rngs)
    return model, tokenizer, 0

  files = resolve_files(folder_or_files)
  dictionary = read_dictionary(files["dictionary"])
  arrays = read_uni_skip(files["uni_skip"])
  tokenizer = WordTokenizer.build(words, dictionary, lowercase=lowercase)
  needed = [dictionary[w] for w in tokenizer.vocab[2:]]
  if UNK in dictionary:
    needed.append(dictionary[UNK])
  table = read_table_rows(files["utable"], needed, allow_pickle=allow_pickle)
  word_dim, hidden_dim = arrays["W"].shape[0], arrays["Ux"].shape[0]
  if table.shape[1] != word_dim:
    raise RSVQAError(f"{files['utable']}: word vectors of size {table.shape[1]}, "
                     f"encoder_W expects {word_dim}")
  word_rows = np.zeros((tokenizer.vocab_size, word_dim), np.float32)
  word_rows[2:] = table[:tokenizer.vocab_size - 2]
  if UNK in dictionary:
    word_rows[tokenizer.unk_id] = table[-1]
  model = nnx.eval_shape(lambda: SkipThoughts(
      tokenizer.vocab_size, word_dim=word_dim, hidden_dim=hidden_dim, dropout=dropout,
      bayesian=bayesian, rngs=nnx.Rngs(0)))
  checkpoints.load_into(model, uni_skip_tree(model, arrays, word_rows, files["uni_skip"]),
                        files["uni_skip"])
  checkpoints.finish_abstract(model, rngs, files["uni_skip"])
  return model, tokenizer, len(tokenizer.unknown_words)
