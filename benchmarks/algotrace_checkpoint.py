"""AlgoTrace on a released model (issue 26, Deliver 4): clusters, primitive vectors and injection
on Gemma 3 270M, rendered into docs/algotrace.md (section "On a released model").

Runs ``fidia-jax algotrace train --set checkpoint=PATH ...`` in this process (the CLI's own
``main``, :func:`fidia_jax.projects.algotrace.checkpoint.checkpoint_and_evaluate`) into a work
directory, reads the run's ``algotrace_checkpoint.json`` and writes
``benchmarks/results/algotrace_checkpoint.json`` through :func:`_results.write_results`: the
run's whole record (under ``run``) and the tables the page renders:

* ``run``: the protocol and sizes (documents, trace tokens, layers, prompts, timing);
* ``clustering``: k-means (k = ``n_clusters``) of the headline layer's ``resid_post`` against the
  true primitives, beside random clusters of the same sizes and the partition by token identity;
* ``per_layer``: k-means purity / NMI / ARI after every block;
* ``vectors``: each primitive vector's norm, heads, keyword token and onsets, beside the
  residual's norm where the vectors are added;
* ``injection``: the mean change of each primitive's line share per injected vector (rows: the
  5 primitive vectors and the random vector of the mean norm), with its 95 % bootstrap interval
  over the prompts;
* ``vs_random``: the vector's change of its own rate minus the random vector's change of that
  rate, paired over the prompts (95 % bootstrap interval, bootstrap P(difference <= 0));
* ``baseline``: each primitive's line share without injection;
* ``conditions``: primitive lines per prompt and prompts whose continuation writes the right path,
  per condition (none, each vector, random).

Protocol of the documented run (reduced, as on 2026-12-02; the config's defaults, named on the
command line so the record says them): seed 0, 24 documents of 2 solved examples, heads ranked
on 2 documents, 24 injection prompts, 48 greedy tokens, scale 1 at layer -1 (``n_layers // 3``,
6 on Gemma 3 270M), ``checkpoint_max_seq_len=256``.

Usage: python benchmarks/algotrace_checkpoint.py --checkpoint gemma-3-270m-q4_k_m.gguf
           [--workdir DIR] [--set key=value ...] [--out PATH]
       python benchmarks/algotrace_checkpoint.py --report [--out PATH]   # re-table, no run

(``python tools/gemma3_270m_gguf.py`` assembles ``gemma-3-270m-q4_k_m.gguf``.)
"""

from __future__ import annotations

import argparse
import pathlib
import resource
import shlex
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _results import (  # noqa: E402
    command_line,
    default_out,
    load_average,
    retable,
    run_fidia_cli,
    write_results,
)

PRIMS = ("distance", "compare", "nearest", "verify", "path")
"""The primitives in the run's order (``traces.ALGOTRACE_PRIMITIVES``; kept here so that the
tables need no import of the package)."""

PROTOCOL = (
    "checkpoint_max_seq_len=256",
    "checkpoint_docs=24",
    "checkpoint_shots=2",
    "checkpoint_ie_docs=2",
    "checkpoint_prompts=24",
    "checkpoint_new_tokens=48",
    "checkpoint_inject_layer=-1",
    "checkpoint_inject_scale=1.0",
    "seed=0",
)
"""The ``--set`` values of the documented (reduced) run, besides ``checkpoint=``."""

CONTROL_ROWS = {"random": "random clusters, same sizes (control)",
                "token_identity": "token identity (control)"}  # fmt: skip


def _ci(c: Mapping[str, Any], bold: bool = False) -> str:
    """``"+0.534 [+0.41, +0.66]"`` of a ``{"delta", "ci95"}`` cell (the delta bold if asked)."""
    d = f"{c['delta']:+.3f}"
    lo, hi = c["ci95"]
    return f"{f'**{d}**' if bold else d} [{lo:+.2f}, {hi:+.2f}]"


def _count(share: float, n: int) -> str:
    """``"2 / 24"`` of a share of ``n`` items."""
    return f"{round(share * n)} / {n}"


