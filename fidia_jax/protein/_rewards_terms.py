"""Sequence-level reward terms: jnp functions of (per-task features, one sequence) + ProtParam.

Every jnp function here takes one sequence ``seq_L`` (``(L,)`` int32 tokens in
:data:`~fidia_jax.protein.ALPHABET`) and per-task arrays, returns a scalar, and is batched with
``jax.vmap`` over sequences. :func:`protparam_metrics` is a host (numpy / Biopython) function.

Tables (facts, cited):

* Secondary-structure propensities: relative frequencies of each residue in α helix, β sheet and
  reverse turns, Chou-Fasman-type parameters as tabulated in T. E. Creighton, *Proteins:
  Structures and Molecular Properties*, 2nd ed. (W. H. Freeman, 1992), p. 256 (reproduced in
  Berg, Tymoczko & Stryer, *Biochemistry*, Table 2.3). Coil positions use the turn column.
  Original method: Chou & Fasman, Biochemistry 13:222-245 (1974).
* Hydropathy: Kyte & Doolittle, J. Mol. Biol. 157:105-132 (1982) (the scale Biopython's GRAVY
  uses).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from fidia_jax.errors import needs_extra
from fidia_jax.protein._types import ALPHABET

__all__ = [
    "HYDROPATHY_KD",
    "SSE_PROPENSITY",
    "burial_score",
    "decode_tokens",
    "epitope_cys_count",
    "homopolymer_max_run",
    "low_complexity_fraction",
    "protparam_metrics",
    "sequon_count",
    "sse_score",
    "unpaired_cys_count",
]

_TOK = {a: i for i, a in enumerate(ALPHABET)}

# (helix, strand, turn/coil) relative frequencies; Creighton (1992) p. 256.
_PROPENSITY = {
    "E": (1.59, 0.52, 1.01), "A": (1.41, 0.72, 0.82), "L": (1.34, 1.22, 0.57),
    "M": (1.30, 1.14, 0.52), "Q": (1.27, 0.98, 0.84), "K": (1.23, 0.69, 1.07),
    "R": (1.21, 0.84, 0.90), "H": (1.05, 0.80, 0.81), "V": (0.90, 1.87, 0.41),
    "I": (1.09, 1.67, 0.47), "Y": (0.74, 1.45, 0.76), "C": (0.66, 1.40, 0.54),
    "W": (1.02, 1.35, 0.65), "F": (1.16, 1.33, 0.59), "T": (0.76, 1.17, 0.96),
    "G": (0.43, 0.58, 1.77), "N": (0.76, 0.48, 1.34), "P": (0.34, 0.31, 1.32),
    "S": (0.57, 0.96, 1.22), "D": (0.99, 0.39, 1.24),
}  # fmt: skip

#: ``(21, 3)`` float32 propensities (helix, strand, coil) indexed by token; ``X`` gets 0.5
#: everywhere (an unknown residue is never compatible).
SSE_PROPENSITY = np.array([_PROPENSITY.get(a, (0.5, 0.5, 0.5)) for a in ALPHABET], np.float32)

_KD = {
    "A": 1.8, "R": -4.5, "N": -3.5, "D": -3.5, "C": 2.5, "Q": -3.5, "E": -3.5, "G": -0.4,
    "H": -3.2, "I": 4.5, "L": 3.8, "K": -3.9, "M": 1.9, "F": 2.8, "P": -1.6, "S": -0.8,
    "T": -0.7, "W": -0.9, "Y": -1.3, "V": 4.2,
}  # fmt: skip

#: ``(21,)`` float32 Kyte-Doolittle hydropathy by token (``X`` = 0).
HYDROPATHY_KD = np.array([_KD.get(a, 0.0) for a in ALPHABET], np.float32)


def decode_tokens(seq_L, keep_L=None) -> str:
    """Token array -> one-letter string (optionally only where ``keep_L``)."""
    seq = np.asarray(seq_L)
    if keep_L is not None:
        seq = seq[np.asarray(keep_L, bool)]
    return "".join(ALPHABET[int(t)] for t in seq)


def _masked_mean(values_L, weights_L):
    return jnp.sum(values_L * weights_L) / jnp.maximum(jnp.sum(weights_L), 1.0)


def sse_score(seq_L: jax.Array, sse_L: jax.Array, weights_L: jax.Array) -> jax.Array:
    """Mean ``log P_sse(aa)`` over weighted positions (higher = residues suit their SSE).

    Args:
      seq_L: ``(L,)`` int32 tokens.
      sse_L: ``(L,)`` int32 SSE codes (0 helix, 1 strand, 2 coil).
      weights_L: ``(L,)`` float, which positions count (e.g. the designable mask).

    Returns:
      Scalar float32 (natural log of the relative-frequency propensity).
    """
    table = jnp.log(jnp.asarray(SSE_PROPENSITY))
    return _masked_mean(table[seq_L, sse_L], weights_L)


def burial_score(seq_L: jax.Array, burial_L: jax.Array, weights_L: jax.Array) -> jax.Array:
    """Burial-aware hydrophobic patterning: mean ``(2 b_i - 1) * KD(aa_i) / 4.5``.

    ``b_i`` in ``[0, 1]`` is the backbone-only burial (1 = core). Hydrophobic residues score
    positive when buried and negative when exposed; polar residues the other way round.

    Args:
      seq_L: ``(L,)`` int32 tokens.
      burial_L: ``(L,)`` float in ``[0, 1]``.
      weights_L: ``(L,)`` float position weights.

    Returns:
      Scalar float32 in ``[-1, 1]``.
    """
    kd = jnp.asarray(HYDROPATHY_KD)[seq_L] / 4.5
    return _masked_mean((2.0 * burial_L - 1.0) * kd, weights_L)


def sequon_count(seq_L: jax.Array, link1_L: jax.Array, link2_L: jax.Array) -> jax.Array:
    """Number of N-glycosylation sequons ``N-X-S/T`` (``X != P``).

    Args:
      seq_L: ``(L,)`` int32 tokens.
      link1_L: ``(L,)`` bool, slot ``i + 1`` is the next residue of the same designed chain.
      link2_L: ``(L,)`` bool, slot ``i + 2`` is the residue after that, same chain.

    Returns:
      Scalar int32.
    """
    nxt = jnp.roll(seq_L, -1)
    nxt2 = jnp.roll(seq_L, -2)
    hit = (
        (seq_L == _TOK["N"])
        & (nxt != _TOK["P"])
        & ((nxt2 == _TOK["S"]) | (nxt2 == _TOK["T"]))
        & link1_L
        & link2_L
    )
    return jnp.sum(hit.astype(jnp.int32))


def epitope_cys_count(seq_L: jax.Array, near_L: jax.Array) -> jax.Array:
    """Number of Cys at positions flagged ``near_L`` (e.g. designable, Cβ within 10 Å of the
    epitope)."""
    return jnp.sum(((seq_L == _TOK["C"]) & (near_L > 0)).astype(jnp.int32))


def unpaired_cys_count(seq_L: jax.Array, pairable_LL: jax.Array, weights_L: jax.Array) -> jax.Array:
    """Cys (on weighted positions) with no other Cys at a disulfide-compatible Cβ distance.

    Args:
      seq_L: ``(L,)`` int32 tokens.
      pairable_LL: ``(L, L)`` bool, ``i != j`` and Cβ-Cβ within the disulfide range.
      weights_L: ``(L,)`` 0/1, which positions are counted.

    Returns:
      Scalar int32.
    """
    cys = seq_L == _TOK["C"]
    has_partner = jnp.any(pairable_LL & cys[None, :], axis=-1)
    return jnp.sum((cys & ~has_partner & (weights_L > 0)).astype(jnp.int32))


def homopolymer_max_run(tokens_M: jax.Array, starts_M: jax.Array) -> jax.Array:
    """Longest run of one identical residue in a compacted sequence.

    Args:
      tokens_M: ``(M,)`` int32 tokens (e.g. the designed chains, present residues only).
      starts_M: ``(M,)`` bool, True where a new chain (or a numbering gap) starts: runs break.

    Returns:
      Scalar int32 (0 when ``M == 0``).
    """
    if tokens_M.shape[0] == 0:
        return jnp.zeros((), jnp.int32)
    same = jnp.concatenate([jnp.zeros((1,), bool), tokens_M[1:] == tokens_M[:-1]]) & ~starts_M

    def step(run, s):
        run = jnp.where(s, run + 1, 1)
        return run, run

    _, runs = jax.lax.scan(step, jnp.zeros((), jnp.int32), same)
    return jnp.max(runs)


def low_complexity_fraction(
    tokens_M: jax.Array, window: int = 12, min_entropy_bits: float = 2.2
) -> jax.Array:
    """Share of length-``window`` windows whose Shannon entropy (bits) is below the threshold.

    SEG-style low-complexity detector (Wootton & Federhen, Comput. Chem. 17:149 (1993): window
    12, trigger complexity 2.2 bits). Returns 0 when the sequence is shorter than the window.
    """
    m = tokens_M.shape[0]
    if m < window:
        return jnp.zeros((), jnp.float32)
    onehot = jax.nn.one_hot(tokens_M, len(ALPHABET), dtype=jnp.float32)
    csum = jnp.concatenate([jnp.zeros((1, len(ALPHABET))), jnp.cumsum(onehot, 0)], 0)
    counts = csum[window:] - csum[:-window]  # (M - w + 1, 21)
    p = counts / window
    ent = -jnp.sum(jnp.where(p > 0, p * jnp.log2(jnp.where(p > 0, p, 1.0)), 0.0), -1)
    return jnp.mean((ent < min_entropy_bits).astype(jnp.float32))


def protparam_metrics(sequence: str) -> dict[str, float]:
    """Biopython ProtParam descriptors of a one-letter sequence (host function).

    ``X`` (unknown) letters are removed first (ProtParam's tables cover the 20 standard residues).

    Returns:
      ``{"instability": instability index (< 40 = predicted stable; Guruprasad et al. 1990),
      "gravy": Kyte-Doolittle mean hydropathy, "pi": isoelectric point,
      "charge_ph7": net charge at pH 7.0}``; NaN-free (empty sequences give zeros).
    """
    with needs_extra("protein", "protparam_metrics"):
        from Bio.SeqUtils.ProtParam import ProteinAnalysis

    seq = "".join(c for c in sequence.upper() if c in _KD)
    if len(seq) < 2:
        return {"instability": 0.0, "gravy": 0.0, "pi": 7.0, "charge_ph7": 0.0}
    pa = ProteinAnalysis(seq)
    return {
        "instability": float(pa.instability_index()),
        "gravy": float(pa.gravy()),
        "pi": float(pa.isoelectric_point()),
        "charge_ph7": float(pa.charge_at_pH(7.0)),
    }
