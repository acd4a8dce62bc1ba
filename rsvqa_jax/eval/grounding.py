"""A trained workdir's answer grounding: its relevance maps scored against the dataset's truth.

Relevance maps, one per question, over the image feature map's h x w positions:
  attention  the softmax weights of models/attention.py (model.head = "attention");
  gradcam    Grad-CAM on the frozen ResNet map for the predicted answer's logit:
             relu(sum_c alpha_c A_c) with alpha_c the mean over positions of d logit / d A_c.
             For a head that reads the pooled vector (pooled = mean of A over positions) the
             gradient is the same at every position, so alpha is d logit / d pooled (up to
             1 / hw, which the min-max normalisation removes); the map A then comes from the
             feature cache's map entry of the same encoder (computed once if missing);
  auto       attention where the model has it, else Grad-CAM.
A visual-blind model never sees the image: its map is uniform (the whole image, the floor).
Maps are upsampled to the image (bilinear), written as 8-bit PNGs and binarized as
bias/grounding.py says, so `rsvqa-jax grounding score --predicted O/maps --truth T --confidence
O/confidence.csv` reproduces the IoU and AP of O/summary.json when T holds the truth masks of the
questions confidence.csv lists (the split's); with the whole DATA/Grounding the other splits'
masks have no map and each scores IoU 0. A map of fewer than 2 cells along a side (a 32 px input
to a ResNet: 1 x 1) cannot localise the answer: a WARNING says so, also in summary.json.

Scored against DATA/Grounding/{question_id}.png (data/grounding.py; a synthetic dataset's):
mean IoU over every question whose truth is not empty and over the correctly answered ones,
AP / mAP ranked by the answer's softmax probability, breakdowns by coverage bucket, question
type and answer, beside two floors scored on the same questions: a centre prior (an isotropic
Gaussian of sigma = 1/4 of the side at the image centre) and a uniform map (the whole image).
With images="shuffled" each question is answered with a random other image of the split (as
adversarial testing draws it) and its map scored against its own truth: a model that grounds
its answers falls to the floor there.

Written to OUT (replaced file by file, summary.json last): maps/{question_id}.png (the folder
replaced whole, so an earlier evaluation's maps never mix in; one holding other files is
refused), grounding.csv (one row per question), confidence.csv, summary.json,
by_type.{csv,md,tex} (mean IoU in %; the caption says which questions the n are of) and
examples.png (the EXAMPLES best and worst scored questions by IoU: image, truth, map).

The study's grounding stage (`study_stage`, study.grounding) runs this on every run of the
study's grid, into RUN/eval/SPLIT/grounding_METHOD/ (a run with its summary.json there is
skipped), and keeps each run's mean IoU (all, correct answers, per question type) and the floors
for the report (bias/grounding_report.py).
"""
import contextlib
import logging
import math
import os
import textwrap
import time

import jax
import jax.numpy as jnp
import numpy as np
from matplotlib.figure import Figure

from rsvqa_jax import progress, storage
from rsvqa_jax.bias import grounding as metrics
from rsvqa_jax.bias import tables
from rsvqa_jax.data import grounding as truth_lib
from rsvqa_jax.data import split_files
from rsvqa_jax.errors import RSVQAError
from rsvqa_jax.eval import adversarial, outputs
from rsvqa_jax.features import pixels
from rsvqa_jax.train import inputs, predict, restore, run_record
from rsvqa_jax.train import sharding as shd
from rsvqa_jax.train import steps as steps_lib

_log = logging.getLogger(__name__)

METHODS = ("auto", "attention", "gradcam")
IMAGES = ("own", "shuffled")
CENTRE_SIGMA = 0.25  # of the image side
EXAMPLES = 3  # best and worst questions shown in examples.png
MAPS = "maps"
ROW_COLUMNS = ("question_id", "image_id", "type", "answer", "prediction", "correct", "confidence",
               "iou", "iou_centre", "iou_uniform") + metrics.STATISTICS


def has_attention(head):
  return hasattr(head, "attention")


