"""Optimizers with one learning rate for the language model and another for the rest.

Trainable parameters are grouped as {"head": ..., "text": ...} (see state.py); optax's
multi_transform gives each group its own Adam (or SGD). A frozen language model is not in the
trainable groups at all, so it gets no gradient and no optimizer state; a group whose learning
rate is 0 is mapped to `set_to_zero` so it keeps no moments either.
"""
import optax

from rsvqa_jax.errors import RSVQAError

GROUPS = ("head", "text")


def _one(cfg, lr):
  if lr == 0:
    return optax.set_to_zero()
  if cfg.name == "adam":
    return optax.adam(lr, b1=cfg.b1, b2=cfg.b2, eps=cfg.eps)
  if cfg.name == "sgd":
    return optax.sgd(lr)
  raise RSVQAError(f"config optim.name={cfg.name!r}: choose adam or sgd")


def make_optimizer(optim_cfg):
  """optax transform over {"head": tree, "text": tree} with lr / text_lr respectively."""
  transforms = {"head": _one(optim_cfg, optim_cfg.lr), "text": _one(optim_cfg, optim_cfg.text_lr)}
  return optax.multi_transform(transforms, lambda params: {k: k for k in params})
