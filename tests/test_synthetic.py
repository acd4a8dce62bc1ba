"""The synthetic generator: official layout, determinism, answers from pixels, priors, balance."""
import collections
import dataclasses
import hashlib
import json
import os
import re

import numpy as np
import pytest
from scipy import ndimage

from rsvqa_jax.bias import lr_templates
from rsvqa_jax.data import images
from rsvqa_jax.data import questions as Q
from rsvqa_jax.data import split_files
from rsvqa_jax.data import scenes
from rsvqa_jax.data import synthetic
from rsvqa_jax.errors import RSVQAError

IMAGE_KEYS = {"id", "date_added", "original_name", "sensor", "upperleft_map_x", "upperleft_map_y", "res_x", "res_y",
              "people_id", "type", "questions_ids", "active"}
QUESTION_KEYS = {"id", "date_added", "img_id", "people_id", "type", "question", "answers_ids", "active"}
ANSWER_KEYS = {"id", "date_added", "question_id", "people_id", "answer", "active"}


@pytest.fixture(scope="module")
def lr(tmp_path_factory):
  out = str(tmp_path_factory.mktemp("lr"))
  return out, synthetic.generate(out, "lr", images=12, seed=3, questions_per_image=40)


@pytest.fixture(scope="module")
def hr(tmp_path_factory):
  out = str(tmp_path_factory.mktemp("hr"))
  return out, synthetic.generate(out, "hr", images=10, seed=5, questions_per_image=30)


def _files(root):
  out = {}
  for dirpath, _, names in os.walk(root):
    for n in names:
      path = os.path.join(dirpath, n)
      with open(path, "rb") as f:
        out[os.path.relpath(path, root)] = f.read()
  return out


def _load(root, name, split, kind):
  with open(split_files.split_file(root, name, split, kind)) as f:
    data = json.load(f)
  assert list(data) == [kind]
  return data[kind]


def test_same_seed_gives_byte_identical_files(lr, tmp_path):
  root, _ = lr
  synthetic.generate(str(tmp_path / "again"), "lr", images=12, seed=3, questions_per_image=40)
  first, second = _files(root), _files(tmp_path / "again")
  assert sorted(first) == sorted(second)
  assert all(first[k] == second[k] for k in first)
  synthetic.generate(str(tmp_path / "other"), "lr", images=12, seed=4, questions_per_image=40)
  third = _files(tmp_path / "other")
  assert third["LR_split_train_questions.json"] != first["LR_split_train_questions.json"]
  assert third["Images_LR/0.tif"] != first["Images_LR/0.tif"]


def _check_layout(root, name, splits):
  n_images = n_questions = None
  owner = {}
  for split in splits:
    imgs, qs, ans = (_load(root, name, split, k) for k in split_files.KINDS)
    n_images = n_images or len(imgs)
    n_questions = n_questions or len(qs)
    assert len(imgs) == n_images and len(qs) == len(ans) == n_questions  # indexed by global id
    for kind, entries, keys in (("images", imgs, IMAGE_KEYS), ("questions", qs, QUESTION_KEYS),
                                ("answers", ans, ANSWER_KEYS)):
      for pos, e in enumerate(entries):
        assert e["id"] == pos
        if e["active"]:
          assert set(e) == keys, (kind, e)
          assert (kind, pos) not in owner  # active in exactly one split
          owner[(kind, pos)] = split
        else:
          assert e == {"id": pos, "active": False}
    for q in qs:
      if not q["active"]:
        continue
      a = ans[q["id"]]
      assert a["active"] and q["answers_ids"] == [q["id"]] and a["question_id"] == q["id"]
      assert imgs[q["img_id"]]["active"] and q["id"] in imgs[q["img_id"]]["questions_ids"]
      assert q["question"].strip() and isinstance(a["answer"], str)
    for img in imgs:
      if img["active"]:
        assert all(qs[i]["active"] and qs[i]["img_id"] == img["id"] for i in img["questions_ids"])
  assert {k for k in owner if k[0] == "images"} == {("images", i) for i in range(n_images)}
  assert {k for k in owner if k[0] == "questions"} == {("questions", i) for i in range(n_questions)}
  return owner


