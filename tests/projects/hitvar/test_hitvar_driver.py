"""HIT-VAR driver: configs, the held-out split, scoring, the CLI, and the tiny run
(integration)."""

import json

import numpy as np
import pytest

from fidia_jax import cli, data, metrics
from fidia_jax.errors import ConfigError
from fidia_jax.projects import hitvar


def test_configs_validate():
    assert hitvar.get_config("default").grids[-1] == hitvar.get_config("default").latent_size
    with pytest.raises(ConfigError, match="latent_size 5 must divide"):
        hitvar.get_config("tiny", latent_size=5, grids=(5,))
    with pytest.raises(ConfigError, match="grids must increase"):
        hitvar.get_config("tiny", grids=(4, 2))
    with pytest.raises(ConfigError, match="dpo_samples"):
        hitvar.get_config("tiny", dpo_samples=1)


def test_held_out_photos_are_never_trained_on():
    cfg = hitvar.get_config("tiny", n_train=6, n_eval=4)
    d = hitvar.make_data(cfg)
    photos = data.bundled_photos()
    held = {k: photos[k] for k in cfg.held_out}
    train = {k: v for k, v in photos.items() if k not in cfg.held_out}
    np.testing.assert_array_equal(d["hr_eval"], data.random_crops(held, 32, 4, seed=cfg.seed + 1))
    np.testing.assert_array_equal(d["hr_train"], data.random_crops(train, 32, 6, seed=cfg.seed))
    assert d["lr_train"].shape == (6, 16, 16, 3)
    with pytest.raises(ConfigError, match="held_out must name bundled photos"):
        hitvar.make_data(hitvar.get_config("tiny", held_out=("lena",)))


def test_score_matches_the_metrics_directly():
    rng = np.random.default_rng(0)
    y = {
        1: rng.uniform(size=(2, 16, 16, 3)).astype(np.float32),
        2: rng.uniform(size=(2, 32, 32, 3)).astype(np.float32),
    }
    x = {
        m: np.clip(v + 0.05 * rng.normal(size=v.shape), 0, 1).astype(np.float32)
        for m, v in y.items()
    }
    s = hitvar.score(x, y)
    assert s["x1"]["lpips"] is None  # below AlexNet's 31-pixel minimum
    np.testing.assert_allclose(
        s["x2"]["psnr"],
        np.mean([metrics.psnr(a, b, data_range=1.0) for a, b in zip(x[2], y[2], strict=True)]),
    )
    np.testing.assert_allclose(
        s["x2"]["lpips"], float(np.mean(metrics.lpips(x[2], y[2]))), rtol=1e-6
    )


def test_paired_test_is_the_exact_wilcoxon_signed_rank_test():
    rng = np.random.default_rng(3)
    a = rng.normal(size=9)
    b = a + rng.normal(0.3, 1.0, size=9)  # distinct nonzero |differences|, no ties
    d = a - b
    ranks = np.argsort(np.argsort(np.abs(d))) + 1
    w_obs = min(ranks[d > 0].sum(), ranks[d < 0].sum())
    # brute force over the 2^9 sign patterns
    signs = (np.arange(2**9)[:, None] >> np.arange(9)) & 1
    w_plus = (signs * ranks).sum(1)
    w_all = np.minimum(w_plus, ranks.sum() - w_plus)
    res = hitvar.paired_test(a, b)
    np.testing.assert_allclose(res["p"], np.mean(w_all <= w_obs), rtol=1e-9)
    assert res["n"] == 9 and res["a_better"] == (a.mean() < b.mean() and res["p"] < 0.05)
    # a clear, consistent win is "better"; equal scores never are
    assert hitvar.paired_test(np.zeros(12), np.arange(1, 13) / 10)["a_better"]
    same = hitvar.paired_test(np.ones(5), np.ones(5))
    assert same["p"] == 1.0 and not same["a_better"]
    with pytest.raises(ValueError, match="finite"):
        hitvar.paired_test(np.array([0.1, np.nan]), np.array([0.2, 0.3]))
    with pytest.raises(ValueError, match="one length"):
        hitvar.paired_test(np.zeros(3), np.zeros(4))


