"""Where a train step spends its time: device time per XLA op (and per PyTorch kernel).

  python -m benchmarks.profile_step --lm distilbert --batch 4480 --dtype bfloat16 [--torch]
  python -m benchmarks.profile_step --lm skipthoughts --frozen --size quick --steps 20

Traces `--steps` warm steps with jax.profiler, reads the trace back with jax.profiler.ProfileData
and prints the ops of the device planes (the host's XLA op threads on a CPU) grouped by name,
largest total first, with their share of the traced device time. Then the same time by op kind,
each matmul shape of the compiled step with its achieved GFLOP/s (benchmarks.hlo_dots), and how
long 0, 1, 2... ops ran at once, with the longest idle gaps: on XLA:CPU independent ops run
concurrently and share the cores, and an op may return before its library's threads finish (the
plain Eigen `dot`: its work shows as a gap before the op that waits for it), so per-op rates are
read beside those lines. With --torch, the PyTorch reference step (bf16 autocast
for --dtype bfloat16) runs under torch.profiler on the same device and its kernels are listed the
same way. Used to find the cause of a missed efficiency target.
"""
import argparse
import collections
import glob
import os
import re
import tempfile

import jax

from benchmarks import hlo_dots, inputs, train_steps
from rsvqa_jax import host_memory


RUNTIME_EVENTS = ("ThunkExecutor", "ThreadpoolListener", "end: ")  # XLA:CPU's own bookkeeping


def op_events(trace_dir):
  """[(start ns, end ns, op name)] over the device planes of a jax.profiler trace."""
  path = max(glob.glob(os.path.join(trace_dir, "**", "*.xplane.pb"), recursive=True),
             key=os.path.getmtime)
  data = jax.profiler.ProfileData.from_file(path)
  planes = [p for p in data.planes if p.name.startswith("/device:")]
  if not planes:  # CPU: XLA ops run on the host plane's threads
    planes = [p for p in data.planes if p.name.startswith("/host:")]
  events = []
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
        if not event.name.startswith(RUNTIME_EVENTS):
          events.append((event.start_ns, event.start_ns + event.duration_ns, event.name))
  return events


def op_times(events):
  """{op name: (total seconds, count)} of `op_events`."""
  totals = collections.defaultdict(lambda: [0.0, 0])
  for start, end, name in events:
    totals[name][0] += (end - start) * 1e-9
    totals[name][1] += 1
  return {k: tuple(v) for k, v in totals.items()}


def concurrency(events):
  """{n: seconds of the traced span during which n ops ran at once}; n = 0 is idle time."""
  edges = sorted([(s, 1) for s, _, _ in events] + [(e, -1) for _, e, _ in events])
  spans, running = collections.Counter(), 0
  for (t, step), (t_next, _) in zip(edges, edges[1:]):
    running += step
    spans[running] += (t_next - t) * 1e-9
  return dict(spans)


def idle_gaps(events):
  """{(op that ended last, op that started next): (idle seconds, count)}: where no op ran.

  On XLA:CPU a long gap after an op often waits for a library call that returned early (its
  threads still computing), so its true time includes the gap."""
  events = sorted(events)
  gaps = collections.defaultdict(lambda: [0.0, 0])
  end, last = events[0][1], events[0][2]
  for start, stop, name in events[1:]:
    if start > end:
      gaps[(last, name)][0] += (start - end) * 1e-9
      gaps[(last, name)][1] += 1
    if stop > end:
      end, last = stop, name
  return {k: tuple(v) for k, v in gaps.items()}


def by_kind(times):
  """{op kind: (seconds, count)}: names without their numeric suffix ("ynn_fusion.8")."""
  kinds = collections.defaultdict(lambda: [0.0, 0])
  for name, (t, n) in times.items():
    kind = re.sub(r"\.\d+$", "", name)
    kinds[kind][0] += t
    kinds[kind][1] += n
  return {k: tuple(v) for k, v in kinds.items()}


def by_matmul(times, dots):
  """{matmul label: (seconds, count, GFLOP/s)} of the ops that `hlo_dots.module_dots` knows."""
  shapes = collections.defaultdict(lambda: [0.0, 0, 0])
  for name, (t, n) in times.items():
    if name in dots:
      label, flops = dots[name]
      shapes[label][0] += t
      shapes[label][1] += n
      shapes[label][2] += flops * n
  return {k: (t, n, flops / t * 1e-9 if t else 0.0) for k, (t, n, flops) in shapes.items()}


