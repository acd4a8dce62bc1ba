"""RSVQAxBEN (120x120 BigEarthNet tiles, the 1,000 most frequent training answers).

Argument: LM,FUSION,frozen|finetuned (default distilbert,mult,finetuned). The dataset is large
(~1.5M questions): checkpoints every 5,000 steps.
"""
from rsvqa_jax import config


def get_config(arg=None):
  c = config.paper_config("xben", *config.parse_cell(arg, "distilbert,mult,finetuned"))
  c.train.eval_batch_size = 700
  c.train.checkpoint_every_steps = 5000
  return c
