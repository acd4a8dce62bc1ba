"""The environment of a test's subprocess: it imports this checkout's rsvqa_jax (the checkout
first on PYTHONPATH), whatever the installed package points at."""
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def env(**more):
  """os.environ with this checkout first on PYTHONPATH, and `more` over it."""
  return dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), **more)
