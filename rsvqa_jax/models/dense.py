"""A linear layer that computes in its `dtype`, or in the dtype of its parameters.

nnx.Linear promotes its input and parameters together, so a bfloat16 copy of the parameters
still made float32 matmuls whenever the input was float32: a LayerNorm output, a float32
question vector. Here the input is cast first, to the layer's `dtype` when one is set, else to
the dtype of the kernel; a bf16 product then goes through models/matmul (float32 accumulation
on a CPU's bf16 units), which takes the float32 kernel and bias of a layer whose `dtype` is bf16
as master copies (the train step's compute_dtype sets `dtype` and leaves them float32).
"""
from flax import nnx

from rsvqa_jax.models import matmul as matmul_lib


class Dense(nnx.Linear):
  """nnx.Linear whose input is cast to `dtype`, or to the kernel's dtype when `dtype` is None."""

  def __call__(self, inputs):
    dtype = self.dtype or self.kernel.dtype
    inputs = inputs.astype(dtype)
    if not matmul_lib.accumulates_in_float32(dtype):
      return super().__call__(inputs)
    y = matmul_lib.matmul(inputs, self.kernel[...])
    return y if self.bias is None else matmul_lib.add_bias(y, self.bias[...])
