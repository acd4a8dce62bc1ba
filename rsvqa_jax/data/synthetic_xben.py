"""A synthetic question set of RSVQAxBEN's size in its file layout, drawn with NumPy in minutes.

RSVQAxBEN has 14,758,150 questions on 590,326 BigEarthNet images (25 a image). Here every image
gets a set of BigEarthNet land-cover labels (the 43 CORINE level-3 classes, commas left out of
the two names that have one so that an answer's ", " joins labels unambiguously; 1 to 6 labels,
common classes favoured), and every question is asked about those labels, so answers follow from
the labels:
  presence "Are there X?", "Is there some X?", "Are there X in the image?", "Are there no X?",
           "Are there X or Y?", "Are there X and Y?"; X, Y a class or one of the five level-1
           groups (present when one of its classes is); half the subjects are drawn from the
           image's own labels, so yes and no are both common.
  LC       "Which land cover classes are in the image?" / "What are the land cover classes?":
           the image's labels joined by ", " in class order; "Which G classes are in the image?"
           for a group G: its labels, or "None".
The two types are spelled as the real files spell them (`presence` and `LC`: the paper's Yes/No
and Land cover). Shares: LC 25% (15% all classes, 10% one group), presence 75%. Only image ids
are written (no image files: features come from a cache keyed by image id); each image entry
carries its `labels`, which the shortcut benchmark reads as the key objects.

Everything is drawn as arrays (labels by Gumbel top-k, one draw per question for the form and
the subjects) and written as JSON by formatting rows into strings a chunk at a time. Images are
split at random by synthetic.SPLIT_SHARES; each split file lists only its own split's entries
(all active), which the reader accepts as it accepts the filler entries of the LR/HR files.
Question id = answer id, numbered by image.
"""
import json

import numpy as np

from rsvqa_jax import progress
from rsvqa_jax.data import split_files

QUESTIONS_PER_IMAGE = 25
IMAGES = 590_326
CHUNK = 500_000  # questions formatted per write
IMAGE_ENTRY = '{"id":%d,"questions_ids":[%s],"labels":%s,"active":true}'
QUESTION_ENTRY = '{"id":%d,"img_id":%d,"type":%s,"question":%s,"answers_ids":[%d],"active":true}'
ANSWER_ENTRY = '{"id":%d,"question_id":%d,"answer":%s,"active":true}'
GROUPS = {
    "artificial surfaces": (
        "Continuous urban fabric", "Discontinuous urban fabric", "Industrial or commercial units",
        "Road and rail networks and associated land", "Port areas", "Airports",
        "Mineral extraction sites", "Dump sites", "Construction sites", "Green urban areas",
        "Sport and leisure facilities"),
    "agricultural areas": (
        "Non-irrigated arable land", "Permanently irrigated land", "Rice fields", "Vineyards",
        "Fruit trees and berry plantations", "Olive groves", "Pastures",
        "Annual crops associated with permanent crops", "Complex cultivation patterns",
        "Land principally occupied by agriculture with significant areas of natural vegetation",
        "Agro-forestry areas"),
    "forest and semi natural areas": (
        "Broad-leaved forest", "Coniferous forest", "Mixed forest", "Natural grassland",
        "Moors and heathland", "Sclerophyllous vegetation", "Transitional woodland/shrub",
        "Beaches dunes sands", "Bare rock", "Sparsely vegetated areas", "Burnt areas"),
    "wetlands": ("Inland marshes", "Peatbogs", "Salt marshes", "Salines", "Intertidal flats"),
    "water bodies": ("Water courses", "Water bodies", "Coastal lagoons", "Estuaries",
                     "Sea and ocean"),
}
CLASSES = tuple(c for members in GROUPS.values() for c in members)
# A few classes cover most of BigEarthNet (forests, arable land, pastures, complex cultivation):
COMMON = ("Coniferous forest", "Mixed forest", "Non-irrigated arable land", "Broad-leaved forest",
          "Pastures", "Land principally occupied by agriculture with significant areas of natural "
          "vegetation", "Complex cultivation patterns", "Transitional woodland/shrub",
          "Discontinuous urban fabric", "Sea and ocean", "Water bodies")
