"""One source of config defaults: every key, documented or not, can be overridden on every config.

The keys come from base_config() (every key a run reads) and from the documentation: each
`--config.KEY=VALUE` in the README and the docs pages, and each `section.key=value` in a config
file's docstring must name a key that exists, on every config file (study keys on the study
configs), and take its documented value. `rsvqa-jax config` / `--print-config` show the effective config.
"""
import ast
import glob
import json
import os
import pathlib
import re

import pytest

from rsvqa_jax import cli
from rsvqa_jax import config as config_lib
from rsvqa_jax.errors import RSVQAError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIGS = sorted(f for f in os.listdir(os.path.join(ROOT, "configs"))
                 if f.endswith(".py") and not f.startswith("_"))
SECTIONS = ("seed", "data", "image", "text", "model", "optim", "train", "study")
_DOC_KEY = re.compile(r"(?:--config\.|\b(?=(?:" + "|".join(SECTIONS) + r")\.))"
                      r"([a-z_]+(?:\.[a-z_*0-9]+)*)=([^\s,`\\)]*)")


def _text(value):
  """The command-line text of a config value (what a user would type to set it again)."""
  if isinstance(value, bool):
    return str(value).lower()
  if value is None:
    return "none"
  return value if isinstance(value, str) else repr(value)


def documented_keys():
  """(key, value text) pairs from the README, the docs pages and the config files' docstrings."""
  pages = [os.path.join(ROOT, "README.md")] + glob.glob(os.path.join(ROOT, "docs", "**", "*.md"),
                                                        recursive=True)
  texts = [pathlib.Path(page).read_text(encoding="utf-8") for page in pages]
  for name in CONFIGS:
    with open(os.path.join(ROOT, "configs", name), encoding="utf-8") as f:
      texts.append(ast.get_docstring(ast.parse(f.read())) or "")
  found = {}
  for text in texts:
    for key, value in _DOC_KEY.findall(text):
      found.setdefault(key, value)
  return found


def _configs():
  return [(name, config_lib.load(os.path.join(ROOT, "configs", name))) for name in CONFIGS]


def _expand(key, config):
  """A documented key with wildcards (study.lm.*.text_lr) as the keys it names in `config`."""
  if "*" not in key:
    return [key]
  head, tail = key.split(".*.", 1)
  node = config
  for part in head.split("."):
    node = node[part]
  return [f"{head}.{entry}.{tail}" for entry in node.keys()]


def test_the_documentation_names_keys():
  keys = documented_keys()
  for key in ("data.root", "image.checkpoint", "text.checkpoint", "train.compute_dtype",
              "study.synthetic", "seed"):
    assert key in keys, key  # the pattern reads what the docs show


@pytest.mark.parametrize("name,config", _configs(), ids=CONFIGS)
def test_every_base_key_overrides_on_every_config(name, config):
  base = dict(config_lib.leaves(config_lib.base_config()))
  for key, default in base.items():
    config_lib.override(config, key, _text(default))
    assert config_lib.to_dict(config) is not None
  for key, value in config_lib.leaves(config):
    if key.split(".")[0] in base or key in base:
      assert key in base, f"{name}: {key} is not a key of base_config()"


@pytest.mark.parametrize("name,config", _configs(), ids=CONFIGS)
def test_every_documented_key_overrides_on_every_config(name, config):
  for key, value in documented_keys().items():
    if key.startswith("study.") and "study" not in config:
      continue
    for full in _expand(key, config):
      old = dict(config_lib.leaves(config))[full]
      placeholder = not value or "$" in value or "..." in value  # e.g. --config.seed=$s
      config_lib.override(config, full, _text(old) if placeholder else value)
      got = dict(config_lib.leaves(config))[full]
      want = old if placeholder else _parsed(value, old)
      assert got == want and type(got) is type(want), (name, full, value, got)


