"""Parse RSVQA-LR template questions into pattern, objects and attributes.

The LR questions are generated from OpenStreetMap with a CLEVR-like grammar, so each one
can be taken apart again. This is what the paper's objects & patterns levels group on
(Table 4): the pattern (the form with its slots), the object nouns, and the object nouns
with their attributes.

Forms (case-insensitive, an optional " in the image" before the final "?"):

  Is there a|an X?                              pattern "Is there a [X]?"
  Is a|an X present?                            pattern "Is a [X] present?"
  How many X are there?                         pattern "How many [X] are there?"
  What is the number|amount of X?               pattern "What is the number of [X]?"
  Are there more X than Y?                      pattern "Are there more [X] than [Y]?"
  Are there less X than Y?                      pattern "Are there less [X] than [Y]?"
  Is the number of X equal to the number of Y?  pattern "Is the number of [X] equal to the number of [Y]?"
  Is it a rural or an urban area                pattern "Is it a rural or an urban area" (no object)
  What is the area covered by X?                pattern "What is the area covered by [X]?" (the HR
                                                area form, as the synthetic generator writes it)

Wording alternatives that do not change the meaning are merged into one pattern (a/an,
number/amount, the optional " in the image"); more and less are kept apart because they
invert the question.

An object phrase is `[size] [shape] noun [relation a|the [size] [shape] noun]` with sizes
small/medium/large, shapes square/rectangular/circular and relations "next to", "on the
left of", "on the right of", "at the top of", "at the bottom of". Runs of spaces (the real
files have two after a/the) are collapsed first. In the plural forms (counting,
comparison, area) the head noun was made plural by appending "s" to the whole noun ("pitchs",
"place of worships"), so one final "s" is removed; the related noun after a|the is singular.

Keys:
  object       the head noun(s): "water area"; comparisons give the ordered pair
               "road vs building" (order kept: "more roads than buildings" and "more
               buildings than roads" have opposite answers).
  object_attr  each phrase with its attributes and its relation, the determiner of the
               related noun dropped: "small road next to large forest"; comparisons give
               the ordered pair joined by " vs ".
Questions with no object (rural/urban) have the object keys "n/a".
"""
import dataclasses
import re

SIZES = ("small", "medium", "large")
SHAPES = ("square", "rectangular", "circular")
RELATIONS = ("next to", "on the left of", "on the right of", "at the top of", "at the bottom of")
NO_OBJECT = "n/a"
RURAL_URBAN = "Is it a rural or an urban area"

# (regex on the lower-cased question without "?" and " in the image", pattern, plural).
_FORMS = (
    (re.compile(r"is there (?:a|an) (?P<x>.+)"), "Is there a [X]?", False),
    (re.compile(r"is (?:a|an) (?P<x>.+) present"), "Is a [X] present?", False),
    (re.compile(r"how many (?P<x>.+) are there"), "How many [X] are there?", True),
    (re.compile(r"what is the (?:number|amount) of (?P<x>.+)"), "What is the number of [X]?", True),
    (re.compile(r"are there more (?P<x>.+?) than (?P<y>.+)"), "Are there more [X] than [Y]?", True),
    (re.compile(r"are there less (?P<x>.+?) than (?P<y>.+)"), "Are there less [X] than [Y]?", True),
    (re.compile(r"is the number of (?P<x>.+?) equal to the number of (?P<y>.+)"),
     "Is the number of [X] equal to the number of [Y]?", True),
    (re.compile(r"what is the area covered by (?P<x>.+)"), "What is the area covered by [X]?", True),
)
_DETERMINERS = ("a", "an", "the")


@dataclasses.dataclass(frozen=True)
class Phrase:
  """One object phrase: attributes, singular noun and an optional relation."""

  noun: str
  size: str | None = None
  shape: str | None = None
  relation: str | None = None
  related: "Phrase | None" = None

  @property
  def with_attributes(self):
    words = [w for w in (self.size, self.shape, self.noun) if w]
    if self.relation:
      words += [self.relation, self.related.with_attributes]
    return " ".join(words)


@dataclasses.dataclass(frozen=True)
class ParsedQuestion:
  """A template question taken apart."""

  pattern: str
  phrases: tuple[Phrase, ...]

  @property
  def object_key(self):
    return " vs ".join(p.noun for p in self.phrases) or NO_OBJECT

  @property
  def object_attr_key(self):
    return " vs ".join(p.with_attributes for p in self.phrases) or NO_OBJECT


def _head(words, plural):
  """[size] [shape] noun, with the plural "s" removed when `plural`."""
  size = shape = None
  while words and ((words[0] in SIZES and size is None) or (words[0] in SHAPES and shape is None)):
    if words[0] in SIZES:
      size = words[0]
    else:
      shape = words[0]
    words = words[1:]
  if not words:
    return None
  noun = " ".join(words)
  if plural and noun.endswith("s"):
    noun = noun[:-1]
  return Phrase(noun=noun, size=size, shape=shape)


def _phrase(text, plural):
  words = text.split()
  for i in range(len(words)):
    for relation in RELATIONS:
      rel = relation.split()
      if words[i:i + len(rel)] == rel:
        head = _head(words[:i], plural)
        rest = words[i + len(rel):]
        if rest and rest[0] in _DETERMINERS:
          rest = rest[1:]
        related = _head(rest, False)
        if head is None or related is None:
          return None
        return dataclasses.replace(head, relation=relation, related=related)
  return _head(words, plural)


def parse(question):
  """Parse one LR question; None when it matches no template form."""
  text = " ".join(question.lower().split())
  if text.startswith(RURAL_URBAN.lower()):
    return ParsedQuestion(pattern=RURAL_URBAN, phrases=())
  text = text.rstrip("?").rstrip()
  if text.endswith(" in the image"):
    text = text[:-len(" in the image")]
  for regex, pattern, plural in _FORMS:
    m = regex.fullmatch(text)
    if m is None:
      continue
    phrases = tuple(_phrase(m.group(g), plural) for g in ("x", "y") if g in m.groupdict())
    if any(p is None for p in phrases):
      return None
    return ParsedQuestion(pattern=pattern, phrases=phrases)
  return None
