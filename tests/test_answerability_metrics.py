"""Answerability metrics on pools worked by hand, the files they read, and the pool generator.

NDCG / MAP values below are computed on paper from DESIGN.md 6.3's definitions (gain 2^rel - 1,
discount log2(i + 1); AP@k = sum_{i <= k} P@i rel_i / min(k, R)); the binary threshold case is
built so that the threshold validation picks is not the one the test pairs would pick.
"""
import json
import math

import numpy as np
import pytest

from rsvqa_jax import cli
from rsvqa_jax.bias import answerability as m
from rsvqa_jax.data import answerability as pools_lib
from rsvqa_jax.data import questions, scenes
from rsvqa_jax.errors import RSVQAError

LOG3 = math.log2(3)


def test_perfect_ranking_scores_one():
  out = m.ranking(["a"] * 5, [2, 1, 1, 0, 0], [0.9, 0.7, 0.6, 0.2, 0.1])
  assert all(out[k] == pytest.approx(1.0) for k in m.RANKING_KEYS)
  assert out["ndcg_pools_left_out"] == out["map_pools_left_out"] == 0


def test_pools_of_one_candidate_rank_nothing_and_are_left_out():
  """Every pool of one candidate read NDCG and MAP 1 whatever the scores (constant 0 included)."""
  out = m.ranking(["a", "b", "c"], [2, 2, 1], [0.0, 0.0, 0.0])
  assert all(out[k] is None for k in m.RANKING_KEYS)
  assert out["ndcg_pools_left_out"] == out["map_pools_left_out"] == 3
  out = m.ranking(["a", "b", "b"], [2, 0, 2], [0.9, 0.9, 0.1])  # pool b ranked wrong
  assert out["ndcg_pools_left_out"] == out["map_pools_left_out"] == 1
  assert out["map@1"] == 0.0


def test_reversed_ranking_by_hand():
  out = m.ranking(["a"] * 3, [2, 1, 0], [0.1, 0.5, 0.9])  # ranked labels 0, 1, 2
  ideal3 = 3 + 1 / LOG3
  assert out["ndcg@1"] == 0.0
  assert out["ndcg@3"] == pytest.approx((1 / LOG3 + 3 / 2) / ideal3)  # 0.5869
  assert out["ndcg@5"] == pytest.approx(out["ndcg@3"])  # a pool of 3: k = 5 cuts nothing more
  assert out["map@1"] == 0.0
  assert out["map@3"] == pytest.approx(1 / 3)  # P@3 = 1/3 at the only relevant, / min(3, 1)


def test_all_zero_pool_and_label_one_pool_are_left_out_and_counted():
  ids = ["zero"] * 3 + ["ones"] * 2 + ["mixed"] * 3
  labels = [0, 0, 0, 1, 1, 2, 0, 1]
  scores = [0.5, 0.4, 0.3, 0.2, 0.9, 0.1, 0.8, 0.3]
  out = m.ranking(ids, labels, scores)
  # NDCG: "zero" left out; "ones" is perfect whatever the order (equal gains); "mixed" ranks
  # labels 0, 1, 2: NDCG@1 0, NDCG@3 (1/log2 3 + 3/2) / (3 + 1/log2 3).
  assert out["ndcg_pools_left_out"] == 1
  assert out["ndcg@1"] == pytest.approx((1 + 0) / 2)
  assert out["ndcg@3"] == pytest.approx((1 + (1 / LOG3 + 1.5) / (3 + 1 / LOG3)) / 2)
  # MAP: only "mixed" has a label 2 (R = 1), ranked third.
  assert out["map_pools_left_out"] == 2
  assert out["map@1"] == 0.0 and out["map@3"] == pytest.approx(1 / 3)


def test_map_divides_by_min_k_r():
  out = m.ranking(["a"] * 4, [2, 2, 0, 2], [0.9, 0.8, 0.7, 0.6])  # R = 3
  assert out["map@1"] == 1.0
  assert out["map@3"] == pytest.approx((1 + 1 + 0) / 3)
  assert out["map@5"] == pytest.approx((1 + 1 + 0 + 3 / 4) / 3)


