"""The structure predictor of a FIDIA run: built from ``config.reward``, cached per sequence.

With ``reward.criteria = "structure"`` every sample a reward looks at is folded
(:class:`fidia_jax.protein.AlphaFoldPredictor` by default, from ``reward.fold_params``). Rollouts
repeat sequences (within a group at low temperature, across steps, between a run's evaluations),
so :class:`FoldCache` folds each distinct sequence once and counts the time spent, which the
training loop reports per step (``fold_seconds``, ``fold_new``, ``fold_cached``).
"""

from __future__ import annotations

import collections
import json
import time
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from fidia_jax.errors import ConfigError

__all__ = ["FoldCache", "build_predictor"]


class _Fold(NamedTuple):
    """What :class:`FoldCache` keeps of a fold (not the ``(M, M)`` PAE matrix: 64 kB at 128
    residues, too much for a cache of many thousand sequences)."""

    coords: np.ndarray
    plddt: np.ndarray
    ptm: float | None = None
    iptm: float | None = None


class FoldCache:
    """A :class:`fidia_jax.protein.StructurePredictor` that folds each distinct sequence once.

    Args:
      predictor: any object with ``predict(sequence)``; its ``predict_many(sequences)`` is used
        when it has one (batched folding).
      max_entries: least recently used entries beyond this are dropped.

    Attributes:
      seconds: wall time inside the predictor so far.
      folded: distinct sequences folded so far.
      hits: predictions not folded so far (cached, or a repeat within one call); ``folded +
        hits`` is the number of sequences asked for.
    """

    def __init__(self, predictor: Any, *, max_entries: int = 200_000):
        if not callable(getattr(predictor, "predict", None)):
            raise TypeError(f"{type(predictor).__name__} has no predict(sequence) method")
        self.predictor = predictor
        self.max_entries = int(max_entries)
        self._cache: collections.OrderedDict[str, Any] = collections.OrderedDict()
        self.seconds = 0.0
        self.folded = 0
        self.hits = 0

    def fold_many(self, sequences: Sequence[str]) -> list[Any]:
        """One prediction per sequence, in order: a named tuple ``(coords, plddt, ptm, iptm)``;
        ``ptm`` / ``iptm`` come from the predictor's ``fold_many`` when it has one
        (:class:`fidia_jax.protein.AlphaFoldPrediction`), else they are ``None``."""
        seqs = list(sequences)
        todo = list(dict.fromkeys(s for s in seqs if s not in self._cache))
        self.hits += len(seqs) - len(todo)  # repeats within the call count as hits too
        if todo:
            t0 = time.perf_counter()
            full = getattr(self.predictor, "fold_many", None)
            if callable(full):
                preds = [
                    _Fold(
                        np.asarray(f.coords, np.float32),
                        np.asarray(f.plddt, np.float32),
                        getattr(f, "ptm", None),
                        getattr(f, "iptm", None),
                    )
                    for f in full(todo)
                ]
            else:
                many = getattr(self.predictor, "predict_many", None)
                pairs = many(todo) if callable(many) else [self.predictor.predict(s) for s in todo]
                preds = [
                    _Fold(np.asarray(c, np.float32), np.asarray(p, np.float32)) for c, p in pairs
                ]
            self.seconds += time.perf_counter() - t0
            self.folded += len(todo)
            for s, pred in zip(todo, preds, strict=True):
                self._cache[s] = pred
        out = []
        for s in seqs:
            self._cache.move_to_end(s)
            out.append(self._cache[s])
        while len(self._cache) > self.max_entries:
            self._cache.popitem(last=False)
        return out

    def predict_many(self, sequences: Sequence[str]) -> list[tuple[np.ndarray, np.ndarray]]:
        """``(coords, plddt)`` per sequence, in order (see ``StructurePredictor``)."""
        return [(f.coords, f.plddt) for f in self.fold_many(sequences)]

    def predict(self, sequence: str) -> tuple[np.ndarray, np.ndarray]:
        return self.predict_many([sequence])[0]

    def counters(self) -> dict[str, float]:
        """``{"fold_seconds", "fold_new", "fold_cached"}`` so far (differences give a step's)."""
        return {
            "fold_seconds": float(self.seconds),
            "fold_new": float(self.folded),
            "fold_cached": float(self.hits),
        }


def _overrides(items: Sequence[str]) -> dict[str, Any]:
    out = {}
    for item in items:
        key, _, text = item.partition("=")
        try:
            out[key.strip()] = json.loads(text)
        except json.JSONDecodeError:
            out[key.strip()] = text
    return out


def build_predictor(config) -> FoldCache | None:
    """The run's cached structure predictor (``None`` with ``reward.criteria = "proxy"``).

    ``"structure"`` builds AlphaFold2 (``reward.fold_model`` read from ``reward.fold_params``,
    ``reward.fold_recycles`` recycles, batches of ``reward.fold_batch``) on device
    ``jax.devices()[reward.fold_device]``.

    Raises:
      ConfigError: ``"structure"`` without ``reward.fold_params``; a bad model name, override or
        device index.
      DataError: the parameter file is missing.
      MissingExtraError: the ``fold`` extra is not installed.
    """
    r = config.reward
    if r.criteria == "proxy":
        return None
    if not r.fold_params:
        raise ConfigError(
            "reward.criteria=structure needs AlphaFold2 parameters: --fold-params DIR "
            "(or reward.fold_params=DIR), the folder holding params_<model>.npz"
        )
    import jax

    from fidia_jax import protein

    devices = jax.devices()
    if r.fold_device >= len(devices):
        raise ConfigError(
            f"reward.fold_device={r.fold_device} but only {len(devices)} device(s) are visible"
        )
    # The registry names the class; fidia_jax.protein imports alphafold only when it is built.
    cls = protein.STRUCTURE_PREDICTORS["alphafold2"]
    predictor = cls.from_params_dir(
        r.fold_params,
        r.fold_model,
        num_recycles=r.fold_recycles,
        config_overrides=_overrides(r.fold_overrides),
        batch_size=r.fold_batch,
        device=devices[r.fold_device],
        seed=config.seed,
    )
    return FoldCache(predictor)
