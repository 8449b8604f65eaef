"""The FIDIA sweep's report tables (issue 41): ``benchmarks/_fidia_sweep_report.py`` summarises
per-(run, step, backbone) rows into the ``final`` / ``curves`` / ``paired`` tables that the
results file ``fidia_sweep.json`` carries. No training: the rows are made up, and the expected
numbers are worked out by hand below."""

from __future__ import annotations

import json
import pathlib
import types

import numpy as np
import pytest
from _scripts import load_script

rep = load_script("benchmarks/_fidia_sweep_report.py")
results = load_script("benchmarks/_results.py")

#: bon's held-out log-likelihood is NaN on purpose (a judge without a value): nanmean warns.
pytestmark = pytest.mark.filterwarnings("ignore:Mean of empty slice:RuntimeWarning")

JUDGES = {"mpnn-heldout": (None, -1.5, "held-out ProteinMPNN")}


def _rows():
    """2 seeds x 2 backbones; bon at step 0, fidia8_b0.01 and grpo_b0.01 at steps 0 and 150.
    FIDIA's max@8 at step 150 is 4 + seed + backbone index, GRPO's 3.5 + seed (diff 0.5 + b)."""
    rows = []
    for seed in (0, 1):
        for b, name in enumerate(("bb_a", "bb_b")):
            for label, step, value in (
                ("bon", 0, 2.0),
                ("fidia8_b0.01", 0, 2.0),
                ("fidia8_b0.01", 150, 4.0 + seed + b),
                ("grpo_b0.01", 0, 2.0),
                ("grpo_b0.01", 150, 3.5 + seed),
            ):
                rows.append(
                    {
                        "label": label,
                        "seed": seed,
                        "step": step,
                        "backbone": name,
                        "kind": "motif",
                        "kl": 0.1 * step / 150,
                        "train_max@8": value,
                        "train_success@8": float(b),
                        "train_precision": 0.5,
                        "identity": 0.6,
                        "mpnn-heldout_max@8": value - 0.25,
                        "mpnn-heldout_success@8": float(b),
                        "mpnn-heldout_precision": 0.25,
                        "mpnn-heldout_ll": float("nan") if label == "bon" else -1.0,
                    }
                )
    return rows


@pytest.fixture(scope="module")
def record():
    args = types.SimpleNamespace(merge=["made/up"])
    labels = ["bon", "fidia8_b0.01", "grpo_b0.01"]
    return rep._summarise(_rows(), labels, [0, 1], JUDGES, args)


def test_final_table_is_mean_and_std_over_seeds(record):
    t = rep.sweep_tables(record)["final"]
    cells = {r[0]: dict(zip(t["columns"], r, strict=True)) for r in t["rows"]}
    # FIDIA per-seed means over the two backbones: 4.5 and 5.5 -> mean 5.0, std (ddof 1) 0.707
    assert cells["fidia8_b0.01"]["max@8 train judge"] == "+5.00 ± 0.71"
    assert cells["fidia8_b0.01"]["max@8 mpnn-heldout"] == "+4.75 ± 0.71"
    assert cells["grpo_b0.01"]["max@8 train judge"] == "+4.00 ± 0.71"
    assert cells["bon"]["max@8 train judge"] == "+2.00 ± 0.00"  # its last step is step 0
    assert cells["fidia8_b0.01"]["success@8 proxy"] == "0.50 ± 0.00"
    assert cells["fidia8_b0.01"]["KL"] == "0.10 ± 0.00"
    assert cells["fidia8_b0.01"]["seeds"] == 2


