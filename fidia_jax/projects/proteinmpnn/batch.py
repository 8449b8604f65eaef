"""``fidia-jax proteinmpnn sample --pdb-dir DIR | --pdb-list FILE``: many backbones per run.

Each backbone is sampled by :func:`.design.run_sample` (same options, same files) in its own
folder ``out/<name>/``; the model is loaded once, and lengths are padded into buckets (multiples
of ``bucket``) so the jitted sampler and scorer compile once per bucket, not once per length.

Padding and buckets: :mod:`.buckets` (padded slots never change a real position's result).

Several processes (a launcher's environment, :func:`fidia_jax.parallel.initialize_distributed`;
``docs/distributed.md``): process ``p`` of ``n`` samples the backbones ``p, p + n, ...`` on its
own device, the summaries are gathered on process 0 in input order
(:func:`fidia_jax.parallel.gather_in_order`), and process 0 alone writes every file -- the same files as
one process (only the timings differ); the others print one status line.
"""

from __future__ import annotations

import os
import pathlib
import sys
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from fidia_jax import parallel
from fidia_jax._io import Reporter, atomic_write_text, json_text
from fidia_jax.errors import ConfigError, DataError, FidiaError
from fidia_jax.projects.proteinmpnn.buckets import bucket_length, run_by_bucket
from fidia_jax.projects.proteinmpnn.design import run_sample, write_sample_files

__all__ = ["find_structures", "run_sample_jsonl", "run_sample_many", "run_score_only"]

#: File name endings read by ``--pdb-dir``.
STRUCTURE_SUFFIXES = (".pdb", ".ent", ".cif", ".mmcif", ".bcif")


def _structure_name(path: pathlib.Path) -> str:
    name = path.name
    if name.endswith(".gz"):
        name = name[:-3]
    for s in STRUCTURE_SUFFIXES:
        if name.lower().endswith(s):
            return name[: -len(s)]
    return name


def find_structures(
    pdb_dir: str | os.PathLike | None = None, pdb_list: str | os.PathLike | None = None
) -> list[pathlib.Path]:
    """Structure files of a run: ``pdb_dir``'s files ending in ``.pdb .ent .cif .mmcif .bcif``
    (optionally ``.gz``), sorted by name, then the paths listed in ``pdb_list`` (one a line,
    relative to the list's folder; blank lines and ``#`` comments skipped).

    Raises:
      ConfigError: neither given, or nothing found.
      DataError: ``pdb_dir`` is not a directory or ``pdb_list`` cannot be read.
    """
    if pdb_dir is None and pdb_list is None:
        raise ConfigError("give --pdb-dir or --pdb-list")
    paths: list[pathlib.Path] = []
    if pdb_dir is not None:
        d = pathlib.Path(pdb_dir)
        if not d.is_dir():
            raise DataError(f"--pdb-dir {d}: not a directory")
        paths += sorted(
            p for p in d.iterdir()
            if p.is_file() and any(p.name.lower().removesuffix(".gz").endswith(s) for s in STRUCTURE_SUFFIXES)
        )  # fmt: skip
    if pdb_list is not None:
        f = pathlib.Path(pdb_list)
        try:
            lines = f.read_text().splitlines()
        except OSError as e:
            raise DataError(f"--pdb-list {f}: cannot read ({e.strerror or e})") from e
        for line in lines:
            line = line.strip()
            if line and not line.startswith("#"):
                p = pathlib.Path(line)
                paths.append(p if p.is_absolute() else f.parent / p)
    if not paths:
        raise ConfigError(f"no structure files found (--pdb-dir {pdb_dir}, --pdb-list {pdb_list})")
    return paths


_TSV_COLUMNS = ("name", "status", "length", "bucket", "num_designed", "mean_score",
                "mean_recovery", "folder", "path", "error")  # fmt: skip


