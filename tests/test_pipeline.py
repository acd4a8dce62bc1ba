"""Tests of the input pipelines: coverage, sharding, determinism, bucketing, resume."""
import numpy as np
import pytest

from rsvqa_jax.data import pipeline
from rsvqa_jax.data import records
from rsvqa_jax.errors import RSVQAError

N = 37
WIDTH = 12


def make_columns(n=N, width=WIDTH, seed=0):
  """Columns like split_columns produces, with random lengths 1..width."""
  rng = np.random.default_rng(seed)
  lengths = rng.integers(1, width + 1, size=n)
  tokens = rng.integers(1, 100, size=(n, width)).astype(np.int32)
  mask = (np.arange(width)[None] < lengths[:, None]).astype(np.int32)
  tokens *= mask
  columns = {
      "question_id": np.arange(1000, 1000 + n, dtype=np.int64),
      "image_index": (np.arange(n) // 3).astype(np.int32),
      "answer": rng.integers(-1, 9, size=n).astype(np.int32),
      "tokens": tokens,
      "mask": mask,
  }
  return columns, lengths


def _grain(columns, **kw):
  return iter(pipeline.make_loader(columns, **kw))


def _numpy(columns, **kw):
  return pipeline.batch_iterator(columns, **kw)


MAKERS = {"grain": _grain, "numpy": _numpy}


@pytest.fixture(params=sorted(MAKERS))
def make(request):
  """Builds an iterator with one of the two implementations; defaults shared by the tests."""

  def _make(columns, **overrides):
    kw = dict(batch_size=8, shuffle=True, seed=3, num_epochs=1, shard_index=0, shard_count=1,
              drop_remainder=False)
    kw.update(overrides)
    return MAKERS[request.param](columns, **kw)

  return _make


def _indices(batches):
  return np.concatenate([b["index"] for b in batches])


def test_one_epoch_covers_every_example_once(make):
  columns, _ = make_columns()
  batches = list(make(columns))
  assert [len(b["index"]) for b in batches] == [8, 8, 8, 8, 5]
  index = _indices(batches)
  np.testing.assert_array_equal(np.sort(index), np.arange(N))
  assert not np.array_equal(index, np.arange(N))  # shuffled
  for b in batches:
    for name, col in columns.items():
      np.testing.assert_array_equal(b[name], col[b["index"]])
    assert b["tokens"].dtype == np.int32 and b["tokens"].shape[1] == WIDTH


def test_no_shuffle_keeps_order_and_drop_remainder_drops(make):
  columns, _ = make_columns()
  index = _indices(list(make(columns, shuffle=False)))
  np.testing.assert_array_equal(index, np.arange(N))
  batches = list(make(columns, drop_remainder=True))
  assert [len(b["index"]) for b in batches] == [8, 8, 8, 8]
  assert len(np.unique(_indices(batches))) == 32


def test_two_shards_are_disjoint_halves(make):
  columns, _ = make_columns()
  a = _indices(list(make(columns, shard_index=0, shard_count=2, drop_remainder=True)))
  b = _indices(list(make(columns, shard_index=1, shard_count=2, drop_remainder=True)))
  assert len(a) == len(b) == 16  # 2 batches of 8 out of 18 rows each
  assert not set(a) & set(b)
  assert set(a) <= set(range(18)) and set(b) <= set(range(18, 36))


def test_uneven_shards_cover_everything_or_are_refused():
  columns, _ = make_columns()
  kw = dict(batch_size=8, shuffle=True, seed=0, num_epochs=1, shard_count=2,
            drop_remainder=False)
  a = _indices(list(pipeline.batch_iterator(columns, shard_index=0, **kw)))
  b = _indices(list(pipeline.batch_iterator(columns, shard_index=1, **kw)))
  assert (len(a), len(b)) == (19, 18)
  np.testing.assert_array_equal(np.sort(np.concatenate([a, b])), np.arange(N))
  with pytest.raises(ValueError, match="do not split evenly"):
    pipeline.make_loader(columns, shard_index=0, **kw)
  even = {k: v[:36] for k, v in columns.items()}
  a = _indices(list(pipeline.make_loader(even, shard_index=0, **kw)))
  b = _indices(list(pipeline.make_loader(even, shard_index=1, **kw)))
  np.testing.assert_array_equal(np.sort(np.concatenate([a, b])), np.arange(36))


def test_same_seed_same_order_other_seed_other_order(make):
  columns, _ = make_columns()
  first = _indices(list(make(columns, seed=5)))
  np.testing.assert_array_equal(first, _indices(list(make(columns, seed=5))))
  assert not np.array_equal(first, _indices(list(make(columns, seed=6))))


def test_epochs_are_reshuffled(make):
  columns, _ = make_columns()
  index = _indices(list(make(columns, num_epochs=3)))
  assert len(index) == 3 * N
  epochs = index.reshape(3, N)
  for e in epochs:
    np.testing.assert_array_equal(np.sort(e), np.arange(N))
  assert not np.array_equal(epochs[0], epochs[1])
  assert not np.array_equal(epochs[1], epochs[2])


def test_endless_stream(make):
  columns, _ = make_columns()
  it = make(columns, num_epochs=None, drop_remainder=True)
  index = _indices([next(it) for _ in range(20)])  # 160 examples: more than 4 epochs
  np.testing.assert_array_equal(np.sort(index[:N]), np.arange(N))
  np.testing.assert_array_equal(np.sort(index[N:2 * N]), np.arange(N))


def test_length_buckets_cut_to_smallest_fitting_bucket(make):
  columns, _ = make_columns(n=200)
  rng = np.random.default_rng(1)  # mostly short questions, so that every bucket is used
  lengths = np.where(rng.random(200) < 0.7, rng.integers(1, 5, 200), rng.integers(1, 13, 200))
  batches = list(make(columns, length_buckets=(8, 4, 12), lengths=lengths, batch_size=3))
  widths = set()
  for b in batches:
    longest = lengths[b["index"]].max()
    expected = min(w for w in (4, 8, 12) if w >= longest)
    np.testing.assert_array_equal(b["length"], lengths[b["index"]])
    np.testing.assert_array_equal(b["tokens"], columns["tokens"][b["index"], :expected])
    np.testing.assert_array_equal(b["mask"], columns["mask"][b["index"], :expected])
    np.testing.assert_array_equal(b["answer"], columns["answer"][b["index"]])
    widths.add(b["tokens"].shape[1])
  assert widths == {4, 8, 12}  # every bucket used, nothing else


def test_resume_from_state_reproduces_remaining_batches(make):
  columns, lengths = make_columns()
  kw = dict(num_epochs=2, length_buckets=(6, 12), lengths=lengths)
  it = make(columns, **kw)
  for _ in range(6):  # into the second epoch
    next(it)
  state = it.get_state()
  rest = list(it)
  assert len(rest) == 4  # 74 examples in 10 batches of 8 (last one 2)
  resumed = make(columns, **kw)
  resumed.set_state(state)
  again = list(resumed)
  assert len(again) == len(rest)
  for a, b in zip(rest, again):
    assert a.keys() == b.keys()
    for k in a:
      np.testing.assert_array_equal(a[k], b[k])


def test_bad_arguments_raise(make):
  columns, lengths = make_columns()
  with pytest.raises(ValueError, match="needs the lengths"):
    make(columns, length_buckets=(4, 12))
  with pytest.raises(ValueError, match="exceeds the largest bucket"):
    make(columns, length_buckets=(4, 8), lengths=lengths)
  with pytest.raises(ValueError, match="different numbers of rows"):
    make({"a": np.zeros(3), "b": np.zeros(4)})
  with pytest.raises(ValueError, match="cannot be split"):
    make({"a": np.zeros(3)}, shard_index=0, shard_count=4)


def test_numpy_state_of_another_iterator_is_refused():
  columns, _ = make_columns()
  kw = dict(batch_size=8, shuffle=True, num_epochs=1, shard_index=0, shard_count=1,
            drop_remainder=False)
  state = pipeline.batch_iterator(columns, seed=1, **kw).get_state()
  with pytest.raises(ValueError, match="does not match"):
    pipeline.batch_iterator(columns, seed=2, **kw).set_state(state)


def test_numpy_order_is_documented_permutation():
  columns, _ = make_columns()
  index = _indices(list(pipeline.batch_iterator(
      columns, batch_size=8, shuffle=True, seed=4, num_epochs=2, shard_index=1,
      shard_count=2, drop_remainder=True)))
  expected = [18 + np.random.default_rng([4, e, 1]).permutation(18) for e in (0, 1)]
  np.testing.assert_array_equal(index, np.concatenate(expected)[:32])


def test_split_columns():
  split = records.Split.from_rows("train", [
      {"question_id": 7, "image_id": 30, "qtype": "count", "question": "q", "answer": "0",
       "raw_answer": "0"},
      {"question_id": 8, "image_id": 10, "qtype": "presence", "question": "r", "answer": "yes",
       "raw_answer": "yes"},
  ])
  cols = pipeline.split_columns(
      split, image_ids=[10, 20, 30], answers=[2, -1], tokens=[[5, 6, 7], [8, 0, 0]],
      lengths=[3, 1])
  np.testing.assert_array_equal(cols["image_index"], [2, 0])
  np.testing.assert_array_equal(cols["question_id"], [7, 8])
  np.testing.assert_array_equal(cols["answer"], [2, -1])
  np.testing.assert_array_equal(cols["mask"], [[1, 1, 1], [1, 0, 0]])
  assert cols["tokens"].dtype == np.int32 and cols["image_index"].dtype == np.int32
  with pytest.raises(RSVQAError, match="image id 30"):
    pipeline.split_columns(split, image_ids=[10, 20], answers=[0, 0], tokens=[[1], [1]],
                           lengths=[1, 1])


def test_shards_are_shuffled_independently():
  """Host 1's order is not host 0's shifted by the shard length."""
  columns, _ = make_columns()
  kw = dict(batch_size=8, shuffle=True, seed=0, num_epochs=1, shard_count=2, drop_remainder=True)
  a = _indices(list(pipeline.batch_iterator(columns, shard_index=0, **kw)))
  b = _indices(list(pipeline.batch_iterator(columns, shard_index=1, **kw)))
  assert not np.array_equal(b - b.min(), a - a.min())
