"""The original RSVQA training pipeline as its code runs, against this tool's pipeline, same model.

The model on both sides is the original code's (syvlo/RSVQA model.py; here configs/rsvqa_baseline.py,
model.head=original): the frozen ResNet-152 up to its 8x8x2048 map, a trainable 1x1 conv, dropout
before each 1200-d projection, dropout(tanh(v * q)), FC 256; questions padded to 20 tokens and
encoded by the Bayesian uni-skip (dropout 0.25, six masks drawn once per sequence). "frozen" is the
original code as it is (the uni-skip frozen, its masks still drawn every batch, so its vectors
cannot be cached); "fine-tuned" trains the uni-skip too.

Original side (PyTorch eager, `benchmarks.torch_reference`): the images are preloaded in memory
once before timing, as the original loader does (not timed); per batch of 70 it gathers the
pixels, runs the frozen ResNet-152 forward (training-mode BatchNorm, no gradients) on all 70,
runs skip-thoughts.torch's per-step Bayesian GRU cell up to the batch's longest question (frozen:
no gradients, then the head's train step; fine-tuned: inside the train step) and the fused-Adam
train step of the trainable layers. Every figure is a real batch: nothing is extrapolated from
fewer images. On a CUDA device (where JAX runs on a GPU too) it runs there, else on the CPU.
This tool: the ResNet map is cached once per image (feature_cache_once_s: the ResNet forward
measured here x 772 LR images), and an epoch is the NumPy batch iterator over LR-size columns
(length-bucketed tokens), the host gather of the cached maps and the jit train step, which runs
the Bayesian uni-skip (frozen or trained) and the original head.
Each round runs the four pipelines in turn (timing.alternate), after one warm-up batch each.
"""
import os
import time

import jax
import numpy as np
from flax import nnx

from benchmarks import flop_counts, inputs, timing, train_steps
from rsvqa_jax import config as config_lib, cpu_units
from rsvqa_jax.data import pipeline as pipeline_lib
from rsvqa_jax.models.resnet import IMAGENET_MEAN
from rsvqa_jax.models.skipthoughts import SkipThoughts
from rsvqa_jax.models.vqa import RSVQAModel, make_head
from rsvqa_jax.train import sharding as shd

LR_IMAGES = 772
BASELINE = config_lib.load(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                        "configs", "rsvqa_baseline.py"))
ORIGINAL_LENGTH = BASELINE.text.max_length  # 20, the original tokenizer's padding
NAMES = {"frozen": "original model, frozen Bayesian uni-skip",
         "tuned": "original model, fine-tuned Bayesian uni-skip"}


def image_size(mode):
  """LR tiles are 256 px (an 8x8 ResNet-152 map); toy mode uses 64 px and a tiny ResNet."""
  return 64 if mode == "toy" else 256


def torch_device(torch):
  """Where the original side runs: CUDA when JAX runs on a GPU and PyTorch sees one."""
  return "cuda" if jax.default_backend() == "gpu" and torch.cuda.is_available() else "cpu"


class OriginalPipeline:
  """The original code's training loop body for one model, timed per batch by component."""

  def __init__(self, frozen, questions, mode, device, resnet, pool):
    import torch  # pylint: disable=g-import-not-at-top
    from benchmarks import torch_reference as tr  # pylint: disable=g-import-not-at-top
    self.torch, self.device, self.resnet, self.pool = torch, device, resnet, pool
    size = train_steps.sizes(mode)["gru"]
    side = image_size(mode) // 32
    map_shape = (side, side, resnet.out_features)
    gru = tr.BayesianUniSkip(questions.word_vocab_size, dropout=BASELINE.text.dropout, **size)
    m = BASELINE.model
    head = tr.OriginalHead(map_shape, size["hidden_dim"], inputs.NUM_ANSWERS, m.hidden_dim,
                           m.classifier_dim, m.dropout)
    self.gru = gru.to(device).train() if frozen else None
    model = tr.VQA(head, None if frozen else gru).to(device)
    self.step = tr.make_train_step(model)  # fused Adam, the model in training mode
    self.tokens = torch.from_numpy(questions.word_tokens).long().to(device)
    self.mask = torch.from_numpy(questions.word_mask).long().to(device)
    self.answer = torch.from_numpy(inputs.head_arrays(inputs.BATCH, 1)["answer"]).long().to(device)
    self.mean = torch.tensor(IMAGENET_MEAN, device=device).view(1, 3, 1, 1) * 255.0
    self.rng = np.random.default_rng(0)
    self.components = {k: [] for k in ("batch", "resnet", "uni_skip_forward", "train_step")}
    self.sync = torch.cuda.synchronize if device == "cuda" else lambda: None

  def run_batch(self, record=True):
    """One batch of 70 through the original loop; returns its seconds."""
    torch, times = self.torch, []
    self.sync()
    times.append(time.perf_counter())
    pixels = self.pool[self.rng.integers(0, len(self.pool), inputs.BATCH)]
    x = torch.from_numpy(pixels).to(self.device).permute(0, 3, 1, 2).float().sub_(self.mean)
    self.sync()
    times.append(time.perf_counter())
    with torch.no_grad():
      fmap = self.resnet.feature_map(x)
    self.sync()
    times.append(time.perf_counter())
    batch = {"image_features": fmap, "answer": self.answer, "tokens": self.tokens,
             "mask": self.mask}
    if self.gru is not None:
      with torch.no_grad():
        batch["question_vector"] = self.gru(self.tokens, self.mask)
      self.sync()
    times.append(time.perf_counter())
    self.step(batch)
    self.sync()
    times.append(time.perf_counter())
    if record:
      for name, t0, t1 in zip(self.components, times, times[1:]):
        if name != "uni_skip_forward" or self.gru is not None:
          self.components[name].append(t1 - t0)
    return times[-1] - times[0]


