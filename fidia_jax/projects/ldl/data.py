"""Label-distribution-learning data sets: the ``.mat`` loader, PyLDL's polarity presets and a
synthetic generator.

Files: ``<data_dir>/ldl/<name>.mat`` (MATLAB files from the PyLDL repository, datasets of Geng's
LDL collection), each holding ``features`` ``(N, F)`` and ``labels`` ``(N, c)`` (rows of
``labels`` are label distributions). :func:`load_ldl_dataset` finds a file by case-insensitive
name (``Emotion6`` is ``emotion6.mat``).

Polarity presets (:data:`LDL_POLARITY`): per data set the ``(pos, neg)`` weights of the
divisiveness ``psi(d) = min(d . pos, d . neg)``, copied as facts from ``pyldl.experiment.
_DVS_PRESETS`` (``python-ldl`` 0.1.2, MIT). For example SJAFFE's labels are (happiness, sadness,
surprise, anger, disgust, fear): happiness and surprise are positive, the rest negative; the
ordinal sets (M2B, SCUT_FBP, Movie: scores 1..5) weigh the scores linearly.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib

import numpy as np

from fidia_jax._io import resolve_data_dir
from fidia_jax.errors import DataError

__all__ = [
    "LDL_BENCHMARK_SETS",
    "LDL_POLARITY",
    "ROW_SUM_ATOL",
    "LdlDataset",
    "check_label_distributions",
    "load_ldl_dataset",
    "load_ldl_mat",
    "synthetic_ldl_dataset",
]

_SJAFFE = ((1.0, 0.0, 1.0, 0.0, 0.0, 0.0), (0.0, 1.0, 0.0, 1.0, 1.0, 1.0))
_SOCIAL = ((0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 0.0), (1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 1.0, 1.0))
_ORDINAL5 = ((0.0, 0.25, 0.5, 0.75, 1.0), (1.0, 0.75, 0.5, 0.25, 0.0))

#: Data set name -> ``(pos, neg)`` polarity weights (PyLDL 0.1.2 ``_DVS_PRESETS``; PyLDL spells
#: Emotion6 ``emotion6``, both spellings are keys here).
LDL_POLARITY: dict[str, tuple[tuple[float, ...], tuple[float, ...]]] = {
    "SJAFFE": _SJAFFE,
    "RAF_ML": _SJAFFE,
    "Emotion6": ((0.0, 0.0, 1.0, 0.0, 0.0, 1.0, 0.0), (1.0, 1.0, 0.0, 1.0, 1.0, 0.0, 0.0)),
    "SBU_3DFE": ((1.0, 0.0, 0.0, 0.0, 0.0, 1.0), (0.0, 1.0, 1.0, 1.0, 1.0, 0.0)),
    "Twitter": _SOCIAL,
    "Flickr": _SOCIAL,
    "Music": ((1.0, 0.0, 1.0, 0.0, 1.0, 1.0, 1.0, 0.5, 0.5),
              (0.0, 1.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.5, 0.5)),
    "Painting": ((1.0, 0.0, 0.0, 1.0, 0.0, 1.0, 0.0, 0.0), (0.0, 1.0, 0.0, 0.0, 1.0, 0.0, 1.0, 1.0)),
    "M2B": _ORDINAL5,
    "fbp5500": _ORDINAL5,
    "SCUT_FBP": _ORDINAL5,
    "Movie": _ORDINAL5,
}  # fmt: skip
LDL_POLARITY["emotion6"] = LDL_POLARITY["Emotion6"]

#: The eight sets of the LDL-DVS benchmark (issue 11), all with a polarity preset.
LDL_BENCHMARK_SETS = (
    "SJAFFE",
    "SBU_3DFE",
    "Emotion6",
    "Movie",
    "SCUT_FBP",
    "M2B",
    "Music",
    "Painting",
)

_REQUIRED_KEYS = ("features", "labels")
#: How far from 1 a label row may sum (float32 rounding passes; 1.5 is an error).
ROW_SUM_ATOL = 1e-3


@dataclasses.dataclass(frozen=True)
class LdlDataset:
    """A label-distribution data set.

    Attributes:
      name: data set name.
      features: ``(N, F)`` float32.
      labels: ``(N, c)`` float32 label distributions (rows sum to 1 within
        :data:`ROW_SUM_ATOL`, entries >= 0).
      pos, neg: ``(c,)`` float32 polarity weights, or ``None`` when the set has no preset.

    Raises:
      DataError: on construction, shapes that disagree, NaN/inf, a negative label, an all-zero
        label row or a row not summing to 1 (named with its sum; nothing is renormalised).
    """

    name: str
    features: np.ndarray
    labels: np.ndarray
    pos: np.ndarray | None = None
    neg: np.ndarray | None = None

    def __post_init__(self) -> None:
        _check_arrays(
            np.asarray(self.features), np.asarray(self.labels), f"LdlDataset {self.name!r}"
        )

    @property
    def num_labels(self) -> int:
        return int(self.labels.shape[1])


def _check_arrays(x: np.ndarray, d: np.ndarray, where: str) -> None:
    if x.ndim != 2 or d.ndim != 2:
        raise DataError(
            f"{where}: features and labels must be 2-D, got shapes {x.shape} and {d.shape}"
        )
    if x.shape[0] != d.shape[0]:
        raise DataError(f"{where}: features have {x.shape[0]} rows but labels {d.shape[0]}")
    if x.shape[0] < 1 or d.shape[1] < 2:
        raise DataError(f"{where}: need >= 1 row and >= 2 labels, got labels shape {d.shape}")
    if not np.all(np.isfinite(x)):
        raise DataError(f"{where}: features hold NaN or infinite values")
    bad = ~np.all(np.isfinite(d), axis=1)
    if bad.any():
        raise DataError(
            f"{where}: labels hold NaN or infinite values (first in row {int(np.argmax(bad))})"
        )
    if np.any(d < 0):
        raise DataError(
            f"{where}: labels hold negative values (row {int(np.argmax(np.any(d < 0, axis=1)))})"
        )
    sums = d.sum(axis=1)
    zero = sums == 0
    if zero.any():
        raise DataError(
            f"{where}: label row {int(np.argmax(zero))} is all zero (not a label distribution)"
        )
    off = np.abs(sums - 1.0) > ROW_SUM_ATOL
    if off.any():
        i = int(np.argmax(off))
        raise DataError(
            f"{where}: label row {i} sums to {sums[i]:.6g}, not 1 (|sum - 1| > {ROW_SUM_ATOL:g}; "
            "rows must be label distributions: normalise them first, nothing is renormalised "
            "silently)"
        )


def check_label_distributions(d, where: str) -> None:
    """Raises ``DataError`` unless ``d`` is ``(N, c)`` finite label distributions: entries
    ``>= 0``, no all-zero row, every row summing to 1 within :data:`ROW_SUM_ATOL` (a row summing
    to 1.5 is an error naming the row and its sum, never renormalised silently).

    Args:
      d: ``(N, c)`` array, ``c >= 2``.
      where: prefix of the message.
    """
    d = np.asarray(d, np.float64)
    _check_arrays(np.zeros((d.shape[0] if d.ndim else 0, 0)), d, where)


def load_ldl_mat(path: str | os.PathLike[str], *, name: str | None = None) -> LdlDataset:
    """Reads one LDL ``.mat`` file (``features`` ``(N, F)``, ``labels`` ``(N, c)``).

    Args:
      path: the file.
      name: data set name (default: the file stem); looked up in :data:`LDL_POLARITY`.

    Returns:
      :class:`LdlDataset` (float32 arrays; ``pos`` / ``neg`` from the preset, if any, checked to
      have ``c`` entries).

    Raises:
      DataError: the file is missing or not a MATLAB file, it lacks the keys ``features`` /
        ``labels`` (the message names the missing and the present keys), shapes disagree, labels
        hold NaN/inf, negative values, an all-zero row or a row not summing to 1, or the preset
        has the wrong number of labels.
    """
    import scipy.io

    path = pathlib.Path(path)
    where = f"LDL file {path}"
    if not path.is_file():
        raise DataError(f"{where} not found")
    try:
        mat = scipy.io.loadmat(path)
    except Exception as exc:  # scipy raises ValueError / MatReadError / OSError variants
        raise DataError(f"{where}: not a readable MATLAB .mat file ({exc})") from exc
    keys = sorted(k for k in mat if not k.startswith("__"))
    missing = [k for k in _REQUIRED_KEYS if k not in mat]
    if missing:
        raise DataError(
            f"{where}: missing key(s) {missing}; an LDL .mat file needs "
            f"{list(_REQUIRED_KEYS)}, this one has {keys}"
        )
    x = np.asarray(mat["features"], dtype=np.float64)
    d = np.asarray(mat["labels"], dtype=np.float64)
    _check_arrays(x, d, where)
    name = name or path.stem
    pos = neg = None
    if name in LDL_POLARITY:
        pos, neg = (np.asarray(p, np.float32) for p in LDL_POLARITY[name])
        if pos.shape != (d.shape[1],):
            raise DataError(
                f"{where}: the polarity preset of {name!r} has {pos.shape[0]} labels, "
                f"the file {d.shape[1]}"
            )
    return LdlDataset(name, x.astype(np.float32), d.astype(np.float32), pos, neg)


def load_ldl_dataset(name: str, data_dir: str | os.PathLike[str] | None = None) -> LdlDataset:
    """Loads ``<data_dir>/ldl/<name>.mat`` (name matched case-insensitively).

    Args:
      name: e.g. ``"SJAFFE"``, ``"Emotion6"`` (one of :data:`LDL_BENCHMARK_SETS` or any file
        stem present).
      data_dir: the shared data directory (else ``$FIDIA_DATA_DIR``;
        :func:`fidia_jax.data.resolve_data_dir`).

    Returns:
      :class:`LdlDataset` with the preset spelled as ``name`` (``Emotion6`` keeps its name).

    Raises:
      DataError: no data directory, no ``ldl/`` folder, no such file (the message lists the
        files present), or a malformed file (:func:`load_ldl_mat`).
    """
    folder = resolve_data_dir(data_dir) / "ldl"
    if not folder.is_dir():
        raise DataError(f"LDL data folder not found: {folder}")
    files = {p.stem.lower(): p for p in sorted(folder.glob("*.mat"))}
    path = files.get(name.lower())
    if path is None:
        raise DataError(
            f"no LDL data set {name!r} in {folder}; present: "
            f"{sorted(p.stem for p in files.values())}"
        )
    key = name if name in LDL_POLARITY else path.stem
    return load_ldl_mat(path, name=key)


def synthetic_ldl_dataset(
    n_samples: int = 400,
    n_features: int = 16,
    n_labels: int = 6,
    *,
    seed: int = 0,
    temperature: float = 1.0,
    name: str = "synthetic",
) -> LdlDataset:
    """A synthetic label-distribution set for demos and tests (no file needed).

    ``x ~ N(0, I_F)``; logits ``= x W / sqrt(F) + 0.3 * (x^2 - 1) V / sqrt(F)`` (a mild
    nonlinearity), ``W, V ~ N(0, 2^2)``; labels ``= softmax(logits / temperature)``. Polarity:
    the first half of the labels positive, the rest negative.

    Raises:
      ValueError: ``n_samples < 1``, ``n_features < 1``, ``n_labels < 2`` or
        ``temperature <= 0``.
    """
    if n_samples < 1 or n_features < 1 or n_labels < 2 or temperature <= 0:
        raise ValueError(
            f"synthetic_ldl_dataset: need n_samples >= 1, n_features >= 1, n_labels >= 2, "
            f"temperature > 0; got {n_samples}, {n_features}, {n_labels}, {temperature}"
        )
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n_samples, n_features))
    w = 2.0 * rng.standard_normal((n_features, n_labels))
    v = 2.0 * rng.standard_normal((n_features, n_labels))
    logits = (x @ w + 0.3 * (x * x - 1.0) @ v) / np.sqrt(n_features) / temperature
    logits -= logits.max(axis=1, keepdims=True)
    d = np.exp(logits)
    d /= d.sum(axis=1, keepdims=True)
    half = n_labels // 2
    pos = np.zeros(n_labels, np.float32)
    pos[:half] = 1.0
    neg = 1.0 - pos
    return LdlDataset(name, x.astype(np.float32), d.astype(np.float32), pos, neg)
