"""Design tasks for FIDIA: backbones with motif placements, kinds, partners and a protein-level split.

A :class:`DesignTask` is one backbone to design a sequence for (inverse folding on a fixed
scaffold), with a fixed motif whose identities must be kept. Loaders read three sources from a
data directory (argument, else ``$FIDIA_DATA_DIR``):

* ``"motifbench"``: MotifBench native reference chains with their motif placement
  (``protein/motifbench/example/reference_pdb_baseline/NN_XXXX/``);
* ``"rfdiffusion"``: the RFdiffusion benchmark natives (``protein/motif_problems/benchmark.csv``:
  contig -> motif positions on the native entry, in author numbering);
* ``"generic"``: 50 single-chain entries (``protein/mdanalysistests_dssp/``) with seeded random
  pseudo-motifs, for training.

The split is by protein (PDB entry, :attr:`DesignTask.group`): the same entry is never on both
sides. By default every benchmark entry (MotifBench / RFdiffusion) is held out, and a seeded
hash assigns a fraction of the generic entries to the held-out side too.

References:
  Watson et al., Nature 620:1089 (2023) (RFdiffusion benchmark); Zheng et al., MotifBench,
  arXiv:2502.12479 (2025).
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import zlib
from collections.abc import Iterable, Sequence
from typing import Literal

import numpy as np

from fidia_jax.errors import DataError
from fidia_jax.protein._motif import (
    _data_root,
    load_motif_info,
    load_rfdiffusion_benchmark,
    motif_segments,
    parse_motif_spec,
)
from fidia_jax.protein._structure import load_structure
from fidia_jax.protein._types import Protein

__all__ = [
    "ENZYME_PDB_IDS",
    "EPITOPE_PDB_IDS",
    "DesignTask",
    "assign_splits",
    "check_split",
    "load_generic_tasks",
    "load_motifbench_tasks",
    "load_rfdiffusion_tasks",
    "load_tasks",
    "restrict_to_chains",
    "task_from_structure",
]

TaskKind = Literal["motif", "epitope", "enzyme", "generic"]

#: Vaccine / epitope-scaffolding cases (function term: no N-glycosylation sequon, no Cys near
#: the epitope).
EPITOPE_PDB_IDS = frozenset({"3IXT", "4JHW", "4ZYP", "5TPN", "5WN9"})
#: Enzyme / binding cases (function term: pocket/interface likelihood with the partner visible).
ENZYME_PDB_IDS = frozenset({"5YUI", "1QJG", "1BCF", "1YCR", "5IUS"})

_PARTNER_RADIUS = 10.0  # Å, Cβ-Cβ distance for a chain to count as the motif's partner


@dataclasses.dataclass(frozen=True, eq=False)
class DesignTask:
    """One backbone to design, with its motif and function annotations.

    Attributes:
      name: unique task name (``"motifbench/04_5WN9"``, ``"rfdiffusion/1PRW"``,
        ``"generic/1ahsA"``).
      protein: the structure; holds the designed chains and, for binding cases, the partner
        chains (visible context, never designed).
      design_chains: chain IDs whose sequence is designed.
      design_mask: ``(L,)`` bool, slots of the designed chains that exist (``mask == 1``).
      motif_mask: ``(L,)`` bool, the structural motif (epitope / active site / pseudo-motif).
      fixed_mask: ``(L,)`` bool, motif slots whose amino-acid identity is fixed (motif minus the
        benchmark's redesignable positions).
      motif_tokens: ``(L,)`` int32, the required tokens at ``fixed_mask`` (native tokens).
      kind: ``"motif"``, ``"epitope"``, ``"enzyme"`` or ``"generic"``.
      partner_chains: chain IDs of binding partners present in ``protein`` (enzyme/binding).
      split: ``"train"`` or ``"heldout"`` ("" until :func:`assign_splits`).
      group: protein identifier for the split (upper-case PDB ID).
      source: ``"motifbench"``, ``"rfdiffusion"`` or ``"generic"``.
    """

    name: str
    protein: Protein
    design_chains: tuple[str, ...]
    design_mask: np.ndarray
    motif_mask: np.ndarray
    fixed_mask: np.ndarray
    motif_tokens: np.ndarray
    kind: TaskKind
    partner_chains: tuple[str, ...] = ()
    split: str = ""
    group: str = ""
    source: str = ""

    def __post_init__(self):
        L = self.protein.length
        for field in ("design_mask", "motif_mask", "fixed_mask", "motif_tokens"):
            arr = getattr(self, field)
            if np.shape(arr) != (L,):
                raise DataError(
                    f"task {self.name}: {field} must have shape ({L},), got {np.shape(arr)}"
                )
        if np.any(self.fixed_mask & ~self.motif_mask):
            raise DataError(f"task {self.name}: fixed_mask must lie inside motif_mask")
        if np.any(self.motif_mask & ~self.design_mask):
            raise DataError(f"task {self.name}: motif positions must lie on designed chains")

    @property
    def designable_mask(self) -> np.ndarray:
        """``(L,)`` bool, positions the policy chooses freely (designed, not fixed)."""
        return self.design_mask & ~self.fixed_mask

    @property
    def length(self) -> int:
        return self.protein.length

    def apo(self) -> DesignTask:
        """The same task without the partner chains (designed chains only)."""
        if not self.partner_chains:
            return self
        return restrict_to_chains(self, self.design_chains)


def _slice_protein(p: Protein, keep: np.ndarray, chains: tuple[str, ...]) -> Protein:
    idx = np.flatnonzero(keep)
    enc = {c: i + 1 for i, c in enumerate(chains)}
    chain_id = np.asarray(p.chain_id)[idx]
    new_enc = np.array([enc[c] for c in chain_id], np.int32)
    # Re-derive residue_idx = 100 * chain + running position (ProteinMPNN's convention).
    old_idx = np.asarray(p.residue_idx)[idx]
    old_chain = np.asarray(p.chain_encoding)[idx]
    residue_idx = old_idx - 100 * (old_chain - 1) + 100 * (new_enc - 1)
    return Protein(
        X=p.X[idx],
        mask=p.mask[idx],
        S=p.S[idx],
        residue_idx=residue_idx.astype(np.int32),
        chain_encoding=new_enc,
        chain_id=chain_id,
        resnum=np.asarray(p.resnum)[idx],
        icode=np.asarray(p.icode)[idx],
        chain_order=chains,
        source=p.source,
    )


def restrict_to_chains(task: DesignTask, chains: Sequence[str]) -> DesignTask:
    """The task restricted to ``chains`` (must include every designed chain), in that order."""
    chains = tuple(chains)
    missing = [c for c in task.design_chains if c not in chains]
    if missing:
        raise DataError(f"task {task.name}: cannot drop designed chain(s) {missing}")
    unknown = [c for c in chains if c not in task.protein.chain_order]
    if unknown:
        raise DataError(f"task {task.name}: chain(s) {unknown} not in {task.protein.chain_order}")
    order = tuple(c for c in task.protein.chain_order if c in chains)
    keep = np.isin(np.asarray(task.protein.chain_id), order)
    return dataclasses.replace(
        task,
        protein=_slice_protein(task.protein, keep, order),
        design_mask=task.design_mask[keep],
        motif_mask=task.motif_mask[keep],
        fixed_mask=task.fixed_mask[keep],
        motif_tokens=task.motif_tokens[keep],
        partner_chains=tuple(c for c in task.partner_chains if c in chains),
    )


def _kind(group: str, default: TaskKind = "motif") -> TaskKind:
    if group in EPITOPE_PDB_IDS:
        return "epitope"
    if group in ENZYME_PDB_IDS:
        return "enzyme"
    return default


def _make_task(
    name: str,
    protein: Protein,
    design_chains: tuple[str, ...],
    motif: np.ndarray,
    redesign: np.ndarray,
    kind: TaskKind,
    group: str,
    source: str,
    partner_chains: tuple[str, ...] = (),
) -> DesignTask:
    present = np.asarray(protein.mask) > 0
    design = np.isin(np.asarray(protein.chain_id), design_chains) & present
    motif = motif & present
    fixed = motif & ~redesign
    return DesignTask(
        name=name,
        protein=protein,
        design_chains=design_chains,
        design_mask=design,
        motif_mask=motif,
        fixed_mask=fixed,
        motif_tokens=np.asarray(protein.S, np.int32).copy(),
        kind=kind,
        partner_chains=partner_chains,
        group=group,
        source=source,
    )


def _cb(protein: Protein) -> np.ndarray:
    X = np.asarray(protein.X, np.float64)
    n, ca, c = X[:, 0], X[:, 1], X[:, 2]
    b, cc = ca - n, c - ca
    a = np.cross(b, cc)
    return -0.58273431 * a + 0.56802827 * b - 0.54067466 * cc + ca


def _contact_chains(
    protein: Protein, motif: np.ndarray, exclude: Iterable[str], radius: float
) -> tuple[str, ...]:
    cb = _cb(protein)
    present = np.asarray(protein.mask) > 0
    m = cb[motif & present]
    out = []
    for c in protein.chain_order:
        if c in exclude:
            continue
        sel = (np.asarray(protein.chain_id) == c) & present
        if not sel.any() or not m.size:
            continue
        d = np.sqrt(((cb[sel][:, None, :] - m[None, :, :]) ** 2).sum(-1))
        if d.min() < radius:
            out.append(c)
    return tuple(out)


# ----------------------------------------------------------------------------- loaders


def load_motifbench_tasks(data_dir: str | os.PathLike | None = None) -> list[DesignTask]:
    """MotifBench native reference chains (single chain ``A``) with their motif placements.

    Motif identities are fixed except the problem's redesignable positions. Epitope / enzyme
    cases are flagged by PDB ID; no partner chain is present in these files. Problems that only
    differ in the scaffold length to generate (``06_6E6R`` / ``07_6E6R``...) share one native
    task, kept once under the first name.

    Raises:
      DataError: missing files, or a reference chain whose length disagrees with its contig.
    """
    tasks, seen = [], set()
    for info in load_motif_info(data_dir):
        group = info.name.split("_", 1)[1].upper()
        # Problems that differ only in the target scaffold length are the same native task.
        key = (group, info.contig, info.redesign_positions)
        if key in seen:
            continue
        seen.add(key)
        protein = load_structure(info.pdb_path)
        motif = info.motif_mask()
        if motif.shape[0] != protein.length:
            raise DataError(
                f"{info.pdb_path}: {protein.length} residue slots but contig {info.contig!r} "
                f"implies {motif.shape[0]}"
            )
        tasks.append(
            _make_task(
                f"motifbench/{info.name}",
                protein,
                tuple(protein.chain_order),
                motif,
                info.redesign_mask(),
                _kind(group),
                group,
                "motifbench",
            )
        )
    return tasks


def load_rfdiffusion_tasks(
    data_dir: str | os.PathLike | None = None, *, partner_radius: float = _PARTNER_RADIUS
) -> list[DesignTask]:
    """RFdiffusion benchmark natives: the chain(s) holding the motif, motif positions from the
    contig (author numbering), redesignable positions from ``idcs_to_redesign``.

    Problems that only differ in scaffold length (``7MRX_60/85/128``...) give the same native
    task and are kept once. Enzyme/binding cases also load the partner chains whose Cβ lie within
    ``partner_radius`` Å of a motif Cβ (visible, not designed).

    Raises:
      DataError / StructureError / MotifSpecError: unreadable files or specs.
    """
    tasks, seen = [], set()
    for prob in load_rfdiffusion_benchmark(data_dir):
        segs = motif_segments(prob.contig, scaffold_lengths=True)
        design_chains = tuple(dict.fromkeys(s.chain for s in segs))
        group = prob.pdb_path.stem.split("_")[0].upper()
        key = (prob.pdb_path.name, tuple(str(s) for s in segs))
        if key in seen:
            continue
        seen.add(key)
        kind = _kind(group)
        full = load_structure(prob.pdb_path)
        partners: tuple[str, ...] = ()
        if kind == "enzyme":
            motif_full = parse_motif_spec(prob.contig, full, scaffold_lengths=True)
            partners = _contact_chains(full, motif_full, design_chains, partner_radius)
        protein = load_structure(prob.pdb_path, chains=list(design_chains + partners))
        motif = parse_motif_spec(prob.contig, protein, scaffold_lengths=True)
        redesign = (
            parse_motif_spec(prob.redesign, protein)
            if prob.redesign.strip()
            else np.zeros_like(motif)
        )
        name = prob.name if not prob.name.startswith(prob.pdb_path.stem) else prob.pdb_path.stem
        tasks.append(
            _make_task(
                f"rfdiffusion/{name}",
                protein,
                design_chains,
                motif,
                redesign & motif,
                kind,
                group,
                "rfdiffusion",
                partners,
            )
        )
    return tasks


def _seed_for(*parts: object) -> int:
    return zlib.crc32("|".join(str(p) for p in parts).encode())


def load_generic_tasks(
    data_dir: str | os.PathLike | None = None,
    *,
    seed: int = 0,
    num_segments: tuple[int, int] = (1, 2),
    segment_length: tuple[int, int] = (5, 12),
) -> list[DesignTask]:
    """The 50 generic chains with seeded random pseudo-motifs (for training).

    Each chain gets ``num_segments`` (inclusive range) non-overlapping contiguous segments of
    ``segment_length`` (inclusive range) present residues, drawn with a generator seeded by
    ``(seed, file name)`` (stable across runs and machines).

    Raises:
      DataError: directory missing or empty.
    """
    root = _data_root(data_dir)
    base = None
    for rel in ("protein/mdanalysistests_dssp", "mdanalysistests_dssp", "."):
        cand = root / rel
        if cand.is_dir() and any(cand.glob("*.pdb.gz")):
            base = cand
            break
    if base is None:
        raise DataError(f"{root}: no mdanalysistests_dssp/*.pdb.gz found")
    tasks = []
    for path in sorted(base.glob("*.pdb.gz")):
        stem = path.name[: -len(".pdb.gz")]
        protein = load_structure(path)
        rng = np.random.default_rng(_seed_for(seed, stem))
        present = np.asarray(protein.mask) > 0
        motif = np.zeros(protein.length, bool)
        n_seg = int(rng.integers(num_segments[0], num_segments[1] + 1))
        for _ in range(n_seg):
            for _attempt in range(50):
                n = int(rng.integers(segment_length[0], segment_length[1] + 1))
                start = int(rng.integers(0, max(protein.length - n, 0) + 1))
                window = slice(start, start + n)
                # Keep a one-residue gap to other segments; require present residues.
                lo, hi = max(start - 1, 0), min(start + n + 1, protein.length)
                if present[window].all() and not motif[lo:hi].any():
                    motif[window] = True
                    break
        tasks.append(
            _make_task(
                f"generic/{stem}",
                protein,
                tuple(protein.chain_order),
                motif,
                np.zeros_like(motif),
                "generic",
                stem[:4].upper(),
                "generic",
            )
        )
    return tasks


def assign_splits(
    tasks: Sequence[DesignTask],
    *,
    heldout_fraction: float = 0.2,
    seed: int = 0,
    heldout_sources: Sequence[str] = ("motifbench", "rfdiffusion"),
) -> list[DesignTask]:
    """Deterministic train / held-out split by protein (:attr:`DesignTask.group`).

    A group is held out if any of its tasks comes from ``heldout_sources`` (benchmark entries
    are for evaluation only); otherwise it is held out when a seeded hash of the group name falls
    below ``heldout_fraction``. Every task of a group gets the same split.

    Returns:
      New task list (same order) with ``split`` set.

    Raises:
      DataError: ``heldout_fraction`` outside ``[0, 1]``.
    """
    if not 0.0 <= heldout_fraction <= 1.0:
        raise DataError(f"heldout_fraction must be in [0, 1], got {heldout_fraction}")
    forced = {t.group for t in tasks if t.source in heldout_sources}
    out = []
    for t in tasks:
        if t.group in forced:
            split = "heldout"
        else:
            u = _seed_for("split", seed, t.group) / 2**32
            split = "heldout" if u < heldout_fraction else "train"
        out.append(dataclasses.replace(t, split=split))
    check_split(out)
    return out


def check_split(tasks: Sequence[DesignTask]) -> None:
    """Raises ``DataError`` if a protein group has tasks on both sides or a split is unset."""
    sides: dict[str, set[str]] = {}
    for t in tasks:
        if t.split not in ("train", "heldout"):
            raise DataError(f"task {t.name}: split {t.split!r} is not 'train' or 'heldout'")
        sides.setdefault(t.group, set()).add(t.split)
    both = sorted(g for g, s in sides.items() if len(s) > 1)
    if both:
        raise DataError(f"protein(s) {both} appear in both the train and held-out splits")


def load_tasks(
    data_dir: str | os.PathLike | None = None,
    *,
    sources: Sequence[str] = ("motifbench", "rfdiffusion", "generic"),
    seed: int = 0,
    heldout_fraction: float = 0.2,
) -> list[DesignTask]:
    """Loads the chosen sources and assigns the protein-level split (see :func:`assign_splits`).

    Args:
      data_dir: shared data directory (``None``: ``$FIDIA_DATA_DIR``).
      sources: any of ``"motifbench"``, ``"rfdiffusion"``, ``"generic"``.
      seed: seed of the pseudo-motifs and of the generic split.
      heldout_fraction: share of generic proteins held out.

    Raises:
      DataError: unknown source or missing data.
    """
    loaders = {
        "motifbench": lambda: load_motifbench_tasks(data_dir),
        "rfdiffusion": lambda: load_rfdiffusion_tasks(data_dir),
        "generic": lambda: load_generic_tasks(data_dir, seed=seed),
    }
    unknown = [s for s in sources if s not in loaders]
    if unknown:
        raise DataError(f"unknown task source(s) {unknown}; expected {sorted(loaders)}")
    tasks: list[DesignTask] = []
    for s in sources:
        tasks.extend(loaders[s]())
    return assign_splits(tasks, heldout_fraction=heldout_fraction, seed=seed)


def task_from_structure(
    path: str | os.PathLike,
    *,
    fixed: str | None = None,
    chains: str | None = None,
    name: str | None = None,
    kind: TaskKind = "motif",
    split: str = "heldout",
) -> DesignTask:
    """A task from any structure file and an optional motif spec in author numbering (CLI use).

    Args:
      path: PDB / mmCIF file.
      fixed: motif spec (``"A16-35,A52-71"``); ``None`` = no motif.
      chains: chains to load and design (default all).
      name: task name (default the file stem).
      kind: task kind.
      split: split label.
    """
    path = pathlib.Path(path)
    protein = load_structure(path, chains=chains)
    motif = parse_motif_spec(fixed, protein) if fixed else np.zeros(protein.length, bool)
    stem = path.name.split(".")[0]
    task = _make_task(
        name or stem,
        protein,
        tuple(protein.chain_order),
        motif,
        np.zeros_like(motif),
        kind,
        stem.upper(),
        "file",
    )
    return dataclasses.replace(task, split=split)