def test_a_tie_scores_the_mean_of_its_orders():
  # Orders 2, 0 (NDCG@1 1, NDCG@3 1, AP@1 1, AP@3 1) and 0, 2 (0, 1/log2 3, 0, P@2 = 1/2).
  for labels in ([2, 0], [0, 2]):
    out = m.ranking(["a", "a"], labels, [0.5, 0.5])
    assert out["ndcg@1"] == 0.5 and out["map@1"] == 0.5 and out["map@3"] == 0.75
    assert out["ndcg@3"] == pytest.approx((1 + 1 / LOG3) / 2)


def test_a_tie_below_the_top_by_hand():
  # Label 1 first, then labels 2 and 0 tied: orders 1, 2, 0 and 1, 0, 2. Gains 1, 3, 0; ideal
  # DCG@3 3 + 1/log2 3. AP@3 (R = 1): P@2 = 1/2 or P@3 = 1/3.
  ideal = 3 + 1 / LOG3
  for order in ([0, 1, 2], [0, 2, 1], [2, 1, 0]):
    out = m.ranking(["a"] * 3, np.array([1, 2, 0])[order], np.array([0.9, 0.5, 0.5])[order])
    assert out["ndcg@1"] == pytest.approx(1 / 3)
    assert out["ndcg@3"] == pytest.approx(((1 + 3 / LOG3) / ideal + (1 + 3 / 2) / ideal) / 2)
    assert out["map@1"] == 0.0 and out["map@3"] == pytest.approx((1 / 2 + 1 / 3) / 2)


def test_map_of_a_tie_is_its_expectation_over_orders():
  # Labels 2, 2, 0 all tied, R = 2: orders 220 (AP 1), 202 ((1 + 2/3) / 2), 022 ((1/2 + 2/3) / 2),
  # each a third of the orders: 29/36.
  assert m.ranking(["a"] * 3, [2, 0, 2], [0.5] * 3)["map@3"] == pytest.approx(29 / 36)


def test_equal_scores_give_one_value_in_any_row_order():
  labels = np.array([2, 1, 0, 0, 2, 1, 1, 0])
  ids = ["a"] * 5 + ["b"] * 3
  first = m.ranking(ids, labels, [0.5] * 8)
  # Pool a: mean gain (3 + 1 + 3) / 5 at every position, ideal@1 3; pool b: 2/3 against 1.
  assert first["ndcg@1"] == pytest.approx((7 / 5 / 3 + 2 / 3) / 2)
  assert first["map@1"] == pytest.approx(2 / 5)  # pool b has no label 2: left out
  for order in ([4, 3, 2, 1, 0, 7, 6, 5], [1, 3, 0, 2, 4, 5, 7, 6]):
    assert m.ranking(ids, labels[order], [0.5] * 8) == first


def test_reversed_rows_change_no_metric():
  rng = np.random.default_rng(3)
  ids = np.repeat(np.arange(40), 5)
  labels = rng.integers(0, 3, 200)
  scores = rng.integers(0, 4, 200) / 3  # many ties
  forward = m.ranking(ids, labels, scores)
  assert forward == pytest.approx(m.ranking(ids[::-1], labels[::-1], scores[::-1]), abs=1e-12)


def test_ternary_cuts_and_paper_majority_f1():
  acc, f1 = m.ternary([0, 1, 2, 1, 2], [0.2, 0.5, 0.9, 1 / 3, 2 / 3])
  assert (acc, f1) == (1.0, 1.0)
  labels = [0] * 14 + [1] * 7 + [2] * 4  # everything predicted 0: F1 of label 0 only, / 3
  acc, f1 = m.ternary(labels, [0.0] * 25)
  assert acc == pytest.approx(14 / 25)
  assert f1 == pytest.approx((2 * 14 / (2 * 14 + 11)) / 3)
  # label 1 in neither the truth nor the predictions: averaged over 0 and 2 (it read 0.667)
  assert m.ternary([2, 0, 2], [1.0, 0.0, 1.0]) == (1.0, 1.0)
  assert m.ternary([2, 0, 2], [1.0, 0.5, 1.0])[1] == pytest.approx((1 + 0 + 0) / 3)


