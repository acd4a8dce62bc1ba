"""Runs the benchmark families and writes results.json and results.md.

  python -m benchmarks.run [--quick] --out DIR [--only train_steps,pipeline,...]

Families: train_steps (JAX vs PyTorch train steps), pipeline (original per-batch ResNet pipeline vs
cached features), adversarial (K = 10 substitutions vs a clean pass), flops (fraction of the
matmul peak), scaling (forced host devices, peak RSS), compilation (compilations per epoch),
shortcuts (the shortcut benchmark's re-split and concepts at full LR size, CPU seconds),
grounding (`grounding score` of 10,000 masks of 256 x 256, wall seconds), xben_scale
(RSVQAxBEN at full size, 14.8M questions: generation, columnar build, validate, analyze and one
input epoch, wall / CPU seconds and peak RSS of each);
accelerator (bf16 samples/s and MFU against PyTorch on a GPU) is the default where JAX runs on a
GPU, and the CPU families are refused there (their PyTorch side runs on the CPU), but for
pipeline, which runs its PyTorch side on CUDA there (`--only pipeline` on a GPU: its GPU ratio).
Every figure is median / min / max over repeats; each target is printed PASS or MISS.
"""
import argparse
import importlib
import json
import os
import sys
import time
import traceback

from benchmarks import timing
from rsvqa_jax import host_memory

# flops right after train_steps: it times train_steps' compiled steps and then frees them.
FAMILIES = ("train_steps", "flops", "pipeline", "adversarial", "scaling", "compilation",
            "shortcuts", "grounding", "xben_scale")
ON_REQUEST = ("accelerator",)
ANY_DEVICE = ("pipeline",)  # runs PyTorch on CUDA where JAX runs on a GPU (its GPU ratio)


def fmt(x, scale=1.0, digits=3):
  """A summary as 'median (min-max)', a number as itself; None as '-'."""
  if x is None:
    return "-"
  if isinstance(x, dict) and "median" in x:
    m, lo, hi = (x[k] * scale for k in ("median", "min", "max"))
    return f"{m:.{digits}g} ({lo:.{digits}g}-{hi:.{digits}g})"
  if isinstance(x, float):
    return f"{x * scale:.{digits}g}"
  return str(x)


def _table(header, rows):
  """Markdown table lines; a "|" inside a cell ("|loss - loss@1|") is escaped, not a column."""
  def cells(row):
    return "| " + " | ".join(str(c).replace("|", "\\|") for c in row) + " |"

  return [cells(header), "|" + "---|" * len(header)] + [cells(row) for row in rows]


def _md_train_steps(s):
  out = _table(["LM", "mode", "fusion", "compute", "tokens", "JAX samples/s",
                "torch eager samples/s", "torch.compile samples/s", "JAX / eager", "JAX / compile",
                "of peak: JAX / eager", "of roofline: JAX / eager", "ceiling / eager"],
               [[r["lm"], r["mode"], r["fusion"], _compute(r),
                 "x".join(map(str, r["tokens"] or [])) or "-",
                 fmt(r.get("jax_samples_s")), fmt(r.get("torch_eager_samples_s")),
                 fmt(r.get("torch_compile_samples_s")), fmt(r.get("speedup_vs_eager")),
                 fmt(r.get("speedup_vs_compile")),
                 " / ".join(fmt(r.get("fraction_of_peak", {}).get(k), digits=2)
                            for k in ("jax", "torch_eager")),
                 " / ".join(fmt(r.get("fraction_of_roofline", {}).get(k), digits=2)
                            for k in ("jax", "torch_eager")),
                 fmt(r.get("ceiling_vs_eager"))] for r in s["rows"]])
  for r in s["rows"]:
    for k, v in r["notes"].items():
      out.append(f"- {r['lm']} {r['mode']} {r['fusion']} {_compute(r)}: {k} {v}")
  return out


def _compute(row):
  """float32, or bf16 with what PyTorch runs under (CPU autocast)."""
  dtype = row.get("compute_dtype", "float32")
  return "float32" if dtype == "float32" else "bf16 (torch: autocast)"


def _md_pipeline(s):
  out = _table(["model", "original s / 1000 samples", "this tool s / 1000 samples",
                "original epoch s (57,223)", "this tool epoch s", "speed-up", "ceiling"],
               [[r["model"], fmt(r["original_s_per_1000"]), fmt(r["tool_s_per_1000"]),
                 fmt(r["original_epoch_s"]), fmt(r["tool_epoch_s"]), fmt(r["speedup"]),
                 fmt(r["ceiling"]["speedup"]) if "ceiling" in r else "-"]
                for r in s["rows"]])
  for r in s["rows"]:
    comps = r.get("original_components_s_per_batch") or s["components_original_s_per_batch"]
    out.append(f"- original components ({r['model']}; {s.get('device', 'cpu')}), s per batch of "
               "70: " + ", ".join(f"{k} {fmt(v)}" for k, v in comps.items()))
  out.append(f"- one-time feature cache (772 LR images): {fmt(s['feature_cache_once_s'])} s")
  return out


