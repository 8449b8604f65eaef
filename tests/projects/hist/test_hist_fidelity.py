"""HiST's attention pattern against the authors' code (fixture ``tests/data/hist/``).

The fixture (``tools/hist_make_fixture.py``, wwyi1828/HiST @ 3e60ea3) holds, for fixed lattices,
the (query, key) pairs of the authors' ``AttentionBuilder`` in mode ``'hybrid'`` (and
``'hybrid_noshift'``): ``g1`` the local pattern, ``g2`` the spot <-> slide-token pattern, either
on a raw lattice or along the authors' model pipeline (``SPAN_Padder``, then stride-2 sparse
convolutions, levels 0-2). Pair sets are exact (integers): compared for equality, and every
known difference is asserted explicitly, so a new one fails.
"""

import json
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fidia_jax.projects.hist import lattice

DATA = pathlib.Path(__file__).resolve().parents[2] / "data" / "hist"
T = 3  # slide tokens


@pytest.fixture(scope="module")
def fx():
    meta = json.loads((DATA / "attention_pattern.json").read_text())
    z = np.load(DATA / "attention_pattern.npz")
    return meta, {k: z[k] for k in z.files}


def _unpack(z, key, n):
    return np.unpackbits(z[key])[: (n + T) ** 2].reshape(n + T, n + T).astype(bool)


def _parse(key):
    parts = key.split("/")
    return parts[0], int(parts[-2][1:]), parts[-1]


def test_fixture_provenance(fx):
    meta, z = fx
    assert meta["commit"] == "3e60ea39388d71a14d61063a2638db3b0b5294e6"
    assert meta["n_tokens"] == T and len(meta["cases"]) == 45
    assert all(f"{c}/g1" in z and f"{c}/g2" in z for c in meta["cases"])


def test_raw_lattice_local_pattern_equals_the_authors(fx):
    """AttentionBuilder on a raw lattice (no padder) = our plan with ``pad="none"``: regular ∪
    shifted windows (the shift dropped when the extent is a multiple of the window side in both
    axes), self included; the only difference: the authors drop the self pair of their first and
    last node (their builder assumes those are the padder's nodes)."""
    meta, z = fx
    n_cases = 0
    for key in meta["cases"]:
        if not key.startswith("raw_"):
            continue
        case, w, mode = _parse(key)
        pos = z[f"{case}/pos"].astype(np.int64)
        n = len(pos)
        lv = lattice.plan_hierarchy(pos, levels=1, window=2 * w, pad="none")[0]
        if mode == "hybrid_noshift":
            lv = lv._replace(shifted=lv.regular)
        ours = lattice.local_attention_mask(lv)
        g1 = _unpack(z, f"{key}/g1", n)
        assert not g1[:n, n:].any() and not g1[n:].any(), key  # local graph: lattice nodes only
        theirs = g1[:n, :n].copy()
        assert not theirs[0, 0] and not theirs[n - 1, n - 1], key
        theirs[[0, n - 1], [0, n - 1]] = True
        np.testing.assert_array_equal(ours, theirs, err_msg=key)
        n_cases += 1
    assert n_cases == 30


def test_authors_shift_rule_and_the_always_shift_option(fx):
    """Where both extents are multiples of the window side the authors' 'hybrid' equals
    'hybrid_noshift'; ``always_shift=True`` (our earlier behaviour) differs there."""
    meta, z = fx
    pos = z["raw_grid12x12/pos"].astype(np.int64)
    n = len(pos)
    for w in (1, 2, 3):
        a = _unpack(z, f"raw_grid12x12/w{w}/hybrid/g1", n)
        b = _unpack(z, f"raw_grid12x12/w{w}/hybrid_noshift/g1", n)
        np.testing.assert_array_equal(a, b)
        lv = lattice.plan_hierarchy(pos, levels=1, window=2 * w, pad="none", always_shift=True)[0]
        assert lattice.local_attention_mask(lv).sum() > a[:n, :n].sum() + 2
    # along the pipeline a 7x5 section has canvases 12x12, 6x6, 3x3: with w = 3 no shifted
    # windows at any level (3x3 is inside one window), theirs and ours
    spots = z["pipe_grid7x5/spots"].astype(np.int64)
    for lvl, lv in enumerate(lattice.plan_hierarchy(spots, levels=3, window=6)):
        assert lv.extent.tolist() == [12 >> lvl] * 2
        np.testing.assert_array_equal(lv.shifted.table, lv.regular.table)
    # a 13x9 lattice is not a multiple of 2w in x: the authors shift there
    pos = z["raw_blob13x9/pos"].astype(np.int64)
    a = _unpack(z, "raw_blob13x9/w3/hybrid/g1", len(pos))
    b = _unpack(z, "raw_blob13x9/w3/hybrid_noshift/g1", len(pos))
    assert a.sum() > b.sum()


