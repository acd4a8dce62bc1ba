"""The Python API: load a trained run to predict and evaluate, audit any model's prediction files.

For notebooks and scripts, so nothing internal has to be assembled by hand:

  run = rsvqa_jax.load_run("runs/tiny")
  run.predict(["Images_LR/3.tif"], ["Is there a road?"])  # -> ["yes"]
  run.evaluate("test")                                      # the accuracy table, as evaluate writes
  rsvqa_jax.analyze("data/synth_lr", "lr", predictions="preds.csv")

Everything goes through the library's own layers: a run is restored as `evaluate` restores it,
predictions go through its one compiled eval step, images through the encoder its config names.
"""
import collections.abc
import dataclasses
import functools
import logging
import os
import re

import ml_collections
import numpy as np

from rsvqa_jax import caller_logging
from rsvqa_jax import config as config_lib
from rsvqa_jax import jax_environment
from rsvqa_jax.bias import analysis as analysis_lib
from rsvqa_jax.bias import predictions as predictions_lib
from rsvqa_jax.bias import tables
from rsvqa_jax.data import other_datasets, split_files
from rsvqa_jax.data.images import read_tif
from rsvqa_jax.data.tokenizers import pad_batch
from rsvqa_jax.errors import RSVQAError, os_error_line, short_repr, shortened
from rsvqa_jax.eval import accuracy, adversarial
from rsvqa_jax.features import encoder as encoder_lib
from rsvqa_jax.features import image_cache, pixels
from rsvqa_jax.models import skipthoughts_params
from rsvqa_jax.train import checkpointing, inputs, model_builder, predict, restore
from rsvqa_jax.train import run as run_lib

_log = logging.getLogger(__name__)


def _path(value, what):
  """`value` as a path string, or a one-line error naming `what` (None, a number, a list...)."""
  if not isinstance(value, (str, os.PathLike)):
    raise RSVQAError(f"{what}: expected a path (str or os.PathLike), got {type(value).__name__}")
  if not os.fspath(value):  # "" would read as "not given"
    raise RSVQAError(f"{what}: an empty path")
  return os.fspath(value)


# Advice worded for the command line, in messages raised below the API (restore, adversarial
# testing, the data checks, the prediction files' reader), with what a Python caller gives
# instead: the command's wording (its tests assert it) is kept and the argument added beside it.
_PYTHON_FORMS = (
    (re.compile(r"\(--checkpoint last\)"), "(--checkpoint last; checkpoint='last' in load_run)"),
    (re.compile(r"\(--pool dataset\)"), "(--pool dataset; pool='dataset' in evaluate)"),
    (re.compile(r"use --adversarial random$"),
     "use --adversarial random (adversarial_kind='random' in evaluate)"),
    (re.compile(r"\(--split (\S+?)\)"), r"(--split \1; split='\1' in Python)"),
    (re.compile(r"give the data it trained on, or train in another --workdir"),
     "give the data it trained on (load_run data_root=), or train in another --workdir"),
    (re.compile(r"^--data-root "), "load_run data_root "),  # read_config's, as load_run names it
    (re.compile(r"with --dataset \(([^)]*)\)"), r"with --dataset (\1; dataset= in analyze)"),
    (re.compile(r"name one with --dataset$"), "name one with --dataset (dataset= in analyze)"),
    (re.compile(r"give (--data \S+|one of them with --data) \(in a training config"),
     r"give \1 (data_root= in Python; in a training config"),
    (re.compile(r"run with --allow-pickle only"),
     "run with --allow-pickle (allow_pickle=True in load_run) only"),
)


def _worded_for_python(function):
  """Re-raises an RSVQAError whose message gives command-line advice (_PYTHON_FORMS) naming the
  Python argument too, and the system's OSError as the one line the command line prints; every
  other error passes unchanged."""
  @functools.wraps(function)
  def worded(*args, **kwargs):
    try:
      return function(*args, **kwargs)
    except OSError as e:  # a file where a folder belongs (or the reverse), no permission, ...
      raise RSVQAError(os_error_line(e)) from e  # as the command line says it
    except RSVQAError as e:
      text = str(e)
      for pattern, python in _PYTHON_FORMS:
        text = pattern.sub(python, text)
      if text == str(e):
        raise
      raise RSVQAError(text).with_traceback(e.__traceback__) from e.__cause__
  return worded


