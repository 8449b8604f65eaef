"""Builds the CausalEGM parity fixture (tests/data/causalegm/trace.npz + trace.json).

Authors' code: github SUwonglab/CausalEGM at commit 4be096247c92f145edc43859d08a3415342066e3
(``src/CausalEGM/causalEGM.py``, ``model.py``, ``util.py``; byte-identical to the PyPI sdist
``causalegm`` 0.4.0). Nothing is downloaded at run time: give a checkout of that repository.

Usage (from the repository root)::

  python tools/causalegm_make_fixture.py --authors-dir /tmp/authors_causalegm

It creates a throwaway virtual environment ``/tmp/peer_causalegm/venv`` if absent
(``tensorflow-cpu``, ``scikit-learn``, ``pandas``, ``python-dateutil``: the package's own
requirements; TensorFlow is never a dependency of fidia_jax), then re-runs itself inside it with
``--peer``. There it imports ``CausalEGM`` from ``<authors-dir>/src`` and runs the package's own
``CausalEGM.train`` once, on a small seeded problem (20 units, 4 covariates, batch 8, latent
sizes (1, 2, 1, 2), narrow networks, ``g_d_freq = 2``, 4 iterations, evaluation every 2), with
recording wrappers around the instance's ``train_disc_step``, ``train_gen_step`` and
``evaluate`` (each calls the package's method unchanged) and around ``tf.random.uniform`` (it
stores the gradient-penalty mixing weights the package draws). Recorded:

* the networks' initial and final weights (Keras layout: kernel ``(in, out)``);
* per training step: the batch rows (found by matching the batch's covariates), the ``N(0, I)``
  draw ``z``, the two mixing weights (critic steps) and the losses the package returns;
* the weights just before the first generator step (after ``g_d_freq`` critic steps);
* per evaluation: the iteration, the training outcome MSE and the in-sample ITE; the
  best iteration and ``best_causal_pre``.

Outputs: ``tests/data/causalegm/trace.npz`` (float32 values, a few tens of kB) and
``trace.json`` (versions, commit, seed, settings). Test: tests/projects/causal/
test_causalegm_fidelity.py.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile

import _peer  # tools/_peer.py (this script's folder is on sys.path)

VENV = pathlib.Path("/tmp/peer_causalegm/venv")
ROOT = pathlib.Path(__file__).resolve().parents[1]
OUT_DIR = ROOT / "tests" / "data" / "causalegm"
COMMIT = "4be096247c92f145edc43859d08a3415342066e3"
SEED = 7  # the package's random_seed (TensorFlow: initialisation, mixing weights)
DATA_SEED = 20261204  # our draw of the small problem
N, V_DIM, BATCH = 20, 4, 8
PARAMS = {
    "z_dims": [1, 2, 1, 2],
    "lr": 0.01,
    "alpha": 1.0,
    "beta": 1.0,
    "gamma": 10.0,
    "g_d_freq": 2,
    "g_units": [8, 8],
    "e_units": [8, 8],
    "f_units": [6, 4],
    "h_units": [6, 4],
    "dz_units": [6, 4],
    "dv_units": [6, 4],
    "use_z_rec": True,
    "use_v_gan": True,
    "binary_treatment": True,
}
N_ITER = 3  # the package loops range(n_iter + 1): 4 iterations
BATCHES_PER_EVAL = 2
NETS = ("g_net", "e_net", "f_net", "h_net", "dz_net", "dv_net")


def make_venv() -> pathlib.Path:
    return _peer.make_venv(VENV, ["tensorflow-cpu", "scikit-learn", "pandas", "python-dateutil"])


def _weights(model) -> dict:
    """Every network's variables by layer: ``<net>/<i>/kernel|bias`` (all), ``gamma|beta``
    (the critics' batch norm)."""
    out = {}
    for name in NETS:
        net = getattr(model, name)
        for i, (fc, bn) in enumerate(net.all_layers):
            out[f"{name}/{i}/kernel"] = fc.kernel.numpy()
            out[f"{name}/{i}/bias"] = fc.bias.numpy()
            if name.startswith("d") and i < len(net.all_layers) - 1:
                out[f"{name}/{i}/gamma"] = bn.gamma.numpy()
                out[f"{name}/{i}/beta"] = bn.beta.numpy()
    return out


def peer(authors_dir: str) -> None:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    sys.path.insert(0, str(pathlib.Path(authors_dir) / "src"))
    import numpy as np
    import tensorflow as tf
    from CausalEGM import CausalEGM  # the authors' checkout (imported to run only)

    rng = np.random.default_rng(DATA_SEED)
    v = rng.normal(size=(N, V_DIM)).astype("float32")
    t = (rng.uniform(size=N) < 0.4).astype("float32")
    y = (v[:, 0] + 2.0 * t + 0.5 * rng.normal(size=N)).astype("float32")

    # store the package's gradient-penalty mixing weights (drawn inside train_disc_step)
    drawn = [tf.Variable(0.0), tf.Variable(0.0)]
    calls = [0]
    uniform = tf.random.uniform

    def recording_uniform(*args, **kwargs):
        e = uniform(*args, **kwargs)
        drawn[calls[0] % 2].assign(e)  # epsilon_z, then epsilon_v
        calls[0] += 1
        return e

    tf.random.uniform = recording_uniform
    trace: dict = {"disc": [], "gen": [], "eval": []}
    out: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        params = {**PARAMS, "dataset": "fixture", "output_dir": tmp, "save_model": False,
                  "save_res": False, "v_dim": V_DIM}  # fmt: skip
        model = CausalEGM(params=params, random_seed=SEED)
        out.update({f"init/{k}": a for k, a in _weights(model).items()})
        disc, gen, evaluate = model.train_disc_step, model.train_gen_step, model.evaluate

        def rows(batch_v):
            return np.argmin(((batch_v[:, None, :] - v[None]) ** 2).sum(-1), axis=1)

        def disc_step(batch_z, batch_v):
            res = disc(batch_z, batch_v)
            trace["disc"].append(
                (rows(batch_v), batch_z, [d.numpy() for d in drawn], [r.numpy() for r in res])
            )
            return res

        def gen_step(batch_z, batch_v, batch_x, batch_y):
            if not trace["gen"]:
                out.update({f"before_gen1/{k}": a for k, a in _weights(model).items()})
            res = gen(batch_z, batch_v, batch_x, batch_y)
            trace["gen"].append((rows(batch_v), batch_z, [r.numpy() for r in res]))
            return res

        def eval_(data, *a, **kw):
            res = evaluate(data, *a, **kw)
            trace["eval"].append((np.asarray(res[0]).reshape(-1), float(res[2])))
            return res

        model.train_disc_step, model.train_gen_step, model.evaluate = disc_step, gen_step, eval_
        model.train(data=[t, y, v], batch_size=BATCH, n_iter=N_ITER,
                    batches_per_eval=BATCHES_PER_EVAL, verbose=0)  # fmt: skip
        out.update({f"final/{k}": a for k, a in _weights(model).items()})

    out["v"], out["t"], out["y"] = v, t, y
    out["disc_rows"] = np.stack([r for r, *_ in trace["disc"]]).astype(np.int32)
    out["disc_z"] = np.stack([z for _, z, *_ in trace["disc"]])
    out["disc_eps"] = np.asarray([e for *_, e, _ in trace["disc"]], np.float32)
    out["disc_losses"] = np.asarray([r for *_, r in trace["disc"]], np.float32)  # dv, dz, d
    out["gen_rows"] = np.stack([r for r, *_ in trace["gen"]]).astype(np.int32)
    out["gen_z"] = np.stack([z for _, z, _ in trace["gen"]])
    # g_adv, e_adv, l2_v, l2_z, l2_x, l2_y, g_e_loss
    out["gen_losses"] = np.asarray([r for *_, r in trace["gen"]], np.float32)
    out["eval_ite"] = np.stack([e for e, _ in trace["eval"]]).astype(np.float32)
    out["eval_mse_y"] = np.asarray([m for _, m in trace["eval"]], np.float32)
    out["best_causal_pre"] = np.asarray(model.best_causal_pre, np.float32).reshape(-1)
    out["best_batch_idx"] = np.int32(model.best_batch_idx)
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(OUT_DIR / "trace.npz", **out)
    meta = {
        "authors_repo": "github SUwonglab/CausalEGM",
        "commit": COMMIT,
        "files": ["src/CausalEGM/causalEGM.py", "src/CausalEGM/model.py", "src/CausalEGM/util.py"],
        "pypi": "causalegm 0.4.0 (same files)",
        "tensorflow": tf.__version__,
        "keras": tf.keras.__version__,
        "numpy": np.__version__,
        "random_seed": SEED,
        "data_seed": DATA_SEED,
        "n_units": N,
        "v_dim": V_DIM,
        "batch_size": BATCH,
        "n_iter": N_ITER,
        "batches_per_eval": BATCHES_PER_EVAL,
        "params": PARAMS,
        "made_by": "tools/causalegm_make_fixture.py",
    }
    (OUT_DIR / "trace.json").write_text(json.dumps(meta, indent=2) + "\n")
    print(f"wrote {OUT_DIR / 'trace.npz'}: {len(out)} arrays")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--authors-dir", required=True, help="checkout of SUwonglab/CausalEGM")
    ap.add_argument("--peer", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.peer:
        peer(args.authors_dir)
        return
    py = make_venv()
    subprocess.run(
        [str(py), __file__, "--peer", "--authors-dir", str(args.authors_dir)], check=True
    )


if __name__ == "__main__":
    main()
