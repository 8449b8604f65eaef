"""PASO: step-parallel optimisation by sliding-window Picard iteration over an optax optimiser.

Sequential training is the recursion ``(x_{t+1}, s_{t+1}) = U(x_t, s_t, grad L(x_t; batch(t)))``
with ``U`` the optimiser's update. PASO keeps guesses ``x_b .. x_{b+P}`` for a window of ``P``
steps and repeats:

1. gradients at all ``P`` guesses in parallel (``vmap``; sharded over a device mesh if given),
   each with the mini-batch of its own step, ``batch_fn(t)``;
2. a sequential sweep from the exact ``(x_b, s_b)`` that applies the optimiser with those
   gradients, giving new iterates ``x'_{b+1} .. x'_{b+P}`` and the optimiser states;
3. per-step errors ``e_i = dist(x'_{b+i+1}, x_{b+i+1})``; the window slides to the first step
   whose error exceeds the tolerance, is not finite, or *overflows* (its new iterate was
   computed from an accepted guess, so it is exact) -- at least one and at most ``P`` steps.
   A guess overflows when its distance to the recomputed iterate,
   ``||x'_{b+i+1} - x_{b+i+1}||``, exceeds ``overflow_ratio`` (default 100) times
   ``max(||x_b||, ||x'_{b+1}||)``, the size of the window's two exact iterates. A guess that
   wandered where the loss or its gradient is NaN/inf, or that diverged, is therefore never
   accepted: such windows advance one exact step at a time, as sequential training does;
4. the new guesses are the sweep's iterates, padded with the last one; the next window starts
   from the optimiser state of the accepted step (``state_clone="copy"``) or, as the authors'
   loop does when run with torch >= 2.1, from the state at the end of the sweep
   (``state_clone="shared"``).

This is the ParaDiGMS sliding-window Picard iteration applied to the optimiser's update map,
as in the PASO authors' code (``optex_cmp.py::run_paso_synthetic_core``, the same loop as
``cv_v1.py::train_loop_parallel``). Modes:

* ``"exact"``: fixed tolerance on the relative error ``||x' - x|| / ||x'||`` (default 1e-7);
  the result equals sequential training to float32 round-off (tested to rel 1e-5).
* ``"adaptive"``: the reference's error ``mean((x' - x)**2) * 1e6`` and tolerance
  ``tol <- ema * tol + (1 - ema) * agg(e)`` after every iteration, ``agg`` the mean of the
  window's errors or the middle one (the reference's ``"median"``). Errors of non-finite or
  overflowed guesses never enter ``agg`` (the authors' loop lets them in, so that huge errors
  inflate the tolerance until diverged guesses are accepted and the run ends NaN).

Fidelity: with ``mode="adaptive"``, ``adaptivity="median"``, ``tol=1e-5`` and the
``state_clone`` matching the authors' clone semantics, K, the gradient count, the final
tolerance and the final parameters equal those of the authors' loop on sphere and Rosenbrock
with SGD, SGD + momentum and Adam (fixture ``tests/data/paso/``, made by
``tools/paso_make_fixture.py`` from commit ``31f368c``; test
``tests/optim/test_paso_fidelity.py``).

Every step of the window costs one gradient; ``num_grad_evals`` counts them (valid steps only).
The speed-up comes from ``num_iterations`` (K) being much smaller than ``num_steps`` (T)
while the ``P`` gradients of an iteration run concurrently.

References:
  Lu et al., "PASO: step-parallel optimisation" (ICML 2026); code github.com/Jianrong-Lu/PASO
  @ 31f368c5ab001c14d90f17640905b09479fae5ac (``optex_cmp.py``, ``cv_v1.py``).
  Shih, Belkhale, Ermon, Sadigh, Anari, "Parallel Sampling of Diffusion Models" (ParaDiGMS),
  NeurIPS 2023.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, NamedTuple

import jax
import jax.numpy as jnp
import optax

from fidia_jax.errors import ConfigError

__all__ = ["PasoResult", "paso", "sequential_optimize"]


class PasoResult(NamedTuple):
    """Output of :func:`paso`.

    Attributes:
      params: parameters after ``num_steps`` steps.
      opt_state: optimiser state after ``num_steps`` steps.
      num_iterations: ``()`` int32, Picard iterations K (sequential rounds).
      num_grad_evals: ``()`` int32, gradients evaluated (sum of window lengths).
      trajectory_error: ``()`` float32, largest per-step error among the accepted (converged)
        guesses, in the mode's error metric; 0 when every step was advanced exactly.
      final_tolerance: ``()`` float32, the tolerance at the end (changes in adaptive mode).
    """

    params: Any
    opt_state: Any
    num_iterations: jax.Array
    num_grad_evals: jax.Array
    trajectory_error: jax.Array
    final_tolerance: jax.Array


def _tree_where(pred, a, b):
    return jax.tree.map(lambda x, y: jnp.where(pred, x, y), a, b)


def _same_dtypes(new, old):
    """Casts ``new`` to the dtypes of ``old`` (loop carries need fixed types; some optax
    states, e.g. ``inject_hyperparams`` with float32 hyperparameters, promote bf16 moments)."""
    return jax.tree.map(lambda a, b: jnp.asarray(a).astype(jnp.asarray(b).dtype), new, old)


def _sq_norm(tree):
    return sum(jnp.sum(jnp.square(x.astype(jnp.float32))) for x in jax.tree.leaves(tree))


def _size(tree):
    return sum(x.size for x in jax.tree.leaves(tree))


def _tree_sub(new, old):
    return jax.tree.map(lambda a, b: a.astype(jnp.float32) - b.astype(jnp.float32), new, old)


def _relative_error(new, old):
    diff = jax.tree.map(lambda a, b: a.astype(jnp.float32) - b.astype(jnp.float32), new, old)
    return jnp.sqrt(_sq_norm(diff)) / (jnp.sqrt(_sq_norm(new)) + 1e-30)


def _reference_error(new, old):
    diff = jax.tree.map(lambda a, b: a.astype(jnp.float32) - b.astype(jnp.float32), new, old)
    return _sq_norm(diff) / _size(new) * 1e6


def sequential_optimize(
    loss_fn: Callable[[Any, Any], jax.Array],
    optimizer: optax.GradientTransformation,
    params: Any,
    batch_fn: Callable[[jax.Array], Any],
    num_steps: int,
    opt_state: Any = None,
) -> tuple[Any, Any, jax.Array]:
    """Plain sequential training (``lax.scan``), the reference PASO must reproduce.

    Args:
      loss_fn: ``(params, batch) -> scalar``.
      optimizer: any optax transformation.
      params: initial parameters.
      batch_fn: ``t -> batch`` for ``t = 0 .. num_steps - 1`` (traced int32).
      num_steps: ``T`` (static).
      opt_state: initial state (default ``optimizer.init(params)``).

    Returns:
      ``(params, opt_state, losses (T,) float32)`` with ``losses[t]`` the loss before step t.

    Example (SGD on ``0.5 ||x - b_t||^2`` with a step-dependent target ``b_t``)::

      >>> import jax.numpy as jnp, optax
      >>> from fidia_jax import optim
      >>> loss_fn = lambda x, b: 0.5 * jnp.sum((x - b) ** 2)
      >>> batch_fn = lambda t: jnp.sin(t.astype(jnp.float32)) * jnp.ones(2)
      >>> x, _, losses = optim.sequential_optimize(loss_fn, optax.sgd(0.1), jnp.zeros(2),
      ...                                          batch_fn, num_steps=64)
      >>> losses.shape, round(float(x[0]), 4)
      ((64,), -0.0788)
    """
    if opt_state is None:
        opt_state = optimizer.init(params)
    grad_fn = jax.value_and_grad(loss_fn)

    def body(carry, t):
        x, s = carry
        loss, g = grad_fn(x, batch_fn(t))
        u, s_new = optimizer.update(g, s, x)
        return (optax.apply_updates(x, u), _same_dtypes(s_new, s)), loss.astype(jnp.float32)

    (params, opt_state), losses = jax.lax.scan(
        body, (params, opt_state), jnp.arange(num_steps, dtype=jnp.int32)
    )
    return params, opt_state, losses


def paso(
    loss_fn: Callable[[Any, Any], jax.Array],
    optimizer: optax.GradientTransformation,
    params: Any,
    batch_fn: Callable[[jax.Array], Any],
    num_steps: int,
    *,
    window: int = 16,
    mode: Literal["exact", "adaptive"] = "exact",
    tol: float | None = None,
    ema_decay: float = 0.999,
    adaptivity: Literal["mean", "median"] = "median",
    error_metric: Literal["relative", "reference"] | None = None,
    opt_state: Any = None,
    mesh: jax.sharding.Mesh | None = None,
    mesh_axis: str | None = None,
    state_clone: Literal["copy", "shared"] = "copy",
    overflow_ratio: float = 100.0,
) -> PasoResult:
    """Runs ``num_steps`` optimiser steps by sliding-window Picard iteration (see module doc).

    A pure function: wrap it in ``jax.jit`` with ``loss_fn``, ``optimizer``, ``batch_fn``,
    ``num_steps`` and the keyword options static (``functools.partial`` is simplest).

    Args:
      loss_fn: ``(params, batch) -> scalar`` loss.
      optimizer: any ``optax.GradientTransformation`` (its state must be a pytree of arrays).
      params: initial parameters (any pytree of float arrays).
      batch_fn: ``t -> batch``, a pure function of the step index (traced int32), so parallel
        and sequential training see identical data.
      num_steps: ``T >= 1`` (static).
      window: ``P >= 1``; ``P = 1`` is sequential training.
      mode: ``"exact"`` or ``"adaptive"``.
      tol: tolerance (default 1e-7 relative in exact mode, 1e-5 reference units adaptively).
      ema_decay: adaptive tolerance EMA coefficient (reference 0.999).
      adaptivity: ``"median"`` (default: the middle window error, as the authors' loop) or
        ``"mean"`` (ours: the mean of the window's errors; ``benchmarks/paso.py``'s published
        adaptive row uses it).
      error_metric: override ``"relative"`` (exact default) / ``"reference"`` (adaptive).
      opt_state: initial optimiser state (default ``optimizer.init(params)``).
      mesh: optional mesh; the window's guesses and batches are sharded along ``mesh_axis``
        (``window`` must be a multiple of that axis' size).
      mesh_axis: mesh axis name (default: the mesh's first axis).
      state_clone: optimiser state the next window starts from. ``"copy"`` (default): the
        state after the last accepted step, so the window's parameters and state belong to
        the same step (exact mode then equals sequential training). ``"shared"``: the state
        at the end of the sweep, several steps ahead of the parameters: what the authors'
        loop computes with torch >= 2.1, whose ``load_state_dict`` (their
        ``optimizer_state_clone``) shares the state tensors instead of copying them; a bug,
        kept to reproduce their runs (same results as ``"copy"`` for stateless optimisers).
      overflow_ratio: a guess whose distance to its recomputed iterate exceeds
        ``overflow_ratio * max(||x_b||, ||x'_{b+1}||)`` (or whose error is not finite) is
        rejected and its error is left out of the adaptive tolerance. ``inf`` keeps only the
        non-finite rule.

    Returns:
      :class:`PasoResult`.

    Raises:
      ConfigError: invalid window, steps, mode, tolerance, mesh, ``state_clone`` or
        ``overflow_ratio``.

    Example (the problem of :func:`sequential_optimize`'s example: 64 steps in 38 sequential
    rounds of a window of 8, equal to sequential training)::

      >>> import jax.numpy as jnp, optax
      >>> from fidia_jax import optim
      >>> loss_fn = lambda x, b: 0.5 * jnp.sum((x - b) ** 2)
      >>> batch_fn = lambda t: jnp.sin(t.astype(jnp.float32)) * jnp.ones(2)
      >>> res = optim.paso(loss_fn, optax.sgd(0.1), jnp.zeros(2), batch_fn, num_steps=64,
      ...                  window=8)
      >>> int(res.num_iterations), int(res.num_grad_evals), round(float(res.params[0]), 4)
      (38, 289, -0.0788)
    """
    if int(num_steps) < 1:
        raise ConfigError(f"num_steps must be >= 1, got {num_steps}")
    if int(window) < 1:
        raise ConfigError(f"window must be >= 1, got {window}")
    if mode not in ("exact", "adaptive"):
        raise ConfigError(f"mode must be 'exact' or 'adaptive', got {mode!r}")
    if adaptivity not in ("mean", "median"):
        raise ConfigError(f"adaptivity must be 'mean' or 'median', got {adaptivity!r}")
    if error_metric is None:
        error_metric = "relative" if mode == "exact" else "reference"
    if error_metric not in ("relative", "reference"):
        raise ConfigError(f"unknown error_metric {error_metric!r}")
    if tol is None:
        tol = 1e-7 if mode == "exact" else 1e-5
    if not tol >= 0:
        raise ConfigError(f"tol must be >= 0, got {tol}")
    if state_clone not in ("copy", "shared"):
        raise ConfigError(f"state_clone must be 'copy' or 'shared', got {state_clone!r}")
    if not overflow_ratio > 0:
        raise ConfigError(f"overflow_ratio must be > 0, got {overflow_ratio}")
    num_steps, p = int(num_steps), int(window)
    err_fn = _relative_error if error_metric == "relative" else _reference_error

    shard_window = lambda tree: tree  # noqa: E731
    replicate = lambda tree: tree  # noqa: E731
    if mesh is not None:
        axis = mesh_axis or mesh.axis_names[0]
        if axis not in mesh.axis_names:
            raise ConfigError(f"mesh has no axis {axis!r}; axes: {mesh.axis_names}")
        if p % mesh.shape[axis]:
            raise ConfigError(f"window={p} must be a multiple of mesh axis size {mesh.shape[axis]}")
        pspec = jax.sharding.PartitionSpec
        sh = jax.sharding.NamedSharding(mesh, pspec(axis))
        rep = jax.sharding.NamedSharding(mesh, pspec())
        shard_window = lambda tree: jax.tree.map(  # noqa: E731
            lambda x: jax.lax.with_sharding_constraint(x, sh), tree
        )
        replicate = lambda tree: jax.tree.map(  # noqa: E731
            lambda x: jax.lax.with_sharding_constraint(x, rep), tree
        )

    if opt_state is None:
        opt_state = optimizer.init(params)
    grad_fn = jax.grad(loss_fn)
    # Window buffer: guesses for x_b .. x_{b+P}, initialised to x_0.
    buf0 = jax.tree.map(lambda x: jnp.broadcast_to(x[None], (p + 1, *x.shape)), params)
    slots = jnp.arange(p, dtype=jnp.int32)

    def cond(carry):
        return carry[0] < num_steps

    def body(carry):
        begin, buf, state, tol_k, k, n_grad, max_err = carry
        t_idx = begin + slots
        n_valid = jnp.minimum(p, num_steps - begin)
        valid = slots < n_valid
        batches = jax.vmap(batch_fn)(jnp.minimum(t_idx, num_steps - 1))
        guesses = jax.tree.map(lambda b: b[:p], buf)
        grads = jax.vmap(grad_fn)(shard_window(guesses), shard_window(batches))
        grads = replicate(grads)
        x_begin = jax.tree.map(lambda b: b[0], buf)
        old_next = jax.tree.map(lambda b: b[1:], buf)

        def sweep(c, inp):
            x, s, found, ind, saved, scale = c
            g, x_old, i, ok = inp
            u, s_new = optimizer.update(g, s, x)
            s_new = _same_dtypes(s_new, s)
            x_new = optax.apply_updates(x, u)
            x_new = _tree_where(ok, x_new, x)
            s_new = _tree_where(ok, s_new, s)
            err = jnp.where(ok, err_fn(x_new, x_old), 0.0)
            # Overflow: the guess is farther from its recomputed iterate than overflow_ratio
            # times the size of the exact parameters (max of |x_b| and |x_{b+1}|, both exact).
            scale = jnp.where(i == 0, jnp.maximum(x_begin_norm, jnp.sqrt(_sq_norm(x_new))), scale)
            gap = jnp.sqrt(_sq_norm(_tree_sub(x_new, x_old)))
            bad = ok & ~(jnp.isfinite(err) & (gap <= overflow_ratio * scale))
            # `~(err <= tol)`, not `err > tol`: a NaN error (a guess or an iterate that left
            # the loss' domain) is "not converged", so a non-finite guess is never accepted;
            # nor is an overflowed one, whatever the tolerance.
            trigger = ok & ~found & (~(err <= tol_k) | bad | (i == n_valid - 1))
            saved = _tree_where(trigger, s_new, saved)
            ind = jnp.where(trigger, i + 1, ind)
            return (x_new, s_new, found | trigger, ind, saved, scale), (x_new, err, bad)

        x_begin_norm = jnp.sqrt(_sq_norm(x_begin))
        init = (x_begin, state, jnp.bool_(False), jnp.int32(0), state, jnp.float32(0.0))
        (_, s_end, _, ind, saved, _), (rollout, errs, bads) = jax.lax.scan(
            sweep, init, (grads, old_next, slots, valid)
        )
        if state_clone == "shared":
            # The authors' loop as run with torch >= 2.1: the accepted step's optimiser shares
            # the sweep's state tensors, so the next window starts from the end-of-sweep state.
            saved = s_end
        # rollout_full[j] = x'_{begin + j}, j = 0..P (j = 0 is the exact x_begin).
        full = jax.tree.map(lambda a, r: jnp.concatenate([a[None], r]), x_begin, rollout)
        take = jnp.minimum(jnp.arange(p + 1) + ind, p)
        new_buf = jax.tree.map(lambda f: f[take], full)
        accepted = slots < ind - 1
        max_err = jnp.maximum(max_err, jnp.max(jnp.where(accepted, errs, 0.0)))
        if mode == "adaptive":
            # Errors of non-finite or overflowed guesses stay out of the tolerance: a NaN
            # tolerance would stop every later window from accepting anything, and a huge one
            # would accept diverged guesses. Windows without such guesses: the reference's rule.
            good = valid & ~bads
            if adaptivity == "mean":
                n_good = jnp.sum(good.astype(jnp.int32))
                agg = jnp.sum(jnp.where(good, errs, 0.0)) / jnp.maximum(n_good, 1)
                use = n_good > 0
            else:
                agg = errs[n_valid // 2]
                use = ~bads[n_valid // 2]
            tol_k = jnp.where(use, tol_k * ema_decay + agg * (1.0 - ema_decay), tol_k)
        return begin + ind, new_buf, saved, tol_k, k + 1, n_grad + n_valid, max_err

    carry = (
        jnp.int32(0),
        buf0,
        opt_state,
        jnp.float32(tol),
        jnp.int32(0),
        jnp.int32(0),
        jnp.float32(0.0),
    )
    _, buf, state, tol_k, k, n_grad, max_err = jax.lax.while_loop(cond, body, carry)
    final = jax.tree.map(lambda b: b[0], buf)
    return PasoResult(final, state, k, n_grad, max_err, tol_k)
