"""The class-incremental loop: one stream of tasks, one method, an accuracy matrix.

Protocol (reconstruction; the abstract gives none): tasks arrive one by one with only their own
training data (no replay buffer). After each task every method is evaluated on the test data of
all tasks seen so far, predicting among all seen classes (class-incremental, no task id).

* ``hypcl`` / ``euclidean``: :class:`~fidia_jax.projects.hypcl.model.PrototypeAdapter` in that
  geometry. On task ``t`` the adapter and the new classes' prototypes train on ``CE +
  distill_weight * mean d(z, z_old)^2`` (``z_old``: the adapter frozen at the end of task
  ``t-1``; distances in the model's geometry); old prototypes are frozen. Adapter weights use
  Adam; hyperbolic prototypes use :func:`fidia_jax.optim.riemannian_adam` (same step size):
  one ``optax.partition`` over the pair ``(ball, rest)`` and one
  :func:`fidia_jax.train.make_train_step`, whose steps run in a ``jax.lax.scan`` per task (a
  non-finite loss or gradient stops the run with :class:`~fidia_jax.errors.TrainingError`).
  With ``feature_replay`` (default) each minibatch of the new task is joined by as many
  Gaussian pseudo-features of the old classes, drawn in the *frozen* feature space from the
  per-class mean and standard deviation stored when each class's task ended (no exemplar is
  kept; prototype augmentation in the spirit of PASS, Zhu et al., CVPR 2021), and the softmax
  of ``CE`` runs over every seen class. Without it, ``local_ce`` restricts the softmax to the
  current task's classes (a separated softmax, as in SS-IL / ER-ACE), else all seen classes.
* ``finetune``: the Euclidean model trained on each task in turn with neither distillation nor
  frozen prototypes (lower bound).
* ``joint_*``: after task ``t``, a fresh model trained on the pooled data of tasks ``0..t``
  (upper bound; ``steps_per_task`` steps on the pool).
* ``ncm``: nearest class mean of the frozen features (no training); ``config.ncm_features``
  picks raw features (default), running statistics of the tasks seen so far, or the trained
  methods' first-task standardisation.

For the trained methods, features are standardised with the mean and standard deviation of the
*first task's* training data only (no statistic of a future task leaks into the stream); each
standard deviation is floored at ``STD_FLOOR_FRACTION`` times the mean over features, so a
feature (nearly) constant in the first task is scaled at most ``1 / STD_FLOOR_FRACTION`` times
more than a typical one when it varies later (the floor was ``1e-3`` before issue 41: a
feature constant in task 1 then blew up by ~1000x).

Data parallel (:mod:`fidia_jax.parallel`): with more than one device (``config.num_devices``,
the most that divide ``batch_size``), every gradient step's minibatch -- real and replayed rows
-- is split along ``"data"`` (a sharding constraint inside the jitted scan), the parameters and
optimiser state are replicated or FSDP-split (``config.param_sharding``) and the training data
replicated; the class orders, seeds and minibatch draws are the same as on one device, so the
results equal one device's up to the summation order of the cross-device reductions. On one
device the program is the plain single-device one.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from fidia_jax import _checks, optim, parallel, train
from fidia_jax.errors import DataError, TrainingError
from fidia_jax.projects.hypcl.losses import embedding_distillation, masked_cross_entropy
from fidia_jax.projects.hypcl.model import BallParam, PrototypeAdapter

__all__ = [
    "STD_FLOOR_FRACTION",
    "ContinualData",
    "run_method",
    "standardize_like_first_task",
    "stratified_split",
]

STD_FLOOR_FRACTION = 0.1  # a std below this fraction of the mean std over features is floored


def _floored_std(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and std of ``x`` over rows, the std floored (:data:`STD_FLOOR_FRACTION`)."""
    mu, sd = x.mean(axis=0), x.std(axis=0)
    return mu, np.maximum(sd, STD_FLOOR_FRACTION * max(float(sd.mean()), 1e-12))


