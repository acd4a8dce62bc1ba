"""Training and restoring an answerability model (ChiQA, DESIGN.md 6.3) from pools of candidates.

Built from the classification run's pieces, not beside them: the dataset, image-feature cache,
question-vector cache and text encoder of inputs.py / model_builder.py, the Run, TrainState,
optimizer and mesh of run.py / state.py / sharding.py, the compute-dtype forward of steps.py,
the checkpoints of checkpointing.py with loop.py's exact resume, divergence stop and metrics,
and the workdir lock. What differs is the batch and the loss. A batch is whole pools: P
questions x K candidates (the question encoded once per pool, models/answerability.py; K that of
the train split's pools), sharded over the mesh on the pool axis (topped up with masked pools
when the devices do not divide P). The loss is pointwise BCE of sigmoid(logit) against label / 2
(ChiQA's objective), or ListNet over each pool (top-one cross-entropy between softmax(labels)
and softmax(logits)). Validation ranks the val pools at each epoch end; the best checkpoint is
the one with the best `answerability.select_metric` (the test pools are never read).

Pools are read from `answerability.pools`, else the dataset folder when it holds
Answerability_{train split}.csv (`synth --answerability` writes them there), else, for a synthetic
dataset, a folder under the cache keyed by the pool settings, which `train` fills as its pools
stage (data/answerability.py) and nothing else generates. A workdir is laid out like a training
workdir (config.json, checkpoints/, best/, metrics.jsonl), plus WORDS_FILE: the text encoder's
word list as first trained.
"""
import dataclasses
import functools
import glob
import logging
import os

import jax
import jax.numpy as jnp
import numpy as np
import optax

from rsvqa_jax import config as config_lib
from rsvqa_jax import progress, storage
from rsvqa_jax.bias import answerability as metrics_lib
from rsvqa_jax.data import answerability as pools_lib
from rsvqa_jax.data import pipeline, records, split_files, synthetic
from rsvqa_jax.data.answers import AnswerVocab
from rsvqa_jax.data.tokenizers import bucket_length, word_list
from rsvqa_jax.errors import RSVQAError
from rsvqa_jax.models import answerability as model_lib
from rsvqa_jax.train import checkpointing, inputs, loop, model_builder, prepare
from rsvqa_jax.train import restore as restore_lib
from rsvqa_jax.train import run as run_lib
from rsvqa_jax.train import run_record
from rsvqa_jax.train import sharding as shd
from rsvqa_jax.train import steps as steps_lib

_log = logging.getLogger(__name__)

LOSSES = config_lib.ANSWERABILITY_LOSSES
SELECT_METRICS = config_lib.SELECT_METRICS
LABEL_VOCAB = AnswerVocab(tuple(str(label) for label in pools_lib.LABELS))
QTYPE = "answerability"
WORDS_FILE = "answerability_words.json"
FOREIGN_POOLS = ("likely pools of another dataset or split: give "
                 "--config.answerability.pools=FOLDER of this dataset's pools (a workdir trained "
                 "on such pools keeps them: train a new one)")
FOREIGN_POOL = "likely a pool file of another dataset: give one of this dataset's images"


@dataclasses.dataclass
class Pools:
  """One pool file as read: its pairs in file order (labels -1 when unlabelled)."""

  path: str
  pool_ids: np.ndarray  # object [N]
  questions: np.ndarray  # object [N]
  image_ids: np.ndarray  # int64 [N]
  labels: np.ndarray  # int64 [N]

  @classmethod
  def read(cls, path, labelled=True):
    return cls(path, *pools_lib.read_pools(path, labelled=labelled))

  def records(self, name):
    """The pairs as a records.Split (row numbers as question ids; answers are the labels)."""
    labels = [str(v) if v >= 0 else "" for v in self.labels.tolist()]
    return records.Split.from_rows(f"{name} ({self.path})", (
        dict(question_id=i, image_id=im, qtype=QTYPE, question=q, answer=a, raw_answer=a)
        for i, (im, q, a) in enumerate(zip(self.image_ids.tolist(), self.questions.tolist(),
                                           labels))))

  def starts(self):
    """(first row of each pool, the pool size): training needs pools of one size."""
    bounds = [rows[0] for rows in metrics_lib.pools(self.pool_ids)]
    sizes = set(np.diff(np.append(bounds, len(self.pool_ids))).tolist())
    if len(sizes) != 1:
      raise RSVQAError(f"{self.path}: pools of {sorted(sizes)} candidates; training takes pools "
                       "of one size")
    return np.asarray(bounds, np.int64), sizes.pop()


