"""Procedural overhead scenes: land-cover objects with attributes, their pixels and masks.

The synthetic dataset must be answerable from the pixels, so every object class has its own
colour/texture signature (striped farmland, speckled forest, red-roofed houses, striped
parkings, white-lined pitches, ...), objects of one class never touch (counts are visible), and
each object's footprint mask is kept for grounding work. Drawing is NumPy on bounding-box crops.
Each object keeps the random style it was painted with, so `render` can paint an edited object
list (data/counterfactual.py) on the same ground with every untouched object as it was.
"""
import dataclasses

import numpy as np

from rsvqa_jax import storage

SIZES = ("small", "medium", "large")
SHAPES = ("square", "rectangular", "circular")
BUILDING_CLASSES = ("residential building", "commercial building")
BUILT_UP = BUILDING_CLASSES + ("road", "parking", "residential area")  # what land use reads


@dataclasses.dataclass(frozen=True)
class ObjectClass:
  """How one land-cover class looks and where it may go (sizes in pixels at 256x256)."""

  name: str
  colour: tuple[int, int, int]
  texture: str  # flat, speckle, stripes, lines, border, pitch
  shapes: tuple[str, ...]  # attribute shapes it is drawn with; () = irregular blob
  side: tuple[int, int]  # min / max side (or diameter)
  layer: str  # road, area or thing: things go on free ground or inside residential areas
  noise: float = 4.0


CLASSES = {c.name: c for c in (
    ObjectClass("road", (92, 92, 96), "flat", (), (3, 5), "road", 3.0),
    ObjectClass("water area", (28, 58, 122), "flat", ("circular", "square", "rectangular"), (14, 60), "area", 2.0),
    ObjectClass("forest", (30, 80, 36), "speckle", (), (24, 80), "area", 22.0),
    ObjectClass("grass area", (112, 172, 82), "flat", (), (16, 50), "area", 5.0),
    ObjectClass("farmland", (200, 172, 96), "stripes", ("square", "rectangular"), (26, 88), "area", 5.0),
    ObjectClass("residential area", (178, 168, 162), "flat", ("square", "rectangular"), (44, 110), "area", 4.0),
    ObjectClass("residential building", (180, 68, 50), "flat", ("square", "rectangular"), (3, 7), "thing", 5.0),
    ObjectClass("commercial building", (212, 216, 228), "border", ("square", "rectangular"), (9, 22), "thing", 3.0),
    ObjectClass("parking", (58, 58, 62), "lines", ("square", "rectangular"), (7, 14), "thing", 2.0),
    ObjectClass("pitch", (52, 168, 66), "pitch", ("rectangular",), (8, 13), "thing", 2.0),
)}
BACKGROUND = (126, 118, 84)

# Expected object counts per scene style; a region overrides some and tints the sensor.
# Rural scenes hold 1.5 houses on average: one in three has none (the spread of _n), so counting
# buildings meets 0, 1-10 (rural) and 11-100 (urban) alike.
_RURAL = {"road": 1.2, "water area": 0.7, "forest": 1.3, "grass area": 1.0, "farmland": 2.2,
          "residential area": 0.25, "residential building": 1.5, "commercial building": 0.2,
          "parking": 0.2, "pitch": 0.15}
_URBAN = {"road": 3.0, "water area": 0.3, "forest": 0.3, "grass area": 0.9, "farmland": 0.3,
          "residential area": 1.6, "residential building": 40.0, "commercial building": 4.0,
          "parking": 1.6, "pitch": 0.6}


@dataclasses.dataclass(frozen=True)
class Region:
  """A geographic region: how often scenes are urban, object frequencies, sensor tint."""

  name: str
  urban_prob: float
  rural_counts: dict
  urban_counts: dict
  tint: tuple[float, float, float] = (1.0, 1.0, 1.0)
  offset: float = 0.0


REGIONS = {
    "default": Region("default", 0.35, _RURAL, _URBAN),
    # The unseen test region (HR test_phili): denser, more commercial, other sensor colours.
    "phili": Region("phili", 0.85, {**_RURAL, "farmland": 0.6, "forest": 0.5, "road": 2.0},
                    {**_URBAN, "commercial building": 8.0, "parking": 3.0, "road": 4.0,
                     "residential building": 55.0, "farmland": 0.05, "forest": 0.1},
                    tint=(1.06, 0.97, 0.9), offset=8.0),
}


