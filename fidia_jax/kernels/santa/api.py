"""Dispatching entry points for SANTA and flash-decoding (Pallas on GPU, jnp elsewhere).

Also the adapters registered as the small LLaMA's ``attention_impl`` ``"santa"`` and
``"flash_decode"`` (contract in ``fidia_jax/layers/_attention.py``; decode steps only).
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

from fidia_jax import _checks
from fidia_jax.kernels._dispatch import on_gpu, resolve_backend
from fidia_jax.kernels.santa import pallas as _pallas
from fidia_jax.kernels.santa import reference as _ref

__all__ = [
    "samples_per_tile_for",
    "santa_decode",
    "flash_decode",
    "make_santa_attention",
    "santa_attention",
    "flash_decode_attention",
]


def samples_per_tile_for(num_samples: int, n_k: int, block_k: int) -> int:
    """Fixed per-tile budget for a total of about ``num_samples`` samples over ``n_k`` keys.

    ``max(1, ceil(num_samples / n_tiles))`` with ``n_tiles = ceil(n_k / block_k)``; the total is
    therefore ``>= num_samples`` (rounded up to a multiple of the number of tiles).
    """
    if num_samples < 1:
        raise ValueError(f"num_samples must be >= 1, got {num_samples}")
    nt = _ref.num_tiles(n_k, block_k)
    return max(1, -(-num_samples // nt))


def santa_decode(
    q: jax.Array,
    k: jax.Array,
    v: jax.Array,
    uniforms: jax.Array,
    kv_lengths: jax.Array | None = None,
    *,
    samples_per_tile: int,
    method: str = "systematic",
    block_k: int = 64,
    scale: float | None = None,
    backend: str = "auto",
) -> jax.Array:
    """SANTA decode estimate ``(B, Hq, D)``; see ``reference.santa_decode_reference`` for args.

    Args:
      backend: ``"auto"`` (Pallas on GPU, reference elsewhere), ``"pallas"``,
        ``"pallas_interpret"`` or ``"reference"``.
    """
    be = resolve_backend(backend)
    kw = dict(samples_per_tile=samples_per_tile, method=method, scale=scale)
    if be == "reference":
        return _ref.santa_decode_reference(q, k, v, uniforms, kv_lengths, block_k=block_k, **kw)
    return _pallas.santa_decode_pallas(
        q,
        k,
        v,
        uniforms,
        kv_lengths,
        block_sizes=_pallas.BlockSizes(block_k),
        interpret=be == "pallas_interpret",
        **kw,
    )


def flash_decode(
    q: jax.Array,
    k: jax.Array,
    v: jax.Array,
    kv_lengths: jax.Array | None = None,
    *,
    block_k: int = 64,
    scale: float | None = None,
    backend: str = "auto",
) -> jax.Array:
    """Exact decode attention ``(B, Hq, D)`` (arguments and errors as ``flash_decode_reference``).

    Args:
      backend: ``"auto"``, ``"xla"``, ``"pallas"``, ``"pallas_interpret"`` or ``"reference"``.
        ``"auto"`` picks ``"xla"`` on GPU and ``"reference"`` elsewhere. ``"xla"`` is
        ``jax.nn.dot_product_attention(implementation="xla")``: on one H200 at n_k = 32768
        (32 query / 8 KV heads, D = 128, bf16) it is about ten times faster than our Pallas
        flash-decoding kernel (docs/benchmarks.md, rendered from ``benchmarks/gpu_attention.py``'s
        results). Its dots run in the inputs' dtype, so with bf16 inputs its error against the
        float32 reference is larger than the Pallas kernel's; with float32 inputs they run at
        JAX's default matmul precision, which on NVIDIA GPUs is TF32 (errors of about 1e-3 on
        unit-scale values): wrap the call in ``jax.default_matmul_precision("highest")`` for
        full float32. Cache slots at
        or past ``kv_lengths`` are zeroed with ``jnp.where`` before the call, as in every other
        backend, and a row of length 0 returns zeros.
    """
    be = "xla" if backend == "auto" and on_gpu() else resolve_backend(backend, extra=("xla",))
    if be == "reference":
        return _ref.flash_decode_reference(q, k, v, kv_lengths, block_k=block_k, scale=scale)
    if be == "xla":
        return _xla_decode(q, k, v, kv_lengths, scale=scale)
    return _pallas.flash_decode_pallas(
        q,
        k,
        v,
        kv_lengths,
        block_sizes=_pallas.BlockSizes(block_k),
        scale=scale,
        interpret=be == "pallas_interpret",
    )


def _xla_decode(q, k, v, kv_lengths, *, scale):
    """``flash_decode``'s ``"xla"`` backend: XLA's fused attention on one query position."""
    _ref.check_decode_shapes(q, k, v, where="flash_decode")
    _ref.check_kv_lengths(kv_lengths, k, where="flash_decode")
    if kv_lengths is not None:  # masked slots are never read, not multiplied by a zero weight
        keep_BxNx1x1 = (jnp.arange(k.shape[1])[None, :] < kv_lengths[:, None])[:, :, None, None]
        k = jnp.where(keep_BxNx1x1, k, 0)
        v = jnp.where(keep_BxNx1x1, v, 0)
    out_Bx1xHxD = jax.nn.dot_product_attention(
        q[:, None],
        k,
        v,
        scale=scale,
        key_value_seq_lengths=None if kv_lengths is None else kv_lengths.astype(jnp.int32),
        implementation="xla",
    )
    return out_Bx1xHxD[:, 0].astype(q.dtype)


def _check_decode_call(name, q, causal):
    _checks.assert_rank(q, 4, "q", where=name, detail="decode steps only: (B, 1, Hq, D)")
    if q.shape[1] != 1:
        raise ValueError(
            f"{name} supports decode steps only (q of shape (B, 1, Hq, D)), got {q.shape}"
        )
    if causal:
        raise ValueError(f"{name} is a decode kernel; call it with causal=False and kv_lengths")


def make_santa_attention(
    num_samples: int = 256,
    method: str = "systematic",
    block_k: int = 64,
    backend: str = "auto",
) -> Callable[..., jax.Array]:
    """Builds an ``attention_impl`` function (decode only) doing SANTA with these settings.

    The returned ``fn(q (B,1,Hq,D), k, v (B,S,Hkv,D), *, causal, kv_lengths, rng)`` draws its
    uniforms from ``rng`` (already folded with layer and step by the model). With ``rng=None``
    it uses ``jax.random.key(0)``, i.e. the same uniforms at every call (still unbiased per call,
    but errors are then correlated across layers and steps).
    """
    _checks.assert_in(method, _ref.METHODS, "method", where="make_santa_attention")

    def fn(q, k, v, *, causal=False, kv_lengths=None, rng=None):
        _check_decode_call("santa attention", q, causal)
        b, _, hq, _ = q.shape
        n = k.shape[1]
        spt = samples_per_tile_for(num_samples, n, block_k)
        key = jax.random.key(0) if rng is None else rng
        unif = _ref.make_uniforms(
            key, b, hq, n, block_k=block_k, samples_per_tile=spt, method=method
        )
        out = santa_decode(
            q[:, 0],
            k,
            v,
            unif,
            kv_lengths,
            samples_per_tile=spt,
            method=method,
            block_k=block_k,
            backend=backend,
        )
        return out[:, None]

    fn.__name__ = f"santa_attention_{method}_S{num_samples}"
    return fn


santa_attention = make_santa_attention()
santa_attention.__doc__ = "SANTA decode attention_impl: systematic, 256 samples, 64-key tiles."


def flash_decode_attention(q, k, v, *, causal=False, kv_lengths=None, rng=None):
    """Flash-decoding ``attention_impl`` (decode only, exact; ``rng`` ignored)."""
    del rng
    _check_decode_call("flash_decode attention", q, causal)
    return flash_decode(q[:, 0], k, v, kv_lengths)[:, None].astype(q.dtype)
