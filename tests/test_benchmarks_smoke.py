"""Smoke tests of the benchmark harness: it runs at toy sizes and writes well-formed results.

No timing is asserted (the machine is shared and noisy); the tests check the summaries, the
PASS/MISS logic, the analytic FLOP counts against XLA's own count, and the result files.
"""
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from benchmarks import (accelerator, flop_counts, flops, hlo_dots, profile_step, run,
                        scaling, timing)
from benchmarks import inputs, train_steps
from rsvqa_jax import cpu_units
from rsvqa_jax.models.skipthoughts import gru_scan

torch = pytest.importorskip("torch", reason="the benchmarks compare against PyTorch")


def test_summaries_and_targets():
  s = timing.summarize([3.0, 1.0, 2.0], "s")
  assert (s["median"], s["min"], s["max"], s["repeats"]) == (2.0, 1.0, 3.0, 3)
  r = timing.paired_ratio([4.0, 9.0], [2.0, 3.0])
  assert (r["min"], r["max"]) == (2.0, 3.0)
  assert timing.target("a", r, ">=", 2.5)["status"] == "PASS"
  assert timing.target("a", r, ">=", 2.6)["status"] == "MISS"
  assert timing.target("b", 1.6, "<=", 1.5)["status"] == "MISS"
  assert timing.target("c", None, "<=", 1.5)["status"] == "N/A"


def test_alternate_drops_a_failing_runner():
  calls = []

  def bad():
    calls.append("bad")
    raise RuntimeError("boom\nmore")

  times, errors = timing.alternate({"ok": lambda: 1.0, "bad": bad}, 3)
  assert times == {"ok": [1.0, 1.0, 1.0]}
  assert calls == ["bad"] and errors == {"bad": "RuntimeError: boom"}


def test_rounds_alternate_which_side_runs_first():
  order = []
  runner = lambda name: (lambda: order.append(name) or 1.0)
  timing.alternate({"jax": runner("jax"), "torch": runner("torch")}, 3)
  assert order == ["jax", "torch", "torch", "jax", "jax", "torch"]
  order.clear()
  timing.alternate({"jax": runner("jax"), "torch": runner("torch")}, 1, first_round=1)
  assert order == ["torch", "jax"]


def test_cpu_label_names_the_bf16_units():
  amd = "model name\t: AMD EPYC\nflags\t\t: fpu avx2 avx512f avx512_bf16 avx512_vnni\n"
  info = {"cpu": "AMD EPYC", "bf16_units": cpu_units.bf16_units(amd)}
  assert timing.cpu_label(info) == "AMD EPYC (AMX: no, AVX512-BF16: yes)"
  assert timing.cpu_label({"cpu": "AMD EPYC"}) == "AMD EPYC (AMX, AVX512-BF16: not recorded)"


def test_cpu_model_names_the_family_and_model_of_the_first_processor(tmp_path):
  cpuinfo = tmp_path / "cpuinfo"
  block = "processor\t: {}\ncpu family\t: {}\nmodel\t\t: 17\nmodel name\t: AMD EPYC\n\n"
  cpuinfo.write_text(block.format(0, 25) + block.format(1, 26))
  assert timing.cpu_model(str(cpuinfo)) == "AMD EPYC, family 25 model 17"
  cpuinfo.write_text("model name\t: Some CPU\n")
  assert timing.cpu_model(str(cpuinfo)) == "Some CPU"


def test_peak_probe_is_the_best_of_jax_and_torch():
  jax_only = timing.peak_probe(32, chain=2, dtype=jnp.bfloat16, also=())
  both = timing.peak_probe(32, chain=2, dtype=jnp.bfloat16, also=((8, 16, 24),), torch=torch)
  assert jax_only() > 0 and both() > 0
  rate, config = timing.f32_peak_probe("toy", torch, jnp.bfloat16)
  assert config["dtype"] == "bfloat16" and config["libraries"] == ["jax", "torch"]
  assert rate() > 0


def test_bf16_cpu_products_and_step_at_toy_size():
  from benchmarks import bf16_cpu  # pylint: disable=g-import-not-at-top
  rates, errors = bf16_cpu.products(64, 2, torch)
  assert not errors and set(rates) == {"jax bf16 -> bf16", "jax bf16 -> f32 accumulation",
                                       "jax f32", "torch bf16", "torch f32"}
  assert all(r["repeats"] == 2 and r["min"] > 0 for r in rates.values())
  row = bf16_cpu.step(1, 4, 2, torch, mode="toy")
  assert not row["errors"] and len(row["samples_s"]) == 5
  assert "jax bfloat16 (f32 accumulation) / torch eager bf16 autocast" in row["speedups"]
  assert row["speedups"]["jax bfloat16 (plain, before) / jax float32"]["repeats"] == 2


