"""Analytic multi-fidelity functions against hand-computed values, disjoint splits, FreeSolv."""

import math

import numpy as np
import pytest

from fidia_jax.errors import DataError
from fidia_jax.projects.multifidelity import data

F = data.ANALYTIC_FUNCTIONS


def _at(name, level, *x):
    return float(F[name].level(level)(np.asarray([x], np.float64))[0])


def test_forrester_closed_forms():
    # f_H(0) = 4 sin(-4); f_H(1) = 16 sin(8); f_L = 0.5 f_H + 10 (x - 0.5) - 5.
    assert _at("forrester", "hf", 0.0) == pytest.approx(4 * math.sin(-4.0), rel=1e-12)
    assert _at("forrester", "hf", 1.0) == pytest.approx(15.829731945974109, rel=1e-12)
    assert _at("forrester", "lf", 0.0) == pytest.approx(0.5 * 3.027209981231713 - 10.0, rel=1e-12)
    assert _at("forrester", "lf", 0.5) == pytest.approx(0.5 * math.sin(2.0) - 5.0, rel=1e-12)
    # the medium level is our construction (f_H + f_L) / 2
    assert _at("forrester", "mf", 0.0) == pytest.approx(
        0.5 * (3.027209981231713 - 8.486395009384143), rel=1e-12
    )
    # the known global minimum of the high fidelity, f(0.75725) = -6.02074
    grid = np.linspace(0, 1, 200001)[:, None]
    y = F["forrester"].hf(grid)
    assert grid[np.argmin(y), 0] == pytest.approx(0.75725, abs=2e-5)
    assert y.min() == pytest.approx(-6.02074, abs=1e-5)


def test_currin_closed_forms():
    # (0.5, 0.5): (1 - e^-1) * 1868.5 / 159.5
    assert _at("currin", "hf", 0.5, 0.5) == pytest.approx(
        (1 - math.exp(-1)) * 1868.5 / 159.5, rel=1e-12
    )
    # x2 = 0: the factor is its limit 1; x1 = 0: 60 / 20 = 3
    assert _at("currin", "hf", 0.0, 0.0) == pytest.approx(3.0, rel=1e-12)

    # low fidelity at (0.5, 0.5): mean of f_H at (0.55|0.45, 0.55|0.45)
    def fh(a, b):
        return (
            (1 - math.exp(-1 / (2 * b)))
            * (2300 * a**3 + 1900 * a**2 + 2092 * a + 60)
            / (100 * a**3 + 500 * a**2 + 4 * a + 20)
        )

    expect = 0.25 * (fh(0.55, 0.55) + fh(0.55, 0.45) + fh(0.45, 0.55) + fh(0.45, 0.45))
    assert _at("currin", "lf", 0.5, 0.5) == pytest.approx(expect, rel=1e-12)
    # near x2 = 0 the LF clips x2 - 0.05 at 0, where the factor is 1
    expect0 = 0.25 * (fh(0.55, 0.05) + fh(0.45, 0.05))
    expect0 += 0.25 * (
        (2300 * 0.55**3 + 1900 * 0.55**2 + 2092 * 0.55 + 60)
        / (100 * 0.55**3 + 500 * 0.55**2 + 4 * 0.55 + 20)
        + (2300 * 0.45**3 + 1900 * 0.45**2 + 2092 * 0.45 + 60)
        / (100 * 0.45**3 + 500 * 0.45**2 + 4 * 0.45 + 20)
    )
    assert _at("currin", "lf", 0.5, 0.0) == pytest.approx(expect0, rel=1e-12)


def test_park_closed_forms():
    # x = (1, 1, 1, 1): 1/2 (sqrt(3) - 1) + 4 e^(1 + sin 1)
    hf = 0.5 * (math.sqrt(3.0) - 1.0) + 4.0 * math.exp(1.0 + math.sin(1.0))
    assert _at("park", "hf", 1, 1, 1, 1) == pytest.approx(hf, rel=1e-12)
    assert _at("park", "lf", 1, 1, 1, 1) == pytest.approx(
        (1 + math.sin(1.0) / 10) * hf - 2 + 1 + 1 + 0.5, rel=1e-12
    )
    # x4 = 0: the square-root term vanishes, f_H = x1 e^(1 + sin x3)
    assert _at("park", "hf", 0.5, 0.3, 0.0, 0.0) == pytest.approx(0.5 * math.e, rel=1e-12)
    with pytest.raises(ValueError, match="x1 must be > 0"):
        _at("park", "hf", 0.0, 0.5, 0.5, 0.5)


