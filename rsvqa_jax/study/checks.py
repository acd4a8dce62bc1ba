"""A study config checked whole before anything is created, and which optional stages it runs.

Every mistake is one line naming the key, raised before the study folder exists.
"""
import os

import numpy as np

from rsvqa_jax import config as config_lib
from rsvqa_jax.data import questions as questions_lib
from rsvqa_jax.data import resplit, split_files, synthetic
from rsvqa_jax.errors import RSVQAError, short_repr
from rsvqa_jax.study import names


def runs_grounding(s):
  """Whether the grounding stage runs: enabled, on synthetic data (groundings need masks)."""
  return s.synthetic and "grounding" in s and s.grounding.enabled


def runs_shortcuts(s):
  """Whether the shortcuts stage runs: enabled, on synthetic data (a plant needs a generator)."""
  return s.synthetic and "shortcuts" in s and s.shortcuts.enabled


def left_out(s):
  """The stages switched on that a study of a real dataset skips (each needs generated data),
  named with their keys: the report says so (they were left out without a word)."""
  if s.synthetic:
    return []
  stages = (("balanced", "the balanced twin"), ("shortcuts", "the shortcut benchmark"),
            ("grounding", "the grounding stage"))
  return [f"{what} (study.{key}.enabled)" for key, what in stages if key in s and s[key].enabled]


def check(config, paths=True):
  """Raises RSVQAError on the first thing `config` (with its `study` section) gets wrong.

  `paths`: also require the real data and weights a paper study reads (study.require_real);
  off where a config is only shown (`rsvqa-jax config`, --print-config).
  """
  if "study" not in config:
    raise RSVQAError("config has no `study` section: use a study config such as "
                     "configs/study_synthetic.py")
  s = config.study
  config_lib.check(config)
  if config.text.checkpoint:  # each run's is its study.lm entry's (runs.config_for)
    raise RSVQAError(f"config text.checkpoint={short_repr(config.text.checkpoint, 300)}: a study "
                     "does not read it; give each language model's as "
                     "--config.study.lm.NAME.checkpoint=PATH")
  _check_grid("study", "lm_weights", s.language_models, s.lm_weights, s.seeds, s)
  if "answerability" in config:
    st = config.answerability.study
    _check_grid("answerability.study", "weights", st.language_models, (st.weights,), st.seeds, s)
    if st.enabled and config.answerability.pools:
      raise RSVQAError(f"config answerability.pools={config.answerability.pools!r}: the study "
                       "draws its own pools from its dataset and would not read these; score "
                       "them with rsvqa-jax answerability train (or leave the key unset)")
  if s.balanced.enabled and s.balanced.language_model not in s.lm:
    raise RSVQAError(f"config study.balanced.language_model={s.balanced.language_model!r}: "
                     f"not in study.lm")
  for spec in s.table2_rows:
    if names.row_lm(s, spec) not in s.lm:
      raise RSVQAError(f"config study.table2_rows: {spec!r} needs "
                       f"study.lm.{names.row_lm(s, spec)}")
  _check_protocol(s)
  _check_split(s, config.data)
  _check_runs(config)
  if s.require_real and paths:
    _check_real(config)
  if runs_shortcuts(s):
    _check_shortcuts(s)
  if runs_grounding(s):
    from rsvqa_jax.eval import grounding  # pylint: disable=g-import-not-at-top
    if s.grounding.method not in grounding.METHODS:
      raise RSVQAError(f"config study.grounding.method={s.grounding.method!r}: choose one of "
                       f"{', '.join(grounding.METHODS)}")


def _check_grid(section, key, language_models, weights, seeds, s):
  """A grid's language models (keys of study.lm), weights (`key` of `section`) and seeds: none
  may be empty (an empty grid trains nothing and its summary would still read as a result) or
  unknown."""
  for name, values, what in (("language_models", language_models, "keys of study.lm"),
                             (key, weights, " or ".join(names.WEIGHTS)), ("seeds", seeds, "seeds")):
    if not values:
      raise RSVQAError(f"config {section}.{name} is empty: give one or more {what}")
  for lm in language_models:
    if lm not in s.lm:
      raise RSVQAError(f"config {section}.language_models names {lm!r}, study.lm has "
                       f"{sorted(s.lm.keys())}")
  for w in weights:
    if w not in names.WEIGHTS:
      raise RSVQAError(f"config {section}.{key}: {w!r} is not one of {names.WEIGHTS}")
  for name, values in (("language_models", language_models), (key, weights), ("seeds", seeds)):
    _once(f"{section}.{name}", values)


def _once(key, values):
  """A value given twice would train (or test) one setting twice and count it twice: in the
  mean (std) over seeds, or as two rows of the report."""
  if len(set(values)) != len(values):
    twice = next(v for v in values if list(values).count(v) > 1)
    raise RSVQAError(f"config {key}={tuple(values)!r}: {twice!r} is given twice, and would be "
                     "counted twice in the report")


