"""Data parallelism: one Mesh over every device, batches split on 'data', parameters replicated.

Multi-host runs start `jax.distributed` when the environment says so (JAX_COORDINATOR_ADDRESS,
with JAX_NUM_PROCESSES / JAX_PROCESS_ID, or RSVQA_DISTRIBUTED=1 on TPU / Slurm / Open MPI where
JAX detects the cluster itself). Each host then loads its own share of every global batch and
`global_batch` assembles the pieces into one array sharded over all devices.
"""
import os

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from rsvqa_jax.errors import RSVQAError

DATA_AXIS = "data"


def maybe_initialize_distributed():
  """Starts jax.distributed once when the environment asks for a multi-process run."""
  address = os.environ.get("JAX_COORDINATOR_ADDRESS")
  if not address and os.environ.get("RSVQA_DISTRIBUTED") != "1":
    return False
  if jax.distributed.is_initialized():
    return True
  # CPU processes need a collectives backend of their own (GPU and TPU clients ignore this).
  jax.config.update("jax_cpu_collectives_implementation", "gloo")
  kwargs = {}
  if address:
    kwargs["coordinator_address"] = address
    if "JAX_NUM_PROCESSES" in os.environ:
      kwargs["num_processes"] = int(os.environ["JAX_NUM_PROCESSES"])
    if "JAX_PROCESS_ID" in os.environ:
      kwargs["process_id"] = int(os.environ["JAX_PROCESS_ID"])
  jax.distributed.initialize(**kwargs)
  return True


def make_mesh(devices=None):
  """A 1-D mesh with axis 'data' over `devices` (default: all devices of all hosts)."""
  devices = jax.devices() if devices is None else list(devices)
  return Mesh(np.asarray(devices), (DATA_AXIS,))


def batch_sharding(mesh):
  """Leading (batch) axis split over 'data', other axes whole."""
  return NamedSharding(mesh, P(DATA_AXIS))


def replicated(mesh):
  return NamedSharding(mesh, P())


def check_batch_size(global_batch, mesh, what="train.batch_size"):
  """The global batch must split evenly over devices and hosts; returns the per-host size."""
  n_dev, n_proc = mesh.devices.size, jax.process_count()
  if global_batch % n_dev or global_batch % n_proc:
    raise RSVQAError(f"config {what}={global_batch} must be a multiple of the device count "
                     f"({n_dev}) and of the host count ({n_proc})")
  return global_batch // n_proc


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
