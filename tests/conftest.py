"""One XLA compilation cache for the whole test session, shared with every subprocess.

Most of the suite's time is XLA compiling the same tiny configs again, in the test process and
in the `rsvqa-jax` subprocesses the CLI tests start. The cache lives in a folder made for this
session and removed at its end, so a session never reads what another one wrote. Set before
JAX is imported (JAX reads these variables then); a JAX_COMPILATION_CACHE_DIR already set is
kept. A process killed while writing an entry leaves it torn: JAX then warns and recompiles,
and the fault tests let their uninterrupted reference run write every entry first.
"""
import os
import shutil
import tempfile

_OWN_CACHE = None


def pytest_configure(config):
  global _OWN_CACHE
  if "JAX_COMPILATION_CACHE_DIR" not in os.environ:
    _OWN_CACHE = tempfile.mkdtemp(prefix="rsvqa_jax_tests_xla_")
    os.environ["JAX_COMPILATION_CACHE_DIR"] = _OWN_CACHE
  os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
  os.environ["JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES"] = "0"


def pytest_unconfigure(config):
  if _OWN_CACHE:
    shutil.rmtree(_OWN_CACHE, ignore_errors=True)
