"""SKAB's evaluation protocol against SKAB's own code (github waico/SKAB @ b2c0d46): the fixture
``tests/data/skab/skab_reference.{npz,json}`` made by ``tools/skab_make_fixture.py`` from
``core/metrics.py`` (``chp_score``) and the UCL cells of the Conv-AE / LSTM-AE / Vanilla-AE
notebooks."""

import json
import math
import pathlib

import numpy as np
import pytest

from fidia_jax.projects import teamwork
from fidia_jax.projects.teamwork import skab

DATA = pathlib.Path(__file__).resolve().parents[2] / "data" / "skab"
META = json.loads((DATA / "skab_reference.json").read_text())
REF = np.load(DATA / "skab_reference.npz")


def _runs(name):
    cuts = np.cumsum(REF[f"{name}_lengths"])[:-1]
    return np.split(REF[f"{name}_labels"], cuts), np.split(REF[f"{name}_preds"], cuts)


def _same(got, want):
    """Equal, NaN where SKAB's is NaN (its 0 / 0)."""
    return (math.isnan(got) and math.isnan(want)) or got == want


@pytest.mark.parametrize("name", META["binary_cases"])
def test_binary_metrics_equal_skab(name):
    """Exact: SKAB's pooled counts, and its F1 / FAR / MAR rounded to 2 decimals (the same
    float64 operations in the same order, then numpy's rounding)."""
    labels, preds = _runs(name)
    got = skab.skab_binary_metrics(labels, preds)
    np.testing.assert_array_equal(
        [got[k] for k in ("tp", "tn", "fp", "fn")], REF[f"{name}_confusion"]
    )
    # NaN where SKAB's is NaN (its 0 / 0): assert_array_equal takes NaN as equal to NaN
    np.testing.assert_array_equal([got[k] for k in ("f1", "far", "mar")], REF[f"{name}_binary"])
    # unrounded values round to SKAB's
    raw = skab.skab_binary_metrics(labels, preds, decimals=None)
    for k, want in zip(("f1", "far", "mar"), REF[f"{name}_binary"], strict=True):
        assert _same(float(np.round(raw[k], 2)), float(want))


def test_edge_cases_are_in_the_fixture():
    """The cases above include SKAB's NaNs and the 0 / 100 % extremes."""
    assert np.isnan(REF["nothing_at_all_binary"][[0, 2]]).all()
    assert np.isnan(REF["all_anomalous_binary"][1])
    assert REF["none_predicted_binary"].tolist() == [0.0, 0.0, 100.0]
    assert REF["all_predicted_binary"][1:].tolist() == [100.0, 0.0]
    # scoring windows that cross the first and the last step (cut there by both codes)
    shift = {"lefter": (-1, 0), "righter": (0, 1), "center": (-0.5, 0.5)}
    lo = [c + shift[d][0] * w for n, cps, w, d in META["changepoint_cases"] for c in cps]
    hi = [
        (c + shift[d][1] * w, n) for n, cps, w, d in META["changepoint_cases"] for c in cps
    ]  # fmt: skip
    assert min(lo) < 0 and any(h > n - 1 for h, n in hi)


@pytest.mark.parametrize("k", range(len(META["changepoint_cases"])))
def test_changepoint_windows_at_the_edges_equal_skab(k):
    """SKAB's window form (changepoints as timestamps, ``window_width``, each destination, windows
    cut at the series ends) equals the point form on :func:`skab.skab_window_labels`."""
    length, cps, width, dest = META["changepoint_cases"][k]
    labels = skab.skab_window_labels(length, cps, width, destination=dest)
    got = skab.skab_binary_metrics([labels], [REF[f"cp{k}_preds"]])
    np.testing.assert_array_equal(
        [got[c] for c in ("tp", "tn", "fp", "fn")], REF[f"cp{k}_confusion"]
    )
    np.testing.assert_array_equal([got[c] for c in ("f1", "far", "mar")], REF[f"cp{k}_binary"])


def test_window_labels_reject_overlaps_and_bad_input():
    with pytest.raises(ValueError, match="overlap"):
        skab.skab_window_labels(20, [5, 8], 4)
    with pytest.raises(ValueError, match="destination"):
        skab.skab_window_labels(20, [5], 4, destination="middle")
    with pytest.raises(ValueError, match="increase"):
        skab.skab_window_labels(20, [25], 4)


