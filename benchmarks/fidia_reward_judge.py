"""CPU benchmark: the FIDIA reward's judge (designability proxy) and a full reward call.

The judge averages ProteinMPNN log-likelihoods over checkpoints x decoding orders.
``fidia_jax.projects.fidia.Judge`` runs the encoder once per checkpoint and decodes every
(sequence, order) row in one jitted call. The peer, measured in the same run, is the plain
path through ``fidia_jax.models.score``, called once per decoding order, which gives the same
numbers.

Usage:
  python benchmarks/fidia_reward_judge.py [--num-samples 16] [--orders 2] [--repeats 5] [--out FILE]

Backbone: the packaged default (BPTI 5PTI chain A, 58 residues) with 16 samples of vanilla
v_48_020 at T = 0.1; judge = vanilla v_48_002 (one checkpoint; the default ensemble has four and
costs four times as much). Prints a table and writes ``--out`` (default
benchmarks/results/fidia_reward_judge.json; ``_results``: the ``judge`` table, min / median /
max per path over interleaved calls).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import time

import _results
import jax
import numpy as np

from fidia_jax import protein as fp
from fidia_jax.models import MPNNInputs, ProteinMPNN, sample, score
from fidia_jax.projects import fidia

DEFAULT_OUT = pathlib.Path(__file__).parent / "results" / "fidia_reward_judge.json"


def _time_interleaved(fns, repeats):
    """Wall seconds per call of each function (a list per function), calls interleaved (fair
    under shared load), after one call each that compiles; and those first calls' outputs."""
    outs = [fn() for fn in fns]  # compile + warm up
    ts = [[] for _ in fns]
    for _ in range(repeats):
        for i, fn in enumerate(fns):
            t0 = time.perf_counter()
            fn()
            ts[i].append(time.perf_counter() - t0)
    return ts, outs


def judge_table(times: dict[str, list[float]]) -> dict:
    """Per path: calls, seconds per call (min / median / max) and the peer's median over this
    path's median (the peer is the row named ``peer: ...``)."""
    peer = next(statistics.median(t) for k, t in times.items() if k.startswith("peer"))
    return {
        "columns": ["path", "calls", "s / call min", "s / call median", "s / call max",
                    "peer / this"],
        "rows": [[k, len(t), min(t), statistics.median(t), max(t), peer / statistics.median(t)]
                 for k, t in times.items()],
        "formats": [None, "d", ".2f", ".2f", ".2f", ".2f"],
    }  # fmt: skip


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--num-samples", type=int, default=16)
    ap.add_argument("--orders", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument(
        "--out",
        type=pathlib.Path,
        default=DEFAULT_OUT,
        help=f"JSON result file (default: {DEFAULT_OUT})",
    )
    return ap


def main(argv=None):
    args = parser().parse_args(argv)

    task = fp.task_from_structure(fp.default_backbone_path(), fixed="A13-17,A30,A38,A51")
    policy = ProteinMPNN.from_checkpoint("v_48_020")
    inputs = MPNNInputs.from_protein(task.protein)
    seqs = np.asarray(
        sample(
            policy,
            jax.random.key(0),
            inputs,
            num_samples=args.num_samples,
            temperature=0.1,
            fixed_mask=task.fixed_mask,
        ).sequences
    )
    judge = fidia.Judge.from_config(
        fidia.JudgeConfig(checkpoints=(("v_48_002", "vanilla"),), num_orders=args.orders)
    )
    mask = task.designable_mask
    model = judge.models[0]
    orders = judge._orders(mask.astype(np.float32))
    base = inputs._replace(chain_mask=mask.astype(np.float32))

    def ours():
        return judge.log_likelihood(task.protein, seqs, mask)

    def peer():
        vals = [
            -np.asarray(score(model, base, seqs, np.broadcast_to(o, seqs.shape)).nll)
            for o in orders
        ]
        return np.mean(vals, 0)

    rm = fidia.RewardModel.build(task, judge=judge).fit(seqs)
    load_start = _results.load_average()
    names = (
        "Judge.log_likelihood (one jitted call per checkpoint: encoder once, all rows decoded)",
        "peer: models.score per order",
        "full RewardModel call (judge + jnp terms + ProtParam)",
    )
    ts, (v_ours, v_peer, res) = _time_interleaved([ours, peer, lambda: rm(seqs)], args.repeats)
    times = dict(zip(names, ts, strict=True))
    max_diff = float(np.max(np.abs(v_ours - v_peer)))
    print(
        f"N = {args.num_samples} sequences, L = {task.length}, 1 checkpoint x {args.orders} orders"
    )
    print(
        f"max |ours - peer| = {max_diff:.2e} nats; proxy pass rate of the samples = {res.passes.mean():.3f}"
    )
    raw = {
        "num_samples": args.num_samples,
        "length": task.length,
        "orders": args.orders,
        "seconds": times,
        "max_abs_diff": max_diff,
        "proxy_pass_rate": float(res.passes.mean()),
        "mean_designability": float(res.breakdown.components["designability"].mean()),
    }
    path = _results.write_results(
        pathlib.Path(args.out).stem, {"judge": judge_table(times)}, load_start=load_start,
        extra=raw, out=args.out,
    )  # fmt: skip
    for row in json.loads(path.read_text())["tables"]["judge"]["rows"]:
        print("  ".join(f"{c:.3g}" if isinstance(c, float) else str(c) for c in row))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
