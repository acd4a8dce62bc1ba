"""Adversarial evaluation cost: K = 10 random image substitutions against one clean pass.

Both passes use rsvqa_jax.bias.adversarial.evaluate_substituted on the same questions; the clean
pass gives each question its own image (K = 1, own rows), the adversarial one K = 10 random
images. The target applies to the paper's reference model, whose Skip-thoughts encoder runs on
the tokens (the question vector is computed once per batch and shared by the K substitutions).
A frozen model with cached question vectors is reported too: there the head is all the work,
so K substitutions cost close to K heads.
"""
import time

import numpy as np

from benchmarks import inputs, timing, train_steps
from rsvqa_jax.bias.adversarial import evaluate_substituted, substitution_rows
from rsvqa_jax.train.config_lib import base_config

K = 10
IMAGES = 100


def _inputs(frozen, questions, n, q_dim):
  if frozen:
    return {"question_vector": inputs.head_arrays(n, q_dim)["question_vector"]}
  reps = -(-n // len(questions.text))
  return {"tokens": np.tile(questions.word_tokens, (reps, 1))[:n],
          "mask": np.tile(questions.word_mask, (reps, 1))[:n]}


def measure(frozen, questions, *, n, batch_size, repeats, size):
  model, q_dim = train_steps.jax_model("skipthoughts", frozen, "mult", size, questions)
  model.eval()
  rng = np.random.default_rng(0)
  features = np.abs(rng.standard_normal((IMAGES, inputs.IMAGE_DIM), np.float32))
  rows = rng.integers(0, IMAGES, n)
  question_inputs = _inputs(frozen, questions, n, q_dim)
  subs = {"clean": rows[None], f"random_k{K}": substitution_rows("random", rows, repeats=K, seed=0)}

  def runner(sub):
    def run():
      start = time.perf_counter()
      evaluate_substituted(model, question_inputs, features, sub, batch_size=batch_size)
      return time.perf_counter() - start
    return run

  warm = {name: runner(sub)() for name, sub in subs.items()}
  times, errors = timing.alternate({name: runner(sub) for name, sub in subs.items()}, repeats)
  return {"model": "frozen Skip-thoughts (cached question vectors)" if frozen else
                   "Skip-thoughts encoder on tokens",
          "questions": n, "batch_size": batch_size, "warmup_s": warm, "errors": errors,
          "clean_s": timing.summarize(times["clean"], "s"),
          f"k{K}_s": timing.summarize(times[f"random_k{K}"], "s"),
          "cost_ratio": timing.paired_ratio(times[f"random_k{K}"], times["clean"])}


def run(mode, log=print):
  questions = inputs.make_questions(inputs.BATCH)
  size = train_steps.sizes(mode)
  batch_size = base_config().train.eval_batch_size
  n = 4 * batch_size if mode == "full" else batch_size
  rows = []
  for frozen in (False, True):
    log(f"  adversarial: {'frozen cached' if frozen else 'encoder'}")
    rows.append(measure(frozen, questions, n=n, batch_size=batch_size, repeats=3, size=size))
  targets = [timing.target(f"adversarial K={K} / clean pass (Skip-thoughts encoder on tokens)",
                           rows[0]["cost_ratio"], "<=", 1.5)]
  return {"rows": rows}, targets
