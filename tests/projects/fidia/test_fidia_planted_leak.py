"""Planted leak (issue 41): FIDIA's training side is fitted on training backbones only.

What FIDIA fits from data:

* the **split** (:func:`fidia_jax.protein.assign_splits`): a protein group is held out when it
  comes from a benchmark source or when a seeded hash of its own name falls below
  ``heldout_fraction``, so a training task's side is a function of that task alone;
* the **reward calibration** (:meth:`~fidia_jax.projects.fidia.Trainer.calibrate`,
  :func:`~fidia_jax.projects.fidia._tasks_bridge.fit_reward`,
  :func:`~fidia_jax.projects.fidia.fit_standardizer`): per backbone, the z-score mean / std of
  each reward component from samples of the frozen reference *on that backbone*; the training
  and the held-out backbones are calibrated in separate calls (salts 0 and 1), each backbone's
  samples drawn with a key of (seed, salt, chunk start, row) only. A held-out backbone's own
  standardiser is part of its reward (reference samples, no policy and no label), and no
  training number reads it;
* the **training step** (rollout, rewards, advantages, update) reads the training backbones
  only (:func:`~fidia_jax.projects.fidia._step.schedule`). The judge ensemble is frozen
  (``reward.judge=[]`` here: the judge-free components, no weights to load).

Planted: the held-out backbones are replaced (other motifs and their coordinates stretched by
40 %, which moves their SSE and burial features, so their own standardisers move) and, for the
split, benchmark tasks are added and the held-out tasks' coordinates changed. Asserted: the
training standardisers, the first step's rewards, reward metrics and advantages, and the training
side of the split are exactly equal. Controls, so the tests can fail: changing one training
backbone moves its standardiser and the step's numbers, and a standardiser pooled over the
training + held-out reference samples (the leak, rebuilt) or a split that fills a fixed held-out
quota over all groups (benchmark groups first) moves them with the held-out plant.

The fast tests stand in a seeded uniform sampler for the reference's rollout (one independent key
per backbone, as :func:`~fidia_jax.projects.fidia._step.rollout` folds them in); the integration
test runs the real :class:`~fidia_jax.projects.fidia.Trainer` (its ``__init__`` calibration and one
step, with a small random ProteinMPNN; about a minute of compilation on CPU).
"""

import dataclasses
import types

import jax
import numpy as np
import pytest

from fidia_jax import protein
from fidia_jax.projects import fidia
from fidia_jax.projects.fidia._step import schedule, update_batch
from fidia_jax.projects.fidia._tasks_bridge import unfitted_backbone
from fidia_jax.projects.fidia.train import reward_metrics

TRAIN_MOTIFS = (("A5-7", "tr0"), ("A20-22", "tr1"))
HELD_MOTIFS = (("A35-37", "ho0"), ("A48-50", "ho1"))
PLANTED_MOTIFS = (("A40-42", "ho0"), ("A50-52", "ho1"))


def _config():
    return fidia.override_config(
        fidia.get_config("tiny"),
        ["data.batch_backbones=2", "reward.judge=[]", "reward.calibration_samples=8"],
    )


def _task(fixed, name, stretch=1.0):
    task = protein.task_from_structure(protein.default_backbone_path(), fixed=fixed, name=name)
    p = task.protein
    X = np.asarray(p.X)
    centre = X[:, 1].mean(0)
    X = (centre + stretch * (X - centre)).astype(X.dtype)
    return dataclasses.replace(task, protein=dataclasses.replace(p, X=X))


def _backbones(config, motifs, stretch=1.0):
    return [unfitted_backbone(_task(f, n, stretch), config) for f, n in motifs]


def _stub_trainer(config):
    """What :meth:`Trainer.calibrate` reads, with a seeded uniform sampler as the rollout."""

    def rollout(params, backbones, key, num_samples):
        out = np.full((len(backbones), num_samples, config.data.max_length), 20, np.int32)
        for j, bb in enumerate(backbones):
            rng = np.random.default_rng(np.asarray(jax.random.fold_in(key, j)))
            s = rng.integers(0, 20, (num_samples, bb.length))
            out[j, :, : bb.length] = np.where(bb.fixed, bb.native, s)
        return None, types.SimpleNamespace(sequences=out)

    return types.SimpleNamespace(config=config, ref_params=None, rollout=rollout)


