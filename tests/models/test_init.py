"""models.init_without_compile / count_params: values from the draw rule, order, errors."""

import numpy as np
import pytest
from flax import nnx

from fidia_jax import models


def _mlp():
    return nnx.Sequential(nnx.Linear(3, 4, rngs=nnx.Rngs(0)), nnx.Linear(4, 2, rngs=nnx.Rngs(0)))


def test_leaves_are_drawn_in_state_order_from_one_stream():
    seen = []

    def draw(names, shape, rng):
        seen.append(names)
        return rng.standard_normal(shape)

    m = models.init_without_compile(_mlp, draw, seed=5)
    rng = np.random.default_rng(5)  # same stream, same order: bias then kernel of each layer
    expected = {n: rng.standard_normal(s) for n, s in [
        (("layers", "0", "bias"), (4,)), (("layers", "0", "kernel"), (3, 4)),
        (("layers", "1", "bias"), (2,)), (("layers", "1", "kernel"), (4, 2))]}  # fmt: skip
    assert seen == list(expected)
    np.testing.assert_array_equal(
        m.layers[0].kernel[...], expected[("layers", "0", "kernel")].astype(np.float32)
    )
    np.testing.assert_array_equal(
        m.layers[1].bias[...], expected[("layers", "1", "bias")].astype(np.float32)
    )
    assert models.count_params(m) == 3 * 4 + 4 + 4 * 2 + 2


def test_a_value_of_the_wrong_shape_is_refused():
    with pytest.raises(ValueError, match=r"layers.0.bias has shape \(3,\), the leaf has \(4,\)"):
        models.init_without_compile(_mlp, lambda names, shape, rng: np.zeros(3), seed=0)
