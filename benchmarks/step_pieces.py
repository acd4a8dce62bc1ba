"""A train step against its own pieces, each run alone: which of them bounds the step.

  python -m benchmarks.step_pieces [--size quick] [--rounds 7] [--dtype bfloat16]
                                   [--rows distilbert:frozen:mult,...] --out DIR

A profile's per-op times mislead here: under the tracer, XLA:CPU's independent ops share the
cores and each reads slower than it runs in the untraced step (benchmarks.profile_step). So each
row's compiled step runs untraced, in turn with jit programs made of its pieces, on copies of the
same state and batch, alternating which goes first, in blocks of about `--block-s` seconds:

  gradients          the forward and backward pass (train.steps.gradients)
  precast gradients  the same with every floating trainable parameter already in the compute
                     dtype (bfloat16 only): the difference is what the step's weight casts cost
  update             the update of every trainable parameter (train.steps.finite_update), its
                     state donated as in the step

The STREAM-triad bandwidth takes its turn in each round too (timing.bandwidth_probe): the
update's rate at 28 bytes per parameter (Adam's least traffic: read the parameter, the gradient
and two moments, write three) is given over it, and the step and its forward and backward pass
over the step's memory roofline (benchmarks.xla_flags: the bytes a frozen head's step moves at
least, at that bandwidth). Writes DIR/results.json and DIR/results.md.
"""
import functools
import re

import jax
import jax.numpy as jnp
import numpy as np

from benchmarks import step_ab, timing, train_steps, xla_flags
from rsvqa_jax.train import steps as steps_lib

ROWS = ("distilbert:frozen:mult", "distilbert:frozen:mutan", "skipthoughts:frozen:mult",
        "skipthoughts:frozen:mutan")
TRIAD_ELEMENTS = {"toy": 1 << 16, "quick": 1 << 23, "full": 1 << 23}


def _cast_floating(tree, dtype):
  return jax.tree.map(lambda x: x.astype(dtype) if jnp.issubdtype(x.dtype, jnp.floating) else x,
                      tree)


class Pieces:
  """One row's compiled step and its pieces, each a `{name: callable() -> seconds}` runner."""

  def __init__(self, row, size, questions, batch, dtype, block_s):
    lm, mode, fusion = row.split(":")
    frozen = mode == "frozen"
    model, q_dim = train_steps.jax_model(lm, frozen, fusion, size, questions)
    batch_np = train_steps.batch_for(lm, frozen, q_dim, questions, batch)
    self.input_bytes = sum(np.asarray(v).nbytes for v in batch_np.values())
    self.step = train_steps.JaxStep(model, frozen, batch_np, compute_dtype=dtype)
    self.step.warmup()
    compute = steps_lib.DTYPES[dtype]
    state = jax.tree.map(jnp.copy, self.step.state)  # the step donates its own
    gradients = jax.jit(functools.partial(steps_lib.gradients, dtype=compute))
    grads = gradients(state, self.step.batch)[1]
    # params and optimizer state in the order they are returned: XLA pairs each donated input
    # with an output in order, and a mismatch copies every buffer.
    self._update = jax.jit(lambda g, p, o: steps_lib.finite_update(self.step.optimizer, g, o, p),
                           donate_argnums=(1, 2))
    self._grads = grads
    self._params, self._opt_state = jax.tree.map(jnp.copy, (state.params, state.opt_state))
    hlo = self._update.lower(grads, self._params, self._opt_state).compile().as_text()
    self.update_copies = len(re.findall(r" copy\(%(?:params|opt_state)", hlo))
    pieces = {"step": lambda: self.step.block(1),
              "gradients": lambda: jax.block_until_ready(gradients(state, self.step.batch)),
              "update": self._run_update}
    if compute != jnp.float32:
      precast = state.replace(params=_cast_floating(state.params, compute))
      pieces["precast gradients"] = lambda: jax.block_until_ready(
          gradients(precast, self.step.batch))
    self.runners = {name: timing.timed_blocks(run, block_s) for name, run in pieces.items()}

  def _run_update(self):
    self._params, self._opt_state, finite = self._update(self._grads, self._params,
                                                         self._opt_state)
    jax.block_until_ready((self._params, finite))


