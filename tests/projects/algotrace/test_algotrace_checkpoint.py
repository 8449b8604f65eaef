"""AlgoTrace on a released checkpoint: the text rendering, the first-order head effects and the
post-norm function vector against brute force, and ``checkpoint=PATH`` end to end on a tiny
random Gemma 3 checkpoint written in the Hugging Face layout (the loader tests' writer)."""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from fidia_jax import models
from fidia_jax.errors import CheckpointError, ConfigError
from fidia_jax.projects import algotrace
from fidia_jax.projects.algotrace import checkpoint as ckpt
from fidia_jax.projects.algotrace import traces, vectors

# A Gemma-like block: QK-norm, post-norms with offset 1, GeGLU, embedding scale.
GEMMA = models.LlamaConfig(
    vocab_size=23, dim=16, n_layers=2, n_heads=2, n_kv_heads=1, hidden_dim=32, max_seq_len=16,
    qk_norm=True, post_norms=True, norm_offset=1.0, embed_scale=4.0, mlp_activation="gelu_tanh",
)  # fmt: skip
TARGET = 5


def _gemma():
    model = models.Llama(GEMMA, rngs=nnx.Rngs(1))
    rng = np.random.default_rng(0)
    for layer in model.layers:  # non-trivial norm scales (they start at 0 with an offset)
        for norm in (layer.attention_post_norm, layer.ffn_post_norm):
            norm.scale[...] = jnp.asarray(rng.normal(0, 0.5, GEMMA.dim), jnp.float32)
    return model


def test_render_example_reads_back_the_trace():
    data = traces.make_algotrace_data(12, seed=4)
    for r in range(12):
        header, lines = ckpt.render_example(data.tokens[r], int(data.prompt_len[r]))
        task = traces.ALGOTRACE_TASKS[data.task[r]]
        assert header.startswith("Task: shortest tour" if task == "tsp" else "Task: route from a")
        assert header.endswith(".\n") and all(text.endswith("\n") for text, _ in lines)
        # one line per keyword of the trace, labelled with the keyword's primitive
        kw = {v: k for k, v in traces.ALGOTRACE_KEYWORDS.items()}
        trace = data.tokens[r, data.prompt_len[r] : data.length[r] - 1]
        opened = [traces.ALGOTRACE_PRIMITIVES.index(kw[int(t)]) for t in trace if int(t) in kw]
        assert [p for _, p in lines] == opened
        for text, p in lines:
            assert text.split()[0] == traces.ALGOTRACE_PRIMITIVES[p]
        # the text's token count equals the trace's: every symbol became one word
        assert sum(len(text.split()) for text, _ in lines) == len(trace)
    with pytest.raises(ValueError, match="not an AlgoTrace sequence"):
        ckpt.render_example(np.zeros(8, np.int32), 2)


def test_line_counts():
    text = "distance b 3\ncompare b c b\nnearest b\nfoo\npath a b a\nverify a ok\n"
    counts, path = ckpt._line_counts(text, traces.ALGOTRACE_PRIMITIVES)
    np.testing.assert_array_equal(counts, [1, 1, 1, 0, 1])  # stops at the path line
    assert path == "path a b a"
    counts, path = ckpt._line_counts("\nnearest c\n\ndistance b 1\n", traces.ALGOTRACE_PRIMITIVES)
    np.testing.assert_array_equal(counts, [0, 0, 1, 0, 0]) and path is None  # blank line ends


@nnx.jit
def _patched_score(model, tokens, hooks, w):
    lp = jax.nn.log_softmax(model(tokens, hooks=hooks), axis=-1)[..., TARGET]
    return jnp.sum(lp * w)


