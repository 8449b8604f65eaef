"""The one gradient step of the library: a train state and ``make_train_step``.

Every driver that takes gradient steps builds its step here (scenic's and big_vision's trainers):
``loss_fn`` is a pure function of the parameters, the step is ``jax.value_and_grad`` + the optax
update + ``optax.apply_updates``, jitted once, optionally data-parallel over a
:func:`fidia_jax.parallel.data_mesh` (batch split along its leading axis over ``"data"``,
parameters replicated or FSDP-split as :func:`fidia_jax.parallel.param_shardings` says).

Flax NNX models enter in the functional style: :func:`split_model` gives
``(graphdef, params, model_state)`` (``nnx.Param`` and everything else: RNG counters, batch
statistics), and ``loss_fn`` merges them back with ``nnx.merge``. A module whose non-parameter
state changes in the forward pass (dropout RNG counters) returns the new state (``has_state``).

**Non-finite policy (one for the library).** A step whose loss or update has a NaN or an
infinity (a non-finite gradient, or a NaN learning rate) is *skipped*: parameters, optimiser state and model state stay as they were, the step
counter still advances, and the step's metrics carry ``nonfinite = 1``. :func:`fidia_jax.train.fit`
stops at the first such step by default, raising :class:`~fidia_jax.errors.TrainingError` that
names the step and the loss (the state it returns holds the last finite parameters); its
``max_nonfinite`` lets a run skip up to that many steps instead.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax
from flax import nnx
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from fidia_jax import parallel

__all__ = ["TrainState", "init_train_state", "make_train_step", "merge_model", "split_model"]


class TrainState(NamedTuple):
    """Everything a checkpoint restores (a pytree).

    Attributes:
      step: ``()`` int32, the number of steps taken (skipped non-finite steps included).
      params: the trainable parameters (any pytree of arrays; ``nnx.State`` of ``nnx.Param``).
      opt_state: the optax state of ``params``.
      model_state: non-parameter state threaded through the step (``None``: none).
    """

    step: jax.Array
    params: Any
    opt_state: Any
    model_state: Any = None


def split_model(model: nnx.Module) -> tuple[nnx.GraphDef, nnx.State, nnx.State]:
    """``(graphdef, params, model_state)`` of an NNX module: ``nnx.Param`` and the rest."""
    return nnx.split(model, nnx.Param, ...)


def merge_model(graphdef: nnx.GraphDef, params: Any, model_state: Any = None) -> nnx.Module:
    """The module of :func:`split_model`'s parts (``model_state=None``: parameters only).

    The variables are copied (``nnx.merge(..., copy=True)``), so the module can change its own
    state (dropout RNG counters) inside a transformation such as the step's ``value_and_grad``.
    """
    states = (params,) if model_state is None else (params, model_state)
    return nnx.merge(graphdef, *states, copy=True)


def _state_shardings(state: TrainState, mesh: Mesh, param_sharding: str) -> TrainState:
    rep = NamedSharding(mesh, P())
    return TrainState(
        step=rep,
        params=parallel.param_shardings(state.params, mesh, param_sharding),
        opt_state=parallel.param_shardings(state.opt_state, mesh, param_sharding),
        model_state=jax.tree.map(lambda _: rep, state.model_state),
    )


#: The default batch layout: every leaf split along its leading axis over ``"data"``.
_BATCH_SPEC = P("data")


def _is_spec_leaf(x: Any) -> bool:
    return x is None or isinstance(x, P)


def _batch_shardings(batch_spec: Any, mesh: Mesh) -> Any:
    """The :class:`NamedSharding` pytree (prefix) of a ``batch_spec`` (``None``: replicated)."""
    return jax.tree.map(
        lambda s: NamedSharding(mesh, P() if s is None else s), batch_spec, is_leaf=_is_spec_leaf
    )


def init_train_state(
    params: Any,
    tx: optax.GradientTransformation,
    *,
    model_state: Any = None,
    mesh: Mesh | None = None,
    param_sharding: str = "replicated",
) -> TrainState:
    """A :class:`TrainState` at step 0: ``tx.init(params)``, placed on ``mesh`` when given.

    Args:
      params: the trainable pytree.
      tx: the optax transformation the step will apply.
      model_state: non-parameter state for a ``has_state`` step (replicated on ``mesh``).
      mesh: a :func:`fidia_jax.parallel.data_mesh`; ``None``: the default device.
      param_sharding: ``"replicated"`` or ``"fsdp"`` (:data:`fidia_jax.parallel.PARAM_SHARDING_MODES`).

    Raises:
      ConfigError: an unknown ``param_sharding``.
    """
    state = TrainState(jnp.zeros((), jnp.int32), params, tx.init(params), model_state)
    if mesh is None:
        return state
    return parallel.put(state, _state_shardings(state, mesh, param_sharding))


def _all_finite(tree: Any) -> jax.Array:
    leaves = [
        jnp.all(jnp.isfinite(x))
        for x in jax.tree.leaves(tree)
        if jnp.issubdtype(x.dtype, jnp.inexact)
    ]
    return jnp.stack(leaves).all() if leaves else jnp.bool_(True)


def make_train_step(
    loss_fn: Callable[..., Any],
    tx: optax.GradientTransformation,
    *,
    has_aux: bool = False,
    has_state: bool = False,
    mesh: Mesh | None = None,
    param_sharding: str = "replicated",
    donate: bool = True,
    batch_spec: Any = _BATCH_SPEC,
) -> Callable[[TrainState, Any], tuple[TrainState, dict[str, jax.Array]]]:
    """``step(state, batch) -> (state, metrics)``: one jitted gradient step.

    Args:
      loss_fn: ``loss_fn(params, batch)`` (``has_state``: ``loss_fn(params, model_state,
        batch)``) returning the scalar loss, or with ``has_aux`` ``(loss, aux)`` where ``aux`` is
        a dict of arrays. With ``has_state`` the new model state comes after the loss:
        ``(loss, model_state)`` or ``(loss, (model_state, aux))``.
      tx: any optax transformation (``tx.update(grads, opt_state, params)``).
      has_aux: ``loss_fn`` returns a dict of auxiliary arrays, merged into the metrics.
      has_state: ``loss_fn`` takes and returns non-parameter model state.
      mesh: compile for a :func:`fidia_jax.parallel.data_mesh`: every batch leaf is split along
        its leading axis over ``"data"`` (a multiple of the mesh size), the state placed as
        :func:`init_train_state` placed it. ``None``: plain ``jax.jit``.
      param_sharding: with ``mesh``, ``"replicated"`` or ``"fsdp"``.
      donate: donate the input state (do not reuse it after the call).
      batch_spec: with ``mesh``, how the batch is laid out: a :class:`PartitionSpec`, or a
        pytree prefix of the batch with one per subtree (``None`` there: replicated). Default
        ``P("data")``: every leaf split along its leading axis. A leaf that is the same for
        every example (a PRNG key, a step count, a graph shared by the batch) takes ``P()``.

    Returns:
      The step. ``metrics`` holds ``loss`` (before the update), ``grad_norm`` (global L2 norm
      of the gradient), ``nonfinite`` (``1`` when the step was skipped, see the module's
      policy) and the entries of ``aux``.

    Example:
      >>> import jax.numpy as jnp, optax
      >>> from fidia_jax import train
      >>> tx = optax.sgd(0.5)
      >>> step = train.make_train_step(lambda p, b: jnp.sum((p - b) ** 2), tx)
      >>> state, m = step(train.init_train_state(jnp.zeros(2), tx), jnp.ones(2))
      >>> state.params.tolist(), float(m["loss"]), int(state.step)
      ([1.0, 1.0], 2.0, 1)
    """

    def step(state: TrainState, batch: Any):
        def objective(params):
            if has_state:
                loss, rest = loss_fn(params, state.model_state, batch)
                model_state, aux = rest if has_aux else (rest, {})
            else:
                out = loss_fn(params, batch)
                (loss, aux), model_state = (out if has_aux else (out, {})), state.model_state
            return loss, (model_state, aux)

        (loss, (model_state, aux)), grads = jax.value_and_grad(objective, has_aux=True)(
            state.params
        )
        updates, opt_state = tx.update(grads, state.opt_state, state.params)
        params = optax.apply_updates(state.params, updates)
        finite = jnp.isfinite(loss) & _all_finite(updates)

        # one select of the whole state (a per-leaf jnp.where compiles far slower for models
        # with a thousand leaves); the values are the same
        new_state = jax.lax.cond(
            finite,
            lambda: TrainState(state.step + 1, params, opt_state, model_state),
            lambda: TrainState(state.step + 1, state.params, state.opt_state, state.model_state),
        )
        metrics = {
            "loss": loss,
            "grad_norm": optax.tree.norm(grads),
            "nonfinite": (~finite).astype(jnp.int32),
            **aux,
        }
        return new_state, metrics

    donate_argnums = (0,) if donate else ()
    if mesh is None:
        return jax.jit(step, donate_argnums=donate_argnums)
    data, rep = _batch_shardings(batch_spec, mesh), NamedSharding(mesh, P())
    jitted: dict[Any, Callable] = {}  # one compiled step per state structure

    def sharded_step(state: TrainState, batch: Any):
        key = jax.tree.structure(state)
        if key not in jitted:
            shardings = _state_shardings(state, mesh, param_sharding)
            jitted[key] = jax.jit(
                step,
                in_shardings=(shardings, data),
                out_shardings=(shardings, rep),
                donate_argnums=donate_argnums,
            )
        return jitted[key](state, batch)

    return sharded_step
