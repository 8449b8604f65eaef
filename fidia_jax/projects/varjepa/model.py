"""Feature-token transformer for tables and the JEPA / Var-JEPA modules built on it.

Every column of a row is one token: a numeric value ``x_j`` becomes ``x_j w_j + b_j`` (a linear
embedding per feature), a categorical id indexes that feature's own embedding table, whose id
``0`` is the UNKNOWN token (see :data:`~.data.UNKNOWN_CATEGORY`). A context, target or
predictor network is a small pre-LayerNorm transformer over the tokens a boolean mask keeps;
``n_reg`` learned regularisation tokens ([REG], T-JEPA) are prepended to every sequence and
dropped at the output.

* :class:`TabularJepa` with ``variational=False`` is the T-JEPA model (Thimonier et al.): context
  encoder, predictor; the target encoder is an EMA copy of the context encoder, held by the
  training loop (:func:`~.losses.tjepa_objective`).
* With ``variational=True`` it is the Var-T-JEPA model (our reconstruction of Gögl & Yau, ICML
  2026, from the abstract): the encoder outputs a Gaussian posterior ``q(z_f | x_view)`` per token
  (used for the context view and, with the same weights, the target view), the predictor
  outputs the conditional prior ``p(z_T | z_C)`` per target token, and a per-feature decoder gives
  ``p(x_f | z_f)`` (Gaussian with a learned per-feature variance for numerics; categorical for
  categoricals).

References:
  Thimonier, De Melo Costa, Popineau, Rimmel, Doan, "T-JEPA: Augmentation-Free Self-Supervised
  Learning for Tabular Data", ICLR 2025, https://arxiv.org/abs/2410.05016.
  Gögl, Yau, "Var-JEPA: A Variational Formulation of the Joint-Embedding Predictive
  Architecture", ICML 2026, https://arxiv.org/abs/2603.20111.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from fidia_jax import _checks

__all__ = [
    "FeatureTokenizer",
    "GaussianTokens",
    "TabularJepa",
    "TabularTransformer",
    "MASK_SIZE_RULES",
    "multi_target_masks",
    "random_feature_masks",
    "tjepa_mask_size_range",
    "tjepa_mask_sizes",
]


class GaussianTokens(NamedTuple):
    """Per-token diagonal Gaussians: ``mean`` and ``log_var`` ``(B, F, D)`` (``log_var`` is
    ``None`` for the deterministic T-JEPA outputs)."""

    mean: jax.Array
    log_var: jax.Array | None


def _host(x) -> np.ndarray | None:
    """``x`` as a numpy array when its value is known now, ``None`` when it is traced."""
    return np.asarray(x) if _checks.is_concrete(x) else None


def _check_inputs(model, x_num, x_cat, where: str):
    """Shape, dtype, finiteness and category-id checks shared by the modules' entry points."""
    x_num, x_cat = jnp.asarray(x_num), jnp.asarray(x_cat)
    n_num, cards = model.n_numeric, model.cardinalities
    if x_num.ndim != 2 or x_num.shape[1] != n_num:
        raise ValueError(f"{where}: x_num must be (B, {n_num}), got shape {x_num.shape}")
    if x_cat.ndim != 2 or x_cat.shape[1] != len(cards):
        raise ValueError(f"{where}: x_cat must be (B, {len(cards)}), got shape {x_cat.shape}")
    if x_num.shape[0] != x_cat.shape[0]:
        raise ValueError(
            f"{where}: x_num and x_cat disagree on the batch: {x_num.shape[0]} vs {x_cat.shape[0]}"
        )
    if not jnp.issubdtype(x_num.dtype, jnp.floating):
        raise ValueError(f"{where}: x_num must be floating, got {x_num.dtype}")
    if len(cards) and not jnp.issubdtype(x_cat.dtype, jnp.integer):
        raise ValueError(f"{where}: x_cat must be integer category ids, got {x_cat.dtype}")
    host_num = _host(x_num)
    if host_num is not None and not np.isfinite(host_num).all():
        row, col = (int(i) for i in np.argwhere(~np.isfinite(host_num))[0])
        raise ValueError(f"{where}: x_num has a NaN/inf value at row {row}, feature {col}")
    host_cat = _host(x_cat)
    if host_cat is not None and len(cards):
        bad = (host_cat < 0) | (host_cat >= np.asarray(cards)[None, :])
        if bad.any():
            row, col = (int(i) for i in np.argwhere(bad)[0])
            raise ValueError(
                f"{where}: x_cat id {int(host_cat[row, col])} at row {row}, feature {col} is "
                f"outside [0, {cards[col]}); map values unseen in training to the UNKNOWN id 0 "
                f"(fidia_jax.projects.varjepa.data.fit_tabular_encoder does)"
            )
    return x_num.astype(jnp.float32), x_cat.astype(jnp.int32)


