"""Skip-thoughts uni-skip question encoder: a GRU in the original Theano layout.

The parameters keep the layout of `uni_skip.npz` (W, U with the r then u gates side by side;
Wx, Ux, bx for the candidate state) so the pretrained arrays load without reshuffling. The
recurrence runs under `jax.lax.scan`; padded steps keep the previous state, so the final carry is
the hidden state at the last real token. The Bayesian variant applies variational dropout
(Gal & Ghahramani): one mask per sequence and gate, fixed over time, on inputs and hidden state.

Speed: the input projections of all time steps are one matmul before the scan, and each step
does one recurrent matmul h @ [U | Ux] ([H, 3H]; one per gate under Bayesian masks, each gate
reading its own masked h, and likewise for the projections). The recurrence has a hand-written
VJP: its backward scan carries only dh (one [B, 3H] @ [3H, H] matmul per step) and the gradient
of [U | Ux] is one matmul over all B x L positions after the loop (one per gate block under
Bayesian masks), instead of the per-step accumulation (contraction over B only) that
differentiating the scan would do.
"""
import jax
import jax.numpy as jnp
from flax import nnx

from rsvqa_jax.models.dropout import Dropout
from rsvqa_jax.models.matmul import add_bias, dtype_token, einsum, matmul

BAYESIAN_DROPOUT = 0.25


def _gates(y):
  """A [..., 3H] array as its three gate blocks (r, u, candidate), [..., H] each."""
  return tuple(jnp.split(y, 3, axis=-1))


def _recurrent(h, uu, mh):
  """(r, u, candidate) parts of h @ [U | Ux], [B, H] each: one product over [U | Ux] [H, 3H],
  or under Bayesian masks one per gate block of `uu` (U_r, U_u, Ux), each reading its own
  masked h."""
  if mh is None:
    return _gates(matmul(h, uu))
  return tuple(matmul(h * mh[i], blk) for i, blk in enumerate(uu))


def _recurrent_transpose(dg, uu, mh):
  """[B, H]: the cotangent of h in `_recurrent` given its parts' cotangents dg."""
  if mh is None:
    return einsum("bk,hk->bh", jnp.concatenate(dg, axis=-1).astype(uu.dtype), uu)
  return sum(einsum("bk,hk->bh", d.astype(blk.dtype), blk) * mh[i] for i, (d, blk) in
             enumerate(zip(dg, uu)))


def _recurrent_weight_grad(h_prev, dg, mh, dtype):
  """The gradient of `uu` in `dtype`, one contraction over all L x B positions: [H, 3H], or
  under Bayesian masks the gradients of its three gate blocks."""
  if mh is None:
    return einsum("tbh,tbk->hk", h_prev, jnp.concatenate(dg, axis=-1), dtype)
  return tuple(einsum("tbh,tbk->hk", h_prev * mh[i], d, dtype) for i, d in enumerate(dg))


def _bits(tree):
  """bf16 leaves as their uint16 bit patterns, for the per-step outputs a scan stacks.

  XLA:CPU computes a bf16 dynamic-update-slice in float32, converting the whole stacked buffer
  there and back at every step ([L, B, 3H] twice per step: 11% of a bf16 Skip-thoughts train
  step); a uint16 one is a plain in-place write.
  """
  return jax.tree.map(lambda x: jax.lax.bitcast_convert_type(x, jnp.uint16)
                      if x.dtype == jnp.bfloat16 else x, tree)


def _from_bits(tree):
  """`_bits` undone: uint16 leaves back to bf16."""
  return jax.tree.map(lambda x: jax.lax.bitcast_convert_type(x, jnp.bfloat16)
                      if x.dtype == jnp.uint16 else x, tree)


def _cast(uu, dtype):
  return jax.tree.map(lambda w: w.astype(dtype), uu)


def _scan_forward(xp, m, uu, mh, save):
  """Forward recurrence over time-major inputs; with `save`, also the backward's residuals."""
  xr, xu, xc = xp

  def step(h, inputs):
    xr_t, xu_t, xc_t, m_t = inputs
    gr, gu, hx = _recurrent(h, uu, mh)
    # The gate math in float32 whatever the dtype: XLA:CPU evaluates sigmoid and tanh of bf16
    # arrays two to three times slower (models/activations); the state and the residuals are
    # rounded back to h's dtype.
    f = lambda a: a.astype(jnp.float32)  # pylint: disable=unnecessary-lambda-assignment
    r = jax.nn.sigmoid(f(xr_t) + f(gr))
    u = jax.nn.sigmoid(f(xu_t) + f(gu))
    c = jnp.tanh(r * f(hx) + f(xc_t))
    h_new = jnp.where(m_t[:, None], (u * f(h) + (1.0 - u) * c).astype(h.dtype), h)
    saved = (h, r.astype(h.dtype), u.astype(h.dtype), hx, c.astype(h.dtype))
    return h_new, _bits((h_new, saved) if save else h_new)

  h0 = jnp.zeros(xr.shape[1:], xr.dtype)
  h_last, stacked = jax.lax.scan(step, h0, (xr, xu, xc, m))
  return h_last, _from_bits(stacked)


