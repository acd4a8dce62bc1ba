"""The model's activations computed in float32 (models/activations), against jax.nn's.

  python -m benchmarks.activations_ab [--size quick] [--rounds 7] [--dtype bfloat16]
                                      [--rows distilbert:finetuned:mult,...] --out DIR

models/activations evaluates GELU, tanh, sigmoid and SiLU in float32 whatever the input dtype
and keeps one slope array for the backward pass. The reference is the same step with jax.nn's
functions patched into that module while it compiles (in the input's dtype, differentiated by
JAX). For each row both steps are built from the same seed and batch, their first losses are
compared, then they run in turn, alternating which goes first, in blocks of about `--block-s`
seconds; the ratio is paired per round. Writes DIR/results.json and DIR/results.md.
"""
import contextlib
from unittest import mock

import jax
import jax.numpy as jnp

from benchmarks import step_ab, timing
from rsvqa_jax.models import activations

ROWS = ("distilbert:finetuned:mult", "skipthoughts:finetuned:mult", "distilbert:frozen:mult",
        "distilbert:frozen:mutan")
JAX_NN = {"gelu": lambda x: jax.nn.gelu(x, approximate=False),
          "gelu_tanh": lambda x: jax.nn.gelu(x, approximate=True),
          "silu": jax.nn.silu, "tanh": jnp.tanh, "sigmoid": jax.nn.sigmoid}


def measure_row(row, size, questions, batch, dtype, rounds, block_s):
  """Both steps of one row LM:MODE:FUSION: first losses and paired times."""
  contenders, seconds, errors, step_ms = step_ab.race(
      row, size, questions, batch, dtype,
      {"float32": contextlib.nullcontext(), "jax.nn": mock.patch.multiple(activations, **JAX_NN)},
      rounds, block_s)
  ours, reference = contenders["float32"], contenders["jax.nn"]
  return {"row": row, "errors": errors,
          "step_ms": step_ms,
          "jax.nn / float32": timing.paired_ratio(seconds["jax.nn"], seconds["float32"]),
          "first_loss_abs_diff": abs(ours.first_loss - reference.first_loss)}


def markdown(result):
  title = "Activations computed in float32, against jax.nn's"
  lines = step_ab.header(title, "activations_ab", result) + [
      f"Compute dtype {result['compute_dtype']}, batch {result['batch']}, {result['size']} "
      f"sizes, {result['rounds']} rounds; median (min-max)", "",
      "| row | jax.nn step ms | float32 step ms | jax.nn / float32 | first loss \\|diff\\| |",
      "|---|---|---|---|---|"]
  fmt = step_ab.median_range
  for r in result["rows"]:
    ms = r["step_ms"]
    lines.append(f"| {r['row']} | {fmt(ms['jax.nn'])} | {fmt(ms['float32'])} | "
                 f"{fmt(r['jax.nn / float32'])} | {r['first_loss_abs_diff']:.1e} |")
  lines += step_ab.footer("activations_ab",
                          "jax.nn / float32 > 1: the step with models/activations is faster")
  return "\n".join(lines)


def main(argv=None):
  step_ab.main_over_rows(
      "activations_ab", __doc__, ROWS, block_s=0.5, dtype="bfloat16", argv=argv,
      measure=lambda row, args, size, questions: measure_row(
          row, size, questions, args.batch, args.dtype, args.rounds, args.block_s),
      line=lambda r: f"jax.nn / float32 {timing.ratio_text(r['jax.nn / float32'])}",
      markdown=markdown)


if __name__ == "__main__":
  main()
