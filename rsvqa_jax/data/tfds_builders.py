"""TFDS builders for the official RSVQA datasets (LR, HR, RSVQAxBEN), built without TensorFlow.

The datasets cannot be downloaded automatically, so each builder reads the folder the user
downloaded (TFDS `manual_dir`) with `rsvqa_json.read_dataset` and writes `array_record` files,
which `builder.as_data_source()` reads back through NumPy only: no TensorFlow is imported at
build or read time.

Each dataset has two configs, so that images are stored once and not once per question:
  * `questions` (default): one example per question, keyed by question id, with
    `question_id`, `image_id`, `question`, `type`, `answer` (normalised: LR counts and HR areas
    binned), `raw_answer`, and `image_path`, the image file relative to `manual_dir`.
  * `images`: one example per image of the split, keyed by image id, with `image_id` and
    `image`, the encoded TIFF file bytes as written by the dataset authors (decode them with
    `decode_image`). They are a plain bytes tensor rather than a `tfds.features.Image`, which
    knows only PNG/JPEG, needs TensorFlow to encode arrays and decodes through PIL;
    `decode_image` reads them as `images.read_tif` reads a tile file.
Text features come back from a data source as UTF-8 `bytes`; `to_split` turns a `questions`
data source back into the columnar `records.Split`.

The builders register as `rsvqa_lr`, `rsvqa_hr` and `rsvqa_xben`. Usage:
  builder = build("lr", manual_dir=lr_folder, data_dir=out_dir)  # or config="images"
  split = to_split(builder.as_data_source()["train"], "train")
  # later, with this module imported:
  # tfds.data_source("rsvqa_lr/questions", data_dir=out_dir)["test"]
"""
import os

import numpy as np
import tensorflow_datasets as tfds

from rsvqa_jax.data import images
from rsvqa_jax.data import records

_QUESTIONS = "questions"
_IMAGES = "images"

_INSTRUCTIONS = """\
Download the dataset from its authors (https://rsvqa.sylvainlobry.com/) and extract it so
that `manual_dir` holds the split JSON files ({files}) and the image folder {images} with one
{{id}}.tif per image. Nothing is downloaded.
"""


def decode_image(encoded):
  """Decodes the TIFF bytes of an `images` example to uint8 HxWx3, checked and laid out as
  `images.read_tif` reads a tile file (a band-interleaved tile too)."""
  return images.decode_tif(encoded)


def _text(value):
  return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def _examples(source, chunk=4096):
  """All examples of a TFDS data source, read in chunks (faster than one by one)."""
  for start in range(0, len(source), chunk):
    yield from source.__getitems__(range(start, min(start + chunk, len(source))))


def to_split(source, name):
  """Reads a `questions` data source back into a `records.Split`, rows sorted by question id.

  TFDS stores examples in a hashed order of their keys, hence the sort. Decoding runs in
  Python at a few hundred microseconds per example: this is for checks and for consumers
  that only have the TFDS files; `read_dataset` on the JSON files is much faster.
  """
  rows = [{
      "question_id": int(ex["question_id"]),
      "image_id": int(ex["image_id"]),
      "qtype": _text(ex["type"]),
      "question": _text(ex["question"]),
      "answer": _text(ex["answer"]),
      "raw_answer": _text(ex["raw_answer"]),
  } for ex in _examples(source)]
  rows.sort(key=lambda r: r["question_id"])
  return records.Split.from_rows(name, rows)


def image_bytes(source):
  """Reads an `images` data source into a dict image id -> encoded TIFF bytes."""
  return {int(ex["image_id"]): bytes(ex["image"]) for ex in _examples(source)}


