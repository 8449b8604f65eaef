"""The original's PSSM options (``--pssm_jsonl``, ``--pssm_multi``, ``--pssm_threshold``,
``--pssm_log_odds_flag``, ``--pssm_bias_flag``) and the original's ``probs/`` file (issue 27).

The reference is the original ``ProteinMPNN.sample`` step written out in numpy below: softmax
of the biased, tempered logits; ``(1 - multi * coef) p + multi * coef * pssm_bias``; times
``(log_odds > threshold) + 0.001``, renormalised; times ``1 - omit_AA_mask``, renormalised.
"""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fidia_jax import cli
from fidia_jax.errors import ConfigError, DataError
from fidia_jax.projects.proteinmpnn import run_sample
from fidia_jax.projects.proteinmpnn.constraints import pssm_arrays, read_pssm_jsonl
from fidia_jax.projects.proteinmpnn.design import sampling_probs
from fidia_jax.protein import ALPHABET

V = len(ALPHABET)


def _original_step(logits, T, omit_global, bias, coef, multi, pssm_bias, log_odds_mask, omit_res):
    """The original's sampling distribution at one position (its order of operations)."""
    z = logits / T - omit_global * 1e8 + bias / T
    p = np.exp(z - z.max())
    p /= p.sum()
    p = (1 - multi * coef) * p + multi * coef * pssm_bias
    pm = p * log_odds_mask + p * 0.001
    p = pm / pm.sum()
    pm = p * (1.0 - omit_res)
    return pm / pm.sum()


def _toy_pssm(length, rng):
    bias = rng.dirichlet(np.ones(V) * 0.5, size=length)
    return {
        "pssm_coef": rng.uniform(0, 1, length).round(3).tolist(),
        "pssm_bias": bias.tolist(),
        "pssm_log_odds": rng.normal(0, 2, (length, V)).round(3).tolist(),
    }


def test_pssm_arrays_follow_the_original(protein):
    rng = np.random.default_rng(0)
    entry = {"A": _toy_pssm(protein.length, rng)}
    mix, probs, scale = pssm_arrays(
        entry, protein, ["A"], multi=0.3, threshold=0.5, log_odds_flag=True, bias_flag=True
    )
    np.testing.assert_allclose(mix, 0.3 * np.asarray(entry["A"]["pssm_coef"]), rtol=1e-6)
    np.testing.assert_allclose(probs, entry["A"]["pssm_bias"], rtol=1e-6)
    lo = np.asarray(entry["A"]["pssm_log_odds"])
    np.testing.assert_allclose(scale, (lo > 0.5) + 0.001, rtol=1e-6)
    # the bias switch off: no mix; the log-odds switch off: scale 1; both off: nothing
    m2, _, s2 = pssm_arrays(entry, protein, ["A"], multi=0.3, bias_flag=False, log_odds_flag=True)
    assert not m2.any() and s2.min() >= 0.001
    _, _, s3 = pssm_arrays(entry, protein, ["A"], multi=0.3, bias_flag=True)
    assert (s3 == 1).all()
    assert pssm_arrays(entry, protein, ["A"], multi=0.3) is None
    # a visible (not designed) chain never reads its PSSM
    m4, _, s4 = pssm_arrays(entry, protein, [], multi=1.0, bias_flag=True, log_odds_flag=True)
    assert not m4.any() and (s4 == np.float32(1.001)).all()


@pytest.mark.parametrize(
    ("change", "error", "needle"),
    [
        ({"pssm_coef": [0.5] * 3}, DataError, "pssm_coef has shape (3,), expected (58,)"),
        ({"pssm_coef": [1.5] * 58}, DataError, "pssm_coef must lie in [0, 1]"),
        ({"pssm_bias": [[0.5] * V] * 58}, DataError, "pssm_bias rows must be probabilities"),
        ({"pssm_log_odds": [[float("nan")] * V] * 58}, DataError, "non-finite"),
        ({"multi": 1.2}, ConfigError, "--pssm-multi must lie in [0, 1], got 1.2"),
    ],
)
def test_pssm_errors(protein, change, error, needle):
    rec = _toy_pssm(protein.length, np.random.default_rng(1))
    multi = change.pop("multi", 0.5)
    rec.update(change)
    with pytest.raises(error) as e:
        pssm_arrays({"A": rec}, protein, ["A"], multi=multi, bias_flag=True, log_odds_flag=True)
    assert needle in str(e.value)


