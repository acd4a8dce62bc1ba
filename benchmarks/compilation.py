"""Compilations during training: after warm-up there must be none beyond one per length bucket.

Two epochs of the training data path (pipeline.batch_iterator with the config's length buckets,
train.inputs.model_batch, sharding.global_batch, the jit train step) over synthetic LR questions,
with a fine-tuned Skip-thoughts GRU (narrow: the number of compilations does not depend on the
width). XLA backend compilations are counted with a jax.monitoring listener on
'/jax/core/compile/backend_compile_duration' and cross-checked with the step's `_cache_size()`.
"""
import jax
import numpy as np

from benchmarks import inputs, timing, train_steps
from rsvqa_jax.data import pipeline as pipeline_lib
from rsvqa_jax.train import inputs as data_lib
from rsvqa_jax.train import sharding as shd

COMPILE_EVENT = "/jax/core/compile/backend_compile_duration"
_events = []


def _listener(name, *_, **__):
  if name == COMPILE_EVENT:
    _events.append(name)


def run(mode, log=print):
  jax.monitoring.register_event_duration_secs_listener(_listener)
  n = {"full": 5600, "quick": 1400, "toy": 700}[mode]
  questions = inputs.make_questions(n)
  log(f"  compilation: two epochs over {n} questions")
  lengths = questions.word_mask.sum(1)
  columns = {"image_index": np.arange(n, dtype=np.int32) % 50,
             "answer": np.random.default_rng(0).integers(0, inputs.NUM_ANSWERS, n).astype(np.int32),
             "tokens": questions.word_tokens, "mask": questions.word_mask}
  features = np.abs(np.random.default_rng(1).standard_normal((50, inputs.IMAGE_DIM), np.float32))
  size = train_steps.sizes("toy")
  size["gru"] = {"word_dim": 32, "hidden_dim": 64}
  model, _ = train_steps.jax_model("skipthoughts", False, "mult", size, questions)
  steps_per_epoch = n // inputs.BATCH
  iterator = pipeline_lib.batch_iterator(
      columns, batch_size=inputs.BATCH, shuffle=True, seed=0, num_epochs=2, drop_remainder=True,
      length_buckets=inputs.buckets_for(questions.word_tokens.shape[1]),
      lengths=lengths)
  batches = list(iterator)
  runner = train_steps.JaxStep(model, False, data_lib.model_batch(batches[0], features))
  epochs, seen = [], set()
  for e in range(2):
    before = len(_events)
    widths = set()
    for batch in batches[e * steps_per_epoch:(e + 1) * steps_per_epoch]:
      widths.add(int(batch["tokens"].shape[1]))
      runner.state, runner.metrics = runner.step(
          runner.state, shd.global_batch(data_lib.model_batch(batch, features), runner.mesh))
    jax.block_until_ready(runner.metrics)
    epochs.append({"epoch": e + 1, "steps": steps_per_epoch, "bucket_widths": sorted(widths),
                   "new_bucket_widths": sorted(widths - seen),
                   "backend_compilations": len(_events) - before})
    seen |= widths
  cache = runner.step._cache_size()  # pylint: disable=protected-access
  section = {"epochs": epochs, "step_cache_size": cache, "buckets": list(inputs.BUCKETS),
             "notes": ["epoch 1 is the warm-up; a compilation is allowed only for a bucket width "
                       "met for the first time (with several buckets a rare width can first "
                       "appear in epoch 2)"]}
  second = epochs[1]
  targets = [
      timing.target("compilations in epoch 2 beyond its new bucket widths",
                    second["backend_compilations"] - len(second["new_bucket_widths"]), "<=", 0),
      timing.target("train-step compilations / bucket widths used", cache / len(seen), "<=", 1.0),
  ]
  return section, targets
