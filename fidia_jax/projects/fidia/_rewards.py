"""FIDIA composite rewards: gate(hard constraints) * sum_c w_c z_c - penalties.

They live in the FIDIA driver because the designability and function terms need a ProteinMPNN
judge (:mod:`fidia_jax.models`); the judge-free sequence terms and the structure criteria they
build on are primitives of :mod:`fidia_jax.protein`.

For one :class:`fidia_jax.protein.DesignTask` and a batch of sequences ``(N, L)``:

1. **Raw components** (higher is better), each a function of (task, sequence):

   * ``designability``: mean log-likelihood (nats/residue, designable positions) under a frozen
     ProteinMPNN judge ensemble that excludes the policy's start (:class:`Judge`); omitted when
     no judge is given.
   * ``sse``: mean log secondary-structure propensity of each residue for its backbone SSE
     (biotite P-SEA on CA; Chou-Fasman-type table).
   * ``burial``: burial-aware hydrophobic patterning from virtual-Cβ neighbour counts.
   * ``developability``: minus a sum of hinge penalties on Biopython ProtParam descriptors
     (instability index, GRAVY, net charge at pH 7), homopolymer runs, low complexity and unpaired
     Cys (details in :class:`RewardConfig`).
   * ``function`` (enzyme / binding tasks with partner chains and a judge): mean log-likelihood of
     the designable interface/pocket residues with the partner chains visible minus apo.

2. **Standardisation** per backbone: ``z_c = (x_c - mean_c) / std_c`` with statistics of the
   reference policy's samples (:func:`fit_standardizer`), fixed before any comparison.
3. **Gate**: motif identities kept at every fixed position and no unknown token (``X``) at a
   designed position. A violating sample gets ``gate_value`` instead of the weighted sum (a bare
   ``0 * sum`` would rank violators above valid samples with a negative sum; reconstructed).
4. **Penalties** (not standardised, subtracted): epitope tasks pay per N-glycosylation sequon
   ``N-X-S/T`` (``X != P``) in the designed chains and per Cys within ``cys_radius`` Å (Cβ-Cβ) of
   an epitope (motif) residue.

The sequence terms are jnp functions vmapped over the batch (:func:`sequence_terms`); ProtParam
and the judge run on the host. Everything not from the FIDIA abstract (thresholds, hinge
shapes, weights) is our reconstruction and is stated as such in ``docs/fidia_rewards.md``.

Success criteria: with a :class:`fidia_jax.protein.StructurePredictor` (AlphaFold2 with the
user's weights, :class:`fidia_jax.protein.AlphaFoldPredictor`), every sample's designed chains
are folded and :func:`fidia_jax.protein.structure_success` applies the real criteria (scRMSD
< 2 Å, motif RMSD < 1 Å, mean pLDDT > 70): ``passes`` needs the gate, no penalty and a passing
fold, and with ``RewardConfig.structure_gate`` a failing fold also closes the gate (the sample's
reward is ``gate_value``); ``RewardResult.criteria == "structure"``. Without a predictor
``passes`` comes from :class:`ProxyThresholds` and ``criteria == "proxy"``.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from fidia_jax.errors import ConfigError
from fidia_jax.projects.fidia._judge import Judge, mean_log_likelihood
from fidia_jax.protein import (
    ALPHABET,
    DesignTask,
    StructurePredictor,
    burial_score,
    cb_neighbor_counts,
    decode_tokens,
    epitope_cys_count,
    homopolymer_max_run,
    join_chains,
    low_complexity_fraction,
    protparam_metrics,
    secondary_structure,
    sequon_count,
    sse_score,
    structure_success,
    unpaired_cys_count,
    virtual_cb,
)

__all__ = [
    "COMPONENTS",
    "ProxyThresholds",
    "RewardBreakdown",
    "RewardConfig",
    "RewardFeatures",
    "RewardModel",
    "RewardResult",
    "Standardizer",
    "combine_rewards",
    "developability_score",
    "fit_standardizer",
    "make_reward_features",
    "sequence_terms",
    "standardize",
]

#: Standardised components, in a fixed order.
COMPONENTS = ("designability", "sse", "burial", "developability", "function")
_X = ALPHABET.index("X")


def _default_weights() -> dict[str, float]:
    return {"designability": 1.0, "sse": 0.5, "burial": 0.5, "developability": 0.5, "function": 0.5}


@dataclasses.dataclass(frozen=True)
class ProxyThresholds:
    """Pass criteria used when no structure predictor is available (proxies, not folding).

    A sample passes when the gate holds, it pays no penalty, its judge log-likelihood is at least
    ``min_designability`` (nats/residue; only checked with a judge) and its instability index is
    at most ``max_instability``.
    """

    min_designability: float = -1.5
    max_instability: float = 40.0


@dataclasses.dataclass(frozen=True)
class RewardConfig:
    """Weights and constants of the composite reward (fixed before any comparison).

    Attributes:
      weights: per-component weight ``w_c`` (keys from :data:`COMPONENTS`); absent components
        (no judge, no partner) are skipped.
      sequon_penalty: penalty per N-X-S/T sequon (epitope tasks).
      epitope_cys_penalty: penalty per Cys within ``cys_radius`` of the epitope (epitope tasks).
      gate_value: reward of a sample that breaks a hard constraint.
      cys_radius: Å, Cβ-Cβ radius of the epitope Cys rule (10).
      disulfide_radius: Å, Cβ-Cβ distance up to which two Cys count as pairable (4.5).
      burial_radius: Å, neighbour-count radius around each virtual Cβ (10).
      burial_low, burial_high: neighbour counts mapped to burial 0 and 1 (linear in between).
      interface_radius: Å, Cβ-Cβ radius defining interface/pocket residues (binding tasks).
      instability_max, gravy_max, min_abs_charge, homopolymer_max, low_complexity_window,
        low_complexity_bits: developability hinges; ``developability = -(relu(II - 40) / 10 +
        relu(GRAVY - 0) / 0.5 + relu(2 - |q7|) / 2 + relu(run - 4) / 2 + 5 * lowc + 0.5 * cys_u)``.
      std_floor: lower bound of the standardiser's std (raw units).
      thresholds: :class:`ProxyThresholds`.
      structure_gate: with a structure predictor, a sample whose fold fails
        :func:`~fidia_jax.protein.structure_success` gets ``gate_value`` too.
      fold_partners: with a structure predictor, fold the task's partner chains (their native
        sequence, after the designed chains, each its own ``:`` chain) with the designs: a
        binder folded with its target, for a multimer model (``model_*_multimer_v3``). The
        success criteria stay on the designed chains; ipTM (when the predictor gives it) is
        the ``fold_iptm`` diagnostic.
    """

    weights: Mapping[str, float] = dataclasses.field(default_factory=_default_weights)
    sequon_penalty: float = 1.0
    epitope_cys_penalty: float = 1.0
    gate_value: float = -5.0
    cys_radius: float = 10.0
    disulfide_radius: float = 4.5
    burial_radius: float = 10.0
    burial_low: float = 10.0
    burial_high: float = 20.0
    interface_radius: float = 10.0
    instability_max: float = 40.0
    gravy_max: float = 0.0
    min_abs_charge: float = 2.0
    homopolymer_max: int = 4
    low_complexity_window: int = 12
    low_complexity_bits: float = 2.2
    std_floor: float = 1e-2
    thresholds: ProxyThresholds = ProxyThresholds()
    structure_gate: bool = True
    fold_partners: bool = False

    def __post_init__(self):
        unknown = set(self.weights) - set(COMPONENTS)
        if unknown:
            raise ConfigError(
                f"unknown reward component(s) {sorted(unknown)}; expected {COMPONENTS}"
            )
        if not self.burial_high > self.burial_low:
            raise ConfigError("burial_high must exceed burial_low")
        if self.std_floor <= 0:
            raise ConfigError("std_floor must be > 0")


class RewardFeatures(NamedTuple):
    """Per-task arrays the jnp sequence terms need (a pytree; built once per backbone).

    Attributes:
      designable: ``(L,)`` float32, 1 = designed and not fixed.
      design: ``(L,)`` float32, 1 = present slot of a designed chain.
      fixed: ``(L,)`` bool, identity fixed by the motif.
      motif_tokens: ``(L,)`` int32 required tokens at ``fixed``.
      sse: ``(L,)`` int32 SSE codes (0 helix, 1 strand, 2 coil).
      burial: ``(L,)`` float32 in ``[0, 1]``.
      link1, link2: ``(L,)`` bool, slot ``i+1`` / ``i+2`` continues the same designed chain.
      epitope_near: ``(L,)`` float32, 1 = designable and within ``cys_radius`` of the epitope
        (epitope tasks only; zeros otherwise).
      pairable: ``(L, L)`` bool, disulfide-compatible Cβ pairs on designed chains.
      compact_idx: ``(M,)`` int32 slots of the designed chains (present residues), in order.
      compact_starts: ``(M,)`` bool, chain start or numbering gap in the compacted sequence.
      interface: ``(L,)`` bool, designable interface/pocket residues (binding tasks).
    """

    designable: np.ndarray
    design: np.ndarray
    fixed: np.ndarray
    motif_tokens: np.ndarray
    sse: np.ndarray
    burial: np.ndarray
    link1: np.ndarray
    link2: np.ndarray
    epitope_near: np.ndarray
    pairable: np.ndarray
    compact_idx: np.ndarray
    compact_starts: np.ndarray
    interface: np.ndarray


def make_reward_features(task: DesignTask, config: RewardConfig = RewardConfig()) -> RewardFeatures:
    """Host precomputation of everything sequence-independent for ``task`` (numpy)."""
    p = task.protein
    L = p.length
    present = np.asarray(p.mask) > 0
    design = np.asarray(task.design_mask, bool) & present
    designable = design & ~np.asarray(task.fixed_mask, bool)
    cb = np.asarray(virtual_cb(jnp.asarray(p.X)), np.float64)
    d = np.sqrt(((cb[:, None, :] - cb[None, :, :]) ** 2).sum(-1))
    counts = np.asarray(
        cb_neighbor_counts(jnp.asarray(p.X), jnp.asarray(p.mask), config.burial_radius)
    )
    burial = np.clip((counts - config.burial_low) / (config.burial_high - config.burial_low), 0, 1)
    sse = secondary_structure(p.X, p.mask, p.chain_encoding, p.residue_idx)

    ridx = np.asarray(p.residue_idx)
    chain = np.asarray(p.chain_encoding)

    def link(k):
        out = np.zeros(L, bool)
        if L > k:
            ok = (chain[k:] == chain[:-k]) & (ridx[k:] == ridx[:-k] + k) & design[k:] & design[:-k]
            # all intermediate slots present too
            for j in range(1, k):
                ok &= design[j : L - k + j]
            out[:-k] = ok
        return out

    motif = np.asarray(task.motif_mask, bool) & present
    near = np.zeros(L, bool)
    if task.kind == "epitope" and motif.any():
        near = designable & (d[:, motif].min(-1) < config.cys_radius)
    pairable = (
        (d < config.disulfide_radius) & ~np.eye(L, dtype=bool) & design[:, None] & design[None, :]
    )
    compact_idx = np.flatnonzero(design).astype(np.int32)
    starts = np.ones(compact_idx.size, bool)
    if compact_idx.size > 1:
        a, b = compact_idx[:-1], compact_idx[1:]
        starts[1:] = ~((chain[b] == chain[a]) & (ridx[b] == ridx[a] + 1))
    interface = np.zeros(L, bool)
    partner = np.isin(np.asarray(p.chain_id), task.partner_chains) & present
    if partner.any():
        interface = designable & (d[:, partner].min(-1) < config.interface_radius)
    return RewardFeatures(
        designable=designable.astype(np.float32),
        design=design.astype(np.float32),
        fixed=np.asarray(task.fixed_mask, bool) & present,
        motif_tokens=np.asarray(task.motif_tokens, np.int32),
        sse=sse.astype(np.int32),
        burial=burial.astype(np.float32),
        link1=link(1),
        link2=link(2),
        epitope_near=near.astype(np.float32),
        pairable=pairable,
        compact_idx=compact_idx,
        compact_starts=starts,
        interface=interface,
    )


def sequence_terms(
    features: RewardFeatures, seq_L: jax.Array, config: RewardConfig = RewardConfig()
) -> dict[str, jax.Array]:
    """All jnp sequence terms of one sequence (vmap over a batch of sequences).

    Returns:
      Scalars: ``motif_ok`` (bool), ``no_unknown`` (bool), ``sse``, ``burial``, ``sequons``,
      ``epitope_cys``, ``unpaired_cys``, ``max_run``, ``low_complexity``.
    """
    f = features
    seq_L = jnp.asarray(seq_L, jnp.int32)
    tokens_M = seq_L[jnp.asarray(f.compact_idx)]
    return {
        "motif_ok": jnp.all(
            jnp.where(jnp.asarray(f.fixed), seq_L == jnp.asarray(f.motif_tokens), True)
        ),
        "no_unknown": jnp.all(jnp.where(jnp.asarray(f.designable) > 0, seq_L != _X, True)),
        "sse": sse_score(seq_L, jnp.asarray(f.sse), jnp.asarray(f.designable)),
        "burial": burial_score(seq_L, jnp.asarray(f.burial), jnp.asarray(f.designable)),
        "sequons": sequon_count(seq_L, jnp.asarray(f.link1), jnp.asarray(f.link2)),
        "epitope_cys": epitope_cys_count(seq_L, jnp.asarray(f.epitope_near)),
        "unpaired_cys": unpaired_cys_count(seq_L, jnp.asarray(f.pairable), jnp.asarray(f.design)),
        "max_run": homopolymer_max_run(tokens_M, jnp.asarray(f.compact_starts)),
        "low_complexity": low_complexity_fraction(
            tokens_M, config.low_complexity_window, config.low_complexity_bits
        ),
    }


@functools.partial(jax.jit, static_argnames=("window", "bits"))
def _batched_terms(features: RewardFeatures, seqs_NL: jax.Array, window: int, bits: float):
    cfg = RewardConfig(low_complexity_window=window, low_complexity_bits=bits)
    return jax.vmap(lambda s: sequence_terms(features, s, cfg))(seqs_NL)


def _relu(x):
    return np.maximum(x, 0.0)


def developability_score(
    metrics: Mapping[str, np.ndarray], config: RewardConfig = RewardConfig()
) -> np.ndarray:
    """``-(hinge penalties)`` from the developability descriptors (see :class:`RewardConfig`)."""
    m = {k: np.asarray(v, np.float64) for k, v in metrics.items()}
    pen = (
        _relu(m["instability"] - config.instability_max) / 10.0
        + _relu(m["gravy"] - config.gravy_max) / 0.5
        + _relu(config.min_abs_charge - np.abs(m["charge_ph7"])) / 2.0
        + _relu(m["max_run"] - config.homopolymer_max) / 2.0
        + 5.0 * m["low_complexity"]
        + 0.5 * m["unpaired_cys"]
    )
    return -pen


class Standardizer(NamedTuple):
    """Per-component mean / std of the reference policy's samples on one backbone."""

    mean: dict[str, float]
    std: dict[str, float]


