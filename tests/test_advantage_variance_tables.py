"""The advantage-variance benchmark's table (issue 41): ``benchmarks/advantage_variance.py``
writes what docs/fidia_rewards.md renders. The rows are made up (no draws)."""

from __future__ import annotations

from _scripts import load_script

av = load_script("benchmarks/advantage_variance.py")


def test_rows_name_the_setting_leave_loo_out_where_it_does_not_apply_and_mark_rloo():
    record = {"rows": [
        {"n": 6, "k": 1, "none": 0.09, "loo": 0.08, "loo-1": 0.08},
        {"n": 6, "k": 6, "none": 9.4, "loo": None, "loo-1": 0.39},
    ]}  # fmt: skip
    t = av.tables(record)["variance"]
    assert t["columns"] == ["n, k", "none", "loo", "loo-1", "note"]
    assert t["rows"] == [["6, 1", 0.09, 0.08, 0.08, "loo-1 is RLOO"], ["6, 6", 9.4, None, 0.39, ""]]


def test_without_a_baseline_at_k_equal_n_it_matches_brute_force_numpy():
    """k = n = 6, no baseline: every sample's effective reward is the max of the 6 values, so
    the per-draw gradient is max * (counts - 6 p); numpy draws of the same policy agree."""
    import numpy as np

    (row,) = av.variances(draws=4000, seed=0, settings=((6, 6),), baselines=("none", "loo"))
    assert row["loo"] is None  # leave-one-out needs k < n
    v, th = np.array(av.VALUES), np.array(av.THETA)
    p = np.exp(th) / np.exp(th).sum()
    x = np.random.default_rng(0).choice(5, size=(20000, 6), p=p)
    counts = np.stack([(x == j).sum(1) for j in range(5)], 1)
    brute = np.sum(np.var(v[x].max(1)[:, None] * (counts - 6 * p[None]), 0))
    assert abs(row["none"] - brute) / brute < 0.1, (row["none"], brute)
