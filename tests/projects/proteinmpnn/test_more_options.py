"""``--omit-aa-by-res``, ``score --tie/--homo-oligomer`` and ``--save-probs`` /
``--unconditional-probs`` of ``fidia-jax sample | score`` (issue 10 items 1, 2 and 5)."""

from __future__ import annotations

import numpy as np
import pytest

from fidia_jax import cli
from fidia_jax.errors import DataError
from fidia_jax.projects.proteinmpnn import run_sample, run_score
from fidia_jax.projects.proteinmpnn.design import load_omit_by_res, unconditional_log_probs
from fidia_jax.protein import ALPHABET

N = 32
RES = 10  # author residue number of 5PTI chain A (slot 9)


@pytest.fixture(scope="module")
def omitted(model, protein, tmp_path_factory):
    """The two letters most likely at A10 (unconditionally) and a T = 1 run omitting them there."""
    from fidia_jax.models import MPNNInputs

    u = unconditional_log_probs(model, MPNNInputs.from_protein(protein))[RES - 1]
    top = "".join(ALPHABET[i] for i in np.argsort(-u)[:2])
    out = tmp_path_factory.mktemp("probs")
    s = run_sample(out, model=model, num_samples=N, temperature=1.0, seed=3, quiet=True,
                   omit_by_res={"A": {str(RES): top}}, save_probs=True, unconditional_probs=True)  # fmt: skip
    return top, s, out


def test_omit_by_res_never_sampled_there(omitted):
    top, s, out = omitted
    # not vacuous: in the samples' own contexts the unbiased model puts > 30 % on these letters
    # at A10 (about 10 of 32 draws without the omission)
    p = np.load(out / "probs.npz")["probs"][:, RES - 1, [ALPHABET.index(a) for a in top]]
    assert p.sum(-1).mean() > 0.3
    got = np.array([list(x["sequence"]) for x in s["samples"]])
    assert got.shape == (N, 58)
    assert not np.isin(got[:, RES - 1], list(top)).any()
    for a in top:  # only at that residue: the letters are still sampled elsewhere
        assert (got == a).sum() > 0, a
    assert s["inputs"]["omit_by_res"] is None  # a dict, not a file


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        ({"B": {"1": "C"}}, "omit: chain 'B' not among loaded chains ['A']"),
        ({"A": {"99": "C"}}, "omit: residue A99 not in chain A"),
        ({"A": {"12": "CJ"}}, "omit: residue A12: letter 'J' not in the ProteinMPNN alphabet"),
        ({"A": {"12": {"C": 1}}}, 'residue A12: expected a string of letters (e.g. "CW")'),
        ({"A": {"12": ALPHABET[:-1]}}, "residue A12: omits every amino acid"),
        ("/nonexistent/o.json", "o.json: per-residue omit file not found"),
    ],
)
def test_omit_by_res_errors(spec, needle, protein):
    with pytest.raises(DataError) as e:
        load_omit_by_res(spec, protein)
    assert needle in str(e.value)


def test_cli_omit_by_res_missing_file_exit_2(tmp_path, capsys):
    out = tmp_path / "out"
    args = ["sample", "--num-samples", "2", "--out", str(out), "--omit-aa-by-res", "/no/o.json"]
    assert cli.main(args) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "o.json: per-residue omit file not found" in err[0]
    assert not out.exists()


def test_probs_npz(omitted, model, protein):
    top, s, out = omitted
    z = np.load(out / "probs.npz")
    assert s["files"]["probs"] == str(out / "probs.npz")
    p, seqs = z["probs"], z["sequences"]
    assert p.shape == (N, 58, 21) and p.dtype == np.float32
    np.testing.assert_allclose(p.sum(-1), 1.0, atol=1e-5)
    assert ["".join(ALPHABET[t] for t in row) for row in seqs] == [
        x["sequence"] for x in s["samples"]
    ]
    # the summary's scores are the mean -log p(sampled token) over the designed slots
    tok = np.log(np.take_along_axis(p, seqs[..., None], -1)[..., 0])
    d = z["designed"]
    np.testing.assert_allclose(-(tok * d).sum(-1) / d.sum(), [x["score"] for x in s["samples"]],
                               rtol=1e-5)  # fmt: skip
    # probabilities are of the unbiased model: omitted letters keep their mass at A10
    assert p[:, RES - 1, [ALPHABET.index(a) for a in top]].min() > 0
    assert sorted(z["decoding_order"][0]) == list(range(58)) and z["mask"].shape == (58,)

    # unconditional = teacher-forced log-probs at a position decoded first (nothing before it)
    from fidia_jax.models import MPNNInputs, score

    u = z["unconditional_probs"]
    np.testing.assert_allclose(u.sum(-1), 1.0, atol=1e-5)
    inputs = MPNNInputs.from_protein(protein)
    firsts = np.arange(N) * 58 // N  # N orders: the shape run_sample's native scoring compiled
    orders = np.array([[k] + [j for j in range(58) if j != k] for k in firsts], np.int32)
    lp = np.asarray(
        score(model, inputs, np.broadcast_to(protein.S, orders.shape), orders).log_probs
    )
    lp = lp[np.arange(N), firsts]
    np.testing.assert_allclose(u[firsts], np.exp(lp), atol=1e-5)
    # two compiled programs: float32 rounding up to 2.1e-5 (erf-form GELU, 2026-12-05)
    np.testing.assert_allclose(unconditional_log_probs(model, inputs)[firsts], lp, atol=5e-5)
    assert not np.allclose(u, p[0], atol=1e-3)  # context matters elsewhere


