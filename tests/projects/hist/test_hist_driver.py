"""HiST driver: the tiny config end to end (synthetic lattices), config errors, CLI registration."""

import json

import numpy as np
import pytest

from fidia_jax.errors import ConfigError
from fidia_jax.projects import PROJECTS, hist


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("hist")
    return workdir, hist.train_and_evaluate(hist.get_config("tiny"), workdir)


@pytest.mark.integration  # a tiny driver run (make test-integration, CI)
def test_tiny_run_writes_metrics_that_match_the_predictions(tiny_run):
    workdir, res = tiny_run
    saved = json.loads((workdir / "hist_results.json").read_text())
    assert saved["config"]["data"] == "synthetic" and len(saved["folds"]) == 1
    prep = res["prepared"]
    test = saved["folds"][0]["test"]
    i = prep.names.index(test)
    for m in ("hist", "ridge"):
        pred = res["predictions"][m][test]
        y = prep.y[i]
        assert pred.shape == y.shape and np.all(np.isfinite(pred))
        # pooled PCC recomputed with numpy
        want = np.corrcoef(y.ravel(), pred.ravel())[0, 1]
        assert saved["folds"][0][m]["pooled_pcc"] == pytest.approx(want, rel=1e-4, abs=1e-5)
        assert saved["mean"][m]["pooled_pcc"] == pytest.approx(want, rel=1e-4, abs=1e-5)
    assert saved["folds"][0]["hist"]["steps"] == 2 * 2  # epochs x training sections
    # The files of a run: HiST's fit (one record per step), summary, pictures, checkpoint.
    records = [json.loads(s) for s in (workdir / "metrics.jsonl").read_text().splitlines()]
    losses = [r["loss"] for r in records if r["run"] == f"hist_{test}" and "loss" in r]
    assert len(losses) == 4
    assert saved["folds"][0]["hist"]["final_train_loss"] == pytest.approx(np.mean(losses[-2:]))
    summary = json.loads((workdir / "summary.json").read_text())
    assert [r["method"] for r in summary["table"]] == [
        hist.METHODS[m] for m in ("hist", "ridge", "ridge_nbr")
    ]
    assert saved["paired_vs_hist"]["ridge"]["n"] == 6  # eval_genes items of one fold
    assert summary["table"][0]["pooled PCC"] == saved["mean"]["hist"]["pooled_pcc"]
    for png in ("hist_comparison.png", "hist_maps.png", "curves.png"):
        assert (workdir / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (workdir / "checkpoints" / f"hist_{test}").is_dir()


@pytest.mark.parametrize(
    "overrides, match",
    [
        ({"methods": ("hist", "gbm")}, "methods"),
        ({"data": "visium"}, "data must be"),
        ({"dec_depths": (1, 1)}, "dec_depths"),
        ({"folds": 9}, "folds"),
        ({"eval_genes": 99}, "eval_genes"),
    ],
)
def test_bad_config_is_a_config_error(overrides, match):
    with pytest.raises(ConfigError, match=match):
        hist.get_config("tiny", **overrides)


def test_cli_registration():
    assert PROJECTS["hist"].module == "fidia_jax.projects.hist"
