"""Train and score the runs of docs/audits/grounding.md, and write its two tables from their files.

The page's figures are a run's, never typed:

  python -m tools.grounding_tables --workdir DIR --docs docs/audits/grounding.md

trains (or resumes: a finished run is only reported) every configs/grounding_synthetic.py run
the page quotes into DIR/LM_FUSION[_pooled|_blind] with `rsvqa-jax train`, the DistilBERT ones
on the study's random-init DistilBERT architecture (configs/study_synthetic.py's study.lm entry,
rsvqa_jax.study.random_distilbert). Then `rsvqa-jax evaluate` (test OA), `rsvqa-jax grounding`
(W/grounding: attention models by their attention, pooled ones by Grad-CAM; the first model
also with --images shuffled and --method gradcam) and `rsvqa-jax evaluate --counterfactual`;
an evaluation whose last file is there is not run again. DIR/grounding_table.md and
DIR/counterfactual_table.md are assembled from the files those commands wrote alone, and with
--docs copied between the page's markers (bias/report.quote_into). --quick trains tiny runs to
try the tool; the page quotes the full ones.
"""
import argparse
import os
import subprocess
import sys
import time

from rsvqa_jax import storage
from rsvqa_jax.bias import report, tables
from rsvqa_jax.errors import RSVQAError
from rsvqa_jax.eval import counterfactual, outputs

CONFIG = "configs/grounding_synthetic.py"
STUDY_CONFIG = "configs/study_synthetic.py"  # its study.lm.distilbert: the DistilBERT rows' LM
SPLIT = "test"
TYPES = ("presence", "count", "comp", "rural_urban")  # the page's column order
NAMES = {"skipthoughts": "Skip-thoughts", "distilbert": "DistilBERT", "mult": "e-mult",
         "mutan": "MUTAN", "": "attention", "pooled": "pooled", "blind": "visual blind"}
MODELS = tuple(f"{lm},{fusion}{head}" for lm in ("skipthoughts", "distilbert")
               for fusion in ("mult", "mutan") for head in ("", ",pooled"))
FIRST = MODELS[0]
BLIND = f"{FIRST},blind"
COUNTERFACTUAL = (FIRST, f"{FIRST},pooled", BLIND)
# Grounding output folder (in the run's workdir) -> the `rsvqa-jax grounding` flags that fill it.
GROUNDINGS = {"grounding": (), "grounding_shuffled": ("--images", "shuffled"),
              "grounding_gradcam": ("--method", "gradcam")}
# The first model's rows beside its own: (folder, label suffix, OA of those answers?).
EXTRA_ROWS = (("grounding_shuffled", "shuffled images (OA of those answers)", True),
              ("grounding_gradcam", "by Grad-CAM", False))
QUICK = ("data.synthetic_images=60", "data.synthetic_questions_per_image=5",
         "image.pretrain.epochs=1", "train.num_epochs=1")

GROUNDING_TABLE, COUNTERFACTUAL_TABLE = "grounding_table.md", "counterfactual_table.md"
COMMAND = "python -m tools.grounding_tables --workdir DIR --docs docs/audits/grounding.md"
BLOCKS = {name: (f"<!-- {name}: begin ({COMMAND}) -->", f"<!-- {name}: end -->")
          for name in ("grounding table", "counterfactual table")}


def label(run):
  lm, fusion, *head = run.split(",")
  return f"{NAMES[lm]}, {NAMES[fusion]}, {NAMES[head[0] if head else '']}"


def workdir(directory, run):
  return os.path.join(directory, run.replace(",", "_"))


def _read(path, command):
  value = storage.read_json(path)
  if value is None:
    raise RSVQAError(f"{path}: missing or unreadable (written by {command})")
  return value


def _accuracy(directory, run):
  return _read(outputs.accuracy_paths(workdir(directory, run), SPLIT)[0], "rsvqa-jax evaluate")


def _grounding(directory, run, folder):
  return _read(os.path.join(workdir(directory, run), folder, "summary.json"),
               "rsvqa-jax grounding")


