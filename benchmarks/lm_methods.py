"""The LM methods on a released checkpoint: load time, silences and figures (issue 39).

Runs each method's ``checkpoint=`` mode through the command line, one child process after the
other, and reads the child's merged stdout and stderr line by line as the lines arrive
(``benchmarks/_peers.py`` :func:`run_timestamped`, monotonic clock). Per method it records:

- the total wall time and the child's CPU seconds (``getrusage(RUSAGE_CHILDREN)``);
- the longest silence: the largest gap between the start and the first line, between two
  consecutive lines, or between the last line and the exit, and the line before it;
- the load time: from the arrival of the first loading line (``loading the tokenizer`` /
  ``reading the tokenizer`` / ``load_gguf`` ...) to the arrival of the line that ends the weights
  stage (``loading the weights of ...: done in``), and the seconds the loader's own ``loaded from
  cache ... in N s`` lines report (model and tokenizer together);
- whether every figure the method's page promises is in the run's workdir afterwards;
- the exit status and the 1-minute load average at the start and at the end.

The goal (issue 39): the second run of any LM method on Gemma 3 270M spends under 15 s loading,
is never silent for more than 10 s, and writes its figure. The conversion cache must be warm
(a first load of the file, e.g. by ``benchmarks/lm_load.py`` or any method, fills it).

Usage::

    nice -n 10 python benchmarks/lm_methods.py PATH.gguf --quick [--only dycon,algotrace]

``PATH`` defaults to ``$FIDIA_GEMMA3_GGUF``. ``--quick`` takes the smallest settings (few traces,
documents, sequences or records); without it each method runs with the settings of its page's
example. ``benchmarks/results/lm_methods.json`` keeps one row per method: a run of some methods
(``--only``) replaces their rows and keeps the others'.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import re
import sys
import tempfile

import _peers
import _results

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent
NAME = "lm_methods"
GOAL_LOAD_S = 15.0
GOAL_SILENCE_S = 10.0

# Per method: the CLI verb, the figures its page promises, its settings (page example / quick).
METHODS: dict[str, dict] = {
    "dycon": {
        "argv": ["dycon", "train"],
        "figures": ["dycon_tradeoff.png"],
        "full": {"checkpoint_traces": "60"},
        "quick": {"checkpoint_traces": "8"},
    },
    "algotrace": {
        "argv": ["algotrace", "train"],
        "figures": ["algotrace_clusters.png", "algotrace_injection.png"],
        "full": {"checkpoint_max_seq_len": "256"},
        "quick": {
            "checkpoint_max_seq_len": "256",
            "checkpoint_docs": "4",
            "checkpoint_shots": "1",
            "checkpoint_ie_docs": "1",
            "checkpoint_prompts": "2",
            "checkpoint_new_tokens": "8",
        },
    },
    "residual_geometry": {
        "argv": ["residual_geometry", "train"],
        "figures": ["residual_geometry.png"],
        "full": {"checkpoint_sequences": "8", "checkpoint_layers": "[0,3,6,9,12,15,17]"},
        "quick": {
            "checkpoint_sequences": "4",
            "checkpoint_tokens": "32",
            "checkpoint_max_seq_len": "64",
            "checkpoint_layers": "[0,8,17]",
        },
    },
    "safesci": {
        "argv": ["safesci", "evaluate"],
        "figures": ["safesci_disciplines.png"],
        "full": {"model": "checkpoint"},
        "quick": {"model": "checkpoint", "llm_max_new_tokens": "8"},
        # quick: these records of the bundled fixture (one choice item, two true/false, one
        # refusal request), written to the workdir and given as data_path
        "quick_records": [0, 25, 29, 34],
    },
}
SAFESCI_FIXTURE = ROOT / "tests" / "data" / "safesci" / "benign.jsonl"

LOAD_START = re.compile(
    r"loading the tokenizer|reading the tokenizer|load_tokenizer:|load_gguf:|"
    r"loading the weights of"
)
LOAD_END = re.compile(r"loading the weights of .*done in")
CACHE_HIT = re.compile(r"loaded from cache .* in ([0-9.]+) s")


def longest_gap(start: float, lines, end: float) -> tuple[float, str, float]:
    """The longest silence of a run: ``(seconds, the line before it, its start since start)``.

    Args:
      start: when the process started; ``lines``: ``(arrival time, text)`` in order; ``end``:
        when it exited (all on one clock, seconds).

    The line before the gap is ``"(start)"`` for the silence before the first line; the silence
    after the last line is attributed to that line (``"(no output)"`` when there is none).
    """
    best, where, at = -1.0, "(no output)", 0.0
    prev_t, prev_text = start, "(start)"
    for t, text in [*lines, (end, None)]:
        if t - prev_t > best:
            best, where, at = t - prev_t, prev_text, prev_t - start
        if text is not None:
            prev_t, prev_text = t, text
    return max(best, 0.0), where, at


def load_time(lines) -> dict:
    """The load stage of a run from its timestamped lines.

    Returns ``{"load_s", "from", "to", "cache_s"}``: ``load_s`` from the arrival of the first
    line matching :data:`LOAD_START` to that of the last ``loading the weights of ...: done in``
    line after it (else of the line after the last ``loaded from cache`` line; ``None`` when
    neither is found); ``cache_s`` the sum of the seconds the ``loaded from cache ... in N s``
    lines report (``None`` when there are none).
    """
    i0 = next((i for i, (_, s) in enumerate(lines) if LOAD_START.search(s)), None)
    hits = [float(m[1]) for _, s in lines if (m := CACHE_HIT.search(s))]
    out = {
        "load_s": None,
        "from": None,
        "to": None,
        "cache_s": round(sum(hits), 2) if hits else None,
    }
    if i0 is None:
        return out
    ends = [i for i in range(i0, len(lines)) if LOAD_END.search(lines[i][1])]
    if ends:
        i1 = ends[-1]
    else:
        cached = [i for i in range(i0, len(lines)) if CACHE_HIT.search(lines[i][1])]
        if not cached or cached[-1] + 1 >= len(lines):
            return out
        i1 = cached[-1] + 1
    out.update(
        load_s=round(lines[i1][0] - lines[i0][0], 2), **{"from": lines[i0][1], "to": lines[i1][1]}
    )
    return out


def goal_verdict(load_s, silence_s, figures_ok: bool, rc: int) -> str:
    """``"met"`` or ``"not met: <reasons>"`` for the issue's goal."""
    why = []
    if rc != 0:
        why.append(f"exit {rc}")
    if load_s is None:
        why.append("load not found")
    elif load_s >= GOAL_LOAD_S:
        why.append(f"load >= {GOAL_LOAD_S:g} s")
    if silence_s > GOAL_SILENCE_S:
        why.append(f"silence > {GOAL_SILENCE_S:g} s")
    if not figures_ok:
        why.append("figure missing")
    return "met" if not why else "not met: " + ", ".join(why)


