"""Verbs of ``fidia-jax proteinmpnn``: ``sample`` and ``score`` (see :mod:`fidia_jax.projects`).

``--weights NAME`` picks the ProteinMPNN weights (``v_48_020`` by default). Its old spelling
``--checkpoint NAME`` still works, with a ``FutureWarning``: across the command line
``--checkpoint`` names a training run directory (``fidia-jax design`` / ``evaluate``).
"""

from __future__ import annotations

import argparse
import sys
import warnings

__all__ = ["add_commands"]


def _add_tie_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--tie", action="append", default=None, metavar="SPEC",
                   help="tie slots one to one, e.g. 'A1-10:B1-10' (one draw per pair; repeatable)")  # fmt: skip
    p.add_argument("--homo-oligomer", action="store_true",
                   help="tie all loaded chains position by position (equal length and sequence)")  # fmt: skip


def _add_structure_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--pdb", "--pdb_path", dest="pdb", default=None,
                   help="PDB/mmCIF file (.gz ok); default: built-in 5PTI backbone")  # fmt: skip
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
        "--weights",
        "--path_to_model_weights",
        "--model_name",
        dest="weights",
        default="v_48_020",
        help="ProteinMPNN weights: a name (default v_48_020) or the path of a .pt file",
    )
    p.add_argument("--checkpoint", dest="weights", action=_OldWeightsFlag, help=argparse.SUPPRESS)
    p.add_argument("--variant", default="vanilla", choices=["vanilla", "soluble", "ca"])
    p.add_argument("--ca-only", "--ca_only", dest="variant", action="store_const", const="ca",
                   help="CA-only model and CA-only structures (same as --variant ca)")  # fmt: skip
    p.add_argument("--seed", type=int, default=0,
                   help="PRNG seed (jax.random.key(SEED)); 0 is a fixed seed like any other "
                   "(the original's --seed 0 draws a random one)")  # fmt: skip
    p.add_argument("--quiet", action="store_true", help="no progress bar or table")
    p.add_argument("--data-dir", default=None,
                   help="accepted by every project; unused here (weights ship in the proteinmpnn "
                   "package, structures come from --pdb)")  # fmt: skip


class _OldWeightsFlag(argparse.Action):
    """``--checkpoint NAME``, the old spelling of ``--weights NAME`` (warned when the verb runs)."""

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, values)
        namespace.old_weights_flag = True


def _warn_old_weights_flag(args: argparse.Namespace) -> None:
    if getattr(args, "old_weights_flag", False):
        warnings.warn(
            f"--checkpoint {args.weights} is deprecated here: use --weights {args.weights} "
            "(--checkpoint names a training run directory, as in 'fidia-jax design')",
            FutureWarning,
            stacklevel=2,
        )


def _note_data_dir(args: argparse.Namespace) -> None:
    if getattr(args, "data_dir", None):
        print("fidia-jax: note: --data-dir is not used by proteinmpnn (weights ship in the "
              "proteinmpnn package, structures come from --pdb)", file=sys.stderr)  # fmt: skip


def _sample_many(args: argparse.Namespace):
    from fidia_jax.errors import DataError
    from fidia_jax.projects.proteinmpnn.batch import run_sample_many

    if args.pdb is not None:
        raise DataError("give --pdb or --pdb-dir/--pdb-list, not both")
    summary = run_sample_many(
        args.out, pdb_dir=args.pdb_dir, pdb_list=args.pdb_list, bucket=args.bucket,
        chains=args.chains, design_chains=args.design_chains, fixed=args.fixed,
        num_samples=args.num_samples, temperature=args.temperature, omit_aas=args.omit_aa,
        bias_aa=args.bias_aa, bias_by_res=args.bias_by_res, checkpoint=args.weights,
        variant=args.variant, seed=args.seed, quiet=args.quiet, omit_by_res=args.omit_aa_by_res,
        save_probs=args.save_probs, unconditional_probs=args.unconditional_probs, tie=args.tie,
        homo_oligomer=args.homo_oligomer, max_length=args.max_length,
        backbone_noise=args.backbone_noise, seqs_dir=_seqs_dir(args), **_pssm_kwargs(args),
        workers=args.workers,
    )  # fmt: skip
    return _raise_if_failed(summary)


