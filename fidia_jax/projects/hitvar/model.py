"""HIT-VAR networks: the LR-conditioned residual-quantised tokenizer, the next-scale VAR
transformer with block-causal attention over scales, and a small conv SR baseline.

* :class:`HitVarTokenizer`: conv encoder of the HR image to a ``(H, H, D)`` latent, VAR's
  multi-scale residual quantiser (:func:`fidia_jax.layers.multiscale_residual_quantize`) with an
  EMA codebook, and a decoder conditioned on the LR image. ``hierarchical=True`` (HIT-VAR): the
  prefix of ``schedule.prefix_length(m)`` token scales decodes to the ``x m`` image
  (``m * lr`` pixels); the plain RQ tokenizer (``hierarchical=False``, same weights) decodes only
  the full sequence at ``x M`` and smaller scales are its bicubic downsampling.
* :class:`NextScaleTransformer`: predicts the tokens of scale ``k`` from the upsampled-then-
  downsampled sum of scales ``< k`` and the LR image; attention is block-causal over scales.
* :func:`generate_tokens`: scale-by-scale decoding (argmax or temperature sampling).
* :class:`ConvSR`: residual conv net over bicubic upsampling (the "same parameter count"
  baseline; pick its width with :func:`conv_sr_width_for_params`).

The conditioning of the decoder and of the transformer on the LR image, the shared scale-agnostic
upsampling head and all sizes are our reconstruction (the paper's text was not available: arXiv
2605.14891, abstract only).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from fidia_jax import _checks
from fidia_jax.layers import (
    multiscale_residual_quantize,
    resize_grid,
    resize_images,
    tokens_to_latent,
)
from fidia_jax.projects.hitvar.schedule import HierarchicalSchedule

__all__ = [
    "ConvSR",
    "HitVarTokenizer",
    "NextScaleTransformer",
    "bicubic_resize",
    "conv_sr_width_for_params",
    "generate_tokens",
    "hitvar_draw",
    "next_scale_inputs",
]


class Codebook(nnx.Variable):
    """EMA-learned state (codes, cluster sizes, sums): not touched by the optimiser."""


def bicubic_resize(images: jax.Array, size: int) -> jax.Array:
    """``(B, h, w, C) -> (B, size, size, C)`` bicubic (Keys ``a = -0.5``, antialiased when
    downsampling), equal to ``jax.image.resize(method="cubic")``
    (:func:`fidia_jax.layers.resize_images`)."""
    _checks.assert_rank(images, 4, "images", where="bicubic_resize", detail="(B, H, W, C)")
    return resize_images(images, size, "cubic")


def _check_images(x, side: int, name: str, where: str) -> None:
    _checks.assert_rank(x, 4, name, where=where, detail="(B, H, W, 3)")
    if x.shape[1] != side or x.shape[2] != side or x.shape[3] != 3:
        raise ValueError(f"{where}: {name} must be (B, {side}, {side}, 3), got {tuple(x.shape)}")


def hitvar_draw() -> Callable[[tuple[str, ...], tuple[int, ...], np.random.Generator], np.ndarray]:
    """The HIT-VAR networks' initialisation rule for :func:`fidia_jax.models.init_without_compile`.

    ``kernel`` ~ N(0, 1 / fan_in) (LeCun normal, untruncated) except the last conv of an SR head
    (``head2``), zero so that the network starts as bicubic upsampling; ``bias`` /
    ``scale_bias`` = 0; LayerNorm ``scale`` = 1; ``scale_emb`` / ``pos_emb`` ~ N(0, 0.02^2);
    ``codebook`` = ``embed_sum`` ~ N(0, 0.1^2) (one draw per shape, shared by the two);
    ``cluster_size`` = 1.

    Raises (when drawing):
      ValueError: a leaf whose name has no rule here.
    """
    codebook: dict[tuple[int, ...], np.ndarray] = {}

    def draw(names, shape, rng):
        name = names[-1]
        if name == "kernel" and "head2" in names:  # the last conv of an SR head: start at bicubic
            return np.zeros(shape)
        if name == "kernel":
            fan_in = int(np.prod(shape[:-1]))
            return rng.standard_normal(shape) / np.sqrt(fan_in)
        if name in ("bias", "scale_bias"):
            return np.zeros(shape)
        if name in ("scale", "cluster_size"):
            return np.ones(shape)
        if name in ("scale_emb", "pos_emb"):
            return 0.02 * rng.standard_normal(shape)
        if name in ("codebook", "embed_sum"):
            if shape not in codebook:
                codebook[shape] = 0.1 * rng.standard_normal(shape)
            return codebook[shape]
        raise ValueError(f"init_without_compile: no rule for the leaf {name!r} ({names})")

    return draw


class _ResBlock(nnx.Module):
    def __init__(self, ch: int, *, rngs: nnx.Rngs):
        self.c1 = nnx.Conv(ch, ch, (3, 3), rngs=rngs)
        self.c2 = nnx.Conv(ch, ch, (3, 3), rngs=rngs)

    def __call__(self, x):
        return x + self.c2(jax.nn.gelu(self.c1(jax.nn.gelu(x))))


class HitVarTokenizer(nnx.Module):
    """Residual-quantised, LR-conditioned image tokenizer whose prefixes decode at ``x1..xM``.

    Args:
      schedule: the :class:`~fidia_jax.projects.hitvar.schedule.HierarchicalSchedule` (HR side
        ``M * lr``; the ratio HR / latent must be a power of two).
      channels: conv width.
      latent_dim: code dimension ``D``.
      codebook_size: number of codes ``K``.
      hierarchical: HIT-VAR (every prefix decodes at its scale) or the plain RQ tokenizer.
      res_blocks: residual blocks of the decoder trunk.
      rngs: ``nnx.Rngs`` (``params``).
    """

    def __init__(
        self,
        schedule: HierarchicalSchedule,
        *,
        channels: int = 32,
        latent_dim: int = 16,
        codebook_size: int = 256,
        hierarchical: bool = True,
        res_blocks: int = 2,
        rngs: nnx.Rngs,
    ):
        hr = schedule.lr_size * max(schedule.scales)
        ratio = hr // schedule.latent_size
        if ratio < 1 or 2 ** int(round(math.log2(ratio))) != ratio:
            raise ValueError(
                f"HitVarTokenizer: HR side / latent side must be a power of two, got {hr} / "
                f"{schedule.latent_size}"
            )
        self.schedule = schedule
        self.hierarchical = hierarchical
        self.latent_dim, self.codebook_size = latent_dim, codebook_size
        ch = channels
        downs = int(round(math.log2(ratio)))
        # the first conv already halves the side (when the ratio is > 1): cheaper at HR size
        self.enc_in = (
            nnx.Conv(3, ch, (4, 4), strides=(2, 2), rngs=rngs)
            if downs
            else nnx.Conv(3, ch, (3, 3), rngs=rngs)
        )
        self.enc_down = nnx.List(
            [nnx.Conv(ch, ch, (4, 4), strides=(2, 2), rngs=rngs) for _ in range(max(downs - 1, 0))]
        )
        self.enc_out = nnx.Conv(ch, latent_dim, (1, 1), rngs=rngs)
        self.lr_in = nnx.Conv(3, ch, (3, 3), rngs=rngs)
        self.lr_block = _ResBlock(ch, rngs=rngs)
        self.dec_in = nnx.Conv(latent_dim + ch, ch, (3, 3), rngs=rngs)
        self.scale_bias = nnx.Param(jnp.zeros((len(schedule.scales), ch)))
        self.trunk = nnx.List([_ResBlock(ch, rngs=rngs) for _ in range(res_blocks)])
        hc = max(ch // 4, 4)  # the head runs at output resolution: keep it narrow
        self.head1 = nnx.Conv(ch, hc, (3, 3), rngs=rngs)
        self.head2 = nnx.Conv(hc, 3, (3, 3), rngs=rngs)
        key = rngs.params()
        codes = jax.random.normal(key, (codebook_size, latent_dim)) * 0.1
        self.codebook = Codebook(codes)
        self.cluster_size = Codebook(jnp.ones((codebook_size,)))
        self.embed_sum = Codebook(codes)

    def encode(self, hr_BxHxWx3: jax.Array) -> jax.Array:
        """HR images ``(B, M*lr, M*lr, 3)`` in ``[0, 1]`` -> latent ``(B, H, H, D)``."""
        _check_images(
            hr_BxHxWx3,
            self.schedule.lr_size * max(self.schedule.scales),
            "hr",
            "HitVarTokenizer.encode",
        )
        h = jax.nn.gelu(self.enc_in(hr_BxHxWx3 * 2.0 - 1.0))
        for conv in self.enc_down:
            h = jax.nn.gelu(conv(h))
        return self.enc_out(h)

    def quantize(self, f_BxHxHxD: jax.Array):
        """:func:`fidia_jax.layers.multiscale_residual_quantize` with this codebook."""
        return multiscale_residual_quantize(f_BxHxHxD, self.codebook[...], self.schedule.grids)

    def _lr_features(self, lr):
        feat = self.lr_block(jax.nn.gelu(self.lr_in(lr * 2.0 - 1.0)))
        return resize_grid(feat, self.schedule.latent_size)

    def decode_latent(
        self, fhat_BxHxHxD: jax.Array, lr_Bxlxlx3: jax.Array, scale: int
    ) -> jax.Array:
        """Decodes a latent (a prefix sum) with the LR image at SR scale ``scale``.

        Returns ``(B, scale * lr, scale * lr, 3)``: bicubic(LR) plus a learned residual. The
        plain tokenizer decodes at ``x M`` and resizes down for smaller scales.
        """
        sch = self.schedule
        _check_images(lr_Bxlxlx3, sch.lr_size, "lr", "HitVarTokenizer.decode_latent")
        out_size = sch.output_size(scale)
        dec_scale = scale if self.hierarchical else max(sch.scales)
        h = self.dec_in(jnp.concatenate([fhat_BxHxHxD, self._lr_features(lr_Bxlxlx3)], -1))
        h = h + self.scale_bias[dec_scale - 1][None, None, None]
        for blk in self.trunk:
            h = blk(h)
        size = sch.output_size(dec_scale)
        h = resize_images(h, size, "linear")
        img = bicubic_resize(lr_Bxlxlx3, size) + self.head2(jax.nn.gelu(self.head1(h)))
        if size != out_size:
            img = bicubic_resize(img, out_size)
        return img

    def prefix_for(self, scale: int) -> int:
        """Token scales read for SR scale ``scale`` (all of them for the plain tokenizer)."""
        return self.schedule.prefix_length(scale) if self.hierarchical else len(self.schedule.grids)

    def decode_tokens(self, codes: list[jax.Array], lr: jax.Array, scale: int) -> jax.Array:
        """Decodes the token prefix that scale ``scale`` reads (:meth:`prefix_for`)."""
        latent = tokens_to_latent(
            codes, self.codebook[...], self.schedule.latent_size, self.prefix_for(scale)
        )
        return self.decode_latent(latent, lr, scale)


def next_scale_inputs(fhat_prefixes_KxBxHxHxD: jax.Array, grids: tuple[int, ...]) -> jax.Array:
    """Teacher-forcing inputs of the VAR transformer, ``(B, T, D)``.

    Scale ``k``'s ``s_k^2`` inputs are ``resize(fhat_{k-1}, s_k)`` (zeros for ``k = 1``): what
    the model knows when it predicts scale ``k``.
    """
    k, b, _, _, d = fhat_prefixes_KxBxHxHxD.shape
    if k < len(grids) - 1:
        raise ValueError(f"next_scale_inputs: need >= {len(grids) - 1} prefixes, got {k}")
    parts = [jnp.zeros((b, grids[0] ** 2, d), fhat_prefixes_KxBxHxHxD.dtype)]
    for i, s in enumerate(grids[1:]):
        parts.append(resize_grid(fhat_prefixes_KxBxHxHxD[i], s).reshape(b, s * s, d))
    return jnp.concatenate(parts, axis=1)


class _Block(nnx.Module):
    def __init__(self, dim: int, heads: int, mlp_ratio: int, *, rngs: nnx.Rngs):
        self.heads = heads
        self.ln1 = nnx.LayerNorm(dim, rngs=rngs)
        self.qkv = nnx.Linear(dim, 3 * dim, rngs=rngs)
        self.proj = nnx.Linear(dim, dim, rngs=rngs)
        self.ln2 = nnx.LayerNorm(dim, rngs=rngs)
        self.fc1 = nnx.Linear(dim, mlp_ratio * dim, rngs=rngs)
        self.fc2 = nnx.Linear(mlp_ratio * dim, dim, rngs=rngs)

    def __call__(self, x_BxTxC, mask_TxT):
        b, t, c = x_BxTxC.shape
        qkv = self.qkv(self.ln1(x_BxTxC)).reshape(b, t, 3, self.heads, c // self.heads)
        o_BxTxNxH = jax.nn.dot_product_attention(
            qkv[:, :, 0], qkv[:, :, 1], qkv[:, :, 2], mask=mask_TxT[None, None]
        )
        x_BxTxC = x_BxTxC + self.proj(o_BxTxNxH.reshape(b, t, c))
        return x_BxTxC + self.fc2(jax.nn.gelu(self.fc1(self.ln2(x_BxTxC))))


class NextScaleTransformer(nnx.Module):
    """Next-scale token predictor conditioned on the LR image (VAR with block-causal attention).

    Args:
      schedule: token grids and LR size.
      latent_dim: ``D`` of the tokenizer's codes (the inputs).
      codebook_size: ``K`` (logits).
      dim, depth, heads, mlp_ratio: transformer sizes.
      rngs: ``nnx.Rngs``.
    """

    def __init__(
        self,
        schedule: HierarchicalSchedule,
        *,
        latent_dim: int,
        codebook_size: int,
        dim: int = 64,
        depth: int = 2,
        heads: int = 4,
        mlp_ratio: int = 4,
        rngs: nnx.Rngs,
    ):
        if dim % heads:
            raise ValueError(f"NextScaleTransformer: dim {dim} must be divisible by heads {heads}")
        self.schedule = schedule
        t = schedule.num_tokens
        self.in_proj = nnx.Linear(latent_dim, dim, rngs=rngs)
        self.lr_proj = nnx.Conv(3, dim, (3, 3), rngs=rngs)
        self.scale_emb = nnx.Param(
            jax.random.normal(rngs.params(), (len(schedule.grids), dim)) * 0.02
        )
        self.pos_emb = nnx.Param(jax.random.normal(rngs.params(), (t, dim)) * 0.02)
        self.blocks = nnx.List([_Block(dim, heads, mlp_ratio, rngs=rngs) for _ in range(depth)])
        self.ln = nnx.LayerNorm(dim, rngs=rngs)
        self.head = nnx.Linear(dim, codebook_size, rngs=rngs)

    def __call__(self, inputs_BxTxD: jax.Array, lr_Bxlxlx3: jax.Array) -> jax.Array:
        """Logits ``(B, T, K)`` of every token given :func:`next_scale_inputs` and the LR."""
        sch = self.schedule
        _check_images(lr_Bxlxlx3, sch.lr_size, "lr", "NextScaleTransformer")
        b = inputs_BxTxD.shape[0]
        lr_feat = self.lr_proj(lr_Bxlxlx3 * 2.0 - 1.0)
        cond = jnp.concatenate(
            [resize_grid(lr_feat, s).reshape(b, s * s, -1) for s in sch.grids], axis=1
        )
        scale_of = np.concatenate([np.full(s * s, k) for k, s in enumerate(sch.grids)])
        emb_1xTxC = (self.scale_emb[jnp.asarray(scale_of)] + self.pos_emb)[None]
        x = self.in_proj(inputs_BxTxD) + cond + emb_1xTxC
        mask_TxT = jnp.asarray(sch.mask())
        for blk in self.blocks:
            x = blk(x, mask_TxT)
        return self.head(self.ln(x))


def generate_tokens(
    model: NextScaleTransformer,
    codebook: jax.Array,
    lr: jax.Array,
    *,
    key: jax.Array | None = None,
    temperature: float = 0.0,
) -> tuple[list[jax.Array], jax.Array]:
    """Scale-by-scale generation: ``K`` passes, pass ``k`` reads the logits of scale ``k``.

    Thanks to the block-causal mask, scale ``k``'s logits do not depend on the (still empty)
    inputs of later scales, so every pass runs the full fixed-length sequence (one shape).

    Args:
      model: the transformer.
      codebook: ``(K, D)`` the tokenizer's codes.
      lr: ``(B, lr, lr, 3)``.
      key: PRNG key, needed when ``temperature > 0``.
      temperature: ``0`` = argmax; else sample ``softmax(logits / temperature)``.

    Returns:
      ``(codes, fhat_prefixes)`` as :func:`fidia_jax.layers.multiscale_residual_quantize`.
    """
    if temperature < 0 or (temperature > 0 and key is None):
        raise ValueError(
            f"generate_tokens: temperature must be >= 0 (and >0 needs a key), got {temperature}"
        )
    sch = model.schedule
    b = lr.shape[0]
    h, d = sch.latent_size, codebook.shape[1]
    off = sch.offsets
    inputs = jnp.zeros((b, sch.num_tokens, d), codebook.dtype)
    fhat = jnp.zeros((b, h, h, d), codebook.dtype)
    codes, prefixes = [], []
    for k, s in enumerate(sch.grids):
        logits = model(inputs, lr)[:, off[k] : off[k + 1]]
        if temperature > 0:
            c = jax.random.categorical(jax.random.fold_in(key, k), logits / temperature)
        else:
            c = jnp.argmax(logits, axis=-1)
        c = c.astype(jnp.int32).reshape(b, s, s)
        fhat = fhat + resize_grid(jnp.take(codebook, c, axis=0), h)
        codes.append(c)
        prefixes.append(fhat)
        if k + 1 < len(sch.grids):
            s2 = sch.grids[k + 1]
            inputs = inputs.at[:, off[k + 1] : off[k + 2]].set(
                resize_grid(fhat, s2).reshape(b, s2 * s2, d)
            )
    return codes, jnp.stack(prefixes)


class ConvSR(nnx.Module):
    """Residual conv SR net: LR -> features -> bilinear resize -> conv head (``max(width // 4,
    4)`` channels), plus bicubic(LR).

    Args:
      width: channels.
      blocks: residual blocks at LR resolution.
      rngs: ``nnx.Rngs``.
    """

    def __init__(self, *, width: int = 32, blocks: int = 4, rngs: nnx.Rngs):
        self.conv_in = nnx.Conv(3, width, (3, 3), rngs=rngs)
        self.blocks = nnx.List([_ResBlock(width, rngs=rngs) for _ in range(blocks)])
        hc = max(width // 4, 4)
        self.head1 = nnx.Conv(width, hc, (3, 3), rngs=rngs)
        self.head2 = nnx.Conv(hc, 3, (3, 3), rngs=rngs)

    def __call__(self, lr_Bxlxlx3: jax.Array, out_size: int) -> jax.Array:
        """``(B, l, l, 3) -> (B, out_size, out_size, 3)``."""
        _checks.assert_rank(lr_Bxlxlx3, 4, "lr", where="ConvSR", detail="(B, H, W, 3)")
        h = self.conv_in(lr_Bxlxlx3 * 2.0 - 1.0)
        for blk in self.blocks:
            h = blk(h)
        h = resize_images(h, out_size, "linear")
        return bicubic_resize(lr_Bxlxlx3, out_size) + self.head2(jax.nn.gelu(self.head1(h)))


def conv_sr_width_for_params(target: int, *, blocks: int = 4) -> int:
    """The :class:`ConvSR` width whose parameter count is closest to ``target``.

    Closed form of the count (``h = max(w // 4, 4)``): ``28 w + 2 blocks (9 w^2 + w) + (9 w h + h) +
    (27 h + 3)``.
    """

    def n(w):
        h = max(w // 4, 4)
        return 28 * w + 2 * blocks * (9 * w * w + w) + 9 * w * h + h + 27 * h + 3

    return min(range(1, 1025), key=lambda w: abs(n(w) - target))
