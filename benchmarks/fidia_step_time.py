"""Wall time of one FIDIA training step, this tree against an earlier commit, in the same run.

The step (rollout, composite rewards with the judge ensemble, one adamw update) of the ``small``
preset is timed in a fresh process per version: the earlier commit is unpacked with
``git archive`` into a temporary folder and imported from there (``PYTHONPATH``), this tree is
imported as installed (an editable install, a checkout on the path, or an installed copy of the
same sources: each process checks that the sources it imported hash to those it should measure,
:func:`package_digest`). Versions alternate (before, after, before, after, ...) so that a change in
the machine's load hits both. Each process builds a :class:`fidia_jax.projects.fidia.Trainer`,
runs ``--warmup`` steps (every training backbone once, so every shape is compiled), then times
``--steps`` steps and reports the median step and the median of each phase (``update``
includes the reference's forward program where the trainer has one, ``Trainer._reference``).

Usage (2-core CPU, about 2 min per process)::

  FIDIA_DATA_DIR=../shared/data python benchmarks/fidia_step_time.py --before cad6f13
  python benchmarks/fidia_step_time.py --before cad6f13 --repeats 3 --method grpo

Writes ``benchmarks/results/fidia_step_time.json`` through ``benchmarks/_results.py`` (the
command, date, machine, commit and load average; table ``step_time``: min / median / max over
every timed step of each version, and the speed-up of the medians), with the raw runs.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import pathlib
import statistics
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

from _peers import run_command  # noqa: E402
from _results import load_average, write_results  # noqa: E402

PHASES = ("rollout", "rewards", "update")


def package_digest(package: pathlib.Path) -> str:
    """sha256 over the package's ``.py`` files (relative path and bytes, sorted): what the
    measured code is, wherever it was imported from (a checkout, an unpacked commit, or an
    installed copy of the same sources)."""
    h = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        h.update(path.relative_to(package).as_posix().encode() + b"\0")
        h.update(path.read_bytes() + b"\0")
    return h.hexdigest()


def _child(args) -> None:
    """Runs in the measured interpreter: prints one JSON line of timings."""
    import jax

    import fidia_jax
    from fidia_jax.projects import fidia
    from fidia_jax.projects.fidia.train import Trainer

    cfg = fidia.override_config(fidia.get_config(args.config), [f"method={args.method}"])
    t0 = time.perf_counter()
    trainer = Trainer(cfg)
    build = time.perf_counter() - t0
    spent = {}

    def timed(name, fn):
        def run(*a, **k):
            t = time.perf_counter()
            out = jax.block_until_ready(fn(*a, **k))
            spent[name] = spent.get(name, 0.0) + time.perf_counter() - t
            return out

        return run

    trainer.rollout = timed("rollout", trainer.rollout)
    trainer.rewards = timed("rewards", trainer.rewards)
    trainer._update = timed("update", trainer._update)
    if hasattr(trainer, "_reference"):  # since 2026-12-05 the reference's forward, once per
        trainer._reference = timed("update", trainer._reference)  # step, counts as the update's
    state = trainer.init_state()
    t0 = time.perf_counter()
    for _ in range(args.warmup):
        state, _ = trainer.step(state)
    warm = time.perf_counter() - t0
    steps = []
    for _ in range(args.steps):
        spent.clear()
        t = time.perf_counter()
        state, _ = trainer.step(state)
        steps.append({"step": time.perf_counter() - t, **spent})
    module = pathlib.Path(fidia_jax.__file__).resolve()
    record = {
        "module": str(module),
        "digest": package_digest(module.parent),
        "build_s": build,
        "warmup_s": warm,
        "steps": steps,
    }
    print(json.dumps(record))


def _measure(tree: pathlib.Path | None, args) -> dict:
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = str(tree) + os.pathsep + env.get("PYTHONPATH", "")
    cmd = [
        sys.executable,
        str(pathlib.Path(__file__).resolve()),
        "--child",
        "--config",
        args.config,
        "--method",
        args.method,
        "--warmup",
        str(args.warmup),
        "--steps",
        str(args.steps),
    ]
    stdout = run_command(cmd, name="measured step", env=env, cwd=REPO).decode()
    out = json.loads(stdout.strip().splitlines()[-1])
    # The guard compares the imported sources with the intended ones, not their paths: an
    # installed copy of this very tree is fine, another version of fidia_jax is not.
    expected = (tree if tree is not None else REPO) / "fidia_jax"
    if out["digest"] != package_digest(expected):
        raise SystemExit(
            f"measured {out['module']}, whose sources differ from {expected} "
            "(another fidia_jax shadows the one to measure: check PYTHONPATH / the install)"
        )
    return out


def _summary(runs: list[dict]) -> dict:
    steps = [s for r in runs for s in r["steps"]]
    out = {"n_steps": len(steps), "warmup_s": statistics.median(r["warmup_s"] for r in runs)}
    for p in ("step",) + PHASES:
        xs = [s.get(p, 0.0) for s in steps]
        out[f"{p}_s"] = statistics.median(xs)
        out[f"{p}_min_s"], out[f"{p}_max_s"] = min(xs), max(xs)
    return out


def step_table(before: dict, after: dict, before_label: str, after_label: str) -> dict:
    """The ``step_time`` table: per phase, each version's min / median / max seconds over its
    timed steps and the ratio of the medians (before / after: above 1, this tree is faster)."""
    rows = []
    for key in ("step",) + PHASES:
        b, a = before, after
        rows.append([key, b[f"{key}_min_s"], b[f"{key}_s"], b[f"{key}_max_s"],
                     a[f"{key}_min_s"], a[f"{key}_s"], a[f"{key}_max_s"],
                     b[f"{key}_s"] / a[f"{key}_s"]])  # fmt: skip
    cols = ["phase"]
    for label in (before_label, after_label):
        cols += [f"{label} min s", f"{label} median s", f"{label} max s"]
    cols.append("speed-up (medians)")
    return {"columns": cols, "rows": rows,
            "formats": [None, ".3f", ".3f", ".3f", ".3f", ".3f", ".3f", ".2f"]}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", default="cad6f13", help="git revision measured as 'before'")
    ap.add_argument("--config", default="small")
    ap.add_argument("--method", default="fidia")
    ap.add_argument("--warmup", type=int, default=5, help="untimed steps (compilation)")
    ap.add_argument("--steps", type=int, default=8, help="timed steps per process")
    ap.add_argument("--repeats", type=int, default=2, help="processes per version")
    ap.add_argument("--out", default=str(HERE / "results" / "fidia_step_time.json"))
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return _child(args)
    if "FIDIA_DATA_DIR" not in os.environ:
        raise SystemExit("set FIDIA_DATA_DIR to the shared data folder (../shared/data)")
    load_start = load_average()

    def git(*a):
        return run_command(["git", *a], name="git", cwd=REPO)

    rev = git("rev-parse", "--short", args.before).decode().strip()
    head = git("rev-parse", "--short", "HEAD").decode().strip()
    dirty = bool(git("status", "--porcelain", "fidia_jax").strip())
    runs = {"before": [], "after": []}
    with tempfile.TemporaryDirectory() as tmp:
        tree = pathlib.Path(tmp)
        run_command(
            ["tar", "-x", "-C", str(tree)], name="tar", input=git("archive", rev, "fidia_jax")
        )
        for i in range(args.repeats):
            for label, where in (("before", tree), ("after", None)):
                res = _measure(where, args)
                runs[label].append(res)
                print(
                    f"[{i + 1}/{args.repeats}] {label}: median step "
                    f"{statistics.median(s['step'] for s in res['steps']):.2f} s",
                    flush=True,
                )
    before, after = _summary(runs["before"]), _summary(runs["after"])
    after_label = f"this tree ({head}{'+dirty' if dirty else ''})"
    table = step_table(before, after, f"before ({rev})", after_label)
    print(
        f"\nFIDIA step, preset {args.config!r}, method {args.method}: {before['n_steps']} steps "
        f"per version ({args.repeats} processes each)"
    )
    print(" | ".join(table["columns"]))
    for row in table["rows"]:
        print(" | ".join(c if isinstance(c, str) else f"{c:.3f}" for c in row))
    extra = {"before_rev": rev, "after_rev": head, "after_dirty": dirty, "config": args.config,
             "method": args.method, "before": before, "after": after,
             "speedup": before["step_s"] / after["step_s"], "runs": runs}  # fmt: skip
    out = write_results("fidia_step_time", {"step_time": table}, load_start=load_start,
                        extra=extra, out=args.out)  # fmt: skip
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
