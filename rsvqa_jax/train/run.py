"""A run: everything built from a config before the first step, its compiled steps and state.

Training, every evaluator and the study build a `Run` the same way (dataset, answer vocabulary,
image features, model, encoded columns, mesh), so a restored model sees exactly the inputs it
was trained on, and every prediction goes through the one compiled eval step of its config
(same compute dtype, same mesh).

The image features are a table with one row per image; for the original RSVQA head
(model.head="original") that row is the image's flattened final map (image.map), not its pooled
vector, so the input pipeline, the random-image swaps and every evaluator run unchanged.
"""
import dataclasses
import functools
import json
import logging

import jax
import ml_collections

from rsvqa_jax import config as config_lib
from rsvqa_jax.errors import RSVQAError
from rsvqa_jax.models.vqa import MAP_HEADS
from rsvqa_jax.train import inputs, model_builder, optimizers
from rsvqa_jax.train import sharding as shd
from rsvqa_jax.train import state as state_lib
from rsvqa_jax.train import steps as steps_lib

_log = logging.getLogger(__name__)


@dataclasses.dataclass
class Run:
  """Everything built from a config before the first step."""

  config: object
  workdir: str
  dataset: object
  vocab: object
  features: object  # .features [N, D] (D = h*w*C, the flattened map: original head), .image_ids
  tokenizer: object
  model: object  # no text_encoder when question_vectors is set
  columns: dict  # split name -> inputs.SplitColumns
  mesh: object
  question_vectors: object = None  # cached frozen-encoder vectors [Nq, Dq], rows in the columns
  augment_features: tuple = ()  # tables of config.data.augment_variants, rows as `features`

  def train_batch(self, local, variant=None):
    """inputs.model_batch of a pipeline batch.

    `variant` (inputs.draw_variants): table of each sample, 0 the clean one, i
    augment_features[i-1].
    """
    if variant is None:
      return inputs.model_batch(local, self.features.features, self.question_vectors)
    tables = (self.features.features,) + tuple(self.augment_features)
    return inputs.model_batch(local, tables, self.question_vectors, variant)


def head_features(config, features):
  """(features whose rows the head reads, image map shape (h, w, C) or None).

  The paper's head reads the pooled vectors as they are; the original head reads each image's
  final map, flattened row-major into one row (a view: a memory-mapped cache stays on disk).
  `features` is the cache's ImageFeatures, or any object with `features`, `image_ids` and
  `feature_map` [N, h, w, C] (in-memory tasks).
  """
  if config.model.head not in MAP_HEADS:  # the original and the attention head read maps
    return features, None
  fmap = getattr(features, "feature_map", None)
  if fmap is None:
    raise RSVQAError(f"config model.head={config.model.head} reads the image map, and these image "
                     "features carry none (cache them with --config.image.map=true)")
  return inputs.Features(fmap.reshape(len(fmap), -1), features.image_ids), tuple(fmap.shape[1:])


def _check_original_head(config):
  """The input needs of a head reading the map (MAP_HEADS), refused before any dataset or
  feature work."""
  if not config.image.map:
    raise RSVQAError(f"config model.head={config.model.head} reads the image map: set "
                     "--config.image.map=true")
  if config.data.augment_variants:
    raise RSVQAError("config data.augment_variants: the augmentation caches hold pooled vectors "
                     f"and model.head={config.model.head} reads image maps; set "
                     "data.augment_variants=()")


REFUSED_JAX_SETTINGS = {
    "jax_enable_x64": "rsvqa_jax computes in float32 and bfloat16 (its checkpoints and results "
                      "are of those dtypes: float64 gave other numbers, and refused a resume)",
    "jax_disable_jit": "rsvqa_jax compiles its steps ahead of time"}