def check(config):
  """One-line RSVQAError for answerability settings a run cannot use, before any work."""
  if "answerability" not in config:
    raise RSVQAError("config has no `answerability` section: use configs/answerability_*.py")
  a = config.answerability
  if a.loss not in LOSSES:
    raise RSVQAError(f"config answerability.loss={a.loss!r}: choose one of {', '.join(LOSSES)}")
  if a.select_metric not in SELECT_METRICS:
    raise RSVQAError(f"config answerability.select_metric={a.select_metric!r}: choose one of "
                     f"{', '.join(SELECT_METRICS)}")
  if a.batch_pools <= 0:
    raise RSVQAError(f"config answerability.batch_pools={a.batch_pools}: must be positive")
  if config.model.head != "paper":
    raise RSVQAError(f"config model.head={config.model.head!r}: the answerability head is the "
                     "paper's head with one output (model.head=paper)")


def _check_inputs(config):
  """What would fail the pools stage, refused before the dataset is generated and the ResNet
  pretrained on it: a pools folder without the training pools, or a synthetic dataset of too
  few images for pools of 2 in each split."""
  d, folder = config.data, config.answerability.pools
  if folder:
    _existing_pools(folder, d.train_split)
  if not d.synthetic or folder or d.synthetic_variant == "xben":
    return
  least = pools_lib.least_images(d.synthetic_variant)
  if d.synthetic_images < least:
    raise RSVQAError(f"config data.synthetic_images={d.synthetic_images}: answerability pools need "
                     f"at least {least} {d.synthetic_variant} images (2 in each split, the "
                     "smallest pool); raise data.synthetic_images")


def _knobs(a):
  return dict(pool_size=a.pool_size, pools_per_image=a.pools_per_image, balance=a.balance,
              seed=a.pool_seed)


def pools_folder(config, dataset, workdir):
  """(folder of the pool files, whether the pools stage generates it) for this config."""
  a = config.answerability
  if a.pools:
    return a.pools, False
  if os.path.exists(pools_lib.pool_file(dataset.root, config.data.train_split)):
    return dataset.root, False
  if synthetic.read_manifest(dataset.root) is None:
    raise RSVQAError(f"{dataset.root}: no {os.path.basename(pools_lib.pool_file('', 'train'))} "
                     "and not a synthetic dataset: give labelled pools with "
                     "--config.answerability.pools=FOLDER")
  key = storage.identity_key({"root": os.path.abspath(dataset.root), **_knobs(a)})
  return os.path.join(config_lib.cache_dir(config, workdir), "answerability",
                      f"pools_{key}"), True


def pools_stage(config, dataset, workdir, log=_log.info):
  """The explicit pools step: a synthetic dataset's pools, generated unless they are there."""
  folder, generated = pools_folder(config, dataset, workdir)
  if generated:
    ids = {s: dataset.image_ids(s) for s in dataset.splits}
    manifest, made = pools_lib.ensure(dataset.root, folder, ids, **_knobs(config.answerability))
    if made:
      log(f"stage pools: {folder}: " + describe(manifest))
  else:
    _warn_other_knobs(folder, config.answerability)
  return folder


