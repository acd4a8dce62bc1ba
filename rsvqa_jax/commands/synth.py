"""`rsvqa-jax synth`: write a synthetic RSVQA dataset in the official LR, HR or RSVQAxBEN layout.

`--variant xben` writes an RSVQAxBEN-size question set (data/synthetic_xben.py: by default
590,326 image ids and 25 questions each, 14.8M questions, in minutes) without image files.

The dataset is written whole or not at all (data/synthetic.py): a run stopped at any moment
leaves nothing under --out, the next run cleans what it left beside it, an earlier synthetic
dataset there is replaced, and a folder of anything else is refused.
"""
import time

from rsvqa_jax.commands import answerability, argument_types
from rsvqa_jax.data import synthetic
from rsvqa_jax.data import synthetic_xben
from rsvqa_jax.errors import RSVQAError

DEFAULT_IMAGES = {"lr": 772, "hr": 400, "xben": synthetic_xben.IMAGES}
DEFAULT_QUESTIONS_PER_IMAGE = {"lr": 100, "hr": 100, "xben": synthetic_xben.QUESTIONS_PER_IMAGE}
def add_arguments(parser):
  parser.add_argument("--out", required=True,
                      help="folder to write (created or replaced whole; refused if it holds "
                           "anything but a synthetic dataset)")
  parser.add_argument("--variant", choices=("lr", "hr", "xben"), default="lr",
                      help="official layout to imitate (xben: question set and image ids only, "
                           "no image files)")
  parser.add_argument("--images", type=int,
                      help="number of images (default: 772 for lr, 400 for hr, 590326 for xben)")
  parser.add_argument("--seed", type=argument_types.seed, default=0,
                      help="same seed, byte-identical dataset")
  parser.add_argument("--questions-per-image", type=int,
                      help="questions drawn per image (default: 100 for lr and hr, as RSVQA LR "
                           "has about 100; 25 for xben)")
  prior = parser.add_mutually_exclusive_group()
  prior.add_argument("--prior-strength", type=argument_types.non_negative_float, default=1.0,
                     help="language prior: 1 = real RSVQA priors, 0 = uniform per type, "
                          ">1 stronger")
  prior.add_argument("--balanced", action="store_true",
                     help="answers uniform per question pattern and object, and per question "
                          "type (cannot be guessed from the question)")
  parser.add_argument(
      "--plant", action="append", default=[], metavar="SPEC",
      help="plant a shortcut for `rsvqa-jax shortcuts` to find (repeatable; off by default). "
           "kw:WORD=yes|no[@P][+A]: the question 'Is there a WORD?' (WORD: road, forest, "
           "farmland, parking, pitch or building; other phrasings naming it are re-drawn) tied "
           "to the answer. ko:CLASS=yes|no|0|1-10|11-100[@P]: the presence and comparison (yes / "
           "no) or counting (a count bin) questions about the scenes holding land-cover CLASS "
           "(or land use rural / urban; '_' for a space) tied to the answer. P (default 0.9): "
           "chance that a question with another answer is refused in its scene and re-drawn; "
           "A (default 0.2): share of presence questions asking WORD. With --balanced, the "
           "planted questions are kept out of balancing. E.g. --plant kw:parking=no "
           "--plant ko:forest=0@0.95")
  answerability.add_synth_arguments(parser)


def run(args):
  images = args.images if args.images is not None else DEFAULT_IMAGES[args.variant]
  per_image = (args.questions_per_image if args.questions_per_image is not None
               else DEFAULT_QUESTIONS_PER_IMAGE[args.variant])
  answerability.check_synth(args, images)
  synthetic.params(args.variant, images, args.seed, args.prior_strength, args.balanced, per_image,
                   args.plant)  # every value checked before the disk is asked for room
  synthetic.ensure_room(args.out, args.variant, images, per_image, "--images")
  start = time.time()
  if args.variant == "xben":
    if args.plant or args.balanced or args.answerability:
      raise RSVQAError("--variant xben draws its answers from the image labels: --plant, "
                       "--balanced and --answerability are for lr and hr")
    counts = synthetic.generate_xben(args.out, images, args.seed, per_image)
    print(f"wrote {images} image ids and {sum(counts.values())} questions ("
          f"{', '.join(f'{k} {n}' for k, n in counts.items())}) to {args.out} in "
          f"{time.time() - start:.1f}s")
    return
  generated = synthetic.generate(args.out, args.variant, images, args.seed,
                                 prior_strength=args.prior_strength, balanced=args.balanced,
                                 questions_per_image=per_image,
                                 plant=args.plant, refuse_empty_splits=True)
  counts = ", ".join(f"{name} {len(split)}" for name, split in generated.splits.items())
  print(f"wrote {images} images and {len(generated.questions)} questions ({counts}) to "
        f"{args.out} in {time.time() - start:.1f}s")
  if args.answerability:
    try:
      answerability.synth(args, generated)
    except RSVQAError as e:
      raise RSVQAError(f"{e} (the dataset is written to {args.out}, without answerability "
                       "pools)") from None
