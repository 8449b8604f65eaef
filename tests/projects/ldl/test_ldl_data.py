"""LDL data: .mat loader errors, polarity presets, the real sets (skipped without shared data)."""

import numpy as np
import pytest
import scipy.io

from fidia_jax.errors import DataError
from fidia_jax.projects.ldl import data


def _write(tmp_path, name="toy", **arrays):
    folder = tmp_path / "ldl"
    folder.mkdir(exist_ok=True)
    scipy.io.savemat(folder / f"{name}.mat", arrays)
    return folder / f"{name}.mat"


def test_loader_reads_and_maps_preset(tmp_path):
    x = np.arange(12.0).reshape(4, 3)
    d = np.array([[0.5, 0.5, 0, 0, 0, 0], [1, 0, 0, 0, 0, 0]] * 2, float)
    _write(tmp_path, "sjaffe", features=x, labels=d)
    ds = data.load_ldl_dataset("SJAFFE", data_dir=tmp_path)  # case-insensitive file match
    assert ds.name == "SJAFFE" and ds.features.dtype == np.float32
    np.testing.assert_array_equal(ds.features, x)
    np.testing.assert_array_equal(ds.pos, [1, 0, 1, 0, 0, 0])
    np.testing.assert_array_equal(ds.neg, [0, 1, 0, 1, 1, 1])


def test_mat_without_expected_keys_names_them(tmp_path):
    path = _write(tmp_path, features=np.ones((3, 2)), raw_data=np.ones((3, 4)))
    with pytest.raises(
        DataError, match=r"missing key\(s\) \['labels'\].*\['features', 'raw_data'\]"
    ):
        data.load_ldl_mat(path)


@pytest.mark.parametrize(
    ("labels", "features", "match"),
    [
        (np.array([[0.5, np.nan], [0.5, 0.5]]), np.ones((2, 3)), "NaN"),
        (np.array([[0.5, 0.5], [0.0, 0.0]]), np.ones((2, 3)), "row 1 is all zero"),
        (np.array([[1.5, -0.5], [0.5, 0.5]]), np.ones((2, 3)), "negative"),
        (np.array([[0.5, 0.4], [0.5, 0.5]]), np.ones((2, 3)), "sums to 0.9"),
        (np.array([[0.5, 0.5], [0.5, 0.5]]), np.ones((3, 3)), "3 rows but labels 2"),
        (np.array([[1.0], [1.0]]), np.ones((2, 3)), ">= 2 labels"),
    ],
)
def test_malformed_files_raise(tmp_path, labels, features, match):
    path = _write(tmp_path, features=features, labels=labels)
    with pytest.raises(DataError, match=match):
        data.load_ldl_mat(path)


def test_missing_file_and_folder(tmp_path):
    with pytest.raises(DataError, match="LDL data folder not found"):
        data.load_ldl_dataset("SJAFFE", data_dir=tmp_path)
    _write(tmp_path, "Music", features=np.ones((2, 2)), labels=np.full((2, 9), 1 / 9))
    with pytest.raises(DataError, match=r"no LDL data set 'Nope'.*\['Music'\]"):
        data.load_ldl_dataset("Nope", data_dir=tmp_path)
    with pytest.raises(DataError, match="not a readable"):
        (tmp_path / "ldl" / "bad.mat").write_text("not matlab")
        data.load_ldl_mat(tmp_path / "ldl" / "bad.mat")


def test_preset_length_mismatch(tmp_path):
    path = _write(tmp_path, "M2B", features=np.ones((2, 2)), labels=np.full((2, 4), 0.25))
    with pytest.raises(DataError, match="preset of 'M2B' has 5 labels, the file 4"):
        data.load_ldl_mat(path)