LABEL_COUNTS = (0.25, 0.30, 0.22, 0.13, 0.07, 0.03)  # P(1 .. 6 labels)
SUBJECTS = CLASSES + tuple(GROUPS)
SINGLE_FORMS = ("Are there {}?", "Is there some {}?", "Are there {} in the image?",
                "Are there no {}?")
PAIR_FORMS = ("Are there {} or {}?", "Are there {} and {}?")
LC_FORMS = ("Which land cover classes are in the image?", "What are the land cover classes?")
GROUP_FORM = "Which {} classes are in the image?"
# form shares: LC all, LC group, presence single (4 forms), presence pair (2 forms)
SHARES = {"lc": 0.15, "lc_group": 0.10, "single": 0.55, "pair": 0.20}


def class_weights():
  """Relative frequency of each class (the common ones 12x the others)."""
  return np.array([12.0 if c in COMMON else 1.0 for c in CLASSES])


def question_texts():
  """Every question string, at the index question_code gives it."""
  texts = [f.format(s.lower()) for f in SINGLE_FORMS for s in SUBJECTS]
  texts += [f.format(a.lower(), b.lower()) for f in PAIR_FORMS for a in SUBJECTS for b in SUBJECTS]
  return texts + list(LC_FORMS) + [GROUP_FORM.format(g) for g in GROUPS]


def draw_labels(images, seed):
  """bool [images, classes]: each image's labels (Gumbel top-k of the class weights)."""
  rng = np.random.default_rng([seed, 43])
  k = rng.choice(len(LABEL_COUNTS), size=images, p=LABEL_COUNTS) + 1
  noise = rng.gumbel(size=(images, len(CLASSES))).astype(np.float32)
  keys = np.log(class_weights()).astype(np.float32) + noise
  rank = np.argsort(np.argsort(-keys, axis=1), axis=1)
  return rank < k[:, None]


def _members():
  """bool [groups, classes]."""
  return np.array([[c in members for c in CLASSES] for members in GROUPS.values()])


def draw_questions(labels, per_image, seed):
  """(image, question code, answer code, is_lc) per question, and the answer strings.

  Answer codes: 0 "no", 1 "yes", then the distinct label lists (joined by ", ") and "None".
  """
  rng = np.random.default_rng([seed, 44])
  n_img, n_cls = labels.shape
  n_sub, members = len(SUBJECTS), _members()
  present = np.concatenate([labels, (labels[:, None, :] & members[None]).any(-1)], axis=1)
  image = np.repeat(np.arange(n_img, dtype=np.int64), per_image)
  m = len(image)
  form = rng.choice(len(SHARES), size=m, p=list(SHARES.values()))
  # subjects: half the time one of the image's own labels, else any subject
  own_count = labels.sum(1)
  offsets = np.concatenate([[0], np.cumsum(own_count)])
  own_flat = np.nonzero(labels)[1]
  def subject():
    own = own_flat[offsets[image] + (rng.random(m) * own_count[image]).astype(np.int64)]
    other = rng.integers(0, n_sub, size=m)
    return np.where(rng.random(m) < 0.5, own, other)
  s1, s2 = subject(), subject()
  s2 = np.where(s2 == s1, (s2 + 1) % n_sub, s2)
  single_form = rng.integers(0, len(SINGLE_FORMS), size=m)
  pair_form = rng.integers(0, len(PAIR_FORMS), size=m)
  lc_form = rng.integers(0, len(LC_FORMS), size=m)
  group = rng.integers(0, len(GROUPS), size=m)
  p1, p2 = present[image, s1], present[image, s2]
  yes = np.where(single_form == 3, ~p1, p1)
  yes = np.where(form == 3, np.where(pair_form == 0, p1 | p2, p1 & p2), yes)
  lc_base = len(SINGLE_FORMS) * n_sub + len(PAIR_FORMS) * n_sub * n_sub
  question = np.select(
      [form == 0, form == 1, form == 2],
      [lc_base + lc_form, lc_base + len(LC_FORMS) + group, single_form * n_sub + s1],
      len(SINGLE_FORMS) * n_sub + (pair_form * n_sub + s1) * n_sub + s2)
  # LC answers: the label set (all classes, or one group's) as a bit pattern, joined once each
  bits = labels.astype(np.uint64) @ (np.uint64(1) << np.arange(n_cls, dtype=np.uint64))
  group_bits = members.astype(np.uint64) @ (np.uint64(1) << np.arange(n_cls, dtype=np.uint64))
  wanted = np.where(form == 1, bits[image] & group_bits[group], bits[image])
  lc = form <= 1
  patterns, inverse = np.unique(wanted[lc], return_inverse=True)
  answers = ["no", "yes"] + [
      ", ".join(CLASSES[c] for c in range(n_cls) if int(p) >> c & 1) or "None"
      for p in patterns.tolist()]
  answer = yes.astype(np.int64)
  answer[lc] = 2 + inverse.reshape(-1)
  return image, question, answer, lc, answers


