"""Builds :class:`~fidia_jax.projects.fidia.Backbone` lists from ``fidia_jax.protein`` tasks and rewards.

* task sets: ``"default"`` (the packaged default backbone with a fixed pseudo-motif; train and
  evaluation on the same backbone -- a demo, not a held-out result), ``"train"`` (the training
  side of :func:`fidia_jax.protein.load_tasks`' protein-level split) and ``"heldout"`` (the other
  side; optionally restricted to ``data.eval_names``).
* backbones longer than ``data.max_length`` are cropped *spatially*: the ``max_length`` slots
  whose CA is nearest to the motif's CA centroid are kept (in their original order and with
  their original residue indices, so chain breaks stay chain breaks).
* rewards: :class:`~fidia_jax.projects.fidia.RewardModel` with a frozen judge ensemble, standardised with
  ``reward.calibration_samples`` samples of the frozen reference per backbone (drawn by the
  trainer with a key derived from the seed only, so every method sees the same rewards).
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

from fidia_jax import models
from fidia_jax.errors import DataError
from fidia_jax.projects.fidia._backbones import Backbone
from fidia_jax.projects.fidia._judge import Judge, JudgeConfig
from fidia_jax.projects.fidia._rewards import RewardConfig, RewardModel

__all__ = ["DEFAULT_MOTIF", "crop_task", "fit_reward", "load_backbones", "unfitted_backbone"]

#: Pseudo-motif of the packaged default backbone (BPTI 5PTI chain A, author numbering):
#: the binding loop around Lys15 and the Cys14-Cys38 / Cys30-Cys51 disulfide partners.
DEFAULT_MOTIF = "A13-17,A30,A38,A51"


def crop_task(task, max_length: int):
    """Spatial crop of a :class:`fidia_jax.protein.DesignTask` to ``max_length`` slots."""
    p = task.protein
    if p.length <= max_length:
        return task
    ca = np.asarray(p.X)[:, 1]
    present = np.asarray(p.mask) > 0
    ref_mask = task.motif_mask if task.motif_mask.any() else task.design_mask
    centre = ca[ref_mask & present].mean(0) if (ref_mask & present).any() else ca[present].mean(0)
    dist = np.linalg.norm(ca - centre, axis=-1)
    dist = np.where(present, dist, np.inf)
    # design chains first: partners only fill what the designed chains leave
    on_design = np.isin(np.asarray(p.chain_id), task.design_chains)
    priority = np.where(task.motif_mask, -1.0, dist) + np.where(on_design, 0.0, 1e3)
    keep = np.zeros(p.length, bool)
    keep[np.argsort(priority, kind="stable")[:max_length]] = True
    idx = np.flatnonzero(keep)
    chains = tuple(c for c in p.chain_order if c in set(np.asarray(p.chain_id)[idx]))
    enc = {c: i + 1 for i, c in enumerate(chains)}
    chain_id = np.asarray(p.chain_id)[idx]
    new_enc = np.array([enc[c] for c in chain_id], np.int32)
    old_enc = np.asarray(p.chain_encoding)[idx]
    residue_idx = np.asarray(p.residue_idx)[idx] - 100 * (old_enc - 1) + 100 * (new_enc - 1)
    protein = dataclasses.replace(
        p,
        X=np.asarray(p.X)[idx],
        mask=np.asarray(p.mask)[idx],
        S=np.asarray(p.S)[idx],
        residue_idx=residue_idx.astype(np.int32),
        chain_encoding=new_enc,
        chain_id=chain_id,
        resnum=np.asarray(p.resnum)[idx],
        icode=np.asarray(p.icode)[idx],
        chain_order=chains,
    )
    return dataclasses.replace(
        task,
        protein=protein,
        design_mask=task.design_mask[idx],
        motif_mask=task.motif_mask[idx],
        fixed_mask=task.fixed_mask[idx],
        motif_tokens=task.motif_tokens[idx],
        partner_chains=tuple(c for c in task.partner_chains if c in chains),
    )


def _inputs(task) -> models.MPNNInputs:
    inp = models.MPNNInputs.from_protein(task.protein, task.design_chains)
    return inp._replace(chain_mask=np.asarray(task.design_mask, np.float32))


@functools.lru_cache(maxsize=4)
def _judge(checkpoints: tuple[str, ...], num_orders: int, seed: int):
    pairs = tuple((c.split("/")[1], c.split("/")[0]) for c in checkpoints)
    return Judge.from_config(JudgeConfig(checkpoints=pairs, num_orders=num_orders, seed=seed))


def unfitted_backbone(task, config, predictor=None) -> Backbone:
    """A cropped task as a :class:`Backbone` whose reward still needs :func:`fit_reward`.

    ``backbone.reward`` raises until fitted; ``backbone.task`` / ``backbone.reward_model`` hold
    the cropped task and its unfitted :class:`~fidia_jax.projects.fidia.RewardModel`. With a
    ``predictor`` (:class:`fidia_jax.protein.StructurePredictor`) the reward folds its samples
    (``reward.criteria = "structure"``).
    """
    task = crop_task(task, config.data.max_length)
    r = config.reward
    judge = _judge(tuple(r.judge), r.judge_orders, config.seed) if r.judge else None
    reward_config = RewardConfig(structure_gate=r.structure_gate, fold_partners=r.fold_partners)
    model = RewardModel.build(task, reward_config, judge=judge, predictor=predictor)

    def unfitted(sequences_NxL):
        raise RuntimeError(f"{task.name}: reward not calibrated yet")

    return Backbone(
        name=task.name,
        kind=task.kind,
        inputs=_inputs(task),
        fixed=np.asarray(task.fixed_mask, bool),
        reward=unfitted,
        reward_model=model,
    )


def fit_reward(backbone: Backbone, reference_samples_NxL: np.ndarray) -> Backbone:
    """The backbone with its reward standardised on the reference policy's samples."""
    model = backbone.reward_model.fit(np.asarray(reference_samples_NxL, np.int32))

    def reward(sequences_NxL: np.ndarray):
        res = model(np.asarray(sequences_NxL, np.int32))
        return np.asarray(res.total, np.float32), np.asarray(res.passes, bool)

    return dataclasses.replace(backbone, reward=reward, reward_model=model)