@pytest.mark.parametrize("nb", ["Conv_AE", "LSTM_AE", "Vanilla_AE"])
def test_ucl_equals_skab_notebooks(nb):
    """``quantile_Q * factor`` against the notebook's own expression on a ``pd.Series``: equal to
    2 ulp (their ``q * 4 / 3`` rounds twice, our ``q * (4/3)`` once; the linear quantile is the
    same)."""
    q, factor = skab.SKAB_UCL_RULES[nb]
    assert q == META["ucl"][nb]["Q"]
    for j in range(len(META["ucl_lengths"])):
        got = skab.skab_ucl(REF[f"ucl_train_{j}"], quantile=q, factor=factor)
        assert got == pytest.approx(float(REF[f"ucl_{nb}"][j]), rel=4.5e-16, abs=0)


def test_ucl_bad_input():
    with pytest.raises(ValueError, match="finite"):
        skab.skab_ucl([1.0, np.nan])
    with pytest.raises(ValueError, match="quantile"):
        skab.skab_ucl([1.0, 2.0], quantile=1.5)
    with pytest.raises(ValueError, match="runs"):
        skab.skab_binary_metrics([[0, 1]], [])
    with pytest.raises(ValueError, match="0 or 1"):
        skab.skab_binary_metrics([[0, 2]], [[0, 1]])


@pytest.mark.parametrize("k", range(len(META["window_cases"])))
def test_strict_comparison_and_the_conv_ae_window_rule(k):
    """The notebook flags a window when its residual is strictly above the UCL (a window equal to
    it is not), and step ``d`` when the ``N - 1`` windows ``d - N + 1 .. d - 1`` all are, for
    ``d`` in ``[N - 1, n_windows - N]`` only. Our ``skab_ucl`` rule flags ``> UCL`` likewise;
    our Conv-AE peer's covering-minimum score (every window covering ``d``, all steps) is a
    different rule: the difference is asserted here and documented."""
    n_steps, n_win = META["window_cases"][k]
    win, ucl = REF[f"win{k}_scores"], float(REF[f"win{k}_ucl"])
    assert skab.skab_ucl(REF[f"win{k}_train"]) == pytest.approx(ucl, rel=4.5e-16, abs=0)
    np.testing.assert_array_equal(win > ucl, REF[f"win{k}_anomalous"])
    assert win[3] == ucl and not REF[f"win{k}_anomalous"][3]  # the tie
    above = win > ucl
    rule = np.zeros(n_win + n_steps - 1, np.int8)
    for d in range(n_steps - 1, n_win - n_steps + 1):
        rule[d] = above[d - n_steps + 1 : d].all()
    np.testing.assert_array_equal(rule, REF[f"win{k}_prediction"])
    ours = (teamwork.train.covering_minimum(win, n_steps) > ucl).astype(np.int8)
    assert not np.array_equal(ours, REF[f"win{k}_prediction"])


def test_evaluate_scores_uses_skab_rule():
    """``evaluate_scores``' ``skab_ucl`` row: SKAB's UCL, strict comparison, SKAB's F1 / FAR /
    MAR (unrounded) on the fixture's random case; ``ucl_strict=False`` is the earlier rule."""
    labels, _ = _runs("random")
    rng = np.random.default_rng(0)
    train = rng.gamma(2.0, 0.5, size=200)
    ucl = skab.skab_ucl(train)
    runs = []
    for y in labels:
        s = np.where(
            y == 1, ucl + rng.normal(0, 0.5, len(y)), ucl - np.abs(rng.normal(0, 1, len(y)))
        )
        s[::7] = ucl  # ties: normal under SKAB's ">"
        runs.append((s, y, train))
    out = teamwork.evaluate_scores(runs, 0.1)["skab_ucl"]
    want = skab.skab_binary_metrics(
        labels, [(s > ucl).astype(int) for s, _, _ in runs], decimals=None
    )
    assert (out["f1"], out["far"], out["mar"]) == (want["f1"], want["far"], want["mar"])
    loose = teamwork.evaluate_scores(runs, 0.1, ucl_strict=False)["skab_ucl"]
    assert loose["far"] > out["far"]
