"""RSVQA HR (512x512 USGS tiles, 55 answers) with the paper's training setting.

Argument: LM,FUSION,frozen|finetuned (default distilbert,mult,finetuned); add model.blind=True
for the visual-blind twin. Evaluate on --split test or test_phili.
"""
from rsvqa_jax import config


def get_config(arg=None):
  c = config.paper_config("hr", *config.parse_cell(arg, "distilbert,mult,finetuned"))
  c.train.eval_batch_size = 560
  return c