def test_read_pssm_jsonl_merges_lines_and_names_bad_ones(tmp_path):
    f = tmp_path / "pssm.jsonl"
    f.write_text(json.dumps({"a": {"A": {}}}) + "\n\n" + json.dumps({"b": {"B": {}}}) + "\n")
    assert sorted(read_pssm_jsonl(f)) == ["a", "b"]
    f.write_text(json.dumps({"a": {"A": {}}}) + "\n{oops\n")
    with pytest.raises(DataError, match="pssm.jsonl:2: not valid JSON"):
        read_pssm_jsonl(f)


def test_sampling_probs_equal_the_original_step():
    """Our mix (numpy, in ``sampling_probs``) against the original's step written out above."""
    rng = np.random.default_rng(2)
    n, length = 3, 5
    lp = jax.nn.log_softmax(rng.normal(0, 2, (n, length, V)), -1)
    T = np.array([0.1, 0.5, 1.0])
    bias = rng.normal(0, 1, (length, V))
    omit = "CX"
    omit_g = np.isin(np.array(list(ALPHABET)), list(omit)).astype(float)
    coef, multi = rng.uniform(0, 1, length), 0.4
    pb = rng.dirichlet(np.ones(V), size=length)
    lo_mask = (rng.normal(size=(length, V)) > 0).astype(float)
    omit_res = np.zeros((length, V))
    omit_res[1, ALPHABET.index("W")] = 1
    pssm = (multi * coef, pb, (lo_mask + 0.001) * (1 - omit_res))
    got = sampling_probs(np.asarray(lp), T, bias, omit, pssm, np.ones(length, bool))
    for i in range(n):
        for j in range(length):
            ref = _original_step(np.asarray(lp[i, j]), T[i], omit_g, bias[j], coef[j], multi,
                                 pb[j], lo_mask[j], omit_res[j])  # fmt: skip
            ref[omit_g > 0] = 0  # deviation: globally omitted letters stay at 0 after the mix
            ref /= ref.sum()
            np.testing.assert_allclose(got[i, j], ref, rtol=2e-5, atol=1e-7)


@pytest.mark.integration
def test_draw_frequencies_follow_the_mixed_distribution():
    """The sampler's Gumbel-max draw with a PSSM row against :func:`sampling_probs` (200k draws)."""
    from fidia_jax.models.proteinmpnn._sampling import _draw

    rng = np.random.default_rng(3)
    draws = 200_000
    logits = np.tile(rng.normal(0, 2, V), (draws, 1)).astype(np.float32)
    omit = np.zeros(V, bool)
    omit[ALPHABET.index("X")] = True
    mix = np.full(draws, 0.6, np.float32)
    pb = np.tile(rng.dirichlet(np.ones(V)), (draws, 1)).astype(np.float32)
    scale = np.tile((rng.uniform(size=V) > 0.5) + 0.001, (draws, 1)).astype(np.float32)
    noise = jax.random.gumbel(jax.random.key(0), (draws, V))
    tok = _draw(noise, jnp.asarray(logits), jnp.asarray(omit), 0.7, (mix, pb, scale))
    freq = np.bincount(np.asarray(tok), minlength=V) / draws
    lp = np.asarray(jax.nn.log_softmax(logits[:1], -1))[None]
    ref = sampling_probs(lp, [0.7], np.zeros(V), "X", (mix[:1], pb[:1], scale[:1]), [True])[0, 0]
    # binomial standard error at 200k draws is <= 1.2e-3; 5 sigma
    np.testing.assert_allclose(freq, ref, atol=5.6e-3)
    assert freq[ALPHABET.index("X")] == 0


def _pssm_file(path, name, length, top):
    """A PSSM whose bias puts all mass on ``top[i]`` and whose log-odds pass only ``top[i]``."""
    bias = np.zeros((length, V))
    bias[np.arange(length), [ALPHABET.index(a) for a in top]] = 1.0
    lo = np.where(bias > 0, 2.0, -2.0)
    rec = {"pssm_coef": [1.0] * length, "pssm_bias": bias.tolist(), "pssm_log_odds": lo.tolist()}
    path.write_text(json.dumps({name: {"A": rec}}) + "\n")
    return path