def _fasta(path, seqs):
    path.write_text("".join(f">r{i}\n{s}\n" for i, s in enumerate(seqs)))
    return path


def test_score_tied_equals_models_score(model, protein, tmp_path):
    nat = list(protein.sequence)
    for i in range(5):  # A11-15 carry A1-5's letters: a tied group shares its residue
        nat[10 + i] = nat[i]
    seq = "".join(nat)
    s = run_score(_fasta(tmp_path / "t.fa", [seq]), model=model, tie="A1-5:A11-15", seed=2,
                  num_orders=2, quiet=True)  # fmt: skip
    import jax

    from fidia_jax.models import MPNNInputs, random_decoding_order, score

    inputs = MPNNInputs.from_protein(protein)
    groups = [[i, 10 + i] for i in range(5)]
    toks = np.array([[ALPHABET.index(a) for a in seq]], np.int32)
    d = np.ones(58, np.float32)
    want = []
    for k in jax.random.split(jax.random.key(2), 2):
        order = np.asarray(random_decoding_order(k, d))[None]
        tok = np.asarray(score(model, inputs, toks, order, tied=groups).token_log_probs)
        np.testing.assert_allclose(tok[0, :5], tok[0, 10:15], rtol=1e-6)  # one draw per group
        want.append(-tok.mean())
        untied = score(
            model, inputs, np.repeat(toks, N, 0), np.repeat(order, N, 0)
        )  # (N, L): compiled
        untied = np.asarray(untied.token_log_probs)
        assert not np.allclose(untied[0, :5], untied[0, 10:15])  # tying is not vacuous
    np.testing.assert_allclose(s["records"][0]["score"], np.mean(want), rtol=1e-6)
    assert s["inputs"]["tied_groups"] == 5


# ---- issue 27: the user's own weights, error messages ----------------------------------------
def test_checkpoint_path_loads_the_users_weights_and_checks_the_kind(tmp_path):
    from fidia_jax.errors import ConfigError
    from fidia_jax.models.proteinmpnn import checkpoint_path
    from fidia_jax.projects.proteinmpnn.design import load_model

    own = tmp_path / "my_model.pt"
    own.write_bytes(checkpoint_path("v_48_010", "vanilla").read_bytes())
    model = load_model(str(own), "vanilla")
    ref = load_model("v_48_010", "vanilla")
    np.testing.assert_array_equal(model.W_out.kernel.get_value(), ref.W_out.kernel.get_value())
    with pytest.raises(ConfigError, match="full-backbone model: drop --ca-only"):
        load_model(str(own), "ca")
    with pytest.raises(ConfigError, match="no such file"):
        load_model(str(tmp_path / "missing.pt"), "vanilla")


def test_unknown_checkpoint_lists_the_valid_names():
    from fidia_jax.errors import CheckpointError, ConfigError
    from fidia_jax.models.proteinmpnn import checkpoint_path

    with pytest.raises(
        CheckpointError, match=r"valid names for vanilla: v_48_002, v_48_010, v_48_020, v_48_030"
    ):
        checkpoint_path("v_48_999", "vanilla")
    with pytest.raises(ConfigError, match=r"valid names for ca: v_48_002, v_48_010, v_48_020"):
        checkpoint_path("v48", "ca")


def test_ca_only_structure_hint_names_the_flag():
    import pathlib

    from fidia_jax.errors import StructureError
    from fidia_jax.protein import load_structure

    ca = pathlib.Path(__file__).parents[2] / "data" / "proteinmpnn_ca" / "2xcjA_ca.pdb"
    with pytest.raises(StructureError, match="--ca-only on the command line"):
        load_structure(ca)


