"""Held-out judges of the FIDIA benchmark: which ProteinMPNN checkpoints a run never saw, and
Frame2seq behind the ProteinMPNN judge's interface (against a direct Frame2seq call)."""

import dataclasses

import numpy as np
import pytest

from fidia_jax import models, protein
from fidia_jax.errors import ConfigError
from fidia_jax.projects import fidia


def test_heldout_checkpoints_leave_out_reward_judges_and_policy_start():
    small = fidia.get_config("small")  # judge vanilla/002 + soluble/020, policy vanilla/020
    assert fidia.heldout_judge_checkpoints(small) == (
        ("v_48_010", "vanilla"),
        ("v_48_030", "vanilla"),
        ("v_48_002", "soluble"),
        ("v_48_010", "soluble"),
        ("v_48_030", "soluble"),
    )
    default = fidia.get_config("default")  # judge vanilla/002,010,030 + soluble/020
    assert fidia.heldout_judge_checkpoints(default) == (
        ("v_48_002", "soluble"),
        ("v_48_010", "soluble"),
        ("v_48_030", "soluble"),
    )
    every = tuple(
        f"{v}/{n}" for n, v in fidia.MPNN_CHECKPOINTS if (n, v) != ("v_48_020", "vanilla")
    )
    greedy = fidia.override_config(small, [f"reward.judge={list(every)!r}".replace("'", '"')])
    with pytest.raises(ConfigError, match="no held-out judge"):
        fidia.heldout_judge_checkpoints(greedy)


@pytest.fixture(scope="module")
def frame2seq_judge():
    try:
        model = models.load_frame2seq(1)
    except Exception as exc:  # the wheel is installed by `make`; skip cleanly without it
        pytest.skip(f"frame2seq weights unavailable: {exc}")
    return fidia.Frame2seqJudge([model])


def _direct(judge, X, mask, tokens, seqs):
    lp = np.asarray(models.frame2seq_log_probs(judge.models, X[None], mask[None], tokens[None]))[0]
    return np.take_along_axis(lp[None], seqs[..., None], -1)[..., 0]


@pytest.mark.integration  # three Frame2seq compilations (~40 s); make test-integration, CI
def test_frame2seq_judge_equals_a_direct_frame2seq_call(frame2seq_judge):
    prot = protein.load_structure(protein.default_backbone_path())
    L = prot.length
    native = np.asarray(prot.S)
    score = np.zeros(L, bool)
    score[5:40] = True
    rng = np.random.default_rng(0)
    seqs = np.stack([native] + [np.where(score, rng.integers(0, 20, L), native) for _ in range(3)])
    got = frame2seq_judge.token_log_likelihood(prot, seqs, score)
    # brute force: the scored positions masked (token 20), the others native, one call
    want = _direct(
        frame2seq_judge,
        np.asarray(prot.X, np.float32),
        np.asarray(prot.mask) > 0,
        np.where(score, 20, native).astype(np.int32),
        seqs,
    )
    np.testing.assert_allclose(got, want, atol=5e-3)  # float32 kernels of jit vs eager (docs)
    mean = frame2seq_judge.log_likelihood(prot, seqs, score)
    np.testing.assert_allclose(mean, (got * score).sum(-1) / score.sum(), rtol=1e-6)
    assert mean[0] > mean[1:].max() + 3.0  # the native is far likelier than random sequences
    with pytest.raises(ValueError, match="no X"):
        frame2seq_judge.token_log_likelihood(prot, np.full((1, L), 20), score)

    # two chains: a masked spacer slot separates them (no dihedral across the break)
    two = dataclasses.replace(
        prot, chain_encoding=np.where(np.arange(L) < 30, 1, 2).astype(np.int32)
    )
    got2 = frame2seq_judge.token_log_likelihood(two, seqs, score)
    Xs = np.insert(np.asarray(prot.X, np.float32), 30, 0.0, axis=0)
    ms = np.insert(np.asarray(prot.mask) > 0, 30, False)
    ts = np.insert(np.where(score, 20, native), 30, 20).astype(np.int32)
    want2 = np.delete(
        _direct(frame2seq_judge, Xs, ms, ts, np.insert(seqs, 30, 0, axis=1)), 30, axis=1
    )
    np.testing.assert_allclose(got2, want2, atol=5e-3)
    assert np.abs(got2 - got).max() > 1e-2  # the break is seen
