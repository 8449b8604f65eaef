"""AlgoTrace on a released language model (issue 26, Deliver 4): the project's traces as text.

The TSP and graph-navigation traces of :mod:`.traces` are written as plain text, one line per
primitive segment, each line opening with the primitive's name::

    Task: shortest tour from a. Cities: a (1, 2), b (3, 4), c (0, 0), d (2, 2).
    distance b 4
    distance c 3
    compare b c c
    nearest c
    ...
    verify d ok
    path a c d b a

(navigation: ``Task: route from a to c. Points: ... Roads: a-b, a-c, b-d.``). Every token of a
line carries the line's primitive (header lines and the blank line between examples carry
``-1``); text is tokenised piece by piece with the checkpoint's own tokenizer, so every token
has exactly one label. On that text:

1. **Clusters** (teacher-forced documents of ``checkpoint_shots`` solved examples each): k-means
   of every layer's ``resid_post`` at the trace tokens, scored against the true primitive
   (purity / NMI / ARI) next to random clusters of the same sizes and the partition by token
   identity (:func:`fidia_jax.metrics.cluster_agreement`).
2. **Primitive vectors** (the ``onset`` recipe, the one that works on the synthetic model): mean
   head outputs at the token just before each line of the primitive, heads ranked by
   :func:`.vectors.head_attribution_effects` (the first-order estimate of the indirect effect on
   the primitive's first token, measured at the other primitives' tokens; the exact effect needs
   one forward pass per head and primitive, 360 passes on Gemma 3 270M), the top
   ``top_k_heads`` summed through ``W_O`` (and the attention post-norm) by
   :func:`.vectors.function_vector`.
3. **Injection**: prompts of one solved example plus a new problem's header; greedy continuation
   of ``checkpoint_new_tokens`` tokens with ``scale * v`` added to the residual entering block
   ``checkpoint_inject_layer`` at the generated positions; each primitive's rate = its share of
   the generated lines that open with a primitive name (up to the ``path`` line, a blank line or
   a new ``Task:``). Per prompt, the change against the uninjected continuation; the mean over
   prompts with a 95 % bootstrap interval (prompts resampled), for every primitive vector and for
   a random vector of the same norm (the control gets the same treatment), and the paired
   bootstrap of (own-rate change of the vector) minus (the same rate's change under the random
   vector).

The text format, the onset positions, the first-order head ranking, the injection layer and scale
and the line-level rates are our choices; the paper works on Phi-4 / Llama-3 traces of its own
tasks.
"""

from __future__ import annotations

import pathlib
import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from fidia_jax import metrics, models
from fidia_jax import train as train_lib
from fidia_jax.config import write_summary
from fidia_jax.projects.algotrace import traces
from fidia_jax.projects.algotrace.plots import plot_clustering, plot_injection
from fidia_jax.projects.algotrace.vectors import (
    function_vector,
    head_attribution_effects,
    top_heads,
)
from fidia_jax.train import load_checked, loop_progress

__all__ = [
    "checkpoint_algotrace",
    "checkpoint_and_evaluate",
    "checkpoint_texts",
    "render_example",
    "text_documents",
]

PRIMS = traces.ALGOTRACE_PRIMITIVES
_ID2STR = {i: s for s, i in traces.ALGOTRACE_VOCAB.items()}
_KEYWORD_OF = {tok: p for p, tok in traces.ALGOTRACE_KEYWORDS.items()}


