"""`rsvqa-jax features`: precompute the frozen image-encoder feature cache of a dataset.

  rsvqa-jax features --data DIR [--dataset lr] --cache CACHE [--config configs/X.py[:arg]]
      [--arch resnet152 --checkpoint resnet152.pth | --checkpoint random |
       --arch synthetic_resnet --pretrain]
      [--variants none,hflip,vflip,rot90,rot180,rot270] [--kinds clean,white,black,noise]

The variants augment the clean images; the other kinds replace the pixels and are computed
once, unaugmented (variant none), so variants without the clean kind are an error.

CACHE is the folder training keeps its caches in: the config's data.cache_dir, or, where it
sets none (no shipped config does), rsvqa_cache beside the training --workdir; it may be left
out only for a --config that sets data.cache_dir. Entries go to CACHE/features and a
synthetic_resnet to CACHE/synthetic_resnet/KEY (one folder per image.pretrain setting and
dataset), where training and evaluation look for them. The image settings come from the
config's `image` section (defaults otherwise) with its --config.KEY=VALUE overrides, then from
the flags. As in training (config.check_weights), real data needs the ResNet weights named, or
random-init features asked for with `--checkpoint random`; only a synthetic dataset (a folder
with a synthetic.json manifest) or --arch synthetic_resnet may leave the checkpoint unset. A
synthetic_resnet is pretrained only when --pretrain asks for it (on the train split, its
validation accuracy printed); entries already cached are reused; each line printed names an
entry folder.
"""
import os

from rsvqa_jax.commands import argument_types, common
from rsvqa_jax.errors import RSVQAError


def _names(text, allowed, flag):
  names = list(allowed) if text == "all" else [n for n in text.split(",") if n]
  bad = [n for n in names if n not in allowed]
  if bad or not names:
    raise RSVQAError(f"{flag}={text}: expected 'all' or a comma list of {', '.join(allowed)}")
  return names


def add_arguments(parser):
  parser.add_argument("--data", required=True, help="dataset folder (official RSVQA layout)")
  parser.add_argument("--dataset", choices=("lr", "hr", "xben"),
                      help="file layout of --data (default: detected)")
  parser.add_argument("--cache", help="the cache folder training reads: the config's "
                                      "data.cache_dir, else rsvqa_cache beside the train "
                                      "--workdir (default: the --config's data.cache_dir, "
                                      "required when it sets none, as no shipped config does)")
  parser.add_argument("--config", help="training config file (path.py[:arg]); its image section "
                                       "and data.cache_dir are used")
  parser.add_argument("--splits", default="", help="comma list of splits (default: all)")
  parser.add_argument("--variants", default="none",
                      help="augmentation variants of the clean kind: 'all' or a comma list of "
                           "none, hflip, vflip, rot90, rot180, rot270")
  parser.add_argument("--kinds", default="clean",
                      help="pixel kinds: 'all' or a comma list of clean, white, black, noise")
  parser.add_argument("--noise-seed", type=argument_types.seed, default=0,
                      help="seed of the noise kind")
  parser.add_argument("--arch", help="image.arch: resnet18 ... resnet152 or synthetic_resnet")
  parser.add_argument("--checkpoint",
                      help="image.checkpoint: ResNet weights file or HF folder, or 'random' for "
                           "random-init weights (required on real data)")
  parser.add_argument("--pretrained-dir",
                      help="image.pretrained_dir of synthetic_resnet (default: "
                           "CACHE/synthetic_resnet/KEY, KEY hashed from image.pretrain and --data)")
  parser.add_argument("--pretrain", action="store_true",
                      help="pretrain the synthetic_resnet on the train split first, unless its "
                           "folder holds one of these settings")
  parser.add_argument("--image-size", type=int, help="image.image_size (0 = native)")
  parser.add_argument("--batch-size", type=argument_types.positive_int, help="image.batch_size")
  parser.add_argument("--map", action="store_true", help="also keep the final spatial map")
  parser.epilog = ("Override any key of the --config (or of the defaults) with "
                   "--config.KEY=VALUE, e.g. --config.image.pretrain.image_size=64, as for train")
  common.accept_overrides(parser)


