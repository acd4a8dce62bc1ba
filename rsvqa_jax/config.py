"""Every config section's defaults, loading `configs/*.py`, command-line overrides, run identity.

One source of defaults: `base_config()` holds every key a training run reads (data, image,
text, model, optim, train), `study_defaults()` the study's section. A config file is data: it
defines `get_config(arg=None)` from these and ml_collections only, so loading it never imports
JAX, and every documented key exists before the overrides are applied. A config is named as
`path.py` or `path.py:arg`; overrides are `key.path=value` pairs (from `--config.a.b=value`): a
key the config does not have, or a value of the wrong type, is an RSVQAError naming it. The
config identifies a run: `identity()` is what a workdir records and compares on resume. The
derived paths of a run (its cache folder and what lives there) are resolved here too, so the
commands that write a cache and the ones that read it agree.
"""
import ast
import copy
import importlib.resources
import importlib.util
import json
import math
import os
import traceback

import ml_collections

from rsvqa_jax.errors import RSVQAError

# Keys that steer one invocation without changing what is trained (not part of the identity).
RUN_CONTROL_KEYS = ("train.stop_after_steps", "train.progress_bar")
# text.checkpoint / image.checkpoint value asking for randomly initialised weights.
RANDOM = "random"
LANGUAGE_MODELS = ("skipthoughts", "distilbert", "bert", "roberta")
FUSIONS = ("mult", "concat", "mutan")
# Folders under a run's cache directory (data.cache_dir, default beside the workdir).
FEATURES_DIR, QUESTIONS_DIR, PRETRAINED_DIR = "features", "questions", "synthetic_resnet"


def _typed_none(field_type):
  return ml_collections.FieldReference(None, field_type=field_type)


def data_section():
  c = ml_collections.ConfigDict()
  c.name = "lr"  # lr | hr | xben
  c.root = _typed_none(str)
  c.synthetic = False  # generate (or reuse) a synthetic dataset instead of reading root
  c.synthetic_variant = "lr"
  c.synthetic_images = 0
  c.synthetic_seed = 0
  c.synthetic_questions_per_image = 100
  c.cache_dir = _typed_none(str)  # default: rsvqa_cache beside the workdir
  c.train_split = "train"
  c.val_split = "val"
  # Training-time image augmentation (off when empty): feature-cache variants such as
  # ("hflip", "vflip", "rot90", "rot180", "rot270"); each training sample whose question has no
  # positional word reads the features of one of them, drawn per sample and step.
  c.augment_variants = ()
  return c


def pretrain_section():
  """The synthetic ResNet's pretraining (features/pretrain.py): small and fast.

  595 train images at 64x64 x 8 epochs took 110 s on two shared CPU cores.
  """
  c = ml_collections.ConfigDict()
  c.depth = 18
  c.width = 16  # stem width; pooled features are 8 * width = 128-d
  c.image_size = 64
  c.epochs = 8
  c.batch_size = 32
  c.learning_rate = 3e-3
  c.weight_decay = 1e-4
  c.fraction_weight = 1.0  # weight of the per-class pixel-fraction loss
  c.seed = 0
  return c


def image_section():
  """The frozen image encoder and how its features are computed (features/encoder.py).

  arch: "resnet18" ... "resnet152" (checkpoint = a weights file or Hugging Face folder;
    "random" or empty = random init from `seed` at stem `width`, which real-data runs must ask
    for explicitly, see check_weights) or "synthetic_resnet" (the small ResNet pretrained on the
    synthetic scenes' land cover with `pretrain`, stored in `pretrained_dir`, default
    CACHE/synthetic_resnet).
  image_size: side the tiles are resized to before the encoder (0 = native size; for
    synthetic_resnet 0 means the size it was pretrained at).
  map: also keep the final spatial map in the cache (the spatial branch of the grounding work).
  """
  c = ml_collections.ConfigDict()
  c.arch = "resnet152"
  c.checkpoint = ""
  c.pretrained_dir = ""
  c.batch_size = 32
  c.map = False
  c.image_size = 0
  c.width = 64
  c.seed = 0
  c.pretrain = pretrain_section()
  return c