def _counterfactual(directory, run):
  return _read(counterfactual.paths(workdir(directory, run), SPLIT)[0],
               "rsvqa-jax evaluate --counterfactual")


def _pct(value):
  return "n/a" if value is None else tables.pct(value)


def _type_ious(summary_by_type, total):
  return [_pct(summary_by_type.get(t, {}).get("mean_iou")) for t in TYPES] + [_pct(total)]


def _row(cells):
  return "| " + " | ".join(cells) + " |"


def grounding_table(directory):
  """The page's first table (test OA, mean IoU per type) from the runs' accuracy.json and
  grounding summary.json files, and a line of the first model's counts and AP."""
  first = _grounding(directory, FIRST, "grounding")
  n = first["by_type"]
  lines = [_row(["model", "test OA", *[f"{tables.type_name(t)} (n={n.get(t, {}).get('n', 0)})"
                                       for t in TYPES], f"all (n={first['n_scored']})"]),
           "|" + "---|" * (len(TYPES) + 3)]
  for run in MODELS:
    s = _grounding(directory, run, "grounding")
    lines.append(_row([label(run), _pct(_accuracy(directory, run)["oa"]),
                       *_type_ious(s["by_type"], s["mean_iou"])]))
  for folder, suffix, own_oa in EXTRA_ROWS:
    s = _grounding(directory, FIRST, folder)
    oa = s["accuracy"] if own_oa else _accuracy(directory, FIRST)["oa"]
    lines.append(_row([f"{label(FIRST)}, {suffix}", _pct(oa),
                       *_type_ious(s["by_type"], s["mean_iou"])]))
  for floor, name in (("centre", "centre prior"), ("uniform", "uniform map (the visual-blind "
                                                               "floor)")):
    f = first["floors"][floor]
    lines.append(_row([name, "", *_type_ious(f["by_type"], f["mean_iou"])]))
  small = first["by_coverage"]["small"]["n"]
  lines += ["", f"n: test questions with a non-empty truth, of {first['n_questions']}. First row: "
                f"mAP@0.50:0.95 {_pct(first['map_50_95'])}%, AP@0.25 {_pct(first['ap_25'])}%; "
                f"{small} of its {first['n_scored']} truths are small (coverage < 1/3)."]
  return "\n".join(lines) + "\n"


def counterfactual_table(directory):
  """The page's second table (changed as demanded / controls changed, per type) from the runs'
  counterfactual.json files, and a line of the edit counts."""
  lines = [_row(["model", *[tables.type_name(t) for t in TYPES], "all"]),
           "|" + "---|" * (len(TYPES) + 2)]
  cell = lambda s: f"{_pct(s['changed_as_demanded'])} / {_pct(s['control_changed'])}"
  for run in COUNTERFACTUAL:
    s = _counterfactual(directory, run)
    lines.append(_row([label(run), *[cell(s["by_type"][t]) if t in s["by_type"] else "n/a"
                                     for t in TYPES], cell(s["all"])]))
  first = _counterfactual(directory, FIRST)
  counts = lambda s: f"{s['n_edits']} / {s['n_controls']}"
  left_out = sum(first["skipped"].values())
  lines += ["", "Edits that change the answer / controls: " + ", ".join(
      f"{tables.type_name(t)} {counts(first['by_type'][t])}" for t in TYPES
      if t in first["by_type"]) + f"; all {counts(first['all'])}, on {first['n_edited_images']} "
      f"edited images; {left_out} of the {first['n_questions']} test questions left out."]
  return "\n".join(lines) + "\n"


def write_tables(directory, docs=None):
  """Writes DIR's two table files from the runs' files; with `docs`, quotes them on that page."""
  blocks = [("grounding table", GROUNDING_TABLE, grounding_table(directory)),
            ("counterfactual table", COUNTERFACTUAL_TABLE, counterfactual_table(directory))]
  for _, name, text in blocks:
    report.write_text(os.path.join(directory, name), text)
    print(f"wrote {os.path.join(directory, name)}")
  if docs:
    report.quote_into([docs], [(*BLOCKS[block], text) for block, _, text in blocks])
    print(f"{docs}: grounding and counterfactual tables updated")


