"""RoPE: relative (depends on position differences only), norm preserving, rotate-half layout."""

import jax
import jax.numpy as jnp
import numpy as np

from fidia_jax import layers


def test_rope_relative_and_norm_preserving():
    r = np.random.default_rng(2)
    x = r.standard_normal((1, 1, 1, 8), np.float32)
    y = r.standard_normal((1, 1, 1, 8), np.float32)
    rope = jax.jit(layers.apply_rope)

    def at(a, p):
        return np.asarray(rope(a, jnp.array([[p]], jnp.int32))[0, 0, 0])

    # <R_m x, R_n y> depends only on m - n.
    d1 = np.dot(at(x, 7), at(y, 3))
    d2 = np.dot(at(x, 14), at(y, 10))
    d3 = np.dot(at(x, 4), at(y, 3))
    np.testing.assert_allclose(d1, d2, rtol=1e-5)
    assert abs(float(d1 - d3)) > 1e-3
    np.testing.assert_allclose(np.linalg.norm(at(x, 5)), np.linalg.norm(x), rtol=1e-6)
    np.testing.assert_allclose(at(x, 0), x[0, 0, 0], rtol=1e-6)
    # Rotation of the first pair (i = 0, frequency 1) by angle p, rotate-half layout.
    xr = at(x, 2)
    c, s_ = np.cos(2.0), np.sin(2.0)
    x0, x4 = float(x[0, 0, 0, 0]), float(x[0, 0, 0, 4])
    np.testing.assert_allclose([xr[0], xr[4]], [x0 * c - x4 * s_, x4 * c + x0 * s_], rtol=1e-5)
