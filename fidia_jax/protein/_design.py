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

__all__ = ["DesignSetup", "prepare_design"]


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


def prepare_design(
    pdb: str | os.PathLike | None = None,
    chains: str | Sequence[str] | None = None,
    design_chains: str | Sequence[str] | None = None,
    fixed: str | None = None,
) -> DesignSetup:
    """Loads the structure and resolves design chains and fixed (motif) positions.

    Args:
      pdb: structure file; ``None`` = the built-in backbone (:func:`default_backbone_path`).
      chains: chains to load, in order (``None`` = all protein chains).
      design_chains: chains to design, ``"A,B"`` or a sequence (``None`` = all loaded chains);
        the others are visible context.
      fixed: motif spec in author numbering (``"A16-35,A52-71"``); these positions keep the
        native residue.

    Raises:
      StructureError, ChainError, MotifSpecError: see :func:`load_structure`,
        :func:`parse_motif_spec`.
      ConfigError: no position is left to design.
    """
    protein = load_structure(default_backbone_path() if pdb is None else pdb, chains)
    if design_chains is None:
        dchains = protein.chain_order
    elif isinstance(design_chains, str):
        dchains = tuple(c for c in design_chains.replace(" ", ",").split(",") if c)
    else:
        dchains = tuple(design_chains)
    chain_mask = protein.chain_mask(dchains)
    dchains = tuple(c for c in protein.chain_order if c in dchains)
    fixed_mask = parse_motif_spec(fixed, protein) if fixed else np.zeros(protein.length, bool)
    designed = (chain_mask > 0) & (protein.mask > 0) & ~fixed_mask
    if not designed.any():
        raise ConfigError(
            f"{protein.source}: no position left to design (design chains {list(dchains)}, "
            f"{int(fixed_mask.sum())} fixed)"
        )
    return DesignSetup(protein, dchains, chain_mask, fixed_mask, designed, fixed or "")
