"""SKAB loader, synthetic generator, FFT dominant period, series validation."""

import numpy as np
import pytest

from fidia_jax.errors import DataError
from fidia_jax.projects.teamwork import data


@pytest.mark.parametrize("period", [7, 24, 50])
def test_dominant_period_of_a_sinusoid(period):
    t = np.arange(1000)
    x = 3.0 * np.sin(2 * np.pi * t / period + 0.4) + 0.5 * np.sin(2 * np.pi * t / 9.3) + 1.0
    x = x + 0.1 * np.random.default_rng(0).standard_normal(t.size)
    assert data.dominant_period(x) == pytest.approx(period, abs=0.02 * period + 0.5)


def test_dominant_period_exact_bin_and_range():
    x = np.sin(2 * np.pi * np.arange(480) / 24)  # 480 / 24 = bin 20 exactly
    assert data.dominant_period(x) == 24
    with pytest.raises(ValueError, match=r"strongest period \(24.0 steps\) lies outside"):
        data.dominant_period(x, max_period=12)  # never an in-range alias
    with pytest.warns(UserWarning, match="returning the bound 12"):
        assert data.dominant_period(x, max_period=12, beyond="clip") == 12
    with pytest.raises(ValueError, match="1-D"):
        data.dominant_period(np.ones((4, 4)))


def test_validate_series_errors_name_the_problem():
    x = np.random.default_rng(0).normal(size=(50, 3))
    np.testing.assert_allclose(data.validate_series(x), x.astype(np.float32))
    bad = x.copy()
    bad[7, 2] = np.nan
    with pytest.raises(DataError, match="channel 2 .*NaN.*step 7"):
        data.validate_series(bad)
    const = x.copy()
    const[:, 1] = 4.0
    with pytest.raises(DataError, match="channel 1 is constant"):
        data.validate_series(const)
    with pytest.raises(DataError, match="window 64 is longer than the series \\(50 steps\\)"):
        data.validate_series(x, window=64)
    with pytest.raises(DataError, match="shape"):
        data.validate_series(np.ones(5))


def test_make_synthetic_ground_truth():
    s = data.make_synthetic(3, train_length=600, test_length=1200, n_anomalies=5)
    assert s.train.shape == (600, 6) and s.test.shape == (1200, 6)
    # Labels are exactly the union of the injected spans; every kind appears once.
    lab = np.zeros(1200, np.int8)
    for _, a, b, _ in s.anomalies:
        lab[a:b] = 1
    np.testing.assert_array_equal(s.labels, lab)
    assert sorted(k for k, *_ in s.anomalies) == sorted(data.ANOMALY_KINDS)
    # Known periods: the FFT recovers them on the clean training part.
    assert [data.dominant_period(s.train[:, c]) for c in range(6)] == s.periods.tolist()
    # Known driving structure: each auxiliary has one dominant driver, lagged by 3 steps.
    assert s.dominant.tolist() == [True, True, False, False, False, False]
    for j in range(2, 6):
        (i,) = np.flatnonzero(s.drivers[:, j])
        pred = s.drivers[i, j] * s.train[:-3, i]
        assert np.corrcoef(pred, s.train[3:, j])[0, 1] > 0.95
    # Outside the anomalies, the test part follows the same law as training.
    with pytest.raises(ValueError, match="kinds"):
        data.make_synthetic(kinds=("spike",))


def _write_skab(root, rows):
    header = "datetime;" + ";".join(data.SKAB_CHANNELS) + ";anomaly;changepoint\n"
    (root / "skab" / "valve1").mkdir(parents=True)
    (root / "skab" / "anomaly-free").mkdir(parents=True)
    body = "".join(
        f"2020-03-09 10:14:{i:02d};" + ";".join(str(v) for v in r) + "\n"
        for i, r in enumerate(rows)
    )
    (root / "skab" / "valve1" / "0.csv").write_text(header + body)
    (root / "skab" / "anomaly-free" / "anomaly-free.csv").write_text(
        header.replace(";anomaly;changepoint", "")
        + "".join(
            f"2020-03-09 10:14:{i:02d};" + ";".join(str(v) for v in r[:8]) + "\n"
            for i, r in enumerate(rows)
        )
    )


