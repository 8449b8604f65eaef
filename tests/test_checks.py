"""fidia_jax._checks: each assert passes on good input and names the argument when it fails."""

import jax
import jax.numpy as jnp
import pytest

from fidia_jax import _checks


def test_assert_rank():
    _checks.assert_rank(jnp.zeros(3), 1, "x")
    _checks.assert_rank(jnp.float32(1.0), (0, 1), "x")
    _checks.assert_rank([[1.0, 2.0]], 2, "x")  # nested lists: shape read, nothing converted
    with pytest.raises(ValueError, match=r"^f: x must have rank 1 \(vmap\), got shape \(2, 3\)\.$"):
        _checks.assert_rank(jnp.zeros((2, 3)), 1, "x", where="f", detail="vmap")
    with pytest.raises(ValueError, match=r"^y must have rank 0 or 1, got shape \(1, 1\)\.$"):
        _checks.assert_rank(jnp.zeros((1, 1)), (0, 1), "y")


def test_assert_type_and_floating():
    _checks.assert_floating(jnp.zeros(2, jnp.bfloat16), "x")
    _checks.assert_type(jnp.zeros(2, bool), (jnp.bool_, jnp.floating), "x")
    with pytest.raises(ValueError, match=r"^g: x must be floating, got dtype int32\.$"):
        _checks.assert_floating(jnp.arange(3), "x", where="g")
    with pytest.raises(ValueError, match="x must be bool or floating"):
        _checks.assert_type(jnp.arange(3), (jnp.bool_, jnp.floating), "x")


def test_assert_shape_min_length_in():
    _checks.assert_shape(jnp.zeros((2, 3)), (2, 3), "x")
    with pytest.raises(ValueError, match=r"^h: u must have shape \(2, 4\), got \(2, 3\)\.$"):
        _checks.assert_shape(jnp.zeros((2, 3)), [2, 4], "u", where="h")
    _checks.assert_min_length(jnp.zeros(2), 2, "r")
    with pytest.raises(ValueError, match=r"r needs n >= 2 samples, got shape \(1,\)"):
        _checks.assert_min_length(jnp.zeros(1), 2, "r", what="samples")
    with pytest.raises(ValueError, match="needs n >= 1"):
        _checks.assert_min_length(jnp.float32(0.0), 1, "r")
    _checks.assert_in("a", ("a", "b"), "mode")
    with pytest.raises(ValueError, match=r"^mode must be one of \('a', 'b'\), got 'c'\.$"):
        _checks.assert_in("c", ["a", "b"], "mode")


def test_checks_work_on_tracers():
    @jax.jit
    def f(x):
        _checks.assert_rank(x, 1, "x")
        _checks.assert_floating(x, "x")
        return x * 2

    assert float(f(jnp.ones(3))[0]) == 2.0
    with pytest.raises(ValueError, match="rank 1"):
        f(jnp.ones((2, 2)))


def test_a_choice_at_the_edge_of_its_grid_is_said(caplog):
    """Issue 42: a search that picks the smallest or largest value of its grid says so."""
    from fidia_jax._checks import note_grid_edge

    with caplog.at_level("WARNING", logger="fidia_jax"):
        assert note_grid_edge("ridge", "alpha", [1e-2, 1.0, 1e4], 1e4)
        assert note_grid_edge("ridge", "alpha", [1e-2, 1.0, 1e4], 1e-2)
        assert not note_grid_edge("ridge", "alpha", [1e-2, 1.0, 1e4], 1.0)
        assert not note_grid_edge("one", "lam", [0.5], 0.5)
    assert [r.getMessage().split(":")[0] for r in caplog.records] == ["ridge", "ridge"]
    assert "edge of the searched grid [0.01, 10000]" in caplog.records[0].getMessage()
