"""XLA:CPU flag variants of the bf16 train steps, each in processes of its own, against PyTorch.

  python -m benchmarks.xla_flags [--size quick] [--rows LM:frozen|finetuned:FUSION,...]
                                 [--variant NAME=FLAGS ...] [--rounds 5] [--block-s 0.3]
                                 [--blocks 5] --out DIR

XLA reads XLA_FLAGS once per process, so each variant is a worker process started with its own
XLA_FLAGS (and nothing else changed); PyTorch bf16 autocast eager (benchmarks.torch_reference
through train_steps.TorchStep) is a worker of its own. Every round starts a fresh worker per
contender, in an order rotated by one each round; the "default" worker (XLA_FLAGS="") also
measures the STREAM-triad bandwidth and the bf16 matmul peak (timing.bandwidth_probe and
f32_peak_probe: the best of JAX and PyTorch) at the start and at the end of the round. Then, row
by row, every worker builds and compiles the row's bf16 train step (train_steps.jax_model /
torch_model, JaxStep with compute_dtype bfloat16), and only when all are warm do they time it,
one after the other: `blocks` blocks of about `block_s` seconds of steps each, the median block's
seconds per step being that contender's time in the round. Ratios are paired per round: torch
eager / variant (> 1: JAX faster) and default / variant (> 1: the variant faster), then summarised
as median (min-max) over the rounds.

In the first round each JAX worker also reports the loss of its first three steps (same seed,
batch and dropout keys in every variant: a flag that changes the numbers shows here) and which
library computes each product of its compiled step (`library_census`, read from the HLO text).

Frozen rows (fusion + classifier on cached vectors) are costed as memory-bound steps: bytes moved
per step = every trainable parameter's Adam traffic (train_steps.ADAM_BYTES_PER_PARAM: read p, g,
m, v; write p, m, v) + its compulsory product traffic (the forward reads each float32 master
weight, the weight-gradient product writes each float32 gradient: 8 bytes) + the batch's input
arrays, at the triad bandwidth measured in the same round. Every row also gets train_steps'
roofline: its analytic matmul FLOPs at the measured bf16 peak plus the Adam term.

Writes DIR/results.json and DIR/results.md (pymdownx snippet sections machine, variants, targets,
xla_flags); each worker's stderr goes to --logs (default DIR/logs/).
"""
import argparse
import collections
import contextlib
import json
import math
import os
import re
import statistics
import subprocess
import sys
import time

from benchmarks import hlo_dots, run, timing

PROTOCOL = "@@xla_flags "  # prefix of every line a worker answers on its stdout
DEFAULT_ROWS = ("skipthoughts:frozen:mult", "skipthoughts:frozen:mutan",
                "distilbert:frozen:mult", "distilbert:frozen:mutan",
                "skipthoughts:finetuned:mult", "distilbert:finetuned:mult")
# What each flag set selects in jaxlib 0.10.2 (read from the compiled HLO, `library_census`):
DEFAULT_VARIANTS = {
    # YNNPACK for the products (bf16 x bf16 -> f32 where the operands are bf16), Eigen for what
    # YNNPACK does not take, XLA's own loop fusions for the rest (Adam: 3 fusions per parameter).
    "default": "",
    # YNNPACK off: every product in Eigen, which converts bf16 operands to float32 first.
    "eigen": "--xla_cpu_experimental_ynn_fusion_type=",
    # oneDNN fusions for the products, YNNPACK off (with it on, the two split the products).
    # XLA converts the bf16 operands to float32 first: oneDNN runs f32 brgemm (ONEDNN_VERBOSE).
    "onednn": ("--xla_cpu_use_onednn=true "
               "--xla_cpu_experimental_onednn_fusion_type=LIBRARY_FUSION_TYPE_INDIVIDUAL_DOT "
               "--xla_cpu_experimental_ynn_fusion_type="),
    # YNNPACK also takes the elementwise fusions (the Adam update among them).
    "ynn_eltwise": "--xla_cpu_experimental_ynn_fusion_type=+LIBRARY_FUSION_TYPE_ELTWISE",
    # XLA:CPU's multi-output fusion: m, v and the parameter of a leaf in one loop fusion.
    "multi_output": "--xla_backend_extra_options=xla_cpu_use_multi_output_fusion",
}
# PyTorch bf16 autocast eager, as benchmarks.train_steps runs it, and with its OpenMP threads
# sleeping while they wait: on a shared, oversubscribed 2-core machine libgomp's spinning
# threads made the same step 3-5x slower (vs_torch_eager is taken against the faster per round).
TORCH_CONTENDERS = {"torch": {}, "torch_passive": {"OMP_WAIT_POLICY": "PASSIVE"}}
MEMORY_GOAL = 0.7  # issue 26: frozen heads at >= 0.7 of their memory roofline
TORCH_GOAL = 1.0  # issue 26: bf16 >= 1.0x torch autocast eager on every row