def test_presets_are_pyldls():
    assert set(data.LDL_BENCHMARK_SETS) <= set(data.LDL_POLARITY)
    pos, neg = data.LDL_POLARITY["Music"]
    assert pos == (1, 0, 1, 0, 1, 1, 1, 0.5, 0.5) and neg == (0, 1, 0, 1, 0, 0, 0, 0.5, 0.5)
    assert data.LDL_POLARITY["Movie"] == ((0, 0.25, 0.5, 0.75, 1), (1, 0.75, 0.5, 0.25, 0))
    assert data.LDL_POLARITY["emotion6"] == data.LDL_POLARITY["Emotion6"]


def test_synthetic_set():
    ds = data.synthetic_ldl_dataset(50, 4, 5, seed=3)
    assert ds.features.shape == (50, 4) and ds.labels.shape == (50, 5)
    np.testing.assert_allclose(ds.labels.sum(1), 1.0, rtol=1e-5)
    np.testing.assert_array_equal(ds.pos + ds.neg, np.ones(5))
    again = data.synthetic_ldl_dataset(50, 4, 5, seed=3)
    np.testing.assert_array_equal(ds.labels, again.labels)
    with pytest.raises(ValueError, match="n_labels >= 2"):
        data.synthetic_ldl_dataset(5, 2, 1)


def test_real_sets(shared_data_dir):
    ds = data.load_ldl_dataset("SJAFFE", data_dir=shared_data_dir)
    assert ds.features.shape == (213, 243) and ds.labels.shape == (213, 6)
    emo = data.load_ldl_dataset("Emotion6", data_dir=shared_data_dir)  # file emotion6.mat
    assert emo.labels.shape == (1980, 7) and emo.pos is not None
    assert float(emo.labels.min()) == 0.0  # real zeros in the targets


@pytest.mark.slow
def test_all_benchmark_sets(shared_data_dir):
    for name in data.LDL_BENCHMARK_SETS:
        ds = data.load_ldl_dataset(name, data_dir=shared_data_dir)
        assert ds.pos.shape == (ds.num_labels,)


def test_label_row_summing_to_1_5_is_an_error_everywhere():
    from fidia_jax import metrics
    from fidia_jax.projects import ldl
    from fidia_jax.projects.ldl import losses

    x = np.arange(8, dtype=np.float32).reshape(4, 2)
    d = np.full((4, 3), 1 / 3, np.float32)
    d_bad = d.copy()
    d_bad[2] = [0.5, 0.5, 0.5]  # sums to 1.5
    pos, neg = np.array([1.0, 0, 0]), np.array([0, 1.0, 1.0])
    data.LdlDataset("ok", x, d, pos, neg)  # float32 thirds pass the tolerance
    with pytest.raises(DataError, match=r"label row 2 sums to 1.5, not 1"):
        data.LdlDataset("user", x, d_bad, pos, neg)
    with pytest.raises(DataError, match=r"fit_predict: d_train: label row 2 sums to 1.5"):
        ldl.fit_predict(x, d_bad, x, pos, neg, ldl.get_config("tiny"))
    with pytest.raises(DataError, match=r"ldl_kl_loss: d_true: label row 2 sums to 1.5"):
        losses.ldl_kl_loss(d_bad, d)
    with pytest.raises(DataError, match=r"divisiveness_loss: d_true: label row 2 sums to 1.5"):
        losses.divisiveness_loss(d_bad, d, pos, neg)
    with pytest.raises(ValueError, match=r"d_true row 2 sums to 1.5, not 1"):
        metrics.ldl_metrics(d_bad, d, pos, neg)
    with pytest.raises(ValueError, match=r"d_pred row 2 sums to 1.5, not 1"):
        metrics.chebyshev(d, d_bad)
    # within the tolerance (1e-3) a row passes; just outside it fails
    d_near = d.copy()
    d_near[1, 0] += 9e-4
    assert float(losses.ldl_kl_loss(d_near, d_near)) == pytest.approx(0.0, abs=1e-6)
    d_near[1, 0] += 2e-4
    with pytest.raises(DataError, match=r"label row 1 sums to 1.001"):
        losses.ldl_kl_loss(d_near, d)