@pytest.mark.integration  # compiles a gradient program and a patched forward per layer
def test_attribution_equals_the_derivative_of_the_exact_patch():
    """The first-order estimate is the derivative of the exact patched score: central finite
    differences of a PatchHeads patch ``o + eps (a_bar - o)`` on a post-norm (Gemma-like)
    model. A wrong W_O slice, a missing post-norm Jacobian or a wrong head index fails it."""
    model = _gemma()
    tokens = jax.random.randint(jax.random.key(0), (2, 16), 0, GEMMA.vocab_size)
    rng = np.random.default_rng(1)
    mask = rng.random((2, 16)) < 0.4
    mean = jnp.asarray(rng.normal(0, 1, (2, 2, GEMMA.head_dim)), jnp.float32)
    got = np.asarray(vectors.head_attribution_effects(model, tokens, mask, mean, TARGET))
    ho = model.inspect(tokens, capture=("head_out",))[1]["head_out"]
    pos = vectors._positions(mask)
    w = jnp.asarray(mask, jnp.float32)

    def score(layer, h, eps):
        val = ho[layer] + eps * (mean[layer][None, None] - ho[layer])
        hook = models.PatchHeads(layer, val, heads=jnp.arange(2) == h, positions=pos)
        return float(_patched_score(model, tokens, (hook,), w))

    eps = 1e-2
    for layer in range(2):
        for h in range(2):
            fd = (score(layer, h, eps) - score(layer, h, -eps)) / (2 * eps) / mask.sum()
            np.testing.assert_allclose(got[layer, h], fd, rtol=2e-2, atol=2e-4)
    assert np.ptp(got) > 1e-3  # the heads differ (a constant estimate would pass vacuously)


@pytest.mark.integration  # a model init and eager calls: ~7 s on the loaded 2-core CPU
def test_function_vector_through_the_post_norm():
    """Every head of one layer selected: v = the layer's post-norm of the mean update; a
    single head gives its share (the two heads' parts add up to the whole)."""
    model = _gemma()
    rng = np.random.default_rng(2)
    mean = jnp.asarray(rng.normal(0, 1, (2, 2, GEMMA.head_dim)), jnp.float32)
    sel = np.zeros((2, 2), bool)
    sel[1] = True
    v = np.asarray(vectors.function_vector(model, mean, sel))
    u = model.layers[1].attention.out(mean[1][None, None])  # (1, 1, C)
    want = np.asarray(model.layers[1].attention_post_norm(u))[0, 0]
    np.testing.assert_allclose(v, want, rtol=1e-5, atol=1e-6)
    parts = []
    for h in range(2):
        one = np.zeros((2, 2), bool)
        one[1, h] = True
        parts.append(np.asarray(vectors.function_vector(model, mean, one)))
    np.testing.assert_allclose(parts[0] + parts[1], want, rtol=1e-5, atol=1e-6)
    assert not np.allclose(parts[0], want, atol=1e-3)


# ----------------------------------------------------------------------------- end to end


@pytest.mark.integration
def test_checkpoint_path_end_to_end(tmp_path, tiny_gemma3_checkpoint):
    path = tiny_gemma3_checkpoint
    cfg = algotrace.get_config(
        "tiny", checkpoint=str(path), checkpoint_max_seq_len=512, checkpoint_docs=6,
        checkpoint_shots=1, checkpoint_prompts=4, checkpoint_new_tokens=8, checkpoint_ie_docs=2,
        checkpoint_batch=3, n_clusters=6, top_k_heads=2,
    )  # fmt: skip
    res = algotrace.train_and_evaluate(cfg, tmp_path / "run")
    cl, inj = res["clustering"], res["injection"]
    assert cl["layer"] == 1 and len(cl["per_layer"]) == 3  # middle of 3 layers
    assert cl["n_points"] > 100 and 0 < cl["kmeans"]["purity"] <= 1
    # token identity: each byte token's majority primitive (a closed form on the labels)
    assert 0 < cl["token_identity"]["purity"] <= 1
    assert set(inj["table"]) == {*traces.ALGOTRACE_PRIMITIVES, "random"}
    for row in inj["table"].values():
        assert len(row) == 5
        for c in row:
            assert c["ci95"][0] - 1e-9 <= c["delta"] <= c["ci95"][1] + 1e-9
    for prim, v in res["vectors"].items():
        assert len(v["heads"]) == 2 and v["norm"] > 0
        assert v["keyword"] == prim[0]  # byte-level: the first byte of the primitive's name
    assert inj["layer"] == 1 and inj["n_prompts"] == 4
    saved = json.loads((tmp_path / "run" / "algotrace_checkpoint.json").read_text())
    assert saved["injection"]["table"]["random"][0]["delta"] == inj["table"]["random"][0]["delta"]
    assert (tmp_path / "run" / "summary.json").is_file()


def test_checkpoint_bad_input(tmp_path):
    cfg = algotrace.get_config("tiny", checkpoint=str(tmp_path / "nope.gguf"))
    with pytest.raises(CheckpointError, match="does not exist"):
        algotrace.train_and_evaluate(cfg, tmp_path / "run")
    with pytest.raises(ConfigError, match="checkpoint_prompts must be >= 2"):
        algotrace.get_config("tiny", checkpoint="x", checkpoint_prompts=1)
