"""``fidia-jax proteinmpnn sample --pdb-dir`` (many backbones) as 2 real processes (2 CPU
devices each, gloo) against 1 process: process ``p`` samples backbones ``p::2``, process 0
gathers the summaries in input order and alone writes every file. The files must be the same
as one process's, byte for byte apart from the timings and the output folder's name (the same
seed, model and program per backbone, so the same samples and scores, exactly); a failing
structure's error row is gathered too.
"""

from __future__ import annotations

import gzip
import json
import pathlib
import shutil
import subprocess
import sys

import pytest

from fidia_jax.protein import default_backbone_path

pytestmark = pytest.mark.integration


def _structures(d: pathlib.Path) -> None:
    import biotite.structure.io.pdbx as pdbx
    from biotite.structure.io import pdb as bpdb

    d.mkdir()
    shutil.copy(default_backbone_path(), d / "full.cif.gz")
    with gzip.open(default_backbone_path(), "rt") as fh:
        atoms = pdbx.get_structure(pdbx.CIFFile.read(fh), model=1)
    atoms = atoms[atoms.hetero == False]  # noqa: E712
    for name, lo, hi in (("crop52", 1, 52), ("crop49", 5, 53), ("crop40", 10, 49)):
        f = bpdb.PDBFile()
        f.set_structure(atoms[(atoms.res_id >= lo) & (atoms.res_id <= hi)])
        f.write(str(d / f"{name}.pdb"))
    (d / "bad.pdb").write_text("this is not a structure\n")


def _strip(text: str, out: pathlib.Path) -> str:
    return text.replace(str(out), "OUT")


def _summary(path: pathlib.Path, out: pathlib.Path) -> dict:
    s = json.loads(_strip(path.read_text(), out))
    s.pop("timing_s", None)
    return s


def test_many_backbones_split_over_two_processes(multiprocess, single_process_env, tmp_path):
    d = tmp_path / "in"
    _structures(d)
    two, one = tmp_path / "two", tmp_path / "one"
    cli = ["-m", "fidia_jax", "proteinmpnn", "sample", "--pdb-dir", d, "--num-samples", "2"]
    p0, p1 = multiprocess([*cli, "--out", two], n=2, devices=2, timeout=300, grace=60,
                          expect_ok=False)  # fmt: skip
    assert (p0.code, p1.code) == (2, 2), (p0.stderr[-2000:], p1.stderr[-2000:])  # "bad" failed
    assert "process 1/2 done (2 of 5 backbones)" in p1.stderr
    assert "backbones sampled" in p0.stdout + p0.stderr
    assert "backbones sampled" not in p1.stdout + p1.stderr
    subprocess.run([sys.executable, *map(str, cli), "--out", str(one)], env=single_process_env,
                   timeout=300, capture_output=True)  # fmt: skip

    names = ["bad", "crop40", "crop49", "crop52", "full"]
    assert sorted(p.name for p in two.iterdir()) == sorted(p.name for p in one.iterdir())
    top2, top1 = _summary(two / "summary.json", two), _summary(one / "summary.json", one)
    assert [r["name"] for r in top2["backbones"]] == names  # input (file name) order
    assert top2 == top1
    assert _strip((two / "summary.tsv").read_text(), two) == _strip(
        (one / "summary.tsv").read_text(), one
    )
    for n in names[1:]:
        assert (two / n / "samples.fasta").read_bytes() == (one / n / "samples.fasta").read_bytes()
        assert _summary(two / n / "summary.json", two) == _summary(one / n / "summary.json", one)
