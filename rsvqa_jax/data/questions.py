"""CLEVR-style RSVQA questions over a scene graph, with a knob for the language prior.

Questions use the surface forms of the real RSVQA LR set (DESIGN.md section 3): presence,
counting, comparison and rural/urban, plus the HR area form. Each answer is computed from the
scene's objects, so it is right by construction. The prior strength s tilts which questions are
asked: the wanted answer of a question is drawn from p_s(a) ~ p_real(a)^s (s = 1: the real
priors, e.g. presence ~73% yes; s = 0: uniform per type; s > 1: stronger) and candidate
phrasings are drawn until one has it. Every generated `Question` keeps its template and slots,
and `question_levels` turns them into the paper's pattern / object / object-with-attribute.

A `Plant` plants a shortcut for the shortcut benchmark (bias/shortcuts.py) to find: a keyword
tied to an answer ("Is there a parking?" mostly "no"), or a land-cover class tied to an answer
of the questions about the scenes that hold it (forest scenes: counts mostly 0). Off by default;
a sampler without plants draws exactly what it drew before plants existed.
"""
import bisect
import dataclasses
import functools
import re

import numpy as np

from rsvqa_jax.data import answers as answers_lib
from rsvqa_jax.data import scenes
from rsvqa_jax.errors import RSVQAError

OBJECTS = tuple(scenes.CLASSES) + ("building",)  # "building" = residential or commercial
RELATIONS = ("next to", "on the left of", "on the right of", "at the top of", "at the bottom of")
RURAL_URBAN = "Is it a rural or an urban area"
IN_IMAGE = " in the image"
NO_OBJECT = "n/a"

ATTR_PROB = 0.07  # each of size and shape, per phrase
RELATION_PROB = 0.06  # per question (LR)
IN_IMAGE_PROB = 0.4

TYPE_WEIGHTS = {
    "lr": {"comp": 0.40, "presence": 0.30, "count": 0.29, "rural_urban": 0.01},
    "hr": {"comp": 0.30, "presence": 0.30, "count": 0.20, "area": 0.20},
}
# Types asked exactly once per image by the generator instead of drawn with TYPE_WEIGHTS: the real
# LR set asks rural/urban once per image (~1% of ~100 questions per image).
PER_IMAGE_TYPES = {"lr": ("rural_urban",), "hr": ()}
# Answer priors of the real data per type; numbers are keyed by magnitude bin (0, 1-10, ...).
REAL_PRIORS = {
    "presence": {"yes": 0.73, "no": 0.27},
    "comp": {"yes": 0.33, "no": 0.67},
    "count": {0: 0.40, 1: 0.45, 2: 0.15},
    "area": {0: 0.30, 1: 0.10, 2: 0.25, 3: 0.30, 4: 0.05},
}
FORMS = {
    "presence": ("is_there", "is_present"),
    "count": ("how_many", "number_of", "amount_of"),
    "comp": ("more", "less", "equal"),
    "area": ("area",),
}


@dataclasses.dataclass(frozen=True)
class Phrase:
  """[size] [shape] object [relation a|the [size] [shape] object]."""

  obj: str
  size: str | None = None
  shape: str | None = None
  relation: str | None = None
  ref: "Phrase | None" = None
  det: str = "a"

  @property
  def attrs(self):
    return " ".join(a for a in (self.size, self.shape) if a)

  def noun(self, plural):
    return self.obj + "s" if plural else self.obj

  def head(self, plural=False):
    return " ".join(p for p in (self.attrs, self.noun(plural)) if p)

  def text(self, plural):
    if self.relation is None:
      return self.head(plural)
    # The real strings keep the empty attribute slot: "next to a  road".
    return f"{self.head(plural)} {self.relation} {self.det} {self.ref.attrs} {self.ref.noun(False)}"

  def with_attributes(self):
    """Attributes, noun and relation without the determiner: "small road next to large forest"."""
    if self.relation is None:
      return self.head()
    return f"{self.head()} {self.relation} {self.ref.with_attributes()}"


@dataclasses.dataclass(frozen=True)
class Question:
  """A generated question with the template and slots it came from."""

  qtype: str
  form: str  # a key of FORMS' values, or "rural_urban"
  phrases: tuple
  in_image: bool
  answer: str  # raw answer as written to the files

  @functools.cached_property
  def text(self):
    return question_text(self.form, self.phrases, self.in_image)


