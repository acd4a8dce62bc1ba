"""In-process A/B timings of a change to the train step: the pieces its benchmarks share.

benchmarks.update_order and benchmarks.word_table build a row's step twice, once with the change
patched in while it compiles, and time both in turn in one process (timing.alternate).
"""
import argparse
import os
import sys

from benchmarks import inputs, timing, train_steps
from rsvqa_jax import host_memory, storage


class PatchedStep:
  """A row's JAX train step compiled while `patch` (a context manager) is in force, run once.

  For in-process A/B timings of a change to the step: the compiled module (`hlo`) and the first
  step's loss are kept, and `block()` times blocks of `calibrate`d steps.
  """

  def __init__(self, row, size, questions, batch, dtype, patch):
    lm, mode, fusion = row.split(":")
    frozen = mode == "frozen"
    model, q_dim = train_steps.jax_model(lm, frozen, fusion, size, questions)
    batch_np = train_steps.batch_for(lm, frozen, q_dim, questions, batch)
    with patch:
      self.runner = train_steps.JaxStep(model, frozen, batch_np, compute_dtype=dtype)
      self.runner.step = self.runner.step.lower(self.runner.state, self.runner.batch).compile()
    self.runner.warmup()  # the compiled step read below, compiled once
    self.hlo = self.runner.step.as_text()
    self.first_loss = float(self.runner.metrics["loss"])
    self.steps = 1

  def calibrate(self, block_s):
    seconds = self.runner.block(1)
    self.steps = max(1, round(block_s / seconds))

  def block(self):
    """Seconds per step over one block."""
    return self.runner.block(self.steps) / self.steps


def race(row, size, questions, batch, dtype, patches, rounds, block_s):
  """One row's step built once per {name: patch}, the steps timed in turn (timing.alternate).

  Returns (contenders {name: PatchedStep}, seconds per step {name: [round, ...]}, errors,
  step ms summaries {name: timing.summarize})."""
  contenders = {name: PatchedStep(row, size, questions, batch, dtype, patch)
                for name, patch in patches.items()}
  for c in contenders.values():
    c.calibrate(block_s)
  seconds, errors = timing.alternate({k: c.block for k, c in contenders.items()}, rounds)
  step_ms = {k: timing.summarize([s * 1e3 for s in t], "ms") for k, t in seconds.items()}
  return contenders, seconds, errors, step_ms


def add_options(parser, block_s):
  """The options every such benchmark takes."""
  parser.add_argument("--size", default="quick", choices=["toy", "quick", "full"])
  parser.add_argument("--rounds", type=int, default=7)
  parser.add_argument("--block-s", type=float, default=block_s)
  parser.add_argument("--batch", type=int, default=inputs.BATCH)
  parser.add_argument("--out", required=True, help="folder for results.json and results.md")


def start(parser, argv):
  """(args, model sizes, questions, machine info) of such a benchmark's command line, freed host
  memory kept (before JAX starts its threads, as benchmarks.run does)."""
  args = parser.parse_args(argv)
  host_memory.keep_freed_memory()
  return (args, train_steps.sizes(args.size), inputs.make_questions(args.batch),
          timing.machine())


def result(module, argv, info, **fields):
  """The results record: the command that reproduces it, the machine, the CPU, `fields`."""
  return {"command": f"python -m benchmarks.{module} " + " ".join(argv or sys.argv[1:]),
          "machine": info, "cpu": timing.cpu_label(info), **fields}


def header(title, snippet, record):
  """The markdown lines above a results table: title, snippet start, command, machine, load."""
  m = record["machine"]
  load = ", ".join(f"{x:.1f}" for x in m.get("load_average", ()))
  return [f"# {title}", "", f"<!-- --8<-- [start:{snippet}] -->", "",
          f"Command: `{record['command']}`", "",
          f"CPU: {record['cpu']}, {m['usable_cpus']} usable cores, jax {m['jax']}; load average "
          f"at start {load}", ""]


def footer(snippet, *notes):
  """The markdown lines below a results table: its notes as a list, then the snippet's end."""
  return ["", *(f"- {n}" for n in notes), "", f"<!-- --8<-- [end:{snippet}] -->", ""]


def median_range(summary):
  """A timing.summarize record as "median (min-max)"."""
  return f"{summary['median']:.3g} ({summary['min']:.3g}-{summary['max']:.3g})"


def write(out, record, markdown):
  """DIR/results.json and DIR/results.md."""
  os.makedirs(out, exist_ok=True)
  storage.write_json(os.path.join(out, "results.json"), record)
  with open(os.path.join(out, "results.md"), "w", encoding="utf-8") as f:
    f.write(markdown)


def main_over_rows(module, doc, rows, *, block_s, dtype, measure, line, markdown, argv):
  """The command line of a benchmark that measures one train-step row after the other.

  measure(row, args, size, questions) -> the row's record; line(record) -> its progress line;
  markdown(results record) -> results.md. `rows` and `dtype` are the options' defaults.
  """
  parser = argparse.ArgumentParser(description=doc.splitlines()[0])
  add_options(parser, block_s)
  parser.add_argument("--rows", default=",".join(rows), help="comma-separated LM:MODE:FUSION")
  parser.add_argument("--dtype", default=dtype, choices=["float32", "bfloat16"])
  args, size, questions, info = start(parser, argv)
  records = []
  for row in args.rows.split(","):
    records.append(measure(row, args, size, questions))
    print(f"{row}: {line(records[-1])}", flush=True)
  record = result(module, argv, info, size=args.size, compute_dtype=args.dtype, batch=args.batch,
                  rounds=args.rounds, rows=records)
  write(args.out, record, markdown(record))
