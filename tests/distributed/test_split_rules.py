"""One process: the work-split helpers (parallel.split_map / gather_in_order) and the Best-of-N block rule
(the 2-process behaviour is tested in test_fidia_multiprocess.py and
test_proteinmpnn_multiprocess.py)."""

import pytest

from fidia_jax import parallel as split
from fidia_jax.errors import ConfigError
from fidia_jax.projects.fidia.design import best_of_n


def test_one_process_keeps_every_item_in_order():
    calls = []
    assert split.split_map(lambda i: calls.append(i) or i * i, 4) == [0, 1, 4, 9]
    assert calls == [0, 1, 2, 3]  # each item computed once
    with pytest.raises(ValueError, match="3 results for 4 items"):
        split.gather_in_order([1, 2, 3], 4)


@pytest.mark.parametrize("blocks", [0, 3, 5])
def test_best_of_n_needs_blocks_that_divide_the_samples(blocks):
    with pytest.raises(ConfigError, match="sample_blocks"):
        best_of_n(None, None, None, num_samples=8, seed=0, blocks=blocks)
