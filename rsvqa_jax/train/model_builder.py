"""Builds the RSVQA model and its tokenizer from a config.

config.text picks the question encoder: "skipthoughts" (pretrained uni-skip files in
text.checkpoint, or random init of text.word_dim / text.hidden_dim when it is empty) or a BERT
family encoder ("distilbert", "bert", "roberta") read from a local Hugging Face folder.
config.model is the fusion + classifier (models/vqa.py head_config).
"""
from flax import nnx

from rsvqa_jax.data.tokenizers import WordTokenizer
from rsvqa_jax.errors import RSVQAError
from rsvqa_jax.models.bert import FAMILIES
from rsvqa_jax.models.skipthoughts import SkipThoughts
from rsvqa_jax.models.vqa import RSVQAModel, VQAHead

ENCODERS = ("skipthoughts",) + FAMILIES


def build_text_encoder(text_cfg, words, rngs):
  """(encoder nnx.Module with out_dim, tokenizer with encode() and pad_id)."""
  if text_cfg.encoder == "skipthoughts":
    if text_cfg.checkpoint:
      # Imported here: the loader reads large files and only pretrained runs need it.
      from rsvqa_jax.models.skipthoughts_params import load_skipthoughts  # pylint: disable=g-import-not-at-top
      encoder, tokenizer, _ = load_skipthoughts(
          text_cfg.checkpoint, words, allow_pickle=text_cfg.allow_pickle,
          dropout=text_cfg.dropout, bayesian=text_cfg.bayesian, rngs=rngs)
      return encoder, tokenizer
    tokenizer = WordTokenizer.build(words)
    encoder = SkipThoughts(tokenizer.vocab_size, word_dim=text_cfg.word_dim,
                           hidden_dim=text_cfg.hidden_dim, dropout=text_cfg.dropout,
                           bayesian=text_cfg.bayesian, rngs=rngs)
    return encoder, tokenizer
  if text_cfg.encoder in FAMILIES:
    if not text_cfg.checkpoint:
      raise RSVQAError(f"config text.checkpoint is not set: text.encoder={text_cfg.encoder} needs "
                       "a local Hugging Face folder (config.json, model.safetensors, tokenizer)")
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
  rngs = nnx.Rngs(params=config.seed, dropout=config.seed + 1)
  encoder, tokenizer = build_text_encoder(config.text, words, rngs)
  head = VQAHead(config.model, q_dim=encoder.out_dim, v_dim=image_dim, num_answers=num_answers,
                 rngs=rngs)
  return RSVQAModel(head, encoder), tokenizer
