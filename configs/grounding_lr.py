"""The spatial attention model on RSVQA LR: a Table 1 cell with the ResNet map kept.

  rsvqa-jax features --data DATA/RSVQA_LR --dataset lr --cache runs/rsvqa_cache \
    --arch resnet152 --checkpoint resnet152.pth --map
  rsvqa-jax train --config configs/grounding_lr.py:skipthoughts,mutan,frozen --workdir W \
    --config.data.root=DATA/RSVQA_LR --config.image.checkpoint=resnet152.pth \
    --config.text.checkpoint=MODELS/skipthoughts
Argument LM,FUSION,frozen|finetuned as configs/lr_table1.py (whose cell of the same argument is
the pooled model beside it); the frozen ResNet-152's 8x8x2048 map is cached (image.map=true) and
a question-guided softmax attention over its 64 positions (model.head=attention,
model.attention_dim=512) replaces the global pooling before the paper's fusion. The real LR set
has no ground-truth groundings: `rsvqa-jax grounding --workdir W` needs a synthetic dataset's
Grounding/ folder, so on LR the maps are for looking at.
"""
from rsvqa_jax import config


def get_config(arg=None):
  lm, fusion, frozen = config.parse_cell(arg, "skipthoughts,mult,frozen")
  c = config.paper_config("lr", lm, fusion, frozen)
  c.model.head = "attention"
  c.image.map = True
  return c
