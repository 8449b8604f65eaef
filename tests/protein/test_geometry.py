"""Kabsch RMSD, virtual Cβ, neighbour counts and P-SEA secondary structure."""

import gzip

import jax.numpy as jnp
import numpy as np
import pytest

from fidia_jax import protein as fp


def _rotation(rng):
    q, r = np.linalg.qr(rng.normal(size=(3, 3)))
    q = q * np.sign(np.diag(r))[None, :]
    if np.linalg.det(q) < 0:
        q[:, 0] = -q[:, 0]
    return q


def test_kabsch_recovers_random_rigid_motion():
    rng = np.random.default_rng(0)
    x = rng.normal(scale=8.0, size=(30, 3)).astype(np.float32)
    rot, t = _rotation(rng), rng.normal(scale=20.0, size=3)
    y = (x @ rot.T + t).astype(np.float32)
    assert float(fp.kabsch_rmsd(jnp.asarray(x), jnp.asarray(y))) < 1e-3
    r_est, t_est = fp.kabsch(jnp.asarray(x), jnp.asarray(y))
    np.testing.assert_allclose(r_est, rot, atol=1e-4)
    np.testing.assert_allclose(t_est, t, atol=1e-3)


def test_kabsch_known_perturbation_and_mask():
    rng = np.random.default_rng(1)
    x = rng.normal(scale=5.0, size=(40, 3))
    xc = x - x.mean(0)
    # Uniform scaling about the centroid: the optimal rotation is the identity and the RMSD is
    # |s - 1| * radius of gyration (closed form).
    s = 1.02
    y = s * xc @ _rotation(rng).T + 7.0
    expected = abs(s - 1) * np.sqrt(np.mean(np.sum(xc**2, -1)))
    got = float(fp.kabsch_rmsd(jnp.asarray(x, jnp.float32), jnp.asarray(y, jnp.float32)))
    assert got == pytest.approx(expected, rel=1e-3)
    # Masked-out points (garbage) do not change the result.
    mask = np.ones(40, bool)
    mask[::5] = False
    y2 = y.copy()
    y2[~mask] += 100.0
    rot = _rotation(rng)
    got_m = fp.kabsch_rmsd(jnp.asarray(x @ rot.T, jnp.float32), jnp.asarray(y2, jnp.float32), mask)
    xm = xc[mask] - xc[mask].mean(0)
    assert float(got_m) == pytest.approx(abs(s - 1) * np.sqrt(np.mean(np.sum(xm**2, -1))), rel=1e-3)
    # A mirror image cannot be superposed by a proper rotation.
    assert float(fp.kabsch_rmsd(jnp.asarray(x, jnp.float32), jnp.asarray(-x, jnp.float32))) > 1.0
    with pytest.raises(ValueError, match=r"\(n, 3\)"):
        fp.kabsch_rmsd(jnp.zeros((4, 2)), jnp.zeros((4, 2)))


def _read_pdb_atoms(path):
    opener = gzip.open if str(path).endswith(".gz") else open
    rows = {}
    with opener(path, "rt") as f:
        for line in f:
            if line.startswith("ENDMDL"):
                break
            if line.startswith("ATOM") and line[16] in " A":
                key = (line[21], int(line[22:26]), line[26])
                rows.setdefault(key, {})[line[12:16].strip()] = [
                    float(line[30:38]),
                    float(line[38:46]),
                    float(line[46:54]),
                ]
    return rows


def test_virtual_cb_close_to_real_cb_and_neighbour_counts(shared_data_dir):
    path = shared_data_dir / "protein/mdanalysistests_dssp/1ahsA.pdb.gz"
    atoms = _read_pdb_atoms(path)
    res = [r for r in atoms.values() if all(a in r for a in ("N", "CA", "C", "O", "CB"))]
    X = np.array([[r["N"], r["CA"], r["C"], r["O"]] for r in res], np.float32)
    cb_real = np.array([r["CB"] for r in res])
    cb = np.asarray(fp.virtual_cb(jnp.asarray(X)))
    dev = np.linalg.norm(cb - cb_real, axis=-1)
    assert np.median(dev) < 0.3 and np.mean(np.linalg.norm(cb - X[:, 1], axis=-1)) == pytest.approx(
        1.52, abs=0.05
    )
    # Neighbour counts equal a brute-force double loop (with one residue masked).
    mask = np.ones(len(X), np.float32)
    mask[3] = 0
    counts = np.asarray(fp.cb_neighbor_counts(jnp.asarray(X), jnp.asarray(mask), 10.0))
    brute = np.zeros(len(X))
    for i in range(len(X)):
        for j in range(len(X)):
            if i != j and mask[i] and mask[j] and np.linalg.norm(cb[i] - cb[j]) < 10.0:
                brute[i] += 1
    np.testing.assert_allclose(counts, brute)


def test_secondary_structure_ideal_helix_and_dssp_agreement(shared_data_dir):
    # Ideal alpha helix CA trace: radius 2.3 Å, rise 1.5 Å, 100 degrees per residue.
    n = 20
    t = np.deg2rad(100.0) * np.arange(n)
    X = np.zeros((n, 4, 3), np.float32)
    X[:, 1] = np.stack([2.3 * np.cos(t), 2.3 * np.sin(t), 1.5 * np.arange(n)], -1)
    sse = fp.secondary_structure(X, np.ones(n))
    assert np.mean(sse[2:-2] == 0) > 0.9
    # Extended strand CA trace (3.3 Å per residue, zig-zag) is not helix.
    Xs = np.zeros((n, 4, 3), np.float32)
    Xs[:, 1] = np.stack([3.3 * np.arange(n), 0.9 * (-1.0) ** np.arange(n), np.zeros(n)], -1)
    assert np.mean(fp.secondary_structure(Xs, np.ones(n)) == 0) == 0.0
    # Agreement with the shipped 3-state DSSP strings on real chains.
    agree = []
    for name in ("1ahsA", "1bvyF", "1eteA"):
        p = fp.load_structure(shared_data_dir / f"protein/mdanalysistests_dssp/{name}.pdb.gz")
        ref = (
            (shared_data_dir / f"protein/mdanalysistests_dssp/{name}.pdb.dssp")
            .read_text()
            .split()[0]
        )
        assert len(ref) == p.length
        codes = fp.secondary_structure(p.X, p.mask, p.chain_encoding, p.residue_idx)
        ref_codes = np.array([{"H": 0, "E": 1}.get(c, 2) for c in ref])
        agree.append(np.mean(codes == ref_codes))
    assert np.mean(agree) > 0.7