def settings(args):
  """(image section with paths resolved, cache folder): config <- flags, as training reads it."""
  from rsvqa_jax import config as config_lib  # pylint: disable=g-import-not-at-top
  config = config_lib.apply_overrides(
      config_lib.load(args.config) if args.config else config_lib.base_config(),
      args.config_overrides)
  cache = args.cache or config.data.cache_dir
  if not cache:  # no default: train's, rsvqa_cache beside its --workdir, needs a workdir
    where = (f"--config {args.config} sets no data.cache_dir" if args.config
             else "no --config sets data.cache_dir")
    raise RSVQAError(f"--cache is required ({where}): give the folder training keeps its caches "
                     "in, rsvqa_cache beside its --workdir unless the config sets data.cache_dir "
                     "(--cache runs/rsvqa_cache for train --workdir runs/tiny)")
  from rsvqa_jax.data import split_files  # pylint: disable=g-import-not-at-top
  split_files.refuse_dataset(cache, "--cache", "the cache")
  image = config.image
  for flag in ("arch", "checkpoint", "pretrained_dir", "image_size", "batch_size"):
    if getattr(args, flag) is not None:
      image[flag] = getattr(args, flag)
  if args.map:
    image.map = True
  config_lib.check(config)  # the flags' values too: a negative --image-size, say
  named = common.command_line_keys(args) + [
      f"image.{flag}" for flag in ("arch", "checkpoint", "pretrained_dir")
      if getattr(args, flag) is not None]
  # the flags' arch too; no other key is read
  config_lib.check_unread(config, section="image", named=named)
  from rsvqa_jax.train import inputs  # pylint: disable=g-import-not-at-top
  return config_lib.image_config(image, cache, inputs.folder_source(args.data)), cache


def check_checkpoint(image, data):
  """An unset image checkpoint is an RSVQAError unless the dataset or the arch is synthetic."""
  from rsvqa_jax import config as config_lib  # pylint: disable=g-import-not-at-top
  from rsvqa_jax.data import synthetic  # pylint: disable=g-import-not-at-top
  if image.checkpoint or image.arch == "synthetic_resnet":
    return
  if synthetic.read_manifest(data) is not None:
    return
  damaged = os.path.exists(os.path.join(data, synthetic.MANIFEST))
  raise RSVQAError(
      f"{data}: not a synthetic dataset ({synthetic.MANIFEST}"
      f"{' unreadable or not a JSON object' if damaged else ''}) and image.checkpoint is not set: "
      f"give the {image.arch} weights (torchvision file or Hugging Face folder) with "
      f"--checkpoint PATH, or ask for random-init features with --checkpoint {config_lib.RANDOM}")


def run(args):
  # Imported here: JAX starts only when a command that needs it runs.
  from rsvqa_jax import config as config_lib  # pylint: disable=g-import-not-at-top
  from rsvqa_jax.data import rsvqa_json  # pylint: disable=g-import-not-at-top
  from rsvqa_jax.features import encoder, image_cache, pixels  # pylint: disable=g-import-not-at-top
  from rsvqa_jax.train import prepare  # pylint: disable=g-import-not-at-top
  variants = _names(args.variants, pixels.VARIANTS, "--variants")
  kinds = _names(args.kinds, pixels.KINDS, "--kinds")
  if "clean" not in kinds and set(variants) != {"none"}:
    raise RSVQAError(f"--variants {args.variants} --kinds {args.kinds}: the variants augment "
                     "clean images only (white, black and noise are never flipped or rotated); "
                     "add clean to --kinds or leave --variants out")
  dataset = rsvqa_json.read_dataset(args.data, args.dataset)
  splits = [s.strip() for s in args.splits.split(",") if s.strip()] or None
  if args.splits.strip() and not splits:
    raise RSVQAError(f"--splits {args.splits!r}: names no split (leave it out for all)")
  for name in splits or ():
    if name not in dataset.splits:
      raise RSVQAError(f"{args.data}: no split {name!r} (has {', '.join(sorted(dataset.splits))})")
  image, cache = settings(args)
  check_checkpoint(image, args.data)
  if args.pretrained_dir is not None and image.arch != "synthetic_resnet":
    raise RSVQAError(f"--pretrained-dir: only a synthetic_resnet is read from it (arch is "
                     f"{image.arch}); give --checkpoint for other weights")
  if args.pretrain:
    if image.arch != "synthetic_resnet":
      raise RSVQAError(f"--pretrain: only a synthetic_resnet is pretrained here (arch is "
                       f"{image.arch})")
    prepare.image_encoder(image, dataset)
  image_encoder = encoder.encoder_for(image)
  jobs = [(v, "clean") for v in variants if "clean" in kinds]
  jobs += [("none", k) for k in kinds if k != "clean"]
  for variant, kind in jobs:
    entry = image_cache.image_features(
        dataset, splits, image, os.path.join(cache, config_lib.FEATURES_DIR), variant=variant,
        kind=kind, noise_seed=args.noise_seed, encoder=image_encoder)
    print(f"{variant}/{kind}: {entry.features.shape[0]} images x {entry.features.shape[1]} "
          f"features -> {entry.path}")
  return 0