def parse_row(spec):
  """'skipthoughts:frozen:mult' -> ('skipthoughts', True, 'mult')."""
  lm, mode, fusion = spec.split(":")
  if mode not in ("frozen", "finetuned"):
    raise ValueError(f"row {spec!r}: mode must be frozen or finetuned")
  return lm, mode == "frozen", fusion


def parse_variant(spec):
  """'NAME=FLAGS' -> (NAME, FLAGS); FLAGS may be empty ('default=')."""
  name, sep, flags = spec.partition("=")
  if not sep or not name:
    raise argparse.ArgumentTypeError(f"variant {spec!r}: write NAME=FLAGS")
  return name, flags


# -- which library computes each product --------------------------------------------------------

_KIND = re.compile(r'"kind":"(__\w+)"')
_LIBRARIES = {"__ynn_fusion": "YNNPACK", "__onednn_fusion": "oneDNN", "__xnn_fusion": "XNNPACK"}


def library_census(hlo_text):
  """{"LIBRARY A x B -> C": {"ops": n, "flops": f}} over the products of a compiled XLA:CPU
  module: a plain `dot` is Eigen, a library fusion is named by its backend kind, any other fusion
  around a dot is XLA's own emitter; A, B, C are the dtypes the product itself reads and writes
  (a bf16 operand converted to float32 before the product reads as f32). Products inside a loop
  body (a scan) count once."""
  dots = hlo_dots.module_dots(hlo_text)
  fused, kinds = set(), {}
  for line in hlo_text.splitlines():
    m = hlo_dots._FUSION.match(line)  # pylint: disable=protected-access
    if m:
      fused.add(m.group(2))
      kind = _KIND.search(line)
      kinds[m.group(1)] = _LIBRARIES.get(kind.group(1), kind.group(1)) if kind else "XLA fusion"
  inside, current = set(), None
  for line in hlo_text.splitlines():
    head = hlo_dots._COMPUTATION.match(line)  # pylint: disable=protected-access
    if head:
      current = head.group(1)
      continue
    name = hlo_dots._DEFINITION.match(line)  # pylint: disable=protected-access
    if name and current in fused:
      inside.add(name.group(1))
  census = collections.defaultdict(lambda: {"ops": 0, "flops": 0.0})
  for name, (label, flops) in dots.items():
    if name in inside:
      continue
    library = kinds.get(name, "Eigen")
    operands = re.findall(r"(\w+)\[", label)
    key = f"{library} {operands[0]} x {operands[1]} -> {operands[2]}"
    census[key]["ops"] += 1
    census[key]["flops"] += flops
  return dict(census)


def census_line(census):
  """'YNNPACK bf16 x bf16 -> f32 71%, Eigen f32 x f32 -> f32 29%': shares of static FLOPs."""
  total = sum(c["flops"] for c in census.values()) or 1.0
  return ", ".join(f"{k} {100 * c['flops'] / total:.0f}% ({c['ops']})" for k, c in
                   sorted(census.items(), key=lambda kv: -kv[1]["flops"]))


# -- worker side --------------------------------------------------------------------------------


