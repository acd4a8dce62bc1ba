"""Loading `configs/*.py`: a config named as `path.py` or `path.py:arg` (or an installed config's
name), run in isolation, with anything it gets wrong or any key no part of rsvqa-jax reads as one
RSVQAError naming the file."""
import importlib.resources
import importlib.util
import inspect
import logging
import os
import traceback

import ml_collections

from rsvqa_jax.config.defaults import answerability_section, base_config, study_defaults
from rsvqa_jax.errors import RSVQAError

_log = logging.getLogger(__name__)


def config_path(name):
  """The file a config name denotes: the path itself, else the installed configs/ file of that
  name (`configs/hr.py`, `hr.py` and `hr` all find it from any folder after `pip install .`).

  Only a bare name or one under `configs/` falls back to the installed file: a path into another
  folder that does not hold the file (a mistyped `myexp/hr.py`) would otherwise run the installed
  config of the same file name in place of the user's own, silently.
  """
  if os.path.isfile(name):
    _log.debug("config file %s", os.path.abspath(name))
    return name
  base = os.path.basename(name)
  base = base if base.endswith(".py") else base + ".py"
  try:
    packaged = importlib.resources.files("rsvqa_jax.configs") / base
  except ModuleNotFoundError:
    packaged = None
  installed = packaged is not None and packaged.is_file()
  nameable = os.path.normpath(os.path.dirname(name)) in (".", "configs")
  if nameable and installed:  # even beside a folder of that name (a workdir named after it)
    _log.debug("config file %s (the installed config of that name)", packaged)
    return str(packaged)
  if os.path.isdir(name):
    raise RSVQAError(f"{name}: is a folder; give a config file (.py)")
  if nameable:
    raise RSVQAError(f"{name}: config file not found (nor an installed config named {base})")
  raise RSVQAError(f"{name}: config file not found" + (
      f" (the installed config of that name is found as {base} or configs/{base})"
      if installed else ""))


def _split_argument(spec):
  """(file, argument) of `path.py:arg`. A colon can be part of the path (a folder named after a
  time, 12:30): the first split whose left side is an existing file wins, the whole spec first;
  else the first that leaves a .py name (a file not there: the error names it), else the first
  colon (an installed config's name, `lr_table1:arg`)."""
  cuts = [len(spec)] + [i for i, c in enumerate(spec) if c == ":"]
  named = next((c for c in cuts if os.path.isfile(spec[:c])), None)
  named = named if named is not None else next((c for c in cuts if spec[:c].endswith(".py")),
                                               None)
  if named is None:
    name, _, arg = spec.partition(":")
    return name, arg
  return spec[:named], spec[named + 1:]


