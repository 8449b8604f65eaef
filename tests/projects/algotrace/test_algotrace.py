"""AlgoTrace driver: the tiny run end to end, its bookkeeping, and the errors users hit."""

import dataclasses
import json

import numpy as np
import pytest

from fidia_jax._io import json_text
from fidia_jax.errors import ConfigError
from fidia_jax.projects import algotrace
from fidia_jax.projects.algotrace import train as at_train

PRIMS = at_train.PRIMS


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("algotrace")
    config = algotrace.get_config("tiny")
    return config, algotrace.train_and_evaluate(config, workdir), workdir


# The tiny run compiles training, capture, k-means, patching and the sampler (~20 s of CPU):
# slow here; the notebook's tiny run (tests/test_notebooks.py, integration) runs it too.
@pytest.mark.integration  # a tiny driver run (make test-integration, CI)
def test_tiny_run_writes_a_consistent_summary(tiny_run):
    config, res, workdir = tiny_run
    saved = json.loads((workdir / "algotrace.json").read_text())
    assert saved["config"]["n_clusters"] == config.n_clusters
    cl = res["clustering"]
    k = config.n_clusters
    assert sum(cl["cluster_sizes"]) == cl["n_points"] and len(cl["per_layer"]) == config.n_layers
    trans = np.asarray(cl["transition"])
    assert trans.shape == (k, k)
    np.testing.assert_allclose(trans.sum(1)[trans.sum(1) > 0], 1.0, atol=1e-12)
    assert set(cl["meta_of_cluster"]) <= set(range(config.n_meta))
    for part in ("kmeans", "meta", "random", "token_identity"):
        assert 0 < cl[part]["purity"] <= 1 and -1 <= cl[part]["ari"] <= 1
    # the majority share of a cluster times its size, summed, is the purity's numerator
    num = sum(s * n for s, n in zip(cl["cluster_majority_share"], cl["cluster_sizes"], strict=True))
    assert num / cl["n_points"] == pytest.approx(cl["kmeans"]["purity"])
    for src in ("both", "tsp", "nav"):
        for prim in PRIMS:
            heads = np.asarray(res["vectors"][src][prim]["heads"])
            ie = np.asarray(res["vectors"][src][prim]["ie"])
            assert (
                heads.shape == (config.n_layers, config.n_heads)
                and heads.sum() == config.top_k_heads
            )
            assert ie[heads].min() >= ie[~heads].max()  # the top heads by indirect effect
    conds = res["conditions"]
    assert set(conds) >= {"none", "random", *PRIMS, *config.compose_pairs}
    for name, c in conds.items():
        for part in ("all", "tsp", "nav"):
            total = sum(c["rates"][part])
            assert total == pytest.approx(1.0) or total == 0.0, (name, part)
    inj = res["injection"]
    for row, vals in inj["table"].items():
        expect = np.asarray(conds[row]["rates"]["all"]) - np.asarray(conds["none"]["rates"]["all"])
        np.testing.assert_allclose(vals, expect, atol=1e-12)
    assert "Injection table" in algotrace.format_tables(res)
    assert set(res["variant_summary"]) == {"tokens@1", "onset@1"}
    assert res["headline_variant"] == "tokens@1"
    assert res["injection"] == res["variants"]["tokens@1"]["injection"]


@pytest.mark.integration  # a tiny driver run (make test-integration, CI)
def test_tiny_run_leaves_summary_pictures_and_training_files(tiny_run):
    config, res, workdir = tiny_run
    summary = json.loads((workdir / "summary.json").read_text())
    assert {k: v for k, v in summary.items() if k != "config"} == json.loads(
        json_text(algotrace.headline(res))
    )
    assert summary["agreement"]["kmeans"] == res["clustering"]["kmeans"]
    for name in ("algotrace_clusters.png", "algotrace_injection.png", "curves.png"):
        assert (workdir / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
    records = [json.loads(x) for x in (workdir / "metrics.jsonl").read_text().splitlines()]
    steps = [r["step"] for r in records if r.get("run") == "algotrace_lm" and "loss" in r]
    assert steps == list(range(1, config.steps + 1))


def test_injection_summary_closed_form():
    config = algotrace.get_config("tiny", compose_pairs=("distance+verify",))
    base = [0.2, 0.2, 0.2, 0.2, 0.2]

    def cond(rates, nav=None):
        return {"rates": {"all": rates, "tsp": rates, "nav": nav or rates}}

    res = {"none": cond(base), "random": cond([0.2, 0.2, 0.2, 0.35, 0.05])}
    for i, p in enumerate(PRIMS):  # each vector raises its own primitive by 0.1 (first two: 0)
        r = list(base)
        bump = 0.0 if i < 2 else 0.1
        r[i] += bump
        r[(i + 1) % 5] -= bump
        res[p] = cond(r)
        res[f"{p}@tsp"] = cond(r, nav=base)  # built on TSP: no effect on NAV
        res[f"{p}@nav"] = cond(r)
    res["distance+verify"] = cond([0.25, 0.15, 0.2, 0.25, 0.15])
    out = at_train._summarise_injection(res, config)
    assert out["diagonal_positive"] == 3 and out["diagonal_row_max"] == 3
    assert out["diagonal_beats_random"] == 2  # verify: +0.1 < random +0.15
    comp = out["composition"]["distance+verify"]
    assert comp["sum_raises_both"] and comp["delta_b"]["verify"] == pytest.approx(0.1)
    assert out["transfer"]["path"]["tsp->nav"] == 0.0
    assert out["transfer"]["path"]["nav->nav"] == pytest.approx(0.1)
    assert out["transfer_positive"] == 3  # nav->tsp for nearest, verify, path


def test_configs_and_errors():
    assert set(algotrace.PRESETS) == {"tiny", "demo", "reduced", "default"}
    demo, reduced = algotrace.get_config("demo"), algotrace.get_config("reduced")
    assert demo.steps < reduced.steps and demo.fv_positions == ("onset",)
    assert (reduced.n_train, reduced.steps, reduced.n_eval) == (2000, 1000, 192)  # docs' tables
    assert algotrace.get_config("default").n_clusters == 50
    with pytest.raises(ConfigError, match="inject_layer names layer 3, but the model has 3 layers"):
        algotrace.get_config("default", inject_layer=3)
    with pytest.raises(ConfigError, match="compose_pairs"):
        algotrace.get_config("default", compose_pairs=("distance+sorting",))
    with pytest.raises(ConfigError, match="top_k_heads"):
        algotrace.get_config("tiny", top_k_heads=99)


def test_k_above_the_number_of_points_and_a_primitive_without_tokens():
    config = algotrace.get_config("tiny")
    ev = at_train._data(config, 4, 1)
    model = None  # both errors are raised before the model is touched
    with pytest.raises(ValueError, match="n_clusters=500 > .* clustered tokens"):
        at_train.cluster_analysis(model, ev, dataclasses.replace(config, n_clusters=500), None)
    with pytest.raises(ValueError, match="primitive 'distance' has no tokens"):
        algotrace.build_vectors(model, ev.tokens, ev.labels, config, rows=np.zeros(4, bool))
