"""The settings of the process environment that JAX reads when it starts a backend, checked
before it does, from the command line and the Python API alike (no JAX imported here)."""
import re

from rsvqa_jax.errors import RSVQAError

_DEVICE_COUNT_FLAG = re.compile(r"--xla_force_host_platform_device_count=(\S*)")


def check_xla_flags(environ):
  """Refuses a simulated CPU device count (docs/training.md) that is no whole number >= 1.

  XLA reads XLA_FLAGS when JAX starts its CPU backend: it answers 0 or -1 with a misleading
  backend error, and a value that is no number by printing every flag it knows and aborting.
  Given twice, the last value is the one XLA takes, and the one checked.
  """
  values = _DEVICE_COUNT_FLAG.findall(environ.get("XLA_FLAGS", ""))
  value = values[-1] if values else "1"
  if not (value.isascii() and value.isdigit() and int(value) >= 1):
    raise RSVQAError(f"environment XLA_FLAGS: --xla_force_host_platform_device_count={value}: "
                     "the number of simulated CPU devices must be a whole number >= 1")