class ContinualData:
    """Train/test features and labels plus the task list (label tuples); ``raw``: the same data
    before standardisation (``None`` when these are the raw features).

    Args:
      x_tr, x_te: ``(N, D)`` / ``(M, D)`` finite features (stored float32).
      y_tr, y_te: ``(N,)`` / ``(M,)`` integer labels in ``[0, max label of the tasks]``
        (whole-valued floats are accepted; a fractional label is never truncated).
      tasks: label tuples, one per task.

    Raises:
      ValueError: a wrong rank (naming the argument).
      DataError: a NaN/inf feature, feature widths or row counts that disagree, a non-integer
        label, or a label outside ``[0, max label of the tasks]`` (each message names the
        argument).
    """

    def __init__(self, x_tr, y_tr, x_te, y_te, tasks, raw: ContinualData | None = None):
        self.tasks = [tuple(int(c) for c in t) for t in tasks]
        num_classes = int(max(max(t) for t in self.tasks)) + 1
        for xn, x, yn, y in (("x_tr", x_tr, "y_tr", y_tr), ("x_te", x_te, "y_te", y_te)):
            _check_split(xn, x, yn, y, num_classes)
        if np.shape(x_tr)[1] != np.shape(x_te)[1]:
            raise DataError(
                f"ContinualData: x_te has {np.shape(x_te)[1]} features but x_tr has "
                f"{np.shape(x_tr)[1]}"
            )
        self.x_tr = np.asarray(x_tr, np.float32)
        self.y_tr = np.asarray(y_tr).astype(np.int32)
        self.x_te = np.asarray(x_te, np.float32)
        self.y_te = np.asarray(y_te).astype(np.int32)
        self.num_classes = num_classes
        self.raw = raw


def check_stream_inputs(x, y, *, where: str = "run_stream", finite: bool = True) -> None:
    """Host-side checks of the ``(x, y)`` a stream is split from (:func:`run_stream`): ``x``
    ``(N, D)`` finite, ``y`` ``(N,)``; label values are checked per split by
    :class:`ContinualData`. ``finite=False`` leaves the NaN check to the splits actually read
    (a caller that never reads the test rows must not look at them either).

    Raises:
      ValueError: a wrong rank; DataError: row counts that differ or a NaN/inf in ``x`` (each
        naming the argument).
    """
    _checks.assert_rank(x, 2, "x", where=where, detail="(N, D) features")
    _checks.assert_rank(y, 1, "y", where=where, detail="(N,) labels")
    if np.shape(y)[0] != np.shape(x)[0]:
        raise DataError(f"{where}: y has {np.shape(y)[0]} labels but x {np.shape(x)[0]} rows")
    if finite:
        _checks.assert_finite(x, "x", where=where)


def _check_split(x_name: str, x, y_name: str, y, num_classes: int) -> None:
    """Host-side checks of one split of :class:`ContinualData` (see its ``Raises``)."""
    where = "ContinualData"
    _checks.assert_rank(x, 2, x_name, where=where, detail="(N, D) features")
    _checks.assert_rank(y, 1, y_name, where=where, detail="(N,) labels")
    _checks.assert_finite(x, x_name, where=where)
    if np.shape(y)[0] != np.shape(x)[0]:
        raise DataError(
            f"{where}: {y_name} has {np.shape(y)[0]} labels but {x_name} {np.shape(x)[0]} rows"
        )
    lab = np.asarray(y)
    if lab.size and not np.issubdtype(lab.dtype, np.integer):
        if not np.issubdtype(lab.dtype, np.floating) or np.any(lab != np.round(lab)):
            raise DataError(f"{where}: {y_name} must hold integer class labels, got {lab.dtype}")
    _checks.assert_value_range(
        lab, 0, num_classes - 1, y_name, where=where, detail="the classes the tasks name"
    )


