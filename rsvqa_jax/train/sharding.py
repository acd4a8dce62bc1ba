"""Data parallelism: one Mesh over every device, batches split on 'data', parameters replicated.

Multi-host runs start `jax.distributed` when the environment says so (JAX_COORDINATOR_ADDRESS,
with JAX_NUM_PROCESSES / JAX_PROCESS_ID, or RSVQA_DISTRIBUTED=1 on TPU / Slurm / Open MPI where
JAX detects the cluster itself). Each host then loads its own share of every global batch and
`global_batch` assembles the pieces into one array sharded over all devices.

A training batch that does not split evenly over the devices (the paper's 70 on 8) is padded,
never resized: each host's rows are topped up to a multiple of its devices with copies of its
own rows labelled -1 (`pad_rows`), which the masked losses give weight 0, so loss, gradients
and metrics are those of the configured batch (the dropout masks are drawn for the padded shape).
"""
import logging
import os
from typing import NamedTuple

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from rsvqa_jax.errors import RSVQAError

DATA_AXIS = "data"

_log = logging.getLogger(__name__)


def _environment_count(name, low, high=None):
  """The integer environment variable `name`, refused in one line outside [low, high)."""
  text = os.environ[name]
  try:
    value = int(text)
  except ValueError:
    value = None
  if value is None or value < low or (high is not None and value >= high):
    bound = f"from {low} to {high - 1}" if high is not None else f">= {low}"
    raise RSVQAError(f"environment {name}={text!r}: must be a whole number {bound}")
  return value


def maybe_initialize_distributed():
  """Starts jax.distributed once when the environment asks for a multi-process run.

  Every process waits in jax.distributed until all have joined, and XLA ends a process whose
  partners never came with a crash dump (no Python exception to catch): the line logged first
  says what it waits for.
  """
  address = os.environ.get("JAX_COORDINATOR_ADDRESS")
  if not address and os.environ.get("RSVQA_DISTRIBUTED") != "1":
    return False
  if jax.distributed.is_initialized():
    return True
  kwargs = {}
  if address:
    kwargs["coordinator_address"] = address
    if "JAX_NUM_PROCESSES" in os.environ:
      kwargs["num_processes"] = _environment_count("JAX_NUM_PROCESSES", 1)
    if "JAX_PROCESS_ID" in os.environ:
      kwargs["process_id"] = _environment_count("JAX_PROCESS_ID", 0, kwargs.get("num_processes"))
    _log.info("waiting for the %s processes at %s to join (this is process %s); start the same "
              "command on every host", kwargs.get("num_processes", "cluster's"), address,
              kwargs.get("process_id", "?"))
  # CPU processes need a collectives backend of their own (GPU and TPU clients ignore this).
  jax.config.update("jax_cpu_collectives_implementation", "gloo")
  jax.distributed.initialize(**kwargs)
  return True


def make_mesh(devices=None):
  """A 1-D mesh with axis 'data' over `devices` (default: all devices of all hosts)."""
  devices = jax.devices() if devices is None else list(devices)
  _log.debug("mesh axis %r over %d device(s) of %d host(s): %s", DATA_AXIS, len(devices),
             jax.process_count(), ", ".join(sorted({d.device_kind for d in devices})))
  return Mesh(np.asarray(devices), (DATA_AXIS,))


def batch_sharding(mesh):
  """Leading (batch) axis split over 'data', other axes whole."""
  return NamedSharding(mesh, P(DATA_AXIS))


def replicated(mesh):
  return NamedSharding(mesh, P())


def eval_width(global_batch, mesh):
  """The eval batch actually run: `global_batch` rounded up to a multiple of the device and host
  counts. Eval batches carry masked padding rows and a question's answer depends on no other
  row, so any device count evaluates (and resumes) a run of any train.eval_batch_size."""
  step = int(np.lcm(mesh.devices.size, jax.process_count()))  # every host holds as many devices
  return -(-global_batch // step) * step


class BatchLayout(NamedTuple):
  """How a global batch of `size` real rows lies over the mesh: `local` real rows per host,
  padded to `local_padded` (a multiple of the host's devices), `padded` rows over all hosts."""

  size: int
  local: int
  local_padded: int
  padded: int
  devices: int

  def describe(self, what="batch"):
    """'batch 70 padded to 72 over 8 devices; 2 masked rows per step'."""
    masked = self.padded - self.size
    return (f"{what} {self.size} padded to {self.padded} over {self.devices} devices; "
            f"{masked} masked row{'' if masked == 1 else 's'} per step")


def batch_layout(global_batch, mesh, what="train.batch_size"):
  """The BatchLayout of a training batch; hosts must share it evenly (each loads its part)."""
  n_dev, n_proc = mesh.devices.size, jax.process_count()
  if global_batch % n_proc:
    raise RSVQAError(f"config {what}={global_batch} must be a multiple of the host count "
                     f"({n_proc})")
  local, per_host = global_batch // n_proc, n_dev // n_proc
  local_padded = -(-local // per_host) * per_host
  return BatchLayout(global_batch, local, local_padded, local_padded * n_proc, n_dev)


def pad_rows(local_batch, rows, label_key):
  """`local_batch` (arrays with a leading row axis) topped up to `rows` rows with copies of its
  first rows whose `label_key` is -1: real inputs (no NaN through a masked loss's gradient) that
  the masked losses count for nothing."""
  n = len(local_batch[label_key])
  if rows == n:
    return local_batch
  take = np.concatenate([np.arange(n), np.arange(rows - n) % n])
  out = {k: np.asarray(v)[take] for k, v in local_batch.items()}  # copies
  out[label_key][n:] = -1
  return out


def agree_on_width(local_batch, columns, bucket_columns):
  """Multi-host: cuts every host's part of a global batch to the widest host's bucket.

  Each host buckets its own rows (pipeline.batch_iterator), so hosts may pick different token
  widths, and the parts of one global array must have one shape. The widths are all-gathered
  (one small collective per step) and the bucketed columns re-cut from `columns` at the largest.
  """
  if jax.process_count() == 1:
    return local_batch
  from jax.experimental import multihost_utils  # pylint: disable=g-import-not-at-top
  width = local_batch[bucket_columns[0]].shape[1]
  widest = int(np.max(multihost_utils.process_allgather(np.int32(width))))
  if widest == width:
    return local_batch
  rows = local_batch["index"]
  return {**local_batch, **{k: columns[k][rows, :widest] for k in bucket_columns}}


def global_batch(local_batch, mesh):
  """Host-local numpy batch (this host's rows) -> dict of global arrays sharded on 'data'."""
  sharding = batch_sharding(mesh)
  return {k: jax.make_array_from_process_local_data(sharding, np.asarray(v))
          for k, v in local_batch.items()}


def replicate(tree, mesh):
  """Places a pytree of arrays on every device of the mesh.

  With several processes each one holds the same host values (same seed, same checkpoint) and
  gives them to its own devices: a process cannot device_put onto another host's devices.
  """
  sharding = replicated(mesh)
  if jax.process_count() == 1:
    return jax.device_put(tree, sharding)
  return jax.tree.map(lambda x: _replicate_across_hosts(x, sharding), tree)


def _replicate_across_hosts(x, sharding):
  if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
    data = _replicate_across_hosts(jax.random.key_data(x), sharding)
    return jax.random.wrap_key_data(data, impl=jax.random.key_impl(x))
  host = np.asarray(x)
  return jax.make_array_from_callback(host.shape, sharding, lambda index: host[index])
