"""A small synthetic run that learns from the pixels: a few minutes on a 2-core CPU.

300 synthetic LR images x 30 questions (the dataset is generated on first use). The frozen image
encoder is the small ResNet pretrained on the synthetic scenes' land cover (image.arch =
"synthetic_resnet", pretrained once per dataset into the cache folder), the question encoder a small
randomly initialised Skip-thoughts GRU fine-tuned with the e-mult head:
  rsvqa-jax train --config configs/synthetic_small.py --workdir runs/small
Arguments as synthetic_tiny.py: `blind` (visual-blind twin), `frozen` (frozen language model).
"""
from rsvqa_jax import config


def get_config(arg=""):
  c = config.base_config()
  c.data.synthetic = True
  c.data.synthetic_variant = "lr"
  c.data.synthetic_images = 300
  c.data.synthetic_questions_per_image = 30
  c.image.arch = "synthetic_resnet"
  c.image.batch_size = 50
  c.text.checkpoint = config.RANDOM
  c.text.word_dim = 64
  c.text.hidden_dim = 128
  c.model.fusion = "mult"
  c.model.hidden_dim = 128
  c.model.classifier_dim = 64
  c.model.dropout = 0.1
  c.optim.lr = 1e-3
  c.optim.text_lr = 1e-3
  c.train.batch_size = 64
  c.train.eval_batch_size = 256
  c.train.num_epochs = 12
  c.train.checkpoint_every_steps = 500
  c.train.log_every_steps = 20
  return config.apply_flags(c, arg, "configs/synthetic_small.py")
