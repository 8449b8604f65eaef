"""Typed configuration of the AlgoTrace experiment (tiny model on TSP / graph-navigation traces).

One frozen :class:`AlgoTraceConfig`; presets in :data:`PRESETS` (``tiny`` for tests, ``demo``
for a short CPU run, ``reduced`` for the measured tables of ``docs/algotrace.md``, ``default``
for the full protocol); :func:`load_config` also reads a JSON or TOML file whose keys mirror the
dataclass, optionally from a preset under ``base``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from fidia_jax import config as config_lib
from fidia_jax.errors import ConfigError
from fidia_jax.projects.algotrace.traces import ALGOTRACE_PRIMITIVES

__all__ = ["AlgoTraceConfig", "PRESETS", "get_config", "load_config"]


@dataclasses.dataclass(frozen=True)
class AlgoTraceConfig:
    """One AlgoTrace run: data, model, training, clustering, function vectors, injection.

    Attributes:
      seed: data from ``default_rng(seed)`` (train) and ``seed + 1`` (evaluation); model
        initialisation, minibatches, k-means and sampling from ``key(seed)``.
      n_train, n_eval: training / evaluation sequences (both tasks, all strategies). The first
        half of the evaluation rows builds the vectors, the second half gives the prompts.
      distinct_eval: no evaluation problem equals a training problem (a repeat is drawn again
        from the evaluation generator; default, since 2026-12-05). ``False``: the two sets are
        drawn independently, and in the small problem space a few evaluation problems recur
        (none in ``tiny`` / ``demo``, 1 of 192 in ``reduced``, 6 of 512 in ``default``).
      n_nodes, n_edges: instance size (cities / nodes; NAV edges).
      dim, n_layers, n_heads, n_kv_heads, hidden_dim, max_seq_len: the :class:`Llama`
        (``n_heads != n_kv_heads``: grouped-query attention).
      steps, batch_size, learning_rate: Adam training on the trace tokens (prompt tokens have
        loss weight 0: the coordinates are random).
      cluster_layer: the layer whose ``resid_post`` is clustered (``-1`` = last).
      n_clusters: k-means clusters (the paper: 50).
      n_meta: spectral meta-clusters of the cluster transition graph.
      max_points: trace tokens clustered at most (whole sequences, in order).
      n_random: random clusterings (same sizes, permuted) for the chance baseline.
      top_k_heads: heads (by indirect effect) summed into each function vector.
      ie_rows: evaluation rows on which indirect effects are measured.
      inject_layer: residual stream (entering this block) where vectors are added.
      inject_scales: multipliers of the injected vectors (each is a separate injection run).
      fv_positions: where mean head outputs are taken: ``"tokens"`` (the primitive's own tokens,
        the paper's description) and/or ``"onset"`` (the token before each of its keywords).
        The first (position, scale) pair is the headline ``injection`` of the results.
      n_prompts: prompts sampled per condition (both tasks, from the second half of eval rows).
      max_new_tokens: generated tokens per prompt.
      temperature: sampling temperature (the same key in every condition: common random numbers).
      compose_pairs: ``"a+b"`` primitive pairs whose summed vectors are injected.
      checkpoint: a released model (GGUF file or Hugging Face directory, see
        ``docs/lm_checkpoints.md``); when set, ``train`` runs the method on that model's text
        (:func:`.checkpoint.checkpoint_algotrace`) instead of training the small one; the
        small-model fields above are then unused except ``seed``, ``n_nodes``, ``n_edges``,
        ``n_clusters``, ``n_random``, ``top_k_heads`` and ``cluster_layer`` (``-1``: the
        middle layer).
      checkpoint_max_seq_len: the loaded model's ``max_seq_len``; a document, or a prompt plus
        ``checkpoint_new_tokens``, longer than it (or than the checkpoint's trained context) is
        a ``DataError`` before the weights load.
      checkpoint_docs, checkpoint_shots: teacher-forced documents (clusters and vectors) and
        the solved examples in each.
      checkpoint_ie_docs: documents on which heads are ranked (attribution patching).
      checkpoint_prompts, checkpoint_new_tokens: injection prompts (one solved example + a new
        header) and the greedy tokens generated for each.
      checkpoint_inject_layer, checkpoint_inject_scale: where (``-1``: ``n_layers // 3``) and
        how strongly the vectors are added.
      checkpoint_batch: documents per forward pass.
    """

    seed: int = 0
    n_train: int = 6000
    n_eval: int = 512
    distinct_eval: bool = True
    n_nodes: int = 4
    n_edges: int = 5
    dim: int = 64
    n_layers: int = 3
    n_heads: int = 4
    n_kv_heads: int = 2
    hidden_dim: int = 128
    max_seq_len: int = 80
    steps: int = 2000
    batch_size: int = 32
    learning_rate: float = 3e-3
    # data parallelism of the training steps (fit_llama(mesh=)): the most devices <= num_devices
    # (0: all) that divide batch_size; parameters replicated (issue 40)
    num_devices: int = 0
    cluster_layer: int = -1
    n_clusters: int = 50
    n_meta: int = 5
    max_points: int = 4000
    n_random: int = 5
    top_k_heads: int = 3
    ie_rows: int = 64
    inject_layer: int = 1
    inject_scales: tuple[float, ...] = (1.0, 3.0)
    fv_positions: tuple[str, ...] = ("tokens", "onset")
    n_prompts: int = 256
    max_new_tokens: int = 52
    temperature: float = 1.0
    compose_pairs: tuple[str, ...] = ("distance+verify", "compare+path", "nearest+verify")
    checkpoint: str = ""
    checkpoint_max_seq_len: int = 512
    checkpoint_docs: int = 24
    checkpoint_shots: int = 2
    checkpoint_ie_docs: int = 2
    checkpoint_prompts: int = 24
    checkpoint_new_tokens: int = 48
    checkpoint_inject_layer: int = -1
    checkpoint_inject_scale: float = 1.0
    checkpoint_batch: int = 4

    def __post_init__(self) -> None:
        for name in (
            "n_train",
            "n_eval",
            "steps",
            "batch_size",
            "n_clusters",
            "n_meta",
            "max_points",
            "n_random",
            "ie_rows",
            "n_prompts",
            "max_new_tokens",
        ):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.n_eval < 4:
            raise ConfigError(
                f"n_eval must be >= 4 (vectors and prompts split it), got {self.n_eval}"
            )
        if not -self.n_layers <= self.cluster_layer < self.n_layers:
            raise ConfigError(
                f"cluster_layer must be in [-{self.n_layers}, {self.n_layers}), got {self.cluster_layer}"
            )
        if not 0 <= self.inject_layer < self.n_layers:
            raise ConfigError(
                f"inject_layer names layer {self.inject_layer}, but the model has {self.n_layers} "
                f"layers (0..{self.n_layers - 1})"
            )
        if not 1 <= self.top_k_heads <= self.n_layers * self.n_heads:
            raise ConfigError(
                f"top_k_heads must be in [1, {self.n_layers * self.n_heads}], got {self.top_k_heads}"
            )
        if not self.inject_scales or not self.fv_positions:
            raise ConfigError("inject_scales and fv_positions must not be empty")
        bad = [x for x in self.fv_positions if x not in ("tokens", "onset")]
        if bad:
            raise ConfigError(
                f"fv_positions must name 'tokens' or 'onset', got {self.fv_positions}"
            )
        if not self.temperature > 0 or not self.learning_rate > 0:
            raise ConfigError("temperature and learning_rate must be > 0")
        if self.checkpoint:
            for name in ("checkpoint_docs", "checkpoint_shots", "checkpoint_ie_docs",
                         "checkpoint_new_tokens", "checkpoint_batch"):  # fmt: skip
                if getattr(self, name) < 1:
                    raise ConfigError(f"{name} must be >= 1, got {getattr(self, name)}")
            if self.checkpoint_prompts < 2 or self.checkpoint_max_seq_len < 64:
                raise ConfigError(
                    "checkpoint_prompts must be >= 2 and checkpoint_max_seq_len >= 64, got "
                    f"{self.checkpoint_prompts}, {self.checkpoint_max_seq_len}"
                )
            if not self.checkpoint_inject_scale > 0:
                raise ConfigError(
                    f"checkpoint_inject_scale must be > 0, got {self.checkpoint_inject_scale}"
                )
        for pair in self.compose_pairs:
            parts = pair.split("+")
            if (
                len(parts) != 2
                or any(p not in ALGOTRACE_PRIMITIVES for p in parts)
                or parts[0] == parts[1]
            ):
                raise ConfigError(
                    f"compose_pairs entries must be 'a+b' with two different primitives of "
                    f"{ALGOTRACE_PRIMITIVES}, got {pair!r}"
                )


PRESETS: dict[str, dict[str, Any]] = {
    # Unit tests (compilation-bound): a 2-layer model, a few steps, tiny clustering and sampling.
    "tiny": {
        "n_train": 64,
        "n_eval": 16,
        "dim": 32,
        "n_layers": 2,
        "hidden_dim": 64,
        "steps": 5,
        "batch_size": 8,
        "n_clusters": 6,
        "max_points": 200,
        "n_random": 2,
        "top_k_heads": 2,
        "ie_rows": 4,
        "inject_layer": 1,
        "n_prompts": 4,
        "max_new_tokens": 8,
        "compose_pairs": ("distance+verify",),
        "inject_scales": (1.0,),
    },
    # `fidia-jax algotrace demo` and the notebook: under 3 minutes on an idle 2-core CPU (the
    # `reduced` run cut to 300 steps, 64 + 64 evaluation traces, indirect effects on 32 rows, and
    # one variant: onset vectors at scale 1, the one that works; `reduced` compares all four).
    "demo": {
        "n_train": 1000,
        "n_eval": 128,
        "steps": 300,
        "max_points": 1500,
        "n_prompts": 64,
        "ie_rows": 32,
        "inject_scales": (1.0,),
        "fv_positions": ("onset",),
    },
    # The reduced protocol measured in docs/algotrace.md (~6 min CPU; the `demo` preset before
    # 2026-12-01): `python benchmarks/algotrace.py --config reduced`.
    "reduced": {"n_train": 2000, "n_eval": 192, "steps": 1000, "max_points": 2000, "n_prompts": 96},
    # docs/algotrace.md (`python benchmarks/algotrace.py`).
    "default": {},
}


CONFIGS = config_lib.ConfigSet(AlgoTraceConfig, PRESETS)
get_config, load_config = CONFIGS.get_config, CONFIGS.load_config
config_from_dict = CONFIGS.config_from_dict
