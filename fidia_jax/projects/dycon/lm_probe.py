"""DyCon's probe on a released language model: is the remaining reasoning linearly decodable
from the step-boundary residual stream of a real checkpoint (issue 26, Deliver 4)?

The task is text the project writes, so the difficulty of every step is known: "add these
numbers one at a time", then one line per partial sum (``"12 + 7 = 19."``), each step ending
with a blank line (``"\\n\\n"``, the step delimiter of the paper), and a final ``"Answer: N"``.
Traces are teacher-forced (the model reads them, it does not write them), tokenised segment by
segment with the checkpoint's own tokenizer, so the last token of each segment is the step
boundary. At each boundary the target is DyCon's log-normalised remaining length (ours, as in
:mod:`.task`): ``y = log(1 + r) / log(1 + R)`` with ``r`` the tokens of reasoning still to come
(through the last step) and ``R`` the longest reasoning of the batch.

The probe is :func:`.probes.layer_probe_r2` (ridge per hidden-stack layer, a shuffled-label
control), examples split three ways: fit / choose the layer / test. The strongest simple
baselines are a ridge on the position alone (``t`` and ``log(1 + t)``, tokens of reasoning
so far: what any model knows without reading the problem), compared with the probe at the
chosen layer by the per-example paired bootstrap of the test squared error, and a ridge on the
counts the text states (``k``, steps done and left, tokens done).
"""

from __future__ import annotations

import pathlib
import time
from typing import Any

import jax.numpy as jnp
import numpy as np
from flax import nnx

from fidia_jax import train as train_lib
from fidia_jax._io import atomic_write_text, json_text
from fidia_jax.metrics import r2_score, ridge_fit, ridge_predict
from fidia_jax.projects.dycon.plots import plot_tradeoff
from fidia_jax.projects.dycon.probes import layer_probe_r2
from fidia_jax.train import load_checked, loop_progress

__all__ = ["checkpoint_and_evaluate", "checkpoint_probe", "text_traces"]


def text_traces(
    n: int, *, seed: int = 0, min_operands: int = 2, max_operands: int = 7, max_value: int = 49
) -> list[dict[str, Any]]:
    """``n`` addition traces as text segments, with ``k`` operands uniform in the range and
    each operand uniform in ``1 .. max_value``.

    Returns:
      list of ``{"segments": [prompt, step_1, ..., step_{k-1}, answer], "k": k}``; the prompt
      and every step end with ``"\\n\\n"`` (a boundary), the answer does not.

    Raises:
      ValueError: ``n < 1`` or ``min_operands < 2`` or ``max_operands < min_operands`` or
        ``max_value < 1``.
    """
    if n < 1 or min_operands < 2 or max_operands < min_operands or max_value < 1:
        raise ValueError(
            f"text_traces: need n >= 1, 2 <= min_operands <= max_operands and max_value >= 1, "
            f"got {n}, {min_operands}, {max_operands}, {max_value}"
        )
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        k = int(rng.integers(min_operands, max_operands + 1))
        xs = [int(v) for v in rng.integers(1, max_value + 1, size=k)]
        segs = [f"Add these numbers one at a time: {', '.join(map(str, xs))}.\n\n"]
        total = xs[0]
        for x in xs[1:]:
            segs.append(f"{total} + {x} = {total + x}.\n\n")
            total += x
        segs.append(f"Answer: {total}")
        out.append({"segments": segs, "k": k})
    return out


def _encode(tokenizer, traces):
    """Token ids per trace, boundary positions, and the remaining reasoning tokens at each."""
    rows = []
    for tr in traces:
        ids = [tokenizer.bos_id] if tokenizer.bos_id is not None else []
        bounds = []
        for seg in tr["segments"][:-1]:
            ids += tokenizer.encode(seg, add_bos=False)
            bounds.append(len(ids) - 1)
        end = bounds[-1]  # the reasoning ends with the last step's boundary
        start = bounds[0]
        ids += tokenizer.encode(tr["segments"][-1], add_bos=False)
        rows.append(
            {
                "ids": ids,
                "bounds": np.asarray(bounds),
                "remaining": np.asarray([end - b for b in bounds]),
                "done": np.asarray([b - start for b in bounds]),
                "k": tr["k"],
            }
        )
    return rows


