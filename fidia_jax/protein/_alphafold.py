"""AlphaFold2 as a :class:`~fidia_jax.protein.StructurePredictor`: single sequence, in-process JAX.

The model is AlphaFold v2.3 from the ``alphafold-colabfold`` distribution (haiku modules, its
NumPy feature pipeline and its parameter reader); nothing of it is copied here. This module only
builds the single-sequence features, pads them to a length bucket, stacks a batch of sequences,
and runs the recycles with one jitted, vmapped call per (bucket, batch) shape, on the device the
caller chooses (the policy's, by default the first one).

Weights are the user's download (``params_model_1_ptm.npz`` ... ``params_model_5_ptm.npz``,
``params_model_*_multimer_v3.npz``, from the AlphaFold parameter release, CC BY 4.0) under
``<params_dir>/params/`` or ``<params_dir>/`` itself; none ship with fidia_jax. The tests build a
tiny configuration (one Evoformer block, one structure-module layer, small channels) with random
parameters.

Needs the ``fold`` extra: ``pip install 'fidia_jax[fold]'``.

Single-sequence mode is what the RFdiffusion benchmark uses to fold designs (ColabFold's
``--msa-mode single_sequence``): the MSA is the query alone, no templates. Several chains are
joined with ``:`` in the input string (:func:`~fidia_jax.protein.join_chains` makes it from
chain lengths). The monomer (``*_ptm``) models see one chain with a residue-index gap of 200
between chains, as ColabFold does for complexes. The multimer models (``*_multimer_v3``, for
binder / complex tasks) get the multimer feature dict from the package's own multimer pipeline
(``alphafold.data.pipeline_multimer`` and ``feature_processing``: per-chain ``residue_index``
from 0, ``asym_id`` / ``entity_id`` / ``sym_id``, identical chains grouped as one entity), with
one sequence per chain as the MSA; they also give ipTM.

References:
  Jumper et al., "Highly accurate protein structure prediction with AlphaFold", Nature 596, 2021.
  Mirdita et al., "ColabFold: making protein folding accessible to all", Nature Methods 19, 2022.
  Watson et al., "De novo design of protein structure and function with RFdiffusion",
  Nature 620, 2023 (single-sequence AF2 as the designability oracle).
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import time
from collections.abc import Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from fidia_jax.errors import ConfigError, DataError, needs_extra

__all__ = [
    "AF2_LENGTH_BUCKETS",
    "AlphaFoldPrediction",
    "AlphaFoldPredictor",
    "alphafold_config",
    "find_alphafold_params",
    "random_alphafold_params",
    "read_alphafold_params",
]

#: Padded lengths: a sequence is folded at the smallest bucket that holds it (one compilation
#: per bucket and batch size); longer sequences are folded at their own length.
AF2_LENGTH_BUCKETS: tuple[int, ...] = (32, 64, 96, 128, 192, 256, 384, 512, 768, 1024)

#: Residue-index offset between chains for the monomer models (ColabFold's chain break).
_CHAIN_GAP = 200
#: atom37 slots of the backbone atoms N, CA, C, O.
_BACKBONE_ATOM37 = (0, 1, 2, 4)
_AMINO = set("ACDEFGHIKLMNPQRSTVWYX")


def alphafold_config(
    model_name: str = "model_1_ptm",
    *,
    num_recycles: int = 3,
    overrides: Mapping[str, Any] | None = None,
):
    """The AlphaFold2 ``ml_collections.ConfigDict`` for single-sequence inference.

    Starts from ``alphafold.model.config.model_config(model_name)`` and sets: templates off,
    one MSA cluster and one extra-MSA row (the query alone; padded MSA rows are masked, so more
    would only cost time), ``num_recycles`` recycles, no early stop. A monomer model
    (``model_1_ptm`` ...) sets these in its ``data`` and ``model`` groups; a multimer model
    (``model_1_multimer_v3`` ...; its configuration has no ``data`` group) sets
    ``model.embeddings_and_evoformer.num_msa`` / ``num_extra_msa`` to 1. ``overrides`` (dotted
    keys, e.g. ``{"model.global_config.bfloat16": False}``) are applied last.

    Raises:
      ConfigError: unknown model name (the message lists the valid ones), ``num_recycles < 0``
        or an unknown key.
    """
    with needs_extra("fold", "alphafold_config"):
        from alphafold.model import config as af_config

    if model_name not in af_config.CONFIG_DIFFS:
        presets = af_config.MODEL_PRESETS
        main = ", ".join((*presets["monomer_ptm"], *presets["multimer"]))
        rest = ", ".join(
            n
            for n in af_config.CONFIG_DIFFS
            if n not in presets["monomer_ptm"] + presets["multimer"]
        )
        raise ConfigError(
            f"unknown AlphaFold2 model {model_name!r}; valid: {main} (and the older {rest})"
        )
    if num_recycles < 0:
        raise ConfigError(f"num_recycles must be >= 0, got {num_recycles}")
    cfg = af_config.model_config(model_name)
    # what RunModel adds to the config (the extended-pTM heads of complexes: off)
    cfg.model.calc_extended_ptm = False
    cfg.model.use_probs_extended = False
    if cfg.model.global_config.multimer_mode:
        flat = {
            "model.embeddings_and_evoformer.template.enabled": False,
            "model.embeddings_and_evoformer.num_msa": 1,
            "model.embeddings_and_evoformer.num_extra_msa": 1,
        }
    else:
        flat = {
            "data.common.use_templates": False,
            "data.common.reduce_msa_clusters_by_max_templates": False,
            "model.embeddings_and_evoformer.template.enabled": False,
            "model.embeddings_and_evoformer.template.embed_torsion_angles": False,
            "data.eval.max_msa_clusters": 1,
            "data.common.max_extra_msa": 1,
            "data.common.num_recycle": num_recycles,
        }
    flat["model.num_recycle"] = num_recycles
    flat["model.recycle_early_stop_tolerance"] = 0.0
    flat.update(overrides or {})
    for key, value in flat.items():
        node, *path = key.split(".")
        target = cfg
        for part in [node, *path[:-1]]:
            if part not in target:
                raise ConfigError(f"AlphaFold2 config ({model_name}) has no key {key!r}")
            target = target[part]
        leaf = path[-1] if path else node
        if leaf not in target:
            raise ConfigError(f"AlphaFold2 config ({model_name}) has no key {key!r}")
        target[leaf] = value
    return cfg


def find_alphafold_params(params_dir: str | os.PathLike, model_name: str) -> pathlib.Path:
    """Path of ``params_<model_name>.npz`` under ``params_dir/params/`` or ``params_dir/``.

    Raises:
      DataError: no such file (the message lists the ``params_*.npz`` files that are there).
    """
    root = pathlib.Path(params_dir).expanduser()
    for folder in (root / "params", root):
        path = folder / f"params_{model_name}.npz"
        if path.is_file():
            return path
    found = sorted(p.name for f in (root / "params", root) if f.is_dir() for p in f.glob("*.npz"))
    raise DataError(
        f"no params_{model_name}.npz in {root} or {root / 'params'}"
        + (f"; found {', '.join(found)}" if found else "; the folder holds no params_*.npz")
        + " (the AlphaFold parameters are the user's download)"
    )


def read_alphafold_params(params_dir: str | os.PathLike, model_name: str) -> dict[str, Any]:
    """Reads ``params_<model_name>.npz`` with the package's own reader.

    ``alphafold.model.data.get_model_haiku_params`` (the release's flat ``scope//name`` arrays,
    the triangle-multiplication projections fused as the model expects) on the file that
    :func:`find_alphafold_params` locates.

    Returns:
      The haiku parameter tree ``{module_scope: {name: array}}`` (jax arrays).

    Raises:
      DataError: missing file.
    """
    path = find_alphafold_params(params_dir, model_name)
    with needs_extra("fold", "read_alphafold_params"):
        from alphafold.model import data as af_data
    # the reader looks under <data_dir>/params/
    data_dir = path.parent.parent if path.parent.name == "params" else None
    if data_dir is None:  # the file sits in params_dir itself: read it the same way
        with needs_extra("fold", "read_alphafold_params"):
            from alphafold.model import utils as af_utils
        with np.load(path, allow_pickle=False) as flat:
            return af_utils.flat_params_to_haiku(dict(flat), fuse=True, to_jnp=True)
    return af_data.get_model_haiku_params(model_name, str(data_dir))


def _check_sequence(sequence: str) -> list[str]:
    if not isinstance(sequence, str) or not sequence:
        raise ValueError(f"sequence must be a non-empty string, got {sequence!r}")
    chains = sequence.upper().split(":")
    for chain in chains:
        bad = set(chain) - _AMINO
        if not chain or bad:
            raise ValueError(
                f"sequence {sequence!r}: each ':'-separated chain must be non-empty one-letter "
                f"amino acids (ACDEFGHIKLMNPQRSTVWYX); found {sorted(bad) or 'an empty chain'}"
            )
    return chains


@dataclasses.dataclass(frozen=True, eq=False)
class AlphaFoldPrediction:
    """One folded sequence (:meth:`AlphaFoldPredictor.fold_many`).

    Attributes:
      coords: ``(M, 4, 3)`` float32 backbone N, CA, C, O in Å, chains in input order (``M``
        residues, the ``:`` removed).
      plddt: ``(M,)`` float32 per-residue pLDDT in ``[0, 100]``.
      chain_lengths: residues per chain, in input order (sums to ``M``).
      ptm: predicted TM-score over all chains in ``[0, 1]`` (``None``: a model without the
        predicted-aligned-error head, e.g. ``model_1``).
      iptm: interface pTM in ``[0, 1]`` (multimer models with two or more chains; else ``None``).
      pae: ``(M, M)`` float32 predicted aligned error in Å (``None`` when ``ptm`` is).
    """

    coords: np.ndarray
    plddt: np.ndarray
    chain_lengths: tuple[int, ...]
    ptm: float | None = None
    iptm: float | None = None
    pae: np.ndarray | None = None


class AlphaFoldPredictor:
    """AlphaFold2 single-sequence structure predictor (``protein.StructurePredictor``).

    Build it with :meth:`from_params_dir` (real weights) or :meth:`random` (random weights of a
    given configuration, for tests). ``predict(sequence)`` folds one sequence (chains joined
    with ``:``); :meth:`predict_many` folds several, grouped by length bucket and stacked in
    batches of ``batch_size`` (the last batch padded with copies, so each bucket compiles once);
    :meth:`fold_many` also returns pTM, ipTM and the PAE matrix. A multimer configuration
    (``model_*_multimer_v3``) folds each ``:``-separated chain as its own chain (binder and
    target, or the subunits of a complex); a monomer one folds them as one chain with a
    residue-index gap.

    Args:
      params: haiku parameter tree (from :func:`read_alphafold_params`).
      config: AlphaFold2 ``ConfigDict`` (from :func:`alphafold_config`).
      model_name: for messages and reports.
      batch_size: sequences per jitted call (memory grows linearly with it).
      buckets: padded lengths (see :data:`AF2_LENGTH_BUCKETS`).
      device: where parameters and features go (``None``: ``jax.devices()[0]``).
      seed: key of the MSA-masking step of the feature pipeline and of the model.
      compiler_options: XLA options of the jitted call (``jax.jit(compiler_options=...)``),
        e.g. ``{"xla_backend_optimization_level": 0}`` to compile faster on a CPU.
      check_params: compare every parameter's shape with the tree ``config`` makes (one
        ``jax.eval_shape`` of haiku's ``init``; nothing is compiled) before anything is folded.

    Raises:
      ConfigError: ``batch_size < 1``; ``params`` made for the other kind of model (monomer
        parameters with a multimer configuration or the reverse); with ``check_params``, any
        array missing, unexpected or of another shape than the configuration's (made for
        another model size), listed with the configuration's sizes.

    Attributes:
      multimer: whether the configuration is a multimer model.
      seconds: wall time spent folding so far (feature building included).
      folds: sequences folded so far (padding copies not counted).
    """

    def __init__(
        self,
        params: Mapping[str, Any],
        config,
        *,
        model_name: str = "model_1_ptm",
        batch_size: int = 1,
        buckets: Sequence[int] = AF2_LENGTH_BUCKETS,
        device: jax.Device | None = None,
        seed: int = 0,
        compiler_options: Mapping[str, Any] | None = None,
        check_params: bool = True,
    ):
        with needs_extra("fold", "AlphaFoldPredictor"):
            import haiku as hk
            from alphafold.model import modules, modules_multimer

        if batch_size < 1:
            raise ConfigError(f"batch_size must be >= 1, got {batch_size}")
        self.multimer = bool(config.model.global_config.multimer_mode)
        _check_params_kind(params, config, model_name)
        if check_params:
            _check_param_shapes(params, config, model_name)
        self.config = config
        self.model_name = model_name
        self.batch_size = int(batch_size)
        self.buckets = tuple(sorted(int(b) for b in buckets))
        self.device = device if device is not None else jax.devices()[0]
        self.seed = int(seed)
        self.params = jax.device_put(params, self.device)
        self.seconds = 0.0
        self.folds = 0
        evo = config.model.embeddings_and_evoformer
        self._channels = (int(evo.msa_channel), int(evo.pair_channel))
        model_cfg = config.model
        model_cls = modules_multimer.AlphaFold if self.multimer else modules.AlphaFold_noE

        def forward(batch):
            return model_cls(model_cfg)(batch, is_training=False)

        apply = hk.transform(forward).apply

        def one(params, key, batch):
            out = apply(params, key, batch)
            res = {
                "coords": out["structure_module"]["final_atom_positions"],
                "plddt": out["plddt"],
            }
            for name in ("ptm", "iptm"):
                if name in out:
                    res[name] = out[name]
            pae = out.get("predicted_aligned_error")
            if pae is not None and not isinstance(pae, Mapping):  # the (L, L) matrix in Å
                res["pae"] = pae
            f32 = {k: v.astype(jnp.float32) for k, v in res.items()}
            return {k: v.astype(jnp.float32) for k, v in out["prev"].items()}, f32

        self._step = jax.jit(
            jax.vmap(one, in_axes=(None, None, 0)),
            compiler_options=dict(compiler_options) if compiler_options else None,
        )

    # ---- construction ------------------------------------------------------------------------

    @classmethod
    def from_params_dir(
        cls,
        params_dir: str | os.PathLike,
        model_name: str = "model_1_ptm",
        *,
        num_recycles: int = 3,
        config_overrides: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> AlphaFoldPredictor:
        """Reads ``params_<model_name>.npz`` from ``params_dir`` (see
        :func:`read_alphafold_params`) and builds the predictor (``kwargs`` go to ``__init__``).
        ``model_name`` ``model_1_multimer_v3`` ... ``model_5_multimer_v3`` builds the multimer.

        Raises:
          ConfigError: unknown model name, bad options, parameters of the other kind of model.
          DataError: the parameter file is missing.
        """
        cfg = alphafold_config(model_name, num_recycles=num_recycles, overrides=config_overrides)
        params = read_alphafold_params(params_dir, model_name)
        return cls(params, cfg, model_name=model_name, **kwargs)

    @classmethod
    def random(
        cls,
        config,
        *,
        seed: int = 0,
        model_name: str = "random",
        **kwargs: Any,
    ) -> AlphaFoldPredictor:
        """A predictor with random parameters for ``config`` (tests, dry runs; not a model).

        The parameter tree is the one haiku's ``init`` makes (its shapes from
        ``jax.eval_shape``, so nothing is compiled); values: layer-norm scales 1, offsets and
        biases 0, every other array normal with std ``1/sqrt(shape[0])``, from ``seed``.
        """
        params = random_alphafold_params(config, seed=seed)
        return cls(params, config, model_name=model_name, seed=seed, **kwargs)

    # ---- features ----------------------------------------------------------------------------

    def bucket(self, length: int) -> int:
        """The padded length a sequence of ``length`` residues is folded at."""
        return next((b for b in self.buckets if b >= length), int(length))

    def features(self, sequence: str, bucket: int | None = None) -> dict[str, np.ndarray]:
        """Single-sequence features of ``sequence`` padded to ``bucket`` residues.

        Monomer models: arrays with a leading ``num_recycles + 1`` axis, as AlphaFold's feature
        pipeline makes them (``alphafold.model.features`` on the query as a one-row MSA),
        residue axes padded to the bucket (padded slots masked). Multimer models: the feature
        dict of ``alphafold.data.pipeline_multimer`` / ``feature_processing`` (no recycle
        axis; ``asym_id``, ``entity_id``, ``sym_id``, per-chain ``residue_index``), residue axes
        padded with ``entity_id = 0`` (the package's padding mark, ``seq_mask = 0``); its
        residues are in the package's order (chains grouped by entity), see
        :meth:`fold_many` for the mapping back.

        Raises:
          ValueError: empty sequence, an empty chain, a letter outside the 20 amino acids + X,
            a bucket shorter than the sequence.
        """
        bucket = self.bucket(len(sequence.replace(":", ""))) if bucket is None else int(bucket)
        if self.multimer:
            return _multimer_features(self.config, sequence, bucket)[0]
        return _single_sequence_features(self.config, sequence, bucket, self.seed)

    # ---- prediction --------------------------------------------------------------------------

    def _fold_batch(self, feats: list[dict[str, np.ndarray]], length: int):
        batch = {k: np.stack([f[k] for f in feats]) for k in feats[0]}
        batch = jax.device_put(batch, self.device)
        n = len(feats)
        msa_c, pair_c = self._channels
        prev = jax.device_put(
            {
                "prev_msa_first_row": np.zeros((n, length, msa_c), np.float32),
                "prev_pair": np.zeros((n, length, length, pair_c), np.float32),
                "prev_pos": np.zeros((n, length, 37, 3), np.float32),
            },
            self.device,
        )
        key = jax.random.PRNGKey(self.seed)
        out = {}
        with jax.numpy_rank_promotion("allow"):  # AlphaFold broadcasts implicitly
            if self.multimer:
                # one recycle per call, a fresh key each (as the package's RunModel.predict)
                for _ in range(int(self.config.model.num_recycle) + 1):
                    key, sub = jax.random.split(key)
                    prev, out = self._step(self.params, sub, {**batch, "prev": prev})
            else:
                for r in range(batch["aatype"].shape[1]):
                    sub = {k: v[:, r : r + 1] for k, v in batch.items()}
                    prev, out = self._step(self.params, key, {**sub, "prev": prev})
        return {k: np.asarray(v) for k, v in out.items()}

    def _one_fold(self, sequence: str, bucket: int):
        """Features of one sequence and the slots (in the padded input) of its residues."""
        if self.multimer:
            return _multimer_features(self.config, sequence, bucket)
        n = len(sequence.replace(":", ""))
        return _single_sequence_features(self.config, sequence, bucket, self.seed), np.arange(n)

    def fold_many(
        self, sequences: Sequence[str], *, bucket: int | None = None
    ) -> list[AlphaFoldPrediction]:
        """Folds ``sequences`` (chains joined with ``:``); one :class:`AlphaFoldPrediction`
        each, in order.

        Sequences are grouped by length bucket (or all folded at ``bucket`` residues when given:
        one compilation for every length up to it) and stacked ``batch_size`` at a time.

        Raises:
          ValueError: a bad sequence (see :meth:`features`); ``bucket`` shorter than a sequence.
          FloatingPointError: the model gave non-finite coordinates or confidences.
        """
        t0 = time.perf_counter()
        seqs = list(sequences)
        chains = [_check_sequence(s) for s in seqs]
        lengths = [sum(map(len, c)) for c in chains]
        if bucket is not None and lengths and int(bucket) < max(lengths):
            raise ValueError(
                f"bucket {bucket} is shorter than the longest sequence ({max(lengths)})"
            )
        out: list[AlphaFoldPrediction | None] = [None] * len(seqs)
        by_bucket: dict[int, list[int]] = {}
        for i, n in enumerate(lengths):
            by_bucket.setdefault(self.bucket(n) if bucket is None else int(bucket), []).append(i)
        for size, idx in sorted(by_bucket.items()):
            for start in range(0, len(idx), self.batch_size):
                part = idx[start : start + self.batch_size]
                built = [self._one_fold(seqs[i], size) for i in part]
                feats = [f for f, _ in built]
                feats += [feats[-1]] * (self.batch_size - len(part))
                res = self._fold_batch(feats, size)
                for j, i in enumerate(part):
                    out[i] = self._prediction(res, j, built[j][1], chains[i], i)
        self.seconds += time.perf_counter() - t0
        self.folds += len(seqs)
        return out  # type: ignore[return-value]

    def _prediction(self, res, j, slots, chains, i) -> AlphaFoldPrediction:
        coords = res["coords"][j][slots][:, list(_BACKBONE_ATOM37)]
        plddt = res["plddt"][j][slots]
        ptm = float(res["ptm"][j]) if "ptm" in res else None
        iptm = float(res["iptm"][j]) if "iptm" in res and len(chains) > 1 else None
        pae = res["pae"][j][np.ix_(slots, slots)] if "pae" in res else None
        finite = [coords, plddt] + [np.asarray(x) for x in (ptm, iptm, pae) if x is not None]
        if not all(np.all(np.isfinite(x)) for x in finite):
            raise FloatingPointError(
                f"AlphaFold2 ({self.model_name}) gave non-finite coordinates or confidences for "
                f"sequence {i} (length {len(slots)})"
            )
        return AlphaFoldPrediction(
            coords=coords,
            plddt=plddt,
            chain_lengths=tuple(len(c) for c in chains),
            ptm=ptm,
            iptm=iptm,
            pae=pae,
        )

    def predict_many(
        self, sequences: Sequence[str], *, bucket: int | None = None
    ) -> list[tuple[np.ndarray, np.ndarray]]:
        """Folds ``sequences``; returns ``(coords, plddt)`` per sequence, in order.

        ``coords``: ``(M, 4, 3)`` float32 backbone N, CA, C, O in Å (``M`` residues, chains
        concatenated in input order without the ``:``); ``plddt``: ``(M,)`` float32 in
        ``[0, 100]``. See :meth:`fold_many` (``bucket``, pTM / ipTM).

        Raises:
          ValueError: a bad sequence (see :meth:`features`).
          FloatingPointError: the model gave non-finite coordinates or pLDDT.
        """
        return [(p.coords, p.plddt) for p in self.fold_many(sequences, bucket=bucket)]

    def predict(self, sequence: str) -> tuple[np.ndarray, np.ndarray]:
        """Folds one sequence: ``(coords (M, 4, 3) Å, plddt (M,))`` (see :meth:`predict_many`)."""
        return self.predict_many([sequence])[0]


def _relative_features(config) -> int:
    """Input width of the relative-position embedding a configuration's parameters have."""
    evo = config.model.embeddings_and_evoformer
    if config.model.global_config.multimer_mode:
        # clipped offset + 'other chain' bin, same-entity flag, clipped sym_id + 'other' bin
        return 2 * evo.max_relative_idx + 2 + 1 + 2 * evo.max_relative_chain + 2
    return 2 * evo.max_relative_feature + 1


def _check_params_kind(params, config, model_name: str) -> None:
    """Monomer parameters with a multimer configuration (or the reverse) fail here, by name."""
    want = _relative_features(config)
    for scope, arrays in params.items():
        if scope.endswith("position_activations") or scope.endswith("pair_activiations"):
            got = int(np.shape(arrays["weights"])[0])
            if got != want:
                kind = "multimer" if config.model.global_config.multimer_mode else "monomer"
                raise ConfigError(
                    f"AlphaFold2 parameters for {model_name!r} do not fit its {kind} "
                    f"configuration (relative-position input {got} wide, the configuration "
                    f"needs {want}): monomer *_ptm parameters need a monomer model name, "
                    "params_model_*_multimer_v3.npz a *_multimer_v3 one"
                )
            return


def _single_sequence_features(config, sequence: str, bucket: int, seed: int):
    """AlphaFold's feature pipeline on ``sequence`` alone, padded to ``bucket`` residues."""
    with needs_extra("fold", "AlphaFoldPredictor.features"):
        from alphafold.data import parsers, pipeline
        from alphafold.model import features as af_features
        from alphafold.model.tf import input_pipeline, proteins_dataset
        from alphafold.model.tf import np_backend as tf

    chains = _check_sequence(sequence)
    seq = "".join(chains)
    n = len(seq)
    if bucket < n:
        raise ValueError(f"bucket {bucket} is shorter than the sequence ({n})")
    raw = {
        **pipeline.make_sequence_features(seq, "query", n),
        **pipeline.make_msa_features([parsers.Msa([seq], [[0] * n], ["query"])]),
    }
    offsets = np.repeat(np.arange(len(chains)) * _CHAIN_GAP, [len(c) for c in chains])
    raw["residue_index"] = (raw["residue_index"] + offsets).astype(np.int32)
    raw["deletion_matrix"] = raw.pop("deletion_matrix_int").astype(np.float32)
    cfg, names = af_features.make_data_config(config, num_res=bucket)
    graph = tf.Graph()
    with graph.as_default(), tf.device("/device:CPU:0"):
        tf.compat.v1.set_random_seed(seed)
        tensors = proteins_dataset.np_to_tensor_dict(np_example=raw, features=names)
        processed = input_pipeline.process_tensors_from_config(tensors, cfg)
    graph.finalize()
    with tf.Session(graph=graph) as sess:
        out = sess.run(processed)
    return {k: np.asarray(v) for k, v in out.items() if np.asarray(v).dtype != object}


#: Multimer features the model reads, by the axis that runs over residues.
_MULTIMER_RESIDUE_AXIS = {
    "aatype": 0,
    "residue_index": 0,
    "asym_id": 0,
    "entity_id": 0,
    "sym_id": 0,
    "seq_mask": 0,
    "all_atom_positions": 0,
    "all_atom_mask": 0,
    "msa": 1,
    "msa_mask": 1,
    "deletion_matrix": 1,
    "bert_mask": 1,
    "cluster_bias_mask": None,  # per MSA row
}


def _multimer_features(config, sequence: str, bucket: int):
    """The multimer feature dict of ``sequence``'s chains (one sequence each as the MSA), padded
    to ``bucket`` residues, and the padded slot of each input residue (``(M,)`` int)."""
    with needs_extra("fold", "AlphaFoldPredictor.features"):
        from alphafold.data import feature_processing, parsers, pipeline, pipeline_multimer

    chains = _check_sequence(sequence)
    n = sum(map(len, chains))
    if bucket < n:
        raise ValueError(f"bucket {bucket} is shorter than the sequence ({n})")
    per_chain: dict[str, dict] = {}
    source: dict[int, int] = {}
    for i, seq in enumerate(chains):
        chain_id = pipeline_multimer.int_id_to_str_id(i + 1)
        msa = [parsers.Msa([seq], [[0] * len(seq)], [""])]
        raw = {
            **pipeline.make_sequence_features(seq, f"chain_{chain_id}", len(seq)),
            **pipeline.make_msa_features(msa),
        }
        # a heteromer's MSA pairing reads the *_all_seq features: the query alone (no species)
        raw.update({f"{k}_all_seq": v for k, v in pipeline.make_msa_features(msa).items()})
        feats = pipeline_multimer.convert_monomer_features(raw, chain_id=chain_id)
        per_chain[chain_id] = feats
        source[id(feats)] = i
    grouped = pipeline_multimer.add_assembly_features(per_chain)  # chains grouped by entity
    order = [source[id(f)] for f in grouped.values()]
    evo = config.model.embeddings_and_evoformer
    rows = int(evo.num_msa) + int(evo.num_extra_msa)
    example = pipeline_multimer.pad_msa(feature_processing.pair_and_merge(grouped), rows)
    starts = np.concatenate([[0], np.cumsum([len(c) for c in chains])])
    merged = np.concatenate([np.arange(starts[i], starts[i + 1]) for i in order])
    slots = np.argsort(merged)  # input residue k sits at padded slot slots[k]
    if example["msa"].shape[0] != rows or example["aatype"].shape != (n,):
        raise RuntimeError(
            f"alphafold's multimer pipeline gave an MSA of {example['msa'].shape[0]} rows (want "
            f"{rows}) and {example['aatype'].shape[0]} residues (want {n})"
        )
    out = {}
    for key, axis in _MULTIMER_RESIDUE_AXIS.items():
        x = np.asarray(example[key])
        if axis is not None:
            pad = [(0, 0)] * x.ndim
            pad[axis] = (0, bucket - n)
            x = np.pad(x, pad)
        out[key] = x.astype(np.int32 if key in _INT_FEATURES else np.float32)
    return out, slots


_INT_FEATURES = frozenset({"aatype", "residue_index", "asym_id", "entity_id", "sym_id", "msa"})


def _alphafold_param_shapes(config, *, seed: int = 0, length: int = 16) -> dict[str, Any]:
    """The parameter tree of ``config`` as ``jax.ShapeDtypeStruct`` leaves: haiku's ``init`` of
    the model (monomer or multimer, as ``config`` says), traced with ``jax.eval_shape`` on a
    ``length``-residue dummy input (two chains for a multimer); nothing is compiled and no
    parameter depends on the length."""
    with needs_extra("fold", "random_alphafold_params"):
        import haiku as hk
        from alphafold.model import modules, modules_multimer

    evo = config.model.embeddings_and_evoformer
    if config.model.global_config.multimer_mode:
        half = length // 2
        batch = _multimer_features(config, "A" * half + ":" + "C" * (length - half), length)[0]
        model_cls = modules_multimer.AlphaFold
    else:
        feats = _single_sequence_features(config, "A" * length, length, seed)
        batch = {k: v[0:1] for k, v in feats.items()}
        model_cls = modules.AlphaFold_noE
    batch["prev"] = {
        "prev_msa_first_row": jnp.zeros((length, evo.msa_channel), jnp.float32),
        "prev_pair": jnp.zeros((length, length, evo.pair_channel), jnp.float32),
        "prev_pos": jnp.zeros((length, 37, 3), jnp.float32),
    }

    def forward(b):
        return model_cls(config.model)(b, is_training=False)

    with jax.numpy_rank_promotion("allow"):
        return jax.eval_shape(hk.transform(forward).init, jax.random.PRNGKey(seed), batch)


def _check_param_shapes(params, config, model_name: str) -> None:
    """Every parameter of ``params`` against the tree ``config`` makes: missing, unexpected and
    mis-shaped arrays fail here in one :class:`ConfigError` naming the configuration, instead
    of inside haiku at the first fold."""
    want = _alphafold_param_shapes(config)
    have = {(sc, n): tuple(np.shape(v)) for sc, d in params.items() for n, v in d.items()}
    need = {(sc, n): tuple(v.shape) for sc, d in want.items() for n, v in d.items()}
    problems = [f"missing {sc}//{n} {need[sc, n]}" for sc, n in sorted(need.keys() - have.keys())]
    problems += [f"unexpected {sc}//{n}" for sc, n in sorted(have.keys() - need.keys())]
    problems += [
        f"{sc}//{n} is {have[sc, n]}, the configuration needs {need[sc, n]}"
        for sc, n in sorted(need.keys() & have.keys())
        if have[sc, n] != need[sc, n]
    ]
    if problems:
        evo = config.model.embeddings_and_evoformer
        shown = "; ".join(problems[:4]) + (
            f"; and {len(problems) - 4} more" if len(problems) > 4 else ""
        )
        raise ConfigError(
            f"AlphaFold2 parameters do not fit the configuration of {model_name!r} "
            f"(msa_channel {evo.msa_channel}, pair_channel {evo.pair_channel}, "
            f"{evo.evoformer_num_block} Evoformer blocks): {len(problems)} of {len(need)} "
            f"arrays differ: {shown}"
        )


def random_alphafold_params(config, *, seed: int = 0, length: int = 16) -> dict[str, Any]:
    """Random AlphaFold2 parameters for ``config`` (see :meth:`AlphaFoldPredictor.random`).

    The tree (module scopes, names, shapes) is haiku's ``init`` of the model (monomer or
    multimer, as ``config`` says), traced with ``jax.eval_shape`` on a ``length``-residue dummy
    input (two chains for a multimer); no parameter depends on the length.
    """
    shapes = _alphafold_param_shapes(config, seed=seed, length=length)
    rng = np.random.default_rng(seed)

    def fill(path, s):
        name = path[-1].key
        if name == "scale":
            return np.ones(s.shape, s.dtype)
        if name in ("offset", "bias"):
            return np.zeros(s.shape, s.dtype)
        std = 1.0 / np.sqrt(max(s.shape[0], 1)) if s.shape else 1.0
        return (rng.standard_normal(s.shape) * std).astype(s.dtype)

    return jax.tree_util.tree_map_with_path(fill, shapes)
