"""Smallest end-to-end run: a synthetic LR dataset generated on first use, in about a minute on CPU.

40 images x 20 questions, a random-init ResNet-18 (width 8, 32x32 input) as frozen image encoder,
a small randomly initialised Skip-thoughts GRU fine-tuned with the head. Argument `blind` gives
the visual-blind twin, `frozen` a frozen language model:
  rsvqa-jax train --config configs/synthetic_tiny.py --workdir runs/tiny
"""
from rsvqa_jax import config


def get_config(arg=""):
  c = config.base_config()
  c.data.synthetic = True
  c.data.synthetic_variant = "lr"
  c.data.synthetic_images = 40
  c.data.synthetic_questions_per_image = 20
  c.image.arch = "resnet18"
  c.image.width = 8
  c.image.image_size = 32
  c.text.word_dim = 32
  c.text.hidden_dim = 64
  c.model.hidden_dim = 64
  c.model.classifier_dim = 32
  c.model.mutan_dim = 64
  c.model.dropout = 0.1
  c.optim.lr = 3e-3
  c.optim.text_lr = 3e-3
  c.train.batch_size = 32
  c.train.eval_batch_size = 64
  c.train.num_epochs = 5
  c.train.checkpoint_every_steps = 50
  c.train.log_every_steps = 10
  return config.apply_flags(c, arg, "configs/synthetic_tiny.py")
