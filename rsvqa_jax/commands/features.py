"""`rsvqa-jax features`: precompute the frozen image-encoder feature cache of a dataset.

  rsvqa-jax features --data DIR --dataset lr --cache CACHE [--config configs/X.py[:arg]]
      [--arch resnet152 --checkpoint resnet152.pth | --checkpoint random | --arch synthetic_resnet]
      [--variants none,hflip,vflip,rot90,rot180,rot270] [--kinds clean,white,black,noise]

The image settings come from the config's `image` section (defaults otherwise), then from the
flags. As in training (config_lib.check_weights), real data needs the ResNet weights named, or
random-init features asked for with `--checkpoint random`; only a synthetic dataset (a folder
with a synthetic.json manifest) or --arch synthetic_resnet may leave the checkpoint unset.
Entries already cached are reused; each line printed names an entry folder. With
--arch synthetic_resnet and no model yet, the small ResNet is pretrained first on the train
split (its folder defaults to CACHE/synthetic_resnet) and its validation accuracy is printed.
"""
import os

from rsvqa_jax.errors import RSVQAError

HELP = "Precompute the frozen image features (per augmentation variant and adversarial kind)."


def _names(text, allowed, flag):
  names = list(allowed) if text == "all" else [n for n in text.split(",") if n]
  bad = [n for n in names if n not in allowed]
  if bad or not names:
    raise RSVQAError(f"{flag}={text}: expected 'all' or a comma list of {', '.join(allowed)}")
  return names


def add_arguments(parser):
  parser.add_argument("--data", required=True, help="dataset folder (official RSVQA layout)")
  parser.add_argument("--dataset", required=True, choices=("lr", "hr", "xben"),
                      help="file layout of --data")
  parser.add_argument("--cache", required=True, help="feature cache folder")
  parser.add_argument("--config", help="training config file (path.py[:arg]); its image section "
                                       "is used")
  parser.add_argument("--splits", default="", help="comma list of splits (default: all)")
  parser.add_argument("--variants", default="none",
                      help="augmentation variants: 'all' or a comma list of none, hflip, vflip, "
                           "rot90, rot180, rot270")
  parser.add_argument("--kinds", default="clean",
                      help="pixel kinds: 'all' or a comma list of clean, white, black, noise")
  parser.add_argument("--noise-seed", type=int, default=0, help="seed of the noise kind")
  parser.add_argument("--arch", help="image.arch: resnet18 ... resnet152 or synthetic_resnet")
  parser.add_argument("--checkpoint",
                      help="image.checkpoint: ResNet weights file or HF folder, or 'random' for "
                           "random-init weights (required on real data)")
  parser.add_argument("--pretrained-dir", help="image.pretrained_dir of synthetic_resnet")
  parser.add_argument("--image-size", type=int, help="image.image_size (0 = native)")
  parser.add_argument("--batch-size", type=int, help="image.batch_size")
  parser.add_argument("--map", action="store_true", help="also keep the final spatial map")


def image_config(args):
  """default_image_config <- config file's image section <- command-line flags."""
  from rsvqa_jax.train import config_lib, feature_cache  # pylint: disable=g-import-not-at-top
  cfg = feature_cache.default_image_config()
  if args.config:
    cfg.update(config_lib.load(args.config).image)
  for flag, key in (("arch", "arch"), ("checkpoint", "checkpoint"),
                    ("pretrained_dir", "pretrained_dir"), ("image_size", "image_size"),
                    ("batch_size", "batch_size")):
    if getattr(args, flag) is not None:
      cfg[key] = getattr(args, flag)
  if args.map:
    cfg.map = True
  if cfg.arch == "synthetic_resnet" and not cfg.pretrained_dir:
    cfg.pretrained_dir = os.path.join(args.cache, "synthetic_resnet")
  return cfg


def check_checkpoint(cfg, data):
  """An unset image checkpoint is an RSVQAError unless the dataset or the arch is synthetic."""
  from rsvqa_jax.data import synthetic  # pylint: disable=g-import-not-at-top
  from rsvqa_jax.train.config_lib import RANDOM  # pylint: disable=g-import-not-at-top
  if cfg.checkpoint or cfg.arch == "synthetic_resnet":
    return
  if os.path.exists(os.path.join(data, synthetic.MANIFEST)):
    return
  raise RSVQAError(
      f"{data}: not a synthetic dataset ({synthetic.MANIFEST}) and image.checkpoint is not set: "
      f"give the {cfg.arch} weights (torchvision file or Hugging Face folder) with --checkpoint "
      f"PATH, or ask for random-init features with --checkpoint {RANDOM}")


def run(args):
  # Imported here: JAX starts only when a command that needs it runs.
  from rsvqa_jax.data import rsvqa_json  # pylint: disable=g-import-not-at-top
  from rsvqa_jax.train import feature_cache  # pylint: disable=g-import-not-at-top
  variants = _names(args.variants, feature_cache.VARIANTS, "--variants")
  kinds = _names(args.kinds, feature_cache.KINDS, "--kinds")
  dataset = rsvqa_json.read_dataset(args.data, args.dataset)
  splits = [s for s in args.splits.split(",") if s] or None
  for name in splits or ():
    if name not in dataset.splits:
      raise RSVQAError(f"{args.data}: no split {name!r} (has {', '.join(sorted(dataset.splits))})")
  cfg = image_config(args)
  check_checkpoint(cfg, args.data)
  encoder = feature_cache.build_encoder(cfg, dataset)
  if cfg.arch == "synthetic_resnet":
    from rsvqa_jax.train import pretrain_resnet  # pylint: disable=g-import-not-at-top
    manifest = pretrain_resnet.read_manifest(cfg.pretrained_dir)
    for split, m in manifest["metrics"].items():
      print(f"synthetic_resnet ({cfg.pretrained_dir}) {split}: land-cover presence accuracy "
            f"{m['presence_accuracy']:.4f} (majority {m['majority_accuracy']:.4f})")
  jobs = [(v, "clean") for v in variants if "clean" in kinds]
  jobs += [("none", k) for k in kinds if k != "clean"]
  for variant, kind in jobs:
    entry = feature_cache.image_features(dataset, splits, cfg, args.cache, variant=variant,
                                         kind=kind, noise_seed=args.noise_seed, encoder=encoder)
    print(f"{variant}/{kind}: {entry.features.shape[0]} images x {entry.features.shape[1]} "
          f"features -> {entry.path}")
  return 0
