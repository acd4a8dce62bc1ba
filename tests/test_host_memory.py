"""keep_freed_memory: XLA:CPU executions stop page-faulting their temporaries in afresh."""
import json
import os
import subprocess
import sys

import pytest

from rsvqa_jax import host_memory

# A jit with two 64 MB tanh temporaries: page faults of each of 30 calls. XLA frees a call's
# temporaries from its own threads around the time the result is ready; the pause lets that
# land before the next call allocates (as the host's batch preparation does in a train loop).
# With the settings the heap then settles within 5 calls (measured over 4 runs) and later calls
# fault nothing; without the pause a late free now and then makes a call grow the heap again.
PROBE = """
import json, resource, sys, time
from rsvqa_jax import host_memory
kept = host_memory.keep_freed_memory() if sys.argv[1] == "keep" else False
import jax, jax.numpy as jnp
f = jax.jit(lambda x, v: jnp.tanh(x) @ v + jnp.tanh(x).T @ v)
x, v = jnp.ones((4096, 4096)), jnp.ones(4096)
faults = []
for _ in range(30):
  before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
  f(x, v).block_until_ready()
  time.sleep(0.05)
  faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print(json.dumps({"kept": kept, "faults": faults}))
"""
TEMP_PAGES = 2 * 4096 * 4096 * 4 // 4096


def _run(code, *argv):
  """The JSON last printed by `code` in a fresh Python, without the opt-out set."""
  env = {k: v for k, v in os.environ.items() if k != host_memory.OPT_OUT}
  env["JAX_PLATFORMS"] = "cpu"
  out = subprocess.run([sys.executable, "-c", code, *argv], env=env, capture_output=True,
                       text=True, timeout=300, check=True)
  return json.loads(out.stdout.strip().splitlines()[-1])


def _probe(mode):
  return _run(PROBE, mode)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc mallopt")
def test_kept_memory_stops_the_page_faults_of_each_step():
  system, kept = _probe("system"), _probe("keep")
  assert not system["kept"] and kept["kept"]
  # Without it every call faults its temporaries in again; with it the last calls reuse pages.
  assert min(system["faults"][-10:]) > TEMP_PAGES // 2
  assert max(kept["faults"][-10:]) < TEMP_PAGES // 100


# A freed block of 2.25 GiB, larger than any positive trim threshold mallopt takes: with the
# settings the heap keeps it, so allocating it again faults no page in afresh.
BIG_BLOCK = """
import ctypes, json, resource
from rsvqa_jax import host_memory
host_memory.keep_freed_memory()
libc = ctypes.CDLL(None)
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
libc.memset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
size = 9 << 28
faults = []
for _ in range(2):
  before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
  block = libc.malloc(size)
  libc.memset(block, 1, size)
  libc.free(block)
  faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print(json.dumps(faults))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc mallopt")
def test_a_freed_block_over_2_gib_stays_with_the_process():
  first, second = _run(BIG_BLOCK)
  pages = (9 << 28) // 4096
  assert first > pages // 2 and second < pages // 100


def test_opt_out_leaves_malloc_alone(monkeypatch):
  monkeypatch.setenv(host_memory.OPT_OUT, "1")
  assert host_memory.keep_freed_memory() is False
