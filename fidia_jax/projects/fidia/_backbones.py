"""Backbones as the training loop sees them: featurised inputs, motif, reward.

A :class:`Backbone` is one design problem: ProteinMPNN inputs (one or more chains; only the
designed chain(s) have ``chain_mask == 1``), the fixed motif positions (kept at their native
identity during sampling), and a reward callable mapping ``(N, L)`` sequences to ``(N,)``
rewards and ``(N,)`` proxy pass/fail verdicts. :func:`stack_backbones` pads a list of them to
one length so a batch can be vmapped and sharded. The backbones of a config are built by
:func:`fidia_jax.projects.fidia._tasks_bridge.load_backbones`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from fidia_jax import models

__all__ = [
    "Backbone",
    "RewardFn",
    "StackedBackbones",
    "crop_inputs",
    "stack_backbones",
]

#: ``reward(sequences (N, L) int32) -> (rewards (N,) float32, passes (N,) bool)``.
RewardFn = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]


@dataclasses.dataclass(frozen=True, eq=False)
class Backbone:
    """One design problem.

    Attributes:
      name: identifier (e.g. ``"5TPN"`` or ``"1ahsA"``).
      kind: ``"epitope"``, ``"enzyme"``, ``"motif"`` or ``"generic"`` (reported separately).
      inputs: unbatched :class:`fidia_jax.models.MPNNInputs` (numpy, length ``L``).
      fixed: ``(L,)`` bool, motif positions that keep their native residue.
      reward: :data:`RewardFn` of this backbone.
      reward_model: the underlying :class:`~fidia_jax.projects.fidia.RewardModel` when built from a task
        (``None`` for hand-made backbones).
    """

    name: str
    kind: str
    inputs: models.MPNNInputs
    fixed: np.ndarray
    reward: RewardFn
    reward_model: Any = None

    def __post_init__(self) -> None:
        L = int(np.shape(self.inputs.S)[0])
        if np.shape(self.fixed) != (L,):
            raise ValueError(
                f"{self.name}: fixed has shape {np.shape(self.fixed)}, expected ({L},)"
            )

    @property
    def length(self) -> int:
        return int(np.shape(self.inputs.S)[0])

    @property
    def native(self) -> np.ndarray:
        """``(L,)`` int32 native tokens."""
        return np.asarray(self.inputs.S, np.int32)

    @property
    def designed_mask(self) -> np.ndarray:
        """``(L,)`` bool: designed chain, backbone present, not fixed."""
        inp = self.inputs
        return (
            (np.asarray(inp.chain_mask) > 0)
            & (np.asarray(inp.mask) > 0)
            & ~np.asarray(self.fixed, bool)
        )


class StackedBackbones(NamedTuple):
    """A padded batch. ``inputs`` fields have leading ``(B, Lp)``; pads have ``mask == 0``.

    Attributes:
      inputs: batched :class:`fidia_jax.models.MPNNInputs`.
      fixed: ``(B, Lp)`` bool (pads are fixed too: the sampler keeps their token).
      designed: ``(B, Lp)`` float32, 1.0 on designed positions.
    """

    inputs: models.MPNNInputs
    fixed: np.ndarray
    designed: np.ndarray


def crop_inputs(inputs: models.MPNNInputs, fixed: np.ndarray, max_length: int):
    """Keeps a contiguous window of at most ``max_length`` slots, centred on the fixed motif.

    Returns:
      ``(inputs, fixed, start)``: cropped arrays and the window start.
    """
    L = int(np.shape(inputs.S)[0])
    if L <= max_length:
        return inputs, np.asarray(fixed, bool), 0
    where = np.flatnonzero(fixed)
    centre = int(where.mean()) if where.size else L // 2
    start = int(np.clip(centre - max_length // 2, 0, L - max_length))
    sl = slice(start, start + max_length)
    cropped = models.MPNNInputs(*(np.asarray(a)[sl] for a in inputs))
    return cropped, np.asarray(fixed, bool)[sl], start


def stack_backbones(backbones: Sequence[Backbone], length: int) -> StackedBackbones:
    """Pads every backbone to ``length`` slots and stacks them.

    Pad slots: coordinates 0, ``mask = chain_mask = 0``, token ``X`` (20), residue index
    continuing the last one, the last chain label. ProteinMPNN masks them out of every message,
    so the designed positions' distributions are those of the unpadded backbone.

    Raises:
      ValueError: a backbone is longer than ``length``.
    """
    fields = {name: [] for name in models.MPNNInputs._fields}
    fixed, designed = [], []
    for bb in backbones:
        L = bb.length
        if L > length:
            raise ValueError(f"{bb.name}: length {L} exceeds the padded length {length}")
        pad = length - L
        inp = bb.inputs
        fields["X"].append(
            np.concatenate([np.asarray(inp.X, np.float32), np.zeros((pad, 4, 3), np.float32)])
        )
        fields["S"].append(
            np.concatenate([np.asarray(inp.S, np.int32), np.full(pad, 20, np.int32)])
        )
        fields["mask"].append(
            np.concatenate([np.asarray(inp.mask, np.float32), np.zeros(pad, np.float32)])
        )
        fields["chain_mask"].append(
            np.concatenate([np.asarray(inp.chain_mask, np.float32), np.zeros(pad, np.float32)])
        )
        last = int(np.asarray(inp.residue_idx)[-1])
        fields["residue_idx"].append(
            np.concatenate(
                [np.asarray(inp.residue_idx, np.int32), last + 1 + np.arange(pad, dtype=np.int32)]
            )
        )
        fields["chain_encoding"].append(
            np.concatenate(
                [
                    np.asarray(inp.chain_encoding, np.int32),
                    np.full(pad, int(np.asarray(inp.chain_encoding)[-1]), np.int32),
                ]
            )
        )
        fixed.append(np.concatenate([np.asarray(bb.fixed, bool), np.ones(pad, bool)]))
        designed.append(np.concatenate([bb.designed_mask, np.zeros(pad, bool)]).astype(np.float32))
    inputs = models.MPNNInputs(**{k: np.stack(v) for k, v in fields.items()})
    return StackedBackbones(inputs=inputs, fixed=np.stack(fixed), designed=np.stack(designed))
