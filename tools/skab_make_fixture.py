"""Builds the SKAB evaluation-protocol fixture (tests/data/skab/skab_reference.{npz,json}).

Authors' code: github.com/waico/SKAB at commit b2c0d46c2971dcbfe71e26087b6d231998bb91c2 (the
benchmark TeamWork is evaluated on). Usage, from the repository root, with a checkout of that
commit (nothing is downloaded at run time)::

  python tools/skab_make_fixture.py --authors-dir /tmp/authors_skab

It creates a throwaway virtual environment ``/tmp/peer_skab`` (``numpy``, ``pandas``) if absent,
then re-runs itself inside it with ``--peer``. There it evaluates, from the checkout:

* ``core/metrics.py``: ``chp_score(true, prediction, metric="binary")`` (F1, FAR %, MAR %, each
  rounded to 2 decimals by SKAB) and ``metric="confusion_matrix"`` (TP, TN, FP, FN) on seeded
  label / prediction series pooled over several runs, with edge cases (nothing predicted,
  everything predicted, a perfect prediction, a run without anomalies, a run that is all anomaly,
  nothing labelled and nothing predicted), and on changepoints given as timestamps with
  ``window_width`` and each ``anomaly_window_destination``, windows at both series edges;
* the notebooks ``notebooks/Conv_AE.ipynb``, ``LSTM_AE.ipynb``, ``Vanilla_AE.ipynb``: the ``Q =``
  assignment of the hyperparameter cell and the ``UCL = ...`` assignment of the inference cell
  (read with ``ast`` from the notebook JSON and evaluated on a ``pd.Series`` of seeded training
  residuals); from ``Conv_AE.ipynb`` also the statements from ``anomalous_data = ... > UCL`` to
  ``prediction.iloc[...] = 1`` (the window-to-step rule), executed on seeded window residuals.

``core/utils.py`` holds the data loading and the 400-point train split, not the threshold (the UCL
rule lives in the notebooks). Stub: ``matplotlib`` (``core/metrics.py`` imports it at the top;
only ``plot_figure=True`` uses it).

Outputs: ``tests/data/skab/skab_reference.npz`` and ``skab_reference.json`` (versions, commit,
seed, the cases and SKAB's metric values).
"""

from __future__ import annotations

import ast
import json
import pathlib
import sys
import types

import _peer  # tools/_peer.py (this script's folder is on sys.path)

VENV = pathlib.Path("/tmp/peer_skab")
ROOT = pathlib.Path(__file__).resolve().parents[1]
OUT_DIR = ROOT / "tests" / "data" / "skab"
COMMIT = "b2c0d46c2971dcbfe71e26087b6d231998bb91c2"
SEED = 20261204
LENGTHS = (40, 65, 90)
#: (N_STEPS, number of windows) of the window-to-step rule cases.
WINDOW_CASES = ((5, 40), (60, 200))
#: Training-residual lengths of the UCL cases (341 = 400 - 60 + 1 windows of SKAB's split).
UCL_LENGTHS = (341, 400, 7)
NOTEBOOKS = ("Conv_AE", "LSTM_AE", "Vanilla_AE")
#: (length, changepoint indices, window seconds, destination) of the timestamp-label cases.
CP_CASES = (
    (30, (0, 14, 29), 4, "lefter"),
    (30, (0, 14, 29), 4, "righter"),
    (30, (0, 14, 29), 4, "center"),
    (25, (2, 22), 3, "righter"),
)


def make_venv() -> pathlib.Path:
    return _peer.make_venv(VENV, ["numpy", "pandas"])


def _cells(path: pathlib.Path) -> list[ast.Module]:
    nb = json.loads(path.read_text())
    return [
        ast.parse("".join(c["source"]))
        for c in nb["cells"]
        if c["cell_type"] == "code" and not "".join(c["source"]).lstrip().startswith(("%", "!"))
    ]


def _assign(cells, name: str) -> ast.expr:
    for tree in cells:
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Assign)
                and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id == name
            ):
                return node.value
    raise SystemExit(f"no assignment to {name!r}")


