"""Training loops: TARNet/CFR with a K-arm balancing scheme, and CausalEGM (binary or multi-arm).

Both return a function ``predict(x_NxD) -> (N, K)`` potential outcomes (float64 numpy) plus a
dict of training facts (wall time, time per epoch, the alpha used). Every gradient step is a
:func:`fidia_jax.train.make_train_step` step: CFR / TARNet run through
:func:`fidia_jax.train.fit`; CausalEGM keeps its own loop (alternating critic and generator
steps, model selection at evaluations).

Data parallel (:mod:`fidia_jax.parallel`): with more than one device (``num_devices`` of the
settings: the most devices that divide the minibatch), each gradient step's minibatch is split
along ``"data"`` (a sharding constraint on the rows drawn inside the step), the parameters and
optimiser states are placed as ``param_sharding`` says and the training units replicated. The
minibatch draws are those of one device, so the losses equal one device's up to the summation
order of the cross-device reductions. Prediction and scoring use host copies of the trained
parameters on one device.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from fidia_jax import parallel
from fidia_jax import train as train_lib
from fidia_jax.errors import TrainingError
from fidia_jax.projects.causal import losses
from fidia_jax.projects.causal import model as nets
from fidia_jax.projects.causal.data import CausalData, split_rows

#: The validation split of a training set is ``split_causal(train, fraction, seed + 7919)``,
#: the same for early stopping and for choosing alpha (``train._validation_alpha``).
VAL_SEED_OFFSET = 7919

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
    # Early stopping (CFR's code: validation factual loss, best iteration kept). Off when
    # ``val_fraction == 0``; else that fraction of the training units (stratified by arm,
    # :func:`~.data.split_causal` with seed ``seed + VAL_SEED_OFFSET``) is held back, the plain factual
    # MSE on it is computed every ``eval_every`` steps, training stops after ``patience``
    # evaluations without improvement (``0``: never stops before ``iterations``) and the
    # parameters of the best evaluation are returned.
    val_fraction: float = 0.0
    eval_every: int = 10
    patience: int = 10
    # data parallelism (module docstring): devices of the mesh (0: all that divide the
    # minibatch) and how the parameters sit on it ("replicated" or "fsdp")
    num_devices: int = 0
    param_sharding: str = "replicated"

    def __post_init__(self) -> None:
        if not 0.0 <= self.val_fraction < 1.0:
            raise ValueError(f"val_fraction must be in [0, 1), got {self.val_fraction}")
        if self.eval_every < 1 or self.patience < 0 or self.iterations < 1:
            raise ValueError(
                f"eval_every and iterations must be >= 1 and patience >= 0, got "
                f"{self.eval_every}, {self.iterations}, {self.patience}"
            )


@dataclasses.dataclass(frozen=True)
class EgmSettings:
    """CausalEGM training: the package's CLI defaults except ``n_iter`` (30000 there).

    ``stream_seed``: the seed of the batch order and of the ``N(0, I)`` draws. The package's
    ``Base_sampler`` reseeds numpy's global generator with 123 whatever the model's
    ``random_seed``, and both streams come from that generator, so a package run varies with
    its seed only through the TensorFlow draws (initialisation, gradient-penalty mixing
    weights). ``123`` (default) reproduces the package's two streams exactly (same batches,
    same ``z``; fixture-tested); ``None`` seeds them with the ``seed`` of
    :func:`fit_causalegm` (our option: the seed then varies every random draw).

    ``adam``: ``"keras"`` (default, the package's Keras Adam: ``eps`` added to ``sqrt(v)``
    before the bias correction, ``lr_t = lr sqrt(1 - b2^t) / (1 - b1^t)``) or ``"optax"``
    (``optax.adam``: ``eps`` added after the bias correction; differs when ``sqrt(v_hat)`` is
    near ``eps``). Both with ``beta1 = 0.5``, ``beta2 = 0.9``, ``eps = 1e-7``, one optimiser
    state per group (critics; encoder, generator, ``f``, ``h``) as the package.

    ``critic_tf_moments``: the critics' batch-norm variance with TensorFlow's stop-gradient on
    the mean (default, the package; changes the gradient-penalty's parameter gradient), or
    the exact variance (``False``); see :class:`~.model.WganCritic`.

    ``alpha``, ``beta``, ``gamma``: the package's loss weights (reconstruction, treatment +
    outcome MSE, gradient penalty; :class:`~.losses.EGMWeights`).
    """

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
    stream_seed: int | None = 123
    adam: str = "keras"
    critic_tf_moments: bool = True
    alpha: float = 1.0
    beta: float = 1.0
    gamma: float = 10.0
    num_devices: int = 0  # data parallelism, as CfrSettings
    param_sharding: str = "replicated"


def _mesh(batch_size: int, num_devices: int) -> jax.sharding.Mesh | None:
    """The ``data`` mesh of a fit's steps (``None``: one device in one process)."""
    return parallel.parallel_mesh(batch_size, num_devices=num_devices)


