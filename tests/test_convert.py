"""`rsvqa-jax convert`: original checkpoints -> our safetensors files, through the CLI."""
import json
import warnings

import numpy as np
import pytest
from flax import nnx

from rsvqa_jax import cli
from rsvqa_jax.models import checkpoints
from rsvqa_jax.models import resnet_params
from rsvqa_jax.models.resnet import ResNet
from test_train_support import warnings_of_rsvqa_jax


@pytest.fixture(name="main")
def fixture_main():
  return cli.main


@pytest.fixture(name="torchvision_file")
def fixture_torchvision_file(tmp_path):
  """A ResNet-18 (width 8, 4 classes) state dict in torchvision names as .safetensors."""
  import safetensors.numpy  # pylint: disable=g-import-not-at-top
  model = nnx.eval_shape(lambda r: ResNet(18, rngs=r, width=8, num_classes=4), nnx.Rngs(0))
  rng = np.random.default_rng(0)
  flat = {k: rng.uniform(0.5, 1.5, s).astype(np.float32)
          for k, s in checkpoints.flat_shapes(model).items()}
  state_dict = resnet_params.to_torchvision(checkpoints.unflatten(flat))
  state_dict["bn1.num_batches_tracked"] = np.array(7, np.int64)
  path = tmp_path / "resnet18.safetensors"
  safetensors.numpy.save_file({k: np.ascontiguousarray(v) for k, v in state_dict.items()}, str(path))
  return path, flat


def test_convert_resnet_to_safetensors_and_back(main, torchvision_file, tmp_path, capsys):
  src, flat = torchvision_file
  out = tmp_path / "ours.safetensors"
  assert main(["convert", "--kind", "resnet", "--src", str(src), "--out", str(out)]) == 0
  assert "ResNet-18" in capsys.readouterr().out
  tree, meta = checkpoints.load_safetensors(out)
  assert meta == {"format": "rsvqa_jax", "kind": "resnet", "depth": "18", "width": "8",
                  "num_classes": "4"}
  got = checkpoints.flatten(tree)
  assert set(got) == set(flat)
  np.testing.assert_array_equal(got["layer2.0.down_conv.kernel"], flat["layer2.0.down_conv.kernel"])
  model = resnet_params.load_resnet(out)  # our own format loads back, architecture from metadata
  assert (model.depth, model.width, model.num_classes) == (18, 8, 4)
  np.testing.assert_array_equal(model.layer4[1].bn2.var[...], flat["layer4.1.bn2.var"])


