"""Write docs/config.md's tables of every config key from rsvqa_jax/config/defaults.py itself.

The page cannot drift from the code: each key's default is the value `rsvqa-jax config` prints,
and its description is the comment on its line in defaults.py or the comment block right above
it (read with `ast` and `tokenize`), so a key is documented where it is defined:

  python -m tools.config_keys --docs docs/config.md

copies the tables between the page's markers (bias/report.quote_into); without --docs they are
printed. A key with no comment, or one the section functions build that their source does not
assign, is an error naming it.
"""
import argparse
import ast
import inspect
import io
import json
import sys
import tokenize

from rsvqa_jax import config as config_lib
from rsvqa_jax.bias import report
from rsvqa_jax.config import defaults
from rsvqa_jax.errors import RSVQAError

# The section functions a config's tree starts from, and where each hangs in it (loading._template
# puts study_defaults under `study` and answerability_section under `answerability`); a study.lm
# entry (lm_entry) is one per language model, under a name the config chooses.
ROOTS = (("base_config", ""), ("study_defaults", "study"),
         ("answerability_section", "answerability"), ("lm_entry", "study.lm.NAME"))
ENTRY = "lm_entry"
COMMAND = "python -m tools.config_keys --docs docs/config.md"
BEGIN, END = f"<!-- config keys: begin ({COMMAND}) -->", "<!-- config keys: end -->"
REQUIRED, ABSENT = "(required)", "(absent)"


class Section:
  """One table: a section's dotted prefix, what it is, and its (key, default, description) rows."""

  def __init__(self, prefix, about):
    self.prefix, self.about, self.rows = prefix, about, []


def _comments(source):
  """Line number -> (comment text, whether the line holds code too), from the tokenizer."""
  comments, code_lines = {}, set()
  for tok in tokenize.generate_tokens(io.StringIO(source).readline):
    if tok.type == tokenize.COMMENT:
      comments[tok.start[0]] = tok.string.lstrip("#").strip()
    elif tok.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
                          tokenize.ENDMARKER):
      code_lines.update(range(tok.start[0], tok.end[0] + 1))
  return {line: (text, line in code_lines) for line, text in comments.items()}


def _described(node, comments):
  """The comment block right above a statement, then the comment on its own line(s), as one line."""
  above, line = [], node.lineno - 1
  while line in comments and not comments[line][1]:
    above.insert(0, comments[line][0])
    line -= 1
  trailing = [comments[n][0] for n in range(node.lineno, node.end_lineno + 1)
              if n in comments and comments[n][1]]
  return " ".join(part for part in above + trailing if part)


def _dotted(target):
  """`c.a.b` -> ("c", "a.b"); None for any other target."""
  parts = []
  while isinstance(target, ast.Attribute):
    parts.insert(0, target.attr)
    target = target.value
  return (target.id, ".".join(parts)) if isinstance(target, ast.Name) and parts else None


def _called(value):
  """`f()` -> "f", `m.f()` -> "m.f" (a call without arguments), else None."""
  if isinstance(value, ast.Call) and not value.args and not value.keywords:
    f = value.func
    if isinstance(f, ast.Name):
      return f.id
    if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
      return f"{f.value.id}.{f.attr}"
  return None


def parse(source):
  """Every function of `source` -> its docstring's first paragraph and its statements in order,
  each (kind, name, function called, description): kind "key" (`c.name = value`), "section"
  (`c.name = function()`, or a bare ConfigDict when the function is None) or "sizes" (a loop
  setting the keys of its **kwargs, name SIZE)."""
  comments = _comments(source)
  defs = [fn for fn in ast.parse(source).body if isinstance(fn, ast.FunctionDef)]
  functions = {}
  for fn in defs:
    kwargs = fn.args.kwarg.arg if fn.args.kwarg else None
    statements = []
    for node in fn.body:
      if isinstance(node, ast.Assign) and len(node.targets) == 1 and _dotted(node.targets[0]):
        name, called = _dotted(node.targets[0])[1], _called(node.value)
        if called == "ml_collections.ConfigDict":
          statements.append(("section", name, None, _described(node, comments)))
        elif called in {d.name for d in defs}:
          statements.append(("section", name, called, _described(node, comments)))
        else:
          statements.append(("key", name, None, _described(node, comments)))
      elif isinstance(node, ast.For) and kwargs in {n.id for n in ast.walk(node.iter)
                                                    if isinstance(n, ast.Name)}:
        statements.append(("sizes", "SIZE", None, _described(node, comments)))
    doc = (ast.get_docstring(fn) or "").split("\n\n")[0]
    functions[fn.name] = (" ".join(doc.split()), statements)
  return functions


