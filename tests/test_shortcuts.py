"""The shortcut OOD benchmark's rules on hand-built groups, and the benchmark folder it writes.

Rules (bias/shortcuts.py, DESIGN.md 6.1): a group is imbalanced when H / log(n) < 0.9; its tail
answers have count < 1.2 x the mean count per present answer; a one-answer group has no tail;
PMI ties go to the higher N(w), then alphabetical; the image-unit re-split puts no image in two
splits and draws 70 / 5 / 25 % of the images within rounding.
"""
import collections
import csv
import io
import json
import math
import os
import pathlib
import re
import shutil

import numpy as np
import pytest

from rsvqa_jax import cli
from rsvqa_jax.bias import shortcut_report, shortcuts
from rsvqa_jax.data import json_stream, records, rsvqa_json, split_files, synthetic
from rsvqa_jax.errors import RSVQAError


def _group(*counts):
  """(values, answers) of one group "g" with answers a0, a1, ... counted as given."""
  answers = [f"a{k}" for k, n in enumerate(counts) for _ in range(n)]
  return ["g"] * len(answers), answers


def _tails(*counts):
  values, answers = _group(*counts)
  rule = shortcuts.group_rules(values, answers)
  return rule, sorted({a for a, o in zip(answers, rule.ood) if o})


def test_entropy_rule_at_0_9():
  # 3 / 7: H / log 2 = 0.881 < 0.9, imbalanced; 33 / 67: 0.915, balanced.
  rule, tails = _tails(7, 3)
  assert rule.imbalanced.tolist() == [True] and rule.entropy[0] == pytest.approx(0.8813, abs=1e-4)
  assert tails == ["a1"]
  rule, tails = _tails(67, 33)
  assert rule.imbalanced.tolist() == [False] and tails == [] and not rule.head.any()


def test_tail_rule_is_below_1_2_times_the_mean():
  # 15 / 12 / 3 of 30: mean 10 per answer, tail below 12; 12 itself is head. H / log 3 = 0.859.
  rule, tails = _tails(15, 12, 3)
  assert rule.imbalanced.tolist() == [True]
  assert tails == ["a2"]
  assert int(rule.head.sum()) == 27 and int(rule.ood.sum()) == 3
  # 10 / 5 / 3 of 18: mean 6, both 5 and 3 are tails (H / log 3 = 0.893).
  assert _tails(10, 5, 3)[1] == ["a1", "a2"]


def test_single_answer_groups_have_no_tail():
  values = ["one"] * 5 + ["two"] * 10
  answers = ["yes"] * 5 + ["yes"] * 9 + ["no"]
  rule = shortcuts.group_rules(values, answers)
  assert rule.values == ["one", "two"]
  assert math.isnan(rule.entropy[0]) and rule.imbalanced.tolist() == [False, True]
  assert np.flatnonzero(rule.ood).tolist() == [14]  # the "no" of group two only
  assert not rule.head[:5].any() and rule.head[5:14].all()


def _split(name, rows):
  return records.Split.from_rows(name, [
      dict(question_id=i, image_id=image, qtype="presence", question=q, answer=a, raw_answer=a)
      for i, (image, q, a) in enumerate(rows)])


def test_pmi_ties_go_to_the_higher_count_then_alphabetical():
  # zebra (3 samples), apple and mango (1 each) occur only with "yes": equal PMI with it.
  train = _split("train", [(0, "Is there zebra apple", "yes"), (0, "Is there zebra mango", "yes"),
                           (1, "Is there zebra", "yes"), (1, "Is there kiwi", "no")])
  c = shortcuts.Cooccurrence([shortcuts.words(q)[2:] for q in train.question.tolist()],
                             train.answer.tolist())
  assert c.pmi("zebra", "yes") == c.pmi("apple", "yes") == pytest.approx(math.log(4 / 3))
  assert c.ranked(["mango", "apple", "zebra"], "yes") == ["zebra", "apple"]
  assert c.ranked(["mango", "apple"], "yes") == ["apple", "mango"]
  assert c.ranked(["zebra", "kiwi"], "no") == ["kiwi", "zebra"]  # PMI first: zebra never says no
  assert c.pmi("unseen", "yes") == -math.inf
  test = _split("test", [(2, "Is there apple mango zebra", "yes"), (2, "Is there apple", "no")])
  values = shortcuts.concepts({"train": train, "test": test}, {0: ("farm",), 2: ("farm", "lake")})
  assert values["test"]["qt"].tolist() == ["is there"] * 2
  assert values["test"]["kw"].tolist() == ["zebra", "apple"]  # no: apple is unseen with "no"
  assert values["test"]["kwp"].tolist() == ["apple+zebra", "apple"]
  assert values["test"]["qt_kw_ko"][0] == "is there+zebra+farm"
  assert values["test"]["kop"][0] == "farm+lake"  # lake unseen: -inf, after farm


def test_question_type_and_its_words():
  assert shortcuts.question_type("Is there a road?")[0] == "is there"
  assert shortcuts.question_type("How many small roads are there in the image?")[0] == "how many"
  assert shortcuts.question_type("Is an orchard present?")[0] == "is a"
  qt, own = shortcuts.question_type("What is the amount of roads?")
  assert qt == "what is the number of" and "amount" in own
  assert shortcuts.question_type("Is it a rural or an urban area")[0] == (
      "is it a rural or an urban area")
  assert shortcuts.question_type("Which land cover classes are shown?")[0] == "which"