def build(config, workdir, splits, *, dataset=None, features=None, restored=False):
  """The Run of `config` with the encoded columns of `splits`.

  `dataset` / `features` replace the ones the config names (in-memory tasks); otherwise the
  dataset is read (never generated: train/prepare.py) and the features come from the cache.
  `restored`: the config is a trained workdir's, whose image weights were settled when it
  trained (a study's run on its own synthetic data has random ones, unset), not asked again.
  """
  for flag, why in REFUSED_JAX_SETTINGS.items():  # other numbers, or a failure far inside
    if getattr(jax.config, flag):
      raise RSVQAError(f"JAX setting {flag} is on ({flag.upper()}=1 in the environment, or "
                       f"jax.config.update): {why}; turn it off for rsvqa_jax's runs")
  shd.maybe_initialize_distributed()
  config_lib.check_weights(config, image=features is None and not restored)
  if config.model.head in MAP_HEADS:
    _check_original_head(config)
  dataset = dataset if dataset is not None else inputs.load_dataset(config, workdir)
  keys = {config.data.val_split: "data.val_split", config.data.train_split: "data.train_split"}
  for s in dict.fromkeys([config.data.train_split, *splits]):  # the answers are train_split's
    if s not in dataset.splits:
      raise RSVQAError(f"split {s!r}{f' (config {keys[s]})' if s in keys else ''}: the dataset at "
                       f"{dataset.root} has splits {sorted(dataset.splits)}")
    if not len(dataset[s]):  # every score over it would read n/a
      raise RSVQAError(f"{dataset.root}: split {s!r} has no active question: nothing to "
                       "evaluate on")
  inputs.check_data(workdir, dataset, config)  # before the answers' check: its message is clearer
  vocab = inputs.answer_vocab(dataset, config, workdir)
  if features is None:  # every split's images: one cache entry serves training and evaluation
    features = inputs.image_features(config, dataset, workdir, None)
  features, map_shape = head_features(config, features)
  model, tokenizer = model_builder.build(config, words=inputs.dataset_words(dataset),
                                         num_answers=len(vocab),
                                         image_dim=int(features.features.shape[1]),
                                         map_shape=map_shape)
  vectors, rows = None, {}
  if config_lib.caches_questions(config):
    vectors, rows = inputs.question_vectors(config, dataset, workdir, model.text_encoder,
                                            tokenizer)
    model.text_encoder = None  # never part of a step: not built into the state or checkpoints
  columns = {s: inputs.encode_split(dataset[s], vocab, tokenizer, features.image_ids,
                                    config.text.max_length, config.train.length_buckets,
                                    rows.get(s))
             for s in splits}
  mesh = shd.make_mesh()
  _note_eval_width(config.train.eval_batch_size, mesh)
  return Run(config, workdir, dataset, vocab, features, tokenizer, model, columns, mesh, vectors)


_EVAL_WIDTHS_SAID = set()  # (size, width) pairs logged: a study builds its runs alike by dozens


def _note_eval_width(size, mesh):
  """One INFO line, once per process, when the evaluations of a run will not run batches of
  train.eval_batch_size (`size`): shd.eval_width rounds it up to the device count, which a
  user timing or sizing them would otherwise not know."""
  width = shd.eval_width(size, mesh)
  if width == size or (size, width) in _EVAL_WIDTHS_SAID:
    return
  _EVAL_WIDTHS_SAID.add((size, width))
  pad = width - size
  _log.info("train.eval_batch_size=%d rounded up to %d: evaluation batches are split evenly over "
            "the %d devices (%d masked padding row%s per batch)", size, width, mesh.devices.size,
            pad, "" if pad == 1 else "s")


@functools.lru_cache(maxsize=32)
def _steps(optim_json, mesh, compute_dtype):
  optimizer = optimizers.make_optimizer(ml_collections.ConfigDict(json.loads(optim_json)))
  return (optimizer, steps_lib.make_train_step(optimizer, mesh, compute_dtype),
          steps_lib.make_eval_step(mesh, compute_dtype))


def compiled_steps(config, mesh):
  """(optimizer, train_step, eval_step) for these optimizer settings, mesh and compute dtype.

  The same jitted functions serve every run of the process (seeds, resumes, evaluations), so a
  model of the same shapes is compiled once.
  """
  optim = json.dumps(config_lib.to_dict(config)["optim"], sort_keys=True)
  return _steps(optim, mesh, config.train.compute_dtype)


def new_state(run):
  """The run's freshly initialised TrainState, replicated over its mesh."""
  optimizer = compiled_steps(run.config, run.mesh)[0]
  state = state_lib.create(run.model, optimizer, seed=run.config.seed,
                           freeze_text=run.config.text.frozen)
  return shd.replicate(state, run.mesh)
