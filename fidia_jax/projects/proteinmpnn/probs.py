"""ProteinMPNN probability outputs: the original's ``probs/`` files and ``*_probs_only`` runs.

``--save-probs`` (``probs.npz``, :func:`write_probs`), the original's ``probs/<name>.npz``
(:func:`write_original_probs`, from the sampling distributions of :func:`sampling_probs`), and
the probabilities-only runs (``--conditional-probs-only``, ``--conditional-probs-only-backbone``,
``--unconditional-probs-only``: :func:`probs_only_log_probs`, :func:`unconditional_log_probs`).
Used by :func:`fidia_jax.projects.proteinmpnn.design.run_sample`, which re-exports these names.
"""

from __future__ import annotations

import functools
import pathlib
import time

import numpy as np

from fidia_jax._io import atomic_path, atomic_write_text, json_text
from fidia_jax.errors import ConfigError
from fidia_jax.protein import ALPHABET

__all__ = [
    "PROBS_ONLY",
    "probs_only_log_probs",
    "run_probs_only",
    "sampling_probs",
    "unconditional_log_probs",
    "write_original_probs",
    "write_probs",
]


PROBS_ONLY = ("conditional", "conditional_backbone", "unconditional")


def probs_only_log_probs(
    model, inputs, designed_L, key, num_orders: int, kind: str, bucket: int | None = None,
    chunk: int = 32,
) -> np.ndarray:  # fmt: skip
    """The original's ``--conditional_probs_only`` / ``--unconditional_probs_only`` arrays.

    ``(num_orders, L, 21)`` float32 log-probabilities; rows of positions not designed are 0.

    * ``"conditional"`` (``ProteinMPNN.conditional_probs``): at each designed position ``i``,
      ``log p(s_i | backbone, every other residue's native token)``: the teacher-forced
      forward in the order ``argsort((onehot(i) + 1e-4) * |randn|)``, so ``i`` is decoded last
      and the others before it in the random order of ``randn`` (one ``randn`` per row, shared
      by all ``i``, as the original; the deeper decoder layers of the neighbours depend on it).
    * ``"conditional_backbone"`` (``backbone_only=True``): the order
      ``argsort((1 - onehot(i) + 1e-4) * |randn|)``, ``i`` decoded first: no sequence context.
    * ``"unconditional"`` (``ProteinMPNN.unconditional_probs``): one pass with no sequence
      context anywhere (:func:`unconditional_log_probs`), the same for every row; at a
      designed position it equals ``"conditional_backbone"`` (tested).

    ``inputs`` are unbatched ``MPNNInputs`` with the native tokens in ``inputs.S``; ``key`` a
    PRNG key (row ``r`` uses ``jax.random.split(key, num_orders)[r]``); the forwards run
    ``chunk`` positions at a time, padded to ``bucket`` (one compilation per bucket).
    """
    import jax

    from fidia_jax.models import random_decoding_order, score
    from fidia_jax.projects.proteinmpnn.buckets import bucketed

    if kind not in PROBS_ONLY:
        raise ConfigError(f"probs_only must be one of {PROBS_ONLY}, got {kind!r}")
    designed = np.asarray(designed_L, bool)
    length = designed.size
    out = np.zeros((int(num_orders), length, 21), np.float32)
    if kind == "unconditional":
        out[:] = np.where(designed[:, None], unconditional_log_probs(model, inputs), 0.0)
        return out
    if bucket is not None:
        _, score = bucketed(bucket)
    idx = np.flatnonzero(designed)
    onehot = np.eye(length, dtype=np.float32)[idx]
    order_mask = onehot if kind == "conditional" else 1.0 - onehot
    native = np.broadcast_to(np.asarray(inputs.S, np.int32), (chunk, length))
    for r, k in enumerate(jax.random.split(key, int(num_orders))):
        orders = np.asarray(jax.vmap(lambda m, k=k: random_decoding_order(k, m))(order_mask))
        for c in range(0, idx.size, chunk):
            part = orders[c : c + chunk]
            pad = chunk - part.shape[0]  # pad the last chunk (same shape, no recompilation)
            part = np.concatenate([part, np.repeat(part[:1], pad, 0)]) if pad else part
            lp = np.asarray(jax.device_get(score(model, inputs, native, part).log_probs))
            rows = idx[c : c + chunk]
            out[r, rows] = lp[np.arange(rows.size), rows]
    return out


