"""Verbs of ``fidia-jax fidia`` (see :mod:`fidia_jax.projects` for the protocol).

* ``train --config NAME|FILE [--set group.key=value ...]`` -> :func:`run_train`
  (:func:`~fidia_jax.projects.fidia.train.train_and_evaluate`, then a before/after table).
* ``evaluate --checkpoint RUN_DIR | --weights NAME [--config ...]`` -> :func:`run_evaluate`,
  held-out metrics of a policy.
* ``design --checkpoint RUN_DIR | --weights NAME --pdb FILE [--fixed SPEC] --num-samples N`` ->
  :func:`fidia_jax.projects.fidia.design.run_design`: Best-of-N pick, every sample as FASTA, a
  JSON report and a plot.
* ``demo`` -> :func:`fidia_jax.projects.fidia.demo.run_demo`: a short FIDIA fine-tune on the
  built-in backbone, then a Best-of-N design with the fine-tuned policy.

The short forms ``fidia-jax train | evaluate | design | demo`` run the same verbs.

The policy: ``--checkpoint RUN_DIR`` is a ``train`` workdir (or one of its
``checkpoints/<step>`` folders); ``--weights NAME`` the original ProteinMPNN weights (``v_48_020``),
as in ``fidia-jax sample``. A weights name given to ``--checkpoint`` (the old spelling) still
works, with a ``FutureWarning``.

Success uses the *proxy* thresholds of :class:`fidia_jax.projects.fidia.ProxyThresholds` by
default; ``--fold-params DIR`` (``train``, ``evaluate``, ``design``; with ``--fold-model NAME``,
default ``model_1_ptm``) sets ``reward.criteria=structure``: AlphaFold2 folds every sample and
success is :func:`fidia_jax.protein.structure_success`. Every report says which
(``"criteria": "proxy"`` or ``"structure"``).
"""

from __future__ import annotations

import argparse
import logging
import os
import pathlib
import re
import sys
import warnings
from typing import Any

from fidia_jax import train
from fidia_jax._io import make_console
from fidia_jax.projects.fidia._report import criteria_note, summary_rows

__all__ = ["add_commands", "run_evaluate", "run_train"]

_LOG = logging.getLogger(__name__)


def _console(quiet: bool):
    return None if quiet else make_console()


def _config_from_args(args) -> Any:
    from fidia_jax.projects.fidia.configs import load_config, override_config

    config = load_config(args.config)
    sets = list(getattr(args, "set", None) or [])
    if getattr(args, "method", None):
        sets.append(f"method={args.method}")
    if getattr(args, "seed", None) is not None:
        sets.append(f"seed={args.seed}")
    sets += _fold_sets(args)
    if getattr(args, "data_dir", None):
        sets.append(f"data.data_dir={args.data_dir}")
        if config.data.train_tasks == "default" and config.data.eval_tasks == "default":
            _LOG.warning(
                "--data-dir is unused: config %r trains and evaluates on the built-in "
                "backbone (data.train_tasks = data.eval_tasks = 'default')",
                args.config,
            )
    return override_config(config, sets) if sets else config


def _fold_sets(args) -> list[str]:
    """``--fold-params DIR`` / ``--fold-model NAME`` as config overrides (``criteria=structure``)."""
    from fidia_jax._io import json_text

    sets = []
    if getattr(args, "fold_params", None):
        sets += ["reward.criteria=structure", f"reward.fold_params={json_text(args.fold_params)}"]
    if getattr(args, "fold_model", None):
        sets.append(f"reward.fold_model={args.fold_model}")
    return sets


def _eval_title(config, n: int) -> str:
    """Table title: "held-out" only when the evaluation backbones are not the training ones."""
    what = f"{n} backbone{'s' if n != 1 else ''}"
    if config.data.train_tasks == "default" and config.data.eval_tasks == "default":
        return f"evaluation on the training backbone ({what}; not held out)"
    return f"held-out ({what})"


# ----------------------------------------------------------------------------- train
def run_train(
    config,
    workdir: str | os.PathLike,
    *,
    resume: bool = True,
    quiet: bool = False,
    trainer=None,
):
    """Trains and evaluates ``config`` in ``workdir``; prints the before/after table.

    ``trainer``: a prepared :class:`~fidia_jax.projects.fidia.Trainer` (built from ``config``
    otherwise). Across processes only process 0 prints the table and writes the files; the
    others print one status line (``<method>: process i/n done``).
    """
    from fidia_jax import parallel
    from fidia_jax.projects.fidia.train import train_and_evaluate

    workdir = pathlib.Path(workdir)
    result = train_and_evaluate(config, workdir, resume=resume, progress=not quiet, trainer=trainer)
    cols, rows = summary_rows(
        {"before (reference)": result["before"], config.method: result["after"]},
        config.eval.ns,
        config.eval.bon_n,
    )
    console = _console(quiet or not parallel.is_primary())
    if console is not None:
        console.print(
            f"* {criteria_note(config.reward.criteria)}.\nWritten to the workdir: summary.json, eval_after.json, "
            "metrics.jsonl, training.png, max_at_n.png, checkpoints/"
        )
        train.print_table(_eval_title(config, len(result["after"]["per_backbone"])), cols, rows)
    return result