def _parsed(text, old):
  """The value a documented `text` gives a key now holding `old`, read here by hand: true / false
  for a flag, an integer or a number for one, for a list its comma-separated items (digits read
  as integers, words kept as text), else the text itself (a path, a name; an unset path too)."""
  if isinstance(old, bool):
    return {"true": True, "false": False}[text.lower()]
  if isinstance(old, int):
    return int(text)
  if isinstance(old, float):
    return float(text)
  if isinstance(old, tuple):
    items = [item.strip() for item in text.strip("()[]").split(",") if item.strip()]
    return tuple(int(item) if item.isdigit() else item for item in items)
  return text


@pytest.mark.parametrize("text,expected", [
    ("skipthoughts,", ("skipthoughts",)), ("(skipthoughts)", ("skipthoughts",)),
    ("skipthoughts, distilbert", ("skipthoughts", "distilbert")),
    ("('skipthoughts',)", ("skipthoughts",)), ('["bert"]', ("bert",)), ("()", ())])
def test_a_list_of_words_needs_no_quotes(text, expected):
  """`=skipthoughts,` was refused as "expected a list" while `train.length_buckets=8,16` passed."""
  c = config_lib.load(os.path.join(ROOT, "configs", "study_synthetic.py"))
  config_lib.override(c, "study.language_models", text)
  assert c.study.language_models == expected
  config_lib.override(c, "train.length_buckets", "[8, 16]")
  assert c.train.length_buckets == (8, 16)


def test_issue_examples_and_numeric_looking_paths():
  c = config_lib.load(os.path.join(ROOT, "configs", "lr_table1.py") + ":distilbert,mutan,finetuned")
  config_lib.apply_overrides(c, ["image.batch_size=64", "image.image_size=224",
                                 "data.root=2024", "text.checkpoint=1e-3", "image.checkpoint=007"])
  assert (c.image.batch_size, c.image.image_size) == (64, 224)
  assert (c.data.root, c.text.checkpoint, c.image.checkpoint) == ("2024", "1e-3", "007")
  config_lib.override(c, "data.root", "none")
  assert c.data.root is None
  # A path whose unset value is "": "none" became the folder ./none (pretrained into it).
  for key in ("image.checkpoint", "image.pretrained_dir"):
    config_lib.override(c, key, "None")
  assert c.image.checkpoint == c.image.pretrained_dir == ""
  c.study = config_lib.study_defaults()
  c.study.lm.st = config_lib.lm_entry("skipthoughts", "ST", 1e-4, checkpoint="/m/st")
  config_lib.override(c, "study.lm.st.checkpoint", "none")
  assert c.study.lm.st.checkpoint == ""
  with pytest.raises(RSVQAError, match="image.batch_size=big: expected an integer$"):
    config_lib.override(c, "image.batch_size", "big")


def test_a_tilde_in_a_path_key_is_the_home_folder(monkeypatch):
  """`--config.data.cache_dir=~/c` is one shell word: its ~ reached the run, which wrote ./~/c."""
  monkeypatch.setenv("HOME", "/home/someone")
  c = config_lib.base_config()
  c.study, c.answerability = config_lib.study_defaults(), config_lib.answerability_section()
  config_lib.apply_overrides(c, [f"{key}=~/x" for key in config_lib.PATH_KEYS] +
                             ["data.train_split=~x"])
  assert [c[k.split(".")[0]][k.split(".")[1]] for k in config_lib.PATH_KEYS] == [
      "/home/someone/x"] * len(config_lib.PATH_KEYS)
  assert c.data.train_split == "~x"  # no path: kept as written
  c.study.lm.mine = config_lib.lm_entry("bert", "a BERT", 1e-5, checkpoint="")
  config_lib.apply_overrides(c, ["study.lm.mine.checkpoint=~/bert", "study.lm.mine.label=~b"])
  assert (c.study.lm.mine.checkpoint, c.study.lm.mine.label) == ("/home/someone/bert", "~b")


