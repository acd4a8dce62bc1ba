"""bf16 train step: Dense layers on float32 master weights against every parameter cast first.

  python -m benchmarks.master_weights [--lm distilbert] [--frozen] [--fusion mutan]
                                      [--size full] [--rounds 7] --out FILE.json

Two bf16 train steps of one configuration, identical except for how the parameters reach the
model: the current `train.steps.computing_model` (Dense layers cast their float32 kernels and
biases inside the product, their gradients leave the float32 accumulator), and the cast of
every trainable floating parameter but the embedding tables before the model, which it replaced
(patched in while that step compiles; each weight gradient was then rounded to bf16 and
converted back to float32). They run in turn, alternating which goes first; the ratio is paired
per round.
"""
import argparse
from unittest import mock

import jax
import jax.numpy as jnp

from benchmarks import inputs, timing, train_steps
from rsvqa_jax import host_memory
from rsvqa_jax.train import steps as steps_lib


def cast_first(state, params, dtype):
  """The model as it was: trainable floating parameters cast before it, tables excepted."""
  def cast(path, x):
    if not jnp.issubdtype(x.dtype, jnp.floating) or getattr(path[-1], "key", None) == "embedding":
      return x
    return x.astype(dtype)

  return state.model(jax.tree_util.tree_map_with_path(cast, params))


class _CastFirstStep(train_steps.JaxStep):
  def warmup(self):
    with mock.patch.object(steps_lib, "computing_model", cast_first):
      return super().warmup()


def measure(lm, frozen, fusion, rounds, mode="full"):
  """{samples_s: {name: summary}, "master / cast_first": paired speed-up summary}."""
  size = train_steps.sizes(mode)
  questions = inputs.make_questions(inputs.BATCH)
  contenders = {}
  for name, cls in (("master", train_steps.JaxStep), ("cast_first", _CastFirstStep)):
    model, q_dim = train_steps.jax_model(lm, frozen, fusion, size, questions)
    batch_np = train_steps.batch_for(lm, frozen, q_dim, questions)
    contenders[name] = cls(model, frozen, batch_np, compute_dtype="bfloat16")
    contenders[name].warmup()
  steps = 10 if frozen else 1
  seconds, errors = timing.alternate({k: (lambda c=c: c.block(steps) / steps) for k, c in
                                      contenders.items()}, rounds)
  return {"lm": lm, "frozen": frozen, "fusion": fusion, "mode": mode, "errors": errors,
          "samples_s": {k: timing.summarize([inputs.BATCH / s for s in t], "samples/s")
                        for k, t in seconds.items()},
          "master / cast_first": timing.paired_ratio(seconds["cast_first"], seconds["master"])}


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--lm", default="distilbert",
                      choices=["distilbert", "bert", "roberta", "skipthoughts"])
  parser.add_argument("--frozen", action="store_true", help="cached question vectors")
  parser.add_argument("--fusion", default="mutan", choices=["mult", "concat", "mutan"])
  parser.add_argument("--size", default="full", choices=["full", "quick"])
  parser.add_argument("--rounds", type=int, default=7)
  parser.add_argument("--out", required=True)
  args = parser.parse_args(argv)
  host_memory.keep_freed_memory()  # before JAX starts its threads, as benchmarks.run does
  timing.report_pair(measure(args.lm, args.frozen, args.fusion, args.rounds, args.size),
                     "master / cast_first", args.out)


if __name__ == "__main__":
  main()
