"""SCALE: Stochastic Column-normAlized Last-layer momEntum, as optax transforms.

SCALE is SGD with two changes: every matrix update is *column normalised* (each output unit's
gradient is divided by its RMS over the fan-in), and only the last layer (the untied output
projection) keeps a first-moment (momentum) buffer. Vectors (norm scales, biases) use AdamW.

Layout mapping from the authors' PyTorch code. PyTorch ``nn.Linear.weight`` is ``(out, in)``
and the reference reduces over ``dim=1`` (fan-in) for every linear layer, over ``dim=0`` (the
vocabulary) for ``nn.Embedding.weight`` ``(vocab, features)``, and over all trailing axes for
``ndim > 2`` tensors (``g.view(out, -1)``). Flax stores ``Dense`` kernels ``(in, out)``, ``Embed``
tables ``(vocab, features)`` and ``DenseGeneral``/``Conv`` kernels ``(*in_axes, *out_axes)``. So
in Flax every one of those cases is "reduce over all axes except the last" (axis 0 for 2-D
arrays), which is this module's default. Pass ``fan_in_axes`` for kernels with several output
axes (e.g. a ``DenseGeneral`` ``(dim, heads, head_dim)`` kernel reduces over axis 0 only).

Fidelity to the authors' code (fixture ``tests/data/scale/``, made by
``tools/scale_make_fixture.py`` from commit ``f5bd4e7``; test
``tests/optim/test_scale_fidelity.py``):
  * The 1-D AdamW adds ``eps`` to ``sqrt(v)`` *before* the bias correction, as the reference
    does: the update is ``m / (eps + sqrt(v)) * sqrt(1 - b2**t) / (1 - b1**t)``, i.e. an
    effective ``eps / sqrt(1 - b2**t)`` (default ``adam_eps_placement="before_correction"``).
    ``optax.adamw`` adds ``eps`` to the bias-corrected ``sqrt(v_hat)``
    (``adam_eps_placement="after_correction"``, this module's behaviour before issue 38). The
    two differ by about ``eps (1/sqrt(1 - b2**t) - 1) / sqrt(v_hat)`` relative: negligible for
    gradients of order 1, but at step 1 (``eps / sqrt(0.001) = 3.2e-7``) 0.3 % for
    ``|g| = 1e-4`` and 3 % for ``|g| = 1e-5``, gradients that norm scales and biases can see.
  * The reference scales the AdamW learning rate as ``adam_lr / max_lr * lr(t)`` (the peak
    rate ``adam_lr``, the matrices' schedule shape); here ``adam_learning_rate`` is its own
    scalar or schedule (default: ``learning_rate``). Pass the matrices' schedule times
    ``adam_lr / peak_lr`` to follow the reference, as ``fidia_jax.projects.optimizers`` does.

References:
  Glentis, Li, Han, Hong, "A Minimalist Optimizer Design for LLM Pretraining" (SCALE),
  ICML 2026, arXiv:2506.16659. Code: github.com/OptimAI-Lab/Minimalist_LLM_Pretraining
  @ f5bd4e754eb9c0b43f2b01330adeebe2d9b28fd3 (``mem_eff_pt/pt_scale/scale_optimizer.py``,
  ``mem_eff_pt/utils/train_utils.py::build_optimizer``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, Literal

import jax
import jax.numpy as jnp
import optax

from fidia_jax.errors import ConfigError
from fidia_jax.optim._schedules import ScalarOrSchedule

__all__ = [
    "DEFAULT_LAST_LAYER_NAMES",
    "column_rms_normalize",
    "path_to_name",
    "scale",
    "scale_by_column_rms",
    "scale_param_labels",
]

DEFAULT_LAST_LAYER_NAMES: tuple[str, ...] = ("lm_head", "output", "unembed")

FanInAxes = int | Sequence[int] | Callable[[str, jax.Array], Sequence[int]] | None
EpsPlacement = Literal["before_correction", "after_correction"]
LastLayer = str | Sequence[str] | Callable[[str, jax.Array], bool] | None


def path_to_name(path: Sequence[Any]) -> str:
    """``"layers/0/attention/wq/kernel"`` from a ``jax.tree_util`` key path.

    ``GetAttrKey('value')`` (the array inside an ``nnx.Variable``) is dropped.

    Example:
      >>> import jax
      >>> from fidia_jax import optim
      >>> [(path, _)] = jax.tree_util.tree_flatten_with_path({"layers": [{"kernel": 0}]})[0]
      >>> optim.path_to_name(path)
      'layers/0/kernel'
    """
    parts = []
    for k in path:
        if isinstance(k, jax.tree_util.DictKey):
            parts.append(str(k.key))
        elif isinstance(k, jax.tree_util.SequenceKey):
            parts.append(str(k.idx))
        elif isinstance(k, jax.tree_util.GetAttrKey):
            if k.name != "value":
                parts.append(k.name)
        elif isinstance(k, jax.tree_util.FlattenedIndexKey):
            parts.append(str(k.key))
        else:
            parts.append(str(k))
    return "/".join(parts)


def _default_axes(ndim: int) -> tuple[int, ...]:
    return tuple(range(ndim - 1))


def _resolve_axes(fan_in_axes: FanInAxes, name: str, g: jax.Array) -> tuple[int, ...]:
    if fan_in_axes is None:
        axes = _default_axes(g.ndim)
    elif callable(fan_in_axes):
        axes = fan_in_axes(name, g)
        axes = _default_axes(g.ndim) if axes is None else axes
    elif isinstance(fan_in_axes, int):
        axes = (fan_in_axes,)
    else:
        axes = tuple(fan_in_axes)
    axes = tuple(int(a) % g.ndim if g.ndim else int(a) for a in axes)
    if not axes or any(a < 0 or a >= g.ndim for a in axes) or len(set(axes)) == g.ndim:
        raise ConfigError(
            f"fan_in_axes {axes} invalid for parameter {name!r} of shape {g.shape}: need at "
            "least one reduced axis and one kept (output) axis"
        )
    return axes


def _check_hyperparams(fn: str, **hyperparams: Any) -> None:
    """Rejects floating hyperparameters given as arrays narrower than float32.

    A bf16 ``0.999`` is ``1.0`` and a float16 ``1e-8`` is ``0``: the value the caller meant is
    already lost, so this raises instead of training a different optimiser. Python numbers,
    float32/float64 arrays and schedules (callables) pass.
    """
    for name, value in hyperparams.items():
        dtype = getattr(value, "dtype", None)
        if dtype is None or callable(value) or not jnp.issubdtype(dtype, jnp.floating):
            continue
        if jnp.finfo(dtype).bits < 32:
            raise ConfigError(
                f"{fn}: hyperparameter {name!r} is {jnp.dtype(dtype).name}; hyperparameters "
                "must be float32 (0.999 is 1.0 in bfloat16, 1e-8 is 0 in float16). "
                "optax.inject_hyperparams stores them in the parameters' dtype unless told: "
                f"use optax.inject_hyperparams(optim.{fn}, hyperparam_dtype=jnp.float32)"
            )


def _widen(x: Any) -> Any:
    """``x`` in float32 if it is a floating array narrower than float32, else unchanged."""
    dtype = getattr(x, "dtype", None)
    if dtype is not None and jnp.issubdtype(dtype, jnp.floating) and jnp.finfo(dtype).bits < 32:
        return jnp.asarray(x, jnp.float32)
    return x


def _narrow_like(u: Any, ref: Any) -> Any:
    """``u`` cast to ``ref``'s dtype (no-op when they already agree)."""
    dtype = getattr(ref, "dtype", None)
    return u if dtype is None or u.dtype == dtype else u.astype(dtype)