def render_example(tokens, prompt_len: int) -> tuple[str, list[tuple[str, int]]]:
    """One sequence of :func:`.traces.make_algotrace_data` as text.

    Args:
      tokens: ``(T,)`` token ids of one row (``BOS ... | trace EOS PAD ...``).
      prompt_len: its prompt length (the row's ``prompt_len``).

    Returns:
      ``(header, lines)``: the problem's header line (ending in ``"\\n"``) and the trace as
      ``(line, primitive index)`` pairs, each line ending in ``"\\n"``.

    Raises:
      ValueError: a row that is not an AlgoTrace sequence (no task token, no trace).
    """
    sym = [_ID2STR[int(t)] for t in np.asarray(tokens)]
    prompt, trace = sym[1:prompt_len], sym[prompt_len:]
    if not prompt or prompt[0] not in ("TSP", "NAV") or not trace:
        raise ValueError("render_example: not an AlgoTrace sequence (task token, then a trace)")
    body = prompt[1:]
    coords, i = [], 0
    while i + 2 < len(body) and body[i] != "|":
        coords.append(f"{body[i]} ({body[i + 1]}, {body[i + 2]})")
        i += 3
    if prompt[0] == "TSP":
        header = f"Task: shortest tour from a. Cities: {', '.join(coords)}.\n"
    else:
        rest = body[i + 1 : -1]  # edges ... T target
        t_at = rest.index("T")
        edges = [f"{rest[j]}-{rest[j + 1]}" for j in range(0, t_at, 2)]
        header = (
            f"Task: route from a to {rest[t_at + 1]}. Points: {', '.join(coords)}. "
            f"Roads: {', '.join(edges)}.\n"
        )
    lines, cur = [], None
    for s in trace:
        if s in ("EOS", "PAD"):
            break
        tok = traces.ALGOTRACE_VOCAB[s]
        if tok in _KEYWORD_OF:
            if cur is not None:
                lines.append(cur)
            prim = _KEYWORD_OF[tok]
            cur = [prim, [prim]]
        else:
            cur[1].append(s.lower())
    if cur is not None:
        lines.append(cur)
    return header, [(" ".join(words) + "\n", PRIMS.index(p)) for p, words in lines]


def text_documents(n: int, *, shots: int, seed: int, n_nodes: int = 4, n_edges: int = 5):
    """``n`` documents of ``shots`` solved examples each (tasks and strategies drawn uniformly).

    Returns:
      list of documents, each a list of examples ``(header, [(line, primitive), ...], path)``
      with ``path`` the text of the solution line.
    """
    data = traces.make_algotrace_data(n * shots, seed=seed, n_nodes=n_nodes, n_edges=n_edges)
    docs = []
    for d in range(n):
        ex = []
        for r in range(d * shots, (d + 1) * shots):
            header, lines = render_example(data.tokens[r], int(data.prompt_len[r]))
            ex.append((header, lines, lines[-1][0]))
        docs.append(ex)
    return docs


def _doc_pieces(doc) -> list[tuple[str, int]]:
    """``(text, primitive or -1)`` pieces of one document, in order (BOS not included)."""
    pieces = []
    for j, (header, lines, _) in enumerate(doc):
        pieces += ([("\n", -1)] if j else []) + [(header, -1)] + list(lines)
    return pieces


def checkpoint_texts(config) -> tuple[list, list[str], list[str]]:
    """The documents of a checkpoint run and their texts, from the config alone (no tokenizer):
    ``(docs, document_texts, prompt_texts)``; the first ``checkpoint_docs`` documents are read
    whole, the prompts (one solved example, a blank line, a new problem's header) are continued
    by ``checkpoint_new_tokens`` tokens. The texts are what the lengths are checked on before the
    weights load (:func:`fidia_jax.models.check_prompt_lengths`)."""
    n_docs = config.checkpoint_docs
    docs = text_documents(
        n_docs + config.checkpoint_prompts, shots=config.checkpoint_shots, seed=config.seed,
        n_nodes=config.n_nodes, n_edges=config.n_edges,
    )  # fmt: skip
    doc_texts = ["".join(t for t, _ in _doc_pieces(d)) for d in docs[:n_docs]]
    prompt_texts = [
        "".join(t for t, _ in _doc_pieces([d[0]])) + "\n" + d[-1][0] for d in docs[n_docs:]
    ]
    return docs, doc_texts, prompt_texts


def _encode_doc(tok, doc) -> tuple[list[int], list[int], list[int]]:
    """Ids, labels and line starts (index of each trace line's first token) of one document."""
    ids = [tok.bos_id] if tok.bos_id is not None else []
    labels = [-1] * len(ids)
    starts = []
    for text, lab in _doc_pieces(doc):
        piece = tok.encode(text, add_bos=False)
        if lab >= 0:
            starts.append(len(ids))
        ids += piece
        labels += [lab] * len(piece)
    return ids, labels, starts


