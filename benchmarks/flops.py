"""Hardware efficiency: achieved FLOP/s of fine-tuned train steps against the measured matmul peak.

The peak is a chain of large f32 `jnp.dot`s in one jit call (same process, same threads), timed
in every round right before the step it is compared with: the fraction of peak is paired per
round, because the other load on a shared machine changes both alike within a round but not
across the run. The optimizer update (Adam over the step's trainable tree) is timed alone in the
same rounds: its share of the step is work no matmul can speed up. Model FLOPs are counted
analytically (2 per multiply-add of every matmul in the forward pass, times 3 for forward +
backward) over the executed shapes (the batch's bucket width), and
cross-checked with XLA's own count (`cost_analysis()["flops"]` of the lowered step); XLA counts a
while-loop body once, so for the scanned GRU its figure covers one time step of the recurrence.
When benchmarks.train_steps ran first in the same process, its warm compiled step of the same
configuration is timed (train_steps.RUNNERS) instead of compiling it a second time. DistilBERT
runs at its real 6 layers in every mode but toy (see efficiency_sizes).
Two measurements explain the limits: the steps' own matmul shapes (70-row products run below the
square peak, in JAX and PyTorch alike) and whether matmuls and memory streaming overlap (they do
not on 2 cores, so a step's roofline adds its matmul and Adam times: train_steps).
"""
import time

import jax
import jax.numpy as jnp
import optax

from benchmarks import flop_counts, inputs, timing, train_steps
from rsvqa_jax.train import optimizers
from rsvqa_jax.config import base_config


def optimizer_probe(runner):
  """A callable() -> seconds of one optimizer update + apply on copies of the step's params."""
  optimizer = optimizers.make_optimizer(base_config().optim)
  params = jax.tree.map(jnp.copy, runner.state.params)
  opt_state = jax.tree.map(jnp.copy, runner.state.opt_state)
  grads = jax.tree.map(jnp.ones_like, params)
  update = jax.jit(lambda p, g, s: optax.apply_updates(p, optimizer.update(g, s, p)[0]))
  jax.block_until_ready(update(params, grads, opt_state))

  def seconds():
    start = time.perf_counter()
    jax.block_until_ready(update(params, grads, opt_state))
    return time.perf_counter() - start

  return seconds


def efficiency_sizes(mode):
  """train_steps' sizes, but the paper's 6 DistilBERT layers in quick mode too: the Adam update of
  the 23M-parameter word table and the embedding work weigh 6 times more on a 1-layer model."""
  size = train_steps.sizes(mode)
  if mode == "quick":
    size["bert_layers"]["distilbert"] = train_steps.FAMILY_LAYERS["distilbert"]
  return size


def step_efficiency(lm, size, questions, peak_rate, repeats, steps):
  """Samples/s, achieved FLOP/s, fraction of the paired peak and optimizer share of a step."""
  runner = train_steps.RUNNERS.pop(train_steps.runner_key(lm, size), None)
  reused = runner is not None
  if not reused:
    model, q_dim = train_steps.jax_model(lm, False, "mult", size, questions)
    runner = train_steps.JaxStep(model, False,
                                 train_steps.batch_for(lm, False, q_dim, questions))
    runner.warmup()
  xla_flops = float(runner.step.lower(runner.state, runner.batch).cost_analysis().get(
      "flops", float("nan")))
  adam = optimizer_probe(runner)
  peaks, times, adam_times = [], [], []
  for _ in range(repeats):
    peaks.append(peak_rate())
    times.append(runner.block(steps) / steps)
    adam_times.append(adam())
  width = runner.batch["tokens"].shape[1]
  analytic = flop_counts.train_step_flops(lm, False, "mult", size, inputs.BATCH, width)
  achieved = [analytic / t for t in times]
  return {"lm": lm, "tokens": [inputs.BATCH, width],
          "layers": size["bert_layers"].get(lm), "analytic_flops_per_step": analytic,
          "reused_train_steps_executable": reused,
          "xla_cost_analysis_flops": xla_flops,
          "xla_over_analytic": xla_flops / analytic,
          "step_s": timing.summarize(times, "s"),
          "samples_s": timing.summarize([inputs.BATCH / t for t in times], "samples/s"),
          "achieved_flops": timing.summarize(achieved, "FLOP/s"),
          "paired_peak": timing.summarize(peaks, "FLOP/s"),
          "fraction_of_peak": timing.paired_ratio(achieved, peaks),
          "trainable_params": runner.trainable_params(),
          "optimizer_share": timing.paired_ratio(adam_times, times)}