def run_sample_many(
    out: str | os.PathLike,
    *,
    pdb_dir: str | os.PathLike | None = None,
    pdb_list: str | os.PathLike | None = None,
    bucket: int = 64,
    checkpoint: str = "v_48_020",
    variant: str = "vanilla",
    model=None,
    quiet: bool = False,
    workers: int | None = None,
    **options: Any,
) -> dict[str, Any]:
    """Samples every backbone of ``pdb_dir`` / ``pdb_list`` with :func:`.design.run_sample`.

    Writes ``out/<name>/samples.fasta`` + ``out/<name>/summary.json`` per backbone (``name`` =
    file name without ``.gz`` and structure suffix; a repeated name gets ``_2``, ``_3`` ...) and
    ``out/summary.tsv`` + ``out/summary.json`` with one row per file (``status`` ``ok`` or
    ``error`` with the one-line error; a failed file writes no folder and does not stop the
    others). Every backbone uses the same ``seed``.

    Args:
      out: output directory.
      pdb_dir, pdb_list: see :func:`find_structures`.
      bucket: lengths are padded to multiples of ``bucket`` (see :func:`bucket_length`; ``1`` =
        no padding).
      checkpoint, variant, model: the model, loaded once.
      quiet: no progress or table output.
      workers: threads running backbones at once (default ``min(2, CPUs)``; ``1`` = one after
        the other): the first backbone of each bucket runs first, so that new buckets compile
        while others sample (:func:`.buckets.run_by_bucket`). The results do not depend on it.
      **options: passed to :func:`.design.run_sample` (``chains``, ``design_chains``, ``fixed``,
        ``num_samples``, ``temperature``, ``seed``, ...).

    Returns:
      The top-level summary dict: ``backbones`` (the rows), ``num_ok``, ``num_failed``,
      ``buckets`` (padded length -> number of backbones), ``timing_s``, ``files``.

    Raises:
      ConfigError / DataError: no structures, bad ``bucket``, unreadable list; a model that
        cannot load. Errors of single backbones are recorded, not raised.
    """
    _check_bucket(bucket)
    paths = find_structures(pdb_dir, pdb_list)
    jobs = [(_structure_name(p), str(p), lambda p=p: {"pdb": p}) for p in paths]
    inputs = {"pdb_dir": None if pdb_dir is None else str(pdb_dir),
              "pdb_list": None if pdb_list is None else str(pdb_list)}  # fmt: skip
    return _sample_jobs(
        out, jobs, inputs, bucket, checkpoint, variant, model, quiet, options, workers
    )


def _chains_of(p, assignments: dict, chain_id_jsonl) -> tuple[Sequence[str], Sequence[str]]:
    """``(designed, visible)`` chains of structure ``p``: from the chain-id JSONL when one is
    given (a structure it does not name is a ``DataError``), else every chain designed."""
    if not chain_id_jsonl:
        return p.chain_order, ()
    if p.source not in assignments:
        raise DataError(f"{chain_id_jsonl}: no chain assignment for {p.source!r}")
    return assignments[p.source]


