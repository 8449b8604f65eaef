"""DyCon's control on generation with a released checkpoint (lm_control): the traces with
checks, the answer parser, and the three arms end to end on a tiny random Llama."""

import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from fidia_jax import models
from fidia_jax.projects.dycon import lm_control


class CharTokenizer:
    """One id per character (ids 1..255), BOS 0: a stand-in for ``models.LMTokenizer``."""

    bos_id = 0

    def encode(self, text, *, add_bos=None):
        return ([0] if add_bos else []) + [min(ord(c), 255) for c in text]

    def decode(self, ids):
        return "".join(chr(i) for i in ids if i > 0)


def test_control_traces_check_every_step():
    for tr in lm_control.control_traces(10, seed=4, max_operands=4):
        segs, k = tr["segments"], tr["k"]
        assert len(segs) == 1 + 2 * (k - 1) + 1
        for step, check in zip(segs[1:-1:2], segs[2:-1:2], strict=True):
            assert check == "Wait, let me check: " + step
        last = segs[-3].split("= ")[1].rstrip(".\n")
        assert segs[-1] == f"Answer: {last}" and tr["answer"] == int(last)


def test_parse_answer():
    text = "1 + 2 = 3.\n\nWait, let me check: 1 + 2 = 3.\n\nAnswer: 3\n\nAdd these"
    ans, end, checks = lm_control.parse_answer(text)
    assert (ans, checks) == (3, 1) and text[:end].endswith("Answer: 3")
    assert lm_control.parse_answer("1 + 2 = 3.\n\nWait") == (None, 16, 1)


@pytest.mark.integration
def test_checkpoint_control_on_a_tiny_model():
    cfg = models.LlamaConfig.tiny(vocab_size=256, max_seq_len=512)
    model = models.Llama(cfg, rngs=nnx.Rngs(0))
    tok = CharTokenizer()
    out = lm_control.checkpoint_control(
        model, tok, num_items=3, num_probe_traces=4, dycon_settings=((8.0, 0.5),),
        const_grid=(1.0, 50.0), max_operands=3, max_new_tokens=12, batch_size=4,
    )  # fmt: skip
    names = [a["name"] for a in out["arms"]]
    assert names == ["none", "dycon lam=8 tau=0.5", "constant c=1", "constant c=50"]
    for arm in out["arms"]:
        assert len(arm["tokens"]) == len(arm["correct"]) == 3
        assert all(1 <= t <= 12 for t in arm["tokens"])
    # decoding over the characters the task uses only; boundaries are "\n", reflections start
    # with "W", "w" or " "
    used = set(out["few_shot"]) | set("0123456789Wwait")
    assert out["vocab_size"] == len(used) + 1  # + BOS
    assert len(out["boundary_tokens"]) == 1 and len(out["reflect_tokens"]) == 3
    pairs = [k for k in out["paired"] if k.startswith("dycon lam=8 tau=0.5 - ")]
    assert len(pairs) == 2 and pairs[0].endswith("none")
    lo, hi = out["paired"][pairs[0]]["tokens"]["ci95"]
    assert lo <= out["paired"][pairs[0]]["tokens"]["mean"] <= hi


@pytest.mark.integration  # eager forwards of four tiny models: > 4 s on the loaded sandbox
def test_restricted_vocabulary_keeps_the_forward_on_kept_tokens():
    """The model rebuilt on a subset of its vocabulary gives the same logits on those tokens
    (tied and untied heads), and the sub-tokenizer maps ids both ways."""
    for tie in (False, True):
        cfg = models.LlamaConfig.tiny(vocab_size=40, tie_embeddings=tie, embed_scale=2.0)
        model = models.Llama(cfg, rngs=nnx.Rngs(1))
        keep = [0, 3, 7, 8, 20, 39]
        small = lm_control._restrict_vocab(model, keep)
        toks = jnp.asarray([[0, 3, 39, 7, 8, 20]])
        sub = jnp.asarray([[keep.index(int(t)) for t in toks[0]]])
        full = np.asarray(model(toks))[..., keep]
        np.testing.assert_allclose(np.asarray(small(sub)), full, rtol=1e-5, atol=1e-5)
    st = lm_control._SubTokenizer(CharTokenizer(), [0, ord("a"), ord("b")])
    assert st.bos_id == 0 and st.encode("ab", add_bos=True) == [0, 1, 2]
    assert st.decode([2, 1]) == "ba"
    with pytest.raises(ValueError, match="outside the kept set"):
        st.encode("abc")
