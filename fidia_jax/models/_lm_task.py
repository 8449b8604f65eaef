"""A byte-level LLaMA language-modelling task as pure functions, and its jitted training step.

The building block every driver that trains :class:`~fidia_jax.models.Llama` on a token stream
shares (the optimiser experiments of SCALE / PASO, the Attn-QAT attention comparison): the
model split into a ``GraphDef`` and its ``nnx.Param`` state, the next-token loss as a function
of the parameters, the training batch of step ``t`` as a pure function of ``t``, and one jitted
step ``(params, opt_state, tokens) -> (params, opt_state, loss)`` for any optax transformation.
Drivers own the loop, the optimiser, the evaluation and the reports.

Data parallelism (:mod:`fidia_jax.parallel`): given a ``mesh`` (:func:`lm_data_mesh`, or
:func:`fidia_jax.parallel.data_mesh`), :func:`init_lm_state` replicates the parameters and optimiser state on it, :func:`make_lm_batch_fn`
samples the batch of step ``t`` on the devices already split along ``B`` over its ``data`` axis,
and :func:`make_lm_train_step` compiles the step for that placement (gradients are averaged over
the devices by GSPMD). On a one-device mesh the numbers are those of an unsharded run, bit for
bit; on several devices they differ only by the summation order of the cross-device reductions.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax
from flax import nnx
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from fidia_jax import parallel
from fidia_jax.data import sample_windows
from fidia_jax.models._llama import Llama, LlamaConfig, next_token_loss

__all__ = [
    "LlamaSize",
    "LmTask",
    "init_lm_state",
    "lm_data_mesh",
    "make_lm_batch_fn",
    "make_lm_task",
    "make_lm_train_step",
    "place_lm_batch",
]


@dataclasses.dataclass(frozen=True)
class LlamaSize:
    """The size of a byte-level :class:`Llama` (vocabulary 256) as a driver's config group.

    Attributes:
      dim: model width.
      n_layers: transformer blocks.
      n_heads, n_kv_heads: query and key/value heads (grouped-query attention).
      hidden_dim: SwiGLU width; ``0`` means ``int(dim * 8 / 3) // 8 * 8``.
    """

    dim: int = 128
    n_layers: int = 4
    n_heads: int = 4
    n_kv_heads: int = 2
    hidden_dim: int = 0

    def llama_config(self, max_seq_len: int, attention_impl: str = "xla") -> LlamaConfig:
        """The :class:`LlamaConfig` of this size with context ``max_seq_len``.

        Raises:
          ConfigError: inconsistent sizes (from ``LlamaConfig``).
        """
        return LlamaConfig(
            dim=self.dim,
            n_layers=self.n_layers,
            n_heads=self.n_heads,
            n_kv_heads=self.n_kv_heads,
            hidden_dim=self.hidden_dim or int(self.dim * 8 / 3) // 8 * 8,
            max_seq_len=max_seq_len,
            attention_impl=attention_impl,
        )


class LmTask(NamedTuple):
    """A model, its initial parameters and its data, as pure functions.

    Attributes:
      graphdef: the model's ``nnx.GraphDef`` (``nnx.merge(graphdef, params)`` rebuilds it).
      params: initial ``nnx.State`` of the ``nnx.Param`` variables.
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
    config.max_seq_len)`` (:func:`fidia_jax.data.sample_windows`).

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

    Example::

      task = make_lm_task(cfg, splits.train, val_windows, seed=0, batch_size=16,
                          data_key=jax.random.key(1234))
      step = make_lm_train_step(task, tx := optax.adamw(3e-3))
      params, opt_state = init_lm_state(task, tx)
      params, opt_state, loss = step(params, opt_state, task.batch_fn(0))
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


def init_lm_state(
    task: LmTask, tx: optax.GradientTransformation, mesh: Mesh | None = None
) -> tuple[Any, Any]:
    """``(params, opt_state)`` to start training from: a copy of ``task.params`` (the step donates
    its inputs, ``task.params`` stays valid) and ``tx.init`` of it, replicated on ``mesh`` by
    :func:`fidia_jax.parallel.place_params` (``None``: left where JAX put them)."""
    params = jax.tree.map(jnp.copy, task.params)
    opt_state = tx.init(params)
    if mesh is None:
        return params, opt_state
    return parallel.place_params((params, opt_state), mesh)


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
    ``mesh``'s ``"data"`` axis (``None``: on the default device).

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


def make_lm_train_step(
    task: LmTask, tx: optax.GradientTransformation, mesh: Mesh | None = None
) -> Callable:
    """``step(params, opt_state, tokens) -> (params, opt_state, loss)``, jitted, inputs donated.

    ``tokens`` is a batch of ``task.batch_fn`` (from :func:`make_lm_batch_fn`); ``loss`` is the
    training loss before the update (the mean over the whole batch). With ``mesh``, the step is
    compiled for parameters and optimiser state replicated on it (:func:`init_lm_state`) and the
    batch split along its leading axis over ``"data"``, and returns the state with the same
    placement (no recompilation from step to step). ``params`` and ``opt_state`` are donated: do
    not reuse them after the call (pass copies of arrays you still need).

    Example::

      mesh = lm_data_mesh(task)
      step, batch = make_lm_train_step(task, tx, mesh), make_lm_batch_fn(task, mesh)
      params, opt_state = init_lm_state(task, tx, mesh)
      for t in range(num_steps):
          params, opt_state, loss = step(params, opt_state, batch(t))
    """

    def step(params, opt_state, tokens):
        loss, grads = jax.value_and_grad(task.loss_fn)(params, tokens)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    if mesh is None:
        return jax.jit(step, donate_argnums=(0, 1))
    rep, data = NamedSharding(mesh, P()), NamedSharding(mesh, P("data"))
    return jax.jit(
        step, in_shardings=(rep, rep, data), out_shardings=(rep, rep, rep), donate_argnums=(0, 1)
    )