def run_sample_jsonl(
    out: str | os.PathLike,
    jsonl_path: str | os.PathLike,
    *,
    chain_id_jsonl: str | os.PathLike | None = None,
    fixed_positions_jsonl: str | os.PathLike | None = None,
    tied_positions_jsonl: str | os.PathLike | None = None,
    bias_aa_jsonl: str | os.PathLike | None = None,
    bias_by_res_jsonl: str | os.PathLike | None = None,
    omit_aa_jsonl: str | os.PathLike | None = None,
    pssm_jsonl: str | os.PathLike | None = None,
    bucket: int = 64,
    checkpoint: str = "v_48_020",
    variant: str = "vanilla",
    model=None,
    quiet: bool = False,
    workers: int | None = None,
    **options: Any,
) -> dict[str, Any]:
    """Samples the structures of the original ProteinMPNN's pipeline files, as
    ``protein_mpnn_run.py --jsonl_path ... --chain_id_jsonl ...`` does.

    Reads ``jsonl_path`` (``parse_multiple_chains.py`` output) and the optional helper-script
    files (formats in :mod:`fidia_jax.protein._mpnn_jsonl`: chain assignments, fixed, tied,
    per-residue bias and omission, global bias). As the original: the designed chains (sorted)
    come first, then the fixed (visible) chains (sorted); chains in neither list are left out;
    without ``chain_id_jsonl`` every chain is designed. Fixed positions, omissions, biases and
    ties are resolved on the whole record and carried to the selected chains. Output as
    :func:`run_sample_many` (one folder per record ``name``, ``summary.tsv``/``summary.json``);
    a record whose options fail (an unknown chain, a position out of range) gets its one-line
    error and does not stop the others.

    Args:
      out: output directory.
      jsonl_path: the parsed-chains JSONL file.
      chain_id_jsonl, fixed_positions_jsonl, tied_positions_jsonl, bias_aa_jsonl,
        bias_by_res_jsonl, omit_aa_jsonl: the helper scripts' files (``None`` = not used). The
        global bias adds to ``options["bias_aa"]``'s letters (the file wins on a letter given in
        both); the per-residue omission adds to the global ``omit_aas``.
      pssm_jsonl: the original's ``--pssm_jsonl`` (``make_pssm_input_dict.py``), keyed by record
        name; used with ``options["pssm_bias_flag"]`` / ``["pssm_log_odds_flag"]`` (see
        :func:`.design.run_sample`). A record absent from it samples without a PSSM when both
        switches are off and fails (its row names the problem) when one is on.
      bucket, checkpoint, variant, model, quiet, workers: as :func:`run_sample_many`.
      **options: passed to :func:`.design.run_sample` (``num_samples``, ``temperature``,
        ``omit_aas``, ``seed``, ``save_probs`` ...); ``pdb``, ``chains``, ``design_chains``,
        ``fixed``, ``tie``, ``bias_by_res``, ``omit_by_res`` come from the files.

    Raises:
      DataError / ConfigError: the CA-only model (``variant="ca"``: not supported with pipeline
        files), an unreadable or malformed file (line named), a structure named
        in an option file but absent from ``jsonl_path``, a chain-assignment entry missing for a
        structure, an option also given on the command line. Errors of single structures are
        recorded, not raised.
    """
    from fidia_jax import protein as P

    _check_bucket(bucket)
    if variant == "ca":
        raise ConfigError("--jsonl-path with the CA-only model (--ca-only) is not supported: "
                          "give CA-only structures with --pdb / --pdb-dir")  # fmt: skip
    from_files = {"pdb", "chains", "design_chains", "fixed", "tie", "homo_oligomer", "bias_by_res",
                  "omit_by_res"}  # fmt: skip
    clash = sorted(from_files & {k for k, v in options.items() if v})
    if clash:
        raise ConfigError(
            f"--jsonl-path takes these from the pipeline files, not the command line: {clash}"
        )
    options = {k: v for k, v in options.items() if k not in from_files}
    records = P.read_parsed_chains_jsonl(jsonl_path)
    if not records:
        raise DataError(f"{jsonl_path}: no structures")
    proteins = {p.source: p for p in records}
    assignments = P.read_chain_assignments(chain_id_jsonl) if chain_id_jsonl else {}
    fixed = P.read_fixed_positions(fixed_positions_jsonl, proteins) if fixed_positions_jsonl else {}
    tied = P.read_tied_positions(tied_positions_jsonl, proteins) if tied_positions_jsonl else {}
    bias = P.read_bias_by_res(bias_by_res_jsonl, proteins) if bias_by_res_jsonl else {}
    omit = P.read_omit_aa_by_res(omit_aa_jsonl, proteins) if omit_aa_jsonl else {}
    if pssm_jsonl:
        from fidia_jax.projects.proteinmpnn.constraints import read_pssm_jsonl

        pssm = read_pssm_jsonl(pssm_jsonl)
        options.pop("pssm", None)
    if bias_aa_jsonl:
        from fidia_jax.projects.proteinmpnn.constraints import parse_bias_aa

        given = dict(zip(P.ALPHABET, parse_bias_aa(options.get("bias_aa")).tolist(), strict=True))
        options["bias_aa"] = {
            **{a: b for a, b in given.items() if b},
            **P.read_bias_aa(bias_aa_jsonl),
        }

    def job(p):
        designed, visible = _chains_of(p, assignments, chain_id_jsonl)
        order = sorted(designed) + sorted(visible)
        sel, slots = P.select_chains(p, order)
        where = np.full(p.length, -1)
        where[slots] = np.arange(slots.size)
        kw: dict[str, Any] = {"pdb": sel, "design_chains": sorted(designed)}
        if p.source in fixed:
            kw["fixed"] = fixed[p.source][slots]
        if p.source in bias:
            kw["bias_by_res"] = bias[p.source][slots]
        if p.source in omit:
            kw["omit_by_res"] = omit[p.source][slots]
        if pssm_jsonl:
            if p.source not in pssm and (
                options.get("pssm_bias_flag") or options.get("pssm_log_odds_flag")
            ):
                raise DataError(f"{pssm_jsonl}: no PSSM for {p.source!r}")
            kw["pssm"] = pssm.get(p.source)
        if tied.get(p.source):
            groups = [[int(where[i]) for i in g] for g in tied[p.source]]
            left_out = sorted(
                {f"{p.chain_id[i]}" for g in tied[p.source] for i in g if where[i] < 0}
            )
            if left_out:
                raise DataError(
                    f"{tied_positions_jsonl}: {p.source} ties chains {left_out}, which are not loaded"
                )
            kw["tie"] = groups
        return kw

    jobs = [(p.source, f"{jsonl_path}:{p.source}", lambda p=p: job(p)) for p in records]
    inputs = {"jsonl_path": str(jsonl_path), **{k: None if v is None else str(v) for k, v in {
        "chain_id_jsonl": chain_id_jsonl, "fixed_positions_jsonl": fixed_positions_jsonl,
        "tied_positions_jsonl": tied_positions_jsonl, "bias_aa_jsonl": bias_aa_jsonl,
        "bias_by_res_jsonl": bias_by_res_jsonl, "omit_aa_jsonl": omit_aa_jsonl,
        "pssm_jsonl": pssm_jsonl}.items()}}  # fmt: skip
    return _sample_jobs(
        out, jobs, inputs, bucket, checkpoint, variant, model, quiet, options, workers
    )


