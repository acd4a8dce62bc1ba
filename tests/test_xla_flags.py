"""Smoke tests of benchmarks.xla_flags: XLA_FLAGS variants, each in processes of its own.

Toy sizes, one round; no timing is asserted (the machine is shared and noisy).
"""
import json
import os

import jax
import jax.numpy as jnp
import pytest

from benchmarks import xla_flags

pytest.importorskip("torch", reason="the variants are compared with PyTorch")

MULTI_OUTPUT = "--xla_backend_extra_options=xla_cpu_use_multi_output_fusion"
ROW = "skipthoughts:frozen:mult"


def test_rows_variants_and_rotation_parse():
  assert xla_flags.parse_row("distilbert:finetuned:mutan") == ("distilbert", False, "mutan")
  assert xla_flags.parse_variant("default=") == ("default", "")
  assert xla_flags.parse_variant("a=--x=1 --y=") == ("a", "--x=1 --y=")
  with pytest.raises(ValueError):
    xla_flags.parse_row("distilbert:frozenish:mult")
  assert xla_flags.rotated(["a", "b", "c"], 0) == ["a", "b", "c"]
  assert xla_flags.rotated(["a", "b", "c"], 4) == ["b", "c", "a"]
  assert xla_flags.contender_env("default", {"default": ""}) == ("jax", {"XLA_FLAGS": ""})
  assert xla_flags.contender_env("torch_passive", {})[1]["OMP_WAIT_POLICY"] == "PASSIVE"


def test_library_census_counts_every_product_once():
  """Whatever library the flags pick, every product of the module is counted once, with its
  dtypes and FLOPs (the weight gradient x.T @ g included)."""
  x, w = jnp.ones((16, 32), jnp.bfloat16), jnp.ones((32, 8), jnp.bfloat16)
  f = lambda x, w: (jnp.matmul(x, w, preferred_element_type=jnp.float32),
                    jnp.matmul(x.T, x, preferred_element_type=jnp.float32))
  census = xla_flags.library_census(jax.jit(f).lower(x, w).compile().as_text())
  assert sum(c["ops"] for c in census.values()) == 2
  assert sum(c["flops"] for c in census.values()) == 2 * 16 * 32 * 8 + 2 * 32 * 32 * 16
  assert all(k.split()[0] in ("YNNPACK", "oneDNN", "XNNPACK", "Eigen", "XLA fusion")
             and k.endswith("-> f32") for k in census)
  assert "% (" in xla_flags.census_line(census)


def test_each_variant_runs_in_a_process_of_its_own(tmp_path):
  xla_flags.main(["--size", "toy", "--rows", ROW, "--variant", "default=",
                  "--variant", f"multi_output={MULTI_OUTPUT}", "--torch", "torch_passive",
                  "--rounds", "1", "--blocks", "2", "--block-s", "0.02", "--out", str(tmp_path)])
  results = json.loads((tmp_path / "results.json").read_text())
  workers = results["record"]["rounds"][0]["workers"]
  assert set(workers) == {"default", "multi_output", "torch_passive"}
  assert workers["default"]["xla_flags"] == ""
  assert workers["multi_output"]["xla_flags"] == MULTI_OUTPUT
  assert workers["torch_passive"]["kind"] == "torch"
  pids = {w["pid"] for w in workers.values()}
  assert len(pids) == 3 and os.getpid() not in pids
  assert results["cpu"] and results["load_average_start"]
  summary = results["summary"]
  assert summary["bandwidth"]["median"] > 0 and summary["bf16_peak"]["median"] > 0
  row = summary["rows"][ROW]
  assert row["frozen"] and row["bytes_per_step"] > 36 * row["trainable_params"] > 0
  assert row["memory_roofline_s"] > 0 and row["roofline_s"] > 0
  contenders = row["contenders"]
  assert contenders["torch_passive"]["step_s"]["repeats"] == 1
  for name in ("default", "multi_output"):
    c = contenders[name]
    assert not c["errors"], c["errors"]
    assert c["step_s"]["repeats"] == 1 and c["vs_torch_eager"]["repeats"] == 1
    assert 0 < c["of_memory_roofline"] and 0 < c["of_roofline"]
    assert len(c["losses"]) == 3 and c["max_abs_loss_diff_vs_default"] < 1e-2
    assert sum(x["ops"] for x in c["census"].values()) > 0
  assert "vs_default" in contenders["multi_output"] and "vs_default" not in contenders["default"]
  names = [t["name"] for t in results["targets"]]
  assert f"bf16 vs torch autocast eager: {ROW} (default flags)" in names
  assert f"frozen head / memory roofline: {ROW} (default flags)" in names
  assert all(t["status"] in ("PASS", "MISS", "N/A") for t in results["targets"])
  md = (tmp_path / "results.md").read_text()
  for section in ("machine", "variants", "targets", "xla_flags"):
    assert f"<!-- --8<-- [start:{section}] -->" in md and f"<!-- --8<-- [end:{section}] -->" in md
  assert f"CPU: {results['cpu']}" in md and f"`{MULTI_OUTPUT}`" in md
  assert f"| {ROW} | multi_output |" in md
  reachable = row["memory_roofline_s"] / row["roofline_s"]
  assert (f"; a step at its roofline (FLOPs + Adam) would read {reachable:.2f} of its memory "
          "roofline") in md
  assert (tmp_path / "logs" / "round1_default.log").exists()
  xla_flags.main(["--render", "--out", str(tmp_path)])  # results.md from results.json alone
  assert (tmp_path / "results.md").read_text() == md