def test_image_unit_split_keeps_images_whole():
  rng = np.random.default_rng(0)
  rows = [(image, f"Is there a road {k}?", "yes") for image in range(100)
          for k in range(int(rng.integers(1, 9)))]
  pooled = _split("pool", rows)
  parts = shortcuts.resplit(pooled, seed=3, unit="image")
  images = {s: set(pooled.image_id[i].tolist()) for s, i in parts.items()}
  assert not (images["train"] & images["val"] or images["train"] & images["iid_test"]
              or images["val"] & images["iid_test"])
  assert {s: len(v) for s, v in images.items()} == {"train": 70, "val": 5, "iid_test": 25}
  assert sorted(np.concatenate(list(parts.values())).tolist()) == list(range(len(pooled)))
  again = shortcuts.resplit(pooled, seed=3, unit="image")
  assert all(np.array_equal(parts[s], again[s]) for s in parts)
  by_question = shortcuts.resplit(pooled, seed=3, unit="question")
  n = len(pooled)
  for s, share in shortcuts.SHARES.items():
    assert abs(len(by_question[s]) - share * n) <= 1


def test_small_splits_round_and_keep_every_split():
  assert shortcuts.unit_counts(12) == {"train": 8, "val": 1, "iid_test": 3}
  assert shortcuts.unit_counts(3) == {"train": 1, "val": 1, "iid_test": 1}
  # It named neither the pooled splits nor the way out (a 3-image set: 2 in train and val).
  with pytest.raises(RSVQAError, match="^the re-split draws from the train and val splits "
                     "together: they hold 2 images, it needs at least 3 \\(one per split\\); give a "
                     "larger dataset; --unit question draws questions instead$"):
    shortcuts.unit_counts(2, "images")
  with pytest.raises(RSVQAError, match="they hold 2 questions, it needs at least 3 \\(one per "
                     "split\\); give a larger dataset$"):
    shortcuts.unit_counts(2, "questions")


def test_kmeans_separates_two_blobs():
  rng = np.random.default_rng(1)
  x = np.concatenate([rng.normal(0, 0.1, (20, 4)), rng.normal(5, 0.1, (10, 4))])
  labels = shortcuts.cluster_labels(range(30), x, 2, seed=0, source="toy")
  assign = [labels.labels[i][0] for i in range(30)]
  assert len(set(assign[:20])) == 1 and len(set(assign[20:])) == 1 and assign[0] != assign[20]
  assert labels.kind == "k-means clusters (K=2)"
  # Two runs of points 0..10 and 12..22 (step 0.5): Lloyd's only split of them is at the gap,
  # whatever the seeds, but a split at the midpoint of two seeds is not (seeds 5 and 22 split at
  # 13.5): the centres must move to their clusters' means for every seed to end at the gap.
  line = np.concatenate([np.arange(0, 10.25, 0.5), np.arange(12, 22.25, 0.5)])
  x = np.stack([line, np.zeros_like(line)], 1)
  for seed in range(10):
    assign = shortcuts.kmeans(x, 2, seed=seed)
    assert set(assign[:21]) == {assign[0]} and set(assign[21:]) == {1 - assign[0]}, (seed, assign)
  # Three tight blobs: 10 points at (-500, 0), 10 at (500, 0), 60 at (0, 10000). Seeds drawn with
  # probability proportional to the squared distance to the nearest seed (k-means++) land one in
  # each blob; drawn uniformly, two land in the big blob most of the time, and Lloyd's steps then
  # keep it split while one centre sits between the two small ones (a local minimum).
  x = np.concatenate([rng.normal((-500, 0), 1, (10, 2)), rng.normal((500, 0), 1, (10, 2)),
                      rng.normal((0, 10000), 1, (60, 2))])
  blob = np.repeat([0, 1, 2], [10, 10, 60])
  for seed in range(10):
    assign = shortcuts.kmeans(x, 3, seed=seed)
    assert sorted({assign[blob == b][0] for b in range(3)}) == [0, 1, 2], (seed, assign)
    for b in range(3):
      assert set(assign[blob == b]) == {assign[blob == b][0]}, (seed, b, assign)


# The benchmark folder, on a small synthetic dataset.

@pytest.fixture(scope="module")
def bench(tmp_path_factory):
  base = tmp_path_factory.mktemp("shortcuts")
  source = str(base / "lr")
  synthetic.generate(source, "lr", images=12, seed=0, questions_per_image=8)
  out = str(base / "out")
  assert cli.main(["shortcuts", "--data", source, "--out", out, "--seed", "1"]) == 0
  return source, out


