"""The original RSVQA baseline on LR, as the original code (syvlo/RSVQA) builds and trains it.

Its head (model.head=original, models/vqa.py) is the original models/model.py layer for layer:
a trainable 1x1 conv over the frozen ResNet-152's 8x8x2048 map (cached with image.map=true),
flattened to 2048 values, dropout before each 1200-d projection, tanh of the e-mult product
and dropout on it, then FC 256. The question encoder is the frozen Bayesian uni-skip with
dropout 0.25 (text.bayesian=true, text.dropout=0.25); its masks change every step, so its
vectors are never cached. Questions lose their "?" (text.strip_question_mark=true) and are cut
to 20 tokens (text.max_length=20), as in the original tokenizer. Optimisation is the original
train.py: Adam, lr 1e-5, batch 70, 150 epochs (train.num_epochs=150), where the paper's own
models train for 50.

Not reproduced (docs/paper_notes.md lists them): the original runs its frozen ResNet in
training mode (BatchNorm on batch statistics, running statistics updated) on pixels left on a
0-255 scale, where ours is cached once in eval mode on 0-1 pixels; it flips and rotates
training images (data.augment_variants does not serve image maps yet); and its word table is
shifted by one row against its vocabulary.
"""
from rsvqa_jax import config


def get_config():
  c = config.paper_config("lr", "skipthoughts", "mult", frozen=True)
  c.model.head = "original"
  c.image.map = True
  c.text.bayesian = True
  c.text.dropout = 0.25
  c.text.strip_question_mark = True
  c.text.max_length = 20
  c.train.num_epochs = 150
  return c
