"""Spatial transcriptomics data for HiST: the HER2ST sections, image features, lattice augmentation.

* :func:`load_her2st` reads ``<data_dir>/her2st/`` (Andersson et al. 2021, Nat Commun; legacy ST:
  per section a counts table ``cnts/<S>.tsv.gz`` indexed ``"<x>x<y>"``, a spot table
  ``spots/<S>_selection.tsv`` with lattice ``x, y`` and image ``pixel_x, pixel_y``, and for six
  sections an H&E image ``imgs/<S>_*.jpg``).
* :func:`her2st_image_features` computes a fixed, label-free featuriser per spot from the H&E
  image (colour deconvolution with :func:`skimage.color.rgb2hed`, intensity statistics and grey
  level co-occurrence texture), cached to ``.npz``. The paper uses UNI patch embeddings; UNI's
  weights are gated and not available here, so this is a much weaker stand-in (say so).
* :func:`synthetic_sections` draws lattices with a known spatial signal (no files needed).
* :func:`augment_lattice` is HiST's coordinate augmentation (authors' code
  ``src/span/preprocessing/transforms.py``): random mirror, shear and rotation about the centre,
  spot dropout, then a snap back to distinct integer lattice points.
"""

from __future__ import annotations

import dataclasses
import pathlib
import re

import numpy as np

from fidia_jax._io import atomic_path, resolve_data_dir
from fidia_jax.errors import DataError

__all__ = [
    "HER2ST_IMAGE_SECTIONS",
    "SpotSection",
    "augment_lattice",
    "check_spots",
    "her2st_image_features",
    "load_her2st",
    "synthetic_sections",
]

#: HER2ST sections with an H&E image (patient C has five, all of which are used for the
#: leave-one-section-out protocol; B4 is another patient).
HER2ST_IMAGE_SECTIONS: tuple[str, ...] = ("B4", "C2", "C3", "C4", "C5", "C6")


@dataclasses.dataclass(frozen=True)
class SpotSection:
    """One tissue section: spots on an integer lattice with counts (and optionally features).

    Attributes:
      name: section id (e.g. ``"C2"``).
      coords: ``(n, 2)`` int32 lattice coordinates ``(x, y)``, non-negative, distinct.
      counts: ``(n, G)`` float32 raw counts (non-negative) of ``genes``.
      genes: ``G`` gene names.
      pixels: ``(n, 2)`` float image coordinates ``(pixel_x, pixel_y)``, or ``None``.
      features: ``(n, F)`` float32 per-spot input features, or ``None``.
    """

    name: str
    coords: np.ndarray
    counts: np.ndarray
    genes: tuple[str, ...]
    pixels: np.ndarray | None = None
    features: np.ndarray | None = None

    def with_features(self, features: np.ndarray) -> SpotSection:
        f = np.asarray(features, np.float32)
        if f.ndim != 2 or f.shape[0] != len(self.coords):
            raise DataError(
                f"section {self.name}: features {f.shape} do not match {len(self.coords)} spots"
            )
        return dataclasses.replace(self, features=f)


