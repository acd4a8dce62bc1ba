"""docs/config.md: its tables are tools/config_keys.py's output from defaults.py as it is now, and
name every key of the default trees, so a new key or a changed default or comment fails here
until the page is regenerated."""
import os

import pytest

from rsvqa_jax import config as config_lib
from rsvqa_jax.bias import report
from rsvqa_jax.config import defaults
from rsvqa_jax.errors import RSVQAError
from tools import config_keys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGE = os.path.join(ROOT, "docs", "config.md")


def _block():
  with open(PAGE, encoding="utf-8") as f:
    found = report.block_pattern(config_keys.BEGIN, config_keys.END).search(f.read())
  assert found, f"docs/config.md has no block between its markers ({config_keys.BEGIN})"
  return found.group(0)


def test_the_page_is_what_the_generator_writes_now():
  wanted = f"{config_keys.BEGIN}\n{config_keys.generate().strip()}\n{config_keys.END}"
  assert _block() == wanted, ("docs/config.md is out of date with rsvqa_jax/config/defaults.py: "
                              f"run {config_keys.COMMAND}")


def test_every_key_of_the_default_trees_has_a_row():
  keys = [key for tree, prefix in ((config_lib.base_config(), ""),
                                    (config_lib.study_defaults(), "study."),
                                    (config_lib.answerability_section(), "answerability."))
          for key, _ in config_lib.leaves(tree, prefix)]
  block = _block()
  assert len(keys) > 100
  missing = [k for k in keys if f"| `{k}` |" not in block]
  assert not missing, f"no row in docs/config.md: {', '.join(missing)}"


def test_a_comment_belongs_to_the_key_below_it_or_beside_it():
  source = ('def f():\n  c = ml_collections.ConfigDict()\n'
            '  c.a = 1  # beside a\n'
            '  # above b,\n  # in two lines\n'
            '  c.b = (1,\n         2)  # and beside b\n'
            '  c.c = 3\n  return c\n')
  statements = config_keys.parse(source)["f"][1]
  assert statements == [("key", "a", None, "beside a"),
                        ("key", "b", None, "above b, in two lines and beside b"),
                        ("key", "c", None, "")]


def test_a_key_without_a_comment_is_an_error_naming_it():
  with open(defaults.__file__, encoding="utf-8") as f:
    lines = f.read().split("\n")
  at = [i for i, line in enumerate(lines) if line.startswith("  c.synthetic_seed = ")]
  assert len(at) == 1 and "#" in lines[at[0]] and not lines[at[0] - 1].lstrip().startswith("#")
  lines[at[0]] = lines[at[0]].split("#")[0].rstrip()
  with pytest.raises(RSVQAError, match=r"no comment on or above data\.synthetic_seed:"):
    config_keys.sections("\n".join(lines))


def test_docs_fills_the_pages_markers(tmp_path, capsys):
  page = tmp_path / "page.md"
  page.write_text(f"intro\n{config_keys.BEGIN}\nold\n{config_keys.END}\n")
  assert config_keys.main(["--docs", str(page)]) == 0
  assert page.read_text() == (f"intro\n{config_keys.BEGIN}\n{config_keys.generate().strip()}\n"
                              f"{config_keys.END}\n")
  assert capsys.readouterr().out == f"{page}: config key tables updated\n"
