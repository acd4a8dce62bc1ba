"""The whole language-bias protocol of the paper in one call (Sections 3.2-3.4 and 6.2).

For every configured language model, frozen and fine-tuned, a reference model (image + question,
e-mult fusion) and its visual-blind twin are trained over seeds and evaluated on the test split;
every reference model is tested adversarially (a random image of the dataset, K times; white /
black / noise when configured); Table 2's other rows (study.table2_rows: other fusions, the
original RSVQA baseline) are trained and evaluated as reference models; the dataset is analysed
(priors per type and per LR template level); a balanced twin of a synthetic dataset gets a
reference / blind pair of its own, where the blind model should fall to the most common answer,
which the balancing makes the uniform guess; then DIR/report.md gathers the tables and figures,
Table 3 with the same mean (std) over seeds and adversarial draws as Table 6 (bias/report.py),
and the settings every model was trained with.

Layout of DIR:
  data/{main,balanced}/        generated synthetic datasets (official LR / HR layout)
  cache/                       feature cache, pretrained synthetic ResNet, random-init language
                               model folders, XLA compilation cache
  runs/<lm>_<frozen|finetuned>_<reference|blind>/seed<k>/   training workdirs, with eval/<split>/
  runs/<lm>_<weights>_<fusion>_reference/, runs/baseline_reference/   other Table 2 rows
  balanced/runs/...            the balanced pair, same layout
  data/shortcuts/, shortcuts/  the shortcuts stage (study.shortcuts.enabled): a synthetic set
                               with a planted shortcut, its benchmark (shortcuts/benchmark/, as
                               `rsvqa-jax shortcuts` writes it) and runs (shortcuts/runs/...)
  runs/.../eval/<split>/grounding_<method>/   the grounding stage (study.grounding.enabled,
                               synthetic only): each grid run's relevance maps, scored
  analysis/, figures/          tables (CSV / Markdown / LaTeX) and PNGs
  study.json, timings.json, report.md
An interrupted study resumes: a run whose evaluation files exist is skipped, a finished run is
only evaluated, an unfinished one resumes from its last checkpoint (train/loop.py).

The stages are the library's own steps, composed: dataset generation and the synthetic ResNet's
pretraining (train/prepare.py), the feature cache (features/), training (train/loop.py),
evaluation and adversarial testing (eval/), analysis, tables, figures and report (bias/).
"""
import json
import logging
import os
import shutil
import time

import jax
import numpy as np

from rsvqa_jax import config as config_lib
from rsvqa_jax import progress, storage
from rsvqa_jax.bias import analysis, plots, report, shortcut_report, tables
from rsvqa_jax.data import questions as questions_lib
from rsvqa_jax.data import rsvqa_json, synthetic
from rsvqa_jax.errors import RSVQAError
from rsvqa_jax.eval import accuracy, adversarial, outputs
from rsvqa_jax.eval import shortcuts as shortcut_eval
from rsvqa_jax.features import pretrain
from rsvqa_jax.train import checkpointing, inputs, loop, prepare

_log = logging.getLogger(__name__)

WEIGHTS = ("frozen", "finetuned")
ROLES = ("reference", "blind")
ROLE_LABELS = {"reference": "reference", "blind": "visual blind"}
FUSION_LABELS = {"mult": "e-mult", "concat": "concat", "mutan": "MUTAN"}
# The paper's settings (Section 3.1, 6.1-6.2; dropout and the text lr from the original code and
# Figure 8), printed beside the ones a report's models were trained with.
PAPER_SETTINGS = {
    "dataset": "RSVQA LR: 772 images, 77,232 questions (train 57,223 / val 10,005 / test 10,004)",
    "image encoder": "ResNet-152, ImageNet weights, frozen, 2,048-d pooled features",
    "skipthoughts": "Skip-thoughts uni-skip GRU (pretrained, 2,400-d); fine-tuning lr 1e-4",
    "distilbert": "distilBERT (pretrained, 768-d); fine-tuning lr 1e-6 (BERT family)",
    "fusion": "e-mult (Figure 5, Table 6); MUTAN / e-mult in Table 2; projections 1,200-d",
    "classifier": "FC 256, then the answers",
    "dropout": "0.5 (the original code's)",
    "optimiser": "Adam, lr 1e-5 (fusion and classifier)",
    "batch / epochs": "70 / 50",
    "seeds": "3 runs, mean (std)",
    "adversarial": "a random image of the entire dataset (whited / blacked out: similar, omitted)",
    "baseline": "the original RSVQA model (Lobry et al.), frozen Skip-thoughts, e-mult",
}
BASELINE = "baseline"  # the Table 2 row of the original RSVQA model (study.baseline)