def test_print_config_shows_the_effective_config_and_runs_nothing(tmp_path, capsys):
  spec = os.path.join(ROOT, "configs", "synthetic_tiny.py")
  workdir = tmp_path / "w"
  assert cli.main(["train", "--config", spec, "--workdir", str(workdir), "--print-config",
                   "--config.image.batch_size=7", "--config.data.root=2024",
                   "--config.data.synthetic=false"]) == 0
  shown = json.loads(capsys.readouterr().out)
  assert shown["image"]["batch_size"] == 7 and shown["data"]["root"] == "2024"
  assert shown["image"]["pretrain"]["epochs"] == config_lib.pretrain_section().epochs
  assert not workdir.exists()
  assert cli.main(["config", "--config", spec, "--config.train.num_epochs=2"]) == 0
  assert json.loads(capsys.readouterr().out)["train"]["num_epochs"] == 2
  assert cli.main(["config", "--config", spec, "--config.image.nosuch=1"]) == 2
  assert "no key 'nosuch' in image" in capsys.readouterr().err


@pytest.mark.parametrize("override,message", [
    ("model.mutan_rank=0", "config model.mutan_rank=0: must be positive"),
    ("text.dropout=-0.1", "config text.dropout=-0.1: must be a number in [0, 1)"),
    ("optim.b2=1.0", "config optim.b2=1.0: must be a number in [0, 1)"),
    ("train.stop_after_steps=-1", "config train.stop_after_steps=-1: must be a number >= 0"),
    ("optim.lr=1e999", "config optim.lr=inf: must be finite (a number >= 0)"),
    ("train.divergence_factor=-1.0", "config train.divergence_factor=-1.0: must be a number >= 0"),
    # Unbounded, these were a TypeError in the model build (past 2**63), a 256 GB request to XLA
    # (10**9) or a ValueError after training (an eval batch of 10**20).
    ("model.hidden_dim=99999999999999999999",
     "config model.hidden_dim=99999999999999999999: must be at most 8192"),
    ("model.classifier_dim=1000000000", "config model.classifier_dim=1000000000: must be at most "
     "8192"),
    ("train.eval_batch_size=65537", "config train.eval_batch_size=65537: must be at most 65536"),
    ("image.batch_size=1025", "config image.batch_size=1025: must be at most 1024"),
    ("image.width=257", "config image.width=257: must be at most 256"),
    ("model.mutan_rank=65", "config model.mutan_rank=65: must be at most 64"),
    ("image.pretrain.image_size=4097",
     "config image.pretrain.image_size=4097: must be at most 4096"),
])
def test_numbers_outside_their_interval_are_one_line(override, message):
  c = config_lib.base_config()
  config_lib.check(c)  # the defaults lie inside
  config_lib.apply_overrides(c, [override])
  with pytest.raises(RSVQAError) as refused:
    config_lib.check(c)
  assert str(refused.value) == message


def test_the_divergence_factor_can_be_switched_off():
  """0 is its documented 'off' (train/loop.Divergence); inf, its one other way, is refused."""
  c = config_lib.base_config()
  config_lib.apply_overrides(c, ["train.divergence_factor=0"])
  config_lib.check(c)


def test_every_ranged_key_exists():
  """A renamed key would leave its interval checking nothing (the study and answerability keys
  in their sections, which only the configs that need them have); a maximum is only checked on
  a key whose interval holds a number."""
  assert set(config_lib.MAXIMA) <= set(config_lib.RANGES)
  c = config_lib.base_config()
  c.study = config_lib.study_defaults()
  c.answerability = config_lib.answerability_section()
  for key in list(config_lib.RANGES) + list(config_lib.NON_EMPTY):
    section, _, name = key.rpartition(".")
    node = c
    for part in filter(None, section.split(".")):
      node = node[part]
    assert name in node, key