def original_jax_model(size, vocab_size, map_shape):
  """configs/rsvqa_baseline.py's model: Bayesian uni-skip + the original head on cached maps."""
  rngs = nnx.Rngs(params=0, dropout=1)
  encoder = SkipThoughts(vocab_size, dropout=BASELINE.text.dropout, bayesian=True, rngs=rngs,
                         **size["gru"])
  head = make_head(BASELINE.model, q_dim=size["gru"]["hidden_dim"],
                   v_dim=int(np.prod(map_shape)), num_answers=inputs.NUM_ANSWERS,
                   map_shape=map_shape, rngs=rngs)
  return RSVQAModel(head, encoder)


def lr_columns(questions, n, images=LR_IMAGES, seed=0):
  """LR-size training columns: the benchmark questions tiled to `n` rows."""
  rng = np.random.default_rng(seed)
  pick = rng.integers(0, len(questions.text), n)
  return {"image_index": rng.integers(0, images, n).astype(np.int32),
          "answer": rng.integers(0, inputs.NUM_ANSWERS, n).astype(np.int32),
          "tokens": questions.word_tokens[pick], "mask": questions.word_mask[pick]}, \
      questions.word_mask[pick].sum(1)


class CachedPipeline:
  """This tool's epoch loop body: iterator -> host gather of cached maps -> jit step."""

  def __init__(self, frozen, questions, mode, features, map_shape, rows=inputs.LR_TRAIN_QUESTIONS,
               compute_dtype="float32"):
    columns, lengths = lr_columns(questions, rows)
    self.iterator, self.twin = (pipeline_lib.batch_iterator(
        columns, batch_size=inputs.BATCH, shuffle=True, seed=0, num_epochs=None,
        drop_remainder=True, length_buckets=inputs.buckets_for(questions.word_tokens.shape[1]),
        lengths=lengths) for _ in range(2))
    self.widths, self.mean_width = [], None
    self.features = features
    model = original_jax_model(train_steps.sizes(mode), questions.word_vocab_size, map_shape)
    self.step = train_steps.JaxStep(model, frozen, self.model_batch(next(self.twin)),
                                    compute_dtype=compute_dtype)
    self.step_dtype = compute_dtype

  def model_batch(self, batch):
    return {"image_features": self.features[batch["image_index"]], "answer": batch["answer"],
            "tokens": batch["tokens"], "mask": batch["mask"]}

  def run_steps(self, steps):
    """Seconds per step over `steps` steps of the epoch stream."""
    s = self.step
    start = time.perf_counter()
    for _ in range(steps):
      s.state, s.metrics = s.step(s.state, shd.global_batch(self.model_batch(next(self.iterator)),
                                                            s.mesh))
    jax.block_until_ready(s.metrics)
    return (time.perf_counter() - start) / steps

  def warmup(self, probe_batches=200):
    """Compiles the step for every token width the first `probe_batches` batches use.

    The widths are read from a twin iterator (same seed), so the timed stream is not consumed.
    """
    start = time.perf_counter()
    s = self.step
    firsts, widths = {}, []
    for _ in range(probe_batches):
      b = next(self.twin)
      firsts.setdefault(b["tokens"].shape[1], b)
      widths.append(b["tokens"].shape[1])
    self.mean_width = float(np.mean(widths))
    for batch in firsts.values():
      s.state, s.metrics = s.step(s.state, shd.global_batch(self.model_batch(batch), s.mesh))
    jax.block_until_ready(s.metrics)
    self.widths = sorted(firsts)
    return time.perf_counter() - start


