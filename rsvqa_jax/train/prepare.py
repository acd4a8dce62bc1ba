"""The explicit steps a run needs before its inputs can be read, each a named stage.

A synthetic config's dataset is generated into the cache, and a synthetic_resnet image encoder
is pretrained into its folder, here and only here: reading a dataset or looking features up
never generates or trains anything. `train` and the study call these as their first stages;
`evaluate` does not (a missing dataset or encoder there is an error saying how to make it).
"""
import logging
import time

from rsvqa_jax import config as config_lib
from rsvqa_jax.bias import tables
from rsvqa_jax.data import synthetic
from rsvqa_jax.features import pretrain
from rsvqa_jax.train import inputs

_log = logging.getLogger(__name__)


def synthetic_dataset(config, workdir, log=_log.info):
  """Generates the synthetic dataset a config names unless it is there; returns its folder."""
  folder = config_lib.synthetic_root(config, workdir)
  d = config.data
  inputs.synthetic_params(config)  # its settings refused in the config's key names
  started = time.time()
  if synthetic.ensure_synthetic(folder, d.synthetic_variant, d.synthetic_images, d.synthetic_seed,
                                questions_per_image=d.synthetic_questions_per_image):
    log(f"stage dataset: generated the synthetic dataset {folder} ({time.time() - started:.1f}s)")
  return folder


def image_encoder(image_cfg, dataset, log=_log.info):
  """Pretrains a synthetic_resnet image encoder unless its folder holds a current one.

  `image_cfg` has its paths resolved (config.image_config). Other encoders need no step.
  Returns whether it pretrained one.
  """
  if image_cfg.arch != "synthetic_resnet" or pretrain.current(image_cfg) is not None:
    return False
  started = time.time()
  log(f"stage pretrain: synthetic_resnet on {dataset.root} into {image_cfg.pretrained_dir}")
  manifest = pretrain.pretrain(dataset, image_cfg.pretrained_dir, pretrain.settings(image_cfg))
  val = manifest["metrics"].get("val", {})
  log(f"stage pretrain: done ({time.time() - started:.1f}s); land-cover presence accuracy on "
      f"val {tables.percent(val.get('presence_accuracy'))} (majority "
      f"{tables.percent(val.get('majority_accuracy'))})")
  return True


def real_dataset(config, workdir):
  """The dataset a real-data config names, read; None for a synthetic config (its settings
  checked here; run_inputs generates it).

  A run reads it before it looks at or writes into its workdir: an unset or missing data.root,
  or a folder without data.name's files, is then refused as such, not as "holds a run of another
  config", and leaves the workdir as it found it.
  """
  if config.data.synthetic:
    inputs.synthetic_params(config)
    return None
  return inputs.load_dataset(config, workdir)


def run_inputs(config, workdir, log=_log.info, dataset=None, checks=None):
  """Every explicit step the config's training run needs; returns its records.Dataset
  (`dataset`: the one real_dataset read already). `checks(dataset)` runs before an encoder is
  pretrained: what it refuses must not cost those minutes."""
  if dataset is None:
    if config.data.synthetic:
      synthetic_dataset(config, workdir, log)
    dataset = inputs.load_dataset(config, workdir)
  if checks is not None:
    checks(dataset)
  image_encoder(inputs.resolved_image(config, workdir), dataset, log)
  return dataset
