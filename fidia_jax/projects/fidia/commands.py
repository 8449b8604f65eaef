"""``fidia-jax train | evaluate | design`` and the FIDIA ``demo`` (logic; ``cli.py`` parses).

* ``train --config NAME|FILE [--set group.key=value ...]`` -> :func:`train_and_evaluate`.
* ``evaluate --checkpoint RUN_DIR|WEIGHTS [--config ...]`` -> held-out metrics of a policy.
* ``design --checkpoint RUN_DIR|WEIGHTS --pdb FILE [--fixed SPEC] --num-samples N`` -> Best-of-N
  pick, every sample as FASTA, a JSON report and a plot.
* :func:`run_fidia_demo`: a short FIDIA fine-tune on the built-in default backbone, then a
  Best-of-N design with the fine-tuned policy; prints max@N before and after.

Success everywhere uses the *proxy* thresholds of :class:`fidia_jax.protein.ProxyThresholds`: no
structure predictor is available offline, and the reports say so (``"criteria": "proxy"``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import pathlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from fidia_jax._io import atomic_path, atomic_write_text, make_console

__all__ = ["COMMANDS", "add_subcommands", "run_command", "run_design", "run_evaluate",
           "run_fidia_demo", "run_train"]

#: Subcommands registered by :func:`add_subcommands`.
COMMANDS = ("train", "evaluate", "design")

_LOG = logging.getLogger(__name__)

_PROXY_NOTE = ("success/precision use proxy thresholds (gate, no function penalty, judge "
               "log-likelihood, instability index); no structure predictor is available offline")


def _console(quiet: bool):
    return None if quiet else make_console()


def _print_table(console, title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    if console is None:
        return
    from rich.table import Table

    table = Table(title=title)
    for c in columns:
        table.add_column(c)
    for r in rows:
        table.add_row(*(f"{x:.3f}" if isinstance(x, float) else str(x) for x in r))
    console.print(table)


def _config_from_args(args) -> Any:
    from fidia_jax.projects.fidia.configs import load_config, override_config

    config = load_config(args.config)
    sets = list(getattr(args, "set", None) or [])
    if getattr(args, "method", None):
        sets.append(f"method={args.method}")
    if getattr(args, "seed", None) is not None:
        sets.append(f"seed={args.seed}")
    if getattr(args, "data_dir", None):
        sets.append(f"data.data_dir={args.data_dir}")
        if config.data.train_tasks == "default" and config.data.eval_tasks == "default":
            _LOG.warning("--data-dir is unused: config %r trains and evaluates on the built-in "
                         "backbone (data.train_tasks = data.eval_tasks = 'default')", args.config)
    return override_config(config, sets) if sets else config


def _eval_title(config, n: int) -> str:
    """Table title: "held-out" only when the evaluation backbones are not the training ones."""
    what = f"{n} backbone{'s' if n != 1 else ''}"
    if config.data.train_tasks == "default" and config.data.eval_tasks == "default":
        return f"evaluation on the training backbone ({what}; not held out)"
    return f"held-out ({what})"


def _summary_rows(results: dict[str, dict[str, Any] | None], ns: Sequence[int], bon_n: int):
    rows = []
    for label, res in results.items():
        if res is None:
            continue
        s = res["summary"]
        rows.append([label] + [s[f"max@{n}"] for n in ns] +
                    [s["success"], s["precision"], s["identity"], s["recovery"]])
    cols = ["policy"] + [f"max@{n}" for n in ns] + [f"success@{bon_n}*", "precision*", "identity",
                                                   "recovery"]
    return cols, rows


# ----------------------------------------------------------------------------- train
def run_train(config, workdir: str | os.PathLike, *, resume: bool = True, quiet: bool = False):
    """Trains and evaluates ``config`` in ``workdir``; prints the before/after table."""
    from fidia_jax.projects.fidia.train import train_and_evaluate

    workdir = pathlib.Path(workdir)
    result = train_and_evaluate(config, workdir, resume=resume, progress=not quiet)
    cols, rows = _summary_rows({"before (reference)": result["before"], config.method: result["after"]},
                               config.eval.ns, config.eval.bon_n)
    console = _console(quiet)
    _print_table(console, _eval_title(config, len(result["after"]["per_backbone"])), cols, rows)
    if console is not None:
        console.print(f"* {_PROXY_NOTE}. Outputs in {workdir}")
    return result


# ----------------------------------------------------------------------------- evaluate
def run_evaluate(checkpoint: str, config, out: str | os.PathLike, *, quiet: bool = False):
    """Held-out metrics of a run directory's policy (or of ProteinMPNN weights) under ``config``."""
    from flax import nnx

    from fidia_jax.projects.fidia.train import Trainer, load_policy, plot_max_at_n

    model, run_config, step = load_policy(checkpoint)
    if config is None:
        if run_config is None:
            from fidia_jax.errors import ConfigError

            raise ConfigError("evaluate: pass --config when --checkpoint names ProteinMPNN weights")
        config = run_config
    trainer = Trainer(config)
    params = trainer.place(nnx.to_pure_dict(nnx.state(model)))
    res = trainer.evaluate(params)
    res.update(checkpoint=str(checkpoint), step=step, criteria="proxy", note=_PROXY_NOTE)
    out = pathlib.Path(out)
    atomic_write_text(out / "eval.json", json.dumps(res, indent=1, default=float))
    plot_max_at_n({str(checkpoint): res["summary"]}, config.eval.ns, out / "max_at_n.png")
    cols, rows = _summary_rows({str(checkpoint): res}, config.eval.ns, config.eval.bon_n)
    _print_table(_console(quiet), _eval_title(config, len(res["per_backbone"])), cols, rows)
    return res


