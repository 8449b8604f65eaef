"""Multi-fidelity regression data: analytic test functions, FreeSolv, and one validated container.

Analytic functions (physical inputs, float64 numpy; each level maps ``(N, d) -> (N,)``):

* **Forrester** (1-D, ``x in [0, 1]``), Forrester, Sóbester & Keane, "Multi-fidelity optimization
  via surrogate modelling", Proc. R. Soc. A 463 (2007), and *Engineering Design via Surrogate
  Modelling* (Wiley, 2008)::

      f_H(x) = (6x - 2)^2 sin(12x - 4)
      f_L(x) = A f_H(x) + B (x - 0.5) + C,   A = 0.5, B = 10, C = -5

* **Currin** exponential (2-D, ``[0, 1]^2``), Currin, Mitchell, Morris & Ylvisaker, "Bayesian
  prediction of deterministic functions ..." JASA 86 (1991); low fidelity from Xiong, Qian & Wu,
  "Sequential design and analysis of high-accuracy and low-accuracy computer codes",
  Technometrics 55 (2013)::

      f_H(x) = [1 - exp(-1 / (2 x2))] (2300 x1^3 + 1900 x1^2 + 2092 x1 + 60)
                                      / (100 x1^3 + 500 x1^2 + 4 x1 + 20)
      f_L(x) = 1/4 [f_H(x1 + .05, x2 + .05) + f_H(x1 + .05, max(0, x2 - .05))
                  + f_H(x1 - .05, x2 + .05) + f_H(x1 - .05, max(0, x2 - .05))]

  (``1 - exp(-1/(2 x2))`` is taken as its limit 1 at ``x2 = 0``.)

* **Park** (4-D, ``(0, 1]^4``), Park, "Tuning complex computer codes to data and optimal designs"
  (PhD thesis, U. Illinois, 1991); low fidelity from Xiong et al. (2013)::

      f_H(x) = x1/2 [sqrt(1 + (x2 + x3^2) x4 / x1^2) - 1] + (x1 + 3 x4) exp(1 + sin x3)
      f_L(x) = (1 + sin(x1) / 10) f_H(x) - 2 x1 + x2^2 + x3^2 + 0.5

* **Borehole** (8-D), Morris, Mitchell & Ylvisaker, "Bayesian design and analysis of computer
  experiments: use of derivatives in surface prediction", Technometrics 35 (1993) (from Harper &
  Gupta 1983); low fidelity from Xiong et al. (2013). Inputs
  ``(rw, r, Tu, Hu, Tl, Hl, L, Kw)`` in ``[0.05, 0.15] x [100, 50000] x [63070, 115600] x
  [990, 1110] x [63.1, 116] x [700, 820] x [1120, 1680] x [9855, 12045]``; water flow in m^3/yr::

      f_H = 2 pi Tu (Hu - Hl) / (ln(r/rw) [1 + 2 L Tu / (ln(r/rw) rw^2 Kw) + Tu / Tl])
      f_L = 5 Tu (Hu - Hl) / (ln(r/rw) [1.5 + 2 L Tu / (ln(r/rw) rw^2 Kw) + Tu / Tl])

Every paper above defines two levels. The **medium** level used for three-fidelity tasks is our
construction (reconstruction, not from the papers): ``f_M = (f_H + f_L) / 2``, whose error to the
high fidelity is half the low fidelity's.

FreeSolv (Mobley & Guthrie, J. Comput.-Aided Mol. Des. 28 (2014), database v0.52): per molecule a
SMILES, the experimental hydration free energy (high fidelity, kcal/mol) and the GAFF-computed
one (low fidelity, kcal/mol), read from ``<data_dir>/freesolv/database.txt``.
"""

from __future__ import annotations

import dataclasses
import math
import os
import pathlib
from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np

from fidia_jax._io import resolve_data_dir
from fidia_jax.errors import DataError

__all__ = [
    "ANALYTIC_FUNCTIONS",
    "AnalyticMultiFidelity",
    "FreeSolvTable",
    "MultiFidelityData",
    "analytic_multifidelity_task",
    "freesolv_features",
    "freesolv_multifidelity_task",
    "load_freesolv",
]

Level = Callable[[np.ndarray], np.ndarray]