def _offsets(cardinalities: tuple[int, ...]) -> jax.Array:
    """Row of each column's first id in the concatenated embedding table."""
    return jnp.asarray(np.concatenate([[0], np.cumsum(cardinalities)[:-1]]).astype(np.int32))


def _soft_clip(log_var, bound: float = 8.0):
    """``bound * tanh(log_var / bound)``: log-variances stay in ``(-8, 8)`` (no exp overflow)."""
    return bound * jnp.tanh(log_var / bound)


class FeatureTokenizer(nnx.Module):
    """One ``dim``-wide token per column: numeric ``x_j w_j + b_j``, categorical ``E_j[id]``.

    Args:
      n_numeric: numeric columns ``D_num``.
      cardinalities: per categorical column, its table size (training categories + 1 for the
        UNKNOWN id 0).
      dim: token width ``D``.
      rngs: ``nnx.Rngs`` with ``params``.

    Call: ``tok(x_num_BxDn, x_cat_BxDc) -> tokens_BxFxD`` with ``F = D_num + D_cat`` (numeric
    tokens first). Ids must lie in ``[0, cardinality)`` of their column: a concrete id outside
    raises ``ValueError`` (map values unseen in training to the UNKNOWN id 0 first); a traced one
    (inside ``jit``) cannot raise and gives a NaN token instead (the ``models`` domain rule), never
    a silently clamped row of the table.
    """

    def __init__(self, n_numeric: int, cardinalities: Sequence[int], dim: int, *, rngs: nnx.Rngs):
        cards = tuple(int(c) for c in cardinalities)
        if n_numeric < 0 or min(cards, default=2) < 1 or n_numeric + len(cards) < 1:
            raise ValueError(
                f"FeatureTokenizer: need >= 1 feature and cardinalities >= 1, got "
                f"n_numeric={n_numeric}, cardinalities={cards}"
            )
        self.n_numeric, self.cardinalities, self.dim = n_numeric, cards, dim
        init = nnx.initializers.normal(0.02)
        self.num_weight = nnx.Param(init(rngs.params(), (max(n_numeric, 1), dim)))
        self.num_bias = nnx.Param(init(rngs.params(), (max(n_numeric, 1), dim)))
        self.cat_table = nnx.Param(init(rngs.params(), (max(sum(cards), 1), dim)))

    def __call__(self, x_num, x_cat):
        x_num, x_cat = _check_inputs(self, x_num, x_cat, "FeatureTokenizer")
        parts = []
        if self.n_numeric:
            parts.append(x_num[:, :, None] * self.num_weight[None] + self.num_bias[None])
        if self.cardinalities:
            cards = jnp.asarray(self.cardinalities, jnp.int32)[None, :]
            table = self.cat_table[...]
            ids = jnp.where(
                (x_cat >= 0) & (x_cat < cards),
                x_cat + _offsets(self.cardinalities)[None, :],
                table.shape[0],
            )  # traced out-of-range id -> one past the table -> NaN
            parts.append(jnp.take(table, ids, axis=0, mode="fill", fill_value=jnp.nan))
        return jnp.concatenate(parts, axis=1)


class _Block(nnx.Module):
    def __init__(self, dim: int, heads: int, mlp_ratio: int, *, rngs: nnx.Rngs):
        self.norm1 = nnx.LayerNorm(dim, rngs=rngs)
        self.attn = nnx.MultiHeadAttention(heads, dim, decode=False, rngs=rngs)
        self.norm2 = nnx.LayerNorm(dim, rngs=rngs)
        self.fc1 = nnx.Linear(dim, mlp_ratio * dim, rngs=rngs)
        self.fc2 = nnx.Linear(mlp_ratio * dim, dim, rngs=rngs)

    def __call__(self, h_BxLxD, mask_Bx1xLxL):
        h_BxLxD = h_BxLxD + self.attn(self.norm1(h_BxLxD), mask=mask_Bx1xLxL)
        return h_BxLxD + self.fc2(jax.nn.gelu(self.fc1(self.norm2(h_BxLxD))))