@jax.custom_vjp
def recurrence(xp, m, uu, mh):
  """The uni-skip recurrence.

  Each gate's input projection is an array of its own, never a slice of one [L, B, 3H] input
  taken inside the loop: XLA:CPU ran the loop's element-wise gate math on such slices several
  times slower (splitting it made the forward pass 1.2x faster in float32, 2x in bf16:
  benchmarks/gru_scan_ab). The one recurrent product h @ [U | Ux] is split in the loop: three
  [H, H] products instead measured no faster.

  Args:
    xp: (r, u, candidate) input projections, [L, B, H] each (x @ [W | Wx] + [b | bx] in parts,
      time-major).
    m: [L, B] bool, True on real tokens.
    uu: [H, 3H] = [U | Ux], or with `mh` its three gate blocks (U_r, U_u, Ux), in xp's dtype or
      float32 master copies: cast to xp's dtype once before the loop, the gradient returned in
      their own dtype (straight from the float32 accumulator on a CPU, not rounded to bf16).
    mh: None, or [3, B, H] Bayesian masks on h for the r, u and candidate gates.

  Returns:
    (h_last [B, H], states [L, B, H]). No gradient flows to `m` or `mh`.
  """
  return _scan_forward(xp, m, _cast(uu, xp[0].dtype), mh, save=False)


def _recurrence_fwd(xp, m, uu, mh):
  weights = _cast(uu, xp[0].dtype)
  h_last, (states, residuals) = _scan_forward(xp, m, weights, mh, save=True)
  return (h_last, states), (residuals, m, weights, mh, dtype_token(jax.tree.leaves(uu)[0]))


def _recurrence_bwd(saved, cotangents):
  (h_prev, r, u, hx, c), m, uu, mh, uu_dtype = saved
  dh_last, dstates = cotangents

  def step(dh, inputs):
    ds_t, m_t, h_t, r_t, u_t, hx_t, c_t = inputs
    dh = dh + ds_t
    keep = m_t[:, None]
    dn = jnp.where(keep, dh, 0.0)  # padded steps pass dh through untouched
    f = lambda a: a.astype(jnp.float32)  # pylint: disable=unnecessary-lambda-assignment
    dnf, uf, cf, rf = f(dn), f(u_t), f(c_t), f(r_t)
    da = dnf * (1.0 - uf) * (1.0 - cf * cf)  # through c = tanh(a)
    dpre_r = (da * f(hx_t) * rf * (1.0 - rf)).astype(dh.dtype)
    dpre_u = (dnf * (f(h_t) - cf) * uf * (1.0 - uf)).astype(dh.dtype)
    da_r = (da * rf).astype(dh.dtype)
    da = da.astype(dh.dtype)
    dg = (dpre_r, dpre_u, da_r)
    dh_prev = jnp.where(keep, dn * u_t + _recurrent_transpose(dg, uu, mh), dh)
    return dh_prev, _bits(tuple(d.astype(h_t.dtype) for d in (dpre_r, dpre_u, da)))

  _, stacked = jax.lax.scan(step, dh_last, (dstates, m, h_prev, r, u, hx, c), reverse=True)
  dpre_r, dpre_u, da = _from_bits(stacked)
  # the candidate's recurrent part hx enters as r * hx: its cotangent is da * r
  dg = (dpre_r, dpre_u, (da * r).astype(da.dtype))
  return (dpre_r, dpre_u, da), None, _recurrent_weight_grad(h_prev, dg, mh, uu_dtype.dtype), None


recurrence.defvjp(_recurrence_fwd, _recurrence_bwd)


def gru_scan(x, mask, W, U, b, Wx, Ux, bx, masks=None):
  """Runs the uni-skip GRU over time.

  Args:
    x: [B, L, D] word vectors.
    mask: [B, L], nonzero on real tokens; padded steps leave the state unchanged.
    W, U, b, Wx, Ux, bx: the uni-skip arrays ([D, 2H], [H, 2H], [2H], [D, H], [H, H], [H]), in
      x's dtype or float32 master copies (cast inside the products, float32 gradients).
    masks: None, or (x_masks [3, B, D], h_masks [3, B, H]) for the r, u and candidate inputs.

  Returns:
    (h_last [B, H], states [B, L, H]).
  """
  hidden = Ux.shape[0]
  biases = (b[:hidden], b[hidden:], bx)
  if masks is None:
    mh, uu = None, jnp.concatenate([U, Ux], axis=1)
    xp = _gates(matmul(x, jnp.concatenate([W, Wx], axis=1)))
  else:
    (mx, mh), uu = masks, (U[:, :hidden], U[:, hidden:], Ux)
    xp = tuple(matmul(x * mx[i][:, None], w)
               for i, w in enumerate((W[:, :hidden], W[:, hidden:], Wx)))
  xp = tuple(jnp.swapaxes(add_bias(y, bias), 0, 1) for y, bias in zip(xp, biases))
  h_last, states = recurrence(xp, jnp.swapaxes(mask, 0, 1) != 0, uu, mh)
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
    self.dropout = Dropout(rate, rngs=rngs)
    self.dtype = None  # compute dtype; None: the weights' (train.steps sets it, weights float32)

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
    # The word table stays float32 under a bfloat16 compute dtype (train.steps), and so do the
    # GRU's weights, which `gru_scan` takes as master copies: the GRU computes in `dtype`.
    x = self.embed(tokens).astype(self.dtype or self.W.dtype)
    masks = self.dropout_masks(tokens.shape[0], deterministic=deterministic)
    if masks is not None:
      masks = tuple(m.astype(x.dtype) for m in masks)
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
