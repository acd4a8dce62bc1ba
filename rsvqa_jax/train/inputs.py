"""From a config to the arrays training reads: dataset, answer vocabulary, features, columns.

The dataset is read from `config.data.root`, or from the synthetic dataset's folder under the
cache (generated beforehand by the explicit step in train/prepare.py; reading never generates).
Questions are tokenised once into padded columns (`pipeline.split_columns`);
image features stay in their (memory-mapped) array and each batch gathers its rows on the host,
so the loop does not care where features come from (the feature cache, or a test's array).
Evaluation batches carry K image-feature rows per question ([b, K, D]: the clean row, or K
substituted ones for adversarial testing) so every evaluator runs the same compiled step.
With a cached frozen language model (config_lib.caches_questions) the columns also hold each
question's row in the question-vector table, and batches carry `question_vector` instead of
tokens. Evaluation batches are global and identical on every host; each host feeds its slice.

Augmentation (config.data.augment_variants, training only) follows the original RSVQA code,
which flips / rotates the image when the question has no positional word: the frozen features
of each variant are cached tables aligned with the clean one, and a training batch reads each
non-positional sample's row from a variant drawn per sample from (seed, step, host), so a
resumed run draws the same variants as an uninterrupted one.
"""
import functools
import hashlib
import logging
import os
import re
from typing import NamedTuple

import jax
import numpy as np
from flax import nnx

from rsvqa_jax import config as config_lib
from rsvqa_jax import errors
from rsvqa_jax import storage
from rsvqa_jax.bias import shortcuts
from rsvqa_jax.data import pipeline, rsvqa_json, synthetic
from rsvqa_jax.data.answers import AnswerVocab
from rsvqa_jax.data.tokenizers import WordTokenizer, bucket_length, pad_batch, word_list
from rsvqa_jax.errors import RSVQAError
from rsvqa_jax.features import image_cache, question_cache
from rsvqa_jax.train import checkpointing

_log = logging.getLogger(__name__)

ANSWERS_FILE = "answers.json"
DATA_FILE = "data.json"  # the trained and selected-on splits' sizes and fingerprints
QUESTION_ENCODER_FILE = "question_encoder.json"
HF_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                      "vocab.txt", "vocab.json", "merges.txt")
# Words that tie a question to the image's orientation; such questions are never augmented.
# They cover the RSVQA LR relations "on the left of", "on the right of", "at the top of" and
# "at the bottom of" (whole words, any case).
POSITIONAL_WORDS = ("left", "right", "top", "bottom")
_POSITIONAL = re.compile(r"\b(" + "|".join(POSITIONAL_WORDS) + r")\b", re.IGNORECASE)


class Features(NamedTuple):
  """Image features [N, D] and the (sorted) image id of each row, like ImageFeatures."""

  features: np.ndarray
  image_ids: np.ndarray


class SplitColumns(NamedTuple):
  columns: dict  # pipeline.split_columns output
  lengths: np.ndarray  # real token count per row
  buckets: tuple  # token widths batches are cut to; the last one is the columns' width


def load_dataset(config, workdir):
  """The records.Dataset a config names: data.root, or the synthetic dataset already generated."""
  d = config.data
  if d.synthetic:
    folder = config_lib.synthetic_root(config, workdir)
    wanted = synthetic_params(config)
    if synthetic.read_manifest(folder) != wanted:
      raise RSVQAError(f"{folder}: the synthetic dataset of this config is not there (training "
                       "generates it as its first stage; or run rsvqa-jax synth --out "
                       f"{folder} --variant {d.synthetic_variant} --images {d.synthetic_images} "
                       f"--seed {d.synthetic_seed} --questions-per-image "
                       f"{d.synthetic_questions_per_image})")
    return rsvqa_json.read_dataset(folder, d.synthetic_variant)
  if not d.root:
    raise RSVQAError(f"config data.root is not set: give the {d.name.upper()} dataset folder "
                     "with --config.data.root=PATH")
  if not os.path.isdir(d.root):
    raise RSVQAError(f"config data.root={d.root}: folder {errors.not_a_folder(d.root)}")
  return rsvqa_json.read_dataset(d.root, d.name)


