"""HIT-VAR's hierarchical scale schedule: which token prefix decodes to which SR scale.

The next-scale token grids ``s_1 < ... < s_K`` of VAR's residual quantiser
(:func:`fidia_jax.layers.multiscale_residual_quantize`) are read by prefixes: output scale
``x m`` decodes the first ``prefix(m)`` token scales (:func:`hierarchical_scale_schedule`), and
the transformer attends block-causally over scales (:func:`fidia_jax.layers.block_causal_mask`).

References:
  HIT-VAR: hierarchical image tokenization for multi-scale super-resolution, ICML 2026,
  arXiv:2605.14891 (abstract only: the prefix -> scale rule is our reconstruction).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from fidia_jax import layers

__all__ = ["HierarchicalSchedule", "hierarchical_scale_schedule"]


@dataclasses.dataclass(frozen=True)
class HierarchicalSchedule:
    """Which token prefix decodes to which SR scale.

    Attributes:
      lr_size: LR side (pixels); scale ``xm`` outputs ``m * lr_size`` pixels.
      scales: the SR scales ``(1, ..., M)``.
      latent_size: side of the latent map (of the HR image at ``xM``).
      grids: token-grid sides ``s_1 < ... < s_K = latent_size``.
      prefixes: ``prefixes[m - 1]`` = number of token scales decoded for output scale ``m``
        (read it with :meth:`prefix_length`).
    """

    lr_size: int
    scales: tuple[int, ...]
    latent_size: int
    grids: tuple[int, ...]
    prefixes: tuple[int, ...]

    def prefix_length(self, scale: int) -> int:
        """Number of token scales decoded for SR scale ``scale``."""
        self._check_scale(scale)
        return self.prefixes[scale - 1]

    def _check_scale(self, scale: int) -> None:
        if scale not in self.scales:
            raise ValueError(f"scale must be one of {self.scales}, got {scale}")

    @property
    def num_tokens(self) -> int:
        """``T = sum_k s_k^2``."""
        return int(sum(s * s for s in self.grids))

    @property
    def offsets(self) -> tuple[int, ...]:
        """Start of scale ``k``'s tokens in the flat sequence (``K + 1`` entries)."""
        return tuple(int(x) for x in np.cumsum([0] + [s * s for s in self.grids]))

    def output_size(self, scale: int) -> int:
        """Side of the image decoded at SR scale ``scale``."""
        self._check_scale(scale)
        return scale * self.lr_size

    def mask(self) -> np.ndarray:
        """The block-causal mask (:func:`block_causal_mask`)."""
        return layers.block_causal_mask(self.grids)


def hierarchical_scale_schedule(
    lr_size: int, max_scale: int, grids: tuple[int, ...], latent_size: int | None = None
) -> HierarchicalSchedule:
    """The hierarchical tokenisation's prefix -> scale rule (reconstruction).

    The HR image at ``x max_scale`` has side ``hr = max_scale * lr_size`` and a latent of side
    ``latent_size`` (default ``hr / 4``). Output scale ``m`` has ``m / max_scale`` of the HR
    resolution, so it reads the token scales whose grid is no finer than
    ``latent_size * m / max_scale``: ``prefix(m) = #{k : s_k <= latent_size * m / max_scale}``
    (at least 1), ``prefixes[m - 1]``. Every prefix is a nested prefix of the next (monotone in ``m``), and
    ``prefix(max_scale) = K``.

    Args:
      lr_size: LR side ``>= 1``.
      max_scale: largest SR factor ``M >= 1`` (scales ``1..M``).
      grids: increasing token-grid sides ending at ``latent_size``.
      latent_size: latent side; must divide ``hr``.

    Returns:
      :class:`HierarchicalSchedule`.

    Raises:
      ValueError: a size that is not a positive int, a latent side that does not divide the HR
        side, or grids not increasing / not ending at the latent side.
    """
    where = "hierarchical_scale_schedule"
    for name, v in (("lr_size", lr_size), ("max_scale", max_scale)):
        if int(v) != v or v < 1:
            raise ValueError(f"{where}: {name} must be an int >= 1, got {v}")
    hr = lr_size * max_scale
    latent_size = hr // 4 if latent_size is None else latent_size
    if latent_size < 1 or hr % latent_size:
        raise ValueError(
            f"{where}: latent_size {latent_size} must divide the HR side {hr} "
            f"(= lr_size {lr_size} x max_scale {max_scale})"
        )
    grids = tuple(int(g) for g in grids)
    if not grids or grids[0] < 1 or any(a >= b for a, b in zip(grids, grids[1:], strict=False)):
        raise ValueError(f"{where}: grids must be increasing positive ints, got {grids}")
    if grids[-1] != latent_size:
        raise ValueError(
            f"{where}: the last grid ({grids[-1]}) must equal the latent side {latent_size}"
        )
    prefixes = tuple(
        max(1, sum(1 for s in grids if s * max_scale <= latent_size * m))
        for m in range(1, max_scale + 1)
    )
    return HierarchicalSchedule(
        int(lr_size), tuple(range(1, max_scale + 1)), int(latent_size), grids, prefixes
    )