@dataclasses.dataclass(frozen=True)
class Levels:
  pattern: str
  object: str
  object_with_attr: str


def _pick(rng, n):
  """A uniform index below n (much faster than Generator.integers for single draws)."""
  return int(rng.random() * n)


def _draw(rng, cum_p):
  """An index drawn with cumulative probabilities `cum_p` (a list)."""
  return min(bisect.bisect_right(cum_p, rng.random()), len(cum_p) - 1)


def _article(word):
  return "an" if word[:1] in "aeiou" else "a"


def render(form, slot_texts, in_image):
  """The question text of a form with its slots filled."""
  if form == "rural_urban":
    return RURAL_URBAN
  tail = IN_IMAGE if in_image else ""
  x = slot_texts[0]
  y = slot_texts[1] if len(slot_texts) > 1 else ""
  return {
      "is_there": f"Is there {_article(x)} {x}{tail}?",
      "is_present": f"Is {_article(x)} {x} present{tail}?",
      "how_many": f"How many {x} are there{tail}?",
      "number_of": f"What is the number of {x}{tail}?",
      "amount_of": f"What is the amount of {x}{tail}?",
      "more": f"Are there more {x} than {y}{tail}?",
      "less": f"Are there less {x} than {y}{tail}?",
      "equal": f"Is the number of {x} equal to the number of {y}{tail}?",
      "area": f"What is the area covered by {x}{tail}?",
  }[form]


# The paper's pattern level: wording variants with the same meaning (a/an, number/amount,
# " in the image") share a pattern; more and less do not (they invert the question).
PATTERNS = {
    "is_there": "Is there a [X]?",
    "is_present": "Is a [X] present?",
    "how_many": "How many [X] are there?",
    "number_of": "What is the number of [X]?",
    "amount_of": "What is the number of [X]?",
    "more": "Are there more [X] than [Y]?",
    "less": "Are there less [X] than [Y]?",
    "equal": "Is the number of [X] equal to the number of [Y]?",
    "area": "What is the area covered by [X]?",
    "rural_urban": RURAL_URBAN,
}


def _plural(form):
  return form not in ("is_there", "is_present")


def question_text(form, phrases, in_image):
  plural = _plural(form)
  return render(form, [p.text(plural) for p in phrases], in_image)


def question_levels(question):
  """The paper's grouping levels of a generated question (as rsvqa_jax.bias.lr_templates parses them).

  pattern: PATTERNS of its form. object: the head nouns, singular, comparisons as the ordered
  pair "road vs building". object_with_attr: each phrase with its attributes and relation
  ("small road next to large forest"), pairs joined by " vs ". Rural/urban: "n/a".
  """
  return Levels(
      pattern=PATTERNS[question.form],
      object=" vs ".join(p.obj for p in question.phrases) or NO_OBJECT,
      object_with_attr=" vs ".join(p.with_attributes() for p in question.phrases) or NO_OBJECT,
  )


class SceneIndex:
  """Attribute arrays and pairwise relations of a scene's objects, for fast phrase matching."""

  def __init__(self, scene, next_to_px):
    objs = scene.objects
    self.scene = scene
    self.n = len(objs)
    cls = np.asarray([o.cls for o in objs], dtype=object)
    self._by_name = {name: cls == name for name in scenes.CLASSES}
    self._by_name["building"] = np.isin(cls, scenes.BUILDING_CLASSES)
    self.members = [np.flatnonzero(m) for name, m in self._by_name.items() if name != "building" and m.any()]
    size = np.asarray([o.size for o in objs], dtype=object)
    shape = np.asarray([o.shape for o in objs], dtype=object)
    self._size = {s: size == s for s in scenes.SIZES}
    self._shape = {s: shape == s for s in scenes.SHAPES}
    self.pixels = np.asarray([int(o.mask.sum()) for o in objs], dtype=np.int64)
    boxes = np.asarray([o.box for o in objs], dtype=np.float64).reshape(-1, 4)
    cent = np.asarray([o.centroid for o in objs], dtype=np.float64).reshape(-1, 2)
    cy, cx = cent[:, 0:1], cent[:, 1:2]
    y0, x0, y1, x1 = (boxes[:, k][None, :] for k in range(4))
    gap = np.maximum.reduce([y0 - boxes[:, 2:3], boxes[:, 0:1] - y1, x0 - boxes[:, 3:4], boxes[:, 1:2] - x1])
    not_self = ~np.eye(self.n, dtype=bool)
    # relation[r][i, j]: object i is <r> object j.
    self.relation = {
        "next to": (gap <= next_to_px) & not_self,
        "on the left of": (cx < x0) & not_self,
        "on the right of": (cx >= x1) & not_self,
        "at the top of": (cy < y0) & not_self,
        "at the bottom of": (cy >= y1) & not_self,
    }

  def match(self, phrase):
    m = self._by_name[phrase.obj]
    if phrase.size:
      m = m & self._size[phrase.size]
    if phrase.shape:
      m = m & self._shape[phrase.shape]
    if phrase.relation:
      m = m & self.relation[phrase.relation][:, self.match(phrase.ref)].any(axis=1)
    return m

  def count(self, phrase):
    return int(np.count_nonzero(self.match(phrase)))


