"""Var-JEPA on a user's CSV (issue 24, Deliver 6): loading, its errors, and the CLI."""

import json

import numpy as np
import pandas as pd
import pytest

from fidia_jax import cli
from fidia_jax.errors import ConfigError, DataError
from fidia_jax.projects import varjepa
from fidia_jax.projects.varjepa import data


def _write(tmp_path, n=60, **extra):
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(
        {
            "age": rng.normal(40, 10, n).round(1),
            "hours": rng.integers(10, 60, n),
            "job": rng.choice(["clerk", "nurse", "pilot"], n),
            "y": np.where(np.arange(n) % 3 == 0, "yes", "no"),
            **extra,
        }
    )
    path = tmp_path / "table.csv"
    frame.to_csv(path, index=False)
    return path, frame


def test_load_csv_splits_and_encodes_on_training_rows(tmp_path):
    path, frame = _write(tmp_path)
    s = data.load_csv(path, numeric=["age", "hours"], categorical=["job"], label="y", seed=1)
    assert s.name == "table" and s.n_classes == 2
    assert len(s.train.y) + len(s.test.y) == 60 and len(s.test.y) == 15
    assert s.train.x_num.shape == (45, 2) and s.train.x_cat.shape == (45, 1)
    # standardised with the training rows: mean 0, std 1 there (population std)
    np.testing.assert_allclose(s.train.x_num.mean(0), 0.0, atol=1e-5)
    np.testing.assert_allclose(s.train.x_num.std(0), 1.0, atol=1e-5)
    assert s.schema.categories == (("clerk", "nurse", "pilot"),)
    # classes are the sorted label values: "no" -> 0, "yes" -> 1; stratified: 20 "yes" in all
    assert int(s.train.y.sum() + s.test.y.sum()) == 20
    # the split is scikit-learn's stratified split with the seed; numerics standardised with
    # the training rows' mean and std
    from sklearn.model_selection import train_test_split

    tr, te = train_test_split(frame, test_size=0.25, random_state=1, stratify=frame["y"])
    ages = tr["age"].to_numpy()
    np.testing.assert_allclose(s.train.x_num[:, 0], (ages - ages.mean()) / ages.std(), rtol=1e-5)
    t_ages = te["age"].to_numpy()
    np.testing.assert_allclose(s.test.x_num[:, 0], (t_ages - ages.mean()) / ages.std(), rtol=1e-5)
    np.testing.assert_array_equal(s.test.y, (te["y"] == "yes").to_numpy().astype(int))


def test_load_csv_missing_column_names_it_and_the_present_ones(tmp_path):
    path, _ = _write(tmp_path)
    with pytest.raises(DataError, match=r"\['salary'\] not in the file; its columns are"):
        data.load_csv(path, numeric=["age", "salary"], categorical=["job"], label="y")
    with pytest.raises(DataError, match=r"\['label'\] not in the file"):
        data.load_csv(path, numeric=["age"], label="label")


def test_load_csv_non_numeric_value_names_column_row_and_value(tmp_path):
    n = 60
    ages = np.arange(n).astype(float).astype(str).astype(object)
    ages[7] = "forty"
    path, _ = _write(tmp_path, n=n, weight=ages)
    with pytest.raises(DataError, match=r"numeric column 'weight' holds a non-numeric value "
                       r"'forty' in data row 7 \(1 such cell"):  # fmt: skip
        data.load_csv(path, numeric=["age", "weight"], label="y")
    # the same column as a categorical one is fine
    s = data.load_csv(path, numeric=["age"], categorical=["weight"], label="y")
    assert s.train.x_cat.shape[1] == 1


def test_load_csv_other_bad_inputs(tmp_path):
    path, _ = _write(tmp_path)
    with pytest.raises(DataError, match="named twice"):
        data.load_csv(path, numeric=["age"], categorical=["job"], label="age")
    with pytest.raises(DataError, match="no feature columns"):
        data.load_csv(path, numeric=[], label="y")
    with pytest.raises(DataError, match="file not found"):
        data.load_csv(tmp_path / "nope.csv", numeric=["age"], label="y")
    gaps = np.arange(60).astype(float)
    gaps[3] = np.nan
    path2, _ = _write(tmp_path, gap=gaps)
    with pytest.raises(DataError, match=r"'gap' has an empty / NaN cell in data row 3"):
        data.load_csv(path2, numeric=["gap"], label="y")
    with pytest.raises(ConfigError, match="csv_path, label_column"):
        varjepa.get_config("tiny", dataset="csv", csv_path=str(path))


@pytest.mark.integration  # two tiny pretrainings through the CLI
def test_cli_trains_on_a_csv(tmp_path, capsys):
    path, _ = _write(tmp_path, n=90)
    args = ["varjepa", "train", "--config", "tiny", "--set", "dataset=csv",
            "--set", f"csv_path={path}", "--set", "label_column=y",
            "--set", 'numeric_columns=["age","hours"]', "--set", 'categorical_columns=["job"]',
            "--workdir", str(tmp_path / "run")]  # fmt: skip
    assert cli.main(args) == 0
    saved = json.loads((tmp_path / "run" / "varjepa.json").read_text())
    assert saved["dataset"] == "table" and saved["n_train"] == 67 and saved["n_test"] == 23
    assert set(saved["methods"]) == {"T-JEPA", "Var-T-JEPA"}
    # a missing column is one line on stderr and exit code 2
    bad = [*args[:-2], "--set", 'numeric_columns=["age","salary"]', "--workdir", str(tmp_path)]
    assert cli.main(bad) == 2
    assert "['salary'] not in the file" in capsys.readouterr().err