class _Worker:
  """Answers the parent's commands (one JSON object per line) for one contender."""

  def __init__(self, kind, size_mode, reply):
    self.kind, self.mode, self.reply = kind, size_mode, reply
    from benchmarks import inputs, train_steps  # pylint: disable=g-import-not-at-top
    self.inputs, self.train_steps = inputs, train_steps
    self.size = train_steps.sizes(size_mode)
    self.questions = inputs.make_questions(inputs.BATCH)
    self.torch = None
    if kind == "torch":
      import torch  # pylint: disable=g-import-not-at-top
      self.torch = torch
      self.threads = timing.configure_torch(torch)
    else:
      self.threads = {"xla_intra_op_threads": timing.intra_op_threads()}
    self.steps = {}

  def hello(self):
    import jax  # pylint: disable=g-import-not-at-top
    return {"kind": self.kind, "pid": os.getpid(), "xla_flags": os.environ.get("XLA_FLAGS"),
            "jax": jax.__version__, "torch": self.torch.__version__ if self.torch else None,
            "threads": self.threads}

  def build(self, row, census=False, losses=False, block_s=0.3):
    import jax  # pylint: disable=g-import-not-at-top
    import numpy as np  # pylint: disable=g-import-not-at-top
    lm, frozen, fusion = parse_row(row)
    ts = self.train_steps
    q_dim = ts.question_dim(lm, self.size)
    batch_np = ts.batch_for(lm, frozen, q_dim, self.questions, self.inputs.BATCH)
    out = {"input_bytes": int(sum(np.asarray(v).nbytes for v in batch_np.values())),
           "tokens": list(batch_np["tokens"].shape) if "tokens" in batch_np else None}
    if self.kind == "torch":
      model = ts.torch_model(lm, frozen, fusion, self.size, self.questions)
      out["params"] = sum(p.numel() for p in model.parameters() if p.requires_grad)
      step = ts.TorchStep(model, batch_np, False, "cpu", self.torch.bfloat16)
      out["warmup_s"] = step.warmup()
    else:
      model, _ = ts.jax_model(lm, frozen, fusion, self.size, self.questions)
      step = ts.JaxStep(model, frozen, batch_np, compute_dtype="bfloat16")
      out["params"] = step.trainable_params()
      if census:
        out["census"] = library_census(
            step.step.lower(step.state, step.batch).compile().as_text())
      start = time.perf_counter()
      step.run_one()  # the first step compiles (warm-up)
      trace = [step.metrics["loss"]]
      for _ in range(2 if losses else 0):
        step.run_one()
        trace.append(step.metrics["loss"])
      jax.block_until_ready(step.metrics)
      out["warmup_s"] = time.perf_counter() - start
      if losses:
        out["losses"] = [float(x) for x in trace]
    one = step.block(1)
    out["steps_per_block"] = max(1, round(block_s / one))
    self.steps[row] = (step, out["steps_per_block"])
    return out

  def time(self, row, blocks):
    step, n = self.steps[row]
    seconds = [step.block(n) / n for _ in range(blocks)]
    return {"step_s": seconds, "median_step_s": statistics.median(seconds), "steps_per_block": n}

  def drop(self, row):
    import gc  # pylint: disable=g-import-not-at-top
    self.steps.pop(row, None)
    gc.collect()
    return {}

  def probe(self):
    """Two STREAM-triad bandwidths and two bf16 matmul peaks (best of JAX and PyTorch)."""
    import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
    if not hasattr(self, "_probes"):
      import torch  # pylint: disable=g-import-not-at-top
      timing.configure_torch(torch)
      toy = self.mode == "toy"
      peak, config = timing.f32_peak_probe("toy" if toy else "quick", torch, jnp.bfloat16)
      self._probes = (timing.bandwidth_probe(1 << 16 if toy else 1 << 23), peak, config)
    bandwidth, peak, config = self._probes
    return {"bandwidth_B_s": [bandwidth() for _ in range(2)],
            "bf16_peak_flop_s": [peak() for _ in range(2)], "peak_config": config}


