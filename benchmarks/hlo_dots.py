"""The matmuls of a compiled XLA module, read from its HLO text: shapes, transposition, FLOPs.

A profile names ops by their HLO instruction ("ynn_fusion.8", "dot.3"); this maps each name
that computes a dot (a plain dot, or a fusion around one, such as XLA:CPU's YNNPACK fusions) to
what it multiplies, so a profile can give each matmul shape its achieved FLOP/s. The
contracting dimensions tell a product x @ w (lhs 1, rhs 0) from x @ w.T (1, 1) and x.T @ y
(0, 0): libraries do not run these at the same speed. On a GPU, XLA turns matmuls into cuBLAS
custom calls, which this does not read.
"""
import math
import re

_DEFINITION = re.compile(r"^\s*(?:ROOT\s+)?%([\w.\-]+) = (\w+\[[\d,]*\])(?:\{[\d,]*\})?\s")
_DOT = re.compile(r"^\s*(?:ROOT\s+)?%[\w.\-]+ = (\w+\[[\d,]*\])\S* dot\(([^)]*)\)(.*)$")
_FUSION = re.compile(r"^\s*(?:ROOT\s+)?%([\w.\-]+) = \S+ fusion\(.*calls=%([\w.\-]+)")
_COMPUTATION = re.compile(r"^(?:ENTRY\s+)?%([\w.\-]+) \(")


def _dims(shape):
  inside = shape[shape.index("[") + 1:-1]
  return [int(d) for d in inside.split(",")] if inside else []


def _describe(dot_line, shapes):
  """(label, FLOPs) of one dot instruction line, or None if its operands are unknown."""
  out, operands, attributes = _DOT.match(dot_line).groups()
  names = re.findall(r"%([\w.\-]+)", operands)
  if len(names) != 2 or any(n not in shapes for n in names):
    return None
  lhs, rhs = (shapes[n] for n in names)
  contracting = {side: re.search(side + r"_contracting_dims=\{([\d,]*)\}", attributes)
                 for side in ("lhs", "rhs")}
  lhs_k = [int(d) for d in contracting["lhs"].group(1).split(",") if d]
  rhs_k = [int(d) for d in contracting["rhs"].group(1).split(",") if d]
  flops = 2 * math.prod(_dims(out)) * math.prod(_dims(lhs)[d] for d in lhs_k)
  label = (f"{lhs} x {rhs} -> {out}, contracting "
           f"({','.join(map(str, lhs_k))}; {','.join(map(str, rhs_k))})")
  return label, flops


def module_dots(hlo_text):
  """{instruction name: (label, FLOPs)} for every dot, and every fusion that holds one."""
  shapes, bodies, current = {}, {}, None
  for line in hlo_text.splitlines():
    head = _COMPUTATION.match(line)
    if head:
      current = head.group(1)
      bodies[current] = []
    elif current is not None:
      bodies[current].append(line)
    definition = _DEFINITION.match(line)
    if definition:
      shapes[definition.group(1)] = definition.group(2)
  found = {}
  for lines in bodies.values():
    for line in lines:
      name = _DEFINITION.match(line)
      if name and _DOT.match(line):
        described = _describe(line, shapes)
        if described:
          found[name.group(1)] = described
  for lines in bodies.values():
    for line in lines:
      fusion = _FUSION.match(line)
      if not fusion:
        continue
      inner = [found[m.group(1)] for body_line in bodies.get(fusion.group(2), [])
               for m in [_DEFINITION.match(body_line)] if m and m.group(1) in found]
      if len(inner) == 1:
        found[fusion.group(1)] = inner[0]
  return found
