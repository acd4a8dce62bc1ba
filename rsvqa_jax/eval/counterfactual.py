"""Counterfactual testing of a trained workdir: does its answer follow an edit of the scene?

Each question of the split is asked again on its scene re-rendered with one edit
(data/counterfactual.py): the question's objects removed, one added, or moved across its
relation, each kept only when it changes the answer, and a control that removes an object the
question does not name (the answer must stay). The scenes come from the synthetic generator
(its manifest says which: seed, variant, image size, region), the questions from their text
(bias/lr_templates.py, turned back into the generator's slots); a question whose recomputed
answer on the unedited scene is not its dataset answer is left out and counted. Edited images go
through the run's own image encoder (features/encoder.py: the pixels resized as the feature cache
resizes them) and the run's compiled eval step; the unedited scenes, re-rendered, must give the
run's image features back (else one-line error: the features do not come from that encoder).
A visual-blind model reads no image, so nothing is rendered or encoded for it (its answers never
change: changed_as_demanded, changed and control_changed are 0).

Per question type (and per edit kind in the JSON):
  changed_as_demanded  share of edits whose answer changed from the clean one to the one the edit
                       demands (a visual-blind model scores 0)
  matches_demanded     share of edits answered with the demanded answer (changed or not)
  changed              share of edits whose answer changed at all
  control_changed      share of control edits whose answer changed (should be near 0)
Written to WORKDIR/eval/SPLIT/ (eval_last/ for the last checkpoint): counterfactual.json,
counterfactual.{csv,md,tex} (the table) and counterfactual_edits.csv (one row per edit).
"""
import collections
import csv
import io
import itertools
import math
import os

import jax
import numpy as np

from rsvqa_jax import config as config_lib
from rsvqa_jax import progress, storage
from rsvqa_jax.bias import lr_templates, tables
from rsvqa_jax.data import answers as answers_lib
from rsvqa_jax.data import counterfactual as edits_lib
from rsvqa_jax.data import questions as questions_lib
from rsvqa_jax.data import scenes, split_files, synthetic
from rsvqa_jax.errors import RSVQAError
from rsvqa_jax.eval import outputs
from rsvqa_jax.features import encoder as encoder_lib
from rsvqa_jax.features import image_cache, pixels
from rsvqa_jax.train import checkpointing, inputs, predict, restore
from rsvqa_jax.train import run as run_lib

STEM = "counterfactual"
FEATURE_TOLERANCE = 1e-3  # max |re-rendered - cached| feature difference, relative to the scale
EDIT_COLUMNS = ("question_id", "image_id", "type", "edit", "answer", "demanded", "prediction",
                "edited_prediction")
_FORMS = {pattern: form for form, pattern in questions_lib.PATTERNS.items()}


def paths(workdir, split, which="best"):
  """(json, edits csv) paths; the table is written beside them as counterfactual.{csv,md,tex}."""
  out = outputs.folder(workdir, split, which)
  return os.path.join(out, f"{STEM}.json"), os.path.join(out, f"{STEM}_edits.csv")


def _phrase(parsed):
  if parsed is None:
    return None
  if parsed.noun not in questions_lib.OBJECTS:
    raise ValueError(parsed.noun)
  return questions_lib.Phrase(parsed.noun, parsed.size, parsed.shape, parsed.relation,
                              _phrase(parsed.related))


def generator_question(text, qtype, raw_answer):
  """The questions.Question of a synthetic question's text, or None when it does not parse."""
  parsed = lr_templates.parse(text)
  if parsed is None or parsed.pattern not in _FORMS:
    return None
  try:
    phrases = tuple(_phrase(p) for p in parsed.phrases)
  except ValueError:
    return None
  return questions_lib.Question(qtype, _FORMS[parsed.pattern], phrases, False, raw_answer)


def _synthetic_manifest(workdir, data_root, dataset):
  """The generator manifest of the dataset the workdir evaluates on; RSVQAError if none."""
  if dataset is not None:
    root = dataset.root
  else:
    config = checkpointing.read_config(workdir)
    root = data_root or (config_lib.synthetic_root(config, workdir) if config.data.synthetic
                         else config.data.root)
  manifest = synthetic.read_manifest(root) if root and os.path.isdir(root) else None
  if manifest is None:
    raise RSVQAError(f"--counterfactual re-renders the synthetic generator's scenes; {root} is "
                     "not a synthetic dataset (no synthetic.json)")
  return manifest


