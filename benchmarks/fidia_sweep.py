"""FIDIA against its baselines at a budget that can tell them apart: a β (KL weight) sweep at
150 steps, judged by ProteinMPNN checkpoints and a model the reward never used.

Two verbs:

``train``: for each seed, one :class:`fidia_jax.projects.fidia.Trainer` (rewards calibrated once
on the frozen reference, the same for every entry), then every grid entry is trained with
``train_and_evaluate`` into ``WORKDIR/<label>_s<seed>``, evaluated on the 8 held-out backbones at
steps 0, 50, 100 and 150 (``eval.every``: ``eval_curve.jsonl`` and the samples in ``samples/``).
A finished run is skipped and a killed one resumes, so the grid can run in parts (several
processes, one per seed, or one entry list after another) into one workdir.

``report``: reads every run folder of the given workdirs (``--merge`` several), scores the saved
held-out samples with judges the training reward never used (:mod:`fidia_jax.projects.fidia`'s
held-out judges: the ProteinMPNN checkpoints left out of the training ensemble and the policy's
start, and Frame2seq when its wheel is installed), and writes the tables, paired tests and
figures (``--out`` JSON, ``--figures`` folder).

Usage (2-core CPU)::

  export FIDIA_DATA_DIR=../shared/data
  python benchmarks/fidia_sweep.py train --seeds 0 --workdir out/fidia_sweep      # one part
  python benchmarks/fidia_sweep.py train --seeds 1 --workdir out/fidia_sweep      # in parallel
  python benchmarks/fidia_sweep.py report --merge out/fidia_sweep --figures docs/figures
  python benchmarks/fidia_sweep.py report --retable benchmarks/results/fidia_sweep.json

``report`` writes ``benchmarks/results/fidia_sweep.json`` through ``benchmarks/_results.py``
(tables ``final``, ``curves``, ``paired``, which docs/fidia.md can render; the raw record beside
them); ``--retable`` re-derives the tables from that file's record without scoring again.

Every number uses *proxy* success criteria (no structure predictor offline); the report states
the criterion next to each one.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _results import command_line  # noqa: E402
from fidia_methods import _parse_method  # noqa: E402

#: The sweep's base: the `small` preset (8 + 8 motif-scaffolding backbones, 64 residues, n = 16,
#: 2 backbones per step) trained for 150 steps at lr 1e-4, evaluated every 50 steps.
BASE_SETS = (
    "train.num_steps=150",
    "train.learning_rate=1e-4",
    "train.checkpoint_every=50",
    "eval.every=50",
)

#: Grid entries, most important first (a part cut short still has complete, paired entries):
#: every method at the middle β, then GRPO and FIDIA (k = 8) at a low and a high β.
GRID = (
    "bon",
    "fidia8_b0.01=fidia,k_bon=8,beta_kl=0.01",
    "grpo_b0.01=grpo,beta_kl=0.01",
    "rloo_b0.01=rloo,beta_kl=0.01",
    "fidia4_b0.01=fidia,k_bon=4,beta_kl=0.01",
    "fidia8_b0.001=fidia,k_bon=8,beta_kl=0.001",
    "grpo_b0.001=grpo,beta_kl=0.001",
    "fidia8_b0.1=fidia,k_bon=8,beta_kl=0.1",
    "grpo_b0.1=grpo,beta_kl=0.1",
)


def _train(args) -> None:
    from fidia_jax.projects import fidia

    base = fidia.override_config(fidia.load_config(args.config), list(BASE_SETS) + args.set)
    entries = [_parse_method(e) for e in args.entries]
    workdir = pathlib.Path(args.workdir)
    for seed in args.seeds:
        t0 = time.time()
        trainer = fidia.Trainer(fidia.override_config(base, [f"seed={seed}", "method=bon"]))
        print(f"[seed {seed}] trainer ready in {time.time() - t0:.0f}s", flush=True)
        for label, kind, overrides in entries:
            tr = (
                trainer
                if kind == "bon" and not overrides
                else trainer.with_method(kind, **overrides)
            )
            run = workdir / f"{label}_s{seed}"
            done = run / "eval_after.json"
            if done.is_file() and json.loads(
                (run / "config.json").read_text()
            ) == fidia.config_to_dict(tr.config):
                print(f"[seed {seed}] {label}: done already", flush=True)
                continue
            t0 = time.time()
            res = fidia.train_and_evaluate(tr.config, run, trainer=tr, progress=False)
            s = res["after"]["summary"]
            (run / "label.json").write_text(
                json.dumps(
                    {
                        "label": label,
                        "method": kind,
                        "overrides": overrides,
                        "seed": seed,
                        "seconds": time.time() - t0,
                        "command": command_line(),
                    }
                )
            )
            print(
                f"[seed {seed}] {label}: max@8 {s['max@8']:+.3f} success {s['success']:.2f} "
                f"identity {s['identity']:.3f} ({time.time() - t0:.0f}s)",
                flush=True,
            )


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="verb", required=True)
    tr = sub.add_parser("train", help="train grid entries into WORKDIR (resumable)")
    tr.add_argument("--config", default="small")
    tr.add_argument("--set", action="append", default=[], help="extra config overrides")
    tr.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    tr.add_argument(
        "--entries",
        nargs="+",
        default=list(GRID),
        help="LABEL=METHOD,KEY=VALUE,... (train.KEY overrides), as fidia_methods.py",
    )
    tr.add_argument("--workdir", default="out/fidia_sweep")
    rep = sub.add_parser("report", help="score, test and plot the runs of WORKDIR(s)")
    rep.add_argument("--merge", nargs="+", default=["out/fidia_sweep"], metavar="WORKDIR")
    rep.add_argument("--judges", nargs="+", default=["mpnn-heldout", "frame2seq"])
    rep.add_argument("--out", default=str(HERE / "results" / "fidia_sweep.json"))
    rep.add_argument("--figures", default=None, help="folder for the PNG figures")
    rep.add_argument(
        "--retable",
        metavar="FILE",
        default=None,
        help="only rewrite the tables of a results file from its own record (no scoring)",
    )
    args = ap.parse_args(argv)
    if args.verb == "train":
        _train(args)
    elif args.retable:
        from _fidia_sweep_report import sweep_tables
        from _results import retable

        retable(args.retable, sweep_tables)
    else:
        from _fidia_sweep_report import report

        report(args)


if __name__ == "__main__":
    main()