def _jsonl_score_jobs(jsonl_path, chain_id_jsonl, fixed_positions_jsonl):
    """``(name, label, job)`` per record of a parsed-chains JSONL; ``job()`` gives the
    ``prepare_structure`` arguments (chains selected and ordered as the original)."""
    from fidia_jax import protein as P

    records = P.read_parsed_chains_jsonl(jsonl_path)
    if not records:
        raise DataError(f"{jsonl_path}: no structures")
    proteins = {p.source: p for p in records}
    assignments = P.read_chain_assignments(chain_id_jsonl) if chain_id_jsonl else {}
    fixed = P.read_fixed_positions(fixed_positions_jsonl, proteins) if fixed_positions_jsonl else {}

    def job(p):
        designed, visible = _chains_of(p, assignments, chain_id_jsonl)
        sel, slots = P.select_chains(p, sorted(designed) + sorted(visible))
        fix = fixed[p.source][slots] if p.source in fixed else None
        return sel, None, sorted(designed), fix

    return [(p.source, f"{jsonl_path}:{p.source}", lambda p=p: job(p)) for p in records]


def _check_bucket(bucket) -> None:
    if not (isinstance(bucket, int) and bucket >= 1):
        raise ConfigError(f"--bucket must be a positive integer, got {bucket!r}")


def _prepare_job(kwargs_fn, options, variant, bucket, k_neighbors):
    """``(kwargs, bucket key, error)`` of one job: its :func:`run_sample` structure arguments
    with the structure loaded once (``pdb`` becomes the loaded ``Protein``), and its padded
    length (``None`` when it cannot load: :func:`run_sample` then raises the error in its row)."""
    from fidia_jax.projects.proteinmpnn.design import prepare_structure

    try:
        kwargs = kwargs_fn()
    except (FidiaError, OSError, ValueError) as e:
        return {}, None, e
    merged = {**options, **kwargs}
    try:
        setup = prepare_structure(
            merged.get("pdb"), merged.get("chains"), merged.get("design_chains"),
            merged.get("fixed"), variant,
        )  # fmt: skip
    except (FidiaError, OSError, ValueError):
        return kwargs, None, None
    if variant != "ca" and "pdb" in kwargs:
        kwargs = {**kwargs, "pdb": setup.protein}
    return kwargs, bucket_length(setup.protein.length, bucket, k_neighbors), None