class _Scenes:
  """The generator's scenes of a synthetic dataset, re-drawn on demand (one at a time)."""

  def __init__(self, manifest):
    self.seed, self.variant = manifest["seed"], manifest["variant"]
    self.regions = synthetic.regions(self.variant, manifest["images"])
    self.size = split_files.LAYOUTS[self.variant].image_size
    self._cached = (None, None)

  def res_m(self, image_id):
    return synthetic.SENSORS[(self.variant, self.regions[image_id])].res_m

  def __call__(self, image_id):
    if self._cached[0] != image_id:
      self._cached = (image_id, scenes.make_scene(self.seed, image_id, self.size,
                                                  self.regions[image_id]))
    return self._cached[1]

  def render(self, image_id, objects):
    return scenes.render(self.seed, image_id, objects, self.size, self.regions[image_id]).image


def _plan(records, scene_of, seed):
  """(edits per question: [(row, Edit)], images to render: [(image id, objects)], skipped)."""
  planned, images, keys = [], [], {}
  skipped = collections.Counter()
  columns = zip(records.question_id.tolist(), records.image_id.tolist(), records.qtype.tolist(),
                records.question.tolist(), records.raw_answer.tolist())
  for row, (qid, image_id, qtype, text, raw) in enumerate(progress.bar(
      columns, total=len(records), desc=f"counterfactual edits {records.name}", unit="q",
      enabled=jax.process_index() == 0)):
    question = generator_question(text, qtype, raw)
    scene = scene_of(image_id)
    if question is None:
      skipped["question text does not parse"] += 1
      continue
    res_m = scene_of.res_m(image_id)
    if edits_lib.answer_on(question, scene.objects, scene_of.size, res_m) != raw:
      skipped["answer recomputed on the scene differs from the dataset's"] += 1
      continue
    rng = np.random.default_rng([seed, qid])
    for edit in edits_lib.edits(question, scene.objects, scene_of.size, res_m, scene_of.variant,
                                rng):
      key = (image_id, tuple((o.cls, o.box, o.style[1], tuple(o.style[0].tolist()))
                             for o in edit.objects))
      if key not in keys:
        keys[key] = len(images)
        images.append((image_id, edit.objects))
      planned.append((row, edit, keys[key]))
  return planned, images, skipped


def _encoder(run):
  return encoder_lib.encoder_for(inputs.resolved_image(run.config, run.workdir))


def _encode(run, encoder, images, n, count=lambda k: None):
  """Head-feature rows [n, D] of `n` uint8 images, as the run's head reads its clean ones.
  `images` may be a generator (the edited scenes, rendered a batch at a time); `count(k)` is
  told of each batch encoded."""
  pooled, maps = [], []
  size = min(encoder.batch_size, n)
  images = iter(images)
  for _ in range(0, n, size):
    batch = np.stack([pixels.resize(im, encoder.image_size)
                      for im in itertools.islice(images, size)])
    out = encoder.encode(batch, pad_to=size)
    count(len(batch))
    pooled.append(out["pooled"])
    maps.append(out.get("map"))
  fmap = np.concatenate(maps) if maps[0] is not None else None
  feats = image_cache.ImageFeatures(np.concatenate(pooled), np.arange(n), "<counterfactual>",
                                    fmap)
  return np.asarray(run_lib.head_features(run.config, feats)[0].features, np.float32)


def _check_same_path(run, encoder, scene_of, image_ids):
  """The unedited scenes re-rendered and encoded must give the run's features back."""
  originals = []
  for image_id in image_ids:
    scene = scene_of(image_id)
    if not np.array_equal(scene_of.render(image_id, scene.objects),
                          _dataset_image(run.dataset, image_id)):
      raise RSVQAError(f"{run.dataset.image_path(image_id)}: the generator re-draws another image "
                       "(dataset written by an older generator?): generate it again")
    originals.append(scene.image)
  got = _encode(run, encoder, originals, len(originals))
  rows = np.searchsorted(run.features.image_ids, image_ids)
  want = np.asarray(run.features.features[rows], np.float32)
  scale = max(float(np.abs(want).max()), 1.0)
  if got.shape != want.shape or float(np.abs(got - want).max()) > FEATURE_TOLERANCE * scale:
    raise RSVQAError(f"{run.workdir}: the image encoder its config names does not give the "
                     "image features it was evaluated with; counterfactual images would be "
                     "encoded differently from the clean ones")


