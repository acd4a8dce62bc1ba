"""The `rsvqa-jax` entry point: one subcommand per module in `rsvqa_jax.commands`.

Each command module defines `HELP` (one line), `add_arguments(parser)` and `run(args)`.
Modules are imported only when their command runs, so `rsvqa-jax synth` never pays for JAX.
"""
import argparse
import importlib
import sys

from rsvqa_jax import host_memory
from rsvqa_jax.errors import RSVQAError

COMMANDS = {
    "synth": "Write a synthetic RSVQA dataset in the official file layout.",
    "validate": "Check a dataset folder and report counts per split and type.",
    "features": ("Precompute the frozen image features (per augmentation variant and adversarial"
                 " kind); --pretrain trains the synthetic ResNet first."),
    "train": "Train a model from a config file into a workdir (resumes a stopped run).",
    "evaluate": ("Evaluate trained workdirs on a split: predictions.csv, accuracy table,"
                 " mean (std) over seeds."),
    "study": ("Whole language-bias study: reference and visual-blind models over seeds,"
              " adversarial testing, dataset analysis, report.md."),
    "convert": "Convert a ResNet, BERT-family or Skip-thoughts checkpoint to our safetensors/orbax format.",
    "analyze": ("Dataset analysis (most common / uniform answer accuracies), relative metrics,"
                " tables and Figure 7."),
    "config": "Print the effective config of a config file and overrides (every key).",
}


def _load(name):
  return importlib.import_module(f"rsvqa_jax.commands.{name}")


def build_parser(argv):
  parser = argparse.ArgumentParser(prog="rsvqa-jax", description=__doc__.splitlines()[0])
  sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
  chosen = next((a for a in argv if not a.startswith("-")), None)
  for name, help_text in COMMANDS.items():
    p = sub.add_parser(name, help=help_text, description=help_text)
    if name == chosen:
      _load(name).add_arguments(p)
  return parser


def main(argv=None):
  argv = list(sys.argv[1:] if argv is None else argv)
  args = build_parser(argv).parse_args(argv)
  host_memory.keep_freed_memory()  # before JAX starts its threads
  try:
    return _load(args.command).run(args) or 0
  except RSVQAError as e:
    print(f"rsvqa-jax {args.command}: error: {e}", file=sys.stderr)
    return 2
  except KeyboardInterrupt:
    print(f"rsvqa-jax {args.command}: interrupted", file=sys.stderr)
    return 130


if __name__ == "__main__":
  sys.exit(main())
