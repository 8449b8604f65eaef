"""Prompt lengths against a checkpoint's context, checked before the model loads.

Loading a released model takes minutes and gigabytes; a prompt that does not fit should fail in
seconds, with one message naming it. :func:`check_prompt_lengths` needs only the tokenizer
(:func:`fidia_jax.models.load_tokenizer`) and the context length of the checkpoint's metadata
(:func:`checkpoint_context_length`: the GGUF header's ``<arch>.context_length`` or
``config.json``'s ``max_position_embeddings``), never the weights.
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Sequence
from typing import Any

from fidia_jax.errors import CheckpointError, ConfigError, DataError

__all__ = ["check_prompt_lengths", "checkpoint_context_length"]

#: The loaders' default ``max_seq_len`` cap (``load_gguf`` / ``hf_llama_config``).
_DEFAULT_CAP = 8192


def checkpoint_context_length(path: str | os.PathLike) -> int | None:
    """The context length a checkpoint was trained for, read from its metadata only.

    Args:
      path: a ``.gguf`` file (header field ``<general.architecture>.context_length``) or a
        Hugging Face directory (``config.json``: ``max_position_embeddings``; for a multimodal
        config, that of ``text_config``).

    Returns:
      The length in tokens, or ``None`` when the metadata does not say.

    Raises:
      CheckpointError: no such file or directory, or a file that is not readable GGUF.
    """
    p = os.fspath(path)
    if os.path.isdir(p):
        file = os.path.join(p, "config.json")
        if not os.path.isfile(file):
            return None
        with open(file) as f:
            hf = json.load(f)
        value = hf.get("max_position_embeddings")
        if value is None and isinstance(hf.get("text_config"), dict):
            value = hf["text_config"].get("max_position_embeddings")
        return None if value is None else int(value)
    if not os.path.isfile(p):
        raise CheckpointError(f"checkpoint_context_length: no file or directory {p!r}")
    return _gguf_context_length(p)


# GGUF value types: fixed sizes (struct format), 8 = string, 9 = array
_GGUF_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q",
                 11: "q", 12: "d"}  # fmt: skip


def _gguf_context_length(file: str) -> int | None:
    """``<general.architecture>.context_length`` of a GGUF file, read from the key-value header
    in order and stopped there (``gguf.GGUFReader`` parses every field, the vocabulary
    included: tens of seconds for a 262 k-token vocabulary on a loaded CPU; this reads a few
    hundred bytes).

    Raises:
      CheckpointError: not a GGUF file (magic), or a header cut short / of an unknown type.
    """
    where = "checkpoint_context_length"
    with open(file, "rb") as f:

        def read(fmt: str):
            size = struct.calcsize(fmt)
            raw = f.read(size)
            if len(raw) != size:
                raise CheckpointError(f"{where}: {file!r}: GGUF header cut short")
            return struct.unpack(end + fmt, raw)[0]

        def string() -> bytes:
            n = read("Q")
            raw = f.read(n)
            if len(raw) != n:
                raise CheckpointError(f"{where}: {file!r}: GGUF header cut short")
            return raw

        def value(kind: int):
            if kind in _GGUF_SCALARS:
                return read(_GGUF_SCALARS[kind])
            if kind == 8:
                return string()
            if kind == 9:
                sub, count = read("I"), read("Q")
                if sub in _GGUF_SCALARS:
                    f.seek(count * struct.calcsize(_GGUF_SCALARS[sub]), 1)
                else:
                    for _ in range(count):
                        value(sub)
                return None
            raise CheckpointError(f"{where}: {file!r}: unknown GGUF value type {kind}")

        if f.read(4) != b"GGUF":
            raise CheckpointError(f"{where}: {file!r} is not a GGUF file (no GGUF magic)")
        end = "<"
        version = read("I")
        if version > 0xFFFF:  # a big-endian file
            end, version = ">", struct.unpack(">I", struct.pack("<I", version))[0]
        if version < 2:
            raise CheckpointError(f"{where}: {file!r}: GGUF version {version} is not supported")
        _tensors, n_kv = read("Q"), read("Q")
        arch = None
        for _ in range(n_kv):
            key = string().decode("utf-8", "replace")
            v = value(read("I"))
            if key == "general.architecture" and isinstance(v, bytes):
                arch = v.decode("utf-8", "replace")
            elif arch is not None and key == f"{arch}.context_length":
                return int(v)
    return None


def check_prompt_lengths(
    path_or_tokenizer: Any,
    prompts: Sequence[str],
    *,
    max_new_tokens: int,
    max_seq_len: int | None = None,
    where: str = "check_prompt_lengths",
    names: Sequence[str] | None = None,
    context_length: int | None = None,
) -> list[int]:
    """Token counts of ``prompts``; raises when one plus ``max_new_tokens`` does not fit.

    Each prompt is encoded as the generators encode it (``tokenizer.encode``: BOS first when the
    tokenizer asks for one), and ``len + max_new_tokens`` is compared with the limit: the
    smaller of ``max_seq_len`` (the loaded model's, e.g. a config's ``checkpoint_max_seq_len``)
    and the checkpoint's trained context (:func:`checkpoint_context_length`, when
    ``path_or_tokenizer`` is a path). Without ``max_seq_len`` the limit is the context capped at
    8192, the loaders' default. This is exactly the bound of
    :func:`fidia_jax.models.sample_llama` (prompt + new tokens <= ``max_seq_len``), checked
    before anything loads.

    Args:
      path_or_tokenizer: a checkpoint path (GGUF file or Hugging Face directory) or an already
        loaded :class:`fidia_jax.models.LMTokenizer` (then ``max_seq_len`` is required).
      prompts: the texts.
      max_new_tokens: tokens to be generated after each prompt (``>= 0``).
      max_seq_len: the model's position limit; ``None``: the checkpoint's context.
      where: the caller's name, first in the message.
      names: one label per prompt for the message (e.g. ``"items.jsonl record 12"``); default
        ``"prompt i"``.
      context_length: the checkpoint's trained context when a tokenizer is given (read it once
        with :func:`checkpoint_context_length`); ignored for a path, whose metadata is read.

    Returns:
      ``(len(prompts),)`` list of token counts (BOS included).

    Raises:
      DataError: a prompt too long; the message names the first one (its label, its token
        count, ``max_new_tokens``, the limit and where the limit comes from) and how many others
        are too long, and says what to change.
      ConfigError: ``max_new_tokens < 0``, ``max_seq_len < 1``, ``names`` of another length,
        or no limit known (a tokenizer without ``max_seq_len``, or metadata without a context
        length and no ``max_seq_len``).
      CheckpointError: from :func:`fidia_jax.models.load_tokenizer` /
        :func:`checkpoint_context_length` (missing path, broken file).
    """
    if (
        isinstance(max_new_tokens, bool)
        or not isinstance(max_new_tokens, int)
        or max_new_tokens < 0
    ):
        raise ConfigError(f"{where}: max_new_tokens must be an int >= 0, got {max_new_tokens!r}")
    if max_seq_len is not None and int(max_seq_len) < 1:
        raise ConfigError(f"{where}: max_seq_len must be >= 1, got {max_seq_len}")
    if names is not None and len(names) != len(prompts):
        raise ConfigError(f"{where}: {len(names)} names for {len(prompts)} prompts")
    context = context_length
    if isinstance(path_or_tokenizer, (str, os.PathLike)):
        from fidia_jax.models._checkpoints import load_tokenizer

        tok = load_tokenizer(path_or_tokenizer)
        context = checkpoint_context_length(path_or_tokenizer)
    else:
        tok = path_or_tokenizer
    if max_seq_len is None and context is None:
        raise ConfigError(
            f"{where}: no position limit: give max_seq_len (the checkpoint's metadata names no "
            "context length)"
        )
    if max_seq_len is None:
        limit, source = min(int(context), _DEFAULT_CAP), f"the checkpoint's context {context}"
        if context > _DEFAULT_CAP:
            source += f", capped at {_DEFAULT_CAP} as the loaders do"
    elif context is not None and int(context) < int(max_seq_len):
        limit, source = int(context), f"the checkpoint's trained context {context}"
    else:
        limit, source = int(max_seq_len), f"max_seq_len {max_seq_len}"
    counts = [len(tok.encode(p)) for p in prompts]
    bad = [i for i, n in enumerate(counts) if n + max_new_tokens > limit]
    if bad:
        i = bad[0]
        label = names[i] if names is not None else f"prompt {i}"
        more = f" ({len(bad) - 1} other prompts too long as well)" if len(bad) > 1 else ""
        room = (
            f"a max_seq_len up to the context {context}, "
            if context is not None and limit < context
            else ""
        )
        raise DataError(
            f"{where}: {label} is {counts[i]} tokens; with max_new_tokens {max_new_tokens} that "
            f"is {counts[i] + max_new_tokens} > the limit {limit} ({source}){more}. Shorten "
            f"the prompt, or set {room}fewer new tokens"
        )
    return counts
