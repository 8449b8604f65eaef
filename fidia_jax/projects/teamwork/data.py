"""Multivariate time series for anomaly detection: SKAB loader, synthetic generator, FFT period.

* :func:`load_skab` reads the Skoltech Anomaly Benchmark (SKAB) from ``<data_dir>/skab/``:
  ``';'``-separated CSVs with a ``datetime`` column, 8 sensor channels, ``anomaly`` and
  ``changepoint`` labels; 34 labelled runs (``valve1/``, ``valve2/``, ``other/``) and
  ``anomaly-free/anomaly-free.csv``. SKAB's convention trains on the first 400 points of each run
  (``train_test_split(..., train_size=400, shuffle=False)`` in ``core/utils.py`` of
  github.com/waico/SKAB); :data:`SKAB_TRAIN_SIZE`.
* :func:`make_synthetic` writes periodic channels with known periods and a known driving
  structure (auxiliary channels are lagged mixtures of dominant ones) and injects point,
  contextual, shapelet, seasonal and trend anomalies with ground-truth labels.
* :func:`dominant_period` finds a channel's dominant period from the FFT amplitude spectrum.
* :func:`validate_series` is the one input check (finite, no constant channel, long enough).
"""

from __future__ import annotations

import dataclasses
import pathlib
import warnings
from typing import Any

import numpy as np

from fidia_jax._io import resolve_data_dir
from fidia_jax.errors import DataError

__all__ = [
    "ANOMALY_KINDS",
    "SKAB_CHANNELS",
    "SKAB_TRAIN_SIZE",
    "SkabRun",
    "SyntheticSeries",
    "dominant_period",
    "load_skab",
    "make_synthetic",
    "validate_series",
]

#: SKAB's 8 sensor channels, in file order.
SKAB_CHANNELS: tuple[str, ...] = (
    "Accelerometer1RMS", "Accelerometer2RMS", "Current", "Pressure", "Temperature",
    "Thermocouple", "Voltage", "Volume Flow RateRMS",
)  # fmt: skip
#: SKAB's convention: the first 400 points of each run are the training part.
SKAB_TRAIN_SIZE = 400
#: Kinds of anomaly :func:`make_synthetic` injects.
ANOMALY_KINDS: tuple[str, ...] = ("point", "contextual", "shapelet", "seasonal", "trend")


def validate_series(values: Any, *, window: int | None = None, name: str = "series") -> np.ndarray:
    """Checks a multivariate series and returns it as float32 ``(T, C)``.

    Args:
      values: ``(T, C)`` array-like.
      window: if given, the series must hold at least ``window`` steps.
      name: used in error messages.

    Raises:
      DataError: not 2-D, empty, NaN/inf (names the channel and first step), a channel of
        constant value (names it), or ``T < window``.
    """
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] == 0 or x.shape[1] == 0:
        raise DataError(f"{name}: expected a (T, C) array with T, C >= 1, got shape {x.shape}")
    bad = ~np.isfinite(x)
    if bad.any():
        t, c = np.argwhere(bad)[0]
        raise DataError(
            f"{name}: channel {c} holds {int(bad[:, c].sum())} NaN/inf values (first at step {t})"
        )
    if window is not None and x.shape[0] < window:
        raise DataError(f"{name}: window {window} is longer than the series ({x.shape[0]} steps)")
    spread = x.max(axis=0) - x.min(axis=0)
    const = np.flatnonzero(spread <= 1e-12 * np.maximum(1.0, np.abs(x).max(axis=0)))
    if const.size:
        raise DataError(
            f"{name}: channel {int(const[0])} is constant (value {x[0, const[0]]:g}); "
            "it carries no signal and cannot be standardised"
        )
    return x.astype(np.float32)