def test_several_temperatures_in_one_run(model, tmp_path):
    """``--sampling_temp "0.1 1.0"``: N samples per temperature; the first as a run at T = 0.1."""
    from fidia_jax.errors import ConfigError

    kw = dict(model=model, num_samples=2, seed=4, quiet=True)
    both = run_sample(tmp_path / "both", temperature="0.1 1.0", **kw)
    one = run_sample(None, temperature=0.1, write=False, **kw)
    assert [s["temperature"] for s in both["samples"]] == [0.1, 0.1, 1.0, 1.0]
    assert both["inputs"]["temperature"] == [0.1, 1.0]
    assert [s["sequence"] for s in both["samples"][:2]] == [s["sequence"] for s in one["samples"]]
    heads = [ln for ln in (tmp_path / "both" / "samples.fasta").read_text().splitlines()[2:]
             if ln.startswith(">")]  # fmt: skip
    assert [h.split(",")[0] for h in heads] == [">T=0.1", ">T=0.1", ">T=1", ">T=1"]
    with pytest.raises(ConfigError, match="'hot' is not a number"):
        run_sample(None, temperature="0.1,hot", write=False, **kw)
    with pytest.raises(ConfigError, match="temperature must be a positive"):
        run_sample(None, temperature="0.1,0", write=False, **kw)


def test_max_length_refuses_longer_structures(tmp_path):
    with pytest.raises(DataError, match="58 residues, more than --max-length 57"):
        run_sample(None, max_length=57, write=False, quiet=True)
    assert cli.main(["sample", "--max_length", "40", "--out", str(tmp_path / "o")]) == 2
    assert not (tmp_path / "o" / "samples.fasta").exists()


def test_backbone_noise_moves_the_backbone_reproducibly(model):
    from fidia_jax.errors import ConfigError

    kw = dict(model=model, num_samples=2, temperature=0.1, seed=6, quiet=True, write=False)
    plain = run_sample(None, **kw)
    noisy = run_sample(None, backbone_noise=0.3, **kw)
    again = run_sample(None, backbone_noise=0.3, **kw)
    assert noisy["inputs"]["backbone_noise"] == 0.3 and plain["inputs"]["backbone_noise"] == 0.0
    assert noisy["native_score"] == again["native_score"]
    # 0.3 Å moves the native score by far more than float noise, both ways possible
    assert abs(noisy["native_score"] - plain["native_score"]) > 1e-3
    with pytest.raises(ConfigError, match="backbone-noise must be >= 0"):
        run_sample(None, backbone_noise=-0.1, **kw)


def test_original_layout_writes_seqs_name_fa(model, tmp_path):
    s = run_sample(
        tmp_path, model=model, num_samples=2, temperature=0.1, seed=4, quiet=True,
        seqs_dir=tmp_path / "seqs",
    )  # fmt: skip
    fa = tmp_path / "seqs" / "5PTI.fa"
    assert s["files"]["seqs"] == str(fa)
    assert fa.read_text() == (tmp_path / "samples.fasta").read_text()


def test_score_only_over_a_folder(model, tmp_path):
    """``fidia-jax score --pdb-dir``: native per-residue / designed / global NLL per order."""
    import shutil

    import jax

    from fidia_jax.models import MPNNInputs, random_decoding_order, score
    from fidia_jax.projects.proteinmpnn.batch import run_score_only
    from fidia_jax.protein import default_backbone_path, load_structure

    d = tmp_path / "in"
    d.mkdir()
    shutil.copy(default_backbone_path(), d / "5PTI.cif.gz")
    (d / "broken.pdb").write_text("not a structure\n")
    s = run_score_only(tmp_path / "out", pdb_dir=d, num_orders=2, seed=3, model=model, quiet=True)
    rows = {r["name"]: r for r in s["structures"]}
    assert rows["broken"]["status"] == "error" and s["num_failed"] == 1
    z = np.load(tmp_path / "out" / "score_only" / "5PTI_pdb.npz")
    assert z["score"].shape == (2,) and z["per_residue"].shape == (2, 58)
    # order 0 of seed 3, scored directly without padding
    p = load_structure(default_backbone_path())
    k0 = jax.random.split(jax.random.key(3), 2)[0]
    order = np.asarray(random_decoding_order(k0, np.ones(58, np.float32)))[None]
    ref = -np.asarray(score(model, MPNNInputs.from_protein(p), p.S[None], order).token_log_probs)[0]
    np.testing.assert_allclose(z["per_residue"][0], ref, atol=2e-5)
    np.testing.assert_allclose(z["score"], np.nanmean(z["per_residue"], -1), rtol=1e-5)
    assert rows["5PTI"]["score"] == pytest.approx(float(z["score"].mean()), rel=1e-6)
    assert cli.main(["score", "--pdb-dir", str(d), "--out", str(tmp_path / "cli")]) == 2
    assert (tmp_path / "cli" / "score_only" / "5PTI_pdb.npz").is_file()
