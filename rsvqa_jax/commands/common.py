"""Argument handling shared by the commands that take a config: `--config FILE[:ARG]`,
`--config.KEY=VALUE` overrides and `--print-config`."""
import json

OVERRIDE_PREFIX = "--config."


def accept_overrides(parser):
  """Lets the parser take `--config.a.b=value` pairs, collected in args.config_overrides.

  Kept instead of ml_collections' config_flags: that needs absl's flag parser beside argparse's
  subcommands, and a misspelt key there ends in a traceback, where config.override says in one
  line which keys the section has (docs/commands.md, "Configs").
  """
  parse_known = parser.parse_known_args

  def parse_known_args(args=None, namespace=None):
    args = list(args or [])
    overrides, rest, i, given = [], [], 0, {}
    while i < len(args):
      a = args[i]
      if a.startswith(OVERRIDE_PREFIX):
        if "=" not in a and i + 1 < len(args):
          a, i = f"{a}={args[i + 1]}", i + 1
        key, _, value = a.partition("=")
        if key in given:  # the last would win in silence, as with any option given twice
          parser.error(f"{key} given twice ({given[key]!r} and {value!r}); give it once")
        given[key] = value
        overrides.append(a[len(OVERRIDE_PREFIX):])
      else:
        rest.append(a)
      i += 1
    ns, extra = parse_known(rest, namespace)
    ns.config_overrides = overrides
    return ns, extra

  parser.parse_known_args = parse_known_args


def add_config_arguments(parser, *, example, print_flag=True, override="train.batch_size=64"):
  """--config (with an example), the overrides (`override` an example of a key the command
  reads) and, unless asked not to, --print-config."""
  parser.add_argument("--config", required=True,
                      help=f"config file, optionally with an argument: {example}")
  if print_flag:
    parser.add_argument("--print-config", action="store_true",
                        help="print the effective config (after the overrides) and exit")
  parser.epilog = (f"Override any config key with --config.KEY=VALUE, e.g. --config.{override} "
                   "(rsvqa-jax config --config CONFIG lists the keys)")
  accept_overrides(parser)


def add_run_arguments(parser, *, example, workdir_means, override="train.batch_size=64"):
  """The arguments of a command that runs a config in a folder (train, study)."""
  add_config_arguments(parser, example=example, override=override)
  parser.add_argument("--workdir", help=f"{workdir_means} (required unless --print-config)")
  add_pickle_argument(parser)


def add_pickle_argument(parser):
  parser.add_argument("--allow-pickle", action="store_true",
                      help="let a pickled Skip-thoughts utable.npy be unpickled (it can run code: "
                           "only for a file you trust; never read from a config or a workdir)")


def trusted_pickles(args):
  """The scope in which a pickled file may be unpickled: only with this command's --allow-pickle."""
  from rsvqa_jax.models import skipthoughts_params  # pylint: disable=g-import-not-at-top
  return skipthoughts_params.pickle_allowed(getattr(args, "allow_pickle", False))


def load_config(args):
  """The config the arguments name, with their overrides applied (over a study's baseline row
  settings too) and its values checked (a bad seed, or a study key, is refused when shown by
  `rsvqa-jax config` or --print-config, not later when used)."""
  from rsvqa_jax import config as config_lib  # pylint: disable=g-import-not-at-top
  config = config_lib.apply_command_line(config_lib.load(args.config),
                                         getattr(args, "config_overrides", []))
  config_lib.check(config)
  if "study" in config:  # a study's own keys too, whatever command shows or runs the config
    from rsvqa_jax.study import checks  # pylint: disable=g-import-not-at-top
    checks.check(config, paths=False)
  return config


def command_line_keys(args):
  """The keys the command line set (--config.KEY=VALUE), for config.check_unread."""
  return [pair.partition("=")[0].strip() for pair in getattr(args, "config_overrides", [])]


def check_unread(args, config):
  """A key the config's mode does not read: a WARNING or refused (config.check_unread), once
  per command, after the command's own checks."""
  from rsvqa_jax import config as config_lib  # pylint: disable=g-import-not-at-top
  config_lib.check_unread(config, named=command_line_keys(args))


def config_for_run(args, workdir_means, check=None, unread=True):
  """The config a run command (train, study) runs with, or None once --print-config showed it.

  `workdir_means` says what --workdir holds, for the error when it is missing; `check(config)`
  refuses a config the command cannot run, before it is shown too, and before its unread keys
  are judged (check_unread; `unread` False: the command judges them itself, as a study does
  where its report lists the WARNINGs).
  """
  from rsvqa_jax.errors import RSVQAError  # pylint: disable=g-import-not-at-top
  config = load_config(args)
  if check:
    check(config)
  if unread or args.print_config:
    check_unread(args, config)
  if args.print_config:
    print(config_text(config))
    return None
  if not args.workdir:
    raise RSVQAError(f"--workdir is required ({workdir_means})")
  return config


def config_text(config):
  """The effective config as indented JSON (every key, sorted)."""
  from rsvqa_jax import config as config_lib  # pylint: disable=g-import-not-at-top
  return json.dumps(config_lib.to_dict(config), indent=2, sort_keys=True)
