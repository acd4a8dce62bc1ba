"""The `rsvqa-jax` entry point: one subcommand per module in `rsvqa_jax.commands`.

Each command module defines `add_arguments(parser)` and `run(args)`; its one-line help is in
`COMMANDS`, so `--help` lists every command without importing any.
Modules are imported only when their command runs, so `rsvqa-jax synth` never pays for JAX.

Ctrl-C (SIGINT) and SIGTERM end the process at once, whatever it is doing (importing, compiling,
writing), with exit status 130 / 143 and one line on stderr. That is safe because every write
of this tool is atomic or resumable (a folder or file renamed into place when complete, a
checkpoint committed whole): an interrupted run leaves what a `kill -9` leaves, and running the
same command again resumes it. Letting the interrupt unwind through JAX instead was not: it was
swallowed during imports, or ended in a segmentation fault at interpreter exit.
"""
import argparse
import errno
import importlib
import logging
import os
import signal
import sys
import threading

# Nothing heavier than the standard library is imported before `entry` installs the interrupt
# handler (tqdm, host_memory and argument_types' config are imported where they are used): a
# Ctrl-C in the first tenth of a second printed a KeyboardInterrupt traceback.
from rsvqa_jax import __version__, errors, jax_environment, streams
from rsvqa_jax.errors import RSVQAError, one_line, os_error_line

COMMANDS = {
    "synth": "Write a synthetic RSVQA dataset (images, questions, answers) to try everything on.",
    "validate": "Check a dataset folder: files, ids, images; question counts per split and type.",
    "features": ("Compute the image features a model reads once and keep them in a cache"
                 " (optional: train and study do it when needed)."),
    "train": "Train a model from a config file into a folder (run it again to resume).",
    "evaluate": ("Test trained models on a split: accuracy per question type, mean (std) over"
                 " seeds; --adversarial swaps the images."),
    "study": ("Run the whole language-bias study in one command and write report.md: models with"
              " and without images, over seeds, image swaps, dataset analysis."),
    "convert": "Convert a ResNet, BERT-family or Skip-thoughts checkpoint to our safetensors format.",
    "analyze": ("How far the questions alone predict the answers (most common answer per question"
                " type, per question); scores prediction files against it."),
    "config": "Print every setting of a config file, with your --config.KEY=VALUE overrides.",
    "tables": "Gather the results of many trained models into the paper's Tables 1 and 2.",
    "shortcuts": ("Build test sets whose answers differ from what the training questions suggest"
                  " (shortcut benchmark, VQA-VS), to see if a model relies on shortcuts."),
    "grounding": ("Check where in the image a model looks: score predicted answer regions"
                  " against true ones."),
    "answerability": ("Rank which images can answer a question (ChiQA): train, score ranking"
                      " files, pick hard examples."),
}


def _load(name):
  return importlib.import_module(f"rsvqa_jax.commands.{name}")


DESCRIPTION = """\
Train models that answer questions about remote-sensing images (RSVQA LR / HR,
RSVQAxBEN, or a synthetic dataset made here) and find out whether they look at
the image or answer from the wording of the question alone (language bias)."""
EPILOG = """first steps:
  rsvqa-jax train --config configs/synthetic_tiny.py --workdir runs/tiny
  rsvqa-jax evaluate --workdir runs/tiny
  rsvqa-jax study --config configs/study_synthetic.py --workdir runs/study   (everything)

rsvqa-jax COMMAND --help lists a command's options."""


def _has_default(action):
  """Whether an option has a default worth showing (not None, an off flag or an empty list)."""
  d = action.default
  return not (d is None or d is False or d is argparse.SUPPRESS or (isinstance(d, list) and not d))


class _HelpFormatter(argparse.HelpFormatter):
  """Adds "(default: X)" to an option's help unless it says its default already."""

  def _get_help_string(self, action):
    text = action.help or ""
    if "default" in text or not action.option_strings or not _has_default(action):
      return text
    return f"{text} (default: %(default)s)"