def _check_protocol(s):
  """The fusion, the image swaps and the seeds, which the stage using them would otherwise
  refuse only after the runs before it trained."""
  from rsvqa_jax.eval import adversarial  # pylint: disable=g-import-not-at-top
  if s.fusion not in config_lib.FUSIONS:
    raise RSVQAError(f"config study.fusion={s.fusion!r}: choose one of "
                     f"{', '.join(config_lib.FUSIONS)}")
  for kind in s.adversarial:
    if kind not in adversarial.KINDS:
      raise RSVQAError(f"config study.adversarial={tuple(s.adversarial)!r}: {kind!r} is not one "
                       f"of {', '.join(adversarial.KINDS)}")
  _once("study.adversarial", s.adversarial)
  _once("study.table2_rows", s.table2_rows)
  seeds = {"seeds": s.seeds, "balanced.seeds": s.balanced.seeds,
           "shortcuts.seeds": s.shortcuts.seeds if "shortcuts" in s else ()}
  for key, values in seeds.items():
    _once(f"study.{key}", values)


def _check_split(s, data):
  """The split the models are tested and attacked on: one of the layout's, not their training
  split (an audit on the questions they learnt would read as a result)."""
  if s.split == data.train_split:
    raise RSVQAError(f"config study.split={s.split!r}: the models train on it (data.train_split);"
                     " test them on questions they never saw, such as test")
  name, key = (s.variant, "study.variant") if s.synthetic else (data.name, "data.name")
  layout = split_files.LAYOUTS.get(name)
  if layout is not None and s.split not in layout.splits:
    raise RSVQAError(f"config study.split={s.split!r}: the {name} layout ({key}) has the splits "
                     f"{', '.join(layout.splits)}")


# A random-init entry's sizes (language_models.py; Skip-thoughts' are range-checked as its runs'
# text.word_dim / text.hidden_dim).
DISTILBERT_SIZES = ("dim", "layers", "heads", "hidden_dim")
SKIPTHOUGHTS_SIZES = ("word_dim", "hidden_dim")


def _check_runs(config):
  """Every run config the study trains, checked as a training run's is: a bad study.lm entry,
  study.balanced.lm_weights or baseline override would otherwise fail only after the runs before
  it trained, and the folder's record (recorded.py) would then refuse the corrected rerun."""
  from rsvqa_jax.study import runs  # pylint: disable=g-import-not-at-top
  s = config.study
  if s.balanced.enabled and s.balanced.lm_weights not in names.WEIGHTS:
    raise RSVQAError(f"config study.balanced.lm_weights={s.balanced.lm_weights!r}: choose one "
                     f"of {', '.join(names.WEIGHTS)}")
  lms = set(s.language_models) | {names.row_lm(s, r) for r in s.table2_rows}
  lms |= {s.balanced.language_model} if s.balanced.enabled else set()
  lms |= {s.shortcuts.language_model} if runs_shortcuts(s) else set()
  for lm in sorted(lms):
    if not s.require_real:  # a paper study names every checkpoint (_check_real)
      _check_random_lm(lm, s.lm[lm])
    _check_text_lr(lm, s.lm[lm].text_lr)
    for weights in names.WEIGHTS:
      try:
        config_lib.check(runs.config_for(config, "cache", lm, weights, "reference", s.seeds[0],
                                         "data", config.data.name, _checkpoint(s, lm)))
      except RSVQAError as e:
        raise RSVQAError(f"config study.lm.{lm} ({weights} runs): {e}") from None
  if names.BASELINE in s.table2_rows:
    for entry in s.baseline.overrides:
      try:
        config_lib.check(runs.config_for(config, "cache", s.baseline.language_model, "frozen",
                                         "reference", s.seeds[0], "data", config.data.name,
                                         _checkpoint(s, s.baseline.language_model),
                                         overrides=(entry,)))
      except RSVQAError as e:
        raise RSVQAError(f"config study.baseline.overrides: {entry!r} is not a usable KEY=VALUE "
                         f"setting of its runs ({e})") from None


def _checkpoint(s, lm):
  """The entry's checkpoint as config_for takes it; a paper study's, still to be given where
  only the config is shown, stands as a placeholder (_check_real requires it to run)."""
  return s.lm[lm].checkpoint or ("<checkpoint>" if s.require_real else "")


def _check_text_lr(lm, lr):
  if not isinstance(lr, (int, float)) or isinstance(lr, bool) or not 0 <= lr < float("inf"):
    raise RSVQAError(f"config study.lm.{lm}.text_lr={lr!r}: must be a finite number >= 0")


