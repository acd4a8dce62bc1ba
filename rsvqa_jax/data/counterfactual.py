"""Counterfactual scene edits (the VizWiz grounding paper's Figure 6, done systematically).

A question about a synthetic scene is asked again on the same scene with one thing changed,
and the generator's own matcher (questions.answer over a SceneIndex) says what the answer
becomes, so the answer an edit demands is computed, never assumed:
  remove   every object the question's first phrase matches is taken away (rural/urban: every
           built-up object, what land use reads);
  add      one new object the first phrase describes (class, size, shape, and its relation to
           an object of the scene) is placed on free ground by the generator's rules;
  move     for a phrase with a relation, the objects it matches are moved where the relation
           fails, or, when none matches, one object of its class is moved where it holds;
  control  one object of a class the question does not name is removed: the answer must stay.
An edit is kept only when it changes the answer (normalised as the dataset's answers are), a
control only when it leaves the raw answer as it was. Everything else keeps its place and its
look (scenes.render paints the edited object list on the scene's own ground).
"""
import dataclasses

import numpy as np

from rsvqa_jax.data import answers as answers_lib
from rsvqa_jax.data import questions as questions_lib
from rsvqa_jax.data import scenes

EDITS = ("remove", "add", "move")
CONTROL = "control"
KINDS = EDITS + (CONTROL,)
SHAPE_DRAWS = 40  # footprints drawn until one has the phrase's size and shape
PLACE_TRIES = 80  # positions tried per placed object
NEAR_SHARE = 0.7  # of the positions tried for a relation: around an object of the related phrase
_LAYER_RANK = {"road": 0, "area": 1, "thing": 2}  # paint order of make_scene


@dataclasses.dataclass(frozen=True)
class Edit:
  """One edited scene for one question: its kind, its object list and the answer it demands."""

  kind: str
  objects: tuple
  answer: str  # raw answer of the question on the edited scene


def scene_index(objects, size):
  """questions.SceneIndex of an object list (land use read from it, as the generator does)."""
  scene = scenes.Scene(None, list(objects), scenes.land_use(objects, size), "default")
  return questions_lib.SceneIndex(scene, next_to_px=4 * size / 256)


def answer_on(question, objects, size, res_m):
  """The raw answer of `question` on the scene holding `objects`."""
  return questions_lib.answer(question, scene_index(objects, size), res_m)


def named_classes(question):
  """Object classes the question names (related phrases too; rural/urban: the built-up ones)."""
  if question.qtype == "rural_urban":
    return set(scenes.BUILT_UP)
  out = set()
  for p in question.phrases:
    for q in (p, p.ref):
      if q is not None:
        out.update(scenes.BUILDING_CLASSES if q.obj == "building" else (q.obj,))
  return out


def _subject(question):
  """The first phrase (the question's object) or None (rural/urban)."""
  return question.phrases[0] if question.phrases else None


def _bare(phrase):
  return questions_lib.Phrase(phrase.obj, phrase.size, phrase.shape)


def remove(question, objects, size):
  """The object list without the question's objects (None: it names none in this scene)."""
  if question.qtype == "rural_urban":
    drop = {k for k, o in enumerate(objects) if o.cls in scenes.BUILT_UP}
  else:
    drop = set(np.flatnonzero(scene_index(objects, size).match(_subject(question))).tolist())
  return tuple(o for k, o in enumerate(objects) if k not in drop) if drop else None


def _free(objects, size, skip=None):
  """(area_free, thing_free) by make_scene's rules, object index `skip` left out. An area may
  not cover a thing either (things are painted over areas)."""
  area_free, thing_free = np.ones((size, size), bool), np.ones((size, size), bool)
  margin = int(2 * size / 256)
  for k, o in enumerate(objects):
    if k == skip:
      continue
    y0, x0, y1, x1 = o.box
    layer = scenes.CLASSES[o.cls].layer
    if layer == "road":
      block = (slice(max(y0 - margin, 0), y1 + margin), slice(max(x0 - margin, 0), x1 + margin))
      area_free[block] = thing_free[block] = False
      continue
    full = o.full_mask(size, size)
    area_free &= ~full
    if o.cls != "residential area":
      thing_free &= ~full
  return area_free, thing_free


def _attributed_footprint(rng, cls, size, phrase):
  """(h, w, mask, shape, size attribute) of `cls` with the phrase's attributes, or None."""
  for _ in range(SHAPE_DRAWS):
    h, w, mask, shape, size_attr = scenes.footprint(rng, cls, size / 256)
    if (phrase.size in (None, size_attr)) and (phrase.shape in (None, shape)):
      return h, w, mask, shape, size_attr
  return None


def _positions(rng, h, w, size, near):
  """Top-left corners to try: around the boxes in `near` (NEAR_SHARE of them) or anywhere."""
  for _ in range(PLACE_TRIES):
    if near and rng.random() < NEAR_SHARE:
      y0, x0, y1, x1 = near[int(rng.random() * len(near))]
      pad = int(6 * size / 256)
      ya, yb = max(y0 - h - pad, 0), min(y1 + pad, size - h)
      xa, xb = max(x0 - w - pad, 0), min(x1 + pad, size - w)
      if ya > yb or xa > xb:
        continue
      yield ya + int(rng.random() * (yb - ya + 1)), xa + int(rng.random() * (xb - xa + 1))
    else:
      yield int(rng.random() * (size - h + 1)), int(rng.random() * (size - w + 1))


