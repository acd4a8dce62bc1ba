"""rsvqa_jax: train remote-sensing VQA models in JAX/Flax and audit them for language bias.

The Python API (rsvqa_jax/api.py) is imported on first use, so `import rsvqa_jax` stays cheap
and starts no JAX:

  run = rsvqa_jax.load_run("runs/tiny")
  run.predict(images, questions); run.evaluate("test", adversarial_kind="random", repeats=10)
  rsvqa_jax.analyze(data_root, "lr", predictions="preds.csv")
"""

__version__ = "0.3.0"
__all__ = ["load_run", "analyze", "TrainedRun", "RSVQAError", "__version__"]


def __getattr__(name):
  if name == "RSVQAError":  # what every misuse of the API raises, in one line
    from rsvqa_jax.errors import RSVQAError  # pylint: disable=g-import-not-at-top
    return RSVQAError
  if name in ("load_run", "analyze", "TrainedRun"):
    from rsvqa_jax import caller_logging  # pylint: disable=g-import-not-at-top
    with caller_logging.kept():  # importing orbax logs through absl
      from rsvqa_jax import api  # pylint: disable=g-import-not-at-top
    return getattr(api, name)
  raise AttributeError(f"module 'rsvqa_jax' has no attribute {name!r}")


def __dir__():  # the lazy names too, for a notebook's completion
  return sorted({*globals(), *__all__})
