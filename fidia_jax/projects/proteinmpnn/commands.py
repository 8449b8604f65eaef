"""Verbs of ``fidia-jax proteinmpnn``: ``sample`` and ``score`` (see :mod:`fidia_jax.projects`)."""

from __future__ import annotations

import argparse

__all__ = ["add_commands"]


def _add_structure_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--pdb", default=None, help="PDB/mmCIF file (.gz ok); default: built-in 5PTI backbone"
    )
    p.add_argument(
        "--chains", default=None, help="chains to load, in order, e.g. 'B,A' (default: all)"
    )
    p.add_argument("--design-chains", default=None, help="chains to design (default: all loaded)")
    p.add_argument(
        "--fixed",
        default=None,
        help="motif positions kept native, author numbering, e.g. 'A16-35,A52-71'",
    )
    p.add_argument(
        "--checkpoint", default="v_48_020", help="ProteinMPNN weights name (default v_48_020)"
    )
    p.add_argument("--variant", default="vanilla", choices=["vanilla", "soluble"])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quiet", action="store_true", help="no progress bar or table")


def _sample(args: argparse.Namespace):
    from fidia_jax.projects.proteinmpnn.design import run_sample

    return run_sample(
        args.out, pdb=args.pdb, chains=args.chains, design_chains=args.design_chains,
        fixed=args.fixed, num_samples=args.num_samples, temperature=args.temperature,
        checkpoint=args.checkpoint, variant=args.variant, seed=args.seed, quiet=args.quiet,
    )  # fmt: skip


def _score(args: argparse.Namespace):
    from fidia_jax.projects.proteinmpnn.design import run_score

    return run_score(
        args.fasta, pdb=args.pdb, chains=args.chains, design_chains=args.design_chains,
        fixed=args.fixed, num_orders=args.num_orders, checkpoint=args.checkpoint,
        variant=args.variant, seed=args.seed, out=args.out, quiet=args.quiet,
    )  # fmt: skip


def add_commands(subparsers) -> None:
    """Registers ``sample`` and ``score`` on the project's argparse subparsers object."""
    ps = subparsers.add_parser("sample", help="sample sequences for a backbone")
    _add_structure_args(ps)
    ps.add_argument("--num-samples", type=int, default=16)
    ps.add_argument("--temperature", type=float, default=0.1)
    ps.add_argument("--out", "--workdir", dest="out", required=True,
                    help="output directory (samples.fasta, summary.json)")  # fmt: skip
    ps.set_defaults(run=_sample)
    pc = subparsers.add_parser("score", help="score the sequences of a FASTA file on a backbone")
    _add_structure_args(pc)
    pc.add_argument("--fasta", required=True)
    pc.add_argument("--num-orders", type=int, default=1, help="random decoding orders to average")
    pc.add_argument("--out", "--workdir", dest="out", default=None,
                    help="directory for scores.json (optional)")  # fmt: skip
    pc.set_defaults(run=_score)
