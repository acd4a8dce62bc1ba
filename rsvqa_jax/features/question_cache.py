"""On-disk cache of frozen language-model question vectors, one per distinct question string.

With a frozen text encoder the question vector is a pure function of (encoder parameters,
tokenizer, string), and RSVQA repeats a few thousand template strings over tens of thousands of
samples, so each distinct string is encoded once and every run and seed reuses the table. An
entry (`vectors.npy` float32 [Nq, D] in sorted-string order + `manifest.json`) is keyed by the
caller's encoder identity (see `encoder_identity`: parameter-tree hash, tokenizer files, settings)
and the hash of the distinct strings; it is written through storage.cached (by one process at a
time, a temporary folder renamed when complete) and its checksum is verified on open.
"""
import hashlib
import json
import os
import time

import numpy as np

from rsvqa_jax import progress, storage
from rsvqa_jax.models.checkpoints import tree_sha256

FORMAT_VERSION = 1


def encoder_identity(params, tokenizer_files=(), **settings):
  """A JSON-able identity for a frozen text encoder.

  Args:
    params: its parameter tree (hashed leaf by leaf, see checkpoints.tree_sha256).
    tokenizer_files: files defining the tokenizer (vocab.txt, tokenizer.json, dictionary.txt),
      hashed by content.
    **settings: anything else the vectors depend on (family, max_length, pooling, lowercase...).
  """
  return {"params_sha256": tree_sha256(params),
          "tokenizer": {os.path.basename(p): storage.file_sha256(p) for p in tokenizer_files},
          **settings}


def _distinct(questions):
  strings = np.asarray([str(q) for q in np.asarray(questions, dtype=object).ravel()], dtype=object)
  if not len(strings):
    raise ValueError("question_vectors needs at least one question")
  distinct, index = np.unique(strings, return_inverse=True)
  return distinct.tolist(), index.astype(np.int64)


def _encode_all(strings, encoder, tokenize, batch_size, desc):
  """Vectors of `strings` in their order; batches grouped by length, the last padded by repeats."""
  order = sorted(range(len(strings)), key=lambda i: (len(strings[i]), i))
  out = None
  with progress.bar(total=len(strings), desc=desc, unit="q") as bar:
    for start in range(0, len(order), batch_size):
      take = order[start:start + batch_size]
      batch = [strings[i] for i in take]
      batch += [batch[-1]] * (batch_size - len(batch))  # one batch size: fewer compiles
      vectors = np.asarray(encoder(tokenize(batch)), dtype=np.float32)[:len(take)]
      if out is None:
        out = np.empty((len(strings), vectors.shape[1]), np.float32)
      out[take] = vectors
      bar.update(len(take))
  return out


def question_vectors(questions, encoder, tokenize, cache_dir, encoder_id, *, batch_size=256):
  """Frozen-encoder vectors of the distinct questions, from the cache or computed once.

  Args:
    questions: array of question strings (any length, repeats welcome).
    encoder: callable(tokenize output) -> [b, D] array (the frozen language model).
    tokenize: callable(list of b strings) -> whatever `encoder` takes.
    cache_dir: folder of the cache entries.
    encoder_id: str or JSON-able dict naming the encoder and tokenizer (see encoder_identity);
      anything the vectors depend on must be in it, since it is the cache's version.
    batch_size: strings per encoder call.

  Returns:
    (vectors float32 [Nq_distinct, D] read-only memmap, index int64 [len(questions)]) with
    vectors[index[i]] the vector of questions[i].
  """
  distinct, index = _distinct(questions)
  strings_sha = hashlib.sha256(json.dumps(distinct).encode()).hexdigest()
  key = storage.identity_key({"format": FORMAT_VERSION, "encoder": encoder_id,
                              "questions_sha256": strings_sha})
  name = f"questions_{key}"

  def build(tmp):
    started = time.time()
    vectors = _encode_all(distinct, encoder, tokenize, batch_size, "question vectors")
    np.save(os.path.join(tmp, "vectors.npy"), vectors)
    storage.write_json(os.path.join(tmp, storage.MANIFEST), {
        "format": FORMAT_VERSION, "key": key, "encoder": encoder_id,
        "questions_sha256": strings_sha, "num_questions": len(distinct),
        "dim": int(vectors.shape[1]),
        "vectors_sha256": storage.file_sha256(os.path.join(tmp, "vectors.npy")),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S"), "seconds": round(time.time() - started, 3),
    })

  vectors = storage.cached(cache_dir, name, lambda path: _open(path, key, len(distinct)), build,
                           "question cache entry")
  return vectors, index


def _open(path, key, n):
  manifest = storage.read_manifest(path, format=FORMAT_VERSION, key=key)
  try:
    return storage.open_array(os.path.join(path, "vectors.npy"), (n, manifest["dim"]),
                              manifest["vectors_sha256"], storage.entry_digests(path))
  except (TypeError, KeyError):
    return None