def test_roofline_adds_matmul_time_at_peak_and_adam_traffic_at_bandwidth():
  """1 GFLOP at 100 GFLOP/s (10 ms) + 1M params x 28 B at 10 GB/s (2.8 ms) = 12.8 ms."""
  batch = 10
  per_sample = {"jax": [0.0016, 0.0016, 0.0017], "torch_eager": [0.00256] * 3}
  row = {}
  train_steps._add_efficiency(row, per_sample, [1e11] * 4, [1e10] * 4, 1e9, 10**6, batch)
  assert row["optimizer_bytes_per_step"] == 28 * 10**6
  np.testing.assert_allclose(row["roofline_step_s"], 0.0128)
  np.testing.assert_allclose(row["fraction_of_roofline"]["jax"], 0.0128 / 0.016)
  np.testing.assert_allclose(row["fraction_of_peak"]["jax"], 1e9 / 0.016 / 1e11)
  np.testing.assert_allclose(row["ceiling_vs_eager"], 2.0)
  assert train_steps._ceiling_note(row, 2.0) == ""
  note = train_steps._ceiling_note(row, 2.5)
  assert "out of reach" in note and "2.00x torch eager" in note and "0.80 of" in note
  no_bandwidth = {}
  train_steps._add_efficiency(no_bandwidth, per_sample, [1e11] * 4, [], 1e9, 10**6, batch)
  assert "ceiling_vs_eager" not in no_bandwidth and "fraction_of_peak" in no_bandwidth


def test_peak_probe_runs_its_square_chain_and_extra_shapes():
  both = timing.peak_probe(32, chain=2, also=((8, 16, 24),))
  square = timing.peak_probe(32, chain=2, also=())
  assert both() > 0 and square() > 0


def test_stream_triads_and_overlap_probe():
  x, y = jnp.full(8, 2.0), jnp.full(8, 4.0)
  np.testing.assert_allclose(jax.jit(lambda x, y: timing.stream(x, y, 2))(x, y),
                             2.0 + 1.5 * (2.0 + 1.5 * 4.0))
  assert timing.bandwidth_probe(1 << 12, passes=2)() > 0
  overlap = flops.overlap_rounds(timing.overlap_probe(32, chain=2, elements=1 << 12, passes=2),
                                 repeats=2)
  assert set(overlap) == {"matmul", "stream", "together", "together_over_sum"}
  values = overlap["together_over_sum"]["values"]
  assert values[0] == overlap["together"]["values"][0] / (
      overlap["matmul"]["values"][0] + overlap["stream"]["values"][0])


def test_shape_rates_time_both_libraries_against_the_peak():
  rates = flops.shape_rates(lambda: 1e9, {"toy": (4, 8, 16)}, repeats=2, calls=2)
  row = rates["toy"]
  assert row["shape"] == [4, 8, 16] and row["jax_of_peak"]["repeats"] == 2
  assert row["torch_of_peak"]["median"] > 0 and row["jax_of_peak"]["median"] > 0


def test_flops_section_renders_shapes_and_overlap():
  summary = timing.summarize([0.5, 1.0, 1.5])
  section = {"matmul_peak": summary, "matmul_peak_after": summary, "peak_config": {}, "rows": [],
             "shapes": {"toy": {"shape": [4, 8, 16], "jax_of_peak": summary}},
             "overlap": {"matmul": summary, "stream": summary, "together": summary,
                         "together_over_sum": summary}}
  text = "\n".join(run._md_flops(section))
  assert "toy `[4, 8] @ [8, 16]`: of the peak JAX 1 (0.5-1.5), PyTorch -" in text
  assert "both in one jit 1e+03 (500-1.5e+03) ms = 1 (0.5-1.5) of their sum" in text


