"""``fidia-jax fidia demo`` (``make demo``, ``fidia-jax demo``): a short FIDIA fine-tune on the
built-in backbone, then a Best-of-N design with the fine-tuned policy."""

from __future__ import annotations

import os
import pathlib
from typing import Any

import numpy as np

from fidia_jax import train
from fidia_jax._io import make_console
from fidia_jax.projects.fidia._report import PROXY_NOTE, summary_rows
from fidia_jax.projects.fidia.design import write_design_outputs

__all__ = ["run_demo"]


def run_demo(
    out: str | os.PathLike = "out/demo", *, seed: int = 0, quiet: bool = False, config=None
) -> dict[str, Any]:
    """``make demo``: FIDIA fine-tune on the built-in backbone, then Best-of-N design with it.

    Writes ``out/train`` (checkpoints, metrics, plots), ``out/design`` (see
    :func:`~fidia_jax.projects.fidia.design.write_design_outputs`), ``out/summary.json`` (max@N
    before / after and the design's best reward) and ``out/max_at_n.png`` (max@N of the frozen
    reference and of the fine-tuned policy); ``config`` defaults to the ``demo`` preset with
    ``seed``.

    Ends with a table of max@N of the frozen reference and of the fine-tuned policy (same
    evaluation key). Training and evaluation use the same backbone: this shows the mechanics,
    it is not a held-out result (see ``docs/fidia.md`` for that).
    """
    import jax

    from fidia_jax.projects.fidia.configs import get_config, override_config
    from fidia_jax.projects.fidia.train import (
        Trainer,
        headline,
        plot_max_at_n,
        stage_if,
        train_and_evaluate,
    )

    out = pathlib.Path(out)
    config = config or override_config(get_config("demo"), [f"seed={seed}"])
    train_dir = out / "train"
    console = None if quiet else make_console()
    if console is not None:
        console.print(
            f"[bold]FIDIA demo[/]: {config.train.num_steps} steps x {config.train.n_samples} "
            f"samples, Best-of-{config.train.k_bon} objective, built-in backbone 5PTI"
        )
    m = config.model
    with stage_if(
        f"loading ProteinMPNN {m.checkpoint}, judges; calibrating the reward",
        not quiet,
    ):
        trainer = Trainer(config)
    result = train_and_evaluate(
        config, train_dir, resume=False, progress=not quiet, trainer=trainer
    )
    # Best-of-N design with the fine-tuned policy: reuse the compiled evaluation sampler.
    bb = trainer.eval_backbones[0]
    n = config.eval.n_samples
    key = jax.random.PRNGKey(seed + 7)
    _, res = trainer.rollout(result["params"], [bb], key, n)
    seqs = np.asarray(res.sequences)[0]
    rewards, passes = trainer.rewards([bb], seqs[None])
    _, ref = trainer.rollout(trainer.ref_params, [bb], key, n)
    ref_rewards, _ = trainer.rewards([bb], np.asarray(ref.sequences))
    meta = {
        "checkpoint": str(train_dir),
        "step": result["final_step"],
        "pdb": "built-in 5PTI",
        "temperature": config.model.temperature,
        "seed": seed,
    }
    report = write_design_outputs(
        out / "design", bb, seqs, rewards[0], passes[0], meta=meta, ref_rewards=ref_rewards[0]
    )
    summary = headline(config, result["before"], result["after"])
    summary["design"] = {
        k: report[k] for k in ("num_samples", "best_reward", "best_passes_proxy", "best_sequence")
    }
    train.write_summary(out, summary)
    curves = {"FIDIA": result["after"]["summary"]}
    if result["before"] is not None:
        curves = {"ProteinMPNN": result["before"]["summary"], **curves}
    plot_max_at_n(curves, config.eval.ns, out / "max_at_n.png", title="max@N, demo backbone")
    if console is not None:
        console.print(
            f"Best-of-{n} design: reward {report['best_reward']:+.3f} "
            f"(passes proxy: {report['best_passes_proxy']})\n{report['best_sequence']}"
        )
        console.print(
            f"* {PROXY_NOTE}.\nOutputs: {out} (summary.json, max_at_n.png), {train_dir} "
            f"(checkpoints, metrics.jsonl, plots), {out / 'design'} (samples.fasta, best.fasta, "
            "report.json, design.png)"
        )
        ns = [k for k in config.eval.ns if k in (1, config.train.k_bon, config.eval.n_samples)]
        cols, rows = summary_rows(
            {"ProteinMPNN": result["before"], "FIDIA": result["after"]}, ns, config.eval.bon_n
        )
        train.print_table("max@N on the demo backbone (proxy reward)", cols, rows)
    return {
        "before": None if result["before"] is None else result["before"]["summary"],
        "after": result["after"]["summary"],
        "design": report,
    }
