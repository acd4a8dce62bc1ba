"""ResNet: architecture facts, key map, error messages, and parity against PyTorch references."""
import functools
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from rsvqa_jax.errors import RSVQAError
from rsvqa_jax.models import checkpoints
from rsvqa_jax.models import resnet_params
from rsvqa_jax.models.resnet import ResNet, preprocess

TORCH_REASON = "PyTorch is needed for the parity references (pip install 'rsvqa_jax[torch]')"


@functools.cache
def _abstract(depth, width=8, num_classes=None):
  """Shapes only (shared between tests: never load weights into it)."""
  return nnx.eval_shape(lambda r: ResNet(depth, rngs=r, width=width, num_classes=num_classes),
                        nnx.Rngs(0))


def _random_tree(model, seed=0):
  """Random weights for an (abstract) model; BN variances kept positive."""
  rng = np.random.default_rng(seed)
  flat = {}
  for key, shape in checkpoints.flat_shapes(model).items():
    value = rng.normal(0.0, 0.1, shape)
    if key.endswith(".var"):
      value = rng.uniform(0.5, 2.0, shape)
    flat[key] = value.astype(np.float32)
  return checkpoints.unflatten(flat)


def _model(depth, width, num_classes=None):
  """A concrete model with random weights, built without JAX's (slow, eager) initialisers."""
  model = nnx.eval_shape(lambda r: ResNet(depth, rngs=r, width=width, num_classes=num_classes),
                         nnx.Rngs(0))
  checkpoints.load_into(model, _random_tree(model), "random")
  return model


def _forward(model, x):
  return nnx.jit(lambda m, x: m(x))(model, jnp.asarray(x))


def test_resnet152_parameter_count_matches_torchvision():
  model = _abstract(152, 64, 1000)
  params = nnx.state(model, nnx.Param)
  assert sum(int(np.prod(v.shape)) for v in jax.tree.leaves(params)) == 60_192_808
  assert model.out_features == 2048
  assert _abstract(34, width=64).out_features == 512


def test_key_map_round_trip_and_names():
  model = _abstract(50)
  tree = _random_tree(model)
  state_dict = resnet_params.to_torchvision(tree)
  assert state_dict["conv1.weight"].shape == (8, 3, 7, 7)
  assert state_dict["layer2.0.downsample.0.weight"].shape == (64, 32, 1, 1)
  assert "layer2.0.downsample.1.running_var" in state_dict
  assert "layer4.2.bn3.running_mean" in state_dict
  back = checkpoints.flatten(resnet_params.from_torchvision(state_dict, model, "sd"))
  for key, value in checkpoints.flatten(tree).items():
    np.testing.assert_array_equal(back[key], value)
  assert set(back) == set(checkpoints.flatten(tree))


def test_infer_depth_from_keys():
  for args in ((34,), (152, 64, 1000)):  # 18 and 50 are inferred in the parity tests
    state_dict = resnet_params.to_torchvision(jax.tree.map(
        lambda s: np.zeros(s.shape, np.bool_), checkpoints.state_tree(_abstract(*args))))
    assert resnet_params.infer_depth(state_dict, "sd") == args[0]


def test_mismatched_shape_error_names_key_and_both_shapes(tmp_path):
  import safetensors.numpy  # pylint: disable=g-import-not-at-top
  state_dict = resnet_params.to_torchvision(_random_tree(_abstract(18)))
  state_dict["layer3.1.conv2.weight"] = np.zeros((32, 32, 1, 1), np.float32)
  path = tmp_path / "bad.safetensors"
  safetensors.numpy.save_file({k: np.ascontiguousarray(v) for k, v in state_dict.items()}, str(path))
  with pytest.raises(RSVQAError, match=r"layer3\.1\.conv2\.weight.*\(32, 32, 1, 1\).*\(32, 32, 3, 3\)"):
    resnet_params.load_resnet(path)
  del state_dict["layer3.1.conv2.weight"]
  with pytest.raises(RSVQAError, match=r"missing key 'layer3\.1\.conv2\.weight'.*\(32, 32, 3, 3\)"):
    resnet_params.from_torchvision(state_dict, _abstract(18), "sd")


