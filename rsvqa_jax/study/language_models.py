"""A study's language models: the configured checkpoint, or a random-init stand-in folder.

Without pretrained weights (synthetic studies) each language model gets a folder of its own
architecture, written once under DIR/cache/lm/ and keyed by the dataset's words and its sizes.
"""
import json
import os

import numpy as np

from rsvqa_jax import config as config_lib
from rsvqa_jax import storage
from rsvqa_jax.data import tokenizers
from rsvqa_jax.train import inputs


def _folder(cache, lm, key):
  """One folder per architecture and vocabulary (config.is_stand_in knows them by this name)."""
  return os.path.join(cache, config_lib.LM_DIR, f"{lm}_random_{key}")


def checkpoint(lm, e, dataset, cache):
  """The text.checkpoint of language model `lm` (study.lm entry `e`): its configured one, or a
  random-init folder (Skip-thoughts: with `update_bias` in its entry; without, the model's own
  init; DistilBERT at the entry's sizes, which study/checks.py checked)."""
  if e.checkpoint or (e.encoder == "skipthoughts" and "update_bias" not in e):
    return e.checkpoint
  words = inputs.dataset_words(dataset)
  if e.encoder == "skipthoughts":
    sizes = dict(word_dim=e.word_dim, hidden_dim=e.hidden_dim, update_bias=e.update_bias,
                 seed=e.get("init_seed", 0))
    key = storage.identity_key({"words": words, "skipthoughts": True, **sizes})
    return random_skipthoughts(_folder(cache, lm, key), words, **sizes)
  sizes = dict(dim=e.dim, layers=e.layers, heads=e.heads, hidden_dim=e.hidden_dim,
               dropout=e.get("dropout", 0.1))
  key = storage.identity_key({"words": words, "seed": e.get("init_seed", 0), **sizes})
  return random_distilbert(_folder(cache, lm, key), words, seed=e.get("init_seed", 0), **sizes)


def random_distilbert(folder, words, *, dim, layers, heads, hidden_dim, dropout=0.1,
                      max_positions=64, seed=0):
  """A random-init DistilBERT-architecture Hugging Face folder (no pretrained weights here).

  Weights follow the Hugging Face initialisation (N(0, 0.02) matrices and embeddings, zero
  biases, unit LayerNorms); the WordPiece vocabulary is the special tokens plus `words`.
  Written once (temporary folder renamed when complete); returns `folder`.
  """
  if os.path.isfile(os.path.join(folder, "model.safetensors")):
    return folder
  from safetensors.numpy import save_file  # pylint: disable=g-import-not-at-top
  special = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
  vocab = special + [w for w in words if not w.startswith("[")]
  rng = np.random.default_rng(seed)
  normal = lambda *shape: (0.02 * rng.standard_normal(shape)).astype(np.float32)
  t = {"distilbert.embeddings.word_embeddings.weight": normal(len(vocab), dim),
       "distilbert.embeddings.position_embeddings.weight": normal(max_positions, dim),
       "distilbert.embeddings.LayerNorm.weight": np.ones(dim, np.float32),
       "distilbert.embeddings.LayerNorm.bias": np.zeros(dim, np.float32)}
  linears = {"attention.q_lin": (dim, dim), "attention.k_lin": (dim, dim),
             "attention.v_lin": (dim, dim), "attention.out_lin": (dim, dim),
             "ffn.lin1": (hidden_dim, dim), "ffn.lin2": (dim, hidden_dim)}
  for i in range(layers):
    base = f"distilbert.transformer.layer.{i}."
    for name, shape in linears.items():
      t[f"{base}{name}.weight"] = normal(*shape)
      t[f"{base}{name}.bias"] = np.zeros(shape[0], np.float32)
    for norm in ("sa_layer_norm", "output_layer_norm"):
      t[f"{base}{norm}.weight"] = np.ones(dim, np.float32)
      t[f"{base}{norm}.bias"] = np.zeros(dim, np.float32)
  config = {"model_type": "distilbert", "vocab_size": len(vocab), "dim": dim, "n_layers": layers,
            "n_heads": heads, "hidden_dim": hidden_dim, "max_position_embeddings": max_positions,
            "activation": "gelu", "dropout": dropout, "pad_token_id": 0}
  parent, name = os.path.split(os.path.abspath(folder))
  with storage.building_owned(parent, name) as tmp:
    save_file(t, os.path.join(tmp, "model.safetensors"))
    with open(os.path.join(tmp, "config.json"), "w", encoding="utf-8") as f:
      json.dump(config, f, indent=1)
    tokenizer = tokenizers.hf_transformers().BertTokenizer(
        vocab={w: i for i, w in enumerate(vocab)}, do_lower_case=True)
    tokenizer.save_pretrained(tmp)
  return folder


def random_skipthoughts(folder, words, *, word_dim, hidden_dim, update_bias=2.0, seed=0):
  """A random-init uni-skip folder (uni_skip.npz, utable_f32.npy, dictionary.txt) for `words`.

  A stand-in for the pretrained encoder, which keeps a whole question in its final state: word
  vectors N(0, 1), input weights N(0, 1 / word_dim) (unit pre-activations), orthogonal
  recurrent weights, and the update gate's bias at `update_bias` (2: the state keeps ~88% per
  word, so the question's first words still count at its end). Frozen, at 32 -> 64 dims, "How
  many roads / forests are there in the image ?" then end 0.55 apart (norms ~2); at the model's
  own init (N(0, 0.1) weights) 0.04 apart (norms ~0.2), and with the gates at 0.5 only 0.23 of
  3.3: the frozen stand-in could hardly tell which object is asked about.
  Written once (temporary folder renamed when complete); returns `folder`.
  """
  from rsvqa_jax.models import skipthoughts_params as stp  # pylint: disable=g-import-not-at-top
  if os.path.isfile(os.path.join(folder, stp.UNI_SKIP)):
    return folder
  rng = np.random.default_rng(seed)
  vocab = [stp.UNK] + [w for w in words if w != stp.UNK]
  normal = lambda scale, *shape: (scale * rng.standard_normal(shape)).astype(np.float32)
  ortho = lambda n: np.linalg.qr(rng.standard_normal((n, n)))[0].astype(np.float32)
  bias = np.zeros(2 * hidden_dim, np.float32)
  bias[hidden_dim:] = update_bias  # pre[:hidden] is the reset gate, pre[hidden:] the update gate
  arrays = {"encoder_W": normal(word_dim ** -0.5, word_dim, 2 * hidden_dim),
            "encoder_U": np.concatenate([ortho(hidden_dim), ortho(hidden_dim)], axis=1),
            "encoder_b": bias, "encoder_Wx": normal(word_dim ** -0.5, word_dim, hidden_dim),
            "encoder_Ux": ortho(hidden_dim), "encoder_bx": np.zeros(hidden_dim, np.float32)}
  parent, name = os.path.split(os.path.abspath(folder))
  with storage.building_owned(parent, name) as tmp:
    np.savez(os.path.join(tmp, stp.UNI_SKIP), **arrays)
    np.save(os.path.join(tmp, stp.PLAIN_UTABLE), normal(1.0, len(vocab), word_dim))
    with open(os.path.join(tmp, stp.DICTIONARY), "w", encoding="utf-8") as f:
      f.write("\n".join(vocab) + "\n")
  return folder