def _with_float32_state(
    inner: optax.GradientTransformation,
) -> optax.GradientTransformationExtraArgs:
    """Runs ``inner`` in float32 for bf16 / float16 parameters (state, arithmetic, hyperparams).

    ``init`` sees the parameters widened to float32, so every state leaf ``inner`` builds from
    them (momentum, AdamW ``mu`` and ``nu``) is float32; ``update`` widens gradients and
    parameters, and casts the updates back to the parameters' dtype (the gradients' dtype when
    ``params`` is ``None``). Leaves that are float32 or wider pass through untouched, so float32
    training is bit-for-bit the same as without this wrapper.
    """
    inner = optax.with_extra_args_support(inner)

    def init_fn(params):
        return inner.init(jax.tree.map(_widen, params))

    def update_fn(updates, state, params=None, **extra_args):
        wide_params = None if params is None else jax.tree.map(_widen, params)
        new, state = inner.update(jax.tree.map(_widen, updates), state, wide_params, **extra_args)
        ref = updates if params is None else params
        return jax.tree.map(_narrow_like, new, ref), state

    return optax.GradientTransformationExtraArgs(init_fn, update_fn)


def column_rms_normalize(
    g: jax.Array, axes: Sequence[int] = (0,), eps: float | jax.Array = 1e-8
) -> jax.Array:
    """``g / max(sqrt(mean(g**2, axes)), eps)``, computed in float32 or wider, in ``g.dtype``.

    The statistics are computed in ``g``'s dtype when it is float32 or wider (float64 stays
    float64, as the reference does in float64), in float32 for bf16 / float16. On the CPU
    backend, when ``axes`` are the leading axes (the Flax default), the sum of squares is a
    loop over blocks of 8 rows that reads ``g`` in memory order (issue 44: XLA:CPU's reduce
    over a leading axis strides across rows, many times slower for wide outputs); only the
    order of the additions differs from ``jnp.mean``, a few ulps
    (``tests/optim/test_scale_fast_rms.py``).

    Args:
      g: gradient (or momentum) array, e.g. a ``(in, out)`` kernel.
      axes: the fan-in axes reduced over (one RMS per remaining index = output unit).
      eps: lower clamp of the RMS.

    Returns:
      array of ``g.shape`` and ``g.dtype`` whose every output unit has RMS 1 (unless clamped).

    Example (column 0 has RMS ``sqrt((9 + 16) / 2)``; the zero column stays zero)::

      >>> import jax.numpy as jnp, numpy as np
      >>> from fidia_jax import optim
      >>> u = optim.column_rms_normalize(jnp.array([[3.0, 0.0], [4.0, 0.0]]), axes=(0,))
      >>> np.asarray(u, np.float64).round(4).tolist()
      [[0.8485, 0.0], [1.1314, 0.0]]
    """
    wide = jnp.promote_types(g.dtype, jnp.float32)
    axes = tuple(int(a) % g.ndim for a in axes) if g.ndim else tuple(axes)
    gf = g.astype(wide)
    leading = g.ndim and axes == tuple(range(len(axes))) and len(axes) < g.ndim
    if leading and jax.default_backend() == "cpu":
        # Flax layout (every default case): the fan-in axes lead. A row-blocked sum of
        # squares reads the array once in memory order; XLA:CPU's reduce over a leading axis
        # strides across rows, many times slower for a (768, 32000) head (issue 44). GPUs and
        # TPUs reduce such axes well and keep the plain reduce (a sequential loop would not be).
        kept = g.shape[len(axes) :]
        ss = _sum_squares_leading(g, len(axes), wide)
        rms = jnp.sqrt(ss / math.prod(g.shape[: len(axes)])).reshape((1,) * len(axes) + kept)
    else:
        rms = jnp.sqrt(jnp.mean(gf * gf, axis=axes, keepdims=True))
    return (gf / jnp.maximum(rms, jnp.asarray(eps, wide))).astype(g.dtype)


