"""Rectified-flow loss: closed forms for the interpolation, an oracle and a linear velocity."""

import jax.numpy as jnp
import numpy as np
import pytest

from fidia_jax import losses


def _pair(seed=0, shape=(3, 4, 4, 1)):
    rng = np.random.default_rng(seed)
    return (
        rng.uniform(size=shape).astype(np.float32),
        rng.standard_normal(shape).astype(np.float32),
        np.asarray([0.0, 0.3, 1.0], np.float32),
    )


def test_interpolation_endpoints_and_velocity():
    x, z, t = _pair()
    xt, vel = losses.rectified_flow_interpolate(x, z, t)
    np.testing.assert_allclose(xt[0], x[0], atol=1e-7)  # t = 0: the image
    np.testing.assert_allclose(xt[2], z[2], atol=1e-7)  # t = 1: the noise
    np.testing.assert_allclose(xt[1], 0.3 * z[1] + 0.7 * x[1], atol=1e-6)
    np.testing.assert_allclose(vel, z - x, atol=1e-7)


def test_loss_values():
    x, z, t = _pair(1)
    # the zero field: mean (z - x)^2
    zero = losses.rectified_flow_loss(lambda xt, tt: jnp.zeros_like(xt), x, z, t)
    np.testing.assert_allclose(float(zero), np.mean((z - x) ** 2), rtol=1e-6)
    # a linear field v = 0.5 x_t, brute force
    lin = losses.rectified_flow_loss(lambda xt, tt: 0.5 * xt, x, z, t)
    xt = t[:, None, None, None] * z + (1 - t[:, None, None, None]) * x
    np.testing.assert_allclose(float(lin), np.mean((0.5 * xt - (z - x)) ** 2), rtol=1e-5)
    # reflow pairs on a straight line: the true velocity has zero loss
    exact = losses.rectified_flow_loss(lambda xt, tt: jnp.asarray(z - x), x, z, t)
    assert float(exact) == 0.0


def test_loss_errors():
    x, z, t = _pair()
    with pytest.raises(ValueError, match="rank 4"):
        losses.rectified_flow_loss(lambda a, b: a, x[0], z[0], t)
    with pytest.raises(ValueError, match="noise shape"):
        losses.rectified_flow_loss(lambda a, b: a, x, z[:2], t)
    with pytest.raises(ValueError, match=r"t must have shape"):
        losses.rectified_flow_loss(lambda a, b: a, x, z, t[:2])
    with pytest.raises(ValueError, match="velocity shape"):
        losses.rectified_flow_loss(lambda a, b: a[..., :0], x, z, t)
