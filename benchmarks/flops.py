"""Hardware efficiency: achieved FLOP/s of fine-tuned train steps against the measured matmul peak.

The peak is a chain of large f32 `jnp.dot`s in one jit call (measured in the same run, same
threads). Model FLOPs are counted analytically (2 per multiply-add of every matmul in the forward
pass, times 3 for forward + backward) over the executed shapes (the batch's bucket width), and
cross-checked with XLA's own count (`compiled.cost_analysis()["flops"]`); XLA counts a while-loop
body once, so for the scanned GRU its figure covers one time step of the recurrence.
"""
import time

import jax
import jax.numpy as jnp

from benchmarks import inputs, timing, train_steps
from rsvqa_jax.models.vqa import head_config


def matmul_peak(n=1024, chain=8, repeats=3):
  """f32 matmul FLOP/s: median / min / max over repeats of `chain` chained n x n dots."""
  key_a, key_b = jax.random.split(jax.random.key(0))
  a = jax.random.normal(key_a, (n, n), jnp.float32)
  b = jax.random.normal(key_b, (n, n), jnp.float32) / jnp.sqrt(n)

  @jax.jit
  def chained(x, w):
    return jax.lax.fori_loop(0, chain, lambda _, y: y @ w, x)

  chained(a, b).block_until_ready()
  flops = 2.0 * n**3 * chain
  rates = []
  for _ in range(repeats):
    start = time.perf_counter()
    chained(a, b).block_until_ready()
    rates.append(flops / (time.perf_counter() - start))
  return timing.summarize(rates, "FLOP/s"), {"n": n, "chain": chain}


def head_flops(q_dim, batch, fusion="mult"):
  """Forward matmul FLOPs of fusion + classifier (paper sizes)."""
  c = head_config()
  macs = inputs.IMAGE_DIM * c.hidden_dim + q_dim * c.hidden_dim
  if fusion == "mutan":
    macs += 2 * c.hidden_dim * c.mutan_rank * c.mutan_dim + c.mutan_dim * c.hidden_dim
  fused = 2 * c.hidden_dim if fusion == "concat" else c.hidden_dim
  macs += fused * c.classifier_dim + c.classifier_dim * inputs.NUM_ANSWERS
  return 2.0 * batch * macs


def bert_train_flops(batch, width, layers, hidden, intermediate):
  """Train-step FLOPs (3 x forward matmuls) of a BERT-family encoder + e-mult head."""
  per_token = 2 * (4 * hidden * hidden + 2 * hidden * intermediate) + 2 * 2 * width * hidden
  forward = batch * width * layers * per_token + head_flops(hidden, batch)
  return 3.0 * forward


def gru_train_flops(batch, width, word_dim, hidden):
  """Train-step FLOPs (3 x forward matmuls) of the uni-skip GRU + e-mult head."""
  per_token = 2 * (word_dim * 3 * hidden + hidden * 3 * hidden)
  return 3.0 * (batch * width * per_token + head_flops(hidden, batch))


def step_efficiency(lm, size, questions, peak, repeats, steps):
  """Samples/s, achieved FLOP/s and fraction of peak of one fine-tuned train step."""
  model, q_dim = train_steps.jax_model(lm, False, "mult", size, questions)
  batch_np = train_steps.batch_for(lm, False, q_dim, questions)
  runner = train_steps.JaxStep(model, False, batch_np)
  compiled = runner.step.lower(runner.state, runner.batch).compile()
  xla_flops = float(compiled.cost_analysis().get("flops", float("nan")))
  runner.step = compiled  # the very executable analysed is the one timed
  runner.warmup()
  times = [runner.block(steps) / steps for _ in range(repeats)]
  width = batch_np["tokens"].shape[1]
  if lm == "skipthoughts":
    analytic = gru_train_flops(inputs.BATCH, width, size["gru"]["word_dim"],
                               size["gru"]["hidden_dim"])
  else:
    b = size["bert"]
    analytic = bert_train_flops(inputs.BATCH, width, size["bert_layers"][lm], b["hidden"],
                                b["intermediate"])
  achieved = [analytic / t for t in times]
  return {"lm": lm, "tokens": [inputs.BATCH, width],
          "layers": size["bert_layers"].get(lm), "analytic_flops_per_step": analytic,
          "xla_cost_analysis_flops": xla_flops,
          "xla_over_analytic": xla_flops / analytic,
          "step_s": timing.summarize(times, "s"),
          "samples_s": timing.summarize([inputs.BATCH / t for t in times], "samples/s"),
          "achieved_flops": timing.summarize(achieved, "FLOP/s"),
          "fraction_of_peak": timing.summarize([a / peak["median"] for a in achieved])}


def run(mode, log=print):
  questions = inputs.make_questions(inputs.BATCH)
  size = train_steps.sizes(mode)
  n = 256 if mode == "toy" else 1024
  log("  flops: matmul peak")
  peak, peak_cfg = matmul_peak(n)
  rows = []
  for lm in ("distilbert", "skipthoughts"):
    log(f"  flops: {lm} fine-tuned step")
    rows.append(step_efficiency(lm, size, questions, peak, repeats=3,
                                steps=3 if mode == "full" else 1))
  peak_after, _ = matmul_peak(n)
  targets = [timing.target("fine-tuned DistilBERT step / f32 matmul peak",
                           rows[0]["fraction_of_peak"], ">=", 0.8),
             timing.target("fine-tuned Skip-thoughts GRU step / f32 matmul peak",
                           rows[1]["fraction_of_peak"], ">=", 0.7)]
  return {"matmul_peak": peak, "matmul_peak_after": peak_after, "peak_config": peak_cfg,
          "rows": rows}, targets
