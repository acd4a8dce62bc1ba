"""bf16 weight gradients on XLA:CPU: which operand of x.T @ dy is transposed in memory.

  python -m benchmarks.weight_gradients [--size quick] [--rounds 7] [--products M,K,N;...]
                                        [--rows distilbert:finetuned:mult,...] --out DIR

A layer's weight gradient x.T @ dy contracts both operands over their major axis (the batch's
rows); XLA:CPU computes such a bf16 product in float32 unless its left operand is transposed in
memory first, and its bf16 transposes are slow. `models/matmul` puts the output gradient dy on
the left, and transposes the float32 result after, when that moves fewer elements
(`matmul.output_gradient_first`); the reference transposes x whatever the sizes (the rule
patched to answer no while its step compiles). Timed in one process, in turn, alternating
which goes first, the ratio paired per round:
- "products": the weight gradient alone, x [M, K] and dy [M, N] in bf16 to a float32 [K, N],
  jitted both ways; the largest difference of the two results is reported.
- "transposes": a [M, K] array transposed in memory as the rule's left operand is
  (matmul._contracted_minor), in bf16 and in float32: the per-element costs behind
  `matmul.BF16_TRANSPOSE_COST`.
- each row LM:MODE:FUSION: the bf16 train step both ways, in blocks of about `--block-s`
  seconds; the first step's losses are compared, and the weight gradients that put dy first
  are counted while the step compiles.
Writes DIR/results.json and DIR/results.md.
"""
import argparse
import time
from unittest import mock

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks import step_ab, timing
from rsvqa_jax.models import matmul

ROWS = ("distilbert:finetuned:mult", "roberta:finetuned:mult", "distilbert:frozen:mutan")
# A small layer, a middle one, and DistilBERT's second FFN layer at batch 70 x 32 tokens.
PRODUCTS = ((64, 96, 8), (256, 512, 32), (2240, 3072, 768))
CONTENDERS = ("output_gradient_first", "input_first")


class _Rule:
  """matmul.output_gradient_first as it is, or answering no (`on` False); counts its yeses."""

  def __init__(self, on, rule=matmul.output_gradient_first):
    self.on, self.rule, self.yes = on, rule, 0

  def __call__(self, *args):
    first = self.on and self.rule(*args)
    self.yes += first
    return first

  def patch(self):
    return mock.patch.object(matmul, "output_gradient_first", self)


def measure_product(shape, rounds, seed=0):
  """The weight gradient of x [M, K] and dy [M, N] alone, both ways."""
  m, k, n = shape
  rng = np.random.default_rng(seed)
  x = jnp.asarray(rng.normal(size=(m, k)), jnp.bfloat16)
  dy = jnp.asarray(rng.normal(size=(m, n)), jnp.bfloat16)
  fns, results, rules = {}, {}, {}
  for name in CONTENDERS:
    rules[name] = _Rule(name == "output_gradient_first")
    with rules[name].patch():
      fn = jax.jit(lambda x, dy: matmul._right_gradient("mk", "mn", "kn", x, dy, jnp.float32))  # pylint: disable=protected-access
      fns[name] = fn.lower(x, dy).compile()
    results[name] = np.asarray(fns[name](x, dy))

  seconds, errors = timing.alternate({k: _timed(f, x, dy) for k, f in fns.items()}, rounds)
  return {"shape": list(shape), "errors": errors,
          "ms": {k: timing.summarize([s * 1e3 for s in t], "ms") for k, t in seconds.items()},
          "input_first / output_gradient_first": timing.paired_ratio(
              seconds["input_first"], seconds["output_gradient_first"]),
          "output_gradient_first_products": rules["output_gradient_first"].yes,
          "max_abs_diff": float(np.abs(results["input_first"] -
                                       results["output_gradient_first"]).max())}


def _timed(fn, *args):
  def run():
    start = time.perf_counter()
    jax.block_until_ready(fn(*args))
    return time.perf_counter() - start
  return run


def measure_transposes(shape, rounds, seed=0):
  """ns per element of a [M, K] transpose in memory, bf16 and float32, and their paired ratio."""
  x = jnp.asarray(np.random.default_rng(seed).normal(size=shape[:2]), jnp.float32)
  moved = lambda a: matmul._contracted_minor("mk,mn->kn", a)[1]  # pylint: disable=protected-access
  runners = {}
  for name, dtype in (("bf16", jnp.bfloat16), ("f32", jnp.float32)):
    a = x.astype(dtype)
    fn = jax.jit(moved).lower(a).compile()
    runners[name] = _timed(fn, a)
    runners[name]()
  seconds, errors = timing.alternate(runners, rounds)
  n = shape[0] * shape[1]
  return {"shape": list(shape[:2]), "errors": errors,
          "ns_per_element": {k: timing.summarize([1e9 * s / n for s in t], "ns")
                             for k, t in seconds.items()},
          "bf16 / f32": timing.paired_ratio(seconds["bf16"], seconds["f32"])}


