"""ProteinMPNN inputs: the token alphabet, the featurised structure and the omitted-token mask."""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    from fidia_jax.protein import Protein

#: Token alphabet of ProteinMPNN (index 20, ``X``, is unknown / gap). The vocabulary belongs to the
#: checkpoint, so it is spelled out here; it is the same string as
#: :data:`fidia_jax.protein.ALPHABET` (a test checks it).
MPNN_ALPHABET = "ACDEFGHIKLMNPQRSTVWYX"


class MPNNInputs(NamedTuple):
    """Featurised structure fed to ProteinMPNN (a pytree; batch with a leading axis ``B``).

    Attributes:
      X: ``(L, 4, 3)`` float32, Å. Backbone N, CA, C, O (missing atoms 0.0). The CA-only
        model reads only the CA (``X[:, 1]``; N, C, O may be 0) and also takes ``(L, 1, 3)``.
      S: ``(L,)`` int32. Native tokens in :data:`MPNN_ALPHABET`.
      mask: ``(L,)`` float32. 1.0 where all four backbone atoms exist (CA-only model: where
        the CA exists; ``load_structure(..., ca_only=True)`` makes that mask).
      chain_mask: ``(L,)`` float32. 1.0 = designed position, 0.0 = visible context.
      residue_idx: ``(L,)`` int32. ``100 * chain + running position`` (positional encoding).
      chain_encoding: ``(L,)`` int32. 1-based chain label.
    """

    X: jax.Array
    S: jax.Array
    mask: jax.Array
    chain_mask: jax.Array
    residue_idx: jax.Array
    chain_encoding: jax.Array

    @classmethod
    def from_protein(cls, protein: Protein, design_chains=None) -> MPNNInputs:
        """Build inputs from a :class:`fidia_jax.protein.Protein`.

        Args:
          protein: parsed structure.
          design_chains: chain IDs to design (``"A,B"``, a sequence, or ``None`` = all chains);
            the other chains are visible context.

        Raises:
          TypeError: ``protein`` is not a :class:`fidia_jax.protein.Protein`.
          ChainError: a design chain is not in the structure.
        """
        from fidia_jax.protein import Protein as _Protein  # lazy: models need no protein stack

        if not isinstance(protein, _Protein):
            raise TypeError(f"expected a fidia_jax.protein.Protein, got {type(protein).__name__}")
        return cls(
            X=np.asarray(protein.X, np.float32),
            S=np.asarray(protein.S, np.int32),
            mask=np.asarray(protein.mask, np.float32),
            chain_mask=np.asarray(protein.chain_mask(design_chains), np.float32),
            residue_idx=np.asarray(protein.residue_idx, np.int32),
            chain_encoding=np.asarray(protein.chain_encoding, np.int32),
        )


def check_inputs(inputs: MPNNInputs, batched: bool) -> None:
    """Raises ``ValueError`` unless ``inputs`` has consistent ``(L, ...)`` / ``(B, L, ...)`` shapes."""
    nd = 3 if batched else 2
    X = inputs.X
    if X.ndim != nd + 1 or X.shape[-2:] not in ((4, 3), (1, 3)):
        want = "(B, L, 4, 3) or (B, L, 1, 3)" if batched else "(L, 4, 3) or (L, 1, 3)"
        raise ValueError(f"inputs.X must have shape {want}, got {X.shape}")
    lead = X.shape[:-2]
    for name in ("S", "mask", "chain_mask", "residue_idx", "chain_encoding"):
        arr = getattr(inputs, name)
        if arr.shape != lead:
            raise ValueError(f"inputs.{name} must have shape {lead}, got {arr.shape}")


def canonical(inputs: MPNNInputs) -> MPNNInputs:
    """Cast to the canonical dtypes (so jitted functions see one signature)."""
    return MPNNInputs(
        X=jnp.asarray(inputs.X, jnp.float32),
        S=jnp.asarray(inputs.S, jnp.int32),
        mask=jnp.asarray(inputs.mask, jnp.float32),
        chain_mask=jnp.asarray(inputs.chain_mask, jnp.float32),
        residue_idx=jnp.asarray(inputs.residue_idx, jnp.int32),
        chain_encoding=jnp.asarray(inputs.chain_encoding, jnp.int32),
    )


def omit_mask(omit_aas: str) -> jax.Array:
    """Mask of the tokens never to be sampled.

    Args:
      omit_aas: letters of :data:`MPNN_ALPHABET` (``"CX"``; order and repeats do not matter).

    Returns:
      ``(21,)`` float32, 1.0 at the tokens in ``omit_aas``, 0.0 elsewhere.

    Raises:
      ValueError: a letter outside :data:`MPNN_ALPHABET`, or every token omitted.
    """
    bad = sorted(set(omit_aas) - set(MPNN_ALPHABET))
    if bad:
        raise ValueError(f"omit_aas contains letters outside {MPNN_ALPHABET!r}: {bad}")
    m = np.array([a in omit_aas for a in MPNN_ALPHABET], bool)
    if m.all():
        raise ValueError("omit_aas omits every token")
    return jnp.asarray(m, jnp.float32)
