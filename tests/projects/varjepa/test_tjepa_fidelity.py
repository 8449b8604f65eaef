"""Our T-JEPA baseline against the authors' code (github jose-melo/t-jepa @ 98dda99): the fixture
``tests/data/tjepa/tjepa_reference.{npz,json}`` made by ``tools/tjepa_make_fixture.py`` from
their ``MaskCollator`` (``src/mask.py``), their loss (``src/train.py`` with
``apply_masks_from_idx``) and their ``momentum_scheduler`` (``run.py``)."""

import json
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fidia_jax.projects.varjepa import configs, losses
from fidia_jax.projects.varjepa import model as models

DATA = pathlib.Path(__file__).resolve().parents[2] / "data" / "tjepa"
META = json.loads((DATA / "tjepa_reference.json").read_text())
REF = np.load(DATA / "tjepa_reference.npz")
CASES = list(enumerate(META["size_cases"]))


@pytest.mark.parametrize(("ci", "case"), CASES)
def test_mask_sizes_equal_the_authors_on_their_uniforms(ci, case):
    """Exact: the bounds, and each call's (context, target) sizes from the uniforms their
    torch generator (seeded with the call index) gave the collator."""
    f, lo_s, hi_s = case
    lo, hi = models.tjepa_mask_size_range(f, min_share=lo_s, max_share=hi_s)
    np.testing.assert_array_equal([lo, hi, lo, hi], REF[f"bounds_{ci}"])
    u = REF["uniforms"]  # (calls, 16): u_c, u_t of 8 candidate pairs per call
    n_c, n_t, ok = models.tjepa_mask_sizes(
        u[:, 0::2], u[:, 1::2], f, min_share=lo_s, max_share=hi_s
    )
    assert np.asarray(ok).all()
    np.testing.assert_array_equal(np.stack([n_c, n_t], 1), REF[f"sizes_{ci}"])


def test_authors_size_rule_redraws_and_rounds_half_to_even():
    """The fixture exercises a rejected pair and a half: the checks above are not vacuous."""
    sizes = REF["sizes_5"]  # F=5, sizes 1..3: (3, 3) does not fit and is redrawn
    u = REF["uniforms"][:, :2]
    first = 1 + np.round(np.float32(2) * u)  # the first candidate pair of every call
    assert np.any(first.sum(1) > 5) and (sizes.sum(1) <= 5).all()
    assert models.tjepa_mask_size_range(25, min_share=0.1, max_share=0.3) == (2, 8)  # 2.5, 7.5


def _authors_size_pmf(lo, hi, f):
    """P(n_c, n_t) of the authors' rule: ``lo + round((hi - lo) u)`` gives the end points half
    the mass of an inner size; pairs with ``n_c + n_t > F`` are redrawn."""
    k = hi - lo
    p1 = np.full(k + 1, 1.0 / k) if k else np.ones(1)
    if k:
        p1[[0, -1]] = 0.5 / k
    joint = np.outer(p1, p1)
    sizes = np.arange(lo, hi + 1)
    joint[sizes[:, None] + sizes[None, :] > f] = 0.0
    return joint / joint.sum()


#: Draws of our sampler per table: {case index: number of batches}; one compile each (seconds
#: each on CPU). F=5 with shares (0.2, 0.6): sizes 1..3 with half-weight end points, and the
#: pair (3, 3) redrawn.
OURS = {5: 1000}


@pytest.fixture(scope="module")
def our_masks():
    """``{ci: (context (N, 6, F), targets (N, 4, 6, F))}``: N batches of 6 rows, one jit each."""
    out = {}
    for ci, n in OURS.items():
        f, lo_s, hi_s = CASES[ci][1]
        draws = jax.lax.map(
            lambda k, f=f, lo_s=lo_s, hi_s=hi_s: models.multi_target_masks(
                k, 6, f, min_share=lo_s, max_share=hi_s
            ),
            jax.random.split(jax.random.key(7), n),
        )
        out[ci] = tuple(np.asarray(a) for a in draws)
    return out


@pytest.mark.parametrize("ci", sorted(OURS))
def test_our_sampler_has_the_authors_size_distribution(ci, our_masks):
    """Our JAX draws of the sizes against the exact distribution of the authors' rule (the rule
    itself is checked above on their uniforms). 1000 draws: each cell within 4.5 binomial
    standard deviations (a false alarm has probability < 1e-4 per cell)."""
    f, lo_s, hi_s = CASES[ci][1]
    ctx, tgts = our_masks[ci]
    n = len(ctx)
    n_c, n_t = ctx[:, 0].sum(1), tgts[:, 0, 0].sum(1)
    lo, hi = models.tjepa_mask_size_range(f, min_share=lo_s, max_share=hi_s)
    p = _authors_size_pmf(lo, hi, f)
    emp = np.zeros_like(p)
    np.add.at(emp, (n_c - lo, n_t - lo), 1.0 / n)
    np.testing.assert_array_less(np.abs(emp - p), 4.5 * np.sqrt(p * (1 - p) / n) + 1e-12)
    # the authors' end points get half the mass of an inner size (not a flat distribution)
    assert p.sum(1)[0] == pytest.approx(p.sum(1)[1] / 2, rel=1e-12)


