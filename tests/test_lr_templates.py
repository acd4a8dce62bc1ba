"""LR template parsing: every form, attribute, relation and plural."""
import pytest

from rsvqa_jax.bias import lr_templates
from rsvqa_jax.bias import subsets
from rsvqa_jax.data import questions
from rsvqa_jax.data import records

P_THERE = "Is there a [X]?"
P_PRESENT = "Is a [X] present?"
P_HOW_MANY = "How many [X] are there?"
P_NUMBER = "What is the number of [X]?"
P_MORE = "Are there more [X] than [Y]?"
P_LESS = "Are there less [X] than [Y]?"
P_EQUAL = "Is the number of [X] equal to the number of [Y]?"

# (question, pattern, object key, object-with-attribute key)
CASES = [
    ("Is there a road?", P_THERE, "road", "road"),
    ("Is there an island in the image?", P_THERE, "island", "island"),
    ("Is there a small water area?", P_THERE, "water area", "small water area"),
    ("Is there a circular place of worship?", P_THERE, "place of worship", "circular place of worship"),
    ("Is there a large square building?", P_THERE, "building", "large square building"),
    ("Is a forest present?", P_PRESENT, "forest", "forest"),
    ("Is an orchard present in the image?", P_PRESENT, "orchard", "orchard"),
    ("Is a medium rectangular commercial building present?", P_PRESENT, "commercial building",
     "medium rectangular commercial building"),
    ("How many pitchs are there?", P_HOW_MANY, "pitch", "pitch"),
    ("How many cemeterys are there in the image?", P_HOW_MANY, "cemetery", "cemetery"),
    ("How many place of worships are there?", P_HOW_MANY, "place of worship", "place of worship"),
    ("How many small roads are there?", P_HOW_MANY, "road", "small road"),
    ("What is the number of water areas?", P_NUMBER, "water area", "water area"),
    ("What is the amount of large grass areas in the image?", P_NUMBER, "grass area", "large grass area"),
    ("What is the number of square residential buildings?", P_NUMBER, "residential building",
     "square residential building"),
    ("Are there more roads than buildings?", P_MORE, "road vs building", "road vs building"),
    ("Are there less small forests than circular farmlands in the image?", P_LESS, "forest vs farmland",
     "small forest vs circular farmland"),
    ("Is the number of parkings equal to the number of schools?", P_EQUAL, "parking vs school",
     "parking vs school"),
    ("Is the number of large rectangular piers equal to the number of zoos in the image?", P_EQUAL,
     "pier vs zoo", "large rectangular pier vs zoo"),
    # Relations, with the double space after a/the of the real files.
    ("Is there a road next to a  water area?", P_THERE, "road", "road next to water area"),
    ("Is a building on the left of the  forest present?", P_PRESENT, "building",
     "building on the left of forest"),
    ("Is there a small road on the right of a large park in the image?", P_THERE, "road",
     "small road on the right of large park"),
    ("How many buildings at the top of a  circular water area are there?", P_HOW_MANY, "building",
     "building at the top of circular water area"),
    ("What is the number of medium square meadows at the bottom of the  small sports centre?", P_NUMBER,
     "meadow", "medium square meadow at the bottom of small sports centre"),
    ("Are there more roads next to a  railway than place of worships?", P_MORE,
     "road vs place of worship", "road next to railway vs place of worship"),
    ("Is the number of grass areas equal to the number of buildings on the left of a  hospital?", P_EQUAL,
     "grass area vs building", "grass area vs building on the left of hospital"),
    ("Is it a rural or an urban area", lr_templates.RURAL_URBAN, "n/a", "n/a"),
]


@pytest.mark.parametrize("question,pattern,obj,obj_attr", CASES)
def test_parse(question, pattern, obj, obj_attr):
  parsed = lr_templates.parse(question)
  assert parsed is not None, question
  assert parsed.pattern == pattern
  assert parsed.object_key == obj
  assert parsed.object_attr_key == obj_attr


def test_every_relation_size_and_shape():
  for relation in lr_templates.RELATIONS:
    for size in lr_templates.SIZES:
      for shape in lr_templates.SHAPES:
        q = f"How many {size} {shape} farmlands {relation} the  {shape} {size} heath are there?"
        p = lr_templates.parse(q).phrases[0]
        assert (p.noun, p.size, p.shape, p.relation) == ("farmland", size, shape, relation)
        assert (p.related.noun, p.related.size, p.related.shape) == ("heath", size, shape)


def test_phrase_fields():
  (x, y) = lr_templates.parse("Are there less large circular water areas than nature reserves?").phrases
  assert (x.noun, x.size, x.shape, x.relation) == ("water area", "large", "circular", None)
  assert (y.noun, y.size, y.shape) == ("nature reserve", None, None)


def test_case_and_spaces_do_not_matter():
  a = lr_templates.parse("is there a  SMALL   road?")
  b = lr_templates.parse("Is there a small road?")
  assert a == b


@pytest.mark.parametrize("question", [
    "What is the colour of the roof?",
    "How many are there?",
    "Is there a small?",
    "Are there more roads?",
    "Is there a road next to a ?",
])
def test_unparsed(question):
  assert lr_templates.parse(question) is None


def test_subset_keys():
  rows = [dict(question_id=i, image_id=0, qtype=t, question=q, answer="yes", raw_answer="yes")
          for i, (t, q) in enumerate([("presence", "Is there a small road?"),
                                      ("count", "How many roads are there in the image?"),
                                      ("presence", "Where is the road?"),
                                      ("rural_urban", "Is it a rural or an urban area")])]
  split = records.Split.from_rows("test", rows)
  assert subsets.keys(split, "pattern").tolist() == [
      ("presence", P_THERE), ("count", P_HOW_MANY), ("presence", subsets.UNPARSED),
      ("rural_urban", lr_templates.RURAL_URBAN)]
  assert subsets.keys(split, "object").tolist()[:2] == [("presence", "road"), ("count", "road")]
  assert subsets.keys(split, "object_attr").tolist()[0] == ("presence", "small road")
  assert subsets.keys(split, "question").tolist()[1] == ("count", "How many roads are there in the image?")
  assert subsets.count_unparsed(split) == 1
  with pytest.raises(ValueError):
    subsets.keys(split, "colour")


def test_generator_questions_parse():
  """Questions of the synthetic generator parse back into their slots."""
  Ph = questions.Phrase
  phrases = [Ph("road"), Ph("water area", size="small", shape="circular"),
             Ph("building", relation="next to", ref=Ph("forest", size="large"), det="the"),
             Ph("place of worship", shape="square", relation="at the bottom of", ref=Ph("park"))]
  forms = {"is_there": 1, "is_present": 1, "how_many": 1, "number_of": 1, "amount_of": 1, "more": 2,
           "less": 2, "equal": 2}
  for form, n in forms.items():
    for i in range(len(phrases)):
      chosen = tuple(phrases[(i + k) % len(phrases)] for k in range(n))
      for in_image in (False, True):
        text = questions.question_text(form, chosen, in_image)
        parsed = lr_templates.parse(text)
        assert parsed is not None, text
        for got, want in zip(parsed.phrases, chosen):
          assert (got.noun, got.size, got.shape, got.relation) == (want.obj, want.size, want.shape, want.relation)
          if want.ref is not None:
            assert (got.related.noun, got.related.size, got.related.shape) == (
                want.ref.obj, want.ref.size, want.ref.shape)