def test_borehole_closed_forms():
    x = (0.1, 1000.0, 89335.0, 1050.0, 89.55, 760.0, 1400.0, 10950.0)
    rw, r, tu, hu, tl, hl, length, kw = x
    lr = math.log(r / rw)
    hf = 2 * math.pi * tu * (hu - hl) / (lr * (1 + 2 * length * tu / (lr * rw**2 * kw) + tu / tl))
    lf = 5 * tu * (hu - hl) / (lr * (1.5 + 2 * length * tu / (lr * rw**2 * kw) + tu / tl))
    assert _at("borehole", "hf", *x) == pytest.approx(hf, rel=1e-12)
    assert _at("borehole", "lf", *x) == pytest.approx(lf, rel=1e-12)
    # the centre of the box, evaluated by hand: 70.9723 m^3/yr
    assert hf == pytest.approx(70.97230077224901, rel=1e-12) and lf < hf
    with pytest.raises(ValueError, match=r"\(N, 8\)"):
        F["borehole"].hf(np.zeros((3, 7)))


@pytest.mark.parametrize("name", sorted(F))
def test_analytic_task_inputs_are_disjoint(name):
    t = data.analytic_multifidelity_task(name, 16, 8, 32, 20, seed=3)
    assert t.counts() == {"hf": 16, "mf": 8, "lf": 32}
    assert t.x_train.shape == (56, F[name].dim) and t.x_test.shape == (20, F[name].dim)
    rows = {tuple(r) for r in np.concatenate([t.x_train, t.x_test]).round(7)}
    assert len(rows) == 76  # no input appears in two sets
    fn = F[name]
    for i, level in enumerate(("hf", "mf", "lf")):
        rows_i = t.fidelity_train == i
        np.testing.assert_allclose(
            t.y_train[rows_i],
            fn.level(level)(fn.to_physical(t.x_train[rows_i].astype(np.float64))),
            rtol=1e-5,
        )
    np.testing.assert_allclose(
        t.y_test, fn.hf(fn.to_physical(t.x_test.astype(np.float64))), rtol=1e-5
    )
    two = data.analytic_multifidelity_task(name, 8, 0, 8, 4)
    assert two.fidelity_names == ("hf", "lf")


def test_container_rejects_bad_input():
    x, y = np.zeros((4, 2)), np.arange(4.0)
    ok = dict(
        x_train=x,
        y_train=y,
        fidelity_train=[0, 0, 1, 1],
        x_test=x,
        y_test=y,
        fidelity_names=("hf", "lf"),
    )
    assert data.MultiFidelityData(**ok).counts() == {"hf": 2, "lf": 2}
    with pytest.raises(DataError, match="fidelity 'mf' \\(index 1\\) has no training samples"):
        data.MultiFidelityData(
            **{**ok, "fidelity_train": [0, 0, 2, 2], "fidelity_names": ("hf", "mf", "lf")}
        )
    with pytest.raises(DataError, match="y_train has 1 NaN label"):
        data.MultiFidelityData(**{**ok, "y_train": [0.0, np.nan, 1.0, 2.0]})
    with pytest.raises(DataError, match="y_train \\(N,\\)"):
        data.MultiFidelityData(**{**ok, "y_train": np.zeros(3)})
    with pytest.raises(DataError, match="x_test must be"):
        data.MultiFidelityData(**{**ok, "x_test": np.zeros((4, 3))})
    with pytest.raises(DataError, match=r"must be in \[0, 2\)"):
        data.MultiFidelityData(**{**ok, "fidelity_train": [0, 0, 1, 5]})
    with pytest.raises(ValueError, match="unknown analytic function"):
        data.analytic_multifidelity_task("branin", 8, 0, 8, 4)