def test_lr_layout(lr):
  root, gen = lr
  _check_layout(root, "lr", ("train", "val", "test"))
  imgs = _load(root, "lr", "train", "images")
  active = [i for i in imgs if i["active"]]
  assert all(i["res_x"] == "10m" == i["res_y"] and i["type"] in ("rural", "urban") for i in active)
  types = {q["type"] for q in _load(root, "lr", "train", "questions") if q["active"]}
  assert types <= {"presence", "comp", "count", "rural_urban"} and {"presence", "comp", "count"} <= types
  for i in range(12):
    img = images.read_tif(os.path.join(root, "Images_LR", f"{i}.tif"), size=(256, 256))
    assert img.shape == (256, 256, 3) and img.dtype == np.uint8
  assert len(gen.questions) == 12 * 40
  with open(os.path.join(root, synthetic.MANIFEST)) as f:
    assert json.load(f)["images"] == 12


def test_hr_layout_and_unseen_region(hr):
  root, gen = hr
  owner = _check_layout(root, "hr", ("train", "val", "test", "test_phili"))
  phili = sorted(i for (kind, i), s in owner.items() if kind == "images" and s == "test_phili")
  assert phili and max(phili) == 9
  for split in ("train", "val", "test", "test_phili"):
    for img in _load(root, "hr", split, "images"):
      if img["active"]:
        assert img["res_x"] == ".1524m" == img["res_y"]
        assert (img["sensor"] == "unknown") == (split == "test_phili")
  qs = [q for s in ("train", "test_phili") for q in _load(root, "hr", s, "questions") if q["active"]]
  ans = {a["id"]: a["answer"] for s in ("train", "test_phili") for a in _load(root, "hr", s, "answers") if a["active"]}
  assert {q["type"] for q in qs} == {"area", "presence", "count", "comp"}
  for q in qs:
    if q["type"] == "area":
      assert re.fullmatch(r"\d+m2", ans[q["id"]]) and q["question"].startswith("What is the area covered by ")
    if q["type"] == "count":
      assert ans[q["id"]].isdigit()
  img = images.read_tif(os.path.join(root, "Data", "9.tif"), size=(512, 512))
  assert img.shape == (512, 512, 3)
  # The unseen region differs in style: more buildings per scene than the training region.
  def buildings(region):
    return np.mean([sum(o.cls in scenes.BUILDING_CLASSES for o in scenes.make_scene(0, i, 256, region).objects)
                    for i in range(40)])
  assert buildings("phili") > 1.5 * buildings("default")


def test_answers_match_masks(lr):
  """Counts and presence of non-relational questions agree with the stored object masks."""
  root, gen = lr
  by_qid = {qid: q for qid, q in gen.questions.items()}
  checked = 0
  for split in gen.splits.values():
    for qid, image_id in zip(split.question_id.tolist(), split.image_id.tolist()):
      q = by_qid[qid]
      if q.qtype not in ("count", "presence") or q.phrases[0].relation:
        continue
      m = scenes.load_masks(os.path.join(root, synthetic.MASK_DIR, f"{image_id}.npz"))
      p = q.phrases[0]
      names = scenes.BUILDING_CLASSES if p.obj == "building" else (p.obj,)
      n = sum(c in names and (not p.size or s == p.size) and (not p.shape or sh == p.shape)
              for c, s, sh in zip(m["classes"], m["sizes"], m["shapes"]))
      assert q.answer == (str(n) if q.qtype == "count" else ("yes" if n else "no"))
      checked += 1
  assert checked > 50


def test_objects_are_visible_and_distinct():
  """Same-class objects never touch (counts are visible) and each class has its own colour."""
  means = collections.defaultdict(list)
  for i in range(6):
    scene = scenes.make_scene(1, i)
    for name in scenes.CLASSES:
      objs = [o for o in scene.objects if o.cls == name]
      if not objs:
        continue
      union = np.any([o.full_mask(256, 256) for o in objs], axis=0)
      for o in objs:
        means[name].append(scene.image[o.full_mask(256, 256)].mean(axis=0))
      if name != "road":  # roads cross each other
        _, n_components = ndimage.label(union)
        assert n_components == len(objs), name
    n_buildings = sum(o.cls in scenes.BUILDING_CLASSES for o in scene.objects)
    built = np.any([o.full_mask(256, 256) for o in scene.objects
                    if o.cls in scenes.BUILDING_CLASSES + ("road", "parking", "residential area")] or
                   [np.zeros((256, 256), bool)], axis=0).mean()
    assert (scene.land_use == "urban") == (n_buildings >= 15 or built > 0.3)
  centres = {k: np.mean(v, axis=0) for k, v in means.items()}
  for name, vals in means.items():
    for v in vals:
      nearest = min(centres, key=lambda k: np.linalg.norm(centres[k] - v))
      assert nearest == name