# ----------------------------------------------------------------------------- evaluate
def run_evaluate(checkpoint: str, config, out: str | os.PathLike, *, quiet: bool = False):
    """Held-out metrics of a run directory's policy (or of ProteinMPNN weights) under ``config``.

    Writes ``out/eval.json`` and ``out/max_at_n.png``; ``config`` ``None`` = the run's config.
    Across processes the evaluation is split as in training; process 0 writes and prints.

    Raises:
      ConfigError: ``config`` is ``None`` and ``checkpoint`` names ProteinMPNN weights.
      CheckpointError: ``checkpoint`` is neither a training run directory nor weights.
    """
    from flax import nnx

    from fidia_jax import parallel
    from fidia_jax.projects.fidia.train import Trainer, load_policy, plot_max_at_n

    parallel.initialize_distributed()  # before the policy's arrays exist
    primary = parallel.is_primary()
    quiet = quiet or not primary
    model, run_config, step = load_policy(checkpoint)
    if config is None:
        if run_config is None:
            from fidia_jax.errors import ConfigError

            raise ConfigError("evaluate: pass --config when --checkpoint names ProteinMPNN weights")
        config = run_config
    from fidia_jax.projects.fidia.train import stage_if

    m = config.model
    with stage_if(
        f"loading ProteinMPNN {m.checkpoint}, backbones, judges; calibrating rewards",
        not quiet,
    ):
        trainer = Trainer(config)
    params = trainer.place(nnx.to_pure_dict(nnx.state(model)))
    with stage_if(
        f"evaluating {checkpoint} on {len(trainer.eval_backbones)} backbone(s)", not quiet
    ):
        res = trainer.evaluate(params)
    criteria = config.reward.criteria
    res.update(
        checkpoint=str(checkpoint), step=step, criteria=criteria, note=criteria_note(criteria)
    )
    out = pathlib.Path(out)
    train.write_json(out / "eval.json", res)
    if primary:
        plot_max_at_n({str(checkpoint): res["summary"]}, config.eval.ns, out / "max_at_n.png")
    cols, rows = summary_rows({str(checkpoint): res}, config.eval.ns, config.eval.bon_n)
    if not quiet:
        train.print_table(_eval_title(config, len(res["per_backbone"])), cols, rows)
    return res


# ----------------------------------------------------------------------------- verbs
def _policy(args: argparse.Namespace) -> str:
    """The policy of ``evaluate`` / ``design``: ``--weights NAME`` or ``--checkpoint RUN_DIR``."""
    if args.weights is not None:
        return args.weights
    given = args.checkpoint
    if not pathlib.Path(given).exists() and re.fullmatch(r"v_\d+_\d{3}", given):
        warnings.warn(
            f"--checkpoint {given}: a weights name is deprecated here, use --weights {given} "
            "(--checkpoint names a training run directory)",
            FutureWarning,
            stacklevel=2,
        )
    return given


def _train(args: argparse.Namespace):
    from fidia_jax import parallel

    config = _config_from_args(args)  # a bad config: one error line and nothing else
    parallel.initialize_distributed()  # before anything asks JAX for the process index
    if not args.quiet and parallel.is_primary():  # the first line as every project prints it
        print(f"fidia-jax fidia train: config {args.config}, workdir {args.workdir}",
              file=sys.stderr, flush=True)  # fmt: skip
    return run_train(config, args.workdir, resume=not args.no_resume, quiet=args.quiet)


def _evaluate(args: argparse.Namespace):
    config = _config_from_args(args) if args.config else None
    if config is None and (args.set or args.data_dir or _fold_sets(args)):
        from fidia_jax.projects.fidia.train import load_policy

        _, run_config, _ = load_policy(_policy(args))
        if run_config is not None:
            from fidia_jax.projects.fidia.configs import override_config

            sets = list(args.set) + ([f"data.data_dir={args.data_dir}"] if args.data_dir else [])
            sets += _fold_sets(args)
            config = override_config(run_config, sets)
    return run_evaluate(_policy(args), config, args.out, quiet=args.quiet)


