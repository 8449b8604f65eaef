"""Data parallelism for any driver: one mesh of all devices, a sharded batch, optional multi-host.

A driver that calls these four things runs unchanged on one CPU, one GPU, eight GPUs or a TPU pod:

1. :func:`initialize_distributed` -- first thing in the entry point; calls
   :func:`jax.distributed.initialize` only when a launcher's environment asks for it (see the
   function for the variables), never twice, never otherwise;
2. :func:`data_mesh` -- a 1-D :class:`jax.sharding.Mesh` over every visible device
   (:func:`jax.devices`, all hosts), axis ``"data"``;
3. :func:`shard_batch` / :func:`replicate` / :func:`place_params` -- put a pytree on the mesh:
   the batch split along its leading axis, parameters replicated (or, with
   ``mode="fsdp"``, each split along one axis; GSPMD gathers them inside ``jit``);
4. :func:`to_host` -- numpy copies of results for host-side work (gathered across hosts).

Every process of a multi-host run computes the same global batch from the same seed (drivers
derive all randomness from ``(seed, step)``), so placing it needs no communication:
:func:`jax.make_array_from_callback` takes each process's slice of the global value.
On one process these functions are :func:`jax.device_put` with a :class:`NamedSharding`: results
are the same as an unsharded run up to the summation order of cross-device reductions.

Example:
  >>> import jax, numpy as np
  >>> from fidia_jax import parallel
  >>> mesh = parallel.data_mesh(batch_size=8)
  >>> batch = parallel.shard_batch({"x": np.zeros((8, 3), np.float32)}, mesh)
  >>> batch["x"].sharding.spec == jax.sharding.PartitionSpec("data")
  True
  >>> parallel.to_host(batch)["x"].shape
  (8, 3)
"""

from __future__ import annotations

import os
import pickle
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from fidia_jax.errors import ConfigError

__all__ = [
    "PARAM_SHARDING_MODES",
    "data_mesh",
    "distributed_env",
    "exit_if_secondary",
    "gather_in_order",
    "initialize_distributed",
    "is_primary",
    "launcher_process",
    "single_process_driver",
    "param_shardings",
    "parallel_mesh",
    "place_params",
    "put",
    "replicate",
    "shard_batch",
    "split_map",
    "sync",
    "to_host",
]

#: ``"replicated"``: every device holds all parameters (data parallelism);
#: ``"fsdp"``: each parameter is split over the ``data`` axis along its largest divisible axis.
PARAM_SHARDING_MODES = ("replicated", "fsdp")

_initialized_here = False

_T = TypeVar("_T")


def _int_above_one(value: str | None) -> bool:
    try:
        return value is not None and int(value) > 1
    except ValueError:
        return False


def distributed_env(environ: Mapping[str, str] | None = None) -> dict[str, Any] | None:
    """The :func:`jax.distributed.initialize` arguments a launcher's environment asks for.

    Rules, first match wins (``None``: single process, do not initialise):

    * ``JAX_COORDINATOR_ADDRESS`` (``host:port``) is set: that address, with
      ``JAX_NUM_PROCESSES`` and ``JAX_PROCESS_ID`` when set (else JAX detects them);
    * SLURM launched several tasks (``srun``: ``SLURM_JOB_ID``, ``SLURM_STEP_NODELIST``,
      ``SLURM_PROCID``, ``SLURM_LOCALID`` and ``SLURM_NTASKS > 1``): JAX's SLURM detection;
    * Open MPI launched several ranks (``mpirun``: ``OMPI_COMM_WORLD_SIZE > 1``): JAX's Open MPI
      detection;
    * a multi-host Cloud TPU slice (``TPU_WORKER_HOSTNAMES`` or ``TPU_PROCESS_ADDRESSES`` lists
      more than one host): JAX's TPU detection.

    Args:
      environ: the environment (``None``: :data:`os.environ`).

    Returns:
      Keyword arguments for :func:`jax.distributed.initialize` (``{}``: auto-detect), or ``None``.
    """
    env = os.environ if environ is None else environ
    if env.get("JAX_COORDINATOR_ADDRESS"):
        kwargs: dict[str, Any] = {"coordinator_address": env["JAX_COORDINATOR_ADDRESS"]}
        for var, arg in (("JAX_NUM_PROCESSES", "num_processes"), ("JAX_PROCESS_ID", "process_id")):
            if env.get(var):
                try:
                    kwargs[arg] = int(env[var])
                except ValueError as exc:
                    raise ConfigError(f"{var} must be an integer, got {env[var]!r}") from exc
        return kwargs
    slurm = ("SLURM_JOB_ID", "SLURM_STEP_NODELIST", "SLURM_PROCID", "SLURM_LOCALID")
    if all(v in env for v in slurm) and _int_above_one(env.get("SLURM_NTASKS")):
        return {}
    if _int_above_one(env.get("OMPI_COMM_WORLD_SIZE")):
        return {}
    hosts = env.get("TPU_PROCESS_ADDRESSES") or env.get("TPU_WORKER_HOSTNAMES") or ""
    if len([h for h in hosts.split(",") if h.strip()]) > 1:
        return {}
    return None


