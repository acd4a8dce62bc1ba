"""The default language-bias study on synthetic RSVQA LR data: the README's main job.

  rsvqa-jax study --config configs/study_synthetic.py --workdir runs/study

Skip-thoughts GRU and a DistilBERT-architecture encoder (both random init: no pretrained
weights can be had offline), frozen and fine-tuned, reference and visual blind, e-mult fusion,
3 seeds; adversarial testing with random images of the dataset (K = 10); dataset analysis; a
balanced twin dataset with its own reference / blind pair. The image encoder is a small
ResNet-18 pretrained on each dataset's synthetic train images' land cover (standing in for
ImageNet weights), frozen and cached. Sized to finish in about six minutes on a 2-core CPU.

Sized to be worth reading: 400 images x 20 questions, so the test split has 800 questions with
every type at 40 or more (Rural/urban: one question per image, half rural, half urban); the
random Skip-thoughts GRU starts with its update gate open (update_bias,
study/language_models.py) so that, frozen, it still holds the question's object; frozen language
models train on cached vectors for more epochs (frozen_epochs); the balanced twin (400 x 12)
is balanced per question type too. Every reference model then beats answering the most common
answer per type by a clear margin (the report's reading checks it, study.reading.margin).

The shortcuts stage (study.shortcuts, about 30 s) is on: a balanced 400 x 12 set with "Is there
a parking?" planted to "yes", its shortcut OOD benchmark and a reference / blind pair trained on
it (--config.study.shortcuts.enabled=false leaves it out).

Arguments (comma separated): `balanced` (the main dataset balanced, no twin), `adv_all` (also
white / black / noise images), `quick` (one seed). Real data and weights with the paper's
settings: configs/study_paper.py; these small settings on a real dataset (a quick look, not the
paper's protocol): --config.study.synthetic=false --config.data.root=/data/RSVQA_LR
--config.image.arch=resnet152 and the checkpoints as configs/study_paper.py takes them.
"""
from rsvqa_jax import config


def get_config(arg=""):
  c = config.base_config()
  c.study = config.study_defaults()
  s = c.study
  s.variant = "lr"
  s.images = 400
  s.questions_per_image = 20
  s.lm.skipthoughts = config.lm_entry("skipthoughts", "Skip-thoughts GRU (random init)", 5e-3,
                                      word_dim=32, hidden_dim=64, update_bias=2.0)
  s.lm.distilbert = config.lm_entry("distilbert", "DistilBERT architecture (random init)", 1e-3,
                                    dim=32, layers=1, heads=4, hidden_dim=64, dropout=0.0)
  s.balanced.images = 400
  s.balanced.questions_per_image = 12
  s.shortcuts.enabled = True  # sized in study_defaults: 400 x 12, one reference / blind pair

  c.image.arch = "synthetic_resnet"  # pretrained into DIR/cache/synthetic_resnet (image.pretrain)
  c.image.pretrain.epochs = 30
  c.image.pretrain.batch_size = 16

  c.model.hidden_dim = 128
  c.model.classifier_dim = 64
  c.model.dropout = 0.1
  c.optim.lr = 5e-3
  c.train.batch_size = 128
  c.train.eval_batch_size = 512
  c.train.num_epochs = 8
  s.frozen_epochs = 20  # frozen LMs train on cached question vectors: an epoch costs little
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
