"""Judge-free sequence terms of ``fidia_jax.protein`` against hand computations and Biopython."""

import jax.numpy as jnp
import numpy as np
import pytest

from fidia_jax import protein as fp

TOK = {a: i for i, a in enumerate(fp.ALPHABET)}


def enc(s):
    return np.array([TOK[c] for c in s], np.int32)


# ------------------------------------------------------------------------------ sequence terms


def test_sequon_detection_hand_made():
    L = 12
    link1 = np.ones(L, bool)
    link1[-1:] = False
    link2 = np.ones(L, bool)
    link2[-2:] = False
    count = lambda s: int(fp.sequon_count(jnp.asarray(enc(s)), link1, link2))  # noqa: E731
    assert count("AAANASAAAAAA") == 1
    assert count("AAANATAAAAAA") == 1
    assert count("AAANPSAAAAAA") == 0  # X = P is not a sequon
    assert count("AAANAAAAAAAA") == 0
    assert count("NGTANVSANQTA") == 3
    assert count("AAAAAAAAAANA") == 0  # runs off the end
    assert count("AAAAAAAAAANS") == 0
    # A chain break between N and X/S voids the sequon.
    broken = link1.copy()
    broken[3] = False
    assert int(fp.sequon_count(jnp.asarray(enc("AAANASAAAAAA")), broken, link2)) == 0
    elsewhere = link1.copy()
    elsewhere[7] = False
    assert int(fp.sequon_count(jnp.asarray(enc("AAANASAAAAAA")), elsewhere, link2)) == 1
    broken2 = link2.copy()
    broken2[3] = False
    assert int(fp.sequon_count(jnp.asarray(enc("AAANASAAAAAA")), link1, broken2)) == 0


def test_homopolymer_and_low_complexity():
    starts = np.zeros(14, bool)
    starts[0] = True
    run = lambda s, st=starts: int(fp.homopolymer_max_run(jnp.asarray(enc(s)), st))  # noqa: E731
    assert run("ACDEFGHIKLMNPQ") == 1
    assert run("AKKKKKDEFGHIAA") == 5
    split = starts.copy()
    split[3] = True  # chain break inside the run of K
    assert run("AKKKKKDEFGHIAA", split) == 3
    lc = lambda s: float(fp.low_complexity_fraction(jnp.asarray(enc(s)), 12, 2.2))  # noqa: E731
    assert lc("A" * 20) == 1.0
    assert lc("ACDEFGHIKLMNPQRSTVWY") == 0.0  # every window has 12 distinct residues (3.58 bits)
    # 13-mer: windows 'AAAAAAAAAAAC' (0.41 bits) and 'AAAAAAAAAACD' (0.82 bits) -> both low.
    assert lc("AAAAAAAAAAACD") == 1.0
    # Windows of 6 x 2 residues: entropy exactly log2(6) = 2.585 > 2.2 -> not low.
    assert lc("AACCDDEEFFGGAACCDDEEFFGG") == 0.0
    assert float(fp.low_complexity_fraction(jnp.asarray(enc("AAAA")), 12, 2.2)) == 0.0


def test_sse_and_burial_scores_by_hand():
    seq = enc("EVGAK")
    sse = np.array([0, 1, 2, 0, 2])
    w = np.array([1, 1, 1, 0, 1], np.float32)
    # Creighton (1992): E helix 1.59, V strand 1.87, G turn 1.77, K turn 1.07 (A masked out)
    expected = (np.log(1.59) + np.log(1.87) + np.log(1.77) + np.log(1.07)) / 4
    assert float(fp.sse_score(jnp.asarray(seq), jnp.asarray(sse), jnp.asarray(w))) == pytest.approx(
        expected, rel=1e-5
    )
    # Burial: I buried (+4.5), K exposed (-3.9), L half-buried (b=0.5 -> 0).
    seq = enc("IKL")
    b = np.array([1.0, 0.0, 0.5], np.float32)
    expected = (4.5 / 4.5 * 1 + (-3.9 / 4.5) * -1 + 0.0) / 3
    assert float(fp.burial_score(jnp.asarray(seq), jnp.asarray(b), jnp.ones(3))) == pytest.approx(
        expected, rel=1e-5
    )
    # KD table equals Biopython's.
    from Bio.SeqUtils.ProtParamData import kd

    for a, v in kd.items():
        assert fp.HYDROPATHY_KD[TOK[a]] == pytest.approx(v)