class Progress:
  """One line per stage or run, with the time since the study started."""

  def __init__(self, log):
    self.start = time.time()
    self.log = log

  def __call__(self, message):
    self.log(f"[study {time.time() - self.start:7.1f}s] {message}")


class Timings:
  """Seconds spent per unit of work, kept across invocations in DIR/timings.json."""

  def __init__(self, path):
    self.path = path
    self.values = storage.read_json(path) or {}

  def record(self, key, seconds):
    self.values[key] = round(float(seconds), 2)
    storage.write_json(self.path, self.values)


def run_name(lm, weights, role, fusion=None):
  return f"{lm}_{weights}_{role}" if fusion is None else f"{lm}_{weights}_{fusion}_{role}"


def parse_row(spec):
  """(lm, weights, fusion) of a study.table2_rows entry: "baseline" or "LM,WEIGHTS,FUSION"."""
  if spec == BASELINE:
    return BASELINE, "frozen", None
  parts = spec.split(",")
  if len(parts) != 3 or parts[1] not in WEIGHTS or parts[2] not in config_lib.FUSIONS:
    raise RSVQAError(f"config study.table2_rows: {spec!r} is not {BASELINE!r} or "
                     f"LM,frozen|finetuned,{'|'.join(config_lib.FUSIONS)}")
  return tuple(parts)


def random_distilbert(folder, words, *, dim, layers, heads, hidden_dim, dropout=0.1,
                      max_positions=64, seed=0):
  """A random-init DistilBERT-architecture Hugging Face folder (no pretrained weights here).

  Weights follow the Hugging Face initialisation (N(0, 0.02) matrices and embeddings, zero
  biases, unit LayerNorms); the WordPiece vocabulary is the special tokens plus `words`.
  Written once (temporary folder renamed when complete); returns `folder`.
  """
  if os.path.isfile(os.path.join(folder, "model.safetensors")):
    return folder
  from safetensors.numpy import save_file  # pylint: disable=g-import-not-at-top
  from transformers import BertTokenizer  # pylint: disable=g-import-not-at-top
  special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
  vocab = special + [w for w in words if not w.startswith("[")]
  rng = np.random.default_rng(seed)
  normal = lambda *shape: (0.02 * rng.standard_normal(shape)).astype(np.float32)
  t = {"distilbert.embeddings.word_embeddings.weight": normal(len(vocab), dim),
       "distilbert.embeddings.position_embeddings.weight": normal(max_positions, dim),
       "distilbert.embeddings.LayerNorm.weight": np.ones(dim, np.float32),
       "distilbert.embeddings.LayerNorm.bias": np.zeros(dim, np.float32)}
  linears = {"attention.q_lin": (dim, dim), "attention.k_lin": (dim, dim),
             "attention.v_lin": (dim, dim), "attention.out_lin": (dim, dim),
             "ffn.lin1": (hidden_dim, dim), "ffn.lin2": (dim, hidden_dim)}
  for i in range(layers):
    base = f"distilbert.transformer.layer.{i}."
    for name, shape in linears.items():
      t[f"{base}{name}.weight"] = normal(*shape)
      t[f"{base}{name}.bias"] = np.zeros(shape[0], np.float32)
    for norm in ("sa_layer_norm", "output_layer_norm"):
      t[f"{base}{norm}.weight"] = np.ones(dim, np.float32)
      t[f"{base}{norm}.bias"] = np.zeros(dim, np.float32)
  config = {"model_type": "distilbert", "vocab_size": len(vocab), "dim": dim, "n_layers": layers,
            "n_heads": heads, "hidden_dim": hidden_dim, "max_position_embeddings": max_positions,
            "activation": "gelu", "dropout": dropout, "pad_token_id": 0}
  parent, name = os.path.split(os.path.abspath(folder))
  with storage.building(parent, name) as tmp:
    save_file(t, os.path.join(tmp, "model.safetensors"))
    with open(os.path.join(tmp, "config.json"), "w") as f:
      json.dump(config, f, indent=1)
    tokenizer = BertTokenizer(vocab={w: i for i, w in enumerate(vocab)}, do_lower_case=True)
    tokenizer.save_pretrained(tmp)
  return folder