def test_gru_flops_match_xla_count():
  """One GRU step (no loop, so XLA counts it whole) against the analytic matmul count."""
  b, d, h = 4, 64, 128
  rng = np.random.default_rng(0)
  arrays = [rng.standard_normal(s, np.float32) for s in
            [(b, 1, d), (d, 2 * h), (h, 2 * h), (2 * h,), (d, h), (h, h), (h,)]]
  x, w, u, bias, wx, ux, bx = map(jnp.asarray, arrays)
  mask = jnp.ones((b, 1), jnp.int32)
  compiled = jax.jit(gru_scan).lower(x, mask, w, u, bias, wx, ux, bx).compile()
  xla = compiled.cost_analysis()["flops"]
  analytic = flop_counts.gru_train_flops(b, 1, d, h) / 3 - flop_counts.head_flops(h, b)
  assert analytic == 2 * b * (d * 3 * h + h * 3 * h)
  assert abs(xla - analytic) / analytic < 0.1


def test_peak_rss_reads_this_process_image(tmp_path):
  """VmHWM of /proc/self/status, not ru_maxrss (which keeps a forked parent's peak on Linux)."""
  status = tmp_path / "status"
  status.write_text("Name:\tpython\nVmHWM:\t  2048 kB\nVmRSS:\t  1024 kB\n")
  assert scaling.memory_status(str(status)) == {"VmRSS": 1024 * 1024, "VmHWM": 2048 * 1024}
  assert scaling.memory_status(str(tmp_path / "missing")) == {}
  peak, source = scaling.peak_rss_bytes()
  assert peak > 0 and source in ("VmHWM (/proc/self/status)", "ru_maxrss")


def test_bert_flops_formula():
  # One layer, hidden 2, FFN 4, 2 tokens: QKV+out 4*2*2, FFN 2*2*4 MACs per token, plus
  # attention scores and context 2*2*2 MACs per token.
  per_token = 2 * (16 + 16) + 2 * 2 * 2 * 2
  expected = 3 * (2 * per_token + flop_counts.head_flops(2, 1))
  assert flop_counts.bert_train_flops(1, 2, 1, 2, 4) == expected


def test_toy_harness_writes_results(tmp_path):
  run.main(["--toy", "--out", str(tmp_path), "--only", "train_steps,adversarial,compilation"])
  results = json.loads((tmp_path / "results.json").read_text())
  assert results["mode"] == "toy"
  assert {"cpu", "cores", "jax", "torch"} <= set(results["machine"])
  assert list(results["sections"]) == ["train_steps", "adversarial", "compilation"]
  for name, section in results["sections"].items():
    assert "error" not in section, (name, section.get("error"))
  rows = results["sections"]["train_steps"]["rows"]
  assert [(r["lm"], r["mode"], r["compute_dtype"]) for r in rows] == [
      ("skipthoughts", "frozen (cached)", "float32"), ("skipthoughts", "frozen (cached)", "bfloat16"),
      ("distilbert", "fine-tuned", "float32"), ("distilbert", "fine-tuned", "bfloat16")]
  for r in rows:
    assert r["ceiling_vs_eager"] > 0 and 0 < r["fraction_of_roofline"]["jax"]
    assert r["optimizer_bytes_per_step"] == 28 * r["trainable_params"] > 0
    for key in ("jax_samples_s", "torch_eager_samples_s", "speedup_vs_eager"):
      assert {"median", "min", "max", "repeats"} <= set(r[key])
      assert r[key]["min"] <= r[key]["median"] <= r[key]["max"]
  epochs = results["sections"]["compilation"]["epochs"]
  assert len(epochs) == 2
  assert epochs[1]["backend_compilations"] <= len(epochs[1]["new_bucket_widths"])
  assert results["targets"] and all(t["status"] in ("PASS", "MISS", "N/A")
                                    for t in results["targets"])
  roofline = [t for t in results["targets"] if t["name"].startswith("train step / roofline")]
  assert len(roofline) == (4 if any(cpu_units.bf16_units().values()) else 2), roofline
  for t in roofline:
    assert t["threshold"] == 0.85 and t["status"] == ("PASS" if t["measured"] >= 0.85 else "MISS")
  md = (tmp_path / "results.md").read_text()
  assert "## Targets" in md and "## train_steps" in md and "K=10 / clean" in md
  assert md.count(f"CPU: {timing.cpu_label(results['machine'])}") == 3
  assert "| bf16 (torch: autocast) |" in md