def synthetic_params(config):
  """The synthetic generator's parameters a config asks for (its manifest must equal them).

  Too few images are named as the config key here (the generator names its synth flag); not in
  the config checks, which in-memory runs' configs (data.synthetic_images 0) pass too.
  """
  d = config.data
  least = synthetic.least_images(d.synthetic_variant)
  if d.synthetic_images < least:
    raise RSVQAError(f"config data.synthetic_images={d.synthetic_images}: the "
                     f"{d.synthetic_variant} variant needs at least {least} images (one per "
                     "split)")
  return synthetic.params(d.synthetic_variant, d.synthetic_images, d.synthetic_seed,
                          questions_per_image=d.synthetic_questions_per_image)


def answer_vocab(dataset, config, workdir):
  """The vocabulary of the train split; recorded in the workdir and checked on later runs (once
  a config is recorded there: before, the file is a refused run's, which trained nothing)."""
  vocab = AnswerVocab.for_dataset(dataset, dataset[config.data.train_split])
  path = os.path.join(workdir, ANSWERS_FILE)
  if os.path.exists(path) and os.path.exists(os.path.join(workdir, checkpointing.CONFIG_FILE)):
    recorded = AnswerVocab.load(path)
    if recorded != vocab:
      k = next((i for i, (a, b) in enumerate(zip(recorded.answers, vocab.answers)) if a != b),
               min(len(recorded), len(vocab)))
      name = lambda v: repr(v.answers[k]) if k < len(v.answers) else "no answer"
      raise RSVQAError(f"{path}: the workdir was trained on {len(recorded)} answer classes, the "
                       f"dataset now gives {len(vocab)}; class {k} is {name(recorded)} there, "
                       f"{name(vocab)} now: dataset changed?")
  elif jax.process_index() == 0:
    os.makedirs(workdir, exist_ok=True)
    vocab.save(path)
  return vocab


def _data_record(dataset, config):
  """{split: {questions, sha256}} of the splits a run trains and selects its checkpoint on."""
  names = dict.fromkeys([config.data.train_split, config.data.val_split])
  return {s: {"questions": len(dataset[s]), "sha256": dataset[s].fingerprint()}
          for s in names if s in dataset.splits}


def check_data(workdir, dataset, config):
  """Refuses a dataset whose train or validation split is not the one `workdir` trained on.

  Compared with workdir/data.json (record_data): a resume on changed data would continue another
  run's optimisation, an evaluation would score questions it trained on as unseen ones (a
  rebuilt shortcut benchmark re-splits the same questions). A workdir trained before the file
  existed is not checked.
  """
  path = os.path.join(workdir, DATA_FILE)
  if not os.path.exists(path):
    return
  recorded = storage.read_json(path)
  if not isinstance(recorded, dict):
    raise RSVQAError(f"{path}: unreadable; the workdir's record of its training data is damaged")
  for s, now in _data_record(dataset, config).items():
    then = recorded.get(s)
    if isinstance(then, dict) and then.get("sha256") != now["sha256"]:
      alike = then.get("questions") == now["questions"]  # the readers' text changed since?
      raise RSVQAError(f"{path}: split {s} of {dataset.root} is not the one {workdir} trained "
                       f"on ({then.get('questions')} questions then, {now['questions']} now, "
                       "other contents" + (
                           "; or files whose questions have surrounding spaces or decomposed "
                           "accents, which the readers keep out since 2026-12-07" if alike else "")
                       + "): give the data it trained on, or train in another --workdir")


