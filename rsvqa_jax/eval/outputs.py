"""Where an evaluation of a workdir writes: WORKDIR/eval/SPLIT/ for its best checkpoint,
WORKDIR/eval_last/SPLIT/ for its last one (one never overwrites the other's files).

  accuracy.json, predictions.csv                  clean evaluation (eval/accuracy.py)
  adversarial_KIND.json, adversarial_KIND_predictions.csv   adversarial testing
                                                  (eval/adversarial.py)
  counterfactual.{json,csv,md,tex}, counterfactual_edits.csv   counterfactual scene edits
                                                  (eval/counterfactual.py)
The accuracy and adversarial JSON files hold bias/metrics.accuracy_table plus what was
evaluated; their CSV files are read back by `rsvqa-jax analyze` (bias/predictions.py).
"""
import os

from rsvqa_jax.errors import RSVQAError

ROOTS = {"best": "eval", "last": "eval_last"}


def root(workdir, which="best"):
  """The folder every evaluation of checkpoint `which` ("best" or "last") writes under."""
  if which not in ROOTS:
    raise RSVQAError(f"--checkpoint {which}: choose one of {', '.join(ROOTS)}")
  return os.path.join(workdir, ROOTS[which])


def folder(workdir, split, which="best"):
  return os.path.join(root(workdir, which), split)


def accuracy_paths(workdir, split, which="best"):
  """(json path, predictions csv path) of the clean evaluation."""
  out = folder(workdir, split, which)
  return os.path.join(out, "accuracy.json"), os.path.join(out, "predictions.csv")


def adversarial_paths(workdir, split, kind, which="best"):
  """(json path, predictions csv path) of one adversarial evaluation."""
  out = folder(workdir, split, which)
  return (os.path.join(out, f"adversarial_{kind}.json"),
          os.path.join(out, f"adversarial_{kind}_predictions.csv"))
