"""The original-pipeline benchmark's PyTorch model of the original RSVQA code: the Bayesian
uni-skip keeps one dropout mask per sequence for every step (by hand and against rsvqa_jax's GRU),
the original head matches ours, and both pipelines run a toy batch."""
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from benchmarks import inputs
from rsvqa_jax.models.skipthoughts import gru_scan
from rsvqa_jax.models.vqa import make_head

torch = pytest.importorskip("torch", reason="the benchmark's original side runs in PyTorch")
from benchmarks import pipeline, torch_reference as tr  # pylint: disable=g-import-not-at-top


def _sigmoid(x):
  return 1.0 / (1.0 + np.exp(-x))


def test_bayesian_uni_skip_uses_one_mask_per_sequence_by_hand():
  """word 1, state 1, input weights 1, state weights 0: each gate reads x_t times its mask."""
  gru = tr.BayesianUniSkip(4, word_dim=1, hidden_dim=1, dropout=0.5).train()
  with torch.no_grad():
    gru.embed.weight.copy_(torch.tensor([[0.0], [0.5], [-1.0], [2.0]]))
    for lin in gru.x_gates:
      lin.weight.fill_(1.0)
      lin.bias.zero_()
    for lin in gru.h_gates:
      lin.weight.zero_()
  masks = gru.draw_masks(2)
  assert masks[0].shape == (3, 2, 1) and masks[1].shape == (3, 2, 1)  # no time axis
  assert set(np.unique(masks[0].numpy())) <= {0.0, 2.0}
  mx = torch.tensor([[[2.0], [0.0]], [[0.0], [2.0]], [[2.0], [2.0]]])  # [gate, sequence, 1]
  tokens = torch.tensor([[1, 2, 3], [3, 1, 0]])
  mask = torch.tensor([[1, 1, 1], [1, 1, 0]])
  with torch.no_grad():
    got = gru(tokens, mask, masks=(mx, torch.ones(3, 2, 1))).numpy()
  words = {1: 0.5, 2: -1.0, 3: 2.0}
  want = []
  for b, (seq, n) in enumerate((([1, 2, 3], 3), ([3, 1], 2))):
    h = 0.0
    for t in seq[:n]:
      x = words[t]
      u = _sigmoid(x * mx[1, b, 0].item())  # the same mask at every step of sequence b
      c = np.tanh(x * mx[2, b, 0].item())
      h = u * h + (1 - u) * c
    want.append([h])
  np.testing.assert_allclose(got, want, rtol=1e-6)


def test_bayesian_uni_skip_matches_rsvqa_jax_gru_under_the_same_masks():
  d, h, b = 3, 4, 2
  gru = tr.BayesianUniSkip(6, word_dim=d, hidden_dim=h, dropout=0.25).train()
  torch.manual_seed(1)
  masks = gru.draw_masks(b)
  tokens = torch.tensor([[1, 2, 3, 4], [5, 1, 0, 0]])
  mask = (tokens != 0).long()
  with torch.no_grad():
    got = gru(tokens, mask, masks=masks).numpy()
    x = gru.embed(tokens).numpy()
    torch.manual_seed(1)  # a forward of its own draws these very masks, once for all steps
    np.testing.assert_array_equal(gru(tokens, mask).numpy(), got)
  w = lambda lin: lin.weight.detach().numpy().T
  W = np.concatenate([w(gru.x_gates[0]), w(gru.x_gates[1])], axis=1)
  b_ru = np.concatenate([gru.x_gates[i].bias.detach().numpy() for i in (0, 1)])
  U = np.concatenate([w(gru.h_gates[0]), w(gru.h_gates[1])], axis=1)
  want, _ = gru_scan(jnp.asarray(x), jnp.asarray(mask.numpy()), W, U, b_ru, w(gru.x_gates[2]),
                     w(gru.h_gates[2]), gru.x_gates[2].bias.detach().numpy(),
                     masks=tuple(jnp.asarray(m.numpy()) for m in masks))
  np.testing.assert_allclose(got, np.asarray(want), rtol=1e-5, atol=1e-6)