def record_data(workdir, dataset, config):
  """Writes workdir/data.json at the first training (one recorded already was checked when the
  run was built)."""
  path = os.path.join(workdir, DATA_FILE)
  if not os.path.exists(path) and jax.process_index() == 0:
    storage.write_json(path, _data_record(dataset, config))


def pretraining_source(config):
  """What identifies the dataset a synthetic_resnet of `config` is pretrained on (its train
  split): a synthetic dataset's generator settings (the config's, or those recorded in the
  data.root folder), else the folder's absolute path."""
  if config.data.synthetic:
    return synthetic_params(config)
  return folder_source(config.data.root) if config.data.root else None  # None: in memory


def folder_source(root):
  """pretraining_source of the dataset folder `root`: a synthetic dataset's generator settings,
  a shortcut benchmark's data folder's (bias/shortcuts.data_source), else its absolute path."""
  return synthetic.read_manifest(root) or shortcuts.data_source(root) or os.path.abspath(root)


def resolved_image(config, workdir):
  """config.image with its derived paths set (config.image_config), as training reads it."""
  return config_lib.image_config(config.image, config_lib.cache_dir(config, workdir),
                                 pretraining_source(config))


def image_features(config, dataset, workdir, splits, *, variant="none", kind="clean",
                   noise_seed=0):
  """Frozen-encoder features of the images of `splits` (None: all) from the cache.

  `variant` (an augmentation) or `kind` (an adversarial pixel replacement) as in
  features/image_cache.py. Rows follow the sorted image ids, so every variant and kind of the
  same splits lines up with the clean table.
  """
  cache = config_lib.cache_dir(config, workdir)
  return image_cache.image_features(
      dataset, splits, resolved_image(config, workdir),
      os.path.join(cache, config_lib.FEATURES_DIR), variant=variant, kind=kind,
      noise_seed=noise_seed)


def augment_tables(config, dataset, workdir, features, given=None):
  """Feature tables of config.data.augment_variants, in order, rows aligned with `features`.

  `given`: {variant: Features} to use instead of the cache (in-memory tasks); "none" is always
  the clean table itself.
  """
  tables = []
  for variant in config.data.augment_variants:  # each one of them (config/checks.CHOICES)
    if variant == "none":
      tables.append(features.features)
      continue
    if given is None:
      table = image_features(config, dataset, workdir, None, variant=variant)
    elif variant in given:
      table = given[variant]
    else:
      raise RSVQAError(f"config data.augment_variants: no features were given for variant "
                       f"{variant!r} (given: {sorted(given)})")
    if (not np.array_equal(table.image_ids, features.image_ids)
        or table.features.shape != features.features.shape):
      raise RSVQAError(f"config data.augment_variants: the {variant!r} features do not have the "
                       f"clean features' images and shape {tuple(features.features.shape)}")
    tables.append(table.features)
  return tuple(tables)


def positional_questions(questions):
  """bool [N]: whether each question holds a POSITIONAL_WORDS word (never augmented)."""
  return np.array([bool(_POSITIONAL.search(q)) for q in questions], bool)


def draw_variants(positional, num_variants, seed, step):
  """Table of each sample of a training batch: 0 (clean) if positional, else 1..num_variants.

  Uniform over the variants, drawn from (seed, step, host): a pure function of the step, so
  exact resume holds.
  """
  rng = np.random.default_rng([int(seed), int(step), jax.process_index()])
  drawn = rng.integers(1, num_variants + 1, size=len(positional))
  return np.where(positional, 0, drawn).astype(np.int32)


def _encoder_identity(config, encoder, tokenizer):
  """question_cache.encoder_identity of a frozen text encoder and its tokenizer."""
  t = config.text
  if isinstance(tokenizer, WordTokenizer):
    files = ()
    vocab = {"vocab_sha256": hashlib.sha256("\n".join(tokenizer.vocab).encode()).hexdigest(),
             "lowercase": tokenizer.lowercase}
  else:
    files = [os.path.join(t.checkpoint, f) for f in HF_TOKENIZER_FILES
             if os.path.isfile(os.path.join(t.checkpoint, f))]
    vocab = {"tokenizer_max_length": tokenizer.max_length}
  return question_cache.encoder_identity(
      nnx.state(encoder, nnx.Param), files, encoder=t.encoder, max_length=t.max_length,
      dtype="float32", **vocab)