_ROW_BLOCK = 8
"""Rows summed per loop iteration by :func:`_sum_squares_leading` (so ``_ROW_BLOCK``
interleaved running sums per output unit)."""


def _sum_squares_leading(g: jax.Array, n_lead: int, dtype) -> jax.Array:
    """``sum(g**2)`` over the first ``n_lead`` axes, in ``dtype``, reading ``g`` row by row.

    ``g`` is viewed as ``(R, K)`` (``R`` the product of the leading axes). A loop adds the
    squares of ``_ROW_BLOCK`` consecutive rows at a time into a ``(_ROW_BLOCK, K)`` running
    sum (row ``i`` goes to accumulator ``i % _ROW_BLOCK``), whose rows are then added, then the
    ``R % _ROW_BLOCK`` last rows. Every access is contiguous. The rounding differs from a
    single sequential sum by the usual summation error, at most ``R * eps`` relative (squares
    are non-negative: no cancellation), in practice a few ulps.

    Returns:
      the sums, shape ``(K,)`` flattened over the trailing axes, dtype ``dtype``.
    """
    rows = math.prod(g.shape[:n_lead])
    k = math.prod(g.shape[n_lead:])
    x = g.reshape(rows, k)
    nb, rem = divmod(rows, _ROW_BLOCK)
    total = jnp.zeros((k,), dtype)
    if nb:

        def body(i, acc):
            blk = jax.lax.dynamic_slice_in_dim(x, i * _ROW_BLOCK, _ROW_BLOCK, axis=0)
            blk = blk.astype(dtype)
            return acc + blk * blk

        acc = jax.lax.fori_loop(0, nb, body, jnp.zeros((_ROW_BLOCK, k), dtype))
        total = jnp.sum(acc, axis=0)
    if rem:
        tail = x[nb * _ROW_BLOCK :].astype(dtype)
        total = total + jnp.sum(tail * tail, axis=0)
    return total


