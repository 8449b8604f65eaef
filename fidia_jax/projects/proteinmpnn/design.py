"""``fidia-jax proteinmpnn sample | score``: ProteinMPNN design runs that write files.

Output files are written to a temporary file in the output directory and renamed into place, so
a failed run leaves no half-written files.
"""

from __future__ import annotations

import hashlib
import os
import pathlib
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from fidia_jax._io import Reporter, atomic_write_text, json_text
from fidia_jax.errors import ConfigError, DataError
from fidia_jax.projects.proteinmpnn.buckets import bucketed
from fidia_jax.projects.proteinmpnn.constraints import (
    OMIT_BIAS,
    load_bias_by_res,
    load_omit_by_res,
    parse_bias_aa,
    parse_omit_aas,
    pssm_arrays,
    read_pssm_jsonl,
    tied_groups,
)
from fidia_jax.projects.proteinmpnn.probs import PROBS_ONLY as PROBS_ONLY
from fidia_jax.projects.proteinmpnn.probs import probs_only_log_probs as probs_only_log_probs
from fidia_jax.projects.proteinmpnn.probs import run_probs_only, structure_stem
from fidia_jax.projects.proteinmpnn.probs import sampling_probs as sampling_probs
from fidia_jax.projects.proteinmpnn.probs import unconditional_log_probs as unconditional_log_probs
from fidia_jax.projects.proteinmpnn.probs import write_original_probs as write_original_probs
from fidia_jax.projects.proteinmpnn.probs import write_probs as write_probs
from fidia_jax.protein import ALPHABET, DesignSetup, prepare_design, read_fasta

__all__ = ["run_sample", "run_score"]