class _RsvqaBuilder(tfds.core.GeneratorBasedBuilder, skip_registration=True):
  """Shared logic: subclasses set `_DATASET` (the `read_dataset` name) and the instructions."""

  _DATASET = None
  VERSION = tfds.core.Version("1.0.0")
  RELEASE_NOTES = {"1.0.0": "First release: questions and images configs, array_record."}
  BUILDER_CONFIGS = [
      tfds.core.BuilderConfig(name=_QUESTIONS, description="One example per question."),
      tfds.core.BuilderConfig(name=_IMAGES, description="One example per image (TIFF bytes)."),
  ]
  DEFAULT_CONFIG_NAME = _QUESTIONS
  # Nothing is downloaded, so there is no checksums file next to the code to look for (TFDS's
  # lookup of it needs the `importlib_resources` backport, which is not a dependency).
  code_path = None

  def _info(self):
    if self.builder_config.name == _IMAGES:
      features = {
          "image_id": tfds.features.Scalar(np.int64),
          "image": tfds.features.Tensor(shape=(), dtype=np.object_),
      }
    else:
      features = {
          "question_id": tfds.features.Scalar(np.int64),
          "image_id": tfds.features.Scalar(np.int64),
          "question": tfds.features.Text(),
          "type": tfds.features.Text(),
          "answer": tfds.features.Text(),
          "raw_answer": tfds.features.Text(),
          "image_path": tfds.features.Text(),
      }
    return tfds.core.DatasetInfo(
        builder=self,
        description=f"RSVQA {self._DATASET} ({self.builder_config.name}) from the official files.",
        features=tfds.features.FeaturesDict(features),
        homepage="https://rsvqa.sylvainlobry.com/",
    )

  def _split_generators(self, dl_manager):
    from rsvqa_jax.data.rsvqa_json import read_dataset  # pylint: disable=g-import-not-at-top
    root = os.fspath(dl_manager.manual_dir)
    dataset = read_dataset(root, self._DATASET)
    return {name: self._generate_examples(dataset, name) for name in dataset.splits}

  def _generate_examples(self, dataset, split_name):
    split = dataset[split_name]
    if self.builder_config.name == _IMAGES:
      for image_id in dataset.image_ids(split_name).tolist():
        with open(dataset.check_image_exists(image_id), "rb") as f:
          yield image_id, {"image_id": image_id, "image": f.read()}
      return
    paths = {}
    for i in range(len(split)):
      image_id = int(split.image_id[i])
      if image_id not in paths:
        paths[image_id] = os.path.relpath(dataset.image_path(image_id), dataset.root)
      question_id = int(split.question_id[i])
      yield question_id, {
          "question_id": question_id,
          "image_id": image_id,
          "question": split.question[i],
          "type": split.qtype[i],
          "answer": split.answer[i],
          "raw_answer": split.raw_answer[i],
          "image_path": paths[image_id].replace(os.sep, "/"),
      }


class RsvqaLr(_RsvqaBuilder):
  """RSVQA low resolution (Sentinel-2, 256x256): train, val, test."""

  _DATASET = "lr"
  MANUAL_DOWNLOAD_INSTRUCTIONS = _INSTRUCTIONS.format(
      files="LR_split_{train,val,test}_{images,questions,answers}.json", images="Images_LR/")


class RsvqaHr(_RsvqaBuilder):
  """RSVQA high resolution (USGS, 512x512): train, val, test and test_phili."""

  _DATASET = "hr"
  MANUAL_DOWNLOAD_INSTRUCTIONS = _INSTRUCTIONS.format(
      files="USGS_split_{train,val,test,test_phili}_{images,questions,answers}.json",
      images="Data/")


class RsvqaXben(_RsvqaBuilder):
  """RSVQAxBEN (BigEarthNet, 120x120): train, val, test."""

  _DATASET = "xben"
  MANUAL_DOWNLOAD_INSTRUCTIONS = _INSTRUCTIONS.format(
      files="RSVQAxBEN_split_{train,val,test}_{images,questions,answers}.json", images="Images/")


BUILDERS = {"lr": RsvqaLr, "hr": RsvqaHr, "xben": RsvqaXben}


def build(name, manual_dir, data_dir, config=_QUESTIONS):
  """Builds (or reuses) one dataset config into `data_dir` and returns its builder."""
  builder = BUILDERS[name](data_dir=os.fspath(data_dir), config=config, file_format="array_record")
  # TFDS's name for "build"; these builders read only manual_dir and fetch nothing.
  builder.download_and_prepare(
      download_config=tfds.download.DownloadConfig(manual_dir=os.fspath(manual_dir)))
  return builder
