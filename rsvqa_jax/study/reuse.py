"""Whether an evaluation file a rerun finds stands for the one the study would compute now.

A file written with other settings (study.repeats, adv_pool or adv_seed changed since, or
`rsvqa-jax evaluate --checkpoint last` over a run's own files) is computed again, so the report
always describes what was computed; the run's progress line says why.
"""
CHECKPOINT = "best"  # the study reads every run at its best-on-validation checkpoint
MISSING = "missing"


def accuracy_settings(split):
  """What a run's clean evaluation (eval/accuracy.py's JSON) must record to be reused."""
  return {"split": split, "checkpoint": CHECKPOINT}


def adversarial_settings(s, kind):
  """What a run's adversarial evaluation of `kind` (eval/adversarial.py's JSON) must record,
  for study section `s`: the settings the report states."""
  return {"kind": kind, "split": s.split, "checkpoint": CHECKPOINT, "repeats": int(s.repeats),
          "pool": s.adv_pool if kind == "random" else None, "seed": int(s.adv_seed)}


def stale(recorded, wanted):
  """Why `recorded` (an evaluation JSON as read, None when absent) cannot be reused as `wanted`:
  "" when it can, MISSING, or the first setting that differs ("repeats 10 recorded, 3 now")."""
  if not recorded:
    return MISSING
  for key, value in wanted.items():
    if recorded.get(key, "<none>") != value:
      return f"{key} {recorded.get(key, '<none>')} recorded, {value} now"
  return ""