@pytest.mark.integration
def test_cli_pssm_bias_multi_one_samples_the_pssm(model, tmp_path):
    """``--pssm_multi 1 --pssm_bias_flag 1`` with a one-hot PSSM: every designed residue is the
    PSSM's letter (the model's choice at T = 0.1 agrees with it at < 60 % of them). With the
    original's flag names, ``--original-layout --save-probs`` writes ``probs/5PTI.npz``."""
    target = ("W" * 10 + "DEKR" * 12)[:58]
    f = _pssm_file(tmp_path / "pssm.jsonl", "5PTI", 58, target)
    out = tmp_path / "o"
    argv = ["sample", "--num-samples", "4", "--seed", "5", "--quiet", "--out", str(out),
            "--pssm_jsonl", str(f), "--pssm_multi", "1.0", "--pssm_bias_flag", "1",
            "--original-layout", "--save-probs"]  # fmt: skip
    assert cli.main(argv) == 0
    s = json.loads((out / "summary.json").read_text())
    assert all(x["sequence"] == target for x in s["samples"])
    assert s["inputs"]["pssm_multi"] == 1.0 and s["inputs"]["pssm_bias_flag"] is True
    z = np.load(out / "probs" / "5PTI.npz")
    assert sorted(z.files) == ["S", "chain_order", "log_probs", "mask", "probs"]
    assert z["probs"].shape == (4, 58, V) and z["mask"].shape == (1, 58)
    np.testing.assert_allclose(z["probs"].max(-1), 1.0, atol=1e-6)
    np.testing.assert_array_equal(z["S"][0], [ALPHABET.index(a) for a in target])
    # the model alone would not pick this sequence: not vacuous
    plain = run_sample(None, model=model, num_samples=4, seed=5, quiet=True, write=False)
    rec = np.mean(
        [[a == b for a, b in zip(x["sequence"], target, strict=True)] for x in plain["samples"]]
    )
    assert rec < 0.6
    # scores stay those of the unbiased model: -mean log_probs at S over the design mask
    tok = np.take_along_axis(z["log_probs"], z["S"][..., None], -1)[..., 0]
    np.testing.assert_allclose(
        -(tok * z["mask"]).sum(-1) / z["mask"].sum(), [x["score"] for x in s["samples"]], atol=1e-4
    )


@pytest.mark.integration
def test_pssm_log_odds_restricts_letters_and_omit_still_wins(model, protein, tmp_path):
    """``--pssm_log_odds_flag`` with ``threshold`` 0 passing one letter per residue: at T = 1 the
    others are down-weighted 1000x; a per-residue omission of that letter still wins there."""
    target = ("AG" * 29)[:58]
    f = _pssm_file(tmp_path / "pssm.jsonl", "5PTI", 58, target)
    kw = dict(model=model, num_samples=8, temperature=1.0, seed=7, quiet=True)
    s = run_sample(tmp_path / "o", pssm=str(f), pssm_log_odds_flag=True, pssm_threshold=0.0,
                   omit_by_res={"A": {"3": "A"}}, save_probs=True, probs_dir=tmp_path / "p",
                   **kw)  # fmt: skip
    got = np.array([list(x["sequence"]) for x in s["samples"]])
    hit = got == np.array(list(target))[None]
    rest = [i for i in range(58) if i != 2]
    assert hit[:, rest].mean() > 0.85
    assert not (got[:, 2] == "A").any()  # residue 3 (slot 2): its PSSM letter is omitted
    # the draws follow the distributions written to probs/5PTI.npz (recomputed in numpy from
    # the model's log-probs): expected hits within 4 binomial standard errors of the observed
    z = np.load(tmp_path / "p" / "5PTI.npz")
    tgt = np.array([ALPHABET.index(a) for a in target])
    expect = z["probs"][:, rest, tgt[rest]].mean()
    assert abs(expect - hit[:, rest].mean()) < 4 * np.sqrt(
        expect * (1 - expect) / hit[:, rest].size
    )
    assert z["probs"][:, 2, ALPHABET.index("A")].max() == 0
    kw["write"] = False
    plain = run_sample(None, **kw)
    assert (
        np.mean(
            [[a == b for a, b in zip(x["sequence"], target, strict=True)] for x in plain["samples"]]
        )
        < 0.3
    )
    # flags without a PSSM for this structure name
    other = _pssm_file(tmp_path / "other.jsonl", "1ABC", 58, target)
    with pytest.raises(DataError, match="no PSSM for structure '5PTI'"):
        run_sample(None, pssm=str(other), pssm_bias_flag=True, pssm_multi=0.5, **kw)