def run_probs_only(out, setup, model, kind, folder, num, seed, bucket, noise, write, rep, names):
    """``run_sample(probs_only=...)``: the original's probabilities-only runs."""
    import jax

    from fidia_jax.models import MPNNInputs

    if kind not in PROBS_ONLY:
        raise ConfigError(f"probs_only must be one of {PROBS_ONLY}, got {kind!r}")
    t0 = time.perf_counter()
    with rep.stage(f"{kind.replace('_', ' ')} probabilities, {num} orders"):
        inputs = MPNNInputs.from_protein(setup.protein, setup.design_chains)
        if noise > 0:
            eps = jax.random.normal(
                jax.random.fold_in(jax.random.key(seed), 2**30), np.shape(inputs.X)
            )
            inputs = inputs._replace(X=np.asarray(inputs.X + noise * eps, np.float32))
        log_p = probs_only_log_probs(
            model, inputs, setup.designed, jax.random.key(seed), num, kind, bucket
        )
    p = setup.protein
    d = setup.designed
    nat = log_p[:, np.arange(p.length), p.S]
    score = float(-(nat * d).sum() / max(d.sum() * num, 1))
    recovery = float(((log_p.argmax(-1) == p.S[None]) & d).sum() / max(d.sum() * num, 1))
    sub = "unconditional" if kind == "unconditional" else "conditional"
    folder = pathlib.Path(folder) if folder is not None else pathlib.Path(out) / f"{sub}_probs_only"
    summary = {
        "command": "sample",
        "inputs": {"pdb": str(p.source), "chains": list(p.chain_order),
                   "design_chains": list(setup.design_chains), "fixed": setup.fixed_spec,
                   "num_designed": int(d.sum()), "length": int(p.length), "num_orders": int(num),
                   "seed": int(seed), "probs_only": kind, "backbone_noise": float(noise), **names},
        "mean_score": score,
        "mean_recovery": recovery,
        "timing_s": {"total": round(time.perf_counter() - t0, 3)},
    }  # fmt: skip
    if write:
        path = folder / f"{structure_stem(p.source)}.npz"
        with atomic_path(path) as tmp, open(tmp, "wb") as f:
            np.savez(f, log_p=log_p, S=p.S.astype(np.int32), mask=p.mask.astype(np.float32),
                     design_mask=d.astype(np.float32))  # fmt: skip
        js = pathlib.Path(out) / "summary.json"
        summary["files"] = {"probs_only": str(path), "summary": str(js)}
        atomic_write_text(js, json_text(summary, indent=2) + "\n")
    rep.table(
        f"{p.source}: {int(d.sum())} designed positions, {kind} probabilities",
        ["rows", "mean NLL of native", "argmax recovery"],
        [(num, f"{score:.4f}", f"{recovery:.3f}")],
    )
    return summary


def structure_stem(source) -> str:
    """A structure's name in the original's files: the file name up to its first dot."""
    return pathlib.Path(source).name.split(".")[0]


def sampling_probs(
    log_probs_NxLx21,
    temperature_N,
    bias_Lx21,
    omit_aas,
    pssm,
    designed_L,
    tied=None,
    order_NxL=None,
) -> np.ndarray:
    """The distributions the sampler drew from, ``(N, L, 21)`` float32 (the original's
    ``sample_dict["probs"]``): 0 at positions that are not designed.

    ``p = softmax((log_probs + bias) / T)`` with the letters of ``omit_aas`` at 0, then with
    ``pssm = (mix, probs, scale)`` (see ``fidia_jax.models.sample``) ``((1 - mix) p + mix
    probs) * scale`` with the omitted letters at 0, renormalised. ``log_probs`` are the
    sampler's ``T = 1`` log-softmax (:attr:`SampleResult.log_probs`; a constant per row does
    not change the softmax). With ``tied`` (slot groups) and ``order_NxL``, a group's row is
    its members' mean log-probabilities with the bias and PSSM rows of the member decoded last,
    written at every member (as the sampler and the original's ``tied_sample``).
    """
    lp = np.asarray(log_probs_NxLx21, np.float64).copy()
    n, length, v = lp.shape
    bias = np.broadcast_to(np.asarray(bias_Lx21, np.float64), (n, length, v)).copy()
    rows = None if pssm is None else [np.broadcast_to(np.asarray(a, np.float64), (n,) + np.shape(a)).copy() for a in pssm]  # fmt: skip
    if tied:
        rank = np.argsort(np.asarray(order_NxL), axis=-1)
        for g in tied:
            g = np.asarray(g)
            last = g[np.argmax(rank[:, g], axis=1)]  # (N,)
            lp[:, g] = lp[:, g].mean(1, keepdims=True)
            idx = np.arange(n)
            bias[:, g] = bias[idx, last][:, None]
            if rows is not None:
                for a in rows:
                    a[:, g] = a[idx, last][:, None]
    omit = np.array([a in omit_aas for a in ALPHABET])
    z = (lp + bias) / np.asarray(temperature_N, np.float64)[:, None, None]
    z[..., omit] = -np.inf
    z -= z.max(-1, keepdims=True)
    p = np.exp(z)
    p /= p.sum(-1, keepdims=True)
    if rows is not None:
        mix, probs, scale = rows
        p = ((1.0 - mix[..., None]) * p + mix[..., None] * probs) * scale
        p[..., omit] = 0.0
        p /= p.sum(-1, keepdims=True)
    return (p * np.asarray(designed_L, bool)[None, :, None]).astype(np.float32)