def test_masks_round_trip(tmp_path):
  scene = scenes.make_scene(2, 0)
  scenes.save_masks(tmp_path / "m.npz", scene)
  m = scenes.load_masks(tmp_path / "m.npz")
  assert m["masks"].shape == (len(scene.objects), 256, 256)
  for o, mask, cls in zip(scene.objects, m["masks"], m["classes"]):
    np.testing.assert_array_equal(mask, o.full_mask(256, 256))
    assert cls == o.cls
  assert m["land_use"] == scene.land_use


def test_masks_load_reads_each_member_once(tmp_path, monkeypatch):
  """np.load's archive decompresses a member at every z[key]: the per-object loop read the bits
  and offsets anew for each object (2N reads of the largest member)."""
  scene = scenes.make_scene(2, 0)
  assert len(scene.objects) > 3
  scenes.save_masks(tmp_path / "m.npz", scene)
  reads = collections.Counter()
  real = np.lib.npyio.NpzFile.__getitem__

  def counted(self, key):
    reads[key] += 1
    return real(self, key)

  monkeypatch.setattr(np.lib.npyio.NpzFile, "__getitem__", counted)
  scenes.load_masks(tmp_path / "m.npz")
  assert reads and max(reads.values()) == 1, reads


def _presence_yes_rate(strength):
  answers = []
  for i in range(25):
    scene = scenes.make_scene(0, i)
    sampler = Q.QuestionSampler(scene, "lr", 10.0, np.random.default_rng([9, i]), prior_strength=strength)
    answers += [q.answer for q in (sampler.sample() for _ in range(200)) if q.qtype == "presence"]
  return np.mean([a == "yes" for a in answers])


def test_prior_knob_moves_yes_rate():
  rates = [_presence_yes_rate(s) for s in (0.0, 1.0, 2.0)]
  assert abs(rates[0] - 0.5) < 0.06
  assert abs(rates[1] - 0.73) < 0.06
  assert rates[2] > rates[1] + 0.08


@pytest.mark.parametrize("strength", [930.0, 3000.0, 1e308])
def test_the_strongest_priors_keep_the_most_common_answer(strength):
  """p_real^s underflowed to 0 / 0 for every key: presence drew only "no" at 3000, the real
  prior's weaker answer, and counts fell to their last bin from about 930."""
  for qtype in ("presence", "count"):
    keys, p = Q.prior(qtype, strength)
    real = Q.REAL_PRIORS[qtype]
    assert np.isfinite(p).all() and p.sum() == pytest.approx(1.0)
    assert keys[int(np.argmax(p))] == max(real, key=real.get) and p.max() == 1.0
  assert _presence_yes_rate(strength) == 1.0


def test_default_priors_are_realistic(lr):
  _, gen = lr
  qs = list(gen.questions.values())
  share = collections.Counter(q.qtype for q in qs)
  assert 0.3 < share["comp"] / len(qs) < 0.5 and share["rural_urban"] / len(qs) < 0.04
  comp_no = np.mean([q.answer == "no" for q in qs if q.qtype == "comp"])
  assert 0.55 < comp_no < 0.8
  counts = collections.Counter(q.answer for q in qs if q.qtype == "count")
  assert counts.most_common(1)[0][0] == "0"


def test_balanced_mode_is_balanced(tmp_path):
  gen = synthetic.generate(str(tmp_path), "lr", images=12, seed=1, balanced=True, questions_per_image=30)
  assert len(gen.questions) > 12 * 15
  for split in gen.splits.values():
    groups = collections.defaultdict(collections.Counter)
    for qid in split.question_id.tolist():
      q = gen.questions[qid]
      levels = Q.question_levels(q)
      groups[(levels.pattern, levels.object_with_attr)][Q.answer_key(q.qtype, q.answer)] += 1
    for counts in groups.values():
      assert len(counts) >= 2 and len(set(counts.values())) == 1, counts
    yes = [gen.questions[q].answer for q in split.question_id.tolist() if gen.questions[q].qtype == "presence"]
    assert yes.count("yes") == yes.count("no")


