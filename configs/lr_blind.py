"""Visual-blind twins on RSVQA LR: the question vector goes straight into the classifier.

Argument: LM,frozen|finetuned, e.g. configs/lr_blind.py:distilbert,finetuned; trained with the
same hyper-parameters as the reference models (Table 6 of the paper).
"""
from rsvqa_jax import config


def get_config(arg="distilbert,finetuned"):
  parts = arg.split(",")
  if len(parts) != 2 or parts[1] not in ("frozen", "finetuned"):
    raise config.argument_error("configs/lr_blind.py", arg, "expected LM,frozen|finetuned")
  c = config.paper_config("lr", parts[0], "mult", parts[1] == "frozen")
  c.model.blind = True
  return c
