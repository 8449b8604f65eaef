"""FIDIA with a structure predictor in the loop (``reward.criteria = "structure"``).

* :class:`FoldCache` folds each distinct sequence once and counts time and hits;
* the reward with a hand-made predictor: success, precision and the structure gate follow the
  fold exactly (a failing fold gets the gate value);
* config and CLI: ``--fold-params DIR`` sets the criteria, ``structure`` without parameters or
  a predictor with ``proxy`` is a one-line error;
* a FIDIA step and a whole tiny run with the hand-made predictor: per-step predictor time and
  counts, every report says ``"criteria": "structure"``;
* slow: a FIDIA step with the tiny random AlphaFold2 in the loop (needs the ``fold`` extra).
"""

import dataclasses
import json

import numpy as np
import pytest

from fidia_jax import cli
from fidia_jax import protein as fp
from fidia_jax.errors import ConfigError
from fidia_jax.projects import fidia
from fidia_jax.projects.fidia import commands
from fidia_jax.protein._tasks import _make_task


class Counting:
    """Folds to the design backbone itself (moved rigidly); pLDDT 90 when the sequence's hash is
    even, else 50, so roughly half the samples pass."""

    def __init__(self, target_X):
        self.target = np.asarray(target_X, np.float32)
        self.calls = []

    @staticmethod
    def plddt_of(sequence):
        return 90.0 if sum(map(ord, sequence)) % 2 == 0 else 50.0

    def predict(self, sequence):
        self.calls.append(sequence)
        m = len(sequence.replace(":", ""))
        return self.target[:m] + 2.0, np.full(m, self.plddt_of(sequence), np.float32)


def test_fold_cache_folds_each_distinct_sequence_once():
    stub = Counting(np.zeros((8, 4, 3)))
    cache = fidia.FoldCache(stub, max_entries=3)
    out = cache.predict_many(["AAAA", "CCCC", "AAAA", "DDD"])
    assert stub.calls == ["AAAA", "CCCC", "DDD"]
    assert [o[0].shape for o in out] == [(4, 4, 3), (4, 4, 3), (4, 4, 3), (3, 4, 3)]
    cache.predict("AAAA")
    c = cache.counters()
    assert (c["fold_new"], c["fold_cached"]) == (3.0, 2.0) and c["fold_seconds"] >= 0
    cache.predict_many(["EEEE"])  # evicts the least recently used (CCCC)
    cache.predict("CCCC")
    assert stub.calls[-2:] == ["EEEE", "CCCC"]
    with pytest.raises(TypeError, match="predict"):
        fidia.FoldCache(object())


@pytest.fixture(scope="module")
def bpti():
    return fp.load_structure(fp.default_backbone_path())


@pytest.mark.integration
def test_reward_follows_the_fold_and_gates_on_it(bpti):
    motif = np.zeros(bpti.length, bool)
    motif[10:15] = True
    task = _make_task("t", bpti, tuple(bpti.chain_order), motif, np.zeros_like(motif), "motif",
                      "T", "file")  # fmt: skip
    stub = Counting(bpti.X)
    rng = np.random.default_rng(0)
    seqs = np.tile(np.asarray(bpti.S, np.int32), (8, 1))
    designable = np.flatnonzero(~task.fixed_mask)
    for i in range(1, 8):
        pos = rng.choice(designable, 3, replace=False)
        seqs[i, pos] = rng.integers(0, 20, 3)
    proxy = fidia.RewardModel.build(task).fit(seqs)
    rm = dataclasses.replace(proxy, predictor=fidia.FoldCache(stub))
    res, base = rm(seqs), proxy(seqs)
    texts = rm.fold_sequences(seqs)
    assert texts == [fp.decode_tokens(s) for s in seqs]  # one chain, every slot present
    ok = np.array([Counting.plddt_of(t) > 70 for t in texts])
    assert 0 < ok.sum() < 8  # both kinds present
    assert res.criteria == "structure" and base.criteria == "proxy"
    np.testing.assert_array_equal(res.passes, ok & base.breakdown.gate)
    np.testing.assert_allclose(res.total, np.where(ok, base.total, -5.0), rtol=1e-6)
    np.testing.assert_allclose(res.breakdown.diagnostics["fold_scrmsd"], 0.0, atol=1e-3)
    np.testing.assert_array_equal(res.breakdown.diagnostics["fold_success"], ok)
    # without the structure gate the fold decides success only
    loose = dataclasses.replace(rm, config=dataclasses.replace(rm.config, structure_gate=False))(
        seqs
    )
    np.testing.assert_allclose(loose.total, base.total, rtol=1e-6)
    np.testing.assert_array_equal(loose.passes, res.passes)


