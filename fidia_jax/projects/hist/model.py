"""HiST: a U-shaped sparse hierarchical transformer from per-spot image features to expression.

Built on HiST's sparse lattice primitives (:mod:`fidia_jax.projects.hist.lattice`: window
partition, window attention with relative position bias, patch pooling and pixel-shuffle
unpooling over the active spots). Also the dense baseline :class:`DenseSpotTransformer` (full
attention over all spots) the benchmark compares against; the loss is
:func:`fidia_jax.projects.hist.losses.masked_mse`.

Structure (authors' code ``configs/model/hist.yaml``: ``slide_configs: "111-21"``,
``token_init_types: ['max', 'mean', 'fix1e-4']``, ``connection: concat``, ``econvs_type:
patchconv``, ``dconvs_type: pixelshuffle``, ``trans_type: hybrid``, ``window_size: 3`` i.e. a
window side of 6)::

  input projection -> [level 0 blocks] -> pool -> [level 1 blocks] -> pool -> [level 2 blocks]
   -> unpool -> [2 blocks] -> concat skip(level 1) -> unpool (2C -> C) -> [1 block]
   -> concat skip(level 0) -> linear gene head (2C -> genes, log1p expression)

(the authors' ``skip_first: 1``, default ``skip_order="after_blocks"``; ``"fuse"`` is our
earlier reconstruction: unpool -> concat skip -> ``Linear(2C -> C)`` -> blocks).

Every transformer block is HiST's "hybrid" layer: the local part attends within the union of
the regular and the shifted window
(:func:`fidia_jax.projects.hist.lattice.lattice_window_attention`; the pattern is tested
against the authors' ``AttentionBuilder``, ``tests/projects/hist/test_hist_fidelity.py``); a
second set of projections lets each spot attend to the three slide tokens and each token to
every active spot and token (local <-> global); both outputs are summed before the output
projection. The slide tokens (default ``token_path="proj"``, the authors'
``global_strategy: 'proj'``) are the max- and mean-pool of the *input* features over the active
spots and a fixed (untrained) ``N(0, 1e-4^2)`` token of the input width, mapped to the model
width by their own ``Linear`` with bias; every pooling / unpooling maps them by its own
``Linear`` with bias. ``token_path="kernel"`` (our earlier choice) pools the projected features
and passes the tokens through the spots' pooling weights as a spot whose four children are all
itself.

The FFN (ratio ``ff_ratio`` 4, shared by spots and tokens) uses ReLU by default: the authors'
builder passes ``enc_act: 'ReLU'`` of ``hist.yaml`` as the transformer's FFN activation
(``ffn_activation="gelu"`` is our earlier choice). The relative position bias table and the
fixed token start as the authors' ``timm`` ``trunc_normal_`` with its default absolute bounds
``[-2, 2]``: at std 0.02 / 1e-4 that is a plain normal (``init_truncation=2.0`` truncates at two
standard deviations, our earlier choice).

Known differences from the authors' model (docs/hist.md, "Fidelity to the authors' code"): no
padding nodes at the canvas corners, attention dropout on the output rather than on the
probabilities, default-initialised pixel-shuffle weights, model width 64 by default.

References:
  Wu, Xu, Diao, Li, Wei, Andersson, Gui, "HiST", ICML 2026, arXiv:2606.14251;
  code github.com/wwyi1828/HiST (MIT).
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from fidia_jax.errors import DataError
from fidia_jax.projects.hist import lattice

__all__ = [
    "DenseSpotTransformer",
    "HiST",
    "check_finite_features",
    "init_head_bias",
    "sinusoidal_lattice_embedding",
    "torch_linear_init",
]


def check_feature_width(feats_NxF, in_features: int, *, name: str) -> None:
    """Raises :class:`~fidia_jax.errors.DataError` unless ``feats_NxF`` is ``(n, in_features)``
    (a raw shape error from inside the first layer otherwise)."""
    shape = tuple(np.shape(feats_NxF))
    if len(shape) != 2 or shape[1] != in_features:
        raise DataError(
            f"{name}: feats_NxF must be (n, {in_features}) (the model's in_features), got {shape}"
        )


def check_finite_features(feats_NxF, mask_N=None, *, name: str = "features") -> None:
    """Raises :class:`~fidia_jax.errors.DataError` if a concrete feature of an active spot is
    NaN or infinite, naming how many and the first spot indices; traced arrays pass.

    Args:
      feats_NxF: ``(n, F)`` per-spot features. mask_N: optional ``(n,)`` bool, only active
        spots are checked (padding rows may hold anything). name: named in the message.
    """
    if isinstance(feats_NxF, jax.core.Tracer) or isinstance(mask_N, jax.core.Tracer):
        return
    f = np.asarray(feats_NxF)
    if not np.issubdtype(f.dtype, np.floating):
        return
    bad = ~np.all(np.isfinite(f.reshape(len(f), -1)), axis=1)
    if mask_N is not None:
        bad &= np.asarray(mask_N, bool)
    if bad.any():
        idx = np.flatnonzero(bad)
        raise DataError(
            f"{name}: non-finite features (NaN or infinity) in {len(idx)} spot(s), first "
            f"{idx[:5].tolist()}; one such spot would make every prediction of the section NaN "
            "(attention and the slide tokens mix all spots): drop or impute those spots"
        )


def init_head_bias(head: nnx.Linear, mean_log1p_G) -> None:
    """Sets ``head.bias`` to ``mean_log1p_G`` ``(G,)``; ValueError on a shape mismatch or a
    non-finite value."""
    m = np.asarray(mean_log1p_G, np.float32)
    if head.bias is None or m.shape != head.bias.shape or not np.all(np.isfinite(m)):
        raise ValueError(
            f"init_head_bias: need a finite ({head.out_features},) vector for a head with bias, "
            f"got shape {m.shape}"
        )
    head.bias[...] = jnp.asarray(m, head.bias.dtype)


#: FFN activations of :class:`HiST` (``"relu"``: the authors' ``enc_act``).
FFN_ACTIVATIONS = {"relu": jax.nn.relu, "gelu": jax.nn.gelu}


def _init_normal(key, std: float, shape, truncation: float | None):
    """``std * N(0, 1)``, truncated at ``+-truncation`` standard deviations if given."""
    if truncation is None:
        return std * jax.random.normal(key, shape)
    return std * jax.random.truncated_normal(key, -truncation, truncation, shape)


def _masked_pool_tokens(x_NxC, mask_N):
    m = jnp.asarray(mask_N, bool)[:, None]
    mx = jnp.max(jnp.where(m, x_NxC, -jnp.inf), axis=0)
    mx = jnp.where(jnp.isfinite(mx), mx, 0.0)
    mean = jnp.sum(jnp.where(m, x_NxC, 0.0), axis=0) / jnp.maximum(jnp.sum(m), 1)
    return mx, mean


class _HybridBlock(nnx.Module):
    """Pre-norm transformer block: window attention (+ RPB) + local<->global token attention, FFN."""

    def __init__(
        self,
        dim: int,
        heads: int,
        window: int,
        ff_ratio: float,
        *,
        attn_drop: float,
        rngs: nnx.Rngs,
        ffn_activation: str = "relu",
        init_truncation: float | None = None,
    ):
        if dim % heads:
            raise ValueError(f"HiST: dim {dim} must be divisible by heads {heads}")
        self.heads = heads
        self.ffn_activation = ffn_activation
        self.norm1 = nnx.LayerNorm(dim, rngs=rngs)
        self.norm2 = nnx.LayerNorm(dim, rngs=rngs)
        self.qkv_local = nnx.Linear(dim, 3 * dim, rngs=rngs)
        self.qkv_global = nnx.Linear(dim, 3 * dim, rngs=rngs)
        R = 2 * window - 1
        self.rel_bias = nnx.Param(_init_normal(rngs.params(), 0.02, (heads, R, R), init_truncation))
        self.proj = nnx.Linear(dim, dim, rngs=rngs)
        self.ff1 = nnx.Linear(dim, int(dim * ff_ratio), rngs=rngs)
        self.ff2 = nnx.Linear(int(dim * ff_ratio), dim, rngs=rngs)
        self.drop = nnx.Dropout(attn_drop, rngs=rngs)

    def _split(self, y):
        n = y.shape[0]
        q, k, v = jnp.split(y, 3, axis=-1)
        return (t.reshape(n, self.heads, -1) for t in (q, k, v))

    def __call__(self, x_NxC, g_TxC, level: lattice.LatticeLevel, *, deterministic: bool):
        n, C = x_NxC.shape
        T = g_TxC.shape[0]
        mask = jnp.asarray(level.mask, bool)
        h, hg = self.norm1(x_NxC), self.norm1(g_TxC)
        q1, k1, v1 = self._split(self.qkv_local(h))
        local_NxHxD = lattice.lattice_window_attention(
            q1, k1, v1, level.coords, level.regular, level.shifted, self.rel_bias[...]
        )
        q2, k2, v2 = self._split(self.qkv_global(jnp.concatenate([h, hg], axis=0)))
        D = q2.shape[-1]
        scale = 1.0 / jnp.sqrt(jnp.asarray(D, q2.dtype))
        # spots <- tokens (softmax over the T tokens)
        s_NxHxT = jnp.einsum("nhd,thd->nht", q2[:n], k2[n:]) * scale
        l2g_NxHxD = jnp.einsum("nht,thd->nhd", jax.nn.softmax(s_NxHxT, axis=-1), v2[n:])
        # tokens <- active spots and tokens
        s_TxHxK = jnp.einsum("thd,khd->thk", q2[n:], k2) * scale
        key_ok = jnp.concatenate([mask, jnp.ones((T,), bool)])
        s_TxHxK = jnp.where(key_ok[None, None, :], s_TxHxK, -jnp.inf)
        g_TxHxD = jnp.einsum("thk,khd->thd", jax.nn.softmax(s_TxHxK, axis=-1), v2)
        att_x = self.drop((local_NxHxD + l2g_NxHxD).reshape(n, C), deterministic=deterministic)
        x = x_NxC + self.proj(att_x)
        g = g_TxC + self.proj(g_TxHxD.reshape(T, C))
        act = FFN_ACTIVATIONS[self.ffn_activation]
        x = x + self.ff2(act(self.ff1(self.norm2(x))))
        g = g + self.ff2(act(self.ff1(self.norm2(g))))
        return jnp.where(mask[:, None], x, 0.0), g


def _token_proj(c_in: int, c_out: int, rngs: nnx.Rngs) -> nnx.Linear:
    """The authors' ``g_proj`` (``global_strategy: 'proj'``): a default torch ``nn.Linear``."""
    k_init, b_init = torch_linear_init(c_in)
    return nnx.Linear(c_in, c_out, kernel_init=k_init, bias_init=b_init, rngs=rngs)