@nnx.jit
def residual_stack(model, tokens_BxT):
    """``(L + 1, B, T, C)`` residual stream of ``tokens_BxT`` (``(B, T)`` int ids): the
    embeddings entering block 0, then every block's output (one compiled forward)."""
    _, cap = model.inspect(tokens_BxT, capture=("resid_pre", "resid_post"))
    return jnp.concatenate([cap["resid_pre"][:1], cap["resid_post"]], 0)


def _states(model, rows, batch_size):
    """``(M, L + 1, C)`` float32 residual stream at every boundary (teacher-forced; one
    compiled forward: every batch padded to the same shape)."""
    feats = []
    width = max(len(r["ids"]) for r in rows)
    if width > model.config.max_seq_len:
        raise ValueError(
            f"checkpoint_probe: a trace of {width} tokens exceeds the model's max_seq_len "
            f"{model.config.max_seq_len}; load the model with a larger max_seq_len"
        )
    n_batches = -(-len(rows) // batch_size)
    with loop_progress(
        f"DyCon: residual stream of {len(rows)} teacher-forced traces", n_batches, unit="batch"
    ) as bar:
        for s in range(0, len(rows), batch_size):
            chunk = rows[s : s + batch_size]
            toks = np.zeros((batch_size, width), np.int32)
            for i, r in enumerate(chunk):
                toks[i, : len(r["ids"])] = r["ids"]  # right padding: causal, never read
            h = np.moveaxis(np.asarray(residual_stack(model, jnp.asarray(toks)), np.float32), 0, 2)
            for i, r in enumerate(chunk):
                feats.append(h[i, r["bounds"]])
            bar.advance()
    return np.concatenate(feats)


def _paired_bootstrap(err_a, err_b, groups, *, draws=2000, seed=0):
    """Mean over resampled groups of ``mean(err_a - err_b)``: (diff, 95% CI, P(diff >= 0))."""
    uniq = np.unique(groups)
    per = np.asarray([np.mean(err_a[groups == g] - err_b[groups == g]) for g in uniq])
    rng = np.random.default_rng(seed)
    boots = per[rng.integers(0, len(per), size=(draws, len(per)))].mean(1)
    lo, hi = np.quantile(boots, [0.025, 0.975])
    return float(per.mean()), (float(lo), float(hi)), float(np.mean(boots >= 0))


def checkpoint_probe(
    model,
    tokenizer,
    *,
    num_traces: int = 60,
    seed: int = 0,
    alpha: float = 100.0,
    batch_size: int = 8,
    min_operands: int = 2,
    max_operands: int = 7,
) -> dict[str, Any]:
    """DyCon's probe analysis on a loaded checkpoint (see the module docstring).

    Args:
      model: a :class:`fidia_jax.models.Llama` (e.g. from ``models.load_gguf``).
      tokenizer: its :class:`fidia_jax.models.LMTokenizer`.
      num_traces: traces (examples); split 50 % fit, 25 % layer choice, 25 % test.
      seed: traces and the shuffled control.
      alpha: ridge penalty of every probe (on features standardised with the fitting rows).
      batch_size: traces per forward pass.
      min_operands, max_operands: the range of ``k`` (difficulty: ``k - 1`` steps).

    Returns:
      dict: ``r2_test`` / ``r2_shuffled_test`` per hidden-stack layer (0: embeddings),
      ``layer`` (chosen on the validation examples), ``r2_layer`` (its test R²),
      ``r2_position_baseline`` (test R² of the position-only ridge),
      ``r2_counter_baseline`` (test R² of a ridge on what the text lets a reader count: ``k``,
      steps done and left, tokens done; the strongest simple baseline), ``paired`` (per-example
      paired bootstrap of test squared error, probe minus baseline: mean, 95 % CI, P(>= 0)),
      counts and ``seconds``.

    Raises:
      ValueError: fewer than 8 traces (each split needs 2 examples).
    """
    if num_traces < 8:
        raise ValueError(f"checkpoint_probe: need num_traces >= 8, got {num_traces}")
    t0 = time.time()
    rows = _encode(
        tokenizer,
        text_traces(num_traces, seed=seed, min_operands=min_operands, max_operands=max_operands),
    )
    big = max(int(r["remaining"].max()) for r in rows)
    y = np.concatenate([np.log1p(r["remaining"]) / np.log1p(big) for r in rows])
    done = np.concatenate([r["done"] for r in rows]).astype(np.float64)
    ex = np.concatenate([np.full(len(r["bounds"]), i) for i, r in enumerate(rows)])
    x = _states(model, rows, batch_size).astype(np.float64)
    order = np.random.default_rng(seed + 1).permutation(num_traces)
    fit_ex, val_ex = order[: num_traces // 2], order[num_traces // 2 : (3 * num_traces) // 4]
    fit, val = np.isin(ex, fit_ex), np.isin(ex, val_ex)
    test = ~(fit | val)
    # features standardised with the fitting rows' statistics (a released model's residual
    # stream has a few very large coordinates; ridge on raw values would penalise unevenly)
    mu, sd = x[fit].mean(0), x[fit].std(0)
    x = (x - mu) / np.where(sd > 0, sd, 1.0)
    with train_lib.stage(f"DyCon: ridge probes of {x.shape[1]} layers (layer choice, test)"):
        on_val = layer_probe_r2(x[fit | val], y[fit | val], fit[fit | val], alpha=alpha, seed=seed)
        layer = int(on_val.best_layer)
        on_test = layer_probe_r2(
            x[fit | test], y[fit | test], fit[fit | test], alpha=alpha, seed=seed
        )
    pos = np.stack([done, np.log1p(done)], 1)
    base = ridge_fit(pos[fit], y[fit], alpha=1e-6)
    base_pred = ridge_predict(base, pos[test])
    # what a reader of the text can count: k, steps done, steps left, tokens done
    step = np.concatenate([np.arange(len(r["bounds"])) for r in rows]).astype(np.float64)
    k = np.concatenate([np.full(len(r["bounds"]), r["k"]) for r in rows]).astype(np.float64)
    left = k - 1 - step
    counts = np.stack([k, step, left, np.log1p(left), done, np.log1p(done)], 1)
    counter_pred = ridge_predict(ridge_fit(counts[fit], y[fit], alpha=1e-6), counts[test])
    probe_pred = ridge_predict(on_test.fits[layer], x[test, layer])
    paired = _paired_bootstrap(
        (probe_pred - y[test]) ** 2, (base_pred - y[test]) ** 2, ex[test], seed=seed
    )
    return {
        "num_traces": num_traces,
        "num_boundaries": int(len(y)),
        "num_test_boundaries": int(test.sum()),
        "r2_test": on_test.r2.tolist(),
        "r2_shuffled_test": on_test.r2_shuffled.tolist(),
        "layer": layer,
        "r2_layer": float(on_test.r2[layer]),
        "r2_position_baseline": float(r2_score(y[test], base_pred)),
        "r2_counter_baseline": float(r2_score(y[test], counter_pred)),
        "paired": {
            "mse_difference": paired[0],
            "ci95": list(paired[1]),
            "p_probe_not_better": paired[2],
            "test": "per-example paired bootstrap (2000 draws) of squared error, probe - baseline",
        },
        "seconds": time.time() - t0,
    }


def _checkpoint_operands(config) -> tuple[int, int]:
    """``(min_operands, max_operands)`` of the checkpoint traces: ``k`` up to one more than the
    synthetic task's (at most 9)."""
    return 2, min(config.max_operands + 1, 9)


def checkpoint_and_evaluate(config, workdir: str | pathlib.Path) -> dict[str, Any]:
    """``fidia-jax dycon train --set checkpoint=PATH``: the probe analysis on a released model.

    Stages, each announced before it starts: the tokenizer; the traces' lengths against the
    smaller of ``checkpoint_max_seq_len`` and the checkpoint's trained context
    (:func:`fidia_jax.models.check_prompt_lengths`: a ``DataError`` before any weight is read);
    the weights (a ``.gguf`` file or a Hugging Face directory); the residual stream of
    ``config.checkpoint_traces`` teacher-forced traces (a progress bar over the batches, with
    its ETA); the probes (:func:`checkpoint_probe`). Prints the table (held-out R² per layer,
    the shuffled control, the position-only and counter baselines and the paired test) and
    writes into ``workdir``: ``dycon_checkpoint.json``, ``summary.json`` and
    ``dycon_tradeoff.png`` (the synthetic run's figure, :func:`.plots.plot_tradeoff`: here the
    probe panel only, with the two baselines, since no decoder is run in this mode; the decoding
    comparison on a checkpoint is ``benchmarks/dycon_checkpoint_control.py``).

    Args:
      config: a :class:`.configs.DyconConfig` with ``checkpoint`` set (``checkpoint_traces``,
        ``checkpoint_max_seq_len``, ``max_operands``, ``seed`` are read).
      workdir: the output directory.

    Returns:
      ``{"checkpoint", "load_s", "probe", "wall_s", "figure"}``.

    Raises:
      CheckpointError: a missing path (one message naming it, before anything loads), or what
        the loaders raise.
      DataError: a trace longer than the limit (before the weights load).
      ConfigError: an unsupported family.
    """
    t0 = time.time()
    workdir = pathlib.Path(workdir)
    path = str(config.checkpoint)
    lo, hi = _checkpoint_operands(config)
    traces = text_traces(config.checkpoint_traces, seed=config.seed, min_operands=lo,
                         max_operands=hi)  # fmt: skip
    model, tokenizer = load_checked(
        path, read=["".join(tr["segments"]) for tr in traces],
        max_seq_len=config.checkpoint_max_seq_len, where="dycon checkpoint", what="DyCon",
        labels=("trace", "prompt"), hint="raise checkpoint_max_seq_len or lower max_operands",
    )  # fmt: skip
    load_s = time.time() - t0
    probe = checkpoint_probe(
        model, tokenizer, num_traces=config.checkpoint_traces, seed=config.seed,
        min_operands=lo, max_operands=hi,
    )  # fmt: skip
    results = {"checkpoint": path, "load_s": load_s, "probe": probe, "wall_s": time.time() - t0}
    workdir.mkdir(parents=True, exist_ok=True)
    figure = plot_tradeoff(
        None,
        {"r2": probe["r2_test"], "r2_shuffled": probe["r2_shuffled_test"]},
        config.buckets,
        workdir / "dycon_tradeoff.png",
        baselines={
            "position-only ridge": probe["r2_position_baseline"],
            "counter ridge (k, steps done / left)": probe["r2_counter_baseline"],
        },
        title=f"DyCon probe on {pathlib.Path(path).name} ({probe['num_traces']} teacher-forced "
        "traces; checkpoint mode: no decoders are run, so the accuracy-vs-tokens panels are "
        "omitted)",
    )  # fmt: skip
    results["figure"] = str(figure)
    atomic_write_text(workdir / "dycon_checkpoint.json", json_text(results, indent=1))
    train_lib.write_summary(workdir, results, config=config)
    rows = [
        [str(k), f"{r:.3f}", f"{s:.3f}"]
        for k, (r, s) in enumerate(zip(probe["r2_test"], probe["r2_shuffled_test"], strict=True))
    ]
    train_lib.print_table(
        f"DyCon probe on {path}: held-out R² of the log-normalised remaining length per layer "
        "(0: embeddings)",
        ["layer", "probe R²", "shuffled control R²"],
        rows,
    )
    p = probe["paired"]
    print(
        f"chosen layer {probe['layer']} (validation examples): test R² {probe['r2_layer']:.3f}; "
        f"position-only baseline {probe['r2_position_baseline']:.3f}; counter baseline "
        f"{probe['r2_counter_baseline']:.3f}; vs position: MSE difference "
        f"{p['mse_difference']:.4f} (95% CI {p['ci95'][0]:.4f}..{p['ci95'][1]:.4f}, "
        f"P(probe not better) {p['p_probe_not_better']:.3f}; {p['test']})"
    )
    print(f"figure: {figure}")
    return results