def _pipeline_level(z, key):
    """Our plan level matching a pipeline case, and the authors' index of each of our spots."""
    case, w, _ = _parse(key)
    lvl = int(key.split("/")[1][1:])
    spots = z[f"{case}/spots"].astype(np.int64)
    apos = z[f"{case}/L{lvl}/pos"].astype(np.int64)
    lv = lattice.plan_hierarchy(spots, levels=3, window=2 * w)[lvl]
    where = {tuple(p): i for i, p in enumerate(apos)}
    idx = np.array([where[tuple(p)] for p in lv.coords[lv.mask]])  # KeyError: a spot moved
    return lv, apos, idx, z[f"{case}/L{lvl}/shape"]


def test_pipeline_canvas_windows_and_pooling_equal_the_authors(fx):
    """Along the authors' pipeline (padder, stride-2 sparse convs), our default plan
    (``pad="authors"``) puts every spot / parent at the authors' coordinates, reads the same
    canvas extent, and gives the same local pattern among real nodes; the differences are the
    authors' padding nodes (extra nodes, keys of the spots near the canvas corners) and the
    self pair of their first / last node when that node holds real spots (coarsest level)."""
    meta, z = fx
    n_cases = 0
    for key in meta["cases"]:
        if not key.startswith("pipe_"):
            continue
        lv, apos, idx, shape = _pipeline_level(z, key)
        na = len(apos)
        np.testing.assert_array_equal(lv.extent, shape, err_msg=key)
        np.testing.assert_array_equal(apos.max(axis=0) + 1, shape, err_msg=key)
        # the authors' extra nodes: padding descendants at the canvas corners only
        extra = sorted(set(range(na)) - set(idx.tolist()))
        assert set(extra) <= {0, na - 1}, key
        assert all(tuple(apos[i]) in {(0, 0), tuple(shape - 1)} for i in extra), key
        g1 = _unpack(z, f"{key}/g1", na)
        theirs = g1[np.ix_(idx, idx)].copy()
        ours = lattice.local_attention_mask(lv)[np.ix_(lv.mask, lv.mask)]
        for end in (0, na - 1):  # the authors' builder drops these self pairs (attention.py)
            if end not in extra:
                j = int(np.flatnonzero(idx == end)[0])
                assert not theirs[j, j], key
                theirs[j, j] = True
        np.testing.assert_array_equal(ours, theirs, err_msg=key)
        n_cases += 1
    assert n_cases == 15


def test_pipeline_token_pattern(fx):
    """g2: every real spot attends to the 3 tokens, each token to every real spot and token —
    except the authors' first / last node (dropped by their ``[1:-1]``) when it is real."""
    meta, z = fx
    for key in meta["cases"]:
        if not key.startswith("pipe_"):
            continue
        _, apos, idx, _ = _pipeline_level(z, key)
        na = len(apos)
        g2 = _unpack(z, f"{key}/g2", na)
        tok = np.arange(na, na + T)
        want = np.zeros_like(g2)
        inner = np.arange(1, na - 1)
        want[np.ix_(inner, tok)] = True
        want[np.ix_(tok, inner)] = True
        want[np.ix_(tok, tok)] = True
        np.testing.assert_array_equal(g2, want, err_msg=key)
        # what that means for real spots: all of them but a real first / last node
        real_dropped = [i for i in (0, na - 1) if i in set(idx.tolist())]
        assert all(g2[i, tok].all() for i in idx if i not in real_dropped), key


