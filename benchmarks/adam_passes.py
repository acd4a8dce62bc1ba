"""Adam's update in XLA:CPU: three passes over memory as optax writes it, against one buffer.

  python -m benchmarks.adam_passes [--shape 1200,6000] [--rounds 7] --out DIR

A frozen head's update moves 44 bytes per parameter where 28 is the floor (benchmarks.step_pieces):
XLA:CPU emits one loop fusion per output array (the two moments, then the parameter) and one
reduction for the finite-gradient check. Keeping the parameter and its two moments in one
[3, ...] buffer makes the update a single fusion of a single output, the floor's traffic. This
times, on one weight of the given shape (default: a frozen MUTAN head's largest factor), the
update as the train step runs it (`train.steps.finite_update` over optax's Adam), the same
arithmetic written out with three outputs, and two one-buffer forms (the three results stacked;
each element selecting its row's result), each donated and updated in place, in turn with the
STREAM triad over as many elements (timing.bandwidth_probe), alternating which goes first. Every
form's parameter after three updates is compared with optax's. Writes DIR/results.json and
DIR/results.md.
"""
import argparse
import functools
import math
import re

import jax
import jax.numpy as jnp
import optax

from benchmarks import step_ab, timing, train_steps
from rsvqa_jax import host_memory
from rsvqa_jax.train import steps as steps_lib

LR, B1, B2, EPS = 1e-3, 0.9, 0.999, 1e-8
_SHAPE = re.compile(r"\b[a-z]+\d*\[([\d,]*)\]")


def _adam(p, m, v, count, g):
  """Adam's new (parameter, moments, count), the parameter kept where a gradient is not finite."""
  count = count + 1
  m = B1 * m + (1 - B1) * g
  v = B2 * v + (1 - B2) * g * g
  new = p - LR * (m / (1 - B1 ** count)) / (jnp.sqrt(v / (1 - B2 ** count)) + EPS)
  return jnp.where(steps_lib.all_finite(g), new, p), m, v, count


def _stacked(buffer, count, g):
  p, m, v, count = _adam(buffer[0], buffer[1], buffer[2], count, g)
  return jnp.stack([p, m, v]), count


def _selected(buffer, count, g):
  p, m, v, count = _adam(buffer[0], buffer[1], buffer[2], count, g)
  row = jax.lax.broadcasted_iota(jnp.int32, buffer.shape, 0)
  return jnp.where(row == 0, p[None], jnp.where(row == 1, m[None], v[None])), count


def weight_sized_fusions(hlo_text, elements):
  """Fusions of a compiled module's entry computation whose output holds >= `elements` values:
  each is a pass over the weight (its scalar fusions and the reduction to a scalar are not)."""
  entry = hlo_text.split("ENTRY", 1)[1]
  return sum(" fusion(" in line and math.prod(int(d) for d in dims.split(",") if d) >= elements
             for line in entry.splitlines()
             for dims in _SHAPE.findall(line.split(" fusion(", 1)[0]))


class Form:
  """One form of the update over a weight of `shape`: its state, compiled update and fusions."""

  def __init__(self, name, shape, grad):
    self.name, self.grad = name, grad
    p = jax.random.normal(jax.random.PRNGKey(0), shape, jnp.float32)
    zeros = jnp.zeros(shape, jnp.float32)
    if name == "optax":
      optimizer = optax.adam(LR, b1=B1, b2=B2, eps=EPS)
      update = functools.partial(steps_lib.finite_update, optimizer)
      fn = lambda g, params, opt_state: update(g, opt_state, params)[:2]  # noqa: E731
      self.state, donate = ({"w": p}, optimizer.init({"w": p})), (1, 2)
      self.grad = {"w": grad}
    elif name == "three arrays":
      fn = lambda g, p, m, v, count: _adam(p, m, v, count, g)  # noqa: E731
      # two moment buffers of their own: one buffer donated twice is refused
      self.state, donate = (p, zeros, zeros + 0, jnp.float32(0)), (1, 2, 3)
    else:
      one = {"one buffer, stacked": _stacked, "one buffer, selected": _selected}[name]
      fn = lambda g, buffer, count: one(buffer, count, g)  # noqa: E731
      self.state, donate = (jnp.stack([p, zeros, zeros]), jnp.float32(0)), (1,)
    self.update = jax.jit(fn, donate_argnums=donate).lower(self.grad, *self.state).compile()
    self.fusions = weight_sized_fusions(self.update.as_text(), math.prod(shape))

  def param(self):
    if self.name == "optax":
      return self.state[0]["w"]
    return self.state[0] if self.name == "three arrays" else self.state[0][0]

  def run_once(self):
    self.state = tuple(self.update(self.grad, *self.state))
    jax.block_until_ready(self.state)