def test_a_text_checkpoint_naming_no_folder_is_refused_before_any_stage(tmp_path):
  """It was refused only once the image features were computed, naming a file inside it (on
  synthetic data too)."""
  c = config_lib.load(os.path.join(ROOT, "configs", "synthetic_tiny.py"))
  c.text.checkpoint = str(tmp_path)
  config_lib.check_weights(c)  # a folder: the files in it are the loader's to check
  (tmp_path / "f").write_text("")
  for name, why in (("none", "does not exist"), ("f", "is a file, not a folder")):
    c.text.checkpoint = str(tmp_path / name)
    with pytest.raises(RSVQAError) as refused:
      config_lib.check_weights(c)
    assert str(refused.value) == (f"config text.checkpoint={tmp_path / name}: {why}; give the "
                                  "folder of the skipthoughts weights")


def test_skipthoughts_settings_of_a_bert_family_run_are_refused_before_any_stage():
  """Both were read only where the encoder is loaded, after a run computed its image features."""
  c = config_lib.load(os.path.join(ROOT, "configs", "synthetic_tiny.py"))
  c.text.encoder = "distilbert"
  with pytest.raises(RSVQAError, match=r"^config text\.checkpoint=None: text\.encoder="
                                       r"distilbert needs a local Hugging Face folder"):
    config_lib.check_weights(c)
  c.text.strip_question_mark = True
  with pytest.raises(RSVQAError, match=r"^config text\.strip_question_mark=true: the distilbert "
                                       "tokenizer keeps its own punctuation"):
    config_lib.check_weights(c)


_FROM = "from rsvqa_jax import config\n"


@pytest.mark.parametrize("name,text,message", [
    ("c.py", "def get_config(:\n", "c.py line 1: SyntaxError: "),
    ("c.py", 'X = "\xff"\n', "c.py line 1: SyntaxError: (unicode error) 'utf-8' codec"),
    ("c.py", "def get_config():\n  x = 1\n  raise ValueError('boom')\n",
     "c.py line 3: ValueError: boom"),
    ("c.py", "import no_such_module_here\n",
     "c.py line 1: ModuleNotFoundError: No module named 'no_such_module_here'"),
    ("c.json", "{}", "c.json: not a config file: give a Python file (.py)"),
    ("c.py", "def get_config():\n  return {}\n", "c.py: get_config() returned a dict, not an"),
    ("c.py", "def get_config():\n  pass\n", "c.py: get_config() returned None, not an"),
    ("c.py", _FROM + "def get_config():\n  c = config.base_config()\n  c.train.batch_size = 'big'\n"
     "  return c\n", "c.py line 4: TypeError: Could not override field 'batch_size'"),
    ("c.py", "X = 1\n", "c.py: defines no get_config()"),
    ("c.py", _FROM + "def get_config():\n  c = config.base_config()\n  c.trian = 1\n  return c\n",
     "c.py: get_config() sets trian, which no part of rsvqa-jax reads"),
    ("c.py", _FROM + "def get_config():\n  c = config.base_config()\n  c.data.foo = 3\n"
     "  return c\n", "c.py: get_config() sets data.foo, which no part of rsvqa-jax reads"),
    ("c.py", _FROM + "def get_config():\n  c = config.base_config()\n  c.study = "
     "config.study_defaults()\n  c.study.lm.mine = config.lm_entry('skipthoughts', 'x', 0.1, "
     "word_dim=8)\n  c.study.reading.closer = 1.0\n  return c\n",
     "c.py: get_config() sets study.reading.closer, which"),
    # A key deleted was accepted, and training failed after its first stages (AttributeError).
    ("c.py", _FROM + "def get_config():\n  c = config.base_config()\n  del c.train.batch_size\n"
     "  return c\n", "c.py: get_config() leaves out train.batch_size, which rsvqa-jax reads "
     "(start from config.base_config()"),
    ("c.py", "import ml_collections\ndef get_config():\n  return ml_collections.ConfigDict()\n",
     "c.py: get_config() leaves out data.augment_variants (and "),
    ("c.py", "import sys\ndef get_config():\n  sys.exit(0)\n",
     "c.py: get_config() called sys.exit(0); return a ConfigDict instead"),
], ids=["syntax", "not-utf8", "raises", "import", "not-py", "dict", "none", "wrong-type",
        "no-get-config", "typo", "unknown-in-section", "unknown-in-study-not-lm", "key-deleted",
        "empty", "exits"])
