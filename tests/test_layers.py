"""The package's layers point one way (docs/layout.md), and loading a config never starts JAX.

Every import of every module is read from its syntax tree, function-level imports included, and
checked against the rules: nothing in the library imports the command line; bias/ (pure
analysis) imports no train/ or eval/; models/ imports no data/, train/ or features/; data/
imports no models/ or train/; the top-level modules (errors, config, storage, host_memory,
cpu_units, progress, streams, caller_logging, jax_environment) import no package of ours
(config, a package of one concern per module, imports its own modules); and no two modules import
each other, directly or in a cycle.
"""
import ast
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(ROOT, "rsvqa_jax")
CONFIGS = os.path.join(ROOT, "configs")

# (importing area, imported area) pairs that break the layering. An area is a sub-package (data,
# models, features, train, eval, bias, study, commands) or a top-level module (config, cli...).
FORBIDDEN = {
    "bias": {"train", "eval", "features", "study", "cli", "commands"},
    "models": {"data", "train", "features", "eval", "bias", "study", "cli", "commands"},
    "data": {"models", "train", "features", "eval", "bias", "study", "cli", "commands"},
    "features": {"train", "eval", "bias", "study", "cli", "commands"},
    "train": {"eval", "study", "cli", "commands"},
    "eval": {"study", "cli", "commands"},
    "study": {"cli", "commands"},
}
TOP_LEVEL = {"errors", "config", "storage", "host_memory", "cpu_units", "progress", "streams",
             "caller_logging", "jax_environment"}


def _module_name(path):
  rel = os.path.relpath(path, ROOT)[:-3].replace(os.sep, ".")
  return rel[:-len(".__init__")] if rel.endswith(".__init__") else rel


def _modules():
  out = {}
  for folder, _, files in os.walk(PACKAGE):
    for name in files:
      if name.endswith(".py"):
        path = os.path.join(folder, name)
        out[_module_name(path)] = path
  return out


def imports_of(path, module, known):
  """Modules of ours that `path` imports anywhere in its body (resolving `from X import y`)."""
  with open(path, encoding="utf-8") as f:
    tree = ast.parse(f.read(), path)
  package = module if path.endswith("__init__.py") else module.rsplit(".", 1)[0]
  found = set()
  for node in ast.walk(tree):
    if isinstance(node, ast.Import):
      found.update(a.name for a in node.names if a.name.split(".")[0] == "rsvqa_jax")
    elif isinstance(node, ast.ImportFrom):
      base = node.module or ""
      if node.level:
        base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1]
                        + ([base] if base else []))
      if base.split(".")[0] != "rsvqa_jax":
        continue
      for alias in node.names:
        full = f"{base}.{alias.name}"
        found.add(full if full in known else base)
  return {m for m in found if m in known and m != module}


def _area(module):
  parts = module.split(".")
  return parts[1] if len(parts) > 1 else "rsvqa_jax"


def _graph():
  known = _modules()
  return {m: imports_of(p, m, known) for m, p in known.items()}


def test_imports_are_found_at_any_depth(tmp_path):
  path = tmp_path / "probe.py"
  path.write_text("from rsvqa_jax.train import loop\n"
                  "def f():\n  from rsvqa_jax import config as c\n  import rsvqa_jax.bias.tables\n")
  known = {"rsvqa_jax.train.loop", "rsvqa_jax.config", "rsvqa_jax.bias.tables", "rsvqa_jax.train"}
  assert imports_of(str(path), "rsvqa_jax.probe", known) == {
      "rsvqa_jax.train.loop", "rsvqa_jax.config", "rsvqa_jax.bias.tables"}


def test_layers_point_one_way():
  broken = []
  for module, imported in sorted(_graph().items()):
    area = _area(module)
    for other in sorted(imported):
      target = _area(other)
      if area in TOP_LEVEL and target not in ("errors", "rsvqa_jax", area):
        broken.append(f"{module} -> {other} (top-level modules import no package of ours)")
      elif target in FORBIDDEN.get(area, ()) or (
          area not in ("cli", "commands") and target in ("cli", "commands")):
        broken.append(f"{module} -> {other}")
  assert not broken, "layering broken:\n" + "\n".join(broken)


def test_every_ruled_area_exists():
  """An area renamed or turned into a package under another name would leave its rules checking
  nothing."""
  areas = {_area(m) for m in _modules()}
  ruled = set(FORBIDDEN).union(*FORBIDDEN.values())
  assert ruled <= areas, f"areas ruled but not found: {sorted(ruled - areas)}"


def test_no_import_cycles():
  graph = _graph()
  state, cycles = {}, []

  def visit(node, stack):
    state[node] = "open"
    stack.append(node)
    for nxt in sorted(graph[node]):
      if state.get(nxt) == "open":
        cycles.append(" -> ".join(stack[stack.index(nxt):] + [nxt]))
      elif nxt not in state:
        visit(nxt, stack)
    stack.pop()
    state[node] = "done"

  for node in sorted(graph):
    if node not in state:
      visit(node, [])
  assert not cycles, "import cycles:\n" + "\n".join(cycles)


@pytest.mark.parametrize("name", sorted(f for f in os.listdir(CONFIGS)
                                          if f.endswith(".py") and not f.startswith("_")))
def test_loading_a_config_never_imports_jax(name):
  code = ("import sys\nfrom rsvqa_jax import config\nc = config.load(sys.argv[1])\n"
          "assert 'jax' not in sys.modules, sorted(m for m in sys.modules if 'jax' in m)[:5]\n"
          "assert 'flax' not in sys.modules\nprint(len(config.to_dict(c)))\n")
  out = subprocess.run([sys.executable, "-c", code, os.path.join(CONFIGS, name)], cwd=ROOT,
                       capture_output=True, text=True, timeout=300)
  assert out.returncode == 0, out.stderr[-2000:]
  assert int(out.stdout.strip()) >= 7  # seed + the six sections at least
