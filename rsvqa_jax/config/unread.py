"""Config keys that nothing reads in a config's mode: set away from their default, config.json
records them as if they applied. Each is a WARNING naming the key that makes it unread, or a
one-line RSVQAError where the results would be read as what they are not and no key says so
(a key another one replaces, augmentation an answerability run never does, a real dataset taken
as balanced).

Checked once per command where its config is loaded (commands/common.load_config, features),
not in check(), which a study runs once per run config. A value counts when it differs from its
section's default (base_config, study_defaults, answerability_section): a default cannot be
told from a user's choice.
"""
import collections
import logging

from rsvqa_jax.config.checks import is_random
from rsvqa_jax.config.defaults import answerability_section, base_config, study_defaults
from rsvqa_jax.config.loading import leaves
from rsvqa_jax.config.overrides import STUDY_SETS
from rsvqa_jax.errors import RSVQAError

_log = logging.getLogger(__name__)

# key: a dotted key, or a section (every key under it); modes: the keys whose values decide, in
# `unread(*their values)`, whether nothing reads it, the first named in the message; why: the
# rest of the message; agrees: values of the key that say what the mode does (a frozen language
# model's text_lr of 0); kinds: the configs it applies to (_kind); refuse: an RSVQAError;
# always: said even where the command line switched the mode (a record that names another
# dataset than the one trained on).
Rule = collections.namedtuple("Rule", "key modes unread why agrees kinds refuse always",
                              defaults=((), ("train", "answerability", "study"), False, False))

_BERT = lambda encoder: encoder != "skipthoughts"
_FROZEN_BERT = lambda encoder, frozen, cache: encoder != "skipthoughts" and frozen and cache
_CACHE_OFF = ("; with text.frozen=true it only turns the question-vector cache off "
              "(text.cache_questions), so the encoder runs at every step with its checkpoint's "
              "dropout")
_BERT_CACHED = ("text.encoder", "text.frozen", "text.cache_questions")
_DROPOUT = "takes its dropout from its checkpoint's config.json"
_NO_VARIATIONAL = "has no variational dropout (a Skip-thoughts option)"
_SYNTHETIC_RESNET = lambda arch: arch == "synthetic_resnet"
_RESNET_FILE = lambda checkpoint, arch: arch != "synthetic_resnet" and not is_random(checkpoint)
_REAL = lambda synthetic: not synthetic
_ALWAYS = lambda *_: True

# model.mutan_dim and model.attention_dim are left out: configs/synthetic_tiny.py and
# configs/grounding_synthetic.py set them for the fusion / head their arguments switch to.
UNREAD_RULES = (
    Rule("text.dropout", _BERT_CACHED, _FROZEN_BERT, _DROPOUT + _CACHE_OFF),
    Rule("text.dropout", ("text.encoder",), _BERT, _DROPOUT),
    Rule("text.bayesian", _BERT_CACHED, _FROZEN_BERT, _NO_VARIATIONAL + _CACHE_OFF),
    Rule("text.bayesian", ("text.encoder",), _BERT, _NO_VARIATIONAL),
    *(Rule(key, ("text.encoder",), _BERT, "takes its sizes from its checkpoint's config.json")
      for key in ("text.word_dim", "text.hidden_dim")),
    *(Rule(key, ("text.checkpoint", "text.encoder"),
           lambda checkpoint, encoder: encoder == "skipthoughts" and not is_random(checkpoint),
           "gives the Skip-thoughts sizes (text.word_dim and text.hidden_dim size a random-init "
           "encoder)") for key in ("text.word_dim", "text.hidden_dim")),
    Rule("data.name", ("data.synthetic", "data.synthetic_variant", "data.name"),
         lambda synthetic, variant, name: synthetic and name != variant,
         "generates the layout of data.synthetic_variant; set it instead",
         kinds=("train", "answerability"), always=True),
    Rule("data.name", ("study.synthetic", "study.variant", "data.name"),
         lambda synthetic, variant, name: synthetic and name != variant,
         "generates the layout of study.variant; set it instead", kinds=("study",), always=True),
    Rule("image.width", ("image.arch",), _SYNTHETIC_RESNET, "is sized by image.pretrain.width"),
    Rule("image.seed", ("image.arch",), _SYNTHETIC_RESNET,
         "draws its weights when pretrained (image.pretrain.seed)"),
    Rule("image.checkpoint", ("image.arch",), _SYNTHETIC_RESNET,
         "reads the weights it was pretrained to (image.pretrained_dir)"),
    *(Rule(key, ("image.checkpoint", "image.arch"), _RESNET_FILE,
           "gives the ResNet's weights (image.width and image.seed shape random-init ones)")
      for key in ("image.width", "image.seed")),
    *(Rule(key, ("image.arch",), lambda arch: arch != "synthetic_resnet",
           "is not pretrained here (image.pretrain and image.pretrained_dir are "
           "synthetic_resnet's)") for key in ("image.pretrain", "image.pretrained_dir")),
    Rule("optim.text_lr", ("text.frozen",), bool, "trains no language model", agrees=(0,)),
    *(Rule(key, ("optim.name",), lambda name: name == "sgd",
           "is plain SGD (optim.b1, optim.b2 and optim.eps are Adam's)")
      for key in ("optim.b1", "optim.b2", "optim.eps")),
    *(Rule(key, ("model.fusion",), lambda fusion: fusion != "mutan", "builds no MUTAN")
      for key in ("model.mutan_rank", "model.mutan_normalize")),
    Rule("train.batch_size", ("answerability.batch_pools",), _ALWAYS,
         "sets an answerability run's batches (pools of answerability.pool_size pairs); set it "
         "instead", kinds=("answerability",), refuse=True),
    Rule("data.augment_variants", (), _ALWAYS, "an answerability run (rsvqa-jax answerability "
         "train) never augments its images; set data.augment_variants=()",
         kinds=("answerability",), refuse=True),
    Rule("answerability.study", (), _ALWAYS, "an answerability run (rsvqa-jax answerability "
         "train) trains one head; the study stage reads answerability.study (rsvqa-jax "
         "answerability study, with a study config)", kinds=("answerability",)),
    # A stage left out shows in the report; a main dataset read as balanced would not.
    Rule("study.shortcuts.enabled", ("study.synthetic",), _REAL, "reads a real dataset, and "
         "the shortcuts stage plants its shortcut in a generated one: the study skips it",
         kinds=("study",)),
    Rule("study.grounding.enabled", ("study.synthetic",), _REAL, "reads a real dataset, and "
         "the grounding stage scores against a generated one's groundings: the study skips it",
         kinds=("study",)),
    Rule("study.balanced_data", ("study.synthetic",), _REAL, "reads the dataset in data.root "
         "as it is (only a generated one is balanced); set study.balanced_data=false",
         kinds=("study",), refuse=True),
    *(Rule(f"study.{key}", ("study.synthetic",), _REAL, "reads the dataset in data.root "
           "instead of generating one", kinds=("study",))
      for key in ("variant", "images", "questions_per_image", "data_seed", "prior_strength")),
    *(Rule(f"study.balanced.{key}", ("study.synthetic",), _REAL,
           "trains no balanced twin (a generated dataset)", kinds=("study",))
      for key in ("images", "questions_per_image", "language_model", "lm_weights", "seeds")),
)