def measure_row(row, size, questions, batch, dtype, rounds, block_s, triad_elements):
  """Paired times of one row's step and pieces, the casts' cost and the update's rate."""
  pieces = Pieces(row, size, questions, batch, dtype, block_s)
  triad = timing.bandwidth_probe(triad_elements)
  # the triad's turn returns seconds per byte, so that its GB/s come out of the same rounds
  seconds, errors = timing.alternate({**pieces.runners, "triad": lambda: 1 / triad()}, rounds)
  bandwidth = [1 / s / 1e9 for s in seconds.pop("triad", [])]
  params = pieces.step.trainable_params()
  record = {"row": row, "errors": errors, "trainable_params": params,
            "update_copies": pieces.update_copies,
            "ms": {k: timing.summarize([s * 1e3 for s in v], "ms") for k, v in seconds.items()}}
  if {"step", "gradients", "update"} <= seconds.keys():
    record["pieces / step"] = timing.summarize(
        [(g + u) / s for g, u, s in zip(seconds["gradients"], seconds["update"],
                                        seconds["step"])])
  if bandwidth:
    record["triad GB/s"] = timing.summarize(bandwidth, "GB/s")
    # as benchmarks.xla_flags: Adam's and the products' bytes per parameter, and the batch's
    moved = ((train_steps.ADAM_BYTES_PER_PARAM + train_steps.PRODUCT_BYTES_PER_PARAM) * params
             + pieces.input_bytes)
    roofline = [moved / b / 1e9 for b in bandwidth]
    record["memory roofline ms"] = timing.summarize([r * 1e3 for r in roofline], "ms")
    for piece in ("step", "gradients"):
      if piece in seconds:
        record[f"{piece} / memory roofline"] = timing.summarize(
            [t / r for t, r in zip(seconds[piece], roofline)])
    if "update" in seconds:
      adam = params * train_steps.ADAM_BYTES_PER_PARAM / 1e9
      record["update / triad"] = timing.summarize(
          [adam / u / b for u, b in zip(seconds["update"], bandwidth)])
  if {"gradients", "precast gradients"} <= seconds.keys():
    record["casts ms"] = timing.summarize(
        [(g - p) * 1e3 for g, p in zip(seconds["gradients"], seconds["precast gradients"])], "ms")
  return record


def markdown(result):
  title = "A train step against its pieces run alone"
  lines = step_ab.header(title, "step_pieces", result) + [
      f"Compute dtype {result['compute_dtype']}, batch {result['batch']}, {result['size']} "
      f"sizes, {result['rounds']} rounds; median (min-max)", "",
      "| row | trainable params | step ms | memory roofline ms | gradients ms | weight casts ms "
      "| update ms | (gradients + update) / step | gradients / memory roofline "
      "| update / triad | triad GB/s | errors |",
      "|---|---|---|---|---|---|---|---|---|---|---|---|"]
  for r in result["rows"]:
    def cell(summary):
      return step_ab.median_range(summary) if summary else "-"
    ms = r["ms"]
    lines.append(
        f"| {r['row']} | {r['trainable_params']:,} | {cell(ms.get('step'))} | "
        f"{cell(r.get('memory roofline ms'))} | {cell(ms.get('gradients'))} | "
        f"{cell(r.get('casts ms'))} | {cell(ms.get('update'))} | {cell(r.get('pieces / step'))} | "
        f"{cell(r.get('gradients / memory roofline'))} | {cell(r.get('update / triad'))} | "
        f"{cell(r.get('triad GB/s'))} | "
        f"{'; '.join(f'{k}: {v}' for k, v in r['errors'].items())} |")
  limit = 1 / xla_flags.MEMORY_GOAL
  lines += step_ab.footer(
      "step_pieces",
      "memory roofline: the bytes a step moves at least (28 of Adam and 8 of the products per "
      "trainable parameter, and the batch; as benchmarks.xla_flags) at the triad bandwidth "
      "measured in the same round",
      "weight casts: gradients minus precast gradients, paired per round (the forward and "
      "backward pass with the trainable weights already in the compute dtype)",
      "(gradients + update) / step above 1: the step overlaps its pieces (XLA:CPU runs "
      "independent ops at once)",
      f"gradients / memory roofline above {limit:.2f} (1 / {xla_flags.MEMORY_GOAL}): the forward "
      f"and backward pass alone takes longer than a step at {xla_flags.MEMORY_GOAL} of its "
      "memory roofline may, whatever the update costs",
      "update / triad: the update's rate at 28 B/param over the triad bandwidth of the same "
      "round, the fraction of its memory roofline the update reaches alone")
  return "\n".join(lines)


def main(argv=None):
  step_ab.main_over_rows(
      "step_pieces", __doc__, ROWS, block_s=0.3, dtype="bfloat16", argv=argv,
      measure=lambda row, args, size, questions: measure_row(
          row, size, questions, args.batch, args.dtype, args.rounds, args.block_s,
          TRIAD_ELEMENTS[args.size]),
      line=lambda r: ", ".join(f"{k} {v['median']:.3g} ms" for k, v in r["ms"].items()),
      markdown=markdown)


if __name__ == "__main__":
  main()