def _select(tasks, names, limit):
    if names:
        wanted = list(names)
        out = []
        for w in wanted:
            hits = [t for t in tasks if t.name == w or t.name.split("/")[-1] == w]
            if not hits:
                raise DataError(f"task {w!r} not found among {len(tasks)} tasks of this split")
            out.append(hits[0])
        tasks = out
    return tasks[:limit] if limit > 0 else tasks


def load_backbones(config, predictor=None) -> tuple[list[Backbone], list[Backbone]]:
    """Training and held-out backbones of ``config.data`` with *unfitted* composite rewards
    (folding their samples with ``predictor`` when one is given).

    :class:`~fidia_jax.projects.fidia.Trainer` standardises each reward on samples of the
    frozen reference (:func:`fit_reward`).

    Returns:
      ``(train, heldout)`` lists; no protein appears in both.

    Raises:
      DataError: data directory or files missing, unknown task names, or a protein on both
        sides of the split.
    """
    from fidia_jax import protein
    from fidia_jax.data import resolve_data_dir

    d = config.data
    sets = {}
    loaded = None
    for split in {d.train_tasks, d.eval_tasks}:
        if split == "default":
            task = protein.task_from_structure(
                protein.default_backbone_path(),
                fixed=DEFAULT_MOTIF,
                name="default/5PTI",
                kind="motif",
            )
            sets[split] = [task]
        elif split in ("train", "heldout"):
            loaded = loaded or protein.load_tasks(resolve_data_dir(d.data_dir), seed=config.seed)
            sets[split] = [t for t in loaded if t.split == split]
        else:
            raise DataError(f"unknown task set {split!r}; expected 'default', 'train' or 'heldout'")
    train = _select(sets[d.train_tasks], (), d.max_train_tasks)
    heldout = _select(sets[d.eval_tasks], d.eval_names, d.max_eval_tasks)
    if d.train_tasks != "default" or d.eval_tasks != "default":
        overlap = {t.group for t in train} & {t.group for t in heldout}
        if overlap:
            raise DataError(f"protein(s) {sorted(overlap)} in both training and held-out sets")
    return (
        [unfitted_backbone(t, config, predictor) for t in train],
        [unfitted_backbone(t, config, predictor) for t in heldout],
    )
