"""Tiny in-memory tasks for the training tests; tests of the config parser and compiled init.

`tiny_task` builds a records.Dataset whose answers are a function of random image features
(presence questions: is feature k > 0; rural/urban: feature 4 > 0), so a model that uses the
image beats the majority answer, and a small config that trains on it in seconds.
`flip_bytes` damages a checkpoint; `warnings_of_rsvqa_jax` captures what a quiet run still shows.
"""
import contextlib
import json
import logging
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import tensorstore as ts
from flax import nnx

from rsvqa_jax.data import records
from rsvqa_jax.errors import RSVQAError
from rsvqa_jax.models import checkpoints
from rsvqa_jax.models.skipthoughts import SkipThoughts
from rsvqa_jax import config as config_lib
from rsvqa_jax.train.inputs import Features

OBJECTS = ("road", "forest", "water area", "building")


@contextlib.contextmanager
def warnings_of_rsvqa_jax(caplog, level=logging.WARNING):
  """caplog gets the rsvqa_jax logger's WARNINGs (or records from `level` up), also after the CLI gave it a handler of its own
  (which stops them from reaching the root logger's capture); once each, whether or not a CLI
  test ran before (propagation to root, where caplog also listens, is off meanwhile)."""
  logger = logging.getLogger("rsvqa_jax")
  logger.addHandler(caplog.handler)
  propagate, logger.propagate = logger.propagate, False
  try:
    with caplog.at_level(level, logger="rsvqa_jax"):
      yield
  finally:
    logger.removeHandler(caplog.handler)
    logger.propagate = propagate


def array_chunks(step_folder):
  """(path, offset, length) of every array chunk stored outside the b-tree that the OCDBT
  database of `step_folder`/state reads, largest first.

  Not every data file is read: OCDBT only appends, and orbax's merge of the per-process databases
  into the root leaves the per-process b-tree nodes, and chunks written again, behind; damaging
  those changes nothing a restore reads (it is no corruption), so a test damages what is read.
  """
  state = os.path.join(step_folder, "state")
  base = ts.KvStore.open({"driver": "file", "path": state + "/"}).result()
  found, todo = [], [ts.ocdbt.dump(base).result()["versions"][-1]["root"]["location"]]
  while todo:
    for entry in ts.ocdbt.dump(base, todo.pop()).result()["entries"]:
      for field, location in entry.items():
        if field == "indirect_value":  # value:PREFIX:d/FILE:OFFSET:LENGTH
          _, prefix, name, offset, length = location.split(":")
          found.append((os.path.join(state, prefix, name), int(offset), int(length)))
        elif isinstance(location, str) and location.startswith("btreenode:"):
          todo.append(location)
  assert found, f"{state}: no array chunk outside the b-tree"
  return sorted(found, key=lambda chunk: -chunk[2])


