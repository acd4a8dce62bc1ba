"""Training configs: the shared defaults, loading `configs/*.py`, and command-line overrides.

A config file defines `get_config(arg=None)` returning an ml_collections ConfigDict; it is named
as `path.py` or `path.py:arg`. Overrides are `key.path=value` pairs (from `--config.a.b=value`);
a key the config does not have, or a value of the wrong type, is an RSVQAError naming it.
The config identifies a run: `identity()` is what a workdir records and compares on resume.
"""
import ast
import importlib.util
import json
import os

import ml_collections

from rsvqa_jax.errors import RSVQAError
from rsvqa_jax.models.vqa import head_config

# Keys that steer one invocation without changing what is trained (not part of the identity).
RUN_CONTROL_KEYS = ("train.stop_after_steps", "train.progress_bar")
# text.checkpoint / image.checkpoint value asking for randomly initialised weights.
RANDOM = "random"


def base_config():
  """Defaults shared by every training config (the paper's settings where it gives them)."""
  c = ml_collections.ConfigDict()
  c.seed = 0

  c.data = ml_collections.ConfigDict()
  c.data.name = "lr"  # lr | hr | xben
  c.data.root = ml_collections.FieldReference(None, field_type=str)
  c.data.synthetic = False  # generate (or reuse) a synthetic dataset instead of reading root
  c.data.synthetic_variant = "lr"
  c.data.synthetic_images = 0
  c.data.synthetic_seed = 0
  c.data.synthetic_questions_per_image = 100
  c.data.cache_dir = ml_collections.FieldReference(None, field_type=str)  # default: beside workdir
  c.data.train_split = "train"
  c.data.val_split = "val"
  # Training-time image augmentation (off when empty): feature_cache variants such as ("hflip",
  # "vflip", "rot90", "rot180", "rot270"); each training sample whose question has no positional
  # word (data.POSITIONAL_WORDS) reads the features of one of them, drawn per sample and step.
  c.data.augment_variants = ()

  c.image = ml_collections.ConfigDict()  # passed through to rsvqa_jax.train.feature_cache

  c.text = ml_collections.ConfigDict()
  c.text.encoder = "skipthoughts"  # skipthoughts | distilbert | bert | roberta
  # Skip-thoughts folder or Hugging Face folder; "random": random init (must be explicit on
  # real data; None means random init only for synthetic data, see check_weights).
  c.text.checkpoint = ml_collections.FieldReference(None, field_type=str)
  c.text.frozen = False
  # Frozen and deterministic (no text dropout): encode each distinct question once and train on
  # the cached vectors (train/question_cache.py) instead of running the encoder every step.
  c.text.cache_questions = True
  c.text.max_length = 50  # the paper's question embedding length
  c.text.bayesian = False  # Skip-thoughts variational dropout
  c.text.dropout = 0.0
  c.text.word_dim = 620  # Skip-thoughts sizes when no checkpoint is given
  c.text.hidden_dim = 2400
  c.text.allow_pickle = False  # let a pickled utable.npy be unpickled (trusted files only)

  c.model = head_config()

  c.optim = ml_collections.ConfigDict()
  c.optim.name = "adam"  # adam | sgd
  c.optim.lr = 1e-5  # fusion + classifier
  c.optim.text_lr = 1e-4  # fine-tuned language model (paper: 1e-4 Skip-thoughts, 1e-6 BERTs)
  c.optim.b1 = 0.9
  c.optim.b2 = 0.999
  c.optim.eps = 1e-8

  c.train = ml_collections.ConfigDict()
  c.train.batch_size = 70  # global, over all devices and hosts
  c.train.eval_batch_size = 280
  c.train.num_epochs = 50
  c.train.compute_dtype = "float32"  # float32 | bfloat16 (parameters stay float32)
  c.train.checkpoint_every_steps = 1000
  c.train.keep_checkpoints = 2
  c.train.log_every_steps = 50
  c.train.length_buckets = (8, 16, 24, 32, 48, 64)
  c.train.stop_after_steps = 0  # >0: stop (as if killed) after this many steps in this call
  c.train.progress_bar = True
  return c


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
  arch = config.image.get("arch", "resnet152")
  if image and arch != "synthetic_resnet" and not config.image.get("checkpoint"):
    raise RSVQAError(
        f"config image.checkpoint is not set: give the {arch} weights (torchvision file or "
        "Hugging Face folder) with --config.image.checkpoint=PATH, or ask for random-init "
        f"features with --config.image.checkpoint={RANDOM}")


