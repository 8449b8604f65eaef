"""Sequence constraints of ``fidia-jax sample`` / ``run_sample``: ``--omit-aa``, ``--bias-aa``,
``--bias-by-res`` (issue 10 item 1)."""

from __future__ import annotations

import json

import jax
import numpy as np
import pytest

from fidia_jax import cli
from fidia_jax.errors import ConfigError, DataError
from fidia_jax.projects.proteinmpnn import run_sample
from fidia_jax.projects.proteinmpnn.design import load_bias_by_res, parse_bias_aa, parse_omit_aas
from fidia_jax.protein import ALPHABET

N = 64  # one compiled sampler shape (L = 58, N = 64) for every test here


def _run(model, **kw):
    kw.setdefault("temperature", 1.0)
    s = run_sample(None, model=model, num_samples=N, seed=7, quiet=True, write=False, **kw)
    return np.array([list(x["sequence"]) for x in s["samples"]])


@pytest.fixture(scope="module")
def baseline(model):
    return _run(model)


def test_omitted_letters_never_sampled(model, baseline):
    letters = "CEKL"
    for a in letters:  # not vacuous: at T = 1 each of them appears without the constraint
        assert (baseline == a).sum() > 0, a
    got = _run(model, omit_aas=letters)
    assert got.shape == (N, 58)
    assert not np.isin(got, list(letters + "X")).any()


def test_global_bias_makes_w_dominate(model, baseline):
    got = _run(model, bias_aa="W:20,C:-2", temperature=0.1)
    assert (baseline == "W").mean() < 0.1
    assert (got == "W").mean() > 0.95  # logits + 20 on W: W wins almost everywhere


def test_per_residue_bias_only_affects_its_residue(model, protein, tmp_path):
    """Bias on A12 only: A12 is always W; every position decoded before A12 (same key, so same
    order and same random draws) is exactly the unbiased sample."""
    from fidia_jax.models import MPNNInputs, sample

    path = tmp_path / "bias.json"
    path.write_text(json.dumps({"A": {"12": {"W": 40.0}}}))
    got = _run(model, bias_by_res=path)
    assert (got[:, 11] == "W").all()
    table = load_bias_by_res(path, protein)
    assert table.shape == (58, 21) and table[11, ALPHABET.index("W")] == 40.0
    assert np.count_nonzero(table) == 1

    inputs = MPNNInputs.from_protein(protein)
    kw = dict(num_samples=N, temperature=1.0)
    plain = sample(model, jax.random.key(7), inputs, bias=np.zeros((58, 21), np.float32), **kw)
    biased = sample(model, jax.random.key(7), inputs, bias=table, **kw)
    order = np.asarray(plain.decoding_order)
    np.testing.assert_array_equal(order, np.asarray(biased.decoding_order))
    s0, s1 = np.asarray(plain.sequences), np.asarray(biased.sequences)
    assert (s1[:, 11] == ALPHABET.index("W")).all() and (s0[:, 11] != ALPHABET.index("W")).any()
    step = np.argmax(order == 11, axis=1)  # decoding step of A12 in each sample
    for i in range(N):
        before = order[i, : step[i]]
        np.testing.assert_array_equal(s1[i, before], s0[i, before])


def test_parsers():
    assert (
        parse_omit_aas("CX") == "CX" and parse_omit_aas("c") == "CX" and parse_omit_aas(None) == "X"
    )
    b = parse_bias_aa("W:1.5,C:-2")
    want = np.zeros(21, np.float32)
    want[ALPHABET.index("W")], want[ALPHABET.index("C")] = 1.5, -2.0
    np.testing.assert_array_equal(b, want)
    np.testing.assert_array_equal(parse_bias_aa({"W": 1.5, "C": -2}), want)
    with pytest.raises(ConfigError, match=r"\['B'\] not in the ProteinMPNN alphabet"):
        parse_omit_aas("CB")
    with pytest.raises(ConfigError, match="omits every amino acid"):
        parse_omit_aas(ALPHABET)
    with pytest.raises(ConfigError, match=r"\['Z'\]"):
        parse_bias_aa("W:1,Z:2")
    with pytest.raises(ConfigError, match="'W1.5' is not LETTER:VALUE"):
        parse_bias_aa("W1.5")
    with pytest.raises(ConfigError, match="not finite"):
        parse_bias_aa("W:inf")


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        ({"B": {"12": {"W": 1}}}, "chain 'B' not among loaded chains ['A']"),
        ({"A": {"99": {"W": 1}}}, "residue A99 not in chain A"),
        ({"A": {"12": {"J": 1}}}, "residue A12: letter 'J' not in the ProteinMPNN alphabet"),
        ({"A": {"12": {"W": "big"}}}, "is not a number"),
    ],
)
def test_bias_by_res_errors(spec, needle, protein):
    with pytest.raises(DataError) as e:
        load_bias_by_res(spec, protein)
    assert needle in str(e.value)


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--omit-aa", "CJ"], "--omit-aa: letter(s) ['J'] not in the ProteinMPNN alphabet"),
        (["--bias-aa", "W:2,O:1"], "--bias-aa: letter(s) ['O']"),
        (["--bias-by-res", "/nonexistent/b.json"], "b.json: per-residue bias file not found"),
    ],
)
def test_cli_constraint_errors_exit_2(extra, needle, tmp_path, capsys):
    out = tmp_path / "out"
    assert cli.main(["sample", "--num-samples", "2", "--out", str(out), *extra]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and err[0].startswith("fidia-jax: error: ") and needle in err[0]
    assert not out.exists()