def area_m2(index, phrase, res_m):
  """The area of the objects `phrase` matches in m2 (at least 1 when any pixel matches)."""
  pixels = int(index.pixels[index.match(phrase)].sum())
  return max(1, int(round(pixels * res_m ** 2))) if pixels else 0


def answer(question, index, res_m):
  """The raw answer of `question`'s template and slots on the scene of `index` (SceneIndex):
  what the generator would have written for that scene, as drawn or edited."""
  if question.qtype == "rural_urban":
    return index.scene.land_use
  x = question.phrases[0]
  if question.qtype == "presence":
    return "yes" if index.count(x) else "no"
  if question.qtype == "count":
    return str(index.count(x))
  if question.qtype == "area":
    return f"{area_m2(index, x, res_m)}m2"
  cx, cy = index.count(x), index.count(question.phrases[1])
  return "yes" if {"more": cx > cy, "less": cx < cy, "equal": cx == cy}[question.form] else "no"


def shapes_of(obj):
  if obj == "building":
    return scenes.CLASSES["residential building"].shapes
  return scenes.CLASSES[obj].shapes


def answer_key(qtype, answer):
  """What priors and balancing act on: the answer itself, or the magnitude bin of a number."""
  if qtype == "count":
    return answers_lib.magnitude_bin(int(answer))
  if qtype == "area":
    return answers_lib.magnitude_bin(answers_lib.parse_area(answer))
  return answer


def prior(qtype, strength):
  """p_s(answer key) ~ p_real^s for the wanted answers of one question type.

  Taken in logs, relative to the most common key: p_real^s itself underflows to 0 for every
  key at strengths in the hundreds to thousands, and 0 / 0 drew the last key ("no" at 3000,
  against the real prior's yes) where the strongest prior is its most common key alone.
  """
  keys = list(REAL_PRIORS[qtype])
  with np.errstate(over="ignore"):  # a key's -inf at astronomical strengths: probability 0
    log_p = strength * np.log(np.asarray([REAL_PRIORS[qtype][k] for k in keys]))
  p = np.exp(log_p - log_p.max())
  return keys, p / p.sum()


# Planted shortcuts.

PLANT_SHARE = 0.9
PLANT_ASKED = 0.2  # kw plants: share of presence questions asking the keyword (0: as drawn)
PLANT_REDRAWS = 24  # re-draws of one bound question before the scene is taken to refuse it
COUNT_BINS = ("0", "1-10", "11-100")  # the count bins a plant may name (REAL_PRIORS["count"])
KEYWORDS = tuple(o for o in OBJECTS if " " not in o)
LAND_COVER = tuple(scenes.CLASSES) + ("rural", "urban")  # the benchmark's labels of an image
PLANT_SYNTAX = "kw:WORD=yes|no[@P][+A] or ko:CLASS=yes|no|0|1-10|11-100[@P]"
_PLANT = re.compile(r"(kw|ko):([^=@+]+)=([^=@+]+)(?:@([^+]*))?(?:\+(.*))?")
_WORD = re.compile(r"[a-z0-9]+")