def make_relevance_step(mesh, compute_dtype, method, map_shape):
  """jit(state, batch) -> (predicted id [B], confidence [B], relevance [B, h * w]).

  batch: the eval step's (image_features [B, D], question inputs) plus, for a head reading the
  pooled vector, `map` [B, h * w * C] of the same images (Grad-CAM's A).
  """
  dtype = steps_lib.DTYPES[compute_dtype]
  positions = map_shape[0] * map_shape[1]

  def step(state, batch):
    model = steps_lib.computing_model(state, state.params, dtype)
    x = steps_lib._model_inputs(batch, dtype)  # pylint: disable=protected-access
    q = model.question_vector(x, deterministic=True)
    v = x.get("image_features")
    logits_of = lambda v: model.head(v, q, deterministic=True).astype(jnp.float32)
    if model.head.blind:
      logits = logits_of(None)
      relevance = jnp.ones((logits.shape[0], positions), jnp.float32)
    elif method == "attention":
      logits, relevance = logits_of(v), model.head.attention(v, q)
    else:
      logits, vjp = jax.vjp(logits_of, v)
      (grad,) = vjp(jax.nn.one_hot(logits.argmax(-1), logits.shape[-1], dtype=logits.dtype))
      grad = grad.astype(jnp.float32)
      if "map" in batch:  # a pooled head: the gradient is the same at every position
        a, alpha = batch["map"].reshape(len(q), positions, -1), grad
      else:
        a = v.astype(jnp.float32).reshape(len(q), positions, -1)
        alpha = grad.reshape(a.shape).mean(1)
      relevance = jax.nn.relu(jnp.einsum("bpc,bc->bp", a.astype(jnp.float32), alpha))
    probs = jax.nn.softmax(logits, -1)
    pred = logits.argmax(-1)
    return pred, jnp.take_along_axis(probs, pred[:, None], 1)[:, 0], relevance

  rep, data = shd.replicated(mesh), shd.batch_sharding(mesh)
  return jax.jit(step, in_shardings=(rep, data), out_shardings=rep)


def _method(run, method):
  if method not in METHODS:
    raise RSVQAError(f"--method {method}: choose one of {', '.join(METHODS)}")
  head = run.model.head
  if method == "attention" and not has_attention(head):
    raise RSVQAError(f"{run.workdir}: model.head={run.config.model.head} has no attention map; "
                     "use --method gradcam (or auto)")
  if method == "auto":
    return "attention" if has_attention(head) else "gradcam"
  return method


def _grad_cam_maps(run):
  """(table of flattened maps the rows index, or None when the head reads maps itself, shape).

  A pooled head's Grad-CAM needs the encoder's map: the one its features carry (image.map set),
  else the feature cache's entry of the same encoder with the map kept (computed on a miss)."""
  shape = getattr(run.model.head, "map_shape", None)
  if shape is not None:
    return None, shape[:2]
  with_map = run.features
  if getattr(with_map, "feature_map", None) is None:
    config = run.config.copy_and_resolve_references()
    config.image.map = True
    with_map = inputs.image_features(config, run.dataset, run.workdir, None)
    if not np.array_equal(with_map.image_ids, run.features.image_ids):
      raise RSVQAError(f"{with_map.path}: the image maps cover other images than the features "
                       "the model was evaluated with")
  fmap = with_map.feature_map
  if fmap.shape[-1] != run.features.features.shape[1]:
    raise RSVQAError(f"{with_map.path}: image maps of {fmap.shape[-1]} channels for a model on "
                     f"{run.features.features.shape[1]}-d pooled vectors: not the same encoder")
  return fmap.reshape(len(fmap), -1), tuple(fmap.shape[1:3])


def relevance(run, state, split, method, image_rows):
  """(predicted ids [N], confidences [N], relevance maps [N, h, w]) on `split`."""
  maps, (h, w) = (None, (1, 1)) if run.model.head.blind else _grad_cam_maps(run)
  step = make_relevance_step(run.mesh, run.config.train.compute_dtype, method, (h, w))
  columns = run.columns[split]
  n = len(columns.lengths)
  preds, conf = np.zeros(n, np.int64), np.zeros(n, np.float32)
  rel = np.zeros((n, h * w), np.float32)
  batch_size = shd.eval_width(run.config.train.eval_batch_size, run.mesh)
  with progress.bar(total=n, desc=f"grounding maps {split}", unit="q", leave=False,
                    enabled=jax.process_index() == 0) as bar:
    for rows, local in inputs.eval_batches(columns, batch_size):
      batch = inputs.eval_model_batch(local, run.features.features, image_rows[None],
                                      run.question_vectors)
      batch["image_features"] = batch["image_features"][:, 0]
      if maps is not None:
        batch["map"] = np.asarray(maps[image_rows[local["row"]]], np.float32)
      out = [np.asarray(x) for x in
             jax.device_get(step(state, shd.global_batch(batch, run.mesh)))]
      real = rows >= 0
      preds[rows[real]], conf[rows[real]], rel[rows[real]] = (x[real] for x in out)
      bar.update(int(real.sum()))
  return preds, conf, rel.reshape(n, h, w)