def dominant_period(
    x: Any, *, min_period: int = 2, max_period: int | None = None, beyond: str = "raise"
) -> int:
    """Dominant period of a 1-D signal: the period of the largest FFT amplitude.

    The mean is removed and every frequency ``k / T`` (``k >= 1``, period ``T / k >= 2``) is
    looked at. When the largest amplitude lies at a period inside ``[min_period, max_period]``
    (default ``max_period = T // 2``) the result is ``round(T / k*)``. When it lies outside, the
    best period *inside* the range would be an alias or a weaker component, so it is never
    returned silently: ``beyond="raise"`` raises, ``beyond="clip"`` returns the bound on the
    side of the true period with a ``UserWarning`` that names both.

    Args:
      x: ``(T,)`` finite floats, ``T >= 2 * min_period``.
      min_period, max_period: the searched range of periods (steps).
      beyond: ``"raise"`` (default) or ``"clip"``, when the strongest period is out of range.

    Returns:
      The period in steps (int). A signal with no oscillation (flat spectrum) returns the
      smallest-frequency candidate's period.

    Raises:
      ValueError: not 1-D, too short, non-finite, an empty range, an unknown ``beyond``, or
        (``beyond="raise"``) the strongest period outside ``[min_period, max_period]``.
    """
    if beyond not in ("raise", "clip"):
        raise ValueError(f"beyond must be 'raise' or 'clip', got {beyond!r}")
    s = np.asarray(x, dtype=np.float64)
    if s.ndim != 1 or s.size < 2 * min_period or not np.isfinite(s).all():
        raise ValueError(
            f"x must be a finite 1-D array of >= {2 * min_period} steps, got {s.shape}"
        )
    n = s.size
    max_period = n // 2 if max_period is None else min(max_period, n)
    amp = np.abs(np.fft.rfft(s - s.mean()))
    k = np.arange(amp.size)
    with np.errstate(divide="ignore"):
        period = np.where(k > 0, n / np.maximum(k, 1), np.inf)
    ok = (k > 0) & (period >= min_period) & (period <= max_period)
    if not ok.any():
        raise ValueError(f"no frequency with period in [{min_period}, {max_period}] for T={n}")
    best = int(np.flatnonzero(ok)[np.argmax(amp[ok])])
    every = (k > 0) & (period >= 2)
    top = int(np.flatnonzero(every)[np.argmax(amp[every])])
    # out of range only when strictly stronger (a tie keeps the in-range period)
    if amp[top] > amp[best] * (1 + 1e-9) and not ok[top]:
        true_p = n / top
        bound = max_period if true_p > max_period else min_period
        msg = (
            f"dominant_period: the strongest period ({true_p:.1f} steps) lies outside the "
            f"searched range [{min_period}, {max_period}]; the best period inside it "
            f"({n / best:.1f}) would be an alias or a weaker component"
        )
        if beyond == "raise":
            raise ValueError(msg + " (widen the range, or pass beyond='clip')")
        warnings.warn(msg + f"; returning the bound {bound}", UserWarning, stacklevel=2)
        return int(bound)
    return int(round(n / best))


@dataclasses.dataclass(frozen=True)
class SkabRun:
    """One SKAB run.

    Attributes:
      name: ``"<folder>/<file stem>"`` (``"valve1/0"``, ``"anomaly-free"``).
      values: ``(T, 8)`` float32, channels :data:`SKAB_CHANNELS`.
      anomaly: ``(T,)`` int8 outlier labels (all zero for the anomaly-free run).
      changepoint: ``(T,)`` int8 changepoint labels.
    """

    name: str
    values: np.ndarray
    anomaly: np.ndarray
    changepoint: np.ndarray


def _read_skab_csv(path: pathlib.Path, name: str, *, labelled: bool) -> SkabRun:
    try:
        lines = path.read_text().splitlines()
        header = lines[0].split(";")
        rows = [line.split(";") for line in lines[1:] if line.strip()]
        cols = {h: i for i, h in enumerate(header)}
        missing = [c for c in SKAB_CHANNELS if c not in cols]
        if missing:
            raise DataError(f"SKAB: {path} lacks columns {missing} (is it ';'-separated?)")
        unlabelled = [c for c in ("anomaly", "changepoint") if c not in cols]
        if labelled and unlabelled:
            raise DataError(
                f"SKAB: labelled run {name} ({path}) has no {unlabelled} column(s); a labelled "
                "run without labels would read as all normal"
            )
        table = {
            h: np.array([float(r[i]) for r in rows]) for h, i in cols.items() if h != "datetime"
        }
    except (OSError, IndexError, ValueError) as err:
        if isinstance(err, DataError):
            raise
        raise DataError(f"SKAB: cannot read {path}: {err}") from err
    values = validate_series(
        np.stack([table[c] for c in SKAB_CHANNELS], axis=1), name=f"SKAB {name}"
    )
    labels = {}
    for col in ("anomaly", "changepoint"):
        lab = table[col] if col in table else np.zeros(len(rows))  # anomaly-free file only
        if not np.isin(lab, (0, 1)).all():
            raise DataError(f"SKAB: {path} column {col!r} must hold only 0/1")
        labels[col] = lab.astype(np.int8)
    return SkabRun(name, values, labels["anomaly"], labels["changepoint"])


