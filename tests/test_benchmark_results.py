"""Committed benchmark results are generated, never typed: each results.md is what the harness
renders from its results.json, in sections the docs site includes by name."""
import glob
import json
import os
import re

from benchmarks import run, timing

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _results_dirs():
  return sorted(os.path.dirname(p) for p in glob.glob(
      os.path.join(ROOT, "benchmarks", "results", "**", "results.md"), recursive=True))


def test_every_committed_results_md_is_rendered_from_its_json():
  """Each results.md that benchmarks.run wrote (other harnesses write their own)."""
  rendered_by_run = 0
  for folder in _results_dirs():
    with open(os.path.join(folder, "results.json"), encoding="utf-8") as f:
      results = json.load(f)
    if not results.get("command", "").startswith("python -m benchmarks.run "):
      continue
    rendered_by_run += 1
    rendered = run.markdown(results)
    with open(os.path.join(folder, "results.md"), encoding="utf-8") as f:
      assert f.read() == rendered, f"{folder}: run `python -m benchmarks.run --render --out DIR`"
  assert rendered_by_run >= 8


def test_sections_are_snippets_with_tables_set_apart(tmp_path):
  summary = timing.summarize([1.0, 2.0, 3.0])
  results = {"command": "python -m benchmarks.run --toy", "mode": "toy", "runtime_s": 1.0,
             "machine": {"cpu": "x", "cores": 2, "usable_cpus": 2, "jax": "0", "jax_backend":
                         "cpu", "torch": "0", "python": "3"},
             "targets": [timing.target("t", summary, ">=", 1.0)],
             "sections": {"accelerator": {
                 "device_kind": "NVIDIA H200", "datasheet_bf16_peak": 989.4e12,
                 "measured_bf16_matmul_peak": summary, "peak_config": {}, "torch_device": "cuda",
                 "rows": [{"lm": "distilbert", "batch": 70, "tokens": [70, 16],
                           "jax_samples_s": summary, "jax_mfu": summary}]}}}
  (tmp_path / "results.json").write_text(json.dumps(results))
  run.main(["--render", "--out", str(tmp_path)])
  md = (tmp_path / "results.md").read_text()
  assert md == run.markdown(results)
  for name in ("machine", "targets", "accelerator"):
    start, end = f"<!-- --8<-- [start:{name}] -->", f"<!-- --8<-- [end:{name}] -->"
    assert md.count(start) == 1 and md.index(start) < md.index(end)
  lines = md.splitlines()
  for before, line in zip(lines, lines[1:]):  # no table glued to a paragraph or a list
    if line.startswith("|") != before.startswith("|"):
      assert not before.strip() or not line.strip(), (before, line)
  # results from before the bf16 units and the malloc choice were recorded say so
  assert "x (AMX, AVX512-BF16: not recorded)" in md and "Host malloc: not recorded" in md
  assert re.search(r"CPU: x \(AMX, AVX512-BF16: not recorded\)", md)