def _md_adversarial(s):
  return _table(["model", "questions", "clean pass s", "K=10 s", "K=10 / clean"],
                [[r["model"], r["questions"], fmt(r["clean_s"]), fmt(r["k10_s"]),
                  fmt(r["cost_ratio"])] for r in s["rows"]])


def _md_flops(s):
  out = [f"- f32 matmul peak: {fmt(s['matmul_peak'], 1e-9)} GFLOP/s (start), "
         f"{fmt(s['matmul_peak_after'], 1e-9)} GFLOP/s (end); {s['peak_config']}; each row's "
         "fraction is paired with the peak measured in the same round"]
  out += _table(["fine-tuned LM", "tokens", "layers", "step s", "samples/s",
                 "analytic GFLOP/step", "XLA GFLOP/step", "achieved GFLOP/s",
                 "paired peak GFLOP/s", "of peak", "Adam update share of step"],
                [[r["lm"], "x".join(map(str, r["tokens"])), r["layers"] or "-", fmt(r["step_s"]),
                  fmt(r["samples_s"]), fmt(r["analytic_flops_per_step"], 1e-9),
                  fmt(r["xla_cost_analysis_flops"], 1e-9), fmt(r["achieved_flops"], 1e-9),
                  fmt(r.get("paired_peak"), 1e-9), fmt(r["fraction_of_peak"]),
                  fmt(r.get("optimizer_share"))] for r in s["rows"]])
  for name, r in s.get("shapes", {}).items():
    out.append(f"- {name} `[{r['shape'][0]}, {r['shape'][1]}] @ [{r['shape'][1]}, "
               f"{r['shape'][2]}]`: of the peak JAX {fmt(r['jax_of_peak'])}, PyTorch "
               f"{fmt(r.get('torch_of_peak'))}")
  if "overlap" in s:
    o = s["overlap"]
    out.append(f"- matmuls and memory streaming at once (timing.overlap_probe): dot chain "
               f"{fmt(o['matmul'], 1e3)} ms, STREAM triads {fmt(o['stream'], 1e3)} ms, both in one "
               f"jit {fmt(o['together'], 1e3)} ms = {fmt(o['together_over_sum'])} of their sum "
               "(1 = they cannot hide each other: a step's roofline minimum adds them)")
  return out


def _md_accelerator(s):
  out = [f"- {s['device_kind']}: datasheet dense bf16 peak "
         f"{fmt(s['datasheet_bf16_peak'], 1e-12)} TFLOP/s, measured bf16 matmul peak "
         f"{fmt(s['measured_bf16_matmul_peak'], 1e-12)} TFLOP/s ({s['peak_config']}); "
         f"PyTorch on {s['torch_device']}"]
  out += _table(["fine-tuned LM", "batch", "tokens", "JAX samples/s", "torch eager samples/s",
                 "JAX / torch", "torch.compile (reduce-overhead) samples/s", "JAX / compile",
                 "JAX step ms", "JAX MFU", "torch MFU", "JAX of measured peak",
                 "JAX compile s", "peak GiB JAX (process) / torch"],
                [[r["lm"], r["batch"], r.get("error") or "x".join(map(str, r["tokens"])),
                  fmt(r.get("jax_samples_s")), fmt(r.get("torch_eager_samples_s")),
                  fmt(r.get("speedup_vs_eager")), fmt(r.get("torch_compile_samples_s")),
                  fmt(r.get("speedup_vs_compile")), fmt(r.get("jax_step_s"), 1e3),
                  fmt(r.get("jax_mfu")), fmt(r.get("torch_mfu")),
                  fmt(r.get("fraction_of_peak", {}).get("jax")),
                  fmt((r.get("warmup_s") or {}).get("jax")),
                  " / ".join(fmt(b and b / 2**30) for b in (r.get("jax_peak_device_bytes_so_far"),
                                                            r.get("torch_peak_device_bytes")))]
                 for r in s["rows"]])
  return out