def _warn_other_knobs(folder, a):
  """A WARNING when pools found in `folder` were drawn with other settings than the config's:
  those apply only to pools this tool draws, yet the workdir's config records them."""
  found = storage.read_json(os.path.join(folder, pools_lib.MANIFEST))
  if not isinstance(found, dict):
    return
  wanted = pools_lib.params(**_knobs(a))
  names = {"seed": "pool_seed"}
  other = [f"answerability.{names.get(k, k)}={wanted[k]:g} (drawn with {found[k]:g})"
           for k in wanted if k != "version" and isinstance(found.get(k), (int, float))
           and found[k] != wanted[k]]
  if other:
    _log.warning("%s: its pools are used as they were drawn (%s); config %s applies only to "
                 "pools this tool draws from a synthetic dataset", folder,
                 pools_lib.MANIFEST, ", ".join(other))


def describe(manifest):
  """'train 620 pools of 5 (labels 0/1/2: 33.1% / 33.4% / 33.5%), ...' of a pools manifest."""
  return ", ".join(f"{s} {v['pools']} pools of {v['pool_size']} (labels 0/1/2: "
                   + " / ".join(f"{100 * x:.1f}%" for x in v["shares"]) + ")"
                   for s, v in manifest["splits"].items())


def _existing_pools(folder, split):
  """The pool file of `split` in `folder`, or a one-line RSVQAError saying where pools come from."""
  path = pools_lib.pool_file(folder, split)
  if not os.path.exists(path):
    raise RSVQAError(f"{path}: no pools of split {split} (rsvqa-jax synth --answerability writes "
                     "them; `rsvqa-jax answerability train` generates a synthetic config's)")
  return path


def _read(folder, split, dataset):
  """The pools of `split` in `folder`, refused unless their images are that split's of `dataset`."""
  pools = Pools.read(_existing_pools(folder, split))
  pools_lib.check_images(pools.path, pools.image_ids, dataset, split, FOREIGN_POOLS)
  return pools


def _trained_pools(folder, known, config, dataset):
  """records.Dataset of the folder's train and validation pools, as data.json records them: a
  pool file whose labels changed after training is refused (inputs.check_data). So is one whose
  images are not its split's of `dataset`: a workdir trained on such pools before they were
  checked is not evaluated, nor its Majority read from them."""
  trained = {s: known[pools_lib.pool_file(folder, s)]
             for s in dict.fromkeys([config.data.train_split, config.data.val_split])
             if pools_lib.pool_file(folder, s) in known}
  for s, p in trained.items():
    pools_lib.check_images(p.path, p.image_ids, dataset, s, FOREIGN_POOLS)
  return records.Dataset("pools", folder, {s: p.records(s) for s, p in trained.items()})


def _words(workdir, dataset, folder, known):
  """(the text encoder's word list, whether it was read from workdir/WORDS_FILE).

  The dataset's and every pool file's words at the first training, recorded then and read back
  since: a pool file added to the folder later would change the word table's shape, or a word's
  id. A workdir trained before the file existed rebuilds the list, with a WARNING.
  """
  path = os.path.join(workdir, WORDS_FILE)
  trained = os.path.exists(os.path.join(workdir, checkpointing.CONFIG_FILE))
  if trained and os.path.exists(path):
    words = storage.read_json(path)
    if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
      raise RSVQAError(f"{path}: unreadable; the workdir's record of its text encoder's word list "
                       "is damaged")
    return words, True
  words = word_list([*inputs.dataset_words(dataset),
                     *(q for p in known.values() for q in p.questions.tolist())])
  if trained:
    _log.warning("%s: no %s (trained before it was recorded): the text encoder's word list is "
                 "rebuilt from the dataset and every pool file of %s, so a pool file added there "
                 "since training changes it", workdir, WORDS_FILE, folder)
  elif jax.process_index() == 0:
    os.makedirs(workdir, exist_ok=True)
    storage.write_json(path, words)
  return words, False