def text_section():
  c = ml_collections.ConfigDict()
  c.encoder = "skipthoughts"  # skipthoughts | distilbert | bert | roberta
  # Skip-thoughts folder or Hugging Face folder; "random": random init (must be explicit on
  # real data; None means random init only for synthetic data, see check_weights).
  c.checkpoint = _typed_none(str)
  c.frozen = False
  # Frozen and deterministic (no text dropout): encode each distinct question once and train on
  # the cached vectors (features/question_cache.py) instead of running the encoder every step.
  c.cache_questions = True
  c.max_length = 50  # the paper's question embedding length
  c.bayesian = False  # Skip-thoughts variational dropout
  c.dropout = 0.0
  c.word_dim = 620  # Skip-thoughts sizes when no checkpoint is given
  c.hidden_dim = 2400
  # Drop "?" from Skip-thoughts questions, as the original RSVQA code's tokenizer does.
  c.strip_question_mark = False
  return c


def model_section():
  """The fusion + classifier (models/vqa.py), the paper's settings."""
  c = ml_collections.ConfigDict()
  c.fusion = "mult"  # mult | concat | mutan
  c.hidden_dim = 1200
  c.classifier_dim = 256
  c.dropout = 0.5
  c.mutan_rank = 5
  c.mutan_dim = 1200
  c.mutan_normalize = False
  c.blind = False  # visual blind: question vector straight into the classifier
  # "paper": pooled image vector, the fusion above; "original": the original RSVQA code's
  # e-mult head, a trainable 1x1 conv over the image map (needs image.map; models/vqa.py).
  # "attention": question-guided softmax attention over the map's positions, then the fusion
  # above (needs image.map; models/attention.py), of width attention_dim.
  c.head = "paper"
  c.attention_dim = 512
  return c


def optim_section():
  c = ml_collections.ConfigDict()
  c.name = "adam"  # adam | sgd
  c.lr = 1e-5  # fusion + classifier
  c.text_lr = 1e-4  # fine-tuned language model (paper: 1e-4 Skip-thoughts, 1e-6 BERTs)
  c.b1 = 0.9
  c.b2 = 0.999
  c.eps = 1e-8
  return c


def train_section():
  c = ml_collections.ConfigDict()
  c.batch_size = 70  # global, over all devices and hosts (topped up with masked rows when
  # the devices do not divide it: sharding.batch_layout)
  c.eval_batch_size = 280
  c.num_epochs = 50
  c.compute_dtype = "float32"  # float32 | bfloat16 (parameters stay float32)
  c.checkpoint_every_steps = 1000
  c.keep_checkpoints = 2
  c.log_every_steps = 50
  c.length_buckets = (8, 16, 24, 32, 48, 64)
  c.stop_after_steps = 0  # >0: stop (as if killed) after this many steps in this call
  c.progress_bar = True
  # Divergence stop (train/loop.py Divergence): the loss above divergence_factor x its early
  # level for divergence_steps steps in a row, or a non-finite loss or gradient (0 = factor off).
  c.divergence_factor = 10.0
  c.divergence_steps = 20
  return c


def base_config():
  """Every key a training run reads, at its default (the paper's settings where it gives them)."""
  c = ml_collections.ConfigDict()
  c.seed = 0
  c.data = data_section()
  c.image = image_section()
  c.text = text_section()
  c.model = model_section()
  c.optim = optim_section()
  c.train = train_section()
  return c