def test_folder_holds_the_named_outputs(bench):
  source, out = bench
  split = json.loads(pathlib.Path(out, "split.json").read_text())
  assert list(split) == ["train", "val", "iid_test"]
  dataset = rsvqa_json.read_dataset(source, "lr")
  pooled = set(dataset["train"].question_id.tolist()) | set(dataset["val"].question_id.tolist())
  ids = [q for s in split.values() for q in s]
  assert len(ids) == len(set(ids)) and set(ids) == pooled
  with open(os.path.join(out, "concepts.csv"), newline="") as f:
    rows = list(csv.reader(f))
  assert rows[0] == ["question_id", "split", "qt", "kw", "kwp", "qt_kw", "ko", "kop", "qt_ko",
                     "kw_ko", "qt_kw_ko"]
  assert sorted(int(r[0]) for r in rows[1:]) == sorted(ids)
  for r in rows[1:]:
    assert r[5] == f"{r[2]}+{r[3]}" and r[10] == f"{r[2]}+{r[3]}+{r[6]}"
    assert r[4] == "+".join(sorted(r[4].split("+")))
  for c in shortcuts.CONCEPTS:
    ood = json.loads(pathlib.Path(out, f"ood_{c}.json").read_text())
    assert set(ood) <= set(split["iid_test"])
  for stem in ("splits", "groups", "answer_shift", "head_jaccard", "ood_overlap"):
    for ext in ("csv", "md", "tex"):
      assert os.path.isfile(os.path.join(out, "statistics", f"{stem}.{ext}"))
  for png in ("groups", "answer_shift", "head_jaccard", "ood_overlap"):
    assert pathlib.Path(out, "statistics", f"{png}.png").read_bytes()[:4] == b"\x89PNG"
  manifest = json.loads(pathlib.Path(out, "shortcuts.json").read_text())
  assert manifest["labels"]["kind"] == "synthetic scenes" and manifest["unit"] == "image"


def test_data_is_the_resplit_in_the_official_layout(bench):
  source, out = bench
  split = json.loads(pathlib.Path(out, "split.json").read_text())
  data = rsvqa_json.read_dataset(os.path.join(out, "data"), "lr")
  for name, key in (("train", "train"), ("val", "val"), ("test", "iid_test")):
    assert sorted(data[name].question_id.tolist()) == sorted(split[key])
  images = [set(data[s].image_id.tolist()) for s in ("train", "val", "test")]
  assert not (images[0] & images[1] or images[0] & images[2] or images[1] & images[2])
  original = rsvqa_json.read_dataset(source, "lr")
  by_id = {q: (a, t) for s in original.splits.values()
           for q, a, t in zip(s.question_id.tolist(), s.answer.tolist(), s.question.tolist())}
  for s in data.splits.values():
    assert all(by_id[q] == (a, t) for q, a, t in
               zip(s.question_id.tolist(), s.answer.tolist(), s.question.tolist()))
  some = next(iter(images[2]))
  for folder, ext in (("Images_LR", "tif"), ("masks", "npz")):
    copy, orig = (os.path.join(root, folder, f"{some}.{ext}") for root in (out + "/data", source))
    assert pathlib.Path(copy).read_bytes() == pathlib.Path(orig).read_bytes()
    assert os.path.isfile(orig)


def test_rerun_replaces_and_foreign_folders_are_refused(bench, tmp_path):
  source, out = bench
  assert cli.main(["shortcuts", "--data", source, "--out", out, "--seed", "2"]) == 0
  assert json.loads(pathlib.Path(out, "shortcuts.json").read_text())["seed"] == 2
  assert not [n for n in os.listdir(os.path.dirname(out)) if n.startswith((".tmp-", ".old-"))]
  (tmp_path / "mine").mkdir()
  (tmp_path / "mine" / "notes.txt").write_text("x")
  with pytest.raises(RSVQAError, match="not a shortcut benchmark"):
    shortcut_report.create(rsvqa_json.read_dataset(source, "lr"), str(tmp_path / "mine"))
  assert cli.main(["shortcuts", "--data", source, "--out", out, "--seed", "1"]) == 0
  before = os.stat(os.path.join(out, "split.json")).st_ino
  dataset = rsvqa_json.read_dataset(source, "lr")
  assert shortcut_report.ensure(dataset, out, seed=1, log=lambda m: None)["seed"] == 1
  assert os.stat(os.path.join(out, "split.json")).st_ino == before  # kept, not rewritten


def test_an_earlier_benchmark_holding_other_files_is_refused_untouched(bench, tmp_path):
  """The folder is replaced whole, so notes or a run's workdir in it would be deleted."""
  source, out = bench
  copy = tmp_path / "sc1"
  shutil.copytree(out, copy)
  (copy / "notes.txt").write_text("hi")
  (copy / "runs" / "a").mkdir(parents=True)
  (copy / "runs" / "a" / "metrics.jsonl").write_text("x")
  (copy / "zz.csv").write_text("y")
  before = sorted(os.listdir(copy))
  split = (copy / "split.json").read_text()
  dataset = rsvqa_json.read_dataset(source, "lr")
  with pytest.raises(RSVQAError, match=r"holds notes\.txt \(and 2 more\) besides an earlier "
                                       r"benchmark; move them or give another --out"):
    shortcut_report.create(dataset, str(copy), seed=3)
  assert sorted(os.listdir(copy)) == before and (copy / "split.json").read_text() == split
  assert (copy / "runs" / "a" / "metrics.jsonl").read_text() == "x"
  assert not [n for n in os.listdir(tmp_path) if n.startswith((".tmp-", ".old-"))]
  shutil.rmtree(copy / "runs")
  os.remove(copy / "notes.txt")
  os.remove(copy / "zz.csv")
  assert shortcut_report.create(dataset, str(copy), seed=3, log=lambda m: None)["seed"] == 3
  assert sorted(os.listdir(copy)) == sorted(shortcut_report.own_entries())