class _Pool(nnx.Module):
    """Stride-2 patch conv over active children (missing child = 0), then LayerNorm (post).

    Tokens: ``"proj"`` (the authors' ``global_strategy``) their own ``Linear(C -> C)`` with bias,
    no norm; ``"kernel"`` the spots' weights on 4 copies, then the norm.
    """

    def __init__(self, dim: int, *, rngs: nnx.Rngs, token_path: str = "proj"):
        self.lin = nnx.Linear(4 * dim, dim, use_bias=False, rngs=rngs)
        self.norm = nnx.LayerNorm(dim, rngs=rngs)
        self.token_path = token_path
        if token_path == "proj":
            self.g_proj = _token_proj(dim, dim, rngs)

    def __call__(self, x_NxC, g_TxC, pool: lattice.PoolPlan):
        x = self.norm(self.lin(lattice.sparse_patch_pool(x_NxC, pool.children)))
        if self.token_path == "proj":
            return x, self.g_proj(g_TxC)
        g = self.norm(self.lin(jnp.concatenate([g_TxC] * 4, axis=-1)))
        return x, g


class _Unpool(nnx.Module):
    """Sparse pixel shuffle ``C_in -> 4 x C`` to the cached active support of the finer level,
    then LayerNorm. Tokens as in :class:`_Pool` (``"kernel"``: the mean of the 4 outputs)."""

    def __init__(self, dim: int, *, rngs: nnx.Rngs, in_dim: int | None = None, token_path="proj"):
        in_dim = dim if in_dim is None else in_dim
        self.lin = nnx.Linear(in_dim, 4 * dim, use_bias=False, rngs=rngs)
        self.norm = nnx.LayerNorm(dim, rngs=rngs)
        self.token_path = token_path
        if token_path == "proj":
            self.g_proj = _token_proj(in_dim, dim, rngs)

    def __call__(self, y_MxC, g_TxC, pool: lattice.PoolPlan):
        M = y_MxC.shape[0]
        C = self.norm.num_features
        up = self.lin(y_MxC).reshape(M, 4, C)
        x = self.norm(lattice.sparse_unpool(up, pool.parent, pool.offset))
        if self.token_path == "proj":
            return x, self.g_proj(g_TxC)
        g = self.norm(jnp.mean(self.lin(g_TxC).reshape(-1, 4, C), axis=1))
        return x, g