def test_curves_and_paired_tables(record):
    tables = rep.sweep_tables(record)
    curves = tables["curves"]
    assert curves["columns"] == ["entry", "step 0", "step 150"]
    bon = next(r for r in curves["rows"] if r[0] == "bon")
    assert bon[2] is None  # bon was only evaluated at step 0
    fidia = next(r for r in curves["rows"] if r[0] == "fidia8_b0.01")
    assert fidia[2] == "+5.00 / +4.75; 0.60; 0.10"
    paired = tables["paired"]
    assert paired["columns"] == ["metric", "fidia8_b0.01 - bon", "fidia8_b0.01 - grpo_b0.01"]
    row = next(r for r in paired["rows"] if r[0] == "max@8, training judge")
    cell = dict(zip(paired["columns"], row, strict=True))["fidia8_b0.01 - grpo_b0.01"]
    # differences over the 4 (seed, backbone) pairs: 0.5, 1.5, 0.5, 1.5 -> mean +1.0; each
    # seed's mean difference is +1.0 too
    assert cell.startswith("+1.000 [") and "(4 pairs); per seed +1.00 / +1.00" in cell
    # success@8 differences are 0 everywhere: Wilcoxon is not defined, p is reported as 1
    row = next(r for r in paired["rows"] if r[0] == "success@8, proxy+mpnn-heldout")
    assert row[2].startswith("+0.000 [+0.000, +0.000], p = 1 (4 pairs)")
    assert [r[0] for r in paired["rows"]] == [
        "success@8, proxy",
        "success@8, proxy+mpnn-heldout",
        "precision, proxy",
        "precision, proxy+mpnn-heldout",
        "max@8, training judge",
        "max@8, mpnn-heldout",
    ]


def test_claims_table_quotes_the_best_entries_and_the_same_beta_test(record):
    claims = rep.sweep_tables(record)["claims"]
    assert claims["columns"][3] == "ours: FIDIA k = 8 at its best β"
    rows = {r[0]: r for r in claims["rows"]}
    first = rows["Best-of-N-aligned RL raises best-of-N success over mean-reward RL"]
    # proxy success@8 is the backbone index (0, 1): mean 0.5 in each seed
    assert first[3].startswith("success@8 (proxy) fidia8_b0.01: 0.50 ± 0.00; ")
    assert "fidia8_b0.01 − grpo_b0.01: +0.000, p = 1 (uncorrected)" in first[3]
    assert first[4] == "grpo_b0.01: 0.50 ± 0.00 (best GRPO: grpo_b0.01)"
    held = rows["the gain holds under a held-out judge (mpnn-heldout)"]
    assert "max@8 fidia8_b0.01: +4.75 ± 0.71" in held[3]
    assert held[4] == "success@8 grpo_b0.01: 0.50 ± 0.00; max@8 grpo_b0.01: +3.75 ± 0.71"
    assert rows["RL beats sampling N from the frozen model"][4].endswith("bon: 0.50 ± 0.00")


def test_best_entry_picks_the_highest_mean_success():
    mk = lambda m: {"train_success@8": [m, 0.0]}  # noqa: E731
    result = {"final": {"fidia8_b0.1": mk(0.4), "fidia8_b0.01": mk(0.6), "grpo_b0.1": mk(None)}}
    assert rep._best(result, "fidia8_b") == "fidia8_b0.01"
    assert rep._best(result, "grpo_b") == "grpo_b0.1"  # a missing value still names the entry
    assert rep._best(result, "rloo_b") is None


def test_retable_from_the_written_file(record, tmp_path):
    """The file written at the end of ``report`` (NaN -> null) gives the same tables back."""
    tables = rep.sweep_tables(record)
    out = results.write_results("fidia_sweep", tables, extra=record, out=tmp_path / "s.json")
    back = json.loads(out.read_text())
    assert back["tables"] == json.loads(json.dumps(tables))
    assert rep.sweep_tables(back) == tables
    assert np.isnan(record["final"]["bon"]["mpnn-heldout_ll"][0])
    assert back["final"]["bon"]["mpnn-heldout_ll"][0] is None


def test_train_commands_are_the_runs_own_or_rebuilt_per_seed():
    def run(label, seed, made_by):
        return {"label": label, "seed": seed, "dir": pathlib.Path("w") / f"{label}_s{seed}",
                "made_by": made_by}  # fmt: skip

    old = {"method": "fidia", "overrides": {"k_bon": 8, "beta_kl": 0.01}}
    runs = [
        run("fidia8_b0.01", 0, {"label": "fidia8_b0.01", **old}),
        run("bon", 0, {"label": "bon", "method": "bon", "overrides": {}}),
        run("grpo", 1, {"command": "python benchmarks/fidia_sweep.py train --seeds 1 ..."}),
        run("bon", 1, {"command": "python benchmarks/fidia_sweep.py train --seeds 1 ..."}),
    ]
    assert rep.train_commands(runs) == [
        "python benchmarks/fidia_sweep.py train --seeds 0 --entries bon "
        "fidia8_b0.01=fidia,k_bon=8,beta_kl=0.01 --workdir w",
        "python benchmarks/fidia_sweep.py train --seeds 1 ...",
    ]