# --------------------------------------------------------------------------- analytic functions
def _cols(x: np.ndarray, d: int, name: str) -> list[np.ndarray]:
    x = np.asarray(x, np.float64)
    if x.ndim != 2 or x.shape[1] != d:
        raise ValueError(f"{name}: x must have shape (N, {d}), got {x.shape}")
    return [x[:, i] for i in range(d)]


def _forrester_hf(x):
    (x1,) = _cols(x, 1, "forrester")
    return (6.0 * x1 - 2.0) ** 2 * np.sin(12.0 * x1 - 4.0)


def _forrester_lf(x):
    (x1,) = _cols(x, 1, "forrester")
    return 0.5 * _forrester_hf(x) + 10.0 * (x1 - 0.5) - 5.0


def _currin_raw(x1, x2):
    with np.errstate(divide="ignore"):
        factor = np.where(x2 > 0, 1.0 - np.exp(-1.0 / (2.0 * np.where(x2 > 0, x2, 1.0))), 1.0)
    num = 2300.0 * x1**3 + 1900.0 * x1**2 + 2092.0 * x1 + 60.0
    den = 100.0 * x1**3 + 500.0 * x1**2 + 4.0 * x1 + 20.0
    return factor * num / den


def _currin_hf(x):
    x1, x2 = _cols(x, 2, "currin")
    return _currin_raw(x1, x2)


def _currin_lf(x):
    x1, x2 = _cols(x, 2, "currin")
    up, down = x2 + 0.05, np.maximum(0.0, x2 - 0.05)
    return 0.25 * (_currin_raw(x1 + 0.05, up) + _currin_raw(x1 + 0.05, down)) + 0.25 * (
        _currin_raw(x1 - 0.05, up) + _currin_raw(x1 - 0.05, down)
    )


def _park_hf(x):
    x1, x2, x3, x4 = _cols(x, 4, "park")
    if np.any(x1 <= 0):
        raise ValueError("park: x1 must be > 0 (the function divides by x1^2)")
    return x1 / 2.0 * (np.sqrt(1.0 + (x2 + x3**2) * x4 / x1**2) - 1.0) + (x1 + 3.0 * x4) * np.exp(
        1.0 + np.sin(x3)
    )


def _park_lf(x):
    x1, x2, x3, _ = _cols(x, 4, "park")
    return (1.0 + np.sin(x1) / 10.0) * _park_hf(x) - 2.0 * x1 + x2**2 + x3**2 + 0.5


def _borehole_parts(x):
    rw, r, tu, hu, tl, hl, length, kw = _cols(x, 8, "borehole")
    log_ratio = np.log(r / rw)
    return tu * (hu - hl), log_ratio, 2.0 * length * tu / (log_ratio * rw**2 * kw) + tu / tl


def _borehole_hf(x):
    num, log_ratio, rest = _borehole_parts(x)
    return 2.0 * math.pi * num / (log_ratio * (1.0 + rest))


def _borehole_lf(x):
    num, log_ratio, rest = _borehole_parts(x)
    return 5.0 * num / (log_ratio * (1.5 + rest))


def _medium(hf: Level, lf: Level) -> Level:
    def mf(x):
        return 0.5 * (hf(x) + lf(x))

    return mf


class AnalyticMultiFidelity(NamedTuple):
    """One analytic multi-fidelity benchmark function.

    Attributes:
      name: ``"forrester"``, ``"currin"``, ``"park"`` or ``"borehole"``.
      lower, upper: ``(d,)`` bounds of the physical input box.
      hf, mf, lf: levels, each ``(N, d)`` float physical inputs -> ``(N,)`` float64 outputs
        (``mf`` is our construction ``(hf + lf) / 2``; see the module docstring).
    """

    name: str
    lower: tuple[float, ...]
    upper: tuple[float, ...]
    hf: Level
    mf: Level
    lf: Level

    @property
    def dim(self) -> int:
        """Input dimension ``d``."""
        return len(self.lower)

    def level(self, fidelity: str) -> Level:
        """The level named ``"hf"``, ``"mf"`` or ``"lf"``; ``ValueError`` for another name."""
        if fidelity not in ("hf", "mf", "lf"):
            raise ValueError(f"{self.name}: fidelity must be 'hf', 'mf' or 'lf', got {fidelity!r}")
        return getattr(self, fidelity)

    def to_physical(self, u: np.ndarray) -> np.ndarray:
        """Maps unit-cube points ``(N, d)`` to the physical box."""
        lo, hi = np.asarray(self.lower), np.asarray(self.upper)
        return lo + np.asarray(u, np.float64) * (hi - lo)


