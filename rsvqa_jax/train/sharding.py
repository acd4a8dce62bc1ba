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


def global_batch(local_batch, mesh):
  """Host-local numpy batch (this host's rows) -> dict of global arrays sharded on 'data'."""
  sharding = batch_sharding(mesh)
  return {k: jax.make_array_from_process_local_data(sharding, np.asarray(v))
          for k, v in local_batch.items()}


def replicate(tree, mesh):
  """Places a pytree of arrays on every device of the mesh."""
  return jax.device_put(tree, replicated(mesh))
