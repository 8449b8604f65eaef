"""The start-up cache of ``fidia-jax proteinmpnn sample`` (parsed structure, weights as arrays,
compiled sampler): a cached run draws what an uncached run draws, bitwise; a warm run loads no
model; a corrupt entry is rebuilt; a changed file is a miss."""

from __future__ import annotations

import logging
import os
import shutil

import numpy as np
import pytest

from fidia_jax.projects.proteinmpnn import _startup, design
from fidia_jax.projects.proteinmpnn._structure_cache import load_structure_cached
from fidia_jax.projects.proteinmpnn.design import run_sample
from fidia_jax.protein import load_structure

# 5PTI (58 residues) is padded to 64 slots by --bucket 64, as the CLI does
RUN = dict(num_samples=2, seed=3, fixed="A10-20", temperature="0.1,0.3", bucket=64, write=False,
           quiet=True)  # fmt: skip


def _draws(summary) -> list:
    """What a run drew and scored (everything but the timings)."""
    rows = [(s["sequence"], s["score"], s["global_score"], s["recovery"], s["temperature"])
            for s in summary["samples"]]  # fmt: skip
    return [rows, summary["native_score"], summary["native_global_score"]]


@pytest.fixture(scope="module")
def runs(tmp_path_factory, model):
    """A cold run on a cache directory, an uncached run (the model given), a warm run."""
    cache = tmp_path_factory.mktemp("startup") / "cache"
    cold = run_sample(None, cache_dir=cache, **RUN)
    ref = run_sample(None, model=model, **RUN)
    warm = run_sample(None, cache_dir=cache, **RUN)
    return ref, cold, warm, cache


def test_cached_runs_draw_what_the_uncached_run_draws(runs):
    ref, cold, warm, cache = runs
    assert _draws(cold) == _draws(ref)
    assert _draws(warm) == _draws(ref)
    kinds = sorted(p.name.rsplit("-", 1)[0] for p in cache.iterdir())
    assert kinds == ["mpnn-sampler", "mpnn-structure", "mpnn-weights"]  # one program, two T


def test_warm_run_loads_no_model(runs, monkeypatch):
    ref, _, _, cache = runs

    def no_model(*a, **k):
        raise AssertionError("a warm run must not load the model")

    monkeypatch.setattr(design, "load_model", no_model)
    assert _draws(run_sample(None, cache_dir=cache, **RUN)) == _draws(ref)


def _corrupt(cache, mine, kinds) -> None:
    """``mine`` = a copy of ``cache`` whose entries of ``kinds`` have truncated data files."""
    shutil.copytree(cache, mine)
    for entry in mine.iterdir():
        if entry.name.rsplit("-", 1)[0] in kinds:
            for f in entry.iterdir():
                if f.name != "manifest.json":
                    f.write_bytes(f.read_bytes()[:100])


def _rebuilt(mine, ref, count) -> None:
    """A run on ``mine`` warns ``count`` times and rebuilds; the next one reads it silently."""
    import warnings

    with pytest.warns(UserWarning, match="corrupt or partial") as caught:
        assert _draws(run_sample(None, cache_dir=mine, **RUN)) == _draws(ref)
    assert len([w for w in caught if "corrupt or partial" in str(w.message)]) == count
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _draws(run_sample(None, cache_dir=mine, **RUN)) == _draws(ref)


def test_corrupt_structure_and_weights_entries_are_rebuilt(runs, tmp_path):
    ref, _, _, cache = runs
    _corrupt(cache, tmp_path / "cache", ("mpnn-structure", "mpnn-weights"))
    _rebuilt(tmp_path / "cache", ref, 2)


def test_corrupt_sampler_entry_is_rebuilt(runs, tmp_path):
    ref, _, _, cache = runs
    _corrupt(cache, tmp_path / "cache", ("mpnn-sampler",))
    _rebuilt(tmp_path / "cache", ref, 1)


def _pdb(path, shift=0.0, duplicate=False, no_o=False) -> None:
    """Three glycines of chain A (residue 2 again at the end with ``duplicate``), x shifted by
    ``shift``; without the O of residue 3 with ``no_o``."""
    lines, serial = [], 0
    residues = [1, 2, 3, 2] if duplicate else [1, 2, 3]
    for k, resi in enumerate(residues):
        for j, name in enumerate(("N", "CA", "C", "O")):
            if no_o and resi == 3 and name == "O":
                continue
            serial += 1
            x = (3.8 * k + 0.5 * j + shift, 0.3 * j, 0.1 * j)
            lines.append(f"ATOM  {serial:>5}  {name:<3} GLY A{resi:>4}    "
                         f"{x[0]:>8.3f}{x[1]:>8.3f}{x[2]:>8.3f}  1.00 10.00           {name[0]}")  # fmt: skip
    path.write_text("\n".join(lines) + "\nEND\n")


