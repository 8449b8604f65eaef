"""Residual geometry on a released checkpoint (the text-only check): ``checkpoint=PATH`` end to
end on a tiny random Gemma 3 checkpoint in the Hugging Face layout, and its bad input."""

from __future__ import annotations

import json

import numpy as np
import pytest

from fidia_jax import models
from fidia_jax.errors import CheckpointError, ConfigError
from fidia_jax.projects import residual_geometry as rg
from fidia_jax.projects.residual_geometry import checkpoint as ckpt
from fidia_jax.projects.residual_geometry import geometry


class _Chars:
    bos_id = 0

    def encode(self, text, *, add_bos=None):
        return ([0] if add_bos else []) + [ord(c) for c in text]


def test_text_sequences_are_questions_with_their_sums():
    seqs = ckpt.text_sequences(_Chars(), 4, 60, seed=2)
    assert seqs.shape == (4, 60) and np.all(seqs[:, 0] == 0)
    text = "".join(chr(c) for c in seqs[0, 1:])
    for line in text.split("\n")[:-1]:  # the last line may be cut
        a, rest = line.removeprefix("Q: ").split(" + ")
        b, ans = rest.split(" = ? A: ")
        assert int(a) + int(b) == int(ans)
    with pytest.raises(ValueError, match="n >= 4"):
        ckpt.text_sequences(_Chars(), 2, 60)


@pytest.mark.integration
def test_checkpoint_path_end_to_end(tmp_path, tiny_gemma3_checkpoint):
    path = tiny_gemma3_checkpoint
    cfg = rg.get_config(
        "tiny", checkpoint=str(path), checkpoint_sequences=6, checkpoint_tokens=48,
        checkpoint_batch=4, checkpoint_max_seq_len=64,
    )  # fmt: skip
    res = rg.train_and_evaluate(cfg, tmp_path / "run")
    g = res["geometry"]
    assert set(g) == {"attention", "ffn", "noise"}
    for row in g.values():
        assert all(len(v) == 3 for v in row.values())  # the tiny checkpoint's 3 layers
        assert all(0.0 <= d <= np.sqrt(2.0) + 1e-9 for d in row["delta_d"])  # the authors' ΔD
        # RID = |ΔS| + ΔD per sequence, so its mean >= |mean ΔS| + mean ΔD
        assert all(
            r >= abs(s) + d - 1e-9
            for r, s, d in zip(row["rid"], row["delta_s"], row["delta_d"], strict=True)
        )
    assert all("tme" in row for row in g.values())  # the authors' TME: every update
    assert "tme_attention" in g["attention"] and "tme_attention" not in g["ffn"]
    assert len(res["wilcoxon"]) == 3 and all(0 <= w["p"] <= 1 for w in res["wilcoxon"])
    # the same numbers from the primitives on a capture made here (BOS left out)
    model, tok = models.load_lm_checkpoint(path, max_seq_len=64)
    seqs = ckpt.text_sequences(tok, 6, 48, seed=cfg.seed)
    _, cap = model.inspect(seqs, capture=("resid_pre", "resid_mid", "ffn_out"))
    names = ("resid_pre", "resid_mid", "ffn_out")
    pre, mid, ffn = (np.asarray(cap[k][2], np.float32)[:, 1:] for k in names)
    ffn = ffn.astype(np.float64)
    # RID of the FFN: |ΔS(resid_mid, ffn_out)| + the authors' ΔD of X_ffn against resid_pre
    want = np.mean(
        [
            abs(geometry.spectral_change(mid[b], ffn[b]))
            + geometry.subspace_innovation(pre[b], mid[b] + ffn[b] - pre[b])
            for b in range(6)
        ]
    )
    assert g["ffn"]["rid"][2] == pytest.approx(want, rel=1e-4)
    # the per-sequence RIDs the layer's mean and its paired test come from
    assert len(g["ffn"]["rid_per_sequence"][2]) == 6
    assert np.mean(g["ffn"]["rid_per_sequence"][2]) == pytest.approx(g["ffn"]["rid"][2])
    saved = json.loads((tmp_path / "run" / "residual_geometry_checkpoint.json").read_text())
    assert saved["geometry"]["ffn"]["rid"][2] == g["ffn"]["rid"][2]


def test_checkpoint_bad_input(tmp_path):
    cfg = rg.get_config("tiny", checkpoint=str(tmp_path / "missing_dir"))
    with pytest.raises(CheckpointError, match="does not exist"):
        rg.train_and_evaluate(cfg, tmp_path / "run")
    with pytest.raises(ConfigError, match="must not exceed checkpoint_max_seq_len"):
        rg.get_config("tiny", checkpoint="x", checkpoint_tokens=300, checkpoint_max_seq_len=256)


def test_erank_falls_back_to_numpy_when_the_svd_gives_no_spectrum(monkeypatch):
    """A non-zero matrix read as eRank 0 (jax's SVD returning non-finite singular values) is
    recomputed with numpy's SVD: diag(s) has the closed form exp(H(s / sum s))."""
    s = np.array([4.0, 2.0, 1.0, 1.0])
    x = np.zeros((5, 6))
    x[np.arange(4), np.arange(4)] = s
    p = s / s.sum()
    want = float(np.exp(-np.sum(p * np.log(p))))
    assert geometry.erank(x) == pytest.approx(want, rel=1e-12)
    monkeypatch.setattr(geometry, "effective_rank", lambda a: np.float64(0.0))
    assert geometry.erank(x) == pytest.approx(want, rel=1e-12)
    assert geometry.erank(np.zeros((3, 3))) == 0.0  # the zero matrix stays 0
