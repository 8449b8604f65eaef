"""HIT-VAR networks: prefixes decode to their scale, block-causal next-scale prediction, ConvSR."""

import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from fidia_jax import layers, models
from fidia_jax.errors import DataError
from fidia_jax.projects.hitvar import model as hv
from fidia_jax.projects.hitvar.schedule import hierarchical_scale_schedule

SCH = hierarchical_scale_schedule(4, 4, (1, 2, 4))  # LR 4x4, HR 16x16, latent 4x4


@pytest.fixture(scope="module")
def run():
    tok = models.init_without_compile(
        lambda: hv.HitVarTokenizer(
            SCH, channels=8, latent_dim=4, codebook_size=8, res_blocks=1, rngs=nnx.Rngs(0)
        ),
        draw=hv.hitvar_draw(),
        seed=0,
    )
    plain = models.init_without_compile(
        lambda: hv.HitVarTokenizer(
            SCH,
            channels=8,
            latent_dim=4,
            codebook_size=8,
            res_blocks=1,
            hierarchical=False,
            rngs=nnx.Rngs(0),
        ),
        draw=hv.hitvar_draw(),
        seed=0,
    )
    var = models.init_without_compile(
        lambda: hv.NextScaleTransformer(
            SCH, latent_dim=4, codebook_size=8, dim=8, depth=1, heads=2, rngs=nnx.Rngs(1)
        ),
        draw=hv.hitvar_draw(),
        seed=1,
    )
    rng = np.random.default_rng(0)
    # the numpy init zeroes the decoder's heads (output = flat grey): randomise them so that
    # the decoded images depend on the tokens
    for t in (tok, plain):
        for head in t.heads.values():
            np.testing.assert_array_equal(np.asarray(head.kernel[...]), 0.0)
            head.kernel[...] = jnp.asarray(rng.normal(size=head.kernel.shape), jnp.float32)
    hr = jnp.asarray(rng.uniform(size=(2, 16, 16, 3)).astype(np.float32))
    lr = hv.bicubic_resize(hr, 4)

    @nnx.jit
    def go(tok, plain, var, hr, lr):
        codes, prefixes, _ = tok.quantize(tok.encode(hr))
        out = {"codes": codes, "prefixes": prefixes}
        out["dec"] = {m: tok.decode_tokens(codes, m) for m in SCH.scales}
        out["dec_latent"] = {
            m: tok.decode_latent(prefixes[SCH.prefix_length(m) - 1], m) for m in SCH.scales
        }
        # other tokens (each code moved by one): the decoder reads them
        out["dec_other"] = tok.decode_tokens(
            [(c + 1) % tok.codebook_size for c in codes], max(SCH.scales)
        )
        out["plain"] = {m: plain.decode_tokens(codes, m) for m in SCH.scales}
        x = hv.next_scale_inputs(prefixes, SCH.grids)
        ls = hv.lr_scale_term(codes, tok.codebook[...])
        out["inputs"], out["lr_scale"], out["logits"] = x, ls, var(x, lr, ls)
        # perturb the inputs (and the LR term) of the last scale: earlier logits must not move
        off = SCH.offsets[-2]
        out["logits_perturbed"] = var(x.at[:, off:].add(5.0), lr, ls.at[:, off:].add(5.0))
        out["logits_no_term"] = var(x, lr)
        out["logits_other_lr"] = var(x, 1.0 - lr, ls)
        gen_codes, gen_prefixes = hv.generate_tokens(var, tok.codebook[...], lr, ls)
        out["gen_codes"] = gen_codes
        out["gen_logits"] = var(hv.next_scale_inputs(gen_prefixes, SCH.grids), lr, ls)
        return out

    return go(tok, plain, var, hr, lr), (tok, plain, var, hr, lr)


def test_every_prefix_decodes_to_its_scale(run):
    out, _ = run
    assert SCH.prefixes == (1, 2, 2, 3)
    for m in SCH.scales:
        assert out["dec"][m].shape == (2, 4 * m, 4 * m, 3)
        # decoding the tokens = decoding the truncated residual sum of the quantiser
        np.testing.assert_allclose(out["dec"][m], out["dec_latent"][m], atol=1e-5)
    # the decoder reads the tokens only: other tokens, another image
    assert np.abs(np.asarray(out["dec_other"]) - np.asarray(out["dec"][4])).max() > 1e-2
    # the plain tokenizer reads every scale and resizes its x4 output down
    for m in (1, 2, 3):
        np.testing.assert_allclose(
            out["plain"][m], hv.bicubic_resize(out["plain"][4], 4 * m), atol=1e-5
        )