def scale_by_column_rms(
    eps: float | jax.Array = 1e-8, fan_in_axes: FanInAxes = None
) -> optax.GradientTransformation:
    """Column normalisation of every (>= 2-D) update; stateless.

    Each output unit's update is divided by ``max(sqrt(mean(u**2 over fan-in)), eps)``
    (float32 statistics). By default the fan-in is every axis but the last (Flax layout; see
    the module docstring for the PyTorch mapping).

    Args:
      eps: clamp of the RMS (reference: 1e-8).
      fan_in_axes: ``None`` (all axes but the last), an int / tuple of ints for every leaf, or
        ``fn(name, leaf) -> axes`` with ``name`` from :func:`path_to_name` (return ``None`` for
        the default).

    Returns:
      An ``optax.GradientTransformation`` with ``optax.EmptyState``.

    Raises:
      ConfigError: (at update time) a leaf with fewer than 2 dimensions, or invalid axes;
        (at once) ``eps`` given as an array narrower than float32 (float16 ``1e-8`` is 0).

    Example::

      >>> import jax.numpy as jnp, numpy as np
      >>> from fidia_jax import optim
      >>> tx = optim.scale_by_column_rms()
      >>> u, _ = tx.update({"w": jnp.array([[3.0, 1.0], [4.0, -1.0]])}, tx.init(None))
      >>> np.asarray(u["w"], np.float64).round(4).tolist()
      [[0.8485, 1.0], [1.1314, -1.0]]
    """

    _check_hyperparams("scale_by_column_rms", eps=eps)

    def init_fn(params):
        del params
        return optax.EmptyState()

    def update_fn(updates, state, params=None):
        del params

        def one(path, u):
            name = path_to_name(path)
            if u.ndim < 2:
                raise ConfigError(
                    f"scale_by_column_rms needs >= 2-D parameters, got {name!r} with shape "
                    f"{u.shape}; route 1-D parameters elsewhere (see scale_param_labels)"
                )
            return column_rms_normalize(u, _resolve_axes(fan_in_axes, name, u), eps)

        return jax.tree.map_with_path(one, updates), state

    return optax.GradientTransformation(init_fn, update_fn)


def _match_last(last_layer: LastLayer, name: str, leaf) -> bool:
    if callable(last_layer):
        return bool(last_layer(name, leaf))
    names = (last_layer,) if isinstance(last_layer, str) else tuple(last_layer)
    parts = name.split("/")
    return any(n == name or n in parts or name.startswith(n + "/") for n in names)