def test_load_freesolv_errors(tmp_path):
    with pytest.raises(DataError, match="database.txt"):
        data.load_freesolv(tmp_path)
    (tmp_path / "freesolv").mkdir()
    (tmp_path / "freesolv" / "database.txt").write_text(
        "# header\nid1; C; methane; 2.0; 0.6; abc; 0.03\n"
    )
    with pytest.raises(DataError, match=":2: values"):
        data.load_freesolv(tmp_path)


def _toy_freesolv(n):
    rng = np.random.default_rng(0)
    ids = tuple(f"mol{i}" for i in range(n))
    table = data.FreeSolvTable(ids, ids, rng.normal(size=n), rng.normal(size=n))
    return table, rng.normal(size=(n, 3)).astype(np.float32)


def test_freesolv_too_many_hf_molecules_blames_n_hf():
    # 20 molecules, 4 test -> 16 left: n_hf = 15 keeps one LF molecule, 16 leaves none
    table, feats = _toy_freesolv(20)
    t = data.freesolv_multifidelity_task(table, feats, 15, test_fraction=0.2)
    assert t.counts() == {"hf": 15, "lf": 1}
    for n_hf in (16, 700, 0):
        with pytest.raises(DataError, match=rf"n_hf={n_hf} must be in \[1, 15\]") as e:
            data.freesolv_multifidelity_task(table, feats, n_hf, test_fraction=0.2)
        assert "has 20 molecules, 4 go to the test split" in str(e.value)
        assert "n_lf" not in str(e.value) and "-" not in str(e.value).split(":")[1][:40]
    with pytest.raises(DataError, match=r"n_lf=2 must be in \[1, 1\]"):
        data.freesolv_multifidelity_task(table, feats, 15, test_fraction=0.2, n_lf=2)


@pytest.fixture(scope="module")
def freesolv(shared_data_dir):
    table = data.load_freesolv(shared_data_dir)
    return table, data.freesolv_features(table.smiles, "morgan", n_bits=256)


def test_freesolv_table_and_features(freesolv):
    table, feats = freesolv
    assert len(table.ids) == 642 and feats.shape == (642, 256)
    i = table.ids.index("mobley_1019269")  # butan-1-ol: expt -4.72, GAFF -3.23 kcal/mol
    assert (table.smiles[i], table.expt[i], table.calc[i]) == ("CCCCO", -4.72, -3.23)
    assert set(np.unique(feats)) <= {0.0, 1.0}
    assert np.corrcoef(table.expt, table.calc)[0, 1] > 0.9


def test_freesolv_lf_pool_never_shows_its_hf_label(freesolv):
    table, feats = freesolv
    t = data.freesolv_multifidelity_task(table, feats, 16, split=2, seed=7)
    hf_idx = t.train_index[t.fidelity_train == 0]
    lf_idx = t.train_index[t.fidelity_train == 1]
    assert len(hf_idx) == 16 and len(t.test_index) == 128 and len(lf_idx) == 642 - 128 - 16
    # disjoint molecules, every one used once
    assert len(set(hf_idx) | set(lf_idx) | set(t.test_index)) == 642
    # LF rows carry GAFF values only, HF rows experimental, test experimental
    np.testing.assert_array_equal(
        t.y_train[t.fidelity_train == 1], table.calc[lf_idx].astype(np.float32)
    )
    np.testing.assert_array_equal(
        t.y_train[t.fidelity_train == 0], table.expt[hf_idx].astype(np.float32)
    )
    np.testing.assert_array_equal(t.y_test, table.expt[t.test_index].astype(np.float32))
    np.testing.assert_array_equal(t.x_train, feats[t.train_index])
    # same split, other seed: same test set, other HF subset
    t2 = data.freesolv_multifidelity_task(table, feats, 16, split=2, seed=8)
    np.testing.assert_array_equal(t2.test_index, t.test_index)
    assert set(t2.train_index[:16]) != set(hf_idx)