def study_defaults():
  """The `study` section every study config carries (rsvqa_jax/study/ reads it)."""
  s = ml_collections.ConfigDict()
  s.synthetic = True  # generate the dataset; False: read config.data.root (config.data.name)
  s.variant = "lr"
  s.images = 300
  s.questions_per_image = 40
  s.data_seed = 0
  s.prior_strength = 1.0
  s.balanced_data = False  # the main dataset itself balanced
  s.language_models = ("skipthoughts", "distilbert")  # keys of `lm`, in report order
  s.lm = ml_collections.ConfigDict()
  s.lm_weights = ("frozen", "finetuned")
  s.seeds = (0, 1, 2)
  s.fusion = "mult"  # Figure 5: e-mult everywhere
  s.split = "test"
  s.adversarial = ("random",)  # any of random, shuffle, white, black, noise
  s.repeats = 10
  s.adv_seed = 0
  s.adv_pool = "dataset"  # random images from every split ("split": the evaluated one)
  s.balanced = ml_collections.ConfigDict()
  s.balanced.enabled = True  # synthetic only: a reference / blind pair on a balanced twin
  s.balanced.images = 200
  s.balanced.questions_per_image = 30
  s.balanced.language_model = "skipthoughts"
  s.balanced.lm_weights = "finetuned"
  s.balanced.seeds = (0,)
  s.compilation_cache = True  # XLA cache under DIR/cache/xla: seeds reuse compiled steps
  s.frozen_epochs = 0  # >0: epochs of the frozen-LM runs (cached question vectors: cheap); 0: train's
  # Table 2's rows besides the grid's reference models: "LM,frozen|finetuned,FUSION" or "baseline"
  # (study.baseline); empty: the grid's reference models (Figure 5's e-mult ones).
  s.table2_rows = ()
  s.baseline = ml_collections.ConfigDict()
  s.baseline.language_model = "skipthoughts"  # a key of `lm`, frozen, e-mult
  s.baseline.label = "RSVQA baseline (original code's head)"
  s.baseline.overrides = ()  # "key=value" settings of its runs (configs/rsvqa_baseline.py's)
  s.require_real = False  # refuse to run without real data and pretrained weights (study_paper)
  s.min_questions = 40  # report: cells with fewer test questions are flagged
  s.reading = ml_collections.ConfigDict()  # thresholds of the report's reading, in points
  s.reading.close = 2.0  # a blind model within this of its reference: a strong bias
  s.reading.margin = 5.0  # a reference model this far above the prior "clearly beats" it
  s.reading.guess = 3.0  # a balanced-twin blind model within this of the prior: "a guess"
  # The shortcuts stage (DESIGN.md 6.1; synthetic studies only, a real-data one skips it): a set
  # with a planted shortcut, its shortcut OOD benchmark, a reference / blind pair
  # (study/shortcuts.py).
  s.shortcuts = ml_collections.ConfigDict()
  s.shortcuts.enabled = False
  s.shortcuts.plant = ("kw:parking=yes@0.9+1",)  # data/questions.PLANT_SYNTAX; () = none
  s.shortcuts.balanced = True  # balanced besides the plant: the plant is its one language shortcut
  s.shortcuts.images = 400
  s.shortcuts.questions_per_image = 12
  s.shortcuts.seed = 0  # of the 70 / 5 / 25 re-split (by image)
  s.shortcuts.language_model = "skipthoughts"  # a key of `lm`
  s.shortcuts.lm_weights = "finetuned"
  s.shortcuts.seeds = (0,)
  s.shortcuts.ood_selection = False  # also the paper's Table 4 comparison (adaptive overfitting)
  s.shortcuts.min_questions = 20  # the reading ranks the gaps of OOD sets at least this large
  # The grounding stage (DESIGN.md 6.2; synthetic studies only): every grid run's relevance maps
  # scored against the dataset's groundings (eval/grounding.study_stage), beside the floors.
  s.grounding = ml_collections.ConfigDict()
  s.grounding.enabled = False
  s.grounding.method = "auto"  # eval/grounding.METHODS; auto: attention if any, else Grad-CAM
  return s


def answerability_section():
  """The `answerability` section (ChiQA ranking, DESIGN.md 6.3): pools, head loss, study stage.

  Read by data/, train/ and eval/answerability.py; configs/answerability_*.py add it.
  """
  c = ml_collections.ConfigDict()
  # Folder of Answerability_{split}.csv; unset: the dataset folder if it holds them, else (a
  # synthetic dataset) CACHE/answerability/pools_KEY, generated by `answerability train`.
  c.pools = _typed_none(str)
  c.pool_size = 5  # candidate images per question (a split too small: the most it fills, >= 2)
  c.pools_per_image = 2.0  # questions per image of a split
  c.balance = 1.0  # 0: candidates as the scenes fall; 1: labels uniform whatever the question
  c.pool_seed = 0
  c.loss = "bce"  # bce: pointwise, targets 1 / 0.5 / 0 | listnet: softmax over a pool
  c.batch_pools = 16  # pools per training batch (x pool_size pairs)
  c.select_metric = "ndcg@3"  # validation metric that picks the best checkpoint
  c.study = ml_collections.ConfigDict()  # the study stage (eval/answerability.py)
  c.study.enabled = False
  c.study.language_models = ("skipthoughts", "distilbert")  # keys of study.lm
  c.study.weights = "finetuned"
  c.study.seeds = (0,)
  c.study.num_epochs = 0  # 0: train.num_epochs
  c.study.no_info = True  # also pools at balance 1, where the wording carries no label information
  c.study.word_min_count = 20
  c.study.top_words = 10
  return c


