"""The original RSVQA code's head (model.head=original): parity with a PyTorch re-statement of
syvlo/RSVQA models/model.py, one training run on a tiny map, and the refusals of its inputs."""
import os

import jax
import numpy as np
import pytest
from flax import nnx

from rsvqa_jax import config as config_lib
from rsvqa_jax.config import model_section
from rsvqa_jax.errors import RSVQAError
from rsvqa_jax.features.image_cache import ImageFeatures
from rsvqa_jax.models.vqa import OriginalHead, RSVQAModel, make_head
from rsvqa_jax.train import loop
from rsvqa_jax.train import run as run_lib
from test_train_support import tiny_config, tiny_task

BASELINE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "configs",
                        "rsvqa_baseline.py")
TORCH_REASON = "PyTorch is needed for the parity reference (pip install 'rsvqa_jax[torch]')"


def _torch_original(torch, map_shape, q_dim, hidden, fc, num_classes):
  """VQAModel of the original models/model.py without its frozen ResNet and uni-skip: the map
  and the question vector come in as they leave those two."""
  nn = torch.nn
  h, w, c = map_shape

  class VQAModel(nn.Module):

    def __init__(self):
      super().__init__()
      self.dropoutV = nn.Dropout(0.5)
      self.dropoutF = nn.Dropout(0.5)
      self.linear_q = nn.Linear(q_dim, hidden)
      self.visual = nn.Conv2d(c, c // (h * w), 1)
      self.linear_v = nn.Linear(c, hidden)
      self.linear_classif1 = nn.Linear(hidden, fc)
      self.linear_classif2 = nn.Linear(fc, num_classes)

    def forward(self, input_v, x_q):
      x_v = self.visual(input_v).view(-1, c)
      x_v = torch.tanh(self.linear_v(self.dropoutV(x_v)))
      x_q = torch.tanh(self.linear_q(self.dropoutV(x_q)))
      x = self.dropoutF(torch.tanh(torch.mul(x_v, x_q)))
      x = self.dropoutF(torch.tanh(self.linear_classif1(x)))
      return self.linear_classif2(x)

  return VQAModel()


def _cfg(**kw):
  cfg = model_section()
  cfg.update(dict(head="original", hidden_dim=6, classifier_dim=4, **kw))
  return cfg


def _copy_weights(torch, head, ref):
  """Our parameters into the reference: Linear weight = kernel.T, Conv2d 1x1 weight likewise."""
  pairs = [(ref.visual, head.visual.conv), (ref.linear_v, head.fusion.v_linear),
           (ref.linear_q, head.fusion.q_linear),
           (ref.linear_classif1, head.classifier.hidden.linear),
           (ref.linear_classif2, head.classifier.logits)]
  with torch.no_grad():
    for layer, ours in pairs:
      kernel = torch.from_numpy(np.asarray(ours.kernel[...]).T.copy())
      layer.weight.copy_(kernel.reshape(layer.weight.shape))
      layer.bias.copy_(torch.from_numpy(np.array(ours.bias[...])))


def test_parity_with_the_original_model_forward():
  torch = pytest.importorskip("torch", reason=TORCH_REASON)
  map_shape, q_dim = (2, 3, 12), 5  # not square: the flatten order must be torch's NCHW one
  head = OriginalHead(_cfg(), q_dim=q_dim, map_shape=map_shape, num_answers=3, rngs=nnx.Rngs(0))
  ref = _torch_original(torch, map_shape, q_dim, 6, 4, 3).eval()
  _copy_weights(torch, head, ref)
  rng = np.random.default_rng(0)
  fmap = rng.normal(size=(4,) + map_shape).astype(np.float32)
  q = rng.normal(size=(4, q_dim)).astype(np.float32)
  got = RSVQAModel(head)({"image_features": fmap.reshape(4, -1), "question_vector": q})
  with torch.no_grad():
    want = ref(torch.from_numpy(fmap).permute(0, 3, 1, 2).contiguous(), torch.from_numpy(q)).numpy()
  np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)
  assert head.visual.out_dim == 12 and head.visual.conv.kernel.shape == (12, 2)


