"""Which bf16 matrix units the host CPU advertises (AMX, AVX512-BF16), read from /proc/cpuinfo.

Training in compute_dtype=bfloat16 pays off on a CPU only where these units exist: on a CPU
with neither (AVX2 alone), XLA:CPU's bf16 products run no faster than float32 and the casts
come on top (docs/performance/bf16_cpu.md). Training says so in one line, and the benchmarks
give bf16 rows their targets only where the units exist.
"""
BF16_FLAGS = ("amx_bf16", "avx512_bf16")


def _cpu_flags(cpuinfo_text=None):
  """The set of flags of /proc/cpuinfo's first `flags` line (or of `cpuinfo_text`); None when
  there is no such line to read."""
  if cpuinfo_text is None:
    try:
      with open("/proc/cpuinfo", encoding="utf-8") as f:
        cpuinfo_text = f.read()
    except OSError:
      return None
  for line in cpuinfo_text.splitlines():
    key, _, value = line.partition(":")
    if key.strip() == "flags":
      return set(value.split())
  return None


def bf16_units(cpuinfo_text=None):
  """{"amx_bf16": bool, "avx512_bf16": bool}: the bf16 matrix units the CPU advertises; False
  when unreadable."""
  flags = _cpu_flags(cpuinfo_text) or set()
  return {flag: flag in flags for flag in BF16_FLAGS}


def bf16_note(backend, compute_dtype, cpuinfo_text=None):
  """A one-line note when bf16 compute runs on a CPU without bf16 units, else None.

  None on other backends, in float32, and where the CPU's flags cannot be read (nothing is
  known, so nothing is claimed).
  """
  if backend != "cpu" or compute_dtype != "bfloat16":
    return None
  flags = _cpu_flags(cpuinfo_text)
  if flags is None or flags & set(BF16_FLAGS):
    return None
  return ("train.compute_dtype=bfloat16 on a CPU without bf16 units (no AMX, no AVX512-BF16): "
          "its products run no faster than float32 here, so float32 trains as fast or faster "
          "(docs/performance/bf16_cpu.md)")
