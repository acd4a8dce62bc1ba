"""Keys set where their mode reads nothing (config/unread.py): each was recorded in config.json as
if it applied, without a word."""
import argparse
import itertools
import json
import logging
import os

import pytest

from rsvqa_jax import cli
from rsvqa_jax import config as config_lib
from rsvqa_jax.commands import features
from rsvqa_jax.errors import RSVQAError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = os.path.join(ROOT, "configs", "synthetic_tiny.py")
CELL = "configs/lr_table1.py:distilbert,mult,finetuned"
FROZEN_CELL = "configs/lr_table1.py:distilbert,mult,frozen"
SKIPTHOUGHTS = "configs/lr_table1.py:skipthoughts,mult,finetuned"
SMALL = "configs/synthetic_small.py"  # image.arch=synthetic_resnet
ANSWERABILITY = "configs/answerability_synthetic.py"
STUDY = "configs/study_synthetic.py"
REAL_STUDY = "configs/study_paper.py"
CACHE_OFF = ("; with text.frozen=true it only turns the question-vector cache off "
             "(text.cache_questions), so the encoder runs at every step with its checkpoint's "
             "dropout")
SGD = "optim.name=sgd is plain SGD (optim.b1, optim.b2 and optim.eps are Adam's)"
NOT_PRETRAINED = ("image.arch=resnet152 is not pretrained here (image.pretrain and "
                  "image.pretrained_dir are synthetic_resnet's)")
RESNET_FILE = ("image.checkpoint=/m/r.pth gives the ResNet's weights (image.width and image.seed "
               "shape random-init ones)")
GENERATED = "study.synthetic=false reads the dataset in data.root instead of generating one"
TWIN = "study.synthetic=false trains no balanced twin (a generated dataset)"
ANSWERABILITY_RUN = "an answerability run (rsvqa-jax answerability train)"

