"""DyCon's probe on a released checkpoint (lm_probe): the text traces, the boundary targets,
and the analysis end to end on a tiny random Llama with a character tokenizer."""

import numpy as np
import pytest
from flax import nnx

from fidia_jax import models
from fidia_jax.projects.dycon import lm_probe


class CharTokenizer:
    """One id per character (ids 1..255), BOS 0: a stand-in for ``models.LMTokenizer``."""

    bos_id = 0

    def encode(self, text, *, add_bos=None):
        return ([0] if add_bos else []) + [min(ord(c), 255) for c in text]


def test_text_traces_are_correct_sums():
    traces = lm_probe.text_traces(20, seed=3, min_operands=2, max_operands=5)
    for tr in traces:
        segs, k = tr["segments"], tr["k"]
        assert 2 <= k <= 5 and len(segs) == k + 1
        xs = [int(v) for v in segs[0].split(":")[1].strip(" .\n").split(", ")]
        assert len(xs) == k and all(s.endswith("\n\n") for s in segs[:-1])
        total = xs[0]
        for seg, x in zip(segs[1:-1], xs[1:], strict=True):
            assert seg == f"{total} + {x} = {total + x}.\n\n"
            total += x
        assert segs[-1] == f"Answer: {total}"
    with pytest.raises(ValueError, match="min_operands"):
        lm_probe.text_traces(3, min_operands=1)


def test_boundaries_and_remaining_tokens_by_hand():
    rows = lm_probe._encode(
        CharTokenizer(), [{"segments": ["ab\n\n", "c\n\n", "de\n\n", "x"], "k": 3}]
    )
    r = rows[0]
    assert r["ids"][0] == 0 and len(r["ids"]) == 1 + 4 + 3 + 4 + 1
    np.testing.assert_array_equal(r["bounds"], [4, 7, 11])  # the last "\n" of each segment
    np.testing.assert_array_equal(r["remaining"], [7, 4, 0])
    np.testing.assert_array_equal(r["done"], [0, 3, 7])


@pytest.mark.integration
def test_checkpoint_probe_on_a_tiny_model():
    cfg = models.LlamaConfig.tiny(max_seq_len=128)
    model = models.Llama(cfg, rngs=nnx.Rngs(0))
    out = lm_probe.checkpoint_probe(model, CharTokenizer(), num_traces=12, max_operands=3)
    assert len(out["r2_test"]) == len(out["r2_shuffled_test"]) == cfg.n_layers + 1
    assert 0 <= out["layer"] <= cfg.n_layers and out["r2_layer"] == out["r2_test"][out["layer"]]
    assert np.isfinite(out["r2_position_baseline"]) and out["r2_position_baseline"] > 0.5
    # the counts the text states determine the target up to the tokens of each number
    assert out["r2_counter_baseline"] > max(out["r2_position_baseline"], 0.9)
    lo, hi = out["paired"]["ci95"]
    assert lo <= out["paired"]["mse_difference"] <= hi
    with pytest.raises(ValueError, match="num_traces >= 8"):
        lm_probe.checkpoint_probe(model, CharTokenizer(), num_traces=4)


def test_checkpoint_run_names_a_missing_path(tmp_path):
    from fidia_jax.errors import CheckpointError
    from fidia_jax.projects.dycon import get_config
    from fidia_jax.projects.dycon.train import checkpoint_and_evaluate

    missing = tmp_path / "nope.gguf"
    with pytest.raises(CheckpointError, match="nope.gguf.*does not exist"):
        checkpoint_and_evaluate(get_config("tiny", checkpoint=str(missing)), tmp_path / "run")
