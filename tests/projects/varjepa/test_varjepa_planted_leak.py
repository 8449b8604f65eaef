"""Planted leak (issue 41): VarJEPA's tabular encoding and its baselines see training rows only.

:func:`~fidia_jax.projects.varjepa.data.load_csv` fits the numeric standardisation and the
categorical vocabularies on the training rows (:func:`~.data.fit_tabular_encoder`), and
:func:`~fidia_jax.projects.varjepa.train.raw_baselines` fits its probes' scalers, PCA and
LightGBM on them too. Two columns planted to carry the label only on the held-out rows (a
numeric column, 0 on every training row and ``100 (label + 1)`` on the test rows; a
categorical column, ``"z"`` on every training row and ``"t<label>"`` on the test rows) are
constant where anything is fitted, the test values of the categorical map to the unknown id,
and every baseline score is unchanged (exactly: the same fits; tolerance 1e-12). A PCA fitted
on training + test rows (the leak, rebuilt here) takes the planted column in and its probe's
score moves, so the test can fail. (The MLP probe is off: its random initial weights on the
extra input columns would change its fit without any leak.)
"""

import dataclasses

import numpy as np
import pandas as pd
import pytest

from fidia_jax.projects import varjepa
from fidia_jax.projects.varjepa import data
from fidia_jax.projects.varjepa.train import _one_hot, probe, raw_baselines

pytest.importorskip("lightgbm")


def _frames(tmp_path):
    rng = np.random.default_rng(0)
    n = 160
    x = rng.normal(size=(n, 8))
    y = (x[:, 0] + 0.8 * rng.normal(size=n) > 0).astype(int)
    frame = pd.DataFrame({f"n{j}": x[:, j] for j in range(8)})
    frame["c"] = np.where(rng.random(n) < 0.5, "a", "b")
    frame["label"] = y
    from sklearn.model_selection import train_test_split

    _, test = train_test_split(frame, test_size=0.25, random_state=0, stratify=frame["label"])
    held = frame.index.isin(test.index)
    planted = frame.copy()
    planted.insert(8, "leak", np.where(held, 100.0 * (y + 1), 0.0))
    planted.insert(10, "leakcat", np.where(held, [f"t{v}" for v in y], "z"))
    clean_path, planted_path = tmp_path / "clean.csv", tmp_path / "planted.csv"
    frame.to_csv(clean_path, index=False)
    planted.to_csv(planted_path, index=False)
    return clean_path, planted_path, int(held.sum())


def _load(path, extra=()):
    numeric = [f"n{j}" for j in range(8)] + [c for c in extra if c == "leak"]
    cats = ["c"] + [c for c in extra if c == "leakcat"]
    return data.load_csv(path, numeric=numeric, categorical=cats, label="label", seed=0)


def test_columns_planted_in_the_held_out_rows_move_no_baseline(tmp_path):
    config = dataclasses.replace(varjepa.get_config("tiny"), probe_mlp=False)
    clean_path, planted_path, n_test = _frames(tmp_path)
    clean = _load(clean_path)
    planted = _load(planted_path, ("leak", "leakcat"))
    assert np.all(planted.train.x_num[:, -1] == 0.0)  # fitted on training rows: mean 0, std 1
    assert planted.unknown_in_test == clean.unknown_in_test + n_test  # "t0", "t1": unseen
    assert np.all(planted.test.x_cat[:, -1] == data.UNKNOWN_CATEGORY)
    a, b = raw_baselines(config, clean), raw_baselines(config, planted)
    assert set(a) == set(b) == {"raw_linear_acc", "pca_linear_acc", "lightgbm_acc"}
    for k in a:
        assert b[k] == pytest.approx(a[k], abs=1e-12), k


def test_a_pca_fitted_on_training_and_test_rows_would_move(tmp_path):
    from sklearn.decomposition import PCA

    config = dataclasses.replace(varjepa.get_config("tiny"), probe_mlp=False)
    clean_path, planted_path, _ = _frames(tmp_path)

    def leaky_pca_acc(splits):
        cards = splits.schema.cardinalities
        tr, te = _one_hot(splits.train, cards), _one_hot(splits.test, cards)
        pca = PCA(n_components=config.dim, random_state=0).fit(np.concatenate([tr, te]))
        return probe(config, pca.transform(tr), splits.train.y, pca.transform(te),
                     splits.test.y)["linear_acc"]  # fmt: skip

    clean = leaky_pca_acc(_load(clean_path))
    planted = leaky_pca_acc(_load(planted_path, ("leak",)))
    assert abs(planted - clean) >= 0.05