def _join(prefix, name):
  return f"{prefix}.{name}" if prefix else name


def _lookup(plain, key):
  for part in key.split("."):
    plain = plain[part]
  return plain


def _tree():
  """Every key a config may set at its default: base_config with the study and answerability
  sections (loading._template's tree for a config holding both)."""
  tree = defaults.base_config()
  for fn_name, prefix in ROOTS:
    if prefix and fn_name != ENTRY:
      tree[prefix] = getattr(defaults, fn_name)()
  return tree


def sections(source):
  """The page's tables in order, each section's own keys before its subsections', as the
  functions of `source` (defaults.py's) build them; a key without a comment is an error."""
  functions, tree = parse(source), _tree()
  plain = config_lib.to_dict(tree)
  tables, missing, in_tree = [], [], []

  def default(fn_name, kind, key, name):
    """The default's cell: JSON as `rsvqa-jax config` prints it, or what stands for none."""
    if kind == "sizes":
      return ABSENT
    if fn_name != ENTRY:
      in_tree.append(key)
      return f"`{json.dumps(_lookup(plain, key))}`"
    param = inspect.signature(getattr(defaults, fn_name)).parameters[name]
    return REQUIRED if param.default is param.empty else f"`{json.dumps(param.default)}`"

  def walk(fn_name, prefix, about):
    doc, statements = functions[fn_name]
    own = Section(prefix, about or doc)
    tables.append(own)
    filled = {name.rpartition(".")[0] for _, name, _, _ in statements}
    subs, later = {}, []  # bare ConfigDicts filled here (study.balanced) by name; every table
    for kind, name, called, described in statements:
      key = _join(prefix, name)
      if kind == "section" and (called or name in filled):
        later.append((called, Section(key, described)))
        if not called:
          subs[name] = later[-1][1]
          if not described:
            missing.append(key)
        continue
      holders = [n for n in subs if name.startswith(n + ".")]
      (subs[max(holders, key=len)] if holders else own).rows.append(
          (key, default(fn_name, kind, key, name), described))
      if not described:
        missing.append(key)
    for called, sub in later:
      if called:
        walk(called, sub.prefix, sub.about)
      else:
        tables.append(sub)

  for fn_name, prefix in ROOTS:
    walk(fn_name, prefix, None)
  if missing:
    raise RSVQAError(f"rsvqa_jax/config/defaults.py: no comment on or above {', '.join(missing)}"
                     ": say there what each does")
  unassigned = {key for key, _ in config_lib.leaves(tree)} ^ set(in_tree)
  if unassigned:
    raise RSVQAError("rsvqa_jax/config/defaults.py: keys not assigned by name in a section "
                     f"function: {', '.join(sorted(unassigned))}")
  return [s for s in tables if s.rows]


def _cell(text):
  return text.replace("|", "\\|")


def markdown(tables):
  """The page's generated block: a heading, what the section is and a table per section."""
  lines = []
  for s in tables:
    lines += [f"### `{s.prefix}`" if s.prefix else "### Top level", ""]
    if s.about:
      lines += [s.about, ""]
    lines += ["| key | default | what it does |", "|---|---|---|"]
    lines += [f"| `{key}` | {_cell(default)} | {_cell(described)} |"
              for key, default, described in s.rows]
    lines.append("")
  return "\n".join(lines)


def generate():
  """The block docs/config.md quotes, from defaults.py's source as it is now."""
  return markdown(sections(inspect.getsource(defaults)))


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--docs", help="the page whose marker block gets the tables "
                                     "(docs/config.md); without it they are printed")
  args = parser.parse_args(argv)
  try:
    text = generate()
    if args.docs:
      report.quote_into([args.docs], [(BEGIN, END, text)])
      print(f"{args.docs}: config key tables updated")
    else:
      print(text)
  except (OSError, RSVQAError) as e:
    print(f"config_keys: error: {e}", file=sys.stderr)
    return 2
  return 0


if __name__ == "__main__":
  sys.exit(main())