def check_spots(coords, counts=None, *, name: str = "section", mask=None) -> np.ndarray:
    """Validates one section's lattice coordinates and, if given, its counts.

    Args:
      coords: ``(n, 2)`` integer lattice coordinates (whole-number floats are accepted).
      counts: ``(n, G)`` counts, or ``None`` to check the coordinates only.
      name: named in every error. mask: optional ``(n,)`` bool; only active spots are checked
        for negative or duplicate coordinates (padding rows may hold anything).

    Returns:
      The coordinates as ``(n, 2)`` int64.

    Raises:
      DataError: wrong shape, non-integer or non-finite coordinates, a negative coordinate, two
        active spots at one lattice point, a row count mismatch, a negative or non-finite count,
        or a spot whose counts are all zero (each named by spot index).
    """
    c = np.asarray(coords)
    if c.ndim != 2 or c.shape[1] != 2:
        raise DataError(f"{name}: lattice coordinates must have shape (n, 2), got {c.shape}")
    if c.dtype.kind == "f":
        if not np.all(np.isfinite(c)):
            raise DataError(f"{name}: lattice coordinates contain NaN or infinity")
        if not np.all(c == np.round(c)):
            bad = int(np.argmax(np.any(c != np.round(c), axis=1)))
            raise DataError(
                f"{name}: lattice coordinates must be integers; spot {bad} is {c[bad].tolist()}"
            )
    elif c.dtype.kind not in "iub":
        raise DataError(f"{name}: lattice coordinates must be integers, got dtype {c.dtype}")
    c = c.astype(np.int64)
    m = np.ones(len(c), bool) if mask is None else np.asarray(mask, bool)
    if m.shape != (len(c),):
        raise DataError(f"{name}: mask shape {m.shape} does not match {len(c)} coordinates")
    neg = np.flatnonzero(m & np.any(c < 0, axis=1))
    if neg.size:
        raise DataError(
            f"{name}: lattice coordinates must be >= 0; spot {int(neg[0])} is at "
            f"{c[neg[0]].tolist()} ({neg.size} negative)"
        )
    act = np.flatnonzero(m)
    _, first, cnt = np.unique(c[act], axis=0, return_index=True, return_counts=True)
    if np.any(cnt > 1):
        dup = c[act][first[np.argmax(cnt > 1)]]
        rows = act[np.all(c[act] == dup[None, :], axis=1)]
        raise DataError(
            f"{name}: duplicate lattice coordinates: spots {rows.tolist()} share {dup.tolist()}"
        )
    if counts is None:
        return c
    y = np.asarray(counts)
    if y.ndim != 2 or y.shape[0] != len(c):
        raise DataError(f"{name}: counts shape {y.shape} does not match {len(c)} spots")
    if not np.all(np.isfinite(y)) or np.any(y < 0):
        raise DataError(f"{name}: counts must be finite and >= 0")
    empty = np.flatnonzero(y.sum(axis=1) == 0)
    if empty.size:
        raise DataError(
            f"{name}: {empty.size} spot(s) without counts (all zero), first spot {int(empty[0])} "
            f"at {c[empty[0]].tolist()}"
        )
    return c


def _read_section(root: pathlib.Path, name: str, drop_missing: bool):
    import pandas as pd

    cnt_path, spot_path = root / "cnts" / f"{name}.tsv.gz", root / "spots" / f"{name}_selection.tsv"
    for p in (cnt_path, spot_path):
        if not p.is_file():
            raise DataError(f"her2st section {name}: missing file {p}")
    counts = pd.read_csv(cnt_path, sep="\t", index_col=0)
    spots = pd.read_csv(spot_path, sep="\t")
    for col in ("x", "y", "pixel_x", "pixel_y"):
        if col not in spots.columns:
            raise DataError(f"her2st section {name}: {spot_path} has no column {col!r}")
    if "selected" in spots.columns:
        spots = spots[spots["selected"] == 1]
    ids = spots["x"].astype(int).astype(str) + "x" + spots["y"].astype(int).astype(str)
    missing = ~ids.isin(counts.index)
    if missing.any() and not drop_missing:
        raise DataError(
            f"her2st section {name}: {int(missing.sum())} spot(s) without counts (first "
            f"{ids[missing].iloc[0]}); pass drop_spots_without_counts=True to drop them"
        )
    spots, ids = spots[~missing], ids[~missing]
    return spots, counts.loc[ids.values]


def load_her2st(
    data_dir=None,
    sections: tuple[str, ...] = ("C2", "C3", "C4", "C5", "C6"),
    *,
    drop_spots_without_counts: bool = False,
) -> list[SpotSection]:
    """Loads HER2ST sections with the genes they all share (columns in one order).

    Args:
      data_dir: the shared data folder holding ``her2st/`` (``resolve_data_dir`` rule).
      sections: section ids.
      drop_spots_without_counts: a selected spot absent from the counts table is an error by
        default; with ``True`` it is dropped (HER2ST has 0-3 such spots per section).

    Returns:
      One :class:`SpotSection` per id (``pixels`` set, ``features`` None), coordinates shifted
      so that the smallest ``x`` and ``y`` over the section are 0.

    Raises:
      DataError: missing files or columns, spots without counts (unless dropped), invalid
        coordinates or counts (:func:`check_spots`).
    """
    root = resolve_data_dir(data_dir) / "her2st"
    if not root.is_dir():
        raise DataError(f"her2st folder not found: {root}")
    raw = [(_read_section(root, s, drop_spots_without_counts), s) for s in sections]
    genes = None
    for (_, counts), _ in raw:
        cols = [c for c in counts.columns if not re.match(r"^__", str(c))]
        genes = list(cols) if genes is None else [g for g in genes if g in set(cols)]
    out = []
    for (spots, counts), s in raw:
        c = spots[["x", "y"]].to_numpy(np.int64)
        y = counts[genes].to_numpy(np.float32)
        check_spots(c, y, name=f"her2st section {s}")
        c = (c - c.min(axis=0, keepdims=True)).astype(np.int32)
        px = spots[["pixel_x", "pixel_y"]].to_numpy(np.float64)
        out.append(SpotSection(s, c, y, tuple(genes), pixels=px))
    return out


