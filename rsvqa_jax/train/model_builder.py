"""Builds the RSVQA model and its tokenizer from a config.

config.text picks the question encoder: "skipthoughts" (pretrained uni-skip files in
text.checkpoint, or random init of text.word_dim / text.hidden_dim when it is "random" or unset,
see config_lib.check_weights) or a BERT family encoder ("distilbert", "bert", "roberta") read
from a local Hugging Face folder. config.model is the fusion + classifier (models/vqa.py
head_config). Randomly initialised parts are built in one compiled program (checkpoints.jit_init)
rather than op by op.
"""
from flax import nnx

from rsvqa_jax.data.tokenizers import WordTokenizer
from rsvqa_jax.errors import RSVQAError
from rsvqa_jax.models.bert import FAMILIES
from rsvqa_jax.models.checkpoints import jit_init
from rsvqa_jax.models.skipthoughts import SkipThoughts
from rsvqa_jax.models.vqa import RSVQAModel, VQAHead
from rsvqa_jax.train.config_lib import RANDOM, is_random

ENCODERS = ("skipthoughts",) + FAMILIES


def load_text_encoder(text_cfg, words, rngs):
  """(pretrained encoder nnx.Module with out_dim, tokenizer with encode() and pad_id)."""
  if text_cfg.encoder == "skipthoughts":
    # Imported here: the loader reads large files and only pretrained runs need it.
    from rsvqa_jax.models.skipthoughts_params import load_skipthoughts  # pylint: disable=g-import-not-at-top
    encoder, tokenizer, _ = load_skipthoughts(
        text_cfg.checkpoint, words, allow_pickle=text_cfg.allow_pickle,
        dropout=text_cfg.dropout, bayesian=text_cfg.bayesian, rngs=rngs)
    return encoder, tokenizer
  if text_cfg.encoder in FAMILIES:
    if is_random(text_cfg.checkpoint):
      raise RSVQAError(f"config text.checkpoint={text_cfg.checkpoint!r}: text.encoder="
                       f"{text_cfg.encoder} needs a local Hugging Face folder (config.json, "
                       f"model.safetensors, tokenizer); random init ({RANDOM!r}) is Skip-thoughts "
                       "only")
    from rsvqa_jax.models.bert_params import load_bert  # pylint: disable=g-import-not-at-top
    encoder, tokenizer = load_bert(text_cfg.checkpoint, rngs=rngs)
    if encoder.config.family != text_cfg.encoder:
      raise RSVQAError(f"config text.checkpoint={text_cfg.checkpoint}: holds a "
                       f"{encoder.config.family} model, text.encoder says {text_cfg.encoder}")
    tokenizer.max_length = min(tokenizer.max_length, text_cfg.max_length)
    return encoder, tokenizer
  raise RSVQAError(f"config text.encoder={text_cfg.encoder!r}: choose one of {ENCODERS}")


def build(config, *, words, num_answers, image_dim):
  """(RSVQAModel, tokenizer); parameters drawn from config.seed."""
  t = config.text

  def head(q_dim, rngs):
    return VQAHead(config.model, q_dim=q_dim, v_dim=image_dim, num_answers=num_answers, rngs=rngs)

  if t.encoder == "skipthoughts" and is_random(t.checkpoint):
    tokenizer = WordTokenizer.build(words)

    def construct(params_key, dropout_key):
      rngs = nnx.Rngs(params=params_key, dropout=dropout_key)
      encoder = SkipThoughts(tokenizer.vocab_size, word_dim=t.word_dim, hidden_dim=t.hidden_dim,
                             dropout=t.dropout, bayesian=t.bayesian, rngs=rngs)
      return RSVQAModel(head(encoder.out_dim, rngs), encoder)

    return jit_init(construct, config.seed, config.seed + 1), tokenizer
  encoder, tokenizer = load_text_encoder(t, words, nnx.Rngs(params=config.seed,
                                                            dropout=config.seed + 1))
  head_module = jit_init(lambda p, d: head(encoder.out_dim, nnx.Rngs(params=p, dropout=d)),
                         config.seed, config.seed + 1)
  return RSVQAModel(head_module, encoder), tokenizer