def initialize_distributed(environ: Mapping[str, str] | None = None) -> bool:
    """Calls :func:`jax.distributed.initialize` when :func:`distributed_env` says so, once.

    Call it before anything else touches JAX (loading weights creates arrays). A second call, or
    a call after the launcher's own script already initialised JAX, does nothing.

    Args:
      environ: the environment (``None``: :data:`os.environ`).

    Returns:
      ``True`` when this call initialised the distributed runtime.

    Raises:
      ConfigError: ``JAX_NUM_PROCESSES`` / ``JAX_PROCESS_ID`` is not an integer.
      RuntimeError: (from JAX) JAX computations already ran in this process.
    """
    global _initialized_here
    if _initialized_here or jax.distributed.is_initialized():
        return False
    kwargs = distributed_env(environ)
    if kwargs is None:
        return False
    jax.distributed.initialize(**kwargs)
    _initialized_here = True
    return True


def launcher_process(environ: Mapping[str, str] | None = None) -> tuple[int, int] | None:
    """``(index, count)`` of this process when a launcher started several, else ``None``.

    Read from the environment alone (no JAX call), in :func:`distributed_env`'s order:
    ``JAX_PROCESS_ID`` / ``JAX_NUM_PROCESSES``, ``SLURM_PROCID`` / ``SLURM_NTASKS``,
    ``OMPI_COMM_WORLD_RANK`` / ``OMPI_COMM_WORLD_SIZE``, ``TPU_WORKER_ID`` and the host list.
    ``None`` also when the launcher's variables do not name this process's index.

    Example:
      >>> launcher_process({"JAX_COORDINATOR_ADDRESS": "h:1", "JAX_PROCESS_ID": "1",
      ...                   "JAX_NUM_PROCESSES": "2"})
      (1, 2)
      >>> launcher_process({}) is None
      True
    """
    env = os.environ if environ is None else environ
    try:
        if distributed_env(env) is None:
            return None
    except ConfigError:
        return None
    hosts = env.get("TPU_PROCESS_ADDRESSES") or env.get("TPU_WORKER_HOSTNAMES") or ""
    n_hosts = str(len([h for h in hosts.split(",") if h.strip()]))
    pairs = (
        ("JAX_PROCESS_ID", "JAX_NUM_PROCESSES"),
        ("SLURM_PROCID", "SLURM_NTASKS"),
        ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
        ("TPU_WORKER_ID", None),
    )
    for rank, size in pairs:
        count = env.get(size) if size else n_hosts
        try:
            if env.get(rank) is not None and count is not None:
                return int(env[rank]), int(count)
        except ValueError:
            return None
    return None


def is_primary() -> bool:
    """``True`` on the process that writes files and prints (process 0; always on one host).

    A process that a launcher started as index ``i > 0`` (:func:`launcher_process`) but whose
    driver never called :func:`initialize_distributed` is not primary either: JAX sees it as a
    lone process 0, yet only the launcher's process 0 may write the shared workdir.
    """
    if jax.process_index() != 0:
        return False
    if jax.process_count() > 1:
        return True
    launched = launcher_process()
    return launched is None or launched[0] == 0


def single_process_driver() -> bool:
    """``True`` on a launcher's process ``i > 0`` whose driver did not join the distributed
    runtime (:func:`initialize_distributed` not called, so it cannot share the work): such a
    process must not repeat process 0's run (:func:`fidia_jax.train.fit` exits it)."""
    if jax.process_count() > 1:
        return False
    launched = launcher_process()
    return launched is not None and launched[0] != 0