def random_skipthoughts(folder, words, *, word_dim, hidden_dim, update_bias=2.0, seed=0):
  """A random-init uni-skip folder (uni_skip.npz, utable_f32.npy, dictionary.txt) for `words`.

  A stand-in for the pretrained encoder, which keeps a whole question in its final state: word
  vectors N(0, 1), input weights N(0, 1 / word_dim) (unit pre-activations), orthogonal
  recurrent weights, and the update gate's bias at `update_bias` (2: the state keeps ~88% per
  word, so the question's first words still count at its end). Frozen, at 32 -> 64 dims, "How
  many roads / forests are there in the image ?" then end 0.55 apart (norms ~2); at the model's
  own init (N(0, 0.1) weights) 0.04 apart (norms ~0.2), and with the gates at 0.5 only 0.23 of
  3.3: the frozen stand-in could hardly tell which object is asked about.
  Written once (temporary folder renamed when complete); returns `folder`.
  """
  from rsvqa_jax.models import skipthoughts_params as stp  # pylint: disable=g-import-not-at-top
  if os.path.isfile(os.path.join(folder, stp.UNI_SKIP)):
    return folder
  rng = np.random.default_rng(seed)
  vocab = [stp.UNK] + [w for w in words if w != stp.UNK]
  normal = lambda scale, *shape: (scale * rng.standard_normal(shape)).astype(np.float32)
  ortho = lambda n: np.linalg.qr(rng.standard_normal((n, n)))[0].astype(np.float32)
  bias = np.zeros(2 * hidden_dim, np.float32)
  bias[hidden_dim:] = update_bias  # pre[:hidden] is the reset gate, pre[hidden:] the update gate
  arrays = {"encoder_W": normal(word_dim ** -0.5, word_dim, 2 * hidden_dim),
            "encoder_U": np.concatenate([ortho(hidden_dim), ortho(hidden_dim)], axis=1),
            "encoder_b": bias, "encoder_Wx": normal(word_dim ** -0.5, word_dim, hidden_dim),
            "encoder_Ux": ortho(hidden_dim), "encoder_bx": np.zeros(hidden_dim, np.float32)}
  parent, name = os.path.split(os.path.abspath(folder))
  with storage.building(parent, name) as tmp:
    np.savez(os.path.join(tmp, stp.UNI_SKIP), **arrays)
    np.save(os.path.join(tmp, stp.PLAIN_UTABLE), normal(1.0, len(vocab), word_dim))
    with open(os.path.join(tmp, stp.DICTIONARY), "w", encoding="utf-8") as f:
      f.write("\n".join(vocab) + "\n")
  return folder


