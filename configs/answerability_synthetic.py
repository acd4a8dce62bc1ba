"""An answerability head (ChiQA ranking) on synthetic RSVQA LR pools: a few minutes on a 2-core CPU.

  rsvqa-jax answerability train --config configs/answerability_synthetic.py:skipthoughts,blind \
    --workdir runs/ans_st_blind
  rsvqa-jax evaluate --workdir runs/ans_st_blind --answerability

Argument: LM[,blind][,frozen][,listnet]. LM is skipthoughts (a small randomly initialised GRU)
or distilbert (give its Hugging Face folder: --config.text.checkpoint=FOLDER); `blind` is the
question-only twin, `frozen` a frozen language model, `listnet` the ListNet loss over each pool
instead of the pointwise BCE. The dataset (300 images) and its pools (2 questions per image, 5
candidates, labels balanced) are generated on first use; the image encoder is the small ResNet
pretrained on the synthetic scenes' land cover, frozen.
"""
from rsvqa_jax import config

SOURCE = "configs/answerability_synthetic.py"


def get_config(arg="skipthoughts"):
  lm, *flags = (arg or "skipthoughts").split(",")
  if lm not in ("skipthoughts", "distilbert"):
    raise config.argument_error(SOURCE, arg, "expected skipthoughts|distilbert[,blind][,frozen]"
                                "[,listnet]")
  c = config.base_config()
  c.answerability = config.answerability_section()
  if "listnet" in flags:
    c.answerability.loss = "listnet"
    flags.remove("listnet")
  c.data.synthetic = True
  c.data.synthetic_images = 300
  c.data.synthetic_questions_per_image = 10
  c.image.arch = "synthetic_resnet"
  c.text.encoder = lm
  if lm == "skipthoughts":
    c.text.checkpoint = config.RANDOM
    c.text.word_dim = 32
    c.text.hidden_dim = 64
  c.model.hidden_dim = 128
  c.model.classifier_dim = 64
  c.model.dropout = 0.1
  c.optim.lr = 3e-3
  c.optim.text_lr = 3e-3 if lm == "skipthoughts" else 1e-3
  c.train.eval_batch_size = 250
  c.train.num_epochs = 15
  c.train.length_buckets = (16, 32)
  c.train.log_every_steps = 20
  return config.apply_flags(c, ",".join(flags), SOURCE)