def exit_if_secondary(run: str) -> None:
    """Ends this process when :func:`single_process_driver` says it must not repeat process 0's
    run: prints ``<run>: process i/n: this driver runs on process 0 only; exiting`` to stderr and
    raises ``SystemExit(0)``. Does nothing on process 0, on one process, or once the driver
    joined the distributed runtime.

    Raises:
      SystemExit: status 0, on a launcher's process ``i > 0`` that did not join the runtime.
    """
    if not single_process_driver():
        return
    index, count = launcher_process()
    print(f"{run}: process {index}/{count}: this driver runs on process 0 only; exiting",
          file=sys.stderr, flush=True)  # fmt: skip
    raise SystemExit(0)


def data_mesh(
    batch_size: int | None = None, *, num_devices: int = 0, axis_name: str = "data"
) -> Mesh:
    """A 1-D mesh over the visible devices of every host, axis ``axis_name``.

    With ``batch_size``, the mesh takes the largest number of devices ``<= num_devices`` (``0``:
    all) that divides it, so a batch is split evenly and never padded: all devices when
    ``batch_size`` is a multiple of :func:`jax.device_count` (choose it so on accelerators).

    Args:
      batch_size: leading size of the batches to shard (``None``: use all devices).
      num_devices: cap on the device count (``<= 0``: all of :func:`jax.devices`).
      axis_name: the mesh axis name.

    Raises:
      ConfigError: ``batch_size < 1``, or several processes and ``batch_size`` is not a multiple
        of the global device count (a sub-mesh would leave hosts without work).
    """
    devices = jax.devices()
    avail = len(devices) if num_devices <= 0 else min(num_devices, len(devices))
    n = avail
    if batch_size is not None:
        if batch_size < 1:
            raise ConfigError(f"batch_size must be >= 1, got {batch_size}")
        n = max(d for d in range(1, avail + 1) if batch_size % d == 0)
    if jax.process_count() > 1 and n != len(devices):
        raise ConfigError(
            f"{jax.process_count()} processes: the batch ({batch_size}) must be a multiple of the "
            f"global device count {len(devices)} (and num_devices must be 0)"
        )
    return Mesh(np.asarray(devices[:n]), (axis_name,))


def parallel_mesh(
    batch_size: int | None = None, *, num_devices: int = 0, axis_name: str = "data"
) -> Mesh | None:
    """:func:`data_mesh`, or ``None`` when it would hold one device in one process.

    For drivers that keep their single-device program (no sharding annotations, the same numbers
    as before they learnt data parallelism) unless there is work to split: a mesh of more than
    one device, or any multi-process run. Arguments and errors as :func:`data_mesh`.
    """
    mesh = data_mesh(batch_size, num_devices=num_devices, axis_name=axis_name)
    return mesh if mesh.size > 1 or jax.process_count() > 1 else None


def _fsdp_spec(shape: tuple[int, ...], size: int, axis_name: str) -> P:
    # the largest axis divisible by the mesh size (first one on ties); else replicated
    best = None
    for i, dim in enumerate(shape):
        if dim % size == 0 and dim >= size and (best is None or dim > shape[best]):
            best = i
    if best is None or size == 1:
        return P()
    return P(*([None] * best + [axis_name]))


def param_shardings(
    tree: Any, mesh: Mesh, mode: str = "replicated", *, axis_name: str = "data"
) -> Any:
    """A :class:`NamedSharding` per leaf of a parameter (or optimiser-state) pytree.

    Args:
      tree: pytree of arrays (only shapes are read).
      mesh: the mesh of :func:`data_mesh`.
      mode: ``"replicated"`` or ``"fsdp"`` (:data:`PARAM_SHARDING_MODES`).
      axis_name: the mesh axis that splits parameters in ``"fsdp"`` mode.

    Raises:
      ConfigError: unknown ``mode``.
    """
    if mode not in PARAM_SHARDING_MODES:
        raise ConfigError(f"parameter sharding must be one of {PARAM_SHARDING_MODES}, got {mode!r}")
    if mode == "replicated":
        rep = NamedSharding(mesh, P())
        return jax.tree.map(lambda _: rep, tree)
    size = mesh.shape[axis_name]
    return jax.tree.map(
        lambda x: NamedSharding(mesh, _fsdp_spec(tuple(np.shape(x)), size, axis_name)), tree
    )


def _global_put(x: Any, sharding: NamedSharding) -> jax.Array:
    if isinstance(x, jax.Array) and x.sharding == sharding:
        return x
    if isinstance(x, jax.Array) and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
        # typed PRNG keys have no NumPy form: place their key data (trailing dims replicated)
        # and wrap it again with the same implementation
        impl = jax.random.key_impl(x)
        return jax.random.wrap_key_data(_global_put(jax.random.key_data(x), sharding), impl=impl)
    value = to_host(x)
    return jax.make_array_from_callback(value.shape, sharding, lambda idx: value[idx])