def test_balanced_mode_is_balanced_per_type_counting_too(tmp_path):
  """Per type every answer is as frequent: the most common answer scores 1/|A| (was 49/45/6)."""
  gen = synthetic.generate(str(tmp_path), "lr", images=40, seed=0, balanced=True,
                           questions_per_image=12)
  for split in gen.splits.values():
    for t in ("comp", "count", "presence", "rural_urban"):
      counts = collections.Counter(split.answer[split.qtype == t].tolist())
      assert len(set(counts.values())) <= 1, (split.name, t, counts)
  train = gen.splits["train"]
  train_counts = collections.Counter(train.answer[train.qtype == "count"].tolist())
  assert len(train_counts) == 3 and min(train_counts.values()) >= 20, train_counts


def test_one_rural_urban_question_per_lr_image_and_a_balanced_test_split(lr, tmp_path):
  _, gen = lr
  assert sum(q.qtype == "rural_urban" for q in gen.questions.values()) == 12
  gen = synthetic.generate(str(tmp_path), "lr", images=60, seed=0, questions_per_image=4)
  for split in gen.splits.values():
    ru = split.answer[split.qtype == "rural_urban"]
    assert len(ru) == len(set(split.image_id.tolist()))  # one per image
  test = gen.splits["test"]
  test = collections.Counter(test.answer[test.qtype == "rural_urban"].tolist())
  assert test["rural"] == test["urban"] == 3, test
  splits, _ = synthetic.plan("lr", 60, 0, ["rural"] * 58 + ["urban"] * 2)
  assert [i for i, s in enumerate(splits) if s == "test" and i >= 58] == [58, 59]  # both urban


def test_question_text_and_levels():
  ref = Q.Phrase("road")
  x = Q.Phrase("building", "small", None, "next to", ref, "a")
  q = Q.Question("count", "how_many", (x,), True, "3")
  assert q.text == "How many small buildings next to a  road are there in the image?"
  assert Q.question_levels(q) == Q.Levels("How many [X] are there?", "building", "small building next to road")
  y = Q.Phrase("water area", "large", "circular")
  comp = Q.Question("comp", "less", (Q.Phrase("pitch"), y), False, "no")
  assert comp.text == "Are there less pitchs than large circular water areas?"
  assert Q.question_levels(comp) == Q.Levels("Are there less [X] than [Y]?", "pitch vs water area",
                                            "pitch vs large circular water area")
  amount = Q.Question("count", "amount_of", (y,), True, "0")
  assert amount.text == "What is the amount of large circular water areas in the image?"
  assert Q.question_levels(amount).pattern == "What is the number of [X]?"
  assert Q.Question("presence", "is_present", (Q.Phrase("residential area"),), False, "no").text == \
      "Is a residential area present?"
  assert Q.render("is_there", ["island"], False) == "Is there an island?"
  ru = Q.Question("rural_urban", "rural_urban", (), False, "rural")
  assert ru.text == "Is it a rural or an urban area"
  assert Q.question_levels(ru) == Q.Levels(Q.RURAL_URBAN, "n/a", "n/a")


def test_levels_agree_with_the_template_parser(lr, hr):
  """The analysis parses question strings; it must recover what the generator meant."""
  for _, gen in (lr, hr):
    for q in gen.questions.values():
      parsed = lr_templates.parse(q.text)
      levels = Q.question_levels(q)
      assert parsed is not None, q.text
      assert (parsed.pattern, parsed.object_key, parsed.object_attr_key) == tuple(dataclasses.astuple(levels))


def test_generated_strings_follow_the_forms(lr):
  _, gen = lr
  noun = "|".join(re.escape(o) for o in Q.OBJECTS)
  attrs = r"(?:(?:small|medium|large) )?(?:(?:square|rectangular|circular) )?"
  ref_attrs = r"(?:(?:small|medium|large|square|rectangular|circular)(?: (?:square|rectangular|circular))? | )"
  rel = rf"(?: (?:{'|'.join(Q.RELATIONS)}) (?:a|the) {ref_attrs}(?:{noun}))?"  # "a  road": empty attribute slot
  sing = rf"{attrs}(?:{noun}){rel}"
  plur = rf"{attrs}(?:{noun})s{rel}"
  tail = r"(?: in the image)?\?"
  forms = [rf"Is there an? {sing}{tail}", rf"Is an? {sing} present{tail}", rf"How many {plur} are there{tail}",
           rf"What is the (?:number|amount) of {plur}{tail}", rf"Are there (?:more|less) {plur} than {plur}{tail}",
           rf"Is the number of {plur} equal to the number of {plur}{tail}", "Is it a rural or an urban area"]
  for q in gen.questions.values():
    assert any(re.fullmatch(f, q.text) for f in forms), q.text


