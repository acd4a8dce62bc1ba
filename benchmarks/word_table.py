"""A fine-tuned BERT-family step's word table: its cost, and what a row-sparse Adam would save.

  python -m benchmarks.word_table [--size quick] [--lms distilbert,roberta] [--dtype float32]
                                  [--rounds 7] --out DIR

The gradient of the word lookup is a dense table: XLA zero-fills it, adds the batch's token
rows into it, checks it for finiteness and hands it to Adam, whose moments and parameters take
a pass each. Adam restricted to the rows a batch touches is the same update: a row no token hit
has a zero gradient, so its moments only decay, and the parameter pass stays dense. Per language
model (fine-tuned, e-mult head), each pair timed in turn in one process, alternating which goes
first, the ratio paired per round:
- "update": optax's Adam on the dense lookup gradient against Adam written for the touched rows
  (moments decayed in place, the summed rows added, one parameter pass), on the model's table
  shape and the batch's tokens, state donated; the largest difference of their results after
  three updates is reported (float32 rounding).
- "step": the train step as it trains, against the same step whose table receives no lookup
  gradient (stop_gradient on the table, patched in while it compiles; Adam still decays its
  moments and moves every row). That is what the row-sparse update would leave of the table's
  cost, less the touched rows' own work: a ratio near 1 says the table does not bound the step.
Writes DIR/results.json and DIR/results.md.
"""
import argparse
import contextlib
import time
from unittest import mock

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from benchmarks import step_ab, timing
from rsvqa_jax.config import base_config
from rsvqa_jax.train import steps as steps_lib

LMS = ("distilbert", "bert", "roberta")
CHECK_UPDATES = 3


def dense_update(optimizer):
  """jit(table, state, ids, rows) -> (table, state): the update the train step makes."""

  def update(table, state, ids, rows):
    grad = jnp.zeros_like(table).at[ids].add(rows)
    updates, state = optimizer.update(grad, state, table)
    finite = steps_lib.all_finite(grad)
    return jnp.where(finite, optax.apply_updates(table, updates), table), state

  return jax.jit(update, donate_argnums=(0, 1))


def sparse_update(optim):
  """The same Adam (optim: the config's optim section) from the touched rows alone."""
  b1, b2, eps, lr = optim.b1, optim.b2, optim.eps, optim.text_lr

  def update(table, state, ids, rows):
    adam, rest = state
    touched, where = jnp.unique(ids, size=ids.size, fill_value=table.shape[0],
                                return_inverse=True)
    summed = jnp.zeros_like(rows).at[where.reshape(-1)].add(rows)
    count = optax.safe_increment(adam.count)
    mu = (b1 * adam.mu).at[touched].add((1 - b1) * summed, mode="drop")
    nu = (b2 * adam.nu).at[touched].add((1 - b2) * summed * summed, mode="drop")
    t = count.astype(jnp.float32)
    moved = table - lr * (mu / (1 - b1 ** t)) / (jnp.sqrt(nu / (1 - b2 ** t)) + eps)
    finite = steps_lib.all_finite(summed)
    return jnp.where(finite, moved, table), (optax.ScaleByAdamState(count, mu, nu), rest)

  return jax.jit(update, donate_argnums=(0, 1))


class _Update:
  """One update applied to its own copy of the table and Adam state, in blocks of steps."""

  def __init__(self, update, optimizer, table, ids, rows):
    self.update, self.ids, self.rows = update, ids, rows
    self.table, self.state = jnp.array(table), optimizer.init(table)
    self.steps = 1

  def run(self, steps):
    for _ in range(steps):
      self.table, self.state = self.update(self.table, self.state, self.ids, self.rows)
    jax.block_until_ready(self.table)

  def calibrate(self, block_s):
    self.steps = max(1, round(block_s / self.block()))

  def block(self):
    """Seconds per update over one block."""
    start = time.perf_counter()
    self.run(self.steps)
    return (time.perf_counter() - start) / self.steps


def compare_updates(table, ids, rows, optim):
  """{"update_ms", "dense / sparse", "max_abs_diff"} of the two updates on one table."""
  optimizer = optax.adam(optim.text_lr, b1=optim.b1, b2=optim.b2, eps=optim.eps)
  pair = {"dense": _Update(dense_update(optimizer), optimizer, table, ids, rows),
          "sparse": _Update(sparse_update(optim), optimizer, table, ids, rows)}
  for u in pair.values():
    u.run(CHECK_UPDATES)
  dense, sparse = pair["dense"], pair["sparse"]
  diff = max(float(jnp.max(jnp.abs(a - b))) for a, b in
             ((dense.table, sparse.table), (dense.state[0].mu, sparse.state[0].mu),
              (dense.state[0].nu, sparse.state[0].nu)))
  return pair, diff


