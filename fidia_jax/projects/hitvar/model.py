"""HIT-VAR networks: the residual-quantised tokenizer whose decoder reads tokens only, the
next-scale VAR transformer conditioned on the LR image as in VARSR, and a small conv SR baseline.

* :class:`HitVarTokenizer`: conv encoder of the HR image to a ``(H, H, D)`` latent, VAR's
  multi-scale residual quantiser (:func:`fidia_jax.layers.multiscale_residual_quantize`) with an
  EMA codebook, and a decoder that sees **only the quantised latent** (no LR image, no bicubic
  base). ``hierarchical=True`` (HIT-VAR): the prefix of ``schedule.prefix_length(m)`` token
  scales decodes to the ``x m`` image (``m * lr`` pixels); the plain RQ tokenizer
  (``hierarchical=False``) decodes only the full sequence at ``x M`` and smaller scales are its
  bicubic downsampling.
* :class:`NextScaleTransformer`: VARSR's conditioning (github qyp2000/VARSR,
  ``models/var.py``): a conv embedding of the LR image as the start tokens of the sequence, and
  an optional per-scale LR term (the LR image's own token embeddings, :func:`lr_scale_term`)
  added to the inputs of each scale; attention is block-causal over scales.
* :func:`generate_tokens`: scale-by-scale decoding (argmax or temperature sampling).
* :class:`ConvSR`: residual conv net over bicubic upsampling (the "same parameter count"
  baseline; pick its width with :func:`conv_sr_width_for_params`).

Reconstructed (not in the papers' text we could read): the sizes, the sub-pixel decoder heads
(one per output scale), the LR start-token grid side, and the per-scale LR term's content (the
slot exists in VARSR's ``VAR_RoPE.forward`` as ``lr_inp_scale``, but their released trainer
passes ``None``).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from fidia_jax import _checks
from fidia_jax.errors import DataError
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
    "lr_scale_term",
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
    (``head2`` of :class:`ConvSR`, which then starts as bicubic upsampling; the tokenizer's
    ``heads``, which start at flat grey), zero; ``bias`` / ``scale_bias`` = 0; LayerNorm
    ``scale`` = 1; ``scale_emb`` / ``pos_emb`` / ``ctx_pos`` ~ N(0, 0.02^2);
    ``codebook`` = ``embed_sum`` ~ N(0, 0.1^2) (one draw per shape, shared by the two);
    ``cluster_size`` = 1.

    Raises (when drawing):
      ValueError: a leaf whose name has no rule here.
    """
    codebook: dict[tuple[int, ...], np.ndarray] = {}

    def draw(names, shape, rng):
        name = names[-1]
        if name == "kernel" and ("head2" in names or "heads" in names):
            # the last conv of an SR head: ConvSR starts at bicubic, the decoder at flat grey
            return np.zeros(shape)
        if name == "kernel":
            fan_in = int(np.prod(shape[:-1]))
            return rng.standard_normal(shape) / np.sqrt(fan_in)
        if name in ("bias", "scale_bias"):
            return np.zeros(shape)
        if name in ("scale", "cluster_size"):
            return np.ones(shape)
        if name in ("scale_emb", "pos_emb", "ctx_pos"):
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
    """Residual-quantised image tokenizer whose decoder reads the tokens only; its prefixes
    decode at ``x1..xM``.

    The decoder sees nothing but the quantised latent (no LR image, no bicubic base): what it
    outputs is what the tokens carry, so decoding the true HR tokens and decoding generated
    ones can differ (VARSR's and VAR's VQ decoders, which decode tokens alone).

    Args:
      schedule: the :class:`~fidia_jax.projects.hitvar.schedule.HierarchicalSchedule` (HR side
        ``M * lr``; the ratio HR / latent must be a power of two, and every output side
        ``m * lr`` a multiple of the latent side).
      channels: conv width.
      latent_dim: code dimension ``D``.
      codebook_size: number of codes ``K``.
      hierarchical: HIT-VAR (every prefix decodes at its scale) or the plain RQ tokenizer.
      res_blocks: residual blocks of the decoder trunk.
      rngs: ``nnx.Rngs`` (``params``).

    Raises:
      ValueError: HR / latent not a power of two, or an output side that the latent side does
        not divide.
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
        bad = [m for m in schedule.scales if schedule.output_size(m) % schedule.latent_size]
        if bad:
            raise ValueError(
                f"HitVarTokenizer: the latent side {schedule.latent_size} must divide every "
                f"output side (m * lr_size); it does not for scales {bad}"
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
        self.enc_block = _ResBlock(ch, rngs=rngs)
        self.enc_out = nnx.Conv(ch, latent_dim, (1, 1), rngs=rngs)
        self.dec_in = nnx.Conv(latent_dim, ch, (3, 3), rngs=rngs)
        self.scale_bias = nnx.Param(jnp.zeros((len(schedule.scales), ch)))
        self.trunk = nnx.List([_ResBlock(ch, rngs=rngs) for _ in range(res_blocks)])
        # one sub-pixel head per decoded scale: a conv at latent resolution to r^2 * 3 channels,
        # then depth-to-space (r = output side / latent side); only x M for the plain tokenizer
        heads = schedule.scales if hierarchical else (max(schedule.scales),)
        self.heads = nnx.Dict(
            {f"x{m}": nnx.Conv(ch, 3 * self._ratio(m) ** 2, (3, 3), rngs=rngs) for m in heads}
        )
        key = rngs.params()
        codes = jax.random.normal(key, (codebook_size, latent_dim)) * 0.1
        self.codebook = Codebook(codes)
        self.cluster_size = Codebook(jnp.ones((codebook_size,)))
        self.embed_sum = Codebook(codes)

    def _ratio(self, scale: int) -> int:
        return self.schedule.output_size(scale) // self.schedule.latent_size

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
        return self.enc_out(self.enc_block(h))

    def quantize(self, f_BxHxHxD: jax.Array):
        """:func:`fidia_jax.layers.multiscale_residual_quantize` with this codebook.

        The authors' interpolation (torch's ``area`` down, ``bicubic`` up; fixture-tested against
        VARSR's ``VectorQuantizer2``) without the residual convolution ``Phi``: the authors'
        ``quant_resi=0`` setting, not VAR's default ``0.5`` (``docs/hitvar.md``, "Fidelity")."""
        return multiscale_residual_quantize(f_BxHxHxD, self.codebook[...], self.schedule.grids)

    def decode_latent(self, fhat_BxHxHxD: jax.Array, scale: int) -> jax.Array:
        """Decodes a latent (a prefix sum of token embeddings) at SR scale ``scale``.

        Returns ``(B, scale * lr, scale * lr, 3)`` (``0.5`` + the head's output: a decoder that
        learned nothing gives flat grey). The plain tokenizer decodes at ``x M`` and resizes
        down (bicubic) for smaller scales.

        Raises:
          ValueError: a latent that is not ``(B, H, H, D)``, or an unknown scale.
        """
        sch = self.schedule
        _checks.assert_rank(
            fhat_BxHxHxD, 4, "fhat", where="HitVarTokenizer.decode_latent", detail="(B, H, H, D)"
        )
        want = (sch.latent_size, sch.latent_size, self.latent_dim)
        if tuple(fhat_BxHxHxD.shape[1:]) != want:
            raise ValueError(
                f"HitVarTokenizer.decode_latent: fhat must be (B, {want[0]}, {want[1]}, "
                f"{want[2]}), got {tuple(fhat_BxHxHxD.shape)}"
            )
        out_size = sch.output_size(scale)
        dec_scale = scale if self.hierarchical else max(sch.scales)
        h = self.dec_in(fhat_BxHxHxD)
        h = h + self.scale_bias[dec_scale - 1][None, None, None]
        for blk in self.trunk:
            h = blk(h)
        r = self._ratio(dec_scale)
        y = self.heads[f"x{dec_scale}"](jax.nn.gelu(h))
        b, hh, ww, _ = y.shape
        img = 0.5 + y.reshape(b, hh, ww, r, r, 3).transpose(0, 1, 3, 2, 4, 5).reshape(
            b, hh * r, ww * r, 3
        )
        if img.shape[1] != out_size:
            img = bicubic_resize(img, out_size)
        return img

    def prefix_for(self, scale: int) -> int:
        """Token scales read for SR scale ``scale`` (all of them for the plain tokenizer)."""
        return self.schedule.prefix_length(scale) if self.hierarchical else len(self.schedule.grids)

    def decode_tokens(self, codes: list[jax.Array], scale: int) -> jax.Array:
        """Decodes the token prefix that scale ``scale`` reads (:meth:`prefix_for`)."""
        latent = tokens_to_latent(
            codes, self.codebook[...], self.schedule.latent_size, self.prefix_for(scale)
        )
        return self.decode_latent(latent, scale)


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
    """Next-scale token predictor conditioned on the LR image as in VARSR.

    The sequence is ``[LR start tokens | scale 1 | scale 2 inputs | ... | scale K inputs]``:

    * **start tokens** (VARSR's prefix): a conv embedding of the LR image, area-resized to a
      ``context_size x context_size`` grid, plus a learned position embedding; they are level 0
      (the level of scale 1), so every token sees them;
    * scale ``k``'s positions read :func:`next_scale_inputs` (``word_embed`` of the upsampled
      prefix sum; zeros for scale 1) plus a scale and a position embedding;
    * the optional **per-scale LR term** (VARSR's ``lr_inp_scale``): ``word_embed`` of the LR
      image's own token embeddings at each scale (the tokenizer applied to the bicubic-upsampled
      LR), added at the positions that predict that scale.

    Attention is block-causal over levels (:func:`fidia_jax.layers.block_causal_mask`), so the
    logits of scale ``k`` depend on the inputs of scales ``<= k`` and on the LR only.

    Args:
      schedule: token grids and LR size.
      latent_dim: ``D`` of the tokenizer's codes (the inputs).
      codebook_size: ``K`` (logits).
      dim, depth, heads, mlp_ratio: transformer sizes.
      context_size: side of the LR start-token grid (default ``max(lr_size // 2, 1)``).
      rngs: ``nnx.Rngs``.

    Raises:
      ValueError: ``dim`` not divisible by ``heads``, or ``context_size < 1``.
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
        context_size: int | None = None,
        rngs: nnx.Rngs,
    ):
        if dim % heads:
            raise ValueError(f"NextScaleTransformer: dim {dim} must be divisible by heads {heads}")
        ctx = max(schedule.lr_size // 2, 1) if context_size is None else int(context_size)
        if ctx < 1:
            raise ValueError(f"NextScaleTransformer: context_size must be >= 1, got {ctx}")
        self.schedule, self.context_size = schedule, ctx
        t = schedule.num_tokens
        self.in_proj = nnx.Linear(latent_dim, dim, rngs=rngs)  # VARSR's word_embed
        self.lr_conv1 = nnx.Conv(3, dim, (3, 3), rngs=rngs)
        self.lr_conv2 = nnx.Conv(dim, dim, (3, 3), rngs=rngs)
        self.ctx_pos = nnx.Param(jax.random.normal(rngs.params(), (ctx * ctx, dim)) * 0.02)
        self.scale_emb = nnx.Param(
            jax.random.normal(rngs.params(), (len(schedule.grids), dim)) * 0.02
        )
        self.pos_emb = nnx.Param(jax.random.normal(rngs.params(), (t, dim)) * 0.02)
        self.blocks = nnx.List([_Block(dim, heads, mlp_ratio, rngs=rngs) for _ in range(depth)])
        self.ln = nnx.LayerNorm(dim, rngs=rngs)
        self.head = nnx.Linear(dim, codebook_size, rngs=rngs)

    def mask(self) -> np.ndarray:
        """``(C + T, C + T)`` bool: start tokens at level 0, scale ``k`` at level ``k - 1``."""
        sch = self.schedule
        lvl = np.concatenate(
            [np.zeros(self.context_size**2, np.int32)]
            + [np.full(s * s, k, np.int32) for k, s in enumerate(sch.grids)]
        )
        return lvl[:, None] >= lvl[None, :]

    def __call__(
        self,
        inputs_BxTxD: jax.Array,
        lr_Bxlxlx3: jax.Array,
        lr_scale_BxTxD: jax.Array | None = None,
    ) -> jax.Array:
        """Logits ``(B, T, K)`` of every token.

        Args:
          inputs_BxTxD: :func:`next_scale_inputs` (teacher forcing, or the generated prefix).
          lr_Bxlxlx3: the LR images in ``[0, 1]``.
          lr_scale_BxTxD: the per-scale LR term (the LR tokenization's code embeddings, scale
            by scale, flattened like the tokens), or ``None`` to leave it out.

        Raises:
          ValueError: shapes that do not match the schedule.
        """
        sch = self.schedule
        _check_images(lr_Bxlxlx3, sch.lr_size, "lr", "NextScaleTransformer")
        b = inputs_BxTxD.shape[0]
        t = sch.num_tokens
        if inputs_BxTxD.ndim != 3 or inputs_BxTxD.shape[1] != t:
            raise ValueError(
                f"NextScaleTransformer: inputs must be (B, {t}, D), got {tuple(inputs_BxTxD.shape)}"
            )
        feat = self.lr_conv2(jax.nn.gelu(self.lr_conv1(lr_Bxlxlx3 * 2.0 - 1.0)))
        c = self.context_size
        ctx_BxCxC = resize_grid(feat, c).reshape(b, c * c, -1) + self.ctx_pos[None]
        scale_of = np.concatenate([np.full(s * s, k) for k, s in enumerate(sch.grids)])
        emb_1xTxC = (self.scale_emb[jnp.asarray(scale_of)] + self.pos_emb)[None]
        x = self.in_proj(inputs_BxTxD) + emb_1xTxC
        if lr_scale_BxTxD is not None:
            if lr_scale_BxTxD.shape != inputs_BxTxD.shape:
                raise ValueError(
                    f"NextScaleTransformer: lr_scale must have the inputs' shape "
                    f"{tuple(inputs_BxTxD.shape)}, got {tuple(lr_scale_BxTxD.shape)}"
                )
            x = x + self.in_proj(lr_scale_BxTxD)
        x = jnp.concatenate([ctx_BxCxC.astype(x.dtype), x], axis=1)
        mask = jnp.asarray(self.mask())
        for blk in self.blocks:
            x = blk(x, mask)
        return self.head(self.ln(x[:, c * c :]))


def lr_scale_term(codes: list[jax.Array], codebook: jax.Array) -> jax.Array:
    """The per-scale LR term of :class:`NextScaleTransformer`: the code embeddings of a token
    sequence (the LR image's), scale by scale, flattened like the tokens.

    Args:
      codes: per scale ``(B, s_k, s_k)`` int tokens.
      codebook: ``(K, D)``.

    Returns:
      ``(B, T, D)`` float.
    """
    b = codes[0].shape[0]
    return jnp.concatenate(
        [jnp.take(codebook, c, axis=0).reshape(b, -1, codebook.shape[1]) for c in codes], axis=1
    )


def generate_tokens(
    model: NextScaleTransformer,
    codebook: jax.Array,
    lr: jax.Array,
    lr_scale: jax.Array | None = None,
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
      lr_scale: the per-scale LR term ``(B, T, D)`` (:func:`lr_scale_term`), or ``None``.
      key: PRNG key, needed when ``temperature > 0``.
      temperature: ``0`` = argmax; else sample ``softmax(logits / temperature)``.

    Returns:
      ``(codes, fhat_prefixes)`` as :func:`fidia_jax.layers.multiscale_residual_quantize`.

    Raises:
      ValueError: a negative temperature, or a positive one without a key.
      DataError: a concrete ``lr`` with NaN or infinite values (they would become token 0).
    """
    if not isinstance(lr, jax.core.Tracer) and not np.all(np.isfinite(np.asarray(lr))):
        bad = int(np.size(lr) - np.isfinite(np.asarray(lr)).sum())
        raise DataError(f"generate_tokens: lr has {bad} non-finite value(s) (NaN or infinity)")
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
        logits = model(inputs, lr, lr_scale)[:, off[k] : off[k + 1]]
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