def centre_prior(shape):
  """The centre-prior floor: an isotropic Gaussian of sigma CENTRE_SIGMA x side."""
  h, w = shape
  yy, xx = np.mgrid[:h, :w]
  d2 = ((yy + 0.5) / h - 0.5) ** 2 + ((xx + 0.5) / w - 0.5) ** 2
  return np.exp(-d2 / (2 * CENTRE_SIGMA ** 2)).astype(np.float32)


def truth_folder(dataset):
  folder = os.path.join(dataset.root, truth_lib.FOLDER)
  if truth_lib.read_index(dataset.root) is None:
    raise RSVQAError(f"{folder}: no ground-truth groundings (index.json) in this dataset; "
                     "only synthetic datasets written by `rsvqa-jax synth` (or train's first "
                     "stage) have them, not a re-split such as a shortcut benchmark's data/ "
                     "(one written by an older version: remove it and generate it again)")
  return folder


def check_maps(out):
  """RSVQAError unless OUT/maps is absent or holds only the {question_id}.png maps an earlier
  evaluation wrote: it is replaced whole, and a file of someone else's would be lost. A dataset
  folder, a training workdir or a `grounding score` folder is refused as OUT: the results would
  land among (or replace) their files; so is a file (found before any map is computed)."""
  if os.path.lexists(out) and not os.path.isdir(out):
    raise RSVQAError(f"--out {out}: a file, not a folder; give the folder to write into")
  split_files.refuse_dataset(out, "--out", "the evaluation", inside=True)
  run_record.refuse_run(out, "--out", "the evaluation")
  if os.path.isfile(os.path.join(out, metrics.SCORE_FIGURE)):  # its csv and summary: replaced
    raise RSVQAError(f"--out {out} holds the results of `grounding score` "
                     f"({metrics.SCORE_FIGURE}); give the evaluation a folder of its own")
  folder = os.path.join(out, MAPS)
  if not os.path.lexists(folder):
    return
  if not os.path.isdir(folder):
    raise RSVQAError(f"--out {out}: {folder} is not a folder of maps; move it or give another "
                     "--out")
  ours = {os.path.basename(p) for p in metrics.mask_files(folder, "--out").values()}
  foreign = sorted(n for n in os.listdir(folder)
                   if n not in ours or not os.path.isfile(os.path.join(folder, n)))
  if foreign:
    more = f" (and {len(foreign) - 1} more)" if len(foreign) > 1 else ""
    raise RSVQAError(f"--out {out}: {MAPS}/ holds {foreign[0]}{more}, not a map of an earlier "
                     "grounding evaluation; move them or give another --out")


def shuffled_rows(rows, split, seed):
  """Each question's feature row replaced by a random other image's of the split. The pool is
  given, so the error names no --pool flag: this command has none."""
  try:
    return adversarial.substitution_rows("random", rows, repeats=1, seed=seed,
                                         pool=np.unique(rows))[0]
  except RSVQAError as e:
    raise RSVQAError(f"--images shuffled on split {split}: {e}, and this split holds one; "
                     "give a split of two images or more") from None


@contextlib.contextmanager
def replacing_maps(out):
  """Yields an empty folder that becomes OUT/maps when the block completes, replacing an earlier
  evaluation's maps whole (check_maps first), so OUT's maps are one evaluation's. One evaluation
  writes into OUT at a time, and removes what a killed one left there (.tmp-maps-*, .old-maps-*).
  """
  with storage.building_alone(out, MAPS), storage.building(out, MAPS, replace=True) as tmp:
    yield tmp