class TabularTransformer(nnx.Module):
    """Pre-LayerNorm transformer over the kept tokens, with ``n_reg`` [REG] tokens prepended.

    Args:
      dim: token width; heads: attention heads (``dim % heads == 0``); depth: blocks;
      n_reg: learned regularisation tokens (T-JEPA's [REG]), always kept, dropped at the output;
      mlp_ratio: hidden width of each block's MLP, in units of ``dim``.

    Call: ``net(tokens_BxFxD, keep_BxF) -> out_BxFxD`` (final LayerNorm); a token with
    ``keep = False`` is invisible to every other token; its own output row is computed but means
    nothing (mask it downstream).
    """

    def __init__(
        self,
        dim: int,
        *,
        depth: int = 2,
        heads: int = 4,
        n_reg: int = 1,
        mlp_ratio: int = 2,
        rngs: nnx.Rngs,
    ):
        if dim % heads or depth < 1 or n_reg < 0:
            raise ValueError(
                f"TabularTransformer: need dim % heads == 0, depth >= 1, n_reg >= 0; "
                f"got dim={dim}, heads={heads}, depth={depth}, n_reg={n_reg}"
            )
        self.n_reg = n_reg
        self.reg = nnx.Param(nnx.initializers.normal(0.02)(rngs.params(), (max(n_reg, 1), dim)))
        self.blocks = nnx.List([_Block(dim, heads, mlp_ratio, rngs=rngs) for _ in range(depth)])
        self.norm = nnx.LayerNorm(dim, rngs=rngs)

    def __call__(self, tokens_BxFxD, keep_BxF):
        b = tokens_BxFxD.shape[0]
        reg_BxRxD = jnp.broadcast_to(
            self.reg[...][None, : self.n_reg], (b, self.n_reg, tokens_BxFxD.shape[2])
        )
        h_BxLxD = jnp.concatenate([reg_BxRxD, tokens_BxFxD], axis=1)
        keep_BxL = jnp.concatenate([jnp.ones((b, self.n_reg), bool), keep_BxF.astype(bool)], axis=1)
        mask = keep_BxL[:, None, None, :]
        for block in self.blocks:
            h_BxLxD = block(h_BxLxD, mask)
        return self.norm(h_BxLxD[:, self.n_reg :])


def random_feature_masks(key, batch: int, n_features: int, n_context: int, n_target: int):
    """Disjoint random context / target feature sets, a fresh draw per row.

    Args:
      key: PRNG key; batch: rows ``B``; n_features: ``F``.
      n_context, n_target: features per row in each set, ``>= 1`` each, ``n_context + n_target
        <= F``.

    Returns:
      ``(context_BxF, target_BxF)`` boolean, disjoint, with exactly ``n_context`` and
      ``n_target`` true entries per row (a uniformly random ordered split of the features).

    Raises:
      ValueError: sizes out of range.
    """
    if n_context < 1 or n_target < 1 or n_context + n_target > n_features:
        raise ValueError(
            f"random_feature_masks: need n_context, n_target >= 1 and n_context + "
            f"n_target <= n_features={n_features}; got {n_context}, {n_target}"
        )
    rank_BxF = jnp.argsort(
        jnp.argsort(jax.random.uniform(key, (batch, n_features)), axis=1), axis=1
    )
    return rank_BxF < n_context, (rank_BxF >= n_context) & (rank_BxF < n_context + n_target)


#: Rules for the per-batch mask sizes of :func:`multi_target_masks`.
MASK_SIZE_RULES: tuple[str, ...] = ("authors", "uniform")


def tjepa_mask_size_range(
    n_features: int, *, min_share: float = 0.2, max_share: float = 0.4
) -> tuple[int, int]:
    """The size bounds of the T-JEPA authors' ``MaskCollator``: ``(round(min_share F),
    round(max_share F))`` (Python's ``round``: halves to even, as theirs).

    Args:
      n_features: ``F``; min_share, max_share: shares of ``F`` (``0 < min_share <= max_share``).

    Returns:
      ``(lo, hi)``, the bounds of both the context size and the target size.

    Raises:
      ValueError: ``lo < 1`` (the authors assert ``min > 0``), ``hi < lo``, or ``2 lo > F`` (no
        context and target fit in a row: the authors' sampler would loop for ever). The authors
        also assert ``hi > lo``; we accept ``hi == lo`` (a fixed size), which tables of three
        features need.
    """
    lo, hi = round(n_features * min_share), round(n_features * max_share)
    if lo < 1 or hi < lo or 2 * lo > n_features:
        raise ValueError(
            f"tjepa_mask_size_range: F={n_features} feature(s) with shares [{min_share}, "
            f"{max_share}] give sizes [{lo}, {hi}]; need 1 <= lo <= hi and 2 lo <= F"
        )
    return lo, hi