def frozen_table_lookup(vocab_size):
  """A patch of nnx.Embed: the table of `vocab_size` rows passes no gradient to its lookup."""
  original = nnx.Embed.__call__

  def lookup(self, tokens):
    if self.num_embeddings != vocab_size:
      return original(self, tokens)
    return jnp.take(jax.lax.stop_gradient(self.embedding[...]), tokens, axis=0)

  return mock.patch.object(nnx.Embed, "__call__", lookup)


def table_scatters(hlo_text, shape):
  """How many scatter ops of a compiled step write a float32 array of the table's shape."""
  dims = ",".join(str(d) for d in shape)
  return sum(1 for line in hlo_text.splitlines() if f"f32[{dims}]" in line and " scatter(" in line)


def measure_lm(lm, size, questions, batch, dtype, rounds, block_s):
  """Both pairs of one fine-tuned language model: update alone and whole step."""
  row = f"{lm}:finetuned:mult"
  step = step_ab.PatchedStep(row, size, questions, batch, dtype, contextlib.nullcontext())
  embeddings = step.runner.state.params["text"]["text_encoder"]["embeddings"]["word"]
  table = np.asarray(embeddings["embedding"])
  ids = jnp.asarray(questions.wordpiece_tokens[:batch].reshape(-1))
  rows = jnp.asarray(np.random.default_rng(0).standard_normal((ids.size, table.shape[1])),
                     jnp.float32) * 1e-3
  updates, diff = compare_updates(table, ids, rows, base_config().optim)
  steps = {"as trained": step,
           "no table gradient": step_ab.PatchedStep(row, size, questions, batch, dtype,
                                                    frozen_table_lookup(table.shape[0]))}
  result = {"lm": lm, "table": list(table.shape), "tokens": int(ids.size),
            "touched_rows": int(np.unique(np.asarray(ids)).size), "max_abs_diff": diff,
            "table_scatters": {k: table_scatters(c.hlo, table.shape) for k, c in steps.items()}}
  for name, pair, (slow, fast) in (("update", updates, ("dense", "sparse")),
                                   ("step", steps, ("as trained", "no table gradient"))):
    for c in pair.values():
      c.calibrate(block_s)
    seconds, errors = timing.alternate({k: c.block for k, c in pair.items()}, rounds)
    result[name] = {"ms": {k: timing.summarize([s * 1e3 for s in t], "ms")
                           for k, t in seconds.items()},
                    f"{slow} / {fast}": timing.paired_ratio(seconds[slow], seconds[fast]),
                    "errors": errors}
  return result


def markdown(result):
  title = "The word table of a fine-tuned step: dense Adam against the touched rows"
  lines = step_ab.header(title, "word_table", result) + [
      f"Steps in {result['compute_dtype']} (the table and its update are float32 either way), "
      f"batch {result['batch']}, {result['size']} sizes, {result['rounds']} rounds; "
      "median (min-max)", "",
      "| LM | table | touched rows | dense update ms | sparse update ms | dense / sparse "
      "| max \\|diff\\| | step ms | step ms, no table gradient | ratio |",
      "|---|---|---|---|---|---|---|---|---|---|"]
  fmt = step_ab.median_range
  for r in result["rows"]:
    u, s = r["update"], r["step"]
    lines.append(
        f"| {r['lm']} | {r['table'][0]:,} x {r['table'][1]} | {r['touched_rows']} of "
        f"{r['tokens']} tokens | {fmt(u['ms']['dense'])} | {fmt(u['ms']['sparse'])} | "
        f"{fmt(u['dense / sparse'])} | {r['max_abs_diff']:.1e} | {fmt(s['ms']['as trained'])} | "
        f"{fmt(s['ms']['no table gradient'])} | {fmt(s['as trained / no table gradient'])} |")
  lines += step_ab.footer("word_table", "ratio: the step as trained over the step whose table "
                          "gets no lookup gradient; > 1 is what a row-sparse update could gain at "
                          "most")
  return "\n".join(lines)


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  step_ab.add_options(parser, block_s=0.5)
  parser.add_argument("--lms", default="distilbert,roberta",
                      help="comma-separated, of " + ", ".join(LMS))
  parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"],
                      help="compute dtype of the train steps")
  args, size, questions, info = step_ab.start(parser, argv)
  rows = []
  for lm in args.lms.split(","):
    rows.append(measure_lm(lm, size, questions, args.batch, args.dtype, args.rounds,
                           args.block_s))
    r = rows[-1]
    print(f"{lm}: update dense / sparse {r['update']['dense / sparse']['median']:.3f}, step "
          f"{r['step']['as trained / no table gradient']['median']:.3f}", flush=True)
  record = step_ab.result("word_table", argv, info, size=args.size, compute_dtype=args.dtype,
                          batch=args.batch, rounds=args.rounds, rows=rows)
  step_ab.write(args.out, record, markdown(record))


if __name__ == "__main__":
  main()