def test_original_head_matches_rsvqa_jax_original_head():
  map_shape, q_dim = (2, 2, 8), 5
  cfg = pipeline.BASELINE.model.copy_and_resolve_references()
  cfg.update(dict(hidden_dim=6, classifier_dim=4))
  ours = make_head(cfg, q_dim=q_dim, v_dim=32, num_answers=3, map_shape=map_shape,
                   rngs=nnx.Rngs(0))
  ref = tr.OriginalHead(map_shape, q_dim, 3, hidden_dim=6, classifier_dim=4).eval()
  pairs = [(ref.visual, ours.visual.conv), (ref.v_linear, ours.fusion.v_linear),
           (ref.q_linear, ours.fusion.q_linear), (ref.hidden, ours.classifier.hidden.linear),
           (ref.logits, ours.classifier.logits)]
  with torch.no_grad():
    for layer, mine in pairs:
      layer.weight.copy_(torch.from_numpy(np.asarray(mine.kernel[...]).T.copy()).reshape(
          layer.weight.shape))
      layer.bias.copy_(torch.from_numpy(np.array(mine.bias[...])))
  rng = np.random.default_rng(0)
  fmap = rng.normal(size=(3,) + map_shape).astype(np.float32)
  q = rng.normal(size=(3, q_dim)).astype(np.float32)
  got = ours(fmap.reshape(3, -1), q, deterministic=True)
  with torch.no_grad():
    want = ref(torch.from_numpy(fmap).permute(0, 3, 1, 2).contiguous(), torch.from_numpy(q))
  np.testing.assert_allclose(np.asarray(got), want.numpy(), rtol=1e-5, atol=1e-5)


def test_both_pipelines_run_a_toy_batch():
  questions = inputs.make_questions(inputs.BATCH, word_width=pipeline.ORIGINAL_LENGTH)
  assert questions.word_tokens.shape == (inputs.BATCH, 20)
  original, map_shape, threads = pipeline._torch_side(torch, "toy", questions, "cpu")  # pylint: disable=protected-access
  assert map_shape == (2, 2, 256)
  assert threads["torch.get_num_threads"] == threads["xla_intra_op_threads"] >= 1
  for kind, p in original.items():
    assert p.run_batch() > 0
    recorded = {k for k, v in p.components.items() if v}
    assert recorded == ({"batch", "resnet", "uni_skip_forward", "train_step"} if kind == "frozen"
                        else {"batch", "resnet", "train_step"})
  features = np.ones((pipeline.LR_IMAGES, int(np.prod(map_shape))), np.float32)
  ours = pipeline.CachedPipeline(True, questions, "toy", features, map_shape, rows=140)
  ours.warmup(probe_batches=2)
  assert ours.widths and max(ours.widths) <= 20
  assert ours.run_steps(1) > 0
  assert not ours.step.state.params["text"]  # the uni-skip stays frozen, as in the original


def test_pipeline_section_renders_each_rows_components_and_device():
  from benchmarks import run, timing  # pylint: disable=g-import-not-at-top
  s = timing.summarize([1.0, 2.0, 3.0])
  section = {"device": "cuda", "feature_cache_once_s": s, "components_original_s_per_batch": {},
             "rows": [{"model": name, "original_components_s_per_batch": {"resnet": s},
                       **{k: s for k in ("original_s_per_1000", "tool_s_per_1000",
                                         "original_epoch_s", "tool_epoch_s", "speedup")}}
                      for name in pipeline.NAMES.values()]}
  text = "\n".join(run._md_pipeline(section))  # pylint: disable=protected-access
  for name in pipeline.NAMES.values():
    assert f"- original components ({name}; cuda), s per batch of 70: resnet 2 (1-3)" in text


def test_frozen_ceiling_is_the_uni_skip_forward_alone_at_the_peak(monkeypatch):
  from benchmarks import run, timing, train_steps  # pylint: disable=g-import-not-at-top
  peaks = {"float32": 2e9, "bfloat16": 4e9}
  monkeypatch.setattr(timing, "f32_peak_probe",
                      lambda mode, torch=None, dtype=None: (lambda: peaks[dtype.__name__], {}))
  gru = train_steps.sizes("toy")["gru"]
  d, h = gru["word_dim"], gru["hidden_dim"]
  row = {"original_s_per_1000": {"median": 1000.0}}  # 70 s per batch of 70
  ceiling = pipeline._frozen_ceiling("toy", None, row, 4.0, "float32")  # pylint: disable=protected-access
  flops = 2 * 70 * 4 * (d * 3 * h + h * 3 * h)  # 4 tokens: input and recurrent products
  assert ceiling["uni_skip_forward_gflop"] == pytest.approx(flops * 1e-9)
  assert ceiling["speedup"] == pytest.approx(70.0 / (flops / 2e9))
  bf16 = pipeline._frozen_ceiling("toy", None, row, 4.0, "bfloat16")  # pylint: disable=protected-access
  assert bf16["speedup"] == pytest.approx(2 * ceiling["speedup"])  # at the bf16 peak
  s = timing.summarize([1.0])
  section = {"feature_cache_once_s": s, "components_original_s_per_batch": {},
             "rows": [{"model": "m", "ceiling": ceiling, **{k: s for k in (
                 "original_s_per_1000", "tool_s_per_1000", "original_epoch_s", "tool_epoch_s",
                 "speedup")}}]}
  line = [l for l in run._md_pipeline(section) if l.startswith("| m |")][0]  # pylint: disable=protected-access
  assert line.endswith(f"| {run.fmt(ceiling['speedup'])} |")