def lm_entry(encoder, label, text_lr, checkpoint="", **sizes):
  """One language model of a study: encoder name, report label, fine-tuning lr, weights.

  An empty checkpoint means random init: Skip-thoughts at `word_dim` / `hidden_dim`, a
  DistilBERT-architecture encoder at `dim`, `layers`, `heads`, `hidden_dim`, `dropout`.
  """
  e = ml_collections.ConfigDict()
  e.encoder = encoder
  e.label = label
  e.text_lr = text_lr
  e.checkpoint = checkpoint
  for k, v in sizes.items():
    e[k] = v
  return e


# Keys with a closed set of values: checked before anything is created (check()).
CHOICES = {
    "data.name": ("lr", "hr", "xben"),
    "text.encoder": LANGUAGE_MODELS,
    "model.fusion": FUSIONS,
    "model.head": ("paper", "original", "attention"),
    "optim.name": ("adam", "sgd"),
    "train.compute_dtype": ("float32", "bfloat16"),
    "study.adv_pool": ("dataset", "split"),
}


# Numeric keys and the interval each must lie in: (low, high (excluded) or None, whether low itself
# is allowed, the types allowed, what the error says the value must be). A value outside (a
# negative size, a dropout of 1, a null from a hand-edited config.json) is one line here instead of
# a traceback deep in the model build or the first step. A key holding a list (study.seeds) has
# each entry checked.
POSITIVE = (0, None, False, (int, float), "positive")
NON_NEGATIVE = (0, None, True, (int, float), "a number >= 0")
FRACTION = (0, 1, True, (int, float), "a number in [0, 1)")
# Token widths (train.length_buckets): data/tokenizers.bucket_length pads a question to the
# smallest width that holds it, beyond the largest to a multiple of it (0: a division by zero).
WIDTH = (0, None, False, int, "a positive integer")
# Seeds: numpy refuses a negative one and JAX overflows past 64 bits, both late; a 32-bit JAX key
# (no x64) keeps only the low 32 bits, so a larger seed would silently repeat a smaller one.
SEED = (0, 2**32, True, int, "an integer in [0, 2**32)")
RANGES = {
    **dict.fromkeys((
        "data.synthetic_questions_per_image", "image.batch_size", "image.width",
        "image.pretrain.batch_size", "image.pretrain.depth", "image.pretrain.epochs",
        "image.pretrain.image_size", "image.pretrain.width", "model.attention_dim",
        "model.classifier_dim", "model.hidden_dim", "model.mutan_dim", "model.mutan_rank",
        "text.hidden_dim", "text.max_length", "text.word_dim", "optim.eps", "train.batch_size",
        "train.eval_batch_size", "train.num_epochs", "train.log_every_steps",
        "train.checkpoint_every_steps", "train.keep_checkpoints", "train.divergence_factor",
        "train.divergence_steps"), POSITIVE),
    **dict.fromkeys((
        "data.synthetic_images", "image.pretrain.learning_rate",
        "image.pretrain.weight_decay", "image.pretrain.fraction_weight", "optim.lr",
        "optim.text_lr", "train.stop_after_steps"), NON_NEGATIVE),
    **dict.fromkeys(("model.dropout", "text.dropout", "optim.b1", "optim.b2"), FRACTION),
    "study.repeats": (1, None, True, int, "a whole number >= 1"),
    # Pixels per side the images are resized to: RSVQA's are 120 to 512; 100000 filled the memory.
    "image.image_size": (0, 4097, True, int, "a whole number from 0 (native size) to 4096"),
    **dict.fromkeys(("study.min_questions", "study.shortcuts.min_questions", "study.reading.close",
                     "study.reading.margin", "study.reading.guess"), NON_NEGATIVE),
    "train.length_buckets": WIDTH,
    **dict.fromkeys((
        "seed", "data.synthetic_seed", "image.seed", "image.pretrain.seed", "study.data_seed",
        "study.adv_seed", "study.seeds", "study.balanced.seeds", "study.shortcuts.seed",
        "study.shortcuts.seeds", "answerability.pool_seed", "answerability.study.seeds"), SEED),
    # A synthetic study's dataset: one image per split at least.
    **dict.fromkeys(("study.images", "study.balanced.images", "study.shortcuts.images"),
                    (3, None, True, int, "a whole number >= 3 (one image per split)")),
    # A pool ranks its candidate images against each other: two at least.
    "answerability.pool_size": (2, None, True, int, "a whole number >= 2"),
    **dict.fromkeys(("answerability.pools_per_image", "answerability.batch_pools"), POSITIVE),
    "answerability.balance": (0, math.nextafter(1.0, 2.0), True, (int, float),
                              "a number in [0, 1]"),
}
# List keys that must not be empty, and what to give instead: every question is padded to a bucket
# of train.length_buckets, so none is an IndexError later. (Their order does not matter: every
# reader sorts them.)
NON_EMPTY = {"train.length_buckets": "one token width at least, such as (64,) for a single width"}