@dataclasses.dataclass
class SceneObject:
  """One drawn object: class, attributes, box (y0, x0, y1, x1; end exclusive) and crop mask."""

  cls: str
  size: str | None
  shape: str | None
  box: tuple[int, int, int, int]
  mask: np.ndarray  # bool, shape (y1 - y0, x1 - x0)
  style: tuple | None = None  # (colour jitter float32 [3], texture along y) it was painted with

  @property
  def centroid(self):
    ys, xs = np.nonzero(self.mask)
    return self.box[0] + ys.mean(), self.box[1] + xs.mean()

  def full_mask(self, height, width):
    out = np.zeros((height, width), bool)
    y0, x0, y1, x1 = self.box
    out[y0:y1, x0:x1] = self.mask
    return out


@dataclasses.dataclass
class Scene:
  image: np.ndarray  # uint8 HxWx3
  objects: list
  land_use: str  # rural or urban, from the content
  region: str


def _randint(rng, lo, hi):
  """Uniform integer in [lo, hi) (much faster than Generator.integers for single draws)."""
  return lo + int(rng.random() * (hi - lo))


def footprint(rng, cls, scale):
  """Draws (height, width, mask, shape, size) of one object of `cls`.

  The size attribute is the tercile of the drawn side within the class's side range.
  """
  lo, hi = (int(round(s * scale)) for s in cls.side)
  side = _randint(rng, lo, hi + 1)
  size = SIZES[min(2, (side - lo) * 3 // (hi - lo + 1))]
  shape = cls.shapes[_randint(rng, 0, len(cls.shapes))] if cls.shapes else None
  if shape == "rectangular":
    long_side = int(round(side * rng.uniform(1.6, 2.4)))
    h, w = (side, long_side) if rng.random() < 0.5 else (long_side, side)
    return h, w, np.ones((h, w), bool), shape, size
  if shape == "square":
    return side, side, np.ones((side, side), bool), shape, size
  yy, xx = np.mgrid[:side, :side] + 0.5
  if shape == "circular":
    r = side / 2
    return side, side, (yy - r) ** 2 + (xx - r) ** 2 <= r * r, shape, size
  mask = np.zeros((side, side), bool)  # irregular blob: union of discs inside the box
  for _ in range(3):
    cy, cx = rng.uniform(0.35, 0.65, size=2) * side  # centres close enough to stay one blob
    r = rng.uniform(0.25, 0.45) * side
    mask |= (yy - cy) ** 2 + (xx - cx) ** 2 <= r * r
  return side, side, mask, None, size


def draw_style(rng):
  """The random part of an object's look: colour jitter and the direction of its texture."""
  return rng.uniform(-8, 8, size=3).astype(np.float32), bool(rng.random() < 0.5)


class _Canvas:
  """The image being drawn, occupancy maps, and the shared noise fields for textures."""

  def __init__(self, rng, size, region):
    self.size, self.region = size, region
    self.fine = rng.standard_normal((size, size), dtype=np.float32)
    coarse = rng.standard_normal((size // 8 + 1, size // 8 + 1), dtype=np.float32)
    self.blob = np.kron(coarse, np.ones((8, 8), np.float32))[:size, :size]
    self.image = np.empty((size, size, 3), np.float32)
    self.image[:] = np.asarray(BACKGROUND, np.float32)
    self.image += 6.0 * self.blob[..., None] + 3.0 * self.fine[..., None]
    self.area_free = np.ones((size, size), bool)  # no road / area yet
    self.thing_free = np.ones((size, size), bool)  # buildings etc. may go here

  def fits(self, free, y0, x0, h, w, margin):
    ya, xa = max(y0 - margin, 0), max(x0 - margin, 0)
    return free[ya:y0 + h + margin, xa:x0 + w + margin].all()

  def paint(self, rng, cls, box, mask):
    """Paints one object with a style drawn from `rng`; returns the style."""
    style = draw_style(rng)
    self.paint_styled(cls, box, mask, style)
    return style

  def paint_styled(self, cls, box, mask, style):
    y0, x0, y1, x1 = box
    h, w = y1 - y0, x1 - x0
    jitter, along_y = style
    colour = np.asarray(cls.colour, np.float32) + np.asarray(jitter, np.float32)
    fine = self.fine[y0:y1, x0:x1, None]
    tex = colour + cls.noise * (fine if cls.texture != "speckle" else np.maximum(fine, 0) * 1.5 - 0.5)
    yy, xx = np.arange(h)[:, None], np.arange(w)[None, :]
    along = np.broadcast_to(yy if along_y else xx, (h, w))
    if cls.texture == "stripes":
      tex += np.where(((along // 3) % 2 == 0)[..., None], 0.0, np.float32([-50, -12, -30]))
    elif cls.texture == "lines":
      tex[(along % 3) == 0] = 205.0
    elif cls.texture in ("border", "pitch"):
      edge = (yy == 0) | (xx == 0) | (yy == h - 1) | (xx == w - 1)
      if cls.texture == "pitch":
        edge |= (xx == w // 2) if w >= h else (yy == h // 2)
        tex[edge] = 235.0
      else:
        tex[edge] = np.float32([140, 142, 152])
    np.copyto(self.image[y0:y1, x0:x1], tex, where=mask[..., None])

  def finish(self):
    reg = REGIONS[self.region]
    out = self.image * np.float32(reg.tint) + np.float32(reg.offset)
    return np.clip(out, 0, 255).astype(np.uint8)


def _draw_roads(rng, canvas, n, scale, objects):
  cls = CLASSES["road"]
  size = canvas.size
  used = {0: [], 1: []}
  for _ in range(n):
    axis = _randint(rng, 0, 2)
    width = _randint(rng, int(cls.side[0] * scale), int(cls.side[1] * scale) + 1)
    for _ in range(10):
      pos = _randint(rng, int(8 * scale), size - width - int(8 * scale))
      if all(abs(pos - p) > 14 * scale for p in used[axis]):
        break
    else:
      continue
    used[axis].append(pos)
    box = (pos, 0, pos + width, size) if axis == 0 else (0, pos, size, pos + width)
    mask = np.ones((box[2] - box[0], box[3] - box[1]), bool)
    style = canvas.paint(rng, cls, box, mask)
    margin = int(2 * scale)
    canvas.area_free[max(box[0] - margin, 0):box[2] + margin, max(box[1] - margin, 0):box[3] + margin] = False
    canvas.thing_free[max(box[0] - margin, 0):box[2] + margin, max(box[1] - margin, 0):box[3] + margin] = False
    objects.append(SceneObject("road", None, None, box, mask, style))


def _place(rng, canvas, cls, scale, free, margin, within=None, tries=25):
  """Finds a free spot for one object of `cls` (inside box `within` if given) or None."""
  h, w, mask, shape, size_attr = footprint(rng, cls, scale)
  size = canvas.size
  if h > size or w > size:
    return None
  for _ in range(tries):
    if within is not None:
      wy0, wx0, wy1, wx1 = within
      if wy1 - wy0 <= h or wx1 - wx0 <= w:
        return None
      y0, x0 = _randint(rng, wy0, wy1 - h), _randint(rng, wx0, wx1 - w)
    else:
      y0, x0 = _randint(rng, 0, size - h + 1), _randint(rng, 0, size - w + 1)
    if canvas.fits(free, y0, x0, h, w, margin):
      return SceneObject(cls.name, size_attr, shape, (y0, x0, y0 + h, x0 + w), mask)
  return None


def _n(rng, mean):
  """Object count with more spread than Poisson (gamma-mixed), so zero and large both occur."""
  return int(rng.poisson(mean * rng.gamma(2.0, 0.5))) if mean > 0 else 0


def make_scene(seed, image_id, size=256, region="default"):
  """Draws scene `image_id` of dataset `seed`: deterministic in (seed, image_id, size, region)."""
  rng = np.random.default_rng([seed, image_id, size])
  reg = REGIONS[region]
  scale = size / 256
  urban = rng.random() < reg.urban_prob
  counts = reg.urban_counts if urban else reg.rural_counts
  canvas = _Canvas(rng, size, region)
  objects = []
  _draw_roads(rng, canvas, min(_n(rng, counts["road"]), 6), scale, objects)
  residential_areas = []
  for name in ("residential area", "farmland", "forest", "grass area", "water area"):
    cls = CLASSES[name]
    for _ in range(min(_n(rng, counts[name]), 6)):
      obj = _place(rng, canvas, cls, scale, canvas.area_free, int(3 * scale))
      if obj is None:
        continue
      obj.style = canvas.paint(rng, cls, obj.box, obj.mask)
      y0, x0, y1, x1 = obj.box
      canvas.area_free[y0:y1, x0:x1] &= ~obj.mask
      if name == "residential area":
        residential_areas.append(obj.box)
      else:
        canvas.thing_free[y0:y1, x0:x1] &= ~obj.mask
      objects.append(obj)
  for name in ("commercial building", "parking", "pitch", "residential building"):
    cls = CLASSES[name]
    for _ in range(min(_n(rng, counts[name]), 150)):
      within = None
      if name == "residential building" and residential_areas and rng.random() < 0.85:
        within = residential_areas[_randint(rng, 0, len(residential_areas))]
      obj = _place(rng, canvas, cls, scale, canvas.thing_free, max(1, int(scale)), within)
      if obj is None:
        continue
      obj.style = canvas.paint(rng, cls, obj.box, obj.mask)
      y0, x0, y1, x1 = obj.box
      canvas.thing_free[y0:y1, x0:x1] &= ~obj.mask
      objects.append(obj)
  return Scene(canvas.finish(), objects, land_use(objects, size), region)


def land_use(objects, size):
  """rural or urban, from the content: 15 buildings or more, or over 30% of the tile built up."""
  n_buildings = sum(o.cls in BUILDING_CLASSES for o in objects)
  built = np.zeros((size, size), bool)
  for o in objects:
    if o.cls in BUILT_UP:
      y0, x0, y1, x1 = o.box
      built[y0:y1, x0:x1] |= o.mask
  return "urban" if n_buildings >= 15 or built.mean() > 0.3 else "rural"


def render(seed, image_id, objects, size=256, region="default"):
  """The Scene of `objects` (each with its style) painted, in order, on the ground of scene
  `image_id` of dataset `seed`: make_scene's own objects give make_scene's image, pixel for
  pixel; an edited list gives the edited scene, everything else as it was."""
  rng = np.random.default_rng([seed, image_id, size])
  rng.random()  # make_scene's urban draw, before the ground's noise
  canvas = _Canvas(rng, size, region)
  for o in objects:
    if o.style is None:
      raise ValueError(f"scene object {o.cls} at {o.box} has no style to be painted with")
    canvas.paint_styled(CLASSES[o.cls], o.box, o.mask, o.style)
  return Scene(canvas.finish(), list(objects), land_use(objects, size), region)


def save_masks(path, scene):
  """Stores each object's class, attributes, box and crop mask (bit-packed) in one .npz."""
  objs = scene.objects
  bits = [np.packbits(o.mask.ravel()) for o in objs]
  offsets = np.cumsum([0] + [len(b) for b in bits]).astype(np.int64)
  np.savez(
      path,
      classes=np.asarray([o.cls for o in objs], dtype=str),
      sizes=np.asarray([o.size or "" for o in objs], dtype=str),
      shapes=np.asarray([o.shape or "" for o in objs], dtype=str),
      boxes=np.asarray([o.box for o in objs], dtype=np.int32).reshape(-1, 4),
      bits=np.concatenate(bits) if bits else np.zeros(0, np.uint8),
      offsets=offsets,
      image_size=np.asarray(scene.image.shape[:2], np.int32),
      land_use=np.asarray(scene.land_use),
  )


def load_masks(path):
  """Reads save_masks output: dict with classes, sizes, shapes, boxes and masks (N, H, W) bool."""
  with storage.npz(path) as z:
    height, width = z["image_size"].tolist()
    boxes, bits, offsets = z["boxes"], z["bits"], z["offsets"].tolist()  # each z[key] reads anew
    masks = np.zeros((len(boxes), height, width), bool)
    for i, (y0, x0, y1, x1) in enumerate(boxes.tolist()):
      n = (y1 - y0) * (x1 - x0)
      crop = np.unpackbits(bits[offsets[i]:offsets[i + 1]])[:n]
      masks[i, y0:y1, x0:x1] = crop.reshape(y1 - y0, x1 - x0).astype(bool)
    return {"classes": z["classes"].tolist(), "sizes": z["sizes"].tolist(),
            "shapes": z["shapes"].tolist(), "boxes": boxes, "masks": masks,
            "land_use": str(z["land_use"])}
