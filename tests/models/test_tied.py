"""ProteinMPNN tied positions: one draw per group from the mean of the members' logits.

Structure: the 6E6R chain A fixture (56 slots, one designed chain). Compiles: the untied
sampler, the tied sampler at N = 8 and N = 64, and the teacher-forced forward at (1, 56).
"""

from __future__ import annotations

import jax
import numpy as np
import pytest

from fidia_jax.errors import ConfigError
from fidia_jax.models import MPNNInputs, ProteinMPNN, log_probs, sample, score
from fidia_jax.models.proteinmpnn._tied import (
    group_decoding_order,
    homo_oligomer_groups,
    tied_group_ids,
    tied_groups_from_spec,
)

GROUPS = [[3, 30], [10, 41, 52]]


@pytest.fixture(scope="module")
def fx(fixtures_dir):
    path = fixtures_dir / "proteinmpnn" / "mpnn_v48_020_6E6R_A.npz"
    if not path.is_file():
        pytest.skip(f"{path} missing")
    return dict(np.load(path))


@pytest.fixture(scope="module")
def inputs(fx):
    return MPNNInputs(X=fx["X"], S=fx["S"], mask=fx["mask"], chain_mask=fx["chain_mask"],
                      residue_idx=fx["residue_idx"], chain_encoding=fx["chain_encoding"])  # fmt: skip


@pytest.fixture(scope="module")
def model():
    return ProteinMPNN.from_checkpoint("v_48_020", variant="vanilla")


@pytest.fixture(scope="module")
def tied_run(model, inputs):
    ids = np.full(56, -1, np.int32)
    for g, members in enumerate(GROUPS):
        ids[members] = 7 + g  # any non-negative ids
    a = sample(model, jax.random.key(3), inputs, num_samples=8, temperature=1.0, tied=GROUPS)
    b = sample(model, jax.random.key(3), inputs, num_samples=8, temperature=1.0, tied=ids)
    return jax.tree.map(np.asarray, a), jax.tree.map(np.asarray, b)


def test_tied_slots_carry_one_residue_and_decode_consecutively(tied_run):
    a, b = tied_run
    for field in a._fields:  # the id-array and list forms are the same tying
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
    for members in GROUPS:
        seq = a.sequences[:, members]
        assert (seq == seq[:, :1]).all(), seq
        for o in a.decoding_order:
            steps = np.sort(np.flatnonzero(np.isin(o, members)))
            assert steps[-1] - steps[0] == len(members) - 1  # consecutive
            np.testing.assert_array_equal(o[steps], sorted(members))  # ascending slot order
    # the 8 samples are not all the same (T = 1): the test above is not vacuous
    assert len({tuple(s) for s in a.sequences}) > 1


def test_group_of_one_equals_untied_bitwise(model, inputs):
    kw = dict(num_samples=4, temperature=0.3, omit_aas="CX")
    free = jax.tree.map(np.asarray, sample(model, jax.random.key(5), inputs, **kw))
    tied = jax.tree.map(np.asarray, sample(model, jax.random.key(5), inputs, tied=[[17]], **kw))
    for field in free._fields:
        np.testing.assert_array_equal(getattr(tied, field), getattr(free, field), err_msg=field)


def test_score_tied_is_log_softmax_of_mean_member_log_probs(model, inputs, tied_run):
    """score(tied) on the sampler's sequences and orders: the group distribution in the sampler's contexts."""
    a, _ = tied_run
    res = score(model, inputs, a.sequences, a.decoding_order, tied=GROUPS)
    np.testing.assert_array_equal(np.asarray(res.decoding_order), a.decoding_order)
    for members in GROUPS:
        mean = a.log_probs[:, members].mean(1)  # sampler's per-member log-softmax, same context
        want = jax.nn.log_softmax(mean, -1)
        for m in members:
            np.testing.assert_allclose(np.asarray(res.log_probs)[:, m], want, atol=2e-4)
    untied = np.setdiff1d(np.arange(56), sum(GROUPS, []))
    np.testing.assert_allclose(
        np.asarray(res.log_probs)[:, untied], a.log_probs[:, untied], atol=2e-4
    )


