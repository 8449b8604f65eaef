"""What a process pays to import jax, with this environment's ml_dtypes and with ml_dtypes 0.7.0.

Every ``fidia-jax`` command, every test worker and every notebook kernel imports jax, and jax
imports ml_dtypes. ml_dtypes 0.7.0 registers its NumPy ufunc loops one by one, and NumPy's
``PyUFunc_AddLoop`` scans the loops already registered on each call, so the extension's
initialisation alone takes ~0.7 s of CPU (``perf``: ``PyUFunc_AddLoop`` / ``PyObject_RichCompare``);
0.6.0 takes ~0.05 s. fidia_jax therefore requires ``ml_dtypes!=0.7.0`` (``pyproject.toml``).

The peer is a throwaway venv with the same jax, jaxlib and NumPy and ml_dtypes 0.7.0
(``--make-peer-venv DIR`` builds it). Each round runs, in fresh interpreters and alternating the
two environments, ``python -c "import ml_dtypes"`` and ``python -c "import jax"``; CPU seconds
(user + system of the child) and wall seconds, min / median / max over the rounds, and the ratio
of the medians (peer / this environment).

    python benchmarks/import_cost.py --make-peer-venv /tmp/peer_ml_dtypes_070
    python benchmarks/import_cost.py --mldtypes07-python /tmp/peer_ml_dtypes_070/bin/python

Writes ``benchmarks/results/import_cost.json`` (``_results``: the table ``imports``).
"""

from __future__ import annotations

import argparse
import pathlib
import statistics
import sys

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import _peers  # noqa: E402
from _results import load_average, write_results  # noqa: E402

STATEMENTS = ("import ml_dtypes", "import jax")
VERSION = "import importlib.metadata as m; print(m.version('ml_dtypes'))"


def _versions() -> list[str]:
    import importlib.metadata as m

    return [f"{p}=={m.version(p)}" for p in ("jax", "jaxlib", "numpy")]


def _time(python: str, statement: str) -> tuple[float, float]:
    """(CPU s, wall s) of one fresh ``python -c statement``."""
    run = _peers.run_timed_checked([python, "-c", statement])
    return run.cpu_s, run.end - run.start


def measure(envs: dict[str, str], rounds: int) -> dict:
    """``{env: {statement: {"cpu": [...], "wall": [...]}}}``, environments alternating."""
    out = {e: {s: {"cpu": [], "wall": []} for s in STATEMENTS} for e in envs}
    for r in range(rounds):
        for env, python in envs.items() if r % 2 == 0 else reversed(envs.items()):
            for s in STATEMENTS:
                cpu, wall = _time(python, s)
                out[env][s]["cpu"].append(cpu)
                out[env][s]["wall"].append(wall)
                print(f"round {r}: {env:>24s}  {s:18s} {cpu:.3f} CPU s  {wall:.3f} s", flush=True)
    return out


def table(raw: dict, this: str) -> dict:
    rows = []
    for s in STATEMENTS:
        base = statistics.median(raw[this][s]["cpu"])
        base_wall = statistics.median(raw[this][s]["wall"])
        for env, by in raw.items():
            cpu, wall = by[s]["cpu"], by[s]["wall"]
            rows.append([f"`{s}`", env, min(cpu), statistics.median(cpu), max(cpu),
                         statistics.median(wall), statistics.median(cpu) / base,
                         statistics.median(wall) / base_wall])  # fmt: skip
    return {
        "columns": ["statement", "environment", "CPU s min", "CPU s median", "CPU s max",
                    "wall s median", "CPU vs this env (medians)", "wall vs this env (medians)"],
        "rows": rows,
        "formats": [None, None, ".3f", ".3f", ".3f", ".3f", ".2f", ".2f"],
    }  # fmt: skip


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mldtypes07-python", help="a venv's python with ml_dtypes 0.7.0")
    ap.add_argument("--make-peer-venv", metavar="DIR", help="build that venv at DIR, then exit")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--out", default=str(HERE / "results" / "import_cost.json"))
    args = ap.parse_args(argv)
    if args.make_peer_venv:
        python = _peers.make_venv(args.make_peer_venv, [*_versions(), "ml_dtypes==0.7.0"])
        print(f"peer venv ready: {python}")
        return 0
    load_start = load_average()
    envs = {}
    for python in (sys.executable, args.mldtypes07_python):
        if python:
            version = _peers.run_command([python, "-c", VERSION]).decode().strip()
            envs[f"ml_dtypes {version}" + (" (this env)" if python == sys.executable else "")] = (
                python
            )
    if len(envs) < 2:
        print("no peer (--mldtypes07-python): this environment only", file=sys.stderr)
    this = next(iter(envs))
    raw = measure(envs, args.rounds)
    t = table(raw, this)
    for row in t["rows"]:
        print(" | ".join(f"{v:.3f}" if isinstance(v, float) else str(v) for v in row))
    path = write_results("import_cost", {"imports": t}, load_start=load_start,
                         extra={"raw": raw, "environments": envs, "rounds": args.rounds},
                         out=args.out)  # fmt: skip
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