def test_accelerator_row_at_toy_size_against_torch():
  """One bf16 row (here on the CPU): both sides timed, FLOPs counted, the runner released."""
  row = accelerator.step_row("skipthoughts", 8, train_steps.sizes("toy"),
                             timing.peak_probe(64, dtype=jnp.bfloat16, also=()), spec_peak=1e12,
                             repeats=2, block_s=0.01, torch_device="cpu")
  assert row["batch"] == 8 and row["tokens"][0] == 8
  assert row["jax_samples_s"]["repeats"] == 2 and "torch_eager_samples_s" in row
  assert row["analytic_flops_per_step"] == flop_counts.gru_train_flops(8, row["tokens"][1], 8, 16)
  expected = [row["analytic_flops_per_step"] / t / 1e12 for t in row["jax_step_s"]["values"]]
  np.testing.assert_allclose(row["jax_mfu"]["values"], expected, rtol=1e-6)
  assert ("accelerator",) not in train_steps.RUNNERS
  assert accelerator.datasheet_peak(jax.devices()[0]) is None  # a CPU has no datasheet entry


def test_accelerator_targets_take_the_best_batch_and_the_papers():
  """Issue 18's GPU targets: MFU at the batch of most FLOP/s (not the largest), compile ratios
  at the paper's batch and that one; a failed row is skipped, an unmeasured ratio is N/A."""
  def row(lm, batch, step_s, mfu, vs_compile):
    return {"lm": lm, "batch": batch, "analytic_flops_per_step": 1e9 * batch,
            "jax_step_s": timing.summarize([step_s]), "jax_mfu": timing.summarize([mfu]),
            **({"speedup_vs_compile": timing.summarize([vs_compile])} if vs_compile else {})}
  rows = [row("distilbert", 70, 0.01, 0.10, 0.9), row("distilbert", 560, 0.02, 0.41, 1.2),
          row("distilbert", 4480, 0.2, 0.33, 1.1),
          row("skipthoughts", 70, 0.001, 0.5, None),
          {"lm": "skipthoughts", "batch": 560, "error": "XlaRuntimeError: out of memory"}]
  got = {t["name"]: (t["measured"] and t["measured"]["median"], t["status"])
         for t in accelerator.targets(rows, 70)}
  assert got == {
      "bf16 MFU, fine-tuned distilbert, best batch (560)": (0.41, "PASS"),
      "bf16 train step vs torch.compile (reduce-overhead), fine-tuned distilbert, batch 70":
          (0.9, "MISS"),
      "bf16 train step vs torch.compile (reduce-overhead), fine-tuned distilbert, batch 560":
          (1.2, "PASS"),
      "bf16 MFU, fine-tuned skipthoughts, best batch (70)": (0.5, "PASS"),
      "bf16 train step vs torch.compile (reduce-overhead), fine-tuned skipthoughts, batch 70":
          (None, "N/A")}


def test_markdown_renders_every_family():
  """Each family's table renders from a minimal section (failed sections say so)."""
  summary = timing.summarize([1.0, 2.0, 3.0])
  results = {"command": "python -m benchmarks.run --toy", "mode": "toy", "runtime_s": 1.0,
             "machine": {"cpu": "x", "cores": 2, "usable_cpus": 2, "jax": "0", "jax_backend":
                         "cpu", "torch": "0", "python": "3"},
             "targets": [timing.target("t", summary, ">=", 1.0),
                         timing.target("|a - b|", 0.5, "<=", 1.0)],
             "sections": {
                 "pipeline": {"rows": [{"model": "m", **{k: summary for k in (
                     "original_s_per_1000", "tool_s_per_1000", "original_epoch_s",
                     "tool_epoch_s", "speedup")}}],
                              "components_original_s_per_batch": {"load": summary},
                              "feature_cache_once_s": summary},
                 "scaling": {"rows": [{"devices": 8, "samples_s": summary, "per_device_MiB": 1.0,
                                       "max_abs_loss_diff_vs_1": 0.0}, {"error": "exit 1"}],
                             "rss": {"peak_rss_bytes": 2**30, "steps": 3, "seconds": 1.0,
                                     "resident_arrays_bytes": 2**29}},
                 "flops": {"error": "RuntimeError: x"},
                 "accelerator": {"device_kind": "NVIDIA H200", "datasheet_bf16_peak": 989.4e12,
                                 "measured_bf16_matmul_peak": summary, "peak_config": {},
                                 "torch_device": "cuda",
                                 "rows": [{"lm": "distilbert", "batch": 70, "tokens": [70, 16],
                                           "jax_samples_s": summary, "jax_mfu": summary,
                                           "warmup_s": {"jax": 2.0},
                                           "jax_peak_device_bytes_so_far": 2**31},
                                          {"lm": "skipthoughts", "batch": 4480,
                                           "error": "XlaRuntimeError: out of memory"}]}}}
  md = run.markdown(results)
  assert "| t | 2 (1-3) | >= 1.0 | PASS |  |" in md
  assert "| \\|a - b\\| | 0.5 | <= 1.0 | PASS |  |" in md  # a "|" in a cell is not a column
  assert "peak RSS 1.00 GiB" in md and "exit 1" in md and "failed: RuntimeError: x" in md
  assert "| distilbert | 70 | 70x16 | 2 (1-3) |" in md and "| 2 / - |" in md
  assert "| skipthoughts | 4480 | XlaRuntimeError: out of memory |" in md
  assert "Threads: not recorded" in md
  assert "Threads: {'xla_intra_op_threads': 2}" in run.markdown(
      {**results, "threads": {"xla_intra_op_threads": 2}})


