"""The default language-bias study on synthetic RSVQA LR data: the README's main job.

  rsvqa-jax study --config configs/study_synthetic.py --workdir runs/study

Skip-thoughts GRU and a DistilBERT-architecture encoder (both random init: no pretrained
weights can be had offline), frozen and fine-tuned, reference and visual blind, e-mult fusion,
3 seeds; adversarial testing with random images (K = 10); dataset analysis; a balanced twin
dataset with its own reference / blind pair. The image encoder is a small ResNet-18 pretrained
once on the synthetic train images' land cover (standing in for ImageNet weights), frozen and
cached. Sized to finish in a few minutes on a 2-core CPU.

Arguments (comma separated): `balanced` (the main dataset balanced, no twin), `adv_all` (also
white / black / noise images), `quick` (one seed). For real data and weights, override e.g.
  --config.study.synthetic=false --config.data.root=/data/RSVQA_LR --config.data.name=lr
  --config.image.arch=resnet152 --config.image.checkpoint=/w/resnet152.pth
  --config.study.lm.skipthoughts.checkpoint=/w/skip-thoughts
  --config.study.lm.distilbert.checkpoint=/w/distilbert-base-uncased
and the paper's optimisation (train.num_epochs=50, train.batch_size=70, optim.lr=1e-5,
study.lm.*.text_lr 1e-4 / 1e-6, model.hidden_dim=1200, model.classifier_dim=256).
"""
from rsvqa_jax import config


def get_config(arg=""):
  c = config.base_config()
  c.study = config.study_defaults()
  s = c.study
  s.variant = "lr"
  s.images = 250
  s.questions_per_image = 32
  s.lm.skipthoughts = config.lm_entry("skipthoughts", "Skip-thoughts GRU (random init)", 5e-3,
                                      word_dim=32, hidden_dim=64)
  s.lm.distilbert = config.lm_entry("distilbert", "DistilBERT architecture (random init)", 1e-3,
                                    dim=32, layers=1, heads=4, hidden_dim=64, dropout=0.0)
  s.balanced.images = 200
  s.balanced.questions_per_image = 24

  c.image.arch = "synthetic_resnet"  # pretrained into DIR/cache/synthetic_resnet (image.pretrain)

  c.model.hidden_dim = 128
  c.model.classifier_dim = 64
  c.model.dropout = 0.1
  c.optim.lr = 5e-3
  c.train.batch_size = 128
  c.train.eval_batch_size = 512
  c.train.num_epochs = 8
  c.train.length_buckets = (16, 32)
  c.train.checkpoint_every_steps = 100000  # epoch ends only
  c.train.keep_checkpoints = 1
  c.train.log_every_steps = 50
  for flag in filter(None, (arg or "").split(",")):
    if flag == "balanced":
      s.balanced_data = True
      s.balanced.enabled = False
    elif flag == "adv_all":
      s.adversarial = ("random", "white", "black", "noise")
    elif flag == "quick":
      s.seeds = (0,)
    else:
      raise config.argument_error("configs/study_synthetic.py", arg,
                                  f"unknown flag {flag!r} (balanced, adv_all, quick)")
  return c