def _same(a, b) -> bool:
    fields = ("X", "mask", "S", "residue_idx", "chain_encoding", "chain_id", "resnum", "icode")
    return all(np.array_equal(getattr(a, f), getattr(b, f)) for f in fields) and (
        a.chain_order, a.source, a.missing) == (b.chain_order, b.source, b.missing)  # fmt: skip


def test_structure_hit_equals_parse_and_a_changed_file_is_a_miss(tmp_path):
    pdb, cache = tmp_path / "x.pdb", tmp_path / "cache"
    _pdb(pdb)
    first = load_structure_cached(pdb, "A", cache_dir=cache)
    assert _same(first, load_structure(pdb, "A"))
    assert _same(load_structure_cached(pdb, "A", cache_dir=cache), first)  # a hit
    st = os.stat(pdb)
    _pdb(pdb, shift=1.0)  # same size; the same modification time restored
    os.utime(pdb, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert os.path.getsize(pdb) == st.st_size
    moved = load_structure_cached(pdb, "A", cache_dir=cache)
    assert np.allclose(moved.X[:, :, 0], first.X[:, :, 0] + 1.0)
    assert _same(moved, load_structure(pdb, "A"))
    # another option is another entry
    ca = load_structure_cached(pdb, "A", ca_only=True, cache_dir=cache)
    assert _same(ca, load_structure(pdb, "A", ca_only=True))
    assert len(list(cache.glob("mpnn-structure-*"))) == 3


def test_structure_hit_repeats_the_warnings_and_log_lines(tmp_path, caplog):
    pdb, cache = tmp_path / "dup.pdb", tmp_path / "cache"
    _pdb(pdb, duplicate=True, no_o=True)
    caplog.set_level(logging.INFO, logger="fidia_jax.protein._structure")
    for _ in range(2):  # the parse, then the hit
        caplog.clear()
        with pytest.warns(UserWarning, match=r"dup.pdb: residue ID\(s\) occurring more than once"):
            p = load_structure_cached(pdb, None, cache_dir=cache)
        assert p.length == 3 and p.missing == ("A3",)
        logged = [r for r in caplog.records if "missing backbone atoms" in r.getMessage()]
        assert len(logged) == 1 and logged[0].levelno == logging.WARNING
        assert str(pdb) in logged[0].getMessage()
    assert len(list(cache.glob("mpnn-structure-*"))) == 1


def test_missing_file_is_not_cached(tmp_path):
    from fidia_jax.errors import StructureError

    with pytest.raises(StructureError):
        load_structure_cached(tmp_path / "none.pdb", cache_dir=tmp_path / "cache")
    assert not (tmp_path / "cache").exists()


def test_cache_dir_from_env(tmp_path):
    f = _startup.cache_dir_from_env
    assert f({"FIDIA_MPNN_CACHE": "off", "FIDIA_COMPILATION_CACHE": "/x"}) is None
    assert f({"FIDIA_MPNN_CACHE": "/m"}) == "/m"
    assert f({"FIDIA_COMPILATION_CACHE": "off"}) is None  # as in the tests
    assert f({"FIDIA_COMPILATION_CACHE": "/j"}) == os.path.join("/j", "proteinmpnn")
    assert f({"XDG_CACHE_HOME": "/c"}) == os.path.join("/c", "fidia_jax", "proteinmpnn")
    assert f({"FIDIA_CACHE_DIR": "/d"}) == os.path.join("/d", "proteinmpnn")


def test_weights_entry_follows_the_file(tmp_path, model):
    import jax
    from flax import nnx

    from fidia_jax.models.proteinmpnn import checkpoint_path

    pt = tmp_path / "mine.pt"
    shutil.copyfile(checkpoint_path("v_48_020"), pt)
    cache = tmp_path / "cache"
    a = _startup.open_sampler(cache, str(pt), "vanilla", design.load_model)
    want = jax.tree.leaves(nnx.split(model)[1])
    assert all(np.array_equal(x, np.asarray(y)) for x, y in zip(a.leaves, want, strict=True))
    first = list(cache.glob("mpnn-weights-*"))
    os.utime(pt, ns=(os.stat(pt).st_atime_ns, os.stat(pt).st_mtime_ns + 10**9))
    b = _startup.open_sampler(cache, str(pt), "vanilla", design.load_model)
    second = list(cache.glob("mpnn-weights-*"))
    assert len(first) == len(second) == 1 and first != second  # the old entry is dropped
    assert all(np.array_equal(x, y) for x, y in zip(a.leaves, b.leaves, strict=True))
