"""Like-for-like train-step throughput: rsvqa_jax's jit step against PyTorch eager and compiled.

Same batch (70 questions, same tokens), same architecture and optimizer (Adam, head lr 1e-5,
language-model lr 1e-4), dropout on, same intra-op thread count. Per configuration the JAX
step, the torch eager step and the torch.compile step run in turn (JAX first in odd rounds,
PyTorch first in even ones), `repeats` rounds of `steps` steps each, after a warm-up that
includes compilation (timed separately); every configuration in float32 and in bfloat16 (JAX
compute_dtype against PyTorch CPU autocast).
Frozen language model = cached question vectors: only fusion + classifier train.
The compiled JAX steps of the fine-tuned e-mult rows are kept in RUNNERS for the flops family,
which times the same executables instead of compiling them again.
"""
import gc
import statistics
import time

import jax
import jax.numpy as jnp
from flax import nnx

from benchmarks import flop_counts, inputs, timing
from rsvqa_jax import cpu_units
from rsvqa_jax.config import base_config, model_section
from rsvqa_jax.models.bert import BertConfig, BertEncoder
from rsvqa_jax.models.skipthoughts import SkipThoughts
from rsvqa_jax.models.vqa import RSVQAModel, VQAHead
from rsvqa_jax.train import optimizers, state as state_lib, steps as steps_lib
from rsvqa_jax.train import sharding as shd

FAMILY_LAYERS = {"distilbert": 6, "bert": 12, "roberta": 12}
COMPUTE_DTYPES = ("float32", "bfloat16")
BERT_DIMS = {"hidden": 768, "heads": 12, "intermediate": 3072}
GRU_DIMS = {"word_dim": 620, "hidden_dim": 2400}
QUICK_GRU_HIDDEN = 1200
ADAM_BYTES_PER_PARAM = 7 * 4  # f32 reads of param, gradient, 2 moments; writes of 3
PRODUCT_BYTES_PER_PARAM = 8  # forward reads the f32 master weight, the weight gradient writes f32
ROOFLINE_GOAL = 0.85  # issue 18: every train step at >= 85% of its roofline
RUNNERS = {}  # runner_key -> warm JaxStep of a fine-tuned e-mult row, for benchmarks.flops


def sizes(mode):
  """Model sizes: the paper's in "full"; "quick" cuts the BERT family to 1 layer and the GRU state
  to 1200 (a full-size fine-tuned GRU step takes several seconds per implementation on the shared
  2-core machine); "toy" makes every model tiny (to check that the harness runs)."""
  if mode == "toy":
    return {"bert_layers": {k: 1 for k in FAMILY_LAYERS}, "gru": {"word_dim": 8, "hidden_dim": 16},
            "bert": {"hidden": 32, "heads": 2, "intermediate": 64}}
  if mode == "quick":
    return {"bert_layers": {k: 1 for k in FAMILY_LAYERS},
            "gru": {**GRU_DIMS, "hidden_dim": QUICK_GRU_HIDDEN}, "bert": dict(BERT_DIMS)}
  return {"bert_layers": dict(FAMILY_LAYERS), "gru": dict(GRU_DIMS), "bert": dict(BERT_DIMS)}


def runner_key(lm, size):
  """What identifies a fine-tuned e-mult step in RUNNERS: the language model and its size."""
  dims = size["gru"] if lm == "skipthoughts" else {**size["bert"],
                                                   "layers": size["bert_layers"][lm]}
  return (lm,) + tuple(sorted(dims.items()))


def bert_config(family, size, vocab_size):
  b = size["bert"]
  return BertConfig(family=family, vocab_size=50265 if family == "roberta" else vocab_size,
                    hidden_size=b["hidden"], num_layers=size["bert_layers"][family],
                    num_heads=b["heads"], intermediate_size=b["intermediate"],
                    max_position_embeddings=514 if family == "roberta" else 512,
                    type_vocab_size=0 if family == "distilbert" else 2,
                    pad_token_id=1 if family == "roberta" else 0)


def question_dim(lm, size):
  """Width of the question vector the head reads: the GRU state or the BERT hidden size."""
  return size["gru"]["hidden_dim"] if lm == "skipthoughts" else size["bert"]["hidden"]


def _head_config(fusion):
  cfg = model_section()
  cfg.fusion = fusion
  return cfg