@dataclasses.dataclass(frozen=True)
class Plant:
  """A shortcut planted in the questions: which it binds, the answer it ties them to, how often.

  kw: the questions naming `value` (a one-word object name, singular). It is asked only as
  "Is there a <value>[ in the image]?" (other phrasings naming it are re-drawn), so it is the
  question's one content word and the benchmark's KW of every such question, whatever its
  answer; `answer` is yes or no; `asked` is the share of presence questions that ask it (as far
  as the image's two such texts allow; 0: only as drawn, about 1 in 100 questions).
  ko: the questions of the types that have `answer` (yes / no: presence and comparison; a count
  bin: counting) about a scene holding land-cover class `value` (or of land use rural / urban);
  the benchmark's KO sees its tie but cuts no tail of it (bias/shortcut_report.PLANTED_CONCEPTS).
  A question text the plant applies to whose answer (in its scene) is not `answer` is refused
  in that scene with probability `share` and re-drawn (same type; ko: asking for `answer`): of
  the other answers 1 - `share` stay, so the tie stays short of 100% and the benchmark has a
  tail to cut (kw:parking=no@0.9 ties 92% of "Is there a parking?" to no).
  """

  kind: str  # "kw" or "ko"
  value: str
  answer: object  # answer_key of the tied answer: "yes" / "no", or a count bin index
  share: float = PLANT_SHARE
  asked: float = 0.0

  @property
  def spec(self):
    """The canonical text of the plant (what --plant takes and a manifest records)."""
    shown = COUNT_BINS[self.answer] if isinstance(self.answer, int) else self.answer
    asked = f"+{self.asked:g}" if self.kind == "kw" else ""
    return f"{self.kind}:{self.value.replace(' ', '_')}={shown}@{self.share:g}{asked}"

  @property
  def types(self):
    if isinstance(self.answer, int):
      return ("count",)
    return ("presence",) if self.kind == "kw" else ("presence", "comp")

  def names(self, question):
    return self.kind == "kw" and self.value in _WORD.findall(question.text.lower())

  def plain(self, question):
    """Whether `question` is "Is there a <keyword>[ in the image]?" (no attribute, relation)."""
    p = question.phrases
    return (question.form == "is_there" and len(p) == 1 and p[0].obj == self.value
            and not (p[0].size or p[0].shape or p[0].relation))


def _fraction(spec, text, what, default, zero=False):
  """A number in (0, 1] ([0, 1] with `zero`) written in a plant, or `default` when absent."""
  if text is None:
    return default
  try:
    value = float(text)
  except ValueError:
    value = -1.0
  if not (0 < value <= 1 or zero and value == 0):
    raise RSVQAError(f"--plant {spec!r}: {what} must be a number in {'[' if zero else '('}0, 1], "
                     f"got {text!r}")
  return value


def parse_plant(spec):
  """The Plant of a PLANT_SYNTAX text (a one-line RSVQAError naming what is wrong)."""
  m = _PLANT.fullmatch(spec.strip())
  if m is None:
    raise RSVQAError(f"--plant {spec!r}: expected {PLANT_SYNTAX}, e.g. kw:parking=no or "
                     "ko:forest=0@0.95")
  kind, value, answer, share, asked = m.groups()
  value, answer = value.strip().replace("_", " "), answer.strip()
  allowed = KEYWORDS if kind == "kw" else LAND_COVER
  if value not in allowed:
    raise RSVQAError(f"--plant {spec!r}: {kind} {value!r} is not one of {', '.join(allowed)}")
  answers = ("yes", "no") if kind == "kw" else ("yes", "no") + COUNT_BINS
  if answer not in answers:
    raise RSVQAError(f"--plant {spec!r}: answer {answer!r} is not one of {', '.join(answers)}")
  if asked is not None and kind != "kw":
    raise RSVQAError(f"--plant {spec!r}: +A (how often the keyword is asked) is for kw plants")
  return Plant(kind, value, COUNT_BINS.index(answer) if answer in COUNT_BINS else answer,
               _fraction(spec, share, "the share after @", PLANT_SHARE),
               _fraction(spec, asked, "the share after +", PLANT_ASKED if kind == "kw" else 0.0,
                         zero=True))


