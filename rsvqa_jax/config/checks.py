"""What a config may hold: closed choices, numeric intervals and named weights, checked before a
run creates or records anything, so a bad value is one line instead of a late traceback."""
import math
import os

import ml_collections

from rsvqa_jax.config.defaults import (ANSWERABILITY_LOSSES, AUGMENT_VARIANTS, FUSIONS,
                                       IMAGE_ARCHS, LANGUAGE_MODELS, RANDOM, RESNET_DEPTHS,
                                       SELECT_METRICS)
from rsvqa_jax.errors import RSVQAError, not_a_folder, shortened

# Keys with a closed set of values (each entry of a list key): checked before anything is
# created (check()).
CHOICES = {
    "data.name": ("lr", "hr", "xben"),
    "data.synthetic_variant": ("lr", "hr", "xben"),
    "data.augment_variants": AUGMENT_VARIANTS,
    "answerability.loss": ANSWERABILITY_LOSSES,
    "answerability.select_metric": SELECT_METRICS,
    "text.encoder": LANGUAGE_MODELS,
    "model.fusion": FUSIONS,
    "model.head": ("paper", "original", "attention"),
    "optim.name": ("adam", "sgd"),
    "train.compute_dtype": ("float32", "bfloat16"),
    "study.adv_pool": ("dataset", "split"),
    "study.variant": ("lr", "hr"),
    "image.arch": IMAGE_ARCHS,
    # Read only with image.arch=synthetic_resnet, after the pretraining data is drawn: checked
    # whatever the arch, as every key is.
    "image.pretrain.depth": RESNET_DEPTHS,
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
# float32's smallest normal number (np.finfo(np.float32).tiny): a positive value below it is 0
# (or flushed to 0) where the runs compute. optim.eps=1e-40 passed as positive, then Adam divided
# 0 by 0 and the run stopped blaming its learning rate; optim.lr=1e-320 trained nothing unsaid.
FLOAT32_TINY = 1.1754943508222875e-38
# Adversarial repeats (study.repeats, evaluate --repeats): each holds a prediction per question in
# memory until the files are written, so a typo of 100000000 filled 14 GB in 35 s without a word.
MAX_REPEATS = 1000
RANGES = {
    **dict.fromkeys((
        "image.batch_size", "image.width",
        "image.pretrain.batch_size", "image.pretrain.epochs",
        "image.pretrain.image_size", "image.pretrain.width", "model.attention_dim",
        "model.classifier_dim", "model.hidden_dim", "model.mutan_dim", "model.mutan_rank",
        "text.hidden_dim", "text.max_length", "text.word_dim", "optim.eps", "train.batch_size",
        "train.eval_batch_size", "train.num_epochs", "train.log_every_steps",
        "train.checkpoint_every_steps", "train.keep_checkpoints", "train.divergence_steps"),
        POSITIVE),
    "train.divergence_factor": NON_NEGATIVE,  # 0: the factor test off (train/loop.Divergence)
    **dict.fromkeys((
        "data.synthetic_images", "image.pretrain.learning_rate",
        "image.pretrain.weight_decay", "image.pretrain.fraction_weight", "optim.lr",
        "optim.text_lr", "train.stop_after_steps"), NON_NEGATIVE),
    **dict.fromkeys(("model.dropout", "text.dropout", "optim.b1", "optim.b2"), FRACTION),
    "study.repeats": (1, MAX_REPEATS + 1, True, int, f"a whole number from 1 to {MAX_REPEATS}"),
    # The generator's questions per image (data/synthetic.MAX_QUESTIONS_PER_IMAGE; a test keeps
    # the two alike) and prior strength: refused by it otherwise, in its synth flags' names.
    **dict.fromkeys(("data.synthetic_questions_per_image", "study.questions_per_image",
                     "study.balanced.questions_per_image", "study.shortcuts.questions_per_image"),
                    (1, 1001, True, int, "a whole number from 1 to 1000")),
    "study.prior_strength": NON_NEGATIVE,
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
    **dict.fromkeys(("study.images", "study.balanced.images"),
                    (3, None, True, int, "a whole number >= 3 (one image per split)")),
    # The shortcut set's re-split: 3 images of its train and val splits (hr: 5, study/checks.py).
    "study.shortcuts.images": (4, None, True, int, "a whole number >= 4 (the re-split draws its "
                               "3 splits from the set's train and val images)"),
    # A pool ranks its candidate images against each other: two at least.
    "answerability.pool_size": (2, None, True, int, "a whole number >= 2"),
    "answerability.batch_pools": POSITIVE,
    # data/answerability.MAX_POOLS_PER_IMAGE: pools are drawn one question at a time.
    "answerability.pools_per_image": (0, math.nextafter(100.0, 101.0), False, (int, float),
                                      "above 0 and at most 100"),
    "answerability.balance": (0, math.nextafter(1.0, 2.0), True, (int, float),
                              "a number in [0, 1]"),
    "answerability.study.num_epochs": (0, None, True, int, "a whole number >= 0 (0: "
                                       "train.num_epochs)"),
    "answerability.study.word_min_count": (0, None, True, int, "a whole number >= 0"),
    "answerability.study.top_words": (1, None, True, int, "a whole number >= 1"),
}
# The largest layer widths and batch sizes (checked once their interval holds): the paper's widest
# layer is 2400 and the configs' largest batch 700; past 2**63 a width was a TypeError deep in the
# model build, 10**9 asked XLA for 256 GB and an eval batch of 10**20 was a ValueError after
# training. A ResNet's weights grow with the square of its stem width (torchvision's: 64), MUTAN's
# factors with its rank (default 5); pretraining images take image.image_size's bound (2**63 was
# an OverflowError, 100000 a MemoryError). Every question of a split is padded to one token width
# (2**63 was a ValueError): the BERTs read 512 tokens at most, and a longer question is padded to
# a multiple of the widest.
MAXIMA = {
    **dict.fromkeys((
        "model.attention_dim", "model.classifier_dim", "model.hidden_dim", "model.mutan_dim",
        "text.hidden_dim", "text.word_dim"), 8192),
    # Global batches, split over every device of every host: room for a large data-parallel run.
    **dict.fromkeys(("train.batch_size", "train.eval_batch_size"), 65536),
    # A batch of images is decoded at once: 1024 of RSVQA HR's 512x512 tiles fill 3 GB.
    **dict.fromkeys(("image.batch_size", "image.pretrain.batch_size"), 1024),
    **dict.fromkeys(("image.width", "image.pretrain.width"), 256),
    "model.mutan_rank": 64,
    "image.pretrain.image_size": 4096,
    "train.length_buckets": 512,
    # Pools per answerability batch (x answerability.pool_size pairs): bounded as a global batch;
    # 10**20 was refused only once the dataset was generated, the ResNet pretrained and the
    # workdir had recorded the config (train/answerability._train).
    "answerability.batch_pools": 65536,
}
# List keys that must not be empty, and what to give instead: every question is padded to a bucket
# of train.length_buckets, so none is an IndexError later. (Their order does not matter: every
# reader sorts them.)
NON_EMPTY = {"train.length_buckets": "one token width at least, such as (64,) for a single width"}
# List keys whose entries are text, read with str methods: `--config.study.table2_rows=1` (an
# entry read as a number) was an AttributeError in the study checks, as was a plant of 0.9.
TEXT_LISTS = ("study.table2_rows", "study.shortcuts.plant", "study.baseline.overrides")
# The largest sizes of a study.lm entry (a random-init language model, study/language_models.py,
# whose lower bounds and types the study checks give): a DistilBERT of 10**20 layers or width
# passed every check and would be built layer by layer in numpy until the memory ran out. Widths
# take the text keys' bound; DistilBERT has 6 layers, BERT-large 24.
LM_MAXIMA = {**dict.fromkeys(("dim", "hidden_dim", "word_dim", "heads"), 8192), "layers": 64}


_MISSING = object()


def _lookup(config, key, missing=None):
  """The value of a dotted key, or `missing` where the config lacks it."""
  node = config
  for part in key.split("."):
    if not (isinstance(node, ml_collections.ConfigDict) and part in node):
      return missing
    node = node[part]
  return node


def _outside(value, interval):
  """Whether one value lies outside an interval of RANGES (or is not of its types; a NaN, which
  no comparison holds for, lies outside every interval)."""
  low, high, low_ok, types, _ = interval
  return (not isinstance(value, types) or isinstance(value, bool) or
          not (value > low or (low_ok and value == low)) or (high is not None and not value < high))


def check(config):
  """One-line RSVQAError for a value outside its key's choices (see CHOICES) or its interval (see
  RANGES, MAXIMA, NON_EMPTY, TEXT_LISTS, LM_MAXIMA), or meaningless beside other keys, before a run
  creates or records anything. Keys the config lacks (the study keys of a training config) are
  skipped."""
  for key, allowed in CHOICES.items():
    node = _lookup(config, key, missing=_MISSING)  # a null (hand-edited config.json) is no choice
    listed = isinstance(node, (tuple, list))
    for entry in () if node is _MISSING else node if listed else (node,):
      if entry not in allowed:
        which = f"{entry!r} is not one of them; " if listed else ""
        raise RSVQAError(f"config {key}={node!r}: {which}choose one of "
                         f"{', '.join(map(str, allowed))}")
  for key, interval in RANGES.items():
    section, _, name = key.rpartition(".")
    node = _lookup(config, section) if section else config
    if node is None or name not in node:
      continue
    value = node[name]
    listed = isinstance(value, (tuple, list))
    for entry in value if listed else (value,):
      which = f"{entry!r} " if listed else ""
      if isinstance(entry, float) and math.isinf(entry):  # 1e999: no learning rate or size
        raise RSVQAError(f"config {key}={value!r}: {which}must be finite ({interval[-1]})")
      if isinstance(entry, float) and 0 < abs(entry) < FLOAT32_TINY:
        raise RSVQAError(f"config {key}={value!r}: {which}is below float32's smallest normal "
                         f"number ({FLOAT32_TINY:.3g}), and the runs compute in float32, where "
                         f"it is 0; give {'0 or ' if interval[2] else ''}a larger value")
      if _outside(entry, interval):
        # True read as 1 was "not positive"; '8' a number that was not.
        kind = f"is a {type(entry).__name__}; " if isinstance(entry, (bool, str)) else ""
        raise RSVQAError(f"config {key}={value!r}: {which}{kind}must be {interval[-1]}")
      if key in MAXIMA and entry > MAXIMA[key]:
        raise RSVQAError(f"config {key}={value!r}: {which}must be at most {MAXIMA[key]}")
    if listed and not value and key in NON_EMPTY:
      raise RSVQAError(f"config {key}={value!r}: give {NON_EMPTY[key]}")
  for key in TEXT_LISTS:
    value = _lookup(config, key, missing=())
    for entry in value if isinstance(value, (tuple, list)) else ():
      if not isinstance(entry, str):
        raise RSVQAError(f"config {key}={tuple(value)!r}: {entry!r} is of type "
                         f"{type(entry).__name__}; each entry must be text (a quoted string)")
  _check_lm_sizes(config)
  _check_training(config)
  _check_study_stages(config)
  _check_one_source(config)


def _check_lm_sizes(config):
  """Each study.lm entry's sizes at most LM_MAXIMA, and its Skip-thoughts update-gate bias finite
  (inf, as 1e999, or NaN passed every check)."""
  for name, entry in (_lookup(config, "study.lm") or {}).items():
    for size, most in LM_MAXIMA.items():
      value = entry.get(size)
      if isinstance(value, (int, float)) and not isinstance(value, bool) and value > most:
        raise RSVQAError(f"config study.lm.{name}.{size}={value!r}: must be at most {most}")
    bias = entry.get("update_bias", 0.0)
    if isinstance(bias, float) and not math.isfinite(bias):
      raise RSVQAError(f"config study.lm.{name}.update_bias={bias!r}: must be a finite number")


def _check_training(config):
  """Settings each in its interval but meaningless together with the rest."""
  factor = _lookup(config, "train.divergence_factor")
  # loop.Divergence stops a run whose loss stays above factor x its first-step loss: at 0.5 a
  # learning run (loss 1.947 -> 1.888) was stopped as "diverged", told to lower its lr.
  if isinstance(factor, (int, float)) and 0 < factor <= 1:
    raise RSVQAError(f"config train.divergence_factor={factor!r}: must be above 1, or 0 (off): a "
                     "run stops when its loss stays above this many times its first-step loss, "
                     "as a learning run's does at 1 or less")
  optim, text = _lookup(config, "optim"), _lookup(config, "text")
  # lr 0 freezes the head (train/optimizers: set_to_zero); with no language model trained either
  # a run trains nothing and reports its random init as a result.
  if optim is not None and text is not None and optim.lr == 0 and (text.frozen or
                                                                    optim.text_lr == 0):
    frozen = "text.frozen=true" if text.frozen else "optim.text_lr=0"
    raise RSVQAError(f"config optim.lr={optim.lr!r}: with {frozen} nothing would train; give "
                     "the head a learning rate above 0")


def _check_study_stages(config):
  """A study stage's settings that the study checks index with (a KeyError there)."""
  s = _lookup(config, "study")
  if s is None or not s.get("synthetic"):
    return
  sc = s.get("shortcuts")
  if sc is not None and sc.get("enabled") and sc.get("language_model") not in s.get("lm", {}):
    raise RSVQAError(f"config study.shortcuts.language_model={sc.language_model!r}: not in "
                     f"study.lm (it has {', '.join(sorted(s.lm.keys()))})")
  b = s.get("balanced")
  if b is not None and b.get("enabled") and not b.get("seeds", (0,)):
    raise RSVQAError("config study.balanced.seeds=(): give one or more seeds for the balanced "
                     "twin's runs, or set study.balanced.enabled=false")


def _check_one_source(config):
  """A dataset folder given beside a synthetic setting would never be read: the run would
  generate its synthetic set and train on that instead, so the pair is refused."""
  root = _lookup(config, "data.root")
  if not root:
    return
  for key in ("study.synthetic", "data.synthetic"):
    if _lookup(config, key):
      raise RSVQAError(
          f"config data.root={root} is given but {key} is true, so the run would generate a "
          f"synthetic dataset and never read {root}: add --config.{key}=false to use the folder "
          "(and --config.data.name=lr|hr|xben), or leave data.root out")


def is_random(checkpoint):
  """Whether a text/image checkpoint setting means random init (unset or RANDOM)."""
  return not checkpoint or checkpoint == RANDOM


def check_text_encoder(text):
  """What a BERT-family `text` section cannot hold: Skip-thoughts' options. Checked before any
  stage (check_weights) and where the encoder is loaded, which a run reached after its image
  features."""
  if text.encoder == "skipthoughts":
    return
  if text.strip_question_mark:
    raise RSVQAError(f"config text.strip_question_mark=true: the {text.encoder} tokenizer "
                     "keeps its own punctuation; the option is for Skip-thoughts")
  if is_random(text.checkpoint):
    raise RSVQAError(f"config text.checkpoint={text.checkpoint!r}: text.encoder={text.encoder} "
                     "needs a local Hugging Face folder (config.json, model.safetensors, "
                     f"tokenizer); random init ({RANDOM!r}) is Skip-thoughts only")


def check_image_checkpoint(image_cfg):
  """A ResNet's image.checkpoint must name a file or folder (or RANDOM); synthetic_resnet reads
  none. Checked before any stage (check_weights) and where the encoder is built."""
  weights, arch = image_cfg.checkpoint, image_cfg.arch
  if arch != "synthetic_resnet" and not is_random(weights) and not os.path.exists(weights):
    raise RSVQAError(f"config image.checkpoint={shortened(weights)}: no such file or folder; give the "
                     f"{arch} weights (torchvision file or Hugging Face folder), or "
                     f"{RANDOM} for random-init features")


def check_weights(config, *, image=True):
  """Real-data runs name their pretrained weights, or ask for random init with RANDOM.

  Random weights are what synthetic configs use, but on real data they silently give a
  meaningless result, so an unset text.checkpoint (Skip-thoughts) or image.checkpoint (ResNet;
  checked when `image`, i.e. when the features come from the config) is an RSVQAError. A
  text.checkpoint naming no folder, synthetic data or not, was refused only after the image
  features were computed, naming a file inside it.
  """
  text = config.text.checkpoint
  if not is_random(text) and not os.path.isdir(text):
    raise RSVQAError(f"config text.checkpoint={shortened(text)}: {not_a_folder(text)}; give the folder "
                     f"of the {config.text.encoder} weights")
  check_text_encoder(config.text)
  # A ResNet file or folder naming nothing was refused by the encoder, after the dataset stage
  # (a synthetic dataset generated, on synthetic data too).
  if image:
    check_image_checkpoint(config.image)
  if config.data.synthetic:
    return
  unset = []  # every one at once: a run that names one per attempt costs a run per input
  if config.text.encoder == "skipthoughts" and not config.text.checkpoint:
    unset.append(("text", "give the Skip-thoughts folder (uni_skip.npz, utable.npy, "
                          "dictionary.txt) with --config.text.checkpoint=PATH, or ask for a "
                          "randomly initialised encoder with "
                          f"--config.text.checkpoint={RANDOM}"))
  arch = config.image.arch
  if image and arch != "synthetic_resnet" and not config.image.checkpoint:
    unset.append(("image", f"give the {arch} weights (torchvision file or Hugging Face folder) "
                           "with --config.image.checkpoint=PATH, or ask for random-init features "
                           f"with --config.image.checkpoint={RANDOM}"))
  if unset:
    raise RSVQAError(f"config {' and '.join(f'{k}.checkpoint' for k, _ in unset)} "
                     f"{'is' if len(unset) == 1 else 'are'} not set: "
                     + "; ".join(how for _, how in unset))