def print_table(title, times, steps, top):
  total = sum(t for t, _ in times.values())
  print(f"\n{title}: {total / steps * 1e3:.2f} ms of device time per step, top {top} of "
        f"{len(times)} names")
  for name, (t, n) in sorted(times.items(), key=lambda kv: -kv[1][0])[:top]:
    print(f"  {t / steps * 1e3:9.3f} ms  {100 * t / total:5.1f}%  x{n // steps:<4d} {name[:110]}")


def print_breakdown(events, dots, steps, top):
  """The kinds, matmul shapes and concurrency of a traced JAX step."""
  times = op_times(events)
  print_table("jax by op kind", by_kind(times), steps, top)
  shapes = by_matmul(times, dots)
  print("\njax matmuls: ms per step, ops per step, achieved GFLOP/s" +
        ("" if shapes else " (none read: on a GPU they are cuBLAS custom calls)"))
  for label, (t, n, rate) in sorted(shapes.items(), key=lambda kv: -kv[1][0])[:top]:
    print(f"  {t / steps * 1e3:9.3f} ms  x{n // steps:<4d} {rate:7.1f} GFLOP/s  {label}")
  spans = concurrency(events)
  print("\nops running at once (ms per step): " + ", ".join(
      f"{n}: {t / steps * 1e3:.1f}" for n, t in sorted(spans.items())))
  print("idle gaps, between the op that ended last and the next (ms per step):")
  for (before, after), (t, n) in sorted(idle_gaps(events).items(), key=lambda kv: -kv[1][0])[:5]:
    print(f"  {t / steps * 1e3:9.3f} ms  x{n:<4d} {before} -> {after}")


def profile_jax(model, frozen, batch_np, dtype, steps):
  """(op events, {op: (matmul label, FLOPs)}, seconds) of `steps` traced train steps."""
  runner = train_steps.JaxStep(model, frozen, batch_np, compute_dtype=dtype)
  runner.warmup()
  runner.block(2)
  dots = hlo_dots.module_dots(runner.step.lower(runner.state, runner.batch).compile().as_text())
  with tempfile.TemporaryDirectory() as folder:
    jax.profiler.start_trace(folder)
    seconds = runner.block(steps)
    jax.profiler.stop_trace()
    return op_events(folder), dots, seconds


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
  parser.add_argument("--frozen", action="store_true",
                      help="cached question vectors: the fusion and classifier train alone")
  parser.add_argument("--fusion", default="mult", choices=["mult", "concat", "mutan"])
  parser.add_argument("--size", default="full", choices=["full", "quick"],
                      help="model sizes of benchmarks.train_steps in that mode")
  parser.add_argument("--layers", type=int, help="BERT-family layers (default: the size's)")
  parser.add_argument("--batch", type=int, default=inputs.BATCH)
  parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
  parser.add_argument("--steps", type=int, default=3)
  parser.add_argument("--top", type=int, default=25)
  parser.add_argument("--torch", action="store_true", help="also profile the PyTorch step")
  args = parser.parse_args(argv)
  host_memory.keep_freed_memory()  # before JAX starts its threads, as benchmarks.run does
  questions = inputs.make_questions(args.batch)
  size = train_steps.sizes(args.size)
  if args.layers:
    size["bert_layers"][args.lm] = args.layers
  model, q_dim = train_steps.jax_model(args.lm, args.frozen, args.fusion, size, questions)
  batch_np = train_steps.batch_for(args.lm, args.frozen, q_dim, questions, args.batch)
  label = (f"{args.lm} {'frozen' if args.frozen else 'fine-tuned'} {args.fusion} batch "
           f"{args.batch} {args.dtype}")
  events, dots, seconds = profile_jax(model, args.frozen, batch_np, args.dtype, args.steps)
  print(f"jax {label}: {seconds / args.steps * 1e3:.2f} ms per step (wall, traced)")
  print_table("jax", op_times(events), args.steps, args.top)
  print_breakdown(events, dots, args.steps, args.top)
  if args.torch:
    torch_model = train_steps.torch_model(args.lm, args.frozen, args.fusion, size, questions)
    times, seconds = profile_torch(torch_model, batch_np, args.dtype, args.steps)
    print(f"\ntorch {label}: {seconds / args.steps * 1e3:.2f} ms per step (wall, traced)")
    print_table("torch", times, args.steps, args.top)


if __name__ == "__main__":
  main()