def torch_linear_init(fan_in: int):
    """``(kernel_init, bias_init)`` of PyTorch's ``nn.Linear`` default for ``fan_in`` inputs.

    Both draw from ``U(-1/sqrt(fan_in), 1/sqrt(fan_in))`` (``kaiming_uniform_(a=sqrt(5))`` for
    the weight, i.e. variance ``1 / (3 fan_in)``, a third of Flax's default ``lecun_normal``
    variance). HiST's authors build the gene head as a plain ``nn.Linear`` and never re-initialise
    it (``configs/model/hist.yaml`` via ``_build_decoder_config``'s final ``linear`` layer), so this
    is the authors' head initialisation.
    """
    if fan_in < 1:
        raise ValueError(f"torch_linear_init: fan_in must be >= 1, got {fan_in}")
    bound = 1.0 / np.sqrt(fan_in)

    def bias_init(key, shape, dtype=jnp.float32):
        return jax.random.uniform(key, shape, dtype, -bound, bound)

    return nnx.initializers.variance_scaling(1.0 / 3.0, "fan_in", "uniform"), bias_init


class HiST(nnx.Module):
    """HiST: per-spot features ``(n, F)`` on a sparse lattice -> log1p expression ``(n, G)``.

    Args:
      in_features: per-spot feature width ``F``.
      num_genes: output genes ``G``.
      dim: width ``C`` at every level (authors' ``channel_factor: 1``).
      heads: attention heads.
      enc_depths: blocks per encoder level, finest first (authors ``"111"`` -> ``(1, 1, 1)``);
        its length is the number of levels ``L``.
      dec_depths: blocks per decoder level, coarse to fine, ``L - 1`` entries (``"21"``).
      window: window side ``S`` (authors' ``window_size: 3`` is half of ``S = 6``).
      ff_ratio: FFN width ratio; dropout: input and attention dropout.
      ffn_activation: ``"relu"`` (default, the authors' ``enc_act: 'ReLU'``) or ``"gelu"``.
      init_truncation: ``None`` (default, the authors': plain normal init of the relative
        position bias, std 0.02, and of the fixed token, std ``token_std``) or a truncation in
        standard deviations (our earlier ``2.0``).
      token_path: ``"proj"`` (default, the authors' ``global_strategy: 'proj'``): the max / mean
        tokens pool the *input* features ``(F,)``, the fixed token has width ``F``, and a
        ``Linear(F -> dim)`` with bias maps the three; each pooling / unpooling maps the tokens
        with its own ``Linear`` with bias (no norm). ``"kernel"`` (our earlier choice, the
        authors' ``'kernel'`` strategy): tokens pool the projected features and pass the spots'
        pooling / unpooling weights.
      skip_order: ``"after_blocks"`` (default, the authors' ``skip_first: 1``): a decoder level
        unpools, runs its blocks, then concatenates the encoder skip; the next unpooling and the
        gene head read the ``2 dim`` concatenation. ``"fuse"`` (our earlier reconstruction):
        unpool, concatenate, ``Linear(2 dim -> dim)``, then the blocks.
      input_proj: ``"linear"`` (the authors' ``configs/model/hist.yaml``, ``activation:
        null``: bias-free ``Linear(F -> dim)`` then dropout) or ``"mlp"`` (their block with an
        activation: bias-free ``Linear(F -> int(F * input_mlp_ratio))``, ReLU, dropout,
        bias-free ``Linear(-> dim)``).
      input_mlp_ratio: hidden width ratio of the ``"mlp"`` projection (authors' 0.5).
      token_std: std of the fixed slide token (authors ``fix1e-4``).
      rngs: ``nnx.Rngs`` with ``params`` (and ``dropout`` when training with ``dropout > 0``).

    Call: ``model(feats_NxF, plan, deterministic=True) -> pred_NxG`` where ``plan`` is
    :func:`fidia_jax.projects.hist.lattice.plan_hierarchy` of the section's lattice with
    ``levels = L`` and the same ``window``; rows of inactive (padding) spots are zero.
    Concrete features with a NaN or infinity in an active spot raise
    :class:`~fidia_jax.errors.DataError` naming the spots (one NaN feature would otherwise make
    every prediction of the section NaN through attention and the slide tokens); traced
    features (under ``jit``) are not checked.

    The gene head starts as the authors' does, a PyTorch-default ``nn.Linear``
    (:func:`torch_linear_init`: weight and bias ``U(+-1/sqrt(dim))``); use
    :meth:`init_head_bias` to start its bias at the training spots' mean expression (the
    authors' ``init_bias_with_mean``).
    """

    def __init__(
        self,
        in_features: int,
        num_genes: int,
        *,
        dim: int = 64,
        heads: int = 2,
        enc_depths: Sequence[int] = (1, 1, 1),
        dec_depths: Sequence[int] = (2, 1),
        window: int = 6,
        ff_ratio: float = 4.0,
        dropout: float = 0.05,
        token_std: float = 1e-4,
        input_proj: str = "linear",
        input_mlp_ratio: float = 0.5,
        ffn_activation: str = "relu",
        init_truncation: float | None = None,
        token_path: str = "proj",
        skip_order: str = "after_blocks",
        rngs: nnx.Rngs,
    ):
        if token_path not in ("proj", "kernel"):
            raise ValueError(f"HiST: token_path must be 'proj' or 'kernel', got {token_path!r}")
        if skip_order not in ("after_blocks", "fuse"):
            raise ValueError(
                f"HiST: skip_order must be 'after_blocks' or 'fuse', got {skip_order!r}"
            )
        if input_proj not in ("linear", "mlp"):
            raise ValueError(f"HiST: input_proj must be 'linear' or 'mlp', got {input_proj!r}")
        if ffn_activation not in FFN_ACTIVATIONS:
            raise ValueError(
                f"HiST: ffn_activation must be one of {tuple(FFN_ACTIVATIONS)}, got {ffn_activation!r}"
            )
        if init_truncation is not None and not init_truncation > 0:
            raise ValueError(f"HiST: init_truncation must be None or > 0, got {init_truncation}")
        if len(dec_depths) != len(enc_depths) - 1:
            raise ValueError(
                f"HiST: need len(dec_depths) == len(enc_depths) - 1, got "
                f"{dec_depths} and {enc_depths}"
            )
        if window < 2:
            raise ValueError(f"HiST: window must be >= 2, got {window}")
        self.window = window
        self.levels = len(enc_depths)
        self.in_features = int(in_features)
        self.input_proj = input_proj
        self.token_path = token_path
        self.skip_order = skip_order
        if input_proj == "linear":
            self.inp = nnx.Linear(in_features, dim, use_bias=False, rngs=rngs)
        else:
            hidden = max(1, int(in_features * input_mlp_ratio))
            self.inp_hidden = nnx.Linear(in_features, hidden, use_bias=False, rngs=rngs)
            self.inp_hidden_drop = nnx.Dropout(dropout, rngs=rngs)
            self.inp = nnx.Linear(hidden, dim, use_bias=False, rngs=rngs)
        self.inp_drop = nnx.Dropout(dropout, rngs=rngs)
        tok_dim = in_features if token_path == "proj" else dim
        self.fixed_token = nnx.Variable(
            _init_normal(rngs.params(), token_std, (1, tok_dim), init_truncation)
        )
        if token_path == "proj":
            self.token_in = _token_proj(in_features, dim, rngs)

        def blocks(k):
            return nnx.List(
                [
                    _HybridBlock(
                        dim,
                        heads,
                        window,
                        ff_ratio,
                        attn_drop=dropout,
                        rngs=rngs,
                        ffn_activation=ffn_activation,
                        init_truncation=init_truncation,
                    )
                    for _ in range(k)
                ]
            )

        self.enc = nnx.List([blocks(k) for k in enc_depths])
        nd = self.levels - 1
        after = skip_order == "after_blocks"
        self.pools = nnx.List([_Pool(dim, rngs=rngs, token_path=token_path) for _ in range(nd)])
        self.unpools = nnx.List(
            [
                _Unpool(
                    dim, rngs=rngs, in_dim=2 * dim if after and i else dim, token_path=token_path
                )
                for i in range(nd)
            ]
        )
        self.fuse = nnx.List(
            [] if after else [nnx.Linear(2 * dim, dim, rngs=rngs) for _ in range(nd)]
        )
        self.dec = nnx.List([blocks(k) for k in dec_depths])
        # the authors' head is a default-initialised torch nn.Linear (see torch_linear_init); it
        # reads the last skip concatenation (2 dim) with skip_order="after_blocks"
        head_in = 2 * dim if after and nd else dim
        head_kernel_init, head_bias_init = torch_linear_init(head_in)
        self.head = nnx.Linear(
            head_in, num_genes, kernel_init=head_kernel_init, bias_init=head_bias_init, rngs=rngs
        )

    def init_head_bias(self, mean_log1p_G) -> None:
        """Sets the gene head's bias to ``mean_log1p_G`` ``(G,)`` (the training spots' mean
        log1p expression, the authors' ``init_bias_with_mean``)."""
        init_head_bias(self.head, mean_log1p_G)

    def _project(self, feats_NxF, deterministic):
        h = feats_NxF
        if self.input_proj == "mlp":
            h = self.inp_hidden_drop(jax.nn.relu(self.inp_hidden(h)), deterministic=deterministic)
        return self.inp_drop(self.inp(h), deterministic=deterministic)

    def __call__(
        self, feats_NxF, plan: Sequence[lattice.LatticeLevel], *, deterministic: bool = True
    ):
        if len(plan) != self.levels:
            raise ValueError(f"HiST: the plan has {len(plan)} levels, the model {self.levels}")
        check_feature_width(feats_NxF, self.in_features, name="HiST")
        check_finite_features(feats_NxF, plan[0].mask, name="HiST")
        mask0 = jnp.asarray(plan[0].mask, bool)
        x = self._project(feats_NxF, deterministic)
        x = jnp.where(mask0[:, None], x, 0.0)
        if self.token_path == "proj":  # the authors: pool the input features, then g_proj
            f = jnp.where(mask0[:, None], jnp.asarray(feats_NxF, x.dtype), 0.0)
            mx, mean = _masked_pool_tokens(f, mask0)
            g = jnp.concatenate([mx[None], mean[None], self.fixed_token[...]], axis=0)
            g = self.token_in(g)
        else:
            mx, mean = _masked_pool_tokens(x, mask0)
            g = jnp.concatenate([mx[None], mean[None], self.fixed_token[...]], axis=0)
        skips = []
        for lvl in range(self.levels):
            if lvl > 0:
                x, g = self.pools[lvl - 1](x, g, plan[lvl - 1].pool)
                x = jnp.where(jnp.asarray(plan[lvl].mask)[:, None], x, 0.0)
            for blk in self.enc[lvl]:
                x, g = blk(x, g, plan[lvl], deterministic=deterministic)
            skips.append((x, g))
        for i, lvl in enumerate(range(self.levels - 2, -1, -1)):
            x, g = self.unpools[i](x, g, plan[lvl].pool)
            sx, sg = skips[lvl]
            if self.skip_order == "fuse":
                x = self.fuse[i](jnp.concatenate([x, sx], axis=-1))
                g = self.fuse[i](jnp.concatenate([g, sg], axis=-1))
            for blk in self.dec[i]:
                x, g = blk(x, g, plan[lvl], deterministic=deterministic)
            if self.skip_order == "after_blocks":
                x = jnp.concatenate([x, sx], axis=-1)
                g = jnp.concatenate([g, sg], axis=-1)
        return jnp.where(mask0[:, None], self.head(x), 0.0)


