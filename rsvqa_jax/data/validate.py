"""Full check of a dataset folder: every split file, every sample, every image decoded.

The readers already refuse inconsistent JSON; this adds the images (existence, size, band
count, dtype, and by default that every pixel decodes: a header can be intact over a
truncated file or corrupt compressed strips) and summarises what a run would train and
evaluate on, including how many evaluation answers fall outside the training vocabulary.
"""
import collections
import concurrent.futures
import dataclasses
import os

import numpy as np

from rsvqa_jax import progress
from rsvqa_jax.data import answers as answers_lib
from rsvqa_jax.data import images as images_lib
from rsvqa_jax.data import rsvqa_json
from rsvqa_jax.data import split_files
from rsvqa_jax.errors import RSVQAError

IMAGE_CHECKS = ("decode", "headers", "skip")  # every pixel / size, bands, dtype only / none
TRAIN = "train"  # the split every layout trains on


class ImageProblems(RSVQAError):
  """Images that fail the check; `problems` holds one line per image, naming its file."""

  def __init__(self, problems, total):
    self.problems = problems
    super().__init__(problems[0] if len(problems) == 1 else
                     f"{len(problems)} of {total} images fail the check; the first: {problems[0]}")


@dataclasses.dataclass
class Report:
  name: str
  root: str
  questions: dict  # split -> number of samples
  images: dict  # split -> number of distinct images
  by_type: dict  # split -> {qtype: samples}
  vocab_size: int
  dropped_answers: int  # distinct training answers left out of the vocabulary (xBEN)
  dropped_samples: int  # training samples with such answers
  unknown: dict  # split -> samples whose answer is outside the vocabulary
  in_train: dict  # split -> its distinct images that the train split also asks about

  def lines(self):
    types = list(dict.fromkeys(t for counts in self.by_type.values() for t in counts))
    width = max([len(t) for t in types] + [len("images in train")])
    out = [f"dataset {self.name} at {self.root}",
           f"{'split':<{width}} " + " ".join(f"{s:>10}" for s in self.questions)]
    out.append(f"{'images':<{width}} " + " ".join(f"{n:>10}" for n in self.images.values()))
    out.append(f"{'questions':<{width}} " + " ".join(f"{n:>10}" for n in self.questions.values()))
    for t in types:
      out.append(f"{t:<{width}} " + " ".join(f"{self.by_type[s].get(t, 0):>10}" for s in self.questions))
    out.append(f"{'not in vocab':<{width}} "  # answers outside the training vocabulary
               + " ".join(f"{self.unknown[s]:>10}" for s in self.questions))
    out.append(f"{'images in train':<{width}} "
               + " ".join(f"{'-' if s == TRAIN else self.in_train[s]:>10}" for s in self.questions))
    out.append(f"answer vocabulary (train): {self.vocab_size} answers; 'not in vocab' counts the "
               "answers outside it (wrong for any model trained on train)")
    shared = {s: n for s, n in self.in_train.items() if n and s != TRAIN}
    if shared:
      out.append(f"images in train: {', '.join(f'{n} of {s}' for s, n in shared.items())}; "
                 "their questions are not held out by image (a model trained on train has seen "
                 "these images)")
    if self.dropped_answers:
      out.append(f"dropped from the vocabulary: {self.dropped_answers} answers, {self.dropped_samples} training samples")
    return out


def _image_ids(dataset):
  return np.unique(np.concatenate([s.image_id for s in dataset.splits.values()])).tolist()


def image_problems(dataset, how="decode"):
  """One line per image of `dataset` that fails the check `how` ("decode" or "headers").

  All images are checked (in threads: reading and inflating release the GIL) so a user fixes
  every bad file after one run instead of one per run.
  """
  check = images_lib.read_tif if how == "decode" else images_lib.check_tif

  def problem(image_id):
    try:
      check(dataset.image_path(image_id), size=dataset.image_size)
    except RSVQAError as e:
      return str(e)
    return None

  ids = _image_ids(dataset)
  workers = min(8, os.cpu_count() or 1)
  with concurrent.futures.ThreadPoolExecutor(workers) as pool, \
      progress.bar(total=len(ids), desc=f"validate images ({how})", unit="img") as bar:
    found = []
    for p in pool.map(problem, ids):
      bar.update()
      found += [p] if p else []
  return found


def validate(root, name=None, images="decode"):
  """Reads `root` (variant detected if `name` is None) and checks its images; returns a Report.

  `images`: "decode" every pixel, "headers" (size, bands, dtype only) or "skip". Raises
  ImageProblems listing every image that fails.
  """
  if images not in IMAGE_CHECKS:
    raise ValueError(f"images={images!r}: expected one of {IMAGE_CHECKS}")
  dataset = rsvqa_json.read_dataset(root, name)
  if images != "skip":
    # Images unzipped one folder deeper or named in another case: said once, not per image.
    first = _image_ids(dataset)[:1]
    if first and (problem := images_lib.misplaced(dataset.image_path(first[0]))):
      raise RSVQAError(problem)
    folder = os.path.join(root, split_files.LAYOUTS[dataset.name].image_dir)
    if not os.path.isdir(folder):
      what = "a file, not the image folder" if os.path.exists(folder) else "image folder missing"
      raise RSVQAError(f"{folder}: {what} (the {dataset.name.upper()} layout keeps its images "
                       "there); --skip-images checks the JSON files alone")
    problems = image_problems(dataset, images)
    if problems:
      raise ImageProblems(problems, len(_image_ids(dataset)))
  vocab = answers_lib.AnswerVocab.for_dataset(dataset)
  splits = dataset.splits
  return Report(
      name=dataset.name, root=root,
      questions={s: len(sp) for s, sp in splits.items()},
      images={s: len(np.unique(sp.image_id)) for s, sp in splits.items()},
      by_type={s: dict(collections.Counter(sp.qtype.tolist())) for s, sp in splits.items()},
      vocab_size=len(vocab), dropped_answers=len(vocab.dropped), dropped_samples=vocab.n_dropped_samples,
      unknown={s: vocab.encode(sp.answer.tolist()).n_unknown for s, sp in splits.items()},
      in_train={s: int(np.isin(np.unique(sp.image_id), splits[TRAIN].image_id).sum())
                for s, sp in splits.items()},
  )