def _dataset_image(dataset, image_id):
  """The pixels of a dataset image as the feature cache reads them (before any resize)."""
  return pixels.loader(dataset, "none", "clean", 0, 0)(image_id)


def _shares(rows):
  """The scores of a list of edit rows (dicts with the prediction ids)."""
  demanded = [r for r in rows if r["edit"] != edits_lib.CONTROL]
  controls = [r for r in rows if r["edit"] == edits_lib.CONTROL]
  mean = lambda xs: float(np.mean(xs)) if xs else float("nan")
  return {
      "n_edits": len(demanded),
      "changed_as_demanded": mean([r["edited_id"] == r["demanded_id"] != r["clean_id"]
                                   for r in demanded]),
      "matches_demanded": mean([r["edited_id"] == r["demanded_id"] for r in demanded]),
      "changed": mean([r["edited_id"] != r["clean_id"] for r in demanded]),
      "n_controls": len(controls),
      "control_changed": mean([r["edited_id"] != r["clean_id"] for r in controls]),
  }


def summarize(rows):
  """{"all": shares, "by_type": {type: shares + by_edit}} of the edit rows."""
  by_type = collections.defaultdict(list)
  for r in rows:
    by_type[r["type"]].append(r)
  out = {"all": _shares(rows), "by_type": {}}
  for qtype in tables.type_order(by_type):
    kinds = {k: _shares([r for r in by_type[qtype] if r["edit"] in (k, edits_lib.CONTROL)])
             for k in edits_lib.EDITS if any(r["edit"] == k for r in by_type[qtype])}
    out["by_type"][qtype] = {**_shares(by_type[qtype]),
                             "by_edit": {k: {key: v[key] for key in
                                             ("n_edits", "changed_as_demanded",
                                              "matches_demanded", "changed")}
                                         for k, v in kinds.items()}}
  return out


def table(summary, caption):
  """Per question type: edits (n), changed as demanded, matches, changed; controls (n), changed."""
  cols = ("Question type", "edits (n)", "changed as demanded", "answer = demanded",
          "changed", "controls (n)", "changed by the control")
  row = lambda label, s: (label, s["n_edits"], s["changed_as_demanded"], s["matches_demanded"],
                          s["changed"], s["n_controls"], s["control_changed"])
  rows = [row(tables.type_name(t), s) for t, s in summary["by_type"].items()]
  return tables.Table(caption, cols, tuple(rows + [row("All", summary["all"])]))


def mean_table(summaries, caption):
  """`table` over several runs' summaries (evaluate --seeds): each share a mean (population std)
  over the runs (tables.pct_over_runs), the counts the runs' own (a range where they differ)."""
  counts = lambda values: (str(values[0]) if len(set(values)) == 1
                           else f"{min(values)}-{max(values)}")
  cols = ("Question type", "edits (n)", "changed as demanded", "answer = demanded",
          "changed", "controls (n)", "changed by the control")

  def row(label, shares):
    return (label, counts([s["n_edits"] for s in shares]),
            *(tables.pct_over_runs([s[k] for s in shares])
              for k in ("changed_as_demanded", "matches_demanded", "changed")),
            counts([s["n_controls"] for s in shares]),
            tables.pct_over_runs([s["control_changed"] for s in shares]))

  types = tables.type_order({t for s in summaries for t in s["by_type"]})
  empty = {"n_edits": 0, "n_controls": 0, "changed_as_demanded": math.nan,
           "matches_demanded": math.nan, "changed": math.nan, "control_changed": math.nan}
  rows = [row(tables.type_name(t), [s["by_type"].get(t, empty) for s in summaries])
          for t in types]
  return tables.Table(caption, cols, tuple(rows + [row("All", [s["all"] for s in summaries])]))