class _Runner:
  """Runs `rsvqa-jax` commands in child processes, each timed as it ends."""

  def __init__(self, directory, overrides):
    self.directory, self.overrides = directory, overrides

  def __call__(self, *args, done=None):
    """Runs `rsvqa-jax ARGS` unless the file `done` is there already."""
    if done and os.path.exists(done):
      print(f"skipped (done: {done}): rsvqa-jax {' '.join(args)}", flush=True)
      return
    started = time.time()
    subprocess.run([sys.executable, "-m", "rsvqa_jax.cli", *args], check=True)
    print(f"[{time.time() - started:.0f} s] rsvqa-jax {' '.join(args)}", flush=True)

  def train(self, run, extra=()):
    self("train", "--config", f"{CONFIG}:{run}", "--workdir", workdir(self.directory, run),
         *[f"--config.{o}" for o in (*self.overrides, *extra)])


def _distilbert_checkpoint(directory, overrides):
  """The study's random-init DistilBERT folder for this dataset's words (written once)."""
  from rsvqa_jax import config as config_lib  # pylint: disable=g-import-not-at-top
  from rsvqa_jax.study import language_models  # pylint: disable=g-import-not-at-top
  from rsvqa_jax.train import inputs  # pylint: disable=g-import-not-at-top
  config = config_lib.apply_overrides(config_lib.load(f"{CONFIG}:{FIRST}"), overrides)
  dataset = inputs.load_dataset(config, workdir(directory, FIRST))
  entry = config_lib.load(STUDY_CONFIG).study.lm.distilbert
  return language_models.checkpoint("distilbert", entry, dataset,
                                    config_lib.cache_dir(config, workdir(directory, FIRST)))


def run_all(directory, overrides):
  """Trains the page's runs and writes every evaluation the tables read."""
  rsvqa = _Runner(directory, overrides)
  checkpoint = None
  for run in (*MODELS, BLIND):  # the Skip-thoughts runs first: they generate the dataset
    extra = ()
    if run.startswith("distilbert"):
      checkpoint = checkpoint or _distilbert_checkpoint(directory, overrides)
      extra = (f"text.checkpoint={checkpoint}",)
    rsvqa.train(run, extra)
    w = workdir(directory, run)
    if run in MODELS:
      rsvqa("evaluate", "--workdir", w, "--split", SPLIT,
            done=outputs.accuracy_paths(w, SPLIT)[0])
      for folder, flags in GROUNDINGS.items():
        if folder == "grounding" or run == FIRST:
          out = os.path.join(w, folder)
          rsvqa("grounding", "--workdir", w, "--split", SPLIT, "--out", out, *flags,
                done=os.path.join(out, "summary.json"))
    if run in COUNTERFACTUAL:
      rsvqa("evaluate", "--workdir", w, "--split", SPLIT, "--counterfactual",
            done=counterfactual.paths(w, SPLIT)[0])


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--workdir", required=True, help="the folder of the runs and the tables")
  parser.add_argument("--docs", help="the page whose marker blocks get the tables "
                                     "(docs/audits/grounding.md)")
  parser.add_argument("--quick", action="store_true",
                      help="tiny runs to try the tool (a separate --workdir; never for --docs)")
  args = parser.parse_args(argv)
  if args.quick and args.docs:
    parser.error("--quick runs are not the page's: drop --docs")
  started = time.time()
  try:
    run_all(args.workdir, QUICK if args.quick else ())
    write_tables(args.workdir, args.docs)
  except subprocess.CalledProcessError as e:
    print(f"grounding_tables: error: {' '.join(e.cmd[3:])} exited {e.returncode}",
          file=sys.stderr)
    return 2
  except (OSError, RSVQAError) as e:
    print(f"grounding_tables: error: {e}", file=sys.stderr)
    return 2
  print(f"{time.time() - started:.0f} s in all")
  return 0


if __name__ == "__main__":
  sys.exit(main())
