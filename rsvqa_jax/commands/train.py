"""`rsvqa-jax train --config configs/X.py[:arg] --workdir DIR [--config.a.b=value ...]`.

Starts the run, resumes it from its last checkpoint, or reports it finished. Overrides use the
dotted config keys; an unknown key or a value of the wrong type is a one-line error.
"""
from rsvqa_jax.errors import RSVQAError

HELP = "Train a model from a config file into a workdir (resumes a stopped run)."
OVERRIDE_PREFIX = "--config."


def accept_overrides(parser):
  """Lets the parser take `--config.a.b=value` pairs, collected in args.config_overrides."""
  parse_known = parser.parse_known_args

  def parse_known_args(args=None, namespace=None):
    args = list(args or [])
    overrides, rest, i = [], [], 0
    while i < len(args):
      a = args[i]
      if a.startswith(OVERRIDE_PREFIX):
        if "=" not in a and i + 1 < len(args):
          a, i = f"{a}={args[i + 1]}", i + 1
        overrides.append(a[len(OVERRIDE_PREFIX):])
      else:
        rest.append(a)
      i += 1
    ns, extra = parse_known(rest, namespace)
    ns.config_overrides = overrides
    return ns, extra

  parser.parse_known_args = parse_known_args


def add_arguments(parser):
  parser.add_argument("--config", required=True,
                      help="config file, optionally with an argument: configs/lr_table1.py:"
                           "distilbert,mutan,finetuned")
  parser.add_argument("--workdir", required=True, help="folder for checkpoints and metrics")
  parser.epilog = "Override any config key with --config.KEY=VALUE, e.g. --config.model.fusion=mutan"
  accept_overrides(parser)


def run(args):
  # Imported here: JAX starts only when a command that needs it runs.
  from rsvqa_jax.train import config_lib, loop  # pylint: disable=g-import-not-at-top
  config = config_lib.load(args.config)
  config_lib.apply_overrides(config, getattr(args, "config_overrides", []))
  if config.train.num_epochs <= 0:
    raise RSVQAError(f"config train.num_epochs={config.train.num_epochs}: must be positive")
  summary = loop.train(config, args.workdir)
  if summary["finished"]:
    print(f"{args.workdir}: done; best validation OA {summary['best_oa']:.4f} at step "
          f"{summary['best_step']}; evaluate with: rsvqa-jax evaluate --workdir {args.workdir}")
  return 0
