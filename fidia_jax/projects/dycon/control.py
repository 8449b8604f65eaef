"""DyCon's control: a probe's difficulty reading turned into a logit bias on reflection tokens.

At every step boundary the sampler hands the residual stream of the current token to a logit-bias
function (:func:`fidia_jax.models.sample_llama`, ``logit_bias=``). DyCon reads the predicted
remaining reasoning ``d_hat = clip(h_l . w + b, 0, 1)`` with a linear probe at layer ``l``, and,
only at boundary tokens (elsewhere the bias is 0), adds to the logits of the reflection tokens
("wait"), by ``form``:

* ``"one_sided"`` (the default): ``-lambda * max(0, tau - d_hat)``: reflection is suppressed
  when little reasoning is predicted to remain, and never encouraged; nothing else is touched.
  Every description of the method we could read (the abstract; the summaries of arXiv:2606.07108
  at kurate.org, papernotes.org, ai-paper-delta) states a suppression of reflection-token
  logits that is strong for easy states and near zero for hard ones; with ``tau = 1`` this is
  ``-lambda * (1 - d_hat)``.
* ``"two_sided"`` (the ablation: this package's first form): ``lambda * (d_hat - tau)`` on the
  reflection tokens (raised above ``tau``, lowered below) and ``-end_scale * lambda *
  (d_hat - tau)`` on the end-of-thinking token.

**Reconstruction**: the paper's Section 3 (Tu et al., ICML 2026, arXiv:2606.07108) could not be
read here (the stored copies of its HTML end before it), so the exact formula, the clip to
``[0, 1]`` and the threshold form remain ours; the *direction* (one-sided suppression) is the one
every summary states, and is the default.

The current token is recognised from the sampler's hidden state: entry 0 of the stack is the
token embedding itself (entering block 0, times the model's ``embed_scale``), so a boundary token
is one whose scaled embedding equals a row of ``boundary_embeds`` exactly (an ``AddToResidual`` hook at layer 0, site ``pre`` would
break this match: do not combine them).

Three module-level bias functions (static arguments of the jitted sampler):
:func:`dycon_logit_bias` (dynamic: the probe is read at every boundary),
:func:`dycon_static_bias` (the "static probe" baseline: one reading per row, ``fixed_dhat``, taken
at the first boundary and applied at every boundary) and :func:`ban_tokens_bias` (NoWait:
``-inf`` on the reflection tokens everywhere).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

__all__ = [
    "CONTROL_FORMS",
    "DyconControl",
    "ban_tokens_bias",
    "dycon_control",
    "dycon_logit_bias",
    "dycon_static_bias",
    "probe_difficulty",
]


#: Forms of the control (see the module docstring); the first is the default.
CONTROL_FORMS = ("one_sided", "two_sided")


class DyconControl(NamedTuple):
    """Traced arguments of the DyCon bias functions (a pytree; build with :func:`dycon_control`).

    Attributes:
      coef: ``(C,)`` float32 probe weights.
      intercept: ``()`` float32 probe intercept.
      layer: ``()`` int32 index into the sampler's hidden stack (``0 .. n_layers``).
      lam: ``()`` float32 strength ``lambda >= 0``.
      tau: ``()`` float32 threshold ``tau`` in ``[0, 1]``.
      end_scale: ``()`` float32 weight of the opposite push on the end-of-thinking token.
      boundary_embeds: ``(M, C)`` embeddings of the boundary tokens.
      reflect_mask: ``(V,)`` float32, 1 on reflection tokens.
      end_mask: ``(V,)`` float32, 1 on the end-of-thinking token (all 0 when there is none).
      fixed_dhat: ``(B,)`` or ``()`` float32 reading used by :func:`dycon_static_bias`.
      one_sided: ``()`` float32, 1.0 for the ``"one_sided"`` form, 0.0 for ``"two_sided"``.
    """

    coef: jax.Array
    intercept: jax.Array
    layer: jax.Array
    lam: jax.Array
    tau: jax.Array
    end_scale: jax.Array
    boundary_embeds: jax.Array
    reflect_mask: jax.Array
    end_mask: jax.Array
    fixed_dhat: jax.Array
    one_sided: jax.Array


def _scalar(value, name, low=-math.inf, high=math.inf):
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"dycon_control: {name} must be a real number, got {value!r}") from None
    if not (math.isfinite(v) and low <= v <= high):
        raise ValueError(
            f"dycon_control: {name} must be finite and in [{low}, {high}], got {value!r}"
        )
    return v


def dycon_control(
    model,
    coef,
    intercept,
    *,
    layer: int,
    lam: float,
    tau: float,
    boundary_tokens,
    reflect_tokens,
    end_token: int | None = None,
    end_scale: float | None = None,
    fixed_dhat=None,
    form: str = "one_sided",
) -> DyconControl:
    """Builds and validates the :class:`DyconControl` of a :class:`fidia_jax.models.Llama`.

    Args:
      model: the Llama (its embedding table gives ``boundary_embeds``; its config the sizes).
      coef: ``(C,)`` probe weights (e.g. :func:`fidia_jax.metrics.ridge_fit` ``.coef``).
      intercept: scalar probe intercept.
      layer: hidden-stack index ``0 .. n_layers`` (0: embeddings, ``l + 1``: after block ``l``).
      lam: ``lambda >= 0`` (0 turns the control off).
      tau: ``tau`` in ``[0, 1]`` (the probe reads a normalised remaining length).
      boundary_tokens: ids of the tokens that end a step.
      reflect_tokens: ids of the reflection tokens.
      end_token: id of the end-of-thinking token, or ``None``.
      end_scale: ``>= 0`` weight of ``-lambda (d_hat - tau)`` on ``end_token`` (two-sided form
        only; default 1.0 there). The one-sided form never touches ``end_token``: a nonzero
        ``end_scale`` with it is a ``ValueError``.
      fixed_dhat: ``(B,)`` readings for :func:`dycon_static_bias` (default 0; unused by the
        dynamic bias).
      form: ``"one_sided"`` (default: ``-lambda max(0, tau - d_hat)`` on reflection tokens) or
        ``"two_sided"`` (the ablation: ``+lambda (d_hat - tau)`` on reflection tokens and the
        opposite push on ``end_token``).

    Returns:
      :class:`DyconControl` (float32 / int32 arrays).

    Raises:
      ValueError: ``lam < 0``, ``tau`` outside ``[0, 1]``, a non-finite value, ``end_scale < 0``,
        a nonzero ``end_scale`` with the one-sided form, an unknown ``form``, a layer outside
        ``0 .. n_layers``, ``coef`` not ``(C,)``, a token id outside the vocabulary, no
        boundary or no reflection token.
    """
    cfg = model.config
    if form not in CONTROL_FORMS:
        raise ValueError(f"dycon_control: form must be one of {CONTROL_FORMS}, got {form!r}")
    lam = _scalar(lam, "lam (lambda)", 0.0)
    tau = _scalar(tau, "tau", 0.0, 1.0)
    if end_scale is None:
        end_scale = 0.0 if form == "one_sided" else 1.0
    end_scale = _scalar(end_scale, "end_scale", 0.0)
    if form == "one_sided" and end_scale != 0.0:
        raise ValueError(
            "dycon_control: the one-sided form does not push the end token; end_scale must be "
            f"0 (or None), got {end_scale} (use form='two_sided' for the opposite push)"
        )
    intercept = _scalar(intercept, "intercept")
    if (
        isinstance(layer, bool)
        or not isinstance(layer, (int, np.integer))
        or not 0 <= layer <= cfg.n_layers
    ):
        raise ValueError(
            f"dycon_control: layer must be an int in [0, {cfg.n_layers}] (0: embeddings, l+1: "
            f"after block l of {cfg.n_layers}), got {layer!r}"
        )
    coef = np.asarray(coef, np.float64)
    if coef.shape != (cfg.dim,) or not np.all(np.isfinite(coef)):
        raise ValueError(f"dycon_control: coef must be ({cfg.dim},) finite, got shape {coef.shape}")

    def ids(tokens, name, allow_empty=False):
        arr = np.asarray(tokens, np.int64).reshape(-1)
        if (arr.size == 0 and not allow_empty) or np.any((arr < 0) | (arr >= cfg.vocab_size)):
            raise ValueError(
                f"dycon_control: {name} must be token ids in [0, {cfg.vocab_size}), got {tokens!r}"
            )
        return arr

    b_ids = ids(boundary_tokens, "boundary_tokens")
    r_ids = ids(reflect_tokens, "reflect_tokens")
    e_ids = ids([] if end_token is None else [end_token], "end_token", allow_empty=True)
    reflect = np.zeros(cfg.vocab_size, np.float32)
    reflect[r_ids] = 1.0
    end = np.zeros(cfg.vocab_size, np.float32)
    end[e_ids] = 1.0
    fixed = (
        jnp.zeros((), jnp.float32) if fixed_dhat is None else jnp.asarray(fixed_dhat, jnp.float32)
    )
    return DyconControl(
        coef=jnp.asarray(coef, jnp.float32),
        intercept=jnp.float32(intercept),
        layer=jnp.int32(layer),
        lam=jnp.float32(lam),
        tau=jnp.float32(tau),
        end_scale=jnp.float32(end_scale),
        boundary_embeds=_entry_embeddings(model, b_ids),
        reflect_mask=jnp.asarray(reflect),
        end_mask=jnp.asarray(end),
        fixed_dhat=fixed,
        one_sided=jnp.float32(form == "one_sided"),
    )


def _entry_embeddings(model, ids) -> jax.Array:
    """``(M, C)`` the residual stream entering block 0 for these tokens, as the model computes it
    (the embedding lookup, times ``embed_scale`` rounded to the compute dtype: Gemma's
    ``sqrt(dim)``), so that :func:`_at_boundary` matches the sampler's hidden stack exactly."""
    h = model.tok_embeddings(jnp.asarray(ids, jnp.int32))
    if model.config.embed_scale != 1.0:
        h = h * jnp.asarray(model.config.embed_scale, h.dtype)
    return h


