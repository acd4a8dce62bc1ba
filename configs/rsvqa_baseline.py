"""The original RSVQA baseline on LR: frozen Skip-thoughts, e-mult fusion, lr 1e-5, 50 epochs.

The original code reduced the 8x8x2048 ResNet map with a trainable 1x1 conv; like the paper's
experiments, this config uses the pooled 2048-d features.
"""
from rsvqa_jax import config


def get_config():
  return config.paper_config("lr", "skipthoughts", "mult", frozen=True)
