"""A byte-level LLaMA language-modelling task as pure functions, for :func:`make_train_step`.

What every driver that trains :class:`~fidia_jax.models.Llama` on a token stream shares (the
optimiser experiments of SCALE / PASO, the Attn-QAT attention comparison): the model split into
a ``GraphDef`` and its ``nnx.Param`` state, the next-token loss as a function of the parameters
(:func:`fidia_jax.losses.next_token_loss`), the training batch of step ``t`` as a pure function
of ``t`` sampled on the devices, and the placement of evaluation batches. The gradient step is
the package's: ``make_train_step(task.loss_fn, tx, mesh=mesh)`` on
``init_train_state(params, tx, mesh=mesh)``; drivers own the optimiser, the evaluation and the
reports.

Data parallelism (:mod:`fidia_jax.parallel`): with a ``mesh`` (:func:`lm_data_mesh`, or
:func:`fidia_jax.parallel.data_mesh`), :func:`make_lm_batch_fn` samples the batch of step ``t``
on the devices already split along ``B`` over its ``data`` axis, as the step compiled for that
mesh expects it (gradients are averaged over the devices by GSPMD). On a one-device mesh the
numbers are those of an unsharded run, bit for bit; on several devices they differ only by the
summation order of the cross-device reductions.

Example::

  task = make_lm_task(cfg, splits.train, val_windows, seed=0, batch_size=16,
                      data_key=jax.random.key(1234))
  mesh = lm_data_mesh(task)
  tx = optax.adamw(3e-3)
  step, batch = train.make_train_step(task.loss_fn, tx, mesh=mesh), make_lm_batch_fn(task, mesh)
  state = train.init_train_state(jax.tree.map(jnp.copy, task.params), tx, mesh=mesh)
  result = train.fit(state, step, batch, num_steps=100, workdir="out/lm")
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
from flax import nnx
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from fidia_jax import parallel
from fidia_jax.data import sample_windows
from fidia_jax.losses import next_token_loss
from fidia_jax.models import Llama, LlamaConfig

__all__ = ["LmTask", "lm_data_mesh", "make_lm_batch_fn", "make_lm_task", "place_lm_batch"]


class LmTask(NamedTuple):
    """A model, its initial parameters and its data, as pure functions.

    Attributes:
      graphdef: the model's ``nnx.GraphDef`` (``nnx.merge(graphdef, params)`` rebuilds it).
      params: initial ``nnx.State`` of the ``nnx.Param`` variables. A donating step invalidates
        the arrays it is given: start from a copy (``jax.tree.map(jnp.copy, task.params)``)
        when the task is used again.
      loss_fn: ``(params, tokens (B, L) int32) -> ()`` float32 next-token cross-entropy (nats).
      batch_fn: ``t -> (B, L) int32`` training windows of step ``t`` (a pure function of ``t``).
      val_tokens: ``(V, L)`` int32 fixed validation windows.
    """

    graphdef: Any
    params: Any
    loss_fn: Callable[[Any, jax.Array], jax.Array]
    batch_fn: Callable[[jax.Array], jax.Array]
    val_tokens: jax.Array


def make_lm_task(
    config: LlamaConfig,
    train_tokens: Any,
    val_tokens: Any,
    *,
    seed: int,
    batch_size: int,
    data_key: jax.Array,
) -> LmTask:
    """Builds ``Llama(config, rngs=nnx.Rngs(seed))`` and the data functions of a stream.

    Step ``t`` trains on ``sample_windows(fold_in(data_key, t), train_tokens, batch_size,
    config.max_seq_len)`` (:func:`fidia_jax.data.sample_windows`); the loss is
    :func:`fidia_jax.losses.next_token_loss` of the model's logits.

    Args:
      config: the model; its ``max_seq_len`` is the window length ``L``.
      train_tokens: ``(N,)`` int token stream, ``N > L``.
      val_tokens: ``(V, L)`` int validation windows, stored as given (sample them with
        :func:`fidia_jax.data.sample_windows`).
      seed: parameter initialisation seed.
      batch_size: windows per training step ``B``.
      data_key: key of the training batches.

    Returns:
      :class:`LmTask`.

    Raises:
      ValueError: ``train_tokens`` is not longer than ``L`` (at the first ``batch_fn`` call).
    """
    train = jnp.asarray(train_tokens)
    graphdef, params = nnx.split(Llama(config, rngs=nnx.Rngs(seed)), nnx.Param)

    def loss_fn(p, tokens_BxL):
        return next_token_loss(nnx.merge(graphdef, p)(tokens_BxL), tokens_BxL)

    def batch_fn(t):
        return sample_windows(
            jax.random.fold_in(data_key, t), train, batch_size, config.max_seq_len
        )

    return LmTask(graphdef, params, loss_fn, batch_fn, jnp.asarray(val_tokens))


def lm_data_mesh(task: LmTask, *, num_devices: int = 0) -> Mesh:
    """:func:`fidia_jax.parallel.data_mesh` for the batches of ``task``: the most devices (all,
    or at most ``num_devices`` when > 0) that divide the leading size of ``task.batch_fn(0)``
    (read from its shape; nothing is computed)."""
    batch = jax.eval_shape(task.batch_fn, jnp.int32(0))
    return parallel.data_mesh(jax.tree.leaves(batch)[0].shape[0], num_devices=num_devices)


def place_lm_batch(tokens: Any, mesh: Mesh | None) -> Any:
    """An evaluation batch (``(B, ...)`` leaves) put on ``mesh``: split along ``B`` over its
    ``"data"`` axis (:func:`fidia_jax.parallel.shard_batch`) when ``B`` is a multiple of the mesh
    size, else replicated (:func:`fidia_jax.parallel.replicate`); ``None``: returned as is.

    For batches whose size the mesh was not built from (validation windows, decode windows);
    they must sit on the parameters' devices, so no sub-mesh is made.
    """
    if mesh is None:
        return tokens
    b = jax.tree.leaves(tokens)[0].shape[0]
    place = parallel.shard_batch if b % mesh.size == 0 else parallel.replicate
    return place(tokens, mesh)


def make_lm_batch_fn(task: LmTask, mesh: Mesh | None = None) -> Callable[[Any], Any]:
    """``batch(t)``: ``task.batch_fn(t)`` jitted, every leaf split along its leading axis over
    ``mesh``'s ``"data"`` axis (``None``: on the default device) -- the placement a
    :func:`fidia_jax.train.make_train_step` compiled for ``mesh`` expects.

    The batch is sampled on the devices (each computes its own rows), never on the host, so a
    multi-host run needs no transfer: every process holds the same token stream and ``t``, as
    :func:`fidia_jax.parallel.shard_batch` assumes. The values do not depend on the mesh.

    Raises:
      ValueError: (from JAX) the leading size is not a multiple of the mesh size (build the mesh
        with :func:`lm_data_mesh`).
    """
    if mesh is None:
        return jax.jit(task.batch_fn)
    return jax.jit(task.batch_fn, out_shardings=NamedSharding(mesh, P("data")))