def _count(value, what, least):
  """An int >= least (a NumPy integer too; not a bool, a float or a string), or a one-line error
  naming `what`."""
  if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < least:
    raise RSVQAError(f"{what}={value!r}: expected an integer >= {least}")
  return int(value)


def _pixels(image, index):
  """uint8 HxWx3 of an array or an image file (TIFF, or any format PIL reads); `index`: its
  place in the caller's list, named when it is refused."""
  if isinstance(image, bytes):
    raise RSVQAError(f"image {index}: a bytes object {short_repr(image)}; give a path as str "
                     "(or a uint8 H x W x 3 array)")
  if isinstance(image, (str, os.PathLike)):
    path = os.fspath(image)
    if os.path.isdir(path):
      raise RSVQAError(f"{shortened(path)}: a folder, not an image file")
    if not os.path.isfile(path):
      raise RSVQAError(f"{shortened(path)}: image file not found")
    if path.lower().endswith((".tif", ".tiff")):
      return read_tif(path)
    from PIL import Image  # pylint: disable=g-import-not-at-top
    try:
      with Image.open(path) as im:
        if im.mode != "RGB":  # 16-bit, grey, alpha: refused as a TIFF or an array of them is
          raise RSVQAError(f"{shortened(path)}: image mode {im.mode}, expected 8-bit RGB (uint8 "
                           "H x W x 3)")
        return np.asarray(im)
    except OSError as e:  # PIL's UnidentifiedImageError among them
      raise RSVQAError(f"{shortened(path)}: not an image file ({e})") from None
    except Image.DecompressionBombError as e:  # no OSError: a size PIL will not decode
      raise RSVQAError(f"{shortened(path)}: too large to read ({e})") from None
  try:
    array = np.asarray(image)
  except (ValueError, TypeError) as e:  # ragged nested lists
    raise RSVQAError(f"image {index}: not an array of pixels ({e}); expected "
                     "uint8 H x W x 3 (or a file path)") from None
  if (array.ndim != 3 or array.shape[2] != 3 or array.dtype != np.uint8
      or not array.shape[0] or not array.shape[1]):
    raise RSVQAError(f"image {index}: shape {array.shape} and dtype {array.dtype}, expected "
                     "uint8 H x W x 3 (or a file path)")
  return array