def test_threshold_from_validation_differs_from_the_test_pick():
  val_labels, val_scores = [2, 2, 0, 0], [0.8, 0.6, 0.5, 0.2]  # F1 1 at 0.6
  test_labels, test_scores = [2, 0, 2], [0.55, 0.58, 0.7]  # test alone: F1 0.8 at 0.55
  assert m.best_threshold(val_labels, val_scores) == 0.6
  assert m.best_threshold(test_labels, test_scores) == 0.55
  out = m.metrics(["p"] * 3, test_labels, test_scores, val=(val_labels, val_scores))
  assert out["binary_threshold"] == 0.6
  assert (out["binary_precision"], out["binary_recall"]) == (1.0, 0.5)
  assert out["binary_f1"] == pytest.approx(2 / 3)
  assert out["binary_acc"] == pytest.approx(2 / 3)


def test_threshold_ties_take_the_highest():
  # F1 2/3 at 0.9 (one of two found) and at 0.6 (both found, two false): the highest wins.
  assert m.best_threshold([2, 0, 0, 2], [0.9, 0.8, 0.7, 0.6]) == 0.9


def test_no_validation_no_binary_metrics():
  out = m.metrics(["p"] * 2, [2, 0], [0.9, 0.1])
  assert set(out) == set(m.KEYS)
  assert all(out[k] is None for k in m.BINARY_KEYS)
  with pytest.raises(RSVQAError, match="both validation files"):
    m.score_files("s.csv", "l.csv", val_scores="vs.csv")


def test_constant_scorer_is_the_all_positive_guess():
  labels = [2, 0, 0, 1, 2, 0]
  out = m.metrics(["a"] * 3 + ["b"] * 3, labels, [0.0] * 6, val=(labels, [0.0] * 6))
  assert out["binary_recall"] == 1.0
  assert out["binary_f1"] == pytest.approx(2 * (1 / 3) / (1 + 1 / 3))


def test_baselines():
  assert m.majority_score([1, 1, 0, 0, 2]) == 0.0  # tie 0 / 1: the lowest label
  assert m.majority_score([2, 2, 1]) == 1.0
  r = m.random_scores(300, 0)
  assert set(np.unique(r).tolist()) == {0.0, 0.5, 1.0}
  assert np.array_equal(r, m.random_scores(300, 0))
  base = m.baselines([0, 0, 1], ["a"] * 3, [2, 1, 0], [2, 0, 0])
  # One score for all: every order as likely, mean gain (3 + 1 + 0) / 3 against the ideal 3.
  assert base["Majority"]["ndcg@1"] == pytest.approx(4 / 9)
  assert m.baselines([0, 0, 1], ["a"] * 3, [0, 1, 2], [2, 0, 0])["Majority"] == base["Majority"]
  assert set(base) == {"Random", "Majority"}


def test_entropy_peaks_at_one_half():
  h = m.binary_entropy([0.0, 0.5, 1.0, 0.25])
  assert h[1] == pytest.approx(1.0) and h[0] < 1e-9 and h[2] < 1e-9
  assert h[3] == pytest.approx(-(0.25 * math.log2(0.25) + 0.75 * math.log2(0.75)))


def test_word_bias_finds_the_telling_word():
  questions_ = ["Is there a small farmland?"] * 30 + ["Is there a farmland?"] * 60
  labels = [1] * 30 + [0, 2] * 30
  table, top = m.word_bias(questions_, labels, min_count=20, top=3)
  assert table.rows[0][0] == "small" and top == pytest.approx(table.rows[0][5])
  assert table.rows[0][3] == 1.0  # all label 1
  # Total variation from the overall shares (1/3, 1/3, 1/3): 0.5 x (1/3 + 2/3 + 1/3) = 2/3; a
  # word of every pair is as distant as the overall shares are from themselves, 0.
  assert table.rows[0][1] == 30 and table.rows[0][5] == pytest.approx(2 / 3) == top
  assert [r[5] for r in table.rows[1:]] == pytest.approx([0.0, 0.0])
  assert [r[1] for r in table.rows[1:]] == [90, 90]


