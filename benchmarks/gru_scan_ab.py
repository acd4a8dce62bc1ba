"""The Skip-thoughts GRU of this checkout against the same file at a git revision, in one process.

  python -m benchmarks.gru_scan_ab --against REV [--hidden 1200] [--tokens 20] [--rounds 6]
                                   --out DIR

`rsvqa_jax/models/skipthoughts.py` as committed at REV is loaded beside the checkout's (it
imports the rest of the package from the checkout), and both `gru_scan`s run on the same inputs:
with and without Bayesian masks, in float32 and bfloat16, the forward pass alone (a frozen
Bayesian uni-skip's step, question caching, evaluation) and the forward and backward pass (a
fine-tuned step's encoder). Each pair is timed in turn, alternating which goes first, in blocks
of about `--block-s` seconds; the ratio is paired per round and the largest difference of the
two results (states, or gradients of x, U and Ux) is reported. Writes DIR/results.json and
DIR/results.md.
"""
import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks import inputs, step_ab, timing
from rsvqa_jax import host_memory
from rsvqa_jax.models import skipthoughts

MODULE = "rsvqa_jax/models/skipthoughts.py"
WORD_DIM = 620


def module_at(revision):
  """The skipthoughts module as committed at `revision`, loaded under a name of its own."""
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  source = subprocess.run(["git", "show", f"{revision}:{MODULE}"], cwd=root, check=True,
                          capture_output=True, text=True).stdout
  with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False, encoding="utf-8") as f:
    f.write(source)
  spec = importlib.util.spec_from_file_location(f"skipthoughts_at_{revision}", f.name)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  os.unlink(f.name)
  return module


def gru_inputs(batch, tokens, hidden, seed=0):
  """(x, mask, weights dict, Bayesian masks) of the uni-skip's shapes; real tokens of varied
  lengths (each question 1 to `tokens` long)."""
  k = jax.random.split(jax.random.PRNGKey(seed), 6)
  lengths = np.random.default_rng(seed).integers(1, tokens + 1, batch)
  mask = jnp.asarray(np.arange(tokens)[None] < lengths[:, None], jnp.float32)
  weights = {"W": jax.random.normal(k[1], (WORD_DIM, 2 * hidden)) * 0.03,
             "U": jax.random.normal(k[2], (hidden, 2 * hidden)) * 0.03,
             "b": jnp.zeros(2 * hidden), "Wx": jax.random.normal(k[3], (WORD_DIM, hidden)) * 0.03,
             "Ux": jax.random.normal(k[4], (hidden, hidden)) * 0.03, "bx": jnp.zeros(hidden)}
  drop = jax.random.bernoulli(k[5], 0.75, (2, 3, batch, max(WORD_DIM, hidden))) / 0.75
  masks = (drop[0, :, :, :WORD_DIM], drop[1, :, :, :hidden])
  return jax.random.normal(k[0], (batch, tokens, WORD_DIM)), mask, weights, masks


def compiled(module, data, dtype, bayesian, backward):
  """A callable() running `module.gru_scan` once (blocking) and its result."""
  x, mask, w, masks = data
  masks = tuple(m.astype(dtype) for m in masks) if bayesian else None

  def states(x, U, Ux):
    return module.gru_scan(x.astype(dtype), mask, w["W"], U, w["b"], w["Wx"], Ux, w["bx"],
                           masks)[1].astype(jnp.float32)

  fn = jax.jit(jax.grad(lambda *a: jnp.sum(states(*a) ** 2), argnums=(0, 1, 2)) if backward
               else states)
  args = (x, w["U"], w["Ux"])
  result = jax.block_until_ready(fn(*args))
  return lambda: jax.block_until_ready(fn(*args)), result


def measure(against, batch, tokens, hidden, rounds, block_s):
  """One row per (masks, dtype, pass): both modules' ms, paired ratio, largest difference."""
  before = module_at(against)
  data = gru_inputs(batch, tokens, hidden)
  rows = []
  for bayesian in (False, True):
    for dtype in ("float32", "bfloat16"):
      for backward in (False, True):
        runs = {name: compiled(module, data, jnp.dtype(dtype), bayesian, backward)
                for name, module in (("before", before), ("now", skipthoughts))}
        diff = max(float(jnp.abs(a - b).max()) for a, b in
                   zip(jax.tree.leaves(runs["before"][1]), jax.tree.leaves(runs["now"][1])))
        seconds, errors = timing.alternate(
            {name: timing.timed_blocks(run, block_s) for name, (run, _) in runs.items()}, rounds)
        row = {"masks": "Bayesian" if bayesian else "none", "dtype": dtype,
               "pass": "forward and backward" if backward else "forward",
               "max_abs_diff": diff, "errors": errors,
               "ms": {k: timing.summarize([s * 1e3 for s in v], "ms")
                      for k, v in seconds.items()}}
        if len(seconds) == 2:
          row["before / now"] = timing.paired_ratio(seconds["before"], seconds["now"])
        rows.append(row)
        print(f"{row['masks']} {dtype} {row['pass']}: before / now "
              f"{timing.ratio_text(row['before / now']) if 'before / now' in row else errors}",
              flush=True)
  return rows


def markdown(result):
  lines = step_ab.header("The Skip-thoughts GRU against an earlier revision", "gru_scan_ab",
                         result) + [
      f"`gru_scan` at {result['against']} (before) and in this checkout (now): batch "
      f"{result['batch']}, up to {result['tokens']} tokens, hidden {result['hidden']}, "
      f"{result['rounds']} rounds; median (min-max)", "",
      "| masks | dtype | pass | before ms | now ms | before / now | max \\|diff\\| |",
      "|---|---|---|---|---|---|---|"]
  for r in result["rows"]:
    cells = [step_ab.median_range(r["ms"][k]) if k in r["ms"] else "-" for k in ("before", "now")]
    ratio = step_ab.median_range(r["before / now"]) if "before / now" in r else "-"
    lines.append(f"| {r['masks']} | {r['dtype']} | {r['pass']} | {' | '.join(cells)} | {ratio} "
                 f"| {r['max_abs_diff']:.1e} |")
  lines += step_ab.footer("gru_scan_ab", "before / now above 1: this checkout is faster",
                          "max |diff|: states (forward) or gradients of x, U and Ux")
  return "\n".join(lines)


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--against", required=True, help="git revision to compare with")
  parser.add_argument("--hidden", type=int, default=1200)
  parser.add_argument("--tokens", type=int, default=20)
  parser.add_argument("--batch", type=int, default=inputs.BATCH)
  parser.add_argument("--rounds", type=int, default=6)
  parser.add_argument("--block-s", type=float, default=0.5)
  parser.add_argument("--out", required=True, help="folder for results.json and results.md")
  args = parser.parse_args(argv)
  host_memory.keep_freed_memory()
  rows = measure(args.against, args.batch, args.tokens, args.hidden, args.rounds, args.block_s)
  record = step_ab.result("gru_scan_ab", argv or sys.argv[1:], timing.machine(),
                          against=args.against, batch=args.batch, tokens=args.tokens,
                          hidden=args.hidden, rounds=args.rounds, rows=rows)
  step_ab.write(args.out, record, markdown(record))


if __name__ == "__main__":
  main()