def _make(name, lower, upper, hf, lf) -> AnalyticMultiFidelity:
    return AnalyticMultiFidelity(name, tuple(lower), tuple(upper), hf, _medium(hf, lf), lf)


#: The four analytic functions by name.
ANALYTIC_FUNCTIONS: dict[str, AnalyticMultiFidelity] = {
    "forrester": _make("forrester", (0.0,), (1.0,), _forrester_hf, _forrester_lf),
    "currin": _make("currin", (0.0, 0.0), (1.0, 1.0), _currin_hf, _currin_lf),
    # x1 in (0, 1]: the lower bound 1e-3 keeps the sampled x1 away from the pole at 0.
    "park": _make("park", (1e-3, 0.0, 0.0, 0.0), (1.0, 1.0, 1.0, 1.0), _park_hf, _park_lf),
    "borehole": _make(
        "borehole",
        (0.05, 100.0, 63070.0, 990.0, 63.1, 700.0, 1120.0, 9855.0),
        (0.15, 50000.0, 115600.0, 1110.0, 116.0, 820.0, 1680.0, 12045.0),
        _borehole_hf,
        _borehole_lf,
    ),
}


# --------------------------------------------------------------------------- the container
@dataclasses.dataclass(frozen=True)
class MultiFidelityData:
    """A multi-fidelity regression task: mixed-fidelity training rows, a high-fidelity test set.

    Fidelity ``0`` is the high fidelity (the target); ``1, 2, ...`` are lower fidelities in
    decreasing order. Training rows carry exactly one label each, of their own fidelity: no
    input is labelled at two fidelities (no pairs).

    Attributes:
      x_train: ``(N, D)`` float32 features of every training row.
      y_train: ``(N,)`` float32 labels (each in its row's fidelity, original units).
      fidelity_train: ``(N,)`` int32 fidelity index of each row, in ``[0, K)``.
      x_test: ``(M, D)`` float32 test features.
      y_test: ``(M,)`` float32 high-fidelity test labels.
      fidelity_names: ``K`` names, e.g. ``("hf", "mf", "lf")``.
      delta_oracle_train / delta_oracle_test: optional ``(N,)`` / ``(M,)`` float32: the lowest
        fidelity's label at every training / test input. Only an **oracle** baseline
        (Δ-learning, which needs paired labels) may read them; the trusted-subset method and the
        other baselines never do.
      source: free text (function name, split, seed).
      train_index / test_index: optional ``(N,)`` / ``(M,)`` int row numbers in the source table
        (FreeSolv), for audits of the split.

    Raises:
      DataError: a shape mismatch, a non-finite feature or label (NaN labels are named), a
        fidelity index outside ``[0, K)``, or a fidelity with no training sample.
    """

    x_train: np.ndarray
    y_train: np.ndarray
    fidelity_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    fidelity_names: tuple[str, ...]
    delta_oracle_train: np.ndarray | None = None
    delta_oracle_test: np.ndarray | None = None
    source: str = ""
    train_index: np.ndarray | None = None
    test_index: np.ndarray | None = None

    def __post_init__(self) -> None:
        conv = lambda a, dt: None if a is None else np.asarray(a, dt)  # noqa: E731
        for name in ("x_train", "y_train", "x_test", "y_test", "delta_oracle_train",
                     "delta_oracle_test"):  # fmt: skip
            object.__setattr__(self, name, conv(getattr(self, name), np.float32))
        object.__setattr__(self, "fidelity_train", np.asarray(self.fidelity_train))
        object.__setattr__(self, "fidelity_names", tuple(self.fidelity_names))
        x, y, f = self.x_train, self.y_train, self.fidelity_train
        k = len(self.fidelity_names)
        where = f"MultiFidelityData({self.source})" if self.source else "MultiFidelityData"
        if x.ndim != 2 or y.ndim != 1 or f.ndim != 1 or not x.shape[0] == y.shape[0] == f.shape[0]:
            raise DataError(
                f"{where}: need x_train (N, D), y_train (N,), fidelity_train (N,); got "
                f"{x.shape}, {y.shape}, {f.shape}"
            )
        if self.x_test.ndim != 2 or self.x_test.shape[1] != x.shape[1]:
            raise DataError(f"{where}: x_test must be (M, {x.shape[1]}), got {self.x_test.shape}")
        if self.y_test.shape != (self.x_test.shape[0],):
            raise DataError(
                f"{where}: y_test must be ({self.x_test.shape[0]},), got {self.y_test.shape}"
            )
        if not np.issubdtype(f.dtype, np.integer):
            raise DataError(f"{where}: fidelity_train must be integers, got {f.dtype}")
        if k < 1:
            raise DataError(f"{where}: fidelity_names is empty")
        if f.size and (f.min() < 0 or f.max() >= k):
            raise DataError(
                f"{where}: fidelity_train values must be in [0, {k}), got {sorted(set(f.tolist()))}"
            )
        object.__setattr__(self, "fidelity_train", f.astype(np.int32))
        for i, name in enumerate(self.fidelity_names):
            if not np.any(f == i):
                raise DataError(f"{where}: fidelity {name!r} (index {i}) has no training samples")
        for name, arr in (("y_train", y), ("y_test", self.y_test)):
            bad = np.flatnonzero(np.isnan(arr))
            if bad.size:
                raise DataError(
                    f"{where}: {name} has {bad.size} NaN label(s), first at row {bad[0]}"
                )
        for name in ("x_train", "x_test", "y_train", "y_test"):
            if not np.all(np.isfinite(getattr(self, name))):
                raise DataError(f"{where}: {name} has non-finite values")
        for name, n in (
            ("delta_oracle_train", x.shape[0]),
            ("delta_oracle_test", self.x_test.shape[0]),
        ):
            arr = getattr(self, name)
            if arr is not None and (arr.shape != (n,) or not np.all(np.isfinite(arr))):
                raise DataError(f"{where}: {name} must be ({n},) finite, got {arr.shape}")

    @property
    def num_fidelities(self) -> int:
        """``K``."""
        return len(self.fidelity_names)

    def counts(self) -> dict[str, int]:
        """Training rows per fidelity name."""
        return {n: int(np.sum(self.fidelity_train == i)) for i, n in enumerate(self.fidelity_names)}


