"""Analytic matmul FLOPs of the benchmarked train steps (2 per multiply-add).

A fine-tuned step counts 3 x its forward matmuls (forward, gradient of the inputs, gradient of the
weights). A frozen-encoder step trains the head on cached vectors: the two input projections
need no input gradient (their inputs are data), so it counts 2 x forward plus the input gradients
of the layers after them.
"""
from benchmarks import inputs
from rsvqa_jax.config import model_section


def _head_macs(q_dim, fusion):
  """Per-sample multiply-adds of fusion + classifier: (input projections, the layers after)."""
  c = model_section()
  projections = inputs.IMAGE_DIM * c.hidden_dim + q_dim * c.hidden_dim
  after = 0
  if fusion == "mutan":
    after += 2 * c.hidden_dim * c.mutan_rank * c.mutan_dim + c.mutan_dim * c.hidden_dim
  fused = 2 * c.hidden_dim if fusion == "concat" else c.hidden_dim
  after += fused * c.classifier_dim + c.classifier_dim * inputs.NUM_ANSWERS
  return projections, after


def head_flops(q_dim, batch, fusion="mult"):
  """Forward matmul FLOPs of fusion + classifier (paper sizes)."""
  return 2.0 * batch * sum(_head_macs(q_dim, fusion))


def head_train_flops(q_dim, batch, fusion="mult"):
  """Train-step FLOPs of the head alone on cached vectors (no gradient for its data inputs)."""
  projections, after = _head_macs(q_dim, fusion)
  return 2.0 * batch * (2 * projections + 3 * after)


def bert_train_flops(batch, width, layers, hidden, intermediate, fusion="mult"):
  """Train-step FLOPs (3 x forward matmuls) of a BERT-family encoder + head."""
  per_token = 2 * (4 * hidden * hidden + 2 * hidden * intermediate) + 2 * 2 * width * hidden
  forward = batch * width * layers * per_token + head_flops(hidden, batch, fusion)
  return 3.0 * forward


def gru_forward_flops(batch, width, word_dim, hidden):
  """Forward matmul FLOPs of the uni-skip GRU alone (input and recurrent products, 3 gates)."""
  return 2.0 * batch * width * (word_dim * 3 * hidden + hidden * 3 * hidden)


def gru_train_flops(batch, width, word_dim, hidden, fusion="mult"):
  """Train-step FLOPs (3 x forward matmuls) of the uni-skip GRU + head."""
  return 3.0 * (gru_forward_flops(batch, width, word_dim, hidden) +
                head_flops(hidden, batch, fusion))


def train_step_flops(lm, frozen, fusion, size, batch, width):
  """FLOPs of one train step of a benchmark configuration (sizes as benchmarks.train_steps)."""
  if lm == "skipthoughts":
    g = size["gru"]
    return (head_train_flops(g["hidden_dim"], batch, fusion) if frozen else
            gru_train_flops(batch, width, g["word_dim"], g["hidden_dim"], fusion))
  b = size["bert"]
  return (head_train_flops(b["hidden"], batch, fusion) if frozen else
          bert_train_flops(batch, width, size["bert_layers"][lm], b["hidden"], b["intermediate"],
                           fusion))