def test_depth_mismatch_reports_unexpected_key():
  state_dict = resnet_params.to_torchvision(_random_tree(_abstract(34)))
  with pytest.raises(RSVQAError, match=r"unexpected key 'layer1\.2\."):
    resnet_params.from_torchvision(state_dict, _abstract(18), "sd")


def test_weights_of_another_depth_than_asked_are_named_by_theirs(tmp_path):
  """ResNet-34 weights under image.arch=resnet18 read "unexpected key 'layer1.2...'", with no
  word that they are a ResNet-34's."""
  path = tmp_path / "r34.safetensors"
  _save(path, resnet_params.to_torchvision(_random_tree(_abstract(34))))
  with pytest.raises(RSVQAError, match=f"^{re.escape(str(path))}: holds a ResNet-34, not the "
                     r"ResNet-18 asked for: give ResNet-18 weights, or ask for resnet34 "
                     r"\(image.arch, --arch or --depth\)$"):
    resnet_params.load_resnet(path, 18)
  assert resnet_params.load_resnet(path, 34).depth == 34


def test_preprocess_scales_then_normalises():
  pixels = np.array([[[[0, 255, 128]]]], np.uint8)
  want = [(0 - 0.485) / 0.229, (1 - 0.456) / 0.224, (128 / 255 - 0.406) / 0.225]
  np.testing.assert_allclose(np.asarray(preprocess(pixels))[0, 0, 0], want, rtol=1e-6)


def test_forward_shapes_and_train_mode():
  model = _model(18, width=4, num_classes=3)
  x = jnp.asarray(np.random.default_rng(0).normal(size=(2, 64, 64, 3)), jnp.float32)
  out = _forward(model, x)
  assert out["pooled"].shape == (2, 32) and out["map"].shape == (2, 2, 2, 32)
  assert out["logits"].shape == (2, 3)
  np.testing.assert_allclose(out["pooled"], out["map"].mean(axis=(1, 2)), rtol=1e-6)
  before = np.asarray(model.bn1.mean[...])
  nnx.jit(lambda m, x: m(x, train=True))(model, x)
  assert not np.allclose(model.bn1.mean[...], before)  # running stats move only in train mode


# --- parity against PyTorch references ---------------------------------------------------------


def _randomise_batchnorm(torch, module, seed):
  gen = torch.Generator().manual_seed(seed)
  for m in module.modules():
    if isinstance(m, torch.nn.BatchNorm2d):
      n = m.num_features
      m.weight.data = torch.rand(n, generator=gen) + 0.5
      m.bias.data = torch.randn(n, generator=gen) * 0.1
      m.running_mean = torch.randn(n, generator=gen) * 0.1
      m.running_var = torch.rand(n, generator=gen) + 0.5
  module.eval()


def _assert_close(ours, ref):
  """Within 1e-4 relative to the tensor's scale (random deep nets reach values in the hundreds)."""
  ours, ref = np.asarray(ours), np.asarray(ref)
  assert ours.shape == ref.shape
  scale = np.abs(ref).max()
  assert scale > 1e-3  # a non-trivial reference
  np.testing.assert_allclose(ours, ref, rtol=1e-4, atol=1e-4 * max(scale, 1.0))


@pytest.mark.parametrize("layer_type,depth,hidden,shard", [
    ("basic", 18, (8, 16, 32, 64), "40KB"),  # model-0000N-of-... + model.safetensors.index.json
    ("bottleneck", 50, (32, 64, 128, 256), None),
])
def test_hf_resnet_parity(tmp_path, layer_type, depth, hidden, shard):
  torch = pytest.importorskip("torch", reason=TORCH_REASON)
  import transformers  # pylint: disable=g-import-not-at-top
  torch.manual_seed(0)
  config = transformers.ResNetConfig(
      embedding_size=8, hidden_sizes=list(hidden),
      depths=list(resnet_params.ARCHS[depth][1]), layer_type=layer_type,
      downsample_in_first_stage=False, downsample_in_bottleneck=False, num_labels=5)
  reference = transformers.ResNetForImageClassification(config)
  _randomise_batchnorm(torch, reference, seed=1)
  reference.save_pretrained(tmp_path, **({"max_shard_size": shard} if shard else {}))
  assert (tmp_path / "model.safetensors.index.json").exists() == bool(shard)
  x = np.random.default_rng(2).normal(size=(2, 64, 64, 3)).astype(np.float32)
  with torch.no_grad():
    ref = reference(torch.from_numpy(x.transpose(0, 3, 1, 2)), output_hidden_states=True)
  model = resnet_params.load_resnet(tmp_path)
  assert (model.depth, model.width, model.num_classes) == (depth, 8, 5)
  out = _forward(model, x)
  _assert_close(out["map"], ref.hidden_states[-1].numpy().transpose(0, 2, 3, 1))
  _assert_close(out["pooled"], ref.hidden_states[-1].numpy().mean(axis=(2, 3)))
  _assert_close(out["logits"], ref.logits.numpy())


