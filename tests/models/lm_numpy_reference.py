"""An independent float64 numpy forward pass of decoder LMs in Hugging Face tensor naming.

Written for the tests from the published architecture descriptions (Llama, Qwen2/Qwen3,
Gemma 3), loop by loop and without importing fidia_jax: weights are PyTorch-layout
``(out, in)`` arrays named as in ``model.safetensors``; ``spec`` is a plain dict of flags.

spec keys: n_heads, n_kv, head_dim, eps, theta, scaling (None or dict as HF ``rope_scaling``),
tied, qkv_bias, qk_norm, norm_offset (Gemma: norms multiply by 1 + w), post_norms (Gemma's
sandwich norms and tensor names: post_attention_layernorm on the attention update,
pre_feedforward_layernorm before the MLP, post_feedforward_layernorm on its update; otherwise
Llama's post_attention_layernorm is the pre-MLP norm), embed_scale (Gemma: sqrt(hidden)),
act ("silu" / "gelu_tanh"), qscalar (0 = head_dim), window (0 = none), global_layers (set of
layer indices with full attention), local_theta.
"""

from __future__ import annotations

import math

import numpy as np


def _rms(x, w, eps, offset):
    x = x.astype(np.float64)
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * (offset + w.astype(np.float64))


def _freqs(d, theta, scaling):
    out = []
    for i in range(d // 2):
        f = theta ** (-(2.0 * i) / d)
        if scaling is not None:
            kind = scaling.get("rope_type", scaling.get("type"))
            factor = scaling["factor"]
            if kind == "linear":
                f = f / factor
            elif kind == "llama3":
                old = scaling["original_max_position_embeddings"]
                lo, hi = scaling["low_freq_factor"], scaling["high_freq_factor"]
                wl = 2 * math.pi / f
                if wl > old / lo:  # long wavelengths: fully interpolated
                    f = f / factor
                elif wl >= old / hi:  # middle band: blend
                    s = (old / wl - lo) / (hi - lo)
                    f = (1 - s) * f / factor + s * f
            else:
                raise ValueError(kind)
        out.append(f)
    return np.array(out)


def _rope(x_TxHxD, freqs):
    t, _, d = x_TxHxD.shape
    y = np.empty_like(x_TxHxD)
    for p in range(t):
        for i in range(d // 2):
            c, s = math.cos(p * freqs[i]), math.sin(p * freqs[i])
            a, b = x_TxHxD[p, :, i], x_TxHxD[p, :, i + d // 2]
            y[p, :, i] = a * c - b * s
            y[p, :, i + d // 2] = b * c + a * s
    return y


def _act(name, x):
    if name == "silu":
        return x / (1 + np.exp(-x))
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


def forward(w: dict, spec: dict, tokens) -> np.ndarray:
    """Logits ``(T, V)`` float64 for one sequence ``tokens`` (ints)."""
    g = lambda name: np.asarray(w[name], np.float64)  # noqa: E731
    gemma = spec.get("post_norms", False)
    off = spec.get("norm_offset", 0.0)
    eps = spec["eps"]
    hq, hk, d = spec["n_heads"], spec["n_kv"], spec["head_dim"]
    emb = g("model.embed_tokens.weight")
    x = emb[np.asarray(tokens)]
    x = x * spec.get("embed_scale", 1.0)
    t = len(tokens)
    n_layers = 1 + max(int(k.split(".")[2]) for k in w if k.startswith("model.layers."))
    qscalar = spec.get("qscalar") or d
    for layer in range(n_layers):
        pre = f"model.layers.{layer}."
        h = _rms(x, g(pre + "input_layernorm.weight"), eps, off)
        proj = {}
        for name, heads in (("q", hq), ("k", hk), ("v", hk)):
            y = h @ g(pre + f"self_attn.{name}_proj.weight").T
            if spec.get("qkv_bias"):
                y = y + g(pre + f"self_attn.{name}_proj.bias")
            proj[name] = y.reshape(t, heads, d)
        if spec.get("qk_norm"):
            proj["q"] = _rms(proj["q"], g(pre + "self_attn.q_norm.weight"), eps, off)
            proj["k"] = _rms(proj["k"], g(pre + "self_attn.k_norm.weight"), eps, off)
        window = spec.get("window", 0)
        is_local = bool(window) and layer not in spec.get("global_layers", ())
        theta = spec.get("local_theta") or spec["theta"] if is_local else spec["theta"]
        freqs = _freqs(d, theta, None if is_local else spec.get("scaling"))
        q, k, v = _rope(proj["q"], freqs), _rope(proj["k"], freqs), proj["v"]
        o = np.zeros((t, hq, d))
        for head in range(hq):
            kv = head // (hq // hk)
            for i in range(t):
                js = [j for j in range(i + 1) if not (is_local and i - j >= window)]
                s = np.array([q[i, head] @ k[j, kv] for j in js]) / math.sqrt(qscalar)
                p = np.exp(s - s.max())
                p /= p.sum()
                o[i, head] = sum(pj * v[j, kv] for pj, j in zip(p, js, strict=True))
        a = o.reshape(t, hq * d) @ g(pre + "self_attn.o_proj.weight").T
        if gemma:
            a = _rms(a, g(pre + "post_attention_layernorm.weight"), eps, off)
            x = x + a
            h = _rms(x, g(pre + "pre_feedforward_layernorm.weight"), eps, off)
        else:
            x = x + a
            h = _rms(x, g(pre + "post_attention_layernorm.weight"), eps, off)
        act = spec.get("act", "silu")
        f = _act(act, h @ g(pre + "mlp.gate_proj.weight").T) * (h @ g(pre + "mlp.up_proj.weight").T)
        f = f @ g(pre + "mlp.down_proj.weight").T
        if gemma:
            f = _rms(f, g(pre + "post_feedforward_layernorm.weight"), eps, off)
        x = x + f
    x = _rms(x, g("model.norm.weight"), eps, off)
    head = emb if spec.get("tied") else g("lm_head.weight")
    return x @ head.T
