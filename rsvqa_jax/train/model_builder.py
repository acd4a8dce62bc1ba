"""Builds the RSVQA model and its tokenizer from a config.

config.text picks the question encoder: "skipthoughts" (pretrained uni-skip files in
text.checkpoint, or random init of text.word_dim / text.hidden_dim when it is "random" or unset,
see config.check_weights) or a BERT family encoder ("distilbert", "bert", "roberta") read from a
local Hugging Face folder. The tokenizer is built here from the dataset's words (Skip-thoughts)
or the folder's tokenizer files; the weight loaders in models/ take its vocabulary. config.model
is the head (models/vqa.py): the paper's fusion + classifier on the pooled image vector, or the
original RSVQA code's head on the image map (model.head="original", given the map's shape).
Randomly initialised parts are built in one compiled program (checkpoints.jit_init) rather than
op by op.
"""
from flax import nnx

from rsvqa_jax.config import check_text_encoder, is_random
from rsvqa_jax.data.tokenizers import HFTokenizer, WordTokenizer
from rsvqa_jax.errors import RSVQAError, shortened
from rsvqa_jax.models.bert import FAMILIES
from rsvqa_jax.models.checkpoints import jit_init
from rsvqa_jax.models.skipthoughts import SkipThoughts
from rsvqa_jax.models.vqa import RSVQAModel, make_head

ENCODERS = ("skipthoughts",) + FAMILIES


def pretrained_skipthoughts(folder, words, *, allow_pickle=False, dropout=0.0, bayesian=False,
                            strip_question_mark=False, rngs=None):
  """(SkipThoughts, WordTokenizer) of a uni-skip folder for a dataset's words.

  Dataset words missing from the dictionary map to UNK (tokenizer.unknown_words lists them).
  """
  # Imported here: the loader reads large files and only pretrained runs need it.
  from rsvqa_jax.models import skipthoughts_params  # pylint: disable=g-import-not-at-top
  dictionary = skipthoughts_params.read_dictionary_of(folder)
  tokenizer = WordTokenizer.build(words, dictionary, strip_question_mark=strip_question_mark)
  encoder = skipthoughts_params.load_skipthoughts(
      folder, tokenizer.vocab, dictionary=dictionary, allow_pickle=allow_pickle, dropout=dropout,
      bayesian=bayesian, rngs=rngs)
  return encoder, tokenizer


def pretrained_bert(folder, *, max_length=None, rngs=None):
  """(BertEncoder, HFTokenizer) of a local Hugging Face folder."""
  from rsvqa_jax.models import bert_params  # pylint: disable=g-import-not-at-top
  encoder = bert_params.load_bert(folder, rngs=rngs)
  limit = encoder.config.max_tokens
  tokenizer = HFTokenizer.from_folder(folder, max_length=min(limit, max_length or limit))
  rows = encoder.config.vocab_size
  if not 0.99 * rows <= tokenizer.vocab_size <= rows:
    raise RSVQAError(f"{folder}: the tokenizer has {tokenizer.vocab_size} tokens, the model's word "
                     f"table {rows} rows; a cut or another model's vocabulary file?")
  top = max(tokenizer.hf.get_vocab().values(), default=-1)
  if top >= rows:  # such ids read past the word table: NaN question vectors
    raise RSVQAError(f"{folder}: the tokenizer gives token id {top}, the model's word table has "
                     f"{rows} rows; a repeated token in vocab.txt?")
  return encoder, tokenizer


def load_text_encoder(text_cfg, words, rngs):
  """(pretrained encoder nnx.Module with out_dim, tokenizer with encode() and pad_id)."""
  if text_cfg.encoder == "skipthoughts":
    return pretrained_skipthoughts(text_cfg.checkpoint, words, dropout=text_cfg.dropout,
                                   bayesian=text_cfg.bayesian,
                                   strip_question_mark=text_cfg.strip_question_mark, rngs=rngs)
  if text_cfg.encoder in FAMILIES:
    check_text_encoder(text_cfg)
    encoder, tokenizer = pretrained_bert(text_cfg.checkpoint, max_length=text_cfg.max_length,
                                         rngs=rngs)
    if encoder.config.family != text_cfg.encoder:
      raise RSVQAError(f"config text.checkpoint={shortened(text_cfg.checkpoint)}: holds a "
                       f"{encoder.config.family} model, text.encoder says {text_cfg.encoder}")
    return encoder, tokenizer
  raise RSVQAError(f"config text.encoder={text_cfg.encoder!r}: choose one of {ENCODERS}")


def build(config, *, words, num_answers, image_dim, map_shape=None):
  """(RSVQAModel, tokenizer); parameters drawn from config.seed.

  `map_shape`: (h, w, C) of the image map whose flattened rows are the image features, for
  model.head="original".
  """
  t = config.text

  def head(q_dim, rngs):
    return make_head(config.model, q_dim=q_dim, v_dim=image_dim, num_answers=num_answers,
                     map_shape=map_shape, rngs=rngs)

  if t.encoder == "skipthoughts" and is_random(t.checkpoint):
    tokenizer = WordTokenizer.build(words, strip_question_mark=t.strip_question_mark)

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