def _write(path, header, rows):
  pools_lib.write(str(path), rows, columns=header)
  return str(path)


def test_score_command_writes_exactly_the_keys(tmp_path, capsys):
  labels = _write(tmp_path / "l.csv", ("pool_id", "question", "image_id", "label"),
                  [(0, "q", 1, 2), (0, "q", 2, 0), (1, "r", 3, 1), (1, "r", 4, 2)])
  scores = _write(tmp_path / "s.csv", ("pool_id", "image_id", "score"),
                  [(1, 4, 0.9), (1, 3, 0.2), (0, 2, 0.3), (0, 1, 0.7)])
  val_labels = _write(tmp_path / "vl.csv", ("pool_id", "question", "image_id", "label"),
                      [(5, "s", 1, 2), (5, "s", 2, 0), (6, "t", 3, 2), (6, "t", 4, 0)])
  val_scores = _write(tmp_path / "vs.csv", ("pool_id", "image_id", "score"),
                      [(5, 1, 0.7), (5, 2, 0.3), (6, 3, 0.9), (6, 4, 0.2)])
  out = tmp_path / "o"
  assert cli.main(["answerability", "score", "--scores", scores, "--labels", labels,
                   "--val-scores", val_scores, "--val-labels", val_labels, "--out",
                   str(out)]) == 0
  metrics = json.loads((out / "metrics.json").read_text())
  assert list(metrics) == list(m.KEYS)
  assert metrics["ndcg@1"] == 1.0 and metrics["binary_threshold"] == 0.7
  # The scored files as validation: the threshold was tuned on the pairs it scored.
  assert cli.main(["answerability", "score", "--scores", scores, "--labels", labels,
                   "--val-scores", scores, "--val-labels", labels, "--out",
                   str(tmp_path / "o3")]) == 2
  assert (f"--val-labels {labels} shares 4 pair(s) with --labels {labels} (e.g. pool 0, image 1): "
          "the binary threshold would be tuned on the pairs it scores") in capsys.readouterr().err
  assert cli.main(["answerability", "score", "--scores", scores, "--labels", labels, "--out",
                   str(tmp_path / "o2")]) == 0
  assert "binary metrics not reported" in capsys.readouterr().out
  assert json.loads((tmp_path / "o2" / "metrics.json").read_text())["binary_f1"] is None


@pytest.mark.parametrize("rows, message", [
    ([(0, 1, 1.5)], r"s\.csv:2: score '1\.5' is not a number in \[0, 1\]"),
    ([(0, 1, 0.5), (0, 1, 0.2)], "scores image 1 twice"),
    ([(0, 9, 0.5)], "pool 0, image 9 is not in"),
    ([(0, 1, 0.5)], "no score for 1 labelled pair"),
])
def test_score_files_errors_name_the_file(tmp_path, rows, message):
  labels = _write(tmp_path / "l.csv", ("pool_id", "image_id", "label"), [(0, 1, 2), (0, 2, 0)])
  scores = _write(tmp_path / "s.csv", ("pool_id", "image_id", "score"), rows)
  with pytest.raises(RSVQAError, match=message):
    m.score_files(scores, labels)


def test_a_blank_pool_or_image_id_is_refused(tmp_path):
  """Pools whose id column was left blank in both files were scored as one pool of them all."""
  for column, (pool, image) in (("pool_id", ("", 1)), ("image_id", (0, ""))):
    labels = _write(tmp_path / "l.csv", ("pool_id", "image_id", "label"),
                    [(pool, image, 2), (pool or 5, image or 2, 0)])
    scores = _write(tmp_path / "s.csv", ("pool_id", "image_id", "score"),
                    [(pool, image, 0.5), (pool or 5, image or 2, 0.2)])
    expected = r"empty pool_id" if column == "pool_id" else r"image_id '' is not an integer"
    with pytest.raises(RSVQAError, match=rf"s\.csv:2: {expected}$"):
      m.score_files(scores, labels)