def load(spec):
  """ConfigDict from `path.py` or `path.py:arg` (arg passed to get_config as a string).

  A config file is code someone edits by hand: anything it gets wrong (a syntax error, a failing
  import, an exception or a value of the wrong type in get_config, a result that is not a
  ConfigDict) is one RSVQAError naming the file and, where known, its line. An RSVQAError the file
  raises on purpose (apply_flags, argument_error) goes through unchanged.
  """
  if not isinstance(spec, (str, os.PathLike)):
    raise RSVQAError(f"config: {spec!r}; give the path of a config file (configs/X.py[:arg])")
  name, arg = _split_argument(os.fspath(spec))
  path = config_path(name)
  if not path.endswith(".py"):  # importlib finds no loader for another suffix
    raise RSVQAError(f"{path}: not a config file: give a Python file (.py) defining get_config()")
  try:
    module_spec = importlib.util.spec_from_file_location(
        "rsvqa_config_" + os.path.splitext(os.path.basename(path))[0], path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    if not hasattr(module, "get_config"):
      raise RSVQAError(f"{path}: defines no get_config()")
    if arg and not _takes_argument(module.get_config):
      raise RSVQAError(f"{path}: takes no argument (given :{arg}); give the file alone")
    config = module.get_config(arg) if arg else module.get_config()
  except RSVQAError:
    raise
  except SystemExit as e:  # would end the command with no word (status 0 for exit(0))
    raise RSVQAError(f"{path}: get_config() called sys.exit({e.code!r}); return a ConfigDict "
                     "instead") from None
  except Exception as e:  # pylint: disable=broad-exception-caught
    raise _failure(path, e) from None
  if not isinstance(config, ml_collections.ConfigDict):
    got = "None" if config is None else f"a {type(config).__name__}"
    raise RSVQAError(f"{path}: get_config() returned {got}, not an "
                     "ml_collections.ConfigDict (start from config.base_config())")
  unknown = unknown_key(config)
  if unknown:
    raise RSVQAError(f"{path}: get_config() sets {unknown}, which no part of rsvqa-jax reads "
                     "(a misspelt key? `rsvqa-jax config` lists the keys)")
  missing = _absent(_template(config), config.to_dict())
  if missing:
    more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
    raise RSVQAError(f"{path}: get_config() leaves out {missing[0]}{more}, which rsvqa-jax reads "
                     "(start from config.base_config() and change what you need)")
  return config


def _takes_argument(get_config):
  """Whether a config file's get_config accepts the `:arg` of its name."""
  try:
    inspect.signature(get_config).bind("arg")
  except (TypeError, ValueError):
    return False
  return True


# Sections whose keys are the config's own to choose: study.lm holds one entry per language
# model, named and sized by the config (lm_entry).
FREE_SECTIONS = ("study.lm",)


def _template(config):
  """The keys a config may set: base_config's, and the study / answerability sections' it has."""
  template = base_config()
  if "study" in config:
    template.study = study_defaults()
  if "answerability" in config:
    template.answerability = answerability_section()
  return template


def unknown_key(config):
  """The first dotted key of a config that no part of rsvqa-jax reads (a misspelt key), or None."""
  return _unknown_key(config, _template(config))


def leaves(tree, prefix=""):
  """(dotted key, value) of every leaf of a config tree, in order; an empty section (a study
  config's study.lm before its entries) is a leaf too."""
  for name, value in tree.items():
    if isinstance(value, ml_collections.ConfigDict) and len(value):
      yield from leaves(value, f"{prefix}{name}.")
    else:
      yield f"{prefix}{name}", value


def sections():
  """The names of base_config's sections (data, image, ...): every recorded config has each."""
  return [k for k, v in base_config().items() if isinstance(v, ml_collections.ConfigDict)]


def defaulted_keys(recorded):
  """The dotted keys of base_config that a recorded config dict lacks, in order: a workdir of an
  older rsvqa-jax takes their defaults, which the reader says rather than doing so in silence."""
  return _absent(base_config(), recorded)


def _absent(template, values, prefix=""):
  """The dotted keys of `template` that the dict `values` lacks, in order."""
  out = []
  for key, default in template.items():
    name = f"{prefix}{key}"
    if name in FREE_SECTIONS:
      continue
    if isinstance(default, ml_collections.ConfigDict):
      inner = values.get(key)
      out += _absent(default, inner if isinstance(inner, dict) else {}, f"{name}.")
    elif key not in values:
      out.append(name)
  return out


def _unknown_key(config, template, prefix=""):
  """The first dotted key of `config` that `template` lacks (a silent typo: c.trian = 1), or
  None."""
  for key in config.keys():
    name = f"{prefix}{key}"
    if key not in template:
      return name
    if (isinstance(config[key], ml_collections.ConfigDict) and name not in FREE_SECTIONS
        and isinstance(template[key], ml_collections.ConfigDict)):
      found = _unknown_key(config[key], template[key], f"{name}.")
      if found:
        return found
  return None


def _failure(path, error):
  """RSVQAError 'PATH line N: Type: message' of an exception raised while a config file ran; N is
  the innermost line of the file on the way (a SyntaxError in the file: its own line)."""
  same = lambda f: f is not None and os.path.abspath(f) == os.path.abspath(path)
  lines = [f.lineno for f in traceback.extract_tb(error.__traceback__) if same(f.filename)]
  message = str(error)
  if isinstance(error, SyntaxError) and same(error.filename):
    lines, message = [error.lineno], error.msg
  where = f" line {lines[-1]}" if lines and lines[-1] else ""
  return RSVQAError(f"{path}{where}: {type(error).__name__}: {' '.join(message.split())}")