def load_skab(data_dir: str | pathlib.Path | None = None) -> tuple[list[SkabRun], SkabRun]:
    """Loads SKAB from ``<data_dir>/skab/``.

    Args:
      data_dir: the shared data directory (argument, else ``$FIDIA_DATA_DIR``).

    Returns:
      ``(runs, anomaly_free)``: the labelled runs sorted by folder then file number (34 in
      SKAB v1), and the anomaly-free run.

    Raises:
      DataError: directory or files missing, malformed CSV, NaN, constant channel, a labelled
        run (any folder but ``anomaly-free/``) without its ``anomaly`` or ``changepoint``
        column (only the anomaly-free file may omit them: it reads as all normal).
    """
    root = resolve_data_dir(data_dir) / "skab"
    if not root.is_dir():
        raise DataError(f"SKAB directory not found: {root}")
    runs = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and p.name != "anomaly-free"):
        files = sorted(
            folder.glob("*.csv"),
            key=lambda p: (not p.stem.isdigit(), int(p.stem) if p.stem.isdigit() else 0, p.stem),
        )
        runs += [_read_skab_csv(f, f"{folder.name}/{f.stem}", labelled=True) for f in files]
    free = root / "anomaly-free" / "anomaly-free.csv"
    if not runs or not free.is_file():
        raise DataError(f"SKAB: expected labelled runs and anomaly-free/anomaly-free.csv in {root}")
    return runs, _read_skab_csv(free, "anomaly-free", labelled=False)


@dataclasses.dataclass(frozen=True)
class SyntheticSeries:
    """A synthetic train/test pair with ground truth (see :func:`make_synthetic`).

    Attributes:
      train: ``(T_train, C)`` float32, anomaly-free.
      test: ``(T_test, C)`` float32, with injected anomalies.
      labels: ``(T_test,)`` int8, 1 on every injected step.
      periods: ``(C,)`` int, each channel's period (auxiliaries inherit their drivers').
      drivers: ``(C, C)`` float32, ``drivers[i, j]`` = weight of channel ``i`` in auxiliary
        ``j`` (zero columns for dominant channels).
      dominant: ``(C,)`` bool, the driving channels.
      anomalies: ``(kind, start, end, channel)`` of every injection, ``[start, end)``.
    """

    train: np.ndarray
    test: np.ndarray
    labels: np.ndarray
    periods: np.ndarray
    drivers: np.ndarray
    dominant: np.ndarray
    anomalies: tuple[tuple[str, int, int, int], ...]


