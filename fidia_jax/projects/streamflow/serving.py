"""Serving a rectified-flow model: the sequential Euler sampler and the stream batcher.

StreamFlow's serving idea: a *stream batch* holds requests that are at different timesteps.
Every call of the network advances each slot by one Euler step with its own ``t`` and step size
``dt``; a request whose schedule is done leaves, and a queued request takes its slot in the
same call, so the network runs on a full batch as long as there is work. The batch size of
each call is rounded up to a *bucket* (``1, 2, 4, 8, 16``) whose step function is compiled
ahead of time (``jax.jit(...).lower(...).compile()``), and the latent buffer is donated to the
call (``donate_argnums``) so it is updated in place.

Exactness: every image the batcher returns is the image :func:`sample_euler` makes for the same
noise and timestep schedule (the Euler update ``x <- x - dt * v(x, t)`` in float32, with the same
``t`` and ``dt`` values), up to the float rounding of the network on a different batch size
(tested to max |delta| <= 1e-5). A slot's progress is an integer step counter: no timestep is
ever looked up or compared by float equality, and ``v`` is never evaluated at ``t = 0``
(so a one-step schedule ``[1, 0]`` is one call and no ``0/0``).

Reference:
  StreamFlow (ICML 2026; code: github.com/World-Snapshot/StreamFlow): stream batching of
  requests at different timesteps for flow-matching models. The bucket/AOT/donation design
  here is ours (reconstruction); the Euler sampler is standard rectified flow (Liu, Gong, Liu,
  "Flow Straight and Fast", ICLR 2023).
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import itertools
import time
from collections.abc import Callable, Hashable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

__all__ = [
    "STREAM_BUCKETS",
    "StreamBatcher",
    "bucket_size",
    "check_noise",
    "check_timesteps",
    "linear_timesteps",
    "sample_euler",
    "velocity_apply",
]

#: Batch sizes the stream batcher compiles by default.
STREAM_BUCKETS: tuple[int, ...] = (1, 2, 4, 8, 16)

#: ``apply_fn(params, x, t)``, or ``apply_fn(params, x, t, cond)`` with ``cond_shape``.
ApplyFn = Callable[..., jax.Array]


def linear_timesteps(num_steps: int) -> np.ndarray:
    """The uniform schedule ``1, 1 - 1/n, ..., 0`` for ``n = num_steps`` Euler steps.

    Returns:
      ``(num_steps + 1,)`` float32, first entry exactly 1 and last exactly 0.

    Raises:
      ValueError: ``num_steps`` < 1 (a step count of 0 makes no image).
    """
    if int(num_steps) != num_steps or num_steps < 1:
        raise ValueError(f"num_steps must be an integer >= 1 (step count), got {num_steps!r}")
    n = int(num_steps)
    return (1.0 - np.arange(n + 1, dtype=np.float64) / n).astype(np.float32)


def check_timesteps(timesteps: Sequence[float] | np.ndarray | jax.Array) -> np.ndarray:
    """A timestep schedule as float32, validated: ``t_0 > t_1 > ... > t_n``, all in ``[0, 1]``.

    Floats of any precision are accepted (Python floats, float64 arrays); they are rounded to
    float32 once, here, and the step sizes ``dt_k = t_k - t_{k+1}`` are then computed in float32
    by every sampler alike.

    Raises:
      ValueError: fewer than 2 entries (a step count of 0), not 1-D, a non-finite value, a value
        outside ``[0, 1]``, or a step that does not decrease ``t`` (in float32).
    """
    ts = np.asarray(timesteps, dtype=np.float64)
    if ts.ndim != 1:
        raise ValueError(f"timesteps must be 1-D (t_0 > ... > t_n), got shape {ts.shape}")
    if ts.shape[0] < 2:
        raise ValueError(
            f"timesteps need at least 2 entries (step count >= 1, e.g. [1.0, 0.0]); got "
            f"{ts.shape[0]} entries, i.e. a step count of {max(ts.shape[0] - 1, 0)}"
        )
    if not np.all(np.isfinite(ts)) or ts.min() < 0.0 or ts.max() > 1.0:
        raise ValueError(f"timesteps must be finite and in [0, 1], got {ts.tolist()}")
    ts32 = ts.astype(np.float32)
    if not np.all(ts32[:-1] > ts32[1:]):
        raise ValueError(f"timesteps must strictly decrease (in float32), got {ts32.tolist()}")
    return ts32


def bucket_size(n: int, buckets: Sequence[int] = STREAM_BUCKETS) -> int:
    """The smallest bucket that holds a batch of ``n`` images.

    Raises:
      ValueError: ``n`` < 1, or a batch larger than the largest bucket (names both sizes).
    """
    if n < 1:
        raise ValueError(f"bucket_size: a batch needs >= 1 image, got {n}")
    for b in buckets:
        if b >= n:
            return int(b)
    raise ValueError(
        f"a batch of {n} images is larger than the largest bucket "
        f"({max(buckets)}); buckets are {tuple(buckets)}"
    )


def velocity_apply(model: nnx.Module) -> tuple[ApplyFn, Any]:
    """Splits an NNX velocity model into a pure ``apply_fn(params, x_BxHxWxC, t_B, *cond)`` and
    ``params``.

    The samplers take this functional form so that the parameters are an ordinary argument of
    the compiled step (no tracing of module state). Extra arguments (a per-row condition
    ``cond_B...``) are passed on to the model."""
    graphdef, params = nnx.split(model)

    def apply_fn(params_, x_BxHxWxC, t_B, *cond):
        return nnx.merge(graphdef, params_)(x_BxHxWxC, t_B, *cond)

    return apply_fn, params


def check_noise(
    noise: Any, shape: Sequence[int] | None = None, *, name: str = "noise"
) -> np.ndarray:
    """Starting latents as float32, validated: the given shape (if any) and every value finite.

    Raises:
      ValueError: a shape other than ``shape`` (names both and the ranks), or a NaN / inf value
        (names how many and the first position) -- a non-finite latent would flow through every
        step and come out as a NaN image with no error.
    """
    arr = np.asarray(noise, dtype=np.float32)
    if shape is not None and arr.shape != tuple(shape):
        raise ValueError(
            f"{name}: an image must have shape (H, W, C)={tuple(shape)} (rank {len(shape)}), "
            f"got shape {arr.shape} (rank {arr.ndim})"
        )
    bad = ~np.isfinite(arr)
    if bad.any():
        raise ValueError(
            f"{name}: holds {int(bad.sum())} NaN/inf values (first at index "
            f"{tuple(int(i) for i in np.argwhere(bad)[0])}); starting noise must be finite"
        )
    return arr


def _guided(v_BxHxWxC, partner_B, scale_B):
    """Classifier-free guidance across rows: ``v[p] + w (v - v[p])`` with ``p`` the row's
    unconditional partner (itself for an unguided row, where the result is ``v`` exactly)."""
    v_p = v_BxHxWxC[partner_B]
    return v_p + scale_B[:, None, None, None] * (v_BxHxWxC - v_p)


def _euler_step(apply_fn: ApplyFn, params, x_BxHxWxC, t_B, dt_B, cond=None, guide=None):
    """``x - dt * v(x, t)``, one Euler step per image with its own ``t`` and ``dt``; with a
    condition, ``v(x, t, cond)``; with ``guide = (partner_B, scale_B)``, classifier-free
    guidance across rows (:func:`_guided`)."""
    if cond is None:
        v_BxHxWxC = apply_fn(params, x_BxHxWxC, t_B)
    else:
        v_BxHxWxC = apply_fn(params, x_BxHxWxC, t_B, cond)
    if guide is not None:
        v_BxHxWxC = _guided(v_BxHxWxC, *guide)
    return x_BxHxWxC - dt_B[:, None, None, None] * v_BxHxWxC


_euler_step_jit = jax.jit(_euler_step, static_argnums=(0,))


def sample_euler(
    apply_fn: ApplyFn,
    params,
    noise_BxHxWxC,
    timesteps,
    *,
    cond=None,
    guidance: float = 1.0,
    null_cond=None,
) -> np.ndarray:
    """The sequential sampler: Euler steps from ``t_0`` (noise) to ``t_n`` (image), one call each.

    All ``B`` images share the schedule; with ``B = 1`` it is the one-request-at-a-time
    reference the stream batcher is tested against.

    Args:
      apply_fn, params: from :func:`velocity_apply` (``apply_fn(params, x, t) -> v``, or
        ``apply_fn(params, x, t, cond) -> v`` when ``cond`` is given).
      noise_BxHxWxC: float32 starting latents (``x`` at ``t_0``), all finite.
      timesteps: ``(n + 1,)`` decreasing times, e.g. :func:`linear_timesteps` ``(n)``.
      cond: ``(B, ...)`` per-image condition passed to ``apply_fn`` (``None``: unconditional).
      guidance: classifier-free guidance scale ``w``: ``v = v(x, t, null) + w (v(x, t, cond) -
        v(x, t, null))``, the two evaluated as two rows of one call; ``1``: ``v(x, t, cond)``.
      null_cond: ``(...)`` the unconditional condition (required when ``guidance != 1``).

    Returns:
      ``(B, H, W, C)`` float32 numpy images at ``t_n``.

    Raises:
      ValueError: noise not of rank 4 or not finite (:func:`check_noise`), a bad schedule
        (:func:`check_timesteps`), guidance without ``cond`` / ``null_cond``, or a ``cond``
        whose leading size is not ``B``.
    """
    noise = np.asarray(noise_BxHxWxC, dtype=np.float32)
    if noise.ndim != 4:
        raise ValueError(
            f"sample_euler: noise must be rank 4 (B, H, W, C), got shape {noise.shape}"
        )
    check_noise(noise, name="sample_euler: noise")
    ts = check_timesteps(timesteps)
    dts = ts[:-1] - ts[1:]
    b = noise.shape[0]
    guide = None
    if guidance != 1.0:
        if cond is None or null_cond is None:
            raise ValueError("sample_euler: guidance != 1 needs cond and null_cond")
    if cond is not None:
        cond = np.asarray(cond)
        if cond.shape[:1] != (b,):
            raise ValueError(f"sample_euler: cond must have leading size B={b}, got {cond.shape}")
        if guidance != 1.0:  # rows: the B conditional ones, then their B unconditional partners
            null = np.broadcast_to(np.asarray(null_cond, cond.dtype), cond.shape)
            cond = np.concatenate([cond, null])
            noise = np.concatenate([noise, noise])
            partner = np.concatenate([np.arange(b, 2 * b), np.arange(b, 2 * b)])
            scale = np.concatenate([np.full(b, guidance), np.ones(b)]).astype(np.float32)
            guide = (jnp.asarray(partner, jnp.int32), jnp.asarray(scale))
        cond = jnp.asarray(cond)
    x = jnp.asarray(noise)
    rows = noise.shape[0]
    for k in range(len(dts)):
        dt = np.full((rows,), dts[k], np.float32)
        if guide is not None:
            dt[b:] = 0.0  # the unconditional rows only evaluate v; the image rows step
        x = _euler_step_jit(
            apply_fn, params, x, np.full((rows,), ts[k], np.float32), dt, cond, guide
        )
        if guide is not None:  # the partners read the image rows' latents in the next step
            x = jnp.concatenate([x[:b], x[:b]])
    return np.asarray(x[:b])


def _stream_step(
    apply_fn: ApplyFn,
    params,
    buffer_SxHxWxC,
    idx_b,
    t_b,
    dt_b,
    fresh_bxHxWxC,
    is_fresh_b,
    write_b=None,
    cond_b=None,
    partner_b=None,
    scale_b=None,
):
    """One stream call: rows ``idx`` of the buffer (or fresh noise) advance one Euler step.

    Without conditioning the rows are written back to ``idx``; with it (``cond_b`` given) each
    row carries its request's condition, a guided request's unconditional partner row reads the
    same latent and writes to the scratch row (``write_b``), and ``v`` is guided across rows."""
    x = jnp.where(is_fresh_b[:, None, None, None], fresh_bxHxWxC, buffer_SxHxWxC[idx_b])
    if cond_b is None:
        x_new = _euler_step(apply_fn, params, x, t_b, dt_b)
        return buffer_SxHxWxC.at[idx_b].set(x_new), x_new
    x_new = _euler_step(apply_fn, params, x, t_b, dt_b, cond_b, (partner_b, scale_b))
    return buffer_SxHxWxC.at[write_b].set(x_new), x_new


_AOT_CACHE: dict[tuple, Any] = {}
_AOT_CACHE_SIZE = 64


@dataclasses.dataclass
class _Slot:
    request_id: Hashable
    timesteps: np.ndarray
    step: int = 0
    fresh: np.ndarray | None = None  # the noise until the slot's first call
    cond: np.ndarray | None = None  # the request's condition, carried with the slot
    guidance: float = 1.0  # != 1: a second (unconditional) row in every call

    @property
    def rows(self) -> int:
        return 1 if self.guidance == 1.0 else 2


class StreamBatcher:
    """Stream-batched Euler sampling: per-slot timesteps, a request queue, slot refill, buckets.

    Usage::

        apply_fn, params = velocity_apply(model)
        batcher = StreamBatcher(apply_fn, params, image_shape=(16, 16, 1))
        batcher.submit(noise_HxWxC, linear_timesteps(8), request_id="a")
        finished = batcher.step()        # [(request_id, image_HxWxC), ...] done in this call
        images = batcher.drain()          # {request_id: image} of everything still in flight

    Each :meth:`step` first fills free slots from the queue (``refill="continuous"``, the
    stream batch; ``refill="static"`` instead admits requests only when every slot is empty,
    and then only those with the same schedule as the head of the queue -- the naive batching
    of same-``t`` requests, kept as the baseline; ``refill="pipeline"`` is the authors'
    StreamDiffusion-style policy, see below), then runs the compiled step of the smallest
    bucket that holds the active slots (padding rows take ``dt = 0`` and do not change), and
    returns the requests that finished in that call. The latent buffer of ``max(buckets)``
    images stays on the device between calls and is donated to each call.

    **The authors' fixed pipeline** (``refill="pipeline"``, ``timesteps=`` required; the policy
    of ``PipelineBatchStreamFlow`` in github.com/World-Snapshot/StreamFlow,
    ``src/streamflow/pipeline_batch_pipeline.py``, after StreamDiffusion): one schedule of ``n``
    steps shared by every request, ``n`` slots (stage ``k`` of the pipeline holds the request
    at its ``k``-th step), at most ONE new request admitted per call, and every call runs the
    full batch of ``n`` rows (``2n`` with guidance) whether or not each stage holds a request
    (the authors' buffer of ``n - 1`` latents starts as noise). A request thus finishes ``n``
    calls after it enters, and the server finishes at most one image per call.

    **Per-request conditioning** (``cond_shape=`` given): ``apply_fn(params, x, t, cond)`` with
    ``cond`` ``(B, *cond_shape)`` of ``cond_dtype``; each request brings its own ``cond`` and
    guidance scale ``w`` to :meth:`submit`, kept in its slot. A request with ``w != 1`` takes two
    rows of the call: its conditional row and an unconditional partner (``null_cond``) that
    reads the same latent; the step uses ``v = v_null + w (v_cond - v_null)``, exactly as
    :func:`sample_euler` with ``guidance=w`` (classifier-free guidance, Ho & Salimans 2022).
    A guided request is admitted only when both rows fit in the largest bucket.

    Args:
      apply_fn, params: the velocity model (:func:`velocity_apply`).
      image_shape: ``(H, W, C)`` of every request.
      buckets: increasing batch sizes to compile; the largest is the number of slots.
      aot: compile every bucket now (``jax.jit(...).lower(...).compile()``; the time is in
        :attr:`compile_seconds`; executables are reused by later batchers of the same
        ``apply_fn``, parameter shapes, buffer and bucket); ``False`` gives a fresh ``jax.jit``
        that compiles each bucket on its first call instead (the cold-start cost).
      refill: ``"continuous"`` (stream batch) or ``"static"`` (naive same-schedule batching).
      slots: requests in flight at once (default ``max(buckets)``); only the buckets up to the
        one holding ``slots`` are compiled.
      timesteps: ``refill="pipeline"`` only: the one schedule of every request (its ``n`` steps
        set the slots and the bucket: ``n``, and ``2n`` with ``cond_shape``).
      cond_shape, cond_dtype: the shape and dtype of one request's condition; ``None``:
        unconditional (``apply_fn(params, x, t)``).
      null_cond: the unconditional condition of guided requests' partner rows (default
        zeros; for class labels, the model's null class).

    Raises:
      ValueError: bad buckets or ``refill``, ``slots`` larger than the largest bucket, a
        pipeline without ``timesteps``; in :meth:`submit`, noise whose shape is not
        ``image_shape`` (e.g. the wrong rank) or that holds NaN / inf (:func:`check_noise`), a
        bad schedule (:func:`check_timesteps`, e.g. a step count of 0) or, in a pipeline, one
        other than the pipeline's, a duplicate ``request_id``, a missing / misshapen /
        non-finite ``cond`` or a ``cond`` or guidance given to an unconditional batcher.
    """

    def __init__(
        self,
        apply_fn: ApplyFn,
        params,
        image_shape: Sequence[int],
        *,
        buckets: Sequence[int] = STREAM_BUCKETS,
        aot: bool = True,
        refill: str = "continuous",
        slots: int | None = None,
        timesteps: Sequence[float] | np.ndarray | None = None,
        cond_shape: Sequence[int] | None = None,
        cond_dtype: Any = np.float32,
        null_cond: Any = None,
    ):
        self.image_shape = tuple(int(s) for s in image_shape)
        if len(self.image_shape) != 3 or min(self.image_shape) < 1:
            raise ValueError(
                f"StreamBatcher: image_shape must be (H, W, C) of positive sizes, "
                f"got {tuple(image_shape)}"
            )
        self.buckets = tuple(int(b) for b in buckets)
        if (
            not self.buckets
            or self.buckets[0] < 1
            or any(a >= b for a, b in itertools.pairwise(self.buckets))
        ):
            raise ValueError(f"StreamBatcher: buckets must be increasing ints >= 1, got {buckets}")
        if refill not in ("continuous", "static", "pipeline"):
            raise ValueError(
                f"StreamBatcher: refill must be 'continuous', 'static' or 'pipeline', got "
                f"{refill!r}"
            )
        self.refill = refill
        self.cond_shape = None if cond_shape is None else tuple(int(c) for c in cond_shape)
        self.cond_dtype = np.dtype(cond_dtype)
        self.null_cond = None
        if self.cond_shape is not None:
            null = np.zeros(self.cond_shape) if null_cond is None else null_cond
            self.null_cond = np.broadcast_to(np.asarray(null, self.cond_dtype), self.cond_shape)
        self.pipeline_timesteps = None
        if refill == "pipeline":
            if timesteps is None:
                raise ValueError("StreamBatcher: refill='pipeline' needs the pipeline's timesteps")
            self.pipeline_timesteps = check_timesteps(timesteps)
            n = len(self.pipeline_timesteps) - 1
            self.buckets = (n,) if self.cond_shape is None else (n, 2 * n)
            slots = n
        elif timesteps is not None:
            raise ValueError("StreamBatcher: timesteps= is for refill='pipeline' only")
        self.capacity = self.buckets[-1] if slots is None else int(slots)
        top = bucket_size(self.capacity, self.buckets)  # raises past the largest bucket
        if self.cond_shape is None or refill != "pipeline":
            self.buckets = tuple(b for b in self.buckets if b <= top)
        top = self.buckets[-1]
        self.max_rows = top
        self.params = params
        self._queue: collections.deque[_Slot] = collections.deque()
        # the buffer has one row per slot plus the padding rows of the largest bucket used
        self._slots: list[_Slot | None] = [None] * self.capacity
        self._ids: set[Hashable] = set()
        self._counter = itertools.count()
        # with conditioning, one more row: the scratch row that partner rows write to
        extra = 0 if self.cond_shape is None else 1
        self._buffer = jnp.zeros((top + extra, *self.image_shape), jnp.float32)
        self.calls = 0
        #: requests advanced by the last call (before bucket padding); 0 before any call.
        self.last_batch_size = 0
        #: bucket -> number of calls made at that bucket size.
        self.bucket_calls: dict[int, int] = dict.fromkeys(self.buckets, 0)
        step = jax.jit(functools.partial(_stream_step, apply_fn), donate_argnums=(1,))
        self.compile_seconds = 0.0
        if aot:
            t0 = time.perf_counter()
            self._compiled = {b: self._aot_compile(apply_fn, step, b) for b in self.buckets}
            self.compile_seconds = time.perf_counter() - t0
        else:  # a fresh jit: each bucket compiles on its first call (timed by the caller)
            self._compiled = dict.fromkeys(self.buckets, step)

    def _aot_compile(self, apply_fn, step, b: int):
        """The executable of bucket ``b``, shared by every batcher of the same ``apply_fn`` and
        shapes (kept in a small module cache, so a second batcher does not compile again)."""
        leaves = tuple((x.shape, str(x.dtype)) for x in jax.tree.leaves(self.params))
        key = (
            apply_fn,
            jax.tree.structure(self.params),
            leaves,
            self._buffer.shape,
            b,
            self.cond_shape,
            str(self.cond_dtype),
        )
        if key not in _AOT_CACHE:
            if len(_AOT_CACHE) >= _AOT_CACHE_SIZE:
                _AOT_CACHE.pop(next(iter(_AOT_CACHE)))
            _AOT_CACHE[key] = self._lower(step, b).compile()
        return _AOT_CACHE[key]

    def _lower(self, step, b: int):
        f32 = jnp.float32
        args = [
            self.params,
            jax.ShapeDtypeStruct(self._buffer.shape, f32),
            jax.ShapeDtypeStruct((b,), jnp.int32),
            jax.ShapeDtypeStruct((b,), f32),
            jax.ShapeDtypeStruct((b,), f32),
            jax.ShapeDtypeStruct((b, *self.image_shape), f32),
            jax.ShapeDtypeStruct((b,), jnp.bool_),
        ]
        if self.cond_shape is not None:
            args += [
                jax.ShapeDtypeStruct((b,), jnp.int32),
                jax.ShapeDtypeStruct((b, *self.cond_shape), self.cond_dtype),
                jax.ShapeDtypeStruct((b,), jnp.int32),
                jax.ShapeDtypeStruct((b,), f32),
            ]
        return step.lower(*args)

    # -- queue -------------------------------------------------------------------------------
    def submit(
        self,
        noise_HxWxC,
        timesteps,
        request_id: Hashable | None = None,
        *,
        cond: Any = None,
        guidance: float = 1.0,
    ) -> Hashable:
        """Queues one request: its starting noise ``(H, W, C)``, its own schedule and, for a
        conditional batcher, its condition ``cond`` (``cond_shape``) and guidance scale.

        Returns:
          The request id (``request_id``, or a fresh integer).

        Raises:
          ValueError: see the class (checked here, before the request is queued).
        """
        noise = check_noise(noise_HxWxC, self.image_shape, name="StreamBatcher.submit")
        ts = check_timesteps(timesteps)
        if self.pipeline_timesteps is not None and not (
            ts.shape == self.pipeline_timesteps.shape and np.all(ts == self.pipeline_timesteps)
        ):
            raise ValueError(
                f"StreamBatcher.submit: the pipeline serves one schedule "
                f"{self.pipeline_timesteps.tolist()}, got {ts.tolist()}"
            )
        guidance = float(guidance)
        if self.cond_shape is None:
            if cond is not None or guidance != 1.0:
                raise ValueError(
                    "StreamBatcher.submit: this batcher is unconditional (no cond_shape); "
                    "cond and guidance cannot be given"
                )
        else:
            if cond is None:
                raise ValueError(
                    f"StreamBatcher.submit: a conditional batcher needs cond of shape "
                    f"{self.cond_shape}"
                )
            cond = np.asarray(cond)
            if cond.shape != self.cond_shape:
                raise ValueError(
                    f"StreamBatcher.submit: cond must have shape {self.cond_shape}, got "
                    f"{cond.shape}"
                )
            if cond.dtype.kind == "f" and not np.all(np.isfinite(cond)):
                raise ValueError("StreamBatcher.submit: cond holds NaN/inf values")
            cond = cond.astype(self.cond_dtype)
            if not np.isfinite(guidance):
                raise ValueError(f"StreamBatcher.submit: guidance must be finite, got {guidance}")
            if guidance != 1.0 and 2 > self.max_rows:
                raise ValueError(
                    f"StreamBatcher.submit: a guided request takes 2 rows; the largest bucket "
                    f"is {self.max_rows}"
                )
        if request_id is None:
            request_id = next(self._counter)
            while request_id in self._ids:
                request_id = next(self._counter)
        elif request_id in self._ids:
            raise ValueError(
                f"StreamBatcher.submit: request_id {request_id!r} is already in flight"
            )
        self._ids.add(request_id)
        self._queue.append(_Slot(request_id, ts, 0, noise, cond, guidance))
        return request_id

    @property
    def queued(self) -> int:
        """Requests waiting for a slot."""
        return len(self._queue)

    @property
    def active(self) -> int:
        """Requests in a slot (started or about to start)."""
        return sum(s is not None for s in self._slots)

    @property
    def idle(self) -> bool:
        """No request queued or in a slot."""
        return not self._queue and self.active == 0

    def _rows_in_use(self) -> int:
        return sum(s.rows for s in self._slots if s is not None)

    def _admit(self) -> None:
        free = [i for i, s in enumerate(self._slots) if s is None]
        if self.refill in ("continuous", "pipeline"):
            rows = self._rows_in_use()
            admitted = 0
            while free and self._queue and rows + self._queue[0].rows <= self.max_rows:
                if self.refill == "pipeline" and admitted == 1:
                    break  # the authors' pipeline: one new request per call
                rows += self._queue[0].rows
                self._slots[free.pop(0)] = self._queue.popleft()
                admitted += 1
        elif len(free) == self.capacity and self._queue:  # static: only into an empty batch
            head = self._queue[0].timesteps
            keep: collections.deque[_Slot] = collections.deque()
            while self._queue:
                req = self._queue.popleft()
                same = req.timesteps.shape == head.shape and bool(
                    np.all(req.timesteps == head)
                )  # grouping, not a t lookup
                if free and same and self._rows_in_use() + req.rows <= self.max_rows:
                    self._slots[free.pop(0)] = req
                else:
                    keep.append(req)
            self._queue = keep

    # -- serving -----------------------------------------------------------------------------
    def step(self) -> list[tuple[Hashable, np.ndarray]]:
        """Admits queued requests, runs one network call, returns those finished in it.

        Returns:
          ``[(request_id, image_HxWxC float32 numpy), ...]`` in slot order; ``[]`` when idle.
        """
        self._admit()
        rows = [i for i, s in enumerate(self._slots) if s is not None]
        if not rows:
            return []
        n = len(rows)
        n_rows = self._rows_in_use()
        bucket = bucket_size(n_rows, self.buckets)
        t = np.ones((bucket,), np.float32)
        dt = np.zeros((bucket,), np.float32)
        fresh = np.zeros((bucket, *self.image_shape), np.float32)
        is_fresh = np.zeros((bucket,), bool)
        for j, i in enumerate(rows):
            slot = self._slots[i]
            k = slot.step
            t[j] = slot.timesteps[k]
            dt[j] = slot.timesteps[k] - slot.timesteps[k + 1]
            if slot.fresh is not None:
                fresh[j], is_fresh[j] = slot.fresh, True
        if self.cond_shape is None:
            in_use = set(rows)
            pad = [i for i in range(self._buffer.shape[0]) if i not in in_use][: bucket - n]
            idx = np.asarray(rows + pad, np.int32)
            args = ()
        else:
            # rows 0..n-1: each request's own row; then the guided requests' partner rows
            # (same latent, null condition, dt 0, written to the scratch row); then padding.
            scratch = self._buffer.shape[0] - 1
            idx = np.full((bucket,), scratch, np.int32)
            write = np.full((bucket,), scratch, np.int32)
            idx[:n] = write[:n] = rows
            cond = np.broadcast_to(self.null_cond, (bucket, *self.cond_shape)).copy()
            partner = np.arange(bucket, dtype=np.int32)
            scale = np.ones((bucket,), np.float32)
            p = n
            for j, i in enumerate(rows):
                slot = self._slots[i]
                cond[j] = slot.cond
                if slot.rows == 2:
                    idx[p], t[p] = i, t[j]
                    fresh[p], is_fresh[p] = fresh[j], is_fresh[j]
                    partner[j], scale[j] = p, slot.guidance
                    p += 1
            args = (write, cond, partner, scale)
        for i in rows:
            self._slots[i].fresh = None
        self._buffer, x_new = self._compiled[bucket](
            self.params, self._buffer, idx, t, dt, fresh, is_fresh, *args
        )
        self.calls += 1
        self.bucket_calls[bucket] += 1
        self.last_batch_size = n
        done = []
        for j, i in enumerate(rows):
            slot = self._slots[i]
            slot.step += 1
            if slot.step == len(slot.timesteps) - 1:  # integer counter, never a float compare
                done.append((j, slot.request_id))
                self._slots[i] = None
                self._ids.discard(slot.request_id)
        if not done:
            jax.block_until_ready(x_new)
            return []
        x_host = np.asarray(x_new)
        return [(rid, x_host[j].copy()) for j, rid in done]

    def drain(self) -> dict[Hashable, np.ndarray]:
        """Steps until nothing is queued or in flight; returns ``{request_id: image}``."""
        out: dict[Hashable, np.ndarray] = {}
        while not self.idle:
            out.update(self.step())
        return out