def _pssm_kwargs(args: argparse.Namespace, with_file: bool = True) -> dict:
    """The PSSM options of ``sample`` as keyword arguments of ``run_sample``."""
    kw = {
        "pssm_multi": args.pssm_multi,
        "pssm_threshold": args.pssm_threshold,
        "pssm_log_odds_flag": bool(args.pssm_log_odds_flag),
        "pssm_bias_flag": bool(args.pssm_bias_flag),
        "probs_dir": _layout_dir(args, "probs") if args.save_probs else None,
        **_probs_only(args),
    }
    if with_file:
        kw["pssm"] = args.pssm_jsonl
    return kw


def _probs_only(args: argparse.Namespace) -> dict:
    """``--conditional-probs-only [--conditional-probs-only-backbone]`` or
    ``--unconditional-probs-only``: ``run_sample``'s ``probs_only`` / ``probs_only_dir``."""
    import pathlib

    from fidia_jax.errors import ConfigError

    cond, bb, unc = (args.conditional_probs_only, args.conditional_probs_only_backbone,
                     args.unconditional_probs_only)  # fmt: skip
    if bb and not cond:
        raise ConfigError("--conditional-probs-only-backbone needs --conditional-probs-only")
    if cond and unc:
        raise ConfigError("give --conditional-probs-only or --unconditional-probs-only, not both")
    if not (cond or unc):
        return {}
    kind = "unconditional" if unc else ("conditional_backbone" if bb else "conditional")
    sub = "unconditional" if unc else "conditional"
    return {"probs_only": kind, "probs_only_dir": pathlib.Path(args.out) / f"{sub}_probs_only"}


_PIPELINE_FILES = ("chain_id_jsonl", "fixed_positions_jsonl", "tied_positions_jsonl",
                   "bias_aa_jsonl", "bias_by_res_jsonl", "omit_aa_jsonl")  # fmt: skip


def _sample_jsonl(args: argparse.Namespace):
    from fidia_jax.errors import ConfigError
    from fidia_jax.projects.proteinmpnn.batch import run_sample_jsonl

    given = [f"--{k.replace('_', '-')}" for k in ("pdb", "pdb_dir", "pdb_list") if getattr(args, k)]
    if given:
        raise ConfigError(f"give --jsonl-path or {', '.join(given)}, not both")
    summary = run_sample_jsonl(
        args.out, args.jsonl_path, **{k: getattr(args, k) for k in _PIPELINE_FILES},
        bucket=args.bucket, num_samples=args.num_samples, temperature=args.temperature,
        omit_aas=args.omit_aa, bias_aa=args.bias_aa, checkpoint=args.weights,
        variant=args.variant, seed=args.seed, quiet=args.quiet, save_probs=args.save_probs,
        workers=args.workers, unconditional_probs=args.unconditional_probs, chains=args.chains,
        design_chains=args.design_chains, fixed=args.fixed, tie=args.tie,
        homo_oligomer=args.homo_oligomer, bias_by_res=args.bias_by_res,
        omit_by_res=args.omit_aa_by_res, max_length=args.max_length,
        backbone_noise=args.backbone_noise, seqs_dir=_seqs_dir(args),
        pssm_jsonl=args.pssm_jsonl, **_pssm_kwargs(args, with_file=False),
    )  # fmt: skip
    return _raise_if_failed(summary)


def _score_only_failed(summary):
    """The error of a score-only run in which some structures failed (the others are written)."""
    from fidia_jax.errors import DataError

    return DataError(
        f"{summary['num_failed']} of {len(summary['structures'])} structures failed "
        f"(errors in {summary['files']['tsv']})"
    )


def _seqs_dir(args: argparse.Namespace):
    """``OUT/seqs`` with ``--original-layout`` (one ``<name>.fa`` per structure), else ``None``."""
    return _layout_dir(args, "seqs")


def _layout_dir(args: argparse.Namespace, name: str):
    """``OUT/<name>`` with ``--original-layout``, else ``None``."""
    import pathlib

    return pathlib.Path(args.out) / name if args.original_layout else None


def _raise_if_failed(summary):
    from fidia_jax.errors import DataError

    if summary["num_failed"]:  # the others are written; exit code 2 at the end
        raise DataError(
            f"{summary['num_failed']} of {len(summary['backbones'])} structures failed "
            f"(errors in {summary['files']['tsv']})"
        )
    return summary