def tables(record: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The results file's tables from its record (``record["run"]``: the run's
    ``algotrace_checkpoint.json``); a pure function of it."""
    run = record["run"]
    cfg, cl, inj = run["config"], run["clustering"], run["injection"]
    sc = ("purity", "nmi", "ari")
    n_layers = len(cl["per_layer"])
    n = inj["n_prompts"]
    out: dict[str, dict[str, Any]] = {}
    out["run"] = {
        "columns": ["quantity", "value"],
        "rows": [
            ["checkpoint", pathlib.Path(run["checkpoint"]).name],
            ["documents x solved examples (tokens per document, at most)",
             f"{cfg['checkpoint_docs']} x {cfg['checkpoint_shots']} ({run['doc_tokens']})"],
            ["trace tokens clustered", cl["n_points"]],
            ["headline layer (resid_post after block ...)", f"{cl['layer']} of {n_layers}"],
            ["documents the heads are ranked on (attribution patching)",
             min(cfg["checkpoint_ie_docs"], cfg["checkpoint_docs"])],
            ["injection prompts x greedy tokens", f"{n} x {inj['new_tokens']}"],
            ["injection: layer (residual entering block), scale",
             f"{inj['layer']}, {inj['scale']:g}"],
            ["seed", cfg["seed"]],
            ["load / wall time (s)", f"{run['load_s']:.0f} / {run['wall_s']:.0f}"],
        ],
    }  # fmt: skip
    out["clustering"] = {
        "columns": ["partition", "purity", "NMI", "ARI"],
        "rows": [[f"k-means (k = {cfg['n_clusters']})", *(cl["kmeans"][m] for m in sc)]]
        + [[label, *(cl[k][m] for m in sc)] for k, label in CONTROL_ROWS.items()],
        "formats": [None, ".3f", ".3f", ".3f"],
    }
    out["per_layer"] = {
        "columns": ["layer (resid_post after block)", "purity", "NMI", "ARI"],
        "rows": [[i, *(a[m] for m in sc)] for i, a in enumerate(cl["per_layer"])],
        "formats": [None, ".3f", ".3f", ".3f"],
    }
    vec = run["vectors"]
    out["vectors"] = {
        "columns": ["vector", "norm", "norm / residual norm", "heads (layer.head)",
                    "keyword token", "onsets"],
        "rows": [[p, vec[p]["norm"], vec[p]["norm"] / inj["resid_norm"],
                  ", ".join(f"{lh[0]}.{lh[1]}" for lh in vec[p]["heads"]),
                  f"`{vec[p]['keyword'].strip()}`", vec[p]["onsets"]] for p in PRIMS]
        + [["random (the mean norm)", run["mean_vector_norm"],
            run["mean_vector_norm"] / inj["resid_norm"], "—", "—", "—"],
           [f"(residual entering block {inj['layer']}, mean norm)", inj["resid_norm"], 1.0,
            "—", "—", "—"]],
        "formats": [None, ".0f", ".2f", None, None, None],
    }  # fmt: skip
    out["injection"] = {
        "columns": ["vector", *PRIMS],
        "rows": [[p, *(_ci(c, bold=j == i) for j, c in enumerate(inj["table"][p]))]
                 for i, p in enumerate(PRIMS)]
        + [["random (same norm)", *(_ci(c) for c in inj["table"]["random"])]],
    }  # fmt: skip
    vs = inj["diagonal_vs_random"]
    out["vs_random"] = {
        "columns": ["primitive", "its vector's change of its rate", "random vector's change",
                    "difference", "95% CI", "P(difference <= 0)"],
        "rows": [[p, inj["table"][p][j]["delta"], inj["table"]["random"][j]["delta"],
                  vs[p]["diff"], f"[{vs[p]['ci95'][0]:+.3f}, {vs[p]['ci95'][1]:+.3f}]",
                  vs[p]["p_not_above"]] for j, p in enumerate(PRIMS)],
        "formats": [None, "+.3f", "+.3f", "+.3f", None, ".4f"],
    }  # fmt: skip
    out["baseline"] = {
        "columns": ["primitive", "share of the generated lines without injection"],
        "rows": [[p, r] for p, r in zip(PRIMS, inj["baseline_rates"], strict=True)],
        "formats": [None, ".3f"],
    }
    names = {"none": "none", **{p: p for p in PRIMS}, "random": "random (same norm)"}
    out["conditions"] = {
        "columns": ["injected vector", "primitive lines per prompt", "right paths"],
        "rows": [[names[k], inj["lines_per_prompt"][k], _count(inj["solved"][k], n)]
                 for k in names if k in inj["solved"]],
        "formats": [None, ".2f", None],
    }  # fmt: skip
    return out


def _cpu_s() -> float:
    """User + system CPU seconds of this process so far."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def cli_argv(checkpoint: str, workdir: str, assignments: Sequence[str]) -> list[str]:
    """The ``fidia-jax`` arguments of the run."""
    sets = [f"checkpoint={checkpoint}", *PROTOCOL, *assignments]
    return ["algotrace", "train", "--workdir", workdir, *(a for s in sets for a in ("--set", s))]


def main(argv=None) -> int:
    load_start = load_average()
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoint", help="a .gguf file or a Hugging Face directory")
    ap.add_argument("--workdir", default=None, help="the run's directory (default: a temp dir)")
    ap.add_argument("--set", dest="assignments", action="append", default=[],
                    help="more config overrides key=value (after the documented protocol's)")  # fmt: skip
    ap.add_argument("--out", default=None,
                    help="results file (default: benchmarks/results/algotrace_checkpoint.json)")  # fmt: skip
    ap.add_argument("--report", action="store_true",
                    help="no run: rebuild the tables of --out from its record")  # fmt: skip
    args = ap.parse_args(argv)
    out = args.out or default_out("algotrace_checkpoint")
    if args.report:
        retable(out, tables)
        return 0
    if not args.checkpoint:
        ap.error("--checkpoint is required (unless --report)")

    command = command_line(None if argv is None else [str(pathlib.Path(__file__).resolve()), *argv])
    t0 = time.time()
    run, shown, _ = run_fidia_cli(
        lambda w: cli_argv(args.checkpoint, w, args.assignments),
        "algotrace_checkpoint.json", args.workdir,
    )  # fmt: skip
    fidia_argv = shlex.split(shown)[1:]
    run.pop("figures", None)  # paths in the work directory
    record = {"run": run}
    path = write_results(
        "algotrace_checkpoint",
        tables(record),
        command=command,
        load_start=load_start,
        extra={
            "fidia_argv": fidia_argv,
            "bench_wall_s": time.time() - t0,
            "cpu_s": _cpu_s(),
            **record,
        },
        out=out,
    )
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
