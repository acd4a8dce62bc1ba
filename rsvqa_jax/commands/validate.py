"""`rsvqa-jax validate`: check a dataset folder and report counts per split and type."""
from rsvqa_jax.data import rsvqa_json
from rsvqa_jax.data import validate

HELP = "Check a dataset folder and report counts per split and type."


def add_arguments(parser):
  parser.add_argument("--data", required=True, help="dataset folder (official LR, HR or RSVQAxBEN layout)")
  parser.add_argument("--dataset", choices=tuple(rsvqa_json.LAYOUTS), help="layout (default: detected)")
  parser.add_argument("--skip-images", action="store_true", help="check the JSON files only")


def run(args):
  report = validate.validate(args.data, args.dataset, check_images=not args.skip_images)
  print("\n".join(report.lines()))
  print("ok")
