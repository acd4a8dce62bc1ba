"""Figure 8: the fine-tuning learning rate of the language model, on RSVQA LR validation.

Argument LM,LR (fine-tuned, e-mult fusion, the paper's other settings), e.g.
  for lm in skipthoughts distilbert; do for lr in 1e-3 1e-4 1e-5 1e-6 1e-7; do
    rsvqa-jax train --config configs/lr_sweep.py:$lm,$lr --workdir runs/lr_sweep/${lm}_$lr \
      --config.data.root=/data/RSVQA_LR --config.image.checkpoint=/models/resnet152.pth \
      --config.text.checkpoint=/models/$lm; done; done
  rsvqa-jax tables --runs runs/lr_sweep     # figure8_lr: validation OA per LM and lr
The paper settled on 1e-4 for Skip-thoughts and 1e-6 for distilBERT (the defaults here).
"""
from rsvqa_jax import config

PAPER_LR = {"skipthoughts": 1e-4, "bert": 1e-6, "distilbert": 1e-6, "roberta": 1e-6}


def get_config(arg="distilbert"):
  lm, _, lr = (arg or "distilbert").partition(",")
  if lm not in PAPER_LR:
    raise config.argument_error("configs/lr_sweep.py", arg,
                                f"expected LM[,LR] with LM one of {', '.join(PAPER_LR)}")
  try:
    text_lr = float(lr) if lr else PAPER_LR[lm]
  except ValueError:
    raise config.argument_error("configs/lr_sweep.py", arg, f"{lr!r} is not a number") from None
  if text_lr <= 0:
    raise config.argument_error("configs/lr_sweep.py", arg, "the learning rate must be positive")
  c = config.paper_config("lr", lm, "mult", frozen=False)
  c.optim.text_lr = text_lr
  return c
