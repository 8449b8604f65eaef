"""A structure with a design problem on it: which chains are designed, which motif is kept."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence

import numpy as np

from fidia_jax.errors import ConfigError
from fidia_jax.protein._motif import parse_motif_spec
from fidia_jax.protein._structure import default_backbone_path, load_structure
from fidia_jax.protein._types import ALPHABET, Protein

__all__ = ["DesignSetup", "prepare_design", "select_chains"]


@dataclasses.dataclass(frozen=True)
class DesignSetup:
    """A loaded structure with the design problem on it.

    Attributes:
      protein: the parsed structure.
      design_chains: chains whose residues are designed, in the structure's chain order.
      chain_mask: ``(L,)`` float32, 1 on designed chains.
      fixed: ``(L,)`` bool, motif positions kept at the native residue.
      designed: ``(L,)`` bool, positions that are sampled and scored:
        ``chain_mask * mask * ~fixed``.
      fixed_spec: the motif spec (``""`` when none).
    """

    protein: Protein
    design_chains: tuple[str, ...]
    chain_mask: np.ndarray
    fixed: np.ndarray
    designed: np.ndarray
    fixed_spec: str

    def designed_slots(self) -> np.ndarray:
        """Indices of the slots of the designed chains (the FASTA sequence layout), ``(D,)`` int."""
        return np.flatnonzero(self.chain_mask > 0)

    def chain_strings(self, tokens: np.ndarray) -> str:
        """Designed chains of an ``(L,)`` token vector as one-letter strings joined by ``/``."""
        cid = np.asarray(self.protein.chain_id)
        return "/".join(
            "".join(ALPHABET[int(t)] for t in tokens[cid == c]) for c in self.design_chains
        )


def select_chains(protein: Protein, chains: Sequence[str]) -> tuple[Protein, np.ndarray]:
    """The chains ``chains`` of ``protein``, in that order, as a new :class:`Protein`.

    ``residue_idx`` and ``chain_encoding`` are recomputed for the new chain order (``100 * c``
    plus the running slot position, as :func:`load_structure`; offsets within a chain are kept).

    Returns:
      ``(selected, slots)``: the new protein and the ``(L',)`` indices of its slots in
      ``protein`` (``array[slots]`` carries any per-slot array over).

    Raises:
      ChainError: a chain ``protein`` does not have, or one listed twice (named).
    """
    from fidia_jax.errors import ChainError

    chains = tuple(chains)
    unknown = [c for c in chains if c not in protein.chain_order]
    if unknown or len(set(chains)) != len(chains) or not chains:
        raise ChainError(
            f"{protein.source}: cannot select chains {list(chains)} (chains {list(protein.chain_order)}; "
            "each at most once, at least one)"
        )
    cid = np.asarray(protein.chain_id)
    parts = [np.flatnonzero(cid == c) for c in chains]
    slots = np.concatenate(parts)
    idx, start = [], 0
    for c_i, part in enumerate(parts):
        within = protein.residue_idx[part] - protein.residue_idx[part[0]]
        idx.append(100 * c_i + start + within)
        start += part.size
    enc = np.concatenate([np.full(part.size, c_i + 1) for c_i, part in enumerate(parts)])
    selected = dataclasses.replace(
        protein,
        X=protein.X[slots], mask=protein.mask[slots], S=protein.S[slots],
        residue_idx=np.concatenate(idx).astype(np.int32), chain_encoding=enc.astype(np.int32),
        chain_id=cid[slots], resnum=protein.resnum[slots], icode=protein.icode[slots],
        chain_order=chains,
        missing=tuple(f"{cid[i]}{protein.resnum[i]}{protein.icode[i]}" for i in slots if not protein.mask[i]),
    )  # fmt: skip
    return selected, slots


def prepare_design(
    pdb: str | os.PathLike | Protein | None = None,
    chains: str | Sequence[str] | None = None,
    design_chains: str | Sequence[str] | None = None,
    fixed: str | np.ndarray | None = None,
) -> DesignSetup:
    """Loads the structure and resolves design chains and fixed (motif) positions.

    Args:
      pdb: structure file, or an already loaded :class:`Protein`; ``None`` = the built-in
        backbone (:func:`default_backbone_path`).
      chains: chains to load, in order (``None`` = all protein chains).
      design_chains: chains to design, ``"A,B"`` or a sequence (``None`` = all loaded chains);
        the others are visible context.
      fixed: motif spec in author numbering (``"A16-35,A52-71"``), or an ``(L,)`` bool mask over
        the loaded slots; these positions keep the native residue.

    Raises:
      StructureError, ChainError, MotifSpecError: see :func:`load_structure`,
        :func:`parse_motif_spec`.
      ConfigError: no position is left to design.
    """
    if isinstance(pdb, Protein):
        protein = pdb
        if chains is not None:
            chains = chains.replace(" ", ",").split(",") if isinstance(chains, str) else chains
            protein = select_chains(protein, [c for c in chains if c])[0]
    else:
        protein = load_structure(default_backbone_path() if pdb is None else pdb, chains)
    if design_chains is None:
        dchains = protein.chain_order
    elif isinstance(design_chains, str):
        dchains = tuple(c for c in design_chains.replace(" ", ",").split(",") if c)
    else:
        dchains = tuple(design_chains)
    chain_mask = protein.chain_mask(dchains)
    dchains = tuple(c for c in protein.chain_order if c in dchains)
    if fixed is None or isinstance(fixed, str):
        fixed_mask = parse_motif_spec(fixed, protein) if fixed else np.zeros(protein.length, bool)
    else:
        fixed_mask = np.asarray(fixed, bool)
        if fixed_mask.shape != (protein.length,):
            raise ConfigError(
                f"{protein.source}: a fixed mask must be ({protein.length},) bool, got {fixed_mask.shape}"
            )
        fixed = ",".join(
            f"{c}{r}{i}"
            for c, r, i in zip(
                protein.chain_id[fixed_mask],
                protein.resnum[fixed_mask],
                protein.icode[fixed_mask],
                strict=True,
            )
        )
    designed = (chain_mask > 0) & (protein.mask > 0) & ~fixed_mask
    if not designed.any():
        raise ConfigError(
            f"{protein.source}: no position left to design (design chains {list(dchains)}, "
            f"{int(fixed_mask.sum())} fixed)"
        )
    return DesignSetup(protein, dchains, chain_mask, fixed_mask, designed, fixed or "")
