"""HIT-VAR's prefix -> scale schedule: prefixes, sizes, the mask, errors."""

import numpy as np
import pytest

from fidia_jax import layers
from fidia_jax.projects.hitvar import schedule


def test_hierarchical_schedule_prefixes_and_errors():
    sch = schedule.hierarchical_scale_schedule(16, 4, (1, 2, 4, 6, 8), latent_size=8)
    # x m reads the grids no finer than 8 * m / 4: x1 <= 2, x2 <= 4, x3 <= 6, x4 all
    assert sch.prefixes == (2, 3, 4, 5)
    assert [sch.output_size(m) for m in (1, 2, 3, 4)] == [16, 32, 48, 64]
    assert sch.num_tokens == 1 + 4 + 16 + 36 + 64 and sch.offsets[-1] == sch.num_tokens
    np.testing.assert_array_equal(sch.mask(), layers.block_causal_mask(sch.grids))
    default = schedule.hierarchical_scale_schedule(16, 4, (1, 2, 4, 8, 16))  # latent = 64 / 4
    assert default.latent_size == 16 and default.prefixes == (3, 4, 4, 5)
    with pytest.raises(ValueError, match="must divide the HR side"):
        schedule.hierarchical_scale_schedule(16, 4, (1, 2, 4, 7), latent_size=7)
    with pytest.raises(ValueError, match="increasing"):
        schedule.hierarchical_scale_schedule(16, 4, (1, 4, 2, 8), latent_size=8)
    with pytest.raises(ValueError, match="scale must be one of"):
        sch.output_size(5)
    with pytest.raises(ValueError, match="max_scale"):
        schedule.hierarchical_scale_schedule(16, 0, (1,), latent_size=1)
