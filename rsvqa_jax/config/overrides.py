"""Command-line overrides (`--config.a.b=value`): a key the config does not have, or a value of
the wrong type, is an RSVQAError naming it."""
import ast
import difflib
import os

import ml_collections

from rsvqa_jax.config.defaults import PATH_KEYS, base_config
from rsvqa_jax.errors import RSVQAError

def _parse_literal(text):
  try:
    return ast.literal_eval(text)
  except (ValueError, SyntaxError):
    return text


def _items(text):
  """A list written without Python's quotes: `a,b`, `(a)`, `[8, 16]`; each item read as a
  literal where it is one (8 -> 8), else kept as text (a word)."""
  inner = text.strip()
  if inner[:1] + inner[-1:] in ("()", "[]"):
    inner = inner[1:-1]
  return [_parse_literal(item.strip()) for item in inner.split(",") if item.strip()]


def _nullable(config, key):
  """Whether `key` may be unset (None), as data.root and text.checkpoint are by default."""
  node = config
  for part in key.split("."):
    if not isinstance(node, ml_collections.ConfigDict) or part not in node:
      return False
    node = node[part]
  return node is None


def describe_type(field_type):
  """What a key of `field_type` takes, for a message: "an integer", "a number", ..."""
  kinds = {bool: "true or false", int: "an integer", float: "a number", str: "a string",
           tuple: "a list such as (1, 2)", list: "a list such as (1, 2)"}
  return kinds.get(field_type, f"a {field_type.__name__}")


def _value(key, text, old, field_type):
  """The value `text` gives a key whose current value is `old` (declared type `field_type`)."""
  if field_type is bool:
    if str(text).lower() in ("true", "false", "1", "0"):
      return str(text).lower() in ("true", "1")
    raise RSVQAError(f"--config.{key}={text}: expected true or false")
  if field_type is str:  # paths and names stay text, even "2024" or "1e-3"
    unset = text.lower() == "none" and (old is None or _nullable(base_config(), key))
    return None if unset else text
  value = _parse_literal(text)
  if old is None:
    return None if text.lower() == "none" else value
  if isinstance(old, (tuple, list)):
    return type(old)(value if isinstance(value, (tuple, list)) else _items(text))
  if isinstance(old, float) and isinstance(value, int) and not isinstance(value, bool):
    return float(value)
  if type(value) is not type(old):
    raise RSVQAError(f"--config.{key}={text}: expected {describe_type(type(old))}")
  return value


def override(config, key, text):
  """Sets `config.<key>` from its command-line text, checking the key exists and the type fits."""
  parts = key.split(".")
  node = config
  for i, part in enumerate(parts):
    where = ".".join(parts[:i]) or "the config"
    if not isinstance(node, ml_collections.ConfigDict):
      raise RSVQAError(f"--config.{key}: {where} is a value, not a section")
    if part not in node:
      near = difflib.get_close_matches(part, list(node.keys()), n=1)
      hint = f"; did you mean {'.'.join(parts[:i] + near)}?" if near else ""
      raise RSVQAError(f"--config.{key}: no key {part!r} in {where}{hint} (it has: "
                       f"{', '.join(sorted(node.keys()))})")
    if i < len(parts) - 1:
      node = node[part]
  name = parts[-1]
  old = node[name]
  if isinstance(old, ml_collections.ConfigDict):
    raise RSVQAError(f"--config.{key}: is a section, set one of its keys instead")
  value = _value(key, text, old, node.get_type(name))
  if (key in PATH_KEYS or _is_study_checkpoint(key)) and isinstance(value, str):
    # "none" unsets a path whose unset value is "" too (it became the folder ./none); "~/x":
    # the shell left the ~ as it was
    value = "" if value.lower() == "none" else os.path.expanduser(value)
  try:
    node[name] = value
  except TypeError as e:
    raise RSVQAError(f"--config.{key}={text}: {e}") from None


def _is_study_checkpoint(key):
  """study.lm.NAME.checkpoint: a path too, under an entry name of the user's."""
  parts = key.split(".")
  return len(parts) == 4 and parts[:2] == ["study", "lm"] and parts[3] == "checkpoint"


def apply_overrides(config, pairs):
  """Applies `key=value` strings in order; returns the config."""
  if isinstance(pairs, str):  # iterated, it would be read one letter at a time
    raise RSVQAError(f"apply_overrides: pairs={pairs!r} is one string; give a list of "
                     "'key=value' strings")
  for pair in pairs:
    key, sep, text = pair.partition("=")
    if not sep:
      raise RSVQAError(f"--config.{key}: give a value as --config.{key}=VALUE")
    override(config, key, text)
  return config


# The training keys a study sets for each of its runs from its own keys (study/runs.config_for):
# given on a study's command line they were silently replaced.
STUDY_SETS = {
    "seed": "study.seeds", "text.encoder": "study.lm.NAME.encoder",
    "text.frozen": "study.lm_weights", "optim.text_lr": "study.lm.NAME.text_lr",
    "text.word_dim": "study.lm.NAME.word_dim", "text.hidden_dim": "study.lm.NAME.hidden_dim",
    "model.fusion": "study.fusion (or study.table2_rows)",
    "data.synthetic": "study.synthetic", "data.synthetic_variant": "study.variant",
    "data.synthetic_images": "study.images", "data.synthetic_seed": "study.data_seed",
    "data.synthetic_questions_per_image": "study.questions_per_image",
}


def apply_command_line(config, pairs):
  """apply_overrides for a command line's `key=value` pairs, whose keys also win over a study's
  baseline row settings (study.baseline.overrides, applied last to that row's runs): a study
  shortened with --config.train.num_epochs=1 shortens every row. A study.baseline.overrides
  given on the command line itself is kept as given. A training key a study sets per run
  (STUDY_SETS) is refused on a study's command line, naming the study key that sets it."""
  def key(pair):
    return pair.partition("=")[0].strip()
  named = {key(pair) for pair in pairs}
  if "study" in config:
    if "model.blind" in named:
      raise RSVQAError("--config.model.blind: a study trains a reference and a visual-blind "
                       "model of every cell itself")
    for name in sorted(named & set(STUDY_SETS)):
      raise RSVQAError(f"--config.{name}: a study sets it for each run; give "
                       f"{STUDY_SETS[name]} instead")
  apply_overrides(config, pairs)
  if "study" in config and "study.baseline.overrides" not in named:
    baseline = config.study.baseline
    baseline.overrides = tuple(e for e in baseline.overrides
                               if not (isinstance(e, str) and key(e) in named))
  return config