def run(mode, log=print):
  questions = inputs.make_questions(inputs.BATCH)
  size = efficiency_sizes(mode)
  log("  flops: matmul peak")
  try:
    import torch  # pylint: disable=g-import-not-at-top
  except ImportError:
    torch = None
  peak_rate, peak_cfg = timing.f32_peak_probe(mode, torch)  # the best of JAX and PyTorch
  peak = timing.summarize([peak_rate() for _ in range(3)], "FLOP/s")
  rows = []
  for lm in ("distilbert", "skipthoughts"):
    log(f"  flops: {lm} fine-tuned step")
    rows.append(step_efficiency(lm, size, questions, peak_rate, repeats=ROUNDS,
                                steps=3 if mode == "full" else 1))
  train_steps.RUNNERS.clear()  # the other fine-tuned rows' executables: nothing else times them
  peak_after = timing.summarize([peak_rate() for _ in range(3)], "FLOP/s")
  log("  flops: the steps' matmul shapes")
  shapes = shape_rates(peak_rate, TOY_SHAPES if mode == "toy" else STEP_SHAPES)
  log("  flops: matmuls and memory streaming, apart and together")
  overlap = overlap_rounds(timing.overlap_probe(64, elements=1 << 16) if mode == "toy" else
                           timing.overlap_probe())
  targets = [timing.target("fine-tuned DistilBERT step / f32 matmul peak",
                           rows[0]["fraction_of_peak"], ">=", 0.8),
             timing.target("fine-tuned Skip-thoughts GRU step / f32 matmul peak",
                           rows[1]["fraction_of_peak"], ">=", 0.7)]
  notes = ["rows marked reused_train_steps_executable time the step compiled by train_steps: "
           + ", ".join(f"{r['lm']} {r['reused_train_steps_executable']}" for r in rows),
           f"model sizes as in train_steps ({mode}), except DistilBERT at its 6 layers in quick "
           f"mode; {3 if mode == 'full' else 1} step(s) per round, {ROUNDS} rounds"]
  return {"matmul_peak": peak, "matmul_peak_after": peak_after, "peak_config": peak_cfg,
          "rows": rows, "shapes": shapes, "overlap": overlap, "notes": notes}, targets


ROUNDS = 7  # a 4 s DistilBERT step per round: more rounds steady the median on a shared machine
STEP_SHAPES = {"GRU recurrence h @ [U | Ux]": (70, 1200, 3600),
               "its transpose dg @ [U | Ux]^T": (70, 3600, 1200),
               "frozen head image projection": (70, 2048, 1200),
               "BERT FFN in (70 x 24 tokens)": (1680, 768, 3072)}
TOY_SHAPES = {"toy": (8, 32, 48)}


def shape_rates(peak_rate, shapes, repeats=5, calls=10):
  """{name: (m, k, n) and each library's FLOP/s of an [m, k] @ [k, n] f32 matmul, as a paired
  fraction of the peak}: how fast the steps' own matmul shapes can run here, in JAX and PyTorch."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  try:
    import torch  # pylint: disable=g-import-not-at-top
  except ImportError:
    torch = None
  out = {}
  for name, (m, k, n) in shapes.items():
    a, b = timing.product_operands(m, k, n, seed=0)
    dot = jax.jit(jnp.matmul)
    runs = {"jax": lambda: dot(a, b).block_until_ready()}
    if torch is not None:
      ta, tb = torch.from_numpy(np.array(a)), torch.from_numpy(np.array(b))
      runs["torch"] = lambda: torch.mm(ta, tb)
    rates = {lib: [] for lib in runs}
    peaks = []
    for lib, run in runs.items():
      run()
    for _ in range(repeats):
      peaks.append(peak_rate())
      for lib, run in runs.items():
        rates[lib].append(2.0 * m * k * n * calls / timing.time_block(run, calls))
    out[name] = {"shape": [m, k, n], **{f"{lib}_of_peak": timing.paired_ratio(r, peaks)
                                       for lib, r in rates.items()}}
  return out


def overlap_rounds(probe, repeats=5):
  """Seconds of the probe's matmul chain, its triads and both at once, and together / sum."""
  rounds = [probe() for _ in range(repeats)]
  out = {k: timing.summarize([r[k] for r in rounds], "s") for k in rounds[0]}
  out["together_over_sum"] = timing.summarize(
      [r["together"] / (r["matmul"] + r["stream"]) for r in rounds])
  return out