def test_a_broken_config_file_is_one_line_naming_it(tmp_path, name, text, message):
  path = tmp_path / name
  path.write_bytes(text.encode("latin-1"))
  with pytest.raises(RSVQAError) as refused:
    config_lib.load(str(path))
  assert str(refused.value).startswith(f"{path}{message[len(name):]}"), str(refused.value)
  assert "\n" not in str(refused.value)


def test_a_config_files_own_error_goes_through_unchanged(tmp_path, capsys):
  path = tmp_path / "c.py"
  path.write_text(_FROM + "def get_config(arg=''):\n"
                  "  return config.apply_flags(config.base_config(), arg, 'c.py')\n")
  with pytest.raises(RSVQAError, match=r"^c\.py:bad: unknown flag 'bad' \(blind, frozen\)$"):
    config_lib.load(f"{path}:bad")
  assert cli.main(["config", "--config", str(tmp_path / "x.json")]) == 2  # missing: as before
  (tmp_path / "plain.py").write_text(_FROM + "def get_config():\n  return config.base_config()\n")
  with pytest.raises(RSVQAError, match=r"plain\.py: takes no argument \(given :blind\); give the "
                     "file alone$"):
    config_lib.load(f"{tmp_path / 'plain.py'}:blind")
  with pytest.raises(RSVQAError, match=r"^configs/answerability_study\.py:foo: unknown flag 'foo' "
                     r"\(balanced, adv_all, quick: those of configs/study_synthetic\.py\)$"):
    config_lib.load(os.path.join(ROOT, "configs", "answerability_study.py:foo"))
  (tmp_path / "d.py").write_text("def get_config(:\n")
  assert cli.main(["config", "--config", str(tmp_path / "d.py")]) == 2
  assert capsys.readouterr().err.splitlines()[-1] == (
      f"rsvqa-jax config: error: {tmp_path / 'd.py'} line 1: SyntaxError: invalid syntax")


@pytest.mark.parametrize("override,message", [
    ("train.length_buckets=[1,'a']", "(1, 'a'): 'a' is a str; must be a positive integer"),
    ("train.length_buckets=[]", "(): give one token width at least"),
    ("train.length_buckets=[0]", "(0,): 0 must be a positive integer"),
    ("train.length_buckets=[-5, 8]", "(-5, 8): -5 must be a positive integer"),
    ("train.length_buckets=[8, True]", "(8, True): True is a bool; must be a positive integer"),
    ("train.length_buckets=[8, 99999999999999999999]",
     "(8, 99999999999999999999): 99999999999999999999 must be at most 512"),
    ("seed=-1", "-1: must be an integer in [0, 2**32)"),
    ("seed=99999999999999999999999", "99999999999999999999999: must be an integer in [0, 2**32)"),
    ("data.synthetic_seed=4294967296", "4294967296: must be an integer in [0, 2**32)"),
    ("study.data_seed=-1", "-1: must be an integer in [0, 2**32)"),
    ("study.seeds=(0, -1)", "(0, -1): -1 must be an integer in [0, 2**32)"),
    ("study.shortcuts.seeds=(4294967296,)", "(4294967296,): 4294967296 must be an integer in"),
])
def test_bad_buckets_and_seeds_are_one_line(override, message):
  c = config_lib.base_config()
  c.study = config_lib.study_defaults()
  config_lib.apply_overrides(c, ["seed=4294967295", "train.length_buckets=(16, 8)",
                                 "study.seeds=(0, 4294967295)"])
  config_lib.check(c)  # the extremes inside, and buckets in any order
  config_lib.apply_overrides(c, [override])
  with pytest.raises(RSVQAError) as refused:
    config_lib.check(c)
  assert str(refused.value).startswith(f"config {override.split('=')[0]}={message}")


@pytest.mark.parametrize("config_file,synthetic_key", [
    ("synthetic_tiny.py", "data.synthetic"), ("study_synthetic.py", "study.synthetic")])