def test_image_ids_are_read_as_the_pool_files_read_them(tmp_path):
  """Compared as text, '012' beside '12' in a labels file was a fifth candidate (image 12 twice,
  which the pool reader refuses), and '012' in the scores file no image of the labels."""
  rows = [(0, 12, 2), (0, 3, 0), (1, 4, 1), (1, 5, 0)]
  labels = _write(tmp_path / "l.csv", ("pool_id", "image_id", "label"), rows)
  scores = _write(tmp_path / "s.csv", ("pool_id", "image_id", "score"),
                  [(p, f"{i:03d}", 0.9 if label else 0.1) for p, i, label in rows])
  pools, labelled, _ = m.aligned(scores, labels)
  assert pools.tolist() == ["0", "0", "1", "1"] and labelled.tolist() == [2, 0, 1, 0]
  twice = _write(tmp_path / "t.csv", ("pool_id", "image_id", "label"), rows + [(0, "012", 0)])
  with pytest.raises(RSVQAError, match=r"t\.csv:6: pool 0 lists image 12 twice$"):
    m.aligned(scores, twice)
  with pytest.raises(RSVQAError, match=r"p\.csv:4: pool 0 lists image 12 twice$"):
    pools_lib.read_pools(_write(tmp_path / "p.csv", pools_lib.COLUMNS,
                                [(p, "q", i, label) for p, i, label in
                                 rows[:2] + [(0, "012", 0)] + rows[2:]]))


def test_pool_file_errors(tmp_path):
  path = _write(tmp_path / "p.csv", pools_lib.COLUMNS, [(0, "q", 1, 2), (1, "r", 2, 0),
                                                        (0, "q", 3, 1)])
  with pytest.raises(RSVQAError, match=r"p\.csv:4: pool 0's rows are not together"):
    pools_lib.read_pools(path)
  path = _write(tmp_path / "b.csv", pools_lib.COLUMNS, [(0, "q", 1, 3)])
  with pytest.raises(RSVQAError, match=r"b\.csv:2: label '3' is not 0, 1 or 2"):
    pools_lib.read_pools(path)
  unlabelled = _write(tmp_path / "u.csv", pools_lib.COLUMNS[:3], [(0, "q", 1)])
  assert pools_lib.read_pools(unlabelled, labelled=False)[3].tolist() == [-1]
  two = _write(tmp_path / "t.csv", pools_lib.COLUMNS[:3], [(0, "q", 1), (0, "r", 2)])
  with pytest.raises(RSVQAError, match=r"t\.csv:3: pool 0 asks 'r' here and 'q' on its first "
                                       "row; a pool ranks images for one question"):
    pools_lib.read_pools(two, labelled=False)
  for name, rows, message in [("e.csv", [("", "q", 1)], r"e\.csv:2: empty pool_id$"),
                              ("h.csv", [(0, "q", 10**30)],
                               rf"h\.csv:2: image_id {10**30} is out of the range of image ids$"),
                              ("n.csv", [(0, "q", -1)],
                               r"n\.csv:2: image_id -1 is out of the range of image ids$")]:
    with pytest.raises(RSVQAError, match=message):
      pools_lib.read_pools(_write(tmp_path / name, pools_lib.COLUMNS[:3], rows), labelled=False)


# The generator.

def _scene_with(predicate, size=256):
  for image_id in range(200):
    scene = scenes.make_scene(0, image_id, size)
    if predicate(scene):
      return image_id, scene
  raise AssertionError("no such scene in 200")


