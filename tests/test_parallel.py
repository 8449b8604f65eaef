"""fidia_jax.parallel on the 4 forced host devices: mesh, batch sharding, placement, launch env."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from fidia_jax import parallel
from fidia_jax.errors import ConfigError


@pytest.mark.parametrize(
    ("batch", "cap", "expected"),
    [(None, 0, 4), (8, 0, 4), (4, 0, 4), (6, 0, 3), (2, 0, 2), (1, 0, 1), (7, 0, 1), (8, 2, 2)],
)
def test_data_mesh_takes_the_most_devices_that_divide_the_batch(batch, cap, expected):
    assert jax.device_count() == 4
    mesh = parallel.data_mesh(batch, num_devices=cap)
    assert mesh.axis_names == ("data",)
    assert list(mesh.devices) == jax.devices()[:expected]


def test_data_mesh_rejects_an_empty_batch():
    with pytest.raises(ConfigError, match="batch_size"):
        parallel.data_mesh(0)


def test_shard_batch_splits_the_leading_axis_and_to_host_round_trips():
    mesh = parallel.data_mesh(8)
    tree = {"x": np.arange(8 * 3, dtype=np.float32).reshape(8, 3), "y": np.arange(8)}
    sharded = parallel.shard_batch(tree, mesh)
    assert sharded["x"].sharding.spec == P("data")
    assert [s.data.shape for s in sharded["x"].addressable_shards] == [(2, 3)] * 4
    assert [int(s.data[0]) for s in sharded["y"].addressable_shards] == [0, 2, 4, 6]
    back = parallel.to_host(sharded)
    np.testing.assert_array_equal(back["x"], tree["x"])
    np.testing.assert_array_equal(back["y"], tree["y"])
    rep = parallel.replicate(tree, mesh)
    assert rep["x"].sharding.is_fully_replicated and len(rep["x"].sharding.device_set) == 4


def test_fsdp_splits_the_largest_divisible_axis_and_computes_the_same_values():
    mesh = parallel.data_mesh()
    params = {
        "w": np.arange(6 * 8, dtype=np.float32).reshape(6, 8) / 10,
        "b": np.arange(8, dtype=np.float32),
        "odd": np.ones((3, 5), np.float32),
        "s": np.float32(2.0),
    }
    specs = parallel.param_shardings(params, mesh, "fsdp")
    assert specs["w"].spec == P(None, "data")  # 8 divides, 6 does not
    assert specs["b"].spec == P("data")
    assert specs["odd"].spec == P() and specs["s"].spec == P()
    fsdp = parallel.place_params(params, mesh, "fsdp")
    rep = parallel.place_params(params, mesh, "replicated")
    assert fsdp["w"].addressable_shards[0].data.shape == (6, 2)
    batch = parallel.shard_batch(np.arange(4 * 6, dtype=np.float32).reshape(4, 6), mesh)

    @jax.jit
    def f(p, x):
        return jnp.tanh(x @ p["w"] + p["b"][None, :]) * p["s"] + p["odd"].sum()

    np.testing.assert_allclose(np.asarray(f(fsdp, batch)), np.asarray(f(rep, batch)), rtol=1e-6)
    with pytest.raises(ConfigError, match="fsdp"):
        parallel.param_shardings(params, mesh, "zero3")


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, None),
        (
            {
                "SLURM_JOB_ID": "1",
                "SLURM_NTASKS": "1",
                "SLURM_STEP_NODELIST": "n1",
                "SLURM_PROCID": "0",
                "SLURM_LOCALID": "0",
            },
            None,
        ),  # one SLURM task: single process
        (
            {
                "JAX_COORDINATOR_ADDRESS": "10.0.0.1:1234",
                "JAX_NUM_PROCESSES": "2",
                "JAX_PROCESS_ID": "1",
            },
            {"coordinator_address": "10.0.0.1:1234", "num_processes": 2, "process_id": 1},
        ),
        ({"JAX_COORDINATOR_ADDRESS": "h:1"}, {"coordinator_address": "h:1"}),
        (
            {
                "SLURM_JOB_ID": "1",
                "SLURM_NTASKS": "8",
                "SLURM_STEP_NODELIST": "n[1-2]",
                "SLURM_PROCID": "3",
                "SLURM_LOCALID": "1",
            },
            {},
        ),
        ({"OMPI_COMM_WORLD_SIZE": "4"}, {}),
        ({"OMPI_COMM_WORLD_SIZE": "1"}, None),
        ({"TPU_WORKER_HOSTNAMES": "t0,t1,t2,t3"}, {}),
        ({"TPU_WORKER_HOSTNAMES": "localhost"}, None),  # single-host TPU VM
    ],
)
def test_distributed_env(env, expected):
    assert parallel.distributed_env(env) == expected


def test_bad_process_count_is_a_config_error():
    with pytest.raises(ConfigError, match="JAX_NUM_PROCESSES"):
        parallel.distributed_env({"JAX_COORDINATOR_ADDRESS": "h:1", "JAX_NUM_PROCESSES": "two"})


def test_initialize_distributed_runs_once_and_only_when_asked(monkeypatch):
    calls = []
    monkeypatch.setattr(jax.distributed, "initialize", lambda **kw: calls.append(kw))
    monkeypatch.setattr(jax.distributed, "is_initialized", lambda: bool(calls))
    monkeypatch.setattr(parallel, "_initialized_here", False)
    assert parallel.initialize_distributed({}) is False and calls == []
    env = {"JAX_COORDINATOR_ADDRESS": "h:1", "JAX_NUM_PROCESSES": "2", "JAX_PROCESS_ID": "0"}
    assert parallel.initialize_distributed(env) is True
    assert parallel.initialize_distributed(env) is False
    assert calls == [{"coordinator_address": "h:1", "num_processes": 2, "process_id": 0}]
    assert parallel.is_primary()
    parallel.sync("no-op on one process")


@pytest.mark.parametrize(
    "env, expected",
    [
        ({}, None),
        ({"JAX_COORDINATOR_ADDRESS": "h:1", "JAX_PROCESS_ID": "1", "JAX_NUM_PROCESSES": "2"},
         (1, 2)),
        ({"JAX_COORDINATOR_ADDRESS": "h:1"}, None),  # JAX detects the index: unknown here
        ({"JAX_COORDINATOR_ADDRESS": "h:1", "JAX_PROCESS_ID": "x", "JAX_NUM_PROCESSES": "2"},
         None),
        ({"SLURM_JOB_ID": "1", "SLURM_STEP_NODELIST": "n[1-2]", "SLURM_PROCID": "3",
          "SLURM_LOCALID": "1", "SLURM_NTASKS": "4"}, (3, 4)),
        ({"SLURM_JOB_ID": "1", "SLURM_STEP_NODELIST": "n1", "SLURM_PROCID": "0",
          "SLURM_LOCALID": "0", "SLURM_NTASKS": "1"}, None),  # one task: not a launch
        ({"OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_RANK": "1"}, (1, 2)),
        ({"TPU_WORKER_HOSTNAMES": "a,b,c,d", "TPU_WORKER_ID": "2"}, (2, 4)),
    ],
)  # fmt: skip
def test_launcher_process(env, expected):
    assert parallel.launcher_process(env) == expected


def test_a_launched_process_that_did_not_join_is_not_primary(monkeypatch):
    for var in ("SLURM_JOB_ID", "OMPI_COMM_WORLD_SIZE", "TPU_WORKER_HOSTNAMES",
                "TPU_PROCESS_ADDRESSES"):  # fmt: skip
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("JAX_COORDINATOR_ADDRESS", "localhost:1")
    monkeypatch.setenv("JAX_NUM_PROCESSES", "2")
    monkeypatch.setenv("JAX_PROCESS_ID", "1")
    assert not parallel.is_primary() and parallel.single_process_driver()
    monkeypatch.setenv("JAX_PROCESS_ID", "0")
    assert parallel.is_primary() and not parallel.single_process_driver()
    monkeypatch.delenv("JAX_COORDINATOR_ADDRESS")
    assert parallel.is_primary() and not parallel.single_process_driver()


def test_global_put_places_typed_prng_keys():
    """Across processes ``put`` builds every leaf from host slices; a typed PRNG key has no
    NumPy form, so its key data is placed and wrapped again (same keys, same implementation)."""
    mesh = parallel.data_mesh(4)
    keys = jax.random.split(jax.random.key(3), 4)
    for spec in (P(), P("data")):
        placed = parallel._global_put(keys, NamedSharding(mesh, spec))
        assert jax.dtypes.issubdtype(placed.dtype, jax.dtypes.prng_key)
        assert placed.sharding.is_equivalent_to(NamedSharding(mesh, spec), placed.ndim)
        np.testing.assert_array_equal(jax.random.key_data(placed), jax.random.key_data(keys))
        np.testing.assert_array_equal(jax.random.uniform(placed[1]), jax.random.uniform(keys[1]))


def test_parallel_mesh_is_none_on_one_device_of_one_process():
    assert parallel.parallel_mesh(8, num_devices=1) is None
    assert parallel.parallel_mesh(7) is None  # 7 rows over 4 devices: only one device divides 7
    mesh = parallel.parallel_mesh(8)
    assert mesh is not None and mesh.size == 4 and mesh.axis_names == ("data",)