def _torchvision_resnet(torch, depth, width, num_classes):
  """A PyTorch ResNet with torchvision's exact module names and v1.5 strides."""
  nn = torch.nn
  kind, counts = resnet_params.ARCHS[depth]
  expansion = 4 if kind == "bottleneck" else 1

  class Block(nn.Module):

    def __init__(self, cin, planes, stride):
      super().__init__()
      cout = planes * expansion
      if kind == "bottleneck":
        self.conv1 = nn.Conv2d(cin, planes, 1, bias=False)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride, 1, bias=False)
        self.conv3 = nn.Conv2d(planes, cout, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(cout)
      else:
        self.conv1 = nn.Conv2d(cin, planes, 3, stride, 1, bias=False)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
      self.bn1, self.bn2 = nn.BatchNorm2d(planes), nn.BatchNorm2d(planes)
      self.downsample = None
      if stride != 1 or cin != cout:
        self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                        nn.BatchNorm2d(cout))

    def forward(self, x):
      y = torch.relu(self.bn1(self.conv1(x)))
      y = self.bn2(self.conv2(y))
      if kind == "bottleneck":
        y = self.bn3(self.conv3(torch.relu(y)))
      return torch.relu(y + (x if self.downsample is None else self.downsample(x)))

  class Net(nn.Module):

    def __init__(self):
      super().__init__()
      self.conv1 = nn.Conv2d(3, width, 7, 2, 3, bias=False)
      self.bn1 = nn.BatchNorm2d(width)
      cin = width
      for i, count in enumerate(counts):
        blocks = []
        for j in range(count):
          blocks.append(Block(cin, width * 2**i, 2 if i > 0 and j == 0 else 1))
          cin = width * 2**i * expansion
        setattr(self, f"layer{i + 1}", nn.Sequential(*blocks))
      self.fc = nn.Linear(cin, num_classes)

    def forward(self, x):
      x = nn.functional.max_pool2d(torch.relu(self.bn1(self.conv1(x))), 3, 2, 1)
      x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
      return x, self.fc(x.mean(dim=(2, 3)))

  return Net()


@pytest.mark.parametrize("depth,suffix", [(50, ".pth"), (18, ".safetensors")])
def test_torchvision_layout_parity(tmp_path, depth, suffix):
  torch = pytest.importorskip("torch", reason=TORCH_REASON)
  import safetensors.torch  # pylint: disable=g-import-not-at-top
  torch.manual_seed(3)
  reference = _torchvision_resnet(torch, depth, width=8, num_classes=7)
  _randomise_batchnorm(torch, reference, seed=4)
  state_dict = reference.state_dict()
  assert "layer1.0.downsample.0.weight" in state_dict or depth == 18
  assert "layer2.0.downsample.1.num_batches_tracked" in state_dict
  path = tmp_path / f"resnet{depth}{suffix}"
  if suffix == ".pth":
    torch.save(state_dict, path)
  else:
    safetensors.torch.save_file({k: v.contiguous() for k, v in state_dict.items()}, str(path))
  x = np.random.default_rng(5).normal(size=(2, 64, 64, 3)).astype(np.float32)
  with torch.no_grad():
    ref_map, ref_logits = reference(torch.from_numpy(x.transpose(0, 3, 1, 2)))
  model = resnet_params.load_resnet(path)
  assert model.depth == depth
  out = _forward(model, x)
  _assert_close(out["map"], ref_map.numpy().transpose(0, 2, 3, 1))
  _assert_close(out["pooled"], ref_map.numpy().mean(axis=(2, 3)))
  _assert_close(out["logits"], ref_logits.numpy())


