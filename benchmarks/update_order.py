"""The train step's parameter update gated on finite gradients, against the plain update.

  python -m benchmarks.update_order [--size quick] [--rounds 7] [--dtype float32]
                                    [--rows distilbert:frozen:mutan,...] --out DIR

`train.steps.finite_update` applies the update where every gradient is finite; the flag depends
on every gradient, so each parameter's in-place update is ordered after every product reading
the parameter and XLA:CPU need not copy it. The reference is the plain optax update (patched in
while its step compiles). For each row both steps are built from the same seed and batch; the
compiled modules give the parameter elements each copies per step, the first step's losses are
compared, then the steps run in turn, alternating which goes first, in blocks of about
`--block-s` seconds; the ratio is paired per round. Writes DIR/results.json and DIR/results.md.
"""
import argparse
import math
import os
import re
import sys
from unittest import mock

import optax

from benchmarks import inputs, timing, train_steps
from rsvqa_jax import host_memory, storage
from rsvqa_jax.train import steps as steps_lib

ROWS = ("distilbert:frozen:mult", "distilbert:frozen:mutan", "skipthoughts:frozen:mult",
        "skipthoughts:frozen:mutan", "distilbert:finetuned:mult", "skipthoughts:finetuned:mult")
_PARAM_COPY = re.compile(r"= \w+\[([\d,]*)\]\S* copy\(%state_params")


def plain_update(optimizer, grads, opt_state, params):
  """The update as it was: optax's, whatever the gradients."""
  updates, opt_state = optimizer.update(grads, opt_state, params)
  return optax.apply_updates(params, updates), opt_state, steps_lib.all_finite(grads)


def copied_param_shapes(hlo_text):
  """Shapes of the parameters a compiled train step copies before updating them in place."""
  return [tuple(int(d) for d in dims.split(",") if d) for dims in _PARAM_COPY.findall(hlo_text)]


def copied_param_elements(hlo_text):
  """Elements of the parameters a compiled train step copies before updating them in place."""
  return sum(math.prod(shape) for shape in copied_param_shapes(hlo_text))


class _Contender:
  """One train step of a row, its compiled module read and its first loss kept."""

  def __init__(self, row, size, questions, batch, dtype, update):
    lm, mode, fusion = row.split(":")
    frozen = mode == "frozen"
    model, q_dim = train_steps.jax_model(lm, frozen, fusion, size, questions)
    batch_np = train_steps.batch_for(lm, frozen, q_dim, questions, batch)
    with mock.patch.object(steps_lib, "finite_update", update):
      self.runner = train_steps.JaxStep(model, frozen, batch_np, compute_dtype=dtype)
      self.runner.step = self.runner.step.lower(self.runner.state, self.runner.batch).compile()
    self.runner.warmup()  # the compiled step read below, compiled once
    self.copied = copied_param_elements(self.runner.step.as_text())
    self.first_loss = float(self.runner.metrics["loss"])
    self.steps = 1

  def calibrate(self, block_s):
    seconds = self.runner.block(1)
    self.steps = max(1, round(block_s / seconds))

  def block(self):
    return self.runner.block(self.steps) / self.steps


def measure_row(row, size, questions, batch, dtype, rounds, block_s):
  """Both steps of one row LM:MODE:FUSION: copies, first losses and paired times."""
  contenders = {name: _Contender(row, size, questions, batch, dtype, update) for name, update in
                (("gated", steps_lib.finite_update), ("plain", plain_update))}
  for c in contenders.values():
    c.calibrate(block_s)
  seconds, errors = timing.alternate({k: c.block for k, c in contenders.items()}, rounds)
  gated, plain = contenders["gated"], contenders["plain"]
  return {"row": row, "errors": errors,
          "step_ms": {k: timing.summarize([s * 1e3 for s in t], "ms") for k, t in seconds.items()},
          "plain / gated": timing.paired_ratio(seconds["plain"], seconds["gated"]),
          "copied_param_mb": {k: c.copied * 8 / 1e6 for k, c in contenders.items()},
          "trainable_params": gated.runner.trainable_params(),
          "first_loss_abs_diff": abs(gated.first_loss - plain.first_loss)}


def markdown(result):
  lines = ["# The parameter update gated on finite gradients, against the plain update", "",
           "<!-- --8<-- [start:update_order] -->", "",
           f"Command: `{result['command']}`", "",
           f"CPU: {result['cpu']}, {result['machine']['usable_cpus']} usable cores, jax "
           f"{result['machine']['jax']}; load average at start "
           f"{', '.join(f'{x:.1f}' for x in result['machine'].get('load_average', ()))}", "",
           f"Compute dtype {result['compute_dtype']}, batch {result['batch']}, {result['size']} "
           f"sizes, {result['rounds']} rounds; median (min-max)", "",
           "| row | trainable params | params copied per step (MB moved): plain / gated "
           "| plain step ms | gated step ms | plain / gated | first loss \\|diff\\| |",
           "|---|---|---|---|---|---|---|"]
  for r in result["rows"]:
    ms, ratio, mb = r["step_ms"], r["plain / gated"], r["copied_param_mb"]
    fmt = lambda s: f"{s['median']:.3g} ({s['min']:.3g}-{s['max']:.3g})"
    lines.append(f"| {r['row']} | {r['trainable_params']:,} | {mb['plain']:.0f} / "
                 f"{mb['gated']:.0f} | {fmt(ms['plain'])} | {fmt(ms['gated'])} | "
                 f"{fmt(ratio)} | {r['first_loss_abs_diff']:.1e} |")
  lines += ["", "- MB moved: 8 bytes per copied element (read and written once)",
            "- plain / gated > 1: the gated step is faster", "",
            "<!-- --8<-- [end:update_order] -->", ""]
  return "\n".join(lines)


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--size", default="quick", choices=["toy", "quick", "full"])
  parser.add_argument("--rows", default=",".join(ROWS), help="comma-separated LM:MODE:FUSION")
  parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
  parser.add_argument("--rounds", type=int, default=7)
  parser.add_argument("--block-s", type=float, default=0.3)
  parser.add_argument("--batch", type=int, default=inputs.BATCH)
  parser.add_argument("--out", required=True, help="folder for results.json and results.md")
  args = parser.parse_args(argv)
  host_memory.keep_freed_memory()
  size, questions = train_steps.sizes(args.size), inputs.make_questions(args.batch)
  info = timing.machine()
  rows = []
  for row in args.rows.split(","):
    rows.append(measure_row(row, size, questions, args.batch, args.dtype, args.rounds, args.block_s))
    r = rows[-1]["plain / gated"]
    print(f"{row}: plain / gated {r['median']:.3f} ({r['min']:.3f}-{r['max']:.3f}), copied MB "
          f"{rows[-1]['copied_param_mb']}", flush=True)
  result = {"command": "python -m benchmarks.update_order " + " ".join(argv or sys.argv[1:]),
            "machine": info, "cpu": timing.cpu_label(info), "size": args.size,
            "compute_dtype": args.dtype, "batch": args.batch, "rounds": args.rounds,
            "rows": rows}
  os.makedirs(args.out, exist_ok=True)
  storage.write_json(os.path.join(args.out, "results.json"), result)
  with open(os.path.join(args.out, "results.md"), "w", encoding="utf-8") as f:
    f.write(markdown(result))


if __name__ == "__main__":
  main()