def _sample(args: argparse.Namespace):
    from fidia_jax.errors import ConfigError

    _note_data_dir(args)
    _warn_old_weights_flag(args)
    from fidia_jax.projects.proteinmpnn.design import run_sample

    if args.score_only:  # the original's protein_mpnn_run.py --score_only 1
        return _score_native(args, num_orders=args.num_samples)
    if args.jsonl_path is not None:
        return _sample_jsonl(args)
    orphans = [f"--{k.replace('_', '-')}" for k in _PIPELINE_FILES if getattr(args, k)]
    if orphans:
        raise ConfigError(
            f"{', '.join(orphans)} need --jsonl-path (the parsed chains they refer to)"
        )
    if args.pdb_dir is not None or args.pdb_list is not None:
        return _sample_many(args)
    from fidia_jax.projects.proteinmpnn._startup import cache_dir_from_env

    return run_sample(
        args.out, pdb=args.pdb, chains=args.chains, design_chains=args.design_chains,
        fixed=args.fixed, num_samples=args.num_samples, temperature=args.temperature,
        omit_aas=args.omit_aa, bias_aa=args.bias_aa, bias_by_res=args.bias_by_res,
        checkpoint=args.weights, variant=args.variant, seed=args.seed, quiet=args.quiet,
        tie=args.tie, homo_oligomer=args.homo_oligomer, omit_by_res=args.omit_aa_by_res,
        save_probs=args.save_probs, unconditional_probs=args.unconditional_probs,
        bucket=args.bucket, max_length=args.max_length, backbone_noise=args.backbone_noise,
        seqs_dir=_seqs_dir(args), **_pssm_kwargs(args), cache_dir=cache_dir_from_env(),
    )  # fmt: skip


def _score(args: argparse.Namespace):
    from fidia_jax.errors import ConfigError
    from fidia_jax.projects.proteinmpnn.design import run_score

    _note_data_dir(args)
    _warn_old_weights_flag(args)
    if args.fasta is None:  # the native sequences (the original's --score_only)
        return _score_native(args, num_orders=args.num_orders)
    if args.jsonl_path or args.chain_id_jsonl or args.fixed_positions_jsonl:
        raise ConfigError("--jsonl-path scores the native sequences: drop --fasta")
    if args.pdb_dir or args.pdb_list:
        raise ConfigError("--pdb-dir / --pdb-list score the native sequences: drop --fasta")
    return run_score(
        args.fasta, pdb=args.pdb, chains=args.chains, design_chains=args.design_chains,
        fixed=args.fixed, num_orders=args.num_orders, checkpoint=args.weights,
        variant=args.variant, seed=args.seed, out=args.out, quiet=args.quiet, tie=args.tie,
        homo_oligomer=args.homo_oligomer, bucket=args.bucket,
    )  # fmt: skip


def _score_native(args: argparse.Namespace, num_orders: int):
    """``score`` without ``--fasta`` (or ``sample --score_only 1``): ``run_score_only``."""
    from fidia_jax.errors import ConfigError
    from fidia_jax.projects.proteinmpnn.batch import run_score_only

    if args.out is None:
        raise ConfigError("scoring native sequences (no --fasta) needs --out")
    if args.tie or args.homo_oligomer or args.fixed:
        raise ConfigError("--tie, --homo-oligomer and --fixed need --fasta")
    summary = run_score_only(
        args.out, pdb_dir=args.pdb_dir, pdb_list=args.pdb_list,
        pdbs=[args.pdb] if args.pdb else [], chains=args.chains,
        design_chains=args.design_chains, num_orders=num_orders,
        checkpoint=args.weights, variant=args.variant, seed=args.seed, bucket=args.bucket,
        quiet=args.quiet, jsonl_path=args.jsonl_path, chain_id_jsonl=args.chain_id_jsonl,
        fixed_positions_jsonl=args.fixed_positions_jsonl,
    )  # fmt: skip
    if summary["num_failed"]:
        raise _score_only_failed(summary)
    return summary


def _add_bucket_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--bucket",
        type=int,
        default=64,
        help="pad lengths to multiples of this, so that one compiled program (kept in the "
        "persistent compilation cache) serves every length of a bucket; 1 = no padding",
    )