def test_mask_structure_matches_the_authors(our_masks):
    """Their masks (numpy's global RNG, not alignable with ours) and ours obey the same rules:
    one size per batch, targets never in the context, target masks separate draws that may
    overlap each other (seen in both)."""
    overlap = {"authors": False, "ours": False}
    for ci, (f, _, _) in CASES:
        sizes = REF[f"sizes_{ci}"]
        theirs = [(REF[f"context_{ci}"][c], REF[f"targets_{ci}"][c]) for c in range(8)]
        ours = [(our_masks[ci][0][c], our_masks[ci][1][c]) for c in range(8)] if ci in OURS else []
        for who, masks in (("authors", theirs), ("ours", ours)):
            for c, (ctx, tgt) in enumerate(masks):
                assert tgt.shape == (META["num_preds"], 6, f)
                n_c, n_t = set(ctx.sum(1)), set(tgt.sum(2).ravel())
                assert len(n_c) == 1 and len(n_t) == 1, who
                if who == "authors":
                    assert (n_c.pop(), n_t.pop()) == tuple(sizes[c])
                assert not np.any(ctx[None] & tgt), who
                overlap[who] |= bool(np.any(tgt[0] & tgt[1]))
    assert overlap == {"authors": True, "ours": True}


def test_loss_reduction_equals_the_authors_mse():
    """Their transformer path: ``MSELoss()(z, apply_masks_from_idx(h, masks_pred))``, z of shape
    ``(M B, n_t, D)``. Ours: per mask the mean over its target tokens and the D channels, then
    the mean over masks. Reference: their loss in float64 on the stored float32 tensors. Ours runs
    in float32 over 360 squared errors: the worst-case relative error of a float32 sum of n
    positive terms is about n 2^-24 = 2.1e-5."""
    s = META["loss_shape"]
    b, f, m = s["B"], s["F"], s["M"]
    h_full, idx, z = REF["loss_h_full"], REF["loss_masks_pred"], REF["loss_z"]
    per_mask = []
    for k in range(m):
        pred = np.zeros_like(h_full)
        mask = np.zeros((b, f), bool)
        for r in range(b):
            pred[r, idx[k, r]] = z[k * b + r]
            mask[r, idx[k, r]] = True
        per_mask.append(losses.tjepa_latent_loss(jnp.asarray(pred), jnp.asarray(h_full), mask))
    got = float(sum(per_mask) / m)
    assert got == pytest.approx(float(REF["loss_value_f64"]), rel=2.5e-5)
    assert float(REF["loss_value_f32"]) == pytest.approx(float(REF["loss_value_f64"]), rel=2.5e-5)
    # the I-JEPA LayerNorm of the targets (normalize=True, not the authors') changes the value
    normed = losses.tjepa_latent_loss(jnp.asarray(pred), jnp.asarray(h_full), mask, normalize=True)
    assert float(normed) != pytest.approx(float(per_mask[-1]), rel=1e-3)


@pytest.mark.parametrize("ei", range(4))
def test_ema_ramp_equals_the_authors_schedule(ei):
    """Their generator's values, exactly in float64 (the same operations in the same order);
    float32 (the training step's dtype) to 1 ulp of 1.0."""
    start, end, ipe, epochs, scale = META["ema_cases"][ei]
    ref = REF[f"ema_{ei}"]
    total = ipe * epochs * scale
    assert len(ref) == int(total) + 1
    t = np.arange(len(ref), dtype=np.float64)
    np.testing.assert_array_equal(losses.ema_momentum(t, start, end, total), ref)
    got32 = losses.ema_momentum(jnp.asarray(t, jnp.float32), start, end, total)
    np.testing.assert_allclose(np.asarray(got32), ref, rtol=0, atol=1.2e-7)
    # our earlier reading is the authors' schedule one step ahead
    shifted = losses.ema_momentum(t[:-1], start, end, total, ramp="reach_end")
    np.testing.assert_allclose(shifted, ref[1:], rtol=1e-15)
    with pytest.raises(ValueError, match="ramp"):
        losses.ema_momentum(t, start, end, total, ramp="cosine")


def test_defaults_follow_the_authors():
    d = META["authors_defaults"]
    c = configs.VarJepaConfig()
    assert (c.ema_decay, c.ema_end) == (d["model_ema_start"], d["model_ema_end"])
    assert (c.min_share, c.max_share) == (d["mask_min_ctx_share"], d["mask_max_ctx_share"])
    assert (c.min_share, c.max_share) == (d["mask_min_trgt_share"], d["mask_max_trgt_share"])
    assert c.n_target_masks == d["mask_num_preds"] and d["mask_num_encs"] == 1
    assert d["pred_type"] == "transformer" and d["exp_ipe_scale"] == 1.0
    assert (c.ema_ramp, c.mask_size_rule, c.tjepa_views) == ("authors", "authors", "authors")
    assert c.normalize_targets is False
    with pytest.raises(ValueError, match="size_rule"):
        models.multi_target_masks(jax.random.key(0), 2, 10, size_rule="flat")
    with pytest.raises(ValueError, match="F=2"):  # round(0.4) = 0: the authors assert min > 0
        models.multi_target_masks(jax.random.key(0), 2, 2)
