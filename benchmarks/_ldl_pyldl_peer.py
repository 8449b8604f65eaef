"""PyLDL's classic LDL baselines on given folds (run inside a throwaway venv with python-ldl).

Reads an ``.npz`` with ``x_fxnxd`` (features standardised per fold), ``d_nxc``, ``train_fxn``
(0/1 training mask per fold) and writes, per algorithm, test predictions ``pred_<name>``
``(F, N, c)`` (rows outside a fold's test set are zero). Algorithms: ``SA_BFGS`` (MaxEnt model,
L-BFGS, PyLDL defaults), ``PT_Bayes`` (problem transformation + Gaussian naive Bayes),
``BD_LDL`` (closed form). Seeds numpy with 0 before each fit (SA_BFGS starts from
``np.random.random``).

Usage (from benchmarks/ldl.py): <venv>/bin/python benchmarks/_ldl_pyldl_peer.py IN.npz OUT.npz
"""

import sys
import time

import numpy as np

ALGOS = ("SA_BFGS", "PT_Bayes", "BD_LDL")


def main() -> int:
    import pyldl.algorithms as algs

    src = np.load(sys.argv[1])
    x, d, train = src["x_fxnxd"], src["d_nxc"], src["train_fxn"].astype(bool)
    out = {}
    for name in ALGOS:
        t0 = time.perf_counter()
        pred = np.zeros((x.shape[0], *d.shape))
        for f in range(x.shape[0]):
            np.random.seed(0)
            tr, te = train[f], ~train[f]
            model = getattr(algs, name)().fit(x[f, tr], d[tr])
            pred[f, te] = model.predict(x[f, te])
        out[f"pred_{name}"] = pred
        out[f"wall_{name}"] = np.float64(time.perf_counter() - t0)
    np.savez(sys.argv[2], **out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