FORMS = ("optax", "three arrays", "one buffer, stacked", "one buffer, selected")


def measure(shape, rounds, block_s):
  """Per form: ms per update, its rate over the triad at 28 B/param, fusions, parity."""
  grad = jax.random.normal(jax.random.PRNGKey(1), shape, jnp.float32)
  forms = {name: Form(name, shape, grad) for name in FORMS}
  for form in forms.values():
    for _ in range(3):
      form.run_once()
  reference = forms["optax"].param()
  parity = {name: float(jnp.abs(f.param() - reference).max()) for name, f in forms.items()}
  runners = {name: timing.timed_blocks(f.run_once, block_s) for name, f in forms.items()}
  triad = timing.bandwidth_probe(math.prod(shape))
  seconds, errors = timing.alternate({**runners, "triad": lambda: 1 / triad()}, rounds)
  bandwidth = [1 / s for s in seconds.pop("triad", [])]
  adam_bytes = math.prod(shape) * train_steps.ADAM_BYTES_PER_PARAM
  rows = []
  for name, form in forms.items():
    row = {"form": name, "fusions": form.fusions, "max_abs_diff_vs_optax": parity[name]}
    if name in seconds:
      row["ms"] = timing.summarize([s * 1e3 for s in seconds[name]], "ms")
      row["update / triad"] = timing.summarize(
          [adam_bytes / s / b for s, b in zip(seconds[name], bandwidth)])
      row["optax / this"] = timing.paired_ratio(seconds["optax"], seconds[name])
    rows.append(row)
  return {"rows": rows, "errors": errors,
          "triad GB/s": timing.summarize([b / 1e9 for b in bandwidth], "GB/s")}


def markdown(result):
  shape = "x".join(str(d) for d in result["shape"])
  lines = step_ab.header("Adam's update: three passes against one buffer", "adam_passes",
                         result) + [
      f"One float32 weight of {shape}, {result['rounds']} rounds; median (min-max); triad "
      f"{step_ab.median_range(result['triad GB/s'])} GB/s", "",
      "| form | fusions | ms | update / triad | optax / this | max \\|diff\\| vs optax |",
      "|---|---|---|---|---|---|"]
  for r in result["rows"]:
    cells = [step_ab.median_range(r[k]) if k in r else "-"
             for k in ("ms", "update / triad", "optax / this")]
    lines.append(f"| {r['form']} | {r['fusions']} | {' | '.join(cells)} | "
                 f"{r['max_abs_diff_vs_optax']:.1e} |")
  errors = "; ".join(f"{k}: {v}" for k, v in result["errors"].items())
  lines += step_ab.footer(
      "adam_passes",
      "fusions: the passes over the weight, fusions of the compiled update whose output holds as "
      "many values as the weight or more (its scalar ones and the finite check's reduction not "
      "counted)",
      "update / triad: the update's rate at 28 B/param (read the parameter, the gradient and two "
      "moments, write three) over the triad bandwidth of the same round",
      "optax / this above 1: this form is faster than the update as the train step runs it",
      *([f"errors: {errors}"] if errors else []))
  return "\n".join(lines)


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--shape", default="1200,6000", help="comma-separated weight shape")
  parser.add_argument("--rounds", type=int, default=7)
  parser.add_argument("--block-s", type=float, default=0.3)
  parser.add_argument("--out", required=True, help="folder for results.json and results.md")
  args = parser.parse_args(argv)
  host_memory.keep_freed_memory()
  shape = tuple(int(d) for d in args.shape.split(","))
  measured = measure(shape, args.rounds, args.block_s)
  for r in measured["rows"]:
    print(f"{r['form']}: {r['fusions']} fusions, "
          + (f"{r['ms']['median']:.3g} ms, optax / this {timing.ratio_text(r['optax / this'])}"
             if "ms" in r else "failed"), flush=True)
  record = step_ab.result("adam_passes", argv, timing.machine(), shape=list(shape),
                          rounds=args.rounds, **measured)
  step_ab.write(args.out, record, markdown(record))


if __name__ == "__main__":
  main()