def test_window_attention_runs_over_exactly_the_authors_keys(fx):
    """End to end: ``lattice_window_attention`` on our default plan equals a float64 masked
    softmax over the authors' local pairs (pipeline case, real nodes, their relative position
    bias indexed by key - query). float32 inputs of O(1), scores O(1): the float32 softmax and
    weighted sum keep ~1e-6 relative error, so rtol = atol = 2e-5."""
    _, z = fx
    key = "pipe_blob13x9/L0/w3/hybrid"
    lv, apos, idx, _ = _pipeline_level(z, key)
    theirs = _unpack(z, f"{key}/g1", len(apos))[np.ix_(idx, idx)]
    theirs[np.diag_indices(len(idx))] = True  # spots attend to themselves (see test above)
    n, H, D, S = len(lv.coords), 2, 4, 6
    rng = np.random.default_rng(0)
    q, k, v = (rng.normal(size=(n, H, D)).astype(np.float32) for _ in range(3))
    bias = (0.5 * rng.normal(size=(H, 2 * S - 1, 2 * S - 1))).astype(np.float32)
    got = jax.jit(lattice.lattice_window_attention)(
        jnp.asarray(q), jnp.asarray(k), jnp.asarray(v), lv.coords, lv.regular, lv.shifted, bias
    )
    c = lv.coords.astype(np.int64)
    d = c[None, :, :] - c[:, None, :]  # key - query
    s = np.einsum("ihd,jhd->hij", q.astype(np.float64), k.astype(np.float64)) / np.sqrt(D)
    ok = np.abs(d).max(-1) < S
    s = s + np.where(
        ok,
        bias[:, np.clip(d[..., 0] + S - 1, 0, 2 * S - 2), np.clip(d[..., 1] + S - 1, 0, 2 * S - 2)],
        0.0,
    )
    s = np.where(theirs[None], s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    want = np.einsum("hij,jhd->ihd", p, v.astype(np.float64))
    np.testing.assert_allclose(np.asarray(got), want, rtol=2e-5, atol=2e-5)


def test_authors_canvas_examples():
    """``SPAN_Padder.compute_padding`` for 2 poolings (S_n = RF = 4): extent 7 -> canvas 12,
    offset 2; extent 13 -> 20, offset 3; extent 4 -> 8, offset 2; one level: extent + 1."""
    off, can = lattice.authors_canvas((7, 13), levels=3)
    assert can.tolist() == [12, 20] and off.tolist() == [2, 3]
    off, can = lattice.authors_canvas((4, 1), levels=3)
    assert can.tolist() == [8, 8] and off.tolist() == [2, 3]
    off, can = lattice.authors_canvas((5, 6), levels=1)
    assert can.tolist() == [6, 7] and off.tolist() == [0, 0]
    with pytest.raises(ValueError, match="authors_canvas"):
        lattice.authors_canvas((0, 3), levels=2)


def test_model_structure_follows_the_authors_builder():
    """``slide_configs "111-21"``, ``skip_first: 1``, ``global_strategy: 'proj'``: the second
    pixel shuffle and the gene head read the 2C skip concatenation; tokens start from the input
    width (F) and take their own Linear with bias at the input and at every (un)pooling. The
    options give back our earlier structure (fusion Linear, tokens through the spots' weights)."""
    from flax import nnx

    from fidia_jax.projects.hist.model import HiST

    F, G, C = 6, 5, 8
    # no transformer blocks: only the pooling / skip / token structure is checked (fast init)
    kw = dict(dim=C, heads=2, enc_depths=(0, 0, 0), dec_depths=(0, 0), window=6)
    m = nnx.eval_shape(lambda: HiST(F, G, **kw, rngs=nnx.Rngs(0)))  # shapes only, no compile
    assert m.unpools[0].lin.kernel.shape == (C, 4 * C)
    assert m.unpools[1].lin.kernel.shape == (2 * C, 4 * C)
    assert m.head.kernel.shape == (2 * C, G) and len(m.fuse) == 0
    assert m.fixed_token.shape == (1, F) and m.token_in.kernel.shape == (F, C)
    assert m.token_in.bias is not None and m.pools[0].g_proj.kernel.shape == (C, C)
    assert m.unpools[1].g_proj.kernel.shape == (2 * C, C)
    old = nnx.eval_shape(
        lambda: HiST(F, G, **kw, token_path="kernel", skip_order="fuse", rngs=nnx.Rngs(0))
    )
    assert old.unpools[1].lin.kernel.shape == (C, 4 * C) and old.head.kernel.shape == (C, G)
    assert len(old.fuse) == 2 and old.fixed_token.shape == (1, C)
    assert not hasattr(old, "token_in") and not hasattr(old.pools[0], "g_proj")
    with pytest.raises(ValueError, match="token_path"):
        HiST(F, G, **kw, token_path="mean", rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match="skip_order"):
        HiST(F, G, **kw, skip_order="before", rngs=nnx.Rngs(0))


def test_config_defaults_follow_the_authors_yaml():
    """The settings of ``gene_prediction.yaml`` / ``hist.yaml`` that run here are the defaults;
    the width is the named preset ``authors``; ``before_issue38`` restores our earlier ones."""
    from fidia_jax.projects.hist.configs import get_config

    d = get_config("default")
    assert (d.lr, d.weight_decay, d.epochs, d.clip_norm) == (1e-4, 1e-5, 100, 0.0)
    assert (d.window, d.enc_depths, d.dec_depths, d.dropout) == (6, (1, 1, 1), (2, 1), 0.05)
    assert (d.ffn_activation, d.token_path, d.skip_order) == ("relu", "proj", "after_blocks")
    assert (d.pad, d.always_shift, d.drop_p, d.shear_deg) == ("authors", False, 0.75, 30.0)
    assert d.init_bias_with_mean and d.input_proj == "linear"
    a = get_config("authors")
    assert (a.dim, a.heads, a.dim // a.heads) == (512, 8, 64)
    o = get_config("before_issue38")
    assert (o.ffn_activation, o.token_path, o.skip_order, o.pad, o.always_shift) == (
        "gelu",
        "kernel",
        "fuse",
        "none",
        True,
    )