def test_next_scale_inputs_and_block_causality(run):
    out, _ = run
    x, off = np.asarray(out["inputs"]), SCH.offsets
    np.testing.assert_array_equal(x[:, :1], 0.0)  # scale 1 knows nothing yet
    np.testing.assert_allclose(
        x[:, off[2] : off[3]].reshape(2, 4, 4, 4), out["prefixes"][1], atol=1e-6
    )  # 4x4 = latent
    np.testing.assert_allclose(
        x[:, off[1] : off[2]].reshape(2, 2, 2, 4),
        layers.resize_grid(out["prefixes"][0], 2),
        atol=1e-6,
    )
    lo, lp = np.asarray(out["logits"]), np.asarray(out["logits_perturbed"])
    np.testing.assert_allclose(lo[:, : off[-2]], lp[:, : off[-2]], atol=1e-5)
    assert np.abs(lo[:, off[-2] :] - lp[:, off[-2] :]).max() > 1e-3
    # every scale sees the LR start tokens; the per-scale LR term moves the logits
    other = np.asarray(out["logits_other_lr"])
    spans = zip(off[:-1], off[1:], strict=True)
    assert min(np.abs(lo[:, a:b] - other[:, a:b]).max() for a, b in spans) > 1e-4
    assert np.abs(lo - np.asarray(out["logits_no_term"])).max() > 1e-4
    # the LR term is the codes' embeddings, scale by scale
    _, (tok, *_rest) = run
    cb = np.asarray(tok.codebook[...])
    flat = np.concatenate([np.asarray(c).reshape(2, -1) for c in out["codes"]], axis=1)
    np.testing.assert_allclose(out["lr_scale"], cb[flat], atol=1e-6)


def test_start_tokens_are_level_zero():
    var = nnx.eval_shape(
        lambda: hv.NextScaleTransformer(
            SCH, latent_dim=4, codebook_size=8, dim=8, heads=2, context_size=2,
            rngs=nnx.Rngs(0),
        )
    )  # fmt: skip
    mask = var.mask()
    c, t = 4, SCH.num_tokens
    assert mask.shape == (c + t, c + t)
    assert mask[:, :c].all()  # every position sees the LR start tokens
    # the start tokens and scale 1 see each other and nothing later
    assert mask[: c + 1, : c + 1].all() and not mask[: c + 1, c + 1 :].any()
    np.testing.assert_array_equal(mask[c:, c:], SCH.mask())


def test_argmax_generation_is_consistent_with_teacher_forcing(run):
    out, _ = run
    flat = np.concatenate([np.asarray(c).reshape(2, -1) for c in out["gen_codes"]], axis=1)
    np.testing.assert_array_equal(flat, np.argmax(np.asarray(out["gen_logits"]), -1))


def test_bad_inputs_name_the_problem(run):
    _, (tok, _, var, hr, lr) = run
    with pytest.raises(ValueError, match="hr must have rank 4"):
        tok.encode(hr[0])
    with pytest.raises(ValueError, match=r"fhat must be \(B, 4, 4, 4\)"):
        tok.decode_latent(jnp.zeros((2, 4, 4, 3)), 4)
    with pytest.raises(ValueError, match="scale must be one of"):
        tok.decode_latent(jnp.zeros((2, 4, 4, 4)), 5)
    with pytest.raises(ValueError, match=r"lr must be \(B, 4, 4, 3\)"):
        var(jnp.zeros((2, SCH.num_tokens, 4)), hr)
    with pytest.raises(ValueError, match="lr_scale must have the inputs' shape"):
        var(jnp.zeros((2, SCH.num_tokens, 4)), lr, jnp.zeros((2, 3, 4)))
    # numpy init: LeCun-normal kernels (std 1/sqrt(fan_in)), zero biases, one codebook copy
    k = np.asarray(var.head.kernel[...])
    assert abs(k.std() * np.sqrt(k.shape[0]) - 1.0) < 0.3
    np.testing.assert_array_equal(np.asarray(var.head.bias[...]), 0.0)
    np.testing.assert_array_equal(np.asarray(tok.codebook[...]), np.asarray(tok.embed_sum[...]))
    with pytest.raises(ValueError, match="power of two"):
        nnx.eval_shape(
            lambda: hv.HitVarTokenizer(
                hierarchical_scale_schedule(4, 3, (1, 2, 4), 4), rngs=nnx.Rngs(0)
            )
        )
    with pytest.raises(ValueError, match="temperature"):
        hv.generate_tokens(var, tok.codebook[...], lr, temperature=1.0)
    # issue 41: a NaN in the low-resolution input is refused (it became token 0 silently)
    with pytest.raises(DataError, match="lr has 1 non-finite"):
        hv.generate_tokens(var, tok.codebook[...], jnp.asarray(lr).at[0, 0, 0, 0].set(jnp.nan))


def test_conv_sr_parameter_count_closed_form():
    for w in (4, 13, 40):
        net = nnx.eval_shape(lambda w=w: hv.ConvSR(width=w, blocks=2, rngs=nnx.Rngs(0)))
        n = models.count_params(net)
        assert hv.conv_sr_width_for_params(n, blocks=2) == w
