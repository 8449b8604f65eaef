"""Training a small :class:`~fidia_jax.models.Llama` / ``LlamaVL`` on a fixed set of sequences.

The synthetic-task drivers (DyCon, AlgoTrace, residual-update geometry, SafeSci's word-level
model) each train a tiny model on sequences whose ground truth they know: padded ``(N, T)``
token arrays with a per-token loss weight (0 on padding, or 1 only on answer tokens), optionally
with image patches before the text. :func:`fit_llama` is that run, once, on the package's step
and loop (progress, ``metrics.jsonl``, checkpoints and resume when given a workdir), on one
device or data-parallel on a :func:`fidia_jax.parallel.data_mesh` (also across processes).
"""

from __future__ import annotations

import os
from typing import Any, TypeVar

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from fidia_jax import parallel
from fidia_jax.errors import TrainingError
from fidia_jax.losses import next_token_loss
from fidia_jax.models import Llama, LlamaVL
from fidia_jax.train._fit import fit
from fidia_jax.train._step import init_train_state, make_train_step, merge_model, split_model

__all__ = ["fit_llama"]


#: The model type ``fit_llama`` returns: the one it was given.
_LlamaT = TypeVar("_LlamaT", Llama, LlamaVL)


def fit_llama(
    model: _LlamaT,
    tokens: Any,
    *,
    weights: Any = None,
    patches: Any = None,
    steps: int,
    batch_size: int,
    tx: optax.GradientTransformation,
    key: jax.Array,
    workdir: str | os.PathLike | None = None,
    run: str = "llama",
    quiet: bool = False,
    mesh: Mesh | None = None,
) -> tuple[_LlamaT, np.ndarray]:
    """Trains ``model`` in place on ``tokens`` with the next-token loss; returns it and the losses.

    Step ``t`` draws ``batch_size`` rows uniformly with replacement with
    ``jax.random.fold_in(key, t)`` and applies ``tx`` to the gradient of
    :func:`fidia_jax.losses.next_token_loss` with ``weights`` (one jitted, donated step of
    :func:`fidia_jax.train.make_train_step`, run by :func:`fidia_jax.train.fit`). For a
    ``LlamaVL``, ``patches`` ``(N, P, F)`` go before the text, and the loss reads the logits at
    the ``T`` text positions only (the first text token is not predicted).

    Args:
      model: a ``Llama`` or ``LlamaVL``; its parameters are updated in place.
      tokens: ``(N, T)`` int token ids, ``T <= max_seq_len`` (``P + T`` for a ``LlamaVL``).
      weights: ``(N, T)`` per-target-token loss weights; ``None`` = all ones.
      patches: ``(N, P, F)`` float patches; required for a ``LlamaVL``, refused for a ``Llama``.
      steps: optimiser steps (``>= 1``).
      batch_size: rows per step (``>= 1``).
      tx: any optax transformation.
      key: the minibatch key.
      workdir: with a directory, ``fit``'s files go there under ``run`` (metrics, checkpoints;
        a rerun resumes); ``None``: no files.
      run: the run's name (display and files).
      quiet: no progress display.
      mesh: train data-parallel on this :func:`fidia_jax.parallel.data_mesh` (axis ``"data"``;
        ``batch_size`` a multiple of its size): the step's rows (the same draws as without a
        mesh) are gathered on the devices and split along the batch over ``"data"``, the
        parameters and optimiser state replicated, gradients averaged across devices by GSPMD
        (``make_train_step(mesh=)``). Across processes (a driver that called
        :func:`fidia_jax.parallel.initialize_distributed`) every process runs this with the
        same arguments, each feeds the rows of its own devices, and only process 0 writes
        files. The losses equal a one-device run's up to the summation order of the
        cross-device mean (float32 ulps). The returned model's parameters are ordinary
        single-device arrays again. ``None``: one device, as before.

    Returns:
      ``(model, losses)``: the trained model (the same object) and ``(steps,)`` float32 training
      losses, each measured before its update.

    Raises:
      ValueError: shapes that do not agree, ``patches`` given (or missing) for the wrong model
        kind, ``steps`` or ``batch_size`` below 1, or ``batch_size`` not a multiple of the
        ``mesh``'s ``"data"`` size.
      TrainingError: a non-finite loss or update (the step is named; the model keeps its last
        finite parameters).
    """
    tokens = jnp.asarray(tokens, jnp.int32)
    if tokens.ndim != 2 or tokens.shape[0] < 1:
        raise ValueError(f"fit_llama: tokens must be (N, T) with N >= 1, got {tokens.shape}")
    weights = (
        jnp.ones(tokens.shape, jnp.float32)
        if weights is None
        else jnp.asarray(weights, jnp.float32)
    )
    if weights.shape != tokens.shape:
        raise ValueError(f"fit_llama: weights {weights.shape} must match tokens {tokens.shape}")
    vision = isinstance(model, LlamaVL)
    if vision != (patches is not None):
        raise ValueError(
            "fit_llama: a LlamaVL needs patches=(N, P, F) and a Llama takes none; got "
            f"{type(model).__name__} with patches={'None' if patches is None else 'given'}"
        )
    if vision:
        patches = jnp.asarray(patches, jnp.float32)
        if patches.ndim != 3 or patches.shape[0] != tokens.shape[0]:
            raise ValueError(
                f"fit_llama: patches must be (N, P, F) with N = {tokens.shape[0]}, got "
                f"{patches.shape}"
            )
    if int(steps) < 1 or int(batch_size) < 1:
        raise ValueError(f"fit_llama: steps and batch_size must be >= 1, got {steps}, {batch_size}")

    graphdef, params, rest = split_model(model)
    n_text = tokens.shape[1]
    data = {"tokens": tokens, "weights": weights}
    if vision:
        data["patches"] = patches

    def loss_fn(p, rows):
        m = merge_model(graphdef, p, rest)
        tok = rows["tokens"]
        logits = m(rows["patches"], tok)[:, -n_text:] if vision else m(tok)
        return next_token_loss(logits, tok, rows["weights"])

    def draw(t, table):  # the rows of step t: the same draws with or without a mesh
        idx = jax.random.randint(jax.random.fold_in(key, t), (batch_size,), 0, tokens.shape[0])
        return jax.tree.map(lambda a: a[idx], table)

    if mesh is None:
        step_fn = make_train_step(loss_fn, tx)
        state = init_train_state(params, tx)
        rows = jax.jit(draw)
    else:
        size = mesh.shape["data"]
        if int(batch_size) % size:
            raise ValueError(
                f"fit_llama: batch_size {batch_size} must be a multiple of the mesh's data "
                f"axis ({size} devices)"
            )
        data = parallel.replicate(data, mesh)  # every process holds the same table
        step_fn = make_train_step(loss_fn, tx, mesh=mesh)
        state = init_train_state(params, tx, mesh=mesh)
        rows = jax.jit(draw, out_shardings=NamedSharding(mesh, P("data")))

    def local(tree):  # single-device arrays again (a mesh's arrays may span processes)
        return tree if mesh is None else jax.tree.map(jnp.asarray, parallel.to_host(tree))

    try:
        result = fit(
            state,
            step_fn,
            lambda t: rows(jnp.int32(t), data),
            num_steps=int(steps),
            workdir=workdir,
            run=run,
            quiet=quiet,
        )
    except TrainingError as err:
        nnx.update(model, local(err.state.params))  # the last finite parameters
        raise
    nnx.update(model, local(result.state.params))
    losses = np.asarray([r["loss"] for r in result.history if "loss" in r], np.float32)
    return model, losses