def stratified_split(y, test_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Indices ``(train, test)``: ``round(test_fraction * n_k)`` (at least 1) test items per class."""
    rng = np.random.default_rng(seed)
    y = np.asarray(y)
    train, test = [], []
    for k in np.unique(y):
        idx = rng.permutation(np.flatnonzero(y == k))
        n_te = max(1, int(round(test_fraction * idx.size)))
        test.append(idx[:n_te])
        train.append(idx[n_te:])
    return np.sort(np.concatenate(train)), np.sort(np.concatenate(test))


def standardize_like_first_task(data: ContinualData) -> ContinualData:
    """Standardises features with the statistics of task 0's training data (std floored at
    :data:`STD_FLOOR_FRACTION` times its mean over features); ``raw`` keeps the input."""
    first = np.isin(data.y_tr, data.tasks[0])
    mu, sd = _floored_std(data.x_tr[first])
    raw = data.raw if data.raw is not None else data
    return ContinualData(
        (data.x_tr - mu) / sd, data.y_tr, (data.x_te - mu) / sd, data.y_te, data.tasks, raw
    )


def _accuracy_row(pred, data: ContinualData, upto: int) -> list[float]:
    row = []
    for j, task in enumerate(data.tasks):
        if j > upto:
            row.append(float("nan"))
            continue
        sel = np.isin(data.y_te, task)
        row.append(float(np.mean(pred[sel] == data.y_te[sel])))
    return row


def _seen_mask(data: ContinualData, upto: int) -> np.ndarray:
    seen = np.zeros(data.num_classes, bool)
    for task in data.tasks[: upto + 1]:
        seen[list(task)] = True
    return seen


def _ncm(data: ContinualData, features: str = "raw") -> np.ndarray:
    """Nearest-class-mean accuracy matrix; ``features`` as ``HypclConfig.ncm_features``."""
    base = data if features == "first_task" or data.raw is None else data.raw
    acc = []
    for t in range(len(data.tasks)):
        seen = np.flatnonzero(_seen_mask(data, t))
        x_tr, x_te = base.x_tr, base.x_te
        if features == "running":
            mu, sd = _floored_std(x_tr[np.isin(base.y_tr, seen)])
            x_tr, x_te = (x_tr - mu) / sd, (x_te - mu) / sd
        means = np.stack([x_tr[base.y_tr == k].mean(axis=0) for k in seen])
        d2 = ((x_te[:, None, :] - means[None, :, :]) ** 2).sum(-1)
        acc.append(_accuracy_row(seen[np.argmin(d2, axis=1)], data, t))
    return np.asarray(acc)


def _mesh(config) -> jax.sharding.Mesh | None:
    """The ``data`` mesh of the gradient steps (``None``: one device, one process)."""
    return parallel.parallel_mesh(config.batch_size, num_devices=getattr(config, "num_devices", 0))


def _class_gaussians(data: ContinualData) -> tuple[np.ndarray, np.ndarray]:
    """Per-class mean and standard deviation ``(K, F)`` of the frozen training features (what
    a method stores of a class when its task ends: two vectors, no exemplar)."""
    k, f = data.num_classes, data.x_tr.shape[1]
    mu, sd = np.zeros((k, f), np.float32), np.zeros((k, f), np.float32)
    for c in np.unique(data.y_tr):
        xc = data.x_tr[data.y_tr == c]
        mu[c], sd[c] = xc.mean(axis=0), xc.std(axis=0)
    return mu, sd


class _Trainer:
    """Compiled training of one geometry on one data set (compiled once, reused per task)."""

    def __init__(self, data: ContinualData, config, geometry: str, dim: int):
        self.data, self.config, self.geometry = data, config, geometry
        self.dim = dim
        self.mesh = _mesh(config)
        self.param_sharding = getattr(config, "param_sharding", "replicated")
        model = self.fresh(0)
        self.graphdef, _, _ = nnx.split(model, BallParam, ...)
        lr = config.learning_rate
        # Riemannian Adam on the ball part (hyperbolic prototypes), Adam on the rest: one
        # optimiser over the pair ``(ball, rest)``, one make_train_step.
        self.tx = optax.partition(
            {"ball": optim.riemannian_adam(lr, c=config.curvature), "rest": optax.adam(lr)},
            ("ball", "rest"),
        )
        self._train = jax.jit(self._train_impl, static_argnums=(0,))
        self._logits = jax.jit(lambda ball, rest, x: nnx.merge(self.graphdef, ball, rest)(x))

    def fresh(self, seed: int):
        c = self.config
        return PrototypeAdapter(
            self.data.x_tr.shape[1],
            self.dim,
            self.data.num_classes,
            geometry=self.geometry,
            c=c.curvature,
            clip_r=c.clip_r,
            temperature=c.temperature,
            rngs=nnx.Rngs(seed),
        )

    def split(self, model):
        _, ball, rest = nnx.split(model, BallParam, ...)
        return ball, rest

    def _train_impl(
        self,
        num_steps,
        x_tr,
        y_tr,
        ball,
        rest,
        old_ball,
        old_rest,
        idx,
        n_valid,
        seen,
        trainable,
        distill_w,
        key_data,
        mu_KxF,
        sd_KxF,
        replay_K,
        replay_w,
    ):
        key = jax.random.wrap_key_data(key_data)  # raw key data: placeable on any mesh
        gd, geometry, c = self.graphdef, self.geometry, self.config.curvature
        use_distill = self.config.distill_weight > 0
        bsz = self.config.batch_size
        mesh = self.mesh

        def split_rows(batch):  # data parallel: the minibatch split along "data"
            if mesh is None:
                return batch
            return jax.lax.with_sharding_constraint(
                batch, jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("data"))
            )

        def loss_fn(params, batch):
            x, y, x_old, y_old = batch
            model = nnx.merge(gd, *params)
            p = model.prototypes[...]
            p = jnp.where(trainable[:, None], p, jax.lax.stop_gradient(p))
            # One forward pass over [real; replayed] rows (one graph to compile, not two).
            z_all = model.embed(jnp.concatenate([x, x_old]))
            logits = model.logits_from_embedding(z_all, p)
            z = z_all[:bsz]
            ce = masked_cross_entropy(logits[:bsz], y, seen)
            ce_old = masked_cross_entropy(logits[bsz:], y_old, seen)
            loss = ce + replay_w * ce_old
            if use_distill:  # static: the previous adapter is not traced when the weight is 0
                z_old = nnx.merge(gd, old_ball, old_rest).embed(x)
                loss = loss + distill_w * embedding_distillation(z, z_old, geometry, c)
            return loss

        # Inside this jitted function the step is inlined into the scan (no donation there).
        train_step = train.make_train_step(loss_fn, self.tx, donate=False)

        def step(state, k):
            k_idx, k_cls, k_eps = jax.random.split(k, 3)
            ii = idx[jax.random.randint(k_idx, (bsz,), 0, n_valid)]
            # Pseudo-features of old classes: mean + std * N(0, 1) in the frozen feature space.
            # Without replay classes (task 0, fine-tuning) the replayed rows carry weight 0, but
            # their labels must still be seen classes: an unseen label has CE = inf and
            # 0 * inf = NaN (classes drawn from -1e9 logits were all class 0, seen or not).
            pool = jnp.where(jnp.any(replay_K), replay_K, seen)
            y_old = jax.random.categorical(k_cls, jnp.where(pool, 0.0, -jnp.inf), shape=(bsz,))
            x_old = mu_KxF[y_old] + sd_KxF[y_old] * jax.random.normal(k_eps, (bsz, mu_KxF.shape[1]))
            state, metrics = train_step(state, split_rows((x_tr[ii], y_tr[ii], x_old, y_old)))
            return state, (metrics["loss"], metrics["nonfinite"])

        init = train.init_train_state((ball, rest), self.tx)
        state, (losses, nonfinite) = jax.lax.scan(step, init, jax.random.split(key, num_steps))
        return state.params, losses, nonfinite

    def train(
        self,
        ball,
        rest,
        old,
        classes_upto: int,
        pool_from: int,
        trainable,
        distill_w,
        key,
        num_steps,
        local_ce: bool = False,
        replay: bool = False,
        losses_out: list[float] | None = None,
    ):
        """Trains on the data of tasks ``pool_from..classes_upto``; the softmax runs over the
        classes seen so far, or (``local_ce``) over the classes of that data only. ``replay``
        adds a minibatch of Gaussian pseudo-features of the classes of tasks ``< pool_from``.
        ``losses_out`` (a list) gets every step's loss."""
        data = self.data
        pool = [k for task in data.tasks[pool_from : classes_upto + 1] for k in task]
        sel = np.flatnonzero(np.isin(data.y_tr, pool))
        idx = np.zeros(data.y_tr.size, np.int32)
        idx[: sel.size] = sel
        if local_ce:
            seen = np.zeros(data.num_classes, bool)
            seen[pool] = True
        else:
            seen = _seen_mask(data, classes_upto)
        seen = jnp.asarray(seen)
        old_classes = [k for task in data.tasks[:pool_from] for k in task] if replay else []
        mu, sd = _class_gaussians(data)
        replay_k = np.zeros(data.num_classes, bool)
        replay_k[old_classes] = True
        params = (ball, rest, old[0], old[1])
        inputs = (
            jnp.asarray(data.x_tr),
            jnp.asarray(data.y_tr),
            jnp.asarray(idx),
            jnp.asarray(sel.size, jnp.int32),
            seen,
            jnp.asarray(trainable),
            jnp.asarray(distill_w, jnp.float32),
            jax.random.key_data(key),
            jnp.asarray(mu),
            jnp.asarray(sd),
            jnp.asarray(replay_k),
            jnp.asarray(float(bool(old_classes)), jnp.float32),
        )
        if self.mesh is not None:  # parameters as configured, the rest replicated
            params = parallel.place_params(params, self.mesh, self.param_sharding)
            inputs = parallel.replicate(inputs, self.mesh)
        x_tr, y_tr, idx_, n_valid, seen, trainable_, distill_, key, mu_, sd_, rk, rw = inputs
        (ball, rest), losses, nonfinite = self._train(
            num_steps, x_tr, y_tr, *params, idx_, n_valid, seen, trainable_, distill_, key,
            mu_, sd_, rk, rw,
        )  # fmt: skip
        losses, nonfinite = parallel.to_host((losses, nonfinite))
        if losses_out is not None:
            losses_out.extend(float(v) for v in np.asarray(losses))
        if nonfinite.any():  # the library's policy: the step was skipped, training stops
            first = int(np.argmax(nonfinite))
            raise TrainingError(
                f"hypcl ({self.geometry}): the loss or gradient at step {first + 1} of "
                f"{num_steps} is not finite (loss {float(np.asarray(losses)[first])}); the step "
                "was skipped and training stopped"
            )
        return ball, rest

    def predict(self, ball, rest, upto: int) -> np.ndarray:
        x_te = jnp.asarray(self.data.x_te)
        if self.mesh is not None:
            x_te = parallel.replicate(x_te, self.mesh)
        logits = np.asarray(parallel.to_host(self._logits(ball, rest, x_te)))
        seen = _seen_mask(self.data, upto)
        return np.argmax(np.where(seen[None, :], logits, -np.inf), axis=1)


