"""`rsvqa-jax convert`: turn an original checkpoint into a file of our parameter tree.

The output is a safetensors file (`--out X.safetensors`, flattened "a.b.c" keys, the
architecture in its header so `load_resnet` can read it back); no other form is written, as
nothing would read it. Every key, shape and value is checked on the way in: a mismatch names
the key and shapes, a NaN or an inf the key (a negative BatchNorm variance too). The file
written is then read back, as a later run would read it, and compared array by array; when that
fails it is removed, so no run meets a converted file that it refuses or reads otherwise.
"""
import json
import os

import numpy as np

from rsvqa_jax import errors
from rsvqa_jax.errors import RSVQAError

KINDS = ("resnet", "bert", "skipthoughts")


def add_arguments(parser):
  parser.add_argument("--kind", required=True, choices=KINDS, help="model family of --src")
  parser.add_argument("--src", required=True,
                      help="resnet: torchvision .pth/.safetensors, HF microsoft/resnet-* or timm "
                           "folder; bert: HF folder; skipthoughts: folder with uni_skip.npz, "
                           "utable.npy (or utable_f32.npy), dictionary.txt")
  parser.add_argument("--out", required=True,
                      help="FILE.safetensors to write")
  parser.add_argument("--depth", type=int, choices=(18, 34, 50, 101, 152),
                      help="resnet depth (default: inferred from the checkpoint)")
  parser.add_argument("--data", help="skipthoughts: dataset folder whose questions give the words kept")
  parser.add_argument("--dataset", help="skipthoughts: dataset layout lr/hr/xben (default: detected)")
  parser.add_argument("--allow-pickle", action="store_true",
                      help="skipthoughts: unpickle a pickled utable.npy (trusted files only)")


def _resnet(args):
  from rsvqa_jax.models import resnet_params  # pylint: disable=g-import-not-at-top
  model = resnet_params.load_resnet(args.src, args.depth)
  return model, resnet_params.resnet_metadata(model), f"ResNet-{model.depth}"


def _bert(args):
  """Through `pretrained_bert`, as `train` loads it: the tokenizer must fit the word table too."""
  from rsvqa_jax.train import model_builder  # pylint: disable=g-import-not-at-top
  model, _ = model_builder.pretrained_bert(args.src)
  with open(os.path.join(args.src, "config.json"), encoding="utf-8") as f:
    config = f.read()
  return model, {"format": "rsvqa_jax", "kind": "bert", "config": config}, "BERT-family encoder"


def _skipthoughts(args):
  from rsvqa_jax.data import rsvqa_json  # pylint: disable=g-import-not-at-top
  from rsvqa_jax.train import inputs, model_builder  # pylint: disable=g-import-not-at-top
  if not args.data:
    raise RSVQAError("--kind skipthoughts needs --data (the dataset whose words are kept)")
  words = inputs.dataset_words(rsvqa_json.read_dataset(args.data, args.dataset))
  model, tokenizer = model_builder.pretrained_skipthoughts(args.src, words,
                                                          allow_pickle=args.allow_pickle)
  meta = {"format": "rsvqa_jax", "kind": "skipthoughts", "vocab": json.dumps(tokenizer.vocab)}
  return model, meta, (f"Skip-thoughts ({len(words)} words, {len(tokenizer.unknown_words)} not "
                       "in the dictionary)")


def _check_out(args):
  """--out must be a new .safetensors file (the one form `load_resnet` reads back; an orbax folder
  was read by nothing), neither in nor on --src (the weights it converts)."""
  src, out = os.path.realpath(args.src), os.path.realpath(args.out)
  if not args.out.endswith(".safetensors"):
    raise RSVQAError(f"--out {args.out}: give a file path ending in .safetensors (lower case); "
                     "convert writes no other form")
  if out == src or out.startswith(src.rstrip(os.sep) + os.sep):
    raise RSVQAError(f"--out {args.out}: inside --src {args.src}; write the converted weights "
                     "elsewhere")
  parent = os.path.dirname(out)
  if not os.path.isdir(parent):
    raise RSVQAError(f"--out {args.out}: its folder {parent} {errors.not_a_folder(parent)}")
  if os.path.isdir(out):
    raise RSVQAError(f"--out {args.out}: is a folder; give a .safetensors file path")
  if os.path.lexists(out):
    raise RSVQAError(f"--out {args.out}: exists; remove it or give another path")


OPTIONS_OF = {"depth": "resnet", "data": "skipthoughts", "dataset": "skipthoughts",
              "allow_pickle": "skipthoughts"}  # the --kind each option belongs to


def _reload_resnet(path, model, metadata):  # pylint: disable=unused-argument
  """Through `load_resnet`, the loader of image.checkpoint (architecture from the header)."""
  from rsvqa_jax.models import resnet_params  # pylint: disable=g-import-not-at-top
  return resnet_params.load_resnet(path)


def _reload_into(path, model, metadata):
  """No loader reads a converted BERT or Skip-thoughts file yet: check the header, then fill
  `model` with `load_into`, which names a missing, extra, mis-shaped or non-finite key."""
  from rsvqa_jax.models import checkpoints  # pylint: disable=g-import-not-at-top
  tree, meta = checkpoints.load_safetensors(path)
  if meta != metadata:
    changed = sorted(k for k in set(meta) | set(metadata) if meta.get(k) != metadata.get(k))
    raise RSVQAError(f"{path}: header field {changed[0]!r} reads back other than written")
  checkpoints.load_into(model, tree, path)
  return model


def _read_back(path, model, metadata, reload):
  """Reads --out back as a later run would and compares every array with what was converted, so
  a file the loader refuses or reads otherwise fails now, not at train time."""
  from rsvqa_jax.models import checkpoints  # pylint: disable=g-import-not-at-top
  want = checkpoints.flatten(checkpoints.state_tree(model))
  got = checkpoints.flatten(checkpoints.state_tree(reload(path, model, metadata)))
  for key, value in want.items():
    if key not in got or not np.array_equal(np.asarray(got[key]), np.asarray(value)):
      raise RSVQAError(f"{path}: key {key!r} reads back other than it was converted")


KIND_OF = {"resnet": (_resnet, _reload_resnet), "bert": (_bert, _reload_into),
           "skipthoughts": (_skipthoughts, _reload_into)}  # (convert, read back) per --kind


def run(args):
  from rsvqa_jax.models import checkpoints  # pylint: disable=g-import-not-at-top
  for option, kind in OPTIONS_OF.items():
    if getattr(args, option) and args.kind != kind:
      raise RSVQAError(f"--{option.replace('_', '-')} applies to --kind {kind} only")
  _check_out(args)
  convert, reload = KIND_OF[args.kind]
  model, metadata, label = convert(args)
  tree = checkpoints.state_tree(model)
  flat = checkpoints.flatten(tree)
  checkpoints.save_safetensors(args.out, tree, metadata)
  try:
    _read_back(args.out, model, metadata, reload)
  except RSVQAError:
    os.remove(args.out)  # never leave a file behind that a later run would refuse or misread
    raise
  count = sum(v.size for v in flat.values())
  print(f"{label}: {len(flat)} arrays, {count:,} values -> {args.out}")