def test_profile_reads_the_ops_of_a_trace(tmp_path):
  """op_times finds a traced step's XLA ops (on a CPU: the host's XLA threads)."""
  step = jax.jit(lambda x: jnp.tanh(x @ x).sum())
  x = jnp.ones((128, 128))
  step(x).block_until_ready()
  jax.profiler.start_trace(str(tmp_path))
  for _ in range(3):
    step(x).block_until_ready()
  jax.profiler.stop_trace()
  times = profile_step.op_times(profile_step.op_events(str(tmp_path)))
  assert times and all(t >= 0 and n >= 1 for t, n in times.values())
  assert not any(name.startswith(profile_step.RUNTIME_EVENTS) for name in times)


def test_profile_concurrency_gaps_kinds_and_matmul_rates():
  """Spans by the number of ops running, idle gaps between ops, kinds, rates: by hand."""
  events = [(0, 10, "ynn_fusion.1"), (5, 15, "dot.2"), (20, 30, "ynn_fusion")]
  assert profile_step.concurrency(events) == pytest.approx({0: 5e-9, 1: 20e-9, 2: 5e-9})
  assert profile_step.idle_gaps(events) == {("dot.2", "ynn_fusion"): (pytest.approx(5e-9), 1)}
  times = profile_step.op_times(events)
  assert profile_step.by_kind(times) == {"ynn_fusion": (pytest.approx(20e-9), 2),
                                         "dot": (pytest.approx(10e-9), 1)}
  rates = profile_step.by_matmul({"dot.2": (2.0, 4)}, {"dot.2": ("x @ w", 1e9)})
  assert rates == {"x @ w": (2.0, 4, pytest.approx(2.0))}


def test_module_dots_reads_shapes_transposition_and_flops():
  """Each matmul of a compiled module is found with its contracting dims and 2 m n k FLOPs."""
  x, w, y = jnp.ones((64, 32)), jnp.ones((32, 48)), jnp.ones((64, 16))
  step = jax.jit(lambda x, w, y: ((x @ w).sum(), (x.T @ y).sum()))
  dots = hlo_dots.module_dots(step.lower(x, w, y).compile().as_text())
  found = {label: flops for label, flops in dots.values()}
  forward = "f32[64,32] x f32[32,48] -> f32[64,48], contracting (1; 0)"
  assert found[forward] == 2 * 64 * 48 * 32
  (weight_grad,) = [label for label in found if label.endswith("-> f32[32,16], contracting (0; 0)")]
  assert found[weight_grad] == 2 * 32 * 16 * 64


def test_finite_check_pairs_both_checks_at_toy_size():
  from benchmarks import finite_check  # pylint: disable=g-import-not-at-top
  tree = {"w": jnp.ones((3, 2)).at[0, 1].set(jnp.nan), "b": jnp.zeros(2)}
  assert not bool(finite_check.per_leaf_all(tree))
  assert bool(finite_check.per_leaf_all({"b": jnp.zeros(2)}))
  row = finite_check.measure(1, 4, 2, mode="toy")
  assert not row["errors"] and set(row["samples_s"]) == {"max_abs", "per_leaf_all"}
  assert row["max_abs / per_leaf_all"]["repeats"] == 2


