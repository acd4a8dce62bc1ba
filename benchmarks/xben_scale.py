"""RSVQAxBEN at full size: generation, the columnar build, validate, analyze, one input epoch.

A synthetic question set of RSVQAxBEN's size (`rsvqa-jax synth --variant xben`: 590,326 image
ids x 25 questions = 14.8M questions, no image files) is generated, then each stage runs once
in a fresh Python process, which reports its wall and CPU seconds (the CPU seconds say more on
a shared machine) and its peak RSS (VmHWM at its end, the interpreter and imports included):
  generate   synthetic.generate_xben (the JSON files, about 2.8 GB at full size)
  columnar   columnar.ensure: the nine files hashed, streamed and checked, the columns written
  validate   `rsvqa-jax validate --skip-images` (reads the columnar form)
  analyze    `rsvqa-jax analyze --dataset xben` (the test split against train priors, tables,
             Figure 7)
  epoch      training's input pipeline with cached image features: answer vocabulary, word
             tokenizer, train/run.py's encode_split of train and val against the sorted image
             ids (the rows of a feature cache), then every batch of one shuffled train epoch
             from pipeline.batch_iterator (batch size, lengths and buckets of the config's defaults); the
             model step is not run
Targets: generation under 10 minutes, every stage after it under 4 GiB peak RSS, validate
under 5 minutes, analyze and the epoch under 10 minutes each (wall, on a shared machine).
Sizes: full 590,326 images; quick 20,000 (500k questions); toy 400 (10k questions).

  python -m benchmarks.run --only xben_scale --out DIR          # full size (~30 min here)
  python -m benchmarks.xben_scale --mode quick                   # alone: JSON on stdout
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

from benchmarks import timing

IMAGES = {"full": 590_326, "quick": 20_000, "toy": 400}
PER_IMAGE = 25
STAGES = ("generate", "columnar", "validate", "analyze", "epoch")
RSS_TARGET_GIB = 4.0
TIME_TARGETS_S = {"generate": 600.0, "validate": 300.0, "analyze": 600.0, "epoch": 600.0}


def _stage(name, root, images, out):
  """Runs stage `name` in this process; returns what it reports beside the time and RSS."""
  if name == "generate":
    from rsvqa_jax.data import synthetic  # pylint: disable=g-import-not-at-top
    counts = synthetic.generate_xben(root, images, 0, PER_IMAGE)
    size = sum(os.path.getsize(os.path.join(root, f)) for f in os.listdir(root)
               if f.endswith(".json"))
    return {"questions": counts, "json_bytes": size}
  if name == "columnar":
    from rsvqa_jax.data import columnar  # pylint: disable=g-import-not-at-top
    folder = columnar.ensure(root, "xben")
    return {"columnar_bytes": sum(os.path.getsize(os.path.join(folder, f))
                                  for f in os.listdir(folder))}
  if name in ("validate", "analyze"):
    from rsvqa_jax import cli  # pylint: disable=g-import-not-at-top
    argv = ["validate", "--data", root, "--skip-images"] if name == "validate" else [
        "analyze", "--data", root, "--dataset", "xben", "--out", out]
    if cli.main(argv):
      raise RuntimeError(f"rsvqa-jax {' '.join(argv)} failed")
    return {}
  return _epoch(root)


def _epoch(root):
  """Training's inputs for cached image features, and one epoch of train batches."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  from rsvqa_jax import config as config_lib  # pylint: disable=g-import-not-at-top
  from rsvqa_jax.data import pipeline, rsvqa_json  # pylint: disable=g-import-not-at-top
  from rsvqa_jax.data.answers import AnswerVocab  # pylint: disable=g-import-not-at-top
  from rsvqa_jax.data.tokenizers import WordTokenizer  # pylint: disable=g-import-not-at-top
  from rsvqa_jax.train import inputs  # pylint: disable=g-import-not-at-top
  config = config_lib.base_config()
  dataset = rsvqa_json.read_dataset(root, "xben")
  vocab = AnswerVocab.for_dataset(dataset)
  tokenizer = WordTokenizer.build(inputs.dataset_words(dataset))
  image_ids = np.unique(np.concatenate([s.image_id for s in dataset.splits.values()]))
  columns = {s: inputs.encode_split(dataset[s], vocab, tokenizer, image_ids,
                                    config.text.max_length, config.train.length_buckets)
             for s in ("train", "val")}
  train = columns["train"]
  batches = pipeline.batch_iterator(
      train.columns, batch_size=config.train.batch_size, shuffle=True, seed=0, num_epochs=1,
      drop_remainder=True, length_buckets=train.buckets, lengths=train.lengths)
  n_batches, tokens = 0, 0
  start = time.perf_counter()
  for batch in batches:
    n_batches += 1
    tokens += int(batch["mask"].sum())
  return {"batches": n_batches, "batch_size": config.train.batch_size, "real_tokens": tokens,
          "token_width": int(train.columns["tokens"].shape[1]),
          "batches_s": time.perf_counter() - start}


