"""The training state: everything a step reads and writes, as one pytree.

The NNX model is split once into its graph definition (static) and plain nested dicts of
arrays, which jit, donation and orbax handle directly:
  params   {"head": ..., "text": ...}  trainable float32 parameters, by optimizer group
  frozen   {"text": ...} when the language model is frozen (never differentiated), else {};
           {} too when its question vectors are cached and the model has no text encoder
  rest     non-parameter variables (the dropout RNG streams, reseeded every step)
  opt_state, step (int32), rng (uint32[2] raw key; the dropout key of step s is fold_in(rng, s))
"""
from typing import Any

import flax.struct
import jax
import jax.numpy as jnp
from flax import nnx

TEXT_PARAMS = nnx.All(nnx.Param, nnx.PathContains("text_encoder"))


@flax.struct.dataclass
class TrainState:
  graphdef: Any = flax.struct.field(pytree_node=False)
  params: Any
  frozen: Any
  rest: Any
  opt_state: Any
  step: jax.Array
  rng: jax.Array

  def model(self, params=None):
    """A fresh NNX model (own Variables, safe to mutate under any trace) with `params` merged in."""
    params = self.params if params is None else params
    text = params.get("text") or self.frozen.get("text") or {}
    return nnx.merge(self.graphdef, text, params["head"], self.rest, copy=True)

  def checkpoint_items(self):
    """What a checkpoint saves (graphdef and rest are rebuilt from the config)."""
    return {"params": self.params, "frozen": self.frozen, "opt_state": self.opt_state,
            "step": self.step, "rng": self.rng}


def create(model, optimizer, *, seed, freeze_text):
  """TrainState of a freshly built model; a frozen text encoder goes to `frozen`."""
  graphdef, text, head, rest = nnx.split(model, TEXT_PARAMS, nnx.Param, ...)
  text, head = nnx.to_pure_dict(text), nnx.to_pure_dict(head)
  params = {"head": head, "text": {} if freeze_text else text}
  frozen = {"text": text} if freeze_text and text else {}
  return TrainState(graphdef=graphdef, params=params, frozen=frozen, rest=rest,
                    opt_state=jax.jit(optimizer.init)(params), step=jnp.zeros((), jnp.int32),
                    rng=jax.random.key_data(jax.random.key(seed)))
