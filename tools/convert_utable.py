"""Write the Skip-thoughts word table once as a plain array, so it never needs unpickling again.

The original `utable.npy` is a pickled object array: loading it can run code, so the tool only
unpickles it on this explicit request, from a file you trust.

  python tools/convert_utable.py /models/skipthoughts/utable.npy /models/skipthoughts/utable_f32.npy
"""
import argparse
import os
import sys

from rsvqa_jax.errors import RSVQAError
from rsvqa_jax.models.skipthoughts_params import convert_utable


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("src", help="the original (pickled) utable.npy")
  parser.add_argument("dst", help="where to write the float32 table (utable_f32.npy is read first)")
  args = parser.parse_args(argv)
  if not os.path.exists(args.src):
    print(f"convert_utable: error: {args.src}: no such file", file=sys.stderr)
    return 2
  try:
    convert_utable(args.src, args.dst)
  except (RSVQAError, ValueError, OSError) as e:
    print(f"convert_utable: error: {args.src}: {e}", file=sys.stderr)
    return 2
  print(f"wrote {args.dst}")
  return 0


if __name__ == "__main__":
  sys.exit(main())