def _parse_value(text):
  try:
    return ast.literal_eval(text)
  except (ValueError, SyntaxError):
    return text


def load(spec):
  """ConfigDict from `path.py` or `path.py:arg` (arg passed to get_config as a string)."""
  path, _, arg = spec.partition(":")
  if not os.path.isfile(path):
    raise RSVQAError(f"{path}: config file not found")
  module_spec = importlib.util.spec_from_file_location(
      "rsvqa_config_" + os.path.splitext(os.path.basename(path))[0], path)
  module = importlib.util.module_from_spec(module_spec)
  module_spec.loader.exec_module(module)
  if not hasattr(module, "get_config"):
    raise RSVQAError(f"{path}: defines no get_config()")
  config = module.get_config(arg) if arg else module.get_config()
  return config


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
  old = node[parts[-1]]
  if isinstance(old, ml_collections.ConfigDict):
    raise RSVQAError(f"--config.{key}: is a section, set one of its keys instead")
  value = _parse_value(text)
  if isinstance(old, bool):
    if str(text).lower() in ("true", "false", "1", "0"):
      value = str(text).lower() in ("true", "1")
    else:
      raise RSVQAError(f"--config.{key}={text}: expected true or false")
  elif isinstance(old, str) or old is None:
    value = text if (old is not None or not isinstance(value, (int, float, bool))) else value
    if old is None and text.lower() == "none":
      value = None
  elif isinstance(old, (tuple, list)):
    if not isinstance(value, (tuple, list)):
      raise RSVQAError(f"--config.{key}={text}: expected a list such as (1, 2)")
    value = type(old)(value)
  elif isinstance(old, float) and isinstance(value, int) and not isinstance(value, bool):
    value = float(value)
  elif type(value) is not type(old):
    raise RSVQAError(f"--config.{key}={text}: expected a {type(old).__name__}, got "
                     f"{type(value).__name__}")
  try:
    node[parts[-1]] = value
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
  d = to_dict(config)
  for key in RUN_CONTROL_KEYS:
    *path, last = key.split(".")
    node = d
    for part in path:
      node = node.get(part, {})
    node.pop(last, None)
  return d


def from_dict(d):
  """ConfigDict from a dict written by `to_dict` (lists come back as tuples where defaults are)."""
  config = base_config()

  def merge(node, values):
    for k, v in values.items():
      if isinstance(v, dict):
        if k not in node or not isinstance(node[k], ml_collections.ConfigDict):
          node[k] = ml_collections.ConfigDict()
        merge(node[k], v)
      else:
        old = node[k] if k in node else None
        node[k] = tuple(v) if isinstance(old, tuple) and isinstance(v, list) else v
  merge(config, d)
  return config


LANGUAGE_MODELS = ("skipthoughts", "distilbert", "bert", "roberta")
PAPER_FUSIONS = ("mult", "concat", "mutan")


def paper_config(dataset, language_model, fusion, frozen):
  """The paper's setting (batch 70, Adam, 50 epochs, lr 1e-5; LM lr 1e-4 / 1e-6) for one cell.

  The checkpoints (text.checkpoint: uni-skip folder or Hugging Face folder; image.checkpoint:
  a torchvision ResNet-152 file, or "random" for either to train on random weights on purpose)
  and data.root must be given on the command line.
  """
  if language_model not in LANGUAGE_MODELS:
    raise RSVQAError(f"language model {language_model!r}: choose one of {LANGUAGE_MODELS}")
  if fusion not in PAPER_FUSIONS:
    raise RSVQAError(f"fusion {fusion!r}: choose one of {PAPER_FUSIONS}")
  c = base_config()
  c.data.name = dataset
  c.image.arch = "resnet152"
  c.image.checkpoint = ""
  c.text.encoder = language_model
  c.text.frozen = bool(frozen)
  c.model.fusion = fusion
  c.optim.lr = 1e-5
  c.optim.text_lr = 0.0 if frozen else (1e-4 if language_model == "skipthoughts" else 1e-6)
  return c


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