class Study:
  """A study config bound to its folder: datasets, run configs, runs, evaluations, report."""

  def __init__(self, config, workdir, log=_log.info):
    if "study" not in config:
      raise RSVQAError("config has no `study` section: use a study config such as "
                       "configs/study_synthetic.py")
    self.config = config
    self.s = config.study
    self.dir = os.path.abspath(workdir)
    self.cache = os.path.join(self.dir, "cache")
    self._check()  # before anything is created
    os.makedirs(self.cache, exist_ok=True)
    self.progress = Progress(log)
    self.timings = Timings(os.path.join(self.dir, "timings.json"))
    self.trained = 0  # runs trained (not merely found finished) by this invocation

  def _check(self):
    s = self.s
    config_lib.check(self.config)
    for lm in s.language_models:
      if lm not in s.lm:
        raise RSVQAError(f"config study.language_models names {lm!r}, study.lm has "
                         f"{sorted(s.lm.keys())}")
    for w in s.lm_weights:
      if w not in WEIGHTS:
        raise RSVQAError(f"config study.lm_weights: {w!r} is not one of {WEIGHTS}")
    if not s.seeds:
      raise RSVQAError("config study.seeds is empty")
    if s.balanced.enabled and s.balanced.language_model not in s.lm:
      raise RSVQAError(f"config study.balanced.language_model={s.balanced.language_model!r}: "
                       f"not in study.lm")
    for spec in s.table2_rows:
      if self.row_lm(spec) not in s.lm:
        raise RSVQAError(f"config study.table2_rows: {spec!r} needs study.lm.{self.row_lm(spec)}")
    if s.require_real:
      self._check_real()
    if self.runs_shortcuts():
      self._check_shortcuts()
    if self.runs_grounding():
      from rsvqa_jax.eval import grounding  # pylint: disable=g-import-not-at-top
      if s.grounding.method not in grounding.METHODS:
        raise RSVQAError(f"config study.grounding.method={s.grounding.method!r}: choose one of "
                         f"{', '.join(grounding.METHODS)}")

  def runs_grounding(self):
    """Whether the grounding stage runs: enabled, on synthetic data (groundings need masks)."""
    return self.s.synthetic and "grounding" in self.s and self.s.grounding.enabled

  def runs_shortcuts(self):
    """Whether the shortcuts stage runs: enabled, on synthetic data (a plant needs a generator)."""
    return self.s.synthetic and "shortcuts" in self.s and self.s.shortcuts.enabled

  def _check_shortcuts(self):
    sc = self.s.shortcuts
    if sc.language_model not in self.s.lm:
      raise RSVQAError(f"config study.shortcuts.language_model={sc.language_model!r}: not in "
                       "study.lm")
    if sc.lm_weights not in WEIGHTS or not sc.seeds:
      raise RSVQAError(f"config study.shortcuts: lm_weights must be one of {WEIGHTS} and seeds "
                       "not empty")
    try:
      questions_lib.parse_plants(sc.plant)
    except RSVQAError as e:
      raise RSVQAError(f"config study.shortcuts.plant: {e}") from None

  def _check_real(self):
    """The paper's settings on random weights or synthetic data would not reproduce the paper:
    every input must be given, as an existing path (one line naming what is missing)."""
    s, c = self.s, self.config
    need = []
    if s.synthetic:
      need.append("--config.study.synthetic=false")
    if not c.data.root or not os.path.isdir(c.data.root):
      need.append(f"--config.data.root=/path/to/RSVQA_{c.data.name.upper()} (a folder)")
    if c.image.arch == "synthetic_resnet" or config_lib.is_random(c.image.checkpoint) or not \
        os.path.exists(c.image.checkpoint):
      need.append(f"--config.image.checkpoint=/path/to/{c.image.arch} weights")
    lms = set(s.language_models) | {self.row_lm(r) for r in s.table2_rows}
    for lm in sorted(lms):
      ckpt = s.lm[lm].checkpoint
      if config_lib.is_random(ckpt) or not os.path.exists(ckpt):
        need.append(f"--config.study.lm.{lm}.checkpoint=/path/to/{s.lm[lm].encoder}")
    if need:
      raise RSVQAError("this study reproduces the paper with real data and pretrained weights; "
                       "give (as existing paths) " + " ".join(need))

  def row_lm(self, spec):
    lm = parse_row(spec)[0]
    return self.s.baseline.language_model if lm == BASELINE else lm

  # Data and encoders.

  def dataset(self, balanced):
    """(records.Dataset, root, name) of the main or balanced dataset, generated if synthetic."""
    s = self.s
    if not s.synthetic:
      root, name = self.config.data.root, self.config.data.name
      if not root or not os.path.isdir(root):
        raise RSVQAError(f"config data.root={root}: give the dataset folder (study.synthetic is "
                         "False)")
      return rsvqa_json.read_dataset(root, name), os.path.abspath(root), name
    root = os.path.join(self.dir, "data", "balanced" if balanced else "main")
    images = s.balanced.images if balanced else s.images
    qpi = s.balanced.questions_per_image if balanced else s.questions_per_image
    started = time.time()
    synthetic.ensure_synthetic(root, s.variant, images, s.data_seed,
                               prior_strength=s.prior_strength,
                               balanced=balanced or s.balanced_data, questions_per_image=qpi)
    if time.time() - started > 1:
      self.timings.record(f"data/{'balanced' if balanced else 'main'}", time.time() - started)
    return rsvqa_json.read_dataset(root, s.variant), root, s.variant

  def lm_checkpoint(self, lm, dataset):
    """The text.checkpoint of language model `lm`: its configured one, or a random-init folder
    (Skip-thoughts: with `update_bias` in its entry; without, the model's own init)."""
    e = self.s.lm[lm]
    if e.checkpoint or (e.encoder == "skipthoughts" and "update_bias" not in e):
      return e.checkpoint
    words = inputs.dataset_words(dataset)
    if e.encoder == "skipthoughts":
      sizes = dict(word_dim=e.word_dim, hidden_dim=e.hidden_dim, update_bias=e.update_bias,
                   seed=e.get("init_seed", 0))
      key = storage.identity_key({"words": words, "skipthoughts": True, **sizes})
      return random_skipthoughts(os.path.join(self.cache, "lm", f"{lm}_random_{key}"), words,
                                 **sizes)
    if e.encoder != "distilbert":
      raise RSVQAError(f"config study.lm.{lm}.checkpoint is empty: random init is offered for "
                       f"skipthoughts and distilbert only; give a local {e.encoder} Hugging Face "
                       "folder")
    sizes = dict(dim=e.dim, layers=e.layers, heads=e.heads, hidden_dim=e.hidden_dim,
                 dropout=e.get("dropout", 0.1))
    key = storage.identity_key({"words": words, "seed": e.get("init_seed", 0), **sizes})
    folder = os.path.join(self.cache, "lm", f"{lm}_random_{key}")
    return random_distilbert(folder, words, seed=e.get("init_seed", 0), **sizes)

  def run_config(self, lm, weights, role, seed, root, name, checkpoint, fusion=None,
                 overrides=()):
    """The training config of one run: the study config's training keys, specialised.

    `fusion`: the row's fusion (default study.fusion); `overrides`: "key=value" settings of
    the row (the baseline's), applied last.
    """
    base = config_lib.to_dict(self.config)
    del base["study"]
    c = config_lib.from_dict(base)
    e = self.s.lm[lm]
    c.seed = int(seed)
    c.data.name = name
    c.data.root = root
    c.data.synthetic = False
    c.data.cache_dir = self.cache
    c.image = config_lib.image_config(c.image, self.cache)
    c.text.encoder = e.encoder
    c.text.checkpoint = checkpoint or config_lib.RANDOM
    if e.encoder == "skipthoughts" and not checkpoint:
      c.text.word_dim, c.text.hidden_dim = e.word_dim, e.hidden_dim
    frozen = weights == "frozen"
    c.text.frozen = frozen
    c.optim.text_lr = 0.0 if frozen else float(e.text_lr)
    if frozen and self.s.frozen_epochs:
      c.train.num_epochs = int(self.s.frozen_epochs)
    c.model.fusion = fusion or self.s.fusion
    c.model.blind = role == "blind"
    c.train.progress_bar = False
    return config_lib.apply_overrides(c, overrides)

  # One run.

  def run_one(self, cfg, workdir, ds, feats, label, attack=True):
    """Train (or resume), evaluate and (reference models, if `attack`) adversarially test one
    run; returns its results."""
    split = self.s.split
    acc_path, _ = outputs.accuracy_paths(workdir, split)
    checkpointing.check_or_record_config(workdir, cfg)
    if not os.path.exists(acc_path):
      started = time.time()
      summary = loop.train(cfg, workdir, dataset=ds, features=feats, log=self.progress)
      if not summary["finished"]:
        raise RSVQAError(f"{workdir}: training stopped before the end (train.stop_after_steps?)")
      if "state" in summary:
        self.trained += 1
        self.timings.record(f"train/{label}", time.time() - started)
      accuracy.evaluate(workdir, split, dataset=ds, features=feats)
      self.progress(f"{label}: trained and evaluated ({time.time() - started:.1f}s), best "
                    f"validation OA {summary['best_oa']:.4f}")
    else:
      self.progress(f"{label}: done before, skipped")
    out = {"workdir": workdir, "accuracy": storage.read_json(acc_path),
           "val_oa": best_validation(workdir), "adversarial": {}}
    if attack and not cfg.model.blind:
      for kind in self.s.adversarial:
        json_path, _ = outputs.adversarial_paths(workdir, split, kind)
        if not os.path.exists(json_path):
          started = time.time()
          adversarial.evaluate(workdir, split, kind, repeats=self.s.repeats, seed=self.s.adv_seed,
                               pool=self.s.adv_pool, dataset=ds, features=feats)
          self.timings.record(f"adversarial_{kind}/{label}", time.time() - started)
          self.progress(f"{label}: adversarial {kind} x{self.s.repeats} "
                        f"({time.time() - started:.1f}s)")
        out["adversarial"][kind] = storage.read_json(json_path)
    return out

  def grid(self, runs_dir, cells, seeds, ds, root, name, feats):
    """Results of every (lm, weights) cell: {"reference": [...], "blind": [...]} over seeds."""
    bar = progress.bar(total=len(cells) * len(ROLES) * len(seeds), unit="run",
                       desc=f"study {os.path.relpath(runs_dir, self.dir)}",
                       enabled=jax.process_index() == 0)
    results = []
    for lm, weights in cells:
      checkpoint = self.lm_checkpoint(lm, ds)
      cell = {"lm": lm, "label": self.s.lm[lm].label, "weights": weights}
      for role in ROLES:
        runs = []
        for seed in seeds:
          label = os.path.join(os.path.relpath(runs_dir, self.dir), run_name(lm, weights, role),
                               f"seed{seed}")
          cfg = self.run_config(lm, weights, role, seed, root, name, checkpoint)
          workdir = os.path.join(runs_dir, run_name(lm, weights, role), f"seed{seed}")
          runs.append(self.run_one(cfg, workdir, ds, feats, label))
          bar.update()
        cell[role] = runs
      results.append(cell)
    bar.close()
    return results

  def table2(self, runs_dir, grid, ds, root, name, feats):
    """Table 2's rows (study.table2_rows), reference models over seeds; [] when none is set.

    A row of the grid's (same LM, weights and study.fusion) reuses its runs; the others are
    trained and evaluated, without adversarial testing (the paper tests e-mult models only).
    """
    rows = []
    for spec in self.s.table2_rows:
      lm, weights, fusion = parse_row(spec)
      row = {"spec": spec, "weights": weights}
      if lm == BASELINE:
        lm, fusion = self.s.baseline.language_model, "mult"
        row.update(label=self.s.baseline.label, fusion="e-mult", baseline=True)
        folder, overrides, row_feats = "baseline_reference", tuple(self.s.baseline.overrides), None
      else:
        row.update(label=self.s.lm[lm].label, fusion=FUSION_LABELS[fusion], baseline=False)
        cell = next((c for c in grid if (c["lm"], c["weights"]) == (lm, weights)), None)
        if fusion == self.s.fusion and cell is not None:
          rows.append({**row, "runs": cell["reference"]})
          continue
        folder, overrides, row_feats = run_name(lm, weights, "reference", fusion), (), feats
      checkpoint = self.lm_checkpoint(lm, ds)
      runs = []
      for seed in self.s.seeds:
        workdir = os.path.join(runs_dir, folder, f"seed{seed}")
        cfg = self.run_config(lm, weights, "reference", seed, root, name, checkpoint, fusion,
                              overrides)
        runs.append(self.run_one(cfg, workdir, ds, row_feats,
                                 os.path.relpath(workdir, self.dir), attack=False))
      rows.append({**row, "runs": runs})
    return rows

  def features(self, ds, root, name):
    """Clean image features of every split, after the image encoder's pretraining stage."""
    lm = self.s.language_models[0]
    cfg = self.run_config(lm, WEIGHTS[0], ROLES[0], 0, root, name, "")
    workdir = os.path.join(self.dir, "runs", "_")
    started = time.time()
    if prepare.image_encoder(cfg.image, ds, log=self.progress):
      self.timings.record(f"pretrain/{os.path.basename(root)}", time.time() - started)
    started = time.time()
    feats = inputs.image_features(cfg, ds, workdir, None)
    if time.time() - started > 1:
      self.timings.record(f"features/{os.path.basename(root)}", time.time() - started)
    self.progress(f"image features {feats.features.shape} ready ({cfg.image.arch}; "
                  f"{time.time() - started:.1f}s)")
    return feats

  def shortcuts(self):
    """The shortcuts stage: the shortcut benchmark of a synthetic set with a planted shortcut,
    and a reference / visual-blind pair trained on its re-split data (checkpoints selected on
    IID val), scored on the IID test split and the nine OOD sets. Runs trained on another
    benchmark (the plant, sizes or seed changed since) are removed, never reused."""
    s, sc = self.s, self.s.shortcuts
    root = os.path.join(self.dir, "data", "shortcuts")
    stage_dir = os.path.join(self.dir, "shortcuts")
    bench, runs_dir = os.path.join(stage_dir, "benchmark"), os.path.join(stage_dir, "runs")
    started = time.time()
    synthetic.ensure_synthetic(root, s.variant, sc.images, s.data_seed,
                               prior_strength=s.prior_strength, balanced=sc.balanced,
                               questions_per_image=sc.questions_per_image, plant=tuple(sc.plant))
    source = rsvqa_json.read_dataset(root, s.variant)
    identity = {"data": synthetic.read_manifest(root), "seed": sc.seed,
                "version": shortcut_report.VERSION}
    identity_path = os.path.join(stage_dir, "identity.json")
    if storage.read_json(identity_path) != identity:
      if os.path.isdir(runs_dir):
        self.progress(f"{runs_dir}: trained on an earlier benchmark; removed")
        shutil.rmtree(runs_dir)
      manifest = shortcut_report.create(source, bench, seed=sc.seed, log=self.progress)
      storage.write_json(identity_path, identity)
    else:
      manifest = shortcut_report.ensure(source, bench, seed=sc.seed, log=self.progress)
    if time.time() - started > 1:
      self.timings.record("data/shortcuts", time.time() - started)
    data_root = os.path.join(bench, "data")
    ds = rsvqa_json.read_dataset(data_root, s.variant)
    feats = self.features(ds, data_root, s.variant)
    lm, weights = sc.language_model, sc.lm_weights
    checkpoint = self.lm_checkpoint(lm, ds)
    models = []
    for role in ROLES:
      runs = []
      for seed in sc.seeds:
        workdir = os.path.join(runs_dir, run_name(lm, weights, role), f"seed{seed}")
        label = os.path.relpath(workdir, self.dir)
        cfg = self.run_config(lm, weights, role, seed, data_root, s.variant, checkpoint)
        self.run_one(cfg, workdir, ds, feats, label, attack=False)
        path = os.path.join(shortcut_eval.folder(workdir), "shortcuts.json")
        result = storage.read_json(path)
        if not result or (sc.ood_selection and "selection" not in result):
          started = time.time()
          shortcut_eval.evaluate(workdir, bench, ood_selection=sc.ood_selection, dataset=ds,
                                 features=feats)
          self.timings.record(f"shortcut_eval/{label}", time.time() - started)
          result = storage.read_json(path)
        runs.append(result)
      models.append({"role": role, "runs": runs,
                     "label": f"{s.lm[lm].label} {weights}, {ROLE_LABELS[role]}"})
    self.progress(f"shortcuts stage: {bench} scored")
    return {"benchmark": bench, "plant": identity["data"].get("plant", []),
            "seeds": list(sc.seeds), "min_questions": sc.min_questions,
            "questions": manifest["questions"], "ood": manifest["ood"], "models": models}

  # The protocol.

  def run(self):
    s = self.s
    if s.compilation_cache:
      jax.config.update("jax_compilation_cache_dir", os.path.join(self.cache, "xla"))
      jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
      jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    self.progress(f"study in {self.dir}")
    ds, root, name = self.dataset(balanced=False)
    self.progress(f"dataset {root}: " + ", ".join(f"{k} {len(v)}" for k, v in ds.splits.items()))
    if s.split not in ds.splits:
      raise RSVQAError(f"config study.split={s.split}: the dataset has {sorted(ds.splits)}")
    feats = self.features(ds, root, name)
    cells = [(lm, w) for lm in s.language_models for w in s.lm_weights]
    results = self.grid(os.path.join(self.dir, "runs"), cells, s.seeds, ds, root, name, feats)
    table2 = self.table2(os.path.join(self.dir, "runs"), results, ds, root, name, feats)
    dataset_analysis = self.analyse(ds, name)
    balanced = None
    if s.synthetic and s.balanced.enabled:
      bds, broot, bname = self.dataset(balanced=True)
      self.progress(f"balanced dataset {broot}: "
                    + ", ".join(f"{k} {len(v)}" for k, v in bds.splits.items()))
      bfeats = self.features(bds, broot, bname)
      bcells = [(s.balanced.language_model, s.balanced.lm_weights)]
      bresults = self.grid(os.path.join(self.dir, "balanced", "runs"), bcells, s.balanced.seeds,
                           bds, broot, bname, bfeats)
      balanced = {"cells": bresults, "analysis": self.analyse(bds, bname, "balanced_"),
                  "sizes": {k: len(v) for k, v in bds.splits.items()}}
    shortcut_stage = self.shortcuts() if self.runs_shortcuts() else None
    study = {"dataset": {"name": name, "root": root, "label": tables.dataset_label(name),
                         "sizes": {k: len(v) for k, v in ds.splits.items()}},
             "split": s.split, "seeds": list(s.seeds), "repeats": s.repeats,
             "adversarial": list(s.adversarial), "adv_pool": s.adv_pool, "cells": results,
             "table2": table2, "fusion": FUSION_LABELS[s.fusion], "analysis": dataset_analysis,
             "balanced": balanced, "timings": self.timings.values,
             "image_encoder": self.describe_image_encoder(), "settings": self.settings(),
             "min_questions": s.min_questions, "reading": s.reading.to_dict(),
             "trained_this_call": self.trained}
    study["shortcuts"] = shortcut_stage
    if self.runs_grounding():
      from rsvqa_jax.eval import grounding  # pylint: disable=g-import-not-at-top
      study["grounding"] = grounding.study_stage(self, results, ds, feats)
    if "answerability" in self.config and self.config.answerability.study.enabled:
      from rsvqa_jax.eval import answerability  # pylint: disable=g-import-not-at-top
      study["answerability"] = answerability.study_stage(self)  # DIR/answerability/
    storage.write_json(os.path.join(self.dir, "study.json"),
                       json.loads(json.dumps(study, default=_jsonable)))
    path = report.write_report(self.dir, study)
    self.progress(f"report written: {path}")
    return study

  def settings(self):
    """[(setting, what this study's models were trained with, the paper's)] for the report."""
    s, c = self.s, self.config
    rows = []
    if s.synthetic:
      data = (f"synthetic {s.variant.upper()}: {s.images} images x {s.questions_per_image} "
              f"questions, seed {s.data_seed}, prior strength {s.prior_strength}"
              + (f"; balanced twin {s.balanced.images} x {s.balanced.questions_per_image}"
                 if s.balanced.enabled else ""))
    else:
      data = f"{tables.dataset_label(c.data.name)} at {c.data.root}"
    rows.append(("dataset", data))
    image = c.image
    if image.arch == "synthetic_resnet":
      p, made = image.pretrain, self.describe_image_encoder()
      encoder = (f"synthetic ResNet-{p.depth} (width {p.width}, {8 * p.width}-d) at {p.image_size} "
                 f"px, pretrained {p.epochs} epochs (batch {p.batch_size}, lr {p.learning_rate:g}) "
                 "on the train images' land cover, frozen")
      if made.get("val_presence_accuracy") is not None:
        encoder += (f"; land-cover presence on val {100 * made['val_presence_accuracy']:.1f}% "
                    f"(majority {100 * made['val_majority_accuracy']:.1f}%)")
    else:
      encoder = f"{image.arch} from {image.checkpoint or 'random init'}, frozen"
    rows.append(("image encoder", encoder))
    for lm in dict.fromkeys(list(s.language_models) + [self.row_lm(r) for r in s.table2_rows]):
      e = s.lm[lm]
      sizes = ", ".join(f"{k} {e[k]}" for k in ("word_dim", "dim", "layers", "heads", "hidden_dim",
                                                "update_bias")
                        if k in e)
      weights = e.checkpoint or f"random init ({sizes})"
      rows.append((lm, f"{e.label}: {e.encoder}, {weights}; fine-tuning lr {e.text_lr:g}"))
    m = c.model
    fusions = sorted({s.fusion} | {parse_row(r)[2] or "mult" for r in s.table2_rows})
    mutan = f"; MUTAN rank {m.mutan_rank} x {m.mutan_dim}" if "mutan" in fusions else ""
    rows.append(("fusion", f"{', '.join(FUSION_LABELS[f] for f in fusions)}; projections "
                           f"{m.hidden_dim} (tanh){mutan}"))
    rows.append(("classifier", f"FC {m.classifier_dim}, then the answers"))
    rows.append(("dropout", f"{m.dropout:g}"))
    rows.append(("optimiser", f"{c.optim.name}, lr {c.optim.lr:g}"))
    epochs = f"{c.train.num_epochs}" + (f" (frozen language models: {s.frozen_epochs})"
                                        if s.frozen_epochs else "")
    rows.append(("batch / epochs", f"{c.train.batch_size} / {epochs}"))
    rows.append(("seeds", ", ".join(map(str, s.seeds))))
    rows.append(("adversarial", f"{', '.join(s.adversarial)}: K = {s.repeats} draws per question "
                                f"(pool: {s.adv_pool}, seed {s.adv_seed})"))
    if BASELINE in s.table2_rows:
      rows.append(("baseline", f"{s.baseline.label}: {s.baseline.language_model}, frozen, e-mult, "
                               f"with {', '.join(s.baseline.overrides) or 'no other setting'}"))

    def paper(key):
      if key in s.lm:  # a language model: the paper's of its family
        key = "skipthoughts" if s.lm[key].encoder == "skipthoughts" else "distilbert"
      return PAPER_SETTINGS.get(key, "")
    return [(key, value, paper(key)) for key, value in rows]

  def describe_image_encoder(self):
    image = config_lib.image_config(self.config.image, self.cache)
    if image.arch == "synthetic_resnet":
      manifest = pretrain.read_manifest(image.pretrained_dir)
      out = {"arch": "synthetic_resnet"}
      if manifest:
        val = manifest["metrics"].get("val", {})
        out.update(depth=manifest["depth"], width=manifest["width"],
                   image_size=manifest["image_size"],
                   train_images=manifest["dataset"]["train_images"],
                   val_presence_accuracy=val.get("presence_accuracy"),
                   val_majority_accuracy=val.get("majority_accuracy"))
      return out
    return {"arch": image.arch, "checkpoint": image.checkpoint or "random init"}

  def analyse(self, ds, name, prefix=""):
    """The dataset analysis of the evaluated split (Tables 3 and 4 without a model); Figure 7.

    The model columns of Table 3 (mean (std) over seeds and adversarial draws, as Table 6) are
    the report's (bias/report.py), from the runs' own accuracy files.
    """
    split = self.s.split
    fit, _ = analysis.default_splits(ds)
    result = analysis.analyze(ds[fit], ds[split], templates=name == "lr")
    label = tables.dataset_label(name)
    out_dir = os.path.join(self.dir, "analysis")
    main, objects, _ = tables.write_analysis(result, label, out_dir, prefix)
    figure = os.path.join(self.dir, "figures", f"{prefix}answer_distribution.png")
    plots.answer_distribution(analysis.ordered_splits(ds), figure,
                              title=f"{label}{' (balanced)' if prefix else ''}: answers per "
                                    "question type and split")
    self.progress(f"dataset analysis{' (balanced)' if prefix else ''} written to {out_dir}")
    rows = {r.label: {"n": r.n, "n_answers": r.n_answers, "prior": r.prior,
                      "prior_acc": r.prior_acc, "uni_acc": r.uni_acc}
            for r in result.type_rows()}
    return {"fit_split": fit, "type_table": main, "objects_table": objects,
            "figure": os.path.relpath(figure, self.dir), "rows": rows,
            "types": list(result.types)}


def best_validation(workdir):
  """The best validation OA in a workdir's metrics.jsonl (NaN when none was written)."""
  return tables.best_validation_oa(loop.read_metrics(workdir))


def _jsonable(obj):
  if isinstance(obj, tables.Table):
    return {"caption": obj.caption, "columns": list(obj.columns),
            "rows": [[tables.cell(v) for v in row] for row in obj.rows]}
  raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def run_study(config, workdir, log=_log.info):
  """Runs (or resumes) the study of `config` in `workdir`; returns its results."""
  return Study(config, workdir, log).run()