def test_master_weights_pairs_both_casts_at_toy_size():
  import optax  # pylint: disable=g-import-not-at-top
  from flax import nnx  # pylint: disable=g-import-not-at-top
  from benchmarks import master_weights  # pylint: disable=g-import-not-at-top
  from rsvqa_jax.models.dense import Dense  # pylint: disable=g-import-not-at-top
  from rsvqa_jax.train import state as state_lib  # pylint: disable=g-import-not-at-top
  layer = Dense(4, 3, rngs=nnx.Rngs(0))
  state = state_lib.create(layer, optax.sgd(0.1), seed=0, freeze_text=False)
  before = master_weights.cast_first(state, state.params, jnp.bfloat16)
  assert before.kernel.dtype == jnp.bfloat16 and before.dtype is None
  row = master_weights.measure("skipthoughts", True, "mult", 2, mode="toy")
  assert not row["errors"] and set(row["samples_s"]) == {"master", "cast_first"}
  assert row["master / cast_first"]["repeats"] == 2


def test_each_compiled_torch_step_is_compiled_afresh(monkeypatch):
  # With dynamo's recompile limit at 1, a second step compiling the same loss function for
  # another model ran eagerly before each compiled step started from empty caches.
  import torch._dynamo  # pylint: disable=g-import-not-at-top
  from torch._dynamo.utils import counters  # pylint: disable=g-import-not-at-top
  monkeypatch.setattr(torch._dynamo.config, "recompile_limit", 1)
  size, questions = train_steps.sizes("toy"), inputs.make_questions(4)
  for fusion in ("mult", "mutan"):
    model = train_steps.torch_model("skipthoughts", True, fusion, size, questions)
    q_dim = train_steps.question_dim("skipthoughts", size)
    step = train_steps.TorchStep(model, train_steps.batch_for("skipthoughts", True, q_dim,
                                                              questions, 4), True)
    before = counters["stats"]["unique_graphs"]
    step.warmup()
    assert counters["stats"]["unique_graphs"] > before, fusion


def test_update_order_counts_the_copied_weights_of_both_updates_at_toy_size():
  from benchmarks import inputs, train_steps, update_order  # pylint: disable=g-import-not-at-top
  hlo = ("  %copy.1 = f32[1200,6000]{1,0} copy(%state_params__w__.1)\n"
         "  %copy.2 = f32[9]{0} copy(%state_params__b__.1)\n"
         "  %copy.3 = f32[70,32]{1,0} copy(%transpose.4)\n")
  assert update_order.copied_param_elements(hlo) == 1200 * 6000 + 9
  row = update_order.measure_row("distilbert:frozen:mult", train_steps.sizes("toy"),
                                 inputs.make_questions(8), 8, "float32", 2, 0.01)
  assert not row["errors"] and row["plain / gated"]["repeats"] == 2
  assert row["copied_param_mb"]["plain"] > 1.0 > 1e-3 > row["copied_param_mb"]["gated"]
  assert row["first_loss_abs_diff"] == 0.0


def test_activations_ab_patches_jax_nn_into_the_step_at_toy_size():
  from benchmarks import activations_ab  # pylint: disable=g-import-not-at-top
  row = activations_ab.measure_row("distilbert:finetuned:mult", train_steps.sizes("toy"),
                                   inputs.make_questions(8), 8, "bfloat16", 2, 0.01)
  assert not row["errors"] and row["jax.nn / float32"]["repeats"] == 2
  # the same model from the same seed: bf16 rounding of the activations apart, the same loss
  assert 0.0 < row["first_loss_abs_diff"] < 1e-2


def test_a_row_benchmark_command_writes_its_rows_dtype_and_command(tmp_path):
  """step_ab.main_over_rows: the command line that activations_ab, update_order and
  step_pieces share."""
  from benchmarks import activations_ab  # pylint: disable=g-import-not-at-top
  argv = ["--size", "toy", "--rounds", "1", "--batch", "8", "--block-s", "0.01", "--rows",
          "distilbert:frozen:mult", "--dtype", "float32", "--out", str(tmp_path)]
  activations_ab.main(argv)
  record = json.loads((tmp_path / "results.json").read_text())
  assert record["command"] == "python -m benchmarks.activations_ab " + " ".join(argv)
  assert record["compute_dtype"] == "float32" and record["rounds"] == 1
  assert [r["row"] for r in record["rows"]] == ["distilbert:frozen:mult"]
  assert "| distilbert:frozen:mult |" in (tmp_path / "results.md").read_text()