def _md_scaling(s):
  out = _table(["devices", "samples/s", "per-device MiB (XLA plan)", "|loss - loss@1|"],
               [[r.get("devices", "-"), fmt(r.get("samples_s")) if "error" not in r else r["error"],
                 fmt(r.get("per_device_MiB")), fmt(r.get("max_abs_loss_diff_vs_1"))]
                for r in s["rows"]])
  rss = s["rss"]
  if "peak_rss_bytes" in rss:
    out.append(f"- LR-size cached-feature run: peak RSS {rss['peak_rss_bytes'] / 2**30:.2f} GiB "
               f"({rss['steps']} steps in {rss['seconds']:.1f} s; arrays held "
               f"{rss['resident_arrays_bytes'] / 2**30:.2f} GiB; from "
               f"{rss.get('peak_rss_source', '?')})")
    stages = rss.get("rss_stages_bytes") or {}
    if stages:
      out.append("- RSS by stage: " + ", ".join(f"{k} {v / 2**30:.2f} GiB" for k, v in
                                               stages.items() if v is not None))
  else:
    out.append(f"- LR-size RSS run failed: {rss.get('error')}")
  return out


def _md_compilation(s):
  out = _table(["epoch", "steps", "bucket widths", "first seen", "backend compilations"],
               [[e["epoch"], e["steps"], e["bucket_widths"], e["new_bucket_widths"],
                 e["backend_compilations"]]
                for e in s["epochs"]])
  out.append(f"- train step cache size (compiled shapes): {s['step_cache_size']}")
  return out


def _md_shortcuts(s):
  out = _table(["questions", "pooled", "read CPU s", "labels CPU s", "split + concepts + OOD CPU s",
                "labels + split + concepts + OOD CPU s", "split + concepts + OOD wall s",
                "whole folder CPU s"],
               [[r["questions"], r["pooled_questions"], fmt(r["read_cpu_s"]),
                 fmt(r["labels_cpu_s"]), fmt(r["split_concepts_ood_cpu_s"]),
                 fmt(r["labels_split_concepts_ood_cpu_s"]), fmt(r["split_concepts_ood_wall_s"]),
                 fmt(r["create_folder_cpu_s"])] for r in s["rows"]])
  for r in s["rows"]:
    out.append("- OOD sets: " + ", ".join(f"{c} {n}" for c, n in r["ood"].items()))
  return out


def _md_grounding(s):
  return _table(["masks", "size", "scored", "empty truth", "mean IoU", "mAP 0.50:0.95", "wall s",
                 "CPU s"],
                [[r["masks"], r["size"], r["scored"], r["empty_truth"], fmt(r["mean_iou"]),
                  fmt(r["map_50_95"]), fmt(r["wall_s"]), fmt(r["cpu_s"])] for r in s["rows"]])


def _md_xben_scale(s):
  out = [f"- {s['images']} image ids, {s['questions']} questions; {s['cpu']}", ""]
  out += _table(["stage", "wall s", "CPU s", "peak RSS GiB", "details"],
                [[r["stage"], fmt(r["wall_s"]), fmt(r["cpu_s"]),
                  fmt(r["peak_rss_bytes"] / 2**30),
                  ", ".join(f"{k} {v}" for k, v in r.items()
                            if k not in ("stage", "wall_s", "cpu_s", "peak_rss_bytes"))]
                 for r in s["rows"]])
  return out


RENDER = {"train_steps": _md_train_steps, "pipeline": _md_pipeline,
          "adversarial": _md_adversarial, "flops": _md_flops, "scaling": _md_scaling,
          "compilation": _md_compilation, "accelerator": _md_accelerator,
          "shortcuts": _md_shortcuts, "grounding": _md_grounding, "xben_scale": _md_xben_scale}


def _snippet(name, lines):
  """`lines` between pymdownx.snippets section markers: the docs site includes a results file's
  machine line, targets or one family by name (`--8<-- "DIR/results.md:targets"`), never a copy.
  A table gets a blank line on each side, which Markdown needs to see it as one."""
  spaced = []
  for line in lines:
    if spaced and spaced[-1] and line and spaced[-1].startswith("|") != line.startswith("|"):
      spaced.append("")
    spaced.append(line)
  return [f"<!-- --8<-- [start:{name}] -->", "", *spaced, "", f"<!-- --8<-- [end:{name}] -->"]