@functools.partial(jax.jit, static_argnums=(2, 3, 4))
def _first_fitting_pair(u_c, u_t, lo: int, hi: int, n_features: int):
    n_c = (lo + jnp.round(jnp.float32(hi - lo) * u_c)).astype(jnp.int32)
    n_t = (lo + jnp.round(jnp.float32(hi - lo) * u_t)).astype(jnp.int32)
    ok = n_c + n_t <= n_features
    any_ok = jnp.any(ok, axis=-1)
    first = jnp.where(any_ok, jnp.argmax(ok, axis=-1), ok.shape[-1] - 1)[..., None]
    pick = lambda n: jnp.take_along_axis(n, first, axis=-1)[..., 0]  # noqa: E731
    return pick(n_c), pick(n_t), any_ok


def tjepa_mask_sizes(u_context, u_target, n_features: int, *, min_share=0.2, max_share=0.4):
    """The T-JEPA authors' size rule (``MaskCollator._sample_num_mask`` and its rejection loop,
    ``src/mask.py`` of jose-melo/t-jepa @ 98dda99) applied to given uniforms.

    Each candidate size is ``lo + round((hi - lo) u)`` (float32, halves to even, as
    ``np.round`` on their float32 ``torch.rand``), so the end points are half as likely as the
    inner sizes; a candidate pair ``(n_c, n_t)`` is accepted when ``n_c + n_t <= F`` (one context
    mask, their default ``num_encs = 1``), else the next pair is tried.

    Args:
      u_context, u_target: ``(..., K)`` float uniforms in ``[0, 1)``, the ``K`` candidate pairs
        in order along the last axis (the authors draw ``u_context`` then ``u_target`` per try).
      n_features, min_share, max_share: as :func:`tjepa_mask_size_range`.

    Returns:
      ``(n_c, n_t, accepted)`` of shape ``(...)``: int32 sizes of the first accepted pair (of the
      last pair when none is) and bool, whether one was accepted.
    """
    lo, hi = tjepa_mask_size_range(n_features, min_share=min_share, max_share=max_share)
    u_c = jnp.atleast_1d(jnp.asarray(u_context, jnp.float32))
    u_t = jnp.atleast_1d(jnp.asarray(u_target, jnp.float32))
    return _first_fitting_pair(u_c, u_t, lo, hi, n_features)


