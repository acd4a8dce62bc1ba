"""Damage each file of a dataset or a workdir many ways, run the commands that read it, list each traceback.

cli_fuzz gives odd values to the options; this gives odd contents to the files they read (a
synthetic set and a tiny run made in WORKDIR, one damaged copy per case; TARGETS says which
commands read which files):

  python -m tools.file_fuzz --workdir /tmp/ff                      # dataset JSON, some 1,000 cases
  python -m tools.file_fuzz --workdir /tmp/ff --files images
  python -m tools.file_fuzz --workdir /tmp/ff --files workdir --sample 200

A JSON file is emptied, truncated, nested 100,000 deep, given a BOM, NUL or Latin-1 bytes, another
top level, made a folder or a link to itself; each value is removed or given one of VALUES (of a
list of records, the first record's); a list of records is emptied, given its first record twice
or a non-record, or every record made inactive. An image is emptied,
truncated, resized, made grey, RGBA, 16-bit, a JPEG, a folder. A run that prints "Traceback" or
outlives --timeout is listed (the exit status is their number); the runs that exited 0 are
written to WORKDIR/accepted.txt, with or without a WARNING, to check by hand that no damage was
taken silently.
"""
import argparse
import copy
import io
import json
import os
import random
import re
import shutil
import sys

import numpy as np
from PIL import Image

from tools import cli_fuzz

# Null, the wrong containers, empty, negative, past int64, fractional, a bool, a word, not a
# number, infinite, a megabyte.
VALUES = (None, [], {}, "", -1, 2**64, 1.5, True, "x", float("nan"), float("inf"), "a" * 2**20)