def scale_param_labels(
    params: Any, *, last_layer: LastLayer = None, require_last_layer: bool = True
) -> Any:
    """Labels every parameter ``"matrix"``, ``"last_layer"`` or ``"vector"`` from its path.

    * ``"vector"``: ``ndim <= 1`` (norm scales, biases), updated by AdamW.
    * ``"last_layer"``: the single ``>= 2-D`` leaf whose path matches ``last_layer``.
    * ``"matrix"``: every other ``>= 2-D`` leaf (column-normalised SGD, no state).

    Args:
      params: parameter pytree (dicts, ``nnx.State``, ...).
      last_layer: how to find the untied output projection: a name matched against path
        components (``"lm_head"`` matches ``"lm_head/kernel"``), a full path, a sequence of
        such names, or ``fn(name, leaf) -> bool``. ``None`` tries
        :data:`DEFAULT_LAST_LAYER_NAMES`.
      require_last_layer: raise if nothing matches (set ``False`` for models without an
        untied output head, e.g. tied embeddings: then no leaf gets momentum).

    Returns:
      a pytree of strings with the structure of ``params``.

    Raises:
      ConfigError: no ``>= 2-D`` leaf matches (and ``require_last_layer``), or several do.

    Example::

      >>> import jax.numpy as jnp
      >>> from fidia_jax import optim
      >>> params = {"hidden": {"kernel": jnp.ones((3, 4)), "bias": jnp.zeros(4)},
      ...           "lm_head": {"kernel": jnp.ones((4, 2))}}
      >>> optim.scale_param_labels(params)
      {'hidden': {'bias': 'vector', 'kernel': 'matrix'}, 'lm_head': {'kernel': 'last_layer'}}
    """
    flat, treedef = jax.tree_util.tree_flatten_with_path(params)
    names = [path_to_name(p) for p, _ in flat]
    pattern = DEFAULT_LAST_LAYER_NAMES if last_layer is None else last_layer
    hits = [
        n
        for n, (_, leaf) in zip(names, flat, strict=True)
        if jnp.ndim(leaf) >= 2 and _match_last(pattern, n, leaf)
    ]
    if len(hits) > 1:
        raise ConfigError(
            f"ambiguous last layer: {hits} all match {pattern!r}; pass last_layer= the full "
            "path of the output projection"
        )
    if not hits and require_last_layer:
        matrices = [n for n, (_, leaf) in zip(names, flat, strict=True) if jnp.ndim(leaf) >= 2]
        raise ConfigError(
            f"no last layer found matching {pattern!r} among the >= 2-D parameters "
            f"{matrices}; pass last_layer=<name or path> (or require_last_layer=False)"
        )
    labels = []
    for n, (_, leaf) in zip(names, flat, strict=True):
        if jnp.ndim(leaf) <= 1:
            labels.append("vector")
        elif hits and n == hits[0]:
            labels.append("last_layer")
        else:
            labels.append("matrix")
    return jax.tree_util.tree_unflatten(treedef, labels)


def _one_minus_pow(b: float | jax.Array, count: jax.Array, dtype) -> jax.Array:
    """``1 - b**count`` in ``dtype``, accurate to a few ulps also for ``b`` near 1.

    ``1 - b**t`` loses ``ulp(1) / (1 - b)`` relative (2e-5 in float32 for ``b = 0.999``) to
    cancellation; ``-expm1(t * log(b))`` does not. For a Python ``b`` the logarithm is taken
    in double precision, as the reference computes its bias corrections in Python floats.
    """
    t = count.astype(dtype)
    if isinstance(b, int | float) and b > 0:
        return -jnp.expm1(t * jnp.asarray(math.log(b), dtype))
    b = jnp.asarray(b).astype(dtype)
    return -jnp.expm1(t * jnp.log(b))