# (config, overrides, the key's message, refused): one case per rule of UNREAD_RULES, in order.
CASES = [
    (FROZEN_CELL, ["text.dropout=0.5"], "config text.dropout=0.5 is not read: text.encoder="
     "distilbert takes its dropout from its checkpoint's config.json" + CACHE_OFF, False),
    (CELL, ["text.dropout=0.5"], "config text.dropout=0.5 is not read: text.encoder=distilbert "
     "takes its dropout from its checkpoint's config.json", False),
    (FROZEN_CELL, ["text.bayesian=true"], "config text.bayesian=true is not read: text.encoder="
     "distilbert has no variational dropout (a Skip-thoughts option)" + CACHE_OFF, False),
    (CELL, ["text.bayesian=true"], "config text.bayesian=true is not read: text.encoder="
     "distilbert has no variational dropout (a Skip-thoughts option)", False),
    (CELL, ["text.word_dim=32"], "config text.word_dim=32 is not read: text.encoder=distilbert "
     "takes its sizes from its checkpoint's config.json", False),
    (CELL, ["text.hidden_dim=64"], "config text.hidden_dim=64 is not read: text.encoder="
     "distilbert takes its sizes from its checkpoint's config.json", False),
    (SKIPTHOUGHTS, ["text.checkpoint=/m/st", "text.word_dim=32"], "config text.word_dim=32 is "
     "not read: text.checkpoint=/m/st gives the Skip-thoughts sizes (text.word_dim and "
     "text.hidden_dim size a random-init encoder)", False),
    (SKIPTHOUGHTS, ["text.checkpoint=/m/st", "text.hidden_dim=64"], "config text.hidden_dim=64 "
     "is not read: text.checkpoint=/m/st gives the Skip-thoughts sizes (text.word_dim and "
     "text.hidden_dim size a random-init encoder)", False),
    (TINY, ["data.name=hr"], "config data.name=hr is not read: data.synthetic=true generates the "
     "layout of data.synthetic_variant; set it instead", False),
    (STUDY, ["data.name=hr"], "config data.name=hr is not read: study.synthetic=true generates "
     "the layout of study.variant; set it instead", False),
    (SMALL, ["image.width=8"], "config image.width=8 is not read: image.arch=synthetic_resnet is "
     "sized by image.pretrain.width", False),
    (SMALL, ["image.seed=3"], "config image.seed=3 is not read: image.arch=synthetic_resnet draws "
     "its weights when pretrained (image.pretrain.seed)", False),
    (SMALL, ["image.checkpoint=random"], "config image.checkpoint=random is not read: image.arch="
     "synthetic_resnet reads the weights it was pretrained to (image.pretrained_dir)", False),
    (CELL, ["image.checkpoint=/m/r.pth", "image.width=8"],
     f"config image.width=8 is not read: {RESNET_FILE}", False),
    (CELL, ["image.checkpoint=/m/r.pth", "image.seed=3"],
     f"config image.seed=3 is not read: {RESNET_FILE}", False),
    (CELL, ["image.pretrain.epochs=3"], f"config image.pretrain.epochs=3 is not read: "
     f"{NOT_PRETRAINED}", False),
    (CELL, ["image.pretrained_dir=/p"], f"config image.pretrained_dir=/p is not read: "
     f"{NOT_PRETRAINED}", False),
    (FROZEN_CELL, ["optim.text_lr=0.001"], "config optim.text_lr=0.001 is not read: "
     "text.frozen=true trains no language model", False),
    (CELL, ["optim.name=sgd", "optim.b1=0.5"], f"config optim.b1=0.5 is not read: {SGD}", False),
    (CELL, ["optim.name=sgd", "optim.b2=0.5"], f"config optim.b2=0.5 is not read: {SGD}", False),
    (CELL, ["optim.name=sgd", "optim.eps=1e-6"], f"config optim.eps=1e-06 is not read: {SGD}",
     False),
    (CELL, ["model.mutan_rank=3"], "config model.mutan_rank=3 is not read: model.fusion=mult "
     "builds no MUTAN", False),
    (CELL, ["model.mutan_normalize=true"], "config model.mutan_normalize=true is not read: "
     "model.fusion=mult builds no MUTAN", False),
    (ANSWERABILITY, ["train.batch_size=32"], "config train.batch_size=32 is not read: "
     "answerability.batch_pools=16 sets an answerability run's batches (pools of "
     "answerability.pool_size pairs); set it instead", True),
    (ANSWERABILITY, ["data.augment_variants=hflip"], "config data.augment_variants=('hflip',) is "
     f"not read: {ANSWERABILITY_RUN} never augments its images; set data.augment_variants=()",
     True),
    (ANSWERABILITY, ["answerability.study.num_epochs=3"], "config answerability.study.num_epochs="
     f"3 is not read: {ANSWERABILITY_RUN} trains one head; the study stage reads "
     "answerability.study (rsvqa-jax answerability study, with a study config)", False),
    (REAL_STUDY, ["study.shortcuts.enabled=true"], "config study.shortcuts.enabled=true is not "
     "read: study.synthetic=false reads a real dataset, and the shortcuts stage plants its "
     "shortcut in a generated one: the study skips it", False),
    (REAL_STUDY, ["study.grounding.enabled=true"], "config study.grounding.enabled=true is not "
     "read: study.synthetic=false reads a real dataset, and the grounding stage scores against a "
     "generated one's groundings: the study skips it", False),
    (REAL_STUDY, ["study.balanced_data=true"], "config study.balanced_data=true is not read: "
     "study.synthetic=false reads the dataset in data.root as it is (only a generated one is "
     "balanced); set study.balanced_data=false", True),
    (REAL_STUDY, ["study.variant=hr"], f"config study.variant=hr is not read: {GENERATED}", False),
    (REAL_STUDY, ["study.images=400"], f"config study.images=400 is not read: {GENERATED}", False),
    (REAL_STUDY, ["study.questions_per_image=20"], "config study.questions_per_image=20 is not "
     f"read: {GENERATED}", False),
    (REAL_STUDY, ["study.data_seed=3"], f"config study.data_seed=3 is not read: {GENERATED}",
     False),
    (REAL_STUDY, ["study.prior_strength=0.5"], "config study.prior_strength=0.5 is not read: "
     f"{GENERATED}", False),
    (REAL_STUDY, ["study.balanced.images=400"], "config study.balanced.images=400 is not read: "
     f"{TWIN}", False),
    (REAL_STUDY, ["study.balanced.questions_per_image=12"], "config study.balanced."
     f"questions_per_image=12 is not read: {TWIN}", False),
    (REAL_STUDY, ["study.balanced.language_model=distilbert"], "config study.balanced."
     f"language_model=distilbert is not read: {TWIN}", False),
    (REAL_STUDY, ["study.balanced.lm_weights=frozen"], "config study.balanced.lm_weights=frozen "
     f"is not read: {TWIN}", False),
    (REAL_STUDY, ["study.balanced.seeds=(1,)"], f"config study.balanced.seeds=(1,) is not read: "
     f"{TWIN}", False),
]