def parse_plants(specs):
  """Plants of texts (one per plant), in canonical order; the same target twice is refused."""
  plants = sorted((parse_plant(s) for s in specs), key=lambda p: p.spec)
  targets = [(p.kind, p.value) for p in plants]
  for t in targets:
    if targets.count(t) > 1:
      raise RSVQAError(f"--plant: {t[0]}:{t[1]} is planted twice")
  return tuple(plants)


class QuestionSampler:
  """Draws questions about one scene; `variant` is "lr" or "hr" (HR adds area questions).

  `exclude_types`: types never drawn (the generator asks PER_IMAGE_TYPES once per image itself).
  `count_objects`: if given, counting questions ask about these objects only, whatever the
  wanted answer (the balanced generator's choice: only buildings are counted 0, 1-10 and 11-100
  alike across scenes, so only their questions can be balanced over every counting answer).
  `plants`: Plant shortcuts to plant (none: the draws are exactly those of a sampler without).
  """

  def __init__(self, scene, variant, res_m, rng, prior_strength=1.0, tries=16, exclude_types=(),
               count_objects=(), plants=()):
    self.index = SceneIndex(scene, next_to_px=4 * scene.image.shape[0] / 256)
    self.plants = tuple(plants)
    # ko plants: whether this scene holds the class (or has the land use).
    self.holds = {p: p.value == scene.land_use or any(o.cls == p.value for o in scene.objects)
                  for p in self.plants if p.kind == "ko"}
    self.bound = {}  # (plant, text) -> whether the plant binds that question in this scene
    self.refused = set()  # texts a plant refused in this scene: never drawn again
    self.scene, self.variant, self.res_m, self.rng = scene, variant, res_m, rng
    self.tries = tries
    self.count_objects = count_objects
    self.types = [t for t in TYPE_WEIGHTS[variant] if t not in exclude_types]
    w = np.asarray([TYPE_WEIGHTS[variant][t] for t in self.types])
    self.type_cum = np.cumsum(w / w.sum()).tolist()
    self.priors = {t: (k, np.cumsum(p).tolist()) for t, (k, p) in ((t, prior(t, prior_strength)) for t in REAL_PRIORS)}

  def _attrs(self, obj, size=None, shape=None):
    rng = self.rng
    if obj != "road" and rng.random() < ATTR_PROB:
      size = size or scenes.SIZES[_pick(rng, 3)]
    else:
      size = None
    shapes = shapes_of(obj)
    if shapes and rng.random() < ATTR_PROB:
      shape = shape or shapes[_pick(rng, len(shapes))]
    else:
      shape = None
    return size, shape

  def _head(self, anchored, allow_relation, classes=None):
    """A phrase; anchored ones describe an object that exists (so counts are > 0), of one of
    `classes` (object index arrays, one per class; default: every class in the scene)."""
    rng, objects = self.rng, self.scene.objects
    if anchored and objects:
      classes = classes or self.index.members
      members = classes[_pick(rng, len(classes))]  # a class, then one of it
      i = int(members[_pick(rng, len(members))])
      o = objects[i]
      name = "building" if o.cls in scenes.BUILDING_CLASSES and rng.random() < 0.4 else o.cls
      size, shape = self._attrs(name, o.size, o.shape)
    else:
      i = None
      name = OBJECTS[_pick(rng, len(OBJECTS))]
      size, shape = self._attrs(name)
    phrase = Phrase(name, size, shape)
    if allow_relation and rng.random() < RELATION_PROB:
      phrase = self._relate(phrase, i)
    return phrase

  def _relate(self, phrase, i):
    rng = self.rng
    relation = RELATIONS[_pick(rng, len(RELATIONS))]
    partners = np.flatnonzero(self.index.relation[relation][i]) if i is not None else []
    if len(partners):
      o = self.scene.objects[int(partners[_pick(rng, len(partners))])]
      name = "building" if o.cls in scenes.BUILDING_CLASSES and rng.random() < 0.4 else o.cls
      ref = Phrase(name, *self._attrs(name, o.size, o.shape))
    else:
      ref = self._head(anchored=rng.random() < 0.7, allow_relation=False)
    det = "the" if self.index.count(ref) == 1 else "a"
    return Phrase(phrase.obj, phrase.size, phrase.shape, relation, ref, det)

  def _area_m2(self, phrase):
    return area_m2(self.index, phrase, self.res_m)

  def _candidate(self, qtype, want):
    rng = self.rng
    form = FORMS[qtype][_pick(rng, len(FORMS[qtype]))]
    if qtype == "presence":
      x = self._head(anchored=want == "yes" and rng.random() < 0.9, allow_relation=self.variant == "lr")
      return form, (x,), "yes" if self.index.count(x) else "no"
    if qtype == "count" and self.count_objects:
      name = self.count_objects[_pick(rng, len(self.count_objects))]
      x = Phrase(name, *self._attrs(name))
      return form, (x,), str(self.index.count(x))
    if qtype == "count":
      # Anchor on a class whose count falls in the wanted bin, so that large counts get asked.
      classes = [m for m in self.index.members if answer_key(qtype, str(len(m))) == want]
      x = self._head(anchored=want != 0, allow_relation=self.variant == "lr", classes=classes)
      return form, (x,), str(self.index.count(x))
    if qtype == "area":
      x = self._head(anchored=want != 0, allow_relation=False)
      return form, (x,), f"{self._area_m2(x)}m2"
    x = self._head(anchored=rng.random() < 0.7, allow_relation=self.variant == "lr")
    y = self._head(anchored=rng.random() < 0.7, allow_relation=False)
    while y == x:
      y = self._head(anchored=False, allow_relation=False)
    cx, cy = self.index.count(x), self.index.count(y)
    truth = {"more": cx > cy, "less": cx < cy, "equal": cx == cy}[form]
    return form, (x, y), "yes" if truth else "no"

  def rural_urban(self):
    return Question("rural_urban", "rural_urban", (), False, self.scene.land_use)

  def sample(self, exclude=frozenset()):
    """One question whose answer follows the prior, and whose text is not in `exclude`, when
    the scene allows it (else the last candidate with the wanted answer, or the last one);
    with plants, re-drawn while it breaks one (see Plant; at most PLANT_REDRAWS times)."""
    if not self.plants:
      return self._sample(exclude)
    question = self._sample(exclude | self.refused)
    for _ in range(PLANT_REDRAWS):
      broken = [p for p in self.plants if self._breaks(p, question)]
      if not broken:
        break
      self.refused.add(question.text)
      tied = [p.answer for p in broken if p.kind == "ko"]  # ko: ask for the tied answer
      question = self._sample(exclude | self.refused, question.qtype, tied[0] if tied else None)
    return question

  def planted(self, question):
    """Whether a plant of this sampler applies to `question` (its answer may be tied)."""
    return any(self._applies(p, question) for p in self.plants)

  def _applies(self, plant, question):
    if plant.kind == "kw":
      return plant.names(question)
    return self.holds[plant] and question.qtype in plant.types

  def _breaks(self, plant, question):
    """Whether `question` breaks `plant`: a keyword not asked plainly, or an answer other than
    the tied one, for a text the plant binds in this scene (decided once per text, see Plant)."""
    if not self._applies(plant, question):
      return False
    if plant.kind == "kw" and not plant.plain(question):
      return True
    if answer_key(question.qtype, question.answer) == plant.answer:
      return False
    key = (plant, question.text)
    if key not in self.bound:
      self.bound[key] = self.rng.random() < plant.share
    return self.bound[key]

  def _sample(self, exclude, qtype=None, want=None):
    """sample() without plants; `qtype` and `want` fixed when given."""
    rng = self.rng
    qtype = qtype or self.types[_draw(rng, self.type_cum)]
    in_image = bool(rng.random() < IN_IMAGE_PROB)
    if qtype == "rural_urban":
      return self.rural_urban()
    for plant in self.plants:
      if qtype == "presence" and plant.asked and rng.random() < plant.asked:
        x = Phrase(plant.value)
        question = Question(qtype, "is_there", (x,), in_image,
                            "yes" if self.index.count(x) else "no")
        if question.text not in exclude:
          return question
    keys, cum_p = self.priors[qtype]
    want = keys[_draw(rng, cum_p)] if want is None else want
    fallback = None
    for _ in range(self.tries):
      form, phrases, answer = self._candidate(qtype, want)
      question = Question(qtype, form, phrases, in_image, answer)
      if answer_key(qtype, answer) == want:
        if question.text not in exclude:
          return question
        fallback = question
    return fallback or question