def _scale_by_adam_eps_before_correction(
    b1: float | jax.Array, b2: float | jax.Array, eps: float | jax.Array
) -> optax.GradientTransformation:
    """Adam's direction with ``eps`` added to ``sqrt(v)`` before the bias correction.

    ``m <- b1 m + (1 - b1) g``, ``v <- b2 v + (1 - b2) g**2``,
    ``u = m / (eps + sqrt(v)) * sqrt(1 - b2**t) / (1 - b1**t)``: the reference's 1-D AdamW
    (``scale_optimizer.py``, ``g = buf1 / (eps + buf2.sqrt())`` then ``alpha = -lr / scale``).
    The state is ``optax.ScaleByAdamState`` (count, mu, nu), like ``optax.scale_by_adam``.
    """

    def init_fn(params):
        return optax.ScaleByAdamState(
            count=jnp.zeros([], jnp.int32),
            mu=optax.tree.zeros_like(params),
            nu=optax.tree.zeros_like(params),
        )

    def update_fn(updates, state, params=None):
        del params
        mu = optax.tree.update_moment(updates, state.mu, b1, 1)
        nu = optax.tree.update_moment_per_elem_norm(updates, state.nu, b2, 2)
        count = optax.safe_int32_increment(state.count)

        def one(m, v):
            bc1 = _one_minus_pow(b1, count, m.dtype)
            bc2 = _one_minus_pow(b2, count, m.dtype)
            return (m / (jnp.asarray(eps, m.dtype) + jnp.sqrt(v)) * (jnp.sqrt(bc2) / bc1)).astype(
                m.dtype
            )

        return jax.tree.map(one, mu, nu), optax.ScaleByAdamState(count=count, mu=mu, nu=nu)

    return optax.GradientTransformation(init_fn, update_fn)


