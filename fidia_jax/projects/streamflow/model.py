"""A small convolutional U-Net that predicts the rectified-flow velocity of an image at time ``t``.

StreamFlow serves a rectified-flow / flow-matching model; the paper uses large image
generators, here the network is a two-level U-Net small enough to train on two CPU cores
(``features=(32, 64)``: about 0.2 M parameters). Every operation acts on one image at a time
(``GroupNorm``, convolutions, a per-image time embedding; no batch statistics), so a batch's
outputs do not depend on which other images share the batch -- what the stream batcher
(:class:`fidia_jax.projects.streamflow.serving.StreamBatcher`) relies on.

Convention (rectified flow, Liu et al. 2023; Lipman et al. 2023): ``x_t = t * noise +
(1 - t) * image`` with ``t = 1`` pure noise and ``t = 0`` the image; the network predicts the
velocity ``dx_t/dt = noise - image``, and a sampler integrates from ``t = 1`` down to ``t = 0``.
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
from flax import nnx

__all__ = ["StreamFlowUNet", "timestep_embedding"]


def timestep_embedding(t_B: jax.Array, dim: int, max_period: float = 1000.0) -> jax.Array:
    """Sinusoidal embedding of continuous times ``t`` in ``[0, 1]`` (transformer positions).

    Args:
      t_B: ``(B,)`` float times.
      dim: even embedding width.
      max_period: longest period, in units of ``t * 1000``.

    Returns:
      ``(B, dim)`` float32: ``[cos(1000 t w_k), sin(1000 t w_k)]``, ``w_k = max_period^(-k/(dim/2))``.
    """
    if dim % 2:
        raise ValueError(f"timestep_embedding: dim must be even, got {dim}")
    half = dim // 2
    freqs_K = jnp.exp(-jnp.log(max_period) * jnp.arange(half, dtype=jnp.float32) / half)
    angles_BxK = 1000.0 * t_B.astype(jnp.float32)[:, None] * freqs_K[None, :]
    return jnp.concatenate([jnp.cos(angles_BxK), jnp.sin(angles_BxK)], axis=-1)


class _ResBlock(nnx.Module):
    """``GroupNorm -> SiLU -> Conv3x3`` twice, time added after the first conv, residual."""

    def __init__(self, c_in: int, c_out: int, time_dim: int, groups: int, *, rngs: nnx.Rngs):
        self.norm1 = nnx.GroupNorm(c_in, num_groups=min(groups, c_in), rngs=rngs)
        self.conv1 = nnx.Conv(c_in, c_out, (3, 3), rngs=rngs)
        self.time = nnx.Linear(time_dim, c_out, rngs=rngs)
        self.norm2 = nnx.GroupNorm(c_out, num_groups=min(groups, c_out), rngs=rngs)
        self.conv2 = nnx.Conv(c_out, c_out, (3, 3), rngs=rngs)
        self.skip = nnx.Conv(c_in, c_out, (1, 1), rngs=rngs) if c_in != c_out else None

    def __call__(self, x_BxHxWxC, temb_BxT):
        h = self.conv1(jax.nn.silu(self.norm1(x_BxHxWxC)))
        h = h + self.time(temb_BxT)[:, None, None, :]
        h = self.conv2(jax.nn.silu(self.norm2(h)))
        skip = x_BxHxWxC if self.skip is None else self.skip(x_BxHxWxC)
        return skip + h


class StreamFlowUNet(nnx.Module):
    """Velocity network ``v(x_t, t)`` for rectified flow on small images.

    Layout: a 3x3 stem to ``features[0]``; per level a residual block (time-conditioned), then a
    stride-2 downsampling conv to the next level; a middle block at the coarsest level; the
    mirror path with nearest-neighbour upsampling, concatenated skips and residual blocks; a
    ``GroupNorm -> SiLU -> Conv3x3`` head to ``channels``.

    Args:
      channels: image channels ``C`` (1 for digits).
      features: widths per level, e.g. ``(32, 64)``; ``H`` and ``W`` must be divisible by
        ``2 ** (len(features) - 1)``.
      time_dim: width of the sinusoidal time embedding (and of its MLP).
      groups: ``GroupNorm`` groups (capped at the width).
      rngs: ``nnx.Rngs`` with ``params``.

    Call: ``model(x_BxHxWxC, t_B) -> v_BxHxWxC`` float32, ``t`` in ``[0, 1]`` (1 = noise).

    Raises:
      ValueError: at call time, for an image batch that is not rank 4 ``(B, H, W, C)`` with
        ``C == channels``, for ``t`` not of shape ``(B,)``, or for ``H``/``W`` not divisible by
        the downsampling factor.
    """

    def __init__(
        self,
        channels: int = 1,
        features: Sequence[int] = (32, 64),
        *,
        time_dim: int = 64,
        groups: int = 8,
        rngs: nnx.Rngs,
    ):
        features = tuple(int(f) for f in features)
        if not features or min(features) < 1 or channels < 1:
            raise ValueError(
                f"StreamFlowUNet: channels and features must be >= 1, got "
                f"channels={channels}, features={features}"
            )
        self.channels, self.features, self.time_dim = channels, features, time_dim
        self.time_mlp1 = nnx.Linear(time_dim, time_dim, rngs=rngs)
        self.time_mlp2 = nnx.Linear(time_dim, time_dim, rngs=rngs)
        self.stem = nnx.Conv(channels, features[0], (3, 3), rngs=rngs)
        self.down_blocks = nnx.List([])
        self.downsample = nnx.List([])
        for i, f in enumerate(features):
            self.down_blocks.append(_ResBlock(f, f, time_dim, groups, rngs=rngs))
            if i + 1 < len(features):
                self.downsample.append(
                    nnx.Conv(f, features[i + 1], (3, 3), strides=(2, 2), rngs=rngs)
                )
        self.mid = _ResBlock(features[-1], features[-1], time_dim, groups, rngs=rngs)
        self.up_blocks = nnx.List([])
        for i in reversed(range(len(features) - 1)):
            # input: upsampled features[i+1] concatenated with the skip features[i]
            self.up_blocks.append(
                _ResBlock(features[i + 1] + features[i], features[i], time_dim, groups, rngs=rngs)
            )
        self.head_norm = nnx.GroupNorm(features[0], num_groups=min(groups, features[0]), rngs=rngs)
        self.head = nnx.Conv(features[0], channels, (3, 3), rngs=rngs)

    def __call__(self, x_BxHxWxC: jax.Array, t_B: jax.Array) -> jax.Array:
        if x_BxHxWxC.ndim != 4 or x_BxHxWxC.shape[-1] != self.channels:
            raise ValueError(
                f"StreamFlowUNet: images must be rank 4 (B, H, W, C={self.channels}), got shape "
                f"{tuple(x_BxHxWxC.shape)}"
            )
        if t_B.shape != x_BxHxWxC.shape[:1]:
            raise ValueError(
                f"StreamFlowUNet: t must have shape (B,)=({x_BxHxWxC.shape[0]},), "
                f"got {tuple(t_B.shape)}"
            )
        factor = 2 ** (len(self.features) - 1)
        if x_BxHxWxC.shape[1] % factor or x_BxHxWxC.shape[2] % factor:
            raise ValueError(
                f"StreamFlowUNet: H and W must be divisible by {factor}, got "
                f"{tuple(x_BxHxWxC.shape[1:3])}"
            )
        temb_BxT = timestep_embedding(t_B, self.time_dim)
        temb_BxT = self.time_mlp2(jax.nn.silu(self.time_mlp1(temb_BxT)))
        h = self.stem(x_BxHxWxC.astype(jnp.float32))
        skips = []
        for i, block in enumerate(self.down_blocks):
            h = block(h, temb_BxT)
            if i < len(self.downsample):
                skips.append(h)
                h = self.downsample[i](h)
        h = self.mid(h, temb_BxT)
        for block in self.up_blocks:
            skip = skips.pop()
            h = jnp.repeat(jnp.repeat(h, 2, axis=1), 2, axis=2)
            h = block(jnp.concatenate([h, skip], axis=-1), temb_BxT)
        return self.head(jax.nn.silu(self.head_norm(h)))