# ----------------------------------------------------------------------------- design
def _design_outputs(out: pathlib.Path, backbone, seqs: np.ndarray, rewards: np.ndarray,
                    passes: np.ndarray, *, meta: dict[str, Any], ref_rewards: np.ndarray | None):
    """FASTA of all samples, best.fasta, report.json and design.png (atomic writes)."""
    from fidia_jax.projects.fidia._evaluate import backbone_metrics
    from fidia_jax.protein import ALPHABET

    L = backbone.length
    seqs = np.asarray(seqs)[:, :L]  # drop padding slots
    designed = backbone.designed_mask
    native = backbone.native
    n = seqs.shape[0]
    order = np.argsort(-rewards, kind="stable")
    best = int(order[0])

    def text(s):
        return "".join(ALPHABET[int(t)] for t in s[:L])

    lines = []
    for rank, i in enumerate(order):
        rec = float((seqs[i, designed] == native[designed]).mean()) if designed.any() else float("nan")
        lines.append(f">sample={i} rank={rank} reward={rewards[i]:.4f} passes_proxy={bool(passes[i])} "
                     f"recovery={rec:.3f}")
        lines.append(text(seqs[i]))
    atomic_write_text(out / "samples.fasta", "\n".join(lines) + "\n")
    atomic_write_text(out / "best.fasta", f">{backbone.name} best_of_{n} reward={rewards[best]:.4f}\n"
                  f"{text(seqs[best])}\n")
    ns = [k for k in (1, 2, 4, 8, 16, 32, 64, 128) if k <= n]
    metrics = backbone_metrics(rewards, passes, seqs[:, :L], native, designed, backbone.fixed, ns=ns,
                               bon_n=min(8, n))
    report = dict(meta, backbone=backbone.name, length=L, num_samples=n, best_index=best,
                  best_sequence=text(seqs[best]), best_reward=float(rewards[best]),
                  best_passes_proxy=bool(passes[best]), metrics=metrics, criteria="proxy",
                  note=_PROXY_NOTE)
    if ref_rewards is not None:
        from fidia_jax.projects.fidia._evaluate import max_at_n

        report["reference_max@N"] = {str(k): max_at_n(ref_rewards, k) for k in ns if k <= len(ref_rewards)}
    atomic_write_text(out / "report.json", json.dumps(report, indent=1, default=float))

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.2))
    axes[0].hist(rewards, bins=min(20, n), alpha=0.7, label="policy")
    if ref_rewards is not None:
        axes[0].hist(ref_rewards, bins=min(20, len(ref_rewards)), alpha=0.5, label="reference")
    axes[0].axvline(rewards[best], color="k", ls="--", label="Best-of-N pick")
    axes[0].set_xlabel("composite reward")
    axes[0].legend()
    axes[1].plot(ns, [metrics[f"max@{k}"] for k in ns], marker="o", label="policy")
    if ref_rewards is not None:
        ref_curve = report["reference_max@N"]
        axes[1].plot([int(k) for k in ref_curve], list(ref_curve.values()), marker="s",
                     label="reference")
    axes[1].set_xscale("log", base=2)
    axes[1].set_xlabel("N")
    axes[1].set_ylabel("max@N")
    axes[1].legend()
    fig.tight_layout()
    with atomic_path(out / "design.png") as tmp:
        fig.savefig(tmp, dpi=100)
    plt.close(fig)
    return report