def build_parser(argv):
  from rsvqa_jax.commands import argument_types  # pylint: disable=g-import-not-at-top
  parser = argparse.ArgumentParser(
      prog="rsvqa-jax", description=DESCRIPTION, epilog=EPILOG,
      formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument("--version", action="version", version=f"rsvqa-jax {__version__}")
  _verbosity(parser, default=False)
  sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
  chosen = next((a for a in argv if a in COMMANDS), None)
  for name, help_text in COMMANDS.items():
    p = sub.add_parser(name, help=help_text, description=help_text)
    if name == chosen:
      _load(name).add_arguments(p)
      for q in _with_subcommands(p):  # answerability score|select|train|study have their own
        # -v / -q after the command too (`synth --out X -q` was refused); unset, they set
        # nothing (SUPPRESS), so a -q given before the command is kept
        _verbosity(q, default=argparse.SUPPRESS)
        q.formatter_class = _HelpFormatter
        _once(q)
        argument_types.expand_home(q)  # --out=~/x: the shell left the ~ as it was
  return parser


def _with_subcommands(parser):
  """`parser` and, at any depth, its sub-commands' parsers."""
  yield parser
  for action in parser._actions:  # pylint: disable=protected-access
    if isinstance(action, argparse._SubParsersAction):  # pylint: disable=protected-access
      for sub in action.choices.values():
        yield from _with_subcommands(sub)


def _verbosity(parser, default):
  """-v / -q: how much of the routine messages reach stderr (_logging)."""
  verbosity = parser.add_mutually_exclusive_group()
  verbosity.add_argument("-v", "--verbose", action="store_true", default=default,
                         help="also show debug messages")
  verbosity.add_argument("-q", "--quiet", action="store_true", default=default,
                         help="show warnings and errors only (no routine messages)")


class _StoreOnce(argparse._StoreAction):  # pylint: disable=protected-access
  """A single-valued option given twice is an error: argparse kept the last value silently
  (`evaluate --split val --split test` evaluated test alone). So is an empty value: read as
  unset (`evaluate --workdir ''` then failed inside), or as the current folder (`synth --out
  ''`)."""

  def __call__(self, parser, namespace, values, option_string=None):
    if isinstance(values, str) and not values.strip():
      parser.error(f"{option_string or self.dest} {values!r} is empty: give a value")
    if getattr(self, "given", None) is not None:
      parser.error(f"{option_string} given twice ({self.given!r} and {values!r}); give it once")
    self.given = values
    super().__call__(parser, namespace, values, option_string)


def _once(parser):
  """Makes each plain store option of `parser` refuse a second occurrence (_StoreOnce)."""
  for action in parser._actions:  # pylint: disable=protected-access
    if type(action) is argparse._StoreAction:  # pylint: disable=protected-access,unidiomatic-typecheck
      action.__class__ = _StoreOnce


class _Stderr(logging.Handler):
  """Each message on sys.stderr as it is then (a test or a notebook may replace it), through
  tqdm.write, so that an open progress bar is redrawn below the message instead of broken."""

  def emit(self, record):
    try:
      from tqdm import tqdm  # pylint: disable=g-import-not-at-top
      tqdm.write(self.format(record), file=sys.stderr)
    except Exception:  # pylint: disable=broad-except
      self.handleError(record)


class _Labelled(logging.Formatter):
  """The message, after "WARNING: " (or "ERROR: ") when it is one, so it stands out from the
  routine lines the docs call INFO."""

  def format(self, record):
    text = super().format(record)
    labelled = record.levelno >= logging.WARNING or record.levelno <= logging.DEBUG
    return f"{record.levelname}: {text}" if labelled else text


def _logging(args):
  """rsvqa_jax's routine messages at INFO on stderr (-q: warnings only; -v: debug too).

  The progress bars (rsvqa_jax/progress.py) follow: -q turns them off.
  """
  level = logging.DEBUG if args.verbose else logging.WARNING if args.quiet else logging.INFO
  logger = logging.getLogger("rsvqa_jax")
  logger.setLevel(level)
  if not any(isinstance(h, _Stderr) for h in logger.handlers):
    handler = _Stderr()
    handler.setFormatter(_Labelled("%(message)s"))
    logger.addHandler(handler)
    logger.propagate = False
  # Other libraries' warnings in the same form, named: absl (imported with orbax and grain) would
  # otherwise give the root logger its `WARNING:jax._src.xla_bridge:...` form.
  root = logging.getLogger()
  if not root.handlers:
    handler = _Stderr(logging.WARNING)
    handler.setFormatter(_Labelled("%(name)s: %(message)s"))
    root.addHandler(handler)


def main(argv=None):
  argv = list(sys.argv[1:] if argv is None else argv)
  parser = build_parser(argv)
  args = parser.parse_args(argv)
  if args.verbose and args.quiet:  # one before the command, the other after it
    parser.error("argument -v/--verbose: not allowed with argument -q/--quiet")
  _logging(args)
  from rsvqa_jax import host_memory  # pylint: disable=g-import-not-at-top
  host_memory.keep_freed_memory()  # before JAX starts its threads
  name = " ".join(filter(None, (args.command, getattr(args, "action", None))))  # grounding score
  try:
    try:
      check_environment(os.environ, argv)
      return _load(args.command).run(args) or 0
    except BaseException:
      _unless_interrupted()  # an error the interrupt's cleanup caused is no error of the command
      raise
  except RSVQAError as e:
    print(f"rsvqa-jax {name}: error: {e}", file=sys.stderr)
    return 2
  except OSError as e:
    if e.errno == errno.ENOSPC:  # a copy's error names its source first: the target is full
      resumes = " (it resumes)" if name in RESUMING else ""
      full = one_line(str(e.filename2 or e.filename or "a file"))
      print(f"rsvqa-jax {name}: error: {full}: no space left on device; free some space and run "
            f"the same command again{resumes}", file=sys.stderr)
    else:
      print(f"rsvqa-jax {name}: error: {os_error_line(e)}", file=sys.stderr)
    return 2
  except KeyboardInterrupt:
    print(f"rsvqa-jax {name}: interrupted", file=sys.stderr)
    return 130
  except MemoryError as e:  # a size or count too large for this machine, not a fault of ours
    return _no_memory(name, str(e) or "MemoryError")
  except Exception as e:  # pylint: disable=broad-exception-caught
    if type(e).__name__ in XLA_ERRORS and str(e).startswith("RESOURCE_EXHAUSTED"):
      return _no_memory(name, str(e).strip().splitlines()[0])  # XLA's own, device or host
    setting = _jax_setting_error(e)
    if setting:
      print(f"rsvqa-jax {name}: error: {setting}", file=sys.stderr)
      return 2
    if os.environ.get(SHOW_TRACEBACK, "") not in ("", "0"):
      raise
    print(f"rsvqa-jax {name}: error: {unexpected_line(e)} (an input this command does not "
          f"check yet; {SHOW_TRACEBACK}=1 shows where)", file=sys.stderr)
    return 2


SHOW_TRACEBACK = "RSVQA_JAX_TRACEBACK"


# The commands that keep their finished work when stopped and resume there.
RESUMING = ("train", "study", "features", "answerability train")


def check_environment(environ, argv):
  """Refuses, in one line, what the process was started with that would fail far inside: a
  current folder that was deleted, a path tensorstore cannot open (a non-ASCII argument or
  current folder under an ASCII or Latin-1 file-name locale; bytes that are not UTF-8 under
  any), and a bad XLA_FLAGS device count (jax_environment.check_xla_flags).
  JAX settings the runs are not made for are refused where a run is built (train/run.py).

  Tensorstore encodes a path as UTF-8 whatever the locale: under Latin-1, a relative workdir
  in a folder named `café` was written to `cafÃ©` (the checkpoints' arrays elsewhere than
  their metadata: a run said done with no checkpoint that restores)."""
  try:
    cwd = os.getcwd()
  except FileNotFoundError:
    raise RSVQAError("the current folder no longer exists (deleted or moved): cd to another "
                     "one and run the command again") from None
  encoding = sys.getfilesystemencoding().lower().replace("-", "")
  fix = "run it with LC_ALL=C.UTF-8 (or PYTHONUTF8=1)"
  for text, what in [*((a, "a path or value of the command line") for a in argv),
                     (cwd, "the current folder's path")]:
    if encoding != "utf8" and not text.isascii():
      raise RSVQAError(f"{what} is not ASCII, and file names are read as "
                       f"{sys.getfilesystemencoding()} here (the locale): {fix}")
    if not _encodes(text):
      raise RSVQAError(f"{what} holds bytes that are not UTF-8 "
                       f"({errors.shortened(ascii(text)[1:-1])}); "
                       "rename it: tensorstore, which writes the checkpoints, cannot open it")
  jax_environment.check_xla_flags(environ)


def _encodes(text):
  """Whether `text` is valid UTF-8 text (no escaped undecodable bytes)."""
  try:
    text.encode("utf-8")
  except UnicodeEncodeError:
    return False
  return True


XLA_ERRORS = ("JaxRuntimeError", "XlaRuntimeError")  # by name: the command line never imports JAX
# Where JAX starts the backends JAX_PLATFORMS names (`cuda` on a machine without one is a bare
# AssertionError raised there), and where it reads its JAX_* settings.
BACKEND_SETUP = os.path.join("jax", "_src", "xla_bridge.py")
JAX_SETTINGS = os.path.join("jax", "_src", "config.py")


def _jax_setting_error(error):
  """The line for an error of JAX's own settings in the environment (a backend JAX_PLATFORMS
  names that cannot start, a value JAX refuses), else None: no input of ours to blame."""
  if os.environ.get("JAX_PLATFORMS") and (_raised_in(error, BACKEND_SETUP)
                                          or _backend_fails()):
    return (f"environment JAX_PLATFORMS={os.environ['JAX_PLATFORMS']}: JAX could not start that "
            f"backend ({unexpected_line(error)}); unset it, or install the jax build for that "
            "device")
  if _raised_in(error, JAX_SETTINGS):
    return f"a JAX setting of the environment: {unexpected_line(error)}; correct or unset it"
  return None


def _backend_fails():
  """Whether JAX, once imported, cannot start its backends: asked after an error no check
  caught, as JAX's traceback filtering can hide the frame where the backend failed to start
  (evaluate's first array op, in jax/_src/dispatch.py)."""
  jax = sys.modules.get("jax")
  if jax is None:
    return False
  try:
    jax.devices()
  except Exception:  # pylint: disable=broad-except  (JAX raises several kinds here)
    return True
  return False


def _raised_in(error, module_path):
  """Whether `error` was raised inside the file ending in `module_path`."""
  tb = error.__traceback__
  while tb is not None and tb.tb_next is not None:
    tb = tb.tb_next
  return tb is not None and tb.tb_frame.f_code.co_filename.endswith(module_path)


def _no_memory(name, detail):
  print(f"rsvqa-jax {name}: error: not enough memory for these sizes or counts ({detail}); "
        "give smaller ones", file=sys.stderr)
  return 2


def unexpected_line(error):
  """'Type: first line of the message' of an exception no check of ours caught."""
  lines = str(error).strip().splitlines()
  return f"{type(error).__name__}: {lines[0]}" if lines else type(error).__name__


# SIGHUP: the terminal closed under a run (an ssh session dropped), as 128 + the signal's number.
EXIT_STATUS = {signal.SIGINT: 130, signal.SIGHUP: 129, signal.SIGTERM: 143}


# What running an interrupted command again does.
RERUN_KEEPS = "it keeps what was finished"
AFTER_INTERRUPT = {"synth": "it writes the dataset again from the start"}


_INTERRUPTED = threading.Event()  # set by exit_on_interrupt's watcher, which ends the process
PARK_SECONDS = 0.5  # how long the watcher waits for the main thread to stop before cleaning up


def _unless_interrupted():
  """Waits for the end while an interrupt is handled: the watcher removes the temporary folders
  this thread may still be writing into, and the error that raises here ("no such file" of a
  dataset file the user never had) or the command's own status raced the interrupt's line and
  status 130."""
  if _INTERRUPTED.is_set():
    threading.Event().wait()


def exit_on_interrupt(what, after=RERUN_KEEPS):
  """SIGINT / SIGHUP / SIGTERM end the process at once with 130 / 129 / 143 and a line naming
  `what` and saying what its rerun does (`after`).

  The signal's C handler writes to a wakeup pipe the moment it arrives; a watcher thread reads
  it and exits, so a main thread busy in a long C call (an XLA compile) delays it PARK_SECONDS at
  most. The main thread's Python handler parks it at its next instruction, and the watcher
  waits for that before it removes the temporary folders: a main thread still writing into one
  left it behind, re-created, and reported its "no such file" as the command's error.
  """
  read_end, write_end = os.pipe()
  os.set_blocking(write_end, False)
  parked = threading.Event()

  def park_now():
    parked.set()
    threading.Event().wait()  # until the watcher ends the process

  def park(*_):  # inside a commit, at its end: parked holding the lock, it blocked the watcher
    storage = sys.modules.get("rsvqa_jax.storage")
    getattr(storage, "after_commit", lambda action: action())(park_now)

  def watch():
    while True:
      sig = os.read(read_end, 1)[0]
      if sig in EXIT_STATUS:
        _INTERRUPTED.set()
        parked.wait(PARK_SECONDS)
        try:
          # Imported by then if it holds a lock; while it is still being imported it holds
          # none and lacks the function (an AttributeError here lost the interrupt).
          storage = sys.modules.get("rsvqa_jax.storage")
          for name in ("clear_held_locks", "remove_unfinished"):
            clear = getattr(storage, name, None)
            if clear is not None:
              clear()
          sys.stderr.write(f"\n{what}: interrupted ({signal.Signals(sig).name}); run the same "
                           f"command again: {after}\n")
          sys.stderr.flush()
        finally:
          os._exit(EXIT_STATUS[sig])

  threading.Thread(target=watch, name="exit_on_interrupt", daemon=True).start()
  signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
  for sig in EXIT_STATUS:  # Python handlers, so the C handler writes the wakeup byte; SIGTERM last
    signal.signal(sig, park)


def entry():
  """The console script: interrupts end the process at once, standard streams that fail or are
  closed do not end it (streams.py), then `main`."""
  argv = sys.argv[1:]
  command = next((a for a in argv if a in COMMANDS), "")
  exit_on_interrupt(f"rsvqa-jax {command}".strip(),
                    AFTER_INTERRUPT.get(command, RERUN_KEEPS))
  streams.make_safe()
  status = main(argv)
  _unless_interrupted()
  sys.exit(status)


if __name__ == "__main__":
  entry()