def _check_or_record_encoder(workdir, identity):
  """The workdir's model was trained on vectors of one encoder; later runs must use the same."""
  path = os.path.join(workdir, QUESTION_ENCODER_FILE)
  if os.path.exists(path):
    recorded = storage.read_json(path)
    if recorded is None:
      raise RSVQAError(f"{path}: unreadable; the workdir's record of its frozen language model "
                       "is damaged")
    if recorded != identity:
      raise RSVQAError(f"{path}: the workdir was trained on question vectors of another frozen "
                       "language model (its parameters or tokenizer changed since): check "
                       "text.checkpoint")
  elif jax.process_index() == 0:
    os.makedirs(workdir, exist_ok=True)
    storage.write_json(path, identity)


@functools.partial(jax.jit, static_argnums=0)
def _encode(graphdef, state, tokens, mask):
  return nnx.merge(graphdef, state)(tokens, mask)


def question_vectors(config, dataset, workdir, encoder, tokenizer):
  """Frozen-encoder vectors of every distinct question of the dataset, from the cache.

  Returns (vectors float32 [Nq, D] memmap, {split name: int32 row of each question}).
  """
  identity = _encoder_identity(config, encoder, tokenizer)
  _check_or_record_encoder(workdir, identity)
  names = sorted(dataset.splits)
  questions = np.concatenate([np.asarray(dataset[s].question, dtype=object) for s in names])
  graphdef, state = nnx.split(encoder)
  max_length, buckets = config.text.max_length, tuple(sorted(config.train.length_buckets))

  def tokenize(batch):
    return pad_batch([tokenizer.encode(q)[:max_length] for q in batch], tokenizer.pad_id,
                     buckets=buckets)

  vectors, index = question_cache.question_vectors(
      questions, lambda tm: _encode(graphdef, state, *tm), tokenize,
      os.path.join(config_lib.cache_dir(config, workdir), config_lib.QUESTIONS_DIR), identity,
      batch_size=config.train.eval_batch_size)
  rows, start = {}, 0
  for s in names:
    rows[s] = index[start:start + len(dataset[s])].astype(np.int32)
    start += len(dataset[s])
  return vectors, rows


def dataset_words(dataset):
  """Every word of every split's questions (the Skip-thoughts dictionary, as in RSVQA)."""
  return word_list(dict.fromkeys(q for s in dataset.splits.values() for q in s.question.tolist()))


def encode_split(split, vocab, tokenizer, image_ids, max_length, buckets, question_rows=None):
  """SplitColumns of one split: token ids (cut to max_length), answer ids, image rows.

  `question_rows`: each question's row in the question-vector table (column question_index).
  """
  # Each distinct question is tokenised once and its padded row kept once (pipeline.RowTable):
  # RSVQAxBEN has thousands of distinct strings for 14.7M questions.
  distinct = {}
  codes = np.fromiter((distinct.setdefault(q, len(distinct)) for q in split.question.tolist()),
                      np.int32, len(split))
  full = [tokenizer.encode(q) for q in distinct]
  cut = np.array([len(x) > max_length for x in full])
  if cut.any():  # as the paper's models read them, never silently
    _log.info(f"split {split.name}: {int(cut[codes].sum())} question(s) ({int(cut.sum())} "
              f"distinct) longer than text.max_length={max_length} tokens, cut to it")
  ids = [x[:max_length] for x in full]
  distinct_lengths = np.array([len(x) for x in ids], np.int32)
  if distinct_lengths.min(initial=1) == 0:
    raise RSVQAError(f"split {split.name}: a question has no token after tokenisation")
  buckets = tuple(sorted(buckets))
  width = bucket_length(int(distinct_lengths.max(initial=1)), buckets)
  buckets = tuple(b for b in buckets if b < width) + (width,)
  table = np.full((len(ids), width), tokenizer.pad_id, np.int32)
  for i, x in enumerate(ids):
    table[i, :len(x)] = x
  answers = vocab.encode(split.answer.tolist()).ids
  columns = pipeline.split_columns(split, image_ids, answers, table, distinct_lengths,
                                   token_rows=codes)
  lengths = distinct_lengths[codes]
  if question_rows is not None:
    columns["question_index"] = np.asarray(question_rows, np.int32)
  return SplitColumns(columns, lengths, buckets)