def write_original_probs(path, probs_NxLx21, log_probs_NxLx21, sequences_NxL, setup) -> None:
    """The original's ``probs/<name>.npz`` (``--save_probs``), written atomically.

    Keys as ``protein_mpnn_run.py`` writes them: ``probs`` ``(N, L, 21)`` float32, the
    sampling distributions (:func:`sampling_probs`; 0 where not designed); ``log_probs``
    ``(N, L, 21)`` float32, the model's ``T = 1`` log-softmax of each sample in its decoding
    order; ``S`` ``(N, L)`` int32 sampled tokens; ``mask`` ``(1, L)`` float32, the designed
    positions (the original's ``mask_for_loss`` with its default batch size 1);
    ``chain_order`` ``(1, C)`` str, the loaded chains in order.
    """
    arrays = {
        "probs": np.asarray(probs_NxLx21, np.float32),
        "log_probs": np.asarray(log_probs_NxLx21, np.float32),
        "S": np.asarray(sequences_NxL, np.int32),
        "mask": np.asarray(setup.designed, np.float32)[None],
        "chain_order": np.array([list(setup.protein.chain_order)]),
    }
    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        np.savez(f, **arrays)


def unconditional_log_probs(model, inputs) -> np.ndarray:
    """ProteinMPNN's log-probabilities with no sequence context, ``(L, 21)`` float32.

    The original's ``ProteinMPNN.unconditional_probs`` (``--unconditional_probs_only``): the
    decoder runs with ``mask_bw = 0`` and ``mask_fw = mask`` (no neighbour is decoded before
    any position), so every position sees only the encoder states. No decoding order gives this
    for all positions at once, so it calls the model's public encoder and decoder layers
    directly; at the position decoded first in any order it equals the teacher-forced
    :func:`fidia_jax.models.log_probs` (tested).

    Args:
      model: a full-backbone ``ProteinMPNN``.
      inputs: unbatched ``MPNNInputs`` (``inputs.S`` is not read).
    """
    from flax import nnx

    from fidia_jax.models import MPNNInputs

    x = MPNNInputs(*(np.asarray(a)[None] for a in inputs))
    graphdef, state = nnx.split(model)
    return np.asarray(_unconditional_jit()(graphdef, state, x)[0])


@functools.cache
def _unconditional_jit():
    from fidia_jax.models.proteinmpnn import inference_jit

    return inference_jit(_unconditional, static_argnums=0)


def _unconditional(graphdef, state, x):
    import jax
    import jax.numpy as jnp
    from flax import nnx

    model = nnx.merge(graphdef, state)
    mask = x.mask.astype(jnp.float32)
    h_enc, h_E, E_idx = model.encode(x.X.astype(jnp.float32), mask, x.residue_idx, x.chain_encoding)
    mask = mask.astype(h_E.dtype)
    mask_fw = jnp.broadcast_to(mask[..., None], E_idx.shape).astype(h_E.dtype)
    h_S = jnp.zeros_like(h_enc)  # read only through mask_bw = 0
    h = h_enc
    for layer in model.decoder_layers:
        h = layer(h, h_E, h_S, h_enc, E_idx, jnp.zeros_like(mask_fw), mask_fw, mask)
    return jax.nn.log_softmax(model.W_out(h).astype(jnp.float32), axis=-1)


def write_probs(path, probs_NxLx21, sequences_NxL, order_NxL, setup, uncond_Lx21=None) -> None:
    """Writes the ``--save-probs`` ``.npz`` atomically.

    Keys: ``probs`` ``(N, L, 21)`` float32 (per sample and position, the conditional
    probabilities in that sample's decoding context); ``sequences`` ``(N, L)`` int32 (token ids
    of ``ALPHABET``); ``decoding_order`` ``(N, L)`` int32; ``mask`` ``(L,)`` float32 (complete
    backbone); ``designed`` ``(L,)`` bool; ``alphabet`` (str); with ``uncond_Lx21`` also
    ``unconditional_probs`` ``(L, 21)`` float32.
    """
    arrays = {
        "probs": np.asarray(probs_NxLx21, np.float32),
        "sequences": np.asarray(sequences_NxL, np.int32),
        "decoding_order": np.asarray(order_NxL, np.int32),
        "mask": np.asarray(setup.protein.mask, np.float32),
        "designed": np.asarray(setup.designed, bool),
        "alphabet": np.array(ALPHABET),
    }
    if uncond_Lx21 is not None:
        arrays["unconditional_probs"] = np.asarray(uncond_Lx21, np.float32)
    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        np.savez(f, **arrays)