Unread = collections.namedtuple("Unread", "key message refuse")
_MISSING = object()


def _kind(config):
  """"study", "answerability" (an answerability run's: one without a study section) or
  "train"."""
  return "study" if "study" in config else "answerability" if "answerability" in config else (
      "train")


def unread(config, section=None, named=()):
  """[Unread] of the keys of `config` (of `section` alone, such as "image", where the command
  reads no other) that differ from their default and that nothing reads in its mode, in order.

  `named`: the keys the command line set. A config file's key is not warned of where the
  command line switched its mode (`--config.image.arch=resnet152` over a file pretraining its
  synthetic_resnet: the file's image.pretrain settings are moot, not the user's mistake); a
  refusal stands whoever set the key.

  A key a study sets for each run (STUDY_SETS, model.blind) is unread whatever its mode; the
  rules judge a study's base config only on the other keys, less study.baseline.overrides':
  text.dropout beside a distilbert entry is a question for each run, not for the study."""
  kind = _kind(config)
  per_run = _per_run(config) if kind == "study" else set()
  sets = set(STUDY_SETS) | {"model.blind"} if kind == "study" else set()
  defaults = base_config()
  defaults.study, defaults.answerability = study_defaults(), answerability_section()
  found = []
  for key, value in leaves(config):
    default = _get(defaults, key)
    if (section and not key.startswith(f"{section}.")) or default is _MISSING or _same(
        value, default):
      continue
    if key in sets:  # the command line refuses them (config.apply_command_line); a file's warned
      why = (f"a study sets it for each run: give {STUDY_SETS[key]}" if key in STUDY_SETS else
             "a study trains a reference and a visual-blind model of every cell")
      found.append(Unread(key, f"config {key}={_shown(value)} is not read: {why}", False))
      continue
    if key in per_run:
      continue
    for rule in UNREAD_RULES:
      if (kind in rule.kinds and (key == rule.key or key.startswith(f"{rule.key}."))
          and not per_run & set(rule.modes) and value not in rule.agrees
          and rule.unread(*(_get(config, m) for m in rule.modes))):
        if (not (rule.refuse or rule.always) and key not in named
            and set(rule.modes) & set(named)):
          continue  # the command line switched the mode: the file's key is moot; a later rule?
        mode = f"{rule.modes[0]}={_shown(_get(config, rule.modes[0]))} " if rule.modes else ""
        found.append(Unread(key, f"config {key}={_shown(value)} is not read: {mode}{rule.why}",
                            rule.refuse))
        break
  return found


def check_unread(config, section=None, named=()):
  """The first refused unread key as an RSVQAError, else a WARNING for each unread key."""
  found = unread(config, section, named)
  for hit in found:
    if hit.refuse:
      raise RSVQAError(hit.message)
  for hit in found:
    _log.warning(hit.message)


def _per_run(config):
  """The training keys a study sets for each run, its baseline row's overrides included."""
  rows = {entry.partition("=")[0].strip() for entry in config.study.baseline.overrides}
  return set(STUDY_SETS) | {"model.blind"} | rows


def _get(config, key):
  """The value of a dotted key, or _MISSING where the config lacks it."""
  for part in key.split("."):
    if not hasattr(config, "keys") or part not in config:
      return _MISSING
    config = config[part]
  return config


def _same(value, default):
  """Equal, a list and a tuple of the same entries too (a config read back from JSON)."""
  if isinstance(value, (list, tuple)) and isinstance(default, (list, tuple)):
    return tuple(value) == tuple(default)
  return value == default


def _shown(value):
  """A value as the command line writes it: true / false, a path unquoted, a list as Python."""
  if isinstance(value, bool):
    return str(value).lower()
  return value if isinstance(value, str) else repr(value)
