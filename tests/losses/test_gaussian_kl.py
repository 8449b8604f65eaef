"""Gaussian KLs: closed form vs Monte Carlo and the textbook 1-D form."""

import jax.numpy as jnp
import numpy as np
import pytest

from fidia_jax import losses


def test_gaussian_kl_matches_monte_carlo():
    rng = np.random.default_rng(0)
    mq, mp = rng.normal(size=3), rng.normal(size=3)
    lq, lp = rng.normal(size=3) * 0.5, rng.normal(size=3) * 0.5
    z = mq + np.exp(0.5 * lq) * rng.normal(size=(400_000, 3))

    def log_n(x, m, lv):
        return -0.5 * (np.log(2 * np.pi) + lv + (x - m) ** 2 / np.exp(lv))

    mc = np.mean(np.sum(log_n(z, mq, lq) - log_n(z, mp, lp), axis=1))
    kl = float(
        losses.gaussian_kl(jnp.asarray(mq), jnp.asarray(lq), jnp.asarray(mp), jnp.asarray(lp))
    )
    assert kl == pytest.approx(mc, abs=0.01)
    # 1-D textbook form: log(s_p/s_q) + (s_q^2 + (m_q - m_p)^2) / (2 s_p^2) - 1/2
    sq, sp = np.exp(0.5 * lq[0]), np.exp(0.5 * lp[0])
    closed = np.log(sp / sq) + (sq**2 + (mq[0] - mp[0]) ** 2) / (2 * sp**2) - 0.5
    assert float(
        losses.gaussian_kl(*(jnp.asarray(v[:1]) for v in (mq, lq, mp, lp)))
    ) == pytest.approx(closed, rel=1e-5)


def test_standard_normal_kl_and_zero_kl():
    m, lv = jnp.array([[0.3, -1.0], [0.0, 0.0]]), jnp.array([[0.2, -0.5], [0.0, 0.0]])
    np.testing.assert_allclose(
        losses.standard_normal_kl(m, lv),
        losses.gaussian_kl(m, lv, jnp.zeros_like(m), jnp.zeros_like(lv)),
        rtol=1e-6,
    )
    assert float(losses.standard_normal_kl(m, lv)[1]) == 0.0
    assert float(losses.gaussian_kl(m[0], lv[0], m[0], lv[0])) == pytest.approx(0.0, abs=1e-7)
    with pytest.raises(ValueError, match="share one shape"):
        losses.gaussian_kl(m, lv, m[0], lv)