def _add_probs_only_args(p: argparse.ArgumentParser) -> None:
    """The original's probabilities-only runs (``--conditional_probs_only 1`` works too)."""
    for name, what in (
        ("conditional-probs-only", "write OUT/conditional_probs_only/<name>.npz (log p(s_i | "
         "backbone, the other residues)) instead of sampling"),
        ("conditional-probs-only-backbone", "with --conditional-probs-only: log p(s_i | "
         "backbone) (no sequence context)"),
        ("unconditional-probs-only", "write OUT/unconditional_probs_only/<name>.npz (one pass "
         "with no sequence context) instead of sampling"),
    ):  # fmt: skip
        p.add_argument(f"--{name}", f"--{name.replace('-', '_')}", dest=name.replace("-", "_"),
                       type=int, nargs="?", const=1, default=0, choices=[0, 1], help=what)  # fmt: skip


def _add_pssm_args(p: argparse.ArgumentParser) -> None:
    """The original's PSSM options, under its names and ours."""
    p.add_argument("--pssm-jsonl", "--pssm_jsonl", dest="pssm_jsonl", default=None, metavar="FILE",
                   help="PSSM file of make_pssm_input_dict.py (keyed by structure name)")  # fmt: skip
    p.add_argument("--pssm-multi", "--pssm_multi", dest="pssm_multi", type=float, default=0.0,
                   help="weight of the PSSM in [0, 1] (0: the model only; 1: the PSSM only)")  # fmt: skip
    p.add_argument("--pssm-threshold", "--pssm_threshold", dest="pssm_threshold", type=float,
                   default=0.0, help="with --pssm-log-odds-flag: letters with log-odds <= this "
                   "are down-weighted 1000x")  # fmt: skip
    p.add_argument("--pssm-log-odds-flag", "--pssm_log_odds_flag", dest="pssm_log_odds_flag",
                   type=int, choices=[0, 1], default=0, help="1: restrict letters by log-odds")  # fmt: skip
    p.add_argument("--pssm-bias-flag", "--pssm_bias_flag", dest="pssm_bias_flag", type=int,
                   choices=[0, 1], default=0, help="1: mix the PSSM into the sampling distribution")  # fmt: skip