def jax_model(lm, frozen, fusion, size, questions):
  """RSVQAModel of a configuration (no text encoder when the LM is frozen and cached)."""
  rngs = nnx.Rngs(params=0, dropout=1)
  q_dim, encoder = question_dim(lm, size), None
  if not frozen and lm == "skipthoughts":
    encoder = SkipThoughts(questions.word_vocab_size, rngs=rngs, **size["gru"])
  elif not frozen:
    encoder = BertEncoder(bert_config(lm, size, questions.wordpiece_vocab_size), rngs=rngs)
  head = VQAHead(_head_config(fusion), q_dim=q_dim, v_dim=inputs.IMAGE_DIM,
                 num_answers=inputs.NUM_ANSWERS, rngs=rngs)
  return RSVQAModel(head, encoder), q_dim


def torch_model(lm, frozen, fusion, size, questions):
  """The PyTorch reference of the same configuration (benchmarks.torch_reference)."""
  from benchmarks import torch_reference as tr  # pylint: disable=g-import-not-at-top
  import torch  # pylint: disable=g-import-not-at-top
  torch.manual_seed(0)
  encoder = None
  if not frozen and lm == "skipthoughts":
    encoder = tr.SkipThoughtsGRU(questions.word_vocab_size, **size["gru"])
  elif not frozen:
    b = size["bert"]
    encoder = tr.HFEncoder(lm, layers=size["bert_layers"][lm], hidden=b["hidden"],
                           heads=b["heads"], intermediate=b["intermediate"],
                           vocab_size=questions.wordpiece_vocab_size)
  head = tr.Head(_head_config(fusion), question_dim(lm, size), inputs.IMAGE_DIM,
                 inputs.NUM_ANSWERS)
  return tr.VQA(head, encoder)


def batch_for(lm, frozen, q_dim, questions, batch=inputs.BATCH):
  """The numpy batch both sides read."""
  arrays = inputs.head_arrays(batch, q_dim)
  if frozen:
    return arrays
  del arrays["question_vector"]
  if lm == "skipthoughts":
    arrays["tokens"], arrays["mask"] = questions.word_tokens, questions.word_mask
  else:
    arrays["tokens"], arrays["mask"] = questions.wordpiece_tokens, questions.wordpiece_mask
  return arrays


class JaxStep:
  """rsvqa_jax's train step on one device-resident batch; `block(steps)` -> seconds."""

  def __init__(self, model, frozen, batch_np, mesh=None, compute_dtype="float32"):
    self.mesh = mesh or shd.make_mesh()
    self.optimizer = optimizers.make_optimizer(base_config().optim)
    self.state = shd.replicate(state_lib.create(model, self.optimizer, seed=0,
                                                freeze_text=frozen), self.mesh)
    self.step = steps_lib.make_train_step(self.optimizer, self.mesh, compute_dtype)
    self.batch = shd.global_batch(batch_np, self.mesh)
    self.metrics = None

  def warmup(self):
    start = time.perf_counter()
    self.block(1)
    return time.perf_counter() - start

  def trainable_params(self):
    """Parameters the optimizer updates (a frozen encoder's are not among them)."""
    return sum(x.size for x in jax.tree.leaves(self.state.params))

  def run_one(self):
    self.state, self.metrics = self.step(self.state, self.batch)

  def block(self, steps):
    start = time.perf_counter()
    for _ in range(steps):
      self.run_one()
    jax.block_until_ready(self.metrics)
    return time.perf_counter() - start


class TorchStep:
  """The PyTorch reference step (eager or torch.compile), on the CPU or an accelerator."""

  def __init__(self, model, batch_np, compile_model, device="cpu", autocast=None,
               compile_mode=None):
    from benchmarks import torch_reference as tr  # pylint: disable=g-import-not-at-top
    import torch  # pylint: disable=g-import-not-at-top
    self.step = tr.make_train_step(model.to(device), compile_model=compile_model,
                                   autocast=autocast, compile_mode=compile_mode)
    self.batch = tr.to_torch(batch_np, device)
    self.compiled = compile_model
    self.sync = torch.cuda.synchronize if torch.device(device).type == "cuda" else lambda: None

  def warmup(self):
    """One step (eager: first allocations); two under torch.compile (trace, then reuse)."""
    start = time.perf_counter()
    for _ in range(2 if self.compiled else 1):
      self.step(self.batch)
    self.sync()
    return time.perf_counter() - start

  def block(self, steps):
    start = time.perf_counter()
    for _ in range(steps):
      self.step(self.batch)
    self.sync()
    return time.perf_counter() - start


