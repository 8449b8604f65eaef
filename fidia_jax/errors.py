"""Typed exceptions raised by fidia_jax.

Library code raises these; the CLI turns them into one line on stderr and exit code 2.
Each class also derives from the matching builtin so callers that catch ``ValueError`` /
``FileNotFoundError`` keep working.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

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
    "MissingExtraError",
    "needs_extra",
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


class MissingExtraError(FidiaError, ModuleNotFoundError):
    """An optional dependency is not installed; the message names the extra that brings it.

    Also a :class:`ModuleNotFoundError` (``name`` is the missing module), so code that catches
    ``ImportError`` keeps working. The command line prints it as one line with exit code 2.
    """

    def __init__(self, module: str | None, extra: str, what: str | None = None):
        module = module or "?"
        need = f"{what} needs" if what else "this needs"
        super().__init__(
            f"{need} the '{extra}' extra (no module named {module!r}): "
            f"pip install 'fidia_jax[{extra}]'",
            name=module,
        )
        self.extra = extra


@contextlib.contextmanager
def needs_extra(extra: str, what: str | None = None) -> Iterator[None]:
    """Imports of an optional dependency: a missing module becomes a :class:`MissingExtraError`.

    The one way the library imports a package that is not in the core install (jax, flax, optax,
    orbax-checkpoint, numpy, ml_dtypes, rich): inside the function that uses it, within this
    block, so that ``import fidia_jax.<package>`` never needs it::

        def wasserstein1_sinkhorn(...):
            with needs_extra("sciml", "wasserstein1_sinkhorn"):
                from ott.geometry import geometry

    Args:
      extra: the ``pip install 'fidia_jax[<extra>]'`` extra that installs the module.
      what: what needs it (a function name), for the message.

    Raises:
      MissingExtraError: an import inside the block found no module.
    """
    try:
        yield
    except MissingExtraError:
        raise
    except ModuleNotFoundError as e:
        raise MissingExtraError(e.name, extra, what) from e