def worker_main(kind, size_mode):
  """The worker loop: protocol lines on the real stdout, everything else printed to stderr."""
  from rsvqa_jax import host_memory  # pylint: disable=g-import-not-at-top
  host_memory.keep_freed_memory()  # before JAX starts its threads, as benchmarks.run does
  proto = os.fdopen(os.dup(1), "w", encoding="utf-8")
  os.dup2(2, 1)

  def reply(obj):
    proto.write(PROTOCOL + json.dumps(obj) + "\n")
    proto.flush()

  worker = _Worker(kind, size_mode, reply)
  reply({"ok": worker.hello()})
  for line in sys.stdin:
    command = json.loads(line)
    name = command.pop("cmd")
    if name == "quit":
      reply({"ok": {}})
      return
    try:
      reply({"ok": getattr(worker, name)(**command)})
    except Exception as e:  # pylint: disable=broad-except
      import traceback  # pylint: disable=g-import-not-at-top
      traceback.print_exc()
      reply({"error": f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"})


# -- parent side --------------------------------------------------------------------------------


class Contender:
  """A worker process; `call(cmd, **args)` -> its answer, or raises RuntimeError."""

  def __init__(self, name, kind, env_updates, size_mode, log_path):
    env = {**os.environ, **env_updates}
    self.name, self.env_updates = name, env_updates
    self.log = open(log_path, "w", encoding="utf-8")  # pylint: disable=consider-using-with
    self.proc = subprocess.Popen(  # pylint: disable=consider-using-with
        [sys.executable, "-m", "benchmarks.xla_flags", "--worker", kind, "--size", size_mode],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, env=env, text=True,
        cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    self.info = None

  def _read(self):
    for line in self.proc.stdout:
      if line.startswith(PROTOCOL):
        answer = json.loads(line[len(PROTOCOL):])
        if "error" in answer:
          raise RuntimeError(answer["error"])
        return answer["ok"]
    raise RuntimeError(f"worker {self.name} exited (code {self.proc.wait()}); see "
                       f"{self.log.name}")

  def hello(self):
    self.info = self._read()
    return self.info

  def call(self, cmd, **args):
    if self.proc.poll() is not None:
      raise RuntimeError(f"worker {self.name} exited (code {self.proc.returncode})")
    self.proc.stdin.write(json.dumps({"cmd": cmd, **args}) + "\n")
    self.proc.stdin.flush()
    return self._read()

  def close(self):
    try:
      if self.proc.poll() is None:
        self.call("quit")
    except (RuntimeError, OSError, BrokenPipeError):
      pass
    try:
      self.proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
      self.proc.kill()
      self.proc.wait()
    for stream in (self.proc.stdin, self.proc.stdout, self.log):
      with contextlib.suppress(OSError):  # stdin's flush after a broken pipe
        stream.close()


def rotated(names, round_index):
  """The contenders' order in round `round_index`: the list rotated left by that many places."""
  k = round_index % len(names)
  return names[k:] + names[:k]


def contender_env(name, variants):
  """(worker kind, environment updates) of a contender: a variant's XLA_FLAGS, or a torch one."""
  if name in TORCH_CONTENDERS:
    return "torch", {"XLA_FLAGS": "", **TORCH_CONTENDERS[name]}
  return "jax", {"XLA_FLAGS": variants[name]}


def run_rounds(rows, variants, rounds, size_mode, logs, block_s, blocks, torch_names=(),
               log=print):
  """{"rounds": [...]}: every contender per round in a fresh process (rotated order); each
  worker's stderr goes to the folder `logs`."""
  names = list(torch_names) + list(variants)
  os.makedirs(logs, exist_ok=True)
  record = {"rounds": [], "first_round": {}}
  for r in range(rounds):
    order = rotated(names, r)
    log(f"round {r + 1}/{rounds}: {' '.join(order)}")
    contenders = {}
    for name in order:
      kind, env = contender_env(name, variants)
      contenders[name] = Contender(name, kind, env, size_mode,
                                   os.path.join(logs, f"round{r + 1}_{name}.log"))
    this = {"order": order, "workers": {}, "probes": [], "rows": {}, "errors": {}}
    try:
      for name in order:
        try:
          this["workers"][name] = contenders[name].hello()
        except RuntimeError as e:
          this["errors"][name] = str(e)
      live = [n for n in order if n not in this["errors"]]
      prober = contenders.get("default") if "default" in live else None
      if prober:
        this["probes"].append(prober.call("probe"))
      for row in rows:
        built, times = {}, {}
        for name in [n for n in live if n not in this["errors"]]:
          try:
            built[name] = contenders[name].call(
                "build", row=row, census=(r == 0 and name in variants),
                losses=(r == 0 and name in variants), block_s=block_s)
          except RuntimeError as e:
            built[name] = {"error": str(e)}
        for name in [n for n in live if "error" not in built.get(n, {"error": 1})]:
          try:
            times[name] = contenders[name].call("time", row=row, blocks=blocks)
          except RuntimeError as e:
            times[name] = {"error": str(e)}
        for name in built:
          if "error" not in built[name]:
            try:
              contenders[name].call("drop", row=row)
            except RuntimeError:
              pass
        this["rows"][row] = {"build": built, "time": times}
        log(f"  {row}: " + ", ".join(
            f"{n} {t['median_step_s'] * 1e3:.1f} ms" if "error" not in t else f"{n} ERROR"
            for n, t in times.items()) + "".join(
            f"; {n} build error: {b['error']}" for n, b in built.items() if "error" in b))
      if prober and prober.proc.poll() is None:
        this["probes"].append(prober.call("probe"))
    finally:
      for c in contenders.values():
        c.close()
    record["rounds"].append(this)
  return record


def _round_seconds(record, row, name):
  """{round index: median step seconds} of one contender on one row (rounds it completed)."""
  out = {}
  for i, rd in enumerate(record["rounds"]):
    t = rd["rows"].get(row, {}).get("time", {}).get(name, {}).get("median_step_s")
    if t is not None:
      out[i] = t
  return out


def _paired(reference, seconds):
  """reference[i] / seconds[i] over the rounds both have, summarised (None if none)."""
  pairs = [(reference[i], s) for i, s in seconds.items() if i in reference]
  if not pairs:
    return None
  return timing.paired_ratio([a for a, _ in pairs], [b for _, b in pairs])


def summarize(record, rows, variants, torch_names=()):
  """Per row and contender: step times, paired ratios, roofline fractions, loss check, census.

  The torch reference of a round is the fastest of the torch contenders in that round."""
  bandwidths = [b for rd in record["rounds"] for p in rd["probes"] for b in p["bandwidth_B_s"]]
  peaks = [b for rd in record["rounds"] for p in rd["probes"] for b in p["bf16_peak_flop_s"]]
  bandwidth = timing.summarize(bandwidths, "B/s") if bandwidths else None
  peak = timing.summarize(peaks, "FLOP/s") if peaks else None
  from benchmarks import flop_counts, inputs, train_steps  # pylint: disable=g-import-not-at-top
  size = train_steps.sizes(record["size"])
  first = record["rounds"][0]
  table = {}
  for row in rows:
    lm, frozen, fusion = parse_row(row)
    first_build = first["rows"].get(row, {}).get("build", {})
    ok = {n: b for n, b in first_build.items() if "error" not in b}
    info = next((ok[n] for n in list(variants) + list(torch_names) if n in ok), {})
    tokens = info.get("tokens")
    flops = flop_counts.train_step_flops(lm, frozen, fusion, size, inputs.BATCH,
                                         tokens[1] if tokens else 0)
    params = info.get("params")
    cost = {"analytic_flops_per_step": flops, "trainable_params": params}
    if params is not None:
      memory_bytes = float((train_steps.ADAM_BYTES_PER_PARAM +
                            train_steps.PRODUCT_BYTES_PER_PARAM) * params
                           + info.get("input_bytes", 0))
      cost["bytes_per_step"] = memory_bytes
      if bandwidth:
        cost["memory_roofline_s"] = memory_bytes / bandwidth["median"]
      if bandwidth and peak:
        cost["roofline_s"] = (flops / peak["median"] +
                              train_steps.ADAM_BYTES_PER_PARAM * params / bandwidth["median"])
    seconds = {name: _round_seconds(record, row, name)
               for name in list(torch_names) + list(variants)}
    reference = {}
    for name in torch_names:
      for i, t in seconds[name].items():
        reference[i] = min(t, reference.get(i, math.inf))
    per = {}
    for name in list(torch_names) + list(variants):
      mine = seconds[name]
      entry = {"step_s": timing.summarize(list(mine.values()), "s") if mine else None,
               "errors": sorted({str(x["error"]) for rd in record["rounds"]
                                 for x in (rd["rows"].get(row, {}).get("build", {}).get(name, {}),
                                           rd["rows"].get(row, {}).get("time", {}).get(name, {}))
                                 if "error" in x})}
      if name in variants:
        entry["vs_torch_eager"] = _paired(reference, mine)
        if name != "default":
          entry["vs_default"] = _paired(seconds.get("default", {}), mine)
      build = first_build.get(name, {})
      for key in ("census", "losses", "warmup_s"):
        if key in build:
          entry[key] = build[key]
      if mine:
        median = entry["step_s"]["median"]
        if "memory_roofline_s" in cost:
          entry["of_memory_roofline"] = cost["memory_roofline_s"] / median
        if "roofline_s" in cost:
          entry["of_roofline"] = cost["roofline_s"] / median
      per[name] = entry
    base = per.get("default", {}).get("losses")
    for name, entry in per.items():
      if base and entry.get("losses"):
        entry["max_abs_loss_diff_vs_default"] = max(abs(a - b) for a, b in
                                                     zip(entry["losses"], base))
    table[row] = {"lm": lm, "frozen": frozen, "fusion": fusion, "tokens": tokens, **cost,
                  "torch_reference_s": (timing.summarize(list(reference.values()), "s")
                                        if reference else None),
                  "contenders": per}
  return {"bandwidth": bandwidth, "bf16_peak": peak, "rows": table}


def targets(summary, variants):
  """Issue 26's CPU targets per row: the default flags, and the best variant beside them."""
  out = []
  for row, r in summary["rows"].items():
    c = r["contenders"]
    best = max((v for v in variants if c.get(v, {}).get("vs_torch_eager")),
               key=lambda v: c[v]["vs_torch_eager"]["median"], default=None)
    for name in dict.fromkeys(["default", best]):
      if name is None or name not in c:
        continue
      tag = "default flags" if name == "default" else f"best variant: {name}"
      out.append(timing.target(f"bf16 vs torch autocast eager: {row} ({tag})",
                               c[name].get("vs_torch_eager"), ">=", TORCH_GOAL))
      if r["frozen"]:
        out.append(timing.target(f"frozen head / memory roofline: {row} ({tag})",
                                 c[name].get("of_memory_roofline"), ">=", MEMORY_GOAL))
  return out


# -- results ------------------------------------------------------------------------------------


def _load(values):
  return ", ".join(f"{x:.1f}" for x in values)


def _short_error(text):
  """An error without XLA's repeated 'Error dispatching computation: ' prefixes."""
  return text.rsplit("Error dispatching computation: ", 1)[-1]


def _reachable(row):
  """For a frozen head: the share of its memory roofline that a step at its roofline (FLOPs +
  Adam, one after the other) would reach."""
  if not row["frozen"] or not row.get("memory_roofline_s") or not row.get("roofline_s"):
    return ""
  return (f"; a step at its roofline (FLOPs + Adam) would read "
          f"{row['memory_roofline_s'] / row['roofline_s']:.2f} of its memory roofline")


def markdown(results):
  fmt, table, snippet = run.fmt, run._table, run._snippet  # pylint: disable=protected-access
  m, s = results["machine"], results["summary"]
  lines = ["# XLA:CPU flag variants of the bf16 train steps", ""]
  lines += snippet("machine", [
      f"Command: `{results['command']}`", "",
      f"Machine: {timing.cpu_label(m)}, {m['cores']} cores ({m['usable_cpus']} usable), "
      f"jax {m['jax']} ({m['jax_backend']}), torch {m['torch']}, python {m['python']}; "
      f"load average (1, 5, 15 min) at start {_load(results['load_average_start'])}, at end "
      f"{_load(results['load_average_end'])}", "",
      f"Total runtime: {results['runtime_s']:.0f} s; {results['rounds']} rounds "
      f"({results['size']} sizes), every contender in a fresh process each round, order "
      "rotated by one per round; per round and contender the median of "
      f"{results['blocks']} blocks of about {results['block_s']} s of steps", "",
      f"Measured in the same run: STREAM-triad bandwidth {fmt(s['bandwidth'], 1e-9)} GB/s, "
      f"bf16 matmul peak {fmt(s['bf16_peak'], 1e-9)} GFLOP/s (best of JAX and PyTorch)", "",
      "Figures: median (min-max) over rounds; ratios are paired per round."])
  lines += ["", "## Variants", ""]
  lines += snippet("variants", table(
      ["variant", "XLA_FLAGS", "products of the compiled steps (share of static FLOPs, ops)"],
      [[v, f"`{f}`" if f else "(empty)", "<br>".join(
          f"{row}: {census_line(c['contenders'][v]['census'])}"
          for row, c in s["rows"].items() if c["contenders"].get(v, {}).get("census"))]
       for v, f in results["variants"].items()]))
  lines += ["", "## Targets", ""]
  lines += snippet("targets", table(
      ["target", "measured", "goal", "status"],
      [[t["name"], fmt(t["measured"]), f"{t['op']} {t['threshold']}", t["status"]]
       for t in results["targets"]]))
  body = [f"CPU: {timing.cpu_label(m)}", ""]
  body += table(
      ["row", "contender", "step ms", "vs torch autocast eager", "vs default",
       "of memory roofline", "of roofline (FLOPs + Adam)", "max |loss - default|", "errors"],
      [[row, name, fmt(e["step_s"], 1e3), fmt(e.get("vs_torch_eager")),
        fmt(e.get("vs_default")), fmt(e.get("of_memory_roofline"), digits=2),
        fmt(e.get("of_roofline"), digits=2), fmt(e.get("max_abs_loss_diff_vs_default"), digits=2),
        "; ".join(sorted({_short_error(x) for x in e["errors"]}))]
       for row, r in s["rows"].items() for name, e in r["contenders"].items()])
  body.append("")
  for row, r in s["rows"].items():
    body.append(f"- {row}: {r['trainable_params']} trainable parameters, "
                f"{fmt(r.get('bytes_per_step'), 1e-6)} MB moved per step (memory roofline "
                f"{fmt(r.get('memory_roofline_s'), 1e3)} ms), "
                f"{fmt(r['analytic_flops_per_step'], 1e-9)} GFLOP per step (roofline "
                f"{fmt(r.get('roofline_s'), 1e3)} ms)"
                + (f", tokens {'x'.join(map(str, r['tokens']))}" if r.get("tokens") else "")
                + _reachable(r))
  body += [f"- {n}" for n in results["notes"]]
  lines += ["", "## Rows", ""]
  lines += snippet("xla_flags", body)
  return "\n".join(lines) + "\n"


NOTES = [
    "vs torch autocast eager: PyTorch bf16 autocast eager step seconds / this step's, paired per "
    "round (> 1: JAX faster), the PyTorch step of each round being the faster of torch (as "
    "benchmarks.train_steps runs it: fused Adam, as many intra-op threads as XLA) and "
    "torch_passive (the same with OMP_WAIT_POLICY=PASSIVE); vs default: the default flags' step "
    "seconds / this variant's (> 1: the variant faster)",
    "memory roofline: bytes moved per step (Adam's 28 bytes per trainable parameter, 8 more for "
    "the forward's read of each float32 master weight and the weight-gradient product's write of "
    "each float32 gradient, and the batch's inputs) at the STREAM-triad bandwidth of this run; "
    "roofline (FLOPs + Adam): train_steps' roofline, analytic matmul FLOPs at the bf16 peak plus "
    "the 28 Adam bytes per parameter at that bandwidth (fine-tuned rows include their embedding "
    "tables among the trainable parameters)",
    "loss: the first three steps' losses from the same seed, batch and dropout keys; the largest "
    "difference to the default flags' (torch: another initialisation, not compared)",
    "products: read from each variant's compiled step (first round); Eigen = XLA:CPU's plain "
    "dot; a product inside a scan body counts once",
]


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--worker", choices=["jax", "torch"], help=argparse.SUPPRESS)
  parser.add_argument("--size", default="quick", choices=["toy", "quick", "full"],
                      help="model sizes of benchmarks.train_steps in that mode")
  parser.add_argument("--rows", default=",".join(DEFAULT_ROWS),
                      help="comma-separated LM:frozen|finetuned:FUSION")
  parser.add_argument("--variant", action="append", type=parse_variant, metavar="NAME=FLAGS",
                      help="an XLA_FLAGS variant (repeat; default: "
                      f"{', '.join(DEFAULT_VARIANTS)}); one must be named default")
  parser.add_argument("--rounds", type=int, default=5)
  parser.add_argument("--block-s", type=float, default=0.3)
  parser.add_argument("--blocks", type=int, default=5)
  parser.add_argument("--torch", default=",".join(TORCH_CONTENDERS),
                      help="comma-separated PyTorch contenders out of "
                      f"{', '.join(TORCH_CONTENDERS)} (empty: none)")
  parser.add_argument("--out", help="folder for results.json and results.md")
  parser.add_argument("--logs", help="folder for the workers' stderr (default: OUT/logs)")
  parser.add_argument("--render", action="store_true",
                      help="measure nothing: rewrite OUT/results.md from OUT/results.json")
  args = parser.parse_args(argv)
  if args.render:
    with open(os.path.join(args.out, "results.json"), encoding="utf-8") as f:
      results = json.load(f)
    with open(os.path.join(args.out, "results.md"), "w", encoding="utf-8") as f:
      f.write(markdown(results))
    return
  if args.worker:
    worker_main(args.worker, args.size)
    return
  if not args.out:
    parser.error("--out is required")
  variants = dict(args.variant) if args.variant else dict(DEFAULT_VARIANTS)
  if "default" not in variants:
    parser.error("name one variant default (its flags are the baseline, often empty)")
  rows = [r for r in args.rows.split(",") if r]
  torch_names = [t for t in args.torch.split(",") if t]
  if set(torch_names) - set(TORCH_CONTENDERS) or set(torch_names) & set(variants):
    parser.error(f"--torch: choose from {', '.join(TORCH_CONTENDERS)}")
  for row in rows:
    parse_row(row)
  os.makedirs(args.out, exist_ok=True)
  start = time.perf_counter()
  load_start = os.getloadavg()
  record = run_rounds(rows, variants, args.rounds, args.size,
                      args.logs or os.path.join(args.out, "logs"), args.block_s,
                      args.blocks, torch_names=torch_names,
                      log=lambda message: print(message, flush=True))
  record["size"] = args.size
  summary = summarize(record, rows, variants, torch_names)
  results = {"command": "python -m benchmarks.xla_flags " + " ".join(
      argv if argv is not None else sys.argv[1:]), "machine": timing.machine(),
             "cpu": None, "load_average_start": load_start, "load_average_end": os.getloadavg(),
             "size": args.size, "rounds": args.rounds, "block_s": args.block_s,
             "blocks": args.blocks, "variants": variants, "rows": rows,
             "torch_contenders": {n: TORCH_CONTENDERS[n] for n in torch_names},
             "parent_xla_flags": os.environ.get("XLA_FLAGS"), "summary": summary,
             "targets": targets(summary, variants), "notes": NOTES, "record": record}
  results["cpu"] = timing.cpu_label(results["machine"])
  results["runtime_s"] = time.perf_counter() - start
  print(run.write_results(args.out, results, markdown))


if __name__ == "__main__":
  main()