@nnx.jit
def _capture(model, tokens):
    _, cap = model.inspect(tokens, capture=("resid_post", "head_out"))
    return cap["resid_post"], cap["head_out"]


def _batches(rows: list[list[int]], batch: int, width: int):
    for s in range(0, len(rows), batch):
        arr = np.zeros((batch, width), np.int32)
        for i, r in enumerate(rows[s : s + batch]):
            arr[i, : len(r)] = r
        yield s, arr


def _bootstrap(x: np.ndarray, draws: int, rng: np.random.Generator) -> tuple[float, float]:
    boots = x[rng.integers(0, len(x), size=(draws, len(x)))].mean(1)
    lo, hi = np.quantile(boots, [0.025, 0.975])
    return float(lo), float(hi)


def _line_counts(text: str, words: tuple[str, ...]) -> tuple[np.ndarray, str | None]:
    """Per-primitive count of generated lines and the text of the ``path`` line (if any)."""
    counts = np.zeros(len(words), np.int64)
    path = None
    for i, line in enumerate(text.split("\n")):
        line = line.strip()
        if not line:
            if i == 0:
                continue
            break
        if line.startswith("Task:"):
            break
        first = line.split()[0]
        if first in words:
            counts[words.index(first)] += 1
            if first == "path":
                path = line
                break
    return counts, path


