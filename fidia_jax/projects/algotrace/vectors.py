"""Function vectors from attention heads: mean head outputs, causal indirect effects, the vector.

The primitive vectors of AlgoTrace (Lippl et al., ICML 2026, arXiv:2510.15987) follow the
function-vector recipe (Todd et al., "Function vectors in large language models", ICLR 2024):

1. mean head outputs ``a_bar[l, h]`` = the mean over chosen tokens (a primitive's tokens) of
   query head ``h``'s output at layer ``l`` before the output projection
   (:func:`mean_head_outputs`);
2. the causal indirect effect of each head (:func:`head_indirect_effects`): replace head
   ``(l, h)``'s output by ``a_bar[l, h]`` at chosen positions of other contexts and measure the
   mean change of the log-probability of a target token (here: the keyword that opens the
   primitive) at those positions;
3. the vector ``v = sum_{(l, h) in top heads} a_bar[l, h] @ W_O[l][h]``: each selected head's
   mean output written into the residual stream through its slice of the output projection
   (:func:`function_vector`), to be added to the residual with
   :class:`fidia_jax.models.AddToResidual`.

On a model with ``post_norms`` (Gemma 2/3: the attention update is RMS-normalised before it is
added) step 3 goes through that norm: see :func:`function_vector`. For large models, where one
forward pass per head is too slow, :func:`head_attribution_effects` gives the first-order
(attribution-patching) estimate of every head's indirect effect from one forward and one
backward pass.

Every per-head array is indexed by the **query** head (grouped-query attention: query head ``h``
reads key/value head ``h // (Hq / Hkv)``), as :meth:`Llama.inspect`'s ``head_out``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from fidia_jax import _checks
from fidia_jax.models import AddToResidual, Llama, PatchHeads

__all__ = [
    "function_vector",
    "head_attribution_effects",
    "head_indirect_effects",
    "mean_head_outputs",
    "top_heads",
]


def _mask(model: Llama, tokens, mask, where: str) -> tuple[jax.Array, np.ndarray]:
    tokens = jnp.asarray(tokens, jnp.int32)
    if tokens.ndim != 2:
        raise ValueError(f"{where}: tokens must be (B, T) ints, got shape {tokens.shape}")
    m = np.asarray(mask, bool)
    if m.shape != tokens.shape:
        raise ValueError(f"{where}: mask {m.shape} must have the tokens' shape {tokens.shape}")
    if not m.any():
        raise ValueError(f"{where}: the mask selects no token (a primitive with no tokens?)")
    return tokens, m


def _head_inputs(model, tokens, mask, mean_heads, target, where):
    """The checked inputs of the head-effect functions: ``(tokens, mask, mean_heads)``, the
    mean head outputs as float32 ``(L, Hq, D)``; a ``ValueError`` naming ``where`` otherwise."""
    tokens, m = _mask(model, tokens, mask, where)
    cfg = model.config
    mean_heads = jnp.asarray(mean_heads, jnp.float32)
    if mean_heads.shape != (cfg.n_layers, cfg.n_heads, cfg.head_dim):
        raise ValueError(
            f"{where}: mean_heads must be (L, Hq, D) = {(cfg.n_layers, cfg.n_heads, cfg.head_dim)}, "
            f"got {mean_heads.shape}"
        )
    if not 0 <= int(target) < cfg.vocab_size:
        raise ValueError(f"{where}: target {target} outside the vocabulary [0, {cfg.vocab_size})")
    return tokens, m, mean_heads


@nnx.jit
def _head_out(model, tokens):
    return model.inspect(tokens, capture=("head_out",))[1]["head_out"]


def mean_head_outputs(model: Llama, tokens, mask) -> jax.Array:
    """Mean per-query-head output over the selected tokens.

    Args:
      model: a :class:`Llama`.
      tokens: ``(B, T)`` int token ids.
      mask: ``(B, T)`` bool, the tokens to average over (e.g. a primitive's tokens).

    Returns:
      ``(L, Hq, D)`` float32 ``a_bar[l, h] = mean_{(b, t) in mask} head_out[l, b, t, h]``.

    Raises:
      ValueError: shapes that disagree, or a mask that selects no token.
    """
    tokens, m = _mask(model, tokens, mask, "mean_head_outputs")
    ho = _head_out(model, tokens).astype(jnp.float32)  # (L, B, T, H, D)
    w = jnp.asarray(m, jnp.float32)
    return jnp.einsum("lbthd,bt->lhd", ho, w) / jnp.sum(w)


def _positions(m: np.ndarray) -> jax.Array:
    """``(B, T)`` absolute positions of each row's selected tokens, ``-1`` padded.

    The width is always ``T`` so that every mask gives the same shapes (one compilation).
    """
    out = np.full(m.shape, -1, np.int32)
    for b in range(m.shape[0]):
        idx = np.nonzero(m[b])[0]
        out[b, : idx.size] = idx
    return jnp.asarray(out)


@nnx.jit
def _target_logprob(model, tokens, hooks, target):
    lp = jax.nn.log_softmax(model(tokens, hooks=hooks).astype(jnp.float32), axis=-1)
    return lp[..., target]  # (B, T)


def head_indirect_effects(model: Llama, tokens, mask, mean_heads, target: int) -> jax.Array:
    """Causal indirect effect of every (layer, query head) on ``target``'s log-probability.

    ``IE[l, h] = mean_{(b, t) in mask} [log p(target | x_b, head (l, h) := a_bar[l, h] at the
    masked positions)_t - log p(target | x_b)_t]``: one forward pass per head with a
    :class:`PatchHeads` hook that replaces only query head ``h`` of layer ``l`` at the masked
    positions of each row.

    Args:
      model: a :class:`Llama`.
      tokens: ``(B, T)`` int token ids (the "corrupted" contexts: positions where the primitive
        is not what comes next).
      mask: ``(B, T)`` bool, where to patch and measure.
      mean_heads: ``(L, Hq, D)`` mean head outputs (:func:`mean_head_outputs`).
      target: token id whose log-probability is measured (e.g. the primitive's keyword).

    Returns:
      ``(L, Hq)`` float32 indirect effects (nats; positive = the head's mean output promotes
      ``target``).

    Raises:
      ValueError: shapes that disagree, an empty mask, a target outside the vocabulary.
    """
    tokens, m, mean_heads = _head_inputs(
        model, tokens, mask, mean_heads, target, "head_indirect_effects"
    )
    cfg = model.config
    target = jnp.int32(target)
    pos = _positions(m)
    w = jnp.asarray(m, jnp.float32)

    # One program for every head: a PatchHeads hook per layer, its head mask selects one query
    # head (or none: the clean run, where the hooks leave every value untouched).
    def run(sel_LxH):
        hooks = tuple(
            PatchHeads(layer, mean_heads[layer], heads=jnp.asarray(sel_LxH[layer]), positions=pos)
            for layer in range(cfg.n_layers)
        )
        return _target_logprob(model, tokens, hooks, target)

    none = np.zeros((cfg.n_layers, cfg.n_heads), bool)
    clean = run(none)
    out = np.zeros((cfg.n_layers, cfg.n_heads), np.float32)
    for layer in range(cfg.n_layers):
        for h in range(cfg.n_heads):
            sel = none.copy()
            sel[layer, h] = True
            out[layer, h] = float(jnp.sum((run(sel) - clean) * w) / jnp.sum(w))
    return jnp.asarray(out)


def top_heads(scores, k: int) -> np.ndarray:
    """``(L, Hq)`` bool mask of the ``k`` largest entries of ``scores`` (ties: lower index first).

    Raises:
      ValueError: ``scores`` not 2-D or ``k`` not in ``[1, L * Hq]``.
      DataError: ``scores`` holds a NaN or inf (a NaN would sort as the largest score and
        select its head silently).
    """
    s = np.asarray(scores, np.float64)
    if s.ndim != 2:
        raise ValueError(f"top_heads: scores must be (L, Hq), got shape {s.shape}")
    _checks.assert_finite(s, "scores", where="top_heads")
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or not 1 <= k <= s.size:
        raise ValueError(f"top_heads: k must be an int in [1, {s.size}], got {k!r}")
    order = np.argsort(-s.ravel(), kind="stable")[:k]
    out = np.zeros(s.size, bool)
    out[order] = True
    return out.reshape(s.shape)


def function_vector(model: Llama, mean_heads, heads) -> jax.Array:
    """``v = sum_{(l, h) selected} a_bar[l, h] @ W_O[l][h D:(h + 1) D]``, a residual-stream vector.

    With ``post_norms`` (Gemma 2/3) each layer's part is multiplied by the factor its attention
    post-norm applies to the layer's whole mean update ``u_l = sum_{all h} a_bar[l, h] @
    W_O[l][h]``: ``g_l / rms(u_l)``, so that selecting every head of a layer gives exactly
    ``post_norm_l(u_l)`` and a subset its share of it (RMSNorm is linear once the ``rms`` is
    fixed). This adaptation is ours (Todd et al. and the paper use models without post-norms).

    Args:
      model: a :class:`Llama` (its output projections ``wo`` are read).
      mean_heads: ``(L, Hq, D)`` mean head outputs.
      heads: ``(L, Hq)`` bool mask of the selected heads (:func:`top_heads`).

    Returns:
      ``(C,)`` float32.

    Raises:
      ValueError: shapes that do not match the model.
    """
    cfg = model.config
    mh = jnp.asarray(mean_heads, jnp.float32)
    sel = np.asarray(heads, bool)
    if mh.shape != (cfg.n_layers, cfg.n_heads, cfg.head_dim) or sel.shape != mh.shape[:2]:
        raise ValueError(
            f"function_vector: need mean_heads (L, Hq, D) = {(cfg.n_layers, cfg.n_heads, cfg.head_dim)} "
            f"and heads (L, Hq), got {mh.shape} and {sel.shape}"
        )
    v = jnp.zeros((cfg.dim,), jnp.float32)
    for layer in range(cfg.n_layers):
        wo_HxDxC = _wo(model, layer)
        part = jnp.einsum(
            "hd,hdc->c", mh[layer] * jnp.asarray(sel[layer], jnp.float32)[:, None], wo_HxDxC
        )
        if cfg.post_norms:
            part = part * _post_norm_gain(
                model, layer, jnp.einsum("hd,hdc->c", mh[layer], wo_HxDxC)
            )
        v = v + part
    return v


def _wo(model: Llama, layer: int) -> jax.Array:
    """``(Hq, D, C)`` float32: each query head's slice of layer ``layer``'s output projection."""
    cfg = model.config
    wo = jnp.asarray(model.layers[layer].attention.wo.kernel[...], jnp.float32)  # (Hq*D, C)
    return wo.reshape(cfg.n_heads, cfg.head_dim, cfg.dim)


def _post_norm_gain(model: Llama, layer: int, u_C: jax.Array) -> jax.Array:
    """``(C,)``: ``g / rms(u)``, the factor by which layer ``layer``'s attention post-norm
    multiplies the update ``u`` (``post_norm(u) = g * u / sqrt(mean(u**2) + eps)``)."""
    norm = model.layers[layer].attention_post_norm
    g = jnp.asarray(norm.scale[...], jnp.float32) + norm.offset
    return g * jax.lax.rsqrt(jnp.mean(u_C * u_C) + norm.eps)


@nnx.jit
def _attribution_grads(model, tokens, mask_w, target):
    """Head outputs ``(L, B, T, Hq, D)`` and ``dS / d(residual after attention)``
    ``(L, B, T, C)`` with ``S = sum_masked log p(target)``, from one forward and one backward."""
    cfg = model.config
    b, t = tokens.shape

    def score(delta_LxBxTxC):
        hooks = tuple(
            AddToResidual(layer, delta_LxBxTxC[layer], site="mid") for layer in range(cfg.n_layers)
        )
        logits, cap = model.inspect(tokens, hooks=hooks, capture=("head_out",))
        lp = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)[..., target]
        return jnp.sum(lp * mask_w), cap["head_out"]

    zero = jnp.zeros((cfg.n_layers, b, t, cfg.dim), jnp.float32)
    grad, head_out = jax.grad(score, has_aux=True)(zero)
    return head_out, grad


def head_attribution_effects(model: Llama, tokens, mask, mean_heads, target: int) -> jax.Array:
    """First-order estimate of :func:`head_indirect_effects`, from one forward and one backward.

    Attribution patching (Nanda, "Attribution patching", 2023; Syed, Rager, Conmy, "Attribution
    patching outperforms automated circuit discovery", 2023): the change of
    ``S = sum_{(b, t) in mask} log p(target)_t`` when head ``(l, h)`` is set to ``a_bar[l, h]``
    at the masked positions is approximated by the linear term
    ``sum_{(b, t') in mask} (a_bar[l, h] - o[l, b, t', h]) . dS / do[l, b, t', h]``, then divided
    by the number of masked positions (as the exact effect is a mean). ``dS/do`` is the gradient
    with respect to the residual after the attention block (a zero :class:`AddToResidual` at
    ``site="mid"``) pulled back through the attention post-norm (``post_norms``) and the head's
    slice of ``W_O``. It is exact for an effect linear in the head's output and a close estimate
    for small patches; it ranks heads, it does not replace the exact effect.

    Args:
      model, tokens, mask, mean_heads, target: as :func:`head_indirect_effects`.

    Returns:
      ``(L, Hq)`` float32 estimated indirect effects (nats).

    Raises:
      ValueError: as :func:`head_indirect_effects`.
    """
    tokens, m, mean_heads = _head_inputs(
        model, tokens, mask, mean_heads, target, "head_attribution_effects"
    )
    cfg = model.config
    w = jnp.asarray(m, jnp.float32)
    head_out, grad = _attribution_grads(model, tokens, w, jnp.int32(target))
    out = []
    for layer in range(cfg.n_layers):
        o = head_out[layer].astype(jnp.float32)  # (B, T, H, D)
        g = grad[layer]  # (B, T, C)
        wo_HxDxC = _wo(model, layer)
        if cfg.post_norms:
            norm = model.layers[layer].attention_post_norm
            u = model.layers[layer].attention.out(head_out[layer]).astype(jnp.float32)
            _, pull = jax.vjp(lambda x, norm=norm: norm(x).astype(jnp.float32), u)
            (g,) = pull(g)
        g_o = jnp.einsum("hdc,btc->bthd", wo_HxDxC, g)
        diff = (mean_heads[layer][None, None] - o) * w[:, :, None, None]
        out.append(jnp.einsum("bthd,bthd->h", diff, g_o) / jnp.sum(w))
    return jnp.stack(out)
