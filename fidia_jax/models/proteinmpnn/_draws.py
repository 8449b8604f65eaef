"""ProteinMPNN token draws: the Gumbel noise drawn before the decoding loop, the categorical
draw of one step, and the original's PSSM mixing of the sampling distribution.

Private helpers of :func:`fidia_jax.models.sample` (``_sampling.py``), kept apart by job.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np


def _check_pssm(pssm, length: int, vocab: int, omit_21):
    """Validated ``(mix_L, probs_Lx21, scale_Lx21)`` float32 arrays (see :func:`sample`)."""
    try:
        mix, probs, scale = (np.asarray(a, np.float32) for a in pssm)
    except (TypeError, ValueError):
        raise ValueError("pssm must be a tuple (mix_L, probs_Lx21, scale_Lx21)") from None
    for name, a, shape in (
        ("mix", mix, (length,)),
        ("probs", probs, (length, vocab)),
        ("scale", scale, (length, vocab)),
    ):
        if a.shape != shape:
            raise ValueError(f"pssm {name} must have shape {shape}, got {a.shape}")
        if not np.isfinite(a).all():
            raise ValueError(f"pssm {name} has non-finite values")
    if mix.min(initial=0.0) < 0 or mix.max(initial=0.0) > 1:
        raise ValueError(f"pssm mix must lie in [0, 1], got [{mix.min()}, {mix.max()}]")
    if probs.min(initial=0.0) < 0 or scale.min(initial=0.0) < 0:
        raise ValueError("pssm probs and scale must be >= 0")
    allowed = (scale > 0) & ~np.asarray(omit_21)[None, :]
    dead = np.flatnonzero(~allowed.any(-1))
    if dead.size:
        raise ValueError(f"pssm scale leaves no letter to sample at slot(s) {dead[:10].tolist()}")
    dead = np.flatnonzero((mix >= 1) & ~((probs * allowed) > 0).any(-1))
    if dead.size:
        raise ValueError(
            f"pssm mix 1 with no probability on an allowed letter at slot(s) {dead[:10].tolist()}"
        )
    return jnp.asarray(mix), jnp.asarray(probs), jnp.asarray(scale)


def _token_noise(key, steps: int, shape) -> jax.Array:
    """The Gumbel noise of every decoding step, drawn before the loop: ``(steps, *shape)`` float32.

    Row ``t`` is ``jax.random.gumbel(fold_in(key, t), shape)``, the noise that
    ``jax.random.categorical(fold_in(key, t), z)`` adds to ``z`` (it returns
    ``argmax(gumbel + z)``), so :func:`_draw` with this row makes the same draw bit for bit.
    """
    return jax.vmap(lambda t: jax.random.gumbel(jax.random.fold_in(key, t), shape, jnp.float32))(
        jnp.arange(steps)
    )


def _pssm_rows(pssm, p_N):
    """The ``pssm`` rows (see :func:`sample`) of positions ``p_N``; ``None`` without a PSSM."""
    if pssm is None:
        return None
    mix_L, probs_Lx21, scale_Lx21 = pssm
    return mix_L[p_N], probs_Lx21[p_N], scale_Lx21[p_N]


def _draw(noise_Nx21, z_Nx21, omit_21, temperature, pssm_rows=None):
    """``categorical(z / T)`` over the non-omitted tokens; the greedy token when ``T <= 0`` (traced).

    ``noise_Nx21`` is the step's row of :func:`_token_noise` (Gumbel-max: ``argmax(noise + z / T)``).
    With ``pssm_rows`` (``mix_N``, ``probs_Nx21``, ``scale_Nx21``) the categorical is the mixed
    and rescaled ``((1 - mix) softmax(z / T) + mix probs) * scale`` (see :func:`sample`), drawn
    by Gumbel-max on its logarithm.
    """
    neg_inf = jnp.asarray(-jnp.inf, jnp.float32)
    z = z_Nx21 / temperature
    z = jnp.where(omit_21[None, :], neg_inf, z)
    # a traced T <= 0 (or NaN) cannot raise: take the T -> 0+ limit, the greedy token
    greedy_z = jnp.where(omit_21[None, :], neg_inf, z_Nx21)
    if pssm_rows is not None:
        # in log space, so that a softmax underflowing to 0 on the allowed letters still draws
        mix_N, probs_Nx21, scale_Nx21 = pssm_rows
        lp = jax.nn.log_softmax(z, -1)
        lp_greedy = jnp.where(
            jax.nn.one_hot(jnp.argmax(greedy_z, -1), z.shape[-1], dtype=bool), 0.0, neg_inf
        )
        keep = jnp.log(1.0 - mix_N)[:, None]
        prior = jnp.log(mix_N)[:, None] + jnp.log(probs_Nx21)
        off = omit_21[None, :] | (scale_Nx21 <= 0)
        z, greedy_z = (
            jnp.where(off, neg_inf, jnp.logaddexp(keep + q, prior) + jnp.log(scale_Nx21))
            for q in (lp, lp_greedy)
        )
    drawn = jnp.argmax(noise_Nx21 + z, axis=-1).astype(jnp.int32)
    greedy = jnp.argmax(greedy_z, -1)
    return jnp.where(temperature > 0, drawn, greedy.astype(jnp.int32))
