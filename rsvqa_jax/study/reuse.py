"""Whether an evaluation file a rerun finds stands for the one the study would compute now.

A file written with other settings (study.repeats, adv_pool or adv_seed changed since, or
`rsvqa-jax evaluate --checkpoint last` over a run's own files) is computed again, so the report
always describes what was computed; the run's progress line says why. So is one the run has
outgrown (`behind`): made before its training ended, or of a best checkpoint since replaced.
"""
import os

from rsvqa_jax.eval import adversarial
from rsvqa_jax.train import run_record

CHECKPOINT = "best"  # the study reads every run at its best-on-validation checkpoint
MISSING = "missing"


def accuracy_settings(split):
  """What a run's clean evaluation (eval/accuracy.py's JSON) must record to be reused."""
  return {"split": split, "checkpoint": CHECKPOINT}


def draws(s, kind):
  """K for `kind` in study section `s`: study.repeats, or 1 where every draw answers alike
  (white, black, noise: K of them would be K times the work for the same numbers)."""
  return 1 if kind in adversarial.SAME_EVERY_REPEAT else int(s.repeats)


def adversarial_settings(s, kind):
  """What a run's adversarial evaluation of `kind` (eval/adversarial.py's JSON) must record,
  for study section `s`: the settings the report states. Any count of alike draws stands for
  one (an earlier study drew study.repeats of them)."""
  wanted = {"kind": kind, "split": s.split, "checkpoint": CHECKPOINT, "repeats": draws(s, kind),
            "pool": s.adv_pool if kind == "random" else None, "seed": int(s.adv_seed)}
  if kind in adversarial.SAME_EVERY_REPEAT:
    del wanted["repeats"]
  return wanted


def behind(recorded, workdir, epochs):
  """Why an evaluation (as read) of the study's settings still does not stand for the run in
  `workdir`, trained for `epochs`: "" when it does. A run stopped early and evaluated by hand
  was attacked and averaged as it was, and an evaluation of a best step the run has since
  replaced (it trained on) kept its old scores, where `tables` leaves both out."""
  folder = os.path.join(workdir, "checkpoints")
  done = run_record.epochs_trained(folder)
  if done is not None and done < epochs:
    return f"the run had trained {done} of {epochs} epochs"
  best = run_record.best_step(folder)
  if recorded and best is not None and recorded.get("step") != best:
    return f"step {recorded.get('step')} scored, the best checkpoint is now step {best}"
  return ""


def stale(recorded, wanted):
  """Why `recorded` (an evaluation JSON as read, None when absent) cannot be reused as `wanted`:
  "" when it can, MISSING, or the first setting that differs ("repeats 10 recorded, 3 now")."""
  if not recorded:
    return MISSING
  for key, value in wanted.items():
    if recorded.get(key, "<none>") != value:
      return f"{key} {recorded.get(key, '<none>')} recorded, {value} now"
  return ""