@pytest.mark.integration
def test_sample_without_pssm_is_unchanged_and_pssm_none_is_the_default(model, protein):
    """``pssm=None`` takes the plain draw: same sequences bit for bit as a call without it."""
    from fidia_jax.models import MPNNInputs, sample

    inputs = MPNNInputs.from_protein(protein)
    a = sample(model, jax.random.key(1), inputs, num_samples=2, temperature=0.1)
    b = sample(model, jax.random.key(1), inputs, num_samples=2, temperature=0.1, pssm=None)
    np.testing.assert_array_equal(np.asarray(a.sequences), np.asarray(b.sequences))
    with pytest.raises(ValueError, match=r"pssm mix must lie in \[0, 1\]"):
        sample(model, jax.random.key(1), inputs, num_samples=2,
               pssm=(np.full(58, 2.0), np.zeros((58, V)), np.ones((58, V))))  # fmt: skip


# ---- --conditional_probs_only / --conditional_probs_only_backbone / --unconditional_probs_only
@pytest.mark.integration
def test_conditional_probs_follow_the_original_orders(model, protein):
    """Row 0 at a few positions against ``log_probs`` in the order built by hand: the native
    sequence teacher-forced, position ``i`` decoded last (first with ``backbone_only``), the
    others in the order of ``|randn|`` of the row's key."""
    from fidia_jax.models import MPNNInputs, log_probs
    from fidia_jax.projects.proteinmpnn.design import probs_only_log_probs, unconditional_log_probs

    inputs = MPNNInputs.from_protein(protein)
    designed = np.ones(58, bool)
    designed[:5] = False  # e.g. fixed: rows stay 0
    key = jax.random.key(11)
    cond = probs_only_log_probs(model, inputs, designed, key, 2, "conditional", chunk=16)
    back = probs_only_log_probs(model, inputs, designed, key, 1, "conditional_backbone", chunk=16)
    assert cond.shape == (2, 58, V) and not cond[:, :5].any() and not back[:, :5].any()
    k0 = jax.random.split(key, 2)[0]
    randn = np.abs(np.asarray(jax.random.normal(k0, (58,), jnp.float32)))
    for i in (5, 30, 57):
        rest = [j for j in np.argsort(randn) if j != i]
        for order, ref in (([*rest, i], cond[0, i]), ([i, *rest], back[0, i])):
            x = MPNNInputs(*(np.asarray(a)[None] for a in inputs))
            lp = np.asarray(log_probs(model, x, np.asarray([order], np.int32)))[0, i]
            np.testing.assert_allclose(ref, lp, atol=5e-5)  # two programs' rounding (2.1e-5)
    # the other residues' tokens matter: conditional differs from the backbone-only case and
    # predicts the native residue better; backbone-only equals one unconditional pass
    assert np.abs(cond[0, 5:] - back[0, 5:]).max() > 0.5
    nat = protein.S[5:]
    assert cond[0, np.arange(5, 58), nat].mean() > back[0, np.arange(5, 58), nat].mean()
    unc = unconditional_log_probs(model, inputs)
    np.testing.assert_allclose(back[0, 5:], unc[5:], atol=5e-5)
    # the second row has its own order of the others: the deeper layers see other contexts
    assert np.abs(cond[0] - cond[1]).max() > 1e-4


@pytest.mark.integration
def test_cli_conditional_probs_only_writes_the_original_file(tmp_path):
    out = tmp_path / "o"
    argv = ["sample", "--conditional_probs_only", "1", "--num-samples", "2", "--fixed", "A1-5",
            "--quiet", "--out", str(out)]  # fmt: skip
    assert cli.main(argv) == 0
    z = np.load(out / "conditional_probs_only" / "5PTI.npz")
    assert sorted(z.files) == ["S", "design_mask", "log_p", "mask"]
    assert z["log_p"].shape == (2, 58, V)
    np.testing.assert_array_equal(z["design_mask"][:5], 0)
    np.testing.assert_allclose(np.exp(z["log_p"][:, 5:]).sum(-1), 1.0, atol=1e-5)
    assert not (out / "samples.fasta").exists()
    assert cli.main(["sample", "--conditional-probs-only-backbone", "--out", str(out)]) == 2
