"""Parameter trees on disk: flattening, safetensors round trips, checked loading."""
import errno
import json
import os

import numpy as np
import pytest
from flax import nnx

from rsvqa_jax.errors import RSVQAError
from rsvqa_jax.models import checkpoints


class _Tiny(nnx.Module):

  def __init__(self, rngs):
    self.layers = nnx.List([nnx.Linear(3, 4, rngs=rngs), nnx.Linear(4, 2, rngs=rngs)])
    self.norm = nnx.BatchNorm(2, rngs=rngs)
    self.drop = nnx.Dropout(0.5, rngs=rngs)


def _tree():
  rng = np.random.default_rng(0)
  return {"a": {0: {"kernel": rng.normal(size=(3, 4)).astype(np.float32)},
                1: {"bias": np.arange(2, dtype=np.int32)}},
          "b": rng.normal(size=(5,)).astype(np.float32)}


def _assert_same(got, want):
  got, want = checkpoints.flatten(got), checkpoints.flatten(want)
  assert set(got) == set(want)
  for key in want:
    assert got[key].dtype == want[key].dtype
    np.testing.assert_array_equal(got[key], want[key])


def test_flatten_unflatten():
  flat = checkpoints.flatten(_tree())
  assert sorted(flat) == ["a.0.kernel", "a.1.bias", "b"]
  back = checkpoints.unflatten(flat)
  assert set(back["a"]) == {0, 1}
  _assert_same(back, _tree())


def test_safetensors_round_trip(tmp_path):
  path = tmp_path / "t.safetensors"
  checkpoints.save_safetensors(path, _tree(), {"kind": "test", "depth": "3"})
  tree, meta = checkpoints.load_safetensors(path)
  _assert_same(tree, _tree())
  assert meta == {"kind": "test", "depth": "3"}


def test_safetensors_errors(tmp_path):
  with pytest.raises(RSVQAError, match="no such file"):
    checkpoints.load_safetensors(tmp_path / "absent.safetensors")
  bad = tmp_path / "bad.safetensors"
  bad.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00not json at all!")
  with pytest.raises(RSVQAError, match="bad.safetensors: not a readable safetensors"):
    checkpoints.load_safetensors(bad)


def test_module_state_round_trip_and_checks():
  model = _Tiny(nnx.Rngs(0))
  tree = checkpoints.state_tree(model)
  flat = checkpoints.flatten(tree)
  assert sorted(flat) == ["layers.0.bias", "layers.0.kernel", "layers.1.bias", "layers.1.kernel",
                          "norm.bias", "norm.mean", "norm.scale", "norm.var"]  # no RNG state
  other = _Tiny(nnx.Rngs(1))
  assert not np.allclose(other.layers[0].kernel[...], flat["layers.0.kernel"])
  checkpoints.load_into(other, tree, "src")
  _assert_same(checkpoints.state_tree(other), tree)

  wrong = dict(flat, **{"layers.1.kernel": np.zeros((2, 4), np.float32)})
  with pytest.raises(RSVQAError, match=r"src: key 'layers\.1\.kernel' has shape \(2, 4\).*\(4, 2\)"):
    checkpoints.load_into(other, checkpoints.unflatten(wrong), "src")
  missing = {k: v for k, v in flat.items() if k != "norm.var"}
  with pytest.raises(RSVQAError, match=r"missing key 'norm\.var' \(expected shape \(2,\)\)"):
    checkpoints.load_into(other, checkpoints.unflatten(missing), "src")
  extra = dict(flat, **{"head.kernel": np.zeros(1, np.float32)})
  with pytest.raises(RSVQAError, match="unexpected key.*'head.kernel'"):
    checkpoints.load_into(other, checkpoints.unflatten(extra), "src")


def test_load_into_refuses_non_finite_values_by_the_given_name():
  """NaN or inf is named, in the checkpoint's own key when `names` gives it; ints pass as is."""
  model = _Tiny(nnx.Rngs(0))
  flat = checkpoints.flatten(checkpoints.state_tree(model))
  before = np.array(model.layers[0].kernel[...])
  for value in (np.nan, -np.inf):
    kernel = np.where(np.eye(3, 4) > 0, value, 1.0).astype(np.float32)
    bad = checkpoints.unflatten(dict(flat, **{"layers.0.kernel": kernel}))
    with pytest.raises(RSVQAError, match=r"^src: key 'layers\.0\.kernel': 3 of 12 values are "
                                         r"not finite \(NaN or inf\); the weights are damaged"):
      checkpoints.load_into(model, bad, "src")
    with pytest.raises(RSVQAError, match=r"^f\.pth: key 'layers\.0\.weight': 3 of 12"):
      checkpoints.load_into(model, bad, "f.pth", {"layers.0.kernel": "layers.0.weight"})
  np.testing.assert_array_equal(model.layers[0].kernel[...], before)  # left as it was
  checkpoints.check_finite(np.arange(3), "ints")  # integers are finite by construction


def test_a_write_that_fails_is_an_os_error_naming_the_file(tmp_path):
  """safetensors reports its I/O errors as a SafetensorError: a full disk under `convert` or the
  synthetic ResNet's pretraining read 'an input this command does not check yet', naming no
  path. It is the OSError it stands for now (the command line's one line: PATH: what)."""
  path = str(tmp_path / "missing" / "model.safetensors")
  with pytest.raises(OSError) as e:
    checkpoints.save_safetensors(path, _tree())
  assert (e.value.errno, e.value.filename) == (errno.ENOENT, path)


def test_hf_weights_are_read_in_transformers_order_a_sharded_bin_too(tmp_path):
  """pytorch_model.bin.index.json (transformers 4.x without safetensors) was refused as no
  weights; it is read as the safetensors index is, each shard by the caller's reader."""
  read = lambda path: {os.path.basename(path): 1}
  index = tmp_path / "pytorch_model.bin.index.json"
  index.write_text(json.dumps({"weight_map": {"a": "pytorch_model-00002-of-00002.bin",
                                              "b": "pytorch_model-00001-of-00002.bin",
                                              "c": "pytorch_model-00002-of-00002.bin"}}))
  assert checkpoints.read_hf_weights(str(tmp_path), read) == (
      {"pytorch_model-00001-of-00002.bin": 1, "pytorch_model-00002-of-00002.bin": 1}, str(index))
  (tmp_path / "model.safetensors").write_text("")
  assert checkpoints.read_hf_weights(str(tmp_path), read)[0] == {"model.safetensors": 1}
  for name in ("model.safetensors", "pytorch_model.bin.index.json"):
    os.remove(tmp_path / name)
  with pytest.raises(RSVQAError, match=f"^{tmp_path}: no weights file .*; save the model with "
                                       "save_pretrained$"):
    checkpoints.read_hf_weights(str(tmp_path), read)


def test_a_pickled_model_is_named_without_torchs_allowlisting_advice(tmp_path):
  """torch.save(model) passed on torch's "Please use torch.serialization.add_safe_globals",
  which would unpickle the class's code; the remedy is to save its state dict."""
  torch = pytest.importorskip("torch", reason="the pickled model is written with torch")
  path = tmp_path / "whole.pth"
  torch.save(torch.nn.Sequential(torch.nn.Linear(2, 3)), path)
  with pytest.raises(RSVQAError) as error:
    checkpoints.load_torch_weights(path)
  assert str(error.value) == (f"{path}: holds a pickled torch.nn.modules.container.Sequential "
                              "object, not a state dict: load it in PyTorch and save "
                              "model.state_dict() (torch.save or safetensors)")