def analytic_multifidelity_task(
    name: str,
    n_hf: int,
    n_mf: int,
    n_lf: int,
    n_test: int,
    *,
    seed: int = 0,
) -> MultiFidelityData:
    """Disjoint uniform input sets for each fidelity of an analytic function, plus a test set.

    ``n_hf + n_mf + n_lf + n_test`` points are drawn uniformly in the unit cube (then mapped to
    the physical box) and split into disjoint index sets, so no input carries two labels. Features
    are the unit-cube coordinates (float32); labels are in the function's units.

    Args:
      name: a key of :data:`ANALYTIC_FUNCTIONS`.
      n_hf, n_mf, n_lf: training rows per fidelity; ``n_mf = 0`` gives a two-fidelity task
        ``("hf", "lf")``.
      n_test: high-fidelity test points.
      seed: ``numpy.random.default_rng`` seed.

    Returns:
      :class:`MultiFidelityData` with the Δ-learning oracle (``f_L`` at every training and test
      input) filled in.

    Raises:
      ValueError: an unknown name, ``n_hf < 1``, ``n_lf < 1``, ``n_mf < 0`` or ``n_test < 1``.
    """
    if name not in ANALYTIC_FUNCTIONS:
        raise ValueError(f"unknown analytic function {name!r}; known: {sorted(ANALYTIC_FUNCTIONS)}")
    if n_hf < 1 or n_lf < 1 or n_mf < 0 or n_test < 1:
        raise ValueError(
            f"need n_hf, n_lf, n_test >= 1 and n_mf >= 0; got {n_hf}, {n_lf}, {n_test}, {n_mf}"
        )
    fn = ANALYTIC_FUNCTIONS[name]
    rng = np.random.default_rng(seed)
    u = rng.uniform(size=(n_hf + n_mf + n_lf + n_test, fn.dim))
    x = fn.to_physical(u)
    names = ("hf", "mf", "lf") if n_mf else ("hf", "lf")
    sizes = {"hf": n_hf, "mf": n_mf, "lf": n_lf}
    ys, fids, start = [], [], 0
    for i, level in enumerate(names):
        rows = slice(start, start + sizes[level])
        ys.append(fn.level(level)(x[rows]))
        fids.append(np.full(sizes[level], i, np.int32))
        start += sizes[level]
    test = slice(start, start + n_test)
    return MultiFidelityData(
        x_train=u[:start],
        y_train=np.concatenate(ys),
        fidelity_train=np.concatenate(fids),
        x_test=u[test],
        y_test=fn.hf(x[test]),
        fidelity_names=names,
        delta_oracle_train=fn.lf(x[:start]),
        delta_oracle_test=fn.lf(x[test]),
        source=f"{name} seed={seed}",
    )


