"""PyTorch references of the RSVQA architectures, written for the speed comparisons only.

They mirror rsvqa_jax's modules layer for layer: the Skip-thoughts uni-skip GRU as torch.nn.GRU
(620 -> 2400; its gate equations are the uni-skip ones) read at the last real token; the BERT
family as transformers' PyTorch DistilBertModel / BertModel / RobertaModel (random init from a
config, nothing downloaded) with the masked mean of the last layer; the fusions and classifier of
models/fusion.py; and a torchvision-layout ResNet (torchvision is not installed). The original
RSVQA code's model (syvlo/RSVQA model.py, for benchmarks.pipeline) is here as its code runs it:
the Bayesian uni-skip of skip-thoughts.torch (a per-step GRU cell, six dropout masks drawn once
per sequence) and the 1x1-conv head (OriginalHead) over ResNet-152's final map. A train step is
forward, cross-entropy, backward and Adam with the head and language-model learning rates.
This module imports torch at module level: only the benchmarks import it.
"""
import torch
from torch import nn
import torch.nn.functional as F


class Projection(nn.Module):

  def __init__(self, in_dim, out_dim, dropout):
    super().__init__()
    self.linear = nn.Linear(in_dim, out_dim)
    self.dropout = nn.Dropout(dropout)

  def forward(self, x):
    return self.dropout(torch.tanh(self.linear(x)))


class Mutan(nn.Module):

  def __init__(self, dim, out_dim, rank, mm_dim):
    super().__init__()
    self.rank, self.mm_dim = rank, mm_dim
    self.v_factors = nn.Linear(dim, rank * mm_dim, bias=False)
    self.q_factors = nn.Linear(dim, rank * mm_dim, bias=False)
    self.out = nn.Linear(mm_dim, out_dim)

  def forward(self, v, q):
    shape = v.shape[:-1] + (self.rank, self.mm_dim)
    return self.out((self.v_factors(v).view(shape) * self.q_factors(q).view(shape)).sum(-2))


class Head(nn.Module):
  """Fusion (mult | concat | mutan) + classifier, as rsvqa_jax.models.vqa.VQAHead."""

  def __init__(self, cfg, q_dim, v_dim, num_answers):
    super().__init__()
    self.kind = cfg.fusion
    self.v_proj = Projection(v_dim, cfg.hidden_dim, cfg.dropout)
    self.q_proj = Projection(q_dim, cfg.hidden_dim, cfg.dropout)
    self.mutan = (Mutan(cfg.hidden_dim, cfg.hidden_dim, cfg.mutan_rank, cfg.mutan_dim)
                  if cfg.fusion == "mutan" else None)
    fused = 2 * cfg.hidden_dim if cfg.fusion == "concat" else cfg.hidden_dim
    self.hidden = Projection(fused, cfg.classifier_dim, cfg.dropout)
    self.logits = nn.Linear(cfg.classifier_dim, num_answers)

  def forward(self, v, q):
    v, q = self.v_proj(v), self.q_proj(q)
    if self.kind == "mult":
      f = v * q
    elif self.kind == "concat":
      f = torch.cat([v, q], dim=-1)
    else:
      f = self.mutan(v, q)
    return self.logits(self.hidden(f))


class SkipThoughtsGRU(nn.Module):
  """Word table + GRU; the question vector is the state at the last real token."""

  def __init__(self, vocab_size, word_dim=620, hidden_dim=2400):
    super().__init__()
    self.out_dim = hidden_dim
    self.embed = nn.Embedding(vocab_size, word_dim, padding_idx=0)
    self.gru = nn.GRU(word_dim, hidden_dim, batch_first=True)

  def forward(self, tokens, mask):
    states, _ = self.gru(self.embed(tokens))
    last = mask.sum(1).clamp(min=1) - 1
    return states[torch.arange(tokens.shape[0]), last]


