"""ProteinMPNN design in three calls: :class:`Designer` (load), ``.sample``, ``.score``.

The object a ColabDesign user recognises (``mk_mpnn_model`` + ``prep_inputs`` +
``sample_parallel`` / ``score``), with sequences as strings. Every number equals the command
line's for the same options, because the same functions compute them: ``.sample`` is
:func:`~fidia_jax.projects.proteinmpnn.design.run_sample` (``fidia-jax proteinmpnn sample``)
without files, and ``.score`` is the scorer of
:func:`~fidia_jax.projects.proteinmpnn.design.run_score` (``fidia-jax proteinmpnn score``):
fixed and visible positions decoded first, the NLL averaged over the designed positions
(tested against the CLI in ``tests/projects/proteinmpnn/test_designer.py``).

Example::

    from fidia_jax.projects.proteinmpnn import Designer

    mpnn = Designer.from_pdb("1PRW.pdb", chains="A", fixed="A16-35", omit="CX")
    designs = mpnn.sample(8, temperature=0.1, seed=0)   # strings, scores, recovery
    mpnn.score(designs.sequences)                       # the same scorer as `score --fasta`
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from fidia_jax.errors import DataError

__all__ = ["DesignScores", "Designer", "Designs"]


@dataclasses.dataclass(frozen=True)
class Designs:
    """Sampled sequences (``Designer.sample``).

    Attributes:
      sequences: the designed chains of each sample, one-letter strings joined by ``/``.
      scores: ``(N,)`` mean NLL (nats) over the designed positions, each sample in its own
        decoding order (the FASTA ``score``).
      global_scores: ``(N,)`` the same over every residue with a complete backbone.
      recovery: ``(N,)`` fraction of designed positions equal to the native residue.
      temperatures: ``(N,)`` the temperature each sample was drawn at.
      native: the native designed chains (``/``-joined); ``native_score`` its mean NLL.
      summary: the command line's ``summary.json`` for the same call.
    """

    sequences: tuple[str, ...]
    scores: np.ndarray
    global_scores: np.ndarray
    recovery: np.ndarray
    temperatures: np.ndarray
    native: str
    native_score: float
    summary: dict[str, Any]


@dataclasses.dataclass(frozen=True)
class DesignScores:
    """Scores of given sequences (``Designer.score``).

    Attributes:
      scores: ``(N,)`` mean NLL (nats) over the designed positions, averaged over the decoding
        orders (each shared by every sequence; fixed and visible positions first).
      recovery: ``(N,)`` fraction of designed positions equal to the native residue.
    """

    scores: np.ndarray
    recovery: np.ndarray


class Designer:
    """A backbone, its design problem and a loaded ProteinMPNN (build with :meth:`from_pdb`).

    Attributes:
      setup: the :class:`fidia_jax.protein.DesignSetup` (structure, designed chains, motif).
      model: the loaded ``fidia_jax.models.ProteinMPNN``.
    """

    def __init__(self, setup, model, options: Mapping[str, Any]):
        self.setup, self.model, self._options = setup, model, dict(options)

    @classmethod
    def from_pdb(
        cls,
        path: str | os.PathLike | None = None,
        *,
        chains: str | Sequence[str] | None = None,
        design_chains: str | Sequence[str] | None = None,
        fixed: str | None = None,
        omit: str | None = "X",
        bias_aa: str | Mapping[str, float] | None = None,
        tie: str | Sequence[str] | None = None,
        homo_oligomer: bool = False,
        weights: str = "v_48_020",
        variant: str = "vanilla",
        bucket: int | None = 64,
        model=None,
    ) -> Designer:
        """Loads a structure and ProteinMPNN: the options of ``fidia-jax proteinmpnn sample``.

        Args:
          path: PDB / mmCIF file (``None``: the built-in 5PTI backbone).
          chains: chains to load (``"A"``, ``"A,B"``; ``None``: all).
          design_chains: chains to design (``None``: every loaded chain); the others are
            visible context.
          fixed: motif kept native, ``"A16-35"`` (author chain and residue numbers;
            ``--fixed``).
          omit: letters never sampled (``"CX"``; ``X`` is always added).
          bias_aa: global logit bias ``"W:1.5,C:-2"`` or ``{"W": 1.5}``.
          tie, homo_oligomer: tied positions (``--tie``, ``--homo-oligomer``).
          weights, variant: ProteinMPNN weights (``v_48_020``; a ``.pt`` path) and variant
            (``vanilla``, ``soluble``, ``ca``).
          bucket: pad the length to a multiple of this (the command line's ``--bucket``,
            default 64: one compiled program per bucket; the draws depend on the padded
            length, so the same bucket gives the command line's sequences); ``None``: none.
          model: an already loaded ``ProteinMPNN`` (skips loading ``weights``).

        Raises:
          DataError, ConfigError: as the command line (a missing file, an unknown chain or
            motif residue, bad letters, weights of another variant).
        """
        from fidia_jax.projects.proteinmpnn.design import load_model, prepare_structure

        setup = prepare_structure(path, chains, design_chains, fixed, variant)
        if model is None:
            model = load_model(weights, variant)
        options = {
            "pdb": path, "chains": chains, "design_chains": design_chains, "fixed": fixed,
            "omit_aas": omit, "bias_aa": bias_aa, "tie": tie, "homo_oligomer": homo_oligomer,
            "checkpoint": weights, "variant": variant, "bucket": bucket,
        }  # fmt: skip
        return cls(setup, model, options)

    def sample(
        self, n: int = 16, temperature: float | Sequence[float] = 0.1, seed: int = 0
    ) -> Designs:
        """``n`` sequences per temperature; equal to ``fidia-jax proteinmpnn sample`` with the
        same options, ``--num-samples n --temperature T --seed S``."""
        from fidia_jax.projects.proteinmpnn.design import run_sample

        summary = run_sample(None, **self._options, num_samples=n, temperature=temperature,
                             seed=seed, model=self.model, quiet=True, write=False)  # fmt: skip
        rows = summary["samples"]
        return Designs(
            sequences=tuple(r["sequence"] for r in rows),
            scores=np.array([r["score"] for r in rows]),
            global_scores=np.array([r["global_score"] for r in rows]),
            recovery=np.array([r["recovery"] for r in rows]),
            temperatures=np.array([r["temperature"] for r in rows]),
            native=summary["native"],
            native_score=summary["native_score"],
            summary=summary,
        )

    def score(
        self, sequences: str | Sequence[str], *, num_orders: int = 1, seed: int = 0
    ) -> DesignScores:
        """Scores sequences (the designed chains, ``/``-joined or not, or every loaded chain);
        equal to ``fidia-jax proteinmpnn score --fasta F --num-orders K --seed S``.

        Raises:
          DataError: a letter outside the alphabet or a length that fits no chain.
        """
        from fidia_jax.projects.proteinmpnn.constraints import tied_groups
        from fidia_jax.projects.proteinmpnn.design import score_tokens, tokens_from_sequence

        seqs = [sequences] if isinstance(sequences, str) else list(sequences)
        if not seqs:
            raise DataError("Designer.score: no sequences given")
        toks = np.stack(
            [
                tokens_from_sequence(self.setup, f"sequence {i}", s, "Designer.score")
                for i, s in enumerate(seqs)
            ]
        )
        p = self._options
        tied = tied_groups(p["tie"], p["homo_oligomer"], self.setup.protein)
        nll = score_tokens(self.model, self.setup, toks, num_orders=num_orders, seed=seed,
                           tied=tied, bucket=p["bucket"])  # fmt: skip
        d = self.setup.designed
        recovery = ((toks == self.setup.protein.S[None]) & d).sum(-1) / d.sum()
        return DesignScores(scores=nll, recovery=recovery)

    def log_probs(self, sequence: str | None = None, *, seed: int = 0) -> np.ndarray:
        """Teacher-forced log-probabilities ``(L, 21)`` of ``sequence`` (``None``: the native)
        in the decoding order ``score`` uses for ``seed`` (fixed and visible positions first);
        ``softmax`` of ColabDesign's ``get_logits``."""
        from fidia_jax.models import MPNNInputs, score
        from fidia_jax.projects.proteinmpnn.design import score_orders, tokens_from_sequence

        s = self.setup
        toks = (
            s.protein.S
            if sequence is None
            else tokens_from_sequence(s, "sequence", sequence, "Designer")
        )
        inputs = MPNNInputs.from_protein(s.protein, s.design_chains)
        (order,) = score_orders(s, 1, seed)  # the order score() uses for this seed
        res = score(self.model, inputs, np.asarray(toks)[None], np.asarray(order)[None])
        return np.asarray(res.log_probs)[0]

    def unconditional_probs(self) -> np.ndarray:
        """``(L, 21)`` probabilities with no sequence context (the original's
        ``--unconditional_probs_only``; full-backbone models)."""
        from fidia_jax.models import MPNNInputs
        from fidia_jax.projects.proteinmpnn.probs import unconditional_log_probs

        s = self.setup
        return np.exp(
            unconditional_log_probs(self.model, MPNNInputs.from_protein(s.protein, s.design_chains))
        )