def _peak_rss_bytes():
  """This process's peak RSS: VmHWM of /proc/self/status (ru_maxrss keeps the parent's peak
  across the fork and exec that started this process), ru_maxrss where there is no /proc."""
  try:
    with open("/proc/self/status", encoding="ascii") as f:
      for line in f:
        if line.startswith("VmHWM:"):
          return int(line.split()[1]) * 1024
  except OSError:
    pass
  return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _child(name, root, images, out):
  start = time.perf_counter()
  report = _stage(name, root, images, out)
  usage = resource.getrusage(resource.RUSAGE_SELF)
  report.update(wall_s=time.perf_counter() - start, cpu_s=usage.ru_utime + usage.ru_stime,
                peak_rss_bytes=_peak_rss_bytes())
  print("XBEN_STAGE " + json.dumps(report), flush=True)


def _run_stage(name, root, images, out, log):
  cmd = [sys.executable, "-m", "benchmarks.xben_scale", "--stage", name, "--root", root,
         "--images", str(images), "--analysis-out", out]
  done = subprocess.run(cmd, capture_output=True, text=True, check=False,
                        cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  found = [l for l in done.stdout.splitlines() if l.startswith("XBEN_STAGE ")]
  if done.returncode or not found:
    raise RuntimeError(f"stage {name} failed ({done.returncode}): {done.stderr.strip()[-800:]}")
  report = json.loads(found[-1][len("XBEN_STAGE "):])
  log(f"  xben_scale {name}: {report['wall_s']:.1f} s ({report['cpu_s']:.1f} CPU s), peak RSS "
      f"{report['peak_rss_bytes'] / 2**30:.2f} GiB")
  return report


def run(mode, log=print, keep=None):
  """The section and targets of benchmarks/run.py; `keep`: a folder to keep the data in."""
  images = IMAGES[mode]
  with tempfile.TemporaryDirectory(prefix="xben_scale_") as tmp:
    root = os.path.join(keep or tmp, "xben")
    rows = {name: _run_stage(name, root, images, os.path.join(tmp, "analysis"), log)
            for name in STAGES}
  questions = sum(rows["generate"]["questions"].values())
  section = {"rows": [{"stage": name, **r} for name, r in rows.items()], "images": images,
             "questions": questions, "cpu": timing.cpu_model()}
  targets = [timing.target(f"xben {images} images / {questions} questions: generation (wall s)",
                           rows["generate"]["wall_s"], "<=", TIME_TARGETS_S["generate"])]
  for name in STAGES[1:]:
    targets.append(timing.target(f"xben {questions} questions: {name} peak RSS (GiB)",
                                 rows[name]["peak_rss_bytes"] / 2**30, "<=", RSS_TARGET_GIB))
    if name in TIME_TARGETS_S:
      targets.append(timing.target(f"xben {questions} questions: {name} (wall s)",
                                   rows[name]["wall_s"], "<=", TIME_TARGETS_S[name]))
  return section, targets


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--mode", choices=tuple(IMAGES), default="quick")
  parser.add_argument("--stage", choices=STAGES, help="(internal) run one stage in this process")
  parser.add_argument("--root")
  parser.add_argument("--images", type=int)
  parser.add_argument("--analysis-out")
  parser.add_argument("--keep", help="folder to keep the generated dataset in")
  args = parser.parse_args(argv)
  if args.stage:
    _child(args.stage, args.root, args.images, args.analysis_out)
    return
  section, targets = run(args.mode, log=lambda m: print(m, file=sys.stderr), keep=args.keep)
  print(json.dumps({"section": section, "targets": targets}, indent=1))


if __name__ == "__main__":
  main()
