"""The third-party note's forms of RID, TME and MixIG (geometry.note_*, similarity_*) on
constructed matrices: closed forms, a brute force through pseudo-inverses, bounds, errors."""

import numpy as np
import pytest

from fidia_jax.projects.residual_geometry import geometry


def test_no_update_or_a_rescaling_gives_rid_zero():
    q, _ = np.linalg.qr(np.random.default_rng(0).normal(size=(5, 5)))
    x = q[:, :3].T  # (3, 5) orthonormal rows: eRank 3
    for dx in (np.zeros_like(x), 2.0 * x):  # X' = X, X' = 3X: same spectrum shape, same spans
        r = geometry.note_residual_information_dynamics(x, dx)
        assert r["delta_s"] == pytest.approx(0.0, abs=1e-12)
        assert r["delta_d"] == pytest.approx(0.0, abs=1e-12)
        assert r["rid"] == pytest.approx(0.0, abs=1e-12) and r["rank"] == 3.0


def test_new_residual_outside_both_subspaces_has_delta_d_one():
    e = np.eye(4)
    x = np.outer(e[0], e[0])  # column and row subspaces span(e1)
    xn = np.outer(e[1], e[2])  # orthogonal to both
    r = geometry.note_residual_information_dynamics(x, xn - x)
    assert r["delta_d"] == pytest.approx(1.0, abs=1e-12)
    assert r["delta_s"] == pytest.approx(0.0, abs=1e-12)  # both rank one: eRank 1 -> 1
    assert r["rid"] == pytest.approx(1.0, abs=1e-12)


def test_delta_s_and_delta_d_closed_form_rank_one_to_identity():
    x = np.diag([1.0, 0.0, 0.0, 0.0])  # eRank 1, r = 1
    r = geometry.note_residual_information_dynamics(x, np.eye(4) - x)  # X' = I: eRank 4
    assert r["delta_s"] == pytest.approx(3.0 / 4.0, abs=1e-12)  # |4 - 1| / min(4, 4)
    # (||diag(0,1,1,1)|| + ||diag(0,1,1,1)||) / (2 ||I||) = 2 sqrt(3) / 4
    assert r["delta_d"] == pytest.approx(np.sqrt(3.0) / 2.0, abs=1e-12)
    assert r["rid"] == pytest.approx(0.75 + np.sqrt(3.0) / 2.0, abs=1e-12)


def test_brute_force_with_pseudo_inverse_projectors():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(7, 5)) @ np.diag([3.0, 2.0, 1.0, 0.0, 0.0]) @ rng.normal(size=(5, 9))
    dx = rng.normal(size=(7, 9))
    xn = x + dx
    pinv = np.linalg.pinv(x, rcond=1e-8)  # full numerical rank 3 of x
    pc, pr = x @ pinv, pinv @ x
    s0 = np.linalg.svd(x, compute_uv=False)
    s1 = np.linalg.svd(xn, compute_uv=False)

    def er(s):
        p = s[s > 1e-12] / s.sum()
        return np.exp(-np.sum(p * np.log(p)))

    want_s = abs(er(s1) - er(s0)) / 7
    want_d = (np.linalg.norm((np.eye(7) - pc) @ xn) + np.linalg.norm(xn @ (np.eye(9) - pr))) / (
        2 * np.linalg.norm(xn)
    )
    r = geometry.note_residual_information_dynamics(x, dx, rtol=1e-8)
    assert r["rank"] == 3.0
    assert r["delta_s"] == pytest.approx(want_s, rel=1e-9)
    assert r["delta_d"] == pytest.approx(want_d, rel=1e-9)
    assert 0.0 <= r["rid"] <= 2.0
    # the reconstruction is a different quantity on the same pair (share of the update's energy)
    assert geometry.residual_information_dynamics(x, dx, rtol=1e-8)["rid"] != pytest.approx(
        r["rid"], rel=1e-3
    )


def test_note_rid_is_invariant_to_a_joint_token_permutation():
    rng = np.random.default_rng(4)
    x, dx = rng.normal(size=(6, 8)), rng.normal(size=(6, 8))
    perm = rng.permutation(6)
    a = geometry.note_residual_information_dynamics(x, dx, rank=3)
    b = geometry.note_residual_information_dynamics(x[perm], dx[perm], rank=3)
    assert a["rid"] == pytest.approx(b["rid"], rel=1e-10)


def test_similarity_mixing_entropy_closed_forms():
    s = 5
    same = np.tile(np.array([[1.0, -2.0, 0.5]]), (s, 1))
    assert geometry.similarity_mixing_entropy(same) == pytest.approx(np.log(s), abs=1e-12)
    assert geometry.similarity_mixing_entropy(same, normalize=True) == pytest.approx(1.0)
    ortho = 3.0 * np.eye(s, 7)  # orthogonal rows: P_tt = 2/(S+1), P_tj = 1/(S+1)
    want = np.log(s + 1) - 2.0 * np.log(2.0) / (s + 1)
    assert geometry.similarity_mixing_entropy(ortho) == pytest.approx(want, abs=1e-12)
    opposite = np.array([[1.0, 2.0], [-2.0, -4.0]])  # cosine -1: P = I
    assert geometry.similarity_mixing_entropy(opposite) == pytest.approx(0.0, abs=1e-12)


def test_similarity_mixing_gain_is_the_difference_and_signs():
    s = 4
    ortho = np.eye(s, 6)
    same = np.tile(np.eye(1, 6), (s, 1))
    # from orthogonal tokens to identical ones: the mixing becomes uniform (gain > 0)
    g = geometry.similarity_mixing_gain(ortho, same - ortho)
    assert g == pytest.approx(np.log(s) - (np.log(s + 1) - 2 * np.log(2) / (s + 1)), abs=1e-12)
    assert g > 0
    assert geometry.similarity_mixing_gain(same, ortho - same) == pytest.approx(-g, abs=1e-12)


def test_note_forms_bad_input():
    with pytest.raises(ValueError, match="same shape"):
        geometry.note_residual_information_dynamics(np.ones((3, 4)), np.ones((4, 3)))
    with pytest.raises(ValueError, match="non-zero"):
        geometry.note_residual_information_dynamics(np.eye(3), -np.eye(3))
    with pytest.raises(ValueError, match="rank must be"):
        geometry.note_residual_information_dynamics(np.eye(3), np.eye(3), rank=4)
    with pytest.raises(ValueError, match="all-zero row"):
        geometry.similarity_mixing_entropy(np.array([[1.0, 0.0], [0.0, 0.0]]))
    with pytest.raises(ValueError, match="at least 2 tokens"):
        geometry.similarity_mixing_entropy(np.ones((1, 3)))
    with pytest.raises(ValueError, match="non-finite"):
        geometry.similarity_mixing_gain(np.ones((2, 2)), np.array([[np.nan, 0], [0, 0]]))
