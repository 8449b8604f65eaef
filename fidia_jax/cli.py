"""``fidia-jax`` command line: ProteinMPNN sequence design and scoring.

Subcommands::

  fidia-jax sample [--pdb FILE] [--chains A] [--design-chains A] [--fixed A16-35,A52-71]
                   [--num-samples 16] [--temperature 0.1] [--checkpoint v_48_020]
                   [--variant vanilla] [--seed 0] --out DIR
  fidia-jax score  [--pdb FILE] [--chains A] [--design-chains A] [--fixed ...] --fasta FILE
                   [--num-orders 1] [--seed 0] [--out DIR]
  fidia-jax demo   [--out out/demo]

The parsing lives here; the work is done by library functions (:func:`run_sample`,
:func:`run_score`, :func:`run_demo`) that notebooks and benchmarks import. Every
:class:`fidia_jax.errors.FidiaError` becomes one line ``fidia-jax: error: ...`` on stderr and exit
code 2. Output files are written to a temporary file in the output directory and renamed into
place, so a failed run leaves no half-written files.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import pathlib
import sys
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from fidia_jax._io import atomic_write_text, make_console
from fidia_jax.errors import ConfigError, DataError, FidiaError
from fidia_jax.protein import (
    ALPHABET,
    Protein,
    default_backbone_path,
    load_structure,
    parse_motif_spec,
)

__all__ = ["DesignSetup", "main", "prepare", "read_fasta", "run_demo", "run_sample", "run_score"]

_PROG = "fidia-jax"


# ----------------------------------------------------------------------------- helpers
class _Reporter:
    """Rich progress + tables on stderr/stdout; silent when ``quiet``."""

    def __init__(self, quiet: bool):
        self.quiet = quiet
        self._progress = None
        if not quiet:
            self.err = make_console(stderr=True)
            self.out = make_console()

    def __enter__(self):
        if not self.quiet:
            from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

            # transient: nothing of the progress display remains after the run (so an error
            # leaves exactly one line on stderr); disabled when stderr is not a terminal.
            self._progress = Progress(
                SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                console=self.err, transient=True, disable=not self.err.is_terminal,
            )  # fmt: skip
            self._progress.__enter__()
        return self

    def __exit__(self, *exc):
        if self._progress is not None:
            self._progress.__exit__(*exc)
        return False

    def stage(self, description: str):
        """Context manager marking one stage of the run."""
        reporter = self

        class _Stage:
            def __enter__(self):
                if reporter._progress is not None:
                    self.task = reporter._progress.add_task(description, total=1)
                return self

            def __exit__(self, exc_type, *rest):
                if reporter._progress is not None and exc_type is None:
                    reporter._progress.update(self.task, completed=1)
                return False

        return _Stage()

    def table(self, title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]):
        if self.quiet:
            return
        from rich.table import Table

        t = Table(title=title)
        for c in columns:
            t.add_column(c)
        for r in rows:
            t.add_row(*(str(x) for x in r))
        self.out.print(t)


def _sha256(path: pathlib.Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def read_fasta(path: str | os.PathLike) -> list[tuple[str, str]]:
    """``[(header, sequence), ...]`` of a FASTA file (``>`` stripped; line breaks joined).

    Raises:
      DataError: missing, empty or malformed file.
    """
    path = pathlib.Path(path)
    if not path.is_file():
        raise DataError(f"{path}: FASTA file not found")
    records: list[tuple[str, list[str]]] = []
    for n, line in enumerate(path.read_text(errors="replace").splitlines(), start=1):
        line = line.strip()
        if not line:
            continue
        if line.startswith(">"):
            records.append((line[1:].strip(), []))
        elif not records:
            raise DataError(f"{path}:{n}: sequence line before the first '>' header")
        else:
            records[-1][1].append(line)
    if not records:
        raise DataError(f"{path}: no FASTA records")
    return [(h, "".join(s)) for h, s in records]


@dataclasses.dataclass(frozen=True)
class DesignSetup:
    """A loaded structure with the design problem on it.

    Attributes:
      protein: the parsed structure.
      design_chains: chains whose residues are designed.
      chain_mask: ``(L,)`` float32, 1 on designed chains.
      fixed: ``(L,)`` bool, motif positions kept at the native residue.
      designed: ``(L,)`` bool, positions that are sampled and scored:
        ``chain_mask * mask * ~fixed``.
      fixed_spec: the ``--fixed`` spec ("" when none).
    """

    protein: Protein
    design_chains: tuple[str, ...]
    chain_mask: np.ndarray
    fixed: np.ndarray
    designed: np.ndarray
    fixed_spec: str

    def designed_slots(self) -> np.ndarray:
        """Indices of the slots of the designed chains (the FASTA sequence layout)."""
        return np.flatnonzero(self.chain_mask > 0)

    def chain_strings(self, tokens: np.ndarray) -> str:
        """Designed chains of a token vector as one-letter strings joined by ``/``."""
        cid = np.asarray(self.protein.chain_id)
        return "/".join(
            "".join(ALPHABET[int(t)] for t in tokens[cid == c]) for c in self.design_chains
        )


def prepare(
    pdb: str | os.PathLike | None = None,
    chains: str | Sequence[str] | None = None,
    design_chains: str | Sequence[str] | None = None,
    fixed: str | None = None,
) -> DesignSetup:
    """Loads the structure and resolves design chains and fixed (motif) positions.

    Args:
      pdb: structure file; ``None`` = the built-in backbone (:func:`default_backbone_path`).
      chains: chains to load, in order (``None`` = all protein chains).
      design_chains: chains to design (``None`` = all loaded chains); others are visible context.
      fixed: motif spec in author numbering (``"A16-35,A52-71"``); these positions keep the
        native residue.

    Raises:
      StructureError, ChainError, MotifSpecError: see :func:`load_structure`,
        :func:`parse_motif_spec`.
      ConfigError: no position is left to design.
    """
    protein = load_structure(default_backbone_path() if pdb is None else pdb, chains)
    if design_chains is None:
        dchains = protein.chain_order
    elif isinstance(design_chains, str):
        dchains = tuple(c for c in design_chains.replace(" ", ",").split(",") if c)
    else:
        dchains = tuple(design_chains)
    chain_mask = protein.chain_mask(dchains)
    dchains = tuple(c for c in protein.chain_order if c in dchains)
    fixed_mask = parse_motif_spec(fixed, protein) if fixed else np.zeros(protein.length, bool)
    designed = (chain_mask > 0) & (protein.mask > 0) & ~fixed_mask
    if not designed.any():
        raise ConfigError(
            f"{protein.source}: no position left to design (design chains {list(dchains)}, "
            f"{int(fixed_mask.sum())} fixed)"
        )
    return DesignSetup(protein, dchains, chain_mask, fixed_mask, designed, fixed or "")


def _load_model(checkpoint: str, variant: str):
    from fidia_jax.models import ProteinMPNN

    return ProteinMPNN.from_checkpoint(checkpoint, variant=variant)


def _check_positive(name: str, value: float, integer: bool = False) -> None:
    if not (value > 0) or (integer and int(value) != value):
        raise ConfigError(
            f"{name} must be a positive {'integer' if integer else 'number'}, got {value}"
        )


# ----------------------------------------------------------------------------- sample
def run_sample(
    out: str | os.PathLike,
    *,
    pdb: str | os.PathLike | None = None,
    chains: str | Sequence[str] | None = None,
    design_chains: str | Sequence[str] | None = None,
    fixed: str | None = None,
    num_samples: int = 16,
    temperature: float = 0.1,
    checkpoint: str = "v_48_020",
    variant: str = "vanilla",
    seed: int = 0,
    model=None,
    quiet: bool = False,
    write: bool = True,
) -> dict[str, Any]:
    """Samples sequences with ProteinMPNN and writes ``samples.fasta`` + ``summary.json``.

    Per sample: ``score`` = mean negative log-likelihood (nats) of the sampled residues over the
    designed positions (designed chains, complete backbone, not fixed), each in its own random
    decoding context (the original ``protein_mpnn_run.py`` "score"); ``recovery`` = fraction of
    designed positions equal to the native residue.

    Args:
      out: output directory (created when writing).
      pdb, chains, design_chains, fixed: see :func:`prepare`.
      num_samples: sequences to draw.
      temperature: sampling temperature ``T > 0``.
      checkpoint, variant: ProteinMPNN weights (see ``fidia_jax.models.load_checkpoint``).
      seed: PRNG seed (``jax.random.key(seed)``).
      model: an already loaded ``ProteinMPNN`` (skips loading ``checkpoint``).
      quiet: no progress or table output.
      write: write the files (``False``: only return the summary).

    Returns:
      The JSON summary as a dict (``samples`` with ``sequence``, ``score``, ``recovery``;
      ``mean_recovery``, ``mean_score``, ``timing_s``, ``inputs``, ``files``).

    Raises:
      FidiaError subclasses for bad inputs (structure, chains, motif spec, checkpoint, config).
    """
    _check_positive("--num-samples", num_samples, integer=True)
    _check_positive("--temperature", temperature)
    t0 = time.perf_counter()
    timing: dict[str, float] = {}
    with _Reporter(quiet) as rep:
        with rep.stage("loading structure"):
            setup = prepare(pdb, chains, design_chains, fixed)
        timing["load_structure"] = time.perf_counter() - t0
        if model is None:
            t = time.perf_counter()
            with rep.stage(f"loading ProteinMPNN {variant}/{checkpoint}"):
                model = _load_model(checkpoint, variant)
            timing["load_model"] = time.perf_counter() - t
        import jax

        from fidia_jax.models import MPNNInputs, sample

        t = time.perf_counter()
        with rep.stage(
            f"sampling {num_samples} sequences at T={temperature} (first call compiles)"
        ):
            inputs = MPNNInputs.from_protein(setup.protein, setup.design_chains)
            res = sample(
                model, jax.random.key(seed), inputs, num_samples=int(num_samples),
                temperature=float(temperature), fixed_mask=setup.fixed,
            )  # fmt: skip
            seqs = np.asarray(jax.device_get(res.sequences))
            tok_lp = np.asarray(jax.device_get(res.token_log_probs))
        timing["sample"] = time.perf_counter() - t
        summary = _sample_summary(
            setup, seqs, tok_lp, num_samples, temperature, checkpoint, variant, seed
        )
        timing["total"] = time.perf_counter() - t0
        summary["timing_s"] = {k: round(v, 3) for k, v in timing.items()}
        if write:
            out = pathlib.Path(out)
            fasta, js = out / "samples.fasta", out / "summary.json"
            summary["files"] = {"fasta": str(fasta), "summary": str(js)}
            atomic_write_text(fasta, _sample_fasta(setup, summary))
            atomic_write_text(js, json.dumps(summary, indent=2) + "\n")
        rep.table(
            f"{setup.protein.source}: {int(setup.designed.sum())} designed positions, "
            f"mean recovery {summary['mean_recovery']:.3f}",
            ["#", "score (NLL)", "recovery", "sequence"],
            [(s["index"], f"{s['score']:.4f}", f"{s['recovery']:.3f}", _short(s["sequence"]))
             for s in summary["samples"]],
        )  # fmt: skip
    return summary


def _short(seq: str, n: int = 60) -> str:
    return seq if len(seq) <= n else seq[: n - 3] + "..."


def _sample_summary(setup, seqs, tok_lp, num_samples, temperature, checkpoint, variant, seed):
    p = setup.protein
    d = setup.designed
    nd = int(d.sum())
    scores = -(tok_lp * d).sum(-1) / nd
    recovery = ((seqs == p.S[None]) & d).sum(-1) / nd
    source = pathlib.Path(p.source)
    samples = [
        {
            "index": i + 1,
            "sequence": setup.chain_strings(seqs[i]),
            "score": float(scores[i]),
            "recovery": float(recovery[i]),
        }
        for i in range(seqs.shape[0])
    ]
    return {
        "command": "sample",
        "inputs": {
            "pdb": str(source),
            "pdb_sha256": _sha256(source) if source.is_file() else None,
            "chains": list(p.chain_order),
            "design_chains": list(setup.design_chains),
            "fixed": setup.fixed_spec,
            "num_fixed": int(setup.fixed.sum()),
            "num_designed": nd,
            "length": p.length,
            "missing": list(p.missing),
            "num_samples": int(num_samples),
            "temperature": float(temperature),
            "checkpoint": checkpoint,
            "variant": variant,
            "seed": int(seed),
        },
        "native": setup.chain_strings(p.S),
        "samples": samples,
        "mean_score": float(np.mean(scores)),
        "mean_recovery": float(np.mean(recovery)),
    }


def _sample_fasta(setup: DesignSetup, summary: dict) -> str:
    inp = summary["inputs"]
    lines = [
        f">native source={pathlib.Path(inp['pdb']).name} design_chains={','.join(inp['design_chains'])} "
        f"fixed={inp['fixed'] or '-'} checkpoint={inp['variant']}/{inp['checkpoint']}",
        summary["native"],
    ]
    for s in summary["samples"]:
        lines.append(
            f">sample={s['index']} score={s['score']:.4f} recovery={s['recovery']:.4f} "
            f"seed={inp['seed']} T={inp['temperature']:g}"
        )
        lines.append(s["sequence"])
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------- score
def _tokens_from_fasta(setup: DesignSetup, header: str, seq: str, path) -> np.ndarray:
    """Native tokens with the designed chains replaced by ``seq``."""
    p = setup.protein
    letters = seq.replace("/", "").replace("-", "X").upper()
    bad = sorted(set(letters) - set(ALPHABET))
    if bad:
        raise DataError(f"{path}: record {header!r} has letters outside {ALPHABET!r}: {bad}")
    slots = setup.designed_slots()
    tokens = p.S.copy()
    if len(letters) == len(slots):
        tokens[slots] = [ALPHABET.index(a) for a in letters]
    elif len(letters) == p.length:
        tokens[:] = [ALPHABET.index(a) for a in letters]
    else:
        raise DataError(
            f"{path}: record {header!r} has {len(letters)} residues; expected {len(slots)} "
            f"(design chains {list(setup.design_chains)}) or {p.length} (all chains)"
        )
    return tokens.astype(np.int32)


def run_score(
    fasta: str | os.PathLike,
    *,
    pdb: str | os.PathLike | None = None,
    chains: str | Sequence[str] | None = None,
    design_chains: str | Sequence[str] | None = None,
    fixed: str | None = None,
    num_orders: int = 1,
    checkpoint: str = "v_48_020",
    variant: str = "vanilla",
    seed: int = 0,
    out: str | os.PathLike | None = None,
    model=None,
    quiet: bool = False,
) -> dict[str, Any]:
    """Scores the sequences of a FASTA file on a structure (teacher-forced ProteinMPNN NLL).

    Each record holds the designed chains (joined by ``/`` or not) or the whole concatenation.
    ``score`` = mean NLL over the designed positions, averaged over ``num_orders`` random decoding
    orders (drawn from ``seed``); ``recovery`` as in :func:`run_sample`.

    Returns:
      The summary dict (written to ``out/scores.json`` when ``out`` is given).

    Raises:
      FidiaError subclasses for bad inputs.
    """
    _check_positive("--num-orders", num_orders, integer=True)
    t0 = time.perf_counter()
    with _Reporter(quiet) as rep:
        with rep.stage("loading structure and sequences"):
            setup = prepare(pdb, chains, design_chains, fixed)
            records = read_fasta(fasta)
            toks = np.stack([_tokens_from_fasta(setup, h, s, fasta) for h, s in records])
        if model is None:
            with rep.stage(f"loading ProteinMPNN {variant}/{checkpoint}"):
                model = _load_model(checkpoint, variant)
        import jax

        from fidia_jax.models import MPNNInputs, random_decoding_order, score

        with rep.stage(f"scoring {len(records)} sequences x {num_orders} decoding orders"):
            inputs = MPNNInputs.from_protein(setup.protein, setup.design_chains)
            n = toks.shape[0]
            design = setup.designed.astype(np.float32)
            nll = np.zeros(n)
            for k in jax.random.split(jax.random.key(seed), int(num_orders)):
                order = random_decoding_order(k, np.broadcast_to(design, toks.shape))
                res = score(model, inputs, toks, order)
                tok = np.asarray(jax.device_get(res.token_log_probs))
                nll += -(tok * design).sum(-1) / design.sum()
            nll /= int(num_orders)
        recovery = ((toks == setup.protein.S[None]) & setup.designed).sum(-1) / setup.designed.sum()
        summary = {
            "command": "score",
            "inputs": {
                "pdb": setup.protein.source, "fasta": str(fasta),
                "chains": list(setup.protein.chain_order), "design_chains": list(setup.design_chains),
                "fixed": setup.fixed_spec, "num_designed": int(setup.designed.sum()),
                "num_orders": int(num_orders), "checkpoint": checkpoint, "variant": variant,
                "seed": int(seed),
            },
            "records": [
                {"header": h, "score": float(nll[i]), "recovery": float(recovery[i])}
                for i, (h, _) in enumerate(records)
            ],
            "timing_s": {"total": round(time.perf_counter() - t0, 3)},
        }  # fmt: skip
        if out is not None:
            path = pathlib.Path(out) / "scores.json"
            summary["files"] = {"scores": str(path)}
            atomic_write_text(path, json.dumps(summary, indent=2) + "\n")
        rep.table(
            f"{setup.protein.source}: {int(setup.designed.sum())} scored positions",
            ["record", "score (NLL)", "recovery"],
            [
                (_short(r["header"], 50), f"{r['score']:.4f}", f"{r['recovery']:.3f}")
                for r in summary["records"]
            ],
        )
    return summary


# ----------------------------------------------------------------------------- demo
def run_demo(
    out: str | os.PathLike = "out/demo", *, seed: int = 0, quiet: bool = False
) -> dict[str, Any]:
    """The ``fidia-jax demo`` job (``make demo``): FIDIA on the built-in backbone (BPTI, 5PTI).

    A short FIDIA fine-tune of ProteinMPNN, max@N before and after, then a Best-of-N design with
    the fine-tuned policy (:func:`fidia_jax.projects.fidia._commands.run_fidia_demo`; outputs under
    ``out/train`` and ``out/design``). Plain ProteinMPNN sampling is ``fidia-jax sample``.
    """
    from fidia_jax.projects.fidia._commands import run_fidia_demo

    return run_fidia_demo(out, seed=seed, quiet=quiet)


# ----------------------------------------------------------------------------- argparse
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


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=_PROG, description="ProteinMPNN design with fidia_jax.")
    sub = parser.add_subparsers(dest="command", required=True)
    ps = sub.add_parser("sample", help="sample sequences for a backbone")
    _add_structure_args(ps)
    ps.add_argument("--num-samples", type=int, default=16)
    ps.add_argument("--temperature", type=float, default=0.1)
    ps.add_argument("--out", required=True, help="output directory (samples.fasta, summary.json)")
    pc = sub.add_parser("score", help="score the sequences of a FASTA file on a backbone")
    _add_structure_args(pc)
    pc.add_argument("--fasta", required=True)
    pc.add_argument("--num-orders", type=int, default=1, help="random decoding orders to average")
    pc.add_argument("--out", default=None, help="directory for scores.json (optional)")
    pd = sub.add_parser("demo", help="run the demo job on the built-in backbone")
    pd.add_argument("--out", default="out/demo")
    pd.add_argument("--seed", type=int, default=0)
    pd.add_argument("--quiet", action="store_true")
    from fidia_jax.projects.fidia._commands import add_subcommands  # train / evaluate / design

    add_subcommands(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``fidia-jax``; returns the exit code (0 ok, 2 on a FidiaError)."""
    args = _parser().parse_args(argv)
    try:
        if args.command == "sample":
            run_sample(
                args.out, pdb=args.pdb, chains=args.chains, design_chains=args.design_chains,
                fixed=args.fixed, num_samples=args.num_samples, temperature=args.temperature,
                checkpoint=args.checkpoint, variant=args.variant, seed=args.seed, quiet=args.quiet,
            )  # fmt: skip
        elif args.command == "score":
            run_score(
                args.fasta, pdb=args.pdb, chains=args.chains, design_chains=args.design_chains,
                fixed=args.fixed, num_orders=args.num_orders, checkpoint=args.checkpoint,
                variant=args.variant, seed=args.seed, out=args.out, quiet=args.quiet,
            )  # fmt: skip
        elif args.command in ("train", "evaluate", "design"):
            from fidia_jax.projects.fidia._commands import run_command

            run_command(args)
        else:
            run_demo(args.out, seed=args.seed, quiet=args.quiet)
    except FidiaError as e:
        msg = " ".join(str(e).split())
        print(f"{_PROG}: error: {msg}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