def _lookup(config, key):
  """The value of a dotted key, or None where the config lacks it."""
  node = config
  for part in key.split("."):
    node = node[part] if isinstance(node, ml_collections.ConfigDict) and part in node else None
    if node is None:
      return None
  return node


def _outside(value, interval):
  """Whether one value lies outside an interval of RANGES (or is not of its types; a NaN, which
  no comparison holds for, lies outside every interval)."""
  low, high, low_ok, types, _ = interval
  return (not isinstance(value, types) or isinstance(value, bool) or
          not (value > low or (low_ok and value == low)) or (high is not None and not value < high))


def check(config):
  """One-line RSVQAError for a value outside its key's choices (see CHOICES) or its interval (see
  RANGES, NON_EMPTY), before a run creates or records anything. Keys the config lacks (the study
  keys of a training config) are skipped."""
  for key, allowed in CHOICES.items():
    node = _lookup(config, key)
    if node is not None and node not in allowed:
      raise RSVQAError(f"config {key}={node!r}: choose one of {', '.join(allowed)}")
  for key, interval in RANGES.items():
    section, _, name = key.rpartition(".")
    node = _lookup(config, section) if section else config
    if node is None or name not in node:
      continue
    value = node[name]
    listed = isinstance(value, (tuple, list))
    for entry in value if listed else (value,):
      if _outside(entry, interval):
        which = f"{entry!r} " if listed else ""
        raise RSVQAError(f"config {key}={value!r}: {which}must be {interval[-1]}")
    if listed and not value and key in NON_EMPTY:
      raise RSVQAError(f"config {key}={value!r}: give {NON_EMPTY[key]}")


def is_random(checkpoint):
  """Whether a text/image checkpoint setting means random init (unset or RANDOM)."""
  return not checkpoint or checkpoint == RANDOM


def caches_questions(config):
  """Whether the question vectors come from the cache (frozen, deterministic text encoder)."""
  t = config.text
  return bool(t.frozen and t.cache_questions and not t.bayesian and not t.dropout)


def check_weights(config, *, image=True):
  """Real-data runs name their pretrained weights, or ask for random init with RANDOM.

  Random weights are what synthetic configs use, but on real data they silently give a
  meaningless result, so an unset text.checkpoint (Skip-thoughts) or image.checkpoint (ResNet;
  checked when `image`, i.e. when the features come from the config) is an RSVQAError.
  """
  if config.data.synthetic:
    return
  if config.text.encoder == "skipthoughts" and not config.text.checkpoint:
    raise RSVQAError(
        "config text.checkpoint is not set: give the Skip-thoughts folder (uni_skip.npz, "
        "utable.npy, dictionary.txt) with --config.text.checkpoint=PATH, or ask for a randomly "
        f"initialised encoder with --config.text.checkpoint={RANDOM}")
  arch = config.image.arch
  if image and arch != "synthetic_resnet" and not config.image.checkpoint:
    raise RSVQAError(
        f"config image.checkpoint is not set: give the {arch} weights (torchvision file or "
        "Hugging Face folder) with --config.image.checkpoint=PATH, or ask for random-init "
        f"features with --config.image.checkpoint={RANDOM}")


def cache_dir(config, workdir):
  """Where synthetic datasets and caches live: data.cache_dir, else rsvqa_cache beside workdir."""
  if config.data.cache_dir:
    return config.data.cache_dir
  return os.path.join(os.path.dirname(os.path.abspath(workdir)), "rsvqa_cache")


def image_config(image, cache):
  """A copy of an image section with its derived path set: pretrained_dir under `cache`."""
  out = ml_collections.ConfigDict(image.to_dict())
  if out.arch == "synthetic_resnet" and not out.pretrained_dir:
    out.pretrained_dir = os.path.join(cache, PRETRAINED_DIR)
  return out


def synthetic_root(config, workdir):
  """The folder of the synthetic dataset a config generates (data.synthetic)."""
  d = config.data
  name = f"synthetic_{d.synthetic_variant}_{d.synthetic_images}_{d.synthetic_seed}"
  return os.path.join(cache_dir(config, workdir), name)


