"""CausalEGM's two objectives: the encoder/generator/outcome/treatment loss and the WGAN-GP critic loss.

Line-for-line from the authors' package ``causalegm`` 0.4.0 (``CausalEGM/causalEGM.py``,
``train_gen_step`` and ``train_disc_step``; authors' code). The only addition is the multi-arm
treatment term (``K > 2``): the package's binary ``(sigmoid(h) - x)^2`` becomes the Brier score
``sum_k (softmax(h)_k - [t = k])^2 / 2`` (equal to the binary term when ``K = 2``;
**reconstruction**).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

__all__ = ["EGMWeights", "causalegm_critic_loss", "causalegm_generator_loss"]


class EGMWeights(NamedTuple):
    """Loss weights of the package (CLI defaults): ``alpha`` (reconstruction), ``beta``
    (treatment + outcome MSE), ``gamma`` (gradient penalty), ``use_v_gan``, ``use_z_rec``."""

    alpha: float = 1.0
    beta: float = 1.0
    gamma: float = 10.0
    use_v_gan: float = 1.0
    use_z_rec: float = 1.0


_DEFAULT_WEIGHTS = EGMWeights()  # immutable (a NamedTuple), safe as a default argument


def _treatment_loss(model, z_BxZ, t_B):
    logits = model.treatment_logits(z_BxZ)
    if model.num_arms == 2:
        return jnp.mean((jax.nn.sigmoid(logits) - t_B.astype(jnp.float32)) ** 2)
    onehot = jax.nn.one_hot(t_B, model.num_arms)
    return jnp.mean(jnp.sum((jax.nn.softmax(logits, -1) - onehot) ** 2, -1) / 2.0)


def causalegm_generator_loss(model, z_BxZ, v_BxV, t_B, y_B, weights: EGMWeights = _DEFAULT_WEIGHTS):
    """The package's ``g_e_loss`` (minimised over ``g_net, e_net, f_net, h_net``).

    ``use_v_gan * g_adv + e_adv + alpha (l2_v + use_z_rec * l2_z) + beta (l2_x + l2_y)`` with
    ``g_adv = -mean dv(g(z))``, ``e_adv = -mean dz(e(v))``, ``l2_v = mean (v - g(e(v)))^2``,
    ``l2_z = mean (z - e(g(z)))^2``, ``l2_y = mean (f(z0, z1, t) - y)^2`` and the treatment MSE.

    Args:
      model: a :class:`fidia_jax.models.CausalEGM`.
      z_BxZ: ``(B, Z)`` draws of ``N(0, I)``; v_BxV: ``(B, V)`` covariates; t_B: ``(B,)`` int arms;
      y_B: ``(B,)`` float outcomes; weights: :class:`EGMWeights`.

    Returns:
      ``(loss, aux)`` with ``aux`` a dict of the package's logged terms.
    """
    v_gen = model.g_net(z_BxZ)
    z_enc = model.e_net(v_BxV)
    z_cycle = model.e_net(v_gen)
    v_cycle = model.g_net(z_enc)
    l2_v = jnp.mean((v_BxV - v_cycle) ** 2)
    l2_z = jnp.mean((z_BxZ - z_cycle) ** 2)
    g_adv = -jnp.mean(model.dv_net(v_gen))
    e_adv = -jnp.mean(model.dz_net(z_enc))
    l2_y = jnp.mean((model.outcome(z_enc, t_B) - y_B) ** 2)
    l2_x = _treatment_loss(model, z_enc, t_B)
    w = weights
    loss = (
        w.use_v_gan * g_adv + e_adv + w.alpha * (l2_v + w.use_z_rec * l2_z) + w.beta * (l2_x + l2_y)
    )
    aux = {"g_adv": g_adv, "e_adv": e_adv, "l2_v": l2_v, "l2_z": l2_z, "l2_x": l2_x, "l2_y": l2_y}
    return loss, aux


def _penalty(critic, x_hat):
    grad = jax.grad(lambda x: jnp.sum(critic(x)))(x_hat)
    return jnp.mean((jnp.sqrt(jnp.sum(grad**2, axis=1)) - 1.0) ** 2)


def causalegm_critic_loss(
    model, z_BxZ, v_BxV, eps_z, eps_v, weights: EGMWeights = _DEFAULT_WEIGHTS
):
    """The package's ``d_loss`` (minimised over ``dz_net, dv_net``): WGAN-GP on ``z`` and ``v``.

    ``use_v_gan * dv_loss + dz_loss + gamma (gp_z + use_v_gan * gp_v)`` with
    ``dz_loss = -mean dz(z) + mean dz(e(v))``, ``dv_loss = -mean dv(v) + mean dv(g(z))``, and the
    penalty ``mean (||grad_x d(x_hat)|| - 1)^2`` at ``x_hat = eps x_real + (1 - eps) x_fake``
    with one uniform ``eps`` per batch (as the package). The gradient is that of the batch sum
    of the critic (the package's tape gradient), batch norm included. Encoder and generator
    outputs are constants here (the package differentiates the critics only).

    Args:
      model: a :class:`fidia_jax.models.CausalEGM`; z_BxZ, v_BxV: real latent draws and
      covariates; eps_z, eps_v: scalars in ``[0, 1)``; weights: :class:`EGMWeights`.

    Returns:
      ``(loss, aux)`` with ``dz_loss``, ``dv_loss``, ``gp_z``, ``gp_v``.
    """
    v_gen = jax.lax.stop_gradient(model.g_net(z_BxZ))
    z_enc = jax.lax.stop_gradient(model.e_net(v_BxV))
    z_hat = z_BxZ * eps_z + z_enc * (1.0 - eps_z)
    v_hat = v_BxV * eps_v + v_gen * (1.0 - eps_v)
    dz_loss = -jnp.mean(model.dz_net(z_BxZ)) + jnp.mean(model.dz_net(z_enc))
    dv_loss = -jnp.mean(model.dv_net(v_BxV)) + jnp.mean(model.dv_net(v_gen))
    gp_z = _penalty(model.dz_net, z_hat)
    gp_v = _penalty(model.dv_net, v_hat)
    w = weights
    loss = w.use_v_gan * dv_loss + dz_loss + w.gamma * (gp_z + w.use_v_gan * gp_v)
    return loss, {"dz_loss": dz_loss, "dv_loss": dv_loss, "gp_z": gp_z, "gp_v": gp_v}