def _design(args: argparse.Namespace):
    from fidia_jax.projects.fidia import design

    return design.run_design(
        _policy(args),
        args.pdb,
        args.out,
        fixed=args.fixed,
        chains=args.chains,
        num_samples=args.num_samples,
        temperature=args.temperature,
        seed=args.seed,
        quiet=args.quiet,
        fold_sets=_fold_sets(args),
        sample_blocks=args.sample_blocks,
    )


def _demo(args: argparse.Namespace):
    from fidia_jax.projects.fidia import demo

    return demo.run_demo(args.out, seed=args.seed, quiet=args.quiet)


def _add_policy_args(p: argparse.ArgumentParser) -> None:
    group = p.add_mutually_exclusive_group(required=True)
    group.add_argument("--checkpoint", metavar="RUN_DIR",
                       help="a 'train' run directory (or its checkpoints/<step> folder)")  # fmt: skip
    group.add_argument("--weights", metavar="NAME",
                       help="original ProteinMPNN weights instead, e.g. v_48_020")  # fmt: skip


def _add_fold_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--fold-params", metavar="DIR", default=None,
                   help="AlphaFold2 parameters folder (params_<model>.npz): success = the "
                        "structure criteria (reward.criteria=structure; needs fidia_jax[fold])")  # fmt: skip
    p.add_argument("--fold-model", metavar="NAME", default=None,
                   help="AlphaFold2 model of --fold-params (default model_1_ptm)")  # fmt: skip


def add_commands(subparsers) -> None:
    """Registers ``train``, ``evaluate``, ``design`` and ``demo`` on an argparse subparsers object."""
    pt = subparsers.add_parser("train", help="fine-tune ProteinMPNN with FIDIA or a baseline")
    pt.add_argument(
        "--config", default="demo", help="preset (tiny, demo, small, default) or .json/.toml"
    )
    pt.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="GROUP.KEY=VALUE",
        help="override a config value (repeatable), e.g. train.num_steps=20",
    )
    pt.add_argument("--method", default=None, choices=["fidia", "rloo", "grpo", "dpo", "bon"])
    pt.add_argument("--seed", type=int, default=None)
    pt.add_argument("--data-dir", default=None, help="shared data directory (else $FIDIA_DATA_DIR)")
    pt.add_argument(
        "--workdir", default="out/train", help="run directory (checkpoints, metrics, plots)"
    )
    pt.add_argument("--no-resume", action="store_true", help="start over even if checkpoints exist")
    _add_fold_args(pt)
    pt.add_argument("--quiet", action="store_true")
    pt.set_defaults(run=_train)

    pe = subparsers.add_parser("evaluate", help="held-out max@N / success / precision of a policy")
    _add_policy_args(pe)
    pe.add_argument(
        "--config", default=None, help="config for the held-out set (default: the run's)"
    )
    pe.add_argument("--set", action="append", default=[], metavar="GROUP.KEY=VALUE")
    pe.add_argument("--data-dir", default=None, help="shared data directory (else $FIDIA_DATA_DIR)")
    pe.add_argument("--out", "--workdir", dest="out", default="out/evaluate")
    _add_fold_args(pe)
    pe.add_argument("--quiet", action="store_true")
    pe.set_defaults(run=_evaluate)

    pd = subparsers.add_parser(
        "design", help="Best-of-N design of one backbone with a trained policy"
    )
    _add_policy_args(pd)
    pd.add_argument("--pdb", default=None, help="PDB/mmCIF file (default: built-in 5PTI)")
    pd.add_argument("--chains", default=None)
    pd.add_argument("--fixed", default=None, help="motif kept native, e.g. 'A16-35,A52-71'")
    pd.add_argument("--num-samples", type=int, default=32)
    pd.add_argument("--temperature", type=float, default=None)
    pd.add_argument("--seed", type=int, default=0)
    pd.add_argument("--sample-blocks", type=int, default=None,
                    help="draw the samples in this many blocks, split over devices and "
                         "processes (default: 1; the global device count across processes)")  # fmt: skip
    pd.add_argument("--out", "--workdir", dest="out", default="out/design")
    _add_fold_args(pd)
    pd.add_argument("--quiet", action="store_true")
    pd.set_defaults(run=_design)

    pm = subparsers.add_parser(
        "demo", help="FIDIA fine-tune + Best-of-N design on the built-in backbone"
    )
    pm.add_argument("--out", "--workdir", dest="out", default="out/demo")
    pm.add_argument("--seed", type=int, default=0)
    pm.add_argument("--quiet", action="store_true")
    pm.set_defaults(run=_demo)