def _unread(spec, overrides, section=None):
  config = config_lib.apply_command_line(config_lib.load(os.path.join(ROOT, spec)), overrides)
  return config_lib.unread(config, section, named=[o.partition("=")[0] for o in overrides])


@pytest.mark.parametrize("spec,overrides,message,refused", CASES,
                         ids=[m.split(" is not")[0] for _, _, m, _ in CASES])
def test_each_rule_names_the_key_its_value_and_the_key_that_makes_it_unread(spec, overrides,
                                                                            message, refused):
  assert [(h.message, h.refuse) for h in _unread(spec, overrides)] == [(message, refused)]


def test_every_rule_has_its_case():
  for rule in config_lib.UNREAD_RULES:
    assert any(m.startswith(f"config {rule.key}") and m.endswith(rule.why) for _, _, m, _ in
               CASES), rule


@pytest.fixture
def propagating(monkeypatch):
  """rsvqa_jax's records reach caplog's root handler (cli.main's handler stops them), set
  before the test's call phase: pytest >= 9.2 also hooks caplog onto every logger that does
  not propagate when the call phase starts, and would then see each record twice."""
  monkeypatch.setattr(logging.getLogger("rsvqa_jax"), "propagate", True)


def test_a_refusal_comes_before_any_warning_and_warnings_are_logged(propagating, caplog):
  config = config_lib.load(os.path.join(ROOT, ANSWERABILITY))
  config_lib.apply_overrides(config, ["answerability.study.enabled=true"])
  config_lib.check_unread(config)
  assert [r.getMessage() for r in caplog.records] == [
      "config answerability.study.enabled=true is not read: an answerability run (rsvqa-jax "
      "answerability train) trains one head; the study stage reads answerability.study "
      "(rsvqa-jax answerability study, with a study config)"]
  config_lib.apply_overrides(config, ["train.batch_size=32"])
  with pytest.raises(RSVQAError, match=r"^config train\.batch_size=32 is not read"):
    config_lib.check_unread(config)


@pytest.mark.parametrize("spec,overrides", [
    (CELL, ["model.fusion=mutan", "model.mutan_rank=3"]),  # read where its mode reads it
    (FROZEN_CELL, ["optim.text_lr=0"]),  # agrees with text.frozen=true
    (SKIPTHOUGHTS, ["text.checkpoint=random", "text.word_dim=32", "text.dropout=0.5"]),
    (TINY, ["image.width=16", "image.seed=3"]),  # a random-init ResNet-18
    (CELL, ["text.word_dim=620", "optim.name=sgd", "optim.b1=0.9"]),  # the defaults
    (STUDY, ["study.images=30"]),  # a synthetic study generates its dataset
    # a study sets these per run, from its language model entries and weights
    (STUDY, ["text.dropout=0.5", "text.bayesian=true"]),
    (REAL_STUDY, ["study.balanced.enabled=false"]),  # the default true is no one's choice
])
def test_a_key_its_mode_reads_or_a_default_is_not_reported(spec, overrides):
  assert _unread(spec, overrides) == []


def test_a_study_baseline_row_setting_is_its_runs_question():
  """A mode key the baseline row sets (study.baseline.overrides) differs in that row's runs."""
  assert _unread(REAL_STUDY, ["optim.name=sgd", "optim.b1=0.5"])[0].key == "optim.b1"
  assert _unread(REAL_STUDY, ["study.baseline.overrides=(optim.name=adam)", "optim.name=sgd",
                              "optim.b1=0.5"]) == []


def _cells():
  return [f"{lm},{fusion},{weights}" for lm in config_lib.LANGUAGE_MODELS
          for fusion in config_lib.FUSIONS for weights in ("frozen", "finetuned")]


def _flags(*flags):
  return [",".join(c) for r in range(len(flags) + 1) for c in itertools.combinations(flags, r)]


