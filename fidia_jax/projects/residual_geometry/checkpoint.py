"""Residual-update geometry on a released text model (issue 26, Deliver 4): a **text-only** check.

The paper's claim (attention reconfigures: low RID, high MixIG; the FFN innovates: high RID, low
MixIG) is made for vision-language models. A released text model (Gemma 3 270M here) has no
visual tokens, so only the attention-vs-FFN part can be checked, on text: no intervention on
visual tokens, no accuracy table.

Text: the text-only kind of the project's digit questions (``a + b``, :mod:`.questions`) written
as plain lines (``"Q: 3 + 4 = ? A: 7"``), one sequence of ``checkpoint_tokens`` tokens per row
(the checkpoint's tokenizer; BOS first). Per layer the captures give ``X = resid_pre``,
``ΔX = attn_out`` (attention) and ``X = resid_mid``, ``ΔX = ffn_out`` (FFN); with post-norms
(Gemma) the updates are the post-normed ones that are added. Rows of the table:

* **attention**, **FFN**: RID, ΔS, ΔD per sequence (mean), RID pooled over all sequences' tokens
  (``N > C``: the row space is no longer limited by the token count, the caveat of the synthetic
  run), MixIG (held-out ridge, sequences split in halves), TME (the authors' form,
  :func:`.geometry.cosine_mixing_entropy` of each sequence's update, mean) and, for attention,
  ``tme_attention`` (ours, of the attention weights). ΔD is in ``config.delta_d_form`` (default
  the authors': under it the FFN's new residual is measured against the layer input
  ``resid_pre``, as in their ``novelty_from_hiddens_96``); the captures are cast to float32 (as
  the authors' hidden states), which sets the default rank cutoff;
* **noise** (the simple control, as the synthetic page's Noise Δ row): Gaussian noise with each
  token's attention-update RMS, in place of the attention update of the same ``X`` (drawn here,
  not run through the model).

The BOS position is left out of every measure (its residual is orders of magnitude larger than
the others': an attention sink that would set the spectrum alone); the mixing weights of the
other queries are renormalised over the other keys. Attention RID vs FFN RID per layer is tested
by the paired Wilcoxon signed-rank test over sequences. These choices are ours.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np
from flax import nnx
from scipy import stats

from fidia_jax.projects.residual_geometry.geometry import (
    cosine_mixing_entropy,
    mixing_information_gain,
    spectral_change,
    subspace_innovation,
    token_mixing_entropy,
)
from fidia_jax.train import loop_progress

__all__ = ["checkpoint_geometry", "text_sequences"]

_CAPTURE = ("resid_pre", "attn_out", "resid_mid", "ffn_out", "attn_weights")


def text_sequences(tok, n: int, n_tokens: int, *, seed: int = 0) -> np.ndarray:
    """``(n, n_tokens)`` int32 ids: BOS, then addition questions until the row is full.

    Raises:
      ValueError: ``n < 4`` or ``n_tokens < 8``.
    """
    if n < 4 or n_tokens < 8:
        raise ValueError(f"text_sequences: need n >= 4 and n_tokens >= 8, got {n}, {n_tokens}")
    rng = np.random.default_rng(seed)
    out = np.zeros((n, n_tokens), np.int32)
    for i in range(n):
        ids = [tok.bos_id] if tok.bos_id is not None else []
        while len(ids) < n_tokens:
            a, b = (int(v) for v in rng.integers(0, 10, size=2))
            ids += tok.encode(f"Q: {a} + {b} = ? A: {a + b}\n", add_bos=False)
        out[i] = ids[:n_tokens]
    return out


@nnx.jit
def _capture(model, tokens):
    return model.inspect(tokens, capture=_CAPTURE)[1]


def checkpoint_geometry(model, tok, config) -> dict[str, Any]:
    """The table of the module docstring on a loaded checkpoint.

    Args:
      model: a loaded :class:`fidia_jax.models.Llama`.
      tok: its :class:`fidia_jax.models.LMTokenizer`.
      config: a :class:`.configs.ResidualGeometryConfig` (``checkpoint_sequences``,
        ``checkpoint_tokens``, ``checkpoint_batch``, ``rtol``, ``delta_d_form``, ``seed``).

    Returns:
      JSON-ready dict: ``layers`` (those measured, ``checkpoint_layers`` or all), ``geometry``
      (row ``attention`` / ``ffn`` / ``noise`` -> per-layer lists
      of ``rid``, ``delta_s``, ``delta_d``, ``rid_pooled``, ``delta_d_pooled``, ``mixig``,
      ``r2_self``, ``r2_mix``, ``tme``, ``rid_per_sequence`` (the RID of each sequence, NaN
      where it raised), and ``tme_attention`` for attention), ``wilcoxon`` (per layer: median
      per-sequence RID difference attention - FFN and the two-sided p-value), ``ordering``
      (per layer: attention RID below the FFN's, attention MixIG above), ``rid_failures``
      (sequences whose RID raised, e.g. an all-zero matrix: layer, update, error; left out of
      the means and the test), ``n_sequences``,
      ``n_tokens``.

    Raises:
      ValueError: ``checkpoint_tokens`` above the model's ``max_seq_len``.
    """
    cfg = model.config
    n, t = config.checkpoint_sequences, config.checkpoint_tokens
    if t > cfg.max_seq_len:
        raise ValueError(
            f"checkpoint_geometry: checkpoint_tokens={t} > the model's max_seq_len "
            f"{cfg.max_seq_len}; raise checkpoint_max_seq_len"
        )
    layers = list(config.checkpoint_layers) or list(range(cfg.n_layers))
    if any(not 0 <= li < cfg.n_layers for li in layers):
        raise ValueError(
            f"checkpoint_geometry: checkpoint_layers {layers} outside [0, {cfg.n_layers})"
        )
    tokens = text_sequences(tok, n, t, seed=config.seed)
    caps = {k: [] for k in _CAPTURE}
    bs = config.checkpoint_batch
    n_batches = -(-n // bs)
    with loop_progress(
        f"residual geometry: capturing {n} sequences x {t} tokens", n_batches, unit="batch"
    ) as bar:
        for s in range(0, n, bs):
            chunk = np.zeros((bs, t), np.int32)
            part = tokens[s : s + bs]
            chunk[: len(part)] = part
            c = _capture(model, jnp.asarray(chunk))
            for k in _CAPTURE:
                # float32, as the authors' hidden states (it sets the default rank cutoff)
                caps[k].append(np.asarray(c[k], np.float32)[:, : len(part)])
            bar.advance()
    cap = {k: np.concatenate(v, axis=1) for k, v in caps.items()}  # (L, N, ...)
    rng = np.random.default_rng(config.seed + 1)
    rows = {"attention": [], "ffn": [], "noise": []}
    wilcoxon, failures = [], []
    with loop_progress(
        f"residual geometry: RID / MixIG / TME of {len(layers)} layers",
        len(layers), unit="layer", compiles=False,
    ) as bar:  # fmt: skip
        for layer in layers:
            _layer_rows(cap, layer, n, config, rng, rows, wilcoxon, failures)
            bar.advance()
    geometry = {
        name: {k: [r[k] for r in per_layer] for k in per_layer[0]}
        for name, per_layer in rows.items()
    }
    att, ffn = geometry["attention"], geometry["ffn"]
    ordering = {
        "attention_rid_below_ffn": [a < f for a, f in zip(att["rid"], ffn["rid"], strict=True)],
        "attention_rid_below_ffn_p05": [
            wx["median_difference"] < 0 and wx["p"] < 0.05 for wx in wilcoxon
        ],
        "attention_mixig_above_ffn": [
            a > f for a, f in zip(att["mixig"], ffn["mixig"], strict=True)
        ],
        "attention_mixig_above_noise": [
            a > f for a, f in zip(att["mixig"], geometry["noise"]["mixig"], strict=True)
        ],
    }
    return {
        "geometry": geometry,
        "wilcoxon": wilcoxon,
        "ordering": ordering,
        "layers": layers,
        "rid_failures": failures,
        "n_sequences": n,
        "n_tokens": t,
    }


def _layer_rows(cap, layer, n, config, rng, rows, wilcoxon, failures) -> None:
    """One layer's rows (attention, FFN, noise) appended to ``rows``, its Wilcoxon test to
    ``wilcoxon`` and the per-sequence failures to ``failures``."""
    w = np.asarray(cap["attn_weights"][layer][:, :, 1:, 1:], np.float64)  # BOS left out
    w = w / np.maximum(w.sum(-1, keepdims=True), 1e-300)
    x_att = cap["resid_pre"][layer][:, 1:]
    d_att = np.asarray(cap["attn_out"][layer][:, 1:], np.float64)
    z = rng.standard_normal(d_att.shape)
    rms = lambda a: np.sqrt(np.mean(a * a, axis=-1, keepdims=True))  # noqa: E731
    d_noise = z * rms(d_att) / np.maximum(rms(z), 1e-300)
    x_mid = cap["resid_mid"][layer][:, 1:]
    d_ffn = np.asarray(cap["ffn_out"][layer][:, 1:], np.float64)
    pairs = {"attention": (x_att, d_att), "ffn": (x_mid, d_ffn), "noise": (x_att, d_noise)}
    if config.delta_d_form == "authors":  # the FFN's X' against the layer input
        dd_pairs = {**pairs, "ffn": (x_att, np.asarray(x_mid, np.float64) + d_ffn - x_att)}
    else:
        dd_pairs = pairs
    kw = {"form": config.delta_d_form, "rtol": config.rtol}
    per_seq = {}
    for name, (x, dx) in pairs.items():
        xd, dxd = dd_pairs[name]
        seq = []
        for b in range(n):
            try:
                ds = spectral_change(x[b], dx[b])
                dd = subspace_innovation(xd[b], dxd[b], **kw)
                seq.append({"rid": abs(ds) + dd, "delta_s": ds, "delta_d": dd})
            except ValueError as err:  # counted and reported, never silently dropped
                failures.append({"layer": layer, "update": name, "sequence": b,
                                 "error": str(err)})  # fmt: skip
                seq.append({"rid": np.nan, "delta_s": np.nan, "delta_d": np.nan})
        per_seq[name] = np.asarray([r["rid"] for r in seq])
        flat = lambda a: a.reshape(-1, a.shape[-1])  # noqa: E731
        ds_pooled = spectral_change(flat(x), flat(dx))
        dd_pooled = subspace_innovation(flat(xd), flat(dxd), **kw)
        row = {k: float(np.nanmean([r[k] for r in seq])) for k in ("rid", "delta_s", "delta_d")}
        row["rid_pooled"], row["delta_d_pooled"] = abs(ds_pooled) + dd_pooled, dd_pooled
        row.update(mixing_information_gain(np.asarray(x, np.float64), dx, w, seed=layer))
        row["tme"] = float(np.mean([cosine_mixing_entropy(dx[b]) for b in range(n)]))
        if name == "attention":
            row["tme_attention"] = token_mixing_entropy(w)
        row["rid_per_sequence"] = [float(v) for v in per_seq[name]]  # NaN where it raised
        rows[name].append(row)
    diff = per_seq["attention"] - per_seq["ffn"]
    diff = diff[np.isfinite(diff)]
    p = float(stats.wilcoxon(diff).pvalue) if np.any(diff != 0) else 1.0
    wilcoxon.append({"median_difference": float(np.median(diff)), "p": p})