def map_size_warning(workdir, run, shape):
  """The WARNING text when the relevance maps are too coarse to localise anything, else None."""
  h, w = shape
  if run.model.head.blind or min(h, w) >= 2:
    return None
  return (f"{workdir}: relevance maps of {h} x {w} cells (the image feature map) cannot "
          "localise the answer (a 1 x 1 map is constant: it scores the uniform floor, or 0); "
          f"train with a larger image.image_size (now {run.config.image.image_size})")


def score(records, preds_text, correct, conf, maps, truth_dir, maps_dir):
  """Rows of ROW_COLUMNS; writes each map as maps_dir/{qid}.png. `maps` [N, h, w]."""
  os.makedirs(maps_dir, exist_ok=True)
  rows, centre, uniform = [], None, None
  qids = records.question_id.tolist()
  for k, qid in enumerate(progress.bar(qids, desc=f"grounding score {records.name}", unit="q",
                                       enabled=jax.process_index() == 0)):
    path = os.path.join(truth_dir, f"{qid}.png")
    if not os.path.exists(path):
      raise RSVQAError(f"{path}: missing ground-truth grounding of question {qid}")
    truth = metrics.binarize(metrics.read_mask(path))
    if centre is None or centre.shape != truth.shape:
      centre = metrics.binarize(centre_prior(truth.shape))
      uniform = np.ones(truth.shape, bool)
    png = metrics.to_uint8(metrics.resize(maps[k], truth.shape))
    metrics.write_png(os.path.join(maps_dir, f"{qid}.png"), png)
    rows.append({"question_id": qid, "image_id": int(records.image_id[k]),
                 "type": records.qtype[k], "answer": records.answer[k],
                 "prediction": preds_text[k], "correct": bool(correct[k]),
                 "confidence": float(conf[k]), "iou": metrics.iou(metrics.binarize(png), truth),
                 "iou_centre": metrics.iou(centre, truth),
                 "iou_uniform": metrics.iou(uniform, truth), **metrics.statistics(truth)})
  return rows


def summarize(rows):
  """summary.json: the model's scores (all, correct only, AP by confidence), the floors, and the
  breakdowns by coverage, question type and answer."""
  col = lambda k: np.asarray([r[k] for r in rows], np.float64)
  ious, conf, correct = col("iou"), col("confidence"), np.asarray([r["correct"] for r in rows])
  coverage = col("coverage")
  out = metrics.summarize(rows, conf)
  out["mean_iou_correct"] = metrics.scores(ious[correct])["mean_iou"]
  out["n_scored_correct"] = metrics.scores(ious[correct])["n"]
  out["floors"] = {}
  for floor in ("centre", "uniform"):
    f = col(f"iou_{floor}")
    out["floors"][floor] = {"mean_iou": metrics.scores(f)["mean_iou"],
                            "by_coverage": metrics.coverage_breakdown(f, coverage),
                            "by_type": metrics.breakdown(f, [r["type"] for r in rows])}
  out["by_type"] = metrics.breakdown(ious, [r["type"] for r in rows], conf)
  out["by_answer"] = metrics.breakdown(ious, [r["answer"] for r in rows], conf)
  return out


def _floor_note(summary):
  """The caption's note when the maps cannot localise (a 1 x 1 map, a visual-blind model's
  uniform one): the model row is then the uniform floor, or 0, not a model's grounding."""
  h, w = summary.get("map_size") or (2, 2)
  if min(h, w) >= 2:
    return ""
  model, uniform = summary["by_type"], summary["floors"]["uniform"]
  same = math.isclose(summary["mean_iou"], uniform["mean_iou"]) and all(
      math.isclose(v["mean_iou"], uniform["by_type"][t]["mean_iou"])
      for t, v in model.items() if v["n"])
  why = ("a visual-blind model's map is uniform" if summary.get("method", "").startswith("uniform")
         else f"its relevance maps are {h} x {w} cells, constant, which cannot localise the answer")
  return (f"; the model row {'equals the uniform floor' if same else 'measures no grounding'}: "
          f"{why}")