def checkpoint_algotrace(model: models.Llama, tok, config) -> dict[str, Any]:
    """Runs the three steps of the module docstring on a loaded checkpoint.

    Args:
      model: a loaded :class:`fidia_jax.models.Llama` (``max_seq_len`` long enough for the
        documents; a ValueError names the length needed otherwise).
      tok: its :class:`fidia_jax.models.LMTokenizer`.
      config: an :class:`.configs.AlgoTraceConfig` (``checkpoint_*`` fields, ``n_clusters``,
        ``n_random``, ``top_k_heads``, ``seed``, ``n_nodes``, ``n_edges``).

    Returns:
      JSON-ready dict: ``clustering`` (``n_points``, ``layer``, ``kmeans`` / ``random`` /
      ``token_identity`` agreement at the headline layer, ``per_layer`` k-means agreement),
      ``vectors`` (per primitive: ``norm``, ``heads`` as ``[layer, head]`` pairs, ``keyword_id``),
      ``injection`` (``layer``, ``scale``, ``n_prompts``, ``baseline_rates``, ``table``: vector
      -> per primitive ``{"delta", "ci95"}``, ``diagonal_vs_random``: primitive -> ``{"diff",
      "ci95", "p_not_above"}``, ``solved_none``, ``lines_per_prompt``), ``doc_tokens``.

    Raises:
      ValueError: a document or prompt longer than the model's ``max_seq_len``; fewer trace
        tokens than ``n_clusters``.
    """
    cfg = model.config
    rng = np.random.default_rng(config.seed)
    key = jax.random.key(config.seed)
    n_docs = config.checkpoint_docs
    docs, _, _ = checkpoint_texts(config)
    enc = [_encode_doc(tok, d) for d in docs[:n_docs]]
    width = max(len(e[0]) for e in enc)
    if width > cfg.max_seq_len:
        raise ValueError(
            f"checkpoint_algotrace: a document has {width} tokens > the model's max_seq_len "
            f"{cfg.max_seq_len}; raise checkpoint_max_seq_len or lower checkpoint_shots"
        )
    labels = np.full((n_docs, width), -1, np.int64)
    ids = np.zeros((n_docs, width), np.int64)
    for i, (row, lab, _) in enumerate(enc):
        ids[i, : len(row)] = row
        labels[i, : len(lab)] = lab
    # keyword (first) token of each primitive's lines; onset = the token before each line
    first = {p: [] for p in range(len(PRIMS))}
    onset = np.zeros((len(PRIMS), n_docs, width), bool)
    for i, (row, lab, starts) in enumerate(enc):
        for s in starts:
            first[lab[s]].append(row[s])
            onset[lab[s], i, s - 1] = True
    keyword = [int(np.bincount(first[p]).argmax()) for p in range(len(PRIMS))]

    # ---- one pass over the documents: residual stream (clusters) and head outputs (vectors)
    batch = config.checkpoint_batch
    sel = labels >= 0
    feats = [[] for _ in range(cfg.n_layers)]
    head_sum = np.zeros((len(PRIMS), cfg.n_layers, cfg.n_heads, cfg.head_dim))
    with loop_progress(
        f"AlgoTrace: residual stream and head outputs of {n_docs} documents",
        -(-n_docs // batch), unit="batch",
    ) as bar:  # fmt: skip
        for s, arr in _batches([e[0] for e in enc], batch, width):
            resid, heads = _capture(model, jnp.asarray(arr))
            resid, heads = np.asarray(resid, np.float32), np.asarray(heads, np.float32)
            n = min(batch, n_docs - s)
            m = sel[s : s + n]
            for li in range(cfg.n_layers):
                feats[li].append(resid[li, :n][m])
            for p in range(len(PRIMS)):
                head_sum[p] += np.einsum("lbthd,bt->lhd", heads[:, :n], onset[p, s : s + n])
            bar.advance()
    true = labels[sel]
    n_points = int(true.size)
    if config.n_clusters > n_points:
        raise ValueError(
            f"checkpoint_algotrace: n_clusters={config.n_clusters} > {n_points} trace tokens"
        )
    per_layer, pred = [], None
    layer = cfg.n_layers // 2 if config.cluster_layer == -1 else config.cluster_layer
    layer %= cfg.n_layers
    with loop_progress(
        f"AlgoTrace: k-means (k = {config.n_clusters}) of {n_points} trace tokens per layer",
        cfg.n_layers, unit="layer",
    ) as bar:  # fmt: skip
        for li in range(cfg.n_layers):
            x = jnp.asarray(np.concatenate(feats[li]), jnp.float32)
            km = metrics.kmeans(x, config.n_clusters, key=jax.random.fold_in(key, li))
            lab = np.asarray(km.labels, np.int64)
            per_layer.append(metrics.cluster_agreement(true, lab))
            if li == layer:
                pred = lab
            bar.advance()
    rand = [metrics.cluster_agreement(true, rng.permutation(pred)) for _ in range(config.n_random)]
    clustering = {
        "n_points": n_points,
        "layer": layer,
        "kmeans": per_layer[layer],
        "random": {k: float(np.mean([r[k] for r in rand])) for k in ("purity", "nmi", "ari")},
        "token_identity": metrics.cluster_agreement(true, ids[sel]),
        "per_layer": per_layer,
    }

    # ---- primitive vectors: onset means, heads ranked by attribution at other primitives' tokens
    ie_docs = min(config.checkpoint_ie_docs, n_docs)
    ie_tok = jnp.asarray(ids[:ie_docs], jnp.int32)
    vectors, vec_info = {}, {}
    with loop_progress(
        f"AlgoTrace: primitive vectors (heads ranked by attribution on {ie_docs} documents)",
        len(PRIMS), unit="primitive",
    ) as bar:  # fmt: skip
        for p, prim in enumerate(PRIMS):
            mean = head_sum[p] / max(onset[p].sum(), 1)
            other = (labels[:ie_docs] >= 0) & (labels[:ie_docs] != p)
            ie = np.asarray(head_attribution_effects(model, ie_tok, other, mean, keyword[p]))
            chosen = top_heads(ie, config.top_k_heads)
            v = np.asarray(function_vector(model, mean, chosen), np.float32)
            vectors[prim] = v
            vec_info[prim] = {
                "norm": float(np.linalg.norm(v)),
                "heads": np.argwhere(chosen).tolist(),
                "keyword_id": keyword[p],
                "keyword": tok.decode([keyword[p]]),
                "onsets": int(onset[p].sum()),
            }
            bar.advance()
    mean_norm = float(np.mean([vec_info[p]["norm"] for p in PRIMS]))
    r = rng.standard_normal(cfg.dim)
    conditions = {"none": np.zeros(cfg.dim, np.float32)}
    scale = config.checkpoint_inject_scale
    for prim in PRIMS:
        conditions[prim] = scale * vectors[prim]
    conditions["random"] = (scale * mean_norm * r / np.linalg.norm(r)).astype(np.float32)

    # ---- injection on prompts: one solved example + a new header
    prompts, truth = [], []
    for d in docs[n_docs:]:
        shot, new = d[0], d[-1]
        text_ids, _, _ = _encode_doc(tok, [shot])
        text_ids += tok.encode("\n", add_bos=False) + tok.encode(new[0], add_bos=False)
        prompts.append(text_ids)
        truth.append(new[2].strip())
    plen = np.asarray([len(p) for p in prompts], np.int32)
    pw = int(plen.max())
    n_new = config.checkpoint_new_tokens
    if pw + n_new > cfg.max_seq_len:
        raise ValueError(
            f"checkpoint_algotrace: prompt ({pw}) + new tokens ({n_new}) > max_seq_len "
            f"{cfg.max_seq_len}"
        )
    parr = np.zeros((len(prompts), pw), np.int32)
    for i, p in enumerate(prompts):
        parr[i, : len(p)] = p
    positions = jnp.asarray(plen[:, None] - 1 + np.arange(n_new)[None], jnp.int32)
    inject = (
        cfg.n_layers // 3 if config.checkpoint_inject_layer < 0 else config.checkpoint_inject_layer
    )
    if not 0 <= inject < cfg.n_layers:
        raise ValueError(
            f"checkpoint_algotrace: checkpoint_inject_layer {inject} outside [0, {cfg.n_layers})"
        )
    words = tuple(PRIMS)
    counts, solved, samples = {}, {}, {}
    with loop_progress(
        f"AlgoTrace: {len(conditions)} injections (none, 5 primitives, random), greedy "
        f"{len(prompts)} prompts x {n_new} tokens",
        len(conditions), unit="injection",
    ) as bar:  # fmt: skip
        for name, vec in conditions.items():
            hook = models.AddToResidual(inject, jnp.asarray(vec), positions=positions, site="pre")
            out = models.sample_llama(
                model, jnp.asarray(parr), max_new_tokens=n_new, lengths=jnp.asarray(plen),
                hooks=(hook,),
            )  # fmt: skip
            gen = np.asarray(out.tokens)
            c, ok = [], []
            for i in range(len(prompts)):
                text = tok.decode([int(t) for t in gen[i]])
                ci, path = _line_counts(text, words)
                c.append(ci)
                ok.append(path == truth[i])
                if i == 0:
                    samples[name] = text
            counts[name] = np.stack(c)
            solved[name] = float(np.mean(ok))
            bar.advance()

    def rates(c):
        tot = c.sum(1, keepdims=True)
        return np.where(tot > 0, c / np.maximum(tot, 1), 0.0)

    base = rates(counts["none"])
    table, deltas = {}, {}
    for name in [*PRIMS, "random"]:
        d = rates(counts[name]) - base  # (prompts, primitives)
        deltas[name] = d
        table[name] = [
            {"delta": float(d[:, j].mean()), "ci95": _bootstrap(d[:, j], 2000, rng)}
            for j in range(len(PRIMS))
        ]
    vs_random = {}
    for j, prim in enumerate(PRIMS):
        diff = deltas[prim][:, j] - deltas["random"][:, j]
        boots = diff[rng.integers(0, len(diff), size=(2000, len(diff)))].mean(1)
        vs_random[prim] = {
            "diff": float(diff.mean()),
            "ci95": _bootstrap(diff, 2000, rng),
            "p_not_above": float(np.mean(boots <= 0)),
        }
    injection = {
        "layer": inject,
        # the residual's size where the vectors are added (leaving block inject - 1)
        "resid_norm": float(
            np.linalg.norm(np.concatenate(feats[max(inject - 1, 0)]), axis=1).mean()
        ),
        "scale": scale,
        "n_prompts": len(prompts),
        "new_tokens": n_new,
        "baseline_rates": base.mean(0).tolist(),
        "table": table,
        "diagonal_vs_random": vs_random,
        "solved": solved,
        "lines_per_prompt": {k: float(c.sum(1).mean()) for k, c in counts.items()},
        "sample_first_prompt": samples,
    }
    return {
        "clustering": clustering,
        "vectors": vec_info,
        "mean_vector_norm": mean_norm,
        "injection": injection,
        "doc_tokens": int(width),
        "prompt_tokens": pw,
    }


def checkpoint_and_evaluate(config, workdir: str | pathlib.Path) -> dict[str, Any]:
    """``fidia-jax algotrace train --set checkpoint=PATH``: the method on a released model.

    Stages, each announced before it starts, with a progress bar (ETA) over each loop: the
    tokenizer; the documents' and prompts' lengths (a prompt plus ``checkpoint_new_tokens``)
    against the smaller of ``checkpoint_max_seq_len`` and the checkpoint's trained context
    (:func:`fidia_jax.models.check_prompt_lengths`, before any weight is read); the weights;
    then :func:`checkpoint_algotrace` (captures over the document batches, k-means over the
    layers, vectors over the primitives, injections over the conditions). Prints the tables and
    writes into ``workdir``: ``algotrace_checkpoint.json`` (results and config),
    ``summary.json``, and the synthetic run's two figures, ``algotrace_clusters.png`` (no
    spectral meta-clusters here: that bar is left out) and ``algotrace_injection.png`` (the
    mean change of each primitive's line share; the 95 % intervals are in the JSON).

    Args:
      config: an :class:`.configs.AlgoTraceConfig` with ``checkpoint`` set.
      workdir: the output directory.

    Returns:
      :func:`checkpoint_algotrace`'s results with ``checkpoint``, ``load_s``, ``wall_s`` and
      ``figures`` (the two paths).

    Raises:
      CheckpointError: a missing path (one message naming it, before anything loads) or what
        the loaders raise.
      DataError: a document, or a prompt plus the new tokens, longer than the limit (before the
        weights load).
      ConfigError: an unsupported family.
    """
    from fidia_jax.projects.algotrace.train import print_checkpoint_tables

    t0 = time.time()
    workdir = pathlib.Path(workdir)
    _, doc_texts, prompt_texts = checkpoint_texts(config)
    model, tok = load_checked(
        config.checkpoint, read=doc_texts, generate=prompt_texts,
        max_new_tokens=config.checkpoint_new_tokens, max_seq_len=config.checkpoint_max_seq_len,
        where="algotrace checkpoint", what="AlgoTrace", labels=("document", "prompt"),
        hint="raise checkpoint_max_seq_len, or lower checkpoint_shots / checkpoint_new_tokens",
    )  # fmt: skip
    load_s = time.time() - t0
    res = checkpoint_algotrace(model, tok, config)
    name = pathlib.Path(str(config.checkpoint)).name
    results = {"checkpoint": str(config.checkpoint), "load_s": load_s, **res,
               "wall_s": time.time() - t0}  # fmt: skip
    inj = res["injection"]
    figures = [
        plot_clustering(
            res["clustering"], workdir / "algotrace_clusters.png",
            title=f"AlgoTrace on {name}: clusters of {res['clustering']['n_points']} trace-token "
            f"activations vs the true primitives (layer {res['clustering']['layer']}; no "
            "meta-clusters in checkpoint mode)",
        ),
        plot_injection(
            inj, PRIMS, workdir / "algotrace_injection.png",
            title=f"{name}: layer {inj['layer']}, scale {inj['scale']:g}, {inj['n_prompts']} "
            "prompts, greedy",
        ),
    ]  # fmt: skip
    results["figures"] = [str(f) for f in figures]
    write_summary(workdir / "algotrace_checkpoint.json", results, config)
    cl = res["clustering"]
    train_lib.write_summary(
        workdir,
        {"checkpoint": results["checkpoint"], "n_points": cl["n_points"], "layer": cl["layer"],
         "agreement": {k: cl[k] for k in ("kmeans", "random", "token_identity")},
         "diagonal_vs_random": inj["diagonal_vs_random"], "wall_s": results["wall_s"]},
        config=config,
    )  # fmt: skip
    print_checkpoint_tables(results)
    print("figures: " + ", ".join(results["figures"]))
    return results
