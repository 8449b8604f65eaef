"""Residual-geometry driver: the tiny run end to end, its summary, hooks, configs, the CLI."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fidia_jax import cli, models
from fidia_jax._io import json_text
from fidia_jax.errors import ConfigError
from fidia_jax.projects import residual_geometry as rg
from fidia_jax.projects.residual_geometry import geometry


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("residual_geometry")
    return rg.train_and_evaluate(rg.get_config("tiny"), workdir), workdir


@pytest.mark.integration  # a tiny driver run (make test-integration, CI)
def test_tiny_run_writes_a_consistent_summary(tiny_run):
    results, workdir = tiny_run
    saved = json.loads((workdir / "residual_geometry.json").read_text())
    assert saved["config"]["n_layers"] == 1 and saved["train"]["steps"] == 8
    assert set(saved["geometry"]) == {"attention", "ffn", "noise_qkv"}
    assert set(saved["accuracy"]) == {"plain", "noise_qkv"}
    assert results["train"]["final_loss"] < results["train"]["first_loss"]
    for acc in (saved["accuracy"]["plain"], saved["accuracy"]["noise_qkv"]["all_layers"]):
        assert all(0.0 <= v <= 1.0 for v in acc.values())
        # the all-question accuracy is the question-weighted mean of visual and text-only
        n, nv = saved["n_test"]["all"], saved["n_test"]["visual"]
        assert acc["all"] == pytest.approx((nv * acc["visual"] + (n - nv) * acc["text_only"]) / n)
    att, ffn = saved["geometry"]["attention"], saved["geometry"]["ffn"]
    for g in (att, ffn):
        assert len(g["rid"]) == 1
        # the authors' ΔD (default) is in [0, sqrt 2], ours (page) in [0, 1]
        assert 0.0 <= g["delta_d"][0] <= np.sqrt(2.0) and 0.0 <= g["delta_d_page"][0] <= 1.0
        # RID = |ΔS| + ΔD per sequence: its mean is at least |mean ΔS| + mean ΔD
        assert g["rid"][0] >= abs(g["delta_s"][0]) + g["delta_d"][0] - 1e-12
        assert 0.0 <= g["tme"][0] <= 1.0  # the authors' TME, defined for the FFN too
    assert 0.0 < att["tme_attention"][0] <= 1.0 and "tme_attention" not in ffn
    assert saved["config"]["delta_d_form"] == "authors" and saved["config"]["rtol"] is None
    assert saved["ordering"]["attention_rid_below_ffn"] == [att["rid"][0] < ffn["rid"][0]]
    assert set(saved["rank_sensitivity"]) == {"rtol=0.01", "rank=4"}
    table = rg.format_table(results)
    assert "| attention |" in table and "Noise QKV, all layers" in table


@pytest.mark.integration  # a tiny driver run (make test-integration, CI)
def test_tiny_run_leaves_summary_pictures_and_training_files(tiny_run):
    results, workdir = tiny_run
    summary = json.loads((workdir / "summary.json").read_text())
    assert {k: v for k, v in summary.items() if k != "config"} == json.loads(
        json_text(rg.headline(results))
    )
    assert summary["geometry"]["attention"]["rid"] == results["geometry"]["attention"]["rid"]
    assert set(summary["accuracy"]) == {"plain", "Noise QKV, all layers"}
    for name in ("residual_geometry.png", "accuracy.png", "curves.png"):
        assert (workdir / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
    records = [json.loads(x) for x in (workdir / "metrics.jsonl").read_text().splitlines()]
    losses = [r["loss"] for r in records if r.get("run") == "residual_geometry_vl" and "loss" in r]
    assert len(losses) == 8 and losses[0] == pytest.approx(results["train"]["first_loss"])


def test_update_geometry_recomputes_from_captures():
    # the driver's per-layer numbers are the primitives applied to the captured arrays
    rng = np.random.default_rng(0)
    b, t, c = 6, 5, 4
    w = np.tril(rng.uniform(0.1, 1.0, (b, 1, t, t)))
    w /= w.sum(-1, keepdims=True)
    cap = {
        name: rng.normal(size=(1, b, t, c)).astype(np.float32)
        for name in ("resid_pre", "attn_out", "resid_mid", "ffn_out")
    }
    cap["attn_weights"] = w[None]
    pre, att, mid, ffn = (cap[k][0] for k in ("resid_pre", "attn_out", "resid_mid", "ffn_out"))
    g = rg.update_geometry(cap, 0, "attn")
    rid = np.mean([geometry.residual_information_dynamics(pre[i], att[i])["rid"] for i in range(b)])
    assert g["rid"] == pytest.approx(rid, abs=1e-12)
    page = [geometry.subspace_innovation(pre[i], att[i], form="page") for i in range(b)]
    assert g["delta_d_page"] == pytest.approx(np.mean(page), abs=1e-12)
    assert g["tme"] == pytest.approx(
        np.mean([geometry.cosine_mixing_entropy(att[i]) for i in range(b)]), abs=1e-12
    )
    assert g["tme_attention"] == pytest.approx(geometry.token_mixing_entropy(w), abs=1e-12)
    # the FFN: ΔS of (resid_mid, ffn_out); the authors' ΔD of X_ffn = resid_mid + ffn_out
    # against the layer input resid_pre (float32: its cutoff); ours of (resid_mid, ffn_out)
    gf = rg.update_geometry(cap, 0, "ffn")
    x_ffn = mid.astype(np.float64) + ffn
    dd = [geometry.subspace_innovation(pre[i], x_ffn[i] - pre[i]) for i in range(b)]
    ds = [geometry.spectral_change(mid[i], ffn[i]) for i in range(b)]
    assert gf["delta_d"] == pytest.approx(np.mean(dd), abs=1e-12)
    assert gf["rid"] == pytest.approx(np.mean(np.abs(ds) + dd), abs=1e-12)
    page = [geometry.subspace_innovation(mid[i], ffn[i], form="page") for i in range(b)]
    assert gf["delta_d_page"] == pytest.approx(np.mean(page), abs=1e-12)
    assert "tme" in gf and "tme_attention" not in gf
    gp = rg.update_geometry(cap, 0, "ffn", form="page", rtol=1e-2)
    page = [geometry.subspace_innovation(mid[i], ffn[i], form="page", rtol=1e-2) for i in range(b)]
    assert gp["delta_d"] == gp["delta_d_page"] == pytest.approx(np.mean(page), abs=1e-12)
    pairs = [(pre[i], att[i]) for i in range(b)]
    note = [geometry.note_residual_information_dynamics(x, dx) for x, dx in pairs]
    assert g["rid_note"] == pytest.approx(np.mean([r["rid"] for r in note]), abs=1e-12)
    gain = np.mean([geometry.similarity_mixing_gain(x, dx) for x, dx in pairs])
    assert g["mixig_note"] == pytest.approx(gain, abs=1e-12)
    with pytest.raises(ValueError, match="module must be"):
        rg.update_geometry(cap, 0, "mlp")


def test_intervention_hooks():
    key = jax.random.key(0)
    (nd,) = rg.intervention_hooks("noise_delta", (1,), 22, key)
    assert isinstance(nd, models.ReplaceUpdate) and nd.update == "attn" and nd.layer == 1
    np.testing.assert_array_equal(np.asarray(nd.positions), np.arange(rg.N_VISUAL))
    (qkv,) = rg.intervention_hooks("noise_qkv", (0,), 22, key)
    assert isinstance(qkv, models.ReplaceQKV) and qkv.parts == "qkv"
    sap = rg.intervention_hooks("sap", (0, 1), 22, key)
    assert [h.layer for h in sap] == [0, 1] and sap[0].renormalize
    np.testing.assert_allclose(np.asarray(sap[0].value)[0, 0, :, 0], 1.0 / np.arange(1, 23))
    with pytest.raises(ValueError, match="unknown intervention"):
        rg.intervention_hooks("noise", (0,), 22, key)


def test_sap_makes_visual_attention_uniform():
    # a visual query (all its keys visual) ends with exactly uniform weights after SAP; a text
    # query gives every visual key the same weight and its row still sums to one
    from flax import nnx

    model = models.Llama(models.LlamaConfig.tiny(n_layers=1), rngs=nnx.Rngs(0))
    tokens = jnp.asarray(np.random.default_rng(0).integers(0, 28, (2, 22)), jnp.int32)
    hooks = rg.intervention_hooks("sap", (0,), 22, jax.random.key(0))
    inspect = nnx.jit(lambda m, t, h: m.inspect(t, capture=("attn_weights",), hooks=h))
    w = np.asarray(inspect(model, tokens, hooks)[1]["attn_weights"][0])  # (B, H, 22, 22)
    for t in (0, 5, 15):
        np.testing.assert_allclose(w[:, :, t, : t + 1], 1.0 / (t + 1), atol=1e-6)
    text = w[:, :, 20]
    np.testing.assert_allclose(text.sum(-1), 1.0, atol=1e-5)
    np.testing.assert_allclose(
        text[..., :16], np.broadcast_to(text[..., :1], text[..., :16].shape), atol=1e-7
    )


@pytest.mark.parametrize(
    "overrides, match",
    [
        ({"n_analysis": 2}, "n_analysis"),
        ({"rtol": 1.0}, "rtol"),
        ({"interventions": ("x",)}, "interventions"),
        ({"test_images": 0.0}, "test_images"),
        ({"rank_grid": (0,)}, "rank_grid"),
        ({"delta_d_form": "paper"}, "delta_d_form"),
        ({"rtol": 0.0}, "rtol"),
    ],
)
def test_config_errors(overrides, match):
    with pytest.raises(ConfigError, match=match):
        rg.get_config("tiny", **overrides)


def test_cli_rejects_bad_override(capsys):
    code = cli.main(["residual_geometry", "train", "--config", "tiny", "--set", "n_analysis=2"])
    assert code == 2 and "n_analysis" in capsys.readouterr().err