def test_draw_is_from_softmax_of_averaged_teacher_forced_logits(model, inputs, fx):
    """Everything fixed except one tied pair: the draw replays categorical(mean of the members' log-probs).

    Each member's log-probs come from the teacher-forced forward with an order in which that
    member comes right after all fixed slots (the other member after it): the sampler's context.
    Averaging log-softmaxes equals averaging logits up to a per-row constant, which the
    categorical draw ignores; the sampler's token key is ``fold_in(split(key)[1], step)``.
    """
    a_, b_ = 20, 45
    fixed = np.ones(56, bool)
    fixed[[a_, b_]] = False
    n = 64
    key = jax.random.key(11)
    res = jax.tree.map(
        np.asarray,
        sample(
            model, key, inputs, num_samples=n, temperature=1.0, fixed_mask=fixed, tied=[[a_, b_]]
        ),
    )
    rest = [p for p in range(56) if p not in (a_, b_)]
    order = res.decoding_order
    assert (order[:, -2:] == [a_, b_]).all()  # the designed group last, in slot order
    batch = jax.tree.map(lambda x: np.broadcast_to(np.asarray(x), (n, *np.shape(x))), inputs)
    lp_a = np.asarray(log_probs(model, batch, order))[:, a_]  # a_ right after the fixed slots
    swapped = order.copy()
    swapped[:, -2:] = [b_, a_]
    lp_b = np.asarray(log_probs(model, batch, swapped))[:, b_]  # b_ right after the fixed slots
    # the sampler's own per-member log-probs are those contexts
    np.testing.assert_allclose(res.log_probs[:, a_], lp_a, atol=2e-4)
    np.testing.assert_allclose(res.log_probs[:, b_], lp_b, atol=2e-4)
    mean = (lp_a + lp_b) / 2
    k_tok = jax.random.split(key)[1]
    draw = lambda z: np.asarray(jax.random.categorical(jax.random.fold_in(k_tok, 55), z, axis=-1))  # noqa: E731
    replay = draw(mean)
    np.testing.assert_array_equal(res.sequences[:, a_], replay)
    np.testing.assert_array_equal(res.sequences[:, b_], replay)
    # the replay is sharp: drawing from either member alone gives other tokens
    assert (draw(lp_a) != replay).any() and (draw(lp_b) != replay).any()
    # and the empirical frequencies follow softmax(mean) (64 draws: loose)
    p = np.exp(mean - np.logaddexp.reduce(mean, axis=-1, keepdims=True)).mean(0)
    freq = np.bincount(res.sequences[:, a_], minlength=21) / n
    assert np.abs(freq - p).max() < 0.2
    np.testing.assert_array_equal(res.sequences[:, rest], np.broadcast_to(fx["S"][rest], (n, 54)))


def test_group_decoding_order_places_group_at_first_member():
    order = np.array([[4, 0, 2, 1, 3, 5]], np.int32)
    gid = tied_group_ids([[1, 4], [5, 0]], 6)
    got = np.asarray(group_decoding_order(order, gid))
    np.testing.assert_array_equal(got, [[1, 4, 0, 5, 2, 3]])
    singles = tied_group_ids([[2]], 6)
    np.testing.assert_array_equal(np.asarray(group_decoding_order(order, singles)), order)


@pytest.mark.parametrize(
    "tied, match",
    [([[0, 6]], "outside"), ([[0, 1], [1, 2]], "more than one"), ([[0, 0]], "more than one"), ([[]], "empty"),
     (np.array([0, -2, 0, 1, 1, -1]), ">= -1")],
)  # fmt: skip
def test_bad_tied_raises(tied, match):
    with pytest.raises(ValueError, match=match):
        tied_group_ids(tied, 6)


def test_mixed_designed_and_fixed_group_raises(model, inputs):
    fixed = np.zeros(56, bool)
    fixed[3] = True
    with pytest.raises(ValueError, match="mixes designed"):
        sample(model, jax.random.key(0), inputs, num_samples=2, fixed_mask=fixed, tied=[[3, 30]])


def _dimer(fx, S_b=None, drop_b=0):
    from fidia_jax.protein import Protein

    n = 56 - drop_b
    cat = lambda a, b: np.concatenate([a, b[:n]])  # noqa: E731
    S_b = fx["S"] if S_b is None else S_b
    L = 56 + n
    return Protein(X=cat(fx["X"], fx["X"] + 30.0), mask=cat(fx["mask"], fx["mask"]), S=cat(fx["S"], S_b),
                   residue_idx=cat(fx["residue_idx"], fx["residue_idx"] + 100), chain_encoding=np.repeat([1, 2], [56, n]).astype(np.int32),
                   chain_id=np.repeat(np.array(["A", "B"]), [56, n]), resnum=np.concatenate([np.arange(1, 57), np.arange(1, n + 1)]).astype(np.int32),
                   icode=np.full(L, "", object), chain_order=("A", "B"), source="dimer")  # fmt: skip


def test_homo_oligomer_groups_and_errors(fx):
    groups = homo_oligomer_groups(_dimer(fx))
    assert groups == [[i, 56 + i] for i in range(56)]
    with pytest.raises(ConfigError, match=r"unequal lengths \{'A': 56, 'B': 50\}"):
        homo_oligomer_groups(_dimer(fx, drop_b=6))
    S_b = fx["S"].copy()
    S_b[7] = (S_b[7] + 1) % 20
    with pytest.raises(
        ConfigError, match="different native sequences: B differs from A first at slot 7"
    ):
        homo_oligomer_groups(_dimer(fx, S_b=S_b))


def test_tie_spec_pairs_one_to_one(fx):
    prot = _dimer(fx)
    assert tied_groups_from_spec("A1-3:B4-6", prot) == [[0, 59], [1, 60], [2, 61]]
    assert tied_groups_from_spec(["A1-2:B1-2", "A10:B10"], prot) == [[0, 56], [1, 57], [9, 65]]
    with pytest.raises(ConfigError, match=r"A1-10 -> 10, B1-9 -> 9"):
        tied_groups_from_spec("A1-10:B1-9", prot)
    with pytest.raises(ConfigError, match="two or more"):
        tied_groups_from_spec("A1-10", prot)