def test_load_skab_small_files(tmp_path):
    rng = np.random.default_rng(0)
    rows = [list(rng.normal(size=8).round(3)) + [i % 2, 0] for i in range(6)]
    _write_skab(tmp_path, rows)
    runs, free = data.load_skab(tmp_path)
    assert [r.name for r in runs] == ["valve1/0"] and free.name == "anomaly-free"
    np.testing.assert_allclose(runs[0].values, np.array(rows, np.float32)[:, :8])
    np.testing.assert_array_equal(runs[0].anomaly, [0, 1, 0, 1, 0, 1])
    assert free.anomaly.sum() == 0


def test_load_skab_bad_input(tmp_path):
    rng = np.random.default_rng(0)
    rows = [list(rng.normal(size=8).round(3)) + [0, 0] for _ in range(6)]
    rows[3][4] = "nan"
    _write_skab(tmp_path, rows)
    with pytest.raises(DataError, match="valve1/0: channel 4 .*NaN"):
        data.load_skab(tmp_path)
    with pytest.raises(DataError, match="not found"):
        data.load_skab(tmp_path / "nowhere")


@pytest.mark.parametrize("drop", ["anomaly", "changepoint"])
def test_load_skab_labelled_run_without_labels_is_an_error(tmp_path, drop):
    rng = np.random.default_rng(0)
    rows = [list(rng.normal(size=8).round(3)) + [1, 0] for _ in range(6)]
    _write_skab(tmp_path, rows)
    run = tmp_path / "skab" / "valve1" / "0.csv"
    lines = [line.split(";") for line in run.read_text().splitlines()]
    col = lines[0].index(drop)
    run.write_text("\n".join(";".join(f[:col] + f[col + 1 :]) for f in lines) + "\n")
    with pytest.raises(DataError, match=f"labelled run valve1/0 .*\\['{drop}'\\]"):
        data.load_skab(tmp_path)


def test_load_skab_shared(shared_data_dir):
    runs, free = data.load_skab(shared_data_dir)
    assert len(runs) == 34
    assert all(r.values.shape[1] == 8 and r.values.shape[0] > data.SKAB_TRAIN_SIZE for r in runs)
    assert free.values.shape == (9405, 8)
    assert runs[0].name == "other/1"
    # SKAB's test parts are about half anomalous (hand count over the shared files: 0.537).
    k = data.SKAB_TRAIN_SIZE
    frac = sum(r.anomaly[k:].sum() for r in runs) / sum(len(r.anomaly) - k for r in runs)
    assert frac == pytest.approx(0.5366, abs=1e-3)


@pytest.mark.parametrize("scale", [1e-3, 1.0, 1e4])
def test_a_period_beyond_the_bound_is_said_not_replaced_by_its_harmonic(scale):
    """Issue 42: a fundamental of 40 steps with a weaker harmonic at 20 and a bound of 30: the
    search used to return 20 (the best inside the bound); now it says the true period is out of
    range, at any scale of the data (float32 input)."""
    t = np.arange(960)
    x = (np.sin(2 * np.pi * t / 40) + 0.4 * np.sin(2 * np.pi * t / 20)) * scale
    x = x.astype(np.float32)
    assert data.dominant_period(x) == 40
    with pytest.raises(ValueError, match=r"strongest period \(40.0 steps\).*\[2, 30\]"):
        data.dominant_period(x, max_period=30)
    with pytest.warns(UserWarning, match="best period inside it \\(20.0\\)"):
        assert data.dominant_period(x, max_period=30, beyond="clip") == 30
    with pytest.raises(ValueError, match="beyond"):
        data.dominant_period(x, beyond="alias")
