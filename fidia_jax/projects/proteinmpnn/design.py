"""``fidia-jax proteinmpnn sample | score``: ProteinMPNN design runs that write files.

Output files are written to a temporary file in the output directory and renamed into place, so
a failed run leaves no half-written files.
"""

from __future__ import annotations

import hashlib
import os
import pathlib
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from fidia_jax._io import Reporter, atomic_write_text, json_text
from fidia_jax.errors import ConfigError, DataError
from fidia_jax.protein import ALPHABET, DesignSetup, prepare_design, read_fasta

__all__ = ["run_sample", "run_score"]


def _sha256(path: pathlib.Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _load_model(checkpoint: str, variant: str):
    from fidia_jax.models import ProteinMPNN

    return ProteinMPNN.from_checkpoint(checkpoint, variant=variant)


def _check_positive(name: str, value: float, integer: bool = False) -> None:
    if not (value > 0) or (integer and int(value) != value):
        raise ConfigError(
            f"{name} must be a positive {'integer' if integer else 'number'}, got {value}"
        )


def _short(seq: str, n: int = 60) -> str:
    return seq if len(seq) <= n else seq[: n - 3] + "..."


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
      pdb, chains, design_chains, fixed: see :func:`fidia_jax.protein.prepare_design`.
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
    with Reporter(quiet) as rep:
        with rep.stage("loading structure"):
            setup = prepare_design(pdb, chains, design_chains, fixed)
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
            atomic_write_text(fasta, _sample_fasta(summary))
            atomic_write_text(js, json_text(summary, indent=2) + "\n")
        rep.table(
            f"{setup.protein.source}: {int(setup.designed.sum())} designed positions, "
            f"mean recovery {summary['mean_recovery']:.3f}",
            ["#", "score (NLL)", "recovery", "sequence"],
            [(s["index"], f"{s['score']:.4f}", f"{s['recovery']:.3f}", _short(s["sequence"]))
             for s in summary["samples"]],
        )  # fmt: skip
    return summary


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


def _sample_fasta(summary: dict) -> str:
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
    with Reporter(quiet) as rep:
        with rep.stage("loading structure and sequences"):
            setup = prepare_design(pdb, chains, design_chains, fixed)
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
            atomic_write_text(path, json_text(summary, indent=2) + "\n")
        rep.table(
            f"{setup.protein.source}: {int(setup.designed.sum())} scored positions",
            ["record", "score (NLL)", "recovery"],
            [
                (_short(r["header"], 50), f"{r['score']:.4f}", f"{r['recovery']:.3f}")
                for r in summary["records"]
            ],
        )
    return summary