def test_plan_split_shares():
  splits, regions = synthetic.plan("lr", 772, 0)
  c = collections.Counter(splits)
  assert abs(c["train"] / 772 - 0.77) < 0.01 and abs(c["val"] / 772 - 0.13) < 0.01 and c["test"] == 77
  splits, regions = synthetic.plan("hr", 100, 0)
  assert collections.Counter(splits)["test_phili"] == 8 and regions[-8:] == ["phili"] * 8


def test_ensure_synthetic(tmp_path):
  root = str(tmp_path / "d")
  assert synthetic.ensure_synthetic(root, "lr", 4, 0, questions_per_image=5)
  path = os.path.join(root, "LR_split_train_questions.json")
  stamp = os.stat(path).st_mtime_ns
  os.utime(path, ns=(stamp - 10**9, stamp - 10**9))
  assert not synthetic.ensure_synthetic(root, "lr", 4, 0, questions_per_image=5)
  assert os.stat(path).st_mtime_ns == stamp - 10**9  # matching manifest: not regenerated
  synthetic.ensure_synthetic(root, "lr", 5, 0, questions_per_image=5)
  assert len(_load(root, "lr", "train", "images")) == 5
  other = tmp_path / "user_data"
  other.mkdir()
  (other / "notes.txt").write_text("mine")
  with pytest.raises(RSVQAError, match="refusing"):
    synthetic.ensure_synthetic(str(other), "lr", 4, 0)
  with pytest.raises(RSVQAError, match="at least 3 images"):
    synthetic.generate(str(tmp_path / "tiny"), "lr", images=2)


def test_a_dataset_written_to_a_link_lands_where_it_points(tmp_path):
  """The new dataset replaced the link with a folder of its own: the linked disk kept the old
  data, which every config naming it went on reading."""
  real, link = tmp_path / "disk" / "data", tmp_path / "link"
  synthetic.generate(str(real), "lr", images=4, seed=0, questions_per_image=5)
  link.symlink_to(real, target_is_directory=True)
  synthetic.generate(str(link), "lr", images=4, seed=7, questions_per_image=5)
  assert link.is_symlink() and synthetic.read_manifest(str(real))["seed"] == 7
  assert sorted(os.listdir(tmp_path / "disk")) == ["data"]  # no build or old folder left


def test_counting_questions_anchor_on_a_class_of_the_wanted_magnitude():
  """Wanting 11-100, the sampler asks about a class that has that many (before, almost never)."""
  hits = tries = 0
  for i in range(40):
    scene = scenes.make_scene(0, i)
    if sum(o.cls == "residential building" for o in scene.objects) <= 10:
      continue
    sampler = Q.QuestionSampler(scene, "lr", 10.0, np.random.default_rng([5, i]))
    for _ in range(20):
      _, _, answer = sampler._candidate("count", 2)  # pylint: disable=protected-access
      hits += Q.answer_key("count", answer) == 2
      tries += 1
  assert tries >= 100 and hits / tries > 0.6, (hits, tries)


# Planted shortcuts (questions.Plant): off by default, tied where they apply, refused when wrong.

# sha256 over (name, sha256) of the top-level JSON files (split files and synthetic.json) of two
# datasets generated before plants existed: without --plant the generator writes them unchanged.
UNPLANTED = {
    ("lr", 12, 3, False, 40): "87eb52829a35bf59fa03dc515b9a10d2eaefed39fa8affe8e76a07279d2c0293",
    ("lr", 12, 1, True, 20): "b1c93b789fc6e89b80e3a7b65ed78942ec6c5480a34482c210d39de8b89f3b47",
}


def _json_digest(root):
  outer = hashlib.sha256()
  for name in sorted(n for n in os.listdir(root) if n.endswith(".json")):
    with open(os.path.join(root, name), "rb") as f:
      outer.update(name.encode() + hashlib.sha256(f.read()).hexdigest().encode())
  return outer.hexdigest()


def test_no_plant_leaves_datasets_byte_identical(lr, tmp_path):
  root, _ = lr
  assert _json_digest(root) == UNPLANTED[("lr", 12, 3, False, 40)]
  balanced = str(tmp_path / "balanced")
  synthetic.generate(balanced, "lr", images=12, seed=1, balanced=True, questions_per_image=20,
                     plant=())
  assert _json_digest(balanced) == UNPLANTED[("lr", 12, 1, True, 20)]
  assert "plant" not in synthetic.read_manifest(balanced)


def _scene_classes(root, image_id):
  return set(scenes.load_masks(os.path.join(root, synthetic.MASK_DIR, f"{image_id}.npz"))["classes"])