def multi_target_masks(
    key, batch: int, n_features: int, *, min_share: float = 0.2, max_share: float = 0.4,
    n_targets: int = 4, size_rule: str = "authors",
):  # fmt: skip
    """T-JEPA's view sampling (the authors' ``MaskCollator``, ``src/mask.py`` of jose-melo/t-jepa
    @ 98dda99, re-implemented): one context and ``n_targets`` target masks per row.

    Per batch one context size ``n_c`` and one target size ``n_t`` (the same for every row and
    every target mask). ``size_rule="authors"`` (default): :func:`tjepa_mask_sizes` on fresh
    uniforms, candidate pairs drawn until ``n_c + n_t <= F``, bounds from
    :func:`tjepa_mask_size_range` (checked against the authors' code on their own uniforms,
    ``tests/projects/varjepa/test_tjepa_fidelity.py``). ``size_rule="uniform"`` (our earlier
    reading): both sizes uniform integers in ``[lo, hi]`` with ``lo = max(1, round(min_share
    F))``, ``hi = min(max(lo, round(max_share F)), F // 2)`` (no rejection needed; works for
    ``F = 2``). Per row, the context is ``n_c`` random features; each target mask is ``n_t``
    random features among the other ``F - n_c`` (target masks may overlap one another, never the
    context), as the authors' (their masks come from numpy's global RNG, ours from ``key``: the
    same distribution, not the same draws).

    Args:
      key: PRNG key; batch: rows ``B``; n_features: ``F``.
      min_share, max_share: the share range of both sizes; n_targets: target masks per row.
      size_rule: ``"authors"`` or ``"uniform"``.

    Returns:
      ``(context_BxF, targets_MxBxF)`` boolean.

    Raises:
      ValueError: an unknown ``size_rule``, ``n_targets < 1``, or sizes that cannot fit
        (:func:`tjepa_mask_size_range`; for ``"uniform"``: ``F < 2``).
    """
    if size_rule not in MASK_SIZE_RULES:
        raise ValueError(
            f"multi_target_masks: size_rule must be one of {MASK_SIZE_RULES}, got {size_rule!r}"
        )
    if n_targets < 1:
        raise ValueError(f"multi_target_masks: n_targets must be >= 1, got {n_targets}")
    if size_rule == "authors":
        lo, hi = tjepa_mask_size_range(n_features, min_share=min_share, max_share=max_share)
    else:
        lo = max(1, round(min_share * n_features))
        hi = min(max(lo, round(max_share * n_features)), n_features // 2)
        if hi < lo:
            raise ValueError(
                f"multi_target_masks: a row of F={n_features} feature(s) cannot hold a context "
                f"and a target of >= {lo} feature(s) each"
            )
    return _multi_target_masks(key, batch, n_features, lo, hi, n_targets, size_rule)


@functools.partial(jax.jit, static_argnums=(1, 2, 3, 4, 5, 6))
def _multi_target_masks(key, batch, n_features, lo, hi, n_targets, size_rule):
    k_nc, k_nt, k_ctx, k_tgt = jax.random.split(key, 4)
    if size_rule == "authors":

        def draw(carry):
            i, _, _, _ = carry
            u = jax.random.uniform(jax.random.fold_in(k_nc, i), (2,))
            n_c, n_t, ok = _first_fitting_pair(u[:1], u[1:], lo, hi, n_features)
            return i + 1, n_c, n_t, ok

        zero = jnp.zeros((), jnp.int32)
        _, n_c, n_t, _ = jax.lax.while_loop(
            lambda c: ~c[3], draw, (zero, zero, zero, jnp.zeros((), bool))
        )
    else:
        n_c = jax.random.randint(k_nc, (), lo, hi + 1)
        n_t = jax.random.randint(k_nt, (), lo, hi + 1)
    rank_BxF = jnp.argsort(jnp.argsort(jax.random.uniform(k_ctx, (batch, n_features)), 1), 1)
    context_BxF = rank_BxF < n_c
    u_MxBxF = jax.random.uniform(k_tgt, (n_targets, batch, n_features))
    u_MxBxF = jnp.where(context_BxF[None], 2.0, u_MxBxF)  # context features rank last
    rank_MxBxF = jnp.argsort(jnp.argsort(u_MxBxF, axis=2), axis=2)
    return context_BxF, rank_MxBxF < n_t


class TabularJepa(nnx.Module):
    """T-JEPA (``variational=False``) or Var-T-JEPA (``variational=True``) over feature tokens.

    Args:
      n_numeric, cardinalities: the table's schema (:class:`~.data.TabularSchema`).
      dim: token and latent width ``D``.
      depth, heads, n_reg: encoder transformer (:class:`TabularTransformer`);
      predictor_depth: predictor transformer blocks (same width).
      variational: add posterior / prior log-variance heads and the per-feature decoder.
      rngs: ``nnx.Rngs`` with ``params``.

    Methods (all take ``x_num (B, D_num)`` float, ``x_cat (B, D_cat)`` int ids; ``(B, F)`` masks):
      ``encode(x_num, x_cat, keep)``: posterior (or T-JEPA embedding) per token,
      :class:`GaussianTokens` ``(B, F, D)``.
      ``predict(z, context, target)``: predictor over context latents ``z`` ``(B, F, D)`` with
      a learned [MASK] token (+ a per-feature position embedding) at target positions.
      ``decode(z)``: ``(num_mean (B, D_num), num_log_var (1, D_num), cat_logits (B, D_cat,
      V_max))``: a Gaussian per numeric feature with a learned per-feature variance, logits past
      a column's cardinality are ``-1e9``.
      ``embed(x_num, x_cat)``: the frozen representation for downstream probes, the mean over
      features of the encoder's (posterior-mean) tokens on the full row, ``(B, D)``.

    Raises:
      ValueError: bad shapes, non-integer or out-of-range category ids, NaN/inf numerics
      (when concrete).
    """

    def __init__(
        self,
        n_numeric: int,
        cardinalities: Sequence[int],
        *,
        dim: int = 64,
        depth: int = 2,
        heads: int = 4,
        n_reg: int = 1,
        predictor_depth: int = 1,
        variational: bool = False,
        rngs: nnx.Rngs,
    ):
        self.tokenizer = FeatureTokenizer(n_numeric, cardinalities, dim, rngs=rngs)
        self.n_numeric, self.cardinalities = n_numeric, self.tokenizer.cardinalities
        self.n_features = n_numeric + len(self.cardinalities)
        self.variational = variational
        self.encoder = TabularTransformer(dim, depth=depth, heads=heads, n_reg=n_reg, rngs=rngs)
        self.enc_mean = nnx.Linear(dim, dim, rngs=rngs)
        self.enc_log_var = nnx.Linear(dim, dim, rngs=rngs) if variational else None
        init = nnx.initializers.normal(0.02)
        self.mask_token = nnx.Param(init(rngs.params(), (1, 1, dim)))
        self.pred_pos = nnx.Param(init(rngs.params(), (1, self.n_features, dim)))
        self.pred_in = nnx.Linear(dim, dim, rngs=rngs)
        self.predictor = TabularTransformer(
            dim, depth=predictor_depth, heads=heads, n_reg=0, rngs=rngs
        )
        self.pred_mean = nnx.Linear(dim, dim, rngs=rngs)
        self.pred_log_var = nnx.Linear(dim, dim, rngs=rngs) if variational else None
        if variational:
            v_max = max(self.cardinalities, default=1)
            self.dec_num = nnx.Param(init(rngs.params(), (1, max(n_numeric, 1), dim)))
            self.dec_num_bias = nnx.Param(jnp.zeros((1, max(n_numeric, 1))))
            self.dec_num_log_var = nnx.Param(jnp.zeros((1, max(n_numeric, 1))))
            self.dec_cat = nnx.Param(
                init(rngs.params(), (max(len(self.cardinalities), 1), dim, v_max))
            )
            self.dec_cat_bias = nnx.Param(jnp.zeros((1, max(len(self.cardinalities), 1), v_max)))

    def encode(self, x_num, x_cat, keep_BxF=None) -> GaussianTokens:
        tokens_BxFxD = self.tokenizer(x_num, x_cat)
        if keep_BxF is None:
            keep_BxF = jnp.ones(tokens_BxFxD.shape[:2], bool)
        h_BxFxD = self.encoder(tokens_BxFxD, keep_BxF)
        log_var = _soft_clip(self.enc_log_var(h_BxFxD)) if self.variational else None
        return GaussianTokens(self.enc_mean(h_BxFxD), log_var)

    def predict(self, z_BxFxD, context_BxF, target_BxF) -> GaussianTokens:
        ctx = context_BxF[:, :, None]
        h_BxFxD = jnp.where(ctx, self.pred_in(z_BxFxD), self.mask_token[...]) + self.pred_pos[...]
        h_BxFxD = self.predictor(h_BxFxD, context_BxF | target_BxF)
        log_var = _soft_clip(self.pred_log_var(h_BxFxD)) if self.variational else None
        return GaussianTokens(self.pred_mean(h_BxFxD), log_var)

    def decode(self, z_BxFxD):
        if not self.variational:
            raise ValueError("TabularJepa.decode: only the variational model has a decoder")
        n = self.n_numeric
        num_BxDn = (
            jnp.sum(z_BxFxD[:, :n] * self.dec_num[...][:, :n], axis=-1)
            + self.dec_num_bias[...][:, :n]
        )
        zc_BxDcxD = z_BxFxD[:, n:]
        logits = jnp.einsum("bcd,cdv->bcv", zc_BxDcxD, self.dec_cat[...][: zc_BxDcxD.shape[1]])
        logits = logits + self.dec_cat_bias[...][:, : zc_BxDcxD.shape[1]]
        v_max = logits.shape[-1]
        valid_1xDcxV = (
            np.arange(v_max)[None, :] < np.asarray(self.cardinalities, np.int32).reshape(-1, 1)
        )[None]
        num_log_var_1xDn = _soft_clip(self.dec_num_log_var[...][:, :n])
        return (
            num_BxDn,
            num_log_var_1xDn,
            jnp.where(jnp.asarray(valid_1xDcxV[:, : zc_BxDcxD.shape[1]]), logits, -1e9),
        )

    def embed(self, x_num, x_cat):
        return jnp.mean(self.encode(x_num, x_cat).mean, axis=1)