def test_labels_from_the_scene():
  image_id, scene = _scene_with(lambda s: any(o.cls == "road" for o in s.objects)
                                and any(o.cls == "forest" for o in s.objects))
  tile = pools_lib.Tile(image_id, scene)
  assert tile.label(questions.Phrase("road")) == 1  # every road crosses the tile: cut
  forests = [o for o, cut in zip(scene.objects, tile.cut) if o.cls == "forest" and not cut]
  absent = next(c for c in scenes.CLASSES if not any(o.cls == c for o in scene.objects))
  assert tile.label(questions.Phrase(absent)) == 0
  if forests:
    assert tile.label(questions.Phrase("forest", forests[0].size)) == 2
  sizes = {o.size for o in scene.objects if o.cls == "forest"}
  missing = [s for s in scenes.SIZES if s not in sizes]
  if missing:  # the class is there, the attribute fails
    assert tile.label(questions.Phrase("forest", missing[0])) == 1


def test_balanced_pools_are_deterministic_and_uniform(tmp_path):
  from rsvqa_jax.data import synthetic  # pylint: disable=g-import-not-at-top
  root = str(tmp_path / "ds")
  generated = synthetic.generate(root, "lr", 160, 0, questions_per_image=1)
  ids = {s: np.unique(v.image_id) for s, v in generated.splits.items()}
  a = pools_lib.generate(root, str(tmp_path / "a"), ids, pools_per_image=2, balance=1.0)
  b, made = pools_lib.ensure(root, str(tmp_path / "a"), ids, pools_per_image=2, balance=1.0)
  assert not made and b["splits"] == a["splits"]
  pools_lib.generate(root, str(tmp_path / "b"), ids, pools_per_image=2, balance=1.0)
  for split in ids:
    files = [(tmp_path / d / f"Answerability_{split}.csv").read_bytes() for d in "ab"]
    assert files[0] == files[1]
  ids_, texts, images, labels = pools_lib.read_pools(pools_lib.pool_file(str(tmp_path / "a"),
                                                                         "train"))
  assert np.all(np.abs(np.asarray(pools_lib.shares(labels)) - 1 / 3) < 0.06)
  assert set(images.tolist()) <= set(ids["train"].tolist())
  assert len(set(ids_.tolist())) * 5 == len(ids_)
  assert all(not t.lower().startswith("is there a road") for t in texts.tolist())


def test_binary_recall_is_undefined_without_a_positive_pair():
  out = m.metrics(["p"] * 3, [0, 1, 0], [0.9, 0.2, 0.1], val=([2, 0], [0.8, 0.1]))
  assert out["binary_threshold"] == 0.8 and out["binary_recall"] is None
  assert out["binary_precision"] == 0.0 and out["binary_f1"] == 0.0
  assert m.metrics(["p"] * 2, [2, 0], [0.9, 0.1], val=([1, 0], [0.8, 0.1]))[
      "binary_threshold"] is None  # no val pair labelled 2: no threshold to choose


def test_a_binary_ratio_over_no_pair_is_undefined_not_zero(tmp_path, capsys):
  """No test pair at or above the threshold: precision is 0/0, and F1 too when no pair is
  labelled 2 either; they read 0.00 (recall, in the same case, n/a)."""
  out = m.metrics(["p"] * 2, [2, 0], [0.2, 0.1], val=([2, 0], [0.9, 0.1]))
  assert out["binary_threshold"] == 0.9 and out["binary_precision"] is None
  assert out["binary_recall"] == 0.0 and out["binary_f1"] == 0.0  # a pair labelled 2, missed
  out = m.metrics(["p"] * 2, [0, 0], [0.2, 0.1], val=([2, 0], [0.9, 0.1]))
  assert [out[f"binary_{k}"] for k in ("precision", "recall", "f1")] == [None] * 3
  assert out["binary_acc"] == 1.0
  from rsvqa_jax import cli  # pylint: disable=g-import-not-at-top
  files = {"labels": "0,1,2\n0,2,0\n", "scores": "0,1,0.2\n0,2,0.1\n",
           "val-labels": "1,3,2\n1,4,0\n", "val-scores": "1,3,0.9\n1,4,0.1\n"}
  argv = ["answerability", "score", "--out", str(tmp_path / "out")]
  for name, rows in files.items():
    header = "pool_id,image_id," + ("label" if "labels" in name else "score")
    (tmp_path / f"{name}.csv").write_text(f"{header}\n{rows}")
    argv += [f"--{name}", str(tmp_path / f"{name}.csv")]
  assert cli.main(argv) == 0
  printed = capsys.readouterr().out
  assert (f"{tmp_path / 'scores.csv'}: Binary Precision n/a: no pair scores at or above the "
          "threshold 0.9\n") in printed
  assert "Binary Recall n/a" not in printed and "Binary F1 n/a" not in printed
  metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
  assert metrics["binary_precision"] is None and metrics["binary_f1"] == 0.0
  header = [c.strip() for c in printed.splitlines()[2].split("|")]
  row = [c.strip() for c in printed.splitlines()[4].split("|")]
  assert row[header.index("Binary Precision")] == "n/a", printed


