"""Adversarial evaluation cost: K = 10 random image substitutions against one clean pass.

Both passes run rsvqa_jax.train.predict.predict_columns (the one compiled eval step every
evaluator uses) on the same questions; the clean pass gives each question its own image (K = 1,
own rows), the adversarial one K = 10 random images. The target applies to the paper's
reference model, whose Skip-thoughts encoder runs on the tokens (the question vector is computed
once per batch and shared by the K substitutions). A frozen model with cached question vectors
is reported too: there the head is all the work, so K substitutions cost close to K heads.
"""
import time

import numpy as np

from benchmarks import inputs, timing, train_steps
from rsvqa_jax.config import base_config
from rsvqa_jax.eval.adversarial import substitution_rows
from rsvqa_jax.train import inputs as train_inputs
from rsvqa_jax.train import predict, steps

K = 10
IMAGES = 100


def _columns(frozen, questions, n):
  """inputs.SplitColumns of n questions (tokens tiled from `questions`; row i's vector is i)."""
  reps = -(-n // len(questions.text))
  tokens = np.tile(questions.word_tokens, (reps, 1))[:n]
  mask = np.tile(questions.word_mask, (reps, 1))[:n]
  columns = {"tokens": tokens, "mask": mask, "answer": np.zeros(n, np.int32)}
  if frozen:
    columns["question_index"] = np.arange(n, dtype=np.int32)
  width = tokens.shape[1]
  return train_inputs.SplitColumns(columns, mask.sum(1).astype(np.int32), (width,))


def measure(frozen, questions, *, n, batch_size, repeats, size):
  model, q_dim = train_steps.jax_model("skipthoughts", frozen, "mult", size, questions)
  batch_np = train_steps.batch_for("skipthoughts", frozen, q_dim, questions)
  runner = train_steps.JaxStep(model, frozen, batch_np)
  eval_step = steps.make_eval_step(runner.mesh)
  rng = np.random.default_rng(0)
  features = np.abs(rng.standard_normal((IMAGES, inputs.IMAGE_DIM), np.float32))
  rows = rng.integers(0, IMAGES, n)
  columns = _columns(frozen, questions, n)
  vectors = inputs.head_arrays(n, q_dim)["question_vector"] if frozen else None
  subs = {"clean": rows[None], f"random_k{K}": substitution_rows("random", rows, repeats=K, seed=0)}

  def timed(sub):
    def run():
      start = time.perf_counter()
      predict.predict_columns(runner.state, columns, eval_step=eval_step, mesh=runner.mesh,
                              batch_size=batch_size, features=features, image_rows=sub,
                              question_vectors=vectors)
      return time.perf_counter() - start
    return run

  warm = {name: timed(sub)() for name, sub in subs.items()}
  times, errors = timing.alternate({name: timed(sub) for name, sub in subs.items()}, repeats)
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
