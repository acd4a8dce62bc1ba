"""The paper's Table 1 grid on RSVQA LR (validation OA): one cell per argument.

  rsvqa-jax train --config configs/lr_table1.py:distilbert,mutan,finetuned --workdir W \
    --config.data.root=DATA/RSVQA_LR --config.image.checkpoint=resnet152.pth \
    --config.text.checkpoint=MODELS/distilbert-base-uncased
LM: skipthoughts | bert | distilbert | roberta; fusion: mult | concat | mutan.
"""
from rsvqa_jax import config


def get_config(arg=None):
  lm, fusion, frozen = config.parse_cell(arg, "distilbert,mutan,finetuned")
  return config.paper_config("lr", lm, fusion, frozen)