@dataclasses.dataclass
class TrainedRun:
  """A restored workdir: its config, answers and state, ready to predict and evaluate."""

  workdir: str
  step: int
  _run: run_lib.Run
  _state: object
  _which: str
  _data_root: object
  _allow_pickle: bool
  _built: dict = dataclasses.field(default_factory=dict)  # encoders built once, for every predict

  def __repr__(self):  # the dataclass's would print every array of the state
    return (f"TrainedRun(workdir={self.workdir!r}, step={self.step}, checkpoint={self._which!r}, "
            f"{len(self._run.vocab.answers)} answers)")

  @property
  def config(self):
    """The run's config, as recorded in its workdir (config.json), read-only: the model was
    built from it, so a changed value would change predict (and not evaluate, which reads the
    workdir) without a word. `.as_configdict()` gives an editable copy for a new run."""
    return ml_collections.FrozenConfigDict(config_lib.from_dict(config_lib.to_dict(
        self._run.config)))

  @property
  def answers(self):
    """The answer classes the model chooses among, in class order."""
    return list(self._run.vocab.answers)

  @caller_logging.keeping
  @_worded_for_python
  def predict(self, images, questions):
    """The model's answer to each (image, question) pair: a list of strings.

    `images`: uint8 H x W x 3 arrays or image file paths, one per question (the same image
    may repeat); they go through the encoder the run was trained with, as its cache did:
    resized to its `image.image_size` (from another size than the dataset's tiles: with a
    WARNING), or, where that is 0, of the dataset's tile size.
    """
    one = (isinstance(images, (str, bytes, os.PathLike))
           or isinstance(images, np.ndarray) and images.ndim == 3, isinstance(questions, str))
    for single, name in zip(one, ("images", "questions")):
      if single:  # a path or a question would be read character by character
        raise RSVQAError(f"predict: {name} is one {name[:-1]}; give a list, one entry per "
                         "question")
    for value, name in ((images, "images"), (questions, "questions")):
      if not isinstance(value, collections.abc.Iterable):
        raise RSVQAError(f"predict: {name} is a {type(value).__name__}; give a list, one entry "
                         "per question")
    images, questions = list(images), list(questions)
    odd = [q for q in questions if not isinstance(q, str)]
    if odd:
      raise RSVQAError(f"predict: question {odd[0]!r} is a {type(odd[0]).__name__}, not a string")
    if len(images) != len(questions) or not questions:
      raise RSVQAError(f"predict: {len(images)} image(s) for {len(questions)} question(s); give "
                       "one image per question (at least one)")
    run = self._run
    features = self._features(images)
    limit = run.config.text.max_length
    tokens = [run.tokenizer.encode(q) for q in questions]
    long = [q for q, t in zip(questions, tokens) if len(t) > limit]
    if long:  # as training reads them, never silently: the words cut are the question's end
      _log.warning(f"predict: {len(long)} question(s) longer than text.max_length={limit} "
                   f"tokens, cut to it (e.g. {short_repr(long[0])})")
    tokens = [t[:limit] for t in tokens]
    empty = [q for q, t in zip(questions, tokens) if not t]
    if empty:
      raise RSVQAError(f"predict: question {empty[0]!r} has no token")
    unknown = [q for q, t in zip(questions, tokens) if run.tokenizer.only_unknown(t)]
    if unknown:
      _log.warning(f"predict: {len(unknown)} question(s) hold no word the model knows (e.g. "
                   f"{short_repr(unknown[0])}): their answers rest on the image and the "
                   "question's length alone")
    buckets = tuple(sorted(run.config.train.length_buckets))
    padded, mask = pad_batch(tokens, run.tokenizer.pad_id, buckets=buckets)
    width = padded.shape[1]
    columns = {"tokens": padded, "mask": mask, "answer": np.full(len(questions), -1, np.int32),
               "question_index": np.arange(len(questions), dtype=np.int32)}
    split = inputs.SplitColumns(columns, np.array([len(t) for t in tokens], np.int32),
                                tuple(b for b in buckets if b < width) + (width,))
    vectors = self._question_vectors(padded, mask) if run.question_vectors is not None else None
    ids = predict.predict_columns(
        self._state, split, eval_step=run_lib.compiled_steps(run.config, run.mesh)[2],
        mesh=run.mesh, batch_size=run.config.train.eval_batch_size, features=features,
        image_rows=np.arange(len(questions))[None], question_vectors=vectors)
    return run.vocab.decode(ids[0])

  def _features(self, images):
    """Rows the head reads for each image, computed by the run's frozen image encoder."""
    config = self._run.config
    if "image" not in self._built:
      self._built["image"] = encoder_lib.encoder_for(inputs.resolved_image(config,
                                                                          self.workdir))
    encoder = self._built["image"]
    arrays = [_pixels(im, i) for i, im in enumerate(images)]
    native = self._run.dataset.image_size
    odd = None if native is None else next(
        (i for i, a in enumerate(arrays) if a.shape[:2] != tuple(native)), None)
    if odd is not None and encoder.image_size:  # resized as the tiles were, from another size
      n = sum(a.shape[:2] != tuple(native) for a in arrays)
      _log.warning(f"predict: {n} image(s) not of the dataset's {native[0]}x{native[1]} tile size "
                   f"(e.g. image {odd}, {arrays[odd].shape[0]}x{arrays[odd].shape[1]}): resized to "
                   f"{encoder.image_size}x{encoder.image_size} as the tiles were, but each pixel "
                   "then covers another ground area than in training")
    if not encoder.image_size and native is not None:  # image.image_size=0: tiles as they are
      if odd is not None:
        raise RSVQAError(f"predict: image {odd} is {arrays[odd].shape[0]}x{arrays[odd].shape[1]}; "
                         f"this run's encoder reads the dataset's {native[0]}x{native[1]} tiles "
                         "at their size (image.image_size=0), as it was trained")
    batch = np.stack([pixels.resize(a, encoder.image_size) for a in arrays])
    size = min(encoder.batch_size, len(batch))
    outs = [encoder.encode(batch[i:i + size], pad_to=size) for i in range(0, len(batch), size)]
    pooled = np.concatenate([o["pooled"] for o in outs])
    fmap = np.concatenate([o["map"] for o in outs]) if "map" in outs[0] else None
    table = image_cache.ImageFeatures(pooled, np.arange(len(images)), "<memory>", fmap)
    return run_lib.head_features(config, table)[0].features

  def _question_vectors(self, tokens, mask):
    """The frozen language model's vectors of new questions (the run trained on cached ones)."""
    run = self._run
    if "text" not in self._built:
      with skipthoughts_params.pickle_allowed(self._allow_pickle):
        model, _ = model_builder.build(run.config, words=inputs.dataset_words(run.dataset),
                                       num_answers=len(run.vocab),
                                       image_dim=int(run.features.features.shape[1]))
      self._built["text"] = model.text_encoder
    return np.asarray(self._built["text"](tokens, mask), np.float32)

  @caller_logging.keeping
  @_worded_for_python
  def evaluate(self, split="test", adversarial_kind=None, repeats=None, seed=0, pool="dataset"):
    """The accuracy table of `split` (clean, or with `adversarial_kind` substitutions).

    The same evaluation `rsvqa-jax evaluate` runs, with its defaults (`repeats`: 10; 1 for white,
    black and noise, whose repeats are all alike), and it writes the same files under
    WORKDIR/eval/SPLIT/ (eval_last/ for a run loaded at its last checkpoint). Returns the table:
    OA, AA, per-type accuracy and counts; over the `repeats` substitutions, their mean, std and
    every repeat's values.
    """
    where = dict(which=self._which, data_root=self._data_root)
    if not isinstance(split, str) or not split:
      raise RSVQAError(f"evaluate split={split!r}: expected one split name")
    if adversarial_kind is None and (repeats is not None or seed or pool != "dataset"):
      raise RSVQAError("evaluate: repeats, seed and pool apply to an adversarial_kind only")
    for value, name, choices in ((adversarial_kind, "adversarial_kind", adversarial.KINDS),
                                 (pool, "pool", adversarial.POOLS)):
      if (value is not None or name == "pool") and value not in choices:
        raise RSVQAError(f"evaluate {name}={value!r}: choose one of {', '.join(choices)}")
    if pool != "dataset" and adversarial_kind != "random":
      raise RSVQAError(f"evaluate pool={pool!r}: applies to adversarial_kind='random' only")
    if repeats is not None:
      repeats = _count(repeats, "evaluate repeats", 1)
      if repeats > config_lib.MAX_REPEATS:  # adversarial.evaluate names it as --repeats
        raise RSVQAError(f"evaluate repeats={repeats}: must be from 1 to "
                         f"{config_lib.MAX_REPEATS}")
    repeats = adversarial.chosen_repeats(adversarial_kind, repeats, "evaluate repeats=")
    seed = _count(seed, "evaluate seed", 0)
    if seed >= config_lib.SEED[1]:  # the command line's --adv-seed rule
      raise RSVQAError(f"evaluate seed={seed}: must be from 0 to {config_lib.SEED[1] - 1}")
    with skipthoughts_params.pickle_allowed(self._allow_pickle):
      if adversarial_kind is None:
        table = accuracy.evaluate(self.workdir, split, **where)
      else:
        table = adversarial.evaluate(self.workdir, split, adversarial_kind, repeats=repeats,
                                     seed=seed, pool=pool, **where)
    if table.get("step") != self.step:  # it reads the workdir's checkpoint as it is now
      _log.warning(f"{self.workdir}: evaluated at step {table.get('step')}, the workdir's "
                   f"{self._which} checkpoint now; this run was loaded at step {self.step} (the "
                   "run trained on since): load_run again for predict to match")
    return table


