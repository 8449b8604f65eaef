"""HiST sparse lattice primitives against brute force and a dense masked reference."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fidia_jax.errors import DataError
from fidia_jax.projects.hist import lattice

# one compiled program per function (eager op-by-op dispatch compiles every op: slow on CPU)
_local = jax.jit(lattice.lattice_window_attention)
_dense = jax.jit(lattice.dense_window_attention, static_argnames=("window", "shifted"))


def _blob(shape=(13, 11), keep=0.7, seed=0):
    rng = np.random.default_rng(seed)
    xy = np.stack(np.meshgrid(np.arange(shape[0]), np.arange(shape[1]), indexing="ij"), -1)
    xy = xy.reshape(-1, 2)
    return xy[rng.random(len(xy)) < keep]


def test_pool_then_unpool_returns_exactly_the_active_support():
    c = _blob()
    n = len(c)
    mask = np.ones(n + 5, bool)
    mask[n:] = False  # padding rows
    cp = np.concatenate([c, np.zeros((5, 2), int)])
    pc, pm, pool = lattice.plan_pooling(cp, mask)
    # parents are exactly the distinct coords // 2 (brute force)
    want = sorted({(int(a) // 2, int(b) // 2) for a, b in c})
    assert [tuple(r) for r in pc[pm]] == want
    # each child sits at its parent, at its offset; missing children are the sentinel
    for j, (px, py) in enumerate(pc[pm]):
        for off in range(4):
            x, y = 2 * px + off // 2, 2 * py + off % 2
            hit = np.flatnonzero(np.all(c == [x, y], axis=1))
            got = pool.children[j, off]
            assert (got == hit[0]) if hit.size else (got == len(cp))
    # pool then unpool with an identity map returns each active child's own feature, padding 0
    x = jnp.asarray(np.random.default_rng(1).normal(size=(len(cp), 3)), jnp.float32)
    x = jnp.where(jnp.asarray(mask)[:, None], x, 0.0)
    pooled = lattice.sparse_patch_pool(x, pool.children)  # (M, 12)
    back = lattice.sparse_unpool(pooled.reshape(-1, 4, 3), pool.parent, pool.offset)
    np.testing.assert_array_equal(np.asarray(back), np.asarray(x))
    assert np.all(pool.parent[~mask] == len(pc))


def test_window_partition_groups_by_window_and_never_crosses():
    c = _blob((17, 9), seed=2)
    for shift in (0, 3):
        plan = lattice.plan_windows(c, window=6, shift=shift)
        wid = (c + shift) // 6
        for w in range(plan.table.shape[0]):
            members = plan.table[w][plan.valid[w]]
            assert len({tuple(r) for r in wid[members]}) == 1
        # every spot exactly once, and spot_window/slot point back at it
        assert sorted(plan.table[plan.valid].tolist()) == list(range(len(c)))
        np.testing.assert_array_equal(
            plan.table[plan.spot_window, plan.spot_slot], np.arange(len(c))
        )


@pytest.fixture(scope="module")
def attn_case():
    c = _blob((14, 12), keep=0.75, seed=3)
    n = len(c) + 4
    cp = np.concatenate([c, np.zeros((4, 2), int)])
    mask = np.arange(n) < len(c)
    H, D, S = 2, 4, 4
    k1, k2, k3, k4 = jax.random.split(jax.random.key(0), 4)
    q = jax.random.normal(k1, (n, H, D))
    k = jax.random.normal(k2, (n, H, D))
    v = jax.random.normal(k3, (n, H, D))
    bias = 0.5 * jax.random.normal(k4, (H, 2 * S - 1, 2 * S - 1))
    plan = lattice.plan_hierarchy(cp, mask, levels=1, window=S)[0]
    return cp, mask, q, k, v, bias, S, plan


def test_sparse_window_attention_equals_dense_masked_reference(attn_case):
    cp, mask, q, k, v, bias, S, plan = attn_case
    got = _local(q, k, v, cp, plan.regular, plan.shifted, bias)
    want = _dense(q, k, v, cp, mask, window=S, bias_HxRxR=bias, extent=plan.extent)
    np.testing.assert_allclose(np.asarray(got)[mask], np.asarray(want)[mask], rtol=1e-5, atol=1e-5)
    assert np.all(np.asarray(got)[~mask] == 0)
    # regular windows alone equal the dense reference without the shifted partition
    a = lattice.window_attention_stats(q, k, v, cp, plan.regular, bias)
    got_reg = lattice.merge_attention_stats(a)
    want_reg = _dense(q, k, v, cp, mask, window=S, bias_HxRxR=bias, shifted=False)
    np.testing.assert_allclose(
        np.asarray(got_reg)[mask], np.asarray(want_reg)[mask], rtol=1e-5, atol=1e-5
    )


def test_window_attention_never_crosses_a_window(attn_case):
    cp, mask, q, k, v, bias, S, plan = attn_case
    # perturbing the values of spots outside i's two windows leaves i's output unchanged
    i = 7
    reg = (cp // S == cp[i] // S).all(1)
    shf = ((cp + S // 2) // S == (cp[i] + S // 2) // S).all(1)
    outside = mask & ~(reg | shf)
    assert outside.sum() > 10
    v2 = v + 100.0 * jnp.asarray(outside, jnp.float32)[:, None, None]
    out1 = _local(q, k, v, cp, plan.regular, plan.shifted, bias)
    out2 = _local(q, k, v2, cp, plan.regular, plan.shifted, bias)
    np.testing.assert_allclose(np.asarray(out1[i]), np.asarray(out2[i]), rtol=1e-6, atol=1e-6)
    # and spots inside do change it
    v3 = v + 100.0 * jnp.asarray(mask & shf & ~reg, jnp.float32)[:, None, None]
    out3 = _local(q, k, v3, cp, plan.regular, plan.shifted, bias)
    assert not np.allclose(np.asarray(out1[i]), np.asarray(out3[i]))


def test_shifted_windows_never_join_opposite_lattice_edges():
    # a full 8x8 lattice, window 4: a cyclic roll by 2 would put row 0 and row 7 in one window
    c = np.stack(np.meshgrid(np.arange(8), np.arange(8), indexing="ij"), -1).reshape(-1, 2)
    S = 4
    plan = lattice.plan_windows(c, window=S, shift=S // 2)
    for w in range(plan.table.shape[0]):
        mem = c[plan.table[w][plan.valid[w]]]
        assert mem[:, 0].max() - mem[:, 0].min() < S and mem[:, 1].max() - mem[:, 1].min() < S
    n = len(c)
    H, D = 1, 2
    q = jnp.zeros((n, H, D))
    k = jnp.zeros((n, H, D))
    v = jnp.zeros((n, H, D)).at[:, 0, 0].set(jnp.asarray(c[:, 0] == 7, jnp.float32))
    # on an 8x8 lattice the authors' rule (extent a multiple of S) would drop the shift: force it
    lv = lattice.plan_hierarchy(c, levels=1, window=S, pad="none", always_shift=True)[0]
    out = _local(q, k, v, c, lv.regular, lv.shifted)
    ref = _dense(q, k, v, c, np.ones(n, bool), window=S, always_shift=True)
    edge0 = c[:, 0] == 0
    assert np.all(np.asarray(out)[edge0] == 0)  # row 0 never sees row 7
    np.testing.assert_allclose(np.asarray(out), np.asarray(ref), atol=1e-6)


def test_spot_without_any_key_gives_zero_not_nan():
    c = np.array([[0, 0], [9, 9]])
    lv = lattice.plan_hierarchy(c, levels=1, window=2)[0]
    q = jnp.ones((2, 1, 2))

    @jax.jit
    def run(q, plan):
        st = lattice.window_attention_stats(q, q, q, c, plan, include_self=False)
        return lattice.merge_attention_stats(st)

    out = run(q, lv.regular)
    assert np.all(np.isfinite(np.asarray(out))) and np.all(np.asarray(out) == 0)


@pytest.mark.parametrize(
    "coords, match",
    [
        (np.array([[0, 1], [2, 3], [0, 1]]), "duplicate lattice coordinates: spots \\[0, 2\\]"),
        (np.array([[0, 1], [-1, 3]]), "must be >= 0"),
        (np.array([[0.5, 1.0]]), "must be integers"),
        (np.zeros((3, 3), int), "shape \\(n, 2\\)"),
    ],
)
def test_bad_lattice_raises_clear_error(coords, match):
    with pytest.raises(DataError, match=match):
        lattice.plan_hierarchy(coords, levels=2, window=4)


def test_fixed_sizes_are_respected_and_overflow_is_an_error():
    c = _blob(seed=5)
    plan = lattice.plan_hierarchy(c, levels=3, window=4)
    sizes = lattice.hierarchy_sizes(plan)
    big = tuple(
        (s[0] if i == 0 else s[0] + 3, s[1] + 2, s[2] + 2, s[3] + 1) for i, s in enumerate(sizes)
    )
    plan2 = lattice.plan_hierarchy(c, levels=3, window=4, sizes=big)
    assert lattice.hierarchy_sizes(plan2) == big
    small = tuple((s[0], s[1] - 1, s[2], s[3]) for s in sizes)
    with pytest.raises(ValueError, match="fixed size"):
        lattice.plan_hierarchy(c, levels=3, window=4, sizes=small)


def test_values_of_another_width_equal_the_dense_reference(attn_case):
    """Issue 29 item 4: v of width 9 with queries of width 4 returned a scrambled (n, H, 4);
    the dense reference returns (n, H, 9). Supported now, and equal to the reference."""
    cp, mask, q, k, _, bias, S, plan = attn_case
    v9 = jax.random.normal(jax.random.key(5), (q.shape[0], q.shape[1], 9))
    got = _local(q, k, v9, cp, plan.regular, plan.shifted, bias)
    want = _dense(q, k, v9, cp, mask, window=S, bias_HxRxR=bias, extent=plan.extent)
    assert got.shape == want.shape == (q.shape[0], q.shape[1], 9)
    np.testing.assert_allclose(np.asarray(got)[mask], np.asarray(want)[mask], rtol=1e-5, atol=1e-5)


def test_window_attention_shape_errors(attn_case):
    cp, mask, q, k, v, bias, S, plan = attn_case
    n = q.shape[0]
    f = lattice.lattice_window_attention
    with pytest.raises(ValueError, match=r"q \(\d+, 2, 4\) and k \(\d+, 2, 3\) must have the same"):
        f(q, k[..., :3], v, cp, plan.regular, plan.shifted, bias)
    with pytest.raises(ValueError, match="v .* must have q's spots and heads"):
        f(q, k, v[:-1], cp, plan.regular, plan.shifted, bias)
    with pytest.raises(ValueError, match=r"coords must be \(n, 2\)"):
        f(q, k, v, cp[:, :1], plan.regular, plan.shifted, bias)
    with pytest.raises(ValueError, match=r"bias must be \(H, 2S - 1, 2S - 1\) with H = 2"):
        f(q, k, v, cp, plan.regular, plan.shifted, bias[:1])
    other = lattice.plan_hierarchy(cp[:-2], mask[:-2], levels=1, window=S)[0]
    with pytest.raises(ValueError, match=f"regular.spot_window / spot_slot must be \\({n},\\)"):
        f(q, k, v, cp, other.regular, other.shifted, bias)
    with pytest.raises(ValueError, match=r"mask must be \(n,\)"):
        lattice.dense_window_attention(q, k, v, cp, mask[:-1], window=S)