def test_a_dataset_folder_beside_a_synthetic_setting_is_refused(tmp_path, capsys, config_file,
                                                                 synthetic_key):
  """The run would generate its synthetic set and never read the folder the user named."""
  path = os.path.join(ROOT, "configs", config_file)
  c = config_lib.load(path)
  config_lib.apply_overrides(c, [f"data.root={tmp_path}"])
  with pytest.raises(RSVQAError, match=(
      rf"^config data.root={tmp_path} is given but {synthetic_key} is true, so the run would "
      rf"generate a synthetic dataset and never read {tmp_path}: add "
      rf"--config.{synthetic_key}=false to use the folder")):
    config_lib.check(c)
  config_lib.apply_overrides(c, [f"{synthetic_key}=false"])
  config_lib.check(c)  # the folder is what the run reads now
  command = "study" if synthetic_key.startswith("study") else "train"
  assert cli.main([command, "--config", path, "--workdir", str(tmp_path / "w"),
                   f"--config.data.root={tmp_path}"]) == 2
  assert f"never read {tmp_path}" in capsys.readouterr().err
  assert not (tmp_path / "w").exists()


def test_the_config_offers_the_augment_variants_the_cache_computes():
  from rsvqa_jax.features import pixels  # pylint: disable=g-import-not-at-top
  assert config_lib.AUGMENT_VARIANTS == pixels.VARIANTS


def test_the_config_bounds_questions_per_image_as_the_generator_does():
  from rsvqa_jax.data import synthetic  # pylint: disable=g-import-not-at-top
  _, high, _, _, _ = config_lib.RANGES["data.synthetic_questions_per_image"]
  assert high - 1 == synthetic.MAX_QUESTIONS_PER_IMAGE


def test_the_config_offers_the_select_metrics_the_scores_have():
  from rsvqa_jax.bias import answerability  # pylint: disable=g-import-not-at-top
  assert config_lib.SELECT_METRICS == answerability.RANKING_KEYS + answerability.CLASS_KEYS


def test_python_callers_misusing_the_config_api_are_told_what_to_give():
  """From Python, one string of overrides was read a letter at a time ("--config.t: give a
  value"), and load(None) and from_dict([1]) were AttributeErrors."""
  with pytest.raises(RSVQAError, match="is one string; give a list of 'key=value' strings"):
    config_lib.apply_overrides(config_lib.base_config(), "train.batch_size=3")
  with pytest.raises(RSVQAError, match=r"config: None; give the path of a config file"):
    config_lib.load(None)
  with pytest.raises(RSVQAError, match="from_dict: expected a dict of config sections, got list"):
    config_lib.from_dict([1])
  import pathlib  # pylint: disable=g-import-not-at-top
  path = pathlib.Path(os.path.dirname(__file__)).parent / "configs" / "synthetic_tiny.py"
  assert config_lib.load(path).data.synthetic_images == config_lib.load(str(path)).data.synthetic_images


def test_a_colon_in_the_config_path_is_part_of_the_path(tmp_path):
  """`exp_12:30/tiny.py` read as file `exp_12` with argument `30/tiny.py` (config file not
  found, naming the wrong file); the argument after the file still splits off."""
  folder = tmp_path / "exp_12:30"
  folder.mkdir()
  path = folder / "mine.py"
  path.write_text("from rsvqa_jax import config\n\ndef get_config(arg=None):\n"
                  "  c = config.base_config()\n  c.seed = len(arg or '')\n  return c\n")
  assert config_lib.load(str(path)).seed == 0
  assert config_lib.load(f"{path}:abc").seed == 3
  assert config_lib.load(f"{path}:a:b").seed == 3  # the argument may hold a colon itself
  assert config_lib.load("lr_table1:skipthoughts,mult,frozen").text.encoder == "skipthoughts"
  with pytest.raises(RSVQAError, match=r"exp_12:30/gone.py: config file not found"):
    config_lib.load(str(folder / "gone.py"))