def fit_standardizer(
    ref_components: Mapping[str, np.ndarray], *, std_floor: float = 1e-2
) -> Standardizer:
    """Fits ``z = (x - mean) / max(std, std_floor)`` on reference samples.

    Args:
      ref_components: ``{name: (N,) raw values}`` of the reference policy's samples (N >= 2).
      std_floor: lower bound of the std (raw units), so a constant component does not explode.

    Raises:
      ValueError: fewer than 2 samples or a non-finite value.
    """
    mean, std = {}, {}
    for k, v in ref_components.items():
        v = np.asarray(v, np.float64)
        if v.ndim != 1 or v.shape[0] < 2:
            raise ValueError(
                f"fit_standardizer: component {k!r} needs shape (N>=2,), got {v.shape}"
            )
        if not np.all(np.isfinite(v)):
            raise ValueError(f"fit_standardizer: component {k!r} holds non-finite values")
        mean[k] = float(v.mean())
        std[k] = float(max(v.std(ddof=1), std_floor))
    return Standardizer(mean, std)


def standardize(components: Mapping[str, np.ndarray], stats: Standardizer) -> dict[str, np.ndarray]:
    """``{name: (x - mean) / std}`` for every component present in both.

    Values are not checked (the statistics are, by :func:`fit_standardizer`): a NaN component
    value stays NaN in its z-score (NaN in, NaN out), never replaced.

    Raises:
      ValueError: a component has no statistics.
    """
    missing = set(components) - set(stats.mean)
    if missing:
        raise ValueError(f"standardize: no statistics for component(s) {sorted(missing)}")
    return {
        k: ((np.asarray(v, np.float64) - stats.mean[k]) / stats.std[k]).astype(np.float32)
        for k, v in components.items()
    }


