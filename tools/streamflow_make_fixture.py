"""Builds the StreamFlow scheduler fixture from the authors' PeRFlow scheduler
(tests/data/streamflow/perflow_scheduler.npz and .json).

Authors' code: github.com/World-Snapshot/StreamFlow at commit
``b5135a88d37be351438b1dc737ac5abacfce173d`` (2026-01-07), files ``src/scheduler_perflow.py``
(``PeRFlowScheduler``, ``Time_Windows``) and ``src/perflow_batch_scheduler.py``
(``PeRFlowBatchScheduler``). Only these two modules are imported (never the pipeline or a
model); their functions are called from the checkout at run time, nothing of them is copied.

Usage (from the repository root; nothing is downloaded at run time except the venv's wheels)::

  # a checkout of the authors' repository, e.g. from a bare mirror:
  #   mkdir /tmp/authors_streamflow && git --git-dir=<mirror> archive HEAD src | tar -x -C /tmp/authors_streamflow
  python3 tools/streamflow_make_fixture.py --authors-dir /tmp/authors_streamflow

It creates the throwaway venv ``/tmp/peer_streamflow`` if absent (``torch==2.13.0``,
``diffusers==0.31.0`` — the lowest version the authors' ``env/requirements.txt`` allows, whose
``SchedulerMixin`` / ``ConfigMixin`` the scheduler subclasses — and ``numpy==1.26.4`` as pinned
there), then re-runs itself inside it with ``--peer``. There it records, with
``num_train_timesteps`` ``N`` and ``num_time_windows`` ``K``:

* ``ts/K{K}_N{N}_n{n}`` (int64): ``PeRFlowScheduler.set_timesteps(n).timesteps`` for several
  ``(K, N, n)``, including ``n < K`` (the authors raise ``n`` to ``K`` and print a note);
* ``lookup/K{K}_N{N}/...``: the window of probe times (float32) from ``get_window_alpha`` (its
  ``Time_Windows.get_window``): ``t``, ``start``, ``end``, ``gamma`` (NaN where the authors
  raise ``IndexError``: ``t <= 0.1 / N``), ``t_minus_thr`` (the authors' ``t - 0.1/N`` in torch
  float32), and the batched ``get_window_alpha_batch`` of ``perflow_batch_scheduler.py``
  (``batch_start``, ``batch_end``, ``batch_gamma``). Probes: every window boundary ``b`` and
  its threshold ``b + 0.1/N`` (float32), each with its float32 neighbours 1 and 2 ulp either
  side, ``t = 1`` and its lower neighbour, the last window's ``1/N`` and ``0.1/N`` +- 1 ulp;
* ``traj/{case}/...``: whole sampling trajectories of ``PeRFlowScheduler.step`` driven by a
  fixed linear eps-predictor ``eps = M x + beta * (timestep / N)`` (``M`` a ``(C, C)``
  channel-mixing matrix, ``beta`` a ``(C,)`` vector, both seeded and stored), from seeded
  noise ``(B, C, H, W) = (2, 3, 2, 2)``: ``x`` the ``(n + 1, B, H, W, C)`` float32 latents
  (channels-last, as fidia_jax stores them) after every step, ``timesteps`` (int64) and
  ``t`` (float32, ``timestep / N`` as torch divides it);
* the json: versions, commit, seed, the source files' sha256, the cases, and the exception
  ``PeRFlowBatchScheduler.step_batch`` raises when called.

torch is never a dependency of fidia_jax: only this script and its venv use it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import pathlib
import subprocess
import sys

import _peer  # tools/_peer.py (this script's folder is on sys.path)

VENV = pathlib.Path("/tmp/peer_streamflow")
ROOT = pathlib.Path(__file__).resolve().parents[1]
OUT_DIR = ROOT / "tests" / "data" / "streamflow"
COMMIT = "b5135a88d37be351438b1dc737ac5abacfce173d"
REPO = "github.com/World-Snapshot/StreamFlow"
FILES = ("src/scheduler_perflow.py", "src/perflow_batch_scheduler.py")
SEED = 20261204
#: (K, N, step counts) for set_timesteps.
TIMESTEP_CASES = [
    (1, 1000, (1, 2, 5)),
    (2, 1000, (1, 2, 3, 7)),
    (3, 1000, (2, 3, 4, 5, 8, 25)),
    (4, 1000, (1, 3, 4, 5, 6, 7, 9, 16, 25)),
    (5, 1000, (5, 6, 12)),
    (7, 1000, (7, 10, 20)),
    (10, 1000, (10, 13, 30)),
    (4, 500, (4, 6, 9)),
]
#: (K, N) for the window lookup.
LOOKUP_CASES = [(3, 1000), (4, 1000), (10, 1000), (4, 500)]
#: (name, K, N, n, prediction_type) for the trajectories.
TRAJ_CASES = [
    ("K4_n4_diff", 4, 1000, 4, "diff_eps"),
    ("K4_n6_diff", 4, 1000, 6, "diff_eps"),
    ("K4_n9_diff", 4, 1000, 9, "diff_eps"),
    ("K4_n2_diff", 4, 1000, 2, "diff_eps"),  # the authors raise n to K = 4
    ("K3_n5_diff", 3, 1000, 5, "diff_eps"),
    ("K10_n12_diff", 10, 1000, 12, "diff_eps"),
    ("K4_N500_n7_diff", 4, 500, 7, "diff_eps"),
    ("K4_n6_ddim", 4, 1000, 6, "ddim_eps"),
    ("K3_n7_ddim", 3, 1000, 7, "ddim_eps"),
]
SHAPE = (2, 3, 2, 2)  # (B, C, H, W)


def make_venv() -> pathlib.Path:
    return _peer.make_venv(VENV, ["torch==2.13.0"], ["diffusers==0.31.0", "numpy==1.26.4"])


def _probes(k: int, n: int):
    import numpy as np

    f32 = np.float32
    thr = f32(0.1 * (1.0 / n))
    ends = [f32(i / k) for i in range(k - 1, 0, -1)]  # the inner boundaries
    pts = [f32(1.0), np.nextafter(f32(1.0), f32(0.0)), f32(1.0 / n), thr]
    for b in [*ends, thr]:
        for c in [b, f32(b + thr)] if b != thr else [b]:
            x = c
            for _ in range(2):
                x = np.nextafter(x, f32(2.0))
                pts.append(x)
            x = c
            for _ in range(2):
                x = np.nextafter(x, f32(-1.0))
                pts.append(x)
            pts.append(c)
    return np.unique(np.asarray(pts, np.float32))[::-1].copy()


def peer(authors_dir: pathlib.Path) -> None:
    sys.path.insert(0, str(authors_dir))
    from importlib.metadata import version

    import numpy as np
    import torch
    from src.perflow_batch_scheduler import PeRFlowBatchScheduler
    from src.scheduler_perflow import PeRFlowScheduler

    out: dict[str, np.ndarray] = {}
    for k, n_train, steps in TIMESTEP_CASES:
        s = PeRFlowScheduler(num_train_timesteps=n_train, num_time_windows=k)
        for n in steps:
            s.set_timesteps(n)
            out[f"ts/K{k}_N{n_train}_n{n}"] = s.timesteps.numpy().astype(np.int64)

    for k, n_train in LOOKUP_CASES:
        s = PeRFlowScheduler(
            num_train_timesteps=n_train, num_time_windows=k, prediction_type="diff_eps"
        )
        t = _probes(k, n_train)
        start, end, gamma, tmt = (np.full(t.shape, np.nan, np.float32) for _ in range(4))
        for i, ti in enumerate(t):
            tt = torch.tensor(ti)
            tmt[i] = float(tt - 0.1 * s.time_windows.precision)
            try:
                ts_, te_, _, _, g, _, _ = s.get_window_alpha(tt)
            except IndexError:
                continue
            start[i], end[i], gamma[i] = float(ts_), float(te_), float(g)
        b = PeRFlowBatchScheduler(
            num_train_timesteps=n_train, num_time_windows=k, prediction_type="diff_eps"
        )
        bs, be, _, _, bg, _, _ = b.get_window_alpha_batch(torch.tensor(t))
        key = f"lookup/K{k}_N{n_train}"
        out[f"{key}/t"], out[f"{key}/start"], out[f"{key}/end"] = t, start, end
        out[f"{key}/gamma"], out[f"{key}/t_minus_thr"] = gamma, tmt
        out[f"{key}/batch_start"] = bs.numpy().astype(np.float32)
        out[f"{key}/batch_end"] = be.numpy().astype(np.float32)
        out[f"{key}/batch_gamma"] = bg.numpy().astype(np.float32)

    rng = np.random.default_rng(SEED)
    bsz, c, h, w = SHAPE
    m = (0.3 * rng.normal(size=(c, c))).astype(np.float32)
    beta = rng.normal(size=(c,)).astype(np.float32)
    out["model/M"], out["model/beta"] = m, beta
    mt, bt = torch.tensor(m), torch.tensor(beta)
    for name, k, n_train, n, pred in TRAJ_CASES:
        s = PeRFlowScheduler(num_train_timesteps=n_train, num_time_windows=k, prediction_type=pred)
        s.set_timesteps(n)
        noise = rng.normal(size=SHAPE).astype(np.float32)
        x = torch.tensor(noise)
        xs, tcs = [x.clone()], []
        for tstep in s.timesteps:
            t_c = tstep / n_train
            eps = torch.einsum("cd,bdhw->bchw", mt, x) + bt[None, :, None, None] * t_c
            x = s.step(eps, tstep, x, return_dict=False)[0]
            xs.append(x.clone())
            tcs.append(float(t_c))
        key = f"traj/{name}"
        out[f"{key}/x"] = np.stack([xi.numpy().transpose(0, 2, 3, 1) for xi in xs])
        out[f"{key}/timesteps"] = s.timesteps.numpy().astype(np.int64)
        out[f"{key}/t"] = np.asarray(tcs, np.float32)

    # the batched step as shipped (its pipeline never calls it; record what it does)
    b = PeRFlowBatchScheduler(prediction_type="diff_eps")
    b.set_timesteps(4)
    try:
        b.step_batch(torch.zeros(4, 3, 4, 4), b.timesteps, torch.zeros(4, 3, 4, 4))
        step_batch = "returned"
    except Exception as e:  # noqa: BLE001 - recorded, whatever it is
        step_batch = f"{type(e).__name__}: {e}"

    OUT_DIR.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(OUT_DIR / "perflow_scheduler.npz", **out)
    meta = {
        "repository": REPO,
        "commit": COMMIT,
        "files": {f: hashlib.sha256((authors_dir / f).read_bytes()).hexdigest() for f in FILES},
        "seed": SEED,
        "shape_BCHW": list(SHAPE),
        "model": "eps = einsum('cd,bdhw->bchw', M, x) + beta[c] * (timestep / N)",
        "timestep_cases": [[k, nt, list(st)] for k, nt, st in TIMESTEP_CASES],
        "lookup_cases": [list(x) for x in LOOKUP_CASES],
        "traj_cases": [list(x) for x in TRAJ_CASES],
        "step_batch": step_batch,
        "versions": {p: version(p) for p in ("torch", "diffusers", "numpy")},
        "script": "tools/streamflow_make_fixture.py",
    }
    (OUT_DIR / "perflow_scheduler.json").write_text(
        json.dumps(meta, indent=1, sort_keys=True) + "\n"
    )
    print(
        f"wrote {OUT_DIR / 'perflow_scheduler.npz'} ({len(out)} arrays); step_batch: {step_batch}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--authors-dir", type=pathlib.Path, required=True, help="checkout of StreamFlow"
    )
    parser.add_argument("--peer", action="store_true", help="(internal) run inside the venv")
    args = parser.parse_args()
    authors = args.authors_dir.resolve()
    for f in FILES:
        if not (authors / f).is_file():
            raise SystemExit(f"--authors-dir {authors}: {f} not found")
    if args.peer:
        peer(authors)
        return
    py = make_venv()
    subprocess.run(
        [str(py), str(pathlib.Path(__file__).resolve()), "--peer", "--authors-dir", str(authors)],
        check=True,
        cwd="/tmp",
    )


if __name__ == "__main__":
    main()