def _warn_new_words(workdir, folder, known, words, tokenizer):
  """A WARNING counting the words of the folder's pool files that training did not see and
  the tokenizer reads as unknown: the pairs holding them are scored on their other words."""
  trained, new, files = set(words), set(), set()
  for p in known.values():
    found = [w for w in word_list(dict.fromkeys(p.questions.tolist()))
             if w not in trained and tokenizer.words_read_as_unknown(w)]
    if found:
      new.update(found)
      files.add(os.path.basename(p.path))
  if new:
    _log.warning("%s: %d word(s) of %s (e.g. %s) are not in the word list %s trained on "
                 "(%s): read as its unknown token", folder, len(new), ", ".join(sorted(files)),
                 ", ".join(map(repr, sorted(new)[:5])), workdir, WORDS_FILE)


def _checked(config, workdir, splits, dataset, extra=None):
  """(pools folder, {split: Pools} of `splits` and `extra`, {path: Pools} of every pool file in
  the folder): build's refusals, which need only the dataset, the pool files and the workdir's
  records, so training makes them before it pretrains an encoder (_input_stages) and `select`
  before any feature or model. Pools drawn for another dataset, or whose images are not those of
  their split, are refused (data/answerability.check_drawn_for, check_images); so is an `extra`
  pool file of another dataset's images or folder (_check_pool_folder)."""
  folder, _ = pools_folder(config, dataset, workdir)
  pools_lib.check_drawn_for(folder, dataset, FOREIGN_POOLS)
  pools = {s: _read(folder, s, dataset) for s in splits}
  d = config.data
  root = config_lib.synthetic_root(config, workdir) if d.synthetic else d.root
  for p in (extra or {}).values():
    pools_lib.check_images(p.path, p.image_ids, dataset, None, FOREIGN_POOL)
    _check_pool_folder(p.path, folder, root)
  known = {p: Pools.read(p) for p in sorted(glob.glob(pools_lib.pool_file(glob.escape(folder),
                                                                           "*")))}
  inputs.check_data(workdir, _trained_pools(folder, known, config, dataset), config)
  pools.update(extra or {})
  return folder, pools, known


def _check_pool_folder(path, pools, root):
  """A pool file inside another dataset's folder names that dataset's image ids: scored with the
  workdir's features, any id both hold would be ranked on another image, in silence. `pools`,
  `root`: the workdir's pool folder and dataset folder (the config's: an in-memory run's names
  none)."""
  parent = os.path.dirname(os.path.realpath(path))
  holds = split_files.dataset_file(parent) or os.path.exists(
      os.path.join(parent, synthetic.MANIFEST))
  if holds and parent not in {os.path.realpath(p) for p in (pools, root) if p}:
    raise RSVQAError(f"--pool {path}: lies in the dataset folder {parent}, but the workdir "
                     f"trained on {root or pools}: its image ids name that dataset's images; give "
                     "a pool file of the workdir's dataset")


def _dataset(config, workdir, dataset, features):
  """`dataset`, else the one the config names, read after the config's own checks."""
  shd.maybe_initialize_distributed()
  check(config)
  config_lib.check_weights(config, image=features is None)
  return dataset if dataset is not None else inputs.load_dataset(config, workdir)