def combine_rewards(
    z: Mapping[str, jax.Array],
    weights: Mapping[str, float],
    gate_n: jax.Array,
    penalty_n: jax.Array,
    gate_value: float = -5.0,
) -> jax.Array:
    """``where(gate, sum_c w_c z_c, gate_value) - penalty`` (pure jnp, shape ``(N,)``)."""
    gate_n = jnp.asarray(gate_n, bool)
    total = jnp.zeros(gate_n.shape, jnp.float32)
    for k, v in z.items():
        total = total + jnp.float32(weights.get(k, 0.0)) * jnp.asarray(v, jnp.float32)
    return jnp.where(gate_n, total, jnp.float32(gate_value)) - jnp.asarray(penalty_n, jnp.float32)


class RewardBreakdown(NamedTuple):
    """Raw reward parts of a batch of ``N`` sequences.

    Attributes:
      components: ``{name: (N,) float}`` raw components (higher is better).
      diagnostics: ``{name: (N,)}`` descriptors (ProtParam values, counts, ...).
      gate: ``(N,)`` bool, hard constraints hold.
      penalty: ``(N,)`` float, summed function penalties.
    """

    components: dict[str, np.ndarray]
    diagnostics: dict[str, np.ndarray]
    gate: np.ndarray
    penalty: np.ndarray