def _sample_jobs(
    out, jobs, inputs, bucket, checkpoint, variant, model, quiet, options, workers=None
) -> dict[str, Any]:
    """The loop of :func:`run_sample_many` / :func:`run_sample_jsonl`: ``jobs`` are ``(name,
    label, kwargs_fn)``; ``kwargs_fn()`` gives the structure arguments of :func:`run_sample`
    (its errors, like those of the run, are recorded in that job's row). The jobs run on
    ``workers`` threads (:func:`.buckets.run_by_bucket`; default ``min(2, CPUs)``), the first
    backbone of every bucket first, so that one thread compiles while another samples."""
    if workers is None:
        workers = min(2, os.cpu_count() or 1)
    if not (isinstance(workers, int) and workers >= 1):
        raise ConfigError(f"--workers must be a positive integer, got {workers!r}")

    parallel.initialize_distributed()  # no-op without a launcher (or when already joined)
    import jax

    count, index = jax.process_count(), jax.process_index()
    if count > 1:
        extra = [k for k in ("save_probs", "probs_dir", "probs_only") if options.get(k)]
        if extra:
            raise ConfigError(
                f"{', '.join(extra)}: not supported with several processes (the arrays are "
                "not gathered); run it as one process"
            )
    primary = parallel.is_primary()
    out = pathlib.Path(out)
    t0 = time.perf_counter()
    seen: dict[str, int] = {}
    with Reporter(quiet or not primary) as rep:
        if model is None:
            with rep.stage(f"loading ProteinMPNN {variant}/{checkpoint}"):
                from fidia_jax.projects.proteinmpnn.design import load_model

                model = load_model(checkpoint, variant)
        names = []
        for name, _, _ in jobs:
            seen[name] = seen.get(name, 0) + 1
            names.append(name if seen[name] == 1 else f"{name}_{seen[name]}")
        prepared = [
            _prepare_job(fn, options, variant, bucket, model.k_neighbors) for _, _, fn in jobs
        ]

        mine = list(range(index, len(jobs), count))  # this process's backbones
        sampled: dict[int, dict] = {}  # with several processes: summaries for process 0

        def run_one(i):
            (_, label, _), name, (kwargs, _, error) = jobs[i], names[i], prepared[i]
            row: dict[str, Any] = dict.fromkeys(_TSV_COLUMNS)
            row.update(name=name, path=label)
            with rep.stage(f"[{i + 1}/{len(jobs)}] {name}"):
                try:
                    if error is not None:
                        raise error
                    s = run_sample(
                        out / name, checkpoint=checkpoint, variant=variant, model=model,
                        quiet=True, bucket=bucket, write=count == 1, **kwargs, **options,
                    )  # fmt: skip
                    if count > 1:
                        sampled[i] = s
                except (FidiaError, OSError, ValueError) as e:
                    row.update(status="error", error=" ".join(f"{type(e).__name__}: {e}".split()))
                else:
                    length = int(s["inputs"]["length"])
                    row.update(
                        status="ok", length=length,
                        bucket=bucket_length(length, bucket, model.k_neighbors),
                        num_designed=s["inputs"]["num_designed"], mean_score=s["mean_score"],
                        mean_recovery=s["mean_recovery"], folder=str(out / name),
                    )  # fmt: skip
            return row

        local = run_by_bucket(lambda j: run_one(mine[j]), [prepared[i][1] for i in mine], workers)
        if count == 1:
            rows = local
        else:
            both = parallel.gather_in_order(
                [(r, sampled.get(i)) for r, i in zip(local, mine, strict=True)], len(jobs)
            )
            rows = [r for r, _ in both]
            if primary:  # the files of every backbone, as run_sample writes them
                for (_, smp), name in zip(both, names, strict=True):
                    if smp is not None:
                        write_sample_files(out / name, smp, options.get("seqs_dir"))
            else:
                print(f"proteinmpnn sample: process {index}/{count} done ({len(mine)} of "
                      f"{len(jobs)} backbones)", file=sys.stderr, flush=True)  # fmt: skip
        ok = [r for r in rows if r["status"] == "ok"]
        buckets: dict[str, int] = {}
        for r in ok:
            buckets[str(r["bucket"])] = buckets.get(str(r["bucket"]), 0) + 1
        tsv, js = out / "summary.tsv", out / "summary.json"
        summary = {
            "command": "sample",
            "inputs": {**inputs, "bucket": int(bucket), "checkpoint": checkpoint, "variant": variant,
                       **{k: v for k, v in options.items() if isinstance(v, (str, int, float, type(None)))}},
            "backbones": rows,
            "num_ok": len(ok),
            "num_failed": len(rows) - len(ok),
            "buckets": buckets,
            "timing_s": {"total": round(time.perf_counter() - t0, 3)},
            "files": {"tsv": str(tsv), "summary": str(js)},
        }  # fmt: skip
        if primary:
            atomic_write_text(tsv, _tsv(rows))
            atomic_write_text(js, json_text(summary, indent=2) + "\n")
        rep.table(
            f"{len(ok)} of {len(rows)} backbones sampled ({out})",
            ["name", "status", "length", "score (NLL)", "recovery / error"],
            [(r["name"], r["status"], r["length"] or "",
              "" if r["mean_score"] is None else f"{r['mean_score']:.4f}",
              r["error"] if r["error"] else f"{r['mean_recovery']:.3f}") for r in rows],
        )  # fmt: skip
    return summary