def measure(lm, frozen, fusion, *, size, questions, repeats, block_s, compile_torch,
            have_torch, keep_key=None, compute_dtype="float32", torch_device="cpu",
            peak_rate=None, bandwidth_rate=None, torch_compile_mode=None):
  """One configuration: samples/s of each implementation and the paired speed-ups.

  The batch is `questions` (70 in the CPU comparisons). After the warm-up (compilation
  included, timed apart), one timed step per implementation sets its steps per round to about
  `block_s` seconds (at least one step). With `keep_key`, the warm JAX step is stored in RUNNERS
  under that key. compute_dtype "bfloat16" runs PyTorch under bf16 autocast (eager and, with
  `compile_torch`, compiled in `torch_compile_mode`: "reduce-overhead" on a GPU). With `peak_rate`
  (timing.peak_probe), each side's fraction of the matmul peak (measured twice before and twice
  after the rounds) is added; with `bandwidth_rate` (timing.bandwidth_probe) too, the roofline
  minimum of a step (its matmuls at that peak, then its Adam update streaming each trainable
  parameter, gradient and moment once at that bandwidth) and the speed-up over torch eager of a
  step that fast (`ceiling_vs_eager`: what no implementation of this step can beat here).
  """
  peaks = [peak_rate() for _ in range(2)] if peak_rate else []
  bandwidths = [bandwidth_rate() for _ in range(2)] if bandwidth_rate else []
  batch = len(questions.text)
  model, q_dim = jax_model(lm, frozen, fusion, size, questions)
  batch_np = batch_for(lm, frozen, q_dim, questions, batch)
  contenders = {"jax": JaxStep(model, frozen, batch_np, compute_dtype=compute_dtype)}
  notes, warm, steps = {}, {}, {}
  if have_torch:
    import torch  # pylint: disable=g-import-not-at-top
    autocast = torch.bfloat16 if compute_dtype == "bfloat16" else None
    make = lambda compiled: TorchStep(torch_model(lm, frozen, fusion, size, questions), batch_np,
                                      compiled, torch_device, autocast,
                                      torch_compile_mode if compiled else None)
    contenders["torch_eager"] = make(False)
    if compile_torch:
      contenders["torch_compile"] = make(True)
  calibration = {}
  for name in list(contenders):
    try:
      warm[name] = contenders[name].warmup()
      calibration[name] = contenders[name].block(1)
      steps[name] = max(1, round(block_s / calibration[name]))
    except Exception as e:  # pylint: disable=broad-except
      notes[name] = f"skipped: {type(e).__name__}: {str(e).splitlines()[0][:200]}"
      del contenders[name]
  rounds = {k: (lambda c=c, k=k: c.block(steps[k]) / (steps[k] * batch))
            for k, c in contenders.items()}
  # When every implementation runs one step per round, the calibration steps (timed after the
  # warm-up, one implementation after the other) already form a complete alternated round.
  first = {k: [t / batch] for k, t in calibration.items()}
  reuse = bool(contenders) and all(steps[k] == 1 for k in contenders)
  per_sample, errors = timing.alternate(rounds, repeats - 1 if reuse else repeats,
                                        first_round=1 if reuse else 0)
  if reuse:
    per_sample = {k: first[k] + per_sample.get(k, []) for k in contenders
                  if k in per_sample or k not in errors}
  notes.update({k: f"failed while timing: {v}" for k, v in errors.items()})
  row = {"lm": lm, "mode": "frozen (cached)" if frozen else "fine-tuned", "fusion": fusion,
         "compute_dtype": compute_dtype, "torch_compile_mode": torch_compile_mode,
         "tokens": list(batch_np["tokens"].shape) if "tokens" in batch_np else None,
         "warmup_s": warm, "steps_per_round": steps, "calibration_is_round_1": reuse,
         "notes": notes}
  for name, t in per_sample.items():
    row[f"{name}_samples_s"] = timing.summarize([1 / x for x in t], "samples/s")
  for other in ("torch_eager", "torch_compile"):
    if "jax" in per_sample and other in per_sample:
      row[f"speedup_vs_{other.split('_')[1]}"] = timing.paired_ratio(per_sample[other],
                                                                     per_sample["jax"])
  if peak_rate:
    peaks += [peak_rate() for _ in range(2)]
    bandwidths += [bandwidth_rate() for _ in range(2)] if bandwidth_rate else []
    width = batch_np["tokens"].shape[1] if "tokens" in batch_np else 0
    params = contenders["jax"].trainable_params() if "jax" in contenders else None
    _add_efficiency(row, per_sample, peaks, bandwidths,
                    flop_counts.train_step_flops(lm, frozen, fusion, size, batch, width),
                    params, batch)
  if keep_key is not None and "jax" in contenders:
    RUNNERS[keep_key] = contenders["jax"]
  del contenders
  gc.collect()
  return row