def test_labels_csv_and_refusal_without_labels(bench, tmp_path, capsys):
  _, out = bench
  data = os.path.join(out, "data")
  bare = tmp_path / "bare"
  bare.mkdir()
  for s in ("train", "val", "test"):
    for k in split_files.KINDS:
      path = split_files.split_file(data, "lr", s, k)
      (bare / os.path.basename(path)).write_bytes(pathlib.Path(path).read_bytes())
  shutil.copytree(os.path.join(data, "Images_LR"), bare / "Images_LR")
  assert cli.main(["shortcuts", "--data", str(bare), "--out", str(tmp_path / "o")]) == 2
  dataset = rsvqa_json.read_dataset(str(bare), "lr")
  with pytest.raises(RSVQAError, match="--image-labels CSV"):
    shortcut_report.create(dataset, str(tmp_path / "o"))
  table = tmp_path / "labels.csv"
  ids = sorted(set(dataset["train"].image_id.tolist()))
  test_ids = sorted(set(dataset["test"].image_id.tolist()))  # not re-split: labels unused
  table.write_text("image_id,label\n" + "".join(f"{i},{'lake' if i % 2 else 'field'}\n"
                                                for i in ids + test_ids))
  capsys.readouterr()
  assert cli.main(["shortcuts", "--data", str(bare), "--out", str(tmp_path / "o"),
                   "--image-labels", str(table)]) == 0
  assert (f"{table}: {len(test_ids)} labelled image(s) are not among the "
          in capsys.readouterr().err)
  rows = csv.DictReader(io.StringIO((tmp_path / "o" / "concepts.csv").read_text()))
  kos = {r["ko"] for r in rows}
  assert kos <= {"lake", "field", shortcuts.NONE}
  # 'Lake' and 'lake' were two labels; labels for a few images passed without a word.
  pool = set(ids) | set(dataset["val"].image_id.tolist())
  table.write_text("image_id,label\n" + "".join(f"{i},{' LAKE' if i == ids[0] else 'lake'}\n"
                                                for i in ids[:3]))
  assert cli.main(["shortcuts", "--data", str(bare), "--out", str(tmp_path / "o2"),
                   "--image-labels", str(table)]) == 0
  err = capsys.readouterr().err
  assert f"{table}: labels 'LAKE' read as 'lake' (they differ in case only)" in err
  assert (f"{os.path.abspath(table)}: {len(pool) - 3} of the {len(pool)} train and val images "
          "have no label: their questions' key object reads '(none)'") in err
  rows = csv.DictReader(io.StringIO((tmp_path / "o2" / "concepts.csv").read_text()))
  kos = {r["ko"] for r in rows}
  assert kos <= {"lake", shortcuts.NONE}
  table.write_text("image_id,label\n1,a+b\n")
  with pytest.raises(RSVQAError, match="without '\\+'"):
    shortcuts.csv_labels(str(table))
  table.write_text("image_id,label\n1,lake\n2,(none)\n")  # joined the images without a label
  with pytest.raises(RSVQAError, match=rf"^{table}:3: label '\(none\)': expected a non-empty "
                                       r"label without '\+', other than '\(none\)'$"):
    shortcuts.csv_labels(str(table))
  # A cell listing labels read as one label; composed and decomposed é as two.
  for cell, sep in (("forest;water", ";"), ("forest | water", "|")):
    table.write_text(f"image_id,label\n1,lake\n2,{cell}\n")
    with pytest.raises(RSVQAError, match=rf"^{table}:3: label '{re.escape(cell)}' holds "
                                         rf"'{re.escape(sep)}': one label each \(image_id,label "):
      shortcuts.csv_labels(str(table))
  table.write_text("image_id,label\n1,caf\u00e9\n2,cafe\u0301\n", encoding="utf-8")
  assert shortcuts.csv_labels(str(table)).labels == {1: ("caf\u00e9",), 2: ("caf\u00e9",)}
  # A land-cover class name holds commas (BigEarthNet's): kept whole.
  name = "Land principally occupied by agriculture, with significant areas of natural vegetation"
  table.write_text(f'image_id,label\n1,"{name}"\n', encoding="utf-8")
  assert shortcuts.csv_labels(str(table)).labels == {1: (name,)}


def test_xben_entry_labels_are_streamed_with_the_same_labels_and_errors(tmp_path, monkeypatch):
  """Read in small blocks, the labels are those of the whole parsed files; a bad entry names
  itself as before."""
  root = str(tmp_path / "xben")
  synthetic.generate_xben(root, images=60, seed=2, questions_per_image=4)
  entries = {s: split_files.load_json_list(split_files.split_file(root, "xben", s, "images"),
                                          "images") for s in shortcuts.POOL}
  ids = sorted(e["id"] for es in entries.values() for e in es)[::2]
  expected = {e["id"]: tuple(sorted(set(e["labels"])))
              for es in entries.values() for e in es if e["id"] in ids}
  sizes, real = [], json_stream.blocks
  monkeypatch.setattr(json_stream, "blocks", lambda path, key: (
      sizes.append(len(b)) or b for b in real(path, key, block_bytes=512)))
  found = shortcuts.entry_labels(root, "xben", ids)
  assert found.labels == expected and (found.kind, found.source) == ("image entries", root)
  assert len(sizes) > 2 * len(shortcuts.POOL) and sum(sizes) == sum(map(len, entries.values()))
  split = shortcuts.POOL[-1]
  path = split_files.split_file(root, "xben", split, "images")
  bad = dict(entries[split][-1], labels="Pastures")  # the last entry: read in the last block
  with open(path, "w") as f:
    json.dump({"images": entries[split][:-1] + [bad]}, f)
  with pytest.raises(RSVQAError) as error:
    shortcuts.entry_labels(root, "xben", [bad["id"]])
  assert str(error.value) == (f"{path}: image {bad['id']} has labels 'Pastures': expected a list "
                              "of strings")
  # Labels of the entries are read as a labels file's: 'Pastures', ' pastures ', 'PASTURES' were
  # three labels (OOD KO fell from 79 questions to 55); '' a label, 'a+b' one joining two.
  first, second = entries[split][-1], entries[split][-2]
  spelt = [dict(first, labels=["Pastures"]), dict(second, labels=[" pastures  "])]
  with open(path, "w") as f:
    json.dump({"images": entries[split][:-2] + spelt}, f)
  found = shortcuts.entry_labels(root, "xben", [first["id"], second["id"]])
  assert found.labels == {first["id"]: ("Pastures",), second["id"]: ("Pastures",)}
  for odd in ("", "a+b", "(none)", "x; y"):
    with open(path, "w") as f:
      json.dump({"images": entries[split][:-1] + [dict(first, labels=[odd])]}, f)
    with pytest.raises(RSVQAError, match=rf"^{re.escape(path)}: image {first['id']}: label "):
      shortcuts.entry_labels(root, "xben", [first["id"]])


