"""The paper's language-bias study on the real RSVQA LR set, with the paper's settings.

  rsvqa-jax study --config configs/study_paper.py --workdir runs/study_lr \
    --config.data.root=/data/RSVQA_LR --config.image.checkpoint=/models/resnet152.pth \
    --config.study.lm.skipthoughts.checkpoint=/models/skipthoughts \
    --config.study.lm.distilbert.checkpoint=/models/distilbert-base-uncased

Settings (Sections 3.1, 6.1 and 6.2): batch 70, Adam, 50 epochs, lr 1e-5 for the fusion and the
classifier, fine-tuning lr 1e-4 for Skip-thoughts and 1e-6 for distilBERT (Figure 8), fusion
projections 1200, FC 256, dropout 0.5 (the original code's), a frozen ImageNet ResNet-152, three
seeds, K = 10 random images of the whole dataset per test question. Table 2's rows: the original
RSVQA baseline (configs/rsvqa_baseline.py's settings), Skip-thoughts and distilBERT frozen with
MUTAN, both fine-tuned with e-mult; Figure 5 / Table 6: both language models frozen and
fine-tuned, e-mult, with their visual-blind twins and adversarial testing. MUTAN's rank 5 and
width 1200 are not given by the paper (docs/paper_notes.md).

It refuses to start, in one line naming what is missing, without the dataset folder and the
three checkpoints: random weights or synthetic data would not reproduce the paper (the
synthetic demonstration is configs/study_synthetic.py). Argument `quick`: one seed.
"""
from rsvqa_jax import config

BASELINE_OVERRIDES = ("model.head=original", "image.map=true", "text.bayesian=true",
                      "text.dropout=0.25", "text.strip_question_mark=true", "text.max_length=20",
                      "train.num_epochs=150")


def get_config(arg=""):
  c = config.paper_config("lr", "skipthoughts", "mult", frozen=False)
  c.study = config.study_defaults()
  s = c.study
  s.synthetic = False
  s.require_real = True
  s.balanced.enabled = False
  s.lm.skipthoughts = config.lm_entry("skipthoughts", "RNN Skip-thoughts", 1e-4)
  s.lm.distilbert = config.lm_entry("distilbert", "Transformer distilBERT", 1e-6)
  s.table2_rows = ("baseline", "skipthoughts,frozen,mutan", "distilbert,frozen,mutan",
                   "skipthoughts,finetuned,mult", "distilbert,finetuned,mult")
  s.baseline.language_model = "skipthoughts"
  s.baseline.label = "RSVQA baseline"
  s.baseline.overrides = BASELINE_OVERRIDES
  s.min_questions = 200  # flags Rural/urban (100 test questions: 1 point per answer)
  for flag in filter(None, (arg or "").split(",")):
    if flag == "quick":
      s.seeds = (0,)
    else:
      raise config.argument_error("configs/study_paper.py", arg, f"unknown flag {flag!r} (quick)")
  return c