def flip_bytes(folder):
  """Flips 16 bytes in the middle of the largest array chunk the checkpoint `folder` reads."""
  path, offset, length = array_chunks(folder)[0]
  with open(path, "r+b") as f:
    f.seek(offset + length // 2)
    chunk = bytearray(f.read(16))
    f.seek(offset + length // 2)
    f.write(bytes(b ^ 0xFF for b in chunk))


def listing(folder):
  """{path: (size, mtime)} of everything under `folder`, None when it does not exist: what a
  refused command must leave as it found it."""
  if not os.path.exists(folder):
    return None
  found = {}
  for base, dirs, files in os.walk(folder):
    for name in dirs + files:
      stat = os.lstat(os.path.join(base, name))
      found[os.path.relpath(os.path.join(base, name), folder)] = (stat.st_size, stat.st_mtime_ns)
  return found


def forbid_slow_stages(monkeypatch):
  """The encoder's pretraining and the feature extraction fail the test if called: a refused run
  must reach neither."""
  from rsvqa_jax.features import image_cache, pretrain  # pylint: disable=g-import-not-at-top

  def forbidden(name):
    def call(*args, **kwargs):
      raise AssertionError(f"{name} ran before the refusal")
    return call

  for module, name in ((pretrain, "pretrain"), (image_cache, "image_features")):
    monkeypatch.setattr(module, name, forbidden(name))


def tiny_task(n_images=48, dim=8, seed=0):
  """(records.Dataset, Features) with train/val/test image splits 60/20/20%."""
  rng = np.random.default_rng(seed)
  feats = rng.normal(size=(n_images, dim)).astype(np.float32)
  image_ids = np.arange(100, 100 + n_images, dtype=np.int64)
  order = rng.permutation(n_images)
  cut1, cut2 = int(0.6 * n_images), int(0.8 * n_images)
  split_of = {int(image_ids[i]): ("train" if r < cut1 else "val" if r < cut2 else "test")
              for r, i in enumerate(order)}
  rows = {"train": [], "val": [], "test": []}
  qid = 0
  for i, image_id in enumerate(image_ids.tolist()):
    for k, obj in enumerate(OBJECTS):
      yes = feats[i, k] > 0
      rows[split_of[image_id]].append(dict(
          question_id=qid, image_id=image_id, qtype="presence", question=f"Is there a {obj}?",
          answer="yes" if yes else "no", raw_answer="yes" if yes else "no"))
      qid += 1
    urban = "urban" if feats[i, 4] > 0 else "rural"
    rows[split_of[image_id]].append(dict(
        question_id=qid, image_id=image_id, qtype="rural_urban",
        question="Is it a rural or an urban area", answer=urban, raw_answer=urban))
    qid += 1
  splits = {name: records.Split.from_rows(name, r) for name, r in rows.items()}
  dataset = records.Dataset(name="lr", root="<memory>", splits=splits)
  return dataset, Features(feats, image_ids)


def tiny_config(**train):
  """Small Skip-thoughts (random init) + e-mult head trained with Adam for a few epochs."""
  c = config_lib.base_config()
  c.text.checkpoint = config_lib.RANDOM
  c.text.word_dim = 8
  c.text.hidden_dim = 16
  c.model.hidden_dim = 32
  c.model.classifier_dim = 16
  c.model.dropout = 0.1
  c.optim.lr = 3e-3
  c.optim.text_lr = 3e-3
  c.train.batch_size = 16
  c.train.eval_batch_size = 32
  c.train.num_epochs = 6
  c.train.checkpoint_every_steps = 5
  c.train.log_every_steps = 5
  c.train.progress_bar = False
  for k, v in train.items():
    c.train[k] = v
  return c


def test_override_types_and_unknown_keys():
  c = config_lib.base_config()
  config_lib.apply_overrides(c, ["model.fusion=mutan", "optim.lr=1e-3", "train.num_epochs=3",
                                 "text.frozen=true", "data.root=/x", "train.length_buckets=(8,16)"])
  assert (c.model.fusion, c.optim.lr, c.train.num_epochs, c.text.frozen, c.data.root) == (
      "mutan", 1e-3, 3, True, "/x")
  assert c.train.length_buckets == (8, 16)
  with pytest.raises(RSVQAError, match=r"--config.model.fusoin: no key 'fusoin' in model"):
    config_lib.apply_overrides(c, ["model.fusoin=mutan"])
  with pytest.raises(RSVQAError, match=r"num_epochs=many: expected an integer$"):
    config_lib.apply_overrides(c, ["train.num_epochs=many"])
  with pytest.raises(RSVQAError, match="expected true or false"):
    config_lib.apply_overrides(c, ["text.frozen=maybe"])


def test_identity_ignores_run_control_and_roundtrips():
  c = tiny_config(stop_after_steps=3)
  d = tiny_config()
  assert config_lib.identity(c) == config_lib.identity(d)
  back = config_lib.from_dict(config_lib.to_dict(c))
  assert config_lib.identity(back) == config_lib.identity(c)
  assert back.train.length_buckets == c.train.length_buckets


def test_jit_init_matches_eager_and_reuses_its_program():
  def build(params, dropout):
    return SkipThoughts(7, word_dim=4, hidden_dim=6, dropout=0.1,
                        rngs=nnx.Rngs(params=params, dropout=dropout))

  programs = []
  for seed in (0, 1):
    fast, eager = checkpoints.jit_init(build, seed, seed + 1), build(seed, seed + 1)
    programs.append(set(checkpoints._INIT_PROGRAMS))
    for kind in (nnx.Param, nnx.RngState):
      a, b = (jax.tree.leaves(jax.tree.map(
          lambda x: jax.random.key_data(x) if jnp.issubdtype(x.dtype, jax.dtypes.prng_key) else x,
          nnx.state(m, kind))) for m in (fast, eager))
      assert len(a) == len(b) > 0
      for x, y in zip(a, b):
        np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6)
  assert programs[0] == programs[1]  # the second seed reused the compiled init program
  wider = checkpoints.jit_init(lambda p, d: SkipThoughts(  # another structure: its own program
      7, word_dim=4, hidden_dim=8, dropout=0.1, rngs=nnx.Rngs(params=p, dropout=d)), 0, 1)
  assert len(set(checkpoints._INIT_PROGRAMS) - programs[1]) == 1 and wider.W.shape != fast.W.shape
  assert not np.allclose(build(0, 1).W[...], build(1, 2).W[...])


def test_jit_init_tells_programs_apart_by_their_constants_and_variable_types():
  """The jaxpr's text names a closed-over array without its values, and says nothing of the
  Variable types of the result: either alone would hand one model another's weights."""
  class Holder(nnx.Module):
    def __init__(self, values, kind):
      self.v = kind(jnp.asarray(values, jnp.float32))

  built = {(tag, kind): checkpoints.jit_init(lambda _, v=values, k=kind: Holder(v, k), 0)
           for tag, values in (("small", np.arange(4)), ("large", 100 * np.arange(4)))
           for kind in (nnx.Param, nnx.BatchStat)}
  for (tag, kind), model in built.items():
    np.testing.assert_array_equal(model.v[...], (1 if tag == "small" else 100) * np.arange(4))
    assert type(model.v) is kind


EVAL_WIDTH_SCRIPT = r"""
import json, logging, sys
import jax
sys.path.insert(0, {here!r})
from rsvqa_jax.train import run as run_lib
from test_train_support import tiny_config, tiny_task

assert jax.device_count() == 8, jax.devices()
lines = []
handler = logging.Handler()
handler.emit = lambda record: lines.append(record.getMessage())
logger = logging.getLogger("rsvqa_jax")
logger.addHandler(handler)
logger.setLevel(logging.INFO)
dataset, features = tiny_task()
for i, size in enumerate((70, 70, 64)):  # the same setting twice: one line
  run_lib.build(tiny_config(eval_batch_size=size), {workdir!r} + str(i), ["train", "val"],
                dataset=dataset, features=features)
print("RESULT" + json.dumps([l for l in lines if "eval_batch_size" in l]))
"""


def test_an_eval_batch_rounded_up_to_the_devices_is_said_once(tmp_path, caplog):
  """train.eval_batch_size 70 ran as 72 on 8 devices without a line."""
  from rsvqa_jax.train import run as run_lib  # pylint: disable=g-import-not-at-top
  dataset, features = tiny_task()
  with warnings_of_rsvqa_jax(caplog, logging.INFO):  # one device: nothing rounded, nothing said
    run_lib.build(tiny_config(eval_batch_size=70), str(tmp_path / "one"), ["train", "val"],
                  dataset=dataset, features=features)
  assert not [r for r in caplog.records if "eval_batch_size" in r.getMessage()]
  here = os.path.dirname(os.path.abspath(__file__))
  env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8",
             JAX_PLATFORMS="cpu")
  script = EVAL_WIDTH_SCRIPT.format(here=here, workdir=str(tmp_path / "w"))
  proc = subprocess.run([sys.executable, "-c", script], env=env, cwd=os.path.dirname(here),
                        capture_output=True, text=True, timeout=600)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert json.loads(proc.stdout.split("RESULT", 1)[1]) == [
      "train.eval_batch_size=70 rounded up to 72: evaluation batches are split evenly over the 8 "
      "devices (2 masked padding rows per batch)"]


@contextlib.contextmanager
def held_by_another_process(folder, what="training"):
  """Another process holds the folder's lock (`what` working there) for the block; its PID."""
  holder = subprocess.Popen(
      [sys.executable, "-c", "import sys; from rsvqa_jax import storage\n"
       f"with storage.locked({folder!r}, {what!r}):\n"
       "  print('held', flush=True); sys.stdin.read()"],
      stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
  try:
    assert holder.stdout.readline().strip() == "held"
    yield holder.pid
  finally:
    holder.communicate("")  # end of input: the holder lets go