def run_method(
    method: str,
    data: ContinualData,
    config,
    seed: int,
    trainers: dict[str, Any] | None = None,
    dim: int | None = None,
    losses_out: list[float] | None = None,
) -> np.ndarray:
    """The ``(T, T)`` accuracy matrix of ``method`` on the stream ``data`` (module docstring).

    ``trainers`` (a dict, filled on first use) shares compiled trainers between methods and
    orders of the same data shapes; ``losses_out`` (a list) gets the loss of every training
    step, task after task (none for ``ncm``).

    Raises:
      TrainingError: a non-finite loss or gradient (the step is named).
    """
    if method == "ncm":
        return _ncm(data, getattr(config, "ncm_features", "raw"))
    geometry = "poincare" if method in ("hypcl", "joint_hypcl") else "euclidean"
    dim = config.dim if dim is None else dim
    trainers = {} if trainers is None else trainers
    key_tr = (geometry, dim, config)  # a tuned config (other lr, ...) gets its own trainer
    if key_tr not in trainers:
        trainers[key_tr] = _Trainer(data, config, geometry, dim)
    tr = trainers[key_tr]
    tr.data = data  # same shapes (another class order of the same split): no recompilation
    num_tasks, k = len(data.tasks), data.num_classes
    key = jax.random.key(seed)
    acc = []
    if method.startswith("joint"):
        for t in range(num_tasks):
            ball, rest = tr.split(tr.fresh(seed))
            ball, rest = tr.train(
                ball,
                rest,
                (ball, rest),
                t,
                0,
                np.ones(k, bool),
                0.0,
                jax.random.fold_in(key, 100 * t),
                config.steps_per_task,
                losses_out=losses_out,
            )
            acc.append(_accuracy_row(tr.predict(ball, rest, t), data, t))
        return np.asarray(acc)
    ball, rest = tr.split(tr.fresh(seed))
    for t in range(num_tasks):
        if method == "finetune":
            trainable, w = np.ones(k, bool), 0.0
        else:
            trainable = np.zeros(k, bool)
            trainable[list(data.tasks[t])] = True
            w = config.distill_weight if t > 0 else 0.0
        cl = method != "finetune"
        ball, rest = tr.train(
            ball,
            rest,
            (ball, rest),
            t,
            t,
            trainable,
            w,
            jax.random.fold_in(key, t),
            config.steps_per_task,
            local_ce=cl and config.local_ce and not config.feature_replay,
            replay=cl and config.feature_replay,
            losses_out=losses_out,
        )
        acc.append(_accuracy_row(tr.predict(ball, rest, t), data, t))
    return np.asarray(acc)