def _fits(free, y0, x0, mask, margin):
  h, w = mask.shape
  ya, xa = max(y0 - margin, 0), max(x0 - margin, 0)
  return free[ya:y0 + h + margin, xa:x0 + w + margin].all()


def _margin(cls, size):
  return int(3 * size / 256) if cls.layer == "area" else max(1, int(size / 256))


def _place(rng, objects, k, size, phrase, holds):
  """`objects` with object k (placed anew at a free spot) where `holds`(k, SceneIndex) is true;
  None when no tried spot does. Free ground and margins follow make_scene."""
  obj = objects[k]
  cls = scenes.CLASSES[obj.cls]
  free = _free(objects, size, skip=k)[0 if cls.layer == "area" else 1]
  near = []
  if phrase.relation:
    ref = scene_index(objects, size).match(phrase.ref)
    near = [objects[j].box for j in np.flatnonzero(ref) if j != k]
  h, w = obj.mask.shape
  for y0, x0 in _positions(rng, h, w, size, near):
    if not _fits(free, y0, x0, obj.mask, _margin(cls, size)):
      continue
    moved = dataclasses.replace(obj, box=(y0, x0, y0 + h, x0 + w))
    edited = objects[:k] + (moved,) + objects[k + 1:]
    if holds(k, scene_index(edited, size)):
      return edited
  return None


def add(question, objects, size, rng):
  """`objects` with one new object matching the question's first phrase, or None."""
  phrase = _subject(question)
  if phrase is None:
    return None
  name = phrase.obj
  if name == "building":
    name = scenes.BUILDING_CLASSES[int(rng.random() * 2)]
  cls = scenes.CLASSES[name]
  if cls.layer == "road":  # a road crosses the whole tile: no free strip for one more
    return None
  drawn = _attributed_footprint(rng, cls, size, phrase)
  if drawn is None:
    return None
  h, w, mask, shape, size_attr = drawn
  new = scenes.SceneObject(name, size_attr, shape, (0, 0, h, w), mask, scenes.draw_style(rng))
  k = max((j + 1 for j, o in enumerate(objects)
           if _LAYER_RANK[scenes.CLASSES[o.cls].layer] <= _LAYER_RANK[cls.layer]), default=0)
  with_new = objects[:k] + (new,) + objects[k:]
  return _place(rng, with_new, k, size, phrase, lambda k, index: index.match(phrase)[k])


def _movable(obj):
  return obj.cls not in ("road", "residential area")  # strips across the tile; houses stand in one


def move(question, objects, size, rng):
  """`objects` with the first phrase's objects moved across its relation, or None."""
  phrase = _subject(question)
  if phrase is None or phrase.relation is None:
    return None
  matched = np.flatnonzero(scene_index(objects, size).match(phrase)).tolist()
  if matched:  # move each where it no longer matches
    edited = objects
    for k in matched:
      if not _movable(objects[k]):
        return None
      edited = _place(rng, edited, k, size, questions_lib.Phrase(phrase.obj),
                      lambda k, index: not index.match(phrase)[k])
      if edited is None:
        return None
    return edited
  candidates = [k for k in np.flatnonzero(scene_index(objects, size).match(_bare(phrase)))
                if _movable(objects[k])]
  if not candidates:
    return None
  k = int(candidates[int(rng.random() * len(candidates))])
  return _place(rng, objects, k, size, phrase, lambda k, index: index.match(phrase)[k])


def control(question, objects, size, res_m, rng):
  """An Edit removing one object of a class the question does not name, the raw answer kept;
  None when the scene holds no such object."""
  named = named_classes(question)
  original = answer_on(question, objects, size, res_m)
  for k in rng.permutation(len(objects)).tolist():
    if objects[k].cls in named:
      continue
    edited = objects[:k] + objects[k + 1:]
    if answer_on(question, edited, size, res_m) == original:
      return Edit(CONTROL, edited, original)
  return None


def edits(question, objects, size, res_m, variant, rng):
  """The Edits of one question on a scene's objects: each of EDITS that changes the answer
  (normalised as the dataset's), then the control, when the scene allows them."""
  objects = tuple(objects)
  norm = lambda raw: answers_lib.normalise(variant, question.qtype, raw)
  original = norm(answer_on(question, objects, size, res_m))
  out = []
  for kind, edit in (("remove", lambda: remove(question, objects, size)),
                     ("add", lambda: add(question, objects, size, rng)),
                     ("move", lambda: move(question, objects, size, rng))):
    edited = edit()
    if edited is None:
      continue
    raw = answer_on(question, edited, size, res_m)
    if norm(raw) != original:
      out.append(Edit(kind, edited, raw))
  ctrl = control(question, objects, size, res_m, rng)
  return out + ([ctrl] if ctrl else [])
