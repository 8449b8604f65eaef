"""DyCon's control: the bias changes exactly the reflection logits, by -lambda max(0, tau - d_hat)
(one-sided, the default) or lambda (d_hat - tau) with the opposite push on the end token (the
two-sided ablation)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from fidia_jax import models
from fidia_jax.projects.dycon import control, task

V = task.DyconVocab(base=3, max_operands=3, max_redundant=1)


@pytest.fixture(scope="module")
def model():
    cfg = models.LlamaConfig(
        vocab_size=V.size,
        dim=16,
        n_layers=2,
        n_heads=2,
        n_kv_heads=1,
        hidden_dim=32,
        max_seq_len=V.max_len(),
    )
    return models.Llama(cfg, rngs=nnx.Rngs(1))


def _control(model, lam, tau, end_scale=0.5, seed=0, layer=1, form="two_sided"):
    rng = np.random.default_rng(seed)
    return control.dycon_control(
        model,
        rng.normal(size=16) * 0.3,
        0.4,
        layer=layer,
        lam=lam,
        tau=tau,
        boundary_tokens=V.boundary_tokens,
        reflect_tokens=(V.WAIT,),
        end_token=V.END_THINK,
        end_scale=end_scale,
        form=form,
    )


def _expected_bias(model, ctl, hidden, lam, tau, end_scale, form="two_sided"):
    """numpy float64 brute force of the documented formula."""
    emb = np.asarray(model.tok_embeddings.embedding[...], np.float64)
    out = np.zeros((hidden.shape[0], V.size))
    for b in range(hidden.shape[0]):
        tok = [
            t for t in range(V.size) if np.array_equal(emb[t], np.asarray(hidden[b, 0], np.float64))
        ]
        if tok and tok[0] in V.boundary_tokens:
            dhat = np.clip(
                np.asarray(hidden[b, 1], np.float64) @ np.asarray(ctl.coef, np.float64) + 0.4, 0, 1
            )
            if form == "one_sided":
                out[b, V.WAIT] -= lam * max(0.0, tau - dhat)
            else:
                out[b, V.WAIT] += lam * (dhat - tau)
                out[b, V.END_THINK] -= end_scale * lam * (dhat - tau)
    return out


def _hidden(model):
    emb = model.tok_embeddings.embedding[...]
    toks = jnp.asarray([V.EQ, V.SEP, V.WAIT, 9, V.SEP, V.END_THINK])
    return jnp.concatenate(
        [emb[toks][:, None], jax.random.normal(jax.random.key(0), (6, 2, 16))], axis=1
    )


def test_one_sided_default_only_suppresses_reflection(model):
    """The default form: -lambda max(0, tau - d_hat) on "wait" at boundaries, never a raise,
    the end token untouched."""
    hidden = _hidden(model)
    for tau in (0.0, 0.3, 0.7, 1.0):
        ctl = _control(model, lam=3.0, tau=tau, end_scale=None, form="one_sided")
        bias = np.asarray(control.dycon_logit_bias(hidden, jnp.int32(0), ctl))
        want = _expected_bias(model, ctl, np.asarray(hidden), 3.0, tau, 0.0, form="one_sided")
        np.testing.assert_allclose(bias, want, atol=1e-5)
        assert np.all(bias <= 0) and np.count_nonzero(bias[:, V.END_THINK]) == 0
    # tau = 1 is -lambda (1 - d_hat); tau = 0 never changes anything
    dhat = np.clip(np.asarray(hidden[:, 1]) @ np.asarray(ctl.coef) + 0.4, 0, 1)
    np.testing.assert_allclose(bias[[0, 1, 4], V.WAIT], -3.0 * (1 - dhat[[0, 1, 4]]), atol=1e-5)
    zero = _control(model, lam=3.0, tau=0.0, end_scale=None, form="one_sided")
    assert not np.any(np.asarray(control.dycon_logit_bias(hidden, jnp.int32(0), zero)))
    # the static baseline uses the same form: a fixed reading above tau changes nothing
    ctl = _control(model, lam=3.0, tau=0.5, end_scale=None, form="one_sided")
    hi = control.dycon_static_bias(hidden, jnp.int32(0), ctl._replace(fixed_dhat=jnp.float32(0.9)))
    lo = control.dycon_static_bias(hidden, jnp.int32(0), ctl._replace(fixed_dhat=jnp.float32(0.1)))
    assert not np.any(np.asarray(hi))
    np.testing.assert_allclose(np.asarray(lo)[[0, 1, 4], V.WAIT], -3.0 * 0.4, rtol=1e-6)
    # the default of dycon_control is this form
    default = control.dycon_control(
        model, np.asarray(ctl.coef), 0.4, layer=1, lam=3.0, tau=0.5,
        boundary_tokens=V.boundary_tokens, reflect_tokens=(V.WAIT,), end_token=V.END_THINK,
    )  # fmt: skip
    assert float(default.one_sided) == 1.0 and float(default.end_scale) == 0.0
    with pytest.raises(ValueError, match="one-sided form does not push the end token"):
        _control(model, 1.0, 0.5, end_scale=0.5, form="one_sided")
    with pytest.raises(ValueError, match="form must be one of"):
        _control(model, 1.0, 0.5, form="both")


def test_two_sided_bias_is_lambda_dhat_minus_tau_on_reflections_only(model):
    ctl = _control(model, lam=3.0, tau=0.3)
    emb = model.tok_embeddings.embedding[...]
    toks = jnp.asarray([V.EQ, V.SEP, V.WAIT, 9, V.SEP, V.END_THINK])
    hidden = jnp.concatenate(
        [emb[toks][:, None], jax.random.normal(jax.random.key(0), (6, 2, 16))], axis=1
    )
    bias = np.asarray(control.dycon_logit_bias(hidden, jnp.int32(0), ctl))
    want = _expected_bias(model, ctl, np.asarray(hidden), 3.0, 0.3, 0.5)
    np.testing.assert_allclose(bias, want, atol=1e-5)
    assert np.count_nonzero(bias[[2, 3, 5]]) == 0  # not at a boundary: no change
    assert (
        np.count_nonzero(
            bias[[0, 1, 4]][:, [t for t in range(V.size) if t not in (V.WAIT, V.END_THINK)]]
        )
        == 0
    )
    # static: the fixed reading replaces the probe
    s = np.asarray(
        control.dycon_static_bias(
            hidden, jnp.int32(0), ctl._replace(fixed_dhat=jnp.full((6,), 0.9))
        )
    )
    np.testing.assert_allclose(s[[0, 1, 4], V.WAIT], 3.0 * (0.9 - 0.3), rtol=1e-6)
    np.testing.assert_allclose(s[[0, 1, 4], V.END_THINK], -0.5 * 3.0 * (0.9 - 0.3), rtol=1e-6)
    # NoWait
    mask = np.zeros(V.size, np.float32)
    mask[V.WAIT] = 1
    ban = np.asarray(control.ban_tokens_bias(hidden, jnp.int32(0), jnp.asarray(mask)))
    assert np.all(np.isneginf(ban[:, V.WAIT])) and np.count_nonzero(np.delete(ban, V.WAIT, 1)) == 0


def test_sampler_logits_brute_force_and_lambda_zero_is_baseline(model):
    batch = task.make_dycon_task(6, vocab=V, seed=2, num_operands=[1, 2, 3, 3, 2, 1])
    prompts, lengths = batch.prompts(V.max_operands + 2)
    new = 24
    kw = dict(max_new_tokens=new, lengths=jnp.asarray(lengths), stop_token=None)
    base = models.sample_llama(model, jnp.asarray(prompts), **kw)
    off = models.sample_llama(
        model,
        jnp.asarray(prompts),
        logit_bias=control.dycon_logit_bias,
        logit_bias_args=_control(model, 0.0, 0.5),
        **kw,
    )
    np.testing.assert_array_equal(off.tokens, base.tokens)  # greedy, lambda = 0: token for token
    lam, tau = 6.0, 0.2
    on = models.sample_llama(
        model,
        jnp.asarray(prompts),
        logit_bias=control.dycon_logit_bias,
        logit_bias_args=_control(model, lam, tau),
        **kw,
    )
    # brute force: full forward pass over prompt + generated tokens, formula applied in numpy
    ctl = _control(model, lam, tau)
    seqs = np.zeros((6, prompts.shape[1] + new), np.int32)  # prompt + generated, right-padded
    for b in range(6):
        seqs[b, : lengths[b] + new] = np.concatenate(
            [prompts[b, : lengths[b]], np.asarray(on.tokens[b])]
        )
    logits, cap = model.inspect(jnp.asarray(seqs), capture=("resid_pre", "resid_post"))
    hid = np.concatenate([cap["resid_pre"][:1], cap["resid_post"]], 0)  # (K, B, T', C)
    for b in range(6):
        pos = np.arange(lengths[b] - 1, lengths[b] - 1 + new)
        hidden = np.moveaxis(hid[:, b, pos], 0, 1)
        want = np.asarray(logits[b, pos], np.float64) + _expected_bias(
            model, ctl, hidden, lam, tau, 0.5
        )
        np.testing.assert_allclose(on.logits[b], want, atol=2e-4)
    assert np.any(np.asarray(on.logits) != np.asarray(base.logits))


def test_invalid_control_raises(model):
    with pytest.raises(ValueError, match="lam"):
        _control(model, -1.0, 0.5)
    with pytest.raises(ValueError, match="lam"):
        _control(model, float("nan"), 0.5)
    with pytest.raises(ValueError, match="tau"):
        _control(model, 1.0, 1.5)
    with pytest.raises(ValueError, match="layer"):
        _control(model, 1.0, 0.5, layer=3)  # 2 blocks: hidden-stack indices 0..2
    with pytest.raises(ValueError, match="reflect_tokens"):
        control.dycon_control(
            model,
            np.zeros(16),
            0.0,
            layer=0,
            lam=1.0,
            tau=0.5,
            boundary_tokens=(V.SEP,),
            reflect_tokens=(V.size,),
        )
    with pytest.raises(ValueError, match="coef"):
        control.dycon_control(
            model,
            np.zeros(15),
            0.0,
            layer=0,
            lam=1.0,
            tau=0.5,
            boundary_tokens=(V.SEP,),
            reflect_tokens=(V.WAIT,),
        )


def test_boundaries_recognised_under_an_embedding_scale():
    """Gemma multiplies token embeddings by sqrt(dim) before block 0; the sampler's hidden stack
    holds the scaled vector, so the control must match boundaries on it (it read nothing on a
    Gemma checkpoint before). With coef = 0 and tau = 1 the bias is exactly -lambda on "wait"
    at the boundary positions, 0 everywhere else."""
    cfg = models.LlamaConfig(
        vocab_size=V.size, dim=16, n_layers=2, n_heads=2, n_kv_heads=1, hidden_dim=32,
        max_seq_len=V.max_len(), embed_scale=4.0,
    )  # fmt: skip
    m = models.Llama(cfg, rngs=nnx.Rngs(2))
    toks = jnp.asarray([[V.EQ, V.SEP, V.WAIT, 9, V.SEP, V.END_THINK]])
    _, cap = m.inspect(toks, capture=("resid_pre", "resid_post"))
    hidden = jnp.concatenate([cap["resid_pre"][:1], cap["resid_post"]], 0)[:, 0]  # (K, T, C)
    hidden = jnp.moveaxis(hidden, 0, 1)  # (T, K, C): one row per position
    ctl = control.dycon_control(
        m, np.zeros(16), 0.0, layer=1, lam=2.0, tau=1.0, boundary_tokens=V.boundary_tokens,
        reflect_tokens=(V.WAIT,),
    )  # fmt: skip
    bias = np.asarray(control.dycon_logit_bias(hidden, jnp.int32(0), ctl))
    want = np.zeros_like(bias)
    want[[0, 1, 4], V.WAIT] = -2.0
    np.testing.assert_array_equal(bias, want)
