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

Every per-head array is indexed by the **query** head (grouped-query attention: query head ``h``
reads key/value head ``h // (Hq / Hkv)``), as :meth:`Llama.inspect`'s ``head_out``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from fidia_jax.models import Llama, PatchHeads

__all__ = ["function_vector", "head_indirect_effects", "mean_head_outputs", "top_heads"]


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
    where = "head_indirect_effects"
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
    """
    s = np.asarray(scores, np.float64)
    if s.ndim != 2:
        raise ValueError(f"top_heads: scores must be (L, Hq), got shape {s.shape}")
    if isinstance(k, bool) or not isinstance(k, int | np.integer) or not 1 <= k <= s.size:
        raise ValueError(f"top_heads: k must be an int in [1, {s.size}], got {k!r}")
    order = np.argsort(-s.ravel(), kind="stable")[:k]
    out = np.zeros(s.size, bool)
    out[order] = True
    return out.reshape(s.shape)


def function_vector(model: Llama, mean_heads, heads) -> jax.Array:
    """``v = sum_{(l, h) selected} a_bar[l, h] @ W_O[l][h D:(h + 1) D]``, a residual-stream vector.

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
        wo = jnp.asarray(model.layers[layer].attention.wo.kernel[...], jnp.float32)  # (Hq*D, C)
        wo_HxDxC = wo.reshape(cfg.n_heads, cfg.head_dim, cfg.dim)
        v = v + jnp.einsum(
            "hd,hdc->c", mh[layer] * jnp.asarray(sel[layer], jnp.float32)[:, None], wo_HxDxC
        )
    return v