def type_table(summary, caption):
  """Mean IoU (%) of the model and the floors per question type (the Done-when comparison). The
  caption gets the unit, the questions the n are of and those left out (an empty truth), and a
  note when the maps cannot localise (_floor_note)."""
  model, floors = summary["by_type"], summary["floors"]
  qtypes = tables.type_order([t for t in model if model[t]["n"]])
  row = lambda label, per, total: (label, *[per[t]["mean_iou"] for t in qtypes], total)
  caption = (f"Mean IoU (%) by question type: {caption}; n: questions with a non-empty truth "
             f"mask, {summary['n_scored']} in all; {summary['n_empty_truth']} of the split's "
             f"{summary['n_questions']} questions have an empty truth (the answer shows nowhere) "
             "and are left out" + _floor_note(summary))
  return tables.Table(caption, ("map", *[f"{tables.type_name(t)} (n={model[t]['n']})"
                                         for t in qtypes], "all"),
                      (row("model", model, summary["mean_iou"]),
                       row("centre prior", floors["centre"]["by_type"],
                           floors["centre"]["mean_iou"]),
                       row("uniform", floors["uniform"]["by_type"],
                           floors["uniform"]["mean_iou"])))


def _picked(rows):
  """(rows shown in examples.png, what they are): the EXAMPLES best and worst by IoU, best first
  (ties: lower question id first), or every scored question when there are no more than 2 x
  EXAMPLES."""
  scored = sorted((r for r in rows if not math.isnan(r["iou"])),
                  key=lambda r: (-r["iou"], r["question_id"]))
  if len(scored) > 2 * EXAMPLES:
    return (scored[:EXAMPLES] + scored[-EXAMPLES:],
            f"The {EXAMPLES} best and {EXAMPLES} worst of {len(scored)} scored questions by IoU, "
            "best first")
  return scored, f"All {len(scored)} scored questions by IoU, best first"


def examples_figure(path, rows, dataset, records, maps_dir, truth_dir, label):
  """The EXAMPLES best and worst scored questions: image, truth, relevance map (over the image),
  titled with what they are and `label` (run, split, method, images), with the map's colour bar."""
  picked, what = _picked(rows)
  if not picked:
    return None
  text = dict(zip(records.question_id.tolist(), records.question.tolist()))
  load = pixels.loader(dataset, "none", "clean", 0, 0)
  fig = Figure(figsize=(11, 3.6 * len(picked) + 1.2), layout="constrained")
  axes = fig.subplots(len(picked), 3, squeeze=False)
  for ax_row, r in zip(axes, picked):
    image = load(r["image_id"])
    truth = metrics.read_mask(os.path.join(truth_dir, f"{r['question_id']}.png"))
    rel = metrics.read_mask(os.path.join(maps_dir, f"{r['question_id']}.png"))
    ax_row[0].imshow(image)
    ax_row[0].set_title(textwrap.fill(text[r["question_id"]], 40) + f"\nanswer {r['answer']}, "
                        f"predicted {r['prediction']}", fontsize=10, loc="left")
    ax_row[1].imshow(image)
    ax_row[1].imshow(truth, cmap="Reds", alpha=0.55)
    ax_row[1].set_title("truth (red)", fontsize=10)
    ax_row[2].imshow(image)
    shown = ax_row[2].imshow(rel / 255.0, cmap="jet", alpha=0.5, vmin=0.0, vmax=1.0)
    ax_row[2].contour(metrics.binarize(rel), levels=[0.5], colors="white", linewidths=1)
    ax_row[2].set_title(f"map, IoU {r['iou']:.3f}", fontsize=10)
    for ax in ax_row:
      ax.set_xticks([])
      ax.set_yticks([])
  bar = fig.colorbar(shown, ax=axes[-1, :], orientation="horizontal", shrink=0.6, aspect=40)
  bar.set_label("relevance (the map min-max normalised; white line: the 0.5 threshold, inside "
                "is the scored mask)", fontsize=10)
  fig.suptitle(f"{what}: {label}", fontsize=12)
  return metrics.save_figure(fig, path, 100)