def config_path(name):
  """The file a config name denotes: the path itself, else the installed configs/ file of that
  name (`configs/hr.py`, `hr.py` and `hr` all find it from any folder after `pip install .`)."""
  if os.path.isfile(name):
    return name
  base = os.path.basename(name)
  base = base if base.endswith(".py") else base + ".py"
  try:
    packaged = importlib.resources.files("rsvqa_jax.configs") / base
  except ModuleNotFoundError:
    packaged = None
  if packaged is not None and packaged.is_file():
    return str(packaged)
  if os.path.isdir(name):
    raise RSVQAError(f"{name}: is a folder; give a config file (.py)")
  raise RSVQAError(f"{name}: config file not found (nor an installed config named {base})")


def load(spec):
  """ConfigDict from `path.py` or `path.py:arg` (arg passed to get_config as a string).

  A config file is code someone edits by hand: anything it gets wrong (a syntax error, a failing
  import, an exception or a value of the wrong type in get_config, a result that is not a
  ConfigDict) is one RSVQAError naming the file and, where known, its line. An RSVQAError the file
  raises on purpose (apply_flags, argument_error) goes through unchanged.
  """
  name, _, arg = spec.partition(":")
  path = config_path(name)
  if not path.endswith(".py"):  # importlib finds no loader for another suffix
    raise RSVQAError(f"{path}: not a config file: give a Python file (.py) defining get_config()")
  try:
    module_spec = importlib.util.spec_from_file_location(
        "rsvqa_config_" + os.path.splitext(os.path.basename(path))[0], path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    if not hasattr(module, "get_config"):
      raise RSVQAError(f"{path}: defines no get_config()")
    config = module.get_config(arg) if arg else module.get_config()
  except RSVQAError:
    raise
  except Exception as e:  # pylint: disable=broad-exception-caught
    raise _failure(path, e) from None
  if not isinstance(config, ml_collections.ConfigDict):
    got = "None" if config is None else f"a {type(config).__name__}"
    raise RSVQAError(f"{path}: get_config() returned {got}, not an "
                     "ml_collections.ConfigDict (start from config.base_config())")
  unknown = unknown_key(config)
  if unknown:
    raise RSVQAError(f"{path}: get_config() sets {unknown}, which no part of rsvqa-jax reads "
                     "(a misspelt key? `rsvqa-jax config` lists the keys)")
  return config


# Sections whose keys are the config's own to choose: study.lm holds one entry per language
# model, named and sized by the config (lm_entry).
FREE_SECTIONS = ("study.lm",)


def _template(config):
  """The keys a config may set: base_config's, and the study / answerability sections' it has."""
  template = base_config()
  if "study" in config:
    template.study = study_defaults()
  if "answerability" in config:
    template.answerability = answerability_section()
  return template


def unknown_key(config):
  """The first dotted key of a config that no part of rsvqa-jax reads (a misspelt key), or None."""
  return _unknown_key(config, _template(config))


def sections():
  """The names of base_config's sections (data, image, ...): every recorded config has each."""
  return [k for k, v in base_config().items() if isinstance(v, ml_collections.ConfigDict)]


def _unknown_key(config, template, prefix=""):
  """The first dotted key of `config` that `template` lacks (a silent typo: c.trian = 1), or
  None."""
  for key in config.keys():
    name = f"{prefix}{key}"
    if key not in template:
      return name
    if (isinstance(config[key], ml_collections.ConfigDict) and name not in FREE_SECTIONS
        and isinstance(template[key], ml_collections.ConfigDict)):
      found = _unknown_key(config[key], template[key], f"{name}.")
      if found:
        return found
  return None


def _failure(path, error):
  """RSVQAError 'PATH line N: Type: message' of an exception raised while a config file ran; N is
  the innermost line of the file on the way (a SyntaxError in the file: its own line)."""
  same = lambda f: f is not None and os.path.abspath(f) == os.path.abspath(path)
  lines = [f.lineno for f in traceback.extract_tb(error.__traceback__) if same(f.filename)]
  message = str(error)
  if isinstance(error, SyntaxError) and same(error.filename):
    lines, message = [error.lineno], error.msg
  where = f" line {lines[-1]}" if lines and lines[-1] else ""
  return RSVQAError(f"{path}{where}: {type(error).__name__}: {' '.join(message.split())}")


def _parse_literal(text):
  try:
    return ast.literal_eval(text)
  except (ValueError, SyntaxError):
    return text


def _items(text):
  """A list written without Python's quotes: `a,b`, `(a)`, `[8, 16]`; each item read as a
  literal where it is one (8 -> 8), else kept as text (a word)."""
  inner = text.strip()
  if inner[:1] + inner[-1:] in ("()", "[]"):
    inner = inner[1:-1]
  return [_parse_literal(item.strip()) for item in inner.split(",") if item.strip()]


def _nullable(config, key):
  """Whether `key` may be unset (None), as data.root and text.checkpoint are by default."""
  node = config
  for part in key.split("."):
    if not isinstance(node, ml_collections.ConfigDict) or part not in node:
      return False
    node = node[part]
  return node is None


def _kind(field_type):
  """What a key of `field_type` takes, for a message: "an integer", "a number", ..."""
  kinds = {bool: "true or false", int: "an integer", float: "a number", str: "a string",
           tuple: "a list such as (1, 2)", list: "a list such as (1, 2)"}
  return kinds.get(field_type, f"a {field_type.__name__}")


def _value(key, text, old, field_type):
  """The value `text` gives a key whose current value is `old` (declared type `field_type`)."""
  if field_type is bool:
    if str(text).lower() in ("true", "false", "1", "0"):
      return str(text).lower() in ("true", "1")
    raise RSVQAError(f"--config.{key}={text}: expected true or false")
  if field_type is str:  # paths and names stay text, even "2024" or "1e-3"
    unset = text.lower() == "none" and (old is None or _nullable(base_config(), key))
    return None if unset else text
  value = _parse_literal(text)
  if old is None:
    return None if text.lower() == "none" else value
  if isinstance(old, (tuple, list)):
    return type(old)(value if isinstance(value, (tuple, list)) else _items(text))
  if isinstance(old, float) and isinstance(value, int) and not isinstance(value, bool):
    return float(value)
  if type(value) is not type(old):
    raise RSVQAError(f"--config.{key}={text}: expected {_kind(type(old))}")
  return value


def override(config, key, text):
  """Sets `config.<key>` from its command-line text, checking the key exists and the type fits."""
  parts = key.split(".")
  node = config
  for i, part in enumerate(parts):
    where = ".".join(parts[:i]) or "the config"
    if not isinstance(node, ml_collections.ConfigDict) or part not in node:
      known = ", ".join(sorted(node.keys())) if isinstance(node, ml_collections.ConfigDict) else ""
      raise RSVQAError(f"--config.{key}: no key {part!r} in {where} (it has: {known})")
    if i < len(parts) - 1:
      node = node[part]
  name = parts[-1]
  old = node[name]
  if isinstance(old, ml_collections.ConfigDict):
    raise RSVQAError(f"--config.{key}: is a section, set one of its keys instead")
  value = _value(key, text, old, node.get_type(name))
  try:
    node[name] = value
  except TypeError as e:
    raise RSVQAError(f"--config.{key}={text}: {e}") from None


def apply_overrides(config, pairs):
  """Applies `key=value` strings in order; returns the config."""
  for pair in pairs:
    key, sep, text = pair.partition("=")
    if not sep:
      raise RSVQAError(f"--config.{key}: give a value as --config.{key}=VALUE")
    override(config, key, text)
  return config


def to_dict(config):
  """Plain JSON-safe dict of a config."""
  return json.loads(config.to_json_best_effort())


def identity(config):
  """The config as a dict without the run-control keys: equal identities = the same run."""
  return recorded_identity(to_dict(config))


RECORDED_IN = "recorded_in"  # config.json's extra key: the workdir's absolute path when written


def recorded_identity(recorded):
  """identity() of a config.json as read (a nested dict): the run-control keys and the record of
  where the workdir was (RECORDED_IN) left out."""
  d = copy.deepcopy(recorded)
  d.pop(RECORDED_IN, None)
  for key in RUN_CONTROL_KEYS:
    *path, last = key.split(".")
    node = d
    for part in path:
      node = node.get(part, {}) if isinstance(node, dict) else {}
    if isinstance(node, dict):
      node.pop(last, None)
  return d


def differences(a, b, prefix=""):
  """Dotted keys whose values differ between two nested dicts: [(key, value in a, in b)]."""
  out = []
  for key in sorted(set(a) | set(b)):
    va, vb = a.get(key, "<missing>"), b.get(key, "<missing>")
    if isinstance(va, dict) and isinstance(vb, dict):
      out += differences(va, vb, f"{prefix}{key}.")
    elif va != vb:
      out.append((f"{prefix}{key}", va, vb))
  return out


# Keys that say how a run was carried out, not which model it trains: seeds of one model may
# differ in them.
BOOKKEEPING_KEYS = ("train.eval_batch_size", "train.log_every_steps",
                    "train.checkpoint_every_steps", "train.keep_checkpoints")


def unlike_seed_runs(runs):
  """Why runs [(workdir, identity)] are not one model over distinct seeds, or None.

  A mean (std) over seeds (evaluate --seeds, Table 2 of `tables`) is refused over anything else.
  """
  first, ours = runs[0]
  seeds = {ours.get("seed"): first}
  for name, theirs in runs[1:]:
    diff = [d for d in differences(ours, theirs) if d[0] not in ("seed", *BOOKKEEPING_KEYS)]
    if diff:
      key, mine, other = diff[0]
      more = f" and {len(diff) - 1} more key(s)" if len(diff) > 1 else ""
      return (f"{name} is not {first}'s model over another seed: {key} is {other!r} there, "
              f"{mine!r} in {first}{more}")
    seed = theirs.get("seed")
    if seed in seeds:
      return (f"{seeds[seed]} and {name} were both trained with seed {seed}; a mean over seeds "
              "needs runs of distinct seeds")
    seeds[seed] = name
  return None


# Keys older workdirs recorded that no longer exist. text.allow_pickle was an opt-in to unpickle
# a file; it must come from the person running a command (--allow-pickle), never from a
# recorded config, so it is dropped unread.
RETIRED_KEYS = ("text.allow_pickle",)


def from_dict(d):
  """ConfigDict from a dict written by `to_dict`, over the defaults (tuples where they are)."""
  config = base_config()
  d = json.loads(json.dumps(d))
  for key in RETIRED_KEYS:
    section, name = key.split(".")
    if isinstance(d.get(section), dict):
      d[section].pop(name, None)

  def merge(node, values, prefix):
    for k, v in values.items():
      if isinstance(v, dict):
        if k not in node or not isinstance(node[k], ml_collections.ConfigDict):
          node[k] = ml_collections.ConfigDict()
        merge(node[k], v, f"{prefix}{k}.")
      else:
        old = node[k] if k in node else None
        try:
          node[k] = tuple(v) if isinstance(old, tuple) and isinstance(v, list) else v
        except TypeError:  # ml_collections refuses a value of another type than the key's
          raise TypeError(f"{prefix}{k} is {v!r}, expected {_kind(node.get_type(k))}") from None
  merge(config, d, "")
  return config


def paper_config(dataset, language_model, fusion, frozen):
  """The paper's setting (batch 70, Adam, 50 epochs, lr 1e-5; LM lr 1e-4 / 1e-6) for one cell.

  The checkpoints (text.checkpoint: uni-skip folder or Hugging Face folder; image.checkpoint:
  a torchvision ResNet-152 file, or "random" for either to train on random weights on purpose)
  and data.root must be given on the command line.
  """
  if language_model not in LANGUAGE_MODELS:
    raise RSVQAError(f"language model {language_model!r}: choose one of {LANGUAGE_MODELS}")
  if fusion not in FUSIONS:
    raise RSVQAError(f"fusion {fusion!r}: choose one of {FUSIONS}")
  c = base_config()
  c.data.name = dataset
  c.image.arch = "resnet152"
  c.text.encoder = language_model
  c.text.frozen = bool(frozen)
  c.model.fusion = fusion
  c.optim.lr = 1e-5
  c.optim.text_lr = 0.0 if frozen else (1e-4 if language_model == "skipthoughts" else 1e-6)
  return c


def argument_error(source, arg, expected):
  """The one-line error a config file raises for an argument it does not know."""
  return RSVQAError(f"{source}:{arg}: {expected}")


def parse_cell(arg, default):
  """'lm,fusion,frozen|finetuned' -> (lm, fusion, frozen bool)."""
  parts = (arg or default).split(",")
  if len(parts) != 3 or parts[2] not in ("frozen", "finetuned"):
    raise RSVQAError(f"config argument {arg!r}: expected LM,FUSION,frozen|finetuned "
                     f"(e.g. {default})")
  return parts[0], parts[1], parts[2] == "frozen"


def apply_flags(config, arg, source):
  """Config-file argument 'blind,frozen' (either or both): the visual-blind twin, a frozen LM."""
  for flag in filter(None, (arg or "").split(",")):
    if flag == "blind":
      config.model.blind = True
    elif flag == "frozen":
      config.text.frozen = True
      config.optim.text_lr = 0.0
    else:
      raise RSVQAError(f"{source}:{arg}: unknown flag {flag!r} (blind, frozen)")
  return config
