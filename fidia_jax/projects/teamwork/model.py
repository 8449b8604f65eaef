"""TeamWork: role-aware masked reconstruction for multivariate time-series anomaly detection.

**Everything here is our reconstruction from the abstract** of the ICML 2026 TeamWork paper (no
code or equations were available): channels take *dominant* / *auxiliary* roles by how much they
reduce each other's predictive uncertainty; a role-aware gated interaction passes messages from
dominant to auxiliary channels; period-aware masked modelling masks spans aligned with each
channel's dominant period and reconstructs them; the anomaly score is the reconstruction error
weighted by the predicted uncertainty. Our concrete choices:

* :func:`channel_influence` (reconstruction): ``U[i, j] = 0.5 log(s2_j / s2_{j|i})`` nats, the
  entropy reduction of a Gaussian one-step predictor of channel ``j`` from its own ``p`` lags
  (residual variance ``s2_j``, ridge least squares) when channel ``i``'s lags are added
  (``s2_{j|i}``): a Granger-style predictive-uncertainty reduction.
* :func:`channel_roles` (reconstruction): net drive ``sum_j U[i, j] - sum_j U[j, i]``; channels
  with the largest net drive are dominant.
* :class:`TeamWork` (reconstruction): per-channel temporal self-attention (shared weights), then a
  gated cross-channel interaction where auxiliary ``j`` attends over dominant ``i`` with logits
  ``q_j . k_i / sqrt(d) + log(U[i, j] + eps)`` and adds ``sigmoid(W_g [h_j, m_j]) * m_j``; then a
  second temporal block and a head giving a mean and a variance per masked step.
* :func:`span_mask` / :func:`eval_masks` (reconstruction): spans of ``max(1, P_c // 2)`` steps on a
  grid per channel (``P_c`` the channel's FFT period), each masked with probability ``ratio``;
  ``span = 1`` is i.i.d. point masking. At test time ``K = round(1 / ratio)`` complementary masks
  hide every step exactly once.
* :func:`fidia_jax.projects.teamwork.losses.gaussian_nll` and :func:`anomaly_score`: loss
  ``0.5 (log v + (x - mu)^2 / v)`` on masked steps; score = mean over channels of
  ``(x - mu)^2 / v`` at the pass where the step was masked.
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from fidia_jax import models

__all__ = [
    "ConvAE",
    "TeamWork",
    "anomaly_score",
    "channel_influence",
    "channel_roles",
    "convae_draw",
    "eval_masks",
    "init_convae",
    "init_teamwork",
    "role_edges",
    "span_mask",
    "teamwork_draw",
]


def channel_influence(x: Any, *, lags: int = 4, ridge: float = 1e-3) -> np.ndarray:
    """Pairwise predictive-uncertainty reduction ``U[i, j]`` (nats) of channel ``j`` by channel ``i``.

    Reconstruction (see module docstring). Each channel is standardised; ``s2_j`` is the mean
    squared one-step residual of a ridge regression of ``x_j[t]`` on ``x_j[t-1..t-p]`` (plus an
    intercept), ``s2_{j|i}`` the same with ``x_i[t-1..t-p]`` added (in-sample).
    ``U[i, j] = max(0, 0.5 log(s2_j / s2_{j|i}))``; the diagonal is zero.

    Args:
      x: ``(T, C)`` finite floats, ``T > 2 * lags + 1``, no constant channel.
      lags: ``p``, the number of past steps used.
      ridge: ridge penalty (relative to ``T``).

    Returns:
      ``(C, C)`` float32, ``>= 0``.

    Raises:
      ValueError: wrong rank, too short, non-finite or constant channel.
    """
    a = np.asarray(x, dtype=np.float64)
    if a.ndim != 2 or a.shape[0] <= 2 * lags + 1 or not np.isfinite(a).all():
        raise ValueError(f"x must be a finite (T, C) array with T > {2 * lags + 1}, got {a.shape}")
    std = a.std(axis=0)
    if (std == 0).any():
        raise ValueError(f"channel {int(np.flatnonzero(std == 0)[0])} is constant")
    a = (a - a.mean(axis=0)) / std
    t_len, n_ch = a.shape
    # lagged[t, c, l] = a[t + lags - 1 - l, c] for targets a[t + lags, c]
    lagged = np.stack([a[lags - 1 - l : t_len - 1 - l] for l in range(lags)], axis=-1)
    target = a[lags:]
    n = target.shape[0]

    def resid_var(feats: np.ndarray, y: np.ndarray) -> float:
        f = np.concatenate([feats, np.ones((n, 1))], axis=1)
        g = f.T @ f + ridge * n * np.eye(f.shape[1])
        w = np.linalg.solve(g, f.T @ y)
        return float(np.mean((y - f @ w) ** 2))

    own = [resid_var(lagged[:, j], target[:, j]) for j in range(n_ch)]
    u = np.zeros((n_ch, n_ch))
    for j in range(n_ch):
        for i in range(n_ch):
            if i != j:
                joint = resid_var(
                    np.concatenate([lagged[:, j], lagged[:, i]], axis=1), target[:, j]
                )
                u[i, j] = max(0.0, 0.5 * math.log(own[j] / max(joint, 1e-12)))
    return u.astype(np.float32)


def channel_roles(influence: Any, *, n_dominant: int | None = None) -> np.ndarray:
    """Dominant channels from an influence matrix (reconstruction).

    Args:
      influence: ``(C, C)`` from :func:`channel_influence`, ``C >= 2``.
      n_dominant: how many dominant channels; default: those with net drive
        ``sum_j U[i, j] - sum_j U[j, i] > 0``, clipped to ``[1, C - 1]``.

    Returns:
      ``(C,)`` bool, True for dominant channels (ties broken by the lower index).
    """
    u = np.asarray(influence, dtype=np.float64)
    if u.ndim != 2 or u.shape[0] != u.shape[1] or u.shape[0] < 2:
        raise ValueError(f"influence must be (C, C) with C >= 2, got {u.shape}")
    c = u.shape[0]
    net = u.sum(axis=1) - u.sum(axis=0)
    k = int(np.sum(net > 0)) if n_dominant is None else n_dominant
    if not 1 <= k <= c - 1:
        if n_dominant is not None:
            raise ValueError(f"n_dominant must be in [1, {c - 1}], got {n_dominant}")
        k = min(max(k, 1), c - 1)
    order = np.argsort(-net, kind="stable")
    out = np.zeros(c, bool)
    out[order[:k]] = True
    return out


def role_edges(
    dominant: Any, influence: Any | None = None, *, use_roles: bool = True, eps: float = 1e-3
) -> tuple[np.ndarray, np.ndarray]:
    """Message edges and their logit prior for :class:`TeamWork`.

    Args:
      dominant: ``(C,)`` bool.
      influence: ``(C, C)`` or None (no prior).
      use_roles: False = role-free: every channel sends to every other channel, no prior.

    Returns:
      ``(edges, prior)``, both ``(C, C)`` float32: ``edges[i, j] = 1`` where ``i`` may send to
      ``j`` (dominant -> auxiliary with roles), ``prior[i, j] = log(U[i, j] + eps)`` on edges.
    """
    dom = np.asarray(dominant, bool)
    c = dom.size
    if use_roles:
        edges = (dom[:, None] & ~dom[None, :]).astype(np.float32)
    else:
        edges = 1.0 - np.eye(c, dtype=np.float32)
    if influence is None or not use_roles:
        prior = np.zeros((c, c), np.float32)
    else:
        prior = np.log(np.asarray(influence, np.float64) + eps).astype(np.float32) * edges
    return edges, prior


def span_mask(
    rng: np.random.Generator, spans: Any, length: int, ratio: float, batch: int
) -> np.ndarray:
    """Random span masks, period-aware when ``spans = max(1, period // 2)`` (reconstruction).

    Each channel's steps are grouped into consecutive spans of ``spans[c]`` steps starting at a
    random offset (per window); each span is masked with probability ``ratio``
    (``spans = 1``: i.i.d. point masking). Drawn on the host with NumPy (cheap, and keeps the
    jitted training step free of PRNG code).

    Args:
      rng: NumPy generator.
      spans: ``(C,)`` ints ``>= 1``.
      length: window length ``L``.
      ratio: masking probability per span, in ``[0, 1]``.
      batch: number of windows ``B``.

    Returns:
      ``(B, L, C)`` bool, True = masked.
    """
    s = np.maximum(np.asarray(spans, np.int64), 1)
    if s.ndim != 1 or not 0.0 <= ratio <= 1.0:
        raise ValueError(f"spans must be (C,) and ratio in [0, 1], got {s.shape}, {ratio}")
    offset = rng.integers(0, s, size=(batch, s.size))
    seg = (np.arange(length)[None, :, None] + offset[:, None, :]) // s[None, None, :]
    u = rng.random((batch, length + 1, s.size))
    return np.take_along_axis(u, seg, axis=1) < ratio


def eval_masks(spans: Any, length: int, n_passes: int) -> np.ndarray:
    """``n_passes`` complementary masks: step ``t`` of channel ``c`` is masked in pass
    ``(t // spans[c]) % n_passes`` only.

    Returns:
      ``(K, L, C)`` bool; ``masks.sum(0) == 1`` everywhere.
    """
    s = np.maximum(np.asarray(spans, np.int64), 1)
    seg = np.arange(length)[:, None] // s[None, :]
    return np.stack([(seg % n_passes) == k for k in range(n_passes)])


def anomaly_score(x: jax.Array, mean: jax.Array, var: jax.Array | None) -> jax.Array:
    """Per-step score ``mean_c (x - mean)^2 / var`` (``var=None``: plain squared error).

    Args:
      x, mean, var: ``(..., L, C)``.

    Returns:
      ``(..., L)``.
    """
    err = (x - mean) ** 2
    if var is not None:
        err = err / var
    return jnp.mean(err, axis=-1)


class _TemporalBlock(nnx.Module):
    """Pre-LN multi-head self-attention over time + MLP, shared by every channel."""

    def __init__(self, dim: int, heads: int, *, dtype, param_dtype, rngs: nnx.Rngs):
        kw = dict(dtype=dtype, param_dtype=param_dtype, rngs=rngs)
        self.heads = heads
        self.ln1 = nnx.LayerNorm(dim, **kw)
        self.qkv = nnx.Linear(dim, 3 * dim, **kw)
        self.out = nnx.Linear(dim, dim, **kw)
        self.ln2 = nnx.LayerNorm(dim, **kw)
        self.fc1 = nnx.Linear(dim, 2 * dim, **kw)
        self.fc2 = nnx.Linear(2 * dim, dim, **kw)

    def __call__(self, h_NxLxD: jax.Array) -> jax.Array:
        n, l, d = h_NxLxD.shape
        qkv = self.qkv(self.ln1(h_NxLxD)).reshape(n, l, 3, self.heads, d // self.heads)
        q, k, v = qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2]
        att = jax.nn.softmax(jnp.einsum("nqhe,nkhe->nhqk", q, k) / math.sqrt(d // self.heads))
        h_NxLxD = h_NxLxD + self.out(jnp.einsum("nhqk,nkhe->nqhe", att, v).reshape(n, l, d))
        return h_NxLxD + self.fc2(nnx.gelu(self.fc1(self.ln2(h_NxLxD))))


class TeamWork(nnx.Module):
    """Role-aware gated masked reconstructor (reconstruction of TeamWork, ICML 2026).

    Args:
      n_channels: ``C``.
      window: ``L``, the window length (learned positional embedding).
      dim: model width ``d``.
      heads: attention heads of the temporal blocks.
      use_gate: False = ungated messages (``h_j + m_j``), the "no gate" ablation.
      predict_variance: False = mean only (``var`` returned as None), for the role-free baseline.
      dtype, param_dtype: computation / parameter dtypes.
      rngs: ``nnx.Rngs`` with a ``params`` stream.

    Call: ``model(x_BxLxC, mask_BxLxC, edges_CxC, prior_CxC) -> (mean_BxLxC, var_BxLxC | None)``;
    masked inputs are replaced by zero and flagged. ``edges``/``prior`` come from
    :func:`role_edges`; a channel with no incoming edge receives no message.
    """

    def __init__(
        self,
        n_channels: int,
        window: int,
        *,
        dim: int = 32,
        heads: int = 4,
        use_gate: bool = True,
        predict_variance: bool = True,
        dtype: Any = jnp.float32,
        param_dtype: Any = jnp.float32,
        rngs: nnx.Rngs,
    ):
        if n_channels < 1 or window < 1 or dim % heads:
            raise ValueError(
                f"need n_channels, window >= 1 and dim % heads == 0, got "
                f"{n_channels}, {window}, {dim} % {heads}"
            )
        self.n_channels, self.window, self.dim = n_channels, window, dim
        self.use_gate, self.predict_variance = use_gate, predict_variance
        kw = dict(dtype=dtype, param_dtype=param_dtype, rngs=rngs)
        self.embed = nnx.Linear(2, dim, **kw)
        init = nnx.initializers.normal(0.02)
        self.channel_emb = nnx.Param(init(rngs.params(), (n_channels, dim), param_dtype))
        self.pos_emb = nnx.Param(init(rngs.params(), (window, dim), param_dtype))
        self.block1 = _TemporalBlock(dim, heads, **kw)
        self.ln_x = nnx.LayerNorm(dim, **kw)
        self.q = nnx.Linear(dim, dim, **kw)
        self.k = nnx.Linear(dim, dim, **kw)
        self.v = nnx.Linear(dim, dim, **kw)
        self.gate = nnx.Linear(2 * dim, dim, **kw)
        self.block2 = _TemporalBlock(dim, heads, **kw)
        self.head = nnx.Linear(dim, 2, **kw)

    def __call__(
        self, x_BxLxC: jax.Array, mask_BxLxC: jax.Array, edges_CxC: jax.Array, prior_CxC: jax.Array
    ) -> tuple[jax.Array, jax.Array | None]:
        b, l, c = x_BxLxC.shape
        if (l, c) != (self.window, self.n_channels):
            raise ValueError(f"expected (B, {self.window}, {self.n_channels}), got {x_BxLxC.shape}")
        m = mask_BxLxC.astype(x_BxLxC.dtype)
        inp_BxCxLx2 = jnp.stack([x_BxLxC * (1.0 - m), m], axis=-1).transpose(0, 2, 1, 3)
        h = self.embed(inp_BxCxLx2)
        h = h + self.channel_emb[...][None, :, None, :] + self.pos_emb[...][None, None, :, :]
        h_BCxLxD = self.block1(h.reshape(b * c, l, self.dim))
        h_BxLxCxD = h_BCxLxD.reshape(b, c, l, self.dim).transpose(0, 2, 1, 3)
        # Role-aware interaction: channel j (receiver) attends over channels i (senders) per step.
        z = self.ln_x(h_BxLxCxD)
        q, k, v = self.q(z), self.k(z), self.v(z)
        logits_BxLxCjxCi = jnp.einsum("bljd,blid->blji", q, k) / math.sqrt(self.dim)
        logits_BxLxCjxCi = logits_BxLxCjxCi + prior_CxC.T[None, None, :, :]
        allowed = (edges_CxC.T > 0)[None, None, :, :]
        logits_BxLxCjxCi = jnp.where(allowed, logits_BxLxCjxCi, -1e9)
        att = jax.nn.softmax(logits_BxLxCjxCi, axis=-1) * allowed.astype(h.dtype)
        msg_BxLxCxD = jnp.einsum("blji,blid->bljd", att, v)
        if self.use_gate:
            g = jax.nn.sigmoid(self.gate(jnp.concatenate([h_BxLxCxD, msg_BxLxCxD], axis=-1)))
            msg_BxLxCxD = g * msg_BxLxCxD
        h_BxLxCxD = h_BxLxCxD + msg_BxLxCxD
        h_BCxLxD = h_BxLxCxD.transpose(0, 2, 1, 3).reshape(b * c, l, self.dim)
        h_BCxLxD = self.block2(h_BCxLxD)
        out_BxLxCx2 = self.head(h_BCxLxD).reshape(b, c, l, 2).transpose(0, 2, 1, 3)
        mean_BxLxC = out_BxLxCx2[..., 0]
        if not self.predict_variance:
            return mean_BxLxC, None
        var_BxLxC = jax.nn.softplus(out_BxLxCx2[..., 1]) + 1e-3
        return mean_BxLxC, var_BxLxC


def teamwork_draw(names: tuple[str, ...], shape: tuple[int, ...], rng: np.random.Generator):
    """TeamWork's initialisation rule for :func:`fidia_jax.models.init_without_compile`.

    Kernels ``N(0, 1 / fan_in)`` (``fan_in = shape[0]``), the channel and position embeddings
    ``N(0, 0.02^2)``, LayerNorm scales 1, every other leaf (biases) 0.

    Args:
      names: the leaf's attribute path (``names[-1]`` its variable name).
      shape: the leaf's shape.
      rng: the NumPy generator shared by all leaves (drawn in the module's state order).

    Returns:
      A float64 array of ``shape``.
    """
    name = names[-1] if names else ""
    if name in ("channel_emb", "pos_emb"):
        return 0.02 * rng.standard_normal(shape)
    if name == "kernel":
        return rng.standard_normal(shape) / math.sqrt(shape[0])
    if name == "scale":
        return np.ones(shape)
    return np.zeros(shape)


def init_teamwork(n_channels: int, window: int, *, seed: int = 0, **kwargs: Any) -> TeamWork:
    """A :class:`TeamWork` with parameters drawn on the host (no XLA compilation).

    :func:`fidia_jax.models.init_without_compile` with :func:`teamwork_draw` and
    ``numpy.random.default_rng(seed)`` (building the module eagerly would compile every
    initialiser op separately: seconds on a CPU).

    Args:
      n_channels, window: as :class:`TeamWork`.
      seed: NumPy seed.
      **kwargs: the keyword-only options of :class:`TeamWork` (``dim``, ``heads``, ...).

    Returns:
      The module.

    Raises:
      ValueError: invalid sizes (from :class:`TeamWork`).
    """
    return models.init_without_compile(
        lambda: TeamWork(n_channels, window, rngs=nnx.Rngs(0), **kwargs), teamwork_draw, seed=seed
    )


class ConvAE(nnx.Module):
    """Convolutional autoencoder of SKAB's Conv-AE baseline (the peer of the SKAB leaderboard).

    Architecture of the Conv-AE notebook of github.com/waico/SKAB (Keras, read not copied): on
    ``(B, L, C)`` windows, ``Conv1D(32, 7, stride 2, same) -> ReLU -> dropout 0.2 -> Conv1D(16,
    7, stride 2) -> ReLU -> ConvTranspose(16, 7, stride 2) -> ReLU -> dropout 0.2 ->
    ConvTranspose(32, 7, stride 2) -> ReLU -> ConvTranspose(C, 7)``. Dropout takes its keep
    masks as arguments (drawn by the caller: the jitted step holds no random state).

    Args:
      n_channels: ``C``.
      window: ``L``, a multiple of 4 (two stride-2 layers down and up).
      rngs: ``nnx.Rngs`` with a ``params`` stream.

    Call: ``model(x_BxLxC, keep1_BxL2x32=None, keep2_BxL2x16=None) -> recon_BxLxC``; a keep mask
    holds 0 / (1 - rate) per unit (``None``: no dropout, for scoring).
    """

    def __init__(self, n_channels: int, window: int, *, rngs: nnx.Rngs):
        if n_channels < 1 or window < 4 or window % 4:
            raise ValueError(f"need n_channels >= 1 and window a multiple of 4, got {window}")
        self.n_channels, self.window = n_channels, window
        kw = dict(kernel_size=(7,), padding="SAME", rngs=rngs)
        self.enc1 = nnx.Conv(n_channels, 32, strides=(2,), **kw)
        self.enc2 = nnx.Conv(32, 16, strides=(2,), **kw)
        self.dec1 = nnx.ConvTranspose(16, 16, strides=(2,), **kw)
        self.dec2 = nnx.ConvTranspose(16, 32, strides=(2,), **kw)
        self.out = nnx.ConvTranspose(32, n_channels, **kw)

    def __call__(
        self,
        x_BxLxC: jax.Array,
        keep1: jax.Array | None = None,
        keep2: jax.Array | None = None,
    ) -> jax.Array:
        if x_BxLxC.shape[1:] != (self.window, self.n_channels):
            raise ValueError(f"expected (B, {self.window}, {self.n_channels}), got {x_BxLxC.shape}")
        h_BxL2x32 = jax.nn.relu(self.enc1(x_BxLxC))
        if keep1 is not None:
            h_BxL2x32 = h_BxL2x32 * keep1
        h_BxL4x16 = jax.nn.relu(self.enc2(h_BxL2x32))
        h_BxL2x16 = jax.nn.relu(self.dec1(h_BxL4x16))
        if keep2 is not None:
            h_BxL2x16 = h_BxL2x16 * keep2
        h_BxLx32 = jax.nn.relu(self.dec2(h_BxL2x16))
        return self.out(h_BxLx32)


def convae_draw(names: tuple[str, ...], shape: tuple[int, ...], rng: np.random.Generator):
    """Conv-AE's initialisation rule for :func:`fidia_jax.models.init_without_compile`: kernels
    ``(k, in, out)`` Glorot-uniform (Keras's default), biases 0."""
    if names and names[-1] == "kernel":
        fan_in, fan_out = shape[0] * shape[1], shape[0] * shape[2]
        limit = math.sqrt(6.0 / (fan_in + fan_out))
        return rng.uniform(-limit, limit, shape)
    return np.zeros(shape)


def init_convae(n_channels: int, window: int, *, seed: int = 0) -> ConvAE:
    """A :class:`ConvAE` with parameters drawn on the host by :func:`convae_draw` (no compile).

    Raises:
      ValueError: invalid sizes (from :class:`ConvAE`).
    """
    return models.init_without_compile(
        lambda: ConvAE(n_channels, window, rngs=nnx.Rngs(0)), convae_draw, seed=seed
    )
