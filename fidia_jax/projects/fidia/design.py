"""``fidia-jax fidia design``: Best-of-N design of one backbone with a trained policy.

Every sample is written as FASTA with the Best-of-N pick, a JSON report and a plot. Success uses
the *proxy* thresholds of :class:`fidia_jax.projects.fidia.ProxyThresholds`, or with
``--fold-params DIR`` the structure criteria on AlphaFold2 folds; the report says which
(``"criteria": "proxy"`` or ``"structure"``).

Several processes (``docs/distributed.md``): the ``N`` samples are drawn as ``sample_blocks``
blocks of ``N / sample_blocks`` (block ``i`` with ``fold_in(key, i)``), the blocks split over
the devices of every process (the ``data`` mesh), their rewards split over the processes
(:meth:`~fidia_jax.projects.fidia.Trainer.rewards`) and gathered in order; process 0 writes the
files. The samples depend on ``(seed, N, sample_blocks)`` only, not on the devices or processes.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
from typing import Any

import numpy as np

from fidia_jax import train
from fidia_jax._io import atomic_path, atomic_write_text, make_console
from fidia_jax.projects.fidia._report import criteria_note

__all__ = ["best_of_n", "run_design", "write_design_outputs"]


def write_design_outputs(
    out: pathlib.Path,
    backbone,
    seqs: np.ndarray,
    rewards: np.ndarray,
    passes: np.ndarray,
    *,
    meta: dict[str, Any],
    ref_rewards: np.ndarray | None,
    criteria: str = "proxy",
):
    """Writes a Best-of-N design: ``samples.fasta`` (all samples, best first), ``best.fasta``,
    ``report.json`` (``meta`` + metrics) and ``design.png`` (atomic writes); returns the report.

    Args:
      out: output directory.
      backbone: the designed :class:`~fidia_jax.projects.fidia.Backbone`.
      seqs: ``(N, L_pad)`` int tokens; padding slots beyond ``backbone.length`` are dropped.
      rewards, passes: ``(N,)`` composite rewards and pass flags of the samples (under
        ``criteria``, ``"proxy"`` or ``"structure"``).
      meta: fields copied into the report.
      ref_rewards: ``(M,)`` rewards of reference samples (their max@N goes in the report and plot).
      criteria: the success criteria of ``passes`` (in the report and the FASTA headers).
    """
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
        rec = (
            float((seqs[i, designed] == native[designed]).mean())
            if designed.any()
            else float("nan")
        )
        lines.append(
            f">sample={i} rank={rank} reward={rewards[i]:.4f} passes_{criteria}={bool(passes[i])} "
            f"recovery={rec:.3f}"
        )
        lines.append(text(seqs[i]))
    atomic_write_text(out / "samples.fasta", "\n".join(lines) + "\n")
    atomic_write_text(
        out / "best.fasta",
        f">{backbone.name} best_of_{n} reward={rewards[best]:.4f}\n{text(seqs[best])}\n",
    )
    ns = [k for k in (1, 2, 4, 8, 16, 32, 64, 128) if k <= n]
    metrics = backbone_metrics(
        rewards, passes, seqs[:, :L], native, designed, backbone.fixed, ns=ns, bon_n=min(8, n)
    )
    report = dict(
        meta,
        backbone=backbone.name,
        length=L,
        num_samples=n,
        best_index=best,
        best_sequence=text(seqs[best]),
        best_reward=float(rewards[best]),
        best_passes=bool(passes[best]),
        metrics=metrics,
        criteria=criteria,
        note=criteria_note(criteria),
    )
    if criteria == "proxy":  # the key of reports written before the structure criteria
        report["best_passes_proxy"] = report["best_passes"]
    if ref_rewards is not None:
        from fidia_jax.projects.fidia._evaluate import max_at_n

        report["reference_max@N"] = {
            str(k): max_at_n(ref_rewards, k) for k in ns if k <= len(ref_rewards)
        }
    train.write_json(out / "report.json", report)
    plt = train.pyplot()

    def finite(x):  # histograms take finite values only (the report marks the others)
        x = np.asarray(x, np.float64)
        return x[np.isfinite(x)]

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.2))
    axes[0].hist(finite(rewards), bins=min(20, n), alpha=0.7, label="policy")
    if ref_rewards is not None:
        axes[0].hist(
            finite(ref_rewards), bins=min(20, len(ref_rewards)), alpha=0.5, label="reference"
        )
    if np.isfinite(rewards[best]):
        axes[0].axvline(rewards[best], color="k", ls="--", label="Best-of-N pick")
    axes[0].set_xlabel("composite reward")
    axes[0].legend()
    axes[1].plot(ns, [metrics[f"max@{k}"] for k in ns], marker="o", label="policy")
    if ref_rewards is not None:
        ref_curve = report["reference_max@N"]
        axes[1].plot(
            [int(k) for k in ref_curve], list(ref_curve.values()), marker="s", label="reference"
        )
    axes[1].set_xscale("log", base=2)
    axes[1].set_xlabel("N")
    axes[1].set_ylabel("max@N")
    axes[1].legend()
    fig.tight_layout()
    with atomic_path(out / "design.png") as tmp:
        fig.savefig(tmp, dpi=100, format="png")
    plt.close(fig)
    return report


def best_of_n(trainer, params, backbone, *, num_samples: int, seed: int, blocks: int = 1):
    """Best-of-N samples of one backbone from ``params`` and from the trainer's reference.

    The ``num_samples`` samples are drawn as ``blocks`` copies of ``backbone`` with
    ``num_samples // blocks`` samples each (copy ``i`` keyed by ``fold_in(fold_in(key(seed),
    2), i)``; the reference's by ``fold_in(key, 1)``), split over ``trainer``'s mesh; the rewards
    are split over the processes and gathered in order (every process gets every array).
    ``blocks = 1`` is the one-block draw of earlier versions.

    Args:
      trainer: a :class:`~fidia_jax.projects.fidia.Trainer` whose ``data.batch_backbones`` is
        ``blocks`` (its mesh divides it).
      params: the policy's (placed) parameters.
      backbone: a calibrated :class:`~fidia_jax.projects.fidia.Backbone`.
      num_samples: ``N``, a multiple of ``blocks``.
      seed: the sampling seed.
      blocks: number of sample blocks.

    Returns:
      ``(seqs, rewards, passes, ref_rewards)``: ``(N, L_pad)`` int tokens, ``(N,)`` float32
      rewards and bool verdicts of the policy's samples (block-major order), ``(N,)`` rewards
      of the reference's samples.

    Raises:
      ConfigError: ``blocks < 1``, ``num_samples`` not a multiple of it, or a trainer built for
        another batch size.
    """
    import jax

    from fidia_jax.errors import ConfigError

    if blocks < 1 or num_samples % blocks:
        raise ConfigError(
            f"sample_blocks must be >= 1 and divide --num-samples {num_samples}, got {blocks}"
        )
    if trainer.config.data.batch_backbones != blocks:
        raise ConfigError(
            f"best_of_n: the trainer's data.batch_backbones ({trainer.config.data.batch_backbones})"
            f" must equal sample_blocks ({blocks})"
        )
    from fidia_jax import parallel

    key = jax.random.PRNGKey(seed)
    copies, per = [backbone] * blocks, num_samples // blocks

    def draw(p, salt):
        _, res = trainer.rollout(p, copies, jax.random.fold_in(key, salt), per)
        seqs = parallel.to_host(res.sequences)  # (blocks, per, L)
        rewards, passes = trainer.rewards(copies, seqs)
        return seqs.reshape(num_samples, -1), rewards.reshape(-1), passes.reshape(-1)

    _, ref_rewards, _ = draw(trainer.ref_params, 1)
    seqs, rewards, passes = draw(params, 2)
    return seqs, rewards, passes, ref_rewards


def run_design(
    checkpoint: str,
    pdb: str | None,
    out: str | os.PathLike,
    *,
    fixed: str | None = None,
    chains: str | None = None,
    num_samples: int = 32,
    temperature: float | None = None,
    seed: int = 0,
    quiet: bool = False,
    fold_sets: list[str] | None = None,
    predictor: Any = None,
    sample_blocks: int | None = None,
) -> dict[str, Any] | None:
    """Best-of-N design of one backbone with a trained policy (or ProteinMPNN weights).

    The composite reward is standardised on ``num_samples`` samples of the frozen reference
    (the checkpoint's starting weights), drawn with a different key. ``fold_sets`` (config
    overrides such as ``reward.criteria=structure``, ``reward.fold_params=DIR``) or a
    ``predictor`` switch success to the structure criteria. The samples are drawn by
    :func:`best_of_n` in ``sample_blocks`` blocks (``None``: 1 on one process, the global
    device count across processes); only process 0 writes the files and prints, the others
    print one status line and return ``None``.

    Raises:
      StructureError / MotifSpecError / CheckpointError: bad inputs.
      ConfigError: ``num_samples < 2``, or ``sample_blocks`` that does not divide it (across
        processes it must also be a multiple of the global device count).
    """
    import sys

    import jax
    from flax import nnx

    from fidia_jax import parallel
    from fidia_jax.errors import ConfigError
    from fidia_jax.projects.fidia._tasks_bridge import unfitted_backbone
    from fidia_jax.projects.fidia.configs import get_config, override_config
    from fidia_jax.projects.fidia.train import Trainer, load_policy
    from fidia_jax.protein import default_backbone_path, task_from_structure

    if num_samples < 2:
        raise ConfigError(f"--num-samples must be >= 2, got {num_samples}")
    parallel.initialize_distributed()  # before any array exists; no-op without a launcher
    blocks = sample_blocks
    if blocks is None:
        blocks = 1 if jax.process_count() == 1 else jax.device_count()
    if blocks < 1 or num_samples % blocks:
        raise ConfigError(
            f"--sample-blocks {blocks} must be >= 1 and divide --num-samples {num_samples}"
            + (
                f" (several processes: a multiple of the {jax.device_count()} devices)"
                if jax.process_count() > 1
                else ""
            )
        )
    model, run_config, step = load_policy(checkpoint)
    config = run_config or dataclasses.replace(
        get_config("default"),
        model=dataclasses.replace(get_config().model, checkpoint=str(checkpoint)),
    )
    path = pdb or default_backbone_path()
    task = task_from_structure(path, fixed=fixed, chains=chains)
    length = max(task.length, 8)
    sets = [
        f"seed={seed}",
        f"data.max_length={length}",
        f"data.batch_backbones={blocks}",
        f"reward.calibration_samples={num_samples}",
        f"eval.n_samples={num_samples}",
        f"eval.ns={[k for k in (1, 4, 8, 16, 32) if k <= num_samples] or [1]}",
        f"eval.bon_n={min(8, num_samples)}",
    ]
    if temperature is not None:
        sets.append(f"model.temperature={temperature}")
    sets += list(fold_sets or [])
    if predictor is not None:
        sets.append("reward.criteria=structure")
    config = override_config(config, sets)
    trainer = Trainer(config, train_backbones=[], eval_backbones=[], predictor=predictor)
    bb = unfitted_backbone(task, config, trainer.predictor)
    (bb,) = trainer.calibrate([bb], salt=1)
    params = trainer.place(nnx.to_pure_dict(nnx.state(model)))
    seqs, rewards, passes, ref_rewards = best_of_n(
        trainer, params, bb, num_samples=num_samples, seed=seed, blocks=blocks
    )
    if not parallel.is_primary():
        print(f"fidia design: process {jax.process_index()}/{jax.process_count()} done",
              file=sys.stderr, flush=True)  # fmt: skip
        return None
    meta = {
        "checkpoint": str(checkpoint),
        "step": step,
        "pdb": str(path),
        "fixed": fixed or "",
        "temperature": config.model.temperature,
        "seed": seed,
        "sample_blocks": blocks,
    }
    report = write_design_outputs(
        pathlib.Path(out),
        bb,
        seqs,
        rewards,
        passes,
        meta=meta,
        ref_rewards=ref_rewards,
        criteria=config.reward.criteria,
    )
    console = None if quiet else make_console()
    if console is not None:
        console.print(
            f"best of {num_samples}: reward {report['best_reward']:+.3f} "
            f"(passes {config.reward.criteria}: {report['best_passes']})\n"
            f"{report['best_sequence']}"
        )
        console.print(f"wrote {out}/samples.fasta, best.fasta, report.json, design.png")
    return report
