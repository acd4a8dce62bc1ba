"""Timing and reporting helpers shared by the benchmark families.

Every figure is measured over `repeats` rounds in which the competing implementations run one
after the other (alternated), so a noisy neighbour slows both sides of a ratio alike. A figure is
summarised as median / min / max over the rounds; ratios are computed per round (paired) before
summarising.
"""
import os
import platform
import statistics
import time

from rsvqa_jax import cpu_units, storage


def _matrices(n, dtype):
  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  key_a, key_b = jax.random.split(jax.random.key(0))
  a = jax.random.normal(key_a, (n, n), dtype)
  b = (jax.random.normal(key_b, (n, n), jnp.float32) / jnp.sqrt(n)).astype(dtype)
  return a, b


def chain_dots(x, w, chain):
  """`chain` dots x <- x @ w (traced: for use inside a jit)."""
  import jax  # pylint: disable=g-import-not-at-top
  return jax.lax.fori_loop(0, chain, lambda _, y: y @ w, x)


FFN_SHAPE = (1680, 768, 3072)  # a BERT FFN product over 70 x 24 tokens: XLA:CPU's fastest here


def _seconds(f, args):
  """Seconds of one call of a compiled function, until its outputs are ready."""
  import jax  # pylint: disable=g-import-not-at-top
  return time_block(lambda: jax.block_until_ready(f(*args)), 1)


def product_operands(m, k, n, dtype=None, seed=1):
  """Random operands (x [m, k], w [k, n]) of one matmul shape, in `dtype` (default float32)."""
  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  key_x, key_w = jax.random.split(jax.random.key(seed))
  dtype = jnp.float32 if dtype is None else dtype
  return jax.random.normal(key_x, (m, k), dtype), jax.random.normal(key_w, (k, n), dtype)


def f32_peak_probe(mode, torch=None, dtype=None):
  """(peak_probe, its settings) of the CPU families: tiny in toy mode, else the defaults; the
  best of JAX and PyTorch (`torch`, the module) when PyTorch is given. `dtype` default float32."""
  n, also = (256, ()) if mode == "toy" else (2048, (FFN_SHAPE,))
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  name = jnp.dtype(jnp.float32 if dtype is None else dtype).name
  return peak_probe(n, dtype=dtype, also=also, torch=torch), {
      "n": n, "chain": 2, "also": also, "dtype": name,
      "libraries": ["jax", "torch"] if torch is not None else ["jax"]}


def peak_probe(n=2048, chain=2, dtype=None, also=(FFN_SHAPE,), torch=None):
  """A callable() -> the best matmul FLOP/s of `chain` chained n x n dots and of each [m, k] @
  [k, n'] product in `also`, in `dtype` (default float32; compiled once here).

  No single shape shows a machine's peak. On the 2-core CPU a 1024 square chain stays near 128
  GFLOP/s and a 2048 one near 133, while the BERT FFN product runs at about 147: the best of
  them is the peak the train steps' fractions are taken against. No single library does
  either: with `torch` (the module), PyTorch's products of the same shapes are probed too
  (alternately first and second) and the peak is the best of both. bf16 products accumulate in
  float32 on a CPU's JAX side, the way XLA:CPU reaches the bf16 units (models/matmul).
  """
  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  dtype = jnp.float32 if dtype is None else dtype
  accumulate = ({"preferred_element_type": jnp.float32}
                if dtype == jnp.bfloat16 and jax.default_backend() == "cpu" else {})
  dot = lambda x, w: jnp.matmul(x, w, **accumulate).astype(dtype)
  a, b = _matrices(n, dtype)
  probes = [(jax.jit(lambda x, w: jax.lax.fori_loop(0, chain, lambda _, y: dot(y, w), x)),
             (a, b), 2.0 * n**3 * chain)]
  for m, k, n_out in also:
    probes.append((jax.jit(dot), product_operands(m, k, n_out, dtype), 2.0 * m * k * n_out))
  for f, args, _ in probes:
    f(*args).block_until_ready()
  libraries = {"jax": lambda: max(flops / _seconds(f, args) for f, args, flops in probes)}
  if torch is not None:
    libraries["torch"] = _torch_peak(torch, n, chain, jnp.dtype(dtype).name, also)
  calls = [0]

  def rate():
    calls[0] += 1
    return max(libraries[name]() for name in round_order(libraries, calls[0] - 1))

  return rate


