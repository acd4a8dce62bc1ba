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
import math
import re
from unittest import mock

import optax

from benchmarks import step_ab, timing
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


def measure_row(row, size, questions, batch, dtype, rounds, block_s):
  """Both steps of one row LM:MODE:FUSION: copies, first losses and paired times."""
  contenders, seconds, errors, step_ms = step_ab.race(
      row, size, questions, batch, dtype,
      {name: mock.patch.object(steps_lib, "finite_update", update)
       for name, update in (("gated", steps_lib.finite_update), ("plain", plain_update))},
      rounds, block_s)
  gated, plain = contenders["gated"], contenders["plain"]
  return {"row": row, "errors": errors,
          "step_ms": step_ms,
          "plain / gated": timing.paired_ratio(seconds["plain"], seconds["gated"]),
          "copied_param_mb": {k: copied_param_elements(c.hlo) * 8 / 1e6
                              for k, c in contenders.items()},
          "trainable_params": gated.runner.trainable_params(),
          "first_loss_abs_diff": abs(gated.first_loss - plain.first_loss)}


def markdown(result):
  title = "The parameter update gated on finite gradients, against the plain update"
  lines = step_ab.header(title, "update_order", result) + [
      f"Compute dtype {result['compute_dtype']}, batch {result['batch']}, {result['size']} "
      f"sizes, {result['rounds']} rounds; median (min-max)", "",
      "| row | trainable params | params copied per step (MB moved): plain / gated "
      "| plain step ms | gated step ms | plain / gated | first loss \\|diff\\| |",
      "|---|---|---|---|---|---|---|"]
  fmt = step_ab.median_range
  for r in result["rows"]:
    ms, ratio, mb = r["step_ms"], r["plain / gated"], r["copied_param_mb"]
    lines.append(f"| {r['row']} | {r['trainable_params']:,} | {mb['plain']:.0f} / "
                 f"{mb['gated']:.0f} | {fmt(ms['plain'])} | {fmt(ms['gated'])} | "
                 f"{fmt(ratio)} | {r['first_loss_abs_diff']:.1e} |")
  lines += step_ab.footer("update_order",
                          "MB moved: 8 bytes per copied element (read and written once)",
                          "plain / gated > 1: the gated step is faster")
  return "\n".join(lines)


def main(argv=None):
  step_ab.main_over_rows(
      "update_order", __doc__, ROWS, block_s=0.3, dtype="float32", argv=argv,
      measure=lambda row, args, size, questions: measure_row(
          row, size, questions, args.batch, args.dtype, args.rounds, args.block_s),
      line=lambda r: (f"plain / gated {timing.ratio_text(r['plain / gated'])}, copied MB "
                      f"{r['copied_param_mb']}"),
      markdown=markdown)


if __name__ == "__main__":
  main()