def markdown(results):
  m = results["machine"]
  malloc = m.get("keep_freed_memory")
  lines = ["# rsvqa_jax benchmarks", ""]
  lines += _snippet("machine", [
      f"Command: `{results['command']}`", "",
      f"Machine: {timing.cpu_label(m)}, {m['cores']} cores ({m['usable_cpus']} usable), "
      f"jax {m['jax']} ({m['jax_backend']}), torch {m['torch']}, python {m['python']}; "
      f"load average at start {m.get('load_average')}", "",
      "Host malloc: " + ("not recorded" if malloc is None else
                         "freed memory kept for reuse (rsvqa_jax.host_memory), for JAX and "
                         "PyTorch alike" if malloc else "system default"), "",
      "Threads: " + (str(results["threads"]) if "threads" in results else
                     "not recorded"), "",
      f"Total runtime: {results['runtime_s']:.0f} s ({results['mode']} mode)",
      "", "Figures: median (min-max) over repeats; ratios are paired per round."])
  lines += ["", "## Targets", ""]
  lines += _snippet("targets", _table(
      ["target", "measured", "goal", "status", "note"],
      [[t["name"], fmt(t["measured"]), f"{t['op']} {t['threshold']}", t["status"],
        t.get("note", "")] for t in results["targets"]]))
  for name, section in results["sections"].items():
    lines += ["", f"## {name} ({section.get('runtime_s', 0):.0f} s)", ""]
    body = [f"CPU: {timing.cpu_label(m)}", ""]
    if "error" in section:
      body.append(f"failed: {section['error']}")
    else:
      body += RENDER[name](section)
      body += [f"- {n}" for n in section.get("notes", [])]
    lines += _snippet(name, body)
  return "\n".join(lines) + "\n"


def write_results(out, results, render=None):
  """results.json and, rendered from it alone (by `render`, else this harness's markdown),
  results.md; returns the markdown."""
  with open(os.path.join(out, "results.json"), "w", encoding="utf-8") as f:
    json.dump(results, f, indent=1, default=str)
  with open(os.path.join(out, "results.json"), encoding="utf-8") as f:
    text = (render or markdown)(json.load(f))  # as --render reads it: tuples become lists
  with open(os.path.join(out, "results.md"), "w", encoding="utf-8") as f:
    f.write(text)
  return text


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--quick", action="store_true",
                      help="reduced BERT-family layers and shorter rounds (under 10 minutes)")
  parser.add_argument("--toy", action="store_true",
                      help="tiny models, to check that the harness runs (figures are meaningless)")
  parser.add_argument("--out", required=True, help="folder for results.json and results.md")
  parser.add_argument("--only", default=None,
                      help=f"comma-separated families out of {', '.join(FAMILIES + ON_REQUEST)} "
                      "(default: all but accelerator on a CPU, accelerator alone on a GPU)")
  parser.add_argument("--render", action="store_true",
                      help="measure nothing: rewrite OUT/results.md from OUT/results.json")
  args = parser.parse_args(argv)
  if args.render:
    with open(os.path.join(args.out, "results.json"), encoding="utf-8") as f:
      write_results(args.out, json.load(f))
    return
  kept = host_memory.keep_freed_memory()  # before JAX starts its threads; PyTorch shares it
  import jax  # pylint: disable=g-import-not-at-top
  on_cpu = jax.default_backend() == "cpu"
  families = [f for f in (args.only or ",".join(FAMILIES if on_cpu else ON_REQUEST)).split(",")
              if f]
  unknown = sorted(set(families) - set(FAMILIES + ON_REQUEST))
  if unknown:
    parser.error(f"unknown families {unknown}; choose from {FAMILIES + ON_REQUEST}")
  cpu_only = set(families) & (set(FAMILIES) - set(ANY_DEVICE))
  if not on_cpu and cpu_only:
    parser.error(f"{sorted(cpu_only)} compare JAX with PyTorch on the CPU, "
                 f"but JAX runs on {jax.default_backend()} here; set JAX_PLATFORMS=cpu for them, "
                 "or run the accelerator family")
  mode = "toy" if args.toy else "quick" if args.quick else "full"
  os.makedirs(args.out, exist_ok=True)
  start = time.perf_counter()
  results = {"command": "python -m benchmarks.run " + " ".join(argv if argv is not None
                                                                 else sys.argv[1:]),
             "mode": mode, "machine": {**timing.machine(), "keep_freed_memory": kept},
             "sections": {}, "targets": []}
  for name in families:
    print(f"[{time.perf_counter() - start:6.0f} s] {name}", flush=True)
    t0 = time.perf_counter()
    try:
      module = importlib.import_module(f"benchmarks.{name}")
      section, targets = module.run(mode, log=lambda m: print(m, flush=True))
      if "threads" in section:
        results["threads"] = section["threads"]
    except Exception as e:  # pylint: disable=broad-except
      traceback.print_exc()
      section, targets = {"error": f"{type(e).__name__}: {e}"}, []
    section["runtime_s"] = time.perf_counter() - t0
    results["sections"][name] = section
    results["targets"] += targets
  results["runtime_s"] = time.perf_counter() - start
  print(write_results(args.out, results))


if __name__ == "__main__":
  main()
