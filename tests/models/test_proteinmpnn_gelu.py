"""ProteinMPNN's GELU: torch's exact formula ``x/2 (1 + erf(x/√2))``, checked against float64.

The layers use ``torch.nn.GELU()`` (exact) in the original. ``_gelu`` writes it as torch does,
with ``erf``; ``jax.nn.gelu(approximate=False)`` writes the same function with ``erfc``, which
XLA:CPU evaluates about 2.5x slower. Both must equal the float64 function to float32 rounding.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from fidia_jax.models.proteinmpnn._layers import _gelu


def _gelu64(x: np.ndarray) -> np.ndarray:
    erf = np.vectorize(math.erf)
    x = x.astype(np.float64)
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


def test_gelu_is_torch_exact_formula_to_float32_rounding():
    x = np.concatenate([np.linspace(-12, 12, 20001), [-40.0, -5.5, -1e-3, 0.0, 1e-3, 40.0]])
    x = x.astype(np.float32)
    want = _gelu64(x)
    got = np.asarray(jax.jit(_gelu)(jnp.asarray(x)), np.float64)
    # absolute error: float32 rounding of 1 + erf (torch's formula cancels for x << 0, so the
    # error there is absolute, not relative); relative where there is no cancellation (x > -1)
    err = np.abs(got - want) / np.maximum(np.abs(x), 1.0)
    assert err.max() <= 3e-7, (
        f"largest error {err.max():.2e} x max(|x|, 1) at x = {x[err.argmax()]}"
    )
    right = x > -1.0
    np.testing.assert_allclose(got[right], want[right], rtol=1e-6, atol=1e-12)
    assert got[x == 0.0] == 0.0 and np.all(np.isfinite(got))
    # the erfc form jax.nn.gelu uses: the same function to the same rounding
    other = np.asarray(jax.nn.gelu(jnp.asarray(x), approximate=False), np.float64)
    np.testing.assert_allclose(got, other, rtol=0, atol=2e-6)


def test_gelu_keeps_dtype_and_propagates_nan():
    assert _gelu(jnp.ones(3, jnp.bfloat16)).dtype == jnp.bfloat16
    assert _gelu(jnp.ones(3, jnp.float32)).dtype == jnp.float32
    assert np.isnan(np.asarray(_gelu(jnp.array([np.nan], jnp.float32)))[0])