def split_of_images(images, seed, shares):
  """Split name per image: `shares` {"val": v, "test": t} at random, train the rest."""
  rng = np.random.default_rng([seed, 7919])
  n_val = max(1, int(round(shares["val"] * images)))
  n_test = max(1, int(round(shares["test"] * images)))
  names = np.array(["train"] * (images - n_val - n_test) + ["val"] * n_val + ["test"] * n_test)
  return names[rng.permutation(images)]


def _write_list(path, key, pieces, bar):
  """Writes {"key":[...]} from an iterable of (entries, their comma-free-ended text) chunks,
  counting the entries on `bar`."""
  with open(path, "w", encoding="utf-8") as f:
    f.write('{"%s":[' % key)
    first = True
    for n, piece in pieces:
      if piece:
        f.write(piece if first else "," + piece)
        first = False
      bar.update(n)
    f.write("]}")


def write(out, p, shares):
  """Writes the question set of manifest parameters `p` into the empty folder `out`.

  Returns {split: questions}.
  """
  images, seed, per_image = p["images"], p["seed"], p["questions_per_image"]
  labels = draw_labels(images, seed)
  image, question, answer, lc, answers = draw_questions(labels, per_image, seed)
  texts = np.array([json.dumps(t) for t in question_texts()], dtype=object)
  answer_json = np.array([json.dumps(a) for a in answers], dtype=object)
  qtype = np.where(lc, '"LC"', '"presence"').astype(object)
  label_json = [json.dumps([CLASSES[c] for c in np.flatnonzero(row)]) for row in labels]
  split = split_of_images(images, seed, shares)
  counts = {}
  with progress.bar(total=images + 2 * len(image), desc="synth xben files", unit="entry") as bar:
    for name in split_files.LAYOUTS["xben"].splits:
      ids = np.flatnonzero(split == name)
      qids = (ids[:, None] * per_image + np.arange(per_image)).reshape(-1)
      counts[name] = len(qids)
      path = {kind: split_files.split_file(out, "xben", name, kind)
              for kind in ("images", "questions", "answers")}
      image_chunk = max(1, CHUNK // per_image)
      _write_list(path["images"], "images", (
          (len(chunk), ",".join(
              IMAGE_ENTRY % (i, ",".join(map(str, range(i * per_image, (i + 1) * per_image))),
                             label_json[i]) for i in chunk))
          for chunk in (ids[k:k + image_chunk].tolist() for k in range(0, len(ids), image_chunk))),
                  bar)
      chunks = [qids[k:k + CHUNK] for k in range(0, len(qids), CHUNK)]
      _write_list(path["questions"], "questions", (
          (len(q), ",".join(map(QUESTION_ENTRY.__mod__, zip(
              q.tolist(), image[q].tolist(), qtype[q], texts[question[q]], q.tolist()))))
          for q in chunks), bar)
      _write_list(path["answers"], "answers", (
          (len(q), ",".join(map(ANSWER_ENTRY.__mod__, zip(q.tolist(), q.tolist(),
                                                          answer_json[answer[q]]))))
          for q in chunks), bar)
  return counts
