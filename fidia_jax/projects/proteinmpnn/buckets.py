"""Length buckets: ProteinMPNN inputs padded to a few lengths, so the jitted sampler and scorer
compile once per bucket, not once per backbone length (``--bucket``, :mod:`.batch`).

Padding (:func:`pad_inputs`): padded slots have ``mask`` 0 and ``chain_mask`` 0, so they are
never designed or scored. They never change a real position's result when the real length is at
least the model's ``K`` neighbours (48): a padded slot's CA distance is pushed to the row
maximum, so it never enters a real slot's top-``K`` neighbour list, and ProteinMPNN only mixes
neighbours. Below ``K`` a padded slot would become a neighbour (the decoder has no attention
mask), so such short backbones are not padded (they compile per length). The random stream does
differ: the decoding order is drawn over the padded length, so a padded run draws other samples
than an unpadded run with the same seed; their scores agree
(``tests/projects/proteinmpnn/test_batch.py``).
"""

from __future__ import annotations

import numpy as np

__all__ = ["bucket_length", "bucketed", "pad_inputs", "run_by_bucket"]


def bucket_length(length: int, bucket: int = 64, k_neighbors: int = 48) -> int:
    """Padded length of a backbone of ``length`` slots: the next multiple of ``bucket``.

    Lengths below ``k_neighbors`` are not padded (returned as is): see the module docstring.
    """
    if length < k_neighbors or bucket <= 1:
        return int(length)
    return int(-(-length // bucket) * bucket)


def pad_inputs(inputs, length: int):
    """``MPNNInputs`` padded to ``length`` slots: ``X`` 0, ``S`` 20 (``X``), ``mask`` 0,
    ``chain_mask`` 0, ``residue_idx`` continuing the last chain, ``chain_encoding`` 0."""
    n = int(inputs.S.shape[0])
    p = length - n
    if p < 0:
        raise ValueError(f"cannot pad {n} slots to {length}")

    def pad(a, value):
        a = np.asarray(a)
        return np.concatenate([a, np.full((p,) + a.shape[1:], value, a.dtype)])

    last = int(np.asarray(inputs.residue_idx)[-1]) if n else 0
    return inputs._replace(
        X=pad(inputs.X, 0.0), S=pad(inputs.S, 20), mask=pad(inputs.mask, 0.0),
        chain_mask=pad(inputs.chain_mask, 0.0),
        residue_idx=np.concatenate([np.asarray(inputs.residue_idx),
                                    last + 1 + np.arange(p, dtype=np.int32)]).astype(np.int32),
        chain_encoding=pad(inputs.chain_encoding, 0),
    )  # fmt: skip


def bucketed(bucket: int = 64):
    """``(sample, score)`` with the signatures of :func:`fidia_jax.models.sample` / ``score``
    that run on inputs padded to :func:`bucket_length` and return results at the real length.

    ``decoding_order`` of a padded sample is the padded order with the padded slots removed (the
    real slots keep their relative order, which is all a real position's context depends on).
    """
    import jax

    from fidia_jax.models import sample, score

    def padded_sample(model, key, inputs, *, fixed_mask=None, bias=None, **kw):
        n = int(inputs.S.shape[0])
        m = bucket_length(n, bucket, model.k_neighbors)
        if m == n:
            return sample(model, key, inputs, fixed_mask=fixed_mask, bias=bias, **kw)
        if fixed_mask is not None:
            fixed_mask = np.concatenate([np.asarray(fixed_mask, bool), np.zeros(m - n, bool)])
        if bias is not None and np.ndim(bias) == 2:
            bias = np.concatenate(
                [np.asarray(bias, np.float32), np.zeros((m - n, np.shape(bias)[1]), np.float32)]
            )
        if kw.get("pssm") is not None:  # padded slots: no mix, every letter scaled by 1
            mix, probs, scale = (np.asarray(a, np.float32) for a in kw["pssm"])
            kw["pssm"] = (
                np.concatenate([mix, np.zeros(m - n, np.float32)]),
                np.concatenate([probs, np.zeros((m - n, probs.shape[1]), np.float32)]),
                np.concatenate([scale, np.ones((m - n, scale.shape[1]), np.float32)]),
            )
        res = sample(model, key, pad_inputs(inputs, m), fixed_mask=fixed_mask, bias=bias, **kw)
        return _real_slots(res, n, "sequences", "log_probs", "token_log_probs",
                           "native_token_log_probs")  # fmt: skip

    def padded_score(model, inputs, sequences, decoding_order, **kw):
        n = int(inputs.S.shape[0])
        m = bucket_length(n, bucket, model.k_neighbors)
        order = np.asarray(decoding_order)
        if m == n or order.ndim != 2 or inputs.X.ndim != 3 or kw:
            # keys, batched inputs and tied scoring (``tied=``): unpadded, as is
            return score(model, inputs, sequences, decoding_order, **kw)
        seqs = np.asarray(sequences, np.int32)
        seqs = np.concatenate([seqs, np.full((seqs.shape[0], m - n), 20, np.int32)], 1)
        pads = np.broadcast_to(np.arange(n, m, dtype=np.int32), (order.shape[0], m - n))
        res = score(model, pad_inputs(inputs, m), seqs, np.concatenate([pads, order], 1))
        return _real_slots(res, n, "token_log_probs", "log_probs")

    def _real_slots(res, n, *fields):
        """``res`` cut back to the ``n`` real slots: ``fields`` (``(N, L_pad, ...)``) to their
        first ``n`` slots, ``decoding_order`` to its real entries in order. One transfer to the
        host and one back: slicing the device arrays, or ``jnp.asarray`` of host arrays,
        compiles one small program per shape (0.05-0.15 s each; every backbone has a new real
        length)."""
        host = jax.device_get(res)
        order = host.decoding_order
        cut = {f: None if getattr(host, f) is None else getattr(host, f)[:, :n] for f in fields}
        return jax.device_put(
            host._replace(decoding_order=order[order < n].reshape(order.shape[0], n), **cut)
        )

    return padded_sample, padded_score


def run_by_bucket(run_one, keys, workers: int = 2) -> list:
    """``[run_one(i) for i in range(len(keys))]`` on ``workers`` threads, first jobs of a bucket first.

    ``keys[i]`` is job ``i``'s bucket (its padded length; ``None`` = a bucket of its own). The
    first job of every bucket is started before any other job, and a bucket's other jobs only
    after its first one has finished: that first one compiles the bucket's program (JAX
    compiles with Python's lock released), so one thread compiles a new bucket while another
    samples a bucket already compiled, and no program is compiled twice. The results do not
    depend on the schedule (every job is independent). An exception of ``run_one`` stops the
    workers and is raised here. ``workers <= 1``: the jobs run in order on this thread.
    """
    import collections
    import threading

    n = len(keys)
    if workers <= 1 or n <= 1:
        return [run_one(i) for i in range(n)]
    groups: dict = {}
    for i, k in enumerate(keys):
        groups.setdefault(("own", i) if k is None else k, []).append(i)
    firsts = collections.deque(g[0] for g in groups.values())
    follow = {g[0]: g[1:] for g in groups.values()}
    ready: collections.deque = collections.deque()
    results: list = [None] * n
    cond = threading.Condition()
    state: dict = {"done": 0, "error": None}

    def worker():
        while True:
            with cond:
                while not (firsts or ready) and state["done"] < n and state["error"] is None:
                    cond.wait()
                if state["error"] is not None or not (firsts or ready):
                    return
                i = firsts.popleft() if firsts else ready.popleft()
            try:
                results[i] = run_one(i)
            except BaseException as e:  # handed to the caller below
                with cond:
                    state["error"] = e
                    cond.notify_all()
                return
            with cond:
                ready.extend(follow.get(i, ()))
                state["done"] += 1
                cond.notify_all()

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(min(workers, n))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if state["error"] is not None:
        raise state["error"]
    return results