def make_synthetic(
    seed: int = 0,
    *,
    train_length: int = 2000,
    test_length: int = 2000,
    n_dominant: int = 2,
    n_auxiliary: int = 4,
    periods: tuple[int, ...] = (24, 40),
    lag: int = 3,
    noise: float = 0.1,
    n_anomalies: int = 10,
    kinds: tuple[str, ...] = ANOMALY_KINDS,
) -> SyntheticSeries:
    """Periodic dominant channels drive auxiliary channels; anomalies are injected in the test part.

    Dominant channel ``k``: ``sin(2 pi t / P_k + phi_k) + 0.3 sin(4 pi t / P_k)`` plus noise
    (``P_k = periods[k % len(periods)]``). Auxiliary channel ``j``: ``sum_k W_kj d_k(t - lag)`` with
    one nonzero driver weight in ``[0.8, 1.2]`` (random sign) plus noise, so it has its driver's
    period. Each anomaly (kinds cycled over ``kinds``) hits ONE random channel on a random span,
    after the mixing, so it also breaks the channel relations: ``point`` one step ``+-5``;
    ``contextual`` a sign flip of the clean signal for ``P/4`` steps; ``shapelet`` a square wave
    over one period; ``seasonal`` the period halved over two periods; ``trend`` a linear ramp to
    ``+-2`` over two periods. Spans do not overlap and keep a gap of one period.

    Args:
      seed: NumPy ``default_rng`` seed.
      train_length, test_length: steps (train is anomaly-free).
      n_dominant, n_auxiliary: channel counts (dominant first).
      periods: periods of the dominant channels (cycled).
      lag: delay (steps) of the auxiliaries behind their drivers.
      noise: Gaussian noise standard deviation on every channel.
      n_anomalies: injections in the test part.
      kinds: anomaly kinds to cycle over (subset of :data:`ANOMALY_KINDS`).

    Raises:
      ValueError: unknown kind, too many anomalies for the test length, bad sizes.
    """
    unknown = [k for k in kinds if k not in ANOMALY_KINDS]
    if unknown or not kinds:
        raise ValueError(f"kinds must be a non-empty subset of {ANOMALY_KINDS}, got {kinds}")
    if n_dominant < 1 or n_auxiliary < 0 or min(periods) < 4 or lag < 0:
        raise ValueError("need n_dominant >= 1, n_auxiliary >= 0, periods >= 4, lag >= 0")
    rng = np.random.default_rng(seed)
    n_ch = n_dominant + n_auxiliary
    per = np.array([periods[k % len(periods)] for k in range(n_dominant)])
    phase = rng.uniform(0, 2 * np.pi, n_dominant)
    drivers = np.zeros((n_ch, n_ch), np.float32)
    for j in range(n_dominant, n_ch):
        k = int(rng.integers(n_dominant))
        drivers[k, j] = rng.uniform(0.8, 1.2) * rng.choice([-1.0, 1.0])
    total = train_length + test_length
    t = np.arange(-lag, total, dtype=np.float64)
    dom = np.sin(2 * np.pi * t[:, None] / per + phase) + 0.3 * np.sin(4 * np.pi * t[:, None] / per)
    clean = np.zeros((total, n_ch))
    clean[:, :n_dominant] = dom[lag:]
    clean[:, n_dominant:] = dom[:total] @ drivers[:n_dominant, n_dominant:]
    x = clean + noise * rng.standard_normal(clean.shape)
    periods_all = np.array(
        [per[k] for k in range(n_dominant)]
        + [per[int(np.flatnonzero(drivers[:, j])[0])] for j in range(n_dominant, n_ch)]
    )
    test = x[train_length:].copy()
    clean_test = clean[train_length:]
    labels = np.zeros(test_length, np.int8)
    busy = np.zeros(test_length, bool)
    injected = []
    for i in range(n_anomalies):
        kind = kinds[i % len(kinds)]
        c = int(rng.integers(n_ch))
        p = int(periods_all[c])
        length = {
            "point": 1,
            "contextual": max(2, p // 4),
            "shapelet": p,
            "seasonal": 2 * p,
            "trend": 2 * p,
        }[kind]
        for _ in range(200):
            start = int(rng.integers(0, test_length - length + 1))
            lo, hi = max(0, start - p), min(test_length, start + length + p)
            if not busy[lo:hi].any():
                break
        else:
            raise ValueError(
                f"cannot place {n_anomalies} non-overlapping anomalies in "
                f"{test_length} steps; lower n_anomalies"
            )
        end = start + length
        seg = slice(start, end)
        sign = rng.choice([-1.0, 1.0])
        amp = np.abs(clean_test[:, c]).max()
        tt = np.arange(length)
        if kind == "point":
            test[seg, c] += sign * 5.0
        elif kind == "contextual":
            test[seg, c] = -clean_test[seg, c] + noise * rng.standard_normal(length)
        elif kind == "shapelet":
            test[seg, c] = amp * np.sign(np.sin(2 * np.pi * tt / p) + 1e-9)
        elif kind == "seasonal":
            test[seg, c] = amp * np.sin(4 * np.pi * tt / p) + noise * rng.standard_normal(length)
        else:  # trend
            test[seg, c] += sign * 2.0 * (tt + 1) / length
        labels[seg] = 1
        busy[seg] = True
        injected.append((kind, start, end, c))
    return SyntheticSeries(
        train=x[:train_length].astype(np.float32),
        test=test.astype(np.float32),
        labels=labels,
        periods=periods_all.astype(np.int64),
        drivers=drivers,
        dominant=np.arange(n_ch) < n_dominant,
        anomalies=tuple(sorted(injected, key=lambda a: a[1])),
    )
