"""Value-domain checks of the models' inputs: token ids, temperatures, positions (issue 17 #12).

One rule for every public entry point of :mod:`fidia_jax.models` that takes token ids, a sampling
temperature, prompt lengths or decoding positions:

* **Concrete values** (Python / numpy scalars, numpy arrays, concrete ``jax.Array``) are checked
  at the call and a value out of its domain raises ``ValueError`` naming the function, the
  argument, the first offending entry and the allowed range.
* **Traced values** (inside ``jit`` / ``vmap`` / ``grad`` / ``scan``) cannot raise. There an
  out-of-domain value is made *visible* instead of silently wrong: each caller documents its rule
  (token ids are mapped to ``vocab``, one past the table, so the embedding lookup returns NaN and
  every output that reads them is NaN; rows with invalid positions get NaN outputs).

For valid inputs the checks change no value: the traced path only adds ``jnp.where`` selects that
pick the original values.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np


def concrete(x: Any) -> np.ndarray | None:
    """``x`` as a numpy array when its value is known now, ``None`` when it is traced."""
    if any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree.leaves(x)):
        return None
    try:
        return np.asarray(x)
    except (jax.errors.TracerArrayConversionError, jax.errors.ConcretizationTypeError):
        return None


def _first_bad(bad: np.ndarray) -> str:
    idx = tuple(int(i) for i in np.argwhere(bad)[0])
    return str(idx[0]) if len(idx) == 1 else str(idx)


def check_token_ids(tokens: Any, vocab: int, *, name: str, where: str) -> jax.Array:
    """Token ids in ``[0, vocab)``: raises when concrete, marks out-of-range ids when traced.

    Args:
      tokens: integer array of token ids (any shape).
      vocab: table size; valid ids are ``0 .. vocab - 1``.
      name: the argument's name (message).
      where: the public function (message prefix).

    Returns:
      ``tokens`` as a ``jax.Array`` (same dtype). When traced, every id outside ``[0, vocab)``
      is replaced by ``vocab`` (one past the table), which ``jnp.take`` / ``nnx.Embed`` /
      ``jnp.take_along_axis`` read as NaN (their default ``"fill"`` mode), instead of a negative
      id wrapping around to the end of the table.

    Raises:
      ValueError: a concrete id outside ``[0, vocab)``.
    """
    host = concrete(tokens)
    if host is not None:
        if host.size and not np.issubdtype(host.dtype, np.integer):
            raise ValueError(f"{where}: {name} must be integer token ids, got dtype {host.dtype}")
        bad = (host < 0) | (host >= vocab)
        if bad.any():
            raise ValueError(
                f"{where}: {name} must be token ids in [0, {vocab}), got {int(host[bad][0])} at "
                f"index {_first_bad(bad)} ({int(bad.sum())} out of range)"
            )
        return jnp.asarray(tokens)
    tokens = jnp.asarray(tokens)
    if jnp.iinfo(tokens.dtype).max < vocab:  # e.g. uint8 bytes with vocab 256: room for the marker
        tokens = tokens.astype(jnp.int32)
    return jnp.where((tokens >= 0) & (tokens < vocab), tokens, jnp.asarray(vocab, tokens.dtype))


def check_permutations(order: Any, *, name: str, where: str) -> jax.Array | None:
    """Each row (last axis, length ``L``) of ``order`` must be a permutation of ``0 .. L - 1``.

    Args:
      order: integer array ``(..., L)`` of positions (a decoding order).
      name, where: as in :func:`check_token_ids`.

    Returns:
      ``None`` when ``order`` is concrete (and valid); when traced, the ``(...)`` bool array of
      rows that are permutations, for the caller to turn the other rows' outputs into NaN.

    Raises:
      ValueError: a concrete row that is not a permutation (a position repeated, missing or out
        of range).
    """
    host = concrete(order)
    length = jnp.shape(order)[-1]
    if host is not None:
        ok = (np.sort(host, axis=-1) == np.arange(length)).all(-1)
        if not ok.all():
            row = tuple(int(i) for i in np.argwhere(~ok)[0])
            vals = host[row].astype(np.int64)
            out = vals[(vals < 0) | (vals >= length)]
            if out.size:
                what = f"position {int(out[0])} outside [0, {length})"
            else:
                what = f"position {int(np.flatnonzero(np.bincount(vals, minlength=length) > 1)[0])} repeated"
            at = f" in row {row[0] if len(row) == 1 else row}" if row else ""
            raise ValueError(
                f"{where}: every row of {name} must be a permutation of 0..{length - 1}; {what}{at}"
            )
        return None
    order = jnp.asarray(order)
    ranks = jnp.broadcast_to(jnp.arange(length, dtype=order.dtype), order.shape)
    return jnp.all(jnp.sort(order, axis=-1) == ranks, axis=-1)


def check_temperature(temperature: Any, *, where: str) -> jax.Array:
    """A sampling temperature: a scalar ``T > 0`` (``+inf`` = uniform over allowed tokens).

    Returns:
      ``temperature`` as a float32 scalar ``jax.Array``. A traced value is returned unchecked;
      the sampler documents what it does with ``T <= 0`` or NaN under tracing.

    Raises:
      ValueError: not a scalar, or a concrete value that is not ``> 0`` (0, negative, NaN).
    """
    if jnp.ndim(temperature) != 0:
        raise ValueError(
            f"{where}: temperature must be a scalar, got shape {jnp.shape(temperature)}"
        )
    host = concrete(temperature)
    if host is not None and not float(host) > 0:
        raise ValueError(f"{where}: temperature must be > 0, got {float(host)}")
    return jnp.asarray(temperature, jnp.float32)


def check_right_padded(tokens: Any, lengths: Any, *, prefix: int = 0, where: str) -> None:
    """Refuses a batch that looks left-padded where right padding is the contract.

    With ``lengths`` given, row ``b`` is read as ``tokens[b, :lengths[b] - prefix]``. A batch
    is taken as left-padded when, over the rows shorter than ``T``, the leading ``T - length``
    tokens are all one id (the pad) while the trailing ``T - length`` tokens (where right
    padding would be) are not all one id. Only concrete values are checked (nothing can raise
    under tracing); a batch whose padding cannot be told apart (one pad token, or trailing
    content that repeats one id) passes.

    Raises:
      ValueError: the batch looks left-padded (the message names a row and the way out).
    """
    tok, lens = concrete(tokens), concrete(lengths)
    if tok is None or lens is None or tok.ndim != 2 or lens.shape != tok.shape[:1]:
        return
    t = tok.shape[1]
    lt = np.clip(lens.astype(np.int64) - int(prefix), 0, t)
    short = np.flatnonzero(lt < t)
    if not short.size:
        return
    tails = np.concatenate([tok[b, lt[b] :] for b in short])
    heads = np.concatenate([tok[b, : t - lt[b]] for b in short])
    if np.unique(tails).size == 1 or np.unique(heads).size != 1:
        return
    b = int(short[0])
    raise ValueError(
        f"{where}: tokens look left-padded: every row shorter than T = {t} starts with "
        f"id {int(heads[0])} repeated (row {b}: length {int(lens[b])}, tokens "
        f"{tok[b].tolist()}), while the positions past its length hold other tokens; rows are "
        "read as tokens[b, :length] (right padding). Right-pad the prompts, or pass "
        "padding='left' to Llama.prefill (padding='right' skips this check)."
    )