def whole_file_damages():
  """{name: bytes -> bytes or None (a folder) or "loop" (a link to itself)} for a JSON file."""
  def latin1(b):
    at = re.search(rb':\s*"', b)
    return b"{\"\xe9\": 1}" if at is None else b[:at.end()] + b"\xe9" + b[at.end():]
  return {"empty": lambda b: b"", "truncated": lambda b: b[:len(b) // 2],
          "nul": lambda b: b"\x00" * 16, "bom": lambda b: b"\xef\xbb\xbf" + b,
          "latin1": latin1, "list": lambda b: b"[]", "null": lambda b: b"null",
          "deep": lambda b: b"[" * 100_000 + b"]" * 100_000, "folder": lambda b: None,
          "loop": lambda b: "loop"}


def value_damages(parsed):
  """{name: json object -> json object} for each list of records (emptied, its first record
  doubled, a non-record added, every record inactive) and each value (removed, or one of
  VALUES); of a list of records, only the first record's values."""
  out = {}
  for path, value, records in _walk(parsed, ()):
    where = "/".join(map(str, path)) or "top"
    if records:
      out[f"{where}: none"] = _set(path, lambda v: [])
      out[f"{where}: first twice"] = _set(path, lambda v: [v[0], *v])
      out[f"{where}: a non-record"] = _set(path, lambda v: [*v, 5])
      if "active" in value[0]:
        out[f"{where}: all inactive"] = _set(path, lambda v: [{**r, "active": False} for r in v])
      continue
    out[f"{where} removed"] = _set(path[:-1], lambda v, k=path[-1]: {
        key: x for key, x in v.items() if key != k})
    for i, odd in enumerate(VALUES):
      out[f"{where}={_short(odd)}#{i}"] = _set(path, lambda v, odd=odd: odd)
  return out


def _walk(obj, path):
  """(path, value, whether a list of records) of each value under obj; of a non-empty list of
  records, the list and its first record's values."""
  if isinstance(obj, dict) and obj:
    for key, value in obj.items():
      yield from _walk(value, (*path, key))
  elif isinstance(obj, list) and obj and all(isinstance(r, dict) for r in obj):
    yield path, obj, True
    yield from _walk(obj[0], (*path, 0))
  elif path:
    yield path, obj, False


def _set(path, change):
  """json object -> a copy whose value at `path` is change(that value)."""
  def damage(obj):
    if not path:
      return change(obj)
    obj = copy.copy(obj)
    obj[path[0]] = _set(path[1:], change)(obj[path[0]])
    return obj
  return damage


def _short(value):
  text = json.dumps(value)
  return text if len(text) < 12 else text[:8] + "..."


def image_damages():
  """{name: bytes of a good image -> bytes or None (a folder)}."""
  def saved(make, fmt="TIFF"):
    def damage(b):
      with Image.open(io.BytesIO(b)) as im:
        out = make(im)
      buf = io.BytesIO()
      out.save(buf, format=fmt)
      return buf.getvalue()
    return damage
  return {"empty": lambda b: b"", "truncated": lambda b: b[:len(b) // 2],
          "text": lambda b: b"not an image\n", "folder": lambda b: None,
          "1x1": saved(lambda im: im.resize((1, 1))), "half size": saved(
              lambda im: im.resize((im.width // 2, im.height // 2))),
          "grey": saved(lambda im: im.convert("L")), "rgba": saved(lambda im: im.convert("RGBA")),
          "16-bit": saved(lambda im: Image.fromarray(
              np.asarray(im.convert("L"), np.uint16) * 257)),
          "jpeg": saved(lambda im: im.convert("RGB"), "JPEG")}


def _bytes(path):
  with open(path, "rb") as f:
    return f.read()


# kind of file -> (the folder in WORKDIR its files are in, the commands that read them).
TARGETS = {"json": ("data", ("validate", "analyze")),
           "images": ("data", ("validate", "features", "train")),
           "workdir": ("run", ("evaluate", "tables", "train"))}


def cases(root, kinds):
  """[(label, kind, relative path, damage)] of every damage of the chosen kinds of files."""
  out = []
  for kind in kinds:
    folder = TARGETS[kind][0]
    here = os.path.join(root, folder)
    if kind == "images":
      images = next((n for n in sorted(os.listdir(here)) if n.startswith("Images")), None)
      if images is None:
        raise SystemExit(f"{here}: no image folder (a synthetic RSVQAxBEN has none)")
      first = os.path.join(images, sorted(os.listdir(os.path.join(here, images)))[0])
      out += [(f"{first}: {label}", kind, first, damage)
              for label, damage in image_damages().items()]
      continue
    for name in _json_files(here):
      with open(os.path.join(here, name), encoding="utf-8") as f:
        parsed = json.load(f)
      damages = {**whole_file_damages(), **{
          label: (lambda d: lambda b: json.dumps(d(json.loads(b))).encode())(damage)
          for label, damage in value_damages(parsed).items()}}
      out += [(f"{folder}/{name}: {label}", kind, name, damage)
              for label, damage in damages.items()]
  return out


def _json_files(folder):
  """The .json files under `folder` (relative paths), but a checkpoint's (test_corrupt_state
  damages those)."""
  out = []
  for here, dirs, files in os.walk(folder):
    dirs[:] = sorted(d for d in dirs if d not in ("checkpoints", "best"))
    out += [os.path.relpath(os.path.join(here, f), folder) for f in sorted(files)
            if f.endswith(".json")]
  return out


def damaged_copy(source, where, rel, damage, link):
  """A copy of `source` at `where` whose `rel` is replaced by damage(its bytes); its other files
  hard-linked if `link` (a dataset: no command writes into one), else copied (a workdir: a run
  appends to its metrics.jsonl)."""
  shutil.rmtree(where, ignore_errors=True)
  shutil.copytree(source, where, copy_function=os.link if link else shutil.copy2)
  path = os.path.join(where, rel)
  new = damage(_bytes(path))
  os.remove(path)
  if new is None:
    os.mkdir(path)
  elif new == "loop":
    os.symlink(os.path.basename(path), path)
  else:
    with open(path, "wb") as f:
      f.write(new)


def train_arguments(data, workdir):
  """`rsvqa-jax train` of a tiny model on the dataset at `data`."""
  configs = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "configs")
  return ["train", "--config", os.path.join(configs, "synthetic_tiny.py"), "--workdir", workdir,
          "--config.data.synthetic=false", f"--config.data.root={data}",
          "--config.text.checkpoint=random", "--config.image.checkpoint=random",
          "--config.train.batch_size=4", "--config.train.num_epochs=1"]


def command_lines(root, folder):
  """{command: argv} reading the damaged copy of `folder` (the other one left whole); a set
  without images (a synthetic RSVQAxBEN) is validated with --skip-images."""
  cases_dir, out = os.path.join(root, "cases"), os.path.join(root, "out")
  shutil.rmtree(out, ignore_errors=True)
  data = os.path.join(cases_dir if folder == "data" else root, "data")
  run = os.path.join(cases_dir, "run")
  imageless = not any(n.startswith("Images") for n in os.listdir(os.path.join(root, "data")))
  return {"validate": ["validate", "--data", data, *(["--skip-images"] if imageless else [])],
          "analyze": ["analyze", "--data", data, "--out", os.path.join(out, "analyze")],
          "features": ["features", "--data", data, "--cache", os.path.join(out, "features"),
                       "--arch", "resnet18", "--checkpoint", "random"],
          "tables": ["tables", "--runs", cases_dir, "--out", os.path.join(out, "tables")],
          "evaluate": ["evaluate", "--workdir", run],
          "train": train_arguments(data, os.path.join(out, "train") if folder == "data" else run)}


def fuzz(root, kinds, commands, timeout, sample=None, say=print):
  """([(problem, case label, argv)] of tracebacks and hangs, [(case label, command, warned)] of
  the runs that exited 0). `sample`: how many cases to draw (seeded), all if None."""
  todo = cases(root, kinds)
  if sample is not None and sample < len(todo):
    todo = [todo[i] for i in sorted(random.Random(0).sample(range(len(todo)), sample))]
  found, accepted = [], []
  for i, (label, kind, rel, damage) in enumerate(todo):
    print(f"[{i + 1}/{len(todo)}] {label}", file=sys.stderr, flush=True)
    folder = TARGETS[kind][0]
    # the other kind's damaged copy goes: commands read cases/ (tables --runs)
    shutil.rmtree(os.path.join(root, "cases"), ignore_errors=True)
    damaged_copy(os.path.join(root, folder), os.path.join(root, "cases", folder), rel, damage,
                 link=folder == "data")
    for command, argv in command_lines(root, folder).items():
      if command not in (commands or TARGETS[kind][1]):
        continue
      argv = ["rsvqa-jax", "-q", *argv]
      problem, status, stderr = cli_fuzz.outcome(argv, root, timeout)
      if problem:
        found.append((problem, label, argv))
        say(f"{problem}: {label}: {' '.join(argv)}")
      elif status == 0:
        accepted.append((label, command, "WARNING" in stderr))
  return found, accepted


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--workdir", required=True, help="scratch folder (created)")
  parser.add_argument("--files", default="json", help=f"of {', '.join(TARGETS)}, comma-separated")
  parser.add_argument("--commands", default="",
                      help="the commands to run, comma-separated (default: TARGETS' for the kind: "
                           "json validate,analyze; images validate,features,train; workdir "
                           "tables,evaluate,train)")
  parser.add_argument("--variant", default="lr", choices=("lr", "hr", "xben"))
  parser.add_argument("--sample", type=int, help="draw this many cases (default: every one)")
  parser.add_argument("--timeout", type=float, default=120, help="seconds a run may take")
  args = parser.parse_args(argv)
  kinds = args.files.split(",")
  if set(kinds) - set(TARGETS):
    parser.error(f"--files: of {', '.join(TARGETS)}")
  root = os.path.abspath(args.workdir)
  os.makedirs(root, exist_ok=True)
  data, run = os.path.join(root, "data"), os.path.join(root, "run")
  if not os.path.isdir(data):
    cli_fuzz.run_ok(["synth", "--out", data, "--variant", args.variant, "--images", "12",
                     "--questions-per-image", "4"], root)
  if "workdir" in kinds and not os.path.isdir(run):
    cli_fuzz.run_ok(train_arguments(data, run), root)
    cli_fuzz.run_ok(["evaluate", "--workdir", run], root)
  found, accepted = fuzz(root, kinds, [c for c in args.commands.split(",") if c], args.timeout,
                         args.sample)
  with open(os.path.join(root, "accepted.txt"), "w", encoding="utf-8") as f:
    f.writelines(f"{label}\t{command}\t{'with a WARNING' if warned else 'silently'}\n"
                 for label, command, warned in accepted)
  print(f"{len(found)} run(s) with a traceback or a hang; {len(accepted)} accepted, "
        f"{sum(not w for _, _, w in accepted)} of them silently (listed in "
        f"{os.path.join(root, 'accepted.txt')})")
  return len(found)


if __name__ == "__main__":
  sys.exit(main())
