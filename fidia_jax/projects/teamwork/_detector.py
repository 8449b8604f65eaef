"""The fitted-detector record shared by TeamWork's driver and its peers, and two helpers both use
(the cached Adam of a learning rate, the moving average of a score)."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import numpy as np
import optax

__all__ = ["Detector"]


@dataclasses.dataclass
class Detector:
    """A fitted method: ``score(x)`` maps a raw ``(T, C)`` series to ``(T,)`` anomaly scores.

    Attributes:
      method: key of :data:`fidia_jax.projects.teamwork.METHODS`.
      score: the scoring function (raw, unstandardised input; ``T >= window`` for neural ones).
      info: method facts (roles, periods, final loss, fit seconds).
    """

    method: str
    score: Any
    info: dict[str, Any]


@functools.cache
def _adam(learning_rate: float) -> optax.GradientTransformation:
    """One optax object per learning rate, so the jitted step compiles once per shape."""
    return optax.flatten(optax.adam(learning_rate))


def _moving_average(s: np.ndarray, width: int) -> np.ndarray:
    if width <= 1:
        return s
    pad = np.pad(s, (width // 2, width - 1 - width // 2), mode="edge")
    return np.convolve(pad, np.ones(width) / width, mode="valid")