def test_two_chains_are_joined_with_a_colon(bpti):
    chain = np.asarray(bpti.chain_id).copy()
    chain[30:] = "B"
    two = dataclasses.replace(
        bpti,
        chain_id=chain,
        chain_encoding=np.where(chain == "B", 2, 1).astype(np.int32),
        chain_order=("A", "B"),
    )
    task = _make_task("t2", two, ("A", "B"), np.zeros(two.length, bool),
                      np.zeros(two.length, bool), "motif", "T", "file")  # fmt: skip
    rm = fidia.RewardModel.build(task, predictor=Counting(two.X))
    s = np.asarray(two.S, np.int32)[None]
    (text,) = rm.fold_sequences(s)
    whole = fp.decode_tokens(s[0])
    assert text == whole[:30] + ":" + whole[30:]


class ComplexStub:
    """A multimer-like predictor: ``fold_many`` folds every chain of ``"A:B"`` to the complex's
    own backbone (moved rigidly), pLDDT 90, ipTM = 0.1 x the number of chains."""

    def __init__(self, complex_X):
        self.target = np.asarray(complex_X, np.float32)
        self.calls = []

    def fold_many(self, sequences):
        out = []
        for s in sequences:
            self.calls.append(s)
            m = len(s.replace(":", ""))
            iptm = 0.1 * (s.count(":") + 1)
            out.append(
                fp.AlphaFoldPrediction(
                    coords=self.target[:m] + 1.0,
                    plddt=np.full(m, 90.0, np.float32),
                    chain_lengths=tuple(len(c) for c in s.split(":")),
                    iptm=iptm,
                )
            )
        return out

    def predict(self, sequence):
        f = self.fold_many([sequence])[0]
        return f.coords, f.plddt


@pytest.mark.integration
def test_binder_tasks_fold_their_partner_chains_with_fold_partners(bpti):
    """``reward.fold_partners``: the designed chain (A, residues 0-39) is folded with the target
    chain B (native residues 40-57) after it; success is judged on A only; ipTM is reported."""
    chain = np.asarray(bpti.chain_id).copy()
    chain[40:] = "B"
    two = dataclasses.replace(
        bpti,
        chain_id=chain,
        chain_encoding=np.where(chain == "B", 2, 1).astype(np.int32),
        chain_order=("A", "B"),
    )
    motif = np.zeros(two.length, bool)
    motif[10:15] = True
    task = _make_task("binder", two, ("A",), motif, np.zeros(two.length, bool), "enzyme",
                      "T", "file", partner_chains=("B",))  # fmt: skip
    seqs = np.tile(np.asarray(two.S, np.int32), (3, 1))
    seqs[1, 20] = (seqs[1, 20] + 1) % 20
    seqs[2, 41] = (seqs[2, 41] + 1) % 20  # a partner slot: never designed, the fold ignores it
    native = fp.decode_tokens(np.asarray(two.S))
    stub = ComplexStub(two.X)
    plain = fidia.RewardModel.build(task, predictor=fidia.FoldCache(stub))
    assert plain.fold_sequences(seqs)[0] == native[:40]  # default: designed chains only
    rm = fidia.RewardModel.build(
        task, fidia.RewardConfig(fold_partners=True), predictor=fidia.FoldCache(stub)
    )
    texts = rm.fold_sequences(seqs)
    assert texts[0] == native[:40] + ":" + native[40:] and texts[2] == texts[0]
    assert texts[1][20] != native[20] and texts[1][40:] == ":" + native[40:]
    got = rm.fold(seqs)
    # the stub's fold of A is A's backbone moved rigidly: success on A; ipTM of two chains
    np.testing.assert_allclose(got["fold_scrmsd"], 0.0, atol=1e-3)
    np.testing.assert_allclose(got["fold_iptm"], 0.2, rtol=1e-6)
    assert got["fold_success"].all() and got["fold_plddt"] == pytest.approx([90.0] * 3)
    assert stub.calls == [texts[0], texts[1]]  # the cache folded each distinct input once
    cfg = fidia.override_config(fidia.get_config("tiny"), ["reward.fold_partners=true"])
    assert cfg.reward.fold_partners is True