def measure_row(row, size, questions, batch, rounds, block_s):
  """The bf16 train step of one row both ways: paired times, first losses, swapped products."""
  rules = {name: _Rule(name == "output_gradient_first") for name in CONTENDERS}
  contenders, seconds, errors, step_ms = step_ab.race(
      row, size, questions, batch, "bfloat16", {name: rules[name].patch() for name in CONTENDERS},
      rounds, block_s)
  first, ref = contenders["output_gradient_first"], contenders["input_first"]
  return {"row": row, "errors": errors,
          "step_ms": step_ms,
          "input_first / output_gradient_first": timing.paired_ratio(
              seconds["input_first"], seconds["output_gradient_first"]),
          "output_gradient_first_products": rules["output_gradient_first"].yes,
          "first_loss_abs_diff": abs(first.first_loss - ref.first_loss)}


def markdown(result):
  title = "bf16 weight gradients: the output gradient transposed first, against the input"
  fmt = step_ab.median_range
  t = result["transposes"]
  lines = step_ab.header(title, "weight_gradients", result) + [
      f"Batch {result['batch']}, {result['size']} sizes, {result['rounds']} rounds; median "
      "(min-max)", "",
      f"Transposes in memory ({t['shape'][0]} x {t['shape'][1]}, as the left operand is): bf16 "
      f"{fmt(t['ns_per_element']['bf16'])} ns, float32 {fmt(t['ns_per_element']['f32'])} ns per "
      f"element; bf16 / float32 {fmt(t['bf16 / f32'])}", "",
      "| what | input first ms | output gradient first ms | input first / output gradient "
      "first | check |", "|---|---|---|---|---|"]
  for p in result["products"]:
    lines.append(
        f"| weight gradient x.T @ dy, x {p['shape'][0]} x {p['shape'][1]}, dy {p['shape'][0]} x "
        f"{p['shape'][2]} | {fmt(p['ms']['input_first'])} | "
        f"{fmt(p['ms']['output_gradient_first'])} | "
        f"{fmt(p['input_first / output_gradient_first'])} | max \\|diff\\| "
        f"{p['max_abs_diff']:.1e} |")
  for r in result["rows"]:
    ms = r["step_ms"]
    lines.append(f"| {r['row']} train step | {fmt(ms['input_first'])} | "
                 f"{fmt(ms['output_gradient_first'])} | "
                 f"{fmt(r['input_first / output_gradient_first'])} | first loss \\|diff\\| "
                 f"{r['first_loss_abs_diff']:.1e}; weight gradients with dy first: "
                 f"{r['output_gradient_first_products']} |")
  lines += step_ab.footer("weight_gradients", "input first / output gradient first > 1: "
                          "putting the output gradient first (models/matmul, as trained) is faster")
  return "\n".join(lines)


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  step_ab.add_options(parser, block_s=0.5)
  parser.add_argument("--rows", default=",".join(ROWS), help="comma-separated LM:MODE:FUSION")
  parser.add_argument("--products", default=";".join(",".join(map(str, p)) for p in PRODUCTS),
                      help="M,K,N;M,K,N;... (empty: none)")
  args, size, questions, info = step_ab.start(parser, argv)
  key = "input_first / output_gradient_first"
  transposes = measure_transposes(PRODUCTS[-1], args.rounds)
  print(f"transposes: bf16 / f32 {timing.ratio_text(transposes['bf16 / f32'])}", flush=True)
  products = []
  for shape in filter(None, args.products.split(";")):
    products.append(measure_product(tuple(int(v) for v in shape.split(",")), args.rounds))
    print(f"product {shape}: {key} {timing.ratio_text(products[-1][key])}", flush=True)
  rows = []
  for row in filter(None, args.rows.split(",")):
    rows.append(measure_row(row, size, questions, args.batch, args.rounds, args.block_s))
    print(f"{row}: {key} {timing.ratio_text(rows[-1][key])}", flush=True)
  record = step_ab.result("weight_gradients", argv, info, size=args.size, batch=args.batch,
                          rounds=args.rounds, transposes=transposes, products=products,
                          rows=rows)
  step_ab.write(args.out, record, markdown(record))


if __name__ == "__main__":
  main()