def _question_inputs(batch, question_vectors):
  """Tokens and mask, or (with the cached table) the rows of the batch's question vectors."""
  if question_vectors is None:
    return {"tokens": batch["tokens"], "mask": batch["mask"]}
  return {"question_vector": np.asarray(question_vectors[np.asarray(batch["question_index"])],
                                        np.float32)}


def model_batch(batch, features, question_vectors=None, variant=None):
  """A training batch -> the arrays the model and loss read (image rows gathered here).

  With `question_vectors` (the cached table) the batch carries the rows of its questions as
  question_vector instead of tokens and mask. With `variant` (int [B], see draw_variants),
  `features` is a sequence of aligned tables and sample i reads its row from features[variant[i]].
  """
  rows = np.asarray(batch["image_index"])
  if variant is None:
    image = np.asarray(features[rows], np.float32)
  else:
    image = np.empty((len(rows), features[0].shape[1]), np.float32)
    for v in np.unique(variant).tolist():
      sel = variant == v
      image[sel] = features[v][rows[sel]]
  return {"image_features": image, "answer": batch["answer"].astype(np.int32),
          **_question_inputs(batch, question_vectors)}


def eval_model_batch(local, features, image_rows, question_vectors=None):
  """An eval_batches batch -> the eval step's arrays, with K image rows per question.

  `image_rows` int [K, N] gives, for each of K repeats, the row of `features` each question of
  the split sees (its own image's row for clean evaluation, K = 1); image_features is [b, K, D].
  """
  rows = np.asarray(image_rows)[:, local["row"]]
  image = np.asarray(features[rows.T.ravel()], np.float32).reshape(rows.shape[1], rows.shape[0],
                                                                   -1)
  return {"image_features": image, "answer": local["answer"],
          **_question_inputs(local, question_vectors)}


def eval_batches(split_columns, batch_size):
  """Ordered global batches (rows, this host's slice of the batch); the last one padded.

  Yields (rows, local): rows int64 [batch_size] with -1 on padding; local is the dict of
  columns for this host's contiguous part of the batch: `row` (the split row of each sample,
  0 on padding), tokens / mask cut to the batch's bucket, answers (-1 on padding) and
  question_index when the columns have it.
  """
  cols, lengths, buckets = split_columns
  n = len(lengths)
  n_proc, proc = jax.process_count(), jax.process_index()
  per_host = batch_size // n_proc
  for start in range(0, n, batch_size):
    rows = np.arange(start, start + batch_size)
    rows[rows >= n] = -1
    real = rows[rows >= 0]
    width = bucket_length(int(lengths[real].max()), buckets)
    take = np.where(rows >= 0, rows, 0)[proc * per_host:(proc + 1) * per_host]
    pad = rows[proc * per_host:(proc + 1) * per_host] < 0
    local = {"row": take, "tokens": cols["tokens"][take, :width],
             "mask": cols["mask"][take, :width] * ~pad[:, None],
             "answer": np.where(pad, -1, cols["answer"][take])}
    local["mask"][pad, 0] = 1  # a padding row still needs one "real" token for the encoders
    if "question_index" in cols:
      local["question_index"] = cols["question_index"][take]
    yield rows, local