def _window_rule(cells) -> ast.Module:
    """The statements of the Conv-AE inference loop from ``anomalous_data = ...`` to the
    ``prediction.iloc[...] = 1`` assignment."""
    for tree in cells:
        for node in ast.walk(tree):
            if isinstance(node, ast.For):
                body = node.body
                names = [ast.unparse(s).split(" =")[0] for s in body]
                if "anomalous_data" in names:
                    i = names.index("anomalous_data")
                    j = next(
                        k for k in range(i, len(body)) if names[k].startswith("prediction.iloc")
                    )
                    return ast.Module(body=body[i : j + 1], type_ignores=[])
    raise SystemExit("no window-to-step rule found")


def peer(authors: pathlib.Path) -> None:
    import contextlib
    import io

    import numpy as np
    import pandas as pd

    mpl = types.ModuleType("matplotlib")  # stub: only chp_score(plot_figure=True) plots
    mpl.gridspec, mpl.pyplot = types.ModuleType("gridspec"), types.ModuleType("pyplot")
    sys.modules.update(
        {"matplotlib": mpl, "matplotlib.gridspec": mpl.gridspec, "matplotlib.pyplot": mpl.pyplot}
    )
    sys.path.insert(0, str(authors))
    from core.metrics import chp_score

    rng = np.random.default_rng(SEED)
    out: dict[str, np.ndarray] = {}
    meta_cases = []

    def series(v, start="2020-01-01"):
        return pd.Series(np.asarray(v, int), index=pd.date_range(start, periods=len(v), freq="s"))

    def score(name, labels, preds):
        true = [series(y) for y in labels]
        pred = [series(p) for p in preds]
        with contextlib.redirect_stdout(io.StringIO()):
            f1, far, mar = chp_score(true, pred, metric="binary", verbose=False)
            cm = chp_score(true, pred, metric="confusion_matrix", verbose=False)
        out[f"{name}_labels"] = np.concatenate(labels).astype(np.int8)
        out[f"{name}_preds"] = np.concatenate(preds).astype(np.int8)
        out[f"{name}_lengths"] = np.asarray([len(y) for y in labels], np.int32)
        out[f"{name}_binary"] = np.asarray([f1, far, mar], np.float64)
        out[f"{name}_confusion"] = np.asarray(cm, np.int64)
        meta_cases.append(name)

    def blocks(n):
        y = np.zeros(n, int)
        y[:3] = 1  # an anomaly at the first step
        y[n - 4 :] = 1  # and at the last
        a = int(rng.integers(8, n - 12))
        y[a : a + int(rng.integers(2, 6))] = 1
        return y

    labels = [blocks(n) for n in LENGTHS]
    score("random", labels, [(rng.random(n) < 0.3).astype(int) for n in LENGTHS])
    score("none_predicted", labels, [np.zeros(n, int) for n in LENGTHS])
    score("all_predicted", labels, [np.ones(n, int) for n in LENGTHS])
    score("perfect", labels, labels)
    quiet = [labels[0], np.zeros(LENGTHS[1], int), labels[2]]
    score("run_without_anomaly", quiet, [(rng.random(n) < 0.2).astype(int) for n in LENGTHS])
    score("nothing_at_all", [np.zeros(20, int)], [np.zeros(20, int)])
    score("all_anomalous", [np.ones(15, int)], [(rng.random(15) < 0.5).astype(int)])

    # Changepoints as timestamps, scoring windows of width w seconds at the series edges.
    for k, (n, cps, w, dest) in enumerate(CP_CASES):
        pred = series((rng.random(n) < 0.4).astype(int))
        true = [[pred.index[c] for c in cps]]
        with contextlib.redirect_stdout(io.StringIO()):
            kw = {"window_width": f"{w}s", "anomaly_window_destination": dest, "verbose": False}
            f1, far, mar = chp_score(true, [pred], metric="binary", **kw)
            cm = chp_score(true, [pred], metric="confusion_matrix", **kw)
        out[f"cp{k}_preds"] = pred.to_numpy().astype(np.int8)
        out[f"cp{k}_binary"] = np.asarray([f1, far, mar], np.float64)
        out[f"cp{k}_confusion"] = np.asarray(cm, np.int64)

    # The UCL rules of three notebooks.
    ucl_meta = {}
    train_sets = [rng.gamma(2.0, 0.5, size=m) for m in UCL_LENGTHS]
    for j, tr in enumerate(train_sets):
        out[f"ucl_train_{j}"] = tr
    for nb in NOTEBOOKS:
        cells = _cells(authors / "notebooks" / f"{nb}.ipynb")
        q = ast.literal_eval(_assign(cells, "Q"))
        expr = compile(ast.Expression(_assign(cells, "UCL")), nb, "eval")
        ucl_meta[nb] = {"Q": q}
        out[f"ucl_{nb}"] = np.asarray(
            [
                float(
                    eval(
                        expr, {"residuals": pd.Series(tr), "residuals_train": pd.Series(tr), "Q": q}
                    )
                )  # fmt: skip
                for tr in train_sets
            ]
        )

    # Conv-AE: the strict comparison and the window-to-step rule.
    cells = _cells(authors / "notebooks" / "Conv_AE.ipynb")
    q = ast.literal_eval(_assign(cells, "Q"))
    ucl_expr = compile(ast.Expression(_assign(cells, "UCL")), "Conv_AE", "eval")
    rule = compile(_window_rule(cells), "Conv_AE", "exec")
    for k, (n_steps, n_win) in enumerate(WINDOW_CASES):
        tr = rng.gamma(2.0, 0.5, size=300)
        ucl = float(eval(ucl_expr, {"residuals": pd.Series(tr), "Q": q}))
        win = rng.gamma(2.0, 0.5, size=n_win)
        win[n_win // 4 : n_win // 4 + 3 * n_steps // 2] += 10.0  # a run of windows above UCL
        win[n_win // 2 : n_win // 2 + n_steps] += 10.0
        win[: n_steps + 2] += 10.0  # and at the very start
        win[3] = ucl  # a tie: above UCL only for ">="
        t_len = n_win + n_steps - 1
        env = {
            "np": np,
            "pd": pd,
            "cnn_residuals": pd.Series(win),
            "UCL": ucl,
            "X": np.zeros((n_win, 1)),
            "N_STEPS": n_steps,
            "X_test": pd.DataFrame(index=pd.date_range("2020-01-01", periods=t_len, freq="s")),
        }
        exec(rule, env)
        out[f"win{k}_scores"] = win
        out[f"win{k}_ucl"] = np.float64(ucl)
        out[f"win{k}_train"] = tr
        out[f"win{k}_anomalous"] = env["anomalous_data"].to_numpy()
        out[f"win{k}_prediction"] = env["prediction"].to_numpy().astype(np.int8)

    np.savez_compressed(OUT_DIR / "skab_reference.npz", **out)
    meta = {
        "script": "tools/skab_make_fixture.py",
        "authors_repo": "github.com/waico/SKAB",
        "commit": COMMIT,
        "files": ["core/metrics.py"] + [f"notebooks/{nb}.ipynb" for nb in NOTEBOOKS],
        "seed": SEED,
        "binary_cases": meta_cases,
        "changepoint_cases": CP_CASES,
        "ucl_lengths": UCL_LENGTHS,
        "ucl": ucl_meta,
        "window_cases": WINDOW_CASES,
        "versions": {"numpy": np.__version__, "pandas": pd.__version__},
    }
    (OUT_DIR / "skab_reference.json").write_text(json.dumps(meta, indent=1, sort_keys=True))
    print(f"wrote {OUT_DIR}/skab_reference.npz and .json")


def main() -> None:
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    _peer.authors_main(
        __doc__, __file__, repo="waico/SKAB", marker="core/metrics.py", peer=peer, venv=make_venv
    )


if __name__ == "__main__":
    main()
