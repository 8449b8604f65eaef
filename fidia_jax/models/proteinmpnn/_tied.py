"""Tied positions for ProteinMPNN: group ids, grouped decoding orders, spec parsing.

A *tie* makes several slots carry one residue: the sampler draws it once per group from the
average of the members' logits (the original ``ProteinMPNN.tied_sample``). Groups are held as a
canonical ``(L,)`` int32 id array in which every slot has an id: members of tied group ``g``
(numbered ``0, 1, ...``) share id ``g`` and an untied slot ``p`` has its own id ``L + p``, so an
untied slot is a group of size one.
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np

from fidia_jax.errors import ConfigError
from fidia_jax.protein import Protein, parse_motif_spec


def tied_group_ids(tied, length: int) -> np.ndarray | None:
    """Canonical ``(L,)`` int32 group ids of a ``tied`` argument (``None`` stays ``None``).

    Args:
      tied: ``None``; a ``(L,)`` integer array of group ids with ``-1`` = untied (slots sharing a
        non-negative id are tied); or a sequence of groups, each a sequence of slot indices.
      length: ``L``.

    Returns:
      ``(L,)`` int32: tied group ``g`` (in order of first appearance) -> ``g``, untied slot
      ``p`` -> ``L + p``.

    Raises:
      ValueError: a slot index outside ``[0, L)``, a slot in two groups or twice in one, an
        empty group, an id array of the wrong shape or with ids below ``-1``.
    """
    if tied is None:
        return None
    arr = None if isinstance(tied, (list, tuple)) else np.asarray(tied)
    if (
        arr is not None
        and arr.ndim == 1
        and np.issubdtype(arr.dtype, np.integer)
        and arr.shape == (length,)
    ):
        if (arr < -1).any():
            raise ValueError(f"tied group ids must be >= -1 (-1 = untied), got min {arr.min()}")
        groups = [np.flatnonzero(arr == g) for g in dict.fromkeys(arr[arr >= 0].tolist())]
    elif arr is not None and not (arr.ndim == 2 and np.issubdtype(arr.dtype, np.integer)):
        raise ValueError(
            f"tied must be a ({length},) int array of group ids or a list of index groups, got shape {arr.shape}"
        )
    else:
        groups = [np.asarray(g, np.int64).reshape(-1) for g in tied]
    gid = np.arange(length, 2 * length, dtype=np.int32)
    seen = np.zeros(length, bool)
    for g, members in enumerate(groups):
        if members.size == 0:
            raise ValueError(f"tied group {g} is empty")
        bad = members[(members < 0) | (members >= length)]
        if bad.size:
            raise ValueError(
                f"tied group {g} has slot indices {bad.tolist()} outside [0, {length})"
            )
        if seen[members].any() or np.unique(members).size != members.size:
            dup = sorted(
                set(members[seen[members]].tolist())
                | {m for m in members.tolist() if (members == m).sum() > 1}
            )
            raise ValueError(
                f"slots {dup} appear in more than one tied group (or twice in group {g})"
            )
        seen[members] = True
        gid[members] = g
    return gid


def group_sizes_and_members(gid_L: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(size_L, member_L)``: each slot's group size and its index in the group (slot order)."""
    gid_L = np.asarray(gid_L)
    _, inverse, counts = np.unique(gid_L, return_inverse=True, return_counts=True)
    member = np.zeros(gid_L.shape, np.int32)
    nxt: dict[int, int] = {}
    for p, g in enumerate(gid_L.tolist()):
        member[p] = nxt.get(g, 0)
        nxt[g] = member[p] + 1
    return counts[inverse].astype(np.int32), member


def group_decoding_order(
    order_NxL: jax.Array, gid_L: jax.Array, shift_L: jax.Array | None = None
) -> jax.Array:
    """Regroups decoding orders so the members of each tied group are decoded consecutively.

    As the original ``tied_sample``: a group takes the place of its member that comes first in
    ``order_NxL``; untied slots keep their relative order. Within a group the members go in
    ascending slot order (the original: the order in which the group lists them; the same when
    the list is ascending, as its ``make_tied_positions_dict.py`` writes them), or, with
    ``shift_L``, in ascending ``shift_L`` (a permutation of ``0 .. size - 1`` per group).

    Args:
      order_NxL: ``(N, L)`` int32 permutations.
      gid_L: ``(L,)`` int32 canonical group ids (:func:`tied_group_ids`).
      shift_L: optional ``(L,)`` int32 within-group rank.

    Returns:
      ``(N, L)`` int32 permutations. With every group of size one, equal to ``order_NxL``.
    """
    n, length = order_NxL.shape
    rank_NxL = jnp.argsort(order_NxL, axis=-1).astype(jnp.int32)
    first_NxG = jax.vmap(lambda r: jax.ops.segment_min(r, gid_L, num_segments=2 * length))(rank_NxL)
    within = (
        jnp.arange(length, dtype=jnp.int32) if shift_L is None else jnp.asarray(shift_L, jnp.int32)
    )
    key_NxL = first_NxG[:, gid_L] * length + within[None, :]
    return jnp.argsort(key_NxL, axis=-1).astype(jnp.int32)


