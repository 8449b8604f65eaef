"""``benchmarks/fidia_step_time.py`` checks what it measures by the sources' digest, not their
path: an installed copy of the same sources passes, a changed copy does not."""

import pathlib
import shutil

from _scripts import load_script

ROOT = pathlib.Path(__file__).resolve().parents[3]


def _bench():
    return load_script("benchmarks/fidia_step_time.py")


def test_digest_follows_contents_not_paths(tmp_path):
    bench = _bench()
    src = ROOT / "fidia_jax" / "projects" / "fidia"
    copy = tmp_path / "site-packages" / "fidia"
    shutil.copytree(src, copy, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "__pycache__").mkdir(exist_ok=True)
    (copy / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"compiled")
    assert bench.package_digest(copy) == bench.package_digest(src)
    (copy / "_fold.py").write_text((copy / "_fold.py").read_text() + "\n# changed\n")
    assert bench.package_digest(copy) != bench.package_digest(src)
    (copy / "_fold.py").rename(copy / "_fold2.py")  # same bytes, another name
    assert bench.package_digest(copy) != bench.package_digest(src)
