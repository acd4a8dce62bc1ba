"""The CPU's bf16 units read from /proc/cpuinfo, and the one-line note bf16 training on a CPU
without them gets."""
from rsvqa_jax import cpu_units

INTEL_AMX = """processor\t: 0
model name\t: Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz
flags\t\t: fpu avx512f avx512_bf16 amx_bf16 amx_tile amx_int8
processor\t: 1
flags\t\t: fpu avx512f avx512_bf16 amx_bf16 amx_tile amx_int8
"""
AMD_AVX512_BF16 = "model name\t: AMD EPYC\nflags\t\t: fpu avx2 avx512f avx512_bf16 avx512_vnni\n"
AMD_AVX2 = "model name\t: AMD EPYC\nflags\t\t: fpu sse2 avx avx2 fma\n"


def test_bf16_units_read_from_cpuinfo_flags():
  assert cpu_units.bf16_units(INTEL_AMX) == {"amx_bf16": True, "avx512_bf16": True}
  assert cpu_units.bf16_units(AMD_AVX512_BF16) == {"amx_bf16": False, "avx512_bf16": True}
  assert cpu_units.bf16_units("flags : fpu avx2 amx_tile\n") == {"amx_bf16": False,
                                                                 "avx512_bf16": False}
  assert cpu_units.bf16_units("") == {"amx_bf16": False, "avx512_bf16": False}


def test_bf16_note_only_for_bf16_on_a_cpu_known_to_lack_the_units():
  note = cpu_units.bf16_note("cpu", "bfloat16", AMD_AVX2)
  assert note.startswith("train.compute_dtype=bfloat16 on a CPU without bf16 units")
  assert "\n" not in note
  assert cpu_units.bf16_note("cpu", "bfloat16", AMD_AVX512_BF16) is None
  assert cpu_units.bf16_note("cpu", "bfloat16", INTEL_AMX) is None
  assert cpu_units.bf16_note("cpu", "float32", AMD_AVX2) is None
  assert cpu_units.bf16_note("gpu", "bfloat16", AMD_AVX2) is None
  # No flags line (another OS, a container hiding it): nothing is known, nothing is claimed.
  assert cpu_units.bf16_note("cpu", "bfloat16", "model name\t: Apple M2\n") is None