def check_tied_design(design_L, gid_L: np.ndarray) -> None:
    """Raises ``ValueError`` if a tied group mixes designed and non-designed slots (concrete only)."""
    try:
        design = np.asarray(design_L) > 0
    except jax.errors.TracerArrayConversionError:
        return
    for g in np.unique(gid_L[gid_L < len(gid_L)]):
        members = np.flatnonzero(gid_L == g)
        if design[members].any() and not design[members].all():
            raise ValueError(
                f"tied group {int(g)} (slots {members.tolist()}) mixes designed slots "
                f"{members[design[members]].tolist()} with fixed, visible or missing ones "
                f"{members[~design[members]].tolist()}; tie only slots that are all designed or all kept"
            )


def tied_groups_from_spec(specs: str | Sequence[str], protein: Protein) -> list[list[int]]:
    """Tied slot groups of ``--tie`` specs in author numbering.

    Each spec is ``SIDE:SIDE[:SIDE...]`` where every side is a motif spec
    (:func:`fidia_jax.protein.parse_motif_spec`, e.g. ``A1-10`` or ``A1-5,A8-12``); the ``i``-th
    slot (in chain order) of every side is tied with the ``i``-th of the others.
    ``"A1-10:B1-10"`` gives ten groups ``(A1, B1), ..., (A10, B10)``.

    Raises:
      ConfigError: a spec with fewer than two sides, or sides selecting different numbers of
        slots (the message gives each side's count).
      MotifSpecError: a side that :func:`parse_motif_spec` rejects.
    """
    specs = [specs] if isinstance(specs, str) else list(specs)
    groups: list[list[int]] = []
    for spec in specs:
        sides = [s.strip() for s in spec.split(":")]
        if len(sides) < 2 or not all(sides):
            raise ConfigError(
                f"--tie {spec!r}: expected two or more motif specs joined by ':', e.g. 'A1-10:B1-10'"
            )
        slots = [np.flatnonzero(parse_motif_spec(side, protein)) for side in sides]
        if len({s.size for s in slots}) != 1:
            counts = ", ".join(f"{side} -> {s.size}" for side, s in zip(sides, slots, strict=True))
            raise ConfigError(
                f"--tie {spec!r}: the sides select different numbers of slots ({counts}); they are paired one to one"
            )
        groups.extend([int(x) for x in col] for col in zip(*slots, strict=True))
    return groups


def homo_oligomer_groups(protein: Protein) -> list[list[int]]:
    """Ties every loaded chain position by position (``--homo-oligomer``).

    Returns:
      ``L / n_chains`` groups, the ``i``-th holding slot ``i`` of every chain.

    Raises:
      ConfigError: fewer than two chains; chains of unequal length or with different native
        sequences (the message names them).
    """
    chain_id = np.asarray(protein.chain_id)
    chains = list(protein.chain_order)
    if len(chains) < 2:
        raise ConfigError(f"--homo-oligomer needs two or more chains, got {chains}")
    slots = {c: np.flatnonzero(chain_id == c) for c in chains}
    lengths = {c: int(s.size) for c, s in slots.items()}
    if len(set(lengths.values())) != 1:
        raise ConfigError(f"--homo-oligomer: chains have unequal lengths {lengths}")
    ref = chains[0]
    S = np.asarray(protein.S)
    differ = [c for c in chains[1:] if not np.array_equal(S[slots[c]], S[slots[ref]])]
    if differ:
        detail = []
        for c in differ:
            i = int(np.flatnonzero(S[slots[c]] != S[slots[ref]])[0])
            detail.append(
                f"{c} differs from {ref} first at slot {i} ({ref}{protein.resnum[slots[ref][i]]} vs {c}{protein.resnum[slots[c][i]]})"
            )
        raise ConfigError(
            f"--homo-oligomer: chains with different native sequences: {'; '.join(detail)}"
        )
    return [[int(slots[c][i]) for c in chains] for i in range(lengths[ref])]