def her2st_files(root: pathlib.Path, name: str) -> list[pathlib.Path]:
    """The files a HER2ST section is read from (counts, spot selection, H&E image) under
    ``root`` (the ``her2st/`` folder); a cache of anything made from them is keyed by them."""
    return [root / "cnts" / f"{name}.tsv.gz", root / "spots" / f"{name}_selection.tsv",
            _image_path(root, name)]  # fmt: skip


def files_key(paths: list[pathlib.Path]) -> str:
    """``path:size:mtime_ns`` of each file (resolved), joined: what a cache built from them is
    keyed by, so another data folder or a changed file never reuses it."""
    parts = []
    for p in paths:
        st = p.stat()
        parts.append(f"{p.resolve()}:{st.st_size}:{st.st_mtime_ns}")
    return "|".join(parts)


def _image_path(root: pathlib.Path, name: str) -> pathlib.Path:
    hits = sorted((root / "imgs").glob(f"{name}_*.jpg"))
    if not hits:
        raise DataError(f"her2st section {name} has no H&E image in {root / 'imgs'}")
    return hits[0]


#: Names of the columns :func:`her2st_image_features` returns.
_FEATURE_NAMES = (
    [f"{ch}_{st}" for ch in ("hem", "eos", "dab") for st in ("mean", "std", "p10", "p50", "p90")]
    + [f"rgb_{c}_{st}" for c in "rgb" for st in ("mean", "std")]
    + [
        f"glcm_d{d}_{p}"
        for d in (1, 3)
        for p in ("contrast", "homogeneity", "energy", "correlation")
    ]
    + ["hem_ctx_mean", "eos_ctx_mean", "tissue_frac", "nuclei_frac"]
)


def _patch_features(patch, ctx) -> np.ndarray:
    from skimage.color import rgb2hed
    from skimage.feature import graycomatrix, graycoprops

    rgb = patch.astype(np.float32) / 255.0
    hed = rgb2hed(rgb).reshape(-1, 3)
    f = []
    for ch in range(3):
        v = hed[:, ch]
        f += [v.mean(), v.std(), *np.percentile(v, [10, 50, 90])]
    flat = rgb.reshape(-1, 3)
    for ch in range(3):
        f += [flat[:, ch].mean(), flat[:, ch].std()]
    grey = (rgb @ np.array([0.299, 0.587, 0.114], np.float32) * 31).astype(np.uint8)
    glcm = graycomatrix(grey, [1, 3], [0, np.pi / 2], levels=32, symmetric=True, normed=True)
    for d in range(2):
        for p in ("contrast", "homogeneity", "energy", "correlation"):
            f.append(graycoprops(glcm[:, :, d : d + 1, :], p).mean())
    hed_ctx = rgb2hed(ctx.astype(np.float32) / 255.0).reshape(-1, 3)
    lum = flat.mean(axis=1)
    f += [
        hed_ctx[:, 0].mean(),
        hed_ctx[:, 1].mean(),
        float((lum < 0.85).mean()),
        float((hed[:, 0] > np.percentile(hed_ctx[:, 0], 90)).mean()),
    ]
    return np.asarray(f, np.float32)