def _sha256(path: pathlib.Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def load_model(checkpoint: str, variant: str):
    """The named weights of the installed package, or a ``.pt`` file of the user's own.

    ``checkpoint`` is a path when it ends in ``.pt`` or names a directory part; the file is
    read without torch (``fidia_jax.models.load_torch_checkpoint``), and its kind must match
    ``variant`` (a CA-only file needs ``--ca-only``, and the other way round).
    """
    from fidia_jax.models import ProteinMPNN

    if not (checkpoint.endswith(".pt") or os.sep in checkpoint or "/" in checkpoint):
        return ProteinMPNN.from_checkpoint(checkpoint, variant=variant)
    if not pathlib.Path(checkpoint).is_file():
        raise ConfigError(f"--checkpoint {checkpoint}: no such file")
    model = ProteinMPNN.from_checkpoint(path=checkpoint)
    if model.ca_only != (variant == "ca"):
        kind = "a CA-only" if model.ca_only else "a full-backbone"
        fix = "add --ca-only" if model.ca_only else "drop --ca-only / --variant ca"
        raise ConfigError(f"--checkpoint {checkpoint} is {kind} model: {fix}")
    return model


def prepare_structure(
    pdb, chains, design_chains, fixed, variant: str, cache_dir=None
) -> DesignSetup:
    """:func:`prepare_design`; for the CA-only model (``variant="ca"``) a structure file is read
    with ``load_structure(..., ca_only=True)`` (``mask`` = the residue has a CA). With
    ``cache_dir`` the parsed file is kept there and read back on the next run
    (:func:`fidia_jax.projects.proteinmpnn._structure_cache.load_structure_cached`)."""
    from fidia_jax.projects.proteinmpnn._structure_cache import load_structure_cached
    from fidia_jax.protein import Protein, default_backbone_path

    if not isinstance(pdb, Protein) and (variant == "ca" or cache_dir is not None):
        pdb = load_structure_cached(
            default_backbone_path() if pdb is None else pdb, chains, ca_only=variant == "ca",
            cache_dir=cache_dir,
        )  # fmt: skip
        chains = None
    return prepare_design(pdb, chains, design_chains, fixed)


def check_positive(name: str, value: float, integer: bool = False) -> None:
    if not (value > 0) or (integer and int(value) != value):
        raise ConfigError(
            f"{name} must be a positive {'integer' if integer else 'number'}, got {value}"
        )


def _short(seq: str, n: int = 60) -> str:
    return seq if len(seq) <= n else seq[: n - 3] + "..."


# ----------------------------------------------------------------------------- constraints
def run_sample(
    out: str | os.PathLike | None,
    *,
    pdb: str | os.PathLike | None = None,
    chains: str | Sequence[str] | None = None,
    design_chains: str | Sequence[str] | None = None,
    fixed: str | None = None,
    num_samples: int = 16,
    temperature: float | str | Sequence[float] = 0.1,
    omit_aas: str | None = "X",
    bias_aa: str | Mapping[str, float] | None = None,
    bias_by_res: str | os.PathLike | Mapping | None = None,
    checkpoint: str = "v_48_020",
    variant: str = "vanilla",
    seed: int = 0,
    model=None,
    quiet: bool = False,
    write: bool = True,
    bucket: int | None = None,
    tie: str | Sequence[str] | None = None,
    homo_oligomer: bool = False,
    omit_by_res: str | os.PathLike | Mapping | None = None,
    save_probs: bool = False,
    unconditional_probs: bool = False,
    max_length: int | None = None,
    backbone_noise: float = 0.0,
    seqs_dir: str | os.PathLike | None = None,
    pssm: str | os.PathLike | Mapping | None = None,
    pssm_multi: float = 0.0,
    pssm_threshold: float = 0.0,
    pssm_log_odds_flag: bool = False,
    pssm_bias_flag: bool = False,
    probs_dir: str | os.PathLike | None = None,
    probs_only: str | None = None,
    probs_only_dir: str | os.PathLike | None = None,
    cache_dir: str | os.PathLike | None = None,
) -> dict[str, Any]:
    """Samples sequences with ProteinMPNN and writes ``samples.fasta`` + ``summary.json``.

    Per sample: ``score`` = mean negative log-likelihood (nats) of the sampled residues over the
    designed positions (designed chains, complete backbone, not fixed), each in its own random
    decoding context (the original ``protein_mpnn_run.py`` "score"); ``global_score`` = the same
    mean over every residue of the loaded chains with a complete backbone (the original's
    ``global_score``); ``recovery`` = fraction of designed positions equal to the native residue.
    The native sequence is scored (``native_score``, ``native_global_score``) teacher-forced
    under each sample's decoding order, averaged over the samples. ``score`` is of the unbiased
    model (``T = 1``, no bias, no omission), as in the original.

    Tied scores: with ``tie`` / ``homo_oligomer``, ``score``, ``global_score`` and the native's
    scores are computed as the original computes them: the plain teacher-forced forward (no
    ties) in the sample's grouped decoding order, where a later member of a group sees the
    earlier members with their tokens. A sample was drawn from its group's distribution
    (members see only the slots decoded before the group), so that forward is not the
    distribution it was drawn from; each sample's ``group_score`` (``summary.json`` only) is the
    mean NLL under the group distributions instead (``fidia_jax.models.score(..., tied=)``).
    Costs one more compiled program (a scorer) in tied runs.

    FASTA (the original's header fields, ``", "``-separated): first
    ``>{pdb stem}, score=, global_score=, fixed_chains=, designed_chains=, model_name=, seed=``
    then per sample ``>T=, sample=, score=, global_score=, seq_recovery=``; the designed chains
    of a sequence are joined by ``/``.

    Args:
      out: output directory (created when writing; ``None`` with ``write=False``).
      pdb, chains, design_chains, fixed: see :func:`fidia_jax.protein.prepare_design`.
      num_samples: sequences to draw (per temperature).
      temperature: sampling temperature ``T > 0``, or several (a sequence, or a string
        ``"0.1,0.2"`` / ``"0.1 0.2"`` as the original's ``--sampling_temp``): ``num_samples``
        sequences at each, in that order, under one compiled program (``T`` is traced). The
        ``k``-th temperature draws with ``jax.random.fold_in(key(seed), k)`` for ``k >= 1``
        (``key(seed)`` for the first, so a single temperature draws as before).
      omit_aas: letters never sampled at designed positions (``"CX"``); ``X`` is always added.
        Fixed and visible positions keep their native residue whatever it is.
      bias_aa: global logit bias, ``"W:1.5,C:-2"`` or ``{"W": 1.5}`` (see :func:`parse_bias_aa`).
      bias_by_res: per-residue bias JSON file or dict ``{"A": {"12": {"W": 2.0}}}`` (author chain
        and residue number; see :func:`load_bias_by_res`). Both biases are added:
        ``p = softmax((logits + bias_aa + bias_by_res[i]) / T)``.
      omit_by_res: per-residue omission JSON file or dict ``{"A": {"12": "CW"}}`` (addressing of
        ``bias_by_res``; see :func:`load_omit_by_res`): a bias of :data:`OMIT_BIAS` at those
        (residue, letter) cells, so they are never sampled there. Within a tied group the
        omissions of all members apply to the group (the sampler reads one member's bias row).
      save_probs: also write ``probs.npz`` (see :func:`write_probs`): per sample and position
        the model's conditional probabilities ``exp(SampleResult.log_probs)`` (``T = 1``, no
        bias, no omission, in the sample's decoding context), with ``sequences``,
        ``decoding_order``, ``mask`` and ``designed``.
      unconditional_probs: with ``save_probs``, also ``unconditional_probs`` ``(L, 21)``: the
        original's ``--unconditional_probs_only`` (see :func:`unconditional_log_probs`).
      checkpoint, variant: ProteinMPNN weights (see ``fidia_jax.models.load_checkpoint``).
      seed: PRNG seed (``jax.random.key(seed)``).
      model: an already loaded ``ProteinMPNN`` (skips loading ``checkpoint``).
      quiet: no progress or table output.
      write: write the files (``False``: only return the summary).
      bucket: pad the length to a multiple of ``bucket`` (one compilation per bucket; see
        :mod:`.buckets`); ``None`` = no padding.
      tie, homo_oligomer: tied positions (``"A1-10:B1-10"``, repeatable) or all chains tied
        position by position (see ``fidia_jax.models.sample``'s ``tied``).
      max_length: refuse a structure of more residues (all loaded chains; the original's
        ``--max_length``, which skips it): a ``DataError`` naming both numbers, before the
        model runs (with many backbones, that structure's row fails and the others run).
      backbone_noise: standard deviation (Å) of Gaussian noise added to every backbone
        coordinate (the original's ``--backbone_noise``). One noisy copy of the structure is
        drawn per run from ``seed`` (``jax.random.fold_in(key(seed), 2**30)``) and used for
        sampling and for the native scores; the original draws new noise at every forward
        call. ``0`` = none.
      seqs_dir: also write the FASTA as ``seqs_dir/<structure file stem>.fa``, the original's
        ``seqs/`` layout (``--original-layout``: ``out/seqs/``, also with many backbones).
      pssm: the original's ``--pssm_jsonl`` file (see
        :func:`~fidia_jax.projects.proteinmpnn.constraints.read_pssm_jsonl`; the structure's
        record is found by its name, the file stem), or one record's ``{chain: {...}}`` dict.
      pssm_multi, pssm_threshold, pssm_log_odds_flag, pssm_bias_flag: the original's options of
        the same names (see :func:`~fidia_jax.projects.proteinmpnn.constraints.pssm_arrays`):
        at a designed position the sampling distribution becomes ``((1 - multi * coef) p +
        multi * coef * pssm_bias) * ((log_odds > threshold) + 0.001)``, renormalised, then
        the per-residue omissions are removed (as the original: ``omit_by_res`` acts after the
        PSSM, ``omit_aas`` before it; deviation: ``omit_aas`` letters are also removed after
        it, so an omitted letter is never sampled even where the PSSM gives it mass). Scores
        stay those of the unbiased model.
      probs_dir: also write the original's ``probs/<name>.npz`` there (see
        :func:`write_original_probs`; ``--save-probs --original-layout``).
      probs_only: instead of sampling, write the original's per-position probabilities
        (:func:`probs_only_log_probs`): ``"conditional"`` (``--conditional_probs_only``),
        ``"conditional_backbone"`` (``--conditional_probs_only_backbone``) or
        ``"unconditional"`` (``--unconditional_probs_only``), ``num_samples`` rows (random
        orders) per structure, to ``probs_only_dir/<name>.npz`` (default
        ``out/<conditional|unconditional>_probs_only``; keys ``log_p`` ``(num_samples, L,
        21)``, ``S``, ``mask``, ``design_mask``, as the original). The summary's
        ``mean_score`` is the mean ``-log_p`` of the native residue over the designed
        positions and rows, ``mean_recovery`` the fraction of designed positions whose most
        likely letter is the native one.
      cache_dir: the start-up cache (the CLI's default, see
        :func:`~fidia_jax.projects.proteinmpnn._startup.cache_dir_from_env`): the parsed
        structure, the weights as arrays and the compiled sampler are kept there and read back
        by the next run (:mod:`~fidia_jax.projects.proteinmpnn._startup`; same draws, bitwise).
        The weights and the compiled sampler only for a plain sampling run (no ``tie`` /
        ``homo_oligomer``, no PSSM, no ``unconditional_probs``, no ``probs_only``) when
        ``model`` is not given. ``None`` (default): nothing is cached.

    Returns:
      The JSON summary as a dict (``samples`` with ``sequence``, ``score``, ``recovery``;
      ``mean_recovery``, ``mean_score``, ``timing_s``, ``inputs``, ``files``).

    Raises:
      FidiaError subclasses for bad inputs (structure, chains, motif spec, checkpoint, config).
    """
    check_positive("--num-samples", num_samples, integer=True)
    temps = parse_temperatures(temperature)
    if not backbone_noise >= 0:
        raise ConfigError(f"--backbone-noise must be >= 0 (Å), got {backbone_noise}")
    omit = parse_omit_aas(omit_aas)
    bias_21 = parse_bias_aa(bias_aa)
    if unconditional_probs and not save_probs:
        raise ConfigError("--unconditional-probs needs --save-probs (it is written to probs.npz)")
    t0 = time.perf_counter()
    timing: dict[str, float] = {}
    with Reporter(quiet) as rep:
        with rep.stage("loading structure"):
            setup = prepare_structure(pdb, chains, design_chains, fixed, variant, cache_dir)
            if max_length is not None and setup.protein.length > max_length:
                raise DataError(
                    f"{setup.protein.source}: {setup.protein.length} residues, more than "
                    f"--max-length {max_length}"
                )
            bias_Lx21 = load_bias_by_res(bias_by_res, setup.protein) + bias_21[None]
            tied = tied_groups(tie, homo_oligomer, setup.protein)
            omit_Lx21 = load_omit_by_res(omit_by_res, setup.protein, omit)
            for g in tied or []:  # a tied group draws once: every member's omissions apply
                omit_Lx21[g] = omit_Lx21[g].any(0)
            pssm_rows = None
            if pssm is not None or pssm_log_odds_flag or pssm_bias_flag:
                entry = _pssm_entry(pssm, setup.protein.source)
                pssm_rows = pssm_arrays(
                    entry, setup.protein, setup.design_chains, multi=float(pssm_multi),
                    threshold=float(pssm_threshold), log_odds_flag=bool(pssm_log_odds_flag),
                    bias_flag=bool(pssm_bias_flag),
                    label=str(pssm) if not isinstance(pssm, Mapping) else "pssm",
                )  # fmt: skip
            if pssm_rows is None:
                bias_Lx21 = np.where(omit_Lx21, np.float32(OMIT_BIAS), bias_Lx21)
            else:  # the original removes per-residue omissions after the PSSM step
                mix, pprobs, scale = pssm_rows
                pssm_rows = (mix, pprobs, scale * ~omit_Lx21)
        timing["load_structure"] = time.perf_counter() - t0
        fast = None  # the start-up cache's sampler: no model object, no flax
        if model is None:
            t = time.perf_counter()
            with rep.stage(f"loading ProteinMPNN {variant}/{checkpoint}"):
                if (
                    cache_dir is not None
                    and not tied
                    and pssm_rows is None
                    and probs_only is None
                    and not unconditional_probs
                ):
                    from fidia_jax.projects.proteinmpnn._startup import open_sampler

                    fast = open_sampler(cache_dir, checkpoint, variant, load_model)
                if fast is None:
                    model = load_model(checkpoint, variant)
            timing["load_model"] = time.perf_counter() - t
        if probs_only is not None:
            return run_probs_only(
                out, setup, model, probs_only, probs_only_dir, int(num_samples), seed, bucket,
                backbone_noise, write, rep, dict(checkpoint=checkpoint, variant=variant),
            )  # fmt: skip
        import jax

        if fast is None:
            from fidia_jax.models import MPNNInputs, sample, score

            if bucket is not None:  # many backbones per run: one compilation per padded length
                sample, score = bucketed(bucket)
        t = time.perf_counter()
        with rep.stage(
            f"sampling {num_samples} sequences at T={','.join(f'{x:g}' for x in temps)} and "
            "scoring the native one (first call compiles)"
        ):
            if fast is None:
                inputs = MPNNInputs.from_protein(setup.protein, setup.design_chains)
            else:
                from fidia_jax.projects.proteinmpnn._startup import host_inputs

                inputs = host_inputs(setup.protein, setup.design_chains)
            if backbone_noise > 0:
                eps = jax.random.normal(
                    jax.random.fold_in(jax.random.key(seed), 2**30), np.shape(inputs.X)
                )
                inputs = inputs._replace(X=np.asarray(inputs.X + backbone_noise * eps, np.float32))
            # one compiled program: the native sequence is scored in the samples' decoding
            # orders by N more rows of the sampler's loop (``score_native``)
            from fidia_jax.projects.proteinmpnn._startup import seed_key

            runs = []
            key = seed_key(seed)  # jax.random.key(seed), bitwise, without compiling a program
            for k, temp in enumerate(temps):
                if fast is not None:  # the same program as below, read from the cache
                    runs.append(fast.sample(
                        key if k == 0 else jax.random.fold_in(key, k), inputs,
                        num_samples=int(num_samples), temperature=temp, fixed=setup.fixed,
                        omit_aas=omit,
                        bias=None if not bias_Lx21.any() else bias_Lx21, bucket=bucket,
                    ))  # fmt: skip
                    continue
                runs.append(sample(
                    model, key if k == 0 else jax.random.fold_in(key, k), inputs,
                    num_samples=int(num_samples), temperature=temp, fixed_mask=setup.fixed,
                    omit_aas=omit, bias=None if not bias_Lx21.any() else bias_Lx21,
                    score_native=True, **({"tied": tied} if tied else {}),
                    **({"pssm": pssm_rows} if pssm_rows is not None else {}),
                ))  # fmt: skip
            runs = jax.device_get(runs)
            seqs = np.concatenate([np.asarray(r.sequences) for r in runs])
            tok_lp = np.concatenate([np.asarray(r.token_log_probs) for r in runs])
            nat_lp = np.concatenate([np.asarray(r.native_token_log_probs) for r in runs])
            group_lp = None
            if tied:  # the original scores tied samples untied: see "Tied scores" in the docstring
                group_lp = _group_token_log_probs(
                    np.concatenate([np.asarray(r.log_probs) for r in runs]), seqs, tied
                )
                orders = np.concatenate([np.asarray(r.decoding_order) for r in runs])
                tok_lp = np.asarray(score(model, inputs, seqs, orders).token_log_probs)
                native = np.broadcast_to(np.asarray(inputs.S, np.int32), seqs.shape)
                nat_lp = np.asarray(score(model, inputs, native, orders).token_log_probs)
        timing["sample"] = time.perf_counter() - t
        summary = _sample_summary(
            setup, seqs, tok_lp, nat_lp, num_samples, temps, checkpoint, variant, seed
        )
        if group_lp is not None:
            for smp, g in zip(summary["samples"], _mean_nll(group_lp, setup.designed), strict=True):
                smp["group_score"] = float(g)
        summary["inputs"].update(
            pssm=None if pssm is None or isinstance(pssm, Mapping) else str(pssm),
            pssm_multi=float(pssm_multi), pssm_threshold=float(pssm_threshold),
            pssm_log_odds_flag=bool(pssm_log_odds_flag), pssm_bias_flag=bool(pssm_bias_flag),
            backbone_noise=float(backbone_noise), omit_aas=omit, bias_aa={a: float(b) for a, b in zip(ALPHABET, bias_21, strict=True) if b},
            bias_by_res=None if bias_by_res is None or isinstance(bias_by_res, Mapping)
            else str(bias_by_res),
            omit_by_res=None if omit_by_res is None or isinstance(omit_by_res, Mapping)
            else str(omit_by_res),
        )  # fmt: skip
        timing["total"] = time.perf_counter() - t0
        summary["timing_s"] = {k: round(v, 3) for k, v in timing.items()}
        if write and save_probs:
            uncond = None
            if unconditional_probs:
                uncond = np.exp(unconditional_log_probs(model, inputs))
            path = pathlib.Path(out) / "probs.npz"
            probs = np.exp(np.concatenate([np.asarray(r.log_probs) for r in runs]))
            orders = np.concatenate([np.asarray(r.decoding_order) for r in runs])
            write_probs(path, probs, seqs, orders, setup, uncond)
            summary["files"] = {"probs": str(path)}
        if write and probs_dir is not None:
            lp = np.concatenate([np.asarray(r.log_probs) for r in runs])
            orders = np.concatenate([np.asarray(r.decoding_order) for r in runs])
            temps_N = np.repeat(np.asarray(temps, np.float32), int(num_samples))
            sp = sampling_probs(
                lp, temps_N, bias_Lx21, omit, pssm_rows, setup.designed, tied, orders
            )
            path = pathlib.Path(probs_dir) / f"{structure_stem(setup.protein.source)}.npz"
            write_original_probs(path, sp, lp, seqs, setup)
            summary["files"] = {**summary.get("files", {}), "original_probs": str(path)}
        if write:
            write_sample_files(out, summary, seqs_dir)
        rep.table(
            f"{setup.protein.source}: {int(setup.designed.sum())} designed positions, "
            f"mean recovery {summary['mean_recovery']:.3f}",
            ["#", "score (NLL)", "global", "recovery", "sequence"],
            [(s["index"], f"{s['score']:.4f}", f"{s['global_score']:.4f}", f"{s['recovery']:.3f}",
              _short(s["sequence"]))
             for s in summary["samples"]],
        )  # fmt: skip
    return summary


def _group_token_log_probs(lp_NxLx21, seqs_NxL, tied) -> np.ndarray:
    """``(N, L)`` log-probability of each token under its tied group's distribution,
    ``log_softmax`` of the members' mean log-probabilities (untied slots: their own)."""
    lp = np.asarray(lp_NxLx21, np.float64).copy()
    for g in tied:
        m = lp[:, g].mean(1)
        m -= m.max(-1, keepdims=True)
        lp[:, g] = (m - np.log(np.exp(m).sum(-1, keepdims=True)))[:, None]
    return np.take_along_axis(lp, np.asarray(seqs_NxL)[..., None], -1)[..., 0]


def _pssm_entry(pssm, source: str) -> Mapping | None:
    """The structure's record of a ``--pssm-jsonl`` file (by name = file stem), or ``pssm``
    itself when it is already a record (``{chain: {...}}``)."""
    if pssm is None or isinstance(pssm, Mapping):
        return pssm
    table = read_pssm_jsonl(pssm)
    name = structure_stem(source)
    for key in (source, name):
        if key in table:
            return table[key]
    raise DataError(
        f"{pssm}: no PSSM for structure {name!r} (names in the file: {sorted(table)[:10]})"
    )


def _mean_nll(tok_lp: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """``(N,)`` mean ``-tok_lp`` over ``mask`` (the original's ``_scores``)."""
    return -(tok_lp * mask).sum(-1) / max(float(mask.sum()), 1.0)


def write_sample_files(
    out: str | os.PathLike, summary: dict, seqs_dir: str | os.PathLike | None = None
) -> None:
    """Writes ``out/samples.fasta`` and ``out/summary.json`` (atomically) for one sample summary.

    Adds their paths to ``summary["files"]`` (also for :mod:`.batch`, one folder per backbone).
    With ``seqs_dir``, then also the FASTA as ``seqs_dir/<structure file stem>.fa`` (the
    original's ``seqs/`` layout), its path added to ``summary["files"]["seqs"]`` after
    ``summary.json`` was written.
    """
    out = pathlib.Path(out)
    fasta, js = out / "samples.fasta", out / "summary.json"
    summary["files"] = {**summary.get("files", {}), "fasta": str(fasta), "summary": str(js)}
    atomic_write_text(fasta, _sample_fasta(summary))
    atomic_write_text(js, json_text(summary, indent=2) + "\n")
    if seqs_dir is not None:
        fa = pathlib.Path(seqs_dir) / f"{structure_stem(summary['inputs']['pdb'])}.fa"
        atomic_write_text(fa, _sample_fasta(summary))
        summary["files"]["seqs"] = str(fa)


def parse_temperatures(temperature) -> list[float]:
    """``0.1`` / ``"0.1,0.2"`` / ``"0.1 0.2"`` / ``[0.1, 0.2]`` -> ``[0.1, 0.2]``; each ``> 0``.

    Raises:
      ConfigError: an entry that is not a positive number, or none at all.
    """
    if isinstance(temperature, str):
        parts = temperature.replace(",", " ").split()
    elif isinstance(temperature, (int, float, np.floating, np.integer)):
        parts = [temperature]
    else:
        parts = list(temperature)
    temps = []
    for x in parts:
        try:
            value = float(x)
        except (TypeError, ValueError):
            raise ConfigError(f"--temperature: {x!r} is not a number") from None
        check_positive("--temperature", value)
        temps.append(value)
    if not temps:
        raise ConfigError("--temperature: no temperature given")
    return temps


def _sample_summary(setup, seqs, tok_lp, nat_lp, num_samples, temps, checkpoint, variant, seed):
    p = setup.protein
    d = setup.designed
    nd = int(d.sum())
    present = p.mask > 0
    scores = _mean_nll(tok_lp, d)
    global_scores = _mean_nll(tok_lp, present)
    recovery = ((seqs == p.S[None]) & d).sum(-1) / nd
    source = pathlib.Path(p.source)
    samples = [
        {
            "index": i + 1,
            "sequence": setup.chain_strings(seqs[i]),
            "score": float(scores[i]),
            "global_score": float(global_scores[i]),
            "recovery": float(recovery[i]),
            "temperature": temps[i // int(num_samples)],
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
            "temperature": temps[0] if len(temps) == 1 else temps,
            "checkpoint": checkpoint,
            "variant": variant,
            "seed": int(seed),
            "decoding_order": DECODING_ORDER,
        },
        "native": setup.chain_strings(p.S),
        "native_score": float(_mean_nll(nat_lp, d).mean()),
        "native_global_score": float(_mean_nll(nat_lp, present).mean()),
        "samples": samples,
        "mean_score": float(np.mean(scores)),
        "mean_recovery": float(np.mean(recovery)),
    }


def _sample_fasta(summary: dict) -> str:
    """The original ``protein_mpnn_run.py`` FASTA (same header fields, ``", "``-separated)."""
    inp = summary["inputs"]
    visible = [c for c in inp["chains"] if c not in inp["design_chains"]]
    lines = [
        f">{pathlib.Path(inp['pdb']).name.split('.')[0]}, score={summary['native_score']:.4f}, "
        f"global_score={summary['native_global_score']:.4f}, fixed_chains={visible}, "
        f"designed_chains={list(inp['design_chains'])}, model_name={inp['checkpoint']}, "
        f"seed={inp['seed']}, variant={inp['variant']}, fixed_positions={inp['fixed'] or '-'}",
        summary["native"],
    ]
    for s in summary["samples"]:
        lines.append(
            f">T={s['temperature']:g}, sample={s['index']}, score={s['score']:.4f}, "
            f"global_score={s['global_score']:.4f}, seq_recovery={s['recovery']:.4f}"
        )
        lines.append(s["sequence"])
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------- score
def tokens_from_sequence(setup: DesignSetup, header: str, seq: str, path) -> np.ndarray:
    """Native tokens with the designed chains replaced by ``seq``.

    ``seq`` holds the designed chains (or all loaded chains) in order; with ``/`` separators each
    piece is checked against its chain's length in the structure, and a mismatch names the chain.
    """
    p = setup.protein
    letters = seq.replace("/", "").replace("-", "X").upper()
    bad = sorted(set(letters) - set(ALPHABET))
    if bad:
        raise DataError(f"{path}: record {header!r} has letters outside {ALPHABET!r}: {bad}")
    if "/" in seq:
        pieces = seq.split("/")
        cid = np.asarray(p.chain_id)
        for names in (tuple(setup.design_chains), tuple(p.chain_order)):
            if len(pieces) == len(names):
                break
        else:
            raise DataError(
                f"{path}: record {header!r} has {len(pieces)} '/'-separated chains; expected "
                f"{len(setup.design_chains)} (design chains {list(setup.design_chains)}) or "
                f"{len(p.chain_order)} (all chains {list(p.chain_order)})"
            )
        for c, piece in zip(names, pieces, strict=True):
            if len(piece) != int((cid == c).sum()):
                raise DataError(
                    f"{path}: record {header!r}: chain {c} has {len(piece)} residues in the "
                    f"FASTA but {int((cid == c).sum())} in the structure"
                )
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


#: How ``score`` (and the Python API's ``Designer.score``) orders the decoding: what the FASTA
#: headers of ``sample`` do not say, ``summary.json`` / ``scores.json`` do.
DECODING_ORDER = (
    "random, fixed and visible positions first (the original's argsort((designed + 1e-4) * "
    "|randn|)); score: num_orders orders from the seed, shared by every sequence; sample: each "
    "sample's own order, so a sample's score differs from score's for the same sequence"
)


def score_orders(setup: DesignSetup, num_orders: int = 1, seed: int = 0) -> list[np.ndarray]:
    """The ``(L,)`` decoding orders ``score`` uses for ``seed``: ``num_orders`` random orders
    with the fixed and visible positions first (:data:`DECODING_ORDER`)."""
    import jax

    from fidia_jax.models import random_decoding_order

    design = setup.designed.astype(np.float32)
    keys = jax.random.split(jax.random.key(seed), int(num_orders))
    return [np.asarray(random_decoding_order(k, design)) for k in keys]


def score_tokens(
    model, setup: DesignSetup, toks_NxL: np.ndarray, *, num_orders: int = 1, seed: int = 0,
    tied=None, bucket: int | None = None,
) -> np.ndarray:  # fmt: skip
    """Mean NLL (nats) over the designed positions of ``(N, L)`` token rows on ``setup``,
    averaged over ``num_orders`` decoding orders drawn from ``seed`` (each shared by every row;
    fixed and visible positions decoded first). The scorer of :func:`run_score` and of
    ``Designer.score``; returns ``(N,)`` float64."""
    import jax

    from fidia_jax.models import MPNNInputs, score

    if bucket is not None:  # one compilation per padded length
        _, score = bucketed(bucket)
    inputs = MPNNInputs.from_protein(setup.protein, setup.design_chains)
    design = setup.designed.astype(np.float32)
    nll = np.zeros(toks_NxL.shape[0])
    for order_L in score_orders(setup, num_orders, seed):
        # one order shared by every record (drawing an (N, L) order gave each record its
        # own order, so identical records scored differently)
        order = np.broadcast_to(order_L, toks_NxL.shape)
        res = score(model, inputs, toks_NxL, order, **({"tied": tied} if tied else {}))
        tok = np.asarray(jax.device_get(res.token_log_probs))
        nll += -(tok * design).sum(-1) / design.sum()
    return nll / int(num_orders)


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
    tie: str | Sequence[str] | None = None,
    homo_oligomer: bool = False,
    bucket: int | None = None,
) -> dict[str, Any]:
    """Scores the sequences of a FASTA file on a structure (teacher-forced ProteinMPNN NLL).

    Each record holds the designed chains (joined by ``/`` or not) or the whole concatenation;
    with ``/`` each chain's length is checked against the structure. ``score`` = mean NLL over
    the designed positions, averaged over ``num_orders`` random decoding orders drawn from
    ``seed``; every record is scored under the SAME orders (order ``k`` is one ``(L,)``
    permutation shared by all records), so equal records get equal scores whatever their place
    in the file. ``recovery`` as in :func:`run_sample`. With ``tie`` / ``homo_oligomer`` (as in
    :func:`run_sample`) each order is scored by ``fidia_jax.models.score(..., tied=)``: tied slots
    get the log-probability of their group's shared draw. ``bucket`` pads the structure to a
    multiple of ``bucket`` slots (as :func:`run_sample`; untied scoring only, and the scores do
    not change: padded slots come first in every order and are nobody's neighbour).

    Returns:
      The summary dict (written to ``out/scores.json`` when ``out`` is given).

    Raises:
      FidiaError subclasses for bad inputs.
    """
    check_positive("--num-orders", num_orders, integer=True)
    t0 = time.perf_counter()
    with Reporter(quiet) as rep:
        with rep.stage("loading structure and sequences"):
            setup = prepare_structure(pdb, chains, design_chains, fixed, variant)
            records = read_fasta(fasta)
            toks = np.stack([tokens_from_sequence(setup, h, s, fasta) for h, s in records])
            tied = tied_groups(tie, homo_oligomer, setup.protein)
        if model is None:
            with rep.stage(f"loading ProteinMPNN {variant}/{checkpoint}"):
                model = load_model(checkpoint, variant)
        with rep.stage(f"scoring {len(records)} sequences x {num_orders} decoding orders"):
            nll = score_tokens(model, setup, toks, num_orders=num_orders, seed=seed, tied=tied,
                               bucket=bucket)  # fmt: skip
        recovery = ((toks == setup.protein.S[None]) & setup.designed).sum(-1) / setup.designed.sum()
        summary = {
            "command": "score",
            "inputs": {
                "pdb": setup.protein.source, "fasta": str(fasta),
                "chains": list(setup.protein.chain_order), "design_chains": list(setup.design_chains),
                "fixed": setup.fixed_spec, "num_designed": int(setup.designed.sum()),
                "num_orders": int(num_orders), "checkpoint": checkpoint, "variant": variant,
                "seed": int(seed), "tied_groups": len(tied or []),
                "decoding_order": DECODING_ORDER,
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