# --------------------------------------------------------------------------- FreeSolv
class FreeSolvTable(NamedTuple):
    """FreeSolv rows (database v0.52, 642 molecules).

    Attributes:
      ids: compound ids (``mobley_...``).
      smiles: SMILES strings.
      expt: ``(n,)`` float64 experimental hydration free energy, kcal/mol (high fidelity).
      calc: ``(n,)`` float64 GAFF-computed hydration free energy, kcal/mol (low fidelity).
    """

    ids: tuple[str, ...]
    smiles: tuple[str, ...]
    expt: np.ndarray
    calc: np.ndarray


def load_freesolv(data_dir: str | os.PathLike[str] | None = None) -> FreeSolvTable:
    """Reads ``<data_dir>/freesolv/database.txt`` (semicolon-separated, ``#`` comments).

    Columns used: 0 id, 1 SMILES, 3 experimental value, 5 GAFF calculated value (kcal/mol).

    Args:
      data_dir: the shared data directory (``None``: ``$FIDIA_DATA_DIR``, see
        :func:`fidia_jax.data.resolve_data_dir`).

    Raises:
      DataError: no data directory, a missing file, a row with fewer than 6 fields or a value
        that is not a finite number (the message names the line).
    """
    root = pathlib.Path(resolve_data_dir(data_dir))
    path = root / "freesolv" / "database.txt"
    if not path.is_file():
        raise DataError(f"FreeSolv: {path} not found (expected the FreeSolv database.txt there)")
    ids, smiles, expt, calc = [], [], [], []
    for lineno, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        fields = [s.strip() for s in line.split(";")]
        if len(fields) < 6:
            raise DataError(
                f"FreeSolv: {path}:{lineno}: expected >= 6 ';'-separated fields, got {len(fields)}"
            )
        try:
            e, c = float(fields[3]), float(fields[5])
        except ValueError:
            raise DataError(
                f"FreeSolv: {path}:{lineno}: values {fields[3]!r}, {fields[5]!r} are not numbers"
            ) from None
        if not (math.isfinite(e) and math.isfinite(c)):
            raise DataError(f"FreeSolv: {path}:{lineno}: non-finite value")
        ids.append(fields[0])
        smiles.append(fields[1])
        expt.append(e)
        calc.append(c)
    if not ids:
        raise DataError(f"FreeSolv: {path} holds no molecule")
    return FreeSolvTable(tuple(ids), tuple(smiles), np.asarray(expt), np.asarray(calc))


def freesolv_features(
    smiles: Sequence[str], kind: str = "morgan", *, n_bits: int = 1024, radius: int = 2
) -> np.ndarray:
    """RDKit features of molecules (needs ``rdkit``, the ``sciml`` extra).

    Args:
      smiles: ``n`` SMILES strings.
      kind: ``"morgan"`` (Morgan / ECFP bit vector, ``n_bits`` bits of radius ``radius``) or
        ``"descriptors"`` (every RDKit 2-D descriptor of ``rdkit.Chem.Descriptors.descList``,
        raw values; non-finite values become 0; standardise before use).
      n_bits, radius: Morgan parameters.

    Returns:
      ``(n, F)`` float32.

    Raises:
      DataError: a SMILES RDKit cannot parse (named), or rdkit missing.
      ValueError: an unknown ``kind``.
    """
    if kind not in ("morgan", "descriptors"):
        raise ValueError(f"freesolv_features: kind must be 'morgan' or 'descriptors', got {kind!r}")
    try:
        from rdkit import Chem, RDLogger
        from rdkit.Chem import Descriptors, rdFingerprintGenerator
    except ImportError as e:  # pragma: no cover - rdkit is in the sciml extra
        raise DataError("freesolv_features needs rdkit (pip install 'fidia_jax[sciml]')") from e
    RDLogger.DisableLog("rdApp.*")
    mols = []
    for s in smiles:
        mol = Chem.MolFromSmiles(s)
        if mol is None:
            raise DataError(f"freesolv_features: RDKit cannot parse SMILES {s!r}")
        mols.append(mol)
    if kind == "morgan":
        gen = rdFingerprintGenerator.GetMorganGenerator(radius=radius, fpSize=n_bits)
        return np.stack([gen.GetFingerprintAsNumPy(m) for m in mols]).astype(np.float32)
    rows = [[fn(m) for _, fn in Descriptors.descList] for m in mols]
    out = np.asarray(rows, np.float64)
    out[~np.isfinite(out)] = 0.0
    return np.clip(out, -1e6, 1e6).astype(np.float32)


