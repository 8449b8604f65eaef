"""Training loops: TARNet/CFR with a K-arm balancing scheme, and CausalEGM (binary or multi-arm).

Both return a function ``predict(x_NxD) -> (N, K)`` potential outcomes (float64 numpy) plus a
dict of training facts (wall time, time per epoch, the alpha used).
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from fidia_jax import losses, models
from fidia_jax.data import CausalData

__all__ = ["CfrSettings", "EgmSettings", "estimate_alpha_for", "fit_causalegm", "fit_cfr"]


@dataclasses.dataclass(frozen=True)
class CfrSettings:
    """TARNet/CFR training (CFR's IHDP settings, shortened): Adam, minibatches, sample weights
    ``1 / (K p_t)`` (CFR's ``reweight_sample``), outcome standardised on the training units,
    L2 weight decay on the heads and representation."""

    scheme: str = "pairwise"  # pairwise | one_vs_all | aggregation | none (TARNet)
    ipm: str = "mmd_rbf"
    alpha: float = 1.0
    rep_hidden: tuple[int, ...] = (200, 200, 200)
    head_hidden: tuple[int, ...] = (100, 100)
    learning_rate: float = 1e-3
    weight_decay: float = 1e-4
    batch_size: int = 100
    iterations: int = 2000
    bandwidth: float | None = None  # None: median heuristic


@dataclasses.dataclass(frozen=True)
class EgmSettings:
    """CausalEGM training: the package's CLI defaults except ``n_iter`` (30000 there)."""

    n_iter: int = 3000
    batches_per_eval: int = 500
    batch_size: int = 32
    learning_rate: float = 2e-4
    g_d_freq: int = 5
    z_dims: tuple[int, int, int, int] = (3, 6, 3, 6)
    g_units: tuple[int, ...] = (64, 64, 64, 64, 64)
    e_units: tuple[int, ...] = (64, 64, 64, 64, 64)
    f_units: tuple[int, ...] = (64, 32, 8)
    h_units: tuple[int, ...] = (64, 32, 8)
    dz_units: tuple[int, ...] = (64, 32, 8)
    dv_units: tuple[int, ...] = (64, 32, 8)
    embed_dim: int = 3  # multi-arm only: W2 arm embedding size (0: one-hot only)


def _standardise(y):
    mean, sd = float(np.mean(y)), float(np.std(y)) or 1.0
    return mean, sd


def _cfr_loss(model, x, t, y, w, key, s: CfrSettings, num_arms):
    mu_hat, phi = model(x)
    pred = jnp.take_along_axis(mu_hat, t[:, None], axis=1)[:, 0]
    factual = jnp.sum(w * (pred - y) ** 2) / jnp.sum(w)
    if s.scheme == "none" or s.alpha == 0.0:
        return factual, factual
    bal = losses.balancing_loss(
        s.scheme, phi, t, num_arms, key, ipm_name=s.ipm, bandwidth=s.bandwidth
    )
    return factual + s.alpha * bal, factual


def _make_cfr(data: CfrSettings, x_dim, num_arms, seed):
    return models.TARNet(
        x_dim,
        num_arms,
        rep_hidden=data.rep_hidden,
        head_hidden=data.head_hidden,
        rngs=nnx.Rngs(seed),
    )


def _weight_decay_mask(params):
    return jax.tree_util.tree_map_with_path(
        lambda path, _: any(getattr(p, "key", None) == "kernel" for p in path), params
    )


def _cfr_step_fn(graphdef, rest, s: CfrSettings, num_arms, tx, x, t, y, w):
    n = x.shape[0]
    b = min(s.batch_size, n)

    def step(carry, key):
        params, opt_state = carry
        k_batch, k_loss = jax.random.split(key)
        idx = jax.random.permutation(k_batch, n)[:b]

        def loss_fn(p):
            return _cfr_loss(
                nnx.merge(graphdef, p, rest), x[idx], t[idx], y[idx], w[idx], k_loss, s, num_arms
            )

        (loss, factual), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
        updates, opt_state = tx.update(grads, opt_state, params)
        return (optax.apply_updates(params, updates), opt_state), factual

    return step


def fit_cfr(train: CausalData, s: CfrSettings, seed: int = 0, *, time_epochs: int = 0):
    """Trains TARNet (``scheme="none"``) or CFR with a balancing scheme on ``train``.

    Args:
      train: training units (every arm present). s: :class:`CfrSettings`. seed: init + batches.
      time_epochs: when ``> 0``, re-run the compiled training that many times after training
        and report the time of one epoch (``N / batch_size`` steps), for the cost vs ``K``.

    Returns:
      ``(predict, info)``; ``info`` has ``wall_s``, ``final_factual_mse`` and, with
      ``time_epochs``, ``s_per_epoch``.
    """
    if s.scheme not in (*losses.SCHEMES, "none"):
        raise ValueError(f"unknown scheme {s.scheme!r}")
    k = train.num_arms
    mean, sd = _standardise(train.y)
    x = jnp.asarray(train.x)
    t = jnp.asarray(train.t)
    y = jnp.asarray((train.y - mean) / sd)
    p_k = np.bincount(train.t, minlength=k) / len(train)
    w = jnp.asarray(1.0 / (k * p_k[train.t]), jnp.float32)
    model = _make_cfr(s, x.shape[1], k, seed)
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    tx = optax.chain(
        optax.add_decayed_weights(s.weight_decay, mask=_weight_decay_mask(params)),
        optax.adam(s.learning_rate),
    )
    opt_state = tx.init(params)
    step = _cfr_step_fn(graphdef, rest, s, k, tx, x, t, y, w)

    @jax.jit
    def run(carry, keys):
        return jax.lax.scan(step, carry, keys)

    t0 = time.perf_counter()
    keys = jax.random.split(jax.random.key(seed + 1), s.iterations)
    carry0 = (params, opt_state)
    (params, opt_state), factual = run(carry0, keys)
    factual = jax.block_until_ready(factual)
    info: dict[str, Any] = {
        "wall_s": time.perf_counter() - t0,
        "final_factual_mse": float(factual[-1]) * sd**2,
    }
    if time_epochs > 0:
        # Re-run the (already compiled) training scan and scale to one epoch (N / batch steps).
        t1 = time.perf_counter()
        for _ in range(time_epochs):
            jax.block_until_ready(run(carry0, keys))
        per_step = (time.perf_counter() - t1) / (time_epochs * s.iterations)
        info["s_per_epoch"] = per_step * max(1, len(train) // min(s.batch_size, len(train)))
    fitted = nnx.merge(graphdef, params, rest)

    def predict(x_new):
        mu_hat, _ = fitted(jnp.asarray(x_new, jnp.float32))
        return np.asarray(mu_hat, np.float64) * sd + mean

    info["_model"] = fitted
    info["_y_scale"] = (mean, sd)
    return predict, info


def estimate_alpha_for(train: CausalData, s: CfrSettings, seed: int = 0) -> float:
    """The plug-in ``alpha_hat`` (:func:`fidia_jax.losses.estimate_alpha`, reconstruction) from a
    pilot TARNet (``alpha = 0``) trained with the same settings: the median norm of each training
    unit's factual-loss gradient w.r.t. its representation (standardised outcome units)."""
    _, info = fit_cfr(train, dataclasses.replace(s, scheme="none", alpha=0.0), seed)
    model = info["_model"]
    mean, sd = info["_y_scale"]
    x = jnp.asarray(train.x)
    t = jnp.asarray(train.t)
    y = jnp.asarray((train.y - mean) / sd)
    phi = jax.nn.elu(model.phi(x))

    def unit_loss(phi_r, t_i, y_i):
        out = jnp.concatenate([head(phi_r[None]) for head in model.heads], -1)[0]
        return (out[t_i] - y_i) ** 2

    grads = jax.vmap(jax.grad(unit_loss))(phi, t, y)
    return float(losses.estimate_alpha(grads))


def _labels(params):
    return jax.tree_util.tree_map_with_path(
        lambda path, _: (
            "critic" if getattr(path[0], "key", None) in ("dz_net", "dv_net") else "gen"
        ),
        params,
    )


def _package_batches(n, batch_size, count, rng):
    """The package's ``Base_sampler`` index stream: a shuffled order walked in batches; the last
    batch of a pass wraps around to the start of the order, then the order is reshuffled."""
    order = rng.permutation(n)
    out = []
    while len(out) < count:
        for step in range(-(-n // batch_size)):
            if (step + 1) * batch_size <= n:
                out.append(order[step * batch_size : (step + 1) * batch_size])
            else:
                out.append(
                    np.concatenate(
                        [order[step * batch_size :], order[: (step + 1) * batch_size - n]]
                    )
                )
                rng.shuffle(order)
            if len(out) == count:
                break
    return np.stack(out).astype(np.int32)


def fit_causalegm(train: CausalData, s: EgmSettings, seed: int = 0):
    """Trains CausalEGM as the authors' ``CausalEGM.train``: per iteration ``g_d_freq`` critic
    steps then one encoder/generator step, each on a fresh batch and fresh ``N(0, I)`` draws;
    Adam(lr, beta1=0.5, beta2=0.9, eps=1e-7) for both groups; every ``batches_per_eval``
    iterations the training-set outcome MSE is measured and the predictions of the best
    iteration are kept (the package's model selection). With ``K > 2`` arms the arm embedding is
    refreshed from the encoder's latents at every evaluation (:func:`models.arm_embedding_w2`).

    Returns:
      ``(predict, info)``; ``predict(x) -> (N, K)``; ``info``: ``wall_s``, ``best_iter``.
    """
    k = train.num_arms
    model = models.CausalEGM(
        train.x.shape[1],
        k,
        z_dims=s.z_dims,
        g_units=s.g_units,
        e_units=s.e_units,
        f_units=s.f_units,
        h_units=s.h_units,
        dz_units=s.dz_units,
        dv_units=s.dv_units,
        embed_dim=s.embed_dim,
        rngs=nnx.Rngs(seed),
    )
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    adam = optax.adam(s.learning_rate, b1=0.5, b2=0.9, eps=1e-7)
    labels = _labels(params)
    tx_gen = optax.multi_transform({"gen": adam, "critic": optax.set_to_zero()}, labels)
    tx_crit = optax.multi_transform({"gen": optax.set_to_zero(), "critic": adam}, labels)
    z_dim = sum(s.z_dims)
    x = jnp.asarray(train.x)
    t = jnp.asarray(train.t)
    y = jnp.asarray(train.y)
    weights = losses.EGMWeights()

    def critic_step(carry, inp):
        params, st_crit, rest_ = carry
        b, key = inp
        k_z, k_eps = jax.random.split(key)
        z = jax.random.normal(k_z, (b.shape[0], z_dim))
        eps = jax.random.uniform(k_eps, (2,))

        def crit_loss(p):
            m = nnx.merge(graphdef, p, rest_)
            return losses.causalegm_critic_loss(m, z, x[b], eps[0], eps[1], weights)[0]

        g = jax.grad(crit_loss)(params)
        upd, st_crit = tx_crit.update(g, st_crit, params)
        return (optax.apply_updates(params, upd), st_crit, rest_), None

    @jax.jit
    def iteration(params, st_gen, st_crit, rest_, idx_crit, idx_gen, key):
        keys = jax.random.split(key, s.g_d_freq + 1)
        (params, st_crit, _), _ = jax.lax.scan(
            critic_step, (params, st_crit, rest_), (idx_crit, keys[:-1])
        )
        z = jax.random.normal(keys[-1], (idx_gen.shape[0], z_dim))

        def gen_loss(p):
            m = nnx.merge(graphdef, p, rest_)
            return losses.causalegm_generator_loss(
                m, z, x[idx_gen], t[idx_gen], y[idx_gen], weights
            )

        g = jax.grad(lambda p: gen_loss(p)[0])(params)
        upd, st_gen = tx_gen.update(g, st_gen, params)
        return optax.apply_updates(params, upd), st_gen, st_crit

    @jax.jit
    def evaluate(params, rest_):
        m = nnx.merge(graphdef, params, rest_)
        z = m.e_net(x)
        pred = m.outcome(z, t)
        return jnp.mean((pred - y) ** 2), z

    rng = np.random.default_rng(seed)
    n_steps = s.n_iter + 1  # the package loops range(n_iter + 1)
    stream = _package_batches(len(train), s.batch_size, n_steps * (s.g_d_freq + 1), rng)
    stream = stream.reshape(n_steps, s.g_d_freq + 1, -1)
    keys = jax.random.split(jax.random.key(seed + 7), n_steps)
    st_gen, st_crit = tx_gen.init(params), tx_crit.init(params)
    best = (np.inf, None, -1)
    t0 = time.perf_counter()
    for it in range(n_steps):
        params, st_gen, st_crit = iteration(
            params, st_gen, st_crit, rest, stream[it, :-1], stream[it, -1], keys[it]
        )
        if it % s.batches_per_eval:
            continue  # the package evaluates when batch_idx % batches_per_eval == 0
        mse, z = evaluate(params, rest)
        mse = float(mse)
        if mse < best[0]:
            best = (mse, nnx.merge(graphdef, params, rest), it)
        if k > 2 and s.embed_dim > 0:
            current = nnx.merge(graphdef, params, rest)
            emb = models.arm_embedding_w2(
                np.asarray(z),
                train.t,
                k,
                s.embed_dim,
                previous=np.asarray(current.embedding[...]) if it > 0 else None,
            )
            current.embedding[...] = jnp.asarray(emb)
            _, _, rest = nnx.split(current, nnx.Param, ...)
    fitted = best[1]
    info = {"wall_s": time.perf_counter() - t0, "best_iter": best[2], "best_train_mse_y": best[0]}

    def predict(x_new):
        return np.asarray(fitted.potential_outcomes(jnp.asarray(x_new, jnp.float32)), np.float64)

    return predict, info