def build(config, workdir, splits, *, dataset=None, features=None, extra=None):
  """(run.Run whose columns hold the pairs of `splits`, {split: Pools}).

  The model is the config's text encoder and one-output head (models/answerability.py); its
  words are those recorded at the first training (_words), so training and evaluation build the
  same vocabulary. `extra` = {name: Pools} adds more pairs (unlabelled ones to rank, of any
  split). Every refusal of _checked comes before any feature is computed or the model built.
  """
  dataset = _dataset(config, workdir, dataset, features)
  folder, pools, known = _checked(config, workdir, splits, dataset, extra)
  words, recorded = _words(workdir, dataset, folder, known)
  if features is None:
    features = inputs.image_features(config, dataset, workdir, None)
  vqa, tokenizer = model_builder.build(config, words=words, num_answers=1,
                                       image_dim=int(features.features.shape[1]))
  if recorded:
    _warn_new_words(workdir, folder, known, words, tokenizer)
  model = model_lib.from_vqa(vqa)
  table = records.Dataset(dataset.name, folder, {s: p.records(s) for s, p in pools.items()})
  vectors, rows = None, {}
  if config_lib.caches_questions(config):
    vectors, rows = inputs.question_vectors(config, table, workdir, model.text_encoder, tokenizer)
    model.text_encoder = None
  columns = {s: inputs.encode_split(table[s], LABEL_VOCAB, tokenizer, features.image_ids,
                                    config.text.max_length, config.train.length_buckets,
                                    rows.get(s)) for s in pools}
  run = run_lib.Run(config, workdir, table, LABEL_VOCAB, features, tokenizer, model, columns,
                    shd.make_mesh(), vectors)
  return run, pools


# Losses and steps.

def bce(logits, labels):
  """Mean binary cross-entropy of sigmoid(logits) against label / 2 over labels >= 0."""
  valid = labels >= 0
  loss = optax.sigmoid_binary_cross_entropy(logits, jnp.where(valid, labels, 0) / 2)
  return jnp.where(valid, loss, 0.0).sum() / jnp.maximum(valid.sum(), 1)


def listnet(logits, labels):
  """Mean over pools [P, K] of the top-one ListNet loss: cross-entropy between softmax(labels)
  and softmax(logits) over the candidates with labels >= 0 (pools without any add nothing)."""
  valid = labels >= 0
  target = jax.nn.softmax(jnp.where(valid, labels, -1e9).astype(jnp.float32), axis=-1)
  log_p = jax.nn.log_softmax(jnp.where(valid, logits, -1e9), axis=-1)
  per_pool = -jnp.where(valid, target * log_p, 0.0).sum(-1)
  has = valid.any(-1)
  return jnp.where(has, per_pool, 0.0).sum() / jnp.maximum(has.sum(), 1)


LOSS_FNS = {"bce": bce, "listnet": listnet}


@functools.lru_cache(maxsize=16)
def _train_step(optimizer, mesh, compute_dtype, loss):
  dtype, loss_fn = steps_lib.DTYPES[compute_dtype], LOSS_FNS[loss]

  def step(state, batch):
    key = jax.random.fold_in(jax.random.wrap_key_data(state.rng), state.step)
    frozen = state.replace(frozen=jax.lax.stop_gradient(state.frozen))
    objective = lambda params: loss_fn(steps_lib.logits(
        frozen, params, batch, dtype, deterministic=False, key=key), batch["labels"])
    value, grads = jax.value_and_grad(objective)(state.params)
    params, opt_state, finite = steps_lib.finite_update(optimizer, grads, state.opt_state,
                                                       state.params)
    return (state.replace(params=params, opt_state=opt_state, step=state.step + 1),
            {"loss": value, "finite_grads": finite})

  rep, data = shd.replicated(mesh), shd.batch_sharding(mesh)
  return jax.jit(step, in_shardings=(rep, data), out_shardings=(rep, rep), donate_argnums=0)


@functools.lru_cache(maxsize=16)
def _score_step(mesh, compute_dtype):
  dtype = steps_lib.DTYPES[compute_dtype]

  def step(state, batch):
    logits = steps_lib.logits(
        state, state.params, batch, dtype, deterministic=True)
    return jax.nn.sigmoid(logits)

  return jax.jit(step, in_shardings=(shd.replicated(mesh), shd.batch_sharding(mesh)),
                 out_shardings=shd.replicated(mesh))