def test_the_config_offers_the_depths_the_model_builds():
  from rsvqa_jax import config  # pylint: disable=g-import-not-at-top
  from rsvqa_jax.models import resnet  # pylint: disable=g-import-not-at-top
  assert config.RESNET_DEPTHS == tuple(sorted(resnet.ARCHS))


def _save(path, state_dict, metadata=None):
  import safetensors.numpy  # pylint: disable=g-import-not-at-top
  safetensors.numpy.save_file({k: np.ascontiguousarray(v) for k, v in state_dict.items()},
                              str(path), metadata=metadata)
  return path


def test_weights_that_are_not_floating_point_are_refused(tmp_path):
  state_dict = resnet_params.to_torchvision(_random_tree(_abstract(18)))
  state_dict["layer2.0.conv1.weight"] = state_dict["layer2.0.conv1.weight"].view(np.int32)
  with pytest.raises(RSVQAError, match=r"key 'layer2\.0\.conv1\.weight': dtype int32, expected "
                                       "floating-point weights"):
    resnet_params.load_resnet(_save(tmp_path / "int.safetensors", state_dict))


def test_damaged_state_dict_keys_and_config_are_one_line_errors(tmp_path):
  state_dict = resnet_params.to_torchvision(_random_tree(_abstract(18)))
  cases = [({"layer1.x.conv1.weight": np.zeros(1, np.float32)},
            r"unexpected key 'layer1\.x\.conv1\.weight'"),
           ({"layer1": np.zeros(1, np.float32)},
            r"key 'layer1\.0\.bn1\.bias' lies under key 'layer1', which is a tensor itself"),
           ({"conv1.weight": np.zeros((0, 3, 7, 7), np.float32)},
            r"key 'conv1\.weight' has shape \(0, 3, 7, 7\): no output channels")]
  for i, (edit, message) in enumerate(cases):
    with pytest.raises(RSVQAError, match=message):
      resnet_params.load_resnet(_save(tmp_path / f"{i}.safetensors", {**state_dict, **edit}))
  config = tmp_path / "hf" / "config.json"
  config.parent.mkdir()
  for text, message in (("[]", "expected a JSON object of config keys"),
                        ('{"model_type": "resnet", "depths": 3}', "depths 3: expected a list")):
    config.write_text(text)
    with pytest.raises(RSVQAError, match=f"{config}: {message}"):
      resnet_params.load_resnet(config.parent)


def test_a_pth_entry_not_named_by_a_string_is_refused(tmp_path):
  torch = pytest.importorskip("torch", reason=TORCH_REASON)
  path = tmp_path / "r.pth"
  torch.save({"conv1.weight": torch.zeros(8, 3, 7, 7), 3: torch.zeros(2)}, path)
  with pytest.raises(RSVQAError, match=f"{path}: entry 3 is named by a int, not a string"):
    resnet_params.read_state_dict(path)


@pytest.mark.parametrize("field,value,message", [
    ("depth", "abc", "header field depth='abc': expected a whole number >= 1"),
    ("width", None, "header field width=None: expected a whole number >= 1"),
    ("width", "0", "header field width='0': expected a whole number >= 1"),
    ("num_classes", "-3", "header field num_classes='-3': expected a whole number >= 0"),
    ("depth", "7", r"header field depth=7 is no ResNet depth \[18, 34, 50, 101, 152\]")])
def test_a_converted_file_with_a_damaged_header_is_refused(tmp_path, field, value, message):
  model = _abstract(18)
  metadata = resnet_params.resnet_metadata(model)
  if value is None:
    del metadata[field]
  else:
    metadata[field] = value
  path = _save(tmp_path / "c.safetensors", checkpoints.flatten(_random_tree(model)), metadata)
  with pytest.raises(RSVQAError, match=f"{path}: {message}"):
    resnet_params.load_resnet(path)