class BayesianUniSkip(nn.Module):
  """skip-thoughts.torch's BayesianUniSkip, as the original RSVQA code encodes its questions.

  A GRU cell looped in Python over time steps up to the batch's longest question (pads beyond a
  question's end run too; its state is read at its last real token). Variational dropout: six
  masks (r, u and candidate, on the word vector and on the state), drawn once per sequence and
  kept for every step; none in eval mode. No hidden-state biases, as the uni-skip has none.
  """

  def __init__(self, vocab_size, word_dim=620, hidden_dim=2400, dropout=0.25):
    super().__init__()
    self.out_dim, self.rate = hidden_dim, dropout
    self.embed = nn.Embedding(vocab_size, word_dim, padding_idx=0)
    self.x_gates = nn.ModuleList(nn.Linear(word_dim, hidden_dim) for _ in range(3))
    self.h_gates = nn.ModuleList(nn.Linear(hidden_dim, hidden_dim, bias=False) for _ in range(3))

  def draw_masks(self, batch, device=None):
    """(x masks [3, B, word_dim], h masks [3, B, hidden]) scaled by 1 / (1 - rate), or None."""
    if not self.training or self.rate == 0:
      return None
    keep = 1.0 - self.rate
    word_dim = self.embed.embedding_dim
    return tuple(torch.empty(3, batch, d, device=device).bernoulli_(keep).div_(keep)
                 for d in (word_dim, self.out_dim))

  def forward(self, tokens, mask, masks=None):
    """Question vectors [B, hidden]; `masks` (from draw_masks) replaces the fresh draw."""
    x = self.embed(tokens)
    if masks is None:
      masks = self.draw_masks(tokens.shape[0], tokens.device)
    mx, mh = masks if masks is not None else ((1.0,) * 3, (1.0,) * 3)
    lengths = mask.sum(1).clamp(min=1)
    h = x.new_zeros(tokens.shape[0], self.out_dim)
    states = []
    for t in range(int(lengths.max())):
      x_t = x[:, t]
      r = torch.sigmoid(self.x_gates[0](x_t * mx[0]) + self.h_gates[0](h * mh[0]))
      u = torch.sigmoid(self.x_gates[1](x_t * mx[1]) + self.h_gates[1](h * mh[1]))
      c = torch.tanh(self.x_gates[2](x_t * mx[2]) + r * self.h_gates[2](h * mh[2]))
      h = u * h + (1 - u) * c
      states.append(h)
    return torch.stack(states, 1)[torch.arange(tokens.shape[0]), lengths - 1]


