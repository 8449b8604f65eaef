"""T-JEPA and Var-T-JEPA objectives on feature tokens (the Gaussian KLs are
:func:`fidia_jax.losses.gaussian_kl` and :func:`fidia_jax.losses.standard_normal_kl`).

T-JEPA (Thimonier et al., ICLR 2025): a context encoder sees a random subset of a row's
features, a predictor fills in the latent tokens of a disjoint target subset, and the loss is the
squared error to the tokens of a target encoder, an EMA copy of the context encoder that sees the
full row (gradient stopped). The EMA update itself is :func:`optax.incremental_update`, its decay
:func:`ema_momentum`. Defaults follow the authors' code (github jose-melo/t-jepa @ 98dda99:
``src/mask.py``, ``src/train.py``, ``run.py``); the fixture ``tests/data/tjepa/`` made from it by
``tools/tjepa_make_fixture.py`` checks the mask sizes, the loss reduction and the EMA ramp.

Var-T-JEPA (Gögl & Yau, ICML 2026; only the abstract was available, so the ELBO below is **our
reconstruction**, term by term). Generative model per row, with per-token latents:
``z_C ~ N(0, I)`` for the context tokens, ``z_T ~ p_psi(z_T | z_C)`` (the predictor read as a
learned conditional prior), ``x_f ~ p_theta(x_f | z_f)`` for each feature (Gaussian with a
learned per-feature variance for numerics, categorical for categoricals). Variational
posteriors ``q_phi(z_C | x_C)`` (the context encoder) and ``q_phi(z_T | x_T)`` (the target encoder: the same network on the target
view, trained by the ELBO's gradient, no EMA, no stop-gradient). The negative ELBO per row is::

    - E_q[log p(x_C | z_C)] - E_q[log p(x_T | z_T)]          (reconstruction; reconstruction)
    + beta KL(q(z_C | x_C) || N(0, I))                        (context prior; reconstruction)
    + beta E_{q(z_C)} KL(q(z_T | x_T) || p(z_T | z_C))        (conditional prior; reconstruction)

with one reparameterised sample of each latent, KLs in closed form, ``beta = 1`` the ELBO
proper. That the abstract's three modules map to these three distributions is the abstract's
claim; the factorisation per token and the likelihoods are our choices.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from fidia_jax.losses import gaussian_kl, standard_normal_kl
from fidia_jax.projects.varjepa.model import (
    GaussianTokens,
    TabularJepa,
    multi_target_masks,
    random_feature_masks,
)

__all__ = [
    "EMA_RAMPS",
    "ema_momentum",
    "tjepa_latent_loss",
    "tjepa_objective",
    "var_tjepa_elbo",
    "var_tjepa_objective",
]


def _masked_mean(values_BxF, mask_BxF):
    mask = mask_BxF.astype(values_BxF.dtype)
    return jnp.sum(values_BxF * mask) / jnp.maximum(jnp.sum(mask), 1.0)


def tjepa_latent_loss(pred_BxFxD, target_BxFxD, target_mask_BxF, *, normalize: bool = False):
    """T-JEPA's latent regression: mean squared error over the target tokens.

    The target's gradient is stopped. By default the target tokens are regressed raw (the
    T-JEPA authors' code: ``torch.nn.MSELoss()`` on the gathered target-encoder outputs); with
    ``normalize`` they are first layer-normalised (no parameters; I-JEPA's choice). The error is
    averaged over the ``D`` channels and then over the target tokens of the batch: with the same
    number of target tokens in every row (as the authors' masks have) this is their
    ``MSELoss`` mean over all ``B x n_t x D`` elements.

    Args:
      pred_BxFxD: predictor outputs; target_BxFxD: target-encoder outputs (same shape);
      target_mask_BxF: boolean, which tokens are targets.
      normalize: layer-normalise the targets (not the authors').

    Returns:
      Scalar loss.

    Raises:
      ValueError: shapes disagree.
    """
    if pred_BxFxD.shape != target_BxFxD.shape or pred_BxFxD.shape[:2] != target_mask_BxF.shape:
        raise ValueError(
            f"tjepa_latent_loss: shapes disagree: pred {pred_BxFxD.shape}, target "
            f"{target_BxFxD.shape}, mask {target_mask_BxF.shape}"
        )
    target = jax.lax.stop_gradient(target_BxFxD)
    if normalize:
        mu = jnp.mean(target, axis=-1, keepdims=True)
        target = (target - mu) * jax.lax.rsqrt(jnp.var(target, axis=-1, keepdims=True) + 1e-6)
    return _masked_mean(jnp.mean(jnp.square(pred_BxFxD - target), axis=-1), target_mask_BxF)


def tjepa_objective(
    model: TabularJepa,
    target_model: TabularJepa,
    x_num,
    x_cat,
    key,
    *,
    n_context: int = 0,
    n_target: int = 0,
    views: str = "authors",
    n_target_masks: int = 4,
    min_share: float = 0.2,
    max_share: float = 0.4,
    normalize_targets: bool = False,
    size_rule: str = "authors",
):
    """One T-JEPA loss evaluation on a batch (differentiate w.r.t. ``model``).

    Args:
      model: the online :class:`~.model.TabularJepa` (``variational=False``).
      target_model: its EMA copy; only its encoder is used, on the full row.
      x_num ``(B, D_num)``, x_cat ``(B, D_cat)``: the batch.
      key: PRNG key of the context/target masks.
      n_context, n_target: features per row of the ``"fixed"`` views
        (:func:`~.model.random_feature_masks`: one disjoint split).
      views: ``"authors"`` (default; :func:`~.model.multi_target_masks` with
        ``n_target_masks``, ``min_share``, ``max_share``, ``size_rule``: one context and several
        target masks per row, all of one size per batch; the loss is the mean over the target
        masks of each mask's mean, which, the masks being of equal size, is the authors'
        ``MSELoss`` mean over every gathered element of all masks) or ``"fixed"`` (one disjoint
        split of ``n_context`` / ``n_target`` features, our earlier reading).
      normalize_targets: layer-normalise the target tokens (:func:`tjepa_latent_loss`; the
        authors: no).
      size_rule: how ``"authors"`` views draw their sizes (``"authors"`` or ``"uniform"``, see
        :func:`~.model.multi_target_masks`).

    Returns:
      ``(loss, aux)`` with ``aux = {"latent_mse": loss}``.

    Raises:
      ValueError: an unknown ``views`` or ``size_rule``, or sizes that do not fit the row.
    """
    b, f = x_num.shape[0], model.n_features
    if views == "fixed":
        context, target = random_feature_masks(key, b, f, n_context, n_target)
        targets = target[None]
    elif views == "authors":
        context, targets = multi_target_masks(
            key, b, f, min_share=min_share, max_share=max_share, n_targets=n_target_masks,
            size_rule=size_rule,
        )  # fmt: skip
    else:
        raise ValueError(f"tjepa_objective: views must be 'fixed' or 'authors', got {views!r}")
    z_ctx = model.encode(x_num, x_cat, context).mean
    tgt = target_model.encode(x_num, x_cat).mean
    per_mask = [
        tjepa_latent_loss(
            model.predict(z_ctx, context, targets[m]).mean,
            tgt,
            targets[m],
            normalize=normalize_targets,
        )  # fmt: skip
        for m in range(targets.shape[0])
    ]
    loss = sum(per_mask) / len(per_mask)
    return loss, {"latent_mse": loss}


#: Schedules of :func:`ema_momentum`.
EMA_RAMPS: tuple[str, ...] = ("authors", "reach_end")


def ema_momentum(step, start: float, end: float, total_steps: float, *, ramp: str = "authors"):
    """The EMA decay of T-JEPA's target encoder at (0-based) optimisation step ``step``.

    ``ramp="authors"`` (default): ``start + step (end - start) / total_steps``, the T-JEPA
    authors' ``momentum_scheduler`` (``run.py`` of jose-melo/t-jepa @ 98dda99, ``total_steps =
    ipe * epochs * ipe_scale``), whose value ``step`` is taken right after optimisation step
    ``step`` (``src/train.py``): step 0 uses ``start`` and the last of ``total_steps`` steps
    ``start + (1 - 1 / total_steps)(end - start)``, just short of ``end``.
    ``ramp="reach_end"`` (our earlier reading): ``step + 1`` in place of ``step``, so the last
    step uses ``end``.

    Args:
      step: int or float scalar / array (traced values are fine).
      start, end: the decay at step 0 and (the authors) at step ``total_steps``.
      total_steps: the ramp length ``> 0`` (may be fractional, as ``ipe * epochs * ipe_scale``).
      ramp: ``"authors"`` or ``"reach_end"``.

    Returns:
      The decay, of ``step``'s float type (float64 for a numpy float64 ``step``). Steps past
      ``total_steps`` extrapolate (the authors' generator would be exhausted there).

    Raises:
      ValueError: an unknown ``ramp`` or ``total_steps <= 0``.
    """
    if ramp not in EMA_RAMPS:
        raise ValueError(f"ema_momentum: ramp must be one of {EMA_RAMPS}, got {ramp!r}")
    if not total_steps > 0:
        raise ValueError(f"ema_momentum: total_steps must be > 0, got {total_steps}")
    t = step + 1 if ramp == "reach_end" else step
    return start + t * (end - start) / total_steps


def var_tjepa_elbo(
    x_num,
    x_cat,
    recon_ctx,
    recon_tgt,
    q_ctx: GaussianTokens,
    q_tgt: GaussianTokens,
    prior: GaussianTokens,
    context_BxF,
    target_BxF,
    *,
    beta: float = 1.0,
):
    """Negative Var-T-JEPA ELBO per row, from the modules' outputs (reconstruction, see module doc).

    Args:
      x_num ``(B, D_num)`` float, x_cat ``(B, D_cat)`` int: the observed row.
      recon_ctx, recon_tgt: ``p(x | z)`` decoded from the context / target latent samples, each
        ``(num_mean (B, D_num), num_log_var (1, D_num), cat_logits (B, D_cat, V))``
        (:meth:`~.model.TabularJepa.decode`): Gaussian numerics, categorical ids.
      q_ctx, q_tgt: posteriors ``(B, F, D)``; prior: the predictor's ``p(z_T | z_C)``.
      context_BxF, target_BxF: the boolean views (numeric features first, as the tokens).
      beta: weight of both KL terms (``1`` = the ELBO).

    Returns:
      ``(neg_elbo_B, terms)``: per-row negative ELBO in nats, and a dict of per-row terms
      ``rec_context``, ``rec_target``, ``kl_context``, ``kl_target``.
    """
    n_num = x_num.shape[1]

    def nll_BxF(recon):
        recon_num, log_var, logits = recon
        nll_num = 0.5 * (
            jnp.square(x_num - recon_num) * jnp.exp(-log_var) + log_var + jnp.log(2.0 * jnp.pi)
        )
        log_p = jax.nn.log_softmax(logits, axis=-1)
        nll_cat = -jnp.take_along_axis(log_p, x_cat[:, :, None], axis=-1)[:, :, 0]
        return jnp.concatenate([nll_num, nll_cat], axis=1)

    ctx, tgt = context_BxF.astype(jnp.float32), target_BxF.astype(jnp.float32)
    if ctx.shape[1] != n_num + x_cat.shape[1]:
        raise ValueError(
            f"var_tjepa_elbo: masks have {ctx.shape[1]} features, the row "
            f"{n_num} + {x_cat.shape[1]}"
        )
    terms = {
        "rec_context": jnp.sum(nll_BxF(recon_ctx) * ctx, axis=1),
        "rec_target": jnp.sum(nll_BxF(recon_tgt) * tgt, axis=1),
        "kl_context": jnp.sum(standard_normal_kl(q_ctx.mean, q_ctx.log_var) * ctx, axis=1),
        "kl_target": jnp.sum(
            gaussian_kl(q_tgt.mean, q_tgt.log_var, prior.mean, prior.log_var) * tgt, axis=1
        ),
    }
    neg_elbo = (
        terms["rec_context"]
        + terms["rec_target"]
        + beta * (terms["kl_context"] + terms["kl_target"])
    )
    return neg_elbo, terms


def var_tjepa_objective(
    model: TabularJepa, x_num, x_cat, key, *, n_context: int, n_target: int, beta: float = 1.0
):
    """One Var-T-JEPA loss evaluation: the batch mean of :func:`var_tjepa_elbo` (one sample).

    Args:
      model: a :class:`~.model.TabularJepa` with ``variational=True``.
      x_num, x_cat: the batch; key: masks and reparameterisation noise;
      n_context, n_target: features per row in each view; beta: KL weight.

    Returns:
      ``(loss, aux)``; ``aux`` holds the batch means of the four terms.
    """
    if not model.variational:
        raise ValueError("var_tjepa_objective: the model must be built with variational=True")
    k_mask, k_ctx, k_tgt = jax.random.split(key, 3)
    context, target = random_feature_masks(
        k_mask, x_num.shape[0], model.n_features, n_context, n_target
    )
    q_ctx = model.encode(x_num, x_cat, context)
    q_tgt = model.encode(x_num, x_cat, target)
    z_ctx = q_ctx.mean + jnp.exp(0.5 * q_ctx.log_var) * jax.random.normal(k_ctx, q_ctx.mean.shape)
    z_tgt = q_tgt.mean + jnp.exp(0.5 * q_tgt.log_var) * jax.random.normal(k_tgt, q_tgt.mean.shape)
    prior = model.predict(z_ctx, context, target)
    rec_ctx, rec_tgt = model.decode(z_ctx), model.decode(z_tgt)
    neg_elbo, terms = var_tjepa_elbo(
        x_num, x_cat, rec_ctx, rec_tgt, q_ctx, q_tgt, prior, context, target, beta=beta
    )
    return jnp.mean(neg_elbo), {k: jnp.mean(v) for k, v in terms.items()}