def _step_numbers(stub, fitted):
    """Rewards, reward metrics and advantages of training step 0 (host side of Trainer.step)."""
    cfg = stub.config
    idx = schedule(0, len(fitted), cfg.data.batch_backbones, cfg.seed)
    chosen = [fitted[i] for i in idx]
    _, res = stub.rollout(None, chosen, jax.random.PRNGKey(cfg.seed), cfg.train.n_samples)
    rewards, passes = fidia.Trainer.rewards(chosen, res.sequences)
    zeros = np.zeros(res.sequences.shape, np.float32)
    adv = update_batch(cfg, rewards, res.sequences, res.sequences, zeros, zeros)["adv"]
    return rewards, passes, reward_metrics(rewards, cfg.train.k_bon), adv


def _stats(fitted):
    return [bb.reward_model.stats for bb in fitted]


def _pooled_calibration(stub, train, held):
    """The leak, rebuilt: one standardiser fitted on every backbone's reference samples."""
    comps = []
    for backbones, salt in ((train, 0), (held, 1)):
        key = jax.random.fold_in(jax.random.PRNGKey(stub.config.seed + 20_000), salt)
        n = stub.config.reward.calibration_samples
        _, res = stub.rollout(None, backbones, jax.random.fold_in(key, 0), n)
        for j, bb in enumerate(backbones):
            comps.append(bb.reward_model.breakdown(res.sequences[j, :, : bb.length]).components)
    pooled = {k: np.concatenate([c[k] for c in comps]) for k in comps[0]}
    stats = fidia.fit_standardizer(pooled)
    out = []
    for bb in train:
        model = bb.reward_model.with_stats(stats)

        def reward(seqs, model=model):
            r = model(np.asarray(seqs, np.int32))
            return np.asarray(r.total, np.float32), np.asarray(r.passes, bool)

        out.append(dataclasses.replace(bb, reward=reward, reward_model=model))
    return out


@pytest.fixture(scope="module")
def parts():
    config = _config()
    return (
        config,
        _stub_trainer(config),
        _backbones(config, TRAIN_MOTIFS),
        _backbones(config, HELD_MOTIFS),
        _backbones(config, PLANTED_MOTIFS, stretch=1.4),
    )


def test_planted_held_out_backbones_move_no_training_calibration_or_step_number(parts):
    config, stub, train, held, planted = parts
    calibrate = fidia.Trainer.calibrate
    train_a, held_a = calibrate(stub, train, 0), calibrate(stub, held, 1)
    train_b, held_b = calibrate(stub, train, 0), calibrate(stub, planted, 1)
    # the plant took effect: the held-out backbones' own standardisers moved
    for sa, sb in zip(_stats(held_a), _stats(held_b), strict=True):
        assert sa.mean != sb.mean
    assert _stats(train_a) == _stats(train_b)  # exact: same floats
    ra, pa, ma, aa = _step_numbers(stub, train_a)
    rb, pb, mb, ab = _step_numbers(stub, train_b)
    np.testing.assert_array_equal(ra, rb)
    np.testing.assert_array_equal(pa, pb)
    np.testing.assert_array_equal(aa, ab)
    assert ma == mb
    assert np.abs(aa).max() > 0  # the advantages carry a signal


def test_a_changed_training_backbone_or_a_pooled_calibration_would_move_them(parts):
    config, stub, train, held, planted = parts
    calibrate = fidia.Trainer.calibrate
    base = calibrate(stub, train, 0)
    r0, _, m0, a0 = _step_numbers(stub, base)
    # control 1: a training backbone changed (its coordinates stretched)
    moved = calibrate(stub, [train[0], *_backbones(config, TRAIN_MOTIFS[1:], 1.4)], 0)
    assert _stats(moved)[0] == _stats(base)[0]  # the other training backbone keeps its own
    assert _stats(moved)[1].mean != _stats(base)[1].mean
    r1, _, m1, a1 = _step_numbers(stub, moved)
    assert not np.array_equal(r0, r1) and not np.array_equal(a0, a1) and m0 != m1
    # control 2: the leak rebuilt, one standardiser over training + held-out reference samples
    la, lb = _pooled_calibration(stub, train, held), _pooled_calibration(stub, train, planted)
    assert _stats(la)[0].mean != _stats(lb)[0].mean
    ra, _, ma, aa = _step_numbers(stub, la)
    rb, _, mb, ab = _step_numbers(stub, lb)
    assert np.max(np.abs(ra - rb)) > 1e-3 and np.max(np.abs(aa - ab)) > 1e-4 and ma != mb


