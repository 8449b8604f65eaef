"""Restoring a checkpoint never casts silently (issue 29 item 2): real orbax save / restore."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import optax
import pytest

from fidia_jax import train
from fidia_jax.errors import CheckpointError


def _saved(tmp_path):
    ckpt = train.Checkpointer(tmp_path / "ckpt")
    tree = {
        "count": jnp.asarray([16777217], jnp.int32),  # 2**24 + 1: not a float32
        "w": {"x": jnp.full((2, 3), 1 + 2**-10, jnp.float32)},  # not a bfloat16
    }
    ckpt.save(5, tree)
    return ckpt, tree


def test_same_dtypes_and_shapes_restore_exactly(tmp_path):
    ckpt, tree = _saved(tmp_path)
    got = ckpt.restore(5, {"count": jnp.zeros(1, jnp.int32), "w": {"x": jnp.zeros((2, 3))}})
    assert int(got["count"][0]) == 16777217
    np.testing.assert_array_equal(np.asarray(got["w"]["x"]), np.asarray(tree["w"]["x"]))


@pytest.mark.parametrize(
    ("like", "leaf", "saved", "template"),
    [
        (
            {"count": jnp.zeros(1, jnp.float32), "w": {"x": jnp.zeros((2, 3))}},
            "count",
            "int32[1]",
            "float32[1]",
        ),
        (
            {"count": jnp.zeros(1, jnp.int32), "w": {"x": jnp.zeros((2, 3), jnp.bfloat16)}},
            "w/x",
            "float32[2, 3]",
            "bfloat16[2, 3]",
        ),
    ],
)
def test_a_dtype_mismatch_is_an_error_naming_the_leaf(tmp_path, like, leaf, saved, template):
    ckpt, _ = _saved(tmp_path)
    with pytest.raises(CheckpointError) as err:
        ckpt.restore(5, like)
    msg = str(err.value)
    assert f"'{leaf}'" in msg and saved in msg and template in msg and "allow_cast=True" in msg


def test_allow_cast_casts_on_request(tmp_path):
    ckpt, _ = _saved(tmp_path)
    like = {"count": jnp.zeros(1, jnp.float32), "w": {"x": jnp.zeros((2, 3), jnp.bfloat16)}}
    got = ckpt.restore(5, like, allow_cast=True)
    assert got["w"]["x"].dtype == jnp.bfloat16 and got["count"].dtype == jnp.float32
    assert float(got["count"][0]) == 16777216.0  # the cast the caller asked for
    assert float(got["w"]["x"][0, 0]) == 1.0


def test_a_shape_mismatch_is_an_error_even_with_allow_cast(tmp_path):
    ckpt, _ = _saved(tmp_path)
    like = {"count": jnp.zeros(1, jnp.int32), "w": {"x": jnp.zeros((3, 2))}}
    for cast in (False, True):
        with pytest.raises(CheckpointError, match=r"'w/x' was saved as float32\[2, 3\].*"
                           r"float32\[3, 2\] \(a shape mismatch"):  # fmt: skip
            ckpt.restore(5, like, allow_cast=cast)


def test_namedtuple_optimizer_state_is_matched_by_field(tmp_path):
    """optax states (NamedTuples) are saved as dicts: leaves are still matched, by field name."""
    params = {"w": jnp.ones(3)}
    state = {"params": params, "opt": optax.adam(1e-3).init(params)}
    ckpt = train.Checkpointer(tmp_path / "c")
    ckpt.save(1, state)
    assert int(ckpt.restore(1, state)["opt"][0].count) == 0
    bad = {"params": params, "opt": optax.adam(1e-3).init({"w": jnp.ones(3, jnp.bfloat16)})}
    with pytest.raises(CheckpointError, match="'opt/0/mu/w' was saved as float32"):
        ckpt.restore(1, bad)
