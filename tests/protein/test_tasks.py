"""Design tasks: motif placements, kinds, partners, pseudo-motifs and the protein-level split."""

import dataclasses

import numpy as np
import pytest

from fidia_jax import protein as fp
from fidia_jax.errors import DataError


@pytest.fixture(scope="module")
def rfd_tasks(shared_data_dir):
    return {t.name: t for t in fp.load_rfdiffusion_tasks(shared_data_dir)}


@pytest.fixture(scope="module")
def generic_tasks(shared_data_dir):
    return fp.load_generic_tasks(shared_data_dir, seed=0)


def test_rfdiffusion_motif_positions_and_redesign(rfd_tasks):
    t = rfd_tasks["rfdiffusion/1PRW"]
    p = t.protein
    motif_res = sorted(int(r) for r in p.resnum[t.motif_mask])
    assert motif_res == list(range(16, 36)) + list(range(52, 72))
    # idcs_to_redesign: A16-19,A21,A23,A25,A27-30,A32-35 and the same pattern on A52-71
    redesign = [16, 17, 18, 19, 21, 23, 25, 27, 28, 29, 30, 32, 33, 34, 35]
    redesign += [r + 36 for r in redesign]
    fixed_res = sorted(int(r) for r in p.resnum[t.fixed_mask])
    assert fixed_res == sorted(set(motif_res) - set(redesign))
    np.testing.assert_array_equal(t.motif_tokens[t.fixed_mask], p.S[t.fixed_mask])
    assert t.kind == "motif" and t.source == "rfdiffusion" and t.group == "1PRW"
    # Problems differing only in scaffold length give one task.
    assert sum(name.startswith("rfdiffusion/7MRX") for name in rfd_tasks) == 1


def test_kinds_and_partner_chains(rfd_tasks):
    kinds = {t.group: t.kind for t in rfd_tasks.values()}
    for g in ("3IXT", "4JHW", "4ZYP", "5TPN", "5WN9"):
        assert kinds[g] == "epitope"
    for g in ("5YUI", "1QJG", "1BCF", "1YCR", "5IUS"):
        assert kinds[g] == "enzyme"
    t = rfd_tasks["rfdiffusion/1YCR"]
    assert t.design_chains == ("B",) and t.partner_chains == ("A",)
    assert not t.design_mask[np.asarray(t.protein.chain_id) == "A"].any()
    apo = t.apo()
    assert apo.protein.chain_order == ("B",) and apo.partner_chains == ()
    np.testing.assert_array_equal(
        apo.motif_mask, t.motif_mask[np.asarray(t.protein.chain_id) == "B"]
    )
    assert apo.protein.chain_encoding.max() == 1 and apo.protein.residue_idx.max() < 100
    # Non-binding tasks carry no partner.
    assert rfd_tasks["rfdiffusion/5TPN"].partner_chains == ()


def test_motifbench_placement_matches_motif_pdb(shared_data_dir):
    tasks = {t.name: t for t in fp.load_motifbench_tasks(shared_data_dir)}
    t = tasks["motifbench/01_1LDB"]
    # contig 161/A1-21/112: motif on slots 161..181
    np.testing.assert_array_equal(np.flatnonzero(t.motif_mask), np.arange(161, 182))
    motif_pdb = fp.load_structure(shared_data_dir / "protein/motifbench/motif_pdbs/01_1LDB.pdb")
    assert t.protein.sequence[161:182] == motif_pdb.sequence
    # Same motif geometry (up to a rigid motion).
    rmsd = fp.kabsch_rmsd(t.protein.X[161:182, 1], motif_pdb.X[:, 1])
    assert float(rmsd) < 1e-2
    # 06/07_6E6R differ only in scaffold length -> one task.
    assert "motifbench/06_6E6R" in tasks and "motifbench/07_6E6R" not in tasks
    assert tasks["motifbench/04_5WN9"].kind == "epitope"


def test_generic_pseudo_motifs_seeded(shared_data_dir, generic_tasks):
    assert len(generic_tasks) == 50
    for t in generic_tasks:
        m = t.motif_mask.astype(int)
        starts = np.flatnonzero(np.diff(np.concatenate([[0], m])) == 1)
        ends = np.flatnonzero(np.diff(np.concatenate([m, [0]])) == -1)
        lengths = ends - starts + 1
        assert 1 <= len(starts) <= 2 and np.all((lengths >= 5) & (lengths <= 12))
        assert np.all(t.fixed_mask == t.motif_mask) and t.kind == "generic"
    again = fp.load_tasks(shared_data_dir, sources=("generic",), seed=0, heldout_fraction=0.2)
    fp.check_split(again)
    assert {t.split for t in again} == {"train", "heldout"}
    other = fp.load_generic_tasks(shared_data_dir, seed=1)
    assert all(
        np.array_equal(a.motif_mask, b.motif_mask)
        for a, b in zip(generic_tasks, again, strict=True)
    )
    assert not all(
        np.array_equal(a.motif_mask, b.motif_mask)
        for a, b in zip(generic_tasks, other, strict=True)
    )


def test_split_by_protein(rfd_tasks, generic_tasks):
    tasks = fp.assign_splits(list(rfd_tasks.values()) + generic_tasks, heldout_fraction=0.3, seed=0)
    sides = {}
    for t in tasks:
        sides.setdefault(t.group, set()).add(t.split)
    assert all(len(s) == 1 for s in sides.values())
    assert all(t.split == "heldout" for t in tasks if t.source == "rfdiffusion")
    gen = [t for t in tasks if t.source == "generic"]
    frac = np.mean([t.split == "heldout" for t in gen])
    assert 0.1 < frac < 0.55 and any(t.split == "train" for t in gen)
    # Deterministic.
    again = fp.assign_splits(list(rfd_tasks.values()) + generic_tasks, heldout_fraction=0.3, seed=0)
    assert [t.split for t in tasks] == [t.split for t in again]
    # A generic chain sharing a PDB ID with a benchmark entry is held out with it.
    clash = dataclasses.replace(generic_tasks[0], group="1PRW", name="generic/1prwA")
    out = fp.assign_splits(list(rfd_tasks.values()) + [clash], heldout_fraction=0.0)
    assert out[-1].split == "heldout"
    bad = [
        dataclasses.replace(generic_tasks[0], split="train"),
        dataclasses.replace(generic_tasks[1], group=generic_tasks[0].group, split="heldout"),
    ]
    with pytest.raises(DataError, match="both"):
        fp.check_split(bad)


def test_task_validation_and_errors(rfd_tasks, tmp_path):
    t = rfd_tasks["rfdiffusion/1PRW"]
    with pytest.raises(DataError, match="fixed_mask"):
        dataclasses.replace(t, fixed_mask=~t.motif_mask & t.design_mask)
    with pytest.raises(DataError, match="unknown task source"):
        fp.load_tasks(tmp_path, sources=("nope",))
    with pytest.raises(DataError):
        fp.load_generic_tasks(tmp_path)