def test_weight_gradients_times_both_operand_orders():
  from benchmarks import inputs, train_steps, weight_gradients  # pylint: disable=g-import-not-at-top
  transposes = weight_gradients.measure_transposes((64, 96), 2)
  assert not transposes["errors"] and transposes["bf16 / f32"]["repeats"] == 2
  assert set(transposes["ns_per_element"]) == {"bf16", "f32"}
  product = weight_gradients.measure_product((64, 96, 8), 2)
  assert not product["errors"] and product["output_gradient_first_products"] == 1
  assert product["max_abs_diff"] < 1e-3
  assert product["input_first / output_gradient_first"]["repeats"] == 2
  row = weight_gradients.measure_row("distilbert:finetuned:mult", train_steps.sizes("toy"),
                                     inputs.make_questions(8), 8, 2, 0.01)
  assert not row["errors"] and row["input_first / output_gradient_first"]["repeats"] == 2
  assert row["output_gradient_first_products"] >= 1  # the FFN's second layer (64 -> 32) among them
  assert row["first_loss_abs_diff"] == 0.0
  md = weight_gradients.markdown({"command": "c", "machine": {"usable_cpus": 2, "jax": "x"},
                                  "cpu": "cpu", "batch": 8, "size": "toy", "rounds": 2,
                                  "transposes": transposes, "products": [product],
                                  "rows": [row]})
  assert "| distilbert:finetuned:mult train step |" in md and "Transposes in memory (64 x 96" in md


def test_word_table_sparse_adam_is_optax_adam_and_the_patched_lookup_passes_no_gradient():
  from benchmarks import word_table  # pylint: disable=g-import-not-at-top
  from rsvqa_jax.config import base_config  # pylint: disable=g-import-not-at-top
  rng = np.random.default_rng(0)
  table = rng.standard_normal((50, 4)).astype(np.float32)
  ids = jnp.asarray([3, 7, 3, 3, 0, 49], jnp.int32)  # repeated and untouched rows
  rows = jnp.asarray(rng.standard_normal((6, 4)), jnp.float32)
  pair, diff = word_table.compare_updates(table, ids, rows, base_config().optim)
  assert diff < 1e-6
  moved = np.abs(np.asarray(pair["sparse"].table) - table).max(axis=1)
  assert (moved[[0, 3, 7, 49]] > 1e-4).all() and (moved[[1, 2, 8]] == 0).all()
  size, questions = train_steps.sizes("toy"), inputs.make_questions(8)
  row = word_table.measure_lm("distilbert", size, questions, 8, "float32", 2, 0.01)
  assert row["table"] == [questions.wordpiece_vocab_size, 32] and row["max_abs_diff"] < 1e-6
  assert row["table_scatters"] == {"as trained": 1, "no table gradient": 0}
  assert not row["update"]["errors"] and not row["step"]["errors"]
  assert row["step"]["as trained / no table gradient"]["repeats"] == 2
  assert 0 < row["touched_rows"] <= row["tokens"] == 8 * questions.wordpiece_tokens.shape[1]


def test_step_pieces_are_the_step_split_in_two_and_each_is_timed_at_toy_size():
  from benchmarks import step_pieces  # pylint: disable=g-import-not-at-top
  from rsvqa_jax.train import steps as steps_lib  # pylint: disable=g-import-not-at-top
  size, questions = train_steps.sizes("toy"), inputs.make_questions(8)
  model, q_dim = train_steps.jax_model("distilbert", True, "mult", size, questions)
  step = train_steps.JaxStep(model, True, train_steps.batch_for("distilbert", True, q_dim,
                                                                questions, 8),
                             compute_dtype="bfloat16")
  state = jax.tree.map(jnp.copy, step.state)
  (loss, _), grads = jax.jit(steps_lib.gradients, static_argnums=2)(state, step.batch,
                                                                     jnp.bfloat16)
  params = steps_lib.finite_update(step.optimizer, grads, state.opt_state, state.params)[0]
  step.run_one()
  assert float(step.metrics["loss"]) == pytest.approx(float(loss), rel=1e-6)
  for ours, theirs in zip(jax.tree.leaves(params), jax.tree.leaves(step.state.params)):
    np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=1e-6, atol=1e-7)
  rows = {dtype: step_pieces.measure_row("skipthoughts:frozen:mult", size, questions, 8, dtype,
                                         2, 0.01, 1 << 12) for dtype in ("float32", "bfloat16")}
  for dtype, row in rows.items():
    assert not row["errors"] and row["ms"]["update"]["repeats"] == 2, dtype
    assert row["update / triad"]["median"] > 0 and row["pieces / step"]["repeats"] == 2
    assert row["update_copies"] == 0  # each donated buffer updated in place, as in the step
  assert "casts ms" not in rows["float32"] and rows["bfloat16"]["casts ms"]["repeats"] == 2
  md = step_pieces.markdown({"command": "c", "machine": {"usable_cpus": 2, "jax": "x"},
                             "cpu": "cpu", "batch": 8, "size": "toy", "rounds": 2,
                             "compute_dtype": "bfloat16", "rows": [rows["bfloat16"]]})
  assert "| skipthoughts:frozen:mult | " in md and "update / triad" in md


