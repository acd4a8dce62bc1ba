"""What a config implies beyond its keys: where its caches live and whether its question vectors
come from one, resolved here so the commands that write a cache and those that read it agree."""
import hashlib
import json
import os

import ml_collections

from rsvqa_jax.config.defaults import LM_DIR, PRETRAINED_DIR

def caches_questions(config):
  """Whether the question vectors come from the cache (frozen, deterministic text encoder)."""
  t = config.text
  return bool(t.frozen and t.cache_questions and not t.bayesian and not t.dropout)


def is_stand_in(checkpoint):
  """Whether text.checkpoint is a random-init folder a study wrote under its cache (LM_DIR;
  study/language_models.py): `tables` labels its runs "random init", as the study's report does."""
  if not isinstance(checkpoint, str) or not checkpoint:
    return False
  parent, name = os.path.split(os.path.normpath(checkpoint))
  return os.path.basename(parent) == LM_DIR and "_random_" in name


def cache_dir(config, workdir):
  """Where synthetic datasets and caches live: data.cache_dir, else rsvqa_cache beside workdir."""
  if config.data.cache_dir:
    return config.data.cache_dir
  return os.path.join(os.path.dirname(os.path.abspath(workdir)), "rsvqa_cache")


def image_config(image, cache, dataset):
  """A copy of an image section with its derived path set: pretrained_dir under `cache`, one
  folder per pretraining setting and dataset (CACHE/synthetic_resnet/KEY), so a run of other
  settings pretrains beside the encoder earlier runs read instead of over it, and a run on
  another dataset never reads an encoder pretrained on images its evaluation splits may hold
  (datasets of one generator seed share their pictures, in other splits).

  `dataset`: what identifies the dataset pretraining reads (train/inputs.pretraining_source: a
  synthetic dataset's generator settings, wherever its folder lies).
  """
  out = ml_collections.ConfigDict(image.to_dict())
  if out.arch == "synthetic_resnet" and not out.pretrained_dir:
    settings = json.dumps({"pretrain": out.pretrain.to_dict(), "dataset": dataset},
                          sort_keys=True)
    key = hashlib.sha256(settings.encode()).hexdigest()[:12]
    out.pretrained_dir = os.path.join(cache, PRETRAINED_DIR, key)
  return out


def synthetic_root(config, workdir):
  """The folder of the synthetic dataset a config generates (data.synthetic), named by every
  generator setting a config gives: two configs sharing a cache folder (data.cache_dir) never
  replace each other's dataset, which left the runs of the first unable to evaluate."""
  d = config.data
  name = (f"synthetic_{d.synthetic_variant}_{d.synthetic_images}_{d.synthetic_seed}_"
          f"q{d.synthetic_questions_per_image}")
  return os.path.join(cache_dir(config, workdir), name)
