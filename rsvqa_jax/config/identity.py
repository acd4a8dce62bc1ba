"""A run's identity: the config as a workdir records it (config.json) and compares it on resume,
read back over the defaults, and the differences that make two runs unlike."""
import copy
import json

import ml_collections

from rsvqa_jax.config.defaults import base_config
from rsvqa_jax.config.overrides import describe_type
from rsvqa_jax.errors import RSVQAError, short_repr

# Keys that steer one invocation without changing what is trained (not part of the identity).
RUN_CONTROL_KEYS = ("train.stop_after_steps", "train.progress_bar")


def to_dict(config):
  """Plain JSON-safe dict of a config."""
  return json.loads(config.to_json_best_effort())


def identity(config):
  """The config as a dict without the run-control keys: equal identities = the same run."""
  return recorded_identity(to_dict(config))


RECORDED_IN = "recorded_in"  # config.json's extra key: the workdir's absolute path when written


def recorded_identity(recorded):
  """identity() of a config.json as read (a nested dict): the run-control keys and the record of
  where the workdir was (RECORDED_IN) left out."""
  d = copy.deepcopy(recorded)
  d.pop(RECORDED_IN, None)
  for key in RUN_CONTROL_KEYS:
    *path, last = key.split(".")
    node = d
    for part in path:
      node = node.get(part, {}) if isinstance(node, dict) else {}
    if isinstance(node, dict):
      node.pop(last, None)
  return d


def differences(a, b, prefix=""):
  """Dotted keys whose values differ between two nested dicts: [(key, value in a, in b)]."""
  out = []
  for key in sorted(set(a) | set(b)):
    va, vb = a.get(key, "<missing>"), b.get(key, "<missing>")
    if isinstance(va, dict) and isinstance(vb, dict):
      out += differences(va, vb, f"{prefix}{key}.")
    elif va != vb:
      out.append((f"{prefix}{key}", va, vb))
  return out


# Keys that say how a run was carried out, not which model it trains: seeds of one model may
# differ in them.
BOOKKEEPING_KEYS = ("train.eval_batch_size", "train.log_every_steps",
                    "train.checkpoint_every_steps", "train.keep_checkpoints",
                    "data.cache_dir")  # the caches' entries are keyed by their content


def unlike_seed_runs(runs, free=()):
  """Why runs [(workdir, identity)] are not one model over distinct seeds, or None.

  A mean (std) over seeds (evaluate --seeds, Table 2 of `tables`) is refused over anything else.
  `free`: dotted keys the runs may differ in as well (Table 1 pools a sweep's learning rates);
  runs equal in them must still have distinct seeds.
  """
  first, ours = runs[0]
  tag = lambda identity: (identity.get("seed"), *(_at(identity, key) for key in free))
  seeds = {tag(ours): first}
  for name, theirs in runs[1:]:
    diff = [d for d in differences(ours, theirs)
            if d[0] not in ("seed", *BOOKKEEPING_KEYS, *free)]
    if diff:
      key, mine, other = diff[0]
      more = f" and {len(diff) - 1} more key(s)" if len(diff) > 1 else ""
      return (f"{name} is not {first}'s model over another seed: {key} is {other!r} there, "
              f"{mine!r} in {first}{more}")
    if tag(theirs) in seeds:
      same = f" (and the same {', '.join(free)})" if free else ""
      return (f"{seeds[tag(theirs)]} and {name} were both trained with seed "
              f"{theirs.get('seed')}{same}; a mean over seeds needs runs of distinct seeds")
    seeds[tag(theirs)] = name
  return None


def _at(nested, dotted):
  """The value of a dotted key in nested dicts ("<missing>" where there is none)."""
  for part in dotted.split("."):
    nested = nested.get(part, "<missing>") if isinstance(nested, dict) else "<missing>"
  return nested


# Keys older workdirs recorded that no longer exist. text.allow_pickle was an opt-in to unpickle
# a file; it must come from the person running a command (--allow-pickle), never from a
# recorded config, so it is dropped unread.
RETIRED_KEYS = ("text.allow_pickle",)


def from_dict(d):
  """ConfigDict from a dict written by `to_dict`, over the defaults (tuples where they are)."""
  if not isinstance(d, dict):
    raise RSVQAError(f"from_dict: expected a dict of config sections, got {type(d).__name__}")
  config = base_config()
  d = json.loads(json.dumps(d))
  for key in RETIRED_KEYS:
    section, name = key.split(".")
    if isinstance(d.get(section), dict):
      d[section].pop(name, None)

  def merge(node, values, prefix):
    for k, v in values.items():
      if isinstance(v, dict):
        if k in node and not isinstance(node[k], ml_collections.ConfigDict):
          # ml_collections' own refusal is a two-line message naming its classes
          raise TypeError(f"{prefix}{k} is {short_repr(v)}, expected "
                          f"{describe_type(node.get_type(k))}")
        if k not in node:
          node[k] = ml_collections.ConfigDict()
        merge(node[k], v, f"{prefix}{k}.")
      else:
        old = node[k] if k in node else None
        try:
          node[k] = tuple(v) if isinstance(old, tuple) and isinstance(v, list) else v
        except TypeError:  # ml_collections refuses a value of another type than the key's
          raise TypeError(f"{prefix}{k} is {short_repr(v)}, expected "
                          f"{describe_type(node.get_type(k))}") from None
  merge(config, d, "")
  return config