def _check_random_lm(lm, e):
  """A study.lm entry without a checkpoint is initialised at random (language_models.py):
  offered for Skip-thoughts and DistilBERT, the latter at the entry's sizes."""
  if e.checkpoint:
    return
  if e.encoder == "skipthoughts":
    for key in SKIPTHOUGHTS_SIZES:
      if key not in e:
        raise RSVQAError(f"config study.lm.{lm} has no {key}: a random-init Skip-thoughts "
                         "encoder needs word_dim and hidden_dim (or give its checkpoint)")
    return
  if e.encoder != "distilbert":
    raise RSVQAError(f"config study.lm.{lm}.checkpoint is empty: random init is offered for "
                     f"skipthoughts and distilbert only; give a local {e.encoder} Hugging Face "
                     "folder")
  for key in DISTILBERT_SIZES:
    value = e.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
      raise RSVQAError(f"config study.lm.{lm}.{key}={value!r}: must be a positive integer (the "
                       "random-init encoder's size; or give its checkpoint)")
  if e.dim % e.heads:
    raise RSVQAError(f"config study.lm.{lm}: dim={e.dim} is not a multiple of heads={e.heads}")
  dropout = e.get("dropout", 0.1)
  if not isinstance(dropout, (int, float)) or isinstance(dropout, bool) or not 0 <= dropout < 1:
    raise RSVQAError(f"config study.lm.{lm}.dropout={dropout!r}: must be a number in [0, 1)")


def check_split(s, dataset, eval_batch_size=None):
  """Refuses, before any run trains, image substitutions the study split cannot give: with
  fewer than two images no other image exists to swap in, and shuffle, which permutes each
  batch of `eval_batch_size` questions (eval/adversarial.py), swaps nothing where every batch
  holds one image."""
  ids = np.asarray(dataset[s.split].image_id)
  images = len(np.unique(ids))
  swapping = [k for k in s.adversarial if k == "shuffle" or (k == "random" and s.adv_pool ==
                                                              "split")]
  if swapping and images < 2:
    # shuffle first: no pool helps it. random reads the split alone only under
    # study.adv_pool=split, so that key is named as a fix too.
    kind = "shuffle" if "shuffle" in swapping else "random"
    fix = (" from it (study.adv_pool=split: set study.adv_pool=dataset, raise study.images, or "
           "drop that kind)" if kind == "random" else " (raise study.images, or drop that kind)")
    raise RSVQAError(f"config study.adversarial={tuple(s.adversarial)!r}: split {s.split} holds "
                     f"{images} image(s), so {kind} substitution has no other image to give{fix}")
  if "shuffle" in s.adversarial and eval_batch_size:
    change = np.flatnonzero(ids[1:] != ids[:-1])  # question i, then i + 1 of another image
    if not np.any(change // eval_batch_size == (change + 1) // eval_batch_size):
      raise RSVQAError(f"config study.adversarial={tuple(s.adversarial)!r}: shuffle permutes the "
                       f"images within each batch of train.eval_batch_size={eval_batch_size} "
                       f"questions of split {s.split}, and every batch holds one image, so no "
                       "question would get another (raise train.eval_batch_size, or set "
                       "study.adversarial to random)")


def _check_shortcuts(s):
  """The stage's weights, seeds, plants (its language model: config/checks.py) and size: the
  re-split draws images from the planted set's train and val splits, one per split at least (a
  set too small was refused after the main stages)."""
  sc = s.shortcuts
  pooled = lambda sizes: sum(sizes[k] for k in resplit.POOL)
  enough = lambda sizes: pooled(sizes) >= len(resplit.SPLITS)
  sizes = synthetic.split_sizes(s.variant, sc.images)
  if not enough(sizes):
    raise RSVQAError(f"config study.shortcuts.images={sc.images}: leaves the re-split "
                     f"{pooled(sizes)} train and val images, it needs {len(resplit.SPLITS)}; "
                     f"raise it to {synthetic.least_images(s.variant, enough)} or more")
  if sc.lm_weights not in names.WEIGHTS or not sc.seeds:
    raise RSVQAError(f"config study.shortcuts: lm_weights must be one of {names.WEIGHTS} and "
                     "seeds not empty")
  try:
    questions_lib.parse_plants(sc.plant)
  except RSVQAError as e:
    raise RSVQAError(f"config study.shortcuts.plant: {e}") from None


def _check_real(config):
  """The paper's settings on random weights or synthetic data would not reproduce the paper:
  every input must be given, as an existing path (one line naming what is missing)."""
  s, c = config.study, config
  need = []
  if s.synthetic:
    need.append("--config.study.synthetic=false")
  if not c.data.root or not os.path.isdir(c.data.root):
    need.append(f"--config.data.root=/path/to/RSVQA_{c.data.name.upper()} (a folder)")
  if c.image.arch == "synthetic_resnet" or config_lib.is_random(c.image.checkpoint) or not \
      os.path.exists(c.image.checkpoint):
    need.append(f"--config.image.checkpoint=/path/to/{c.image.arch}.pth")
  lms = set(s.language_models) | {names.row_lm(s, r) for r in s.table2_rows}
  for lm in sorted(lms):
    ckpt = s.lm[lm].checkpoint
    if config_lib.is_random(ckpt) or not os.path.exists(ckpt):
      need.append(f"--config.study.lm.{lm}.checkpoint=/path/to/{s.lm[lm].encoder}")
  if need:
    raise RSVQAError("this study reproduces the paper with real data and pretrained weights; "
                     "give (as existing paths) " + " ".join(need))
