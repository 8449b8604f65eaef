"""DyCon's control on generation with a released language model (issue 26, Deliver 4).

Does the probe's per-boundary reading save tokens, or would any penalty on the reflection
tokens do as well? On a real checkpoint (e.g. Gemma 3 270M) the addition task of
:mod:`.lm_probe` is written with a **check** after every step (``"Wait, let me check: 12 + 7 =
19."``, the reflection: it repeats the step, so it costs tokens and never changes the answer).
One worked example in that format is the few-shot prefix; the model then continues a new
problem greedily. The arms decode the same prompts with the same compiled sampler
(:func:`fidia_jax.models.sample_llama`, a per-row ``logit_bias``), at step boundaries only
(the ``"\\n\\n"`` tokens), on the reflection tokens only:

* **none**: no bias;
* **DyCon**: ``-lambda * max(0, tau - d_hat)`` with ``d_hat`` the probe's reading of the current
  hidden state (the one-sided form of :mod:`.control`), for each ``(lambda, tau)`` given;
* **constant**: ``-c`` (one scalar, no probe), for each ``c`` of a grid; beside each DyCon
  setting the table puts the ``c`` whose mean tokens are closest to that setting's on the same
  items (the baseline gets the budget match for free, which favours it).

Decoding is greedy and **constrained to the task's tokens** (``restrict_vocab``, default on):
the model is rebuilt with only the rows of its embedding table that the prompts, the probe
traces and the reflection / answer words use (a few dozen), so every forward pass is the same
on those tokens (hidden states, hence the probe's reading, are unchanged) and the argmax is
taken over them only. This cuts the cost of a released model's 262k-token head (Gemma 3) to
nothing and keeps a small model inside the answer format; it is declared wherever the numbers
are reported.

The probe is a ridge per hidden-stack layer on teacher-forced traces in the generation format
(few-shot prefix included), target the log-normalised remaining length ``log(1 + r) / log(1 +
R)`` (as :mod:`.lm_probe`); the layer is chosen on held-out traces. Paired tests over items:
tokens by a bootstrap CI of the mean difference and the Wilcoxon signed-rank test, accuracy by
the exact McNemar (binomial) test on discordant items.
"""

from __future__ import annotations

import dataclasses
import re
import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from fidia_jax import models
from fidia_jax.metrics import ridge_fit
from fidia_jax.projects.dycon import control as control_lib
from fidia_jax.projects.dycon.lm_probe import residual_stack, text_traces
from fidia_jax.projects.dycon.probes import layer_probe_r2
from fidia_jax.train import loop_progress

__all__ = ["checkpoint_control", "control_traces", "parse_answer"]

_CHECK = "Wait, let me check: {}"
_ANSWER = re.compile(r"Answer:\s*(-?\d+)")


def control_traces(
    n: int, *, seed: int = 0, min_operands: int = 2, max_operands: int = 4, max_value: int = 9
) -> list[dict[str, Any]]:
    """Addition traces with a check after every step (see the module docstring).

    Returns:
      list of ``{"segments": [...], "k": k, "answer": int}``: the prompt, then for each step the
      step and its check (each ending with ``"\\n\\n"``), then ``"Answer: N"``.

    Raises:
      ValueError: as :func:`.lm_probe.text_traces`.
    """
    out = []
    traces = text_traces(
        n, seed=seed, min_operands=min_operands, max_operands=max_operands, max_value=max_value
    )
    for tr in traces:
        segs = [tr["segments"][0]]
        for step in tr["segments"][1:-1]:
            segs += [step, _CHECK.format(step)]
        segs.append(tr["segments"][-1])
        out.append({"segments": segs, "k": tr["k"], "answer": int(segs[-1].split()[-1])})
    return out


def _few_shot() -> str:
    demo = control_traces(1, seed=12345, min_operands=3, max_operands=3)[0]
    return "".join(demo["segments"]) + "\n\n"


def parse_answer(text: str) -> tuple[int | None, int, int]:
    """``(answer or None, end character of the answer, checks before it)`` of a generation."""
    m = _ANSWER.search(text)
    if m is None:
        return None, len(text), text.count("Wait")
    return int(m.group(1)), m.end(), text[: m.start()].count("Wait")


