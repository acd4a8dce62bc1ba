"""The docs site builds in strict mode: a broken link, a page missing from the nav, a results file
a page includes but the benchmarks never wrote, or a docstring the API reference cannot read
fails the suite (mkdocs.yml sets what strict checks)."""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_the_docs_site_builds_strictly(tmp_path):
  out = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                        str(tmp_path / "site")], cwd=ROOT, capture_output=True, text=True,
                       timeout=600, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
  assert out.returncode == 0, out.stderr[-3000:]
  reference = (tmp_path / "site" / "reference" / "index.html").read_text(encoding="utf-8")
  assert "load_run" in reference and "io_lower_bound" in reference
  performance = (tmp_path / "site" / "performance" / "index.html").read_text(encoding="utf-8")
  assert "--8&lt;--" not in performance and "--8<--" not in performance  # every include resolved


def test_results_tables_in_the_docs_are_included_not_typed():
  """A table row that a benchmark results file holds appears in no page as typed text."""
  rows = set()
  for folder, _, files in os.walk(os.path.join(ROOT, "benchmarks", "results")):
    if "results.md" in files:
      with open(os.path.join(folder, "results.md"), encoding="utf-8") as f:
        rows |= {line for line in f.read().splitlines()
                 if line.startswith("| ") and re.search(r"\d", line)}  # measured rows
  for folder, _, files in os.walk(os.path.join(ROOT, "docs")):
    for name in files:
      if name.endswith(".md"):
        with open(os.path.join(folder, name), encoding="utf-8") as f:
          typed = rows & set(f.read().splitlines())
        assert not typed, (name, sorted(typed)[:3])


def test_every_quoted_block_has_its_markers_on_its_page():
  """The pages the commands copy a run's summaries into hold each block's markers once."""
  from rsvqa_jax.bias import report, shortcut_report  # pylint: disable=g-import-not-at-top
  from rsvqa_jax.commands import answerability  # pylint: disable=g-import-not-at-top
  from tools import grounding_tables  # pylint: disable=g-import-not-at-top
  for page, begin, end in [("language_bias.md", report.DOCS_BEGIN, report.DOCS_END),
                           ("shortcuts.md", shortcut_report.DOCS_BEGIN, shortcut_report.DOCS_END),
                           ("answerability.md", answerability.DOCS_BEGIN, answerability.DOCS_END),
                           *[("grounding.md", *pair) for pair in grounding_tables.BLOCKS.values()]]:
    with open(os.path.join(ROOT, "docs", "audits", page), encoding="utf-8") as f:
      text = f.read()
    assert text.count(begin) == 1 and text.index(begin) < text.index(end), page


def test_answerability_quotes_its_summary_and_tables(tmp_path, capsys):
  from rsvqa_jax.commands import answerability  # pylint: disable=g-import-not-at-top
  stage = tmp_path / "answerability"
  (stage / "tables").mkdir(parents=True)
  (stage / "summary.md").write_text("summary\n")
  (stage / "tables" / "table4_main.md").write_text("| main |\n")
  page = tmp_path / "page.md"
  page.write_text(f"a\n{answerability.DOCS_BEGIN}\nold\n{answerability.DOCS_END}\nb\n")
  answerability._quote_in_docs(str(page), str(stage))  # pylint: disable=protected-access
  assert page.read_text() == (f"a\n{answerability.DOCS_BEGIN}\nsummary\n\n| main |\n"
                              f"{answerability.DOCS_END}\nb\n")
  assert capsys.readouterr().out == f"{page}: answerability summary updated\n"


def test_every_public_name_of_the_reference_pages_modules_says_what_it_is():
  """The reference page is built from docstrings: a public function, class, method or property
  without one is listed there bare (analyze's docstring sent readers to to_csv / to_latex,
  which had none)."""
  import importlib  # pylint: disable=g-import-not-at-top
  import inspect  # pylint: disable=g-import-not-at-top
  with open(os.path.join(ROOT, "docs", "reference.md"), encoding="utf-8") as f:
    modules = re.findall(r"^::: (\S+)$", f.read(), re.M)
  bare = []
  for name in modules:
    module = importlib.import_module(name)
    exported = getattr(module, "__all__", None)  # a package: the names it re-exports
    for attr, value in vars(module).items():
      if attr.startswith("_") or (attr not in exported if exported is not None else
                                  getattr(value, "__module__", None) != name):
        continue
      if not (inspect.isfunction(value) or inspect.isclass(value)):
        continue
      members = [(attr, value)]
      if inspect.isclass(value):
        members += [(f"{attr}.{k}", v) for k, v in vars(value).items() if not k.startswith("_")
                    and (inspect.isfunction(v) or isinstance(v, property))]
      bare += [label for label, member in members if not inspect.getdoc(member)]
  assert not bare, f"no docstring: {', '.join(bare)}"
