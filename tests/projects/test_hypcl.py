"""HypCL driver: the tiny run through the command line, its summary, NCM against scikit-learn."""

import json

import numpy as np
import pytest
from sklearn.neighbors import NearestCentroid

from fidia_jax import cli, metrics
from fidia_jax.errors import ConfigError
from fidia_jax.projects import hypcl


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("hypcl")
    assert cli.main(["hypcl", "train", "--config", "tiny", "--workdir", str(workdir)]) == 0
    return json.loads((workdir / "hypcl.json").read_text())


@pytest.mark.integration  # a tiny driver run (make test-integration, CI)
def test_tiny_summary_is_consistent(tiny_run):
    r = tiny_run
    assert r["config"]["task"] == "synthetic" and set(r["methods"]) == set(
        hypcl.get_config("tiny").methods
    )
    for row in r["methods"].values():
        (order,) = row["orders"]
        acc = np.array(order["acc"], dtype=float)
        assert acc.shape == (2, 2) and np.all(acc[np.tril_indices(2)] >= 0)
        again = metrics.continual_metrics(acc, None)
        # equal task sizes in the tiny split: weights do not matter
        np.testing.assert_allclose(row["average_accuracy"], again["average_accuracy"])
        np.testing.assert_allclose(row["average_forgetting"], again["average_forgetting"])
    gap = r["methods"]["hypcl"]["average_accuracy"] - r["methods"]["euclidean"]["average_accuracy"]
    np.testing.assert_allclose(r["gap_average_accuracy"], gap)
    # Better than chance among the 4 classes of the final step.
    assert r["methods"]["hypcl"]["last_accuracy"] > 0.4


@pytest.mark.integration  # a tiny driver run (make test-integration, CI)
def test_ncm_matches_scikit_learn(tiny_run):
    cfg = hypcl.get_config("tiny")
    x, y = hypcl.synthetic_task(cfg, cfg.synth_depth)
    stream = next(hypcl.train._streams(x, y, cfg, [[0, 1, 2, 3]], 2))
    ref = NearestCentroid().fit(stream.x_tr, stream.y_tr).predict(stream.x_te)
    last = tiny_run["methods"]["ncm"]["last_accuracy"]
    np.testing.assert_allclose(last, np.mean(ref == stream.y_te))


def test_config_errors():
    with pytest.raises(ConfigError, match="curvature"):
        hypcl.get_config("tiny", curvature=0.0)
    with pytest.raises(ConfigError, match="methods"):
        hypcl.get_config("tiny", methods=("ncm",))
    with pytest.raises(ConfigError, match="task"):
        hypcl.get_config("tiny", task="cifar")
