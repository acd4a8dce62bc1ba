"""The whole language-bias protocol of the paper in one call (Sections 3.2-3.4 and 6.2).

For every configured language model, frozen and fine-tuned, a reference model (image + question,
e-mult fusion) and its visual-blind twin are trained over seeds and evaluated on the test split;
every reference model is tested adversarially (a random image of the split, K times; white /
black / noise when configured); the dataset is analysed (priors per type and per LR template
level) with the best-on-validation reference model's clean and adversarial predictions; a small
balanced twin of a synthetic dataset gets a reference / blind pair of its own, where the blind
model should fall to the uniform accuracy; then DIR/report.md gathers the tables and figures.

Layout of DIR:
  data/{main,balanced}/        generated synthetic datasets (official LR / HR layout)
  cache/                       feature cache, pretrained synthetic ResNet, random-init language
                               model folders, XLA compilation cache
  runs/<lm>_<frozen|finetuned>_<reference|blind>/seed<k>/   training workdirs, with eval/<split>/
  balanced/runs/...            the balanced pair, same layout
  analysis/, figures/          tables (CSV / Markdown / LaTeX) and PNGs
  study.json, timings.json, report.md
An interrupted study resumes: a run whose evaluation files exist is skipped, a finished run is
only evaluated, an unfinished one resumes from its last checkpoint (train/loop.py).

The stages are the library's own steps, composed: dataset generation and the synthetic ResNet's
pretraining (train/prepare.py), the feature cache (features/), training (train/loop.py),
evaluation and adversarial testing (eval/), analysis, tables, figures and report (bias/).
"""
import json
import os
import time

import jax
import numpy as np

from rsvqa_jax import config as config_lib
from rsvqa_jax import storage
from rsvqa_jax.bias import analysis, plots, predictions, report, tables
from rsvqa_jax.data import rsvqa_json, synthetic
from rsvqa_jax.errors import RSVQAError
from rsvqa_jax.eval import accuracy, adversarial, outputs
from rsvqa_jax.features import pretrain
from rsvqa_jax.train import checkpointing, inputs, loop, prepare

WEIGHTS = ("frozen", "finetuned")
ROLES = ("reference", "blind")
DATASET_LABELS = {"lr": "RSVQA LR", "hr": "RSVQA HR", "xben": "RSVQAxBEN"}


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
    with open(self.path, "w") as f:
      json.dump(self.values, f, indent=1)


def run_name(lm, weights, role):
  return f"{lm}_{weights}_{role}"


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
  vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [w for w in words if not w.startswith("[")]
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
    BertTokenizer(vocab={w: i for i, w in enumerate(vocab)}, do_lower_case=True).save_pretrained(tmp)
  return folder