def pool_batch(run, split, first, size):
  """The arrays of the pools starting at rows `first` of `split`: image_features [P, K, D],
  labels [P, K] and the question of each pool (its vector, or tokens cut to their bucket)."""
  cols = run.columns[split]
  c = cols.columns
  rows = np.asarray(first)[:, None] + np.arange(size)
  image = np.asarray(run.features.features[c["image_index"][rows].ravel()], np.float32)
  batch = {"image_features": image.reshape(len(first), size, -1), "labels": c["answer"][rows]}
  if run.question_vectors is not None:
    batch["question_vector"] = np.asarray(run.question_vectors[c["question_index"][first]],
                                          np.float32)
    return batch
  width = c["tokens"].shape[1]  # hosts agree on the full width
  if jax.process_count() == 1:
    width = bucket_length(int(cols.lengths[first].max()), cols.buckets)
  return {**batch, "tokens": c["tokens"][first, :width], "mask": c["mask"][first, :width]}


def scores(run, state, split):
  """float [N]: the score of every pair of `split`, in file order (the run's eval batches)."""
  cols = run.columns[split]
  mesh, size = run.mesh, run.config.train.eval_batch_size
  step = _score_step(mesh, run.config.train.compute_dtype)
  own = np.asarray(cols.columns["image_index"])[None]
  out = np.zeros(len(cols.lengths), np.float64)
  for rows, local in inputs.eval_batches(cols, shd.eval_width(size, mesh)):
    batch = inputs.eval_model_batch(local, run.features.features, own, run.question_vectors)
    got = np.asarray(jax.device_get(step(state, shd.global_batch(batch, mesh))))[:, 0]
    out[rows[rows >= 0]] = got[rows >= 0]
  return out


def validation(run, state, split, pools):
  """metrics_lib.metrics of `split` at this state (no binary threshold: no second split)."""
  return metrics_lib.metrics(pools.pool_ids, pools.labels, scores(run, state, split))


# Training and restoring.

def warn_if_unrankable(pools, split, metric):
  """A WARNING when no pool of `split` can give `metric` (no relevant candidate: every
  validation would read None, and no best checkpoint would be kept)."""
  if metrics_lib.metrics(pools.pool_ids, pools.labels, np.zeros(len(pools.labels)))[metric] is None:
    relevant = "2" if metric.startswith("map") else "1 or 2"
    _log.warning("answerability: no %s pool has a candidate labelled %s, so validation gives no "
                 "%s and training keeps no best checkpoint; evaluate with --checkpoint last, or "
                 "set data.val_split to a split with relevant candidates", split, relevant, metric)


def best_reading(record, metric):
  """'best validation METRIC V at step S', or that no validation gave a value."""
  if not record.get("best_step"):
    return (f"no validation gave a {metric} (no relevant candidate in the val pools): no best "
            "checkpoint, only --checkpoint last")
  return f"best validation {metric} {record['best']:.4f} at step {record['best_step']}"


def train(config, workdir, *, dataset=None, features=None, log=_log.info):
  """Trains (or resumes, or reports finished) the answerability run of `config` in `workdir`.

  Without `dataset`, the explicit input stages run first (_input_stages). Every refusal that
  needs only the dataset, the pool files and the workdir's records (_check_pools) comes before
  an encoder is pretrained, a feature extracted or the model built. Returns a summary.
  """
  config_lib.check(config)
  check(config)
  read = None
  if dataset is None:
    _check_inputs(config)
    read = prepare.real_dataset(config, workdir)  # a wrong data.root named before the workdir
  checkpointing.check_or_record_config(workdir, config, record=False)
  shd.maybe_initialize_distributed()
  with loop.run_lock(workdir, "answerability training"):
    if dataset is None:
      dataset = _input_stages(config, workdir, log, read)
    else:
      _check_pools(config, workdir, dataset)
    return _train(config, workdir, dataset, features, log)


def _input_stages(config, workdir, log, read):
  """prepare.run_inputs (`read`: the real dataset already read) with the pools between the
  dataset and a synthetic_resnet's pretraining: their files and refusals (_check_pools), so
  pools the run cannot use cost no minutes."""
  def pools(dataset):
    pools_stage(config, dataset, workdir, log)
    _check_pools(config, workdir, dataset)
  return prepare.run_inputs(config, workdir, log, read, checks=pools)