def test_training_mode_draws_dropout_and_the_map_must_divide():
  head = make_head(_cfg(), q_dim=5, v_dim=48, num_answers=3, map_shape=(2, 2, 12),
                   rngs=nnx.Rngs(0))
  batch = {"image_features": np.ones((2, 48), np.float32),
           "question_vector": np.ones((2, 5), np.float32)}
  model = RSVQAModel(head)
  assert not np.allclose(model(batch, deterministic=False), model(batch, deterministic=False))
  with pytest.raises(RSVQAError, match="must divide"):
    make_head(_cfg(), q_dim=5, v_dim=48, num_answers=3, map_shape=(3, 3, 12), rngs=nnx.Rngs(0))
  with pytest.raises(RSVQAError, match="model.head=paper"):
    make_head(_cfg(fusion="mutan"), q_dim=5, v_dim=48, num_answers=3, map_shape=(2, 2, 12),
              rngs=nnx.Rngs(0))


def _map_task():
  """tiny_task whose features also carry a 2x2 map (the pooled vector is the map's mean)."""
  dataset, features = tiny_task(n_images=20)
  spread = np.random.default_rng(1).uniform(0.5, 1.5, size=(20, 2, 2, 8))
  spread /= spread.mean(axis=(1, 2), keepdims=True)
  fmap = (features.features[:, None, None, :] * spread).astype(np.float32)
  return dataset, ImageFeatures(features.features, features.image_ids, "<memory>", fmap)


def _original_config():
  """tiny_config with the original-code settings of configs/rsvqa_baseline.py."""
  c = tiny_config(batch_size=8, num_epochs=1)
  baseline = config_lib.load(BASELINE)
  c.model.head, c.image.map = baseline.model.head, baseline.image.map
  c.optim.text_lr = baseline.optim.text_lr
  for key in ("frozen", "bayesian", "dropout", "strip_question_mark"):
    c.text[key] = baseline.text[key]
  return c


def test_one_epoch_of_the_original_head_trains(tmp_path):
  dataset, features = _map_task()
  config = _original_config()
  summary = loop.train(config, str(tmp_path / "w"), dataset=dataset, features=features,
                       log=lambda m: None)
  assert summary["finished"] and summary["step"] == 7  # 12 train images x 5 questions // 8
  params = jax.device_get(summary["state"].params)
  assert not params["text"]  # the Bayesian uni-skip stays frozen, its dropout still draws
  fresh = run_lib.build(config, str(tmp_path / "fresh"), ["train"], dataset=dataset,
                        features=features)
  assert fresh.question_vectors is None and "?" not in fresh.tokenizer.vocab
  assert fresh.features.features.shape == (20, 32)
  kernel = params["head"]["head"]["visual"]["conv"]["kernel"]
  assert kernel.shape == (8, 2) and np.isfinite(kernel).all()
  assert not np.allclose(kernel, nnx.state(fresh.model.head.visual.conv, nnx.Param)["kernel"][...])


@pytest.mark.parametrize("change,features_kind,match", [
    ({"image.map": False}, "map", "image.map=true"),
    ({}, "pooled", "carry none"),
    ({"data.augment_variants": ("hflip",)}, "map", "augment_variants"),
])
def test_inputs_of_the_original_head_are_checked(tmp_path, change, features_kind, match):
  dataset, features = _map_task()
  if features_kind == "pooled":
    features = tiny_task(n_images=20)[1]
  config = _original_config()
  for key, value in change.items():
    section, name = key.split(".")
    config[section][name] = value
  with pytest.raises(RSVQAError, match=match):
    run_lib.build(config, str(tmp_path / "w"), ["train"], dataset=dataset, features=features)


def test_the_baseline_config_is_the_original_code():
  c = config_lib.load(BASELINE)
  assert (c.model.head, c.model.fusion, c.image.map, c.image.arch) == (
      "original", "mult", True, "resnet152")
  assert (c.text.bayesian, c.text.dropout, c.text.frozen, c.text.strip_question_mark) == (
      True, 0.25, True, True)
  assert (c.optim.lr, c.train.batch_size, c.train.num_epochs, c.text.max_length) == (
      1e-5, 70, 150, 20)
  assert not config_lib.caches_questions(c)  # its dropout changes the vectors every step