def _encode_traces(tokenizer, prefix, traces):
    rows = []
    for tr in traces:
        ids = [tokenizer.bos_id] if tokenizer.bos_id is not None else []
        ids += tokenizer.encode(prefix, add_bos=False)
        bounds = []
        for seg in tr["segments"][:-1]:
            ids += tokenizer.encode(seg, add_bos=False)
            bounds.append(len(ids) - 1)
        rows.append({"ids": ids, "bounds": np.asarray(bounds), "end": bounds[-1]})
    return rows


def _fit_probe(model, tokenizer, prefix, *, traces, seed, alpha, batch_size):
    """Ridge probe in raw hidden-state coordinates; the layer chosen on held-out traces."""
    num_traces = len(traces)
    rows = _encode_traces(tokenizer, prefix, traces)
    width = max(len(r["ids"]) for r in rows)
    feats = []
    with loop_progress(
        f"DyCon control: residual stream of {num_traces} probe traces",
        -(-len(rows) // batch_size), unit="batch",
    ) as bar:  # fmt: skip
        for s in range(0, len(rows), batch_size):
            chunk = rows[s : s + batch_size]
            toks = np.zeros((batch_size, width), np.int32)
            for i, r in enumerate(chunk):
                toks[i, : len(r["ids"])] = r["ids"]
            h = np.moveaxis(np.asarray(residual_stack(model, jnp.asarray(toks)), np.float32), 0, 2)
            feats += [h[i, r["bounds"]] for i, r in enumerate(chunk)]
            bar.advance()
    x = np.concatenate(feats).astype(np.float64)
    rem = [r["end"] - r["bounds"] for r in rows]
    big = max(int(v.max()) for v in rem)
    y = np.concatenate([np.log1p(v) / np.log1p(big) for v in rem])
    ex = np.concatenate([np.full(len(r["bounds"]), i) for i, r in enumerate(rows)])
    fit = ex < num_traces // 2
    mu, sd = x[fit].mean(0), x[fit].std(0)
    sd = np.where(sd > 0, sd, 1.0)
    res = layer_probe_r2((x - mu) / sd, y, fit, alpha=alpha, seed=seed)
    layer = int(res.best_layer)
    # refit on every trace at the chosen layer, standardised, then back to raw coordinates
    allfit = ridge_fit((x[:, layer] - mu[layer]) / sd[layer], y, alpha=alpha)
    coef = np.asarray(allfit.coef) / sd[layer]
    intercept = float(allfit.intercept) - float(np.dot(coef, mu[layer]))
    return {
        "layer": layer,
        "coef": coef,
        "intercept": intercept,
        "r2_heldout": res.r2.tolist(),
        "r2_shuffled": res.r2_shuffled.tolist(),
        "num_traces": num_traces,
        "num_boundaries": int(len(y)),
    }


class _SubTokenizer:
    """The checkpoint's tokenizer seen through a restricted vocabulary: ids are positions in
    ``ids`` (the real token ids kept); a text with a token outside it is a ``ValueError``."""

    def __init__(self, tokenizer, ids):
        self.tokenizer, self.ids = tokenizer, [int(i) for i in ids]
        self.index = {t: i for i, t in enumerate(self.ids)}
        bos = getattr(tokenizer, "bos_id", None)
        self.bos_id = None if bos is None else self.index[int(bos)]

    def encode(self, text, *, add_bos=None):
        real = self.tokenizer.encode(text, add_bos=add_bos)
        missing = [t for t in real if t not in self.index]
        if missing:
            raise ValueError(
                f"checkpoint_control: {text!r} has tokens {missing} outside the kept set"
            )
        return [self.index[t] for t in real]

    def decode(self, ids):
        return self.tokenizer.decode([self.ids[int(i)] for i in ids])


def _restrict_vocab(model, ids):
    """The same :class:`fidia_jax.models.Llama` with only the vocabulary rows ``ids`` (embedding
    rows, and the ``lm_head`` columns when untied): identical hidden states on those tokens, and
    logits over them only."""
    ids = np.asarray(ids, np.int64)
    cfg = dataclasses.replace(model.config, vocab_size=int(len(ids)))
    small = nnx.eval_shape(lambda: models.Llama(cfg, rngs=nnx.Rngs(0)))
    flat = {}
    for key, var in nnx.to_flat_state(nnx.state(model)):
        name = tuple(str(k) for k in key)
        if name == ("tok_embeddings", "embedding"):
            var = var.replace(jnp.asarray(var[...])[ids])
        elif name == ("lm_head", "kernel"):
            var = var.replace(jnp.asarray(var[...])[:, ids])
        elif name == ("lm_head", "bias"):
            var = var.replace(jnp.asarray(var[...])[ids])
        flat[key] = var
    nnx.update(small, nnx.from_flat_state(flat))
    return small


def _rowwise_bias(hidden_BxKxC, step, args):
    """Per-row DyCon / constant / none: ``-lam_B max(0, tau_B - use_B * d_hat)`` at boundaries."""
    del step
    ctl, use_B = args
    dhat_B = control_lib.probe_difficulty(hidden_BxKxC, ctl) * use_B
    shift_B = jnp.minimum(ctl.lam * (dhat_B - ctl.tau), 0.0)
    return control_lib._bias(shift_B, control_lib._at_boundary(hidden_BxKxC, ctl), ctl)


def _paired(a, b, *, draws=2000, seed=0):
    """Mean of ``a - b`` over items, bootstrap 95 % CI and the Wilcoxon signed-rank p-value."""
    from scipy import stats

    d = np.asarray(a, np.float64) - np.asarray(b, np.float64)
    rng = np.random.default_rng(seed)
    boots = d[rng.integers(0, len(d), size=(draws, len(d)))].mean(1)
    lo, hi = np.quantile(boots, [0.025, 0.975])
    p = 1.0 if np.all(d == 0) else float(stats.wilcoxon(d, zero_method="zsplit").pvalue)
    return {"mean": float(d.mean()), "ci95": [float(lo), float(hi)], "wilcoxon_p": p}


def _mcnemar(a, b):
    """Exact McNemar: two-sided binomial test on the discordant items of two 0/1 vectors."""
    from scipy import stats

    a, b = np.asarray(a, bool), np.asarray(b, bool)
    n01, n10 = int(np.sum(~a & b)), int(np.sum(a & ~b))
    p = 1.0 if n01 + n10 == 0 else float(stats.binomtest(n10, n01 + n10).pvalue)
    return {"a_only": n10, "b_only": n01, "mcnemar_p": p}


def checkpoint_control(
    model,
    tokenizer,
    *,
    num_items: int = 24,
    num_probe_traces: int = 16,
    dycon_settings: tuple[tuple[float, float], ...] = ((8.0, 0.5), (8.0, 1.0)),
    const_grid: tuple[float, ...] = (1.0, 2.0, 4.0, 8.0),
    max_operands: int = 4,
    max_value: int = 9,
    max_new_tokens: int = 80,
    batch_size: int = 8,
    alpha: float = 100.0,
    restrict_vocab: bool = True,
    seed: int = 0,
) -> dict[str, Any]:
    """DyCon's control vs none vs a constant penalty on a loaded checkpoint (module docstring).

    Args:
      model: a :class:`fidia_jax.models.Llama` (``max_seq_len`` >= prompt + ``max_new_tokens``).
      tokenizer: its :class:`fidia_jax.models.LMTokenizer` (``encode``, ``decode``, ``bos_id``).
      num_items: generation prompts (``k`` uniform in ``2 .. max_operands``, operands in
        ``1 .. max_value``).
      num_probe_traces: teacher-forced traces for the probe (half fit, half choose the layer).
      dycon_settings: ``(lambda, tau)`` of each DyCon arm, ``-lambda max(0, tau - d_hat)``.
      const_grid: the constant penalties ``c`` tried (``-c`` at every boundary).
      max_new_tokens: greedy tokens generated per prompt.
      batch_size: rows per sampler call (every call has this shape: compiled once).
      alpha: ridge penalty of the probe (standardised features).
      restrict_vocab: decode over the task's tokens only (module docstring).
      seed: the items (``seed``) and the probe traces (``seed + 7``).

    Returns:
      dict: ``probe`` (layer, held-out R² per layer, shuffled control), ``arms`` (per arm:
      ``name``, ``lam``, ``tau``, ``use_probe``, per-item ``tokens`` / ``correct`` / ``checks``,
      means, and ``texts``), ``items`` (``k``, ``answer``), ``paired`` (per DyCon setting: vs
      none and vs the constant matched to its mean tokens; tokens and checks by bootstrap CI and
      Wilcoxon, accuracy by exact McNemar), ``vocab_size`` (of the decoding), ``seconds``.

    Raises:
      ValueError: ``num_items < 2``, ``num_probe_traces < 4``, an empty or negative grid, no
        DyCon setting, a bad ``(lambda, tau)``, or a prompt too long for the model.
    """
    if num_items < 2 or num_probe_traces < 4:
        raise ValueError(
            f"checkpoint_control: need num_items >= 2 and num_probe_traces >= 4, got "
            f"{num_items}, {num_probe_traces}"
        )
    if not const_grid or any(not np.isfinite(c) or c < 0 for c in const_grid):
        raise ValueError(f"checkpoint_control: const_grid must be >= 0 values, got {const_grid}")
    if not dycon_settings:
        raise ValueError("checkpoint_control: dycon_settings is empty")
    t0 = time.time()
    prefix = _few_shot()
    probe_traces = control_traces(
        num_probe_traces, seed=seed + 7, max_operands=max_operands, max_value=max_value
    )
    items = control_traces(num_items, seed=seed, max_operands=max_operands, max_value=max_value)
    words = ("Wait", "wait", " Wait", " wait", *"0123456789", "Answer: ")
    if restrict_vocab:
        keep = set()
        for text in (prefix, *words, *(g for tr in probe_traces + items for g in tr["segments"])):
            keep.update(tokenizer.encode(text, add_bos=False))
        keep.update(t for t in (getattr(tokenizer, "bos_id", None),) if t is not None)
        keep = sorted(int(t) for t in keep)
        model, tokenizer = _restrict_vocab(model, keep), _SubTokenizer(tokenizer, keep)
    probe = _fit_probe(
        model, tokenizer, prefix, traces=probe_traces, seed=seed, alpha=alpha,
        batch_size=batch_size,
    )  # fmt: skip
    probe_s = time.time() - t0
    # boundary and reflection token ids, from the way the traces are tokenised
    boundary = {tokenizer.encode(g, add_bos=False)[-1] for g in items[0]["segments"][:-1]}
    reflect = {tokenizer.encode(w, add_bos=False)[0] for w in words[:4]}
    ctl = control_lib.dycon_control(
        model,
        probe["coef"],
        probe["intercept"],
        layer=probe["layer"],
        lam=0.0,
        tau=0.0,
        boundary_tokens=sorted(boundary),
        reflect_tokens=sorted(reflect),
    )
    for lam, tau in dycon_settings:  # validated as dycon_control validates them
        control_lib.dycon_control(
            model, probe["coef"], probe["intercept"], layer=probe["layer"], lam=lam, tau=tau,
            boundary_tokens=sorted(boundary), reflect_tokens=sorted(reflect),
        )  # fmt: skip
    prompts = []
    for it in items:
        ids = [tokenizer.bos_id] if tokenizer.bos_id is not None else []
        prompts.append(ids + tokenizer.encode(prefix + it["segments"][0], add_bos=False))
    width = max(len(p) for p in prompts)
    if width + max_new_tokens > model.config.max_seq_len:
        raise ValueError(
            f"checkpoint_control: prompts of {width} tokens + {max_new_tokens} new exceed the "
            f"model's max_seq_len {model.config.max_seq_len}"
        )
    arms = [("none", 0.0, 0.0, 0.0)]
    arms += [(f"dycon lam={lam:g} tau={tau:g}", lam, tau, 1.0) for lam, tau in dycon_settings]
    arms += [(f"constant c={c:g}", float(c), 1.0, 0.0) for c in const_grid]
    rows = [(a, i) for a in range(len(arms)) for i in range(num_items)]
    out_tok = np.zeros((len(rows), max_new_tokens), np.int64)
    with loop_progress(
        f"DyCon control: greedy decoding, {num_items} items x {len(arms)} arms x "
        f"{max_new_tokens} tokens",
        -(-len(rows) // batch_size), unit="batch",
    ) as bar:  # fmt: skip
        for s in range(0, len(rows), batch_size):
            chunk = rows[s : s + batch_size]
            chunk = chunk + [chunk[-1]] * (batch_size - len(chunk))  # pad: one compiled shape
            toks = np.zeros((batch_size, width), np.int32)
            lens = np.zeros(batch_size, np.int32)
            for j, (_, i) in enumerate(chunk):
                toks[j, : len(prompts[i])] = prompts[i]
                lens[j] = len(prompts[i])
            args = (
                ctl._replace(
                    lam=jnp.asarray([arms[a][1] for a, _ in chunk], jnp.float32),
                    tau=jnp.asarray([arms[a][2] for a, _ in chunk], jnp.float32),
                ),
                jnp.asarray([arms[a][3] for a, _ in chunk], jnp.float32),
            )
            res = models.sample_llama(
                model,
                jnp.asarray(toks),
                lengths=jnp.asarray(lens),
                max_new_tokens=max_new_tokens,
                logit_bias=_rowwise_bias,
                logit_bias_args=args,
            )
            got = np.asarray(jax.device_get(res.tokens))
            for j in range(min(batch_size, len(rows) - s)):
                out_tok[s + j] = got[j]
            bar.advance()
    results = []
    for a, (name, lam_a, tau_a, use_a) in enumerate(arms):
        toks_used, correct, checks, texts = [], [], [], []
        for i, it in enumerate(items):
            ids = [int(t) for t in out_tok[a * num_items + i]]
            text = tokenizer.decode(ids)
            ans, end, n_checks = parse_answer(text)
            used = next(
                (n for n in range(1, len(ids) + 1) if len(tokenizer.decode(ids[:n])) >= end),
                len(ids),
            )
            toks_used.append(used if ans is not None else max_new_tokens)
            correct.append(bool(ans == it["answer"]))
            checks.append(n_checks)
            texts.append(text[:end])
        results.append(
            {
                "name": name,
                "lam": lam_a,
                "tau": tau_a,
                "use_probe": use_a,
                "tokens": toks_used,
                "correct": correct,
                "checks": checks,
                "texts": texts,
                "mean_tokens": float(np.mean(toks_used)),
                "accuracy": float(np.mean(correct)),
                "mean_checks": float(np.mean(checks)),
            }
        )
    consts = results[1 + len(dycon_settings) :]
    paired = {}
    for dy in results[1 : 1 + len(dycon_settings)]:
        match = min(consts, key=lambda r, dy=dy: abs(r["mean_tokens"] - dy["mean_tokens"]))
        for other in (results[0], match):
            paired[f"{dy['name']} - {other['name']}"] = {
                "tokens": _paired(dy["tokens"], other["tokens"], seed=seed),
                "checks": _paired(dy["checks"], other["checks"], seed=seed),
                "accuracy": {
                    "difference": dy["accuracy"] - other["accuracy"],
                    **_mcnemar(dy["correct"], other["correct"]),
                },
            }
    return {
        "probe": {k: v for k, v in probe.items() if k != "coef"},
        "probe_seconds": probe_s,
        "items": [{"k": it["k"], "answer": it["answer"]} for it in items],
        "few_shot": prefix,
        "vocab_size": int(model.config.vocab_size),
        "boundary_tokens": sorted(int(b) for b in boundary),
        "reflect_tokens": sorted(int(r) for r in reflect),
        "arms": results,
        "paired": paired,
        "max_new_tokens": max_new_tokens,
        "seconds": time.time() - t0,
    }
