"""The featurised protein record shared by the parser, the model and the RL code."""

from __future__ import annotations

import dataclasses

import numpy as np

__all__ = ["ALPHABET", "Protein"]

#: ProteinMPNN's 21-token alphabet; index 20 ("X") is unknown / gap.
ALPHABET = "ACDEFGHIKLMNPQRSTVWYX"


@dataclasses.dataclass(frozen=True, eq=False)
class Protein:
    """Backbone and native sequence of one or more chains, in ProteinMPNN's featurisation.

    Residue slots are concatenated chain by chain in ``chain_order``. All arrays have the same
    leading length ``L`` (number of residue slots).

    Attributes:
      X: ``(L, 4, 3)`` float32, Å. Backbone atoms N, CA, C, O; missing atoms (and atoms whose
        coordinates in the file were not finite) are 0.0, so ``X`` is always finite.
      mask: ``(L,)`` float32. 1.0 where all four backbone atoms are present, finite and not
        coincident, else 0.0.
      S: ``(L,)`` int32. Native tokens in :data:`ALPHABET` (20 = ``X``, unknown).
      residue_idx: ``(L,)`` int32. ``100 * c + running position`` for the c-th chain (0-based),
        the index fed to ProteinMPNN's relative positional encoding.
      chain_encoding: ``(L,)`` int32. 1 for the first chain in ``chain_order``, 2 for the second...
      chain_id: ``(L,)`` str. Author chain ID of each slot.
      resnum: ``(L,)`` int32. Author residue number of each slot.
      icode: ``(L,)`` str. Insertion code of each slot ("" when none).
      chain_order: chain IDs in concatenation order.
      source: where the structure came from (file path or description).
      missing: labels (chain + author number + insertion code, e.g. ``"A45"``) of the slots with
        ``mask`` 0: residues lacking a backbone atom, with a non-finite or degenerate backbone,
        and numbering-gap placeholders.
    """

    X: np.ndarray
    mask: np.ndarray
    S: np.ndarray
    residue_idx: np.ndarray
    chain_encoding: np.ndarray
    chain_id: np.ndarray
    resnum: np.ndarray
    icode: np.ndarray
    chain_order: tuple[str, ...]
    source: str = ""
    missing: tuple[str, ...] = ()

    @property
    def length(self) -> int:
        """Number of residue slots ``L``."""
        return int(self.S.shape[0])

    @property
    def sequence(self) -> str:
        """Native sequence as a one-letter string (``X`` for unknown residues)."""
        return "".join(ALPHABET[int(t)] for t in self.S)

    def chain_mask(
        self, design_chains: str | tuple[str, ...] | list[str] | None = None
    ) -> np.ndarray:
        """``(L,)`` float32: 1.0 on slots of the designed chains (all chains when ``None``).

        Raises:
          ChainError: a requested chain is not in ``chain_order``.
        """
        from fidia_jax.errors import ChainError

        if design_chains is None:
            return np.ones(self.length, np.float32)
        chains = (
            tuple(design_chains.split(","))
            if isinstance(design_chains, str)
            else tuple(design_chains)
        )
        unknown = [c for c in chains if c not in self.chain_order]
        if unknown:
            raise ChainError(
                f"{self.source or 'structure'}: design chain(s) {unknown} not among loaded chains "
                f"{list(self.chain_order)}"
            )
        return np.isin(self.chain_id, chains).astype(np.float32)