def _short(text: str, n: int = 100) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def settings_of(method: str, quick: bool, path: str, workdir: pathlib.Path) -> dict[str, str]:
    spec = METHODS[method]
    sets = {"checkpoint": path, **spec["quick" if quick else "full"]}
    if quick and "quick_records" in spec:
        records = SAFESCI_FIXTURE.read_text().splitlines()
        data = workdir / "records.jsonl"
        data.write_text("".join(records[i] + "\n" for i in spec["quick_records"]))
        sets["data_path"] = str(data)
    return sets


def run_method(method: str, path: str, quick: bool, workdir: pathlib.Path) -> dict:
    workdir.mkdir(parents=True, exist_ok=True)
    sets = settings_of(method, quick, path, workdir)
    cmd = [sys.executable, "-m", "fidia_jax", *METHODS[method]["argv"], "--workdir", str(workdir)]
    for k, v in sets.items():
        cmd += ["--set", f"{k}={v}"]
    env = dict(os.environ, PYTHONUNBUFFERED="1", COLUMNS="400")
    env.pop("FIDIA_QUIET", None)
    env.pop("FIDIA_LM_CACHE", None)
    print(f"== {method}: {' '.join(cmd)}", file=sys.stderr, flush=True)
    load0 = _results.load_average()
    run = _peers.run_timestamped(cmd, env=env, cwd=ROOT, echo=sys.stderr)
    load1 = _results.load_average()
    gap, where, at = longest_gap(run.start, run.lines, run.end)
    load = load_time(run.lines)
    figures = {f: (workdir / f).is_file() for f in METHODS[method]["figures"]}
    shown = {k: ("PATH" if k == "checkpoint" else "RECORDS" if k == "data_path" else v)
             for k, v in sets.items()}  # fmt: skip
    return {
        "method": method,
        "command": " ".join(
            ["fidia-jax", *METHODS[method]["argv"], *(f"--set {k}={v}" for k, v in shown.items())]
        ),
        "settings": shown,
        "data_records": METHODS[method].get("quick_records") if quick else None,
        "workdir": str(workdir),
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "wall_s": round(run.end - run.start, 2),
        "cpu_s": round(run.cpu_s, 2),
        "exit": run.returncode,
        "longest_silence_s": round(gap, 2),
        "silence_after": where,
        "silence_at_s": round(at, 2),
        "load": load,
        "figures": figures,
        "load_average": f"{load0} -> {load1}",
        "goal": goal_verdict(load["load_s"], gap, all(figures.values()), run.returncode),
        "lines": [[round(t - run.start, 2), s] for t, s in run.lines],
    }


