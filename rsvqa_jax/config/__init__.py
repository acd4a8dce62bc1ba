"""Configs: every section's defaults, loading `configs/*.py`, command-line overrides, checks, a
run's identity and the paths it derives. One concern per module; this package names them all,
so callers and config files write `from rsvqa_jax import config` and `config.base_config()`.

  defaults   every key a training run (base_config), a study and an answerability run read
  checks     closed choices, numeric intervals, named weights (check, check_weights)
  derived    cache folders and whether question vectors are cached
  loading    `path.py` / `path.py:arg` / an installed config's name -> ConfigDict (load)
  overrides  `--config.a.b=value` pairs, typed and checked (apply_overrides, apply_command_line)
  identity   what a workdir records and compares (identity, from_dict, unlike_seed_runs)
  presets    the paper's cell and config-file arguments (paper_config, apply_flags)
  unread     keys set where their mode reads nothing: a WARNING or a refusal (check_unread)

A config file is data: it defines `get_config(arg=None)` from these and ml_collections only, so
loading it never imports JAX, and every documented key exists before the overrides are applied.
"""
from rsvqa_jax.config.checks import (CHOICES, FRACTION, MAX_REPEATS, MAXIMA, NON_EMPTY,
                                     NON_NEGATIVE, POSITIVE, RANGES, SEED, WIDTH, check,
                                     check_image_checkpoint, check_text_encoder, check_weights,
                                     is_random)
from rsvqa_jax.config.defaults import (ANSWERABILITY_LOSSES, AUGMENT_VARIANTS, FEATURES_DIR,
                                       FUSIONS, LANGUAGE_MODELS, LM_DIR, PATH_KEYS,
                                       PRETRAINED_DIR,
                                       QUESTIONS_DIR,
                                       RANDOM, RESNET_DEPTHS, SELECT_METRICS,
                                       answerability_section, base_config,
                                       data_section, image_section, lm_entry, model_section,
                                       optim_section, pretrain_section, study_defaults,
                                       text_section, train_section)
from rsvqa_jax.config.derived import (cache_dir, caches_questions, image_config, is_stand_in,
                                      synthetic_root)
from rsvqa_jax.config.identity import (BOOKKEEPING_KEYS, RECORDED_IN, RETIRED_KEYS,
                                       RUN_CONTROL_KEYS, differences, from_dict, identity,
                                       recorded_identity, to_dict, unlike_seed_runs)
from rsvqa_jax.config.loading import (FREE_SECTIONS, config_path, defaulted_keys, leaves, load,
                                      sections, unknown_key)
from rsvqa_jax.config.overrides import apply_command_line, apply_overrides, override
from rsvqa_jax.config.presets import apply_flags, argument_error, paper_config, parse_cell
from rsvqa_jax.config.unread import UNREAD_RULES, check_unread, unread

__all__ = [
    "ANSWERABILITY_LOSSES", "AUGMENT_VARIANTS", "BOOKKEEPING_KEYS", "CHOICES", "FEATURES_DIR",
    "FRACTION", "FREE_SECTIONS", "FUSIONS", "LANGUAGE_MODELS", "LM_DIR", "MAX_REPEATS", "MAXIMA",
    "NON_EMPTY",
    "NON_NEGATIVE",
    "PATH_KEYS", "POSITIVE", "PRETRAINED_DIR", "QUESTIONS_DIR", "RANDOM", "RANGES", "RECORDED_IN",
    "RESNET_DEPTHS", "RETIRED_KEYS", "RUN_CONTROL_KEYS", "SEED", "SELECT_METRICS", "UNREAD_RULES",
    "WIDTH",
    "answerability_section", "apply_command_line", "apply_flags", "apply_overrides",
    "argument_error", "base_config",
    "cache_dir", "caches_questions", "check", "check_image_checkpoint", "check_text_encoder",
    "check_unread", "check_weights", "config_path", "data_section",
    "defaulted_keys", "differences", "from_dict", "identity", "image_config", "image_section",
    "is_random", "is_stand_in", "leaves", "lm_entry", "load", "model_section", "optim_section", "override",
    "paper_config",
    "parse_cell", "pretrain_section", "recorded_identity", "sections", "study_defaults",
    "synthetic_root", "text_section", "to_dict", "train_section", "unknown_key", "unlike_seed_runs",
    "unread",
]