def put(tree: Any, shardings: Any) -> Any:
    """Places ``tree`` with ``shardings`` (one sharding, or a matching pytree of them).

    On one process this is :func:`jax.device_put`. Across processes, each process must hold the
    same global value; it contributes the slices its devices own.
    """
    first = (
        jax.tree.leaves(shardings)[0]
        if not isinstance(shardings, jax.sharding.Sharding)
        else shardings
    )
    if first.is_fully_addressable:
        return jax.device_put(tree, shardings)
    if isinstance(shardings, jax.sharding.Sharding):
        return jax.tree.map(lambda x: _global_put(x, shardings), tree)
    return jax.tree.map(_global_put, tree, shardings)


def shard_batch(tree: Any, mesh: Mesh, *, axis_name: str = "data") -> Any:
    """Splits every leaf of ``tree`` along its leading (batch) axis over ``axis_name``.

    Raises:
      ValueError: (from JAX) a leading size is not a multiple of the mesh size.
    """
    return put(tree, NamedSharding(mesh, P(axis_name)))


def replicate(tree: Any, mesh: Mesh) -> Any:
    """Copies every leaf of ``tree`` to every device of ``mesh``."""
    return put(tree, NamedSharding(mesh, P()))


def place_params(
    tree: Any, mesh: Mesh, mode: str = "replicated", *, axis_name: str = "data"
) -> Any:
    """Places parameters or optimiser state by :func:`param_shardings` (``"replicated"``: as
    :func:`replicate`)."""
    if mode == "replicated":
        return replicate(tree, mesh)
    return put(tree, param_shardings(tree, mesh, mode, axis_name=axis_name))


def _leaf_to_host(x: Any) -> np.ndarray:
    if not isinstance(x, jax.Array) or x.is_fully_addressable:
        return np.asarray(x)
    if x.is_fully_replicated:
        return np.asarray(x.addressable_shards[0].data)
    from jax.experimental import multihost_utils

    return np.asarray(multihost_utils.process_allgather(x, tiled=True))


def to_host(tree: Any) -> Any:
    """Numpy copies of every leaf (a sharded array spanning several hosts is gathered)."""
    return jax.tree.map(_leaf_to_host, tree)


def sync(name: str) -> None:
    """Waits until every process reaches this point (no-op on one process)."""
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        multihost_utils.sync_global_devices(name)


# Host-side work beside the mesh (rewards, one backbone per item): each process computes the
# items i with i % count == index and every process gets all results back in input order, so
# the outcome equals a one-process run's. On one process both are a plain loop.


def gather_in_order(local: Sequence[Any], total: int) -> list[Any]:
    """Every process's ``local`` results (items ``index::count`` of ``total``), interleaved back
    into input order, on every process.

    Args:
      local: this process's results, for items ``jax.process_index() + k * jax.process_count()``
        in increasing ``k`` (picklable; the processes belong to one job, so their bytes are
        trusted).
      total: number of items.

    Raises:
      ValueError: ``local`` has not the length this process's share of ``total`` items has.
    """
    n, p = jax.process_count(), jax.process_index()
    if len(local) != len(range(p, total, n)):
        raise ValueError(f"process {p}/{n}: {len(local)} results for {total} items")
    if n == 1:
        return list(local)
    from jax.experimental import multihost_utils

    blob = np.frombuffer(pickle.dumps(list(local)), np.uint8)
    sizes = np.asarray(multihost_utils.process_allgather(np.asarray([blob.size], np.int64)))
    sizes = sizes.reshape(n)
    padded = np.zeros(int(sizes.max()), np.uint8)
    padded[: blob.size] = blob
    blobs = np.asarray(multihost_utils.process_allgather(padded)).reshape(n, -1)
    parts = [pickle.loads(blobs[q, : int(sizes[q])].tobytes()) for q in range(n)]  # noqa: S301
    out: list[Any] = [None] * total
    for q, part in enumerate(parts):
        out[q::n] = part
    return out


def split_map(fn: Callable[[int], _T], total: int) -> list[_T]:
    """``[fn(i) for i in range(total)]`` with each process computing its own items
    (``i % count == index``) and every process receiving all results in order."""
    n, p = jax.process_count(), jax.process_index()
    return gather_in_order([fn(i) for i in range(p, total, n)], total)