@caller_logging.keeping
@_worded_for_python
def load_run(workdir, *, checkpoint="best", data_root=None, allow_pickle=False):
  """A trained workdir restored at its best-on-validation (or "last") checkpoint.

  `data_root` replaces the recorded dataset folder (moved since training); `allow_pickle` lets
  a pickled Skip-thoughts utable.npy you trust be unpickled (never read from the workdir).
  """
  jax_environment.check_xla_flags(os.environ)  # before JAX starts its backend on it
  workdir = _path(workdir, "load_run workdir")
  # Absolute, as the workdir: a later os.chdir in the notebook must not lose the data.
  data_root = None if data_root is None else os.path.abspath(_path(data_root,
                                                                    "load_run data_root"))
  if not isinstance(allow_pickle, bool):  # "no" is truthy: it would allow unpickling
    raise RSVQAError(f"load_run allow_pickle={allow_pickle!r}: expected True or False")
  with skipthoughts_params.pickle_allowed(allow_pickle):
    splits = [checkpointing.read_config(workdir, data_root, "load_run data_root").data.val_split]
    run, state, step = restore.restore(workdir, splits, which=checkpoint, data_root=data_root)
  return TrainedRun(os.path.abspath(workdir), step, run, state, checkpoint, data_root,
                    allow_pickle)


