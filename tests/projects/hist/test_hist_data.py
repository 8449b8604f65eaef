"""HiST data: spot validation, the HER2ST reader on a miniature folder, features, augmentation."""

import gzip

import numpy as np
import pytest

from fidia_jax.errors import DataError
from fidia_jax.projects.hist import data


@pytest.mark.parametrize(
    "coords, counts, match",
    [
        (
            np.array([[0, 0], [1, 2], [1, 2]]),
            np.ones((3, 2)),
            "duplicate lattice coordinates: spots \\[1, 2\\]",
        ),
        (np.array([[0, 0], [-1, 2]]), np.ones((2, 2)), "must be >= 0; spot 1 is at \\[-1, 2\\]"),
        (
            np.array([[0, 0], [1, 2]]),
            np.array([[1.0, 0.0], [0.0, 0.0]]),
            "without counts .* spot 1 at \\[1, 2\\]",
        ),
        (np.array([[0, 0], [1, 2]]), np.ones((3, 2)), "does not match 2 spots"),
        (np.array([[0, 0]]), np.array([[np.nan, 1.0]]), "finite"),
    ],
)
def test_check_spots_names_the_problem(coords, counts, match):
    with pytest.raises(DataError, match=match):
        data.check_spots(coords, counts, name="S")


def _mini_her2st(root, *, missing=False, image=True):
    d = root / "her2st"
    for sub in ("cnts", "spots", "imgs"):
        (d / sub).mkdir(parents=True, exist_ok=True)
    spots = [(3, 4, 20.0, 20.0), (4, 4, 60.0, 20.0), (3, 5, 20.0, 60.0)]
    lines = ["x\ty\tnew_x\tnew_y\tpixel_x\tpixel_y\tselected"]
    lines += [f"{x}\t{y}\t{x}\t{y}\t{px}\t{py}\t1" for x, y, px, py in spots]
    (d / "spots" / "S1_selection.tsv").write_text("\n".join(lines) + "\n")
    rows = ["\tG1\tG2\tG3", "3x4\t5\t0\t1", "4x4\t2\t2\t0"]
    if not missing:
        rows.append("3x5\t0\t1\t7")
    with gzip.open(d / "cnts" / "S1.tsv.gz", "wt") as fh:
        fh.write("\n".join(rows) + "\n")
    if image:
        from PIL import Image

        img = np.full((80, 80, 3), 255, np.uint8)
        img[40:, :, :] = (120, 60, 150)  # purple lower half (spot 3)
        Image.fromarray(img).save(d / "imgs" / "S1_test_HE.jpg")
    return root


def test_load_her2st_miniature_and_spot_without_counts(tmp_path):
    root = _mini_her2st(tmp_path, missing=True)
    with pytest.raises(DataError, match="1 spot\\(s\\) without counts \\(first 3x5\\)"):
        data.load_her2st(root, ("S1",))
    (s,) = data.load_her2st(root, ("S1",), drop_spots_without_counts=True)
    np.testing.assert_array_equal(s.coords, [[0, 0], [1, 0]])
    np.testing.assert_array_equal(s.counts, [[5, 0, 1], [2, 2, 0]])
    assert s.genes == ("G1", "G2", "G3")
    with pytest.raises(DataError, match="missing file"):
        data.load_her2st(root, ("S9",))


def test_image_features_white_vs_tissue_and_cache(tmp_path, monkeypatch):
    root = _mini_her2st(tmp_path)
    (s,) = data.load_her2st(root, ("S1",))
    out = data.her2st_image_features(s, root, cache_dir=tmp_path / "w", patch=16, context=32)
    assert out.features.shape == (3, 33) and np.all(np.isfinite(out.features))
    tissue = 31  # "tissue_frac": fraction of pixels darker than 0.85 luminance
    assert out.features[0, tissue] == 0.0 and out.features[2, tissue] == 1.0
    # the cache is read back for the same files (nothing is computed)
    with monkeypatch.context() as m:
        m.setattr(data, "_patch_features", lambda *a: pytest.fail("recomputed"))
        again = data.her2st_image_features(s, root, cache_dir=tmp_path / "w", patch=16, context=32)
    np.testing.assert_array_equal(again.features, out.features)
    # issue 41: another data folder with the same spots but another image is never served from
    # that cache (it used to be keyed by the spots alone)
    other = _mini_her2st(tmp_path / "elsewhere")
    from PIL import Image

    (img,) = (other / "her2st" / "imgs").iterdir()
    Image.fromarray(np.full((80, 80, 3), 255, np.uint8)).save(img)  # all white: no tissue
    fresh = data.her2st_image_features(s, other, cache_dir=tmp_path / "w", patch=16, context=32)
    assert fresh.features[2, tissue] == 0.0
    for p in (other / "her2st" / "imgs").iterdir():
        p.unlink()
    with pytest.raises(DataError, match="no H&E image"):
        data.her2st_image_features(s, other, cache_dir=tmp_path / "w", patch=16, context=32)


def test_augment_lattice_distinct_points_and_identity_at_zero_strength():
    rng = np.random.default_rng(0)
    c = data.synthetic_sections(1, shape=(16, 16), seed=3)[0].coords
    c0, keep0 = data.augment_lattice(c, rng, strength=0.0, drop_p=0.5)
    assert keep0.all()
    np.testing.assert_array_equal(c0, c - c.min(axis=0))
    for _ in range(5):
        ca, keep = data.augment_lattice(c, rng, strength=1.0, drop_p=0.2)
        act = ca[keep]
        assert act.min() >= 0 and len(np.unique(act, axis=0)) == len(act)
        assert 0.6 * len(c) < keep.sum() <= len(c)
    with pytest.raises(ValueError, match="strength"):
        data.augment_lattice(c, rng, strength=1.5)


def test_synthetic_sections_are_valid_and_reproducible():
    a = data.synthetic_sections(2, shape=(10, 12), n_features=4, n_genes=3, seed=5)
    b = data.synthetic_sections(2, shape=(10, 12), n_features=4, n_genes=3, seed=5)
    for s, t in zip(a, b, strict=True):
        data.check_spots(s.coords, s.counts)
        np.testing.assert_array_equal(s.counts, t.counts)
        assert s.features.shape == (len(s.coords), 4) and s.coords[:, 0].max() < 10


@pytest.mark.slow
def test_real_her2st_section(shared_data_dir, tmp_path):
    (s,) = data.load_her2st(shared_data_dir, ("C2",), drop_spots_without_counts=True)
    assert len(s.coords) == 187 and s.counts.shape[1] > 10000
    f = data.her2st_image_features(s, shared_data_dir, cache_dir=tmp_path)
    assert f.features.shape == (187, 33) and np.all(np.isfinite(f.features))
