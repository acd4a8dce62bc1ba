"""A linear layer that computes in the dtype of its parameters.

nnx.Linear promotes its input and parameters together, so a bfloat16 copy of the parameters
(the train step's compute_dtype casts them) still made float32 matmuls whenever the input was
float32: a LayerNorm output, a float32 question vector. Here the input is cast first, to the
layer's `dtype` when one is set, else to the dtype of the kernel.
"""
from flax import nnx


class Dense(nnx.Linear):
  """nnx.Linear whose input is cast to `dtype`, or to the kernel's dtype when `dtype` is None."""

  def __call__(self, inputs):
    return super().__call__(inputs.astype(self.dtype or self.kernel.dtype))
