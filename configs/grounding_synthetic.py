"""Answer grounding on synthetic RSVQA LR: the spatial attention model and its pooled twin.

  rsvqa-jax train --config configs/grounding_synthetic.py:skipthoughts,mult --workdir runs/g_att
  rsvqa-jax train --config configs/grounding_synthetic.py:skipthoughts,mult,pooled \
    --workdir runs/g_pool
  rsvqa-jax grounding --workdir runs/g_att --split test --out runs/g_att/grounding

The study's dataset size (400 images x 20 questions; test: 40 images, 800 questions) and image
encoder (the small ResNet-18 pretrained on the synthetic train images' land cover), pretrained
here at the tiles' own 256 x 256 for 10 epochs (2 to 3 minutes on 2 CPU cores) so that its
final map has 8 x 8 positions of 128 channels (image.pretrain.image_size=256, image.map=true).
Pretrained at the study's 64 x 64 and applied at 256 x 256 the map grounds presence far worse
(docs/audits/grounding.md): the encoder must see the scale it runs at. model.head=attention weighs those positions with the question (models/attention.py);
argument `pooled` trains the paper's head on the mean of the same map (Grad-CAM gives its
relevance maps), `blind` its visual-blind twin (a uniform map). LM: skipthoughts (random init,
fine-tuned, as configs/synthetic_small.py) or distilbert (give a Hugging Face folder:
--config.text.checkpoint=DIR); fusion: mult | mutan.
"""
from rsvqa_jax import config

SOURCE = "configs/grounding_synthetic.py"


def get_config(arg="skipthoughts,mult"):
  parts = (arg or "skipthoughts,mult").split(",")
  if len(parts) < 2 or parts[0] not in ("skipthoughts", "distilbert") or parts[1] not in (
      "mult", "mutan"):
    raise config.argument_error(SOURCE, arg, "expected skipthoughts|distilbert,mult|mutan"
                                "[,pooled|blind]")
  c = config.base_config()
  c.data.synthetic = True
  c.data.synthetic_variant = "lr"
  c.data.synthetic_images = 400
  c.data.synthetic_questions_per_image = 20
  c.image.arch = "synthetic_resnet"
  c.image.pretrain.image_size = 256
  c.image.pretrain.epochs = 10
  c.image.pretrain.batch_size = 16
  c.image.map = True
  c.image.batch_size = 16
  c.text.encoder = parts[0]
  if parts[0] == "skipthoughts":
    c.text.checkpoint = config.RANDOM
    c.text.word_dim = 64
    c.text.hidden_dim = 128
  c.model.fusion = parts[1]
  c.model.head = "attention"
  c.model.attention_dim = 64
  c.model.hidden_dim = 128
  c.model.classifier_dim = 64
  c.model.mutan_dim = 64
  c.model.dropout = 0.1
  c.optim.lr = 1e-3
  c.optim.text_lr = 1e-3
  c.train.batch_size = 64
  c.train.eval_batch_size = 256
  c.train.num_epochs = 20
  c.train.length_buckets = (16, 32)
  c.train.checkpoint_every_steps = 100000  # epoch ends only
  c.train.keep_checkpoints = 1
  c.train.log_every_steps = 50
  for flag in parts[2:]:
    if flag == "pooled":
      c.model.head = "paper"
    elif flag == "blind":
      c.model.head = "paper"
      c.model.blind = True
    else:
      raise config.argument_error(SOURCE, arg, f"unknown flag {flag!r} (pooled, blind)")
  return c