def _split_rows(tree, mesh):
    """Inside a step: the minibatch rows split along ``"data"`` (as they are without a mesh)."""
    if mesh is None:
        return tree
    return jax.lax.with_sharding_constraint(
        tree, jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("data"))
    )


def _replicated(tree, mesh):
    return tree if mesh is None else parallel.replicate(tree, mesh)


def _on_host_device(tree):
    """Host copies of (possibly sharded) arrays, as arrays of this process's default device."""
    return jax.tree.map(jnp.asarray, parallel.to_host(tree))


def _standardise(y):
    mean, sd = float(np.mean(y)), float(np.std(y)) or 1.0
    return mean, sd


def _balanced(s: CfrSettings) -> bool:
    return s.scheme != "none" and s.alpha != 0.0


def _cfr_loss(model, x, t, y, w, key, s: CfrSettings, num_arms, alpha):
    mu_hat, phi = model(x)
    pred = jnp.take_along_axis(mu_hat, t[:, None], axis=1)[:, 0]
    factual = jnp.sum(w * (pred - y) ** 2) / jnp.sum(w)
    if not _balanced(s):
        return factual, factual
    bal = losses.balancing_loss(
        s.scheme, phi, t, num_arms, key, ipm_name=s.ipm, bandwidth=s.bandwidth
    )
    return factual + alpha * bal, factual


