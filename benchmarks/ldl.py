"""LDL-DVS against KL-only and the simple LDL baselines on the eight label-distribution sets.

For every set (SJAFFE, SBU_3DFE, Emotion6, Movie, SCUT_FBP, M2B, Music, Painting; PyLDL's
polarity presets) the LDL driver (:func:`fidia_jax.projects.ldl.cross_validate`) trains, per
fold, the authors' model (MLP, 64 sigmoid units, full-batch Adam 1e-3, 1000 epochs) once per
alpha in ``--alphas`` (0 = KL-only; 0.1 = the authors' default) from the same initial weights,
and scores on the same folds and standardised features AA-kNN (k = 10) and a clipped,
renormalised ridge regression (scikit-learn). With ``--pyldl-python`` (a venv holding
``python-ldl`` 0.1.2, see ``tools/ldl_make_fixture.py`` or the page) PyLDL's classic baselines
SA-BFGS, PT-Bayes and BD-LDL run on the same folds too (``_ldl_pyldl_peer.py``).

The file it writes, ``benchmarks/results/ldl.json`` (through :func:`_results.write_results`,
rewritten after each set so a run stopped early keeps the sets it finished; every fold's scores
are kept under ``"sets"``), holds the tables ``docs/ldl.md`` renders
(``python tools/render_tables.py --write``), built by :func:`build_tables`:

* ``de`` / ``kl``: per set, the divisiveness error (DE, the paper's metric) / KL, mean ± sample
  std over the test folds, for KL-only, the method (``--method-alpha``, the authors' 0.1), the
  other alphas and every baseline (AA-kNN with ``k`` tuned per training fold on an inner split
  of its training rows, ridge, PyLDL's algorithms), then the method minus the best baseline
  (by mean) with the paired t-test and Wilcoxon p over the folds;
* ``vs_kl``: the method minus KL-only on the DE (paired t-test, Wilcoxon), the largest relative
  worsening among the six standard metrics, and whether issue 11's criterion holds;
* ``goals``: the counts of issue 11 (DE lower than KL-only with the six metrics within 1 %, on
  >= 6 of 8 sets) and issue 24 (the method's mean DE at or below the best baseline's on >= half
  of the sets; also counted: significantly better / worse at p < 0.05).

Usage:
  python benchmarks/ldl.py [--sets SJAFFE,...] [--folds 10] [--alphas 0,0.1,1]
                           [--pyldl-python PY] [--out FILE]
  python benchmarks/ldl.py --combine a.json,b.json,...   # one file from per-set runs' files
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _peers import run_peer  # noqa: E402
from _results import command_line, load_average, write_results  # noqa: E402

from fidia_jax import metrics  # noqa: E402
from fidia_jax._io import resolve_data_dir
from fidia_jax.metrics import LDL_METRICS, LDL_METRICS_HIGHER_BETTER
from fidia_jax.projects import ldl
from fidia_jax.projects.ldl import data
from fidia_jax.projects.ldl import train as ldl_train

PEER = pathlib.Path(__file__).with_name("_ldl_pyldl_peer.py")
PYLDL_ALGOS = ("SA_BFGS", "PT_Bayes", "BD_LDL")
BASELINE_NAMES = {"aa_knn": "AA-kNN", "ridge": "ridge", "SA_BFGS": "SA-BFGS",
                  "PT_Bayes": "PT-Bayes", "BD_LDL": "BD-LDL"}  # fmt: skip
P_LEVEL = 0.05


def worst_degradation(ratio: dict[str, float]) -> float:
    """Largest relative worsening among the six metrics (``0.01`` = 1 % worse than KL-only)."""
    return max(
        (1.0 - ratio[m]) if m in LDL_METRICS_HIGHER_BETTER else (ratio[m] - 1.0)
        for m in LDL_METRICS
    )


def _pyldl_rows(res, ds, config, python: str) -> list[dict]:
    """PyLDL's baselines on the driver's folds (repeat 1), scored with our metrics."""
    n = len(ds.labels)
    splits = ldl.kfold_splits(n, config.n_folds, config.seed + 1)
    xs, train = [], np.zeros((len(splits), n), np.uint8)
    for f, (tr, _) in enumerate(splits):
        # the fold's own PCA and z-scoring, fitted on its training rows (as the driver's models)
        xs.append(ldl_train.fold_features(ds.features, tr, config.max_features))
        train[f, tr] = 1
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = pathlib.Path(tmp) / "in.npz", pathlib.Path(tmp) / "out.npz"
        np.savez(src, x_fxnxd=np.stack(xs), d_nxc=ds.labels, train_fxn=train)
        run_peer(python, PEER, src, dst, name="PyLDL peer")
        out = dict(np.load(dst))
    rows = []
    for name in PYLDL_ALGOS:
        for f, (_, te) in enumerate(splits):
            vals = metrics.ldl_metrics(ds.labels[te], out[f"pred_{name}"][f, te], ds.pos, ds.neg)
            rows.append({"repeat": 1, "fold": f + 1, "baseline": name, **vals})
        res["baseline_wall_s"] = res.get("baseline_wall_s", {})
        res["baseline_wall_s"][name] = float(out[f"wall_{name}"])
    return rows


def run_set(name: str, args, common: dict) -> dict:
    pcs = args.movie_pcs if name == "Movie" else 0
    config = ldl.get_config("default", dataset=name, max_features=pcs, **common)
    ds = ldl.load_config_data(config)
    res = ldl.cross_validate(config, ds)
    if args.pyldl_python:
        rows = _pyldl_rows(res, ds, config, args.pyldl_python)
        res["baseline_folds"] += rows
        for algo in PYLDL_ALGOS:
            sel = [r for r in rows if r["baseline"] == algo]
            res["baseline_summary"][algo] = {
                m: {"mean": float(np.mean([r[m] for r in sel])),
                    "std": float(np.std([r[m] for r in sel]))}
                for m in ldl.METRICS
            }  # fmt: skip
            for alpha, per in res["paired_vs_baselines"].items():
                model = [r for r in res["folds"] if str(r["alpha"]) == alpha]
                per[algo] = {
                    m: ldl.paired_tests([r[m] for r in model], [r[m] for r in sel])
                    for m in ldl.METRICS
                }
    # KL-only vs each alpha, paired over folds
    kl_only = [r for r in res["folds"] if r["alpha"] == 0.0]
    res["paired_vs_kl"] = {
        str(float(a)): {
            m: ldl.paired_tests(
                [r[m] for r in res["folds"] if r["alpha"] == float(a)], [r[m] for r in kl_only]
            )
            for m in ldl.METRICS
        }
        for a in config.alphas
        if a != 0.0
    }
    print(ldl.format_table(res), flush=True)
    return res


def _scores(res: dict, metric: str) -> dict[str, list[float]]:
    """Per-fold scores of one metric: ``"a=<alpha>"`` for each alpha, then each baseline,
    in fold order (repeat, fold)."""
    out: dict[str, list[float]] = {}
    for a in res["alphas"]:
        rows = sorted((r for r in res["folds"] if r["alpha"] == float(a)),
                      key=lambda r: (r["repeat"], r["fold"]))  # fmt: skip
        out[f"a={float(a)}"] = [r[metric] for r in rows]
    for b in res["baseline_summary"]:
        rows = sorted((r for r in res["baseline_folds"] if r["baseline"] == b),
                      key=lambda r: (r["repeat"], r["fold"]))  # fmt: skip
        out[b] = [r[metric] for r in rows]
    return out


def _pm(x: list[float], fmt: str = ".4f") -> str:
    """``"mean ± sample std"`` of per-fold scores."""
    x = np.asarray(x, np.float64)
    sd = float(np.std(x, ddof=1)) if len(x) > 1 else 0.0
    return f"{x.mean():{fmt}} ± {sd:{fmt}}"


def _p(value: float) -> float | None:
    return None if not np.isfinite(value) else float(value)


def _verdict(diff: float, t_p: float | None) -> str:
    if t_p is not None and t_p < P_LEVEL:
        return "better" if diff < 0 else "worse"
    return "tie"


def _metric_table(per_set: dict, method_alpha: str, metric: str) -> dict:
    """Mean ± std per model and the method minus the best baseline (lower is better)."""
    first = per_set[next(iter(per_set))]
    alphas = [f"a={float(a)}" for a in first["alphas"]]
    bases = list(first["baseline_summary"])
    model_cols = [
        "KL-only"
        if a == "a=0.0"
        else ("α=" + a[2:] + (" (method)" if a[2:] == method_alpha else ""))
        for a in alphas
    ]
    columns = ["set (N, c)", *model_cols, *(BASELINE_NAMES.get(b, b) for b in bases),
               "best baseline", "method − best", "t p", "Wilcoxon p", "verdict"]  # fmt: skip
    rows = []
    for name, res in per_set.items():
        sc = _scores(res, metric)
        best = min(bases, key=lambda b: float(np.mean(sc[b])))
        m = np.asarray(sc[f"a={method_alpha}"])
        test = ldl.paired_tests(m, sc[best])
        diff, t_p = float(test["mean_diff"]), _p(test["t_p"])
        rows.append([
            f"{name} ({res['n_samples']}, {res['n_labels']})",
            *(_pm(sc[a]) for a in alphas), *(_pm(sc[b]) for b in bases),
            BASELINE_NAMES.get(best, best), diff, t_p, _p(test["wilcoxon_p"]),
            _verdict(diff, t_p),
        ])  # fmt: skip
    formats = [None] * (len(columns) - 4) + ["+.4f", ".2g", ".2g", None]
    return {"columns": columns, "rows": rows, "formats": formats}


def build_tables(per_set: dict, method_alpha: str) -> dict:
    """The tables of ``benchmarks/results/ldl.json`` (module docstring) from the per-set
    :func:`~fidia_jax.projects.ldl.cross_validate` results (with ``"folds"`` and
    ``"baseline_folds"``).

    Args:
      per_set: set name -> that set's results; every set has the same alphas and baselines,
        alpha 0 (KL-only) and ``method_alpha`` among them.
      method_alpha: the alpha reported as the method, as ``str(float(alpha))``.

    Returns:
      ``{"de", "kl", "vs_kl", "goals"}``, each ``{"columns", "rows", "formats"}``.

    Raises:
      ValueError: ``per_set`` is empty, or alpha 0 or ``method_alpha`` was not run.
    """
    if not per_set:
        raise ValueError("build_tables: per_set is empty")
    for name, res in per_set.items():
        have = {str(float(a)) for a in res["alphas"]}
        if "0.0" not in have or method_alpha not in have:
            raise ValueError(
                f"build_tables: set {name!r} ran alphas {sorted(have)}; need 0.0 (KL-only) "
                f"and the method's {method_alpha}"
            )
    de = _metric_table(per_set, method_alpha, "divisiveness_error")
    kl = _metric_table(per_set, method_alpha, "kl_divergence")
    vs_rows = []
    lower = goal11 = 0
    for name, res in per_set.items():
        sc = _scores(res, "divisiveness_error")
        m, k = np.asarray(sc[f"a={method_alpha}"]), np.asarray(sc["a=0.0"])
        test = ldl.paired_tests(m, k)
        means = {
            met: (
                float(np.mean([r[met] for r in res["folds"] if r["alpha"] == float(method_alpha)])),
                float(np.mean([r[met] for r in res["folds"] if r["alpha"] == 0.0])),
            )
            for met in LDL_METRICS
        }
        worst = worst_degradation({met: a / b for met, (a, b) in means.items()})
        is_lower = bool(m.mean() < k.mean())
        ok = is_lower and worst <= 0.01
        lower += is_lower
        goal11 += ok
        vs_rows.append([name, float(m.mean() - k.mean()), float(m.mean() / k.mean() - 1.0),
                        _p(test["t_p"]), _p(test["wilcoxon_p"]), float(worst),
                        "yes" if ok else "no"])  # fmt: skip
    vs_kl = {
        "columns": [
            "set",
            "DE: method − KL-only",
            "relative",
            "t p",
            "Wilcoxon p",
            "worst of six metrics vs KL-only",
            "issue-11 criterion",
        ],  # fmt: skip
        "rows": vs_rows,
        "formats": [None, "+.5f", "+.2%", ".2g", ".2g", "+.2%", None],
    }
    n = len(per_set)
    verdicts = [r[-1] for r in de["rows"]]
    at_or_below = sum(r[-4] <= 0 for r in de["rows"])
    goals = {
        "columns": ["goal", "count", "sets", "target"],
        "rows": [
            ["DE (mean) lower than KL-only", f"{lower}/{n}", n, "—"],
            [
                "issue 11: DE lower than KL-only, six metrics within 1 %",
                f"{goal11}/{n}",
                n,
                f">= {int(np.ceil(6 * n / 8))} (6 of 8)",
            ],
            [
                "issue 24: mean DE at or below the best baseline's",
                f"{at_or_below}/{n}",
                n,
                f">= {int(np.ceil(n / 2))} (half)",
            ],
            [
                f"DE significantly better than the best baseline (t p < {P_LEVEL})",
                f"{verdicts.count('better')}/{n}",
                n,
                "—",
            ],
            [
                f"DE significantly worse than the best baseline (t p < {P_LEVEL})",
                f"{verdicts.count('worse')}/{n}",
                n,
                "—",
            ],
        ],  # fmt: skip
    }
    return {"de": de, "kl": kl, "vs_kl": vs_kl, "goals": goals}


def report(tables: dict) -> str:
    """Plain-text rendering of :func:`build_tables`' tables (printed at the end of a run)."""
    lines = []
    for key, t in tables.items():
        fmts = t.get("formats") or [None] * len(t["columns"])
        lines.append(f"[{key}] " + " | ".join(map(str, t["columns"])))
        for r in t["rows"]:
            cells = [
                "—" if c is None else (format(c, f) if f and isinstance(c, float) else str(c))
                for c, f in zip(r, fmts, strict=True)
            ]
            lines.append("  " + " | ".join(cells))
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--smoke", action="store_true", help="2 small sets, 3 folds, 30 epochs")
    ap.add_argument("--sets", default=",".join(data.LDL_BENCHMARK_SETS))
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--folds", type=int, default=10)
    ap.add_argument("--alphas", default="0,0.1,1")
    ap.add_argument("--method-alpha", default="0.1", help="the alpha reported as the method")
    ap.add_argument("--hidden", default="64", help="comma-separated widths; '' = linear")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--epochs", type=int, default=1000)
    ap.add_argument("--mode", default="ovo")
    ap.add_argument("--movie-pcs", type=int, default=128)
    ap.add_argument("--pyldl-python", default="", help="python of a venv with python-ldl")
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--combine", default="", help="comma-separated files of per-set runs")
    ap.add_argument("--out", default="benchmarks/results/ldl.json")
    args = ap.parse_args(argv)
    method_alpha = str(float(args.method_alpha))
    load_start = load_average()
    command = command_line(None if argv is None else [str(pathlib.Path(__file__).resolve()), *argv])
    t0 = time.perf_counter()

    def write(per_set: dict, extra: dict) -> pathlib.Path:
        tables = build_tables(per_set, method_alpha)
        extra = {**extra, "method_alpha": method_alpha, "sets_done": list(per_set),
                 "wall_s": time.perf_counter() - t0, "sets": per_set}  # fmt: skip
        return write_results("ldl", tables, command=command, load_start=load_start,
                             extra=extra, out=args.out)  # fmt: skip

    if args.combine:
        parts = [json.loads(pathlib.Path(p).read_text()) for p in args.combine.split(",")]
        per_set = {k: v for part in parts for k, v in part["sets"].items()}
        if len(parts) == 1:
            command = parts[0]["command"]  # a single run's file re-tabulated: its command
        path = write(per_set, {"combined_from": [p["command"] for p in parts],
                               "protocol": parts[0]["protocol"]})  # fmt: skip
    else:
        sets = args.sets.split(",")
        common = dict(
            data_dir=str(resolve_data_dir(args.data_dir)),
            alphas=tuple(float(a) for a in args.alphas.split(",")),
            hidden=tuple(int(h) for h in args.hidden.split(",") if h),
            learning_rate=args.lr,
            epochs=args.epochs,
            n_folds=args.folds,
            n_repeats=args.repeats,
            mode=args.mode,
        )
        if args.smoke:
            sets = ["SJAFFE", "Music"]
            common.update(epochs=30, n_folds=3, n_repeats=1)
        protocol = {**common, "data_dir": None, "sets": sets, "movie_pcs": args.movie_pcs,
                    "pyldl": bool(args.pyldl_python)}  # fmt: skip
        per_set = {}
        for name in sets:
            res = run_set(name, args, common)
            res.pop("loss_curves", None)
            per_set[name] = res
            path = write(per_set, {"protocol": protocol})  # after each set
            print(f"{name}: {res['wall_s']:.0f} s, wrote {path}", flush=True)
    print(report(build_tables(per_set, method_alpha)))
    print(f"wrote {path} ({time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