def _check_pools(config, workdir, dataset):
  """Training's refusals from files alone: build's (_checked) and train pools that make no batch
  (_epochs). build and _train check again, on the files as they are by then."""
  train_split = config.data.train_split
  _, pools, _ = _checked(config, workdir, [train_split, config.data.val_split], dataset)
  _epochs(config, pools[train_split], shd.make_mesh())


def _epochs(config, pools, mesh):
  """(first row of each train pool, the pool size, the batch layout, steps per epoch), or the
  one-line refusal of train pools of several sizes or fewer than a batch."""
  a = config.answerability
  first, size = pools.starts()
  layout = shd.batch_layout(a.batch_pools, mesh, "answerability.batch_pools")
  steps_per_epoch = len(first) // jax.process_count() // layout.local
  if not steps_per_epoch:
    raise RSVQAError(f"config answerability.batch_pools={a.batch_pools}: more than the "
                     f"{len(first)} training pools")
  return first, size, layout, steps_per_epoch


def _train(config, workdir, dataset, features, log):
  a, t = config.answerability, config.train
  train_split, val_split = config.data.train_split, config.data.val_split
  run, pools = build(config, workdir, [train_split, val_split], dataset=dataset,
                     features=features)
  first, size, layout, steps_per_epoch = _epochs(config, pools[train_split], run.mesh)
  checkpointing.check_or_record_config(workdir, config)
  inputs.record_data(workdir, run.dataset, config)
  total = t.num_epochs * steps_per_epoch
  warn_if_unrankable(pools[val_split], val_split, a.select_metric)
  periodic = checkpointing.Checkpoints(os.path.join(workdir, "checkpoints"), t.keep_checkpoints)
  best = checkpointing.Checkpoints(os.path.join(workdir, "best"), 1)
  iterator = pipeline.batch_iterator({"first": first}, batch_size=layout.local, shuffle=True,
                                     seed=config.seed, num_epochs=t.num_epochs,
                                     drop_remainder=True)
  state, record, step = loop.resume(
      periodic, best, run_lib.new_state(run), iterator, log)
  record.pop("best_oa", None)
  record.setdefault("best", -1.0)
  if step >= total:
    log(f"{workdir}: finished ({step} of {total} steps); {best_reading(record, a.select_metric)}")
    return {"finished": True, "step": step, **record}
  if step:
    log(f"{workdir}: resuming at step {step} of {total}")
  if layout.padded != layout.size:
    log(f"{workdir}: {layout.describe('answerability.batch_pools')} (weight 0: loss and "
        "gradients are those of the configured batch)")
  optimizer = run_lib.compiled_steps(config, run.mesh)[0]
  train_step = _train_step(optimizer, run.mesh, t.compute_dtype, a.loss)
  writer, divergence = loop.MetricsWriter(workdir, step), loop.Divergence(config, record)
  divergence.start(workdir, step)
  stop = min(total, step + t.stop_after_steps) if t.stop_after_steps else total
  pending = []

  last_saved = step

  def save(mgr, at):
    mgr.save(at, state.checkpoint_items(), {"iterator": iterator.get_state().decode(),
                                            "loop": record, "epoch": at // steps_per_epoch})

  bar = progress.bar(total=total, initial=step, desc="answerability train", unit="step",
                     enabled=t.progress_bar and jax.process_index() == 0)
  try:
    while step < stop:
      batch = shd.pad_rows(pool_batch(run, train_split, next(iterator)["first"], size),
                           layout.local_padded, "labels")
      state, m = train_step(state, shd.global_batch(batch, run.mesh))
      step += 1
      pending.append((step, m))
      bar.update(1)
      epoch_end = step % steps_per_epoch == 0
      ckpt_due = step % t.checkpoint_every_steps == 0 or epoch_end
      if step % t.log_every_steps == 0 or ckpt_due:  # a diverged state is never saved
        got = jax.device_get([mm for _, mm in pending])
        diverged = divergence.check([(at, mm) for (at, _), mm in zip(pending, got)])
        if diverged:
          said = f"training diverged at step {diverged[0]}: {diverged[1]}"
          loop.record_divergence(workdir, said, diverged[0])
          raise RSVQAError(f"{said}; stopped ({run_record.ANEW})")
        record = divergence.record(record)
        loss = float(np.mean([mm["loss"] for mm in got]))
        writer.write({"step": step, "epoch": step / steps_per_epoch, "split": "train",
                      "loss": loss, "batch_pools": layout.size,
                      "padded_batch_pools": layout.padded})
        bar.set_postfix(loss=f"{loss:.4f}")
        pending = []
      if epoch_end:
        val = validation(run, state, val_split, pools[val_split])
        writer.write({"step": step, "epoch": step / steps_per_epoch, "split": val_split,
                      **{k: v for k, v in val.items() if v is not None}})
        value = val[a.select_metric]
        if value is not None and value > record["best"]:
          record = {**record, "best": value, "best_step": step}
          save(best, step)
      if ckpt_due:
        save(periodic, step)
        last_saved = step
  finally:
    bar.close()
    for mgr in (periodic, best):
      mgr.wait()
    writer.close()
  if step < total:
    log(loop.stopped(workdir, step, last_saved))
  else:
    divergence.close(workdir, step)
  return {"finished": step >= total, "step": step, **record, "state": state}


def restore(workdir, splits, *, which="best", data_root=None, dataset=None, features=None,
            extra=None, warn=_log.warning):
  """(Run, {split: Pools}, restored TrainState, its step) of an answerability workdir.

  `which`: "best" (best on validation) or "last"; the other arguments as build() and
  train/restore.py take them (`warn`: each checkpoint skipped or stood in for).
  """
  config = checkpointing.read_config(workdir, data_root)
  if "answerability" not in config:
    raise RSVQAError(f"{workdir}: not an answerability workdir (its config has no answerability "
                     "section); train one with rsvqa-jax answerability train")
  if dataset is None:
    checkpointing.refuse_moved_dataset(config, workdir)
  dataset = _dataset(config, workdir, dataset, features)
  _checked(config, workdir, splits, dataset, extra)  # the pools' refusals before the checkpoint's
  kept = checkpointing.Checkpoints(os.path.join(workdir, "checkpoints"),
                                   config.train.keep_checkpoints, reader=True)
  why = (f"no validation has run, or none gave a {config.answerability.select_metric} (val "
         "pools without relevant candidates)")
  if not _names_a_checkpoint(workdir, kept, which):
    raise restore_lib.no_checkpoint(workdir, which, kept, "score", why)
  run, pools = build(config, workdir, splits, dataset=dataset, features=features, extra=extra)
  like = run_lib.new_state(run)
  best = restore_lib.best_checkpoint
  found = (kept.restore_latest(like.checkpoint_items(), warn) if which == "last" else
           best(workdir, kept, like.checkpoint_items(), warn))
  if found is None:
    raise restore_lib.no_checkpoint(workdir, which, kept, "score", why)
  if not storage.lock_holder(workdir):
    restore_lib.warn_if_diverged(workdir, warn)
  return run, pools, like.replace(**found[0]), int(found[2])


def _names_a_checkpoint(workdir, kept, which):
  """Whether the checkpoint folders name a step for `which`: where they name none, restore_latest
  and best_checkpoint (train/restore.py) find none, refused before the features and the model are
  built (a damaged checkpoint is known only once restored)."""
  if which == "last":
    return bool(kept.steps() or kept.set_aside_steps())
  return bool(run_record.best_step(kept.directory)
              or run_record.steps(os.path.join(workdir, "best")))
