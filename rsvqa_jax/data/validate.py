"""Full check of a dataset folder: every split file, every sample, every image header.

The readers already refuse inconsistent JSON; this adds the images (existence, size, band
count, dtype) and summarises what a run would train and evaluate on, including how many
evaluation answers fall outside the training vocabulary.
"""
import collections
import dataclasses

import numpy as np

from rsvqa_jax.data import answers as answers_lib
from rsvqa_jax.data import images as images_lib
from rsvqa_jax.data import rsvqa_json


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

  def lines(self):
    types = list(dict.fromkeys(t for counts in self.by_type.values() for t in counts))
    width = max([len(t) for t in types] + [10])
    out = [f"dataset {self.name} at {self.root}",
           f"{'split':<{width}} " + " ".join(f"{s:>10}" for s in self.questions)]
    out.append(f"{'images':<{width}} " + " ".join(f"{n:>10}" for n in self.images.values()))
    out.append(f"{'questions':<{width}} " + " ".join(f"{n:>10}" for n in self.questions.values()))
    for t in types:
      out.append(f"{t:<{width}} " + " ".join(f"{self.by_type[s].get(t, 0):>10}" for s in self.questions))
    out.append(f"{'unknown':<{width}} " + " ".join(f"{self.unknown[s]:>10}" for s in self.questions))
    out.append(f"answer vocabulary (train): {self.vocab_size} answers")
    if self.dropped_answers:
      out.append(f"dropped from the vocabulary: {self.dropped_answers} answers, {self.dropped_samples} training samples")
    return out


def validate(root, name=None, check_images=True):
  """Reads `root` (variant detected if `name` is None), checks every image; returns a Report."""
  dataset = rsvqa_json.read_dataset(root, name)
  if check_images:
    size = dataset.image_size
    for image_id in np.unique(np.concatenate([s.image_id for s in dataset.splits.values()])).tolist():
      images_lib.check_tif(dataset.image_path(image_id), size=size, bands=3)
  vocab = answers_lib.AnswerVocab.for_dataset(dataset)
  splits = dataset.splits
  return Report(
      name=dataset.name, root=root,
      questions={s: len(sp) for s, sp in splits.items()},
      images={s: len(np.unique(sp.image_id)) for s, sp in splits.items()},
      by_type={s: dict(collections.Counter(sp.qtype.tolist())) for s, sp in splits.items()},
      vocab_size=len(vocab), dropped_answers=len(vocab.dropped), dropped_samples=vocab.n_dropped_samples,
      unknown={s: vocab.encode(sp.answer.tolist()).n_unknown for s, sp in splits.items()},
  )
