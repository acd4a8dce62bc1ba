"""`rsvqa-jax shortcuts`: the shortcut OOD benchmark (VQA-VS) of a dataset in an official layout.

  rsvqa-jax shortcuts --data DIR [--dataset lr|hr|xben] --out O [--seed S] [--unit image|question]
      [--image-labels CSV | --image-clusters K [--config C] [--cache DIR] [--arch A]
       [--checkpoint W]]

Writes the folder O (bias/shortcut_report.py says what it holds): the re-split dataset O/data
(train and evaluate read it unchanged), split.json, concepts.csv, one ood_{concept}.json per
concept, and the statistics. The KO concepts need each image's object labels: a synthetic
dataset's masks/ and image entries with a `labels` list are read from the dataset itself; other
data takes a CSV (image_id,label) or K k-means clusters of its cached image features (the image
section and cache of --config, or the flags, as `rsvqa-jax features` reads them).
"""
import os

from rsvqa_jax.commands import argument_types
from rsvqa_jax.errors import RSVQAError


def add_arguments(parser):
  parser.add_argument("--data", required=True, help="dataset folder (official RSVQA layout)")
  parser.add_argument("--dataset", choices=("lr", "hr", "xben"),
                      help="file layout of --data (default: detected)")
  parser.add_argument("--out", required=True,
                      help="benchmark folder to write (replaced whole if it holds an earlier "
                           "benchmark; refused if it holds anything else)")
  parser.add_argument("--seed", type=argument_types.seed, default=0,
                      help="seed of the 70/5/25 re-split")
  parser.add_argument("--unit", choices=("image", "question"), default="image",
                      help="what the re-split draws: whole images (default: no image in two "
                           "splits) or single questions (the paper's draw)")
  labels = parser.add_mutually_exclusive_group()
  labels.add_argument("--image-labels", metavar="CSV",
                      help="image object labels: a CSV with columns image_id,label")
  labels.add_argument("--image-clusters", type=argument_types.positive_int, metavar="K",
                      help="label each image with its cluster among K k-means clusters of its "
                           "cached image features (reported as clusters)")
  parser.add_argument("--config", help="with --image-clusters: the training config whose image "
                                       "section and data.cache_dir give the features")
  parser.add_argument("--cache", help="with --image-clusters: cache folder (a config's "
                                      "data.cache_dir)")
  parser.add_argument("--arch", help="with --image-clusters: image.arch")
  parser.add_argument("--checkpoint", help="with --image-clusters: image.checkpoint (weights, "
                                           "or 'random')")
  # features.settings reads these `features` flags, which this command leaves to the config.
  parser.set_defaults(pretrained_dir=None, image_size=None, batch_size=None, map=False,
                      config_overrides=[])


def _clusters(args, dataset):
  """ImageLabels from k-means of the dataset's cached image features (computed on a miss)."""
  # Imported here: JAX starts only when clusters are asked for.
  from rsvqa_jax import config as config_lib  # pylint: disable=g-import-not-at-top
  from rsvqa_jax.bias import shortcuts  # pylint: disable=g-import-not-at-top
  from rsvqa_jax.commands import features  # pylint: disable=g-import-not-at-top
  from rsvqa_jax.features import image_cache  # pylint: disable=g-import-not-at-top
  image, cache = features.settings(args)
  features.check_checkpoint(image, args.data)
  entry = image_cache.image_features(dataset, None, image,
                                     os.path.join(cache, config_lib.FEATURES_DIR))
  return shortcuts.cluster_labels(entry.image_ids.tolist(), entry.features, args.image_clusters,
                                  args.seed, f"{entry.path} ({image.arch})")


def run(args):
  from rsvqa_jax.bias import shortcut_report, shortcuts  # pylint: disable=g-import-not-at-top
  from rsvqa_jax.data import rsvqa_json  # pylint: disable=g-import-not-at-top
  cluster_flags = [f for f in ("config", "cache", "arch", "checkpoint") if getattr(args, f)]
  if cluster_flags and args.image_clusters is None:
    raise RSVQAError(f"--{cluster_flags[0]} applies to --image-clusters only")
  if args.image_clusters == 1:  # before the features are looked for (or computed)
    raise RSVQAError("--image-clusters 1: one cluster labels every image alike; give K >= 2")
  dataset = rsvqa_json.read_dataset(args.data, args.dataset)
  labels = None
  if args.image_labels:
    labels = shortcuts.csv_labels(args.image_labels)
  elif args.image_clusters is not None:
    labels = _clusters(args, dataset)
  # Its lines (labels, re-split, what it wrote) are the command's output, as other commands'.
  shortcut_report.create(dataset, args.out, seed=args.seed, unit=args.unit, labels=labels,
                         log=print)
  return 0