def scale(
    learning_rate: ScalarOrSchedule,
    momentum: float | jax.Array = 0.9,
    weight_decay: float | jax.Array = 0.0,
    eps: float | jax.Array = 1e-8,
    adam_learning_rate: ScalarOrSchedule | None = None,
    adam_b1: float | jax.Array = 0.9,
    adam_b2: float | jax.Array = 0.999,
    adam_eps: float | jax.Array = 1e-8,
    adam_weight_decay: float | jax.Array | None = None,
    *,
    last_layer: LastLayer = None,
    require_last_layer: bool = True,
    fan_in_axes: FanInAxes = None,
    adam_eps_placement: EpsPlacement = "before_correction",
) -> optax.GradientTransformationExtraArgs:
    """The SCALE optimiser.

    Per parameter group (labels from :func:`scale_param_labels`):

    * matrices: ``p <- p - lr * (colnorm(g) + wd * p)`` (no state);
    * last layer: ``m <- b m + (1 - b) g`` (no bias correction),
      ``p <- p - lr * (colnorm(m) + wd * p)``;
    * vectors: AdamW at ``adam_learning_rate`` with decoupled weight decay
      ``adam_weight_decay``; by default with the reference's ``eps`` placement,
      ``p <- p - alr * (m / (eps + sqrt(v)) * sqrt(1 - b2**t) / (1 - b1**t) + wd * p)``
      (see ``adam_eps_placement``).

    Weight decay is decoupled and multiplied by the learning rate, as in the reference
    (``p.mul_(1 - lr * wd)``). Optimiser state: one momentum buffer the size of the last layer
    plus two AdamW moments for the vectors.

    Precision: for bf16 / float16 parameters every state leaf (momentum, AdamW ``mu`` and
    ``nu``) is float32 and the update is computed in float32 from float32 hyperparameters, then
    cast to the parameters' dtype (float32 parameters are untouched). The parameters themselves
    should still be float32 master weights: see ``docs/optim.md``.

    Args:
      learning_rate: scalar or schedule for the matrices and the last layer.
      momentum: last-layer EMA coefficient ``b`` (reference 0.9).
      weight_decay: decoupled weight decay of the matrices and last layer.
      eps: column-RMS clamp (1e-8).
      adam_learning_rate: scalar or schedule of the 1-D AdamW (default ``learning_rate``).
      adam_b1, adam_b2, adam_eps: AdamW moments and epsilon.
      adam_weight_decay: AdamW weight decay (default ``weight_decay``, as in the reference).
      last_layer, require_last_layer: see :func:`scale_param_labels`.
      fan_in_axes: see :func:`scale_by_column_rms`.
      adam_eps_placement: where the 1-D AdamW adds ``adam_eps``. ``"before_correction"``
        (default, the authors' code): to ``sqrt(v)`` before the bias correction, an effective
        ``eps / sqrt(1 - b2**t)``. ``"after_correction"``: ``optax.adamw`` exactly, ``eps``
        added to the bias-corrected ``sqrt(v_hat)`` (this function's behaviour before issue
        38). The relative difference of an update is about
        ``eps (1/sqrt(1 - b2**t) - 1) / |g|``: at step 1, 0.3 % for ``|g| = 1e-4``, 3 % for
        ``|g| = 1e-5`` (``tests/optim/test_scale_fidelity.py``).

    Returns:
      an ``optax.GradientTransformationExtraArgs`` built with ``optax.partition``.

    Raises:
      ConfigError: unknown ``adam_eps_placement``; (at ``init``) missing or ambiguous last
        layer; a floating hyperparameter
        given as an array narrower than float32 (bf16, float16), e.g. by
        ``optax.inject_hyperparams(optim.scale)`` on bf16 parameters: pass
        ``hyperparam_dtype=jnp.float32`` to ``optax.inject_hyperparams``.

    Example (every group's first update has size ``lr`` per entry: column-normalised
    constant gradients for the matrices, the normalised momentum ``0.1 * g`` for the head, and
    AdamW's first step ``lr * sign(g)`` for the bias)::

      >>> import jax, jax.numpy as jnp, optax
      >>> from fidia_jax import optim
      >>> params = {"hidden": {"kernel": jnp.ones((3, 4)), "bias": jnp.zeros(4)},
      ...           "lm_head": {"kernel": jnp.ones((4, 2))}}
      >>> grads = {"hidden": {"kernel": jnp.full((3, 4), 2.0), "bias": jnp.ones(4)},
      ...          "lm_head": {"kernel": jnp.full((4, 2), -5.0)}}
      >>> opt = optim.scale(0.1)
      >>> state = opt.init(params)
      >>> updates, state = opt.update(grads, state, params)
      >>> params = optax.apply_updates(params, updates)
      >>> [round(float(u.ravel()[0]), 4) for u in jax.tree.leaves(updates)]
      [-0.1, -0.1, 0.1]
    """
    if adam_learning_rate is None:
        adam_learning_rate = learning_rate
    if adam_weight_decay is None:
        adam_weight_decay = weight_decay
    _check_hyperparams(
        "scale",
        learning_rate=learning_rate,
        momentum=momentum,
        weight_decay=weight_decay,
        eps=eps,
        adam_learning_rate=adam_learning_rate,
        adam_b1=adam_b1,
        adam_b2=adam_b2,
        adam_eps=adam_eps,
        adam_weight_decay=adam_weight_decay,
    )

    if adam_eps_placement == "after_correction":
        vector_tx = optax.adamw(
            adam_learning_rate,
            b1=adam_b1,
            b2=adam_b2,
            eps=adam_eps,
            weight_decay=adam_weight_decay,
        )
    elif adam_eps_placement == "before_correction":
        vector_tx = optax.chain(
            _scale_by_adam_eps_before_correction(adam_b1, adam_b2, adam_eps),
            optax.add_decayed_weights(adam_weight_decay),
            optax.scale_by_learning_rate(adam_learning_rate),
        )
    else:
        raise ConfigError(
            "adam_eps_placement must be 'before_correction' (the authors' code) or "
            f"'after_correction' (optax.adamw), got {adam_eps_placement!r}"
        )

    def matrix_tx(with_momentum: bool):
        parts = []
        if with_momentum:
            parts.append(optax.ema(momentum, debias=False))
        parts += [
            scale_by_column_rms(eps=eps, fan_in_axes=fan_in_axes),
            optax.add_decayed_weights(weight_decay),
            optax.scale_by_learning_rate(learning_rate),
        ]
        return optax.chain(*parts)

    transforms = {
        "matrix": matrix_tx(False),
        "last_layer": matrix_tx(True),
        "vector": vector_tx,
    }
    return _with_float32_state(
        optax.partition(
            transforms,
            lambda params: scale_param_labels(
                params, last_layer=last_layer, require_last_layer=require_last_layer
            ),
        )
    )