def _add_efficiency(row, per_sample, peaks, bandwidths, step_flops, params, batch):
  """Each implementation's fraction of the matmul peak; with bandwidths, the step's roofline
  minimum, each implementation's fraction of it, and the speed-up ceiling over eager."""
  peak = timing.summarize(peaks, "FLOP/s")
  step_s = {k: statistics.median(t) * batch for k, t in per_sample.items()}
  row.update({"analytic_flops_per_step": step_flops, "matmul_peak": peak,
              "fraction_of_peak": {k: step_flops / s / peak["median"] for k, s in step_s.items()}})
  if not bandwidths or params is None:
    return
  bandwidth = timing.summarize(bandwidths, "B/s")
  optimizer_bytes = ADAM_BYTES_PER_PARAM * params
  minimum = step_flops / peak["median"] + optimizer_bytes / bandwidth["median"]
  row.update({"stream_bandwidth": bandwidth, "trainable_params": params,
              "optimizer_bytes_per_step": optimizer_bytes, "roofline_step_s": minimum,
              "fraction_of_roofline": {k: minimum / s for k, s in step_s.items()}})
  if "torch_eager" in step_s:
    row["ceiling_vs_eager"] = step_s["torch_eager"] / minimum


def _ceiling_note(row, need):
  """Says so when even a step at the roofline minimum would not reach the target."""
  ceiling, fraction = row.get("ceiling_vs_eager"), row.get("fraction_of_roofline", {})
  if ceiling is None or ceiling >= need:
    return ""
  return (f"out of reach here: a step at the roofline minimum (matmuls at the measured f32 "
          f"peak, Adam at the measured bandwidth) would be {ceiling:.2f}x torch eager; JAX runs "
          f"at {fraction.get('jax', float('nan')):.2f} of that minimum's speed")


def plan(mode):
  """(lm, frozen, fusion) configurations; the frozen head depends on the LM only via q_dim."""
  if mode == "toy":
    return [("skipthoughts", True, "mult"), ("distilbert", False, "mult")]
  full = mode == "full"
  configs = [("skipthoughts", True, "mult"), ("skipthoughts", True, "mutan"),
             ("distilbert", True, "mult")] + ([("distilbert", True, "mutan")] if full else [])
  configs += [("skipthoughts", False, "mult")] + ([("skipthoughts", False, "mutan")] if full else [])
  configs += [(lm, False, f) for lm in FAMILY_LAYERS for f in (("mult", "mutan") if full else
                                                               ("mult",))]
  return configs