def test_score_says_why_a_ranking_metric_is_undefined(tmp_path, capsys):
  """MAP (and NDCG) read n/a with no word when no pool had a relevant pair."""
  from rsvqa_jax import cli  # pylint: disable=g-import-not-at-top
  labels, scores = tmp_path / "labels.csv", tmp_path / "scores.csv"
  labels.write_text("pool_id,image_id,label\na,1,1\na,2,0\nb,3,0\nb,4,1\n")
  scores.write_text("pool_id,image_id,score\na,1,0.9\na,2,0.1\nb,3,0.2\nb,4,0.7\n")
  out = tmp_path / "out"
  assert cli.main(["answerability", "score", "--scores", str(scores), "--labels", str(labels),
                   "--out", str(out)]) == 0
  printed = capsys.readouterr().out
  assert f"{labels}: MAP n/a: no pool of 2 or more candidates has a pair labelled 2 (2 pools left out)" in printed
  assert "NDCG n/a" not in printed
  labels.write_text("pool_id,image_id,label\na,1,0\na,2,0\nb,3,0\nb,4,0\n")
  assert cli.main(["answerability", "score", "--scores", str(scores), "--labels", str(labels),
                   "--out", str(out)]) == 0
  assert f"{labels}: NDCG n/a: no pool of 2 or more candidates has a pair labelled 1 or 2 (2 pools left out)" in (
      capsys.readouterr().out)


def test_score_writes_only_into_a_folder_of_its_own(tmp_path, capsys):
  """`answerability score --out` wrote metrics.json into a dataset folder, and could overwrite
  evaluate's metrics beside its evaluation records (SPLIT_evaluation.json; evaluation.json
  before they were one per split)."""
  from rsvqa_jax import cli  # pylint: disable=g-import-not-at-top
  labels, scores = tmp_path / "labels.csv", tmp_path / "scores.csv"
  labels.write_text("pool_id,image_id,label\na,1,2\na,2,0\n")
  scores.write_text("pool_id,image_id,score\na,1,0.9\na,2,0.1\n")
  for name, held, what in (("ds", "LR_split_train_questions.json", "a dataset folder"),
                           ("run", "config.json", "a workdir's own folder"),
                           ("ev", "evaluation.json", "evaluate's folder"),
                           ("ev2", "test_evaluation.json", "evaluate's folder")):
    out = tmp_path / name
    out.mkdir()
    (out / held).write_text("{}")
    assert cli.main(["answerability", "score", "--scores", str(scores), "--labels", str(labels),
                     "--out", str(out)]) == 2
    assert f"--out {out}: {what}" in capsys.readouterr().err
    assert not (out / "metrics.json").exists()
  assert cli.main(["answerability", "score", "--scores", str(scores), "--labels", str(labels),
                   "--out", str(tmp_path / "new")]) == 0


