"""`rsvqa-jax validate`: check a dataset folder and report counts per split and type."""
import sys

from rsvqa_jax.data import split_files
from rsvqa_jax.data import validate
from rsvqa_jax.errors import RSVQAError


def add_arguments(parser):
  parser.add_argument("--data", required=True, help="dataset folder (official LR, HR or RSVQAxBEN layout)")
  parser.add_argument("--dataset", choices=tuple(split_files.LAYOUTS),
                      help="layout (default: detected)")
  images = parser.add_mutually_exclusive_group()
  images.add_argument("--headers-only", action="store_true",
                      help="check image size, bands and dtype from the TIFF headers only (fast; "
                           "misses truncated files and corrupt pixel data)")
  images.add_argument("--skip-images", action="store_true", help="check the JSON files only")


SHOWN_PROBLEMS = 20  # image problems listed before "... and N more"


def run(args):
  how = "skip" if args.skip_images else "headers" if args.headers_only else "decode"
  try:
    report = validate.validate(args.data, args.dataset, images=how)
  except validate.ImageProblems as e:
    if len(e.problems) > 1:  # the error line names the first; list the first few, one per line
      shown = e.problems[:SHOWN_PROBLEMS]
      more = len(e.problems) - len(shown)
      print("\n".join(shown + ([f"... and {more} more"] if more else [])), file=sys.stderr)
    raise
  print("\n".join(report.lines()))
  empty = [name for name, n in report.questions.items() if not n]
  if empty:  # train refuses an empty train or val split, evaluate an empty split it scores
    raise RSVQAError(f"{args.data}: split(s) {', '.join(empty)} hold no active question: nothing "
                     "trains or is evaluated on them")
  print("ok")
