"""Counterfactual scene edits: the edit logic on hand-built scenes, and `evaluate --counterfactual`.

The edits' answers are recomputed by the generator's own matcher, so the hand-built cases check
what each edit demands (removing the only forest flips "Is there a forest?" to no, the control
keeps it yes); the command runs on a tiny synthetic workdir with its encoder from the cache.
"""
import csv
import json
import os
import re

import numpy as np
import pytest

from rsvqa_jax import cli, progress
from rsvqa_jax import config as config_lib
from rsvqa_jax.data import counterfactual as cf
from rsvqa_jax.data import questions as Q
from rsvqa_jax.data import scenes
from rsvqa_jax.errors import RSVQAError
from rsvqa_jax.eval import counterfactual as cf_eval
from rsvqa_jax.train import checkpointing, inputs, loop
from test_train_support import tiny_task

SIZE = 256
STYLE = (np.zeros(3, np.float32), True)


def _obj(cls, y0, x0, h, w, size=None, shape=None):
  return scenes.SceneObject(cls, size, shape, (y0, x0, y0 + h, x0 + w), np.ones((h, w), bool),
                            STYLE)


def _scene():
  """A forest, a water area, a road along the top, a house far from it (at the bottom)."""
  return (_obj("road", 10, 0, 4, SIZE), _obj("forest", 60, 20, 40, 40),
          _obj("water area", 60, 150, 30, 30, "medium", "square"),
          _obj("residential building", 220, 120, 5, 5, "small", "square"))


def _question(qtype, form, *phrases):
  q = Q.Question(qtype, form, phrases, False, "")
  index = cf.scene_index(_scene(), SIZE)
  return Q.Question(qtype, form, phrases, False, Q.answer(q, index, 10.0))


def _kinds(edits):
  return {e.kind: e for e in edits}


def test_removing_the_only_forest_flips_presence_and_the_control_keeps_it():
  q = _question("presence", "is_there", Q.Phrase("forest"))
  assert q.answer == "yes"
  edits = _kinds(cf.edits(q, _scene(), SIZE, 10.0, "lr", np.random.default_rng(0)))
  assert set(edits) == {"remove", "control"}  # adding a forest keeps "yes": no such edit
  assert edits["remove"].answer == "no"
  assert [o.cls for o in edits["remove"].objects] == ["road", "water area",
                                                      "residential building"]
  control = edits["control"]
  assert control.answer == "yes" and len(control.objects) == 3
  assert "forest" in [o.cls for o in control.objects]


def test_add_places_a_free_object_with_the_phrase_attributes():
  q = _question("presence", "is_there", Q.Phrase("pitch", shape="rectangular"))
  assert q.answer == "no"
  edits = _kinds(cf.edits(q, _scene(), SIZE, 10.0, "lr", np.random.default_rng(1)))
  assert set(edits) == {"add", "control"}
  added = [o for o in edits["add"].objects if o.cls == "pitch"]
  assert len(added) == 1 and added[0].shape == "rectangular" and edits["add"].answer == "yes"
  others = np.zeros((SIZE, SIZE), bool)
  for o in _scene():
    others |= o.full_mask(SIZE, SIZE)
  assert not (added[0].full_mask(SIZE, SIZE) & others).any()
  assert edits["add"].objects[-1] is added[0]  # things are painted last


def test_count_and_comparison_answers_are_recomputed():
  count = _question("count", "how_many", Q.Phrase("building"))
  assert count.answer == "1"
  edits = _kinds(cf.edits(count, _scene(), SIZE, 10.0, "lr", np.random.default_rng(2)))
  assert edits["remove"].answer == "0"  # "between 1 and 10" -> "0"
  assert "add" not in edits  # 2 buildings are still "between 1 and 10" (LR bins)
  assert sum(o.cls in scenes.BUILDING_CLASSES for o in edits["control"].objects) == 1
  comp = _question("comp", "more", Q.Phrase("forest"), Q.Phrase("water area"))
  assert comp.answer == "no"  # 1 forest, 1 water area
  edits = _kinds(cf.edits(comp, _scene(), SIZE, 10.0, "lr", np.random.default_rng(3)))
  assert edits["add"].answer == "yes"  # 2 forests > 1 water area
  assert "remove" not in edits  # 0 > 1 is still no
  assert {o.cls for o in edits["control"].objects} >= {"forest", "water area"}