def run_design(checkpoint: str, pdb: str | None, out: str | os.PathLike, *, fixed: str | None = None,
               chains: str | None = None, num_samples: int = 32, temperature: float | None = None,
               seed: int = 0, quiet: bool = False) -> dict[str, Any]:
    """Best-of-N design of one backbone with a trained policy (or ProteinMPNN weights).

    The composite reward is standardised on ``num_samples`` samples of the frozen reference
    (the checkpoint's starting weights), drawn with a different key.

    Raises:
      StructureError / MotifSpecError / CheckpointError: bad inputs.
    """
    import jax
    from flax import nnx

    from fidia_jax.errors import ConfigError
    from fidia_jax.projects.fidia.configs import get_config, override_config
    from fidia_jax.projects.fidia._tasks_bridge import unfitted_backbone
    from fidia_jax.projects.fidia.train import Trainer, load_policy
    from fidia_jax.protein import default_backbone_path, task_from_structure

    if num_samples < 2:
        raise ConfigError(f"--num-samples must be >= 2, got {num_samples}")
    model, run_config, step = load_policy(checkpoint)
    config = run_config or dataclasses.replace(get_config("default"),
                                               model=dataclasses.replace(get_config().model,
                                                                         checkpoint=str(checkpoint)))
    path = pdb or default_backbone_path()
    task = task_from_structure(path, fixed=fixed, chains=chains)
    length = max(task.length, 8)
    sets = [f"seed={seed}", f"data.max_length={length}", "data.batch_backbones=1",
            f"reward.calibration_samples={num_samples}",
            f"eval.n_samples={num_samples}", f"eval.ns={[k for k in (1, 4, 8, 16, 32) if k <= num_samples] or [1]}",
            f"eval.bon_n={min(8, num_samples)}"]
    if temperature is not None:
        sets.append(f"model.temperature={temperature}")
    config = override_config(config, sets)
    bb = unfitted_backbone(task, config)
    trainer = Trainer(config, train_backbones=[], eval_backbones=[])
    (bb,) = trainer.calibrate([bb], salt=1)
    key = jax.random.PRNGKey(seed)
    _, ref = trainer.rollout(trainer.ref_params, [bb], jax.random.fold_in(key, 1), num_samples)
    ref_rewards, _ = trainer.rewards([bb], np.asarray(ref.sequences))
    params = trainer.place(nnx.to_pure_dict(nnx.state(model)))
    _, res = trainer.rollout(params, [bb], jax.random.fold_in(key, 2), num_samples)
    seqs = np.asarray(res.sequences)[0]
    rewards, passes = trainer.rewards([bb], seqs[None])
    meta = {"checkpoint": str(checkpoint), "step": step, "pdb": str(path), "fixed": fixed or "",
            "temperature": config.model.temperature, "seed": seed}
    report = _design_outputs(pathlib.Path(out), bb, seqs, rewards[0], passes[0], meta=meta,
                             ref_rewards=ref_rewards[0])
    console = _console(quiet)
    if console is not None:
        console.print(f"best of {num_samples}: reward {report['best_reward']:+.3f} "
                      f"(passes proxy: {report['best_passes_proxy']})\n{report['best_sequence']}")
        console.print(f"wrote {out}/samples.fasta, best.fasta, report.json, design.png")
    return report


# ----------------------------------------------------------------------------- demo
def run_fidia_demo(out: str | os.PathLike = "out/demo", *, seed: int = 0, quiet: bool = False,
                   config=None) -> dict[str, Any]:
    """``make demo``: FIDIA fine-tune on the built-in backbone, then Best-of-N design with it.

    Prints max@N of the frozen reference and of the fine-tuned policy (same evaluation key).
    Training and evaluation use the same backbone: this shows the mechanics, it is not a
    held-out result (see ``docs/fidia.md`` for that).
    """
    import jax

    from fidia_jax.projects.fidia.configs import get_config, override_config
    from fidia_jax.projects.fidia.train import Trainer, train_and_evaluate

    out = pathlib.Path(out)
    config = config or override_config(get_config("demo"), [f"seed={seed}"])
    train_dir = out / "train"
    console = _console(quiet)
    if console is not None:
        console.print(f"[bold]FIDIA demo[/]: {config.train.num_steps} steps x {config.train.n_samples} "
                      f"samples, Best-of-{config.train.k_bon} objective, built-in backbone 5PTI")
    trainer = Trainer(config)
    result = train_and_evaluate(config, train_dir, resume=False, progress=not quiet, trainer=trainer)
    ns = [n for n in config.eval.ns if n in (1, config.train.k_bon, config.eval.n_samples)]
    cols, rows = _summary_rows({"ProteinMPNN": result["before"], "FIDIA": result["after"]},
                               ns, config.eval.bon_n)
    _print_table(console, "max@N on the demo backbone (proxy reward)", cols, rows)
    # Best-of-N design with the fine-tuned policy: reuse the compiled evaluation sampler.
    bb = trainer.eval_backbones[0]
    n = config.eval.n_samples
    key = jax.random.PRNGKey(seed + 7)
    _, res = trainer.rollout(result["params"], [bb], key, n)
    seqs = np.asarray(res.sequences)[0]
    rewards, passes = trainer.rewards([bb], seqs[None])
    _, ref = trainer.rollout(trainer.ref_params, [bb], key, n)
    ref_rewards, _ = trainer.rewards([bb], np.asarray(ref.sequences))
    meta = {"checkpoint": str(train_dir), "step": result["final_step"], "pdb": "built-in 5PTI",
            "temperature": config.model.temperature, "seed": seed}
    report = _design_outputs(out / "design", bb, seqs, rewards[0], passes[0], meta=meta,
                             ref_rewards=ref_rewards[0])
    if console is not None:
        console.print(f"Best-of-{n} design: reward {report['best_reward']:+.3f} "
                      f"(passes proxy: {report['best_passes_proxy']})\n{report['best_sequence']}")
        console.print(f"* {_PROXY_NOTE}.\nOutputs: {train_dir} (checkpoints, metrics.jsonl, plots), "
                      f"{out / 'design'} (samples.fasta, best.fasta, report.json, design.png)")
    return {"before": result["before"]["summary"], "after": result["after"]["summary"],
            "design": report}