def test_adam_passes_times_every_form_of_the_same_update_at_toy_size():
  from benchmarks import adam_passes  # pylint: disable=g-import-not-at-top
  hlo = ("ENTRY %main {\n  %f = f32[] fusion(%g), kind=kLoop\n"
         "  %m = f32[64,96]{1,0} fusion(%g, %m), kind=kLoop\n"
         "  %s = f32[3,64,96]{2,1,0} fusion(%g, %b), kind=kLoop\n"
         "  %t = (f32[64,96]{1,0}, f32[10]{0}) fusion(%g), kind=kLoop\n}")
  assert adam_passes.weight_sized_fusions(hlo, 64 * 96) == 3
  result = adam_passes.measure((64, 96), 2, 0.01)
  rows = {r["form"]: r for r in result["rows"]}
  assert set(rows) == set(adam_passes.FORMS) and not result["errors"]
  for name, row in rows.items():
    assert row["max_abs_diff_vs_optax"] < 1e-6, name  # three updates, the same arithmetic
    assert row["ms"]["repeats"] == 2 and row["update / triad"]["median"] > 0, name
  assert rows["optax"]["fusions"] == 3 and rows["one buffer, stacked"]["fusions"] == 1
  md = adam_passes.markdown({"command": "c", "machine": {"usable_cpus": 2, "jax": "x"},
                             "cpu": "cpu", "shape": [64, 96], "rounds": 2, **result})
  assert "| one buffer, stacked | 1 | " in md and "64x96" in md


def test_gru_scan_ab_times_the_checkout_against_a_revision_at_toy_size():
  from benchmarks import gru_scan_ab  # pylint: disable=g-import-not-at-top
  before = gru_scan_ab.module_at("HEAD")
  assert before.__name__ == "skipthoughts_at_HEAD" and callable(before.gru_scan)
  rows = gru_scan_ab.measure("HEAD", 4, 3, 16, 2, 0.01)
  assert [(r["masks"], r["dtype"], r["pass"]) for r in rows][::3] == [
      ("none", "float32", "forward"), ("none", "bfloat16", "forward and backward"),
      ("Bayesian", "bfloat16", "forward")]
  for r in rows:
    assert not r["errors"] and r["before / now"]["repeats"] == 2
    assert r["max_abs_diff"] < 1e-2  # the same inputs through the same recurrence
  md = gru_scan_ab.markdown({"command": "c", "machine": {"usable_cpus": 2, "jax": "x"},
                             "cpu": "cpu", "against": "HEAD", "batch": 4, "tokens": 3,
                             "hidden": 16, "rounds": 2, "rows": rows})
  assert "| Bayesian | bfloat16 | forward and backward | " in md


def test_the_pretraining_step_benchmark_times_both_steps_from_one_start(tmp_path):
  from benchmarks import pretrain_step_ab  # pylint: disable=g-import-not-at-top
  argv = ["--rounds", "2", "--steps", "1", "--batch", "4", "--out", str(tmp_path)]
  pretrain_step_ab.main(argv)
  record = json.loads((tmp_path / "results.json").read_text())
  assert record["command"] == "python -m benchmarks.pretrain_step_ab " + " ".join(argv)
  assert record["first_loss_abs_diff"] == 0.0  # the same start and batch: the same loss
  assert record["state_max_abs_diff"] == 0.0  # and the same update
  assert record["ratio"]["repeats"] == 2 and record["ratio"]["min"] > 0
  assert "[start:pretrain_step_ab]" in (tmp_path / "results.md").read_text()
