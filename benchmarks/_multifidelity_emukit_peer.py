"""Linear autoregressive (Kennedy–O'Hagan AR1) co-kriging by emukit + GPy: the peer of
``benchmarks/multifidelity.py``.

Self-contained (numpy, GPy, emukit; never fidia_jax or jax), run under an interpreter that has
emukit and GPy (``tools/multifidelity_make_gp_venv.sh`` makes one in /tmp). Input: an ``.npz``
with, per problem ``p``, ``p/x_train`` (N, D), ``p/y_train`` (N,), ``p/fid_train`` (N,) with
0 = high fidelity and larger = lower fidelity, ``p/x_test`` (M, D). Output: an ``.npz`` with
``p/pred`` (M,), the posterior mean of the high fidelity, and ``p/seconds``.

Model: emukit's ``GPyLinearMultiFidelityModel`` with ``LinearMultiFidelityKernel`` (one RBF
kernel per fidelity, Kennedy & O'Hagan, Biometrika 87 (2000)), fidelities ordered low -> high
as emukit expects; labels standardised by the high-fidelity training labels; likelihood
noise variances fixed at 1e-6 (deterministic codes; FreeSolv: learned); hyper-parameters by
GPy's L-BFGS (``--max-iters`` iterations, ``--restarts`` random restarts when > 1).
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def fit_predict(x, y, fid, x_test, *, restarts: int, max_iters: int, fixed_noise: bool, ard: bool):
    import GPy
    from emukit.model_wrappers.gpy_model_wrappers import GPyMultiOutputWrapper
    from emukit.multi_fidelity.convert_lists_to_array import convert_x_list_to_array
    from emukit.multi_fidelity.kernels import LinearMultiFidelityKernel
    from emukit.multi_fidelity.models import GPyLinearMultiFidelityModel

    k = int(fid.max()) + 1
    hf = fid == 0
    mu, sd = y[hf].mean(), (y[hf].std() if hf.sum() > 1 else 1.0) or 1.0
    ys = (y - mu) / sd
    # emukit: fidelity index 0 = lowest, k - 1 = highest
    level = (k - 1) - fid
    x_aug = np.concatenate([x, level[:, None].astype(np.float64)], axis=1)
    y_aug = ys[:, None]
    d = x.shape[1]
    kernels = [GPy.kern.RBF(d, ARD=ard) for _ in range(k)]
    kernel = LinearMultiFidelityKernel(kernels)
    gpy_model = GPyLinearMultiFidelityModel(x_aug, y_aug, kernel, n_fidelities=k)
    for i in range(k):
        noise = getattr(gpy_model.mixed_noise, "Gaussian_noise" + ("" if i == 0 else f"_{i}"))
        if fixed_noise:
            noise.fix(1e-6)
        else:
            noise.variance = 0.05
    if restarts > 1:
        gpy_model.optimize_restarts(restarts, max_iters=max_iters, verbose=False, robust=True)
    else:
        gpy_model.optimize(max_iters=max_iters)
    model = GPyMultiOutputWrapper(gpy_model, k, n_optimization_restarts=0)
    x_test_aug = convert_x_list_to_array([x_test] * k)[
        len(x_test) * (k - 1) :
    ]  # highest level rows
    mean, _ = model.predict(x_test_aug)
    return mean[:, 0] * sd + mu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("inp")
    parser.add_argument("out")
    parser.add_argument("--restarts", type=int, default=1)
    parser.add_argument("--max-iters", type=int, default=200)
    args = parser.parse_args()
    data = np.load(args.inp)
    problems = sorted({k.split("/")[0] for k in data.files})
    out = {}
    for p in problems:
        t = time.perf_counter()
        np.random.seed(0)
        noisy = p.startswith("freesolv")
        pred = fit_predict(
            data[f"{p}/x_train"].astype(np.float64), data[f"{p}/y_train"].astype(np.float64),
            data[f"{p}/fid_train"].astype(int), data[f"{p}/x_test"].astype(np.float64),
            restarts=args.restarts, max_iters=args.max_iters, fixed_noise=not noisy, ard=not noisy,
        )  # fmt: skip
        out[f"{p}/pred"] = pred
        out[f"{p}/seconds"] = np.float64(time.perf_counter() - t)
        print(f"co-kriging {p}: {out[f'{p}/seconds']:.1f} s", flush=True)
    np.savez(args.out, **out)


if __name__ == "__main__":
    main()
