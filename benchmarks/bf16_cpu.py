"""bfloat16 on a CPU: what one product and a fine-tuned DistilBERT step reach, in one process.

  python -m benchmarks.bf16_cpu [--n 2048] [--rounds 5] [--step] [--layers 6] [--batch 70]
                                [--torch] --out FILE.json

Products: one n^3 matmul each of JAX bf16 x bf16 -> bf16, JAX bf16 x bf16 accumulated in float32
(`preferred_element_type`, what models/matmul does), JAX float32, and with --torch PyTorch bf16
and float32. Step (--step): the fine-tuned DistilBERT e-mult train step (benchmarks.train_steps)
in float32, in compute_dtype bfloat16 through models/matmul, and in compute_dtype bfloat16 with
models/matmul's float32 accumulation switched off while compiling (the bf16 path before it);
with --torch also PyTorch eager in float32 and under bf16 autocast. Contenders run in turn,
JAX first in odd rounds and PyTorch first in even ones (timing.round_order); ratios are paired
per round. The CPU's model and its bf16 units (AMX, AVX512-BF16) are recorded with the figures.
"""
import argparse
import time
from unittest import mock

from benchmarks import inputs, timing, train_steps
from rsvqa_jax import storage
from rsvqa_jax.models import matmul as matmul_lib


def _jax_products(n):
  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  a32, b32 = timing.product_operands(n, n, n)
  a16, b16 = a32.astype(jnp.bfloat16), b32.astype(jnp.bfloat16)
  calls = {
      "jax bf16 -> bf16": (jax.jit(jnp.matmul), (a16, b16)),
      "jax bf16 -> f32 accumulation": (jax.jit(lambda x, y: jnp.matmul(
          x, y, preferred_element_type=jnp.float32)), (a16, b16)),
      "jax f32": (jax.jit(jnp.matmul), (a32, b32)),
  }
  runners = {}
  for name, (f, args) in calls.items():
    jax.block_until_ready(f(*args))
    runners[name] = lambda f=f, args=args: timing.time_block(
        lambda: jax.block_until_ready(f(*args)), 1)
  return runners


def _torch_products(n, torch):
  a32, b32 = torch.randn(n, n), torch.randn(n, n)
  a16, b16 = a32.bfloat16(), b32.bfloat16()
  runners = {}
  for name, (a, b) in {"torch bf16": (a16, b16), "torch f32": (a32, b32)}.items():
    torch.matmul(a, b)
    runners[name] = lambda a=a, b=b: timing.time_block(lambda: torch.matmul(a, b), 1)
  return runners


def products(n, rounds, torch=None):
  """{name: GFLOP/s summary} of one n^3 product per contender, alternated over `rounds`."""
  runners = _jax_products(n)
  if torch is not None:
    runners.update(_torch_products(n, torch))
  seconds, errors = timing.alternate(runners, rounds)
  out = {name: timing.summarize([2.0 * n**3 / s / 1e9 for s in t], "GFLOP/s")
         for name, t in seconds.items()}
  return out, errors


class _PlainBf16Step(train_steps.JaxStep):
  """The bf16 JaxStep compiled with models/matmul's float32 accumulation off (the old path)."""

  def warmup(self):
    with mock.patch.object(matmul_lib, "accumulates_in_float32", lambda dtype: False):
      return super().warmup()


def step(layers, batch, rounds, torch=None, mode="full", log=lambda message: None):
  """samples/s of the fine-tuned DistilBERT e-mult step per contender, and paired ratios
  (`mode`: the train_steps sizes, "toy" to check the harness)."""
  size = train_steps.sizes(mode)
  size["bert_layers"] = {**size["bert_layers"], "distilbert": layers}
  questions = inputs.make_questions(batch)

  def jax_step(cls, dtype):
    model, q_dim = train_steps.jax_model("distilbert", False, "mult", size, questions)
    batch_np = train_steps.batch_for("distilbert", False, q_dim, questions, batch)
    return cls(model, False, batch_np, compute_dtype=dtype), batch_np

  contenders = {}
  contenders["jax float32"], batch_np = jax_step(train_steps.JaxStep, "float32")
  contenders["jax bfloat16 (f32 accumulation)"], _ = jax_step(train_steps.JaxStep, "bfloat16")
  contenders["jax bfloat16 (plain, before)"], _ = jax_step(_PlainBf16Step, "bfloat16")
  if torch is not None:
    for name, autocast in (("torch eager float32", None),
                           ("torch eager bf16 autocast", torch.bfloat16)):
      contenders[name] = train_steps.TorchStep(
          train_steps.torch_model("distilbert", False, "mult", size, questions), batch_np,
          False, "cpu", autocast)
  warmup = {}
  for name, c in contenders.items():
    warmup[name] = c.warmup()
    log(f"  warm-up {name}: {warmup[name]:.1f} s")
  seconds, errors = timing.alternate({k: (lambda c=c: c.block(1)) for k, c in
                                      contenders.items()}, rounds)
  rates = {k: timing.summarize([batch / s for s in t], "samples/s") for k, t in seconds.items()}
  base = seconds.get("jax float32")
  ratios = {f"{k} / jax float32": timing.paired_ratio(base, t) for k, t in seconds.items()
            if base and k != "jax float32"}
  if torch is not None and "jax bfloat16 (f32 accumulation)" in seconds:
    for other in ("torch eager float32", "torch eager bf16 autocast"):
      if other in seconds:
        ratios[f"jax bfloat16 (f32 accumulation) / {other}"] = timing.paired_ratio(
            seconds[other], seconds["jax bfloat16 (f32 accumulation)"])
  return {"layers": layers, "batch": batch, "tokens": list(batch_np["tokens"].shape),
          "warmup_s": warmup, "samples_s": rates, "speedups": ratios, "errors": errors}


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--n", type=int, default=2048)
  parser.add_argument("--rounds", type=int, default=5)
  parser.add_argument("--step", action="store_true")
  parser.add_argument("--layers", type=int, default=6)
  parser.add_argument("--batch", type=int, default=inputs.BATCH)
  parser.add_argument("--torch", action="store_true")
  parser.add_argument("--out", required=True)
  args = parser.parse_args(argv)
  torch = None
  if args.torch:
    import torch  # pylint: disable=g-import-not-at-top
    timing.configure_torch(torch)
  info = timing.machine()
  result = {"machine": info, "cpu": timing.cpu_label(info), "n": args.n, "rounds": args.rounds}
  start = time.perf_counter()
  result["products_gflop_s"], result["product_errors"] = products(args.n, args.rounds, torch)
  print(result["cpu"])
  for name, s in result["products_gflop_s"].items():
    print(f"  {args.n}^3 {name}: {s['median']:.1f} GFLOP/s ({s['min']:.1f}-{s['max']:.1f})")
  if args.step:
    result["step"] = step(args.layers, args.batch, args.rounds, torch,
                          log=lambda message: print(message, flush=True))
    for name, s in result["step"]["samples_s"].items():
      print(f"  step {name}: {s['median']:.2f} samples/s ({s['min']:.2f}-{s['max']:.2f})")
    for name, s in result["step"]["speedups"].items():
      print(f"  {name}: {s['median']:.2f}x ({s['min']:.2f}-{s['max']:.2f})")
  result["wall_s"] = time.perf_counter() - start
  storage.write_json(args.out, result)


if __name__ == "__main__":
  main()