# Every argument each shipped config's get_config documents.
SHIPPED = {
    "answerability_study.py": _flags("balanced", "adv_all", "quick"),
    "answerability_synthetic.py": [",".join(filter(None, (lm, f))) for lm in
                                   ("skipthoughts", "distilbert")
                                   for f in _flags("blind", "frozen", "listnet")],
    "grounding_lr.py": [""] + _cells(), "hr.py": [""] + _cells(), "xben.py": [""] + _cells(),
    "lr_table1.py": [""] + _cells(),
    "grounding_synthetic.py": [f"{lm},{fusion}{flag}" for lm in ("skipthoughts", "distilbert")
                               for fusion in ("mult", "mutan")
                               for flag in ("", ",pooled", ",blind")],
    "lr_blind.py": [f"{lm},{w}" for lm in config_lib.LANGUAGE_MODELS
                    for w in ("frozen", "finetuned")],
    "lr_sweep.py": [""] + [f"{lm}{lr}" for lm in config_lib.LANGUAGE_MODELS
                           for lr in ("", ",1e-3")],
    "lr_table2.py": ["baseline", "skipthoughts_frozen_mutan", "distilbert_frozen_mutan",
                     "skipthoughts_finetuned_mult", "distilbert_finetuned_mult"],
    "rsvqa_baseline.py": [""], "study_paper.py": ["", "quick"],
    "study_synthetic.py": _flags("balanced", "adv_all", "quick"),
    "synthetic_small.py": _flags("blind", "frozen"),
    "synthetic_tiny.py": _flags("blind", "frozen"),
}


def test_no_shipped_config_sets_a_key_its_mode_does_not_read():
  files = {f for f in os.listdir(os.path.join(ROOT, "configs"))
           if f.endswith(".py") and not f.startswith("_")}
  assert files == set(SHIPPED)
  for name, args in SHIPPED.items():
    for arg in args:
      spec = os.path.join("configs", name) + (f":{arg}" if arg else "")
      assert (_unread(spec, []), _unread(spec, [], "image")) == ([], []), spec


def test_train_warns_once_and_still_records_the_value(tmp_path, capsys, monkeypatch):
  monkeypatch.chdir(tmp_path)
  assert cli.main(["-q", "train", "--config", TINY, "--workdir", "w",
                   "--config.data.synthetic_images=12",
                   "--config.data.synthetic_questions_per_image=4", "--config.train.num_epochs=1",
                   "--config.data.cache_dir=cache", "--config.optim.name=sgd",
                   "--config.optim.b1=0.5"]) == 0
  err = capsys.readouterr().err
  assert err.count("WARNING: config optim.b1=0.5 is not read: " + SGD + "\n") == 1
  with open(tmp_path / "w" / "config.json", encoding="utf-8") as f:
    assert json.load(f)["optim"]["b1"] == 0.5


@pytest.mark.parametrize("argv,message", [
    (["answerability", "train", "--config", ANSWERABILITY, "--workdir", "w",
      "--config.train.batch_size=32"], "rsvqa-jax answerability train: error: config "
     "train.batch_size=32 is not read: answerability.batch_pools=16 sets an answerability run's "
     "batches (pools of answerability.pool_size pairs); set it instead"),
    (["study", "--config", STUDY + ":balanced", "--workdir", "w",
      "--config.study.synthetic=false"],
     "rsvqa-jax study: error: config study.balanced_data=true is not read: study.synthetic=false "
     "reads the dataset in data.root as it is (only a generated one is balanced); set "
     "study.balanced_data=false"),
])
def test_a_refusal_is_one_line_before_anything_is_written(argv, message, tmp_path, capsys,
                                                          monkeypatch):
  monkeypatch.chdir(tmp_path)
  assert cli.main([os.path.join(ROOT, a) if a.startswith("configs/") else a for a in argv]) == 2
  assert capsys.readouterr().err.strip().splitlines() == [message]
  assert not (tmp_path / "w").exists()


def test_features_judges_the_image_section_after_its_flags(propagating, caplog):
  parser = argparse.ArgumentParser()
  features.add_arguments(parser)
  args = ["--data", "d", "--cache", "c", "--config", TINY, "--arch", "synthetic_resnet"]
  features.settings(parser.parse_args(args))  # the file's width, for the arch it had: moot
  assert not caplog.records
  features.settings(parser.parse_args(args + ["--config.image.width=8"]))
  assert [r.getMessage() for r in caplog.records] == [
      "config image.width=8 is not read: image.arch=synthetic_resnet is sized by "
      "image.pretrain.width"]


def test_a_files_key_is_left_alone_where_the_command_line_switched_its_mode(capsys):
  """The documented real-data look at the synthetic study (--config.study.synthetic=false
  --config.image.arch=resnet152) warned of the file's study.images, study.shortcuts.enabled and
  image.pretrain settings: moot once the mode is switched, not the user's mistake. A key the
  command line sets is still warned of, and a refusal stands whoever set the key."""
  real = ["study.synthetic=false", "image.arch=resnet152", "data.root=/data/RSVQA_LR"]
  assert _unread(STUDY, real) == []
  assert [tuple(hit) for hit in _unread(STUDY, real + ["study.images=100"])] == [
      ("study.images", f"config study.images=100 is not read: {GENERATED}", False)]
  assert _unread(SMALL, ["image.arch=resnet152"]) == []
  assert [hit.key for hit in _unread(SMALL, [])] == []  # the file is consistent
  with pytest.raises(RSVQAError, match="study.balanced_data=true is not read"):
    config_lib.check_unread(config_lib.apply_command_line(
        config_lib.load(os.path.join(ROOT, STUDY) + ":balanced"), ["study.synthetic=false"]),
        named=["study.synthetic"])