def test_question_unit_and_hr_test_phili(tmp_path, capsys):
  source = str(tmp_path / "hr")
  synthetic.generate(source, "hr", images=8, seed=0, questions_per_image=6)
  out = str(tmp_path / "out")
  assert cli.main(["-q", "shortcuts", "--data", source, "--out", out, "--unit", "question"]) == 0
  printed = capsys.readouterr().out  # its output, as other commands' (-q silences logging only)
  assert f"wrote {out} (" in printed and "re-split " in printed
  data = rsvqa_json.read_dataset(os.path.join(out, "data"), "hr")
  original = rsvqa_json.read_dataset(source, "hr")
  assert data["test_phili"].question_id.tolist() == original["test_phili"].question_id.tolist()
  n = len(original["train"]) + len(original["val"])
  assert sum(len(data[s]) for s in ("train", "val", "test")) == n


def test_score_by_hand(bench, tmp_path):
  """Predictions right except on the largest OOD set: OA 0 there, IID OA 1 - |set| / N."""
  _, out = bench
  data = os.path.join(out, "data")
  test = rsvqa_json.read_dataset(data, "lr")["test"]
  sets = {c: set(json.loads(pathlib.Path(out, f"ood_{c}.json").read_text()))
          for c in shortcuts.CONCEPTS}
  concept = max(sets, key=lambda c: len(sets[c]))
  wrong = sets[concept]
  assert wrong
  preds = tmp_path / "preds.csv"
  with open(preds, "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["question_id", "prediction"])
    for q, a in zip(test.question_id.tolist(), test.answer.tolist()):
      w.writerow([q, "wrong" if q in wrong else a])
  result_dir = tmp_path / "analysis"
  assert cli.main(["analyze", "--data", data, "--dataset", "lr", "--out", str(result_dir),
                   "--predictions", str(preds), "--shortcuts", out]) == 0
  result = json.loads(pathlib.Path(result_dir / "shortcuts.json").read_text())
  iid = result["iid_test"]["oa"]
  assert iid == pytest.approx(1 - len(wrong) / len(test))
  row = result["ood"][concept]
  assert row["oa"] == 0 and row["n"] == len(wrong) and row["gap_oa"] == pytest.approx(iid)
  for c, ids in sets.items():  # another set is right where it does not meet the wrong one
    if ids:
      assert result["ood"][c]["oa"] == pytest.approx(1 - len(ids & wrong) / len(ids))
  # Mean OOD OA over the non-empty sets; the gap is IID OA less it (positive: one set is all wrong).
  oas = [result["ood"][c]["oa"] for c, ids in sets.items() if ids]
  assert result["mean_ood_oa"] == pytest.approx(np.mean(oas))
  assert result["mean_gap_oa"] == pytest.approx(iid - np.mean(oas))
  assert result["mean_gap_oa"] > 0
  # Prior_Acc by hand: each test question answered with its type's most common train answer
  # (ties: the first in sorted order; a type train lacks: the most common answer overall).
  train = rsvqa_json.read_dataset(data, "lr")["train"]

  def most_common(answers):
    counts = collections.Counter(answers)
    return min(a for a, n in counts.items() if n == max(counts.values()))

  overall = most_common(train.answer.tolist())
  prior = {t: most_common([a for u, a in zip(train.qtype.tolist(), train.answer.tolist())
                           if u == t]) for t in set(train.qtype.tolist())}
  right = {q: prior.get(t, overall) == a for q, t, a in zip(
      test.question_id.tolist(), test.qtype.tolist(), test.answer.tolist())}
  by_hand = np.mean(list(right.values()))
  assert 0 < by_hand < 1 and by_hand != 0.5  # right and wrong ones, not as many of each
  assert result["iid_test"]["prior_acc"] == pytest.approx(by_hand)
  for c, ids in sets.items():
    if ids:
      assert result["ood"][c]["prior_acc"] == pytest.approx(np.mean([right[q] for q in ids])), c
  assert os.path.isfile(result_dir / "shortcuts_ood.md")


def test_analyze_shortcuts_needs_predictions_of_the_iid_test_split(bench, tmp_path, capsys):
  source, out = bench
  argv = ["analyze", "--dataset", "lr", "--out", str(tmp_path), "--shortcuts", out]
  assert cli.main([*argv, "--data", os.path.join(out, "data")]) == 2
  assert "give its --predictions" in capsys.readouterr().err
  preds = tmp_path / "preds.csv"
  test = rsvqa_json.read_dataset(source, "lr")["test"]
  preds.write_text("question_id,prediction\n" + "".join(f"{q},yes\n" for q in
                                                      test.question_id.tolist()))
  report = tmp_path / "report"
  argv[argv.index("--out") + 1] = str(report)
  assert cli.main([*argv, "--data", source, "--predictions", str(preds)]) == 2
  err = capsys.readouterr().err
  assert f"--data {source}: its test split" in err and "is not the iid_test split" in err
  assert err.strip().endswith(f"give --data {os.path.join(out, 'data')}")
  assert not report.exists()  # refused before any table is written
  iid = rsvqa_json.read_dataset(os.path.join(out, "data"), "lr")["test"]
  preds.write_text("question_id,prediction\n" + "".join(f"{q},yes\n" for q in
                                                      iid.question_id.tolist()))
  # a file answering another default split alone (HR's test_phili) is named, not a KeyError
  from rsvqa_jax.commands import analyze  # pylint: disable=g-import-not-at-top
  with pytest.MonkeyPatch.context() as m:
    m.setattr(analyze, "_load", lambda path, *a, **k: {} if path is None else {"test_phili": 0})
    assert cli.main([*argv, "--data", os.path.join(out, "data"), "--predictions", str(preds)]) == 2
  assert capsys.readouterr().err.strip().endswith(
      f"--predictions {preds}: no answer to a question of the test split, which --shortcuts "
      "scores (the IID test set)")
  # the benchmark's predictions beside another --data: --data is named, not a split of it
  assert cli.main([*argv, "--data", source, "--predictions", str(preds)]) == 2
  assert capsys.readouterr().err.strip().endswith(f"give --data {os.path.join(out, 'data')}")
  assert cli.main([*argv, "--data", os.path.join(out, "data"), "--predictions", str(preds)]) == 0
  wrote = next(l for l in capsys.readouterr().out.splitlines() if l.startswith("wrote "))
  for name in ("shortcuts_ood.csv", "shortcuts_ood.md", "shortcuts_ood.tex", "shortcuts.json"):
    assert os.path.join(report, name) in wrote and (report / name).is_file()  # all named


def test_data_of_the_benchmarks_question_ids_but_other_rows_is_refused(bench, tmp_path, capsys):
  """Another dataset numbered alike (the same generator seed at another prior strength), or the
  benchmark's data edited since: its question ids matched, so it was scored on OOD sets cut on
  other questions and answers without a word."""
  source, out = bench
  data = tmp_path / "data"
  shutil.copytree(os.path.join(out, "data"), data)
  path = data / "LR_split_test_answers.json"
  answers = json.loads(path.read_text())
  first = next(a for a in answers["answers"] if a["active"] and a["answer"] in ("yes", "no"))
  first["answer"] = "no" if first["answer"] == "yes" else "yes"
  path.write_text(json.dumps(answers))
  iid = rsvqa_json.read_dataset(str(data), "lr")["test"]
  preds = tmp_path / "preds.csv"
  preds.write_text("question_id,prediction\n" + "".join(f"{q},yes\n" for q in
                                                      iid.question_id.tolist()))
  argv = ["analyze", "--dataset", "lr", "--out", str(tmp_path / "report"), "--shortcuts", out,
          "--predictions", str(preds)]
  assert cli.main([*argv, "--data", str(data)]) == 2
  assert (f"--data {data}: its test split has the question ids of the iid_test split of {out} "
          "but other questions, images or answers") in capsys.readouterr().err
  assert cli.main([*argv, "--data", os.path.join(out, "data")]) == 0


def test_benchmark_row_in_toy_mode():
  from benchmarks import run, shortcuts as family
  section, targets = family.run("toy", log=lambda m: None)
  (row,) = section["rows"]
  assert row["questions"] == 600 and sum(row["split"].values()) == row["pooled_questions"]
  assert targets[0]["status"] in ("PASS", "MISS") and "CPU s" in targets[0]["name"]
  assert "| 600 |" in "\n".join(run.RENDER["shortcuts"](section))


def test_an_ood_set_listing_a_question_twice_is_refused(bench, tmp_path):
  _, out = bench
  copy = str(tmp_path / "sc")
  shutil.copytree(out, copy)
  path = shortcuts.ood_file(copy, shortcuts.CONCEPTS[0])
  ids = json.loads(pathlib.Path(path).read_text())
  assert ids, "the first OOD set is empty"
  with open(path, "w") as f:
    json.dump(ids + ids[:1], f)
  with pytest.raises(RSVQAError, match=f"{path}: question {ids[0]} is listed twice"):
    shortcuts.load(copy)


def test_a_truncated_scene_mask_file_is_refused_in_one_line(tmp_path):
  """A masks/{id}.npz cut short (a copy interrupted) is no zip: named, not a BadZipFile."""
  source = str(tmp_path / "lr")
  synthetic.generate(source, "lr", images=3, seed=0, questions_per_image=1)
  path = os.path.join(source, "masks", "0.npz")
  with open(path, "rb") as f:
    head = f.read(300)
  with open(path, "wb") as f:
    f.write(head)
  with pytest.raises(RSVQAError, match="0.npz: cannot read the scene's objects"):
    shortcuts.mask_labels(source, [0])


def test_one_cluster_is_refused_before_any_feature(bench, tmp_path, capsys):
  source, _ = bench
  assert cli.main(["shortcuts", "--data", source, "--out", str(tmp_path / "o"),
                   "--image-clusters", "1"]) == 2
  assert "--image-clusters 1: one cluster labels every image alike" in capsys.readouterr().err


def test_a_concepts_file_not_utf8_is_refused_in_one_line(bench, tmp_path):
  """A damaged or hand-edited concepts.csv: a one-line error naming it, not a decode error."""
  _, out = bench
  copy = str(tmp_path / "sc")
  shutil.copytree(out, copy)
  with open(os.path.join(copy, shortcuts.CONCEPTS_FILE), "ab") as f:
    f.write(b"\xff\xfe")
  with pytest.raises(RSVQAError, match="concepts.csv: not the UTF-8 CSV rsvqa-jax shortcuts "
                     "writes"):
    shortcuts.load(copy)


@pytest.mark.parametrize("edit, error", [
    (lambda rows: rows[:2] + ["\u00b2" + rows[1][1:]] + rows[2:], r"concepts.csv:3: malformed row"),
    (lambda rows: rows[:2] + ["\u0663" + rows[1][1:]] + rows[2:], r"concepts.csv:3: malformed row"),
    (lambda rows: rows[:2] + rows[1:], r"concepts.csv:3: question \d+ has a row already")],
    ids=["superscript", "arabic-indic", "twice"])
def test_a_concepts_row_with_an_odd_or_repeated_id_is_refused(bench, tmp_path, edit, error):
  """A question id in other digits ('²' passed isdigit() and failed int()) or given two rows
  (the last one silently won) is named in one line."""
  _, out = bench
  copy = str(tmp_path / "sc")
  shutil.copytree(out, copy)
  path = os.path.join(copy, shortcuts.CONCEPTS_FILE)
  rows = pathlib.Path(path).read_text(encoding="utf-8").splitlines()
  with open(path, "w", encoding="utf-8") as f:
    f.write("\n".join(edit(rows)) + "\n")
  with pytest.raises(RSVQAError, match=error):
    shortcuts.load(copy)


def test_a_folder_edited_or_of_another_version_is_refused(bench, tmp_path):
  """shortcuts.json records the version and every set's size: files that disagree with it are
  refused, not scored."""
  _, out = bench
  copy = str(tmp_path / "sc")
  shutil.copytree(out, copy)
  assert shortcuts.load(copy).manifest["version"] == shortcuts.VERSION
  path = shortcuts.ood_file(copy, shortcuts.CONCEPTS[0])
  ids = json.loads(pathlib.Path(path).read_text())
  with open(path, "w") as f:
    json.dump(ids[1:], f)
  with pytest.raises(RSVQAError, match=f"^{path}: edited since the benchmark was cut"):
    shortcuts.load(copy)
  # A question swapped for another IID test question kept every count, all that was checked.
  other = next(q for q in shortcuts.load(out).split_ids["iid_test"].tolist() if q not in ids)
  with open(path, "w") as f:
    json.dump([other, *ids[1:]], f)
  with pytest.raises(RSVQAError, match=f"^{path}: edited since the benchmark was cut"):
    shortcuts.load(copy)
  manifest_path = os.path.join(copy, shortcuts.MANIFEST)
  manifest = json.loads(pathlib.Path(manifest_path).read_text())
  with open(manifest_path, "w") as f:  # a benchmark cut before the files' sha256 were kept
    json.dump({k: v for k, v in manifest.items() if k != shortcuts.FILES_SHA256}, f)
  with open(path, "w") as f:
    json.dump(ids[1:], f)
  with pytest.raises(RSVQAError, match=f"{path}: {len(ids) - 1} questions in "
                     f"{shortcuts.CONCEPTS[0]}, shortcuts.json records {len(ids)}: the folder "
                     "was edited"):
    shortcuts.load(copy)
  with open(manifest_path, "w") as f:
    json.dump({**manifest, "version": shortcuts.VERSION + 1}, f)
  with pytest.raises(RSVQAError, match=f"version {shortcuts.VERSION + 1}, this rsvqa-jax reads "
                     f"version {shortcuts.VERSION}"):
    shortcuts.load(copy)


def test_the_mean_row_says_how_many_ood_sets_were_empty():
  row = {"n": 5, "oa": 0.5, "aa": 0.5, "per_type": {"presence": 0.5}, "gap_oa": 0.1,
         "prior_acc": 0.4}
  result = {"types": ["presence"], "iid_test": row, "mean_ood_oa": 0.5, "mean_gap_oa": 0.1,
            "ood": {"qt": row, "kw": {**row, "n": 0, "oa": math.nan}, "ko": row}}
  label = lambda: shortcut_report.ood_table(result, "c").rows[-1][0]
  assert label() == "Mean of the OOD sets (2 of 3; 1 empty)"
  result["ood"]["kw"] = row
  assert label() == "Mean of the OOD sets"


def test_image_clusters_from_the_command_line(bench, tmp_path):
  """--image-clusters computes the features the flags name and records the cluster labels (the
  command's own argument parsing, which reused the features command's settings, crashed)."""
  source, _ = bench
  out = str(tmp_path / "clustered")
  assert cli.main(["shortcuts", "--data", source, "--out", out, "--image-clusters", "2",
                   "--arch", "resnet18", "--checkpoint", "random",
                   "--cache", str(tmp_path / "cache")]) == 0
  assert "k-means clusters (K=2)" in pathlib.Path(out, "shortcuts.json").read_text()


def test_analyze_never_writes_its_tables_into_a_benchmark_folder(bench, tmp_path, capsys):
  """--out the benchmark itself: analyze's shortcuts.json replaced the benchmark's manifest."""
  _, out = bench
  data = os.path.join(out, "data")
  preds = tmp_path / "preds.csv"
  test = rsvqa_json.read_dataset(data, "lr")["test"]
  preds.write_text("question_id,prediction\n" + "".join(f"{q},yes\n" for q in
                                                      test.question_id.tolist()))
  manifest = pathlib.Path(out, shortcuts.MANIFEST).read_text()
  assert cli.main(["analyze", "--data", data, "--out", out, "--predictions", str(preds),
                   "--shortcuts", out]) == 2
  assert capsys.readouterr().err.strip().endswith(
      f"--out {out} is a shortcut benchmark folder (split.json); give a folder of its own for "
      "the tables")
  assert pathlib.Path(out, shortcuts.MANIFEST).read_text() == manifest
  shortcuts.load(out)
  (tmp_path / "file").write_text("x")
  assert cli.main(["shortcuts", "--data", data, "--out", str(tmp_path / "file")]) == 2
  assert capsys.readouterr().err.strip().endswith("is a file, not a folder")
  inside = os.path.join(data, "Images_LR", "bench")  # was written there, a dataset in a dataset
  assert cli.main(["shortcuts", "--data", data, "--out", inside]) == 2
  assert capsys.readouterr().err.strip().endswith(
      f"--out {inside} lies inside the dataset {os.path.realpath(data)}; give the benchmark a "
      "folder of its own")
  assert not os.path.exists(inside)


def test_a_benchmark_with_every_ood_set_empty_says_so(tmp_path, capsys):
  data = str(tmp_path / "d")
  synthetic.generate(data, "lr", images=3, seed=0, questions_per_image=2)
  assert cli.main(["shortcuts", "--data", data, "--out", str(tmp_path / "o"), "--unit",
                   "question"]) == 0
  assert ("WARNING: every OOD set is empty: no group of the 1 IID test questions is imbalanced "
          "enough to have a tail") in capsys.readouterr().err


def test_a_benchmark_folder_that_is_a_link_is_replaced_where_it_points(tmp_path):
  """rebuilt() renamed the link itself aside and put a folder in its place."""
  real, link = tmp_path / "disk" / "bench", tmp_path / "bench"
  real.mkdir(parents=True)
  (real / "old.txt").write_text("old")
  link.symlink_to(real, target_is_directory=True)
  with shortcut_report.rebuilt(str(link)) as tmp:
    with open(os.path.join(tmp, "new.txt"), "w", encoding="utf-8") as f:
      f.write("new")
  assert link.is_symlink() and sorted(os.listdir(real)) == ["new.txt"]
  assert sorted(os.listdir(tmp_path / "disk")) == ["bench"]


def test_a_benchmark_of_a_synthetic_set_is_known_wherever_it_is_moved(tmp_path):
  """Known by its path, a study moved with its benchmark rebuilt it on resume and its shortcut
  runs, whose synthetic_resnet is keyed by that (train/inputs.folder_source), were refused as
  runs of another config (image.pretrained_dir). A real dataset's stays known by its path."""
  from rsvqa_jax.train import inputs  # pylint: disable=g-import-not-at-top
  first = tmp_path / "first"
  synthetic.generate(str(first / "lr"), "lr", images=12, seed=0, questions_per_image=8)
  built = shortcut_report.create(rsvqa_json.read_dataset(str(first / "lr"), "lr"),
                                 str(first / "bench"), seed=0, log=lambda _: None)
  assert built[shortcuts.SOURCE_MANIFEST] == synthetic.read_manifest(str(first / "lr"))
  identity = inputs.folder_source(str(first / "bench" / "data"))
  assert identity == {"shortcut_benchmark": {
      "version": shortcut_report.VERSION, "dataset": "lr", "seed": 0, "unit": "image",
      shortcuts.SOURCE_MANIFEST: built[shortcuts.SOURCE_MANIFEST]}}
  moved = tmp_path / "moved"
  shutil.move(str(first), str(moved))
  data = moved / "bench" / "data"
  inode = os.stat(data).st_ino
  kept = shortcut_report.ensure(rsvqa_json.read_dataset(str(moved / "lr"), "lr"),
                                str(moved / "bench"), seed=0, log=lambda _: None)
  assert kept == built and os.stat(data).st_ino == inode  # not rebuilt
  assert inputs.folder_source(str(data)) == identity
  # Another seed is another benchmark; a real source (no synthetic.json) is known by its path.
  assert shortcut_report.ensure(rsvqa_json.read_dataset(str(moved / "lr"), "lr"),
                                str(moved / "bench"), seed=1, log=lambda _: None)["seed"] == 1
  os.remove(moved / "lr" / synthetic.MANIFEST)
  shortcut_report.create(rsvqa_json.read_dataset(str(moved / "lr"), "lr"), str(moved / "real"),
                         seed=0, log=lambda _: None)
  assert inputs.folder_source(str(moved / "real" / "data")) == str(moved / "real" / "data")