def _make_cfr(data: CfrSettings, x_dim, num_arms, seed):
    return nets.TARNet(
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


def _cfr_train_step(graphdef, rest, s: CfrSettings, num_arms, tx, mesh=None):
    """The CFR step on a batch ``{"key", "x", "t", "y", "w", "alpha"}`` (all training units,
    ``alpha`` a scalar): a minibatch of ``batch_size`` units drawn from the key; metrics
    ``loss`` and ``factual`` (standardised). The data and alpha are arguments, not constants,
    so one compiled step serves every fit of the same shapes and settings (see
    :func:`_cached_cfr_step`)."""

    def loss_fn(params, batch):
        x, t, y, w = batch["x"], batch["t"], batch["y"], batch["w"]
        n = x.shape[0]
        b = min(s.batch_size, n)
        k_batch, k_loss = jax.random.split(batch["key"])
        idx = jax.random.permutation(k_batch, n)[:b]
        model = train_lib.merge_model(graphdef, params, rest)
        xb, tb, yb, wb = _split_rows((x[idx], t[idx], y[idx], w[idx]), mesh)
        loss, factual = _cfr_loss(model, xb, tb, yb, wb, k_loss, s, num_arms, batch["alpha"])
        return loss, {"factual": factual}

    return train_lib.make_train_step(loss_fn, tx, has_aux=True)


#: Compiled CFR steps, keyed by the settings (alpha aside), K and the data's shape: the fits of
#: a grid over alpha, seeds or replications of one size compile once per process.
_STEP_CACHE: dict[Any, Any] = {}


def _cached_cfr_step(s: CfrSettings, x_dim: int, num_arms: int, n: int, model_params, mesh=None):
    # early stopping does not change the step: those fields are left out of the key
    plain = dataclasses.replace(s, alpha=float(_balanced(s)), val_fraction=0.0, eval_every=10,
                                patience=10)  # fmt: skip
    key = (plain, x_dim, num_arms, n)
    if key not in _STEP_CACHE:
        graphdef, params, rest = model_params
        tx = optax.chain(
            optax.add_decayed_weights(s.weight_decay, mask=_weight_decay_mask(params)),
            optax.adam(s.learning_rate),
        )
        if len(_STEP_CACHE) > 32:
            _STEP_CACHE.clear()
        step = _cfr_train_step(graphdef, rest, s, num_arms, tx, mesh)
        _STEP_CACHE[key] = (graphdef, rest, tx, step)
    return _STEP_CACHE[key]


def _cfr_problem(data: CausalData, s: CfrSettings, seed: int):
    """What a CFR fit on ``data`` trains with: the initial parameters, the model's graph and
    non-trained state, the optimiser, the (cached) compiled step, ``batch(i)`` (the whole data
    set with step ``i``'s key; outcomes standardised, units weighted by the inverse of their
    arm's share), the outcome's ``(mean, sd)`` and ``fresh()``, a new train state (a copy of
    the initial parameters, placed on the mesh of ``s.num_devices`` with the data)."""
    k = data.num_arms
    mean, sd = _standardise(data.y)
    mesh = _mesh(min(s.batch_size, len(data)), s.num_devices)
    x = jnp.asarray(data.x)
    t = jnp.asarray(data.t)
    y = jnp.asarray((data.y - mean) / sd)
    p_k = np.bincount(data.t, minlength=k) / len(data)
    w = jnp.asarray(1.0 / (k * p_k[data.t]), jnp.float32)
    split = train_lib.split_model(_make_cfr(s, x.shape[1], k, seed))
    graphdef, rest, tx, step = _cached_cfr_step(s, x.shape[1], k, x.shape[0], split, mesh)
    alpha = jnp.asarray(s.alpha, jnp.float32)
    if mesh is None:
        keys = jax.random.split(jax.random.key(seed + 1), s.iterations)
    else:  # drawn on the mesh, replicated: the same keys on every process
        rep = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
        keys = jax.jit(lambda: jax.random.split(jax.random.key(seed + 1), s.iterations),
                       out_shardings=rep)()  # fmt: skip
        x, t, y, w, alpha = parallel.replicate((x, t, y, w, alpha), mesh)

    def batch(i):
        return {"key": keys[i], "x": x, "t": t, "y": y, "w": w, "alpha": alpha}

    def fresh():  # the step donates its state: a new copy of the initial parameters each time
        params = jax.tree.map(jnp.copy, split[1])
        return train_lib.init_train_state(params, tx, mesh=mesh, param_sharding=s.param_sharding)

    return split[1], graphdef, rest, tx, step, batch, (mean, sd), fresh


def _predictor(graphdef, params, rest, mean: float, sd: float):
    """``(predict, model)``: ``predict(x)`` gives ``(n, K)`` float64 potential outcomes in the
    outcome's units (host copies of ``params`` on this process's default device)."""
    fitted = train_lib.merge_model(graphdef, _on_host_device(params), rest)

    def predict(x_new):
        mu_hat, _ = fitted(jnp.asarray(x_new, jnp.float32))
        return np.asarray(mu_hat, np.float64) * sd + mean

    return predict, fitted


def fit_cfr(
    train: CausalData,
    s: CfrSettings,
    seed: int = 0,
    *,
    time_epochs: int = 0,
    workdir: str | os.PathLike | None = None,
    run: str = "cfr",
):
    """Trains TARNet (``scheme="none"``) or CFR with a balancing scheme on ``train``.

    Args:
      train: training units (every arm present). s: :class:`CfrSettings`. seed: init + batches.
      time_epochs: when ``> 0``, re-run the compiled training that many times after training
        and report the time of one epoch (``N / batch_size`` steps), for the cost vs ``K``.
      workdir: :func:`fidia_jax.train.fit`'s files (``metrics.jsonl``, checkpoints of ``run``)
        and resume; ``None``: none.
      run: the fit's name in the files and the progress display.

    Returns:
      ``(predict, info)``; ``info`` has ``wall_s``, ``final_factual_mse`` and, with
      ``time_epochs``, ``s_per_epoch``. With early stopping (``s.val_fraction > 0``) the
      model is fitted on the other units only, ``predict`` uses the parameters of the best
      evaluation, and ``info`` also has ``val_mse`` (its validation factual MSE, outcome
      units), ``best_step``, ``stopped_step`` (steps run), ``val_history`` (``[(step,
      val_mse)]``) and ``val_index`` (the validation units' rows in ``train``).

    Raises:
      ValueError: an unknown scheme.
      DataError: early stopping with an arm too small to split (:func:`~.data.split_causal`).
      TrainingError: a non-finite loss or gradient (:func:`fidia_jax.train.fit`).
    """
    if s.scheme not in (*losses.SCHEMES, "none"):
        raise ValueError(f"unknown scheme {s.scheme!r}")
    if s.val_fraction > 0:
        return _fit_cfr_early_stopped(train, s, seed, workdir=workdir, run=run)
    _, graphdef, rest, tx, step, batch, (mean, sd), fresh = _cfr_problem(train, s, seed)
    t0 = time.perf_counter()
    res = train_lib.fit(fresh(), step, batch, num_steps=s.iterations, workdir=workdir,
                    run=run, show=("loss", "factual"))  # fmt: skip
    factual = [r["factual"] for r in res.history if "factual" in r]
    info: dict[str, Any] = {
        "wall_s": time.perf_counter() - t0,
        "final_factual_mse": factual[-1] * sd**2,
    }
    if time_epochs > 0:
        # Re-run the (already compiled) training and scale to one epoch (N / batch steps).
        t1 = time.perf_counter()
        for _ in range(time_epochs):
            state = fresh()
            for i in range(s.iterations):
                state, _ = step(state, batch(i))
            jax.block_until_ready(state)
        per_step = (time.perf_counter() - t1) / (time_epochs * s.iterations)
        batch = min(s.batch_size, len(train))
        info["s_per_epoch"] = per_step * max(1, len(train) // batch)
    predict, fitted = _predictor(graphdef, res.state.params, rest, mean, sd)
    info["_model"] = fitted
    info["_y_scale"] = (mean, sd)
    return predict, info


def _fit_cfr_early_stopped(train: CausalData, s: CfrSettings, seed: int, *, workdir, run):
    """:func:`fit_cfr` with early stopping: chunks of ``eval_every`` steps of
    :func:`fidia_jax.train.fit` (no checkpoints: a stopped fit has no final step to resume
    to), the validation factual MSE after each chunk, the best parameters kept (copied: the
    step donates its state)."""
    fit_index, val_index = split_rows(train, s.val_fraction, seed + VAL_SEED_OFFSET)
    fit_part, val = train.subset(fit_index), train.subset(val_index)
    _, graphdef, rest, tx, step, batch, (mean, sd), fresh = _cfr_problem(fit_part, s, seed)
    state = fresh()
    mesh = getattr(jax.tree.leaves(state.params)[0].sharding, "mesh", None)  # fresh()'s mesh
    val_data = _replicated((jnp.asarray(val.x), jnp.asarray(val.t), jnp.asarray(val.y)), mesh)

    @jax.jit
    def _val_mse(params, x_val, t_val, y_val):
        mu_hat, _ = train_lib.merge_model(graphdef, params, rest)(x_val)
        pred = jnp.take_along_axis(mu_hat, t_val[:, None], axis=1)[:, 0] * sd + mean
        return jnp.mean((pred - y_val) ** 2)

    def val_mse(params):
        return parallel.to_host(_val_mse(params, *val_data))

    t0 = time.perf_counter()
    best = (float(val_mse(state.params)), 0, jax.tree.map(jnp.copy, state.params))
    history, records, factual = [(0, best[0])], [], []
    done, waited = 0, 0
    while done < s.iterations and (s.patience == 0 or waited < s.patience):
        n = min(s.eval_every, s.iterations - done)
        res = train_lib.fit(
            state,
            step,
            lambda i, o=done: batch(o + i),
            num_steps=n,
            quiet=True,
        )
        state = res.state
        for r in res.history:
            records.append({**r, "step": r["step"] + done})
            if "factual" in r:
                factual.append(r["factual"])
        done += n
        v = float(val_mse(state.params))
        history.append((done, v))
        records.append({"step": done, "eval/val_mse": v})
        if v < best[0]:
            best, waited = (v, done, jax.tree.map(jnp.copy, state.params)), 0
        else:
            waited += 1
    if workdir is not None:
        train_lib.append_metrics(
            pathlib.Path(workdir) / "metrics.jsonl", [{"run": run, **r} for r in records]
        )
    predict, fitted = _predictor(graphdef, best[2], rest, mean, sd)
    info: dict[str, Any] = {
        "wall_s": time.perf_counter() - t0,
        "final_factual_mse": (factual[-1] if factual else float("nan")) * sd**2,
        "val_mse": best[0],
        "best_step": best[1],
        "stopped_step": done,
        "val_history": history,
        "val_index": val_index,
        "_model": fitted,
        "_y_scale": (mean, sd),
    }
    return predict, info


def estimate_alpha_for(
    train: CausalData,
    s: CfrSettings,
    seed: int = 0,
    *,
    workdir: str | os.PathLike | None = None,
    run: str = "alpha_pilot",
    with_fit: bool = False,
):
    """The plug-in ``alpha_hat`` (:func:`~.losses.estimate_alpha`, reconstruction) from a
    pilot TARNet (``alpha = 0``) trained with the same settings (:func:`fit_cfr`, with
    ``workdir`` and ``run``): the median norm of each training unit's factual-loss gradient
    w.r.t. its representation (standardised outcome units).

    Returns:
      ``alpha_hat`` (float); with ``with_fit``, ``(alpha_hat, predict, info)`` of the pilot
      (which *is* a TARNet fit with these settings, so a caller need not train TARNet again).
    """
    pilot = dataclasses.replace(s, scheme="none", alpha=0.0)
    predict, info = fit_cfr(train, pilot, seed, workdir=workdir, run=run)
    model = info["_model"]
    mean, sd = info["_y_scale"]
    x = jnp.asarray(train.x)
    t = jnp.asarray(train.t)
    y = jnp.asarray((train.y - mean) / sd)
    phi = jax.nn.elu(model.phi(x))

    def unit_loss(phi_r, t_i, y_i):
        out = jnp.concatenate([head(phi_r[None]) for head in model.heads], -1)[0]
        return (out[t_i] - y_i) ** 2

    # per-unit gradients w.r.t. the representation (a statistic, not a training step)
    grads = jax.vmap(jax.grad(unit_loss))(phi, t, y)
    alpha_hat = float(losses.estimate_alpha(grads))
    return (alpha_hat, predict, info) if with_fit else alpha_hat


def _labels(params):
    return jax.tree_util.tree_map_with_path(
        lambda path, _: (
            "critic" if getattr(path[0], "key", None) in ("dz_net", "dv_net") else "gen"
        ),
        params,
    )


def keras_adam(
    learning_rate: float, b1: float = 0.5, b2: float = 0.9, eps: float = 1e-7
) -> optax.GradientTransformation:
    """Adam as Keras 3 (``keras.optimizers.Adam.update_step``, the package's optimiser) computes
    it: ``m += (g - m)(1 - b1)``, ``v += (g^2 - v)(1 - b2)``,
    ``p -= lr sqrt(1 - b2^t) / (1 - b1^t) * m / (sqrt(v) + eps)`` (``eps`` on the raw
    ``sqrt(v)``; ``optax.adam`` adds it after the bias correction). Defaults: the package's
    ``beta_1 = 0.5``, ``beta_2 = 0.9`` and Keras' ``epsilon = 1e-7``."""

    def init(params):
        return (
            jnp.zeros([], jnp.int32),
            jax.tree.map(jnp.zeros_like, params),
            jax.tree.map(jnp.zeros_like, params),
        )

    def update(grads, state, params=None):
        del params
        count, m, v = state
        count = count + 1
        m = jax.tree.map(lambda m_, g: m_ + (g - m_) * (1 - b1), m, grads)
        v = jax.tree.map(lambda v_, g: v_ + (g * g - v_) * (1 - b2), v, grads)
        t = count.astype(jnp.float32)
        rate = learning_rate * jnp.sqrt(1 - b2**t) / (1 - b1**t)
        updates = jax.tree.map(lambda m_, v_: -(m_ * rate) / (jnp.sqrt(v_) + eps), m, v)
        return updates, (count, m, v)

    return optax.GradientTransformation(init, update)


class _PackageStream:
    """The package's batch order and ``N(0, I)`` draws (``util.Base_sampler`` and
    ``Gaussian_sampler.get_batch``), from one legacy numpy generator as the package draws them
    from numpy's global one: ``seed``, a shuffled order of the ``n`` rows, then per batch
    ``batch_size`` consecutive rows of the order (the last batch of a pass wraps around to the
    start and the order is reshuffled at the *next* batch request, as the package's generator
    resumes), each batch followed by its ``(batch_size, z_dim)`` draw.

    ``next() -> (rows_B int32, z_BxZ float32)``.
    """

    def __init__(self, n: int, batch_size: int, z_dim: int, seed: int):
        if not 1 <= batch_size <= n:
            raise ValueError(f"causalegm: batch_size must be in [1, {n}] (units), got {batch_size}")
        self._rs = np.random.RandomState(seed)
        self._order = np.arange(n)
        self._rs.shuffle(self._order)
        self._n, self._b, self._z = n, batch_size, z_dim
        self._step, self._batches = 0, -(-n // batch_size)
        self._reshuffle = False

    def next(self):
        if self._reshuffle:
            self._rs.shuffle(self._order)
            self._reshuffle = False
        lo, hi = self._step * self._b, (self._step + 1) * self._b
        if hi <= self._n:
            rows = self._order[lo:hi]
        else:
            rows = np.concatenate([self._order[lo:], self._order[: hi - self._n]])
            self._reshuffle = True
        self._step = (self._step + 1) % self._batches
        z = self._rs.normal(np.zeros(self._z), 1.0, (self._b, self._z)).astype(np.float32)
        return rows.astype(np.int32), z


def _egm_steps(graphdef, tx_crit, tx_gen, weights, mesh=None):
    """CausalEGM's two steps (:func:`fidia_jax.train.make_train_step`, the model's non-parameter
    state -- the arm embedding -- as the state's ``model_state``): the WGAN critic step on a
    batch ``{"idx", "z", "eps", "x", "t", "y"}`` (rows, ``N(0, I)`` draw, the two
    gradient-penalty mixing weights, all training units) and the encoder/generator step on
    ``{"idx", "z", "x", "t", "y"}``; with ``mesh`` the drawn rows are split along ``"data"``."""

    def crit_loss(params, rest, batch):
        m = train_lib.merge_model(graphdef, params, rest)
        z, v = _split_rows((batch["z"], batch["x"][batch["idx"]]), mesh)
        eps = batch["eps"]
        return losses.causalegm_critic_loss(m, z, v, eps[0], eps[1], weights)[0], rest

    def gen_loss(params, rest, batch):
        b = batch["idx"]
        m = train_lib.merge_model(graphdef, params, rest)
        z, xb, tb, yb = _split_rows((batch["z"], batch["x"][b], batch["t"][b], batch["y"][b]), mesh)
        return losses.causalegm_generator_loss(m, z, xb, tb, yb, weights)[0], rest

    # not donated: the two steps share one parameter tree, and the best iteration's is kept
    return (
        train_lib.make_train_step(crit_loss, tx_crit, has_state=True, donate=False),
        train_lib.make_train_step(gen_loss, tx_gen, has_state=True, donate=False),
    )


def _check_finite(flags: list[tuple[int, str, jax.Array]]) -> None:
    """The package's non-finite policy in CausalEGM's own loop: a skipped step (its
    ``nonfinite`` metric) stops the run with a :class:`~fidia_jax.errors.TrainingError` naming
    the first such iteration and step. Empties ``flags``."""
    values = parallel.to_host([f for *_, f in flags])
    for (it, which, _), bad in zip(flags, values, strict=True):
        if bad:
            raise TrainingError(
                f"causalegm: the loss or gradient of the {which} step at iteration {it} is not "
                f"finite; the step was skipped and training stopped"
            )
    flags.clear()


def _egm_model(train: CausalData, s: EgmSettings, seed: int, init):
    k = train.num_arms
    if init is None:
        return nets.CausalEGM(
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
            critic_tf_moments=s.critic_tf_moments,
            rngs=nnx.Rngs(seed),
        )
    if not isinstance(init, nets.CausalEGM):
        raise TypeError(f"fit_causalegm: init must be a CausalEGM, got {type(init).__name__}")
    if (init.v_dim, init.num_arms) != (train.x.shape[1], k):
        raise ValueError(
            f"fit_causalegm: init has v_dim={init.v_dim}, num_arms={init.num_arms}; the data "
            f"has {train.x.shape[1]} covariates and {k} arms"
        )
    return init


def fit_causalegm(
    train: CausalData,
    s: EgmSettings,
    seed: int = 0,
    *,
    run: str = "causalegm",
    init: nets.CausalEGM | None = None,
):
    """Trains CausalEGM as the authors' ``CausalEGM.train``: per iteration ``g_d_freq`` critic
    steps then one encoder/generator step, each on the next batch of the package's stream
    (:class:`EgmSettings` ``stream_seed``) with its ``N(0, I)`` draw; Adam(lr, beta1=0.5,
    beta2=0.9, eps=1e-7) for each group (``s.adam``); every ``batches_per_eval`` iterations
    (from iteration 0) the training-set outcome MSE is measured and the predictions of the best
    iteration are kept (the package's model selection). With ``K > 2`` arms the arm embedding
    is refreshed from the encoder's latents at every evaluation (:func:`~.model.arm_embedding_w2`).

    The driver keeps this outer loop (alternating critic and generator updates, model
    selection); each update is a :func:`fidia_jax.train.make_train_step` step, and progress is
    :class:`fidia_jax.train.FitProgress` (named ``run``) at every evaluation.

    Random draws: ``seed`` sets the initialisation (``nnx.Rngs(seed)``; the package: TF's
    Glorot-uniform under ``random_seed``, same distribution) and the gradient-penalty mixing
    weights (numpy ``default_rng(seed)``; the package: ``tf.random.uniform``); the batches and
    ``z`` follow ``s.stream_seed``. Fixture: tests/projects/causal/test_causalegm_fidelity.py.

    Args:
      train: the training units (the package's workflow uses all of them).
      s: settings; seed: see above; run: the progress name.
      init: start from these networks (e.g. weights copied from the package with
        :meth:`~.model.CausalEGM.load_package_weights`) instead of a fresh initialisation;
        its widths are used, not those of ``s``.

    Returns:
      ``(predict, info)``; ``predict(x) -> (N, K)``; ``info``: ``wall_s``, ``best_iter``,
      ``best_train_mse_y``, ``evals`` (``[(iteration, train MSE(y))]``).

    Raises:
      TrainingError: a non-finite loss or gradient (the first such step, found at the next
        evaluation).
      ValueError: ``s.batch_size`` outside ``[1, N]``, an unknown ``s.adam``, or an ``init``
        whose covariate width or arm count differs from the data's.
    """
    return _fit_egm(train, s, seed, _egm_model(train, s, seed, init), run=run)


def _fit_egm(train: CausalData, s: EgmSettings, seed: int, model, *, run: str, eps=None):
    """:func:`fit_causalegm`'s loop; ``eps`` (``(n_iter + 1, g_d_freq, 2)``) replaces our
    mixing-weight draws (replaying a package run)."""
    if s.adam not in ("keras", "optax"):
        raise ValueError(f"EgmSettings.adam must be 'keras' or 'optax', got {s.adam!r}")
    k = train.num_arms
    graphdef, params, rest = train_lib.split_model(model)
    if s.adam == "keras":
        adam = keras_adam(s.learning_rate)
    else:
        adam = optax.adam(s.learning_rate, b1=0.5, b2=0.9, eps=1e-7)
    labels = _labels(params)
    tx_gen = optax.multi_transform({"gen": adam, "critic": optax.set_to_zero()}, labels)
    tx_crit = optax.multi_transform({"gen": optax.set_to_zero(), "critic": adam}, labels)
    mesh = _mesh(s.batch_size, s.num_devices)
    data = _replicated(
        {
            "x": jnp.asarray(train.x, jnp.float32),
            "t": jnp.asarray(train.t),
            "y": jnp.asarray(train.y, jnp.float32),
        },
        mesh,
    )
    weights = losses.EGMWeights(alpha=s.alpha, beta=s.beta, gamma=s.gamma)
    crit_step, gen_step = _egm_steps(graphdef, tx_crit, tx_gen, weights, mesh)

    @jax.jit
    def _evaluate(params, rest_, data):
        m = nnx.merge(graphdef, params, rest_)
        z = m.e_net(data["x"])
        pred = m.outcome(z, data["t"])
        return jnp.mean((pred - data["y"]) ** 2), z

    def evaluate(params, rest_):
        return parallel.to_host(_evaluate(params, rest_, data))

    n_steps = s.n_iter + 1  # the package loops range(n_iter + 1)
    stream = _PackageStream(
        len(train),
        s.batch_size,
        sum(model.z_dims),
        seed if s.stream_seed is None else s.stream_seed,
    )
    if eps is None:
        eps = np.random.default_rng(seed).uniform(size=(n_steps, s.g_d_freq, 2))
    eps = np.asarray(eps, np.float32)
    # one parameter tree, two optimiser states: each step hands its parameters to the other
    place = {"mesh": mesh, "param_sharding": s.param_sharding}
    rest = _replicated(rest, mesh)
    state_c = train_lib.init_train_state(params, tx_crit, model_state=rest, **place)
    state_g = train_lib.init_train_state(state_c.params, tx_gen, model_state=rest, **place)
    best = (np.inf, None, -1)
    evals: list[tuple[int, float]] = []
    flags: list[tuple[int, str, jax.Array]] = []
    progress = train_lib.FitProgress(run, n_steps, show=("train_mse_y",))
    t0 = time.perf_counter()
    try:
        for it in range(n_steps):
            for j in range(s.g_d_freq):
                rows, z = stream.next()
                drawn = _replicated({"idx": rows, "z": z, "eps": eps[it, j]}, mesh)
                state_c, m = crit_step(state_c, {**drawn, **data})
                flags.append((it, "critic", m["nonfinite"]))
            state_g = state_g._replace(params=state_c.params)
            rows, z = stream.next()
            state_g, m = gen_step(state_g, {**_replicated({"idx": rows, "z": z}, mesh), **data})
            flags.append((it, "generator", m["nonfinite"]))
            state_c = state_c._replace(params=state_g.params)
            if it == 0:
                jax.block_until_ready(state_g.params)
                progress.compiled()
            if it % s.batches_per_eval:
                continue  # the package evaluates when batch_idx % batches_per_eval == 0
            _check_finite(flags)
            params = state_g.params
            mse, z_all = evaluate(params, rest)
            mse = float(mse)
            evals.append((it, mse))
            progress.update(it + 1, {"train_mse_y": mse})
            if mse < best[0]:
                best = (mse, (params, rest), it)
            if k > 2 and s.embed_dim > 0:
                current = nnx.merge(graphdef, params, rest)
                emb = nets.arm_embedding_w2(
                    np.asarray(z_all),
                    train.t,
                    k,
                    s.embed_dim,
                    previous=parallel.to_host(current.embedding[...]) if it > 0 else None,
                )
                current.embedding[...] = jnp.asarray(emb)
                _, _, rest = train_lib.split_model(current)
                rest = _replicated(rest, mesh)
                state_c = state_c._replace(model_state=rest)
                state_g = state_g._replace(model_state=rest)
        _check_finite(flags)
    finally:
        progress.close(f"best train MSE(y) {best[0]:.4g} at iteration {best[2]}")
    fitted = nnx.merge(graphdef, *_on_host_device(best[1]))
    info = {
        "wall_s": time.perf_counter() - t0,
        "best_iter": best[2],
        "best_train_mse_y": best[0],
        "evals": evals,
        "_final_params": state_g.params,
    }

    def predict(x_new):
        return np.asarray(fitted.potential_outcomes(jnp.asarray(x_new, jnp.float32)), np.float64)

    return predict, info
