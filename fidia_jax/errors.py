"""Typed exceptions raised by fidia_jax.

Library code raises these; the CLI turns them into one line on stderr and exit code 2.
Each class also derives from the matching builtin so callers that catch ``ValueError`` /
``FileNotFoundError`` keep working.
"""

from __future__ import annotations

__all__ = [
    "FidiaError",
    "StructureError",
    "ChainError",
    "MotifSpecError",
    "CheckpointError",
    "UnsafePickleError",
    "ConfigError",
    "DataError",
    "TrainingError",
]


class FidiaError(Exception):
    """Base class of every error fidia_jax raises on purpose."""


class StructureError(FidiaError, ValueError):
    """A structure file is missing, empty, unparseable or holds no usable protein residues."""


class ChainError(StructureError):
    """A requested chain does not exist in the structure (or holds no protein residues)."""


class MotifSpecError(FidiaError, ValueError):
    """A motif / contig specification cannot be parsed or points outside the chain."""


class CheckpointError(FidiaError, ValueError):
    """A weights file or training checkpoint is missing, malformed or incompatible."""


class UnsafePickleError(CheckpointError):
    """A pickle inside a checkpoint asks for a class or function outside the allow-list."""


class ConfigError(FidiaError, ValueError):
    """A configuration value is invalid (unknown name, out of range, inconsistent)."""


class DataError(FidiaError, ValueError):
    """A dataset directory or file is missing or malformed."""


class TrainingError(FidiaError, RuntimeError):
    """Training cannot go on: a non-finite loss or gradient beyond the allowed count."""