def probe_difficulty(hidden_BxKxC: jax.Array, control: DyconControl) -> jax.Array:
    """``(B,)`` float32 ``clip(h[:, layer] . coef + intercept, 0, 1)``."""
    h = jnp.take(hidden_BxKxC, control.layer, axis=1).astype(jnp.float32)
    return jnp.clip(h @ control.coef + control.intercept, 0.0, 1.0)


def _at_boundary(hidden_BxKxC, control):
    emb_BxC = hidden_BxKxC[:, 0].astype(jnp.float32)
    same_BxM = jnp.all(emb_BxC[:, None, :] == control.boundary_embeds[None].astype(jnp.float32), -1)
    return jnp.any(same_BxM, axis=-1)


def _shift(dhat_B, control):
    """``lambda (d_hat - tau)``, clipped at 0 from above for the one-sided form."""
    shift_B = control.lam * (dhat_B - control.tau)
    return jnp.where(control.one_sided > 0, jnp.minimum(shift_B, 0.0), shift_B)


def _bias(shift_B, boundary_B, control):
    shift_B = jnp.where(boundary_B, shift_B, 0.0)
    return (
        shift_B[:, None] * control.reflect_mask[None]
        - control.end_scale * shift_B[:, None] * control.end_mask[None]
    )


def dycon_logit_bias(hidden_BxKxC: jax.Array, step: jax.Array, control: DyconControl) -> jax.Array:
    """DyCon (dynamic): ``(B, V)`` bias on reflection tokens at boundaries.

    One-sided form: ``-lambda max(0, tau - d_hat)``; two-sided: ``lambda (d_hat - tau)``, and the
    end-of-thinking token gets ``-end_scale`` times the same shift. ``d_hat`` is
    :func:`probe_difficulty` of the current hidden state; every other entry, and every
    non-boundary row, is 0. A ``logit_bias`` for :func:`fidia_jax.models.sample_llama`
    (``step`` is unused).
    """
    del step
    shift_B = _shift(probe_difficulty(hidden_BxKxC, control), control)
    return _bias(shift_B, _at_boundary(hidden_BxKxC, control), control)


def dycon_static_bias(hidden_BxKxC: jax.Array, step: jax.Array, control: DyconControl) -> jax.Array:
    """Static-probe baseline: as :func:`dycon_logit_bias` with ``d_hat = control.fixed_dhat``
    (one reading per row, taken once at the first boundary) at every boundary."""
    del step
    b = hidden_BxKxC.shape[0]
    dhat_B = jnp.broadcast_to(control.fixed_dhat, (b,))
    shift_B = _shift(dhat_B, control)
    return _bias(shift_B, _at_boundary(hidden_BxKxC, control), control)


def ban_tokens_bias(hidden_BxKxC: jax.Array, step: jax.Array, mask_V: jax.Array) -> jax.Array:
    """NoWait: ``(B, V)`` bias ``-inf`` where ``mask_V`` is nonzero, 0 elsewhere, at every step."""
    del step
    row = jnp.where(jnp.asarray(mask_V) != 0, -jnp.inf, 0.0).astype(jnp.float32)
    return jnp.broadcast_to(row, (hidden_BxKxC.shape[0], row.shape[0]))
