"""The helpers `configs/*.py` build their settings with: the paper's cell and the arguments a
config file takes (`lr_table1.py:LM,FUSION,frozen`, `...:blind,frozen`)."""
from rsvqa_jax.config.defaults import FUSIONS, LANGUAGE_MODELS, base_config
from rsvqa_jax.errors import RSVQAError

def paper_config(dataset, language_model, fusion, frozen):
  """The paper's setting (batch 70, Adam, 50 epochs, lr 1e-5; LM lr 1e-4 / 1e-6) for one cell.

  The checkpoints (text.checkpoint: uni-skip folder or Hugging Face folder; image.checkpoint:
  a torchvision ResNet-152 file, or "random" for either to train on random weights on purpose)
  and data.root must be given on the command line.
  """
  if language_model not in LANGUAGE_MODELS:
    raise RSVQAError(f"language model {language_model!r}: choose one of {LANGUAGE_MODELS}")
  if fusion not in FUSIONS:
    raise RSVQAError(f"fusion {fusion!r}: choose one of {FUSIONS}")
  c = base_config()
  c.data.name = dataset
  c.image.arch = "resnet152"
  c.text.encoder = language_model
  c.text.frozen = bool(frozen)
  c.model.fusion = fusion
  c.optim.lr = 1e-5
  c.optim.text_lr = 0.0 if frozen else (1e-4 if language_model == "skipthoughts" else 1e-6)
  return c


def argument_error(source, arg, expected):
  """The one-line error a config file raises for an argument it does not know."""
  return RSVQAError(f"{source}:{arg}: {expected}")


def parse_cell(arg, default):
  """'lm,fusion,frozen|finetuned' -> (lm, fusion, frozen bool)."""
  parts = (arg or default).split(",")
  if len(parts) != 3 or parts[2] not in ("frozen", "finetuned"):
    raise RSVQAError(f"config argument {arg!r}: expected LM,FUSION,frozen|finetuned "
                     f"(e.g. {default})")
  return parts[0], parts[1], parts[2] == "frozen"


def apply_flags(config, arg, source):
  """Config-file argument 'blind,frozen' (either or both): the visual-blind twin, a frozen LM."""
  for flag in filter(None, (arg or "").split(",")):
    if flag == "blind":
      config.model.blind = True
    elif flag == "frozen":
      config.text.frozen = True
      config.optim.text_lr = 0.0
    else:
      raise RSVQAError(f"{source}:{arg}: unknown flag {flag!r} (blind, frozen)")
  return config