def test_keyword_plant_ties_its_plain_question(tmp_path):
  root = str(tmp_path / "kw")
  gen = synthetic.generate(root, "lr", images=60, seed=0, questions_per_image=10,
                           plant=["kw:parking=no@0.9+1"])
  assert synthetic.read_manifest(root)["plant"] == ["kw:parking=no@0.9+1"]
  named = []
  for split in gen.splits.values():
    for qid, image_id in zip(split.question_id.tolist(), split.image_id.tolist()):
      q = gen.questions[qid]
      if "parking" in re.findall(r"[a-z]+", q.text.lower()):
        assert re.fullmatch(r"Is there a parking( in the image)?\?", q.text), q.text
        assert q.answer == ("yes" if "parking" in _scene_classes(root, image_id) else "no")
        named.append(q.answer)
  share = named.count("no") / len(named)
  assert len(named) >= 50 and 0.85 < share < 1, (len(named), share)  # tied, with a tail
  # Without the plant, "Is there a parking?" is asked ~1 in 100 questions and mostly "yes".
  plain = synthetic.generate(str(tmp_path / "plain"), "lr", images=60, seed=0,
                             questions_per_image=10)
  asked = [q.answer for q in plain.questions.values()
           if re.fullmatch(r"Is there a parking( in the image)?\?", q.text)]
  assert len(asked) < 20 and asked.count("no") / max(len(asked), 1) < 0.6


def test_land_cover_plant_ties_counts_in_the_scenes_holding_the_class(tmp_path):
  root = str(tmp_path / "ko")
  gen = synthetic.generate(root, "lr", images=60, seed=0, questions_per_image=10,
                           plant=["ko:forest=0@0.95"])
  bins = {True: collections.Counter(), False: collections.Counter()}
  for split in gen.splits.values():
    for qid, image_id in zip(split.question_id.tolist(), split.image_id.tolist()):
      q = gen.questions[qid]
      if q.qtype == "count":
        bins["forest" in _scene_classes(root, image_id)][Q.answer_key("count", q.answer)] += 1
  forest, other = bins[True], bins[False]
  assert forest[0] / sum(forest.values()) > 0.9 and sum(forest.values()) > 50, forest
  assert other[0] / sum(other.values()) < 0.7, other  # elsewhere counting is as drawn


def test_balanced_set_keeps_its_plant_out_of_balancing(tmp_path):
  gen = synthetic.generate(str(tmp_path / "b"), "lr", images=40, seed=0, balanced=True,
                           questions_per_image=8, plant=["kw:parking=yes@0.9+1"])
  answers = collections.Counter(q.answer for q in gen.questions.values()
                                if q.text.startswith("Is there a parking"))
  assert answers["yes"] / sum(answers.values()) > 0.6 and answers["no"], answers
  for split in gen.splits.values():
    counts = collections.Counter(split.answer[split.qtype == "comp"].tolist())
    assert len(set(counts.values())) <= 1, counts  # the rest is balanced as before


@pytest.mark.parametrize("spec, message", [
    ("kw:wetland=no", "not one of road, forest"), ("kw:parking=maybe", "answer 'maybe'"),
    ("kw:parking=0", "answer '0'"), ("ko:forest=no@1.5", r"\(0, 1\]"),
    ("ko:forest=0+0.5", "for kw plants"), ("parking=no", "expected kw:WORD"),
    ("kw:parking=no@x", "got 'x'")])
def test_plant_specs_are_checked_in_one_line(spec, message):
  with pytest.raises(RSVQAError, match=message) as e:
    Q.parse_plant(spec)
  assert "\n" not in str(e.value)


def test_plant_specs_are_canonical():
  assert Q.parse_plant(" ko:water_area=1-10 ").spec == "ko:water_area=1-10@0.9"
  assert Q.parse_plant("kw:parking=no").spec == "kw:parking=no@0.9+0.2"
  assert Q.parse_plant("kw:road=yes@0.95+0").asked == 0
  assert [p.spec for p in Q.parse_plants(["kw:road=no", "ko:urban=yes"])] == [
      "ko:urban=yes@0.9", "kw:road=no@0.9+0.2"]
  with pytest.raises(RSVQAError, match="planted twice"):
    Q.parse_plants(["kw:road=no", "kw:road=yes@0.95"])
  with pytest.raises(RSVQAError, match="--plant"):
    synthetic.params("lr", 5, 0, plant=["kw:road"])
