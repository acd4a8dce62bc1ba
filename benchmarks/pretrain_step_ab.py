"""The synthetic ResNet's pretraining step as a plain jit of its split state, against nnx.jit.

  python -m benchmarks.pretrain_step_ab [--rounds 5] [--steps 40] [--batch 32] --out DIR

features/pretrain._train_step takes (graphdef, state) and donates the state; the reference is
the step as it was, nnx.jit over the model and optimizer objects, which walks their graph at
every call. Both start from the same initial weights and batch (the default pretraining
settings: ResNet-18 of width 16 on 64x64 tiles); their first losses are compared, then each
runs `--steps` steps per round, alternating which goes first; the ratio is paired per round.
Writes DIR/results.json and DIR/results.md.
"""
import argparse
import functools
import os
import sys
import time

import jax
import numpy as np
import optax
from flax import nnx

from benchmarks import timing
from rsvqa_jax import config as config_lib
from rsvqa_jax import storage
from rsvqa_jax.features import pretrain
from rsvqa_jax.models import checkpoints, resnet


@functools.partial(nnx.jit, static_argnums=(5,))
def nnx_step(model, optimizer, images, presence, fraction, fraction_weight):
  """The reference: the step before this change, over the objects."""
  loss, grads = nnx.value_and_grad(pretrain._loss)(  # pylint: disable=protected-access
      model, images, presence, fraction, fraction_weight)
  optimizer.update(model, grads)
  return loss


def _build(cfg):
  model = checkpoints.jit_init(lambda key: resnet.ResNet(
      cfg.depth, width=cfg.width, num_classes=2 * len(pretrain.CLASSES), rngs=nnx.Rngs(key)),
                               cfg.seed)
  return model, nnx.Optimizer(
      model, optax.adamw(cfg.learning_rate, weight_decay=cfg.weight_decay), wrt=nnx.Param)


def runners(cfg, batch, steps):
  """{name: callable() -> seconds of `steps` steps}, and each one's first loss."""
  rng = np.random.default_rng(0)
  images = rng.integers(0, 256, (batch, cfg.image_size, cfg.image_size, 3), dtype=np.uint8)
  classes = len(pretrain.CLASSES)
  presence = (rng.random((batch, classes)) > 0.5).astype(np.float32)
  fraction = rng.random((batch, classes)).astype(np.float32)
  fw = float(cfg.fraction_weight)
  model, optimizer = _build(cfg)
  first = {"nnx.jit": float(nnx_step(model, optimizer, images, presence, fraction, fw))}
  graphdef, state = nnx.split(_build(cfg))
  loss, state = pretrain._train_step(  # pylint: disable=protected-access
      graphdef, state, images, presence, fraction, fw)
  first["jax.jit split"] = float(loss)
  first["state_max_abs_diff"] = max(  # after one update each: the same step
      float(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64)).max())
      for a, b in zip(jax.tree.leaves(nnx.state((model, optimizer))), jax.tree.leaves(state)))
  held = {"state": state}

  def reference():
    started = time.perf_counter()
    for _ in range(steps):
      float(nnx_step(model, optimizer, images, presence, fraction, fw))
    return time.perf_counter() - started

  def ours():
    started = time.perf_counter()
    for _ in range(steps):
      loss, held["state"] = pretrain._train_step(  # pylint: disable=protected-access
          graphdef, held["state"], images, presence, fraction, fw)
      float(loss)
    return time.perf_counter() - started

  return {"nnx.jit": reference, "jax.jit split": ours}, first


def markdown(result):
  ms = lambda s: f"{s['median']:.1f} ({s['min']:.1f}-{s['max']:.1f})"
  return "\n".join([
      "# Pretraining step: plain jit of the split state against nnx.jit", "",
      "<!-- --8<-- [start:pretrain_step_ab] -->", "",
      f"Command: `{result['command']}`", "",
      f"Machine: {timing.cpu_label(result['machine'])}, {result['machine']['usable_cpus']} "
      f"usable CPUs, jax {result['machine']['jax']}", "",
      f"Batch {result['batch']}, {result['steps']} steps per round, {result['rounds']} rounds; "
      "median (min-max)", "",
      "| nnx.jit step ms | jax.jit split step ms | nnx.jit / jax.jit split | first loss "
      "\\|diff\\| | state \\|diff\\| after one step |",
      "|---|---|---|---|---|",
      f"| {ms(result['step_ms']['nnx.jit'])} | {ms(result['step_ms']['jax.jit split'])} | "
      f"{result['ratio']['median']:.2f} ({result['ratio']['min']:.2f}-"
      f"{result['ratio']['max']:.2f}) | {result['first_loss_abs_diff']:.1e} | "
      f"{result['state_max_abs_diff']:.1e} |", "",
      "nnx.jit / jax.jit split > 1: the shipped step is faster.", "",
      "<!-- --8<-- [end:pretrain_step_ab] -->", ""])


def main(argv=None):
  argv = sys.argv[1:] if argv is None else argv
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--rounds", type=int, default=5)
  p.add_argument("--steps", type=int, default=40)
  p.add_argument("--batch", type=int, default=32)
  p.add_argument("--out", required=True)
  args = p.parse_args(argv)
  cfg = config_lib.pretrain_section()
  run, first = runners(cfg, args.batch, args.steps)
  seconds, errors = timing.alternate(run, args.rounds)
  if errors:
    raise SystemExit(f"pretrain_step_ab: {errors}")
  per_step = {k: timing.summarize([1e3 * s / args.steps for s in v], "ms")
              for k, v in seconds.items()}
  result = {"command": "python -m benchmarks.pretrain_step_ab " + " ".join(argv),
            "machine": timing.machine(), "batch": args.batch, "steps": args.steps,
            "rounds": args.rounds, "step_ms": per_step,
            "ratio": timing.paired_ratio(seconds["nnx.jit"], seconds["jax.jit split"]),
            "first_loss_abs_diff": abs(first["nnx.jit"] - first["jax.jit split"]),
            "state_max_abs_diff": first["state_max_abs_diff"]}
  os.makedirs(args.out, exist_ok=True)
  storage.write_json(os.path.join(args.out, "results.json"), result)
  with open(os.path.join(args.out, "results.md"), "w", encoding="utf-8") as f:
    f.write(markdown(result))
  print(markdown(result))


if __name__ == "__main__":
  main()
