"""Evaluation metrics against brute force over subsets and hand counts."""

import itertools

import numpy as np
import pytest

from fidia_jax.projects import fidia


@pytest.mark.parametrize("n_bon", [1, 2, 4])
def test_success_at_n_is_mean_over_subsets_of_pick_passing(n_bon):
    rng = np.random.default_rng(0)
    rewards = rng.normal(size=6).round(1)
    passes = rng.random(6) > 0.5
    subsets = list(itertools.combinations(range(6), n_bon))
    # the pick of a subset is its highest reward (ties: the later one in stable ascending order)
    order = np.argsort(rewards, kind="stable")
    rank = np.empty(6, int)
    rank[order] = np.arange(6)
    brute = np.mean([passes[max(s, key=lambda i: rank[i])] for s in subsets])
    assert fidia.success_at_n(rewards, passes, n_bon) == pytest.approx(brute)


def test_success_at_n_drops_non_finite_rewards():
    """A NaN reward is a missing sample, not the best one (numpy sorts NaN last)."""
    rewards = np.array([0.1, np.nan, 0.3, 0.2, np.inf])
    passes = np.array([True, True, False, True, True])
    keep = np.isfinite(rewards)
    assert fidia.success_at_n(rewards, passes, 2) == pytest.approx(
        fidia.success_at_n(rewards[keep], passes[keep], 2)
    )
    # the finite-only value by hand: pairs of {0.1 P, 0.3 F, 0.2 P}: picks 0.3, 0.2, 0.3 -> 1/3
    assert fidia.success_at_n(rewards, passes, 2) == pytest.approx(1 / 3)
    assert np.isnan(fidia.success_at_n(rewards, passes, 4))


def test_backbone_metrics_by_hand():
    seqs = np.array([[0, 1, 2, 3], [0, 1, 2, 4], [0, 5, 2, 4]])
    native = np.array([0, 1, 2, 3])
    fixed = np.array([True, False, False, False])
    designed = ~fixed
    rewards = np.array([1.0, 3.0, 2.0])
    passes = np.array([True, False, True])
    m = fidia.backbone_metrics(rewards, passes, seqs, native, designed, fixed, ns=(1, 3), bon_n=2)
    assert m["max@1"] == pytest.approx(2.0)
    assert m["max@3"] == pytest.approx(3.0)
    # pairs {0,1}->1 fails, {0,2}->2 passes, {1,2}->1 fails
    assert m["success"] == pytest.approx(1 / 3)
    assert m["precision"] == pytest.approx(2 / 3)
    # identities over designed positions: (0,1) 2/3, (0,2) 1/3, (1,2) 2/3
    assert m["identity"] == pytest.approx(5 / 9)
    assert m["unique"] == pytest.approx(1.0)
    assert m["recovery"] == pytest.approx((3 + 2 + 1) / 9)
    assert m["motif"] == 1.0
    s = fidia.summarise([m, dict(m, precision=0.0)])
    assert s["precision"] == pytest.approx(1 / 3)


def test_training_reward_metrics_count_the_missing_rewards():
    """Issue 42: non-finite rewards (excluded from the advantages) are counted per step and
    left out of the means, never turning them NaN; a clean step counts 0."""
    from fidia_jax.projects.fidia.train import headline, reward_metrics

    rewards = np.array([[1.0, np.nan, 3.0, 2.0], [np.inf, np.nan, np.nan, 0.5]], np.float32)
    got = reward_metrics(rewards, 2)
    assert got["rewards_missing"] == 4 and got["rewards_total"] == 8
    assert got["reward_mean"] == pytest.approx((1 + 3 + 2 + 0.5) / 4)
    assert got["reward_max"] == pytest.approx((3 + 0.5) / 2)
    # max@2 over the first row's 3 finite rewards (the second has one): E[max of 2 of {1,2,3}]
    assert got["max@2"] == pytest.approx((2 + 3 + 3) / 3)
    clean = reward_metrics(np.array([[1.0, 2.0]]), 2)
    assert clean["rewards_missing"] == 0 and clean["reward_mean"] == 1.5
    empty = reward_metrics(np.full((2, 3), np.nan), 2)
    assert empty["rewards_missing"] == 6 and np.isnan(empty["reward_mean"])
    assert np.isnan(empty["max@2"]) and np.isnan(empty["reward_max"])
    cfg = fidia.get_config("tiny")
    summary = headline(cfg, None, {"per_backbone": [], "summary": {}}, [got, clean])
    assert summary["training_rewards_missing"] == 4 and summary["training_rewards_total"] == 10
