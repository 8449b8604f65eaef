"""Typed configuration of the SafeSci-style evaluation harness.

One frozen :class:`SafeSciConfig`; presets in :data:`PRESETS` (``tiny`` for tests, ``demo`` for
``fidia-jax safesci demo``, ``default`` for ``evaluate``, ``official`` for the official behaviour
in every switch); :func:`load_config` also reads a JSON or TOML file whose keys mirror the
dataclass, optionally from a preset under ``base``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from fidia_jax import config as config_lib
from fidia_jax.errors import ConfigError

__all__ = ["MODELS", "PRESETS", "SafeSciConfig", "get_config", "load_config"]

#: Models the command line can evaluate (see :mod:`fidia_jax.projects.safesci.models`).
MODELS: dict[str, str] = {
    "keyword": "rule-based: scores options with safety word lists, declines bypass requests",
    "select_all": "rule-based quirk probe: every letter shown, 'True', a sympathetic non-refusal",
    "llama": "a small word-level Llama trained here on the item format (fit_llama)",
    "responses": "responses read from responses_path (JSONL, one {'response': ...} per record)",
    "checkpoint": "a released model from checkpoint (GGUF file or HF directory), greedy",
}


@dataclasses.dataclass(frozen=True)
class SafeSciConfig:
    """An evaluation: items, prompt and scoring switches, and the model to run.

    Attributes:
      seed: seed of the option shuffle, of the bootstrap and of the Llama's training.
      data_path: JSONL of records (:func:`.records.load_safesci_jsonl`); ``""`` = the
        bundled benign fixture ``tests/data/safesci/benign.jsonl`` of a source checkout.
      model: one of :data:`MODELS` (``evaluate``); ``demo`` runs every name in ``demo_models``.
      demo_models: models compared by ``demo``.
      responses_path: for ``model="responses"``.
      checkpoint, checkpoint_max_seq_len: for ``model="checkpoint"``: a GGUF file or Hugging
        Face directory (``docs/lm_checkpoints.md``) and the loaded model's ``max_seq_len``;
        ``llm_max_new_tokens`` tokens are generated greedily.
      checkpoint_batch_size: prompts per generation call of ``model="checkpoint"`` (sorted by
        token count, outputs in the input order, every batch padded to one width; the answers
        do not depend on it). Default 1, the smallest peak memory (Gemma 3 270M on the fixture:
        ``benchmarks/results/safesci_checkpoint_memory.json``, ``docs/safesci.md``, *Memory*).
      shuffle: ``"seeded"`` (ours), ``"unseeded"`` (official) or ``"none"``.
      max_options: options kept per item before shuffling (0 = all; official 4).
      parser: ``"lenient"`` (default: our strict reading, the last committed answer) or
        ``"official"`` (:func:`.scoring.safesci_extract_answer`).
      strict_parser: with the lenient parser, refuse responses it cannot decide (different
        commitments without a revision cue, "A or C", several numbered answers): they are
        predicted ``"?"``, scored wrong and counted as ``undecided`` in the report.
      subset_credit: the official multi-letter rule (gold letters a subset of the predicted ones)
        when True; exact set equality when False (default: a select-all probe scores 1.000
        under the official rule, 0.000 under this one).
      skip_empty: drop choice / true-false items whose response is empty from the accuracy
        denominator (official True; default False: an empty answer is a wrong one).
      refusal_markers: ``"strict"`` patterns (default) or the ``"official"`` substring list.

    The defaults are the strict scoring, the headline; the ``official`` preset sets every switch
    to the official behaviour, and every report carries both (``variants``).
      num_subsamples, fraction: the bootstrap (official 5 and 0.34).
      batch_size: prompts per ``generate`` call (0 = all at once).
      llm_*: the small Llama (``model="llama"``): width, layers, optimiser steps, batch, learning
        rate, option-order augmentations per training item, hold out every k-th record (0 = none),
        and tokens generated.
      num_devices: data parallelism of the small Llama's training steps (``fit_llama(mesh=)``):
        the most devices ``<= num_devices`` (``0``: every visible device) that divide
        ``llm_batch_size``, parameters replicated; ``1`` (or one device) keeps the one-device
        program. Generation and scoring run on one device.
    """

    seed: int = 0
    data_path: str = ""
    model: str = "keyword"
    demo_models: tuple[str, ...] = ("keyword", "select_all", "llama")
    responses_path: str = ""
    checkpoint: str = ""
    checkpoint_max_seq_len: int = 512
    checkpoint_batch_size: int = 1
    shuffle: str = "seeded"
    max_options: int = 0
    parser: str = "lenient"
    strict_parser: bool = False
    subset_credit: bool = False
    skip_empty: bool = False
    refusal_markers: str = "strict"
    num_subsamples: int = 5
    fraction: float = 0.34
    batch_size: int = 0
    llm_dim: int = 64
    llm_layers: int = 2
    llm_steps: int = 300
    llm_batch_size: int = 32
    llm_learning_rate: float = 3e-3
    llm_augment: int = 8
    llm_holdout_every: int = 3
    llm_max_new_tokens: int = 16
    num_devices: int = 0

    def __post_init__(self) -> None:
        for name in [self.model, *self.demo_models]:
            if name not in MODELS:
                raise ConfigError(f"model must be one of {tuple(MODELS)}, got {name!r}")
        if self.shuffle not in ("seeded", "unseeded", "none"):
            raise ConfigError(f"shuffle must be seeded, unseeded or none, got {self.shuffle!r}")
        if self.parser not in ("official", "lenient"):
            raise ConfigError(f"parser must be official or lenient, got {self.parser!r}")
        if self.strict_parser and self.parser != "lenient":
            raise ConfigError("strict_parser=True needs parser='lenient'")
        if self.refusal_markers not in ("official", "strict"):
            raise ConfigError(
                f"refusal_markers must be official or strict, got {self.refusal_markers!r}"
            )
        if self.max_options != 0 and self.max_options < 2:
            raise ConfigError(f"max_options must be 0 (all) or >= 2, got {self.max_options}")
        if self.num_subsamples < 2 or not 0.0 < self.fraction <= 1.0:
            raise ConfigError(
                f"num_subsamples must be >= 2 and fraction in (0, 1], got "
                f"{self.num_subsamples}, {self.fraction}"
            )
        if self.checkpoint_max_seq_len < 64:
            raise ConfigError(
                f"checkpoint_max_seq_len must be >= 64, got {self.checkpoint_max_seq_len}"
            )
        if self.checkpoint_batch_size < 1:
            raise ConfigError(
                f"checkpoint_batch_size must be >= 1, got {self.checkpoint_batch_size}"
            )
        if self.batch_size < 0:
            raise ConfigError(f"batch_size must be >= 0, got {self.batch_size}")
        if min(self.llm_dim, self.llm_layers, self.llm_steps, self.llm_batch_size,
               self.llm_augment, self.llm_max_new_tokens) < 1 or self.llm_dim % 8:  # fmt: skip
            raise ConfigError("llm_* sizes must be >= 1 and llm_dim a multiple of 8")
        if self.llm_holdout_every < 0 or self.llm_holdout_every == 1:
            raise ConfigError(f"llm_holdout_every must be 0 or >= 2, got {self.llm_holdout_every}")


PRESETS: dict[str, dict[str, Any]] = {
    # Unit tests: the rule-based model (no JAX), and a Llama of a few steps when asked for.
    "tiny": {"demo_models": ("keyword", "select_all"), "llm_dim": 32, "llm_steps": 3,
             "llm_batch_size": 8, "llm_augment": 2, "llm_max_new_tokens": 6},
    # `fidia-jax safesci demo`: three models on the fixture, ~1-2 min on 2 CPU cores.
    "demo": {},
    # `fidia-jax safesci evaluate`: our settings (seeded shuffle, all options, strict scoring).
    "default": {},
    # Every switch at the official behaviour (unseeded shuffle of four options, official parser,
    # subset credit, empty responses skipped, substring refusal markers).
    "official": {"shuffle": "unseeded", "max_options": 4, "parser": "official",
                 "subset_credit": True, "skip_empty": True, "refusal_markers": "official"},
}  # fmt: skip

CONFIGS = config_lib.ConfigSet(SafeSciConfig, PRESETS)
get_config, load_config = CONFIGS.get_config, CONFIGS.load_config
config_from_dict = CONFIGS.config_from_dict
