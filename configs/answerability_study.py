"""The default synthetic study with its answerability stage (ChiQA ranking; DESIGN.md 6.3).

  rsvqa-jax answerability study --config configs/answerability_study.py --workdir runs/study \
    --docs docs/audits/answerability.md   # the stage alone (the docs page's figures)
  rsvqa-jax study --config configs/answerability_study.py --workdir runs/study   # all of it

configs/study_synthetic.py (argument passed on) plus pools on its main dataset: 3 questions per
image, 5 candidates each, balance 0.5 (the wording says something about the label, as in real
data), and a twin set at balance 1 where it says nothing; per language model (Skip-thoughts GRU
and DistilBERT architecture, random init, fine-tuned) a reference head and its question-only
twin, 15 epochs, BCE; Random and Majority; the reading of which question words predict the label.
"""
import os

from rsvqa_jax import config


# configs/study_synthetic.py's flags, checked here so an unknown one is named as this file's
STUDY_FLAGS = ("balanced", "adv_all", "quick")


def get_config(arg=""):
  for flag in filter(None, (arg or "").split(",")):
    if flag not in STUDY_FLAGS:
      raise config.argument_error("configs/answerability_study.py", arg,
                                  f"unknown flag {flag!r} ({', '.join(STUDY_FLAGS)}: those of "
                                  "configs/study_synthetic.py)")
  c = config.load(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                               "study_synthetic.py") + (f":{arg}" if arg else ""))
  c.answerability = config.answerability_section()
  a = c.answerability
  a.pools_per_image = 3.0
  a.balance = 0.5
  a.study.enabled = True
  a.study.num_epochs = 15
  return c