def add_commands(subparsers) -> None:
    """Registers ``sample`` and ``score`` on the project's argparse subparsers object."""
    ps = subparsers.add_parser("sample", help="sample sequences for a backbone")
    _add_structure_args(ps)
    ps.add_argument("--num-samples", "--num_seq_per_target", dest="num_samples", type=int,
                    default=16, help="sequences per structure and temperature")  # fmt: skip
    ps.add_argument("--batch-size", "--batch_size", dest="batch_size", type=int, default=None,
                    help="accepted for the original's scripts; ignored (a structure's samples "
                    "run as one batch)")  # fmt: skip
    ps.add_argument("--score-only", "--score_only", dest="score_only", type=int, nargs="?",
                    const=1, default=0, choices=[0, 1],
                    help="score the native sequences instead of sampling (as 'score' without "
                    "--fasta; --num-samples orders each)")  # fmt: skip
    ps.add_argument("--temperature", "--sampling_temp", dest="temperature", default="0.1",
                    help="sampling temperature(s): 0.1, or several as '0.1,0.2' or '0.1 0.2' "
                    "(num-samples at each)")  # fmt: skip
    ps.add_argument("--omit-aa", "--omit_AAs", dest="omit_aa", default="X",
                    help="letters never sampled, e.g. CX (X always)")  # fmt: skip
    ps.add_argument("--bias-aa", default=None, help="global logit bias, e.g. 'W:1.5,C:-2'")
    ps.add_argument("--bias-by-res", default=None, metavar="FILE",
                    help='per-residue bias JSON {"A": {"12": {"W": 2.0}}} (author numbering)')  # fmt: skip
    ps.add_argument(
        "--pdb-dir", default=None, help="sample every structure file of DIR (.pdb/.cif, .gz ok)"
    )
    ps.add_argument(
        "--pdb-list", default=None, metavar="FILE", help="sample the structures listed in FILE"
    )
    ps.add_argument("--jsonl-path", "--jsonl_path", dest="jsonl_path", default=None, metavar="FILE",
                    help="sample the structures of a parse_multiple_chains.py JSONL file")  # fmt: skip
    for name, original, what in (
        ("chain-id", "chain_id", "designed/fixed chains"),
        ("fixed-positions", "fixed_positions", "fixed positions"),
        ("tied-positions", "tied_positions", "tied positions"),
        ("bias-aa", "bias_AA", "global amino-acid bias"),
        ("bias-by-res", "bias_by_res", "per-residue bias"),
        ("omit-aa", "omit_AA", "per-residue omitted letters"),
    ):
        ps.add_argument(f"--{name}-jsonl", f"--{original}_jsonl",
                        dest=f"{name.replace('-', '_')}_jsonl", default=None, metavar="FILE",
                        help=f"with --jsonl-path: the original helper scripts' {what} file")  # fmt: skip
    _add_bucket_arg(ps)
    ps.add_argument(
        "--workers",
        type=int,
        default=None,
        help="with --pdb-dir / --pdb-list / --jsonl-path: backbones run at once on this many "
        "threads, the first of each length bucket first, so that new buckets compile while "
        "others sample (default: 2, or 1 on a one-core machine); results do not depend on it",
    )
    ps.add_argument("--original-layout", action="store_true",
                    help="also write OUT/seqs/<name>.fa, as protein_mpnn_run.py does")  # fmt: skip
    ps.add_argument("--backbone-noise", "--backbone_noise", dest="backbone_noise", type=float,
                    default=0.0, help="Gaussian noise (Å, std) added to the backbone coordinates")  # fmt: skip
    ps.add_argument("--max-length", "--max_length", dest="max_length", type=int, default=None,
                    help="refuse structures of more residues (with --pdb-dir: that row fails)")  # fmt: skip
    _add_tie_args(ps)
    _add_pssm_args(ps)
    _add_probs_only_args(ps)
    ps.add_argument("--omit-aa-by-res", default=None, metavar="FILE",
                    help='per-residue omitted letters JSON {"A": {"12": "CW"}} (author numbering)')  # fmt: skip
    ps.add_argument("--save-probs", "--save_probs", dest="save_probs", type=int, nargs="?",
                    const=1, default=0, choices=[0, 1],
                    help="also write probs.npz (per-sample per-position conditional "
                    "probabilities); with --original-layout also OUT/probs/<name>.npz")  # fmt: skip
    ps.add_argument("--unconditional-probs", action="store_true",
                    help="with --save-probs: add the no-sequence-context probabilities")  # fmt: skip
    ps.add_argument("--out", "--workdir", "--out_folder", dest="out", required=True,
                    help="output directory (samples.fasta, summary.json)")  # fmt: skip
    ps.set_defaults(run=_sample)
    pc = subparsers.add_parser("score", help="score the sequences of a FASTA file on a backbone")
    _add_structure_args(pc)
    pc.add_argument("--fasta", default=None,
                    help="sequences to score; without it, the native sequence of each structure "
                    "(--pdb, --pdb-dir, --pdb-list) is scored into OUT/score_only/<name>_pdb.npz")  # fmt: skip
    pc.add_argument("--pdb-dir", default=None, help="without --fasta: score every structure of DIR")
    pc.add_argument("--pdb-list", default=None, metavar="FILE",
                    help="without --fasta: score the structures listed in FILE")  # fmt: skip
    pc.add_argument("--jsonl-path", "--jsonl_path", dest="jsonl_path", default=None, metavar="FILE",
                    help="without --fasta: score the records of a parse_multiple_chains.py "
                    "JSONL file (parsed_pdbs.jsonl)")  # fmt: skip
    pc.add_argument("--chain-id-jsonl", "--chain_id_jsonl", dest="chain_id_jsonl", default=None,
                    metavar="FILE", help="with --jsonl-path: designed / visible chains")  # fmt: skip
    pc.add_argument("--fixed-positions-jsonl", "--fixed_positions_jsonl",
                    dest="fixed_positions_jsonl", default=None, metavar="FILE",
                    help="with --jsonl-path: positions left out of the designed score")  # fmt: skip
    pc.add_argument("--num-orders", "--num_seq_per_target", dest="num_orders", type=int, default=1,
                    help="random decoding orders to average")  # fmt: skip
    _add_bucket_arg(pc)
    _add_tie_args(pc)
    pc.add_argument("--out", "--workdir", dest="out", default=None,
                    help="directory for scores.json (optional)")  # fmt: skip
    pc.set_defaults(run=_score)