def _write_rows(path, rows):
  buf = io.StringIO()
  writer = csv.DictWriter(buf, fieldnames=EDIT_COLUMNS, extrasaction="ignore", lineterminator="\n")
  writer.writeheader()
  writer.writerows(rows)
  with storage.replacing(path) as f:
    f.write(buf.getvalue())


def evaluate(workdir, split="test", *, seed=0, which="best", data_root=None, dataset=None,
             features=None):
  """Counterfactual testing of one workdir on `split`; writes the JSON, table and edit rows,
  returns the summary (with `table`, a tables.Table)."""
  manifest = _synthetic_manifest(workdir, data_root, dataset)
  run, state, step = restore.restore(workdir, [split], which=which, data_root=data_root,
                                     dataset=dataset, features=features)
  scene_of = _Scenes(manifest)
  records = run.dataset[split]
  planned, images, skipped = _plan(records, scene_of, seed)
  width = run.features.features.shape[1]
  if run.config.model.blind or not images:  # a visual-blind head never reads the image rows
    edited = np.zeros((len(images), width), np.float32)
  else:
    encoder = _encoder(run)
    _check_same_path(run, encoder, scene_of, np.unique(records.image_id)[:8])
    renders = (scene_of.render(i, objs) for i, objs in images)
    with progress.bar(total=len(images), desc=f"counterfactual images {split}", unit="img",
                      enabled=jax.process_index() == 0) as bar:
      edited = _encode(run, encoder, renders, len(images), bar.update)
  table_rows = np.concatenate([np.asarray(run.features.features, np.float32), edited])
  clean = predict.clean_rows(run, split)[0]
  slots = ("clean",) + edits_lib.KINDS
  image_rows = np.broadcast_to(clean, (len(slots), len(clean))).copy()
  for row, edit, k in planned:
    image_rows[slots.index(edit.kind), row] = len(run.features.features) + k
  preds = predict.predict(run, state, split, image_rows=image_rows, features=table_rows)
  variant = scene_of.variant
  rows = []
  for row, edit, _ in planned:
    qtype = records.qtype[row]
    demanded = answers_lib.normalise(variant, qtype, edit.answer)
    clean_id, edited_id = int(preds[0, row]), int(preds[slots.index(edit.kind), row])
    rows.append({"question_id": int(records.question_id[row]),
                 "image_id": int(records.image_id[row]), "type": qtype, "edit": edit.kind,
                 "answer": records.answer[row], "demanded": demanded,
                 "prediction": run.vocab.decode([clean_id])[0],
                 "edited_prediction": run.vocab.decode([edited_id])[0],
                 "clean_id": clean_id, "edited_id": edited_id,
                 "demanded_id": int(run.vocab.encode([demanded]).ids[0])})
  summary = summarize(rows)
  # An edit is kept only where it changes the answer: a question may get its control alone, so
  # edits (n) falls short of the questions; said, or the counts read as questions lost.
  asked = {r["question_id"] for r in rows}
  control_only = len(asked - {r["question_id"] for r in rows if r["edit"] != edits_lib.CONTROL})
  summary.update(workdir=os.path.abspath(workdir), split=split, checkpoint=which, step=step,
                 seed=int(seed), n_questions=len(records), n_edited_images=len(images),
                 skipped=dict(skipped), blind=bool(run.config.model.blind),
                 n_control_only=control_only)
  caption = (f"Counterfactual edits: {os.path.basename(os.path.abspath(workdir))}, {split} "
             "(shares of edits; controls edit an object the question does not name"
             + (f"; questions with a control alone, no edit of their scene changing the answer: "
                f"{control_only} of {len(asked)}" if control_only else "") + ")")
  result = table(summary, caption)
  json_path, csv_path = paths(workdir, split, which)
  os.makedirs(os.path.dirname(json_path), exist_ok=True)
  storage.remove(json_path)  # an earlier evaluation's must not vouch for the rows replaced next
  tables.write(result, os.path.dirname(json_path), STEM)
  _write_rows(csv_path, rows)
  # Last: its presence says the evaluation is complete.
  storage.write_json(json_path, summary)
  summary["table"] = result
  return summary
