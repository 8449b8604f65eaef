"""Peer for benchmarks/causal.py: the authors' ``causalegm`` package (TensorFlow) on given data.

Self-contained (numpy + the package; never fidia_jax or jax); run under the interpreter of a
throwaway venv (``/tmp/peer_causal/venv``, made by ``benchmarks/causal.py --make-peer-venv``).

Usage: ``python _causalegm_peer.py IN.npz OUT.npz N_ITER SEED [SEED ...]``. ``IN.npz`` holds
``x`` (N, D), ``t`` (N,), ``y`` (N,). For each seed the package's CausalEGM is built with its
CLI defaults (``z_dims=[3,6,3,6]``, lr 2e-4, alpha=beta=1, gamma=10, g_d_freq=5, widths
``[64]*5`` and ``[64,32,8]``) and trained with ``model.train(data=[t, y, x], batch_size=32,
n_iter=N_ITER, batches_per_eval=500)``; ``OUT.npz`` gets ``ite_<seed>``: the package's
``best_causal_pre`` (in-sample ITE at the iteration of lowest training outcome MSE) and
``wall_<seed>`` (seconds), ``best_iter_<seed>`` and ``evals_<seed>`` (``(iteration, train
MSE(y))`` rows).

With ``CAUSALEGM_PEER_RECORD=1`` it also stores, per seed, what a replay of the run by our port
needs (``benchmarks/causalegm_gap.py``): the networks' initial weights
``init_<seed>/<net>/<i>/kernel|bias|gamma|beta`` and the gradient-penalty mixing weights the
package draws inside ``train_disc_step`` (``eps_<seed>``, ``(n_iter + 1, g_d_freq, 2)``), by
wrapping ``tf.random.uniform`` and the instance's ``train_disc_step`` (each calls the package's
own function unchanged). The batches and ``N(0, I)`` draws need no recording: the package
draws them from numpy seeded with 123 (``Base_sampler``), which our port reproduces.
"""

import os
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

NETS = ("g_net", "e_net", "f_net", "h_net", "dz_net", "dv_net")


def _weights(model, prefix):
    out = {}
    for name in NETS:
        net = getattr(model, name)
        for i, (fc, bn) in enumerate(net.all_layers):
            out[f"{prefix}/{name}/{i}/kernel"] = fc.kernel.numpy()
            out[f"{prefix}/{name}/{i}/bias"] = fc.bias.numpy()
            if name.startswith("d") and i < len(net.all_layers) - 1:
                out[f"{prefix}/{name}/{i}/gamma"] = bn.gamma.numpy()
                out[f"{prefix}/{name}/{i}/beta"] = bn.beta.numpy()
    return out


def main():
    from CausalEGM import CausalEGM  # the package of the throwaway venv (imported to run only)
    from CausalEGM import causalEGM as package_module

    tf = package_module.tf  # the TensorFlow the package runs on (a peer imports only its package)

    record = os.environ.get("CAUSALEGM_PEER_RECORD") == "1"
    drawn = [tf.Variable(0.0), tf.Variable(0.0)]
    if record:
        calls = [0]
        uniform = tf.random.uniform

        def recording_uniform(*args, **kwargs):
            e = uniform(*args, **kwargs)
            drawn[calls[0] % 2].assign(e)  # epsilon_z, then epsilon_v
            calls[0] += 1
            return e

        tf.random.uniform = recording_uniform
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
            evals, eps = [], []
            evaluate = model.evaluate

            def eval_(data, *a, _evaluate=evaluate, _evals=evals, **kw):
                res = _evaluate(data, *a, **kw)
                _evals.append(float(res[2]))
                return res

            model.evaluate = eval_
            if record:
                out.update(_weights(model, f"init_{seed}"))
                disc = model.train_disc_step

                def disc_step(batch_z, batch_v, _disc=disc, _eps=eps):
                    res = _disc(batch_z, batch_v)
                    _eps.append([v.numpy() for v in drawn])
                    return res

                model.train_disc_step = disc_step
            model.train(
                data=[t, y, x], batch_size=32, n_iter=int(n_iter), batches_per_eval=500, verbose=0
            )
            out[f"ite_{seed}"] = np.asarray(model.best_causal_pre).reshape(-1)
            out[f"wall_{seed}"] = np.float64(time.time() - t0)
            out[f"best_iter_{seed}"] = np.int64(model.best_batch_idx)
            its = np.arange(0, int(n_iter) + 1, 500)
            out[f"evals_{seed}"] = np.stack([its, np.asarray(evals)], axis=1)
            if record:
                out[f"eps_{seed}"] = np.asarray(eps, np.float32).reshape(int(n_iter) + 1, 5, 2)
            print(f"causalegm peer: seed {seed} done in {out[f'wall_{seed}']:.0f} s", flush=True)
    np.savez(dst, **out)


if __name__ == "__main__":
    main()