# ----------------------------------------------------------------------------- argparse glue
def add_subcommands(sub) -> None:
    """Registers ``train``, ``evaluate`` and ``design`` on an argparse subparsers object."""
    pt = sub.add_parser("train", help="fine-tune ProteinMPNN with FIDIA or a baseline")
    pt.add_argument("--config", default="demo", help="preset (tiny, demo, small, default) or .json/.toml")
    pt.add_argument("--set", action="append", default=[], metavar="GROUP.KEY=VALUE",
                    help="override a config value (repeatable), e.g. train.num_steps=20")
    pt.add_argument("--method", default=None, choices=["fidia", "rloo", "grpo", "dpo", "bon"])
    pt.add_argument("--seed", type=int, default=None)
    pt.add_argument("--data-dir", default=None, help="shared data directory (else $FIDIA_DATA_DIR)")
    pt.add_argument("--workdir", default="out/train", help="run directory (checkpoints, metrics, plots)")
    pt.add_argument("--no-resume", action="store_true", help="start over even if checkpoints exist")
    pt.add_argument("--quiet", action="store_true")

    pe = sub.add_parser("evaluate", help="held-out max@N / success / precision of a policy")
    pe.add_argument("--checkpoint", required=True, help="train run directory or ProteinMPNN weights name")
    pe.add_argument("--config", default=None, help="config for the held-out set (default: the run's)")
    pe.add_argument("--set", action="append", default=[], metavar="GROUP.KEY=VALUE")
    pe.add_argument("--data-dir", default=None)
    pe.add_argument("--out", default="out/evaluate")
    pe.add_argument("--quiet", action="store_true")

    pd = sub.add_parser("design", help="Best-of-N design of one backbone with a trained policy")
    pd.add_argument("--checkpoint", required=True, help="train run directory or ProteinMPNN weights name")
    pd.add_argument("--pdb", default=None, help="PDB/mmCIF file (default: built-in 5PTI)")
    pd.add_argument("--chains", default=None)
    pd.add_argument("--fixed", default=None, help="motif kept native, e.g. 'A16-35,A52-71'")
    pd.add_argument("--num-samples", type=int, default=32)
    pd.add_argument("--temperature", type=float, default=None)
    pd.add_argument("--seed", type=int, default=0)
    pd.add_argument("--out", default="out/design")
    pd.add_argument("--quiet", action="store_true")


def run_command(args: argparse.Namespace) -> Any:
    """Runs a parsed ``train`` / ``evaluate`` / ``design`` command."""
    if args.command == "train":
        return run_train(_config_from_args(args), args.workdir, resume=not args.no_resume,
                         quiet=args.quiet)
    if args.command == "evaluate":
        config = _config_from_args(args) if args.config else None
        if config is None and (args.set or args.data_dir):
            from fidia_jax.projects.fidia.train import load_policy

            _, run_config, _ = load_policy(args.checkpoint)
            if run_config is not None:
                from fidia_jax.projects.fidia.configs import override_config

                sets = list(args.set) + ([f"data.data_dir={args.data_dir}"] if args.data_dir else [])
                config = override_config(run_config, sets)
        return run_evaluate(args.checkpoint, config, args.out, quiet=args.quiet)
    if args.command == "design":
        return run_design(args.checkpoint, args.pdb, args.out, fixed=args.fixed, chains=args.chains,
                          num_samples=args.num_samples, temperature=args.temperature, seed=args.seed,
                          quiet=args.quiet)
    raise ValueError(f"not a FIDIA command: {args.command!r}")