def test_summary_reads_the_configured_balance_where_a_split_fell_back():
  """A study on a small set read 'No-information pools (balance 0 ...)' after its test split
  fell back to balance 0, and read the train pairs' words as if drawn at balance 0."""
  run = dict.fromkeys(("ndcg@1", "binary_f1", "ternary_acc"), 0.5)
  words = m.tables.Table(caption="w", columns=("word",),
                         rows=(("parking", 40, 0.52, 0.28, 0.20, 0.134),))

  def pool_set(name, balance, test_balance):
    return {"name": name, "balance": balance, "max_distance": 0.134, "words": words,
            "splits": {"test": {"shares": [0.4, 0.3, 0.3], "balance": test_balance}},
            "baselines": {"Random": run, "Majority": run},
            "rows": [{"role": "reference", "lm": "st", "label": "ref", "runs": [run]},
                     {"role": "blind", "lm": "st", "label": "blind", "runs": [run]}]}

  text = " ".join(m.summary([pool_set("main", 0.5, 0.5), pool_set("no_info", 1.0, 0.0)],
                            "test").split())
  assert "**Main pools** (balance 0.5; test labels" in text
  assert ("**No-information pools** (balance 1, its test pools at balance 0: too few test images "
          "for 1, so they carry label information like the main set's; test labels") in text
  assert "No word tells the label" in text  # train pairs at balance 1
  assert text.count("Words that predict the label") == 1  # the main set's


def test_a_mean_over_runs_says_when_some_runs_lack_the_metric():
  """Binary precision is None for a seed that predicts no positive: the mean row read "80.00
  (0.00)", one seed's value shown as a mean and std over every seed."""
  full = {key: 0.8 for _, key in m.TABLE_COLUMNS}
  other = {key: 0.6 for _, key in m.TABLE_COLUMNS}
  lacking = {**other, "binary_precision": None}
  third = {key: 0.7 for _, key in m.TABLE_COLUMNS}
  column = [c for c, _ in m.TABLE_COLUMNS].index("Binary Precision") + 1
  ndcg = [c for c, _ in m.TABLE_COLUMNS].index("NDCG@1") + 1
  two = m.table4([("mean", [full, lacking])], "c").rows[0]
  assert two[ndcg] == "70.00 (10.00)" and two[column] == "80.00 (1 of 2 runs)"
  three = m.table4([("mean", [full, lacking, third])], "c").rows[0]
  assert three[column] == "75.00 (5.00; 2 of 3 runs)"
  none = m.table4([("mean", [{**full, "binary_precision": None}, lacking])], "c").rows[0]
  assert none[column] == "n/a"


def test_evaluate_says_whose_binary_metric_is_undefined(monkeypatch, capsys):
  """`evaluate --answerability --seeds A B` on one pool file explained the binary n/a of the last
  run alone, under the labels file, with another run's threshold."""
  import types  # pylint: disable=g-import-not-at-top
  from rsvqa_jax.commands import answerability as command  # pylint: disable=g-import-not-at-top
  from rsvqa_jax.eval import answerability as evaluation  # pylint: disable=g-import-not-at-top
  full = m.metrics(["p"] * 2, [2, 0], [0.9, 0.1], val=([2, 0], [0.9, 0.1]))
  none_above = m.metrics(["p"] * 2, [2, 0], [0.2, 0.1], val=([2, 0], [0.8, 0.1]))
  assert full["binary_precision"] == 1.0 and none_above["binary_precision"] is None
  record = lambda w, metrics: {"workdir": w, "split": "test", "val_split": "val", "pools": 1,
                               "pairs": 2, "step": 5, "checkpoint": "best", "labels": "pools.csv",
                               "metrics": metrics}
  made = {"a": record("a", none_above), "b": record("b", full)}
  monkeypatch.setattr(evaluation, "evaluate", lambda w, split, **_: made[w])
  monkeypatch.setattr(evaluation, "baselines", lambda r: {})
  args = types.SimpleNamespace(adversarial=None, shortcuts=None, split="test",
                               allow_pickle=False)
  command.evaluate(args, ["a", "b"], {})
  printed = capsys.readouterr().out
  assert "a: Binary Precision n/a: no pair scores at or above the threshold 0.8\n" in printed
  assert "b: Binary" not in printed and "pools.csv: Binary" not in printed