def test_lr_hr_pairs_prefer_hr_tokens_over_lr_tokens():
    hr_t = np.array([[1, 2, 3], [4, 5, 6]])
    lr_t = np.array([[1, 2, 0], [4, 5, 6]])  # the second crop: same tokens, no preference
    hr_x, lr_x = np.zeros((2, 3, 2)), np.ones((2, 3, 2))
    p = hitvar.lr_hr_pairs(hr_t, hr_x, lr_t, lr_x)
    np.testing.assert_array_equal(p["tokens"][:, 0], hr_t)  # preferred: HR
    np.testing.assert_array_equal(p["tokens"][:, 1], lr_t)  # rejected: LR
    np.testing.assert_array_equal(p["inputs"][:, 1], lr_x)
    np.testing.assert_array_equal(p["valid"], [1.0, 0.0])
    with pytest.raises(ValueError, match="share shapes"):
        hitvar.lr_hr_pairs(hr_t, hr_x, lr_t[:, :2], lr_x)


def test_cli_errors_name_the_problem(capsys):
    code = cli.main(["hitvar", "train", "--config", "tiny", "--set", 'held_out=["lena"]'])
    assert code == 2 and "held_out must name bundled photos" in capsys.readouterr().err


@pytest.mark.integration  # a tiny driver run (make test-integration, CI)
def test_tiny_run_end_to_end(tmp_path):
    cfg = hitvar.get_config("tiny")
    res = hitvar.train_and_evaluate(cfg, tmp_path)
    written = json.loads((tmp_path / "hitvar.json").read_text())
    assert set(written["metrics"]) == set(hitvar.METHODS)
    assert written["prefix_lengths"] == {"x1": 1, "x2": 2}
    # the bicubic row is the metric of bicubic upsampling itself
    d = hitvar.make_data(cfg)
    assert res["metrics"]["bicubic"]["x2"]["psnr"] > 15
    # the plain tokenizer has only the x M sub-pixel head; HIT-VAR's others are 3x3 convs from
    # `channels` to 3 r^2 channels (r = output side / latent side), with biases
    extra = sum(
        9 * cfg.channels * 3 * r * r + 3 * r * r
        for r in (m * cfg.lr_size // cfg.latent_size for m in range(1, cfg.max_scale))
    )
    hit_n, plain_n = res["params"]["HIT-VAR (inference)"], res["params"]["plain RQ+VAR (inference)"]
    assert hit_n - plain_n == extra
    assert abs(res["params"]["conv SR"] / res["params"]["HIT-VAR (inference)"] - 1) < 0.2
    assert set(res["goals"]) == {
        "tokens_matter",
        "lpips_top_beats_bicubic",
        "lpips_top_beats_plain_var",
        "dpo_helps",
        "met",
    }
    # the goal is met only beyond the noise: each comparison is a paired test over the crops
    t = res["paired_tests"]["HIT-VAR vs bicubic"]
    assert t["n"] == cfg.n_eval
    assert res["goals"]["lpips_top_beats_bicubic"] == (t["mean_diff"] < 0 and t["p"] < 0.05)
    np.testing.assert_allclose(t["mean_a"], res["metrics"]["HIT-VAR"]["x2"]["lpips"], rtol=1e-5)
    tc = res["token_check"]
    np.testing.assert_allclose(
        tc["lpips"]["oracle"],
        res["metrics"]["oracle: HIT tokenizer, true tokens"]["x2"]["lpips"],
        rtol=1e-5,
    )
    assert len(d["hr_eval"]) == cfg.n_eval
    # one fit per training phase: its losses in metrics.jsonl (= the curves), a checkpoint
    runs = [
        "hit_tokenizer",
        "hit_var",
        "hit_dpo",
        "hit_dpo_lpips",
        "plain_tokenizer",
        "plain_var",
        "conv_sr",
    ]
    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    for run in runs:
        assert [r["loss"] for r in records if r["run"] == run] == written["curves"][run]
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == sorted(runs)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["lpips_x2"]["HIT-VAR"] == written["metrics"]["HIT-VAR"]["x2"]["lpips"]
    for png in ("hitvar_samples.png", "hitvar_table.png", "curves.png"):
        assert (tmp_path / png).read_bytes()[:4] == b"\x89PNG"