def test_criteria_config_and_cli(tmp_path, capsys):
    cfg = fidia.get_config("tiny")
    assert cfg.reward.criteria == "proxy" and fidia.build_predictor(cfg) is None
    with pytest.raises(ConfigError, match="criteria"):
        fidia.override_config(cfg, ["reward.criteria=folded"])
    with pytest.raises(ConfigError, match="fold_overrides"):
        fidia.override_config(cfg, ['reward.fold_overrides=["no_equals_sign"]'])
    structure = fidia.override_config(cfg, ["reward.criteria=structure"])
    with pytest.raises(ConfigError, match="--fold-params"):
        fidia.build_predictor(structure)
    with pytest.raises(ConfigError, match="reward.criteria is 'proxy'"):
        fidia.Trainer(cfg, train_backbones=[], eval_backbones=[], predictor=Counting(np.zeros(1)))
    args = cli._parse_args(
        [
            "fidia",
            "train",
            "--config",
            "tiny",
            "--fold-params",
            str(tmp_path),
            "--fold-model",
            "model_3_ptm",
        ]  # fmt: skip
    )
    got = commands._config_from_args(args).reward
    assert (got.criteria, got.fold_params, got.fold_model) == (
        "structure",
        str(tmp_path),
        "model_3_ptm",
    )
    # no parameter file (or no 'fold' extra): one line, exit 2, nothing written
    workdir = tmp_path / "run"
    argv = ["fidia", "train", "--config", "tiny", "--fold-params", str(tmp_path),
            "--workdir", str(workdir), "--quiet"]  # fmt: skip
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("fidia-jax: error: ")
    assert "params_model_1_ptm.npz" in err[0] or "'fold' extra" in err[0], err
    assert not workdir.exists()


@pytest.mark.integration
def test_a_tiny_run_reports_the_structure_criteria(bpti, tmp_path):
    cfg = fidia.override_config(
        fidia.get_config("tiny"), ["reward.criteria=structure", "train.num_steps=1"]
    )
    stub = Counting(bpti.X)
    trainer = fidia.Trainer(cfg, predictor=stub)
    assert isinstance(trainer.predictor, fidia.FoldCache)
    result = fidia.train_and_evaluate(cfg, tmp_path, trainer=trainer, progress=False)
    (row,) = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    n = cfg.train.n_samples
    assert row["fold_new"] + row["fold_cached"] == n and row["fold_new"] >= 1
    assert row["fold_seconds"] >= 0
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["criteria"] == "structure"
    # every sample the run folded passed or failed by the stub's rule, and success agrees
    per = result["after"]["per_backbone"][0]
    assert 0.0 <= per["precision"] <= 1.0
    assert len(set(stub.calls)) == len(stub.calls)  # the cache never folds a sequence twice