def _torch_peak(torch, n, chain, dtype_name, also):
  """A callable() -> PyTorch's best FLOP/s over the shapes of `peak_probe`."""
  dtype = getattr(torch, dtype_name)
  generator = torch.Generator().manual_seed(0)
  square = (torch.randn(n, n, generator=generator).to(dtype),
            (torch.randn(n, n, generator=generator) / n**0.5).to(dtype))
  shapes = list(also)
  products = [(torch.randn(m, k, generator=generator).to(dtype),
               torch.randn(k, n_out, generator=generator).to(dtype)) for m, k, n_out in shapes]

  def chained(x, w):
    for _ in range(chain):
      x = x @ w
    return x

  runs = [(lambda: chained(*square), 2.0 * n**3 * chain)]
  runs += [(lambda xw=xw: torch.matmul(*xw), 2.0 * m * k * n_out)
           for xw, (m, k, n_out) in zip(products, shapes)]
  for run, _ in runs:
    run()
  return lambda: max(flops / time_block(run, 1) for run, flops in runs)


def bandwidth_probe(n=1 << 23, passes=8):
  """A callable() -> bytes/s of `passes` STREAM triads y <- x + 1.5 y over n float32s in one jit
  call (12 bytes per element and pass: two reads and one write, as STREAM counts them)."""
  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  x, y = jnp.ones(n, jnp.float32), jnp.zeros(n, jnp.float32)
  triads = jax.jit(lambda x, y: stream(x, y, passes))
  triads(x, y).block_until_ready()

  def rate():
    return 12.0 * n * passes / _seconds(triads, (x, y))

  return rate


def stream(x, y, passes):
  """`passes` in-place triads y <- x + 1.5 y (traced: for use inside a jit)."""
  import jax  # pylint: disable=g-import-not-at-top
  return jax.lax.fori_loop(0, passes, lambda _, z: x + 1.5 * z, y)


def overlap_probe(n=1024, chain=2, elements=1 << 23, passes=8):
  """A callable() -> {"matmul", "stream", "together"} seconds: a dot chain, the bandwidth
  probe's triads (about as long as the chain on the 2-core CPU), and both in one jit call,
  where XLA may run them at once. together close to matmul + stream says a step's matmuls and
  its memory-bound updates cannot hide each other on this machine: their minimum times add up."""
  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  a, b = _matrices(n, jnp.float32)
  x, y = jnp.ones(elements, jnp.float32), jnp.zeros(elements, jnp.float32)
  calls = {"matmul": (jax.jit(lambda a, b: chain_dots(a, b, chain)), (a, b)),
           "stream": (jax.jit(lambda x, y: stream(x, y, passes)), (x, y)),
           "together": (jax.jit(lambda a, b, x, y: (chain_dots(a, b, chain),
                                                    stream(x, y, passes))), (a, b, x, y))}
  for f, args in calls.values():
    jax.block_until_ready(f(*args))

  def seconds():
    return {name: _seconds(f, args) for name, (f, args) in calls.items()}

  return seconds


def intra_op_threads():
  """Threads XLA's CPU client uses for one op: one per CPU this process may run on.

  XLA:CPU sizes its intra-op Eigen pool from the schedulable CPUs (the affinity mask), so the
  PyTorch side is given the same number with torch.set_num_threads.
  """
  return len(os.sched_getaffinity(0))


def configure_torch(torch):
  """Same intra-op thread count as XLA; returns what was set."""
  n = intra_op_threads()
  torch.set_num_threads(n)
  return {"torch.set_num_threads": n, "torch.get_num_threads": torch.get_num_threads(),
          "xla_intra_op_threads": n, "how": "len(os.sched_getaffinity(0)) for both"}


def summarize(values, unit=""):
  values = [float(v) for v in values]
  return {"median": statistics.median(values), "min": min(values), "max": max(values),
          "repeats": len(values), "unit": unit, "values": values}


def paired_ratio(numerators, denominators, unit="x"):
  """Round-by-round ratios num[i] / den[i], summarised."""
  return summarize([n / d for n, d in zip(numerators, denominators)], unit)


def ratio_text(summary):
  """A paired ratio's summary as printed while a benchmark runs: "1.234 (1.000-1.500)"."""
  return f"{summary['median']:.3f} ({summary['min']:.3f}-{summary['max']:.3f})"