def _file_of(tmp_path, lines):
  """A study config file of the user's own: study_synthetic's, then `lines` over it."""
  path = tmp_path / "mine.py"
  path.write_text("import importlib.util\n"
                  "spec = importlib.util.spec_from_file_location(\n"
                  f"    'base', {os.path.join(ROOT, STUDY)!r})\n"
                  "base = importlib.util.module_from_spec(spec)\n"
                  "spec.loader.exec_module(base)\n\n\n"
                  "def get_config(arg=''):\n"
                  "  c = base.get_config(arg)\n" + "".join(f"  {line}\n" for line in lines)
                  + "  return c\n")
  return str(path)


def test_a_study_files_per_run_keys_are_warned_of(tmp_path):
  """The command line refuses them; set in a study's own config file, every run replaced them
  without a word (`rsvqa-jax config` even printed the value never used)."""
  config = config_lib.load(_file_of(tmp_path, ["c.model.fusion = 'mutan'", "c.seed = 7",
                                               "c.model.blind = True"]))
  assert sorted(hit.message for hit in config_lib.unread(config)) == [
      "config model.blind=true is not read: a study trains a reference and a visual-blind model "
      "of every cell",
      "config model.fusion=mutan is not read: a study sets it for each run: give study.fusion (or "
      "study.table2_rows)",
      "config seed=7 is not read: a study sets it for each run: give study.seeds"]


def test_a_record_naming_another_dataset_is_said_whoever_switched_the_mode():
  """hr.py read with --config.data.synthetic=true trained on generated LR data and recorded
  data.name=hr: the file's key was left alone because the command line switched the mode."""
  overrides = ["data.synthetic=true", "data.synthetic_images=20"]
  assert [hit.key for hit in _unread("configs/hr.py", overrides)] == ["data.name"]


def test_a_mode_switched_on_the_command_line_leaves_later_rules_to_judge():
  """The command-line exemption of one rule stopped the next: a DistilBERT's text.dropout went
  unsaid once text.frozen was given on the command line."""
  config = config_lib.apply_command_line(config_lib.load(os.path.join(ROOT, CELL)),
                                         ["text.dropout=0.3"])
  config.text.dropout = 0.3  # as a file of the user's own sets it
  named = ["text.frozen", "optim.text_lr"]
  config_lib.apply_overrides(config, ["text.frozen=true", "optim.text_lr=0"])
  assert [hit.message for hit in config_lib.unread(config, named=named)] == [
      "config text.dropout=0.3 is not read: text.encoder=distilbert takes its dropout from its "
      "checkpoint's config.json"]


def test_a_command_refuses_a_config_it_cannot_run_before_judging_its_keys(tmp_path, capsys,
                                                                          monkeypatch):
  """`train` over an answerability config with train.batch_size said that answerability runs
  do not read it, where the config is not train's to run at all."""
  monkeypatch.chdir(tmp_path)
  assert cli.main(["train", "--config", os.path.join(ROOT, ANSWERABILITY), "--workdir", "w",
                   "--config.train.batch_size=8"]) == 2
  assert capsys.readouterr().err.strip() == (
      "rsvqa-jax train: error: --config: an answerability config (it has an `answerability` "
      "section); run it with rsvqa-jax answerability train --config ... --workdir DIR")


def test_a_studys_unread_keys_reach_its_report(tmp_path, monkeypatch):
  """They were logged before the study's WARNING handler was attached: the console said them,
  report.md and warnings.json did not."""
  from rsvqa_jax.study import protocol  # pylint: disable=g-import-not-at-top

  class Stop(Exception):
    pass

  def stop(*args, **kwargs):
    raise Stop()
  monkeypatch.setattr(protocol.Study, "_stages", stop)
  config = config_lib.load(_file_of(tmp_path, ["c.seed = 7"]))
  study = protocol.Study(config, str(tmp_path / "s"))
  with pytest.raises(Stop):
    study.run(named=[])
  assert study.warnings.listed() == [
      {"message": "config seed=7 is not read: a study sets it for each run: give study.seeds",
       "count": 1}]