def test_move_takes_the_object_across_its_relation():
  phrase = Q.Phrase("residential building", relation="next to", ref=Q.Phrase("road"), det="the")
  q = _question("presence", "is_there", phrase)
  assert q.answer == "no"  # the house is far from the road
  moved = cf.move(q, _scene(), SIZE, np.random.default_rng(4))
  assert moved is not None and cf.answer_on(q, moved, SIZE, 10.0) == "yes"
  house = moved[3]
  assert house.cls == "residential building" and house.box != _scene()[3].box
  assert house.box[0] < 30  # beside the road along the top
  assert [o.box for o in moved[:3]] == [o.box for o in _scene()[:3]]  # the rest stays
  back = Q.Question("presence", "is_there", (phrase,), False, "yes")
  away = cf.move(back, moved, SIZE, np.random.default_rng(5))
  assert away is not None and cf.answer_on(back, away, SIZE, 10.0) == "no"


def test_rural_urban_remove_takes_the_built_up_area_away():
  q = _question("rural_urban", "rural_urban")
  scene = _scene() + tuple(_obj("residential building", 120 + 8 * (k // 10), 8 * (k % 10), 5, 5)
                           for k in range(20))
  urban = Q.Question("rural_urban", "rural_urban", (), False, scenes.land_use(scene, SIZE))
  assert urban.answer == "urban" and q.answer == "rural"
  edits = _kinds(cf.edits(urban, scene, SIZE, 10.0, "lr", np.random.default_rng(6)))
  assert edits["remove"].answer == "rural"
  assert {o.cls for o in edits["remove"].objects} == {"forest", "water area"}
  assert edits["control"].answer == "urban"


def test_render_repaints_the_scene_and_an_edit_touches_only_its_object():
  scene = scenes.make_scene(5, 2, 128)
  assert np.array_equal(scenes.render(5, 2, scene.objects, 128).image, scene.image)
  things = [k for k, o in enumerate(scene.objects) if scenes.CLASSES[o.cls].layer == "thing"]
  k = things[0]
  without = scenes.render(5, 2, scene.objects[:k] + scene.objects[k + 1:], 128).image
  changed = (without != scene.image).any(-1)
  assert changed.any() and not (changed & ~scene.objects[k].full_mask(128, 128)).any()


def test_generated_questions_parse_back_to_their_answers():
  """The text of a generated question gives back slots that answer it on its scene."""
  for image_id in range(4):
    scene = scenes.make_scene(1, image_id, SIZE)
    sampler = Q.QuestionSampler(scene, "lr", 10.0, np.random.default_rng([1, image_id]))
    for q in [sampler.rural_urban()] + [sampler.sample() for _ in range(30)]:
      assert Q.answer(q, sampler.index, 10.0) == q.answer
      parsed = cf_eval.generator_question(q.text, q.qtype, q.answer)
      assert parsed is not None, q.text
      assert cf.answer_on(parsed, scene.objects, SIZE, 10.0) == q.answer, q.text
  assert cf_eval.generator_question("What colour is the sky?", "presence", "no") is None


def _train(tmp, name, *overrides):
  c = config_lib.load(os.path.join(os.path.dirname(__file__), "..", "configs",
                                   "synthetic_tiny.py"))
  config_lib.apply_overrides(c, [
      "data.synthetic_images=30", "data.synthetic_questions_per_image=10", "train.num_epochs=1",
      "train.batch_size=16", "train.progress_bar=false", f"data.cache_dir={tmp / 'cache'}",
      *overrides])
  out = str(tmp / name)
  loop.train(c, out, log=lambda m: None)
  return out


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
  return _train(tmp_path_factory.mktemp("counterfactual"), "run")


def test_evaluate_counterfactual_writes_the_table(workdir, capsys):
  assert cli.main(["evaluate", "--workdir", workdir, "--counterfactual"]) == 0
  assert "changed by the control" in capsys.readouterr().out
  json_path, csv_path = cf_eval.paths(workdir, "test")
  with open(json_path) as f:
    out = json.load(f)
  assert out["skipped"] == {} and out["n_edited_images"] > 0
  with open(csv_path) as f:
    rows = list(csv.DictReader(f))
  assert len(rows) == out["all"]["n_edits"] + out["all"]["n_controls"]
  assert out["all"]["n_edits"] == sum(s["n_edits"] for s in out["by_type"].values()) > 0
  for qtype, s in out["by_type"].items():
    mine = [r for r in rows if r["type"] == qtype]
    assert s["n_edits"] == sum(r["edit"] != "control" for r in mine)
    assert s["n_controls"] == sum(r["edit"] == "control" for r in mine)
    for key in ("changed_as_demanded", "matches_demanded", "changed", "control_changed"):
      assert s[key] is None or 0.0 <= s[key] <= 1.0
    edits = [r for r in mine if r["edit"] != "control"]
    controls = [r for r in mine if r["edit"] == "control"]
    if edits:
      assert s["changed_as_demanded"] == pytest.approx(np.mean(
          [r["edited_prediction"] == r["demanded"] != r["prediction"] for r in edits]))
      assert s["matches_demanded"] == pytest.approx(np.mean(
          [r["edited_prediction"] == r["demanded"] for r in edits]))
      assert s["changed"] == pytest.approx(np.mean(
          [r["edited_prediction"] != r["prediction"] for r in edits]))
    if controls:
      assert s["control_changed"] == pytest.approx(np.mean(
          [r["edited_prediction"] != r["prediction"] for r in controls]))
  edits = [r for r in rows if r["edit"] != "control"]
  controls = [r for r in rows if r["edit"] == "control"]
  assert out["all"]["matches_demanded"] == pytest.approx(np.mean(
      [r["edited_prediction"] == r["demanded"] for r in edits]))
  assert out["all"]["changed"] == pytest.approx(np.mean(
      [r["edited_prediction"] != r["prediction"] for r in edits]))
  assert out["all"]["control_changed"] == pytest.approx(np.mean(
      [r["edited_prediction"] != r["prediction"] for r in controls]))
  assert all(r["demanded"] != r["answer"] for r in rows if r["edit"] != "control")
  assert all(r["demanded"] == r["answer"] for r in rows if r["edit"] == "control")
  folder = os.path.dirname(json_path)
  for ext in ("csv", "md", "tex"):
    assert os.path.exists(os.path.join(folder, f"counterfactual.{ext}"))


def test_the_work_before_the_predictions_is_counted(workdir, capsys, monkeypatch):
  """Planning the edits and rendering the edited scenes ran 22-65 s without a line before the
  predictions' bar. capsys: stderr is no terminal, so the bars are log lines (every update)."""
  monkeypatch.setattr(progress, "INTERVAL_S", 0.0)
  assert cli.main(["evaluate", "--workdir", workdir, "--counterfactual"]) == 0
  err = capsys.readouterr().err.splitlines()
  for stage, unit in (("edits", "q"), ("images", "img")):
    assert any(re.match(rf"counterfactual {stage} test: (\d+)/\1 {unit} \(100%\), ", line)
               for line in err), err


def test_counterfactual_refuses_real_data_and_other_features(workdir, capsys):
  dataset, features = tiny_task()
  with pytest.raises(RSVQAError, match="is not a synthetic dataset"):
    cf_eval.evaluate(workdir, dataset=dataset, features=features)
  assert cli.main(["evaluate", "--workdir", workdir, "--counterfactual", "--adversarial",
                   "white"]) == 2
  assert "--counterfactual edits the scenes of the clean images" in capsys.readouterr().err
  # Features from elsewhere than the config's encoder: edited images would not match them.
  config = checkpointing.read_config(workdir)
  synthetic_data = inputs.load_dataset(config, workdir)
  clean = inputs.image_features(config, synthetic_data, workdir, None)
  other = inputs.Features(np.asarray(clean.features) * 2 + 1, clean.image_ids)
  with pytest.raises(RSVQAError, match="does not give the image features it was evaluated with"):
    cf_eval.evaluate(workdir, dataset=synthetic_data, features=other)


def test_a_visual_blind_answer_never_follows_an_edit(workdir, tmp_path):
  blind = _train(tmp_path, "blind", "model.blind=true")
  out = cf_eval.evaluate(blind)
  assert out["blind"] and out["all"]["n_edits"] > 0 and out["all"]["n_controls"] > 0
  assert out["all"]["changed"] == out["all"]["changed_as_demanded"] == 0.0
  assert out["all"]["control_changed"] == 0.0
  # Same dataset and seed: the same edits as the reference run's.
  reference = cf_eval.evaluate(workdir)
  assert (reference["all"]["n_edits"], reference["all"]["n_controls"]) == (
      out["all"]["n_edits"], out["all"]["n_controls"])


def test_a_counterfactual_run_killed_before_its_summary_leaves_no_earlier_summary(
    workdir, monkeypatch):
  """The summary is written last and says the table and edit rows beside it are complete: a run
  killed after replacing them must not leave an earlier run's summary vouching for them."""
  json_path, _ = cf_eval.paths(workdir, "test")
  cf_eval.evaluate(workdir, seed=0)
  assert os.path.exists(json_path)

  def killed(*args, **kwargs):
    raise KeyboardInterrupt

  monkeypatch.setattr(cf_eval.storage, "write_json", killed)
  with pytest.raises(KeyboardInterrupt):
    cf_eval.evaluate(workdir, seed=1)
  assert not os.path.exists(json_path)


def test_questions_with_a_control_alone_are_counted_and_said(workdir, capsys):
  """Edits (n) fell short of the questions with no word why: an edit is kept only where it
  changes the answer, and some questions get their control alone."""
  assert cli.main(["evaluate", "--workdir", workdir, "--counterfactual"]) == 0
  out = capsys.readouterr().out
  json_path, csv_path = cf_eval.paths(workdir, "test")
  with open(json_path) as f:
    summary = json.load(f)
  with open(csv_path) as f:
    rows = list(csv.DictReader(f))
  asked = {r["question_id"] for r in rows}
  edited = {r["question_id"] for r in rows if r["edit"] != "control"}
  assert summary["n_control_only"] == len(asked - edited) > 0
  assert (f"questions with a control alone, no edit of their scene changing the answer: "
          f"{len(asked - edited)} of {len(asked)})**") in out


def test_seeds_get_a_mean_table(workdir, tmp_path, capsys):
  """`evaluate --seeds W1 W2 --counterfactual` printed one table per workdir and no aggregate,
  where the accuracy and answerability tables give mean (population std) over the runs."""
  shares = lambda a, c, n=4: {"n_edits": n, "changed_as_demanded": a, "matches_demanded": a,
                              "changed": a, "n_controls": 2, "control_changed": c}
  one = {"all": shares(0.5, 0.0), "by_type": {"presence": shares(0.5, 0.0),
                                               "comp": shares(0.25, None, 2)}}
  two = {"all": shares(0.7, 0.5, 6), "by_type": {"presence": shares(0.9, 0.5)}}
  rows = {r[0]: r[1:] for r in cf_eval.mean_table([one, two], "c").rows}
  assert rows["Presence"] == ("4", "70.00 (20.00)", "70.00 (20.00)", "70.00 (20.00)", "2",
                              "25.00 (25.00)")
  # a type one run lacks: its shares are of the run that has it, and said so
  assert rows["Comparison"] == ("0-2", "25.00 (1 of 2 runs)", "25.00 (1 of 2 runs)",
                                "25.00 (1 of 2 runs)", "0-2", "n/a")
  assert rows["All"][:2] == ("4-6", "60.00 (10.00)")
  runs = [workdir, _train(tmp_path, "seed1", "seed=1")]
  assert cli.main(["evaluate", "--seeds", *runs, "--counterfactual"]) == 0
  out = capsys.readouterr().out
  assert "Counterfactual edits, test: mean (population std) over 2 runs" in out
  summaries = []
  for run in runs:
    with open(cf_eval.paths(run, "test")[0]) as f:
      summaries.append(json.load(f))
  demanded = [s["all"]["changed_as_demanded"] for s in summaries]
  mean_all = [line for line in out.split("mean (population std) over 2 runs")[1].splitlines()
              if line.startswith("| All |")][0]
  assert mean_all.startswith(f"| All | {summaries[0]['all']['n_edits']} | "
                             f"{100 * np.mean(demanded):.2f} ({100 * np.std(demanded):.2f}) |")
  cli.main(["evaluate", "--seeds", runs[0], "--counterfactual"])
  assert "mean (population std)" not in capsys.readouterr().out