class OriginalHead(nn.Module):
  """syvlo/RSVQA model.py's trainable part: 1x1 conv over the [B, C, h, w] ResNet map to
  C / (h * w) channels, flattened channel-first to C values; dropout -> linear -> tanh on each
  side; dropout(tanh(v * q)); linear 256 -> tanh -> dropout -> linear to the answers."""

  def __init__(self, map_shape, q_dim, num_answers, hidden_dim=1200, classifier_dim=256,
               dropout=0.5):
    super().__init__()
    h, w, c = map_shape
    self.flat = c
    self.visual = nn.Conv2d(c, c // (h * w), 1)
    self.dropout = nn.Dropout(dropout)
    self.v_linear = nn.Linear(c, hidden_dim)
    self.q_linear = nn.Linear(q_dim, hidden_dim)
    self.hidden = nn.Linear(hidden_dim, classifier_dim)
    self.logits = nn.Linear(classifier_dim, num_answers)

  def forward(self, fmap, q):
    v = self.visual(fmap).reshape(fmap.shape[0], self.flat)
    v = torch.tanh(self.v_linear(self.dropout(v)))
    q = torch.tanh(self.q_linear(self.dropout(q)))
    x = self.dropout(torch.tanh(v * q))
    return self.logits(self.dropout(torch.tanh(self.hidden(x))))


class HFEncoder(nn.Module):
  """transformers' PyTorch model of a family; masked mean of the last hidden layer."""

  def __init__(self, family, *, layers, hidden=768, heads=12, intermediate=3072,
               vocab_size=30522):
    super().__init__()
    import transformers  # pylint: disable=g-import-not-at-top
    if family == "distilbert":
      config = transformers.DistilBertConfig(vocab_size=vocab_size, dim=hidden, n_layers=layers,
                                             n_heads=heads, hidden_dim=intermediate)
      self.model = transformers.DistilBertModel(config)
    elif family == "bert":
      config = transformers.BertConfig(vocab_size=vocab_size, hidden_size=hidden,
                                       num_hidden_layers=layers, num_attention_heads=heads,
                                       intermediate_size=intermediate)
      self.model = transformers.BertModel(config, add_pooling_layer=False)
    elif family == "roberta":
      config = transformers.RobertaConfig(vocab_size=50265, hidden_size=hidden,
                                          num_hidden_layers=layers, num_attention_heads=heads,
                                          intermediate_size=intermediate,
                                          max_position_embeddings=514, pad_token_id=1)
      self.model = transformers.RobertaModel(config, add_pooling_layer=False)
    else:
      raise ValueError(f"unknown family {family!r}")
    self.out_dim = hidden

  def forward(self, tokens, mask):
    x = self.model(input_ids=tokens, attention_mask=mask).last_hidden_state
    m = mask.unsqueeze(-1).to(x.dtype)
    return (x * m).sum(1) / m.sum(1).clamp(min=1)


class VQA(nn.Module):
  """Optional text encoder + head; reads the same batch keys as RSVQAModel."""

  def __init__(self, head, text_encoder=None):
    super().__init__()
    self.head = head
    self.text_encoder = text_encoder

  def forward(self, batch):
    if "question_vector" in batch:
      q = batch["question_vector"]
    else:
      q = self.text_encoder(batch["tokens"], batch["mask"])
    return self.head(batch["image_features"], q)


def to_torch(batch, device="cpu"):
  """numpy batch -> torch tensors on `device` (int32 ids become int64, as embeddings want)."""
  out = {}
  for k, v in batch.items():
    t = torch.from_numpy(v)
    out[k] = (t.long() if k in ("tokens", "mask", "answer") else t).to(device)
  return out


def make_train_step(model, *, lr=1e-5, text_lr=1e-4, compile_model=False, autocast=None,
                    compile_mode=None):
  """A callable(batch) running one Adam train step; the text encoder gets `text_lr`.

  PyTorch gets its fastest Adam on each path: eager runs the fused kernel (`fused=True`, one
  pass over parameters, gradients and moments, on CPU and CUDA; the default single-tensor path
  makes ~18 memory passes); under torch.compile the optimizer step is compiled too (inductor
  fuses the update), so the compiled row compiles the whole step, not the forward alone.
  autocast: None, or a dtype (torch.bfloat16) for the forward pass under torch.autocast on the
  model's device (the mixed-precision counterpart of rsvqa_jax's compute_dtype).
  compile_mode: torch.compile's mode ("reduce-overhead": CUDA graphs on a GPU).
  A compiled step starts from empty dynamo caches: every step compiles the same `loss_fn` and
  `optimizer.step` code, so a process building many steps (benchmarks.run) reached dynamo's
  recompile limit (8) and ran its later "compiled" rows eagerly.
  """
  if compile_model:
    torch._dynamo.reset()  # pylint: disable=protected-access
  text = list(model.text_encoder.parameters()) if model.text_encoder is not None else []
  groups = [{"params": list(model.head.parameters()), "lr": lr}]
  if text:
    groups.append({"params": text, "lr": text_lr})
  optimizer = torch.optim.Adam(groups, fused=not compile_model)
  model.train()

  def loss_fn(batch):
    if autocast is None:
      return F.cross_entropy(model(batch), batch["answer"])
    device_type = next(model.parameters()).device.type
    with torch.autocast(device_type, dtype=autocast):
      logits = model(batch)
    return F.cross_entropy(logits.float(), batch["answer"])

  forward = torch.compile(loss_fn, mode=compile_mode) if compile_model else loss_fn
  update = torch.compile(optimizer.step, mode=compile_mode) if compile_model else optimizer.step

  def step(batch):
    optimizer.zero_grad(set_to_none=True)
    loss = forward(batch)
    loss.backward()
    update()
    return loss

  return step


class Bottleneck(nn.Module):
  expansion = 4

  def __init__(self, cin, planes, stride):
    super().__init__()
    cout = planes * self.expansion
    self.conv1 = nn.Conv2d(cin, planes, 1, bias=False)
    self.bn1 = nn.BatchNorm2d(planes)
    self.conv2 = nn.Conv2d(planes, planes, 3, stride, 1, bias=False)
    self.bn2 = nn.BatchNorm2d(planes)
    self.conv3 = nn.Conv2d(planes, cout, 1, bias=False)
    self.bn3 = nn.BatchNorm2d(cout)
    self.downsample = None
    if stride != 1 or cin != cout:
      self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                      nn.BatchNorm2d(cout))

  def forward(self, x):
    y = F.relu(self.bn1(self.conv1(x)))
    y = F.relu(self.bn2(self.conv2(y)))
    y = self.bn3(self.conv3(y))
    return F.relu(y + (x if self.downsample is None else self.downsample(x)))


class ResNet(nn.Module):
  """torchvision-layout bottleneck ResNet (152: blocks 3, 8, 36, 3); pooled 2048-d output."""

  def __init__(self, blocks=(3, 8, 36, 3), width=64):
    super().__init__()
    self.conv1 = nn.Conv2d(3, width, 7, 2, 3, bias=False)
    self.bn1 = nn.BatchNorm2d(width)
    cin, stages = width, []
    for i, count in enumerate(blocks):
      planes = width * 2**i
      layers = []
      for j in range(count):
        layers.append(Bottleneck(cin, planes, 2 if i > 0 and j == 0 else 1))
        cin = planes * Bottleneck.expansion
      stages.append(nn.Sequential(*layers))
    self.layer1, self.layer2, self.layer3, self.layer4 = stages
    self.out_features = cin

  def feature_map(self, x):
    """The final [B, C, h, w] map (layer4), before pooling."""
    x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 3, 2, 1)
    return self.layer4(self.layer3(self.layer2(self.layer1(x))))

  def forward(self, x):
    return self.feature_map(x).mean(dim=(2, 3))