def freesolv_multifidelity_task(
    table: FreeSolvTable,
    features: np.ndarray,
    n_hf: int,
    *,
    split: int = 0,
    seed: int = 0,
    test_fraction: float = 0.2,
    n_lf: int | None = None,
) -> MultiFidelityData:
    """A two-fidelity FreeSolv task in which the low-fidelity pool never shows its HF label.

    The molecules are permuted by ``split`` (``default_rng(split)``); the first
    ``round(test_fraction * n)`` are the test set (experimental labels). From the rest,
    ``default_rng((split, seed))`` picks ``n_hf`` molecules that get their **experimental** label
    (fidelity ``"hf"``); every remaining molecule (or ``n_lf`` of them) gets its **GAFF** label
    only (fidelity ``"lf"``). Test, HF and LF molecules are disjoint, so the experimental value of
    an LF-pool molecule appears nowhere in the training data. The Δ-learning oracle holds GAFF at
    every training and test molecule.

    Args:
      table: :func:`load_freesolv`.
      features: ``(n, F)`` rows aligned with ``table`` (:func:`freesolv_features`).
      n_hf: experimental labels given for training.
      split: which test split (permutation seed).
      seed: which HF subset of the non-test molecules.
      test_fraction: in ``(0, 1)``.
      n_lf: GAFF-labelled pool size (``None``: all remaining molecules).

    Raises:
      ValueError: ``features`` not aligned, ``test_fraction`` outside ``(0, 1)``.
      DataError: ``n_hf`` larger than the non-test molecules minus one (the message names
        ``n_hf`` and the molecule counts), or ``n_lf`` larger than the molecules left.
    """
    n = len(table.ids)
    features = np.asarray(features, np.float32)
    if features.ndim != 2 or features.shape[0] != n:
        raise ValueError(
            f"freesolv_multifidelity_task: features must be ({n}, F), got {features.shape}"
        )
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction}")
    order = np.random.default_rng(split).permutation(n)
    n_test = int(round(test_fraction * n))
    test, rest = order[:n_test], order[n_test:]
    rest = np.random.default_rng((split, seed)).permutation(rest)
    # n_hf is checked first: asking for more HF molecules than exist is an n_hf problem, not a
    # negative n_lf pool
    if not 1 <= n_hf <= len(rest) - 1:
        raise DataError(
            f"freesolv_multifidelity_task: n_hf={n_hf} must be in [1, {len(rest) - 1}]: FreeSolv "
            f"has {n} molecules, {n_test} go to the test split (test_fraction={test_fraction}), "
            f"{len(rest)} are left for the HF subset and at least one GAFF-labelled LF molecule"
        )
    pool = len(rest) - n_hf
    n_lf = pool if n_lf is None else n_lf
    if not 1 <= n_lf <= pool:
        raise DataError(
            f"freesolv_multifidelity_task: n_lf={n_lf} must be in [1, {pool}] (molecules left "
            f"after {n_test} test and n_hf={n_hf} HF molecules of {n})"
        )
    hf, lf = rest[:n_hf], rest[n_hf : n_hf + n_lf]
    train = np.concatenate([hf, lf])
    return MultiFidelityData(
        x_train=features[train],
        y_train=np.concatenate([table.expt[hf], table.calc[lf]]),
        fidelity_train=np.concatenate([np.zeros(n_hf, np.int32), np.ones(n_lf, np.int32)]),
        x_test=features[test],
        y_test=table.expt[test],
        fidelity_names=("hf", "lf"),
        delta_oracle_train=table.calc[train],
        delta_oracle_test=table.calc[test],
        source=f"freesolv split={split} seed={seed}",
        train_index=train,
        test_index=test,
    )