def _frozen_ceiling(mode, torch, row, mean_width, dtype):
  """The speed-up of a frozen step that did nothing but the uni-skip forward at the peak of
  `dtype`."""
  probe, _ = timing.f32_peak_probe(mode, torch, getattr(jax.numpy, dtype))
  peak = max(probe() for _ in range(2))
  gru = train_steps.sizes(mode)["gru"]
  flops = flop_counts.gru_forward_flops(inputs.BATCH, mean_width, gru["word_dim"],
                                        gru["hidden_dim"])
  original_s = row["original_s_per_1000"]["median"] * inputs.BATCH / 1000
  return {"uni_skip_forward_gflop": flops * 1e-9, "peak_gflop_s": peak * 1e-9,
          "mean_token_width": mean_width, "speedup": original_s / (flops / peak)}


def _torch_side(torch, mode, questions, device):
  """The two original pipelines, sharing one frozen ResNet and one preloaded image set, and
  the thread counts both sides run with."""
  from benchmarks import torch_reference as tr  # pylint: disable=g-import-not-at-top
  threads = timing.configure_torch(torch)
  torch.manual_seed(0)
  resnet = (tr.ResNet(blocks=(1, 1, 1, 1), width=8) if mode == "toy" else tr.ResNet())
  resnet = resnet.to(device).train()  # frozen, but BatchNorm on batch statistics, as the original
  for p in resnet.parameters():
    p.requires_grad_(False)
  side = image_size(mode)
  pool = np.random.default_rng(0).integers(0, 256, (LR_IMAGES, side, side, 3), dtype=np.uint8)
  return {k: OriginalPipeline(k == "frozen", questions, mode, device, resnet, pool)
          for k in ("frozen", "tuned")}, (side // 32, side // 32, resnet.out_features), threads


def run(mode, log=print):
  repeats = 3 if mode == "full" else 2
  questions = inputs.make_questions(inputs.BATCH, word_width=ORIGINAL_LENGTH)
  try:
    import torch  # pylint: disable=g-import-not-at-top
  except ImportError:
    return {"notes": ["torch not installed: original pipeline not measured"]}, [
        timing.target(f"original pipeline vs this tool: {NAMES['frozen']}", None, ">=", 50.0,
                      "torch missing")]
  device = torch_device(torch)
  log(f"  pipeline: original (torch eager on {device}, per-batch ResNet-152 and Bayesian uni-skip)")
  original, map_shape, threads = _torch_side(torch, mode, questions, device)
  warm = {f"original {k}": p.run_batch(record=False) for k, p in original.items()}
  log("  pipeline: this tool (cached ResNet maps, same model)")
  features = np.abs(np.random.default_rng(1).standard_normal(
      (LR_IMAGES, int(np.prod(map_shape))), np.float32))
  n_rows = 2000 if mode == "toy" else inputs.LR_TRAIN_QUESTIONS
  # bf16 rows (compute_dtype=bfloat16) where the CPU has bf16 units, beside the float32 ones.
  dtypes = (("", "float32"),) + ((("bf16 ", "bfloat16"),) if mode == "toy" or any(
      cpu_units.bf16_units().values()) or device == "cuda" else ())
  ours = {f"{tag}{k}": CachedPipeline(k == "frozen", questions, mode, features, map_shape, n_rows,
                                      dtype)
          for tag, dtype in dtypes for k in ("frozen", "tuned")}
  warm.update({f"tool {k}": p.warmup() for k, p in ours.items()})
  steps = {"full": {"frozen": 20, "tuned": 5}, "quick": {"frozen": 10, "tuned": 3},
           "toy": {"frozen": 2, "tuned": 1}}[mode]
  runners = {f"original {k}": original[k].run_batch for k in ("frozen", "tuned")}
  for name, p in ours.items():
    runners[f"tool {name}"] = (lambda p, n: lambda: p.run_steps(n))(p, steps[name.split()[-1]])
  times, errors = timing.alternate(runners, repeats)
  if errors:
    raise RuntimeError(f"pipeline runs failed: {errors}")
  per_k = 1000 / inputs.BATCH
  epoch = inputs.LR_TRAIN_QUESTIONS / inputs.BATCH
  rows = []
  for name in ours:
    k = name.split()[-1]
    orig, mine = times[f"original {k}"], times[f"tool {name}"]
    rows.append({
        "model": NAMES[k] + (", this tool in bf16" if name.startswith("bf16") else ""),
        "original_s_per_1000": timing.summarize([t * per_k for t in orig], "s"),
        "tool_s_per_1000": timing.summarize([t * per_k for t in mine], "s"),
        "original_epoch_s": timing.summarize([t * epoch for t in orig], "s"),
        "tool_epoch_s": timing.summarize([t * epoch for t in mine], "s"),
        "speedup": timing.paired_ratio(orig, mine),
        "original_components_s_per_batch": {
            c: timing.summarize(v, "s") for c, v in original[k].components.items() if v},
    })
  resnet_per_image = [t / inputs.BATCH for k in original for t in original[k].components["resnet"]]
  where = f"PyTorch eager on {device}" + ("" if device == "cuda" else
                                          " (no GPU here: the original ran on one)")
  section = {
      "rows": rows,
      "device": device,
      "threads": threads,
      "components_original_s_per_batch": rows[0]["original_components_s_per_batch"],
      "tool_warmup_s": warm,
      "tool_token_widths": {k: p.widths for k, p in ours.items()},
      "feature_cache_once_s": timing.summarize([t * LR_IMAGES for t in resnet_per_image], "s"),
      "notes": [f"model on both sides: configs/rsvqa_baseline.py (original head, 1x1 conv over the "
                f"{map_shape[0]}x{map_shape[1]}x{map_shape[2]} map, Bayesian uni-skip dropout "
                f"{BASELINE.text.dropout}); questions padded to {ORIGINAL_LENGTH}",
                f"original side: {where}; images preloaded once before timing, as the original "
                "loader does; every batch runs the frozen ResNet-152 forward on all 70 images "
                "(nothing extrapolated), the per-step Bayesian GRU cell up to the batch's "
                "longest question, and a fused-Adam train step; one warm-up batch first",
                "original side, not modelled (each would make it slower): its random "
                "flips/rotations of training images, its per-batch Python data loader",
                "this tool: rsvqa_jax batch_iterator + host gather of cached maps + jit train "
                f"step over {n_rows:,} LR-size rows (random cached maps), tokens in length "
                "buckets; the Bayesian uni-skip runs every step on both sides; the rows marked "
                "bf16 run the step with compute_dtype=bfloat16 (the original side stays "
                "float32, as the original code ran)",
                "feature_cache_once_s: one-time cost of the cached maps "
                f"({LR_IMAGES} LR images x the ResNet-152 forward per image above), paid once "
                "for all epochs, seeds and runs"] +
               ([] if mode == "full" else
                [f"{mode} mode: {repeats} rounds (full: 3), the uni-skip at the reduced width of "
                 "train_steps" + (", a tiny ResNet on 64 px images" if mode == "toy" else "")]),
  }
  label = "" if device == "cpu" else f" ({device})"
  targets = []
  for row, name in zip(rows, ours):
    dtype = ours[name].step_dtype
    if name.endswith("frozen"):
      row["ceiling"] = _frozen_ceiling(mode, torch, row, ours[name].mean_width, dtype)
    ceiling = row.get("ceiling", {}).get("speedup", float("inf"))
    targets.append(timing.target(
        f"original pipeline vs this tool{label}: {row['model']}", row["speedup"], ">=",
        50.0 if name.endswith("frozen") else 5.0,
        "" if ceiling >= 50.0 else f"out of reach here: a step doing only the uni-skip forward "
        f"at the measured {dtype} peak would be {ceiling:.1f}x"))
  section["notes"].append(
      "ceiling (frozen): the original's s per batch over the least time the frozen step can "
      "take here, the uni-skip forward alone (it cannot be cached: its masks change every batch) "
      "at the measured matmul peak of the step's dtype, over the mean token width of the batches "
      f"({rows[0]['ceiling']['uni_skip_forward_gflop']:.3g} GFLOP per batch at " + ", ".join(
          f"{r['ceiling']['peak_gflop_s']:.0f}" for r in rows if "ceiling" in r) + " GFLOP/s)")
  return section, targets
