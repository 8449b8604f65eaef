"""Shared pieces of the HIT-VAR driver's phases: the scale schedule and targets, the Adam fit
of any phase (:func:`fidia_jax.train.make_train_step` looped by :func:`fidia_jax.train.fit`),
seeded batch orders, tokenizing and bicubic upsampling in batches, and the paired test over crops.

Used by :mod:`~fidia_jax.projects.hitvar.train`, :mod:`~fidia_jax.projects.hitvar._dpo` and
:mod:`~fidia_jax.projects.hitvar._token_oracle`.
"""

from __future__ import annotations

import functools
import pathlib
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx
from jax.sharding import PartitionSpec as P

from fidia_jax import metrics, parallel, train
from fidia_jax.projects.hitvar.configs import HitVarConfig
from fidia_jax.projects.hitvar.model import (
    HitVarTokenizer,
    bicubic_resize,
    lr_scale_term,
    next_scale_inputs,
)
from fidia_jax.projects.hitvar.schedule import HierarchicalSchedule, hierarchical_scale_schedule

__all__ = ["paired_test"]


def _schedule(config: HitVarConfig) -> HierarchicalSchedule:
    return hierarchical_scale_schedule(
        config.lr_size, config.max_scale, config.grids, config.latent_size
    )


def _targets(hr, schedule):
    top = max(schedule.scales)
    return {
        m: hr if m == top else bicubic_resize(hr, m * schedule.lr_size) for m in schedule.scales
    }


def _fit(
    model: nnx.Module,
    loss_fn: Callable,
    batch_fn: Callable,
    steps: int,
    lr: float,
    seed: int,
    *,
    run: str,
    workdir: pathlib.Path | None,
    config: HitVarConfig,
    post: Callable | None = None,
    steps_cache: dict | None = None,
) -> tuple[nnx.Module, list[float]]:
    """Adam on the ``nnx.Param`` leaves with :func:`fidia_jax.train.make_train_step`, looped by
    :func:`fidia_jax.train.fit` (run ``run``; checkpoints and resume with ``workdir``).

    ``loss_fn(model, batch) -> (loss, aux)``; ``post(model, aux, key)`` may then update the
    module's other state (the EMA codebook) from the step's ``aux``, in the same compiled step,
    after the parameter update (``key = fold_in(key(seed), t)`` for step ``t``); a skipped
    non-finite step leaves that state as it was. ``model`` itself is not changed (the fit
    starts from a copy). ``steps_cache`` (a dict) lends the compiled step to a later fit of the
    same module structure and step size (the second VAR transformer: one compile, not two).

    Data-parallel: the batch's rows are split over a :func:`fidia_jax.parallel.data_mesh` of
    ``config.num_devices`` devices (the most that divide ``config.batch_size``; the step's PRNG
    key replicated), the parameters placed by ``config.param_sharding``. The returned module
    holds this process's copy of the trained state (evaluation runs on each process).
    """
    mesh = parallel.data_mesh(config.batch_size, num_devices=config.num_devices)
    ps = config.param_sharding
    # the step donates its state: train copies, so that ``model`` stays usable
    graphdef, params, rest = train.split_model(model)
    params, rest = jax.tree.map(jnp.copy, (params, rest))
    tx = optax.adam(lr)

    def objective(p, model_state, batch):
        inputs, _ = batch
        loss, aux = loss_fn(train.merge_model(graphdef, p, model_state), inputs)
        return loss, (model_state, {} if post is None else {"post": aux})

    cache_key = (graphdef, lr, mesh, ps)
    if steps_cache is not None and cache_key in steps_cache:
        step = steps_cache[cache_key]
    else:
        step = train.make_train_step(
            objective, tx, has_aux=True, has_state=True, donate=post is None, mesh=mesh,
            param_sharding=ps, batch_spec=_BATCH_SPEC,
        )  # fmt: skip
    if steps_cache is not None:
        steps_cache[cache_key] = step
    if post is not None:
        inner = step

        @functools.partial(jax.jit, donate_argnums=(0,))
        def step(state, batch):
            state, metrics = inner(state, batch)
            m = train.merge_model(graphdef, state.params, state.model_state)
            post(m, metrics.pop("post"), batch[1])
            model_state = jax.lax.cond(
                metrics["nonfinite"] == 0,
                lambda: train.split_model(m)[2],
                lambda: state.model_state,
            )
            return state._replace(model_state=model_state), metrics

    key = jax.random.key(seed)
    res = train.fit(
        train.init_train_state(params, tx, model_state=rest, mesh=mesh, param_sharding=ps),
        step,
        lambda t: (batch_fn(t), jax.random.fold_in(key, t)),
        num_steps=steps,
        workdir=workdir,
        run=run,
        checkpoint_every=config.checkpoint_every,
        log_every=1,  # every step's loss is reported (the curves of the results file)
        fingerprint={**train.config_fingerprint(config), "seed": int(seed)},
        mesh=mesh,
        param_sharding=ps,
        batch_spec=_BATCH_SPEC,
    )
    curve = [r["loss"] for r in res.history if "loss" in r]
    state = _local(res.state)
    return train.merge_model(graphdef, state.params, state.model_state), curve


