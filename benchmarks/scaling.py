"""Data-parallel scaling over forced host devices, and peak host memory of an LR-size run.

Each device count runs in its own subprocess (XLA_FLAGS=--xla_force_host_platform_device_count=N
must be set before jax starts): the frozen-LM cached-feature train step (Skip-thoughts 2400-d
vectors, e-mult) at a global batch of 280 (70 x 4, divisible by 1, 2, 4 and 8) on a 'data' mesh
over N devices; it reports samples/s, the per-device memory XLA plans for the step
(arguments + temporaries + outputs - aliased), and the losses of its first steps, which must
match the 1-device run. On this 2-core CPU all forced devices share the same two cores, so
samples/s can only show the partitioning overhead, not a speed-up.
Peak RSS: a subprocess trains on LR-size cached features (57,223 questions, 772 images, random
2400-d question vectors and 2048-d image features held in memory) through the package's batch
iterator and reads its own peak resident set size: VmHWM of /proc/self/status, the high-water
mark of this process image. (resource.getrusage's ru_maxrss is not used: on Linux it keeps the
maximum of the forked parent across exec, so a worker started by the harness would report the
harness's own RSS, about 3 GiB by then, instead of its own.) The RSS at each stage (imports,
arrays, first step, end) is recorded too.
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import time

from rsvqa_jax import host_memory

GLOBAL_BATCH = 280
DEVICE_COUNTS = {"full": (1, 2, 4, 8), "quick": (1, 8), "toy": (1, 8)}
LOSS_STEPS = 3


def memory_status(path="/proc/self/status"):
  """{'VmRSS': bytes, 'VmHWM': bytes} of this process (Linux); {} where there is no procfs."""
  try:
    with open(path, encoding="utf-8") as f:
      fields = dict(line.split(":", 1) for line in f if ":" in line)
  except OSError:
    return {}
  return {k: int(fields[k].split()[0]) * 1024 for k in ("VmRSS", "VmHWM") if k in fields}


def peak_rss_bytes():
  """Peak RSS of this process image: VmHWM; ru_maxrss only where procfs is missing."""
  status = memory_status()
  if "VmHWM" in status:
    return status["VmHWM"], "VmHWM (/proc/self/status)"
  return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, "ru_maxrss"


def _env(devices):
  env = dict(os.environ)
  flags = [f for f in env.get("XLA_FLAGS", "").split()
           if not f.startswith("--xla_force_host_platform_device_count")]
  env["XLA_FLAGS"] = " ".join(flags + [f"--xla_force_host_platform_device_count={devices}"])
  env["JAX_PLATFORMS"] = "cpu"
  return env


def _subprocess(args, devices, timeout):
  root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  env = _env(devices)
  env["PYTHONPATH"] = os.pathsep.join([root] + [p for p in [env.get("PYTHONPATH")] if p])
  proc = subprocess.run([sys.executable, "-m", "benchmarks.scaling", *args], env=env, cwd=root,
                        capture_output=True, text=True, timeout=timeout, check=False)
  lines = [l for l in proc.stdout.splitlines() if l.startswith("{")]
  if proc.returncode or not lines:
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
    return {"error": f"exit {proc.returncode}: {' | '.join(tail)[:400]}"}
  return json.loads(lines[-1])


def _head_step(devices, mode):
  """(JaxStep of the cached-feature head on a mesh of `devices`, its numpy batch)."""
  import jax  # pylint: disable=g-import-not-at-top
  from benchmarks import inputs, train_steps  # pylint: disable=g-import-not-at-top
  from rsvqa_jax.train import sharding as shd  # pylint: disable=g-import-not-at-top
  mesh = shd.make_mesh(jax.devices()[:devices])
  size = train_steps.sizes("toy" if mode == "toy" else "full")  # the head is cheap at paper size
  model, _ = train_steps.jax_model("skipthoughts", True, "mult", size, None)
  batch = inputs.head_arrays(GLOBAL_BATCH, size["gru"]["hidden_dim"])
  return train_steps.JaxStep(model, True, batch, mesh=mesh), batch


def worker_scaling(devices, steps, repeats, mode):
  import jax  # pylint: disable=g-import-not-at-top
  runner, _ = _head_step(devices, mode)
  compiled = runner.step.lower(runner.state, runner.batch).compile()
  runner.step = compiled
  mem = compiled.memory_analysis()
  per_device = (mem.argument_size_in_bytes + mem.temp_size_in_bytes + mem.output_size_in_bytes
                - mem.alias_size_in_bytes)
  losses = []
  for _ in range(LOSS_STEPS):
    runner.run_one()
    losses.append(float(jax.device_get(runner.metrics["loss"])))
  times = [runner.block(steps) for _ in range(repeats)]
  return {"devices": devices, "jax_devices": jax.device_count(), "losses": losses,
          "samples_s": [steps * GLOBAL_BATCH / t for t in times],
          "per_device_bytes": per_device,
          "memory_analysis": {"argument": mem.argument_size_in_bytes,
                              "temp": mem.temp_size_in_bytes,
                              "output": mem.output_size_in_bytes,
                              "alias": mem.alias_size_in_bytes}}


def worker_rss(steps, mode):
  stages = {}
  import jax  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top
  from benchmarks import inputs, pipeline, train_steps  # pylint: disable=g-import-not-at-top
  from rsvqa_jax.data import pipeline as pipeline_lib  # pylint: disable=g-import-not-at-top
  from rsvqa_jax.train import sharding as shd  # pylint: disable=g-import-not-at-top
  jax.numpy.zeros(1).block_until_ready()
  stages["imports and jax backend"] = memory_status().get("VmRSS")
  n = 2000 if mode == "toy" else inputs.LR_TRAIN_QUESTIONS
  size = train_steps.sizes("toy" if mode == "toy" else "full")
  rng = np.random.default_rng(0)
  features = np.abs(rng.standard_normal((pipeline.LR_IMAGES, inputs.IMAGE_DIM), np.float32))
  q_vectors = rng.standard_normal((n, size["gru"]["hidden_dim"]), np.float32)
  columns = {"image_index": rng.integers(0, pipeline.LR_IMAGES, n).astype(np.int32),
             "answer": rng.integers(0, inputs.NUM_ANSWERS, n).astype(np.int32)}
  iterator = pipeline_lib.batch_iterator(columns, batch_size=inputs.BATCH, shuffle=True, seed=0,
                                         num_epochs=1, drop_remainder=True)
  stages["cached arrays allocated"] = memory_status().get("VmRSS")

  def model_batch(b):
    return {"image_features": features[b["image_index"]], "question_vector": q_vectors[b["index"]],
            "answer": b["answer"]}

  first = next(iterator)
  model, _ = train_steps.jax_model("skipthoughts", True, "mult", size, None)
  runner = train_steps.JaxStep(model, True, model_batch(first))
  start, done = time.perf_counter(), 0
  for batch in iterator:
    runner.state, runner.metrics = runner.step(runner.state,
                                               shd.global_batch(model_batch(batch), runner.mesh))
    done += 1
    if done == 1:
      jax.block_until_ready(runner.metrics)
      stages["model, optimizer state, first step compiled"] = memory_status().get("VmRSS")
    if steps and done >= steps:
      break
  jax.block_until_ready(runner.metrics)
  elapsed = time.perf_counter() - start
  stages["end"] = memory_status().get("VmRSS")
  peak, source = peak_rss_bytes()
  return {"steps": done, "epoch_steps": n // inputs.BATCH, "seconds": elapsed,
          "peak_rss_bytes": peak, "peak_rss_source": source, "rss_stages_bytes": stages,
          "resident_arrays_bytes": int(features.nbytes + q_vectors.nbytes)}


def run(mode, log=print):
  from benchmarks import timing  # pylint: disable=g-import-not-at-top
  steps, repeats = (20, 5) if mode == "full" else (5, 3)
  counts = DEVICE_COUNTS[mode]
  results = []
  for n in counts:
    log(f"  scaling: {n} device(s)")
    results.append(_subprocess(["--worker", "scaling", "--devices", str(n), "--steps", str(steps),
                                "--repeats", str(repeats), "--mode", mode], n, timeout=300))
  rows = []
  base = next((r for r in results if "losses" in r and r["devices"] == 1), None)
  for r in results:
    if "error" in r:
      rows.append(r)
      continue
    row = {"devices": r["devices"], "samples_s": timing.summarize(r["samples_s"], "samples/s"),
           "per_device_MiB": r["per_device_bytes"] / 2**20, "losses": r["losses"],
           "memory_analysis": r["memory_analysis"]}
    if base:
      row["max_abs_loss_diff_vs_1"] = max(abs(a - b) for a, b in zip(r["losses"], base["losses"]))
    rows.append(row)
  log("  scaling: LR-size peak RSS")
  rss = _subprocess(["--worker", "rss", "--steps", str(0 if mode == "full" else 100),
                     "--mode", mode], 1, timeout=600)
  eight = next((r for r in rows if r.get("devices") == 8 and "losses" in r), None)
  targets = [
      timing.target("8 forced devices: |loss - 1-device loss| (first steps)",
                    None if eight is None or base is None else eight["max_abs_loss_diff_vs_1"],
                    "<=", 1e-4),
      timing.target("peak host RSS of the LR-size cached-feature run (GiB)",
                    None if "peak_rss_bytes" not in rss else rss["peak_rss_bytes"] / 2**30,
                    "<=", 4.0),
  ]
  notes = [f"global batch {GLOBAL_BATCH}, frozen Skip-thoughts cached features, e-mult",
           "forced host devices share the machine's cores: no speed-up is possible here"]
  if mode != "full":
    notes.append(f"{mode} mode: device counts {counts} (full mode: {DEVICE_COUNTS['full']})")
  if mode != "full" and "steps" in rss:
    notes.append(f"RSS run: {rss['steps']} of {rss['epoch_steps']} epoch steps in {mode} mode "
                 "(all arrays are allocated before the first step)")
  return {"rows": rows, "rss": rss, "notes": notes}, targets


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--worker", choices=("scaling", "rss"), required=True)
  parser.add_argument("--devices", type=int, default=1)
  parser.add_argument("--steps", type=int, default=5)
  parser.add_argument("--repeats", type=int, default=3)
  parser.add_argument("--mode", choices=("full", "quick", "toy"), default="quick")
  args = parser.parse_args()
  host_memory.keep_freed_memory()  # as the rsvqa-jax command line does
  if args.worker == "scaling":
    out = worker_scaling(args.devices, args.steps, args.repeats, args.mode)
  else:
    out = worker_rss(args.steps, args.mode)
  print(json.dumps(out))


if __name__ == "__main__":
  main()