class Study:
  """A study config bound to its folder: datasets, run configs, runs, evaluations, report."""

  def __init__(self, config, workdir, log=print):
    if "study" not in config:
      raise RSVQAError("config has no `study` section: use a study config such as "
                       "configs/study_synthetic.py")
    self.config = config
    self.s = config.study
    self.dir = os.path.abspath(workdir)
    self.cache = os.path.join(self.dir, "cache")
    os.makedirs(self.cache, exist_ok=True)
    self.progress = Progress(log)
    self.timings = Timings(os.path.join(self.dir, "timings.json"))
    self.trained = 0  # runs trained (not merely found finished) by this invocation
    self._check()

  def _check(self):
    s = self.s
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
    synthetic.ensure_synthetic(root, s.variant, images, s.data_seed, prior_strength=s.prior_strength,
                               balanced=balanced or s.balanced_data, questions_per_image=qpi)
    if time.time() - started > 1:
      self.timings.record(f"data/{'balanced' if balanced else 'main'}", time.time() - started)
    return rsvqa_json.read_dataset(root, s.variant), root, s.variant

  def lm_checkpoint(self, lm, dataset):
    """The text.checkpoint of language model `lm`: its configured one, or a random-init folder."""
    e = self.s.lm[lm]
    if e.checkpoint or e.encoder == "skipthoughts":
      return e.checkpoint
    if e.encoder != "distilbert":
      raise RSVQAError(f"config study.lm.{lm}.checkpoint is empty: random init is offered for "
                       f"distilbert only; give a local {e.encoder} Hugging Face folder")
    words = inputs.dataset_words(dataset)
    sizes = dict(dim=e.dim, layers=e.layers, heads=e.heads, hidden_dim=e.hidden_dim,
                 dropout=e.get("dropout", 0.1))
    key = storage.identity_key({"words": words, "seed": e.get("init_seed", 0), **sizes})
    folder = os.path.join(self.cache, "lm", f"{lm}_random_{key}")
    return random_distilbert(folder, words, seed=e.get("init_seed", 0), **sizes)

  def run_config(self, lm, weights, role, seed, root, name, checkpoint):
    """The training config of one run: the study config's training keys, specialised."""
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
    c.model.fusion = self.s.fusion
    c.model.blind = role == "blind"
    c.train.progress_bar = False
    return c

  # One run.

  def run_one(self, cfg, workdir, ds, feats, label):
    """Train (or resume), evaluate and adversarially test one run; returns its results."""
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
    out = {"workdir": workdir, "accuracy": storage.read_json(acc_path), "val_oa": best_validation(workdir),
           "adversarial": {}}
    if not cfg.model.blind:
      for kind in self.s.adversarial:
        json_path, _ = outputs.adversarial_paths(workdir, split, kind)
        if not os.path.exists(json_path):
          started = time.time()
          adversarial.evaluate(workdir, split, kind, repeats=self.s.repeats, seed=self.s.adv_seed,
                               dataset=ds, features=feats)
          self.timings.record(f"adversarial_{kind}/{label}", time.time() - started)
          self.progress(f"{label}: adversarial {kind} x{self.s.repeats} "
                        f"({time.time() - started:.1f}s)")
        out["adversarial"][kind] = storage.read_json(json_path)
    return out

  def grid(self, runs_dir, cells, seeds, ds, root, name, feats):
    """Results of every (lm, weights) cell: {"reference": [...], "blind": [...]} over seeds."""
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
        cell[role] = runs
      results.append(cell)
    return results

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
    dataset_analysis = self.analyse(ds, name, results)
    balanced = None
    if s.synthetic and s.balanced.enabled:
      bds, broot, bname = self.dataset(balanced=True)
      self.progress(f"balanced dataset {broot}: "
                    + ", ".join(f"{k} {len(v)}" for k, v in bds.splits.items()))
      bfeats = self.features(bds, broot, bname)
      bcells = [(s.balanced.language_model, s.balanced.lm_weights)]
      bresults = self.grid(os.path.join(self.dir, "balanced", "runs"), bcells, s.balanced.seeds,
                           bds, broot, bname, bfeats)
      balanced = {"cells": bresults, "analysis": self.analyse(bds, bname, bresults, "balanced_")}
    study = {"dataset": {"name": name, "root": root, "label": DATASET_LABELS.get(name, name),
                         "sizes": {k: len(v) for k, v in ds.splits.items()}},
             "split": s.split, "seeds": list(s.seeds), "repeats": s.repeats,
             "adversarial": list(s.adversarial), "cells": results, "analysis": dataset_analysis,
             "balanced": balanced, "timings": self.timings.values,
             "image_encoder": self.describe_image_encoder(),
             "trained_this_call": self.trained}
    with open(os.path.join(self.dir, "study.json"), "w") as f:
      json.dump(study, f, indent=1, default=_jsonable)
    path = report.write_report(self.dir, study)
    self.progress(f"report written: {path}")
    return study

  def describe_image_encoder(self):
    image = config_lib.image_config(self.config.image, self.cache)
    if image.arch == "synthetic_resnet":
      manifest = pretrain.read_manifest(image.pretrained_dir)
      out = {"arch": "synthetic_resnet"}
      if manifest:
        out.update(depth=manifest["depth"], width=manifest["width"],
                   image_size=manifest["image_size"], train_images=manifest["dataset"]["train_images"],
                   val_presence_accuracy=manifest["metrics"].get("val", {}).get("presence_accuracy"),
                   val_majority_accuracy=manifest["metrics"].get("val", {}).get("majority_accuracy"))
      return out
    return {"arch": image.arch, "checkpoint": image.checkpoint or "random init"}

  def analyse(self, ds, name, results, prefix=""):
    """Dataset analysis with the best-on-validation reference model's predictions; Figure 7."""
    split = self.s.split
    fit, _ = analysis.default_splits(ds)
    refs = [r for cell in results for r in cell["reference"]]
    best = max(refs, key=lambda r: r["val_oa"])
    evaluated = {split: ds[split]}
    _, preds_path = outputs.accuracy_paths(best["workdir"], split)
    model = predictions.load(preds_path, evaluated)[split]
    adv = None
    kind = "random" if "random" in self.s.adversarial else next(iter(self.s.adversarial), None)
    if kind:
      _, adv_path = outputs.adversarial_paths(best["workdir"], split, kind)
      adv = predictions.load(adv_path, evaluated)[split]
    result = analysis.analyze(ds[fit], ds[split], templates=name == "lr", predictions=model,
                              adversarial=adv)
    label = DATASET_LABELS.get(name, name)
    out_dir = os.path.join(self.dir, "analysis")
    main, objects, _ = tables.write_analysis(result, label, out_dir, prefix)
    figure = os.path.join(self.dir, "figures", f"{prefix}answer_distribution.png")
    plots.answer_distribution(analysis.ordered_splits(ds), figure,
                              title=f"{label}{' (balanced)' if prefix else ''}: answers per "
                                    "question type and split")
    self.progress(f"dataset analysis{' (balanced)' if prefix else ''} written to {out_dir}")
    rows = {r.label: {"prior_acc": r.prior_acc, "uni_acc": r.uni_acc} for r in result.type_rows()}
    return {"best_run": best["workdir"], "adversarial_kind": kind, "type_table": main,
            "objects_table": objects, "figure": os.path.relpath(figure, self.dir), "rows": rows}


def best_validation(workdir):
  """The best validation OA in a workdir's metrics.jsonl (NaN when none was written)."""
  try:
    with open(os.path.join(workdir, loop.METRICS_FILE)) as f:
      scores = [r["oa"] for r in map(json.loads, f) if r.get("split") != "train" and "oa" in r]
  except OSError:
    scores = []
  return max(scores, default=float("nan"))


def _jsonable(obj):
  if isinstance(obj, tables.Table):
    return {"caption": obj.caption, "columns": list(obj.columns),
            "rows": [[tables.cell(v) for v in row] for row in obj.rows]}
  raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def run_study(config, workdir, log=print):
  """Runs (or resumes) the study of `config` in `workdir`; returns its results."""
  return Study(config, workdir, log).run()
