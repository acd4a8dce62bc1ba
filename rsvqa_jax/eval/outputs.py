"""Where an evaluation of a workdir writes: WORKDIR/eval/SPLIT/.

  accuracy.json, predictions.csv                  clean evaluation (eval/accuracy.py)
  adversarial_KIND.json, adversarial_KIND_predictions.csv   adversarial testing
                                                  (eval/adversarial.py)
  counterfactual.{json,csv,md,tex}, counterfactual_edits.csv   counterfactual scene edits
                                                  (eval/counterfactual.py)
The accuracy and adversarial JSON files hold bias/metrics.accuracy_table plus what was
evaluated; their CSV files are read back by `rsvqa-jax analyze` (bias/predictions.py).
"""
import os


def folder(workdir, split):
  return os.path.join(workdir, "eval", split)


def accuracy_paths(workdir, split):
  """(json path, predictions csv path) of the clean evaluation."""
  out = folder(workdir, split)
  return os.path.join(out, "accuracy.json"), os.path.join(out, "predictions.csv")


def adversarial_paths(workdir, split, kind):
  """(json path, predictions csv path) of one adversarial evaluation."""
  out = folder(workdir, split)
  return (os.path.join(out, f"adversarial_{kind}.json"),
          os.path.join(out, f"adversarial_{kind}_predictions.csv"))