def _tsv(rows: Sequence[dict]) -> str:
    def cell(v):
        if v is None:
            return ""
        if isinstance(v, float):
            return f"{v:.6g}"
        return str(v).replace("\t", " ").replace("\n", " ")

    lines = ["\t".join(_TSV_COLUMNS)]
    lines += ["\t".join(cell(r[c]) for c in _TSV_COLUMNS) for r in rows]
    return "\n".join(lines) + "\n"


def run_score_only(
    out: str | os.PathLike,
    *,
    pdb_dir: str | os.PathLike | None = None,
    pdb_list: str | os.PathLike | None = None,
    pdbs: Sequence[str | os.PathLike] = (),
    chains: str | Sequence[str] | None = None,
    design_chains: str | Sequence[str] | None = None,
    num_orders: int = 1,
    checkpoint: str = "v_48_020",
    variant: str = "vanilla",
    seed: int = 0,
    bucket: int = 64,
    model=None,
    quiet: bool = False,
    jsonl_path: str | os.PathLike | None = None,
    chain_id_jsonl: str | os.PathLike | None = None,
    fixed_positions_jsonl: str | os.PathLike | None = None,
) -> dict[str, Any]:
    """Scores the native sequence of every structure of a folder (the original's ``--score_only``).

    The structures: ``pdb_dir`` / ``pdb_list`` (see :func:`find_structures`), then ``pdbs``, then
    the records of ``jsonl_path`` (``parse_multiple_chains.py``'s ``parsed_pdbs.jsonl``), each
    named by its ``name``: as ``protein_mpnn_run.py --jsonl_path ... --score_only 1``, the
    designed chains come from ``chain_id_jsonl`` (all chains without it; the designed chains
    sorted, then the visible ones) and ``fixed_positions_jsonl`` takes positions out of the
    designed ones (``score`` averages over the rest; ``global_score`` over every residue).
    Per structure ``<name>`` (file stem) writes ``out/score_only/<name>_pdb.npz`` with, per
    decoding order (``num_orders`` random orders drawn from ``seed``, the original's one per
    batch copy): ``score`` ``(num_orders,)`` float32, mean NLL (nats) over the designed
    positions (the original's ``score``); ``global_score`` ``(num_orders,)``, the same over every
    residue with a complete backbone; and ``per_residue`` ``(num_orders, L)``, each residue's NLL
    (NaN where the backbone is incomplete), with ``S`` (native tokens), ``mask`` and
    ``designed``. ``out/scores.json`` / ``scores.tsv`` list the structures (``name status length
    score global_score error``); a structure that fails gets its one-line error there and the
    others still run (the CLI then exits with code 2). Lengths are padded to ``bucket``.

    Raises:
      FidiaError subclasses for bad options (folder, list, checkpoint).
    """
    import jax

    from fidia_jax.models import MPNNInputs, random_decoding_order
    from fidia_jax.projects.proteinmpnn.buckets import bucketed
    from fidia_jax.projects.proteinmpnn.design import check_positive, load_model, prepare_structure

    check_positive("--num-orders", num_orders, integer=True)
    _check_bucket(bucket)
    paths = find_structures(pdb_dir, pdb_list) if (pdb_dir or pdb_list) else []
    paths += [pathlib.Path(x) for x in pdbs]
    jobs = [
        (_structure_name(x), str(x), lambda x=x: (x, chains, design_chains, None)) for x in paths
    ]
    if jsonl_path is not None:
        if variant == "ca":
            raise ConfigError("--jsonl-path with the CA-only model (--ca-only) is not supported")
        jobs += _jsonl_score_jobs(jsonl_path, chain_id_jsonl, fixed_positions_jsonl)
    elif chain_id_jsonl or fixed_positions_jsonl:
        raise ConfigError("--chain-id-jsonl / --fixed-positions-jsonl need --jsonl-path")
    if not jobs:
        raise ConfigError(
            "no structure to score: give --pdb, --pdb-dir, --pdb-list or --jsonl-path"
        )
    out = pathlib.Path(out)
    _, score = bucketed(bucket)
    rows: list[dict[str, Any]] = []
    with Reporter(quiet) as rep:
        if model is None:
            with rep.stage(f"loading ProteinMPNN {variant}/{checkpoint}"):
                model = load_model(checkpoint, variant)
        for i, (name, label, job) in enumerate(jobs, start=1):
            row: dict[str, Any] = {"name": name, "path": label}
            with rep.stage(f"[{i}/{len(jobs)}] {name}"):
                try:
                    setup = prepare_structure(*job(), variant)
                    p = setup.protein
                    inputs = MPNNInputs.from_protein(p, setup.design_chains)
                    design = setup.designed.astype(np.float32)
                    present = (p.mask > 0).astype(np.float32)
                    nll = []
                    for k in jax.random.split(jax.random.key(seed), int(num_orders)):
                        order = np.asarray(random_decoding_order(k, design))[None]
                        res = score(model, inputs, p.S[None].astype(np.int32), order)
                        nll.append(-np.asarray(jax.device_get(res.token_log_probs))[0])
                    nll = np.stack(nll)
                    sc = (nll * design).sum(-1) / design.sum()
                    gl = (nll * present).sum(-1) / present.sum()
                    npz = out / "score_only" / f"{name}_pdb.npz"
                    npz.parent.mkdir(parents=True, exist_ok=True)
                    tmp = npz.with_name(npz.name + ".tmp.npz")
                    np.savez(tmp, score=sc.astype(np.float32), global_score=gl.astype(np.float32),
                             per_residue=np.where(present > 0, nll, np.nan).astype(np.float32),
                             S=p.S.astype(np.int32), mask=p.mask.astype(np.float32),
                             designed=setup.designed.astype(bool),
                             seq_str=setup.chain_strings(p.S).replace("/", ""))  # fmt: skip
                    os.replace(tmp, npz)
                except (FidiaError, OSError, ValueError) as e:
                    row.update(status="error", error=" ".join(f"{type(e).__name__}: {e}".split()))
                else:
                    row.update(status="ok", length=int(p.length), score=float(sc.mean()),
                               global_score=float(gl.mean()), file=str(npz))  # fmt: skip
            rows.append(row)
        summary = {
            "command": "score_only",
            "inputs": {"pdb_dir": None if pdb_dir is None else str(pdb_dir),
                       "pdb_list": None if pdb_list is None else str(pdb_list),
                       "jsonl_path": None if jsonl_path is None else str(jsonl_path),
                       "num_orders": int(num_orders), "seed": int(seed), "bucket": int(bucket),
                       "checkpoint": checkpoint, "variant": variant},
            "structures": rows,
            "num_failed": sum(r["status"] != "ok" for r in rows),
        }  # fmt: skip
        cols = ["name", "status", "length", "score", "global_score", "error"]
        tsv = (
            "\t".join(cols)
            + "\n"
            + "".join(
                "\t".join("" if r.get(c) is None else str(r.get(c)) for c in cols) + "\n"
                for r in rows
            )
        )
        atomic_write_text(out / "scores.tsv", tsv)
        atomic_write_text(out / "scores.json", json_text(summary, indent=2) + "\n")
        summary["files"] = {"tsv": str(out / "scores.tsv"), "json": str(out / "scores.json")}
    return summary