def _split_tasks():
    base = protein.task_from_structure(protein.default_backbone_path(), fixed="A5-7")
    return [
        dataclasses.replace(base, name=f"generic/g{i:02d}", group=f"G{i:02d}", source="generic")
        for i in range(40)
    ]


def _plant_split(tasks, sides):
    """Held-out tasks' coordinates changed and 5 benchmark (forced held-out) tasks added."""
    out = []
    for t, side in zip(tasks, sides, strict=True):
        if side == "heldout":
            p = t.protein
            t = dataclasses.replace(t, protein=dataclasses.replace(p, X=np.asarray(p.X) * 1.4))
        out.append(t)
    extra = [
        dataclasses.replace(tasks[0], name=f"motifbench/b{i}", group=f"B{i}", source="motifbench")
        for i in range(5)
    ]
    return out + extra


def _quota_split(tasks, fraction=0.2, seed=0):
    """The leak, rebuilt: a fixed share of all groups held out, benchmark groups first."""
    from fidia_jax.protein._tasks import _seed_for

    groups = sorted({t.group for t in tasks})
    forced = sorted({t.group for t in tasks if t.source == "motifbench"})
    rest = sorted(set(groups) - set(forced), key=lambda g: _seed_for("split", seed, g))
    held = set((forced + rest)[: round(fraction * len(groups))])
    return ["heldout" if t.group in held else "train" for t in tasks]


def test_the_split_of_a_training_protein_ignores_the_held_out_proteins():
    tasks = _split_tasks()
    before = [t.split for t in protein.assign_splits(tasks, seed=0)]
    assert 0 < before.count("heldout") < len(tasks)
    after = [t.split for t in protein.assign_splits(_plant_split(tasks, before), seed=0)]
    assert after[: len(tasks)] == before
    assert after[len(tasks) :] == ["heldout"] * 5
    # control: a quota split over all groups moves training proteins when benchmarks are added
    q_before = _quota_split(tasks)
    q_after = _quota_split(_plant_split(tasks, q_before))
    assert q_after[: len(tasks)] != q_before


# ---- the real Trainer: __init__ calibration and one step with a small random ProteinMPNN -------

TINY = dict(hidden_dim=16, edge_features=16, num_encoder_layers=1, num_decoder_layers=1,
            k_neighbors=8)  # fmt: skip


def _real_run(monkeypatch, config, train, held):
    from flax import nnx

    from fidia_jax import models
    from fidia_jax.projects.fidia import train as train_mod

    monkeypatch.setattr(train_mod, "load_backbones", lambda cfg, predictor=None: (train, held))
    trainer = fidia.Trainer(config, reference=models.ProteinMPNN(**TINY, rngs=nnx.Rngs(0)))
    state, metrics = trainer.step(trainer.init_state())
    metrics.pop("seconds")
    leaves = [np.asarray(x) for x in jax.tree.leaves(jax.device_get(state.params))]
    return trainer, metrics, leaves


@pytest.mark.integration  # compiles the rollout and the update (~1 min on 2 CPU cores)
def test_real_trainer_calibration_and_step_ignore_planted_held_out_backbones(monkeypatch, parts):
    config, _, train, held, planted = parts
    ta, ma, pa = _real_run(monkeypatch, config, train, held)
    tb, mb, pb = _real_run(monkeypatch, config, train, planted)
    for sa, sb in zip(_stats(ta.eval_backbones), _stats(tb.eval_backbones), strict=True):
        assert sa.mean != sb.mean  # the plant reached the held-out standardisers
    assert _stats(ta.train_backbones) == _stats(tb.train_backbones)
    assert ma == mb
    for x, y in zip(pa, pb, strict=True):
        np.testing.assert_array_equal(x, y)
    # control: one training backbone changed moves the calibration and the step
    changed = [train[0], *_backbones(config, TRAIN_MOTIFS[1:], 1.4)]
    tc, mc, pc = _real_run(monkeypatch, config, changed, held)
    assert _stats(tc.train_backbones)[1].mean != _stats(ta.train_backbones)[1].mean
    assert mc != ma
    assert any(not np.array_equal(x, y) for x, y in zip(pa, pc, strict=True))
