"""The train step's finite-gradient check: max |g| per leaf against isfinite(g).all() per leaf.

  python -m benchmarks.finite_check [--layers 6] [--batch 70] [--rounds 4] [--dtype bfloat16]
                                    --out FILE.json

Two fine-tuned DistilBERT e-mult steps (in `--dtype`), identical except for the check: the current
`train.steps.all_finite`, and the per-leaf isfinite(g).all() it replaced (patched in while that
step compiles). They run in turn, alternating which goes first; the ratio is paired per round.
"""
import argparse
from unittest import mock

import jax
import jax.numpy as jnp

from benchmarks import inputs, timing, train_steps
from rsvqa_jax.train import steps as steps_lib


def per_leaf_all(tree):
  """The check as it was: one boolean reduction per gradient leaf."""
  return jnp.all(jnp.stack([jnp.isfinite(g).all() for g in jax.tree.leaves(tree)] or
                           [jnp.asarray(True)]))


class _PerLeafStep(train_steps.JaxStep):
  def warmup(self):
    with mock.patch.object(steps_lib, "all_finite", per_leaf_all):
      return super().warmup()


def measure(layers, batch, rounds, mode="full", compute_dtype="float32"):
  """{samples_s: {name: summary}, "max_abs / per_leaf_all": paired speed-up summary}."""
  size = train_steps.sizes(mode)
  size["bert_layers"] = {**size["bert_layers"], "distilbert": layers}
  questions = inputs.make_questions(batch)
  contenders = {}
  for name, cls in (("max_abs", train_steps.JaxStep), ("per_leaf_all", _PerLeafStep)):
    model, q_dim = train_steps.jax_model("distilbert", False, "mult", size, questions)
    batch_np = train_steps.batch_for("distilbert", False, q_dim, questions, batch)
    contenders[name] = cls(model, False, batch_np, compute_dtype=compute_dtype)
    contenders[name].warmup()
  seconds, errors = timing.alternate({k: (lambda c=c: c.block(1)) for k, c in
                                      contenders.items()}, rounds)
  return {"layers": layers, "batch": batch, "compute_dtype": compute_dtype, "errors": errors,
          "samples_s": {k: timing.summarize([batch / s for s in t], "samples/s")
                        for k, t in seconds.items()},
          "max_abs / per_leaf_all": timing.paired_ratio(seconds["per_leaf_all"],
                                                        seconds["max_abs"])}


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--layers", type=int, default=6)
  parser.add_argument("--batch", type=int, default=inputs.BATCH)
  parser.add_argument("--rounds", type=int, default=4)
  parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
  parser.add_argument("--out", required=True)
  args = parser.parse_args(argv)
  timing.report_pair(measure(args.layers, args.batch, args.rounds, compute_dtype=args.dtype),
                     "max_abs / per_leaf_all", args.out)


if __name__ == "__main__":
  main()
