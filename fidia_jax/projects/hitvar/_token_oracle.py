"""The token check run before any DPO: do the tokens carry the image? Decoding the true HR
tokens (the oracle) vs decoding the transformer's generated tokens vs bicubic upsampling, per
held-out crop LPIPS with paired Wilcoxon tests; also the decoders used by the evaluation.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from fidia_jax.projects.hitvar._common import (
    _cond,
    _lpips_per_crop,
    _lr_scale_batch,
    _upsampled,
    paired_test,
)
from fidia_jax.projects.hitvar.configs import HitVarConfig
from fidia_jax.projects.hitvar.model import generate_tokens

__all__ = ["format_token_check", "token_check"]


@functools.cache
def _var_run_fn(scales: tuple[int, ...], temp: float):
    @nnx.jit
    def run(t, v, lo, ls, k):
        codes, _ = generate_tokens(
            v, t.codebook[...], lo, ls, key=k if temp else None, temperature=temp
        )
        return {m: jnp.clip(t.decode_tokens(codes, m), 0.0, 1.0) for m in scales}

    return run


def _var_outputs(config, tok, var, lr_eval, scales, key=None):
    """Generated tokens decoded at ``scales`` (clipped to [0, 1]), in batches of 64."""
    side = config.lr_size * config.max_scale
    ls_all = _cond(tok, lr_eval, side, config.lr_scale_term)
    run = _var_run_fn(tuple(scales), float(config.eval_temperature))
    key = jax.random.key(config.seed + 7) if key is None else key
    parts = [
        run(tok, var, jnp.asarray(lr_eval[i : i + 64]),
            _lr_scale_batch(ls_all, slice(i, i + 64)), key)
        for i in range(0, len(lr_eval), 64)
    ]  # fmt: skip
    return {m: np.concatenate([np.asarray(p[m]) for p in parts]) for m in scales}


@functools.cache
def _reconstruct_fn(scales: tuple[int, ...]):
    @nnx.jit
    def rec(t, h):
        codes, _, _ = t.quantize(t.encode(h))
        return {m: jnp.clip(t.decode_tokens(codes, m), 0.0, 1.0) for m in scales}

    return rec


def _decoded_tokens_of(tok, images, scales):
    """The tokenizer's reconstruction of HR-sized images (their own tokens) at ``scales``."""
    rec = _reconstruct_fn(tuple(scales))
    parts = [rec(tok, jnp.asarray(images[i : i + 64])) for i in range(0, len(images), 64)]
    return {m: np.concatenate([np.asarray(p[m]) for p in parts]) for m in scales}


def token_check(config: HitVarConfig, tok, var, hr_eval, lr_eval) -> dict[str, Any]:
    """Do the tokens matter? Per-crop LPIPS at the top scale of the held-out crops for: the
    tokenizer decoding the true HR tokens (oracle), decoding the VAR's generated tokens, and
    bicubic upsampling; paired Wilcoxon tests (:func:`paired_test`) oracle vs generated and
    oracle vs bicubic. ``ok`` is true when the oracle beats both beyond the noise: only then can
    a better VAR (or DPO) improve the output.
    """
    top = config.max_scale
    side = config.lr_size * top
    y = np.clip(np.asarray(hr_eval), 0.0, 1.0)
    oracle = _decoded_tokens_of(tok, hr_eval, (top,))[top]
    gen = _var_outputs(config, tok, var, lr_eval, (top,))[top]
    bic = _upsampled(lr_eval, side)
    lp = {k: _lpips_per_crop(v, y) for k, v in (("oracle", oracle), ("generated", gen),
                                                 ("bicubic", bic))}  # fmt: skip
    res = {
        "lpips": {k: float(v.mean()) for k, v in lp.items()},
        "oracle_vs_generated": paired_test(lp["oracle"], lp["generated"]),
        "oracle_vs_bicubic": paired_test(lp["oracle"], lp["bicubic"]),
        "generated_vs_bicubic": paired_test(lp["generated"], lp["bicubic"]),
    }
    res["ok"] = res["oracle_vs_generated"]["a_better"] and res["oracle_vs_bicubic"]["a_better"]
    return res


def format_token_check(tc: dict[str, Any]) -> str:
    """One paragraph: the token check's LPIPS means and p-values."""
    lp = tc["lpips"]
    return (
        f"token check (top scale, LPIPS per held-out crop, Wilcoxon two-sided): true HR "
        f"tokens {lp['oracle']:.3f}, generated {lp['generated']:.3f}, bicubic "
        f"{lp['bicubic']:.3f}; oracle vs generated p={tc['oracle_vs_generated']['p']:.2g}, "
        f"oracle vs bicubic p={tc['oracle_vs_bicubic']['p']:.2g} -> "
        + (
            "passed: the tokens carry the image"
            if tc["ok"]
            else "NOT passed: decoding the true tokens does not beat both"
        )  # fmt: skip
    )