def report_pair(measured, key, out):
  """Writes {"machine", "cpu", **measured} to `out` and prints the paired ratio `key` of it."""
  info = machine()
  result = {"machine": info, "cpu": cpu_label(info), **measured}
  r = result[key]
  print(f"{result['cpu']}: {key} {ratio_text(r)}")
  storage.write_json(out, result)
  return result


def time_block(run, steps):
  """Seconds for `steps` calls of `run()`; `run` must block until its work is done."""
  start = time.perf_counter()
  for _ in range(steps):
    run()
  return time.perf_counter() - start


def timed_blocks(run_once, block_s):
  """A callable() -> seconds per call of `run_once` (which blocks until its work is done), over
  a block of as many calls as take about `block_s` seconds (counted from one call, made here)."""
  calls = max(1, round(block_s / time_block(run_once, 1)))
  return lambda: time_block(run_once, calls) / calls


def round_order(names, round_index):
  """The runners' order in round `round_index` (0-based): as given in the 1st, 3rd, ... round,
  reversed in the 2nd, 4th, ..., so neither side (JAX listed first, PyTorch after) always runs
  first, on a cache or a turbo budget the other left."""
  names = list(names)
  return names if round_index % 2 == 0 else names[::-1]


def alternate(runners, repeats, first_round=0):
  """{name: [seconds per round]} running each runner once per round, in turn (`round_order`;
  rounds numbered from `first_round`, so rounds that continue an earlier one keep alternating).

  runners: {name: callable() -> seconds}. A runner that raises is dropped from later rounds and
  its error recorded under the key ("error", name).
  """
  times = {name: [] for name in runners}
  errors = {}
  for r in range(first_round, first_round + repeats):
    for name in round_order(runners, r):
      run = runners[name]
      if name in errors:
        continue
      try:
        times[name].append(run())
      except Exception as e:  # pylint: disable=broad-except
        errors[name] = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
  return {k: v for k, v in times.items() if v}, errors


def cpu_model(cpuinfo="/proc/cpuinfo"):
  """The CPU's model name, then its family and model numbers where cpuinfo gives them.

  The name alone can hide a 2x difference: the 'AMD EPYC' machines here came with float32
  matmul peaks of about 200 and 430 GFLOP/s on their 2 cores.
  """
  fields = {}
  try:
    with open(cpuinfo, encoding="utf-8") as f:
      for line in f:
        key, _, value = line.partition(":")
        if not key.strip():
          break  # the first processor's block ends at its blank line
        fields.setdefault(key.strip(), value.strip())
  except OSError:
    pass
  name = fields.get("model name") or platform.processor() or platform.machine()
  if "cpu family" in fields and "model" in fields:
    return f"{name}, family {fields['cpu family']} model {fields['model']}"
  return name


def cpu_label(info):
  """'<model> (AMX: yes/no, AVX512-BF16: yes/no)': how every results table names its CPU.

  Results measured before the bf16 units were recorded say so rather than 'no'.
  """
  if "bf16_units" not in info:
    return f"{info['cpu']} (AMX, AVX512-BF16: not recorded)"
  yes = lambda flag: "yes" if info["bf16_units"].get(flag) else "no"
  return f"{info['cpu']} (AMX: {yes('amx_bf16')}, AVX512-BF16: {yes('avx512_bf16')})"


def machine():
  """The machine and software a result was measured on."""
  import jax  # pylint: disable=g-import-not-at-top
  info = {"cpu": cpu_model(), "bf16_units": cpu_units.bf16_units(), "cores": os.cpu_count(),
          "usable_cpus": intra_op_threads(),
          "platform": platform.platform(), "python": platform.python_version(),
          "jax": jax.__version__, "jax_backend": jax.default_backend(),
          "devices": [str(d) for d in jax.devices()]}
  try:
    import torch  # pylint: disable=g-import-not-at-top
    info["torch"] = torch.__version__
  except ImportError:
    info["torch"] = None
  try:
    info["load_average"] = os.getloadavg()
  except OSError:
    pass
  return info


def target(name, measured, op, threshold, note=""):
  """A target row: PASS / MISS from a summary's median (N/A when not measured)."""
  if measured is None:
    return {"name": name, "measured": None, "op": op, "threshold": threshold, "status": "N/A",
            "note": note}
  value = measured["median"] if isinstance(measured, dict) else float(measured)
  ok = value >= threshold if op == ">=" else value <= threshold
  return {"name": name, "measured": measured, "op": op, "threshold": threshold,
          "status": "PASS" if ok else "MISS", "note": note}