#: A phase's batch ``(arrays, key)`` on the mesh: every array split along its leading (row)
#: axis over ``"data"``, the step's PRNG key replicated.
_BATCH_SPEC = (P("data"), P())


def _local(tree: Any) -> Any:
    """``tree`` with every leaf this process cannot address whole (a multi-process mesh)
    replaced by a local copy: a replicated leaf by its own shard (PRNG keys too), another one
    gathered (:func:`fidia_jax.parallel.to_host`). On one process: ``tree`` unchanged."""

    def one(x):
        if not isinstance(x, jax.Array) or x.is_fully_addressable:
            return x
        if x.is_fully_replicated:
            return x.addressable_shards[0].data
        return jnp.asarray(parallel.to_host(x))

    return jax.tree.map(one, tree)


def _batch_order(n: int, batch: int, seed: int, steps: int) -> np.ndarray:
    """``(steps, batch)`` row indices: consecutive seeded permutations of ``range(n)``, cut into
    batches (a pure function of the step, so a resumed fit draws the same batches)."""
    rng = np.random.default_rng(seed)
    order: list[int] = []
    while len(order) < batch * steps:
        order += list(rng.permutation(n))
    return np.asarray(order[: batch * steps], np.int64).reshape(steps, batch)


@functools.cache
def _tokenize_fn(grids: tuple[int, ...]):
    @nnx.jit
    def one(t, x):
        codes, prefixes, _ = t.quantize(t.encode(x))
        return (
            _flat(codes),
            next_scale_inputs(prefixes, grids),
            lr_scale_term(codes, t.codebook[...]),
        )

    return one


def _tokenize(tok: HitVarTokenizer, images: np.ndarray, batch: int):
    """Tokens ``(N, T)``, teacher-forcing inputs ``(N, T, D)`` and code embeddings ``(N, T, D)``
    (:func:`lr_scale_term`) of HR-sized images."""
    one = _tokenize_fn(tok.schedule.grids)
    parts = [one(tok, jnp.asarray(images[i : i + batch])) for i in range(0, len(images), batch)]
    return tuple(np.concatenate([np.asarray(p[j]) for p in parts]) for j in range(3))


@functools.cache
def _upsample_fn(side: int):
    return jax.jit(lambda x: jnp.clip(bicubic_resize(x, side), 0.0, 1.0))


def _upsampled(lr: np.ndarray, side: int, batch: int = 64) -> np.ndarray:
    """Bicubic upsampling of LR crops to the HR side, clipped to [0, 1] (what the tokenizer
    encodes as "the LR image": the rejected sequence of the (LR, HR) DPO pairs, and the
    per-scale LR term)."""
    up = _upsample_fn(side)
    return np.concatenate(
        [np.asarray(up(jnp.asarray(lr[i : i + batch]))) for i in range(0, len(lr), batch)]
    )


def _flat(codes):
    return jnp.concatenate([c.reshape(c.shape[0], -1) for c in codes], axis=1)


def _lr_scale_batch(lr_scale, i):
    return None if lr_scale is None else jnp.asarray(lr_scale[i])


def _cond(tok, lr, side, use_term, batch=64):
    """The per-scale LR term of LR crops (``None`` when off)."""
    if not use_term:
        return None
    return _tokenize(tok, _upsampled(lr, side), batch)[2]


def paired_test(a: np.ndarray, b: np.ndarray, alpha: float = 0.05) -> dict[str, Any]:
    """Two-sided Wilcoxon signed-rank test of paired per-item scores ``a`` vs ``b`` (lower is
    better, e.g. LPIPS per crop).

    Returns:
      ``{"mean_a", "mean_b", "mean_diff" (a - b), "p", "n", "a_better"}``; ``a_better`` is
      ``mean_a < mean_b`` and ``p < alpha`` (a difference within the noise is not a win);
      ``p = 1`` when every difference is zero.

    Raises:
      ValueError: different lengths, fewer than 2 items, or non-finite scores.
    """
    import scipy.stats

    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a.shape != b.shape or a.ndim != 1 or len(a) < 2:
        raise ValueError(f"paired_test: need two 1-D arrays of one length >= 2, got {a.shape}, "
                         f"{b.shape}")  # fmt: skip
    for name, v in (("a", a), ("b", b)):
        if not np.all(np.isfinite(v)):
            raise ValueError(
                f"paired_test: scores must be finite, {name} holds "
                f"{int(np.sum(~np.isfinite(v)))} NaN/inf value(s)"
            )
    diff = a - b
    p = 1.0 if np.all(diff == 0) else float(scipy.stats.wilcoxon(a, b).pvalue)
    return {
        "mean_a": float(a.mean()),
        "mean_b": float(b.mean()),
        "mean_diff": float(diff.mean()),
        "p": p,
        "n": int(len(a)),
        "a_better": bool(a.mean() < b.mean() and p < alpha),
    }


def _lpips_per_crop(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.concatenate(
        [np.asarray(metrics.lpips(x[i : i + 64], y[i : i + 64])) for i in range(0, len(x), 64)]
    )
