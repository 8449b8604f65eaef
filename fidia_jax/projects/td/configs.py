"""Typed configuration of the TD(0) step-size comparison on random MRPs.

One frozen :class:`TdConfig`; presets in :data:`PRESETS` (``tiny`` for tests, ``demo`` for a
short CPU run, ``default`` for the figures of ``docs/benchmarks.md``); :func:`load_config` also
reads a JSON or TOML file whose keys mirror the dataclass, optionally from a preset under ``base``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from fidia_jax import config as config_lib
from fidia_jax.errors import ConfigError

__all__ = ["PRESETS", "SCHEDULES", "TdConfig", "get_config", "load_config"]

#: The i.i.d. schedules compared (config key -> row name in the results): the exponential horizon
#: schedule ``eta0 T^(-t/T)``, a constant step, ``1/t`` without and with an offset (all tuned
#: over ``eta_grid``), and ``1/(omega (t + 1/omega + 1))``, told each MRP's smallest eigenvalue.
SCHEDULES: dict[str, str] = {
    "exponential": "exponential eta0*T^(-t/T)",
    "constant": "constant eta0",
    "inverse_time": "1/t: eta0/(1+t)",
    "inverse_time_offset": "1/t: eta0*100/(t+100)",
    "told_omega": "1/(omega t) [told omega]",
}


@dataclasses.dataclass(frozen=True)
class TdConfig:
    """A schedule comparison: TD(0) from ``theta = 0`` on ``num_mrps`` random MRPs per horizon.

    Attributes:
      seed: the root of four independent streams (``jax.random.fold_in(key(seed), tag)``,
        ``train.STREAMS``): the reported MRPs, their TD samples, the tuning MRPs and theirs.
        Before 2026-12-05 they were ``key(seed)`` ... ``key(seed + 3)``, so the tuning MRPs
        of seed ``s`` were the reported MRPs of seed ``s + 2``.
      num_mrps: random MRPs (vmapped).
      n_states, n_features, discount: of every MRP
        (:func:`fidia_jax.projects.td.random_linear_mrp`).
      horizons: the step counts ``T`` compared (each is a separate run of every schedule).
      eta_grid: initial step sizes tried for every omega-free schedule; the best one per ``T``
        (lowest mean error) is reported.
      schedules: which i.i.d. schedules to run (keys of :data:`SCHEDULES`; ``exponential``, the
        reference of every ratio, is required).
      markovian: also run the Markovian rows (one trajectory per MRP, exponential schedule, plain
        and regularised with ``lambda = 1/sqrt(T)``).
      tuning: where ``eta_0`` is chosen. ``"separate"`` (default): on other MRPs with other
        transitions (their own streams of ``seed``), so the reported error
        is measured on MRPs and samples the choice never saw. ``"same"``: on the reported MRPs
        and transitions themselves (the behaviour before 2026-12-04; every tuned row's error is
        then the minimum over the grid, an optimistic number).
    """

    seed: int = 0
    num_mrps: int = 64
    n_states: int = 20
    n_features: int = 5
    discount: float = 0.9
    horizons: tuple[int, ...] = (1000, 10000, 100000)
    eta_grid: tuple[float, ...] = (0.03, 0.1, 0.3, 1.0)
    schedules: tuple[str, ...] = tuple(SCHEDULES)
    markovian: bool = True
    tuning: str = "separate"

    def __post_init__(self) -> None:
        if self.tuning not in ("separate", "same"):
            raise ConfigError(f"tuning must be 'separate' or 'same', got {self.tuning!r}")
        if self.num_mrps < 1:
            raise ConfigError(f"num_mrps must be >= 1, got {self.num_mrps}")
        if not 1 <= self.n_features <= self.n_states:
            raise ConfigError(
                f"n_features must be in [1, n_states={self.n_states}], got {self.n_features}"
            )
        if not 0.0 <= self.discount < 1.0:
            raise ConfigError(f"discount must be in [0, 1), got {self.discount}")
        if not self.horizons or min(self.horizons) < 1:
            raise ConfigError(f"horizons must be ints >= 1 (at least one), got {self.horizons}")
        if not self.eta_grid or min(self.eta_grid) <= 0:
            raise ConfigError(f"eta_grid must be floats > 0 (at least one), got {self.eta_grid}")
        unknown = [name for name in self.schedules if name not in SCHEDULES]
        if unknown or "exponential" not in self.schedules:
            raise ConfigError(
                f"schedules must include 'exponential' and name only {tuple(SCHEDULES)}, "
                f"got {self.schedules}"
            )


PRESETS: dict[str, dict[str, Any]] = {
    # Unit tests (compilation-bound, ~7 s): 4 small MRPs, one short horizon, two i.i.d. rows.
    "tiny": {
        "num_mrps": 4,
        "n_states": 8,
        "n_features": 3,
        "horizons": (300,),
        "eta_grid": (0.3, 1.0),
        "schedules": ("exponential", "inverse_time"),
        "markovian": False,
    },
    # `fidia-jax td demo`: two horizons on 16 MRPs, ~40 s on 2 CPU cores.
    "demo": {"num_mrps": 16, "horizons": (1000, 10000)},
    # docs/benchmarks.md (`python benchmarks/td_schedules.py`, ~10 min on 2 CPU cores).
    "default": {},
}


CONFIGS = config_lib.ConfigSet(TdConfig, PRESETS)
get_config, load_config = CONFIGS.get_config, CONFIGS.load_config
config_from_dict = CONFIGS.config_from_dict
