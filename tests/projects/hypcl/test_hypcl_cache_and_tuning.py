"""Issue 41 follow-ups of the HypCL driver: a keyed feature cache, and ``finetune`` tuned on the
validation rows like the adapters.

The AlexNet embedding is replaced by a cheap stand-in (a per-image statistic that depends on
the layer), so the tests check the cache logic, not the network; the tuning test replaces the
stream runner by one that records the rows it is given and scores each grid point by a known
function of it, so the choice can be checked against a brute-force argmax.
"""

import types

import jax.numpy as jnp
import numpy as np

import fidia_jax
from fidia_jax.projects import hypcl
from fidia_jax.projects.hypcl import train as hyp_train
from fidia_jax.projects.hypcl._continual import stratified_split


def _stub_models(monkeypatch):
    calls = []

    def embed(images, *, layer=5, params=None):
        calls.append(layer)
        m = jnp.mean(images**2, axis=(1, 2))  # (B, 3); moves with the image size
        return jnp.concatenate([m, m * layer], axis=-1)

    monkeypatch.setattr(hyp_train, "models", types.SimpleNamespace(alexnet_embedding=embed))
    return calls


def test_feature_cache_is_keyed_by_its_settings(monkeypatch, tmp_path, capsys):
    calls = _stub_models(monkeypatch)
    f5, y5 = hyp_train.digit_features(tmp_path, batch=1024, size=8, layer=5)
    assert calls and f5.shape == (1797, 6) and y5.shape == (1797,)
    with np.load(tmp_path / hyp_train.FEATURE_CACHE) as f:
        assert '"layer": 5' in str(f["key"]) and '"image_size": 8' in str(f["key"])
    n = len(calls)
    again, _ = hyp_train.digit_features(tmp_path, batch=1024, size=8, layer=5)
    assert len(calls) == n  # same key: read back, nothing computed
    np.testing.assert_array_equal(again, f5)
    capsys.readouterr()
    f4, _ = hyp_train.digit_features(tmp_path, batch=1024, size=8, layer=4)
    assert len(calls) > n  # another layer: not the first cache
    assert "different key" in capsys.readouterr().out
    np.testing.assert_allclose(f4[:, 3:], f5[:, 3:] * 4 / 5, rtol=1e-6)
    n = len(calls)
    f_big, _ = hyp_train.digit_features(tmp_path, batch=1024, size=12, layer=4)
    assert len(calls) > n and not np.array_equal(f_big, f4)  # another image size


def test_feature_cache_without_key_or_from_another_version_is_recomputed(
    monkeypatch, tmp_path, capsys
):
    calls = _stub_models(monkeypatch)
    np.savez(
        tmp_path / hyp_train.FEATURE_CACHE,
        features=np.zeros((1797, 6), np.float32),
        labels=np.zeros(1797, np.int64),
    )  # a cache written before the key existed
    feats, _ = hyp_train.digit_features(tmp_path, batch=1024, size=8)
    assert calls and "no key" in capsys.readouterr().out and np.abs(feats).sum() > 0
    n = len(calls)
    monkeypatch.setattr(fidia_jax, "__version__", fidia_jax.__version__ + ".other")
    hyp_train.digit_features(tmp_path, batch=1024, size=8)
    assert len(calls) > n


def test_finetune_is_tuned_on_the_grid_with_the_validation_rows_only(monkeypatch):
    cfg = hypcl.get_config(
        "tiny", tune_learning_rates=(0.003, 0.01, 0.03), tune_distill_weights=(0.0, 0.1)
    )
    x, y = hypcl.synthetic_task(cfg, 2)
    x = np.concatenate([np.arange(len(y), dtype=x.dtype)[:, None], x], axis=1)  # row ids
    tr, te = stratified_split(y, cfg.test_fraction, cfg.seed)
    seen = []

    def fake_run(method, stream, config, seed, trainers, *a, **k):
        seen.append((method, stream.x_tr[:, 0].copy(), stream.x_te[:, 0].copy()))
        lr, dw = config.learning_rate, config.distill_weight
        score = {"finetune": -abs(lr - 0.01), "hypcl": -abs(lr - 0.03) - dw}.get(method, 0.0)
        k_ = len(stream.tasks)
        return np.full((k_, k_), 0.5 + score)

    monkeypatch.setattr(hyp_train, "run_method", fake_run)
    monkeypatch.setattr(hyp_train, "standardize_like_first_task", lambda d: d)  # keep row ids
    chosen, trials = hyp_train.tune_on_validation(x, y, cfg, [0, 1, 2, 3], 2)
    assert set(chosen) == {"finetune", "euclidean", "hypcl"}
    ft = [t for t in trials if t["method"] == "finetune"]
    # the grid's learning rates, at its first distillation weight (finetune never distils)
    assert [(t["learning_rate"], t["distill_weight"]) for t in ft] == [
        (0.003, 0.0), (0.01, 0.0), (0.03, 0.0)
    ]  # fmt: skip
    assert chosen["finetune"]["learning_rate"] == 0.01  # the brute-force argmax
    assert chosen["finetune"]["learning_rate"] in cfg.tune_learning_rates
    assert chosen["finetune"]["distill_weight"] in cfg.tune_distill_weights
    assert chosen["hypcl"]["learning_rate"] == 0.03 and chosen["hypcl"]["distill_weight"] == 0.0
    assert len([t for t in trials if t["method"] == "hypcl"]) == 6
    # every run (finetune included) fits on, and is scored on, training-split rows only,
    # the same validation rows for every method, and never a test row
    fit0, val0 = seen[0][1], seen[0][2]
    assert not set(fit0) & set(val0)
    assert set(fit0) | set(val0) == set(tr.tolist())
    for _, fit, val in seen:
        np.testing.assert_array_equal(fit, fit0)
        np.testing.assert_array_equal(val, val0)
        assert not set(val.astype(int)) & set(te.tolist())