def table(runs: dict[str, dict]) -> dict:
    rows = []
    for m in METHODS:
        r = runs.get(m)
        if r is None:
            continue
        settings = " ".join(f"{k}={v}" for k, v in r["settings"].items() if k != "checkpoint")
        rows.append([
            m, settings, r["load"]["load_s"], r["load"]["cache_s"], r["longest_silence_s"],
            _short(r["silence_after"]), r["wall_s"], r["cpu_s"],
            "yes" if all(r["figures"].values()) else "no: " + ", ".join(
                f for f, ok in r["figures"].items() if not ok),
            r["exit"], r["load_average"], r["goal"],
        ])  # fmt: skip
    return {
        "columns": [
            "method",
            "settings (besides checkpoint=PATH)",
            "load s",
            "cache-reported load s",
            "longest silence s",
            "line before the longest silence",
            "wall s",
            "CPU s",
            "figure written",
            "exit",
            "load average",
            "goal (load < 15 s, silence ≤ 10 s, figure)",
        ],  # fmt: skip
        "rows": rows,
        "formats": [None, None, ".1f", ".1f", ".2f", None, ".0f", ".0f", None, None, None, None],
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("path", nargs="?", default=os.environ.get("FIDIA_GEMMA3_GGUF"))
    p.add_argument("--only", default="", help="comma-separated methods (default: all four)")
    p.add_argument("--quick", action="store_true", help="the smallest settings")
    p.add_argument(
        "--workdir-root", default=None, help="the runs' workdirs (default: a new /tmp dir)"
    )
    p.add_argument(
        "--out", default=None, help="results file (default benchmarks/results/lm_methods.json)"
    )
    args = p.parse_args(argv)
    if not args.path:
        p.error("give the GGUF path or set FIDIA_GEMMA3_GGUF")
    methods = [m for m in args.only.split(",") if m] or list(METHODS)
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        p.error(f"--only: unknown method(s) {unknown}; choose from {list(METHODS)}")
    root = pathlib.Path(args.workdir_root or tempfile.mkdtemp(prefix="fidia_lm_methods_"))
    out = pathlib.Path(args.out) if args.out else _results.RESULTS / f"{NAME}.json"
    load_start = _results.load_average()
    for m in methods:
        row = run_method(m, os.path.abspath(args.path), args.quick, root / m)
        # merge: the file keeps the other methods' rows (one row per method)
        previous = json.loads(out.read_text()) if out.is_file() else {}
        runs = {**previous.get("runs", {}), m: row}
        print(f"== {m}: {row['goal']} (load {row['load']['load_s']} s, longest silence "
              f"{row['longest_silence_s']} s after {row['silence_after']!r}, wall {row['wall_s']} s)",
              file=sys.stderr, flush=True)  # fmt: skip
        _results.write_results(
            NAME,
            {"methods": table(runs)},
            command=_results.command_line(
                [__file__, *(argv if argv is not None else sys.argv[1:])]
            ),
            load_start=load_start,
            extra={
                "what": "each LM method's checkpoint= run on the Gemma 3 270M GGUF, warm "
                "conversion cache; per method its command, timestamped output and measures "
                "(a method's row comes from its latest run: see runs[method].date)",
                "source": {"path": os.path.abspath(args.path)},
                "runs": runs,
            },
            out=out,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