def her2st_image_features(
    section: SpotSection,
    data_dir=None,
    *,
    cache_dir=None,
    patch: int = 112,
    context: int = 224,
) -> SpotSection:
    """Per-spot H&E features (``F = 33``) for one HER2ST section, cached as ``.npz``.

    For each spot, a ``patch x patch`` crop centred on ``(pixel_x, pixel_y)`` (about the 100 µm
    spot) gives: haematoxylin / eosin / DAB channel mean, std and 10/50/90th percentiles
    (``skimage.color.rgb2hed``), RGB mean and std, grey-level co-occurrence contrast,
    homogeneity, energy and correlation at distances 1 and 3 (32 grey levels, angles 0 and 90°
    averaged), and from a ``context`` crop the mean H and E, the tissue fraction and a
    nuclei-like fraction. Fixed, no learned weights, no labels: a stand-in for the UNI
    embeddings of the paper, which are not available here.

    Args:
      section: from :func:`load_her2st` (needs ``pixels``).
      data_dir: the shared data folder. cache_dir: folder for ``her2st_<S>_features.npz``
        (written atomically; reused when present with the same spots and sizes).

    Returns:
      ``section`` with ``features`` ``(n, 33)`` float32.

    Raises:
      DataError: no image for the section, or no pixel coordinates.
    """
    if section.pixels is None:
        raise DataError(f"section {section.name} has no pixel coordinates")
    key = np.concatenate([section.coords.ravel(), [patch, context]]).astype(np.int64)
    path = _image_path(resolve_data_dir(data_dir) / "her2st", section.name)
    source = files_key([path])  # another folder's image, or a changed one, is not reused
    cache = None
    if cache_dir is not None:
        cache = pathlib.Path(cache_dir) / f"her2st_{section.name}_features.npz"
        if cache.is_file():
            with np.load(cache) as z:
                if (
                    np.array_equal(z["key"], key)
                    and "source" in z.files
                    and str(z["source"]) == source
                ):
                    return section.with_features(z["features"])
    from PIL import Image

    Image.MAX_IMAGE_PIXELS = None
    img = np.asarray(Image.open(path).convert("RGB"))
    H, W = img.shape[:2]
    pad = context // 2 + 1
    img = np.pad(img, ((pad, pad), (pad, pad), (0, 0)), mode="constant", constant_values=255)
    feats = []
    for px, py in section.pixels:
        cx, cy = int(round(px)) + pad, int(round(py)) + pad
        if not (0 <= px < W and 0 <= py < H):
            raise DataError(
                f"section {section.name}: spot pixel ({px}, {py}) outside the image {W}x{H}"
            )
        p = img[cy - patch // 2 : cy + patch // 2, cx - patch // 2 : cx + patch // 2]
        c = img[cy - context // 2 : cy + context // 2, cx - context // 2 : cx + context // 2]
        feats.append(_patch_features(p, c))
    feats = np.stack(feats)
    if cache is not None:
        cache.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(cache) as tmp:
            with open(tmp, "wb") as fh:
                np.savez(fh, features=feats, key=key, source=np.asarray(source))
    return section.with_features(feats)


def synthetic_sections(
    n_sections: int = 4,
    *,
    shape: tuple[int, int] = (24, 24),
    n_features: int = 16,
    n_genes: int = 32,
    noise: float = 1.0,
    seed: int = 0,
) -> list[SpotSection]:
    """Synthetic sections with a known spatial signal (no files): the task HiST is built for.

    Each section is an elliptical tissue blob with holes on a ``shape`` lattice. A smooth latent
    field ``Z`` (``K = 6`` channels: random Gaussian bumps) drives both the expression,
    ``counts ~ Poisson(exp(b + Z B))`` with ``Z`` smoothed over a 2-spot radius, and the
    features, which are ``Z A + noise`` per spot: so a model that pools over neighbours
    denoises the features and should beat a per-spot model.

    Returns:
      ``n_sections`` :class:`SpotSection` with ``features`` ``(n, n_features)`` float32 and
      ``counts`` ``(n, n_genes)``; genes named ``g0, g1, ...``.
    """
    rng = np.random.default_rng(seed)
    K = 6
    A = rng.normal(size=(K, n_features)) / np.sqrt(K)
    B = rng.normal(size=(K, n_genes)) * 0.6
    b = rng.normal(size=n_genes) * 0.5 + 1.0
    out = []
    gx, gy = np.meshgrid(np.arange(shape[0]), np.arange(shape[1]), indexing="ij")
    for s in range(n_sections):
        cx, cy = shape[0] / 2 + rng.normal(), shape[1] / 2 + rng.normal()
        rx, ry = shape[0] * rng.uniform(0.35, 0.48), shape[1] * rng.uniform(0.35, 0.48)
        inside = ((gx - cx) / rx) ** 2 + ((gy - cy) / ry) ** 2 <= 1.0
        inside &= rng.random(gx.shape) > 0.08
        c = np.stack([gx[inside], gy[inside]], -1)
        Z = np.zeros((len(c), K))
        for k in range(K):
            for _ in range(3):
                mu = rng.uniform(0, shape[0]), rng.uniform(0, shape[1])
                sd = rng.uniform(2.0, 5.0)
                Z[:, k] += rng.normal() * np.exp(
                    -((c[:, 0] - mu[0]) ** 2 + (c[:, 1] - mu[1]) ** 2) / (2 * sd**2)
                )
        d2 = ((c[:, None, :] - c[None, :, :]) ** 2).sum(-1)
        Wn = np.exp(-d2 / 8.0)
        Zs = (Wn @ Z) / Wn.sum(1, keepdims=True)
        rate = np.exp(np.clip(b[None, :] + Zs @ B, -5, 5))
        counts = rng.poisson(rate).astype(np.float32)
        counts[:, 0] += counts.sum(1) == 0  # no empty spot
        feats = (Z @ A + noise * rng.normal(size=(len(c), n_features))).astype(np.float32)
        out.append(
            SpotSection(
                f"syn{s}",
                c.astype(np.int32),
                counts,
                tuple(f"g{i}" for i in range(n_genes)),
                features=feats,
            )
        )
    return out


def _snap_to_lattice(xy: np.ndarray) -> np.ndarray:
    """Distinct integer points: nearest first, a collision takes the nearest free point."""
    base = np.round(xy).astype(np.int64)
    order = np.argsort(((xy - base) ** 2).sum(1), kind="stable")
    used: set[tuple[int, int]] = set()
    out = np.empty_like(base)
    for i in order:
        p = (int(base[i, 0]), int(base[i, 1]))
        r = 0
        while p in used:
            r += 1
            cand = [
                (base[i, 0] + dx, base[i, 1] + dy)
                for dx in range(-r, r + 1)
                for dy in range(-r, r + 1)
                if max(abs(dx), abs(dy)) == r
            ]
            cand = [q for q in cand if q not in used]
            if cand:
                p = min(cand, key=lambda q: (q[0] - xy[i, 0]) ** 2 + (q[1] - xy[i, 1]) ** 2)
                p = (int(p[0]), int(p[1]))
        used.add(p)
        out[i] = p
    return out


def augment_lattice(
    coords,
    rng: np.random.Generator,
    *,
    strength: float = 1.0,
    mirror_p: float = 0.75,
    shear_deg: float = 5.0,
    shear_p: float = 0.75,
    rotate_deg: float = 45.0,
    rotate_p: float = 0.75,
    drop_p: float = 0.0,
):
    """HiST coordinate augmentation with probabilities scaled by ``strength`` in ``[0, 1]``.

    About the rounded centroid: a mirror (each axis with probability 1/2) with probability
    ``strength * mirror_p``; a shear along one random axis by ``tan(U(-shear_deg, shear_deg))``
    with ``strength * shear_p``; a rotation by one of 0/90/180/270° plus ``U(-rotate_deg,
    rotate_deg)`` with ``strength * rotate_p``; each spot dropped with ``strength * drop_p``.
    Then shifted to non-negative and snapped to distinct integer lattice points (authors'
    ``ComposeTransforms`` and ``map_to_integer_grid``; defaults from their config). HiST decays
    ``strength`` over training (cosine from 1 to 0 in the authors' schedule).

    Returns:
      ``(coords (n, 2) int32, keep (n,) bool)``; dropped spots keep their original coordinates
      (mask them out).
    """
    if not 0.0 <= strength <= 1.0:
        raise ValueError(f"augment_lattice: strength must be in [0, 1], got {strength}")
    c = np.asarray(coords, np.float64)
    centre = np.round(c.mean(axis=0))
    T = np.eye(2)
    if rng.random() < strength * mirror_p:
        T = T @ np.diag([-1.0 if rng.random() < 0.5 else 1.0, -1.0 if rng.random() < 0.5 else 1.0])
    if rng.random() < strength * shear_p:
        k = np.tan(np.radians(rng.uniform(-shear_deg, shear_deg)))
        T = T @ (
            np.array([[1.0, k], [0.0, 1.0]])
            if rng.random() < 0.5
            else np.array([[1.0, 0.0], [k, 1.0]])
        )
    if rng.random() < strength * rotate_p:
        th = np.radians(90.0 * rng.integers(4) + rng.uniform(-rotate_deg, rotate_deg))
        T = T @ np.array([[np.cos(th), -np.sin(th)], [np.sin(th), np.cos(th)]])
    keep = rng.random(len(c)) >= strength * drop_p
    if not keep.any():
        keep[rng.integers(len(c))] = True
    xy = (c - centre[None, :]) @ T
    xy = xy - xy[keep].min(axis=0, keepdims=True)
    out = np.asarray(coords, np.int64).copy()
    out[keep] = _snap_to_lattice(xy[keep])
    out = np.where(keep[:, None], out, 0)  # dropped spots: masked out, parked at (0, 0)
    return out.astype(np.int32), keep
