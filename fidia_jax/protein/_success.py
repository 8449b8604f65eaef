"""Success criteria of motif-scaffolding benchmarks on a predicted structure.

:class:`StructurePredictor` is the interface of a folding model (ESMFold, AlphaFold2, ...); none
ships offline. :func:`structure_success` applies the usual criteria (scRMSD < 2 Å, motif RMSD
< 1 Å, mean pLDDT > 70) to its prediction of a :class:`~fidia_jax.protein.DesignTask`'s
designed chains. Any design method can call them; composite rewards that also need a judge
model live in the driver that uses them (``fidia_jax.projects.fidia``).

References:
  Watson et al., "De novo design of protein structure and function with RFdiffusion",
  Nature 620, 2023 (the scRMSD / motif RMSD / pLDDT success criteria).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import jax.numpy as jnp
import numpy as np

from fidia_jax.protein._geometry import kabsch_rmsd
from fidia_jax.protein._tasks import DesignTask

__all__ = ["StructurePredictor", "join_chains", "structure_success"]


@runtime_checkable
class StructurePredictor(Protocol):
    """A folding model (e.g. ESMFold / AF2) for the real success criteria; none ships offline.

    ``predict(sequence)`` takes the chain(s) to fold as one-letter string, chains in task order
    joined with ``:`` (present residues only; :func:`join_chains` builds it from chain lengths)
    and returns ``(coords, plddt)``: ``coords`` ``(M, 4, 3)`` backbone N, CA, C, O in Å (or
    ``(M, 3)`` CA only) and ``plddt`` ``(M,)`` in ``[0, 100]``, ``M`` the residues without the
    ``:``, in input order.
    """

    def predict(self, sequence: str) -> tuple[np.ndarray, np.ndarray]: ...


def join_chains(sequence: str, chain_lengths: Sequence[int]) -> str:
    """A predictor's multi-chain input: ``sequence`` cut into ``chain_lengths`` and joined with ``:``.

    ``join_chains("MKTAYQRQ", [5, 3]) == "MKTAY:QRQ"``.

    Args:
      sequence: one-letter residues of all chains, concatenated (no ``:``).
      chain_lengths: residues per chain, in order (each >= 1, summing to ``len(sequence)``).

    Raises:
      ValueError: ``sequence`` already holds ``:``, a chain length below 1, or lengths that do
        not sum to the sequence's length.
    """
    lengths = [int(n) for n in chain_lengths]
    if ":" in sequence:
        raise ValueError(f"sequence {sequence!r} already holds ':' chain breaks")
    if not lengths or min(lengths) < 1:
        raise ValueError(f"chain_lengths must be >= 1 each (and at least one), got {lengths}")
    if sum(lengths) != len(sequence):
        raise ValueError(
            f"chain_lengths {lengths} sum to {sum(lengths)}, but the sequence has "
            f"{len(sequence)} residues"
        )
    cuts = np.cumsum([0, *lengths])
    return ":".join(sequence[a:b] for a, b in zip(cuts[:-1], cuts[1:], strict=True))


def structure_success(
    task: DesignTask,
    coords: np.ndarray,
    plddt: np.ndarray,
    *,
    max_scrmsd: float = 2.0,
    max_motif_rmsd: float = 1.0,
    min_plddt: float = 70.0,
) -> dict[str, float | bool]:
    """The designability / motif criteria of motif-scaffolding benchmarks on a predicted structure.

    scRMSD: CA RMSD between prediction and design backbone after Kabsch superposition on all CA.
    Motif RMSD: backbone (N, CA, C, O; CA only if ``coords`` is CA only) RMSD over the motif after
    superposition on the motif. Success: ``scrmsd < 2`` Å, ``motif_rmsd < 1`` Å, mean pLDDT > 70.

    Args:
      task: the design task (its designed chains, present residues, define the ``M`` slots).
      coords: ``(M, 4, 3)`` or ``(M, 3)`` predicted coordinates, Å.
      plddt: ``(M,)`` per-residue pLDDT.

    Raises:
      ValueError: shapes do not match the task's designed residues.
    """
    design = np.asarray(task.design_mask, bool) & (np.asarray(task.protein.mask) > 0)
    ref = np.asarray(task.protein.X, np.float32)[design]
    coords = np.asarray(coords, np.float32)
    m = ref.shape[0]
    ca_only = coords.ndim == 2
    if coords.shape not in ((m, 3), (m, 4, 3)):
        raise ValueError(
            f"coords must be ({m}, 4, 3) or ({m}, 3) for task {task.name}, got {coords.shape}"
        )
    plddt = np.asarray(plddt, np.float32)
    if plddt.shape != (m,):
        raise ValueError(f"plddt must have shape ({m},), got {plddt.shape}")
    pred_ca = coords if ca_only else coords[:, 1]
    sc = float(kabsch_rmsd(jnp.asarray(pred_ca), jnp.asarray(ref[:, 1])))
    motif = np.asarray(task.motif_mask, bool)[design]
    if motif.any():
        if ca_only:
            mr = float(kabsch_rmsd(jnp.asarray(pred_ca[motif]), jnp.asarray(ref[motif, 1])))
        else:
            mr = float(
                kabsch_rmsd(
                    jnp.asarray(coords[motif].reshape(-1, 3)),
                    jnp.asarray(ref[motif].reshape(-1, 3)),
                )
            )
    else:
        mr = 0.0
    mean_plddt = float(plddt.mean())
    return {
        "scrmsd": sc,
        "motif_rmsd": mr,
        "plddt": mean_plddt,
        "success": bool(sc < max_scrmsd and mr < max_motif_rmsd and mean_plddt > min_plddt),
    }
