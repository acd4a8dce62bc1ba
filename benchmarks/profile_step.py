"""Where a fine-tuned train step spends its time: device time per XLA op (and per PyTorch kernel).

  python -m benchmarks.profile_step --lm distilbert --batch 4480 --dtype bfloat16 [--torch]

Traces `--steps` warm steps with jax.profiler, reads the trace back with jax.profiler.ProfileData
and prints the ops of the device planes (the host's XLA op threads on a CPU) grouped by name,
largest total first, with their share of the traced device time. With --torch, the PyTorch
reference step (bf16 autocast for --dtype bfloat16) runs under torch.profiler on the same device
and its kernels are listed the same way. Used to find the cause of a missed efficiency target.
"""
import argparse
import collections
import glob
import os
import tempfile

import jax

from benchmarks import inputs, train_steps
from rsvqa_jax import host_memory


RUNTIME_EVENTS = ("ThunkExecutor", "ThreadpoolListener", "end: ")  # XLA:CPU's own bookkeeping


def op_times(trace_dir):
  """{op name: (total seconds, count)} over the device planes of a jax.profiler trace."""
  path = max(glob.glob(os.path.join(trace_dir, "**", "*.xplane.pb"), recursive=True),
             key=os.path.getmtime)
  data = jax.profiler.ProfileData.from_file(path)
  planes = [p for p in data.planes if p.name.startswith("/device:")]
  if not planes:  # CPU: XLA ops run on the host plane's threads
    planes = [p for p in data.planes if p.name.startswith("/host:")]
  totals = collections.defaultdict(lambda: [0.0, 0])
  for plane in planes:
    lines = [line for line in plane.lines if any(True for _ in line.events)]
    print(f"  trace plane {plane.name}: " + ", ".join(
        f"{line.name} ({sum(1 for _ in line.events)})" for line in lines))
    if any(line.name == "XLA Ops" for line in lines):  # GPU: one event per op, streams repeat it
      lines = [line for line in lines if line.name == "XLA Ops"]
    elif plane.name.startswith("/device:"):
      lines = [line for line in lines if line.name.startswith("Stream")]
    else:
      lines = [line for line in lines if "XLA" in line.name and "Modules" not in line.name]
    for line in lines:
      for event in line.events:
        if event.name.startswith(RUNTIME_EVENTS):
          continue
        entry = totals[event.name]
        entry[0] += event.duration_ns * 1e-9
        entry[1] += 1
  return {k: tuple(v) for k, v in totals.items()}


def print_table(title, times, steps, top):
  total = sum(t for t, _ in times.values())
  print(f"\n{title}: {total / steps * 1e3:.2f} ms of device time per step, top {top} of "
        f"{len(times)} names")
  for name, (t, n) in sorted(times.items(), key=lambda kv: -kv[1][0])[:top]:
    print(f"  {t / steps * 1e3:9.3f} ms  {100 * t / total:5.1f}%  x{n // steps:<4d} {name[:110]}")


def profile_jax(model, batch_np, dtype, steps):
  """{op: (seconds, count)} of `steps` traced steps of rsvqa_jax's train step, and seconds."""
  runner = train_steps.JaxStep(model, False, batch_np, compute_dtype=dtype)
  runner.warmup()
  runner.block(2)
  with tempfile.TemporaryDirectory() as folder:
    jax.profiler.start_trace(folder)
    seconds = runner.block(steps)
    jax.profiler.stop_trace()
    return op_times(folder), seconds


def profile_torch(model, batch_np, dtype, steps):
  """{kernel: (seconds, count)} of `steps` PyTorch steps under torch.profiler, and seconds."""
  import torch  # pylint: disable=g-import-not-at-top
  device = "cuda" if torch.cuda.is_available() else "cpu"
  step = train_steps.TorchStep(model, batch_np, False, device,
                               torch.bfloat16 if dtype == "bfloat16" else None)
  step.warmup()
  step.block(2)
  activity = (torch.profiler.ProfilerActivity.CUDA if device == "cuda" else
              torch.profiler.ProfilerActivity.CPU)
  with torch.profiler.profile(activities=[activity]) as prof:
    seconds = step.block(steps)
  key = "device_time_total" if device == "cuda" else "self_cpu_time_total"
  return {e.key: (getattr(e, key) * 1e-6, e.count) for e in prof.key_averages()
          if getattr(e, key) > 0}, seconds


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--lm", default="distilbert", choices=["distilbert", "bert", "roberta",
                                                            "skipthoughts"])
  parser.add_argument("--batch", type=int, default=inputs.BATCH)
  parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
  parser.add_argument("--steps", type=int, default=3)
  parser.add_argument("--top", type=int, default=25)
  parser.add_argument("--torch", action="store_true", help="also profile the PyTorch step")
  args = parser.parse_args(argv)
  host_memory.keep_freed_memory()  # before JAX starts its threads, as benchmarks.run does
  questions = inputs.make_questions(args.batch)
  size = train_steps.sizes("full")
  model, q_dim = train_steps.jax_model(args.lm, False, "mult", size, questions)
  batch_np = train_steps.batch_for(args.lm, False, q_dim, questions, args.batch)
  label = f"{args.lm} batch {args.batch} {args.dtype}"
  runs = [("jax", lambda: profile_jax(model, batch_np, args.dtype, args.steps))]
  if args.torch:
    torch_model = train_steps.torch_model(args.lm, False, "mult", size, questions)
    runs.append(("torch", lambda: profile_torch(torch_model, batch_np, args.dtype, args.steps)))
  for name, profile in runs:
    times, seconds = profile()
    print(f"{name} {label}: {seconds / args.steps * 1e3:.2f} ms per step (wall, traced)")
    print_table(name, times, args.steps, args.top)


if __name__ == "__main__":
  main()
