"""Peer for benchmarks/causal.py: the authors' ``causalegm`` package (TensorFlow) on given data.

Self-contained (numpy + the package; never fidia_jax or jax); run under the interpreter of a
throwaway venv (``/tmp/peer_causal/venv``, made by ``benchmarks/causal.py --make-peer-venv``).

Usage: ``python _causalegm_peer.py IN.npz OUT.npz N_ITER SEED [SEED ...]``. ``IN.npz`` holds
``x`` (N, D), ``t`` (N,), ``y`` (N,). For each seed the package's CausalEGM is built with its
CLI defaults (``z_dims=[3,6,3,6]``, lr 2e-4, alpha=beta=1, gamma=10, g_d_freq=5, widths
``[64]*5`` and ``[64,32,8]``) and trained with ``model.train(data=[t, y, x], batch_size=32,
n_iter=N_ITER, batches_per_eval=500)``; ``OUT.npz`` gets ``ite_<seed>``: the package's
``best_causal_pre`` (in-sample ITE at the iteration of lowest training outcome MSE) and
``wall_<seed>`` (seconds).
"""

import os
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402


def main():
    from CausalEGM import CausalEGM  # the package of the throwaway venv (imported to run only)

    src, dst, n_iter, *seeds = sys.argv[1:]
    d = np.load(src)
    x, t, y = d["x"].astype("float32"), d["t"].astype("float32"), d["y"].astype("float32")
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for seed in map(int, seeds):
            params = {
                "dataset": "peer",
                "output_dir": tmp,
                "save_model": False,
                "save_res": False,
                "binary_treatment": True,
                "z_dims": [3, 6, 3, 6],
                "v_dim": x.shape[1],
                "lr": 0.0002,
                "alpha": 1.0,
                "beta": 1.0,
                "gamma": 10.0,
                "g_d_freq": 5,
                "g_units": [64] * 5,
                "e_units": [64] * 5,
                "f_units": [64, 32, 8],
                "h_units": [64, 32, 8],
                "dz_units": [64, 32, 8],
                "dv_units": [64, 32, 8],
                "use_z_rec": True,
                "use_v_gan": True,
            }
            t0 = time.time()
            model = CausalEGM(params=params, random_seed=seed)
            model.train(
                data=[t, y, x], batch_size=32, n_iter=int(n_iter), batches_per_eval=500, verbose=0
            )
            out[f"ite_{seed}"] = np.asarray(model.best_causal_pre).reshape(-1)
            out[f"wall_{seed}"] = np.float64(time.time() - t0)
            print(f"causalegm peer: seed {seed} done in {out[f'wall_{seed}']:.0f} s", flush=True)
    np.savez(dst, **out)


if __name__ == "__main__":
    main()