def test_convert_refuses_an_out_that_is_not_safetensors(main, torchvision_file, tmp_path, capsys):
  """Any other --out once became an orbax folder that no loader reads (x.pth a folder too)."""
  src, _ = torchvision_file
  for out in (tmp_path / "r18_orbax", tmp_path / "x.pth"):
    assert main(["convert", "--kind", "resnet", "--src", str(src), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.strip().splitlines() == [
        f"rsvqa-jax convert: error: --out {out}: give a file path ending in .safetensors "
        "(lower case); convert writes no other form"]
    assert not out.exists()


def test_convert_refuses_non_finite_weights(main, torchvision_file, tmp_path, capsys):
  """A NaN (or inf) array is named with the file and the checkpoint's own key; nothing written."""
  import safetensors.numpy  # pylint: disable=g-import-not-at-top
  src, _ = torchvision_file
  state_dict = safetensors.numpy.load_file(str(src))
  for value in (np.nan, np.inf):
    bad = tmp_path / "bad.safetensors"
    state_dict["conv1.weight"] = np.full_like(state_dict["conv1.weight"], value)
    safetensors.numpy.save_file(state_dict, str(bad))
    out = tmp_path / "out.safetensors"
    assert main(["convert", "--kind", "resnet", "--src", str(bad), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    size = state_dict["conv1.weight"].size
    assert err.strip().splitlines() == [
        f"rsvqa-jax convert: error: {bad}: key 'conv1.weight': {size} of {size} values are not "
        "finite (NaN or inf); the weights are damaged: export or download them again"]
    assert not out.exists()


def test_convert_errors_name_the_key(main, torchvision_file, tmp_path, capsys):
  src, _ = torchvision_file
  out = str(tmp_path / "x.safetensors")
  assert main(["convert", "--kind", "resnet", "--src", str(src), "--out", out, "--depth", "34"]) == 2
  err = capsys.readouterr().err
  assert ("holds a ResNet-18, not the ResNet-34 asked for: give ResNet-34 weights, or ask for "
          "resnet18 (image.arch, --arch or --depth)") in err  # it read "missing key 'layer1.2..."
  assert main(["convert", "--kind", "resnet", "--src", str(tmp_path / "nope.pth"), "--out", out]) == 2
  assert "nope.pth: no such file" in capsys.readouterr().err


def test_convert_hf_resnet_folder(main, tmp_path):
  """An HF ResNet folder with HF key names (written without torch)."""
  import safetensors.numpy  # pylint: disable=g-import-not-at-top
  model = nnx.eval_shape(lambda r: ResNet(18, rngs=r, width=4), nnx.Rngs(0))
  flat = {k: np.full(s, i, np.float32)
          for i, (k, s) in enumerate(checkpoints.flat_shapes(model).items())}
  renames = {}
  for name, value in resnet_params.to_torchvision(checkpoints.unflatten(flat)).items():
    if name.count(".") == 1:
      hf = name.replace("conv1.", "embedder.embedder.convolution.").replace(
          "bn1.", "embedder.embedder.normalization.")
    else:
      stage, block, module, leaf = name.split(".", 3)
      prefix = f"encoder.stages.{int(stage[5:]) - 1}.layers.{block}."
      if module == "downsample":
        idx, leaf = leaf.split(".")
        hf = prefix + ("shortcut.convolution." if idx == "0" else "shortcut.normalization.") + leaf
      else:
        kind = "convolution" if module.startswith("conv") else "normalization"
        hf = prefix + f"layer.{int(module[-1]) - 1}.{kind}.{leaf}"
    renames["resnet." + hf] = np.ascontiguousarray(value)
  folder = tmp_path / "hf"
  folder.mkdir()
  safetensors.numpy.save_file(renames, str(folder / "model.safetensors"))
  (folder / "config.json").write_text(json.dumps({
      "model_type": "resnet", "layer_type": "basic", "depths": [2, 2, 2, 2],
      "embedding_size": 4, "hidden_sizes": [4, 8, 16, 32]}))
  out = tmp_path / "hf.safetensors"
  assert main(["convert", "--kind", "resnet", "--src", str(folder), "--out", str(out)]) == 0
  got = checkpoints.flatten(checkpoints.load_safetensors(out)[0])
  assert set(got) == set(flat)
  for key, value in flat.items():
    np.testing.assert_array_equal(got[key], value)

  (folder / "config.json").write_text(json.dumps({"model_type": "resnet",
                                                  "downsample_in_bottleneck": True}))
  assert main(["convert", "--kind", "resnet", "--src", str(folder), "--out", str(out)]) == 2


@pytest.fixture(name="skip_src")
def fixture_skip_src(tmp_path, capsys):
  """(Skip-thoughts folder with a 6-d word table and a 5-d GRU, synthetic dataset folder)."""
  from rsvqa_jax.data import synthetic  # pylint: disable=g-import-not-at-top
  data = tmp_path / "data"
  synthetic.generate(str(data), "lr", images=3, seed=0, questions_per_image=4)
  capsys.readouterr()  # synth's stage line, where an earlier test set up the command's logging
  word_dim, hidden = 6, 5
  rng = np.random.default_rng(0)
  f = lambda *shape: rng.standard_normal(shape).astype(np.float32)
  src = tmp_path / "skip"
  src.mkdir()
  np.savez(src / "uni_skip.npz", encoder_W=f(word_dim, 2 * hidden), encoder_b=f(2 * hidden),
           encoder_U=f(hidden, 2 * hidden), encoder_Wx=f(word_dim, hidden), encoder_bx=f(hidden),
           encoder_Ux=f(hidden, hidden))
  dictionary = ["UNK", "is", "there", "a", "the", "how", "many"]
  (src / "dictionary.txt").write_text("\n".join(dictionary) + "\n")
  np.save(src / "utable.npy", f(len(dictionary), word_dim))
  return src, data


@pytest.fixture(name="bert_src")
def fixture_bert_src(tmp_path, capsys):
  """A one-layer, 8-wide BERT folder (model.safetensors, tokenizer) written with transformers."""
  torch = pytest.importorskip("torch", reason="the tiny BERT folder is written with PyTorch")
  import transformers  # pylint: disable=g-import-not-at-top
  torch.manual_seed(0)
  folder = tmp_path / "bert"
  config = transformers.BertConfig(vocab_size=30, hidden_size=8, num_hidden_layers=1,
                                   num_attention_heads=2, intermediate_size=16,
                                   max_position_embeddings=16)
  transformers.BertModel(config).save_pretrained(folder)
  vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(25)]
  # vocab=, not vocab_file=: transformers 5 ignores the file and keeps only the 5 special tokens
  transformers.BertTokenizerFast(vocab={w: i for i, w in enumerate(vocab)}).save_pretrained(folder)
  capsys.readouterr()  # transformers' progress bars
  return folder


def test_convert_skipthoughts(main, skip_src, tmp_path, capsys):
  from rsvqa_jax.data import tokenizers  # pylint: disable=g-import-not-at-top
  src, data = skip_src
  word_dim = 6
  out = tmp_path / "skip.safetensors"
  assert main(["convert", "--kind", "skipthoughts", "--src", str(src), "--data", str(data),
               "--out", str(out)]) == 0
  assert "not in the dictionary" in capsys.readouterr().out
  tree, meta = checkpoints.load_safetensors(out)
  vocab = json.loads(meta["vocab"])
  assert meta["kind"] == "skipthoughts"
  assert vocab[:2] == [tokenizers.PAD, tokenizers.UNK] and {"is", "there"} <= set(vocab)
  assert "buildings" not in vocab  # not in the dictionary, so no row of its own
  assert checkpoints.flatten(tree)["embed.embedding"].shape == (len(vocab), word_dim)
  np.testing.assert_array_equal(checkpoints.flatten(tree)["Ux"], np.load(src / "uni_skip.npz")["encoder_Ux"])
  assert main(["convert", "--kind", "skipthoughts", "--src", str(src), "--out", str(out)]) == 2


def test_convert_bert(main, bert_src, tmp_path):
  folder = bert_src
  out = tmp_path / "bert.safetensors"
  assert main(["convert", "--kind", "bert", "--src", str(folder), "--out", str(out)]) == 0
  tree, meta = checkpoints.load_safetensors(out)
  assert meta["kind"] == "bert" and json.loads(meta["config"])["hidden_size"] == 8
  sizes = sorted(v.size for v in checkpoints.flatten(tree).values())
  assert 30 * 8 in sizes and 16 * 8 in sizes


def test_convert_refuses_an_out_inside_src_on_a_folder_or_over_a_file(main, tmp_path, capsys):
  src = tmp_path / "hf"
  src.mkdir()
  (tmp_path / "taken.safetensors").write_text("x")
  (tmp_path / "dir.safetensors").mkdir()
  for out, message in [
      (src / "model.safetensors", f"--out {src / 'model.safetensors'}: inside --src {src}"),
      (tmp_path / "nope" / "w.safetensors", "its folder"),
      (tmp_path / "dir.safetensors", "is a folder; give a .safetensors file path"),
      (tmp_path / "taken.safetensors", "exists; remove it or give another path"),
      (tmp_path / "w.SafeTensors", "give a file path ending in .safetensors (lower case)")]:
    assert main(["convert", "--kind", "bert", "--src", str(src), "--out", str(out)]) == 2
    assert message in capsys.readouterr().err


def _convert(main, kind, src, out, data=None):
  """Exit status of `rsvqa-jax convert --kind kind --src src --out out [--data data]`."""
  extra = ["--data", str(data)] if data else []
  return main(["convert", "--kind", kind, "--src", str(src), "--out", str(out)] + extra)


def _error_line(capsys):
  lines = capsys.readouterr().err.strip().splitlines()
  assert len(lines) == 1, lines  # one line, no traceback
  return lines[0]


def test_convert_refuses_a_negative_batchnorm_variance(main, torchvision_file, tmp_path, capsys):
  """It would load, then sqrt(var + eps) makes every feature NaN; torch names and ours alike."""
  import safetensors.numpy  # pylint: disable=g-import-not-at-top
  src, _ = torchvision_file
  good = tmp_path / "good.safetensors"
  assert _convert(main, "resnet", src, good) == 0
  capsys.readouterr()
  for path, key in ((src, "layer1.0.bn1.running_var"), (good, "layer1.0.bn1.var")):
    state_dict = safetensors.numpy.load_file(str(path))
    state_dict[key][:3] = -0.5
    bad = tmp_path / f"bad_{path.name}"
    meta = checkpoints.load_safetensors(path)[1]
    safetensors.numpy.save_file(state_dict, str(bad), metadata=meta or None)
    out = tmp_path / "out.safetensors"
    assert _convert(main, "resnet", bad, out) == 2
    size = state_dict[key].size
    assert _error_line(capsys) == (
        f"rsvqa-jax convert: error: {bad}: key {key!r}: 3 of {size} BatchNorm variances are "
        "negative (features would be NaN); the weights are damaged: export or download them again")
    assert not out.exists()


@pytest.mark.parametrize("key,value,rank", [
    ("fc.weight", np.array(1.0, np.float32), "2 dimensions (classes, features)"),  # IndexError
    ("fc.weight", np.zeros(4, np.float32), "2 dimensions (classes, features)"),
    ("conv1.weight", np.zeros(1, np.float32), "4 dimensions (out, in, height, width)")])
def test_convert_names_a_sizing_key_of_another_rank(main, torchvision_file, tmp_path, capsys, key,
                                                     value, rank):
  """conv1.weight and fc.weight give the model's width and classes: a 0-d one raised IndexError,
  a 1-D conv1.weight of one value built a width-1 model whose error named bn1.bias."""
  import safetensors.numpy  # pylint: disable=g-import-not-at-top
  src, _ = torchvision_file
  state_dict = safetensors.numpy.load_file(str(src))
  state_dict[key] = value
  bad = tmp_path / "bad.safetensors"
  safetensors.numpy.save_file(state_dict, str(bad))
  out = tmp_path / "out.safetensors"
  assert _convert(main, "resnet", bad, out) == 2
  assert _error_line(capsys) == (
      f"rsvqa-jax convert: error: {bad}: key {key!r} has shape {value.shape}, expected {rank}; "
      "the file is damaged or not a ResNet state dict")
  assert not out.exists()


def test_convert_refuses_a_nan_in_a_bert_weight(main, bert_src, tmp_path, capsys):
  import safetensors.numpy  # pylint: disable=g-import-not-at-top
  weights = bert_src / "model.safetensors"
  state_dict = safetensors.numpy.load_file(str(weights))
  key = "encoder.layer.0.attention.self.query.weight"
  state_dict[key][0, 0] = np.nan
  safetensors.numpy.save_file(state_dict, str(weights))
  out = tmp_path / "out.safetensors"
  assert _convert(main, "bert", bert_src, out) == 2
  assert _error_line(capsys) == (
      f"rsvqa-jax convert: error: {bert_src}: key {key!r}: 1 of 64 values are not finite (NaN or "
      "inf); the weights are damaged: export or download them again")
  assert not out.exists()


def test_convert_refuses_a_bert_folder_whose_tokenizer_does_not_fit_its_word_table(
    main, bert_src, tmp_path, capsys):
  """`train` refuses it; convert, said to check that the folder loads, passed it."""
  import transformers  # pylint: disable=g-import-not-at-top
  vocab = {w: i for i, w in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])}
  transformers.BertTokenizerFast(vocab=vocab).save_pretrained(bert_src)
  out = tmp_path / "out.safetensors"
  assert _convert(main, "bert", bert_src, out) == 2
  assert _error_line(capsys) == (
      f"rsvqa-jax convert: error: {bert_src}: the tokenizer has 5 tokens, the model's word table "
      "30 rows; a cut or another model's vocabulary file?")
  assert not out.exists()


def test_a_dictionary_of_another_length_than_the_word_table_is_warned_of(skip_src, caplog):
  """A header line above the words shifted every word onto the next one's vector; no shape
  check sees it (the rows needed exist)."""
  from rsvqa_jax.models import skipthoughts_params  # pylint: disable=g-import-not-at-top
  src, _ = skip_src
  vocab = ["<pad>", "<unk>", "is", "there"]
  with warnings_of_rsvqa_jax(caplog):
    skipthoughts_params.load_skipthoughts(src, vocab)
  assert not [r for r in caplog.records if r.levelname == "WARNING"]
  words = (src / "dictionary.txt").read_text()
  (src / "dictionary.txt").write_text("# words\n" + words)
  with warnings_of_rsvqa_jax(caplog):
    skipthoughts_params.load_skipthoughts(src, vocab)
  [message] = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
  assert message.startswith(f"{src / 'dictionary.txt'}: 8 lines, but the word table "
                            f"{src / 'utable.npy'} has 7 rows; a word's vector is the row of its "
                            "line number"), message


@pytest.mark.parametrize("bad", ["encoder_U", "utable"])
def test_convert_refuses_a_nan_in_a_skipthoughts_weight(main, skip_src, tmp_path, capsys, bad):
  src, data = skip_src
  if bad == "utable":  # row 1 ("is") is a word of the synthetic questions
    table = np.load(src / "utable.npy")
    table[1, 0] = np.inf
    np.save(src / "utable.npy", table)
    where = f"{src / 'utable.npy'}: the rows of the vocabulary's words"
  else:
    with np.load(src / "uni_skip.npz") as npz:
      arrays = dict(npz)
    arrays[bad][0, 0] = np.nan
    np.savez(src / "uni_skip.npz", **arrays)
    where = f"{src / 'uni_skip.npz'}: key {bad!r}"
  out = tmp_path / "out.safetensors"
  assert _convert(main, "skipthoughts", src, out, data) == 2
  line = _error_line(capsys)
  assert line.startswith(f"rsvqa-jax convert: error: {where}: 1 of ") and "not finite" in line
  assert not out.exists()


def _damage_value(flat, metadata):
  key = sorted(flat)[0]
  message = f"key {key!r} reads back other than it was converted"
  return {**flat, key: flat[key] + 1}, metadata, message


def _drop_key(flat, metadata):
  key = sorted(flat)[-1]
  return {k: v for k, v in flat.items() if k != key}, metadata, f"missing key {key!r}"


@pytest.mark.parametrize("damage", [_damage_value, _drop_key])
@pytest.mark.parametrize("kind", ["resnet", "bert", "skipthoughts"])
def test_convert_reads_its_file_back(main, request, tmp_path, monkeypatch, capsys, kind, damage):
  """A file that the loader refuses, or reads other than converted, fails convert and is removed."""
  if kind == "resnet":
    src, data = request.getfixturevalue("torchvision_file")[0], None
  elif kind == "bert":
    src, data = request.getfixturevalue("bert_src"), None
  else:
    src, data = request.getfixturevalue("skip_src")
  save = checkpoints.save_safetensors
  want = []

  def damaged_save(path, tree, metadata=None):
    flat, metadata, message = damage(checkpoints.flatten(tree), metadata)
    want.append(message)
    save(path, checkpoints.unflatten(flat), metadata)

  out = tmp_path / "out.safetensors"
  monkeypatch.setattr(checkpoints, "save_safetensors", damaged_save)
  assert _convert(main, kind, src, out, data) == 2
  line = _error_line(capsys)
  assert line.startswith(f"rsvqa-jax convert: error: {out}: ") and want[0] in line, line
  assert not out.exists()
  monkeypatch.setattr(checkpoints, "save_safetensors", save)
  assert _convert(main, kind, src, out, data) == 0 and out.exists()


def _torch_variants(torch, path):
  """The torchvision_file's state dict as torch tensors."""
  import safetensors.numpy  # pylint: disable=g-import-not-at-top
  return {k: torch.from_numpy(v) for k, v in safetensors.numpy.load_file(str(path)).items()}


def test_convert_names_a_cut_pth_file_in_one_short_line(main, torchvision_file, tmp_path, capsys):
  """A .pth cut part way (a download stopped) gave torch's paragraph of guesses, 400 characters
  cut off mid-sentence."""
  torch = pytest.importorskip("torch", reason="the .pth file is written with torch")
  src, _ = torchvision_file
  whole = tmp_path / "whole.pth"
  torch.save(_torch_variants(torch, src), whole)
  cut = tmp_path / "cut.pth"
  cut.write_bytes(whole.read_bytes()[:whole.stat().st_size // 2])
  out = tmp_path / "out.safetensors"
  assert _convert(main, "resnet", cut, out) == 2
  assert _error_line(capsys) == (
      f"rsvqa-jax convert: error: {cut}: not a readable PyTorch file (PytorchStreamReader failed "
      "reading zip archive: failed finding central directory); it is cut or damaged: download or "
      "save it again")
  assert not out.exists()


def test_convert_reads_parameters_and_wrapped_keys_as_plain_weights(main, torchvision_file,
                                                                    tmp_path, capsys):
  """state_dict(keep_vars=True) saves Parameters (numpy() refused them: a traceback); a
  DataParallel model's `module.` keys were stripped from a .pth and not from a .safetensors."""
  torch = pytest.importorskip("torch", reason="the .pth files are written with torch")
  import safetensors.torch  # pylint: disable=g-import-not-at-top
  src, flat = torchvision_file
  state = _torch_variants(torch, src)
  torch.save({k: torch.nn.Parameter(v) if v.is_floating_point() else v for k, v in state.items()},
             tmp_path / "params.pth")
  safetensors.torch.save_file({f"module.{k}": v for k, v in state.items()},
                              str(tmp_path / "wrapped.safetensors"))
  for name in ("params.pth", "wrapped.safetensors"):
    out = tmp_path / f"{name}.out.safetensors"
    assert main(["convert", "--kind", "resnet", "--src", str(tmp_path / name), "--out",
                 str(out)]) == 0, capsys.readouterr().err
    got = checkpoints.flatten(checkpoints.load_safetensors(out)[0])
    assert set(got) == set(flat)
    np.testing.assert_array_equal(got["layer4.1.bn2.var"], flat["layer4.1.bn2.var"])
  safetensors.torch.save_file({**{f"module.{k}": v for k, v in state.items()},
                               "conv1.weight": state["conv1.weight"].clone()},
                              str(tmp_path / "both.safetensors"))
  assert _convert(main, "resnet", tmp_path / "both.safetensors", tmp_path / "o.safetensors") == 2
  assert _error_line(capsys) == (f"rsvqa-jax convert: error: {tmp_path / 'both.safetensors'}: "
                                 "holds both 'conv1.weight' and 'module.conv1.weight'; keep one "
                                 "model's weights")


@pytest.mark.parametrize("variant,message", [
    ("meta", "is on the meta device (shapes without values)"),
    ("quantized", "is quantized (torch.qint8): save the state dict of the float model"),
    ("float8", "a dtype NumPy cannot hold"),
    ("float8.pth", "torch.float8_e4m3fn, which NumPy cannot hold")])  # .float() read it
def test_convert_refuses_tensors_without_plain_values_in_one_line(main, torchvision_file,
                                                                  tmp_path, capsys, variant,
                                                                  message):
  torch = pytest.importorskip("torch", reason="the files are written with torch")
  import safetensors.torch  # pylint: disable=g-import-not-at-top
  state = _torch_variants(torch, torchvision_file[0])
  conv = "conv1.weight"
  if variant == "float8.pth":
    path = tmp_path / "w.pth"
    torch.save({**state, conv: state[conv].to(torch.float8_e4m3fn)}, path)
  elif variant == "float8":
    path = tmp_path / "w.safetensors"
    safetensors.torch.save_file({**state, conv: state[conv].to(torch.float8_e4m3fn)}, str(path))
  else:
    path = tmp_path / "w.pth"
    with warnings.catch_warnings():  # torch deprecates making quantized tensors: users have them
      warnings.simplefilter("ignore", UserWarning)
      odd = (state[conv].to("meta") if variant == "meta"
             else torch.quantize_per_tensor(state[conv], 0.1, 0, torch.qint8))
    torch.save({**state, conv: odd}, path)
  with warnings.catch_warnings(record=True) as caught:  # torch's 4 lines on quantized storage
    warnings.simplefilter("always")
    assert _convert(main, "resnet", path, tmp_path / "o.safetensors") == 2
  assert [str(w.message) for w in caught] == []
  line = _error_line(capsys)
  assert line.startswith(f"rsvqa-jax convert: error: {path}: key {conv}") and message in line, line
