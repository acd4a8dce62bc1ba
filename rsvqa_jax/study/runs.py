"""One run of a study: its training config (the study config's training keys, specialised),
then train (or resume), evaluate on the study split and, for a reference model, attack.

A run whose accuracy file records the study's evaluation (reuse.py: the best checkpoint, the
study split) is only read back; a finished run without one (or with one of another checkpoint)
is only evaluated; an unfinished one resumes from its last checkpoint (train/loop.py).
"""
import time

from rsvqa_jax import config as config_lib
from rsvqa_jax import storage
from rsvqa_jax.bias import metrics, tables
from rsvqa_jax.errors import RSVQAError
from rsvqa_jax.eval import accuracy, outputs
from rsvqa_jax.study import adversarial_tests, reuse
from rsvqa_jax.train import checkpointing, inputs, loop, metrics_log


def config_for(config, cache, lm, weights, role, seed, root, name, checkpoint, fusion=None,
               overrides=()):
  """The training config of one run: `config`'s training keys, specialised.

  `fusion`: the row's fusion (default study.fusion); `overrides`: "key=value" settings of
  the row (the baseline's), applied last.
  """
  s = config.study
  base = config_lib.to_dict(config)
  del base["study"]
  c = config_lib.from_dict(base)
  e = s.lm[lm]
  c.seed = int(seed)
  c.data.name = name
  c.data.root = root
  c.data.synthetic = False
  c.data.cache_dir = cache
  c.image = inputs.resolved_image(c, None)  # data.cache_dir is set: no workdir needed
  c.text.encoder = e.encoder
  c.text.checkpoint = checkpoint or config_lib.RANDOM
  if e.encoder == "skipthoughts" and not checkpoint:
    c.text.word_dim, c.text.hidden_dim = e.word_dim, e.hidden_dim
  frozen = weights == "frozen"
  c.text.frozen = frozen
  c.optim.text_lr = 0.0 if frozen else float(e.text_lr)
  if frozen and s.frozen_epochs:
    c.train.num_epochs = int(s.frozen_epochs)
  c.model.fusion = fusion or s.fusion
  c.model.blind = role == "blind"
  c.train.progress_bar = False
  return config_lib.apply_overrides(c, overrides)


def run_one(study, cfg, workdir, ds, feats, label, attack=True):
  """Train (or resume), evaluate and (reference models, if `attack`) adversarially test one
  run; returns its results. Counts the runs it trained in `study.trained`."""
  split = study.s.split
  acc_path, _ = outputs.accuracy_paths(workdir, split)
  checkpointing.check_or_record_config(workdir, cfg, record=False)  # loop.train records it
  recorded = storage.read_json(acc_path)
  why = (reuse.stale(recorded, reuse.accuracy_settings(split))
         or reuse.behind(recorded, workdir, cfg.train.num_epochs))
  if why:  # missing, of another checkpoint (`evaluate --checkpoint last`), of a shorter training
    started = time.time()
    summary = loop.train(cfg, workdir, dataset=ds, features=feats, log=study.progress)
    if not summary["finished"]:
      raise RSVQAError(f"{workdir}: training stopped before the end (train.stop_after_steps?)")
    if "state" in summary:
      study.trained += 1
      study.timings.record(f"train/{label}", time.time() - started)
    accuracy.evaluate(workdir, split, dataset=ds, features=feats)
    took = f"{time.time() - started:.1f}s"
    trained = "trained and " if "state" in summary else ""
    done = (f"trained and evaluated ({took})" if why == reuse.MISSING
            else f"{trained}evaluated again ({why}; {took})")
    study.progress(f"{label}: {done}, best validation OA {tables.percent(summary['best_oa'])}")
  else:
    study.progress(f"{label}: done before, skipped")
  out = {"workdir": workdir, "accuracy": metrics.from_json(storage.read_json(acc_path)),
         "val_oa": metrics_log.best_validation(workdir, cfg.data.val_split),
         "adversarial": {}}
  if attack and not cfg.model.blind:
    out["adversarial"] = adversarial_tests.attack(study, workdir, ds, feats, label,
                                                 cfg.train.num_epochs)
  return out
