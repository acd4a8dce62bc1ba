"""Run the two-process training test many times under a concurrent CPU load; report every failure.

A race that shows once in twenty runs on a loaded machine is a CI failure waiting to happen,
so the multi-host test is only trusted after this passes:

  python tools/stress_multihost.py --runs 20 --load 2

Each run is `pytest tests/test_multihost.py` while `--load` busy processes spin on the CPU;
a run that fails or hangs prints its output (the test names each process's stderr on a hang).
Exits 1 if any run failed.
"""
import argparse
import multiprocessing
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _spin(stop):
  x = 0
  while not stop.is_set():
    x += 1


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--runs", type=int, default=20, help="runs of the test (default: 20)")
  parser.add_argument("--load", type=int, default=2, help="busy processes beside it (default: 2)")
  parser.add_argument("--timeout", type=int, default=900, help="seconds per run before it counts "
                                                               "as hung (default: 900)")
  args = parser.parse_args(argv)
  failed = 0
  for i in range(args.runs):
    stop = multiprocessing.Event()
    spinners = [multiprocessing.Process(target=_spin, args=(stop,)) for _ in range(args.load)]
    for p in spinners:
      p.start()
    started = time.time()
    try:
      out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                            os.path.join(ROOT, "tests", "test_multihost.py")], cwd=ROOT,
                           capture_output=True, text=True, timeout=args.timeout)
      ok, text = out.returncode == 0, out.stdout + out.stderr
    except subprocess.TimeoutExpired as e:
      ok, text = False, f"hung past {args.timeout} s\n{e.stdout or ''}"
    finally:
      stop.set()
      for p in spinners:
        p.join()
    failed += not ok
    print(f"run {i + 1}/{args.runs}: {'ok' if ok else 'FAILED'} ({time.time() - started:.0f} s)",
          flush=True)
    if not ok:
      print(text[-6000:], flush=True)
  print(f"{args.runs - failed} of {args.runs} runs passed")
  return 1 if failed else 0


if __name__ == "__main__":
  sys.exit(main())
