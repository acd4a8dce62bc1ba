"""Skip-thoughts uni-skip question encoder: a GRU in the original Theano layout.

The parameters keep the layout of `uni_skip.npz` (W, U with the r then u gates side by side;
Wx, Ux, bx for the candidate state) so the pretrained arrays load without reshuffling. The
recurrence runs under `jax.lax.scan`; padded steps keep the previous state, so the final carry is
the hidden state at the last real token. The Bayesian variant applies variational dropout
(Gal & Ghahramani): one mask per sequence and gate, fixed over time, on inputs and hidden state.
"""
import jax
import jax.numpy as jnp
from flax import nnx

BAYESIAN_DROPOUT = 0.25


def gru_scan(x, mask, W, U, b, Wx, Ux, bx, masks=None):
  """Runs the uni-skip GRU over time.

  Args:
    x: [B, L, D] word vectors.
    mask: [B, L], nonzero on real tokens; padded steps leave the state unchanged.
    W, U, b, Wx, Ux, bx: the uni-skip arrays ([D, 2H], [H, 2H], [2H], [D, H], [H, H], [H]).
    masks: None, or (x_masks [3, B, D], h_masks [3, B, H]) for the r, u and candidate inputs.

  Returns:
    (h_last [B, H], states [B, L, H]).
  """
  hidden = Ux.shape[0]
  if masks is None:
    xw = x @ W + b
    xx = x @ Wx + bx
  else:
    mx, mh = masks
    xw = jnp.concatenate([(x * mx[0][:, None]) @ W[:, :hidden],
                          (x * mx[1][:, None]) @ W[:, hidden:]], axis=-1) + b
    xx = (x * mx[2][:, None]) @ Wx + bx

  def step(h, inputs):
    xw_t, xx_t, m_t = inputs
    if masks is None:
      hu = h @ U
      hx = h @ Ux
    else:
      hu = jnp.concatenate([(h * mh[0]) @ U[:, :hidden], (h * mh[1]) @ U[:, hidden:]], axis=-1)
      hx = (h * mh[2]) @ Ux
    pre = xw_t + hu
    r = jax.nn.sigmoid(pre[:, :hidden])
    u = jax.nn.sigmoid(pre[:, hidden:])
    candidate = jnp.tanh(r * hx + xx_t)
    h_new = u * h + (1.0 - u) * candidate
    h = jnp.where(m_t[:, None], h_new, h)
    return h, h

  h0 = jnp.zeros((x.shape[0], hidden), xw.dtype)
  time_major = (jnp.swapaxes(xw, 0, 1), jnp.swapaxes(xx, 0, 1), jnp.swapaxes(mask, 0, 1) != 0)
  h_last, states = jax.lax.scan(step, h0, time_major)
  return h_last, jnp.swapaxes(states, 0, 1)


class SkipThoughts(nnx.Module):
  """Word table + uni-skip GRU; returns the hidden state at the last real token.

  Args:
    vocab_size: rows of the word table (id 0 is padding).
    word_dim, hidden_dim: 620 and 2400 for the pretrained uni-skip model.
    dropout: plain dropout on the word vectors; with `bayesian`, the variational rate
      (0 means the paper's 0.25).
    bayesian: variational dropout masks fixed over time on inputs and hidden state.
  """

  def __init__(self, vocab_size, *, word_dim=620, hidden_dim=2400, dropout=0.0, bayesian=False,
               rngs):
    self.out_dim = hidden_dim
    self.word_dim = word_dim
    self.bayesian = bayesian
    rate = (dropout or BAYESIAN_DROPOUT) if bayesian else dropout
    normal = jax.nn.initializers.normal(0.1)
    ortho = jax.nn.initializers.orthogonal()
    self.embed = nnx.Embed(vocab_size, word_dim, embedding_init=normal, rngs=rngs)
    self.W = nnx.Param(normal(rngs.params(), (word_dim, 2 * hidden_dim)))
    self.U = nnx.Param(jnp.concatenate(
        [ortho(rngs.params(), (hidden_dim, hidden_dim)) for _ in range(2)], axis=1))
    self.b = nnx.Param(jnp.zeros((2 * hidden_dim,)))
    self.Wx = nnx.Param(normal(rngs.params(), (word_dim, hidden_dim)))
    self.Ux = nnx.Param(ortho(rngs.params(), (hidden_dim, hidden_dim)))
    self.bx = nnx.Param(jnp.zeros((hidden_dim,)))
    self.dropout = nnx.Dropout(rate, rngs=rngs)

  def dropout_masks(self, batch, *, deterministic):
    """The Bayesian masks for one batch, or None when none apply.

    Returns (x_masks [3, B, word_dim], h_masks [3, B, hidden]), scaled by 1 / (1 - rate).
    """
    if deterministic or not self.bayesian:
      return None
    mx = self.dropout(jnp.ones((3, batch, self.word_dim)), deterministic=False)
    mh = self.dropout(jnp.ones((3, batch, self.out_dim)), deterministic=False)
    return mx, mh

  def _run(self, tokens, mask, deterministic):
    x = self.embed(tokens)
    masks = self.dropout_masks(tokens.shape[0], deterministic=deterministic)
    if not self.bayesian:
      x = self.dropout(x, deterministic=deterministic)
    return gru_scan(x, mask, self.W[...], self.U[...], self.b[...], self.Wx[...], self.Ux[...],
                    self.bx[...], masks)

  def hidden_states(self, tokens, mask, *, deterministic=True):
    """GRU states at every position, [B, L, hidden] (pads repeat the previous state)."""
    return self._run(tokens, mask, deterministic)[1]

  def __call__(self, tokens, mask, *, deterministic=True):
    """Question vectors [B, hidden]: the state after the last real token."""
    return self._run(tokens, mask, deterministic)[0]