def evaluate(workdir, split, out, *, method="auto", images="own", seed=0, which="best",
             data_root=None, dataset=None, features=None):
  """Relevance maps of a workdir on `split`, scored; writes OUT, returns the summary with its
  `tables` (tables.Table objects, also written under OUT)."""
  if images not in IMAGES:
    raise RSVQAError(f"--images {images}: choose one of {', '.join(IMAGES)}")
  check_maps(out)
  run, state, step = restore.restore(workdir, [split], which=which, data_root=data_root,
                                     dataset=dataset, features=features)
  truth_dir = truth_folder(run.dataset)
  method = "uniform (visual-blind)" if run.model.head.blind else _method(run, method)
  rows_own = predict.clean_rows(run, split)[0]
  image_rows = rows_own if images == "own" else shuffled_rows(rows_own, split, seed)
  preds, conf, maps = relevance(run, state, split, method, image_rows)
  coarse = map_size_warning(workdir, run, maps.shape[1:])
  if coarse:
    _log.warning(coarse)
  answers = run.columns[split].columns["answer"]
  correct = (preds == answers) & (answers >= 0)
  records = run.dataset[split]
  os.makedirs(out, exist_ok=True)
  # an earlier evaluation's summary must not vouch for the files replaced next
  storage.remove(os.path.join(out, "summary.json"))
  with replacing_maps(out) as maps_dir:
    rows = score(records, run.vocab.decode(preds), correct, conf, maps, truth_dir, maps_dir)
    summary = summarize(rows)
    summary.update(workdir=os.path.abspath(workdir), split=split, checkpoint=which, step=step,
                   method=method, images=images, map_size=list(maps.shape[1:]),
                   accuracy=float(correct.mean()), truth=os.path.abspath(truth_dir),
                   warnings=[coarse] if coarse else [])
    label = (f"{os.path.basename(os.path.abspath(workdir))}, {split}, {method}, {images} "
             "images")
    table = type_table(summary, label)
    tables.write(table, out, "by_type")
    metrics.write_rows(os.path.join(out, "grounding.csv"), rows, ROW_COLUMNS)
    with storage.replacing(os.path.join(out, "confidence.csv")) as f:
      f.write("question_id,confidence\n" + "".join(f"{r['question_id']},{r['confidence']!r}\n"
                                                   for r in rows))
    examples = os.path.join(out, "examples.png")
    if examples_figure(examples, rows, run.dataset, records, maps_dir, truth_dir,
                       label) is None and os.path.exists(examples):
      os.remove(examples)  # an earlier evaluation's, which this one would be read as
  storage.write_json(os.path.join(out, "summary.json"), summary)
  summary["tables"] = [table]
  return summary


def _study_record(summary):
  """What the study keeps of one run's summary.json: its scores and accuracy, per type too."""
  return {"workdir": summary["workdir"], "method": summary["method"],
          "accuracy": summary["accuracy"], "mean_iou": summary["mean_iou"],
          "mean_iou_correct": summary["mean_iou_correct"], "n_scored": summary["n_scored"],
          "by_type": {t: {"mean_iou": v["mean_iou"], "n": v["n"]}
                      for t, v in summary["by_type"].items()}}


def study_stage(study, cells, dataset, features):
  """The grounding stage of `study` (rsvqa_jax.study.Study) over its grid `cells` (each with
  "label", "weights" and the "reference" / "blind" runs over seeds): every run's relevance
  maps on the study split scored, beside the centre-prior and uniform floors; for study.json."""
  split, method = study.s.split, study.s.grounding.method
  if method not in METHODS:
    raise RSVQAError(f"config study.grounding.method={method!r}: choose one of "
                     f"{', '.join(METHODS)}")
  models, floors = [], None
  for cell in cells:
    for role in ("reference", "blind"):
      runs = []
      for run in cell[role]:
        workdir = run["workdir"]
        out = os.path.join(outputs.folder(workdir, split), f"grounding_{method}")
        path = os.path.join(out, "summary.json")
        if storage.read_json(path) is None:
          started = time.time()
          evaluate(workdir, split, out, method=method, dataset=dataset, features=features)
          label = os.path.relpath(workdir, study.dir)
          study.timings.record(f"grounding/{label}", time.time() - started)
          study.progress(f"{label}: grounding scored ({time.time() - started:.1f}s)")
        summary = storage.read_json(path)
        floors = floors or summary["floors"]
        runs.append(_study_record(summary))
      models.append({"label": cell["label"], "weights": cell["weights"], "role": role,
                     "runs": runs})
  return {"split": split, "method": method, "models": models,
          "floors": {f: {"mean_iou": v["mean_iou"],
                         "by_type": {t: {"mean_iou": b["mean_iou"], "n": b["n"]}
                                     for t, b in v["by_type"].items()}}
                     for f, v in floors.items()}}
