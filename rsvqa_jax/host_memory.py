"""Keep freed host memory for reuse, so XLA:CPU steps stop page-faulting (glibc only).

XLA:CPU allocates every execution's temporaries anew, with posix_memalign from its worker
threads. glibc serves each block this large with a fresh mmap from a thread arena, and the kernel
zero-fills every page of it on first touch, step after step. Measured on the 2-core CPU machine:
255,000 page faults (1 GB, 0.7 s of system time) per 4 s fine-tuned DistilBERT step, and 44,700
(183 MB) per fine-tuned Skip-thoughts step. With one arena that never maps large blocks
separately and never trims its top, a step reuses the pages the previous step freed: 0 faults.
Never means never: with the largest positive threshold (2 GiB - 1) a 12-layer BERT step still
gave its 1.9 GB temporary block back after each step and faulted it in again (480,000 faults,
10.7 instead of 6.8 s per step). Peak memory is unchanged; memory freed after the peak stays with
the process.

Must run before JAX starts its CPU threads (the first computation), which is why the command line
and the benchmark harness call it first. Set RSVQA_JAX_SYSTEM_MALLOC=1 to leave malloc as it is.
"""
import ctypes
import os
import platform

M_TRIM_THRESHOLD, M_MMAP_MAX, M_ARENA_MAX = -1, -4, -8  # glibc's mallopt parameter numbers
# A trim threshold of -1 never trims (mallopt(3)).
SETTINGS = ((M_ARENA_MAX, 1), (M_MMAP_MAX, 0), (M_TRIM_THRESHOLD, -1))
OPT_OUT = "RSVQA_JAX_SYSTEM_MALLOC"


def keep_freed_memory():
  """Applies SETTINGS with mallopt; True when glibc accepted all of them, else False."""
  if os.environ.get(OPT_OUT, "") not in ("", "0"):
    return False
  if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
    return False
  mallopt = ctypes.CDLL(None).mallopt
  return all([mallopt(param, value) == 1 for param, value in SETTINGS])
