"""Planted leak (issue 41): the TD driver picks its step sizes on MRPs it does not report.

:func:`~fidia_jax.projects.td.compare_schedules` chooses, per horizon and omega-free schedule,
the initial step size ``eta_0`` of ``eta_grid`` with the lowest mean error (the one fitted
number). With ``tuning="separate"`` (the default) it is chosen on tuning MRPs and transitions
(their own streams of the seed, ``train.STREAMS``) and only then run on the reported ones. The test plants reported MRPs that punish the large step (their features
doubled, so ``eta_0 = 1`` diverges on them and ``0.3`` wins) by replacing the reported
problem only (the hook is ``train._problem(config, tuning=False)``): the chosen ``eta_0`` and
the tuning errors of every grid point are identical (exactly: the same numbers computed on the
same tuning MRPs), while the reported errors move (they are measured on the planted MRPs). With
``tuning="same"`` (the old protocol, the leak) the choice is made on the reported MRPs and the
same plant flips it (``1.0`` on the clean reported MRPs, ``0.3`` on the planted ones), so the
test can fail: a driver that tuned on the reported MRPs would fail the first test.
"""

import dataclasses

import jax
import jax.numpy as jnp
import pytest

from fidia_jax import rl
from fidia_jax.projects import td
from fidia_jax.projects.td import train as td_train


def _config(tuning):
    return dataclasses.replace(
        td.get_config("tiny"), schedules=("exponential",), horizons=(300,), tuning=tuning
    )


def _plant(monkeypatch):
    """Replaces the reported MRPs (only) by fast learners: features x 2 (eta_0 = 1 diverges)."""
    original = td_train._problem

    def problem(config, *, tuning=False):
        if tuning:  # the tuning MRPs (asked for with tuning="separate" only): untouched
            return original(config, tuning=True)
        p = original(config)
        mrps = p.mrps._replace(features=2.0 * p.mrps.features)
        theta_star = jax.vmap(rl.td_fixed_point)(mrps)
        norm_star = jax.vmap(lambda m, t: rl.td_param_error(m, t, jnp.zeros_like(t)))(
            mrps, theta_star
        )
        omega = jax.vmap(td_train.smallest_eig)(mrps)
        return td_train._Problem(mrps, theta_star, omega, norm_star, p.run_keys)

    monkeypatch.setattr(td_train, "_problem", problem)


def _cell(results):
    return results["rows"]["300"][td_train.EXPONENTIAL]


@pytest.mark.integration  # two compare_schedules runs (jit compiles, ~10-30 s on 2 cores)
def test_planted_reported_mrps_move_no_chosen_step_size(monkeypatch):
    config = _config("separate")
    clean = _cell(td_train.compare_schedules(config))
    _plant(monkeypatch)
    planted = _cell(td_train.compare_schedules(config))
    assert planted["best_eta0"] == clean["best_eta0"] == 0.3
    assert planted["grid"] == clean["grid"]  # the tuning errors: exactly the same numbers
    # the reported errors do read the planted MRPs
    assert all(planted["grid_reported"][e] != clean["grid_reported"][e] for e in config.eta_grid)
    assert planted["grid_reported"][1.0] > 1e3 * clean["grid_reported"][1.0]  # eta_0 = 1 diverges
    assert planted["error"] == planted["grid_reported"][0.3]


@pytest.mark.integration  # two compare_schedules runs (jit compiles, ~7-15 s on 2 cores)
def test_tuning_on_the_reported_mrps_would_move_the_choice(monkeypatch):
    config = _config("same")
    clean = _cell(td_train.compare_schedules(config))
    _plant(monkeypatch)
    planted = _cell(td_train.compare_schedules(config))
    assert (clean["best_eta0"], planted["best_eta0"]) == (1.0, 0.3)
    assert planted["grid"] == planted["grid_reported"]  # chosen on what it reports
    assert planted["error"] == min(planted["grid_reported"].values())


def test_no_stream_of_one_seed_is_a_stream_of_another():
    """The MRPs and transition keys of seeds 0-3, reported and tuning, are 16 different draws
    (with ``key(seed + k)`` offsets the tuning MRPs of seed 0 were the reported MRPs of seed 2,
    so pooled seeds tuned on each other's reported MRPs)."""
    base = dataclasses.replace(td.get_config("tiny"), num_mrps=2)
    draws = []
    for seed in range(4):
        config = dataclasses.replace(base, seed=seed)
        for tuning in (False, True):
            p = td_train._problem(config, tuning=tuning)
            draws.append(("mrps", seed, tuning, p.mrps.transition))
            draws.append(("keys", seed, tuning, jax.random.key_data(p.run_keys)))
    for i, (kind_a, *who_a, a) in enumerate(draws):
        for kind_b, *who_b, b in draws[i + 1 :]:
            if kind_a == kind_b:
                assert not jnp.array_equal(a, b), (kind_a, who_a, who_b)