class RewardResult(NamedTuple):
    """Output of :meth:`RewardModel.__call__`.

    Attributes:
      total: ``(N,)`` float32 composite reward.
      z: ``{name: (N,)}`` standardised components.
      breakdown: :class:`RewardBreakdown`.
      passes: ``(N,)`` bool success flags under ``criteria``.
      criteria: ``"proxy"`` (thresholds of :class:`ProxyThresholds`; no structure predictor) or
        ``"structure"`` (gate, no penalty and :func:`structure_success` on the predictor's fold).
    """

    total: np.ndarray
    z: dict[str, np.ndarray]
    breakdown: RewardBreakdown
    passes: np.ndarray
    criteria: str


@dataclasses.dataclass(frozen=True, eq=False)
class RewardModel:
    """The composite reward of one task (build with :meth:`build`, then :meth:`fit`).

    Example:
      >>> rm = RewardModel.build(task, RewardConfig(), judge=Judge.from_config())
      >>> rm = rm.fit(reference_samples_NL)          # standardiser from the reference policy
      >>> rm(policy_samples_NL).total                 # (N,) rewards
    """

    task: DesignTask
    config: RewardConfig
    features: RewardFeatures
    judge: Judge | None = None
    stats: Standardizer | None = None
    predictor: StructurePredictor | None = None

    @classmethod
    def build(
        cls,
        task: DesignTask,
        config: RewardConfig = RewardConfig(),
        judge: Judge | None = None,
        predictor: StructurePredictor | None = None,
    ) -> RewardModel:
        """Precomputes the task features. With a ``predictor``, ``passes`` uses the real
        structure criteria (:func:`structure_success`) instead of the proxy thresholds."""
        return cls(
            task=task,
            config=config,
            features=make_reward_features(task, config),
            judge=judge,
            predictor=predictor,
        )

    @property
    def component_names(self) -> tuple[str, ...]:
        names = ["sse", "burial", "developability"]
        if self.judge is not None:
            names.insert(0, "designability")
            if self.features.interface.any():
                names.append("function")
        return tuple(n for n in COMPONENTS if n in names)

    def _check(self, sequences_NL) -> np.ndarray:
        seqs = np.asarray(sequences_NL)
        if seqs.ndim != 2 or seqs.shape[1] != self.task.length:
            raise ValueError(f"sequences must have shape (N, {self.task.length}), got {seqs.shape}")
        if not np.issubdtype(seqs.dtype, np.integer):
            raise ValueError(f"sequences must be integer tokens, got {seqs.dtype}")
        if seqs.size and (seqs.min() < 0 or seqs.max() >= len(ALPHABET)):
            raise ValueError(f"tokens must lie in [0, {len(ALPHABET)})")
        return seqs.astype(np.int32)

    def breakdown(self, sequences_NL) -> RewardBreakdown:
        """Raw components, diagnostics, gate and penalties of ``(N, L)`` int32 sequences."""
        seqs = self._check(sequences_NL)
        cfg = self.config
        terms = {
            k: np.asarray(v)
            for k, v in _batched_terms(
                self.features, jnp.asarray(seqs), cfg.low_complexity_window, cfg.low_complexity_bits
            ).items()
        }
        design = self.features.design > 0
        pp = [protparam_metrics(decode_tokens(s, design)) for s in seqs]
        diag = {
            k: np.array([m[k] for m in pp], np.float32)
            for k in ("instability", "gravy", "pi", "charge_ph7")
        }
        for k in ("sequons", "epitope_cys", "unpaired_cys", "max_run", "low_complexity"):
            diag[k] = terms[k]
        comps = {
            "sse": terms["sse"].astype(np.float32),
            "burial": terms["burial"].astype(np.float32),
            "developability": developability_score(diag, cfg).astype(np.float32),
        }
        if self.judge is not None:
            score_mask = self.features.designable > 0
            # One judge pass serves both terms: the holo likelihood of the function term is the
            # designability likelihood before averaging.
            holo = self.judge.token_log_likelihood(self.task.protein, seqs, score_mask)
            comps["designability"] = mean_log_likelihood(holo, self.task.protein, score_mask)
            if "function" in self.component_names:
                comps["function"] = self._function_term(seqs, holo)
        gate = terms["motif_ok"] & terms["no_unknown"]
        penalty = np.zeros(seqs.shape[0], np.float32)
        if self.task.kind == "epitope":
            penalty = (
                cfg.sequon_penalty * terms["sequons"]
                + cfg.epitope_cys_penalty * terms["epitope_cys"]
            ).astype(np.float32)
        diag["motif_ok"] = terms["motif_ok"]
        ordered = {k: comps[k] for k in self.component_names}
        return RewardBreakdown(ordered, diag, gate.astype(bool), penalty)

    def _function_term(self, seqs: np.ndarray, holo: np.ndarray) -> np.ndarray:
        """Holo minus apo mean log-likelihood on the designable interface residues (``holo``: the
        judge's ``(N, L)`` token log-likelihoods with the partner chains present)."""
        task = self.task
        iface = self.features.interface
        score_mask = self.features.designable > 0
        keep = np.isin(np.asarray(task.protein.chain_id), task.design_chains)
        apo_task = task.apo()
        apo = self.judge.token_log_likelihood(apo_task.protein, seqs[:, keep], score_mask[keep])
        n_if = max(int(iface.sum()), 1)
        return ((holo[:, iface].sum(-1) - apo[:, iface[keep]].sum(-1)) / n_if).astype(np.float32)

    def fit(self, ref_sequences_NL) -> RewardModel:
        """Returns a copy whose standardiser is fitted on the reference policy's samples."""
        comps = self.breakdown(ref_sequences_NL).components
        return dataclasses.replace(
            self, stats=fit_standardizer(comps, std_floor=self.config.std_floor)
        )

    def with_stats(self, stats: Standardizer) -> RewardModel:
        return dataclasses.replace(self, stats=stats)

    def __call__(self, sequences_NL, *, breakdown: RewardBreakdown | None = None) -> RewardResult:
        """Composite rewards of ``(N, L)`` sequences.

        Raises:
          ConfigError: the model has not been fitted (:meth:`fit`).
        """
        if self.stats is None:
            raise ConfigError("RewardModel has no standardiser; call .fit(reference_samples) first")
        br = breakdown if breakdown is not None else self.breakdown(sequences_NL)
        z = standardize(br.components, self.stats)
        gate = br.gate
        if self.predictor is not None:
            folds = self.fold(sequences_NL)
            br = br._replace(diagnostics={**br.diagnostics, **folds})
            if self.config.structure_gate:
                gate = gate & folds["fold_success"]
        total = np.asarray(
            combine_rewards(z, self.config.weights, gate, br.penalty, self.config.gate_value)
        )
        if self.predictor is not None:
            passes = br.gate & (br.penalty <= 0) & br.diagnostics["fold_success"]
            return RewardResult(total, z, br, passes, "structure")
        th = self.config.thresholds
        passes = br.gate & (br.penalty <= 0) & (br.diagnostics["instability"] <= th.max_instability)
        if "designability" in br.components:
            passes &= br.components["designability"] >= th.min_designability
        return RewardResult(total, z, br, passes, "proxy")

    def fold_sequences(self, sequences_NL) -> list[str]:
        """The predictor's input for each sequence: the designed chains' present residues, one
        letter each, chains joined with ``:`` (in task order); with ``config.fold_partners``,
        then the partner chains' native residues (present ones, in ``task.partner_chains``
        order), each its own chain."""
        seqs = self._check(sequences_NL)
        idx = self.features.compact_idx
        chain = np.asarray(self.task.protein.chain_encoding)[idx]
        lengths = np.diff(np.flatnonzero(np.r_[True, chain[1:] != chain[:-1], True]))
        texts = [join_chains(decode_tokens(s[idx]), lengths) for s in seqs]
        partners = self._partner_text()
        return [f"{t}:{partners}" for t in texts] if partners else texts

    def _partner_text(self) -> str:
        if not (self.config.fold_partners and self.task.partner_chains):
            return ""
        prot = self.task.protein
        chain_id = np.asarray(prot.chain_id)
        present = np.asarray(prot.mask) > 0
        native = np.asarray(prot.S)
        parts = []
        for c in self.task.partner_chains:
            sel = (chain_id == c) & present
            if sel.any():
                parts.append(decode_tokens(native[sel]))
        return ":".join(parts)

    def fold(self, sequences_NL) -> dict[str, np.ndarray]:
        """Folds every sequence with the predictor and applies
        :func:`~fidia_jax.protein.structure_success`.

        Returns:
          ``{"fold_scrmsd", "fold_motif_rmsd", "fold_plddt"}`` ``(N,)`` float32 (Å, Å, mean
          pLDDT, all over the designed chains) and ``"fold_success"`` ``(N,)`` bool; with
          partner chains folded or a predictor that gives ipTM, ``"fold_iptm"`` ``(N,)``
          float32 (NaN where the predictor gave none, e.g. a monomer model).

        Raises:
          ConfigError: the model has no predictor.
        """
        if self.predictor is None:
            raise ConfigError("RewardModel.fold: no structure predictor was given")
        texts = self.fold_sequences(sequences_NL)
        full = getattr(self.predictor, "fold_many", None)
        if callable(full):  # AlphaFold2 (or its cache): coordinates, pLDDT and ipTM
            folds = full(texts)
            preds = [(f.coords, f.plddt) for f in folds]
            iptm = [getattr(f, "iptm", None) for f in folds]
        else:
            many = getattr(self.predictor, "predict_many", None)
            preds = many(texts) if callable(many) else [self.predictor.predict(t) for t in texts]
            iptm = [None] * len(texts)
        m = self.features.compact_idx.size  # the designed residues come first
        rows = [structure_success(self.task, c[:m], p[:m]) for c, p in preds]
        out = {
            f"fold_{k}": np.array([r[k] for r in rows], np.float32)
            for k in ("scrmsd", "motif_rmsd", "plddt")
        }
        out["fold_success"] = np.array([r["success"] for r in rows], bool)
        if self._partner_text() or any(x is not None for x in iptm):
            out["fold_iptm"] = np.array([np.nan if x is None else x for x in iptm], np.float32)
        return out