def run(mode, log=print):
  try:
    import torch  # pylint: disable=g-import-not-at-top
    threads = timing.configure_torch(torch)
    have_torch = True
  except ImportError:
    threads, have_torch = {"torch": "not installed"}, False
  size = sizes(mode)
  questions = inputs.make_questions(inputs.BATCH)
  repeats = {"full": 5, "quick": 5, "toy": 2}[mode]
  block_s = {"full": 1.0, "quick": 0.3, "toy": 0.05}[mode]
  torch_module = torch if have_torch else None
  peak_rates = {dtype: timing.f32_peak_probe(mode, torch_module, getattr(jnp, dtype))[0]
                for dtype in COMPUTE_DTYPES}
  bandwidth_rate = timing.bandwidth_probe(1 << 16 if mode == "toy" else 1 << 23)
  rows = []
  for (lm, frozen, fusion), dtype in ((c, d) for c in plan(mode) for d in COMPUTE_DTYPES):
    # --quick: torch.compile (tens of seconds per graph here) on the Skip-thoughts e-mult steps.
    compile_torch = mode == "full" or (lm == "skipthoughts" and fusion == "mult")
    log(f"  train step: {lm} {'frozen' if frozen else 'fine-tuned'} {fusion} {dtype}")
    row = measure(lm, frozen, fusion, size=size, questions=questions,
                  repeats=repeats, block_s=block_s,
                  compile_torch=compile_torch and have_torch and mode != "toy",
                  have_torch=have_torch, compute_dtype=dtype,
                  keep_key=(runner_key(lm, size) if not frozen and fusion == "mult" and
                            dtype == "float32" else None),
                  peak_rate=peak_rates[dtype], bandwidth_rate=bandwidth_rate)
    if have_torch and not compile_torch:
      row["notes"]["torch_compile"] = (f"not run in {mode} mode (inductor takes tens of seconds "
                                       "to minutes per graph on 2 cores); run in the full mode")
    rows.append(row)
    log("    warm-up s " + ", ".join(f"{k} {v:.1f}" for k, v in row["warmup_s"].items()) +
        "; samples/s " + ", ".join(f"{k[:-10]} {row[k]['median']:.1f}" for k in row
                                    if k.endswith("_samples_s")))
  targets = []
  bf16_units = any(cpu_units.bf16_units().values())
  for row in rows:
    frozen = row["mode"].startswith("frozen")
    label = f"{row['lm']} {row['mode']} {row['fusion']}"
    if "fraction_of_roofline" in row and (row["compute_dtype"] == "float32" or bf16_units):
      targets.append(timing.target(
          f"train step / roofline ({row['compute_dtype']}): {label}",
          row["fraction_of_roofline"].get("jax"), ">=", ROOFLINE_GOAL,
          f"torch eager: {row['fraction_of_roofline'].get('torch_eager', float('nan')):.2f}"))
    if row["compute_dtype"] == "bfloat16":
      if bf16_units:
        targets.append(timing.target(f"bf16 train step vs torch bf16 autocast eager: {label}",
                                     row.get("speedup_vs_eager"), ">=", 1.2))
        if "speedup_vs_compile" in row:
          targets.append(timing.target(f"bf16 train step vs torch.compile bf16 autocast: {label}",
                                       row["speedup_vs_compile"], ">=", 1.0))
      continue
    # Issue 18's targets, against fused-Adam eager and the whole compiled step alike.
    need = 1.05 if frozen else (1.3 if row["lm"] == "skipthoughts" else 1.0)
    targets.append(timing.target(f"train step vs torch eager: {label}",
                                 row.get("speedup_vs_eager"), ">=", need, _ceiling_note(row, need)))
    if "speedup_vs_compile" in row:
      targets.append(timing.target(f"train step vs torch.compile: {label}",
                                   row["speedup_vs_compile"], ">=", need))
  return {"threads": threads, "sizes": size, "rows": rows,
          "notes": [f"frozen rows: cached question vectors ({size['gru']['hidden_dim']}-d "
                    f"Skip-thoughts, {size['bert']['hidden']}-d for the BERT family, identical "
                    "for DistilBERT/BERT/RoBERTa), fusion + classifier trained only",
                    f"Skip-thoughts GRU: {size['gru']['word_dim']} -> {size['gru']['hidden_dim']}"
                    + ("" if mode == "full" else f" ({mode}: paper size is 620 -> 2400)"),
                    "BERT-family layers: " + ", ".join(f"{k} {v}" for k, v in
                                                       size["bert_layers"].items())
                    + (" (paper sizes)" if mode == "full" else f" ({mode}: reduced from 6/12/12)"),
                    "each configuration runs in float32 and in bfloat16 (JAX compute_dtype "
                    "bfloat16: bf16 operands, float32 accumulation, float32 master weights and "
                    "Adam; PyTorch under CPU bf16 autocast, eager and compiled); the bf16 targets "
                    "apply on CPUs with bf16 units (AMX or AVX512-BF16)",
                    "fraction of peak: analytic matmul FLOPs (benchmarks.flop_counts) per "
                    "second over the matmul peak of the row's dtype (the best of a JAX and a "
                    "PyTorch probe) measured twice before and twice after each row; roofline = those FLOPs at that peak plus the Adam update's "
                    f"{ADAM_BYTES_PER_PARAM} bytes per trainable parameter at the STREAM-triad "
                    "bandwidth measured alongside (they add up: see flops, overlap); ceiling "
                    "= the speed-up over torch eager of a step at the roofline",
                    "warm-up before timing: JAX 1 step (compilation), torch eager 1 step, "
                    "torch.compile 2 steps; then 1 calibration step each, which counts as the "
                    "first round when every implementation runs 1 step per round (the slow, "
                    "fine-tuned rows: calibration_is_round_1 in results.json)"]
                   + ([] if mode == "full" else
                      [f"{mode} mode: {repeats} rounds of about {block_s} s per implementation "
                       "(full: 5 rounds of 1 s); e-mult only for the fine-tuned rows and the "
                       "frozen DistilBERT row (full: also MUTAN); torch.compile only on the "
                       "Skip-thoughts e-mult rows"])
         }, targets
