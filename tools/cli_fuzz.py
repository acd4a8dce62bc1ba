"""Give every option of every subcommand odd values, one at a time, and list each traceback or hang.

The newcomer rule is one line for a bad input, never a traceback; this checks it across the whole
command line at once (about 940 runs, some 20 minutes on two cores), so a new option is covered the
day it lands:

  python -m tools.cli_fuzz --workdir /tmp/fuzz                # every subcommand
  python -m tools.cli_fuzz --workdir /tmp/fuzz evaluate train  # some of them

It builds what the commands read in WORKDIR (a synthetic LR set and a tiny run trained on it),
then runs `rsvqa-jax -q CMD` with the arguments a command needs and one option replaced by each of
VALUES, in WORKDIR (some values are created there as folders). A run that prints "Traceback" or
outlives --timeout is listed; the exit status is the number listed (0: none). The runs set
RSVQA_JAX_TRACEBACK=1: an exception no check caught is then a traceback, not the one line the
command line's last line of defence would print.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys

from rsvqa_jax import cli

# A path in a folder that does not exist, under the fuzz folder: "/nonexistent/x" was made by
# `synth --out` when run as root, and was no longer missing for the runs after it.
MISSING = os.path.join("missing", "x")
# Empty, zero, negative, huge, not a number, overflowing, missing, a folder, an unreadable file, a
# space.
VALUES = ("", "0", "-1", "99999999999999999999", "nan", "1e400", MISSING, "a_folder",
          "garbage.txt", "a b")


def base_arguments(root):
  """subcommand -> the arguments it needs to get as far as reading its options (answerability
  train, select and study are left out: each would train a model per run)."""
  data, run = os.path.join(root, "data"), os.path.join(root, "run")
  masks = os.path.join(data, "Grounding")  # the truth masks synth writes, scored against themselves
  configs = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "configs")
  return {
      "synth": ["--out", "synth_out"],
      "validate": ["--data", data],
      "features": ["--data", data, "--cache", "features", "--arch", "resnet18", "--checkpoint",
                   "random"],
      "train": ["--config", os.path.join(configs, "synthetic_tiny.py"), "--workdir", "train_out"],
      "evaluate": ["--workdir", run],
      "analyze": ["--data", data, "--out", "analyze_out"],
      "config": ["--config", os.path.join(configs, "synthetic_tiny.py")],
      "tables": ["--runs", root],
      "convert": ["--kind", "bert", "--src", "a_folder", "--out", "converted.safetensors"],
      "shortcuts": ["--data", data, "--out", "shortcuts_out"],
      "grounding": ["--out", "grounding_out", "--workdir", run],
      "grounding score": ["score", "--out", "score_out", "--predicted", masks, "--truth", masks],
      "answerability score": ["score", "--scores", "scores.csv", "--labels", "labels.csv",
                              "--out", "answerability_out"],
      "study": ["--config", os.path.join(configs, "study_synthetic.py"), "--workdir", "study_out"],
  }


def prepare(root):
  """The dataset and the trained run the commands read, and the odd files among VALUES."""
  data, run = os.path.join(root, "data"), os.path.join(root, "run")
  os.makedirs(os.path.join(root, "a_folder"), exist_ok=True)
  with open(os.path.join(root, "garbage.txt"), "wb") as f:
    f.write(b"\x00\xff garbage,\n\"unterminated")
  with open(os.path.join(root, "labels.csv"), "w", encoding="utf-8") as f:  # one pool of two images
    f.write("pool_id,question,image_id,label\n0,Is there a road,1,2\n0,Is there a road,2,0\n")
  with open(os.path.join(root, "scores.csv"), "w", encoding="utf-8") as f:
    f.write("pool_id,image_id,score\n0,1,0.9\n0,2,0.1\n")
  if not os.path.isdir(data):
    run_ok(["synth", "--out", data, "--images", "12", "--questions-per-image", "4"], root)
  if not os.path.isdir(run):
    run_ok(["train", "--config", base_arguments(root)["train"][1], "--workdir", run,
            "--config.data.synthetic=false", f"--config.data.root={data}",
            "--config.text.checkpoint=random", "--config.image.checkpoint=random",
            "--config.train.batch_size=4", "--config.train.num_epochs=1"], root)


def run_ok(argv, cwd):
  """Runs `rsvqa-jax -q ARGV` in cwd; CalledProcessError if it fails."""
  subprocess.run(["rsvqa-jax", "-q", *argv], cwd=cwd, check=True, capture_output=True)


def options(command):
  """The long options `rsvqa-jax COMMAND --help` lists."""
  shown = subprocess.run(["rsvqa-jax", *command.split(), "--help"], capture_output=True,
                         text=True, check=True).stdout
  return sorted(set(re.findall(r"(--[a-z][a-z0-9-]+)", shown)) - {"--help"})


def with_option(base, option, value):
  """`base` with `option` set to `value` (replacing its own value where base gives it)."""
  argv = list(base)
  if option in argv:
    argv[argv.index(option) + 1] = value
  else:
    argv += [option, value]
  return argv


def fuzz(root, commands, timeout, say=print):
  """[(problem, argv)] of the runs that printed a traceback or hung."""
  found = []
  for command, base in base_arguments(root).items():
    if commands and command not in commands and command.split()[0] not in commands:
      continue
    for option in options(command):
      for value in VALUES:
        argv = ["rsvqa-jax", "-q", command.split()[0], *with_option(base, option, value)]
        problem, _, _ = outcome(argv, root, timeout)
        shutil.rmtree(os.path.join(root, os.path.dirname(MISSING)), ignore_errors=True)
        if problem:
          found.append((problem, argv))
          say(f"{problem}: {' '.join(argv)}")
  return found


def outcome(argv, cwd, timeout):
  """(the traceback's last line or the hang of one run, or None; its exit status, None if hung;
  its stderr)."""
  env = {**os.environ, cli.SHOW_TRACEBACK: "1"}  # else its last line of defence hides them
  try:
    out = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)
  except subprocess.TimeoutExpired:
    return f"no answer in {timeout:g} s", None, ""
  if "Traceback" not in out.stdout + out.stderr:
    return None, out.returncode, out.stderr
  return (out.stderr.strip().splitlines() or ["Traceback"])[-1], out.returncode, out.stderr


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--workdir", required=True, help="scratch folder (created)")
  parser.add_argument("--timeout", type=float, default=90, help="seconds a run may take")
  parser.add_argument("commands", nargs="*", help="subcommands to try (default: all)")
  args = parser.parse_args(argv)
  names = {w for c in base_arguments(args.workdir) for w in (c, c.split()[0])}
  unknown = sorted(set(args.commands) - names)
  if unknown:
    parser.error(f"unknown subcommand(s) {', '.join(unknown)}")
  root = os.path.abspath(args.workdir)
  os.makedirs(root, exist_ok=True)
  prepare(root)
  found = fuzz(root, args.commands, args.timeout)
  print(f"{len(found)} run(s) with a traceback or a hang")
  return len(found)


if __name__ == "__main__":
  sys.exit(main())