@pytest.mark.slow
def test_a_fidia_step_with_the_tiny_alphafold_in_the_loop(tiny_alphafold):
    af = fp.AlphaFoldPredictor(
        tiny_alphafold.params("model_1_ptm"),
        tiny_alphafold.config("model_1_ptm", num_recycles=0),
        buckets=(32,),
        batch_size=4,
        compiler_options={"xla_backend_optimization_level": 0},
    )
    cfg = fidia.override_config(fidia.get_config("tiny"), ["reward.criteria=structure"])
    trainer = fidia.Trainer(cfg, predictor=af)
    state, metrics = trainer.step(trainer.init_state())
    assert state.step == 1
    assert metrics["fold_new"] + metrics["fold_cached"] == cfg.train.n_samples
    assert metrics["fold_seconds"] > 0 and af.folds == metrics["fold_new"]
    # random weights: pLDDT far below 70, so no sample passes and the gate closes for all
    assert metrics["pass_rate"] == 0.0
    assert metrics["reward_mean"] == pytest.approx(-5.0)
    assert np.isfinite(metrics["loss"])


@pytest.mark.slow
def test_cli_train_with_fold_params_end_to_end(tmp_path, tiny_alphafold):
    """``fidia-jax fidia train --fold-params DIR``: the parameter file (tiny random weights in the
    release layout) is read by the package's reader, every step folds, the report says so."""
    (tmp_path / "af2" / "params").mkdir(parents=True)
    tiny_alphafold.write_release_layout(
        tiny_alphafold.params("model_1_ptm", seed=1),
        tmp_path / "af2" / "params" / "params_model_1_ptm.npz",
    )
    tiny = tiny_alphafold.overrides
    overrides = json.dumps([f"{k}={json.dumps(v)}" for k, v in tiny.items()])
    workdir = tmp_path / "run"
    argv = ["fidia", "train", "--config", "tiny", "--fold-params", str(tmp_path / "af2"),
            "--set", f"reward.fold_overrides={overrides}", "--set", "reward.fold_recycles=0",
            "--set", "train.num_steps=1", "--workdir", str(workdir), "--quiet"]  # fmt: skip
    assert cli.main(argv) == 0
    summary = json.loads((workdir / "summary.json").read_text())
    assert summary["criteria"] == "structure"
    (row,) = [json.loads(x) for x in (workdir / "metrics.jsonl").read_text().splitlines()]
    assert row["fold_new"] >= 1 and row["fold_seconds"] > 0
    assert row["pass_rate"] == 0.0  # random weights: pLDDT about 50


@pytest.mark.integration
def test_fold_model_multimer_builds_the_multimer_from_the_release_layout(tmp_path, tiny_alphafold):
    """``--fold-params DIR --fold-model model_1_multimer_v3`` reaches the multimer through the
    same path (release-layout file, the package's reader); monomer parameters under a multimer
    name are refused by name. Nothing is compiled here (the folds are in
    tests/protein/test_alphafold_multimer.py)."""
    name = tiny_alphafold.multimer
    tiny_alphafold.write_release_layout(
        tiny_alphafold.params(name), tmp_path / f"params_{name}.npz", name
    )
    tiny_alphafold.write_release_layout(
        tiny_alphafold.params("model_1_ptm"), tmp_path / "params_model_2_multimer_v3.npz"
    )
    args = cli._parse_args(
        [
            "fidia",
            "train",
            "--config",
            "tiny",
            "--fold-params",
            str(tmp_path),
            "--fold-model",
            name,
        ]  # fmt: skip
    )
    cfg = commands._config_from_args(args)
    items = [f"{k}={json.dumps(v)}" for k, v in tiny_alphafold.overrides.items()]
    cfg = fidia.override_config(cfg, [f"reward.fold_overrides={json.dumps(items)}"])
    cache = fidia.build_predictor(cfg)
    af = cache.predictor
    assert isinstance(af, fp.AlphaFoldPredictor) and af.multimer and af.model_name == name
    assert af.config.model.embeddings_and_evoformer.num_msa == 1
    wrong = fidia.override_config(cfg, ["reward.fold_model=model_2_multimer_v3"])
    with pytest.raises(ConfigError, match="do not fit its multimer configuration"):
        fidia.build_predictor(wrong)
