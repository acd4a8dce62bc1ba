"""bfloat16 on an accelerator: samples/s and MFU of the fine-tuned steps, JAX against PyTorch.

  python -m benchmarks.run --only accelerator --out DIR     # where a GPU is lent

The paper-size fine-tuned steps (DistilBERT 6 layers; Skip-thoughts GRU 620 -> 2400; e-mult
head) run with compute_dtype bfloat16 (parameters and Adam stay float32) at the paper's batch
of 70 and at larger batches. MFU = the analytic model FLOPs of a step (benchmarks.flop_counts)
per second over the dense bf16 peak of the datasheet; the fraction of a bf16 matmul peak
measured in the same process is given beside it. The PyTorch side is the same architecture in
eager mode under bf16 autocast on the same device and, on a GPU, the whole step under
torch.compile(mode="reduce-overhead") (CUDA graphs), alternated with JAX round by round
(benchmarks.train_steps.measure). Targets (issue 18): bf16 MFU >= 0.40 (DistilBERT) and >= 0.45
(Skip-thoughts) at the best batch, JAX >= 1.0x the reduce-overhead step at the paper's batch and
at the best batch. On a CPU the family runs toy sizes only, to check the code.
"""
import jax
import jax.numpy as jnp

from benchmarks import inputs, timing, train_steps

# Dense bf16 tensor-core peaks (FLOP/s) from the vendors' datasheets, by device_kind substring.
DATASHEET_BF16_PEAK = {"H200": 989.4e12, "H100": 989.4e12, "A100": 312e12, "L4": 121e12}
BATCHES = {"gpu": (70, 560, 4480), "toy": (8, 16)}  # the first is the paper's batch
MFU_TARGETS = {"distilbert": 0.40, "skipthoughts": 0.45}  # issue 18, at each LM's best batch
GPU_COMPILE_MODE = "reduce-overhead"  # torch.compile with CUDA graphs: no per-kernel launches


def datasheet_peak(device):
  """The datasheet bf16 peak of a device, or None when its kind is not in the table."""
  kind = getattr(device, "device_kind", "")
  return next((v for k, v in DATASHEET_BF16_PEAK.items() if k in kind), None)


def _torch_device():
  try:
    import torch  # pylint: disable=g-import-not-at-top
  except ImportError:
    return None
  return "cuda" if torch.cuda.is_available() else "cpu"


def _torch_peak_bytes(device, reset=False):
  if device != "cuda":
    return None
  import torch  # pylint: disable=g-import-not-at-top
  if reset:
    torch.cuda.reset_peak_memory_stats()
  return torch.cuda.max_memory_allocated()


def _jax_peak_bytes():
  stats = jax.devices()[0].memory_stats() or {}
  return stats.get("peak_bytes_in_use")


def step_row(lm, batch, size, peak_rate, spec_peak, repeats, block_s, torch_device):
  """One (language model, batch) configuration: throughput, MFU and memory of both sides."""
  _torch_peak_bytes(torch_device, reset=True)
  row = train_steps.measure(lm, False, "mult", size=size, questions=inputs.make_questions(batch),
                            repeats=repeats, block_s=block_s,
                            compile_torch=torch_device == "cuda",
                            have_torch=torch_device is not None, compute_dtype="bfloat16",
                            torch_device=torch_device or "cpu", peak_rate=peak_rate,
                            torch_compile_mode=GPU_COMPILE_MODE)
  analytic = row["analytic_flops_per_step"]
  jax_step_s = [batch / x for x in row["jax_samples_s"]["values"]]
  row.update({"batch": batch, "jax_step_s": timing.summarize(jax_step_s, "s"),
              "jax_peak_device_bytes_so_far": _jax_peak_bytes(),
              "torch_peak_device_bytes": _torch_peak_bytes(torch_device)})
  if spec_peak:
    row["jax_mfu"] = timing.summarize([analytic / t / spec_peak for t in jax_step_s])
    if "torch_eager_samples_s" in row:
      row["torch_mfu"] = timing.summarize([analytic * s / batch / spec_peak
                                           for s in row["torch_eager_samples_s"]["values"]])
  return row


def run(mode, log=print):
  on_accelerator = jax.default_backend() != "cpu"
  size = train_steps.sizes("full" if on_accelerator and mode != "toy" else "toy")
  batches = BATCHES["gpu" if on_accelerator and mode != "toy" else "toy"]
  device = jax.devices()[0]
  spec_peak = datasheet_peak(device)
  log(f"  accelerator: {device.device_kind}, datasheet bf16 peak {spec_peak}")
  peak_rate = timing.peak_probe(8192 if on_accelerator else 256, chain=8, dtype=jnp.bfloat16,
                                also=())
  peak = timing.summarize([peak_rate() for _ in range(5)], "FLOP/s")
  torch_device = _torch_device()
  rows = []
  for lm in ("distilbert", "skipthoughts"):
    for batch in batches:
      log(f"  accelerator: {lm} fine-tuned bf16, batch {batch}")
      try:
        rows.append(step_row(lm, batch, size, peak_rate, spec_peak, repeats=3,
                             block_s=0.5 if on_accelerator else 0.05,
                             torch_device=torch_device))
      except Exception as e:  # pylint: disable=broad-except
        rows.append({"lm": lm, "batch": batch, "error": f"{type(e).__name__}: {e}"[:300]})
        log(f"    failed: {rows[-1]['error']}")
        continue
      r = rows[-1]
      log(f"    samples/s jax {r['jax_samples_s']['median']:.0f}" +
          (f", torch {r['torch_eager_samples_s']['median']:.0f}"
           if "torch_eager_samples_s" in r else "") +
          (f"; MFU {r['jax_mfu']['median']:.3f}" if "jax_mfu" in r else "") +
          f"; warm-up {r['warmup_s']}")
  return {"device": str(device), "device_kind": device.device_kind,
          "datasheet_bf16_peak": spec_peak, "measured_bf16_matmul_peak": peak,
          "peak_config": {"n": 8192 if on_accelerator else 256, "chain": 8, "dtype": "bfloat16"},
          "torch_device": torch_device, "sizes": size, "rows": rows,
          "notes": ["MFU: analytic train FLOPs (3 x forward matmuls) / step time / datasheet "
                    "dense bf16 peak; the Adam update and the element-wise work count as time, "
                    "not FLOPs",
                    "jax_peak_device_bytes_so_far is the process's peak (rows run from small to "
                    "large batches); torch_peak_device_bytes is reset per row",
                    "best batch: the one whose JAX step reaches the most analytic FLOP/s (the "
                    "highest MFU)"]}, targets(rows, batches[0])


def targets(rows, paper_batch):
  """Issue 18's GPU targets: bf16 MFU at each LM's best batch, and JAX over the whole step
  under torch.compile(mode="reduce-overhead") at the paper's batch and at the best one."""
  out = []
  for lm, mfu_goal in MFU_TARGETS.items():
    done = [r for r in rows if r["lm"] == lm and "error" not in r]
    if not done:
      continue
    best = max(done, key=lambda r: r["analytic_flops_per_step"] / r["jax_step_s"]["median"])
    out.append(timing.target(f"bf16 MFU, fine-tuned {lm}, best batch ({best['batch']})",
                             best.get("jax_mfu"), ">=", mfu_goal))
    for r in sorted((r for r in done if r["batch"] in (paper_batch, best["batch"])),
                    key=lambda r: r["batch"]):
      out.append(timing.target(f"bf16 train step vs torch.compile (reduce-overhead), fine-tuned "
                               f"{lm}, batch {r['batch']}", r.get("speedup_vs_compile"), ">=", 1.0))
  return out