def test_a_converted_file_with_integer_weights_is_refused(tmp_path):
  model = _abstract(18)
  flat = checkpoints.flatten(_random_tree(model))
  flat["conv1.kernel"] = flat["conv1.kernel"].view(np.int32)
  path = _save(tmp_path / "c.safetensors", flat, resnet_params.resnet_metadata(model))
  with pytest.raises(RSVQAError, match=r"key 'conv1\.kernel': dtype int32, expected floating"):
    resnet_params.load_resnet(path)


def test_a_timm_hub_folder_reads_as_a_torchvision_state_dict(tmp_path):
  """timm's Hub folders (config.json naming an `architecture`, no model_type; torchvision's key
  names) were refused: "model_type is None, expected 'resnet'"."""
  tree = _random_tree(_abstract(18, num_classes=3))
  _save(tmp_path / "model.safetensors", resnet_params.to_torchvision(tree))
  config = tmp_path / "config.json"
  config.write_text('{"architecture": "resnet18", "num_classes": 3, "pretrained_cfg": {}}')
  model = resnet_params.load_resnet(tmp_path)
  assert (model.depth, model.width, model.num_classes) == (18, 8, 3)
  np.testing.assert_array_equal(checkpoints.flatten(checkpoints.state_tree(model))["fc.kernel"],
                                checkpoints.flatten(tree)["fc.kernel"])
  config.write_text('{"architecture": "resnet34"}')  # the depth is checked against the weights
  with pytest.raises(RSVQAError, match=r"missing key 'layer1\.2\.[a-z0-9.]+' \(ResNet-34"):
    resnet_params.load_resnet(tmp_path)
  config.write_text('{"architecture": "resnet50d"}')
  with pytest.raises(RSVQAError, match=f"^{config}: architecture 'resnet50d' is not one of "
                                       "resnet18, resnet34, resnet50, resnet101, resnet152 "):
    resnet_params.load_resnet(tmp_path)


def test_a_resnet_under_one_prefix_is_read_when_the_file_holds_nothing_else(tmp_path):
  """A Lightning checkpoint's `model.` keys said "missing key 'conv1.weight'; not a ResNet state
  dict". With every key under the prefix it is stripped; beside other keys it is named."""
  state_dict = resnet_params.to_torchvision(_random_tree(_abstract(18)))
  model = resnet_params.load_resnet(
      _save(tmp_path / "all.safetensors", {f"model.{k}": v for k, v in state_dict.items()}))
  np.testing.assert_array_equal(model.conv1.kernel[...],
                                state_dict["conv1.weight"].transpose(2, 3, 1, 0))
  loss = np.zeros(3, np.float32)
  path = _save(tmp_path / "more.safetensors",
               {**{f"model.{k}": v for k, v in state_dict.items()}, "loss.weight": loss})
  with pytest.raises(RSVQAError, match=f"^{path}: missing key 'conv1.weight'; its ResNet keys "
                                       r"start with 'model.', beside 1 other key\(s\) \(first "
                                       r"'loss.weight'\): save the ResNet's state dict alone, "
                                       "without that prefix$"):
    resnet_params.load_resnet(path)
  path = _save(tmp_path / "two.safetensors", {**{f"model.{k}": v for k, v in state_dict.items()},
                                               **{f"ema.{k}": v for k, v in state_dict.items()}})
  with pytest.raises(RSVQAError, match="missing key 'conv1.weight'; holds ResNets under 'ema.' "
                                       "and 'model.': save the state dict of one$"):
    resnet_params.load_resnet(path)


def test_a_pth_training_checkpoint_is_read_through_its_model_entry(tmp_path):
  """{"model": state_dict} (torchvision's reference scripts) said "entry 'model' is a dict, not
  a tensor"; it is read as a {"state_dict": ...} checkpoint is."""
  torch = pytest.importorskip("torch", reason=TORCH_REASON)
  state_dict = resnet_params.to_torchvision(_random_tree(_abstract(18)))
  path = tmp_path / "checkpoint.pth"
  torch.save({"model": {k: torch.from_numpy(v) for k, v in state_dict.items()}, "epoch": 3},
             path)
  assert resnet_params.read_state_dict(path).keys() == state_dict.keys()
