"""Values every key's type accepts but a run cannot use: each is one RSVQAError naming the key and
the value, raised by the checks a command runs before any work (config.check, config.check_weights
and, for a study, study/checks.check), where it was accepted or a traceback."""
import math
import os

import pytest

from rsvqa_jax import config as config_lib
from rsvqa_jax.errors import RSVQAError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY, ANSWERABILITY, STUDY = "synthetic_tiny.py", "answerability_synthetic.py", "study_synthetic.py"


def _config(name, overrides):
  c = config_lib.load(os.path.join(ROOT, "configs", name))
  config_lib.check(c)  # the file's own values pass
  return config_lib.apply_overrides(c, overrides)


@pytest.mark.parametrize("name,overrides,message", [
    # A factor of 1 or less stopped a learning run as "diverged" (loss 1.947 -> 1.888 at 0.5).
    (TINY, ["train.divergence_factor=0.5"], "config train.divergence_factor=0.5: must be above 1, "
     "or 0 (off)"),
    (TINY, ["train.divergence_factor=1"], "config train.divergence_factor=1.0: must be above 1"),
    # Nothing trains: the run reported its random init as a result.
    (TINY, ["optim.lr=0", "text.frozen=true"], "config optim.lr=0.0: with text.frozen=true "
     "nothing would train"),
    (TINY, ["optim.lr=0", "optim.text_lr=0"], "config optim.lr=0.0: with optim.text_lr=0 nothing "
     "would train"),
    # Refused only once the dataset was generated, the ResNet pretrained and the config recorded.
    (ANSWERABILITY, ["answerability.batch_pools=99999999999999999999"],
     "config answerability.batch_pools=99999999999999999999: must be at most 65536"),
    # AttributeErrors in the study checks (an entry read as a number).
    (STUDY, ["study.table2_rows=1"], "config study.table2_rows=(1,): 1 is of type int; each entry "
     "must be text"),
    (STUDY, ["study.shortcuts.plant=0.9"], "config study.shortcuts.plant=(0.9,): 0.9 is of type "
     "float; each entry must be text"),
    (STUDY, ["study.table2_rows=baseline", "study.baseline.overrides=(1,)"],
     "config study.baseline.overrides=(1,): 1 is of type int"),
    # A KeyError in the study checks.
    (STUDY, ["study.shortcuts.language_model=gru"], "config study.shortcuts.language_model='gru': "
     "not in study.lm (it has distilbert, skipthoughts)"),
    # The balanced twin generated and analysed, no run trained on it.
    (STUDY, ["study.balanced.seeds=()"], "config study.balanced.seeds=(): give one or more seeds"),
    # A random-init DistilBERT built layer by layer in numpy: no bound.
    (STUDY, ["study.lm.distilbert.layers=99999999999999999999"],
     "config study.lm.distilbert.layers=99999999999999999999: must be at most 64"),
    (STUDY, ["study.lm.distilbert.hidden_dim=8193"],
     "config study.lm.distilbert.hidden_dim=8193: must be at most 8192"),
    (STUDY, ["study.lm.distilbert.dim=1180591620717411303424"],  # 2**70, a multiple of heads
     "config study.lm.distilbert.dim=1180591620717411303424: must be at most 8192"),
    (STUDY, ["study.lm.skipthoughts.update_bias=1e999"],
     "config study.lm.skipthoughts.update_bias=inf: must be a finite number"),
    # 0 in float32: Adam divided 0 by 0 and the run stopped "diverged", blaming its lr.
    (TINY, ["optim.eps=1e-40"], "config optim.eps=1e-40: is below float32's smallest normal "
     "number (1.18e-38), and the runs compute in float32, where it is 0; give a larger value"),
    # 0 in float32 past the lr=0 check: trained nothing, said nothing.
    (TINY, ["optim.lr=1e-320", "optim.text_lr=0"], "config optim.lr=1e-320: is below float32's "
     "smallest normal number (1.18e-38), and the runs compute in float32, where it is 0; give 0 "
     "or a larger value"),
])
def test_a_value_no_run_can_use_is_one_line(name, overrides, message):
  c = _config(name, overrides)
  with pytest.raises(RSVQAError) as refused:
    config_lib.check(c)
  assert str(refused.value).startswith(message) and "\n" not in str(refused.value)


@pytest.mark.parametrize("overrides", [
    ["study.table2_rows=1"], ["study.shortcuts.plant=0.9"],
    ["study.shortcuts.language_model=gru"]])
def test_the_study_checks_say_it_in_one_line_too(overrides):
  """They were an AttributeError or a KeyError raised from study/checks.py."""
  from rsvqa_jax.study import checks  # pylint: disable=g-import-not-at-top
  with pytest.raises(RSVQAError, match=f"^config {overrides[0].split('=')[0]}="):
    checks.check(_config(STUDY, overrides), paths=False)


def test_a_nan_update_bias_from_a_file_is_refused():
  """NaN cannot be written on the command line, but a config file or config.json can hold it."""
  c = _config(STUDY, [])
  c.study.lm.skipthoughts.update_bias = math.nan
  with pytest.raises(RSVQAError, match=r"^config study.lm.skipthoughts.update_bias=nan: must be "
                     "a finite number$"):
    config_lib.check(c)


def test_an_image_checkpoint_naming_nothing_is_refused_before_any_stage(tmp_path):
  """It was refused by the encoder, after the synthetic dataset was generated."""
  missing = str(tmp_path / "resnet18.pth")
  c = _config(TINY, [f"image.checkpoint={missing}"])
  config_lib.check(c)
  with pytest.raises(RSVQAError, match=f"^config image.checkpoint={missing}: no such file or "
                     "folder; give the resnet18 weights"):
    config_lib.check_weights(c)
  config_lib.check_weights(c, image=False)  # features given: the weights are not read
  c.image.checkpoint = "/x" * 100_000  # a damaged path was echoed whole
  with pytest.raises(RSVQAError, match=r"^config image.checkpoint=(/x){75}\.\.\.(/x){75}: no "):
    config_lib.check_weights(c)
  c.image.checkpoint = missing
  (tmp_path / "resnet18.pth").write_bytes(b"")
  config_lib.check_weights(c)
  c.image.arch = "synthetic_resnet"  # pretrained on the synthetic scenes: reads no checkpoint
  c.image.checkpoint = str(tmp_path / "none")
  config_lib.check_weights(c)


@pytest.mark.parametrize("name,overrides", [
    (TINY, ["train.divergence_factor=0"]),  # the factor test off
    (TINY, ["train.divergence_factor=1.5"]),
    (TINY, ["optim.lr=0"]),  # a frozen head, the language model fine-tuned
    (TINY, ["optim.text_lr=0"]),
    (TINY, ["image.checkpoint=random"]),
    (ANSWERABILITY, ["answerability.batch_pools=65536"]),
    (STUDY, ["study.table2_rows=()"]),
    (STUDY, ["study.shortcuts.enabled=false", "study.shortcuts.language_model=gru"]),
    (STUDY, ["study.balanced.enabled=false", "study.balanced.seeds=()"]),
    (STUDY, ["study.lm.distilbert.layers=64", "study.lm.distilbert.hidden_dim=8192"]),
    (STUDY, ["study.lm.skipthoughts.update_bias=-3.5"]),
])
def test_usable_values_beside_them_pass(name, overrides):
  c = _config(name, overrides)
  config_lib.check(c)
  if "study" in c:  # the study checks its runs' weights itself
    from rsvqa_jax.study import checks  # pylint: disable=g-import-not-at-top
    checks.check(c, paths=False)
  else:
    config_lib.check_weights(c)
