"""HiST benchmark: accuracy against ridge / per-spot MLP / dense transformer, and attention scaling.

Part 1 (accuracy): leave-one-section-out on HER2ST patient C (5 sections with H&E images; within
one patient, so optimistic), every method trained and scored in the same run by
:func:`fidia_jax.projects.hist.train_and_evaluate`: pooled PCC and R² over spots x genes and mean
per-gene PCC over the 50 most expressed genes. Features: the fixed colour-deconvolution + texture
featuriser (UNI weights unavailable).

Part 2 (scaling): forward + backward of one attention layer on synthetic lattices of 10^2..10^5
active spots: HiST's sparse window attention (regular ∪ shifted windows, relative position bias)
vs dense masked attention over all spots (``fidia_jax.projects.hist.dense_window_attention`` with a window
larger than the lattice, i.e. full attention). Time: median of repeated steps after compilation.
Memory: XLA's compiled ``memory_analysis()`` (temp + argument + output bytes), which needs no
execution, so dense is reported at sizes too large to run; dense is timed only up to
``--dense-time-max`` spots. The slope of log(time) vs log(spots) is fitted by least squares.

Usage::

  python benchmarks/hist.py                 # reduced protocol (docs/notes/hist_history.md), ~15 min
  python benchmarks/hist.py --smoke         # seconds-long check on synthetic data
  python benchmarks/hist.py --folds 0 --epochs 100   # full leave-one-section-out protocol
  python benchmarks/hist.py --report --out benchmarks/results/hist.json   # re-table a file

Writes ``benchmarks/results/hist.json`` (``--out``) with the command, date, machine, commit
and load average, and the tables ``scaling`` / ``slopes`` / ``accuracy`` that docs/hist.md
renders from it (``benchmarks/_results.py``, ``tools/render_tables.py``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import pathlib
import sys
import tempfile
import time

import jax
import jax.numpy as jnp
import numpy as np

from fidia_jax.config import override_config
from fidia_jax.projects import hist

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _results import load_average, retable, write_results  # noqa: E402


def lattice(n_spots: int, seed: int = 0) -> np.ndarray:
    """About ``n_spots`` active spots: a square lattice at 70% occupancy."""
    side = int(np.ceil(np.sqrt(n_spots / 0.7)))
    rng = np.random.default_rng(seed)
    xy = np.stack(np.meshgrid(np.arange(side), np.arange(side), indexing="ij"), -1).reshape(-1, 2)
    keep = rng.permutation(len(xy))[:n_spots]
    return xy[np.sort(keep)].astype(np.int32)


def _bytes(compiled) -> int | None:
    try:
        m = compiled.memory_analysis()
        return int(m.temp_size_in_bytes + m.argument_size_in_bytes + m.output_size_in_bytes)
    except Exception:  # noqa: BLE001 - backend without memory analysis
        return None


def scaling(
    sizes, *, heads=2, head_dim=16, window=6, dense_time_max=3000, reps=5, sparse_only=False
):
    rows = []
    for n in sizes:
        c = lattice(n)
        lv = hist.plan_hierarchy(c, levels=1, window=window)[0]
        key = jax.random.key(n)
        q = jax.random.normal(key, (n, heads, head_dim))
        bias = jnp.zeros((heads, 2 * window - 1, 2 * window - 1))
        mask = np.ones(n, bool)

        # The plan's index arrays are arguments, not constants folded into the compiled graph
        # (one compile per size bucket; the arrays of 10^5 spots as HLO constants made XLA's
        # compile and its constant folding part of what was measured).
        plan_args = jax.tree.map(jnp.asarray, (lv.coords, lv.regular, lv.shifted))

        def sparse_loss(q, coords, regular, shifted, bias=bias):
            return jnp.sum(hist.lattice_window_attention(q, q, q, coords, regular, shifted, bias))

        big = int(c.max()) + 2  # one window covers the lattice: full attention

        def dense_loss(q, c=c, mask=mask, big=big):
            return jnp.sum(hist.dense_window_attention(q, q, q, c, mask, window=big, shifted=False))

        row = {"spots": n}
        peers = [("sparse", sparse_loss, plan_args, True)]
        if not sparse_only:
            peers.append(("dense", dense_loss, (), n <= dense_time_max))
        for name, fn, extra, run in peers:
            g = jax.jit(jax.grad(fn))
            compiled = g.lower(q, *extra).compile()
            row[f"{name}_bytes"] = _bytes(compiled)
            cost = compiled.cost_analysis()
            cost = cost[0] if isinstance(cost, list) else cost
            row[f"{name}_flops"] = float(cost.get("flops", 0.0)) if cost else None
            row[f"{name}_bytes_accessed"] = float(cost.get("bytes accessed", 0.0)) if cost else None
            if run:
                compiled(q, *extra).block_until_ready()
                ts = []
                for _ in range(reps):
                    t0 = time.perf_counter()
                    compiled(q, *extra).block_until_ready()
                    ts.append(time.perf_counter() - t0)
                row[f"{name}_s"] = float(np.median(ts))
                row[f"{name}_min_s"] = float(np.min(ts))
            else:
                row[f"{name}_s"] = None
        row["dense_analytic_score_bytes"] = 4 * heads * n * n
        print(row, flush=True)
        rows.append(row)
    return rows


def slope(rows, key):
    pts = [(r["spots"], r[key]) for r in rows if r.get(key)]
    if len(pts) < 2:
        return None
    x, y = np.log([p[0] for p in pts]), np.log([p[1] for p in pts])
    return float(np.polyfit(x, y, 1)[0])


def _fmt_int(n) -> str:
    return f"{n:,}".replace(",", "\u2009")  # thin space: 100 000


def tables(out: dict) -> dict:
    """The tables docs/hist.md renders: ``scaling`` (one row per size), ``slopes`` (log-log
    slopes over the sizes run), ``accuracy`` (one row per method, when part 1 ran)."""
    t = {}
    if "scaling" in out:
        rows = out["scaling"]["rows"]
        dense = any(r.get("dense_bytes") for r in rows)
        cols = ["spots", "median ms", "min ms", "min µs / spot", "XLA flops",
                "XLA bytes accessed", "compiled MiB"]  # fmt: skip
        fmts = [None, ".4g", ".4g", ".3g", ".3g", ".3g", ".4g"]
        if dense:
            cols += ["dense median ms", "dense compiled MiB", "dense / sparse memory"]
            fmts += [".4g", ".4g", ".3g"]
        body = []
        for r in rows:
            b = r.get("sparse_bytes")
            row = [_fmt_int(r["spots"]), 1e3 * r["sparse_s"], 1e3 * r["sparse_min_s"],
                   1e6 * r["sparse_min_s"] / r["spots"], r.get("sparse_flops"),
                   r.get("sparse_bytes_accessed"), None if b is None else b / 2**20]  # fmt: skip
            if dense:
                db = r.get("dense_bytes")
                row += [None if r.get("dense_s") is None else 1e3 * r["dense_s"],
                        None if db is None else db / 2**20,
                        None if not (db and b) else db / b]  # fmt: skip
            body.append(row)
        t["scaling"] = {"columns": cols, "rows": body, "formats": fmts}
        s = out["scaling"]
        names = [("time (median)", "sparse_time_slope"), ("time (minimum)", "sparse_min_time_slope"),
                 ("XLA flops", "sparse_flops_slope"),
                 ("XLA bytes accessed", "sparse_bytes_accessed_slope"),
                 ("compiled memory", "sparse_bytes_slope")]  # fmt: skip
        if dense:
            names += [("dense time (median)", "dense_time_slope"),
                      ("dense compiled memory", "dense_bytes_slope")]  # fmt: skip
        lo, hi = rows[0]["spots"], rows[-1]["spots"]
        cols, fmts = (
            ["log-log slope vs spots", f"{_fmt_int(lo)}–{_fmt_int(hi)} spots"],
            [None, ".3f"],
        )
        body = [[n, s.get(k)] for n, k in names]
        big = [r for r in rows if r["spots"] >= 10_000]  # out of a 32 MiB L3 cache (62 MiB)
        if 2 <= len(big) < len(rows):
            cols.append(f"{_fmt_int(big[0]['spots'])}–{_fmt_int(hi)} spots")
            fmts.append(".3f")
            raw = [k.removeprefix("sparse_").removesuffix("_slope") for _, k in names]
            keys = {"time": "sparse_s", "min_time": "sparse_min_s", "flops": "sparse_flops",
                    "bytes_accessed": "sparse_bytes_accessed", "bytes": "sparse_bytes",
                    "dense_time": "dense_s", "dense_bytes": "dense_bytes"}  # fmt: skip
            for row, k in zip(body, raw, strict=True):
                row.append(slope(big, keys[k]))
        t["slopes"] = {"columns": cols, "rows": body, "formats": fmts}
    if "accuracy" in out:
        t.update(accuracy_tables(out["accuracy"]))
    return t


def accuracy_tables(acc: dict) -> dict:
    """Part 1's tables: ``accuracy`` (per method, the mean over folds of every metric),
    ``per_fold`` (mean per-gene PCC per held-out section and method, the method mean last) and,
    with ``hist`` among the methods, ``paired`` (HiST minus each method over (section, gene)
    items: :func:`fidia_jax.projects.hist.paired_gene_test`)."""
    mean = acc["mean"]
    names = {"mean_gene_pcc": "mean per-gene PCC", "pooled_pcc": "pooled PCC",
             "pooled_r2": "pooled R²"}  # fmt: skip
    keys = [k for k in names if any(k in m for m in mean.values())]
    t = {"accuracy": {"columns": ["method", *(names[k] for k in keys)],
                      "rows": [[f"{hist.METHODS.get(m, m)} (`{m}`)", *[mean[m].get(k) for k in keys]]
                               for m in mean],
                      "formats": [None, *[".3f"] * len(keys)]}}  # fmt: skip
    methods = list(mean)
    best = [max(methods, key=lambda m, f=f: f[m]["mean_gene_pcc"]) for f in acc["folds"]]
    t["per_fold"] = {
        "columns": ["held-out section", *(f"`{m}`" for m in methods), "highest"],
        "rows": [[f["test"], *(f[m]["mean_gene_pcc"] for m in methods), f"`{b}`"]
                 for f, b in zip(acc["folds"], best, strict=True)]
                + [["mean over folds", *(mean[m]["mean_gene_pcc"] for m in methods), None]],
        "formats": [None, *[".3f"] * len(methods), None],
    }  # fmt: skip
    if "hist" in methods and len(methods) > 1:
        rows = []
        for m in methods:
            if m != "hist":
                r = hist.paired_gene_test(acc["folds"], "hist", m)
                rows.append([f"`{m}`", r["n"], r["mean_diff"], r["a_wins"], r["p_wilcoxon"]])
        t["paired"] = {
            "columns": ["HiST minus", "(section, gene) items", "mean diff", "HiST ahead on",
                        "Wilcoxon p"],
            "rows": rows,
            "formats": [None, None, "+.3f", ".1%", ".2g"],
        }  # fmt: skip
    return t


def main(argv=None) -> int:
    load_start = load_average()
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--data-dir", default="")
    ap.add_argument("--folds", type=int, default=None)
    ap.add_argument("--epochs", type=int, default=None)
    ap.add_argument("--workdir", default="")
    ap.add_argument("--skip-accuracy", action="store_true")
    ap.add_argument("--skip-scaling", action="store_true")
    ap.add_argument(
        "--accuracy-json",
        default="",
        help="take part 1 from this hist_results.json (written by an earlier run's "
        "train_and_evaluate) instead of training again",
    )
    ap.add_argument(
        "--scaling-json", default="", help="take part 2 from this earlier output of this script"
    )
    ap.add_argument("--dense-time-max", type=int, default=3000)
    ap.add_argument("--sizes", default="", help="comma-separated spot counts (scaling)")
    ap.add_argument("--sparse-only", action="store_true", help="scaling: no dense peer")
    ap.add_argument(
        "--set", nargs="*", default=[], help="config overrides key=value (after --folds/--epochs)"
    )
    ap.add_argument("--out", default=str(HERE / "results" / "hist.json"))
    ap.add_argument("--report", action="store_true", help="no run: re-table --out")
    args = ap.parse_args(argv)
    if args.report:
        retable(args.out, tables)
        return 0

    cfg = hist.get_config("tiny" if args.smoke else "default")
    if not args.smoke:
        cfg = dataclasses.replace(cfg, folds=2, epochs=40)  # reduced protocol (docs/hist.md)
    if args.smoke:
        cfg = dataclasses.replace(cfg, methods=("hist", "dense", "mlp", "ridge"))
    over = {k: v for k, v in (("folds", args.folds), ("epochs", args.epochs)) if v is not None}
    if args.data_dir:
        over["data_dir"] = args.data_dir
    cfg = override_config(dataclasses.replace(cfg, **over), args.set)
    out = {"jax": jax.__version__, "config": dataclasses.asdict(cfg)}
    t0 = time.perf_counter()
    if args.accuracy_json:
        res = json.loads(pathlib.Path(args.accuracy_json).read_text())
        out["config"] = res.pop("config")
        print(hist.format_table(res))
    elif not args.skip_accuracy:
        workdir = args.workdir or tempfile.mkdtemp(prefix="hist_bench_")
        res = hist.train_and_evaluate(cfg, workdir)
    if args.accuracy_json or not args.skip_accuracy:
        out["accuracy"] = {
            "gene_selection": res.get("gene_selection"),
            "folds": res["folds"],
            "mean": res["mean"],
            "sections": res["sections"],
            "n_spots": res["n_spots"],
            "genes": res["genes"],
        }
        mean = res["mean"]
        if "hist" in mean:
            print("\nratios HiST / peer (mean per-gene PCC):")
            for m in mean:
                if m != "hist":
                    print(
                        f"  vs {m}: {mean['hist']['mean_gene_pcc'] / mean[m]['mean_gene_pcc']:.2f}"
                        f"  (HiST {mean['hist']['mean_gene_pcc']:.3f}, {m} {mean[m]['mean_gene_pcc']:.3f})"
                    )
    if args.scaling_json:
        out["scaling"] = json.loads(pathlib.Path(args.scaling_json).read_text())["scaling"]
    elif not args.skip_scaling:
        sizes = (100, 300, 1000) if args.smoke else (100, 300, 1000, 3000, 10000, 30000, 100000)
        if args.sizes:
            sizes = tuple(int(v) for v in args.sizes.split(","))
        rows = scaling(
            sizes,
            dense_time_max=min(args.dense_time_max, 1000) if args.smoke else args.dense_time_max,
            sparse_only=args.sparse_only,
        )
        out["scaling"] = {
            "rows": rows,
            "sparse_time_slope": slope(rows, "sparse_s"),
            "sparse_min_time_slope": slope(rows, "sparse_min_s"),
            "sparse_flops_slope": slope(rows, "sparse_flops"),
            "sparse_bytes_accessed_slope": slope(rows, "sparse_bytes_accessed"),
            "dense_time_slope": slope(rows, "dense_s"),
            "sparse_bytes_slope": slope(rows, "sparse_bytes"),
            "dense_bytes_slope": slope(rows, "dense_bytes"),
        }
    if "scaling" in out:
        rows = out["scaling"]["rows"]
        print("\n| spots | sparse ms | dense ms | sparse MiB | dense MiB | dense/sparse memory |")
        print("|---|---|---|---|---|---|")
        for r in rows:
            ds = f"{1e3 * r['dense_s']:.2f}" if r.get("dense_s") else "—"
            sb, db = r["sparse_bytes"], r.get("dense_bytes")
            ratio = f"{db / sb:.0f}x" if sb and db else "—"
            print(
                f"| {r['spots']} | {1e3 * r['sparse_s']:.2f} | {ds} | "
                f"{(sb or 0) / 2**20:.1f} | {(db or 0) / 2**20:.1f} | {ratio} |"
            )
        print(
            f"time slope: sparse {out['scaling']['sparse_time_slope']}, dense {out['scaling']['dense_time_slope']}"
        )
    out["wall_s"] = time.perf_counter() - t0
    if not args.smoke:
        path = pathlib.Path(args.out)
        write_results(path.stem, tables(out), load_start=load_start, extra=out, out=path)
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