def sinusoidal_lattice_embedding(coords_Nx2, dim: int, *, base: float = 100.0):
    """2-D sinusoidal embedding ``(n, dim)`` of integer lattice coordinates (``dim % 4 == 0``):
    half the channels encode ``x``, half ``y``, each as ``sin``/``cos`` at geometric frequencies."""
    if dim % 4:
        raise ValueError(f"sinusoidal_lattice_embedding: dim must be a multiple of 4, got {dim}")
    c = jnp.asarray(coords_Nx2, jnp.float32)
    freqs = base ** (-jnp.arange(dim // 4, dtype=jnp.float32) / (dim // 4))
    parts = []
    for a in range(2):
        ang = c[:, a : a + 1] * freqs[None, :]
        parts += [jnp.sin(ang), jnp.cos(ang)]
    return jnp.concatenate(parts, axis=-1)


class DenseSpotTransformer(nnx.Module):
    """Baseline: pre-norm transformer with full (``n x n``, masked) attention over all spots.

    Input projection plus a 2-D sinusoidal embedding of the lattice coordinates, ``depth``
    blocks of dense multi-head attention and GELU FFN, linear gene head. Memory ``O(n^2 H)``.

    Call: ``model(feats_NxF, coords_Nx2, mask_N, deterministic=True) -> pred_NxG``.
    """

    def __init__(
        self,
        in_features: int,
        num_genes: int,
        *,
        dim: int = 64,
        heads: int = 2,
        depth: int = 2,
        ff_ratio: float = 4.0,
        dropout: float = 0.05,
        rngs: nnx.Rngs,
    ):
        self.dim = dim
        self.inp = nnx.Linear(in_features, dim, rngs=rngs)
        self.attn = nnx.List(
            [
                nnx.MultiHeadAttention(heads, dim, decode=False, rngs=rngs, dropout_rate=dropout)
                for _ in range(depth)
            ]
        )
        self.n1 = nnx.List([nnx.LayerNorm(dim, rngs=rngs) for _ in range(depth)])
        self.n2 = nnx.List([nnx.LayerNorm(dim, rngs=rngs) for _ in range(depth)])
        self.ff1 = nnx.List([nnx.Linear(dim, int(dim * ff_ratio), rngs=rngs) for _ in range(depth)])
        self.ff2 = nnx.List([nnx.Linear(int(dim * ff_ratio), dim, rngs=rngs) for _ in range(depth)])
        self.head = nnx.Linear(dim, num_genes, rngs=rngs)

    def init_head_bias(self, mean_log1p_G) -> None:
        """As :meth:`HiST.init_head_bias`."""
        init_head_bias(self.head, mean_log1p_G)

    def __call__(self, feats_NxF, coords_Nx2, mask_N, *, deterministic: bool = True):
        check_feature_width(feats_NxF, self.inp.in_features, name="DenseSpotTransformer")
        check_finite_features(feats_NxF, mask_N, name="DenseSpotTransformer")
        m = jnp.asarray(mask_N, bool)
        x = self.inp(feats_NxF) + sinusoidal_lattice_embedding(coords_Nx2, self.dim)
        attn_mask = (m[:, None] & m[None, :])[None, :, :]
        for a, n1, n2, f1, f2 in zip(self.attn, self.n1, self.n2, self.ff1, self.ff2, strict=True):
            x = x + a(n1(x), mask=attn_mask, deterministic=deterministic)
            x = x + f2(jax.nn.gelu(f1(n2(x))))
        return jnp.where(m[:, None], self.head(x), 0.0)