@caller_logging.keeping
@_worded_for_python
def analyze(data_root, dataset=None, predictions=None, adversarial_predictions=None, split=None):
  """The dataset analysis of `data_root` (layout `dataset`; None: told from its split files, as
  `rsvqa-jax analyze` tells it), with a model's files if given.

  Returns {split: {"analysis": bias.analysis.Analysis, "types": Table, "objects": Table or
  None}}, Tables being bias.tables.Table (caption, columns, rows; tables.to_markdown /
  to_csv / to_latex render them). Predictions are read and normalised as `rsvqa-jax analyze`
  reads them.
  """
  data_root = _path(data_root, "analyze data_root")
  predictions, adversarial_predictions = (
      None if p is None else _path(p, f"analyze {name}") for p, name in
      ((predictions, "predictions"), (adversarial_predictions, "adversarial_predictions")))
  if adversarial_predictions and not predictions:
    raise RSVQAError("analyze: adversarial_predictions needs predictions (IO_AdTest compares "
                     "the two)")
  if split is not None and (not isinstance(split, str) or not split):
    raise RSVQAError(f"analyze split={split!r}: expected one split name")
  if dataset is not None and (not isinstance(dataset, str) or not dataset):  # "", 0: read as None
    raise RSVQAError(f"analyze dataset={short_repr(dataset)}: expected one of "
                     f"{', '.join(other_datasets.NAMES)} (or None: told from the folder)")
  dataset = dataset or split_files.detect_variant(data_root, other_datasets.NAMES)
  ds = other_datasets.read_any(data_root, dataset)
  fit, names = analysis_lib.analysed_splits(ds, [split] if split else (), data_root)
  evaluated = {n: ds[n] for n in names}
  space = set(ds[fit].answer.tolist())
  chosen = split is not None
  model = (predictions_lib.load(predictions, evaluated, dataset, space, chosen=chosen,
                                 others=ds.splits) if predictions else {})
  adv = (predictions_lib.load(adversarial_predictions, evaluated, dataset, space,
                               adversarial=True, chosen=chosen, others=ds.splits)
         if adversarial_predictions else {})
  for path, loaded in ((predictions, model), (adversarial_predictions, adv)):
    for name, aligned in loaded.items():  # as the command prints them; counted wrong: a WARNING
      wrong = aligned.n_outside or aligned.missing or aligned.other_form_types()
      level = logging.WARNING if wrong else logging.INFO
      _log.log(level, aligned.describe(f"{path} on {name}"))
  predictions_lib.check_same_questions(model, adv, predictions, adversarial_predictions)
  label = tables.dataset_label(dataset)
  out = {}
  for name in names:
    result = analysis_lib.analyze(ds[fit], ds[name], templates=dataset == "lr",
                                  predictions=model.get(name), adversarial=adv.get(name))
    out[name] = {"analysis": result, "types": tables.type_table(result, label),
                 "objects": (tables.objects_patterns_table(result, label)
                             if result.unparsed is not None else None)}
  return out
