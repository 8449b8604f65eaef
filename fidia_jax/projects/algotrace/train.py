"""The AlgoTrace experiment: train, cluster, build primitive vectors, inject, compose, transfer.

1. **Train** a small grouped-query :class:`~fidia_jax.models.Llama` on TSP and graph-navigation
   traces (:func:`.traces.make_algotrace_data`; loss on trace tokens only).
2. **Cluster** the residual stream (``resid_post`` of ``cluster_layer``) at the trace tokens of
   evaluation sequences with k-means (k = ``n_clusters``, the paper's 50); score the clusters
   against the true primitive of each token (purity / NMI / ARI) next to two controls: random
   clusters of the same sizes and the partition by token identity. The cluster transition matrix
   (consecutive tokens of a trace) is meta-clustered spectrally into ``n_meta`` groups, scored
   the same way. Every layer's clustering is scored too.
3. **Primitive vectors** (function vectors): for each primitive, the mean head outputs at its
   tokens (or, ``fv_positions="onset"``, at the token before each of its keywords), every head's causal indirect effect on the log-probability of the primitive's keyword
   at tokens of the *other* primitives, and the sum of the ``top_k_heads`` heads' mean outputs
   through ``W_O``. Built on both tasks, and on each task alone (for transfer).
4. **Injection**: sample ``n_prompts`` traces (both tasks) with ``s * v`` (``s`` in ``inject_scales``) added to the
   residual entering block ``inject_layer`` at every generated position, and measure each
   primitive's rate in the generated text (:func:`.traces.algotrace_primitive_labels`)
   against the uninjected run with the same sampling key: the injection table (cf. the paper's
   Table 1), a random vector of the same norm as control, sums of two vectors (composition),
   and vectors built on one task injected on the other (transfer).

Several devices or processes (:mod:`fidia_jax.parallel`): step 1's gradient steps run
data-parallel (``fit_llama(mesh=)`` on a :func:`fidia_jax.parallel.data_mesh` of the most
devices ``<= config.num_devices`` that divide ``batch_size``; parameters replicated); under a
multi-host launcher every process trains and steps 2-4 -- clustering, vectors, sampling, with
nothing to split -- run on process 0 only (the other processes return the training numbers).
"""

from __future__ import annotations

import pathlib
import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from fidia_jax import metrics, models, parallel
from fidia_jax import train as train_lib
from fidia_jax.config import write_summary
from fidia_jax.projects.algotrace import checkpoint as checkpoint_lib
from fidia_jax.projects.algotrace import traces
from fidia_jax.projects.algotrace.configs import AlgoTraceConfig
from fidia_jax.projects.algotrace.plots import PARTITIONS, plot_clustering, plot_injection
from fidia_jax.projects.algotrace.vectors import (
    function_vector,
    head_indirect_effects,
    mean_head_outputs,
    top_heads,
)

__all__ = [
    "build_vectors",
    "checkpoint_and_evaluate",
    "cluster_analysis",
    "format_tables",
    "headline",
    "injection_experiment",
    "make_model",
    "print_tables",
    "train_and_evaluate",
    "train_model",
]

SUMMARY_FILE = "algotrace.json"
#: Where mean head outputs are taken: a primitive's own tokens, or the token before its keyword.
FV_POSITIONS = ("tokens", "onset")
PRIMS = traces.ALGOTRACE_PRIMITIVES
TASKS = traces.ALGOTRACE_TASKS
_EOS = traces.ALGOTRACE_VOCAB["EOS"]
_P = traces.ALGOTRACE_KEYWORDS["path"]


def make_model(config: AlgoTraceConfig) -> models.Llama:
    """The untrained :class:`Llama` of ``config`` (parameters from ``key(seed)``)."""
    cfg = models.LlamaConfig(
        vocab_size=len(traces.ALGOTRACE_VOCAB), dim=config.dim, n_layers=config.n_layers,
        n_heads=config.n_heads, n_kv_heads=config.n_kv_heads, hidden_dim=config.hidden_dim,
        max_seq_len=config.max_seq_len,
    )  # fmt: skip
    return models.Llama(cfg, rngs=nnx.Rngs(config.seed))


def _data(
    config: AlgoTraceConfig, n: int, seed: int, exclude: traces.AlgoTraceData | None = None
) -> traces.AlgoTraceData:
    return traces.make_algotrace_data(
        n, seed=seed, n_nodes=config.n_nodes, n_edges=config.n_edges, max_len=config.max_seq_len,
        exclude=exclude,
    )  # fmt: skip


def _train_data(config: AlgoTraceConfig) -> traces.AlgoTraceData:
    """The ``n_train`` training rows (``default_rng(seed)``)."""
    return _data(config, config.n_train, config.seed)


def _build_train_data(config: AlgoTraceConfig) -> traces.AlgoTraceData:
    with train_lib.stage(f"AlgoTrace: building {config.n_train} training traces"):
        return _train_data(config)


def _eval_data(
    config: AlgoTraceConfig, train: traces.AlgoTraceData | None = None
) -> traces.AlgoTraceData:
    """The ``n_eval`` evaluation rows (``default_rng(seed + 1)``); with ``config.distinct_eval``
    (the default) none of their problems is a training problem (a repeat is drawn again).
    ``train``: the rows of :func:`_train_data`, when the caller has them (else built here)."""
    if config.distinct_eval and train is None:
        train = _train_data(config)
    return _data(
        config, config.n_eval, config.seed + 1, exclude=train if config.distinct_eval else None
    )


def _train_mesh(config: AlgoTraceConfig) -> jax.sharding.Mesh | None:
    """The ``data`` mesh of the training steps: the most devices ``<= config.num_devices``
    (``0``: all) that divide ``config.batch_size``; ``None`` on one device in one process."""
    return parallel.parallel_mesh(config.batch_size, num_devices=config.num_devices)


def train_model(
    config: AlgoTraceConfig,
    workdir: str | pathlib.Path | None = None,
    *,
    train: traces.AlgoTraceData | None = None,
) -> tuple[models.Llama, np.ndarray]:
    """Trains the model on ``n_train`` traces; returns ``(model, losses)``.

    ``train``: the training rows when the caller has built them (:func:`_train_data`); else
    they are built here.

    The loss weight is 1 on trace tokens and ``EOS``, 0 on the prompt (random coordinates) and
    padding (:func:`fidia_jax.train.fit_llama`, Adam). With ``workdir``, the run ``algotrace_lm``
    leaves ``metrics.jsonl``, ``curves.png`` and checkpoints there (a rerun resumes).
    """
    if train is None:
        train = _build_train_data(config)
    with train_lib.stage("AlgoTrace: building the model"):
        weights = ((train.labels >= 0) | (train.tokens == _EOS)).astype(np.float32)
        model = make_model(config)
    return train_lib.fit_llama(
        model, train.tokens, weights=weights, steps=config.steps, batch_size=config.batch_size,
        tx=optax.adam(config.learning_rate), key=jax.random.fold_in(jax.random.key(config.seed), 1),
        workdir=workdir, run="algotrace_lm", mesh=_train_mesh(config),
    )  # fmt: skip


@nnx.jit
def _resid(model, tokens):
    return model.inspect(tokens, capture=("resid_post",))[1]["resid_post"]


def _rows_up_to(labels: np.ndarray, max_points: int) -> int:
    """How many leading rows hold at most ``max_points`` labelled tokens (at least one row)."""
    cum = np.cumsum((labels >= 0).sum(axis=1))
    return max(1, int(np.searchsorted(cum, max_points, side="right")))


def cluster_analysis(
    model: models.Llama, ev: traces.AlgoTraceData, config: AlgoTraceConfig, key: jax.Array
) -> dict[str, Any]:
    """k-means of trace-token activations vs the true primitives; transitions; meta-clusters.

    Returns:
      JSON-ready dict: ``n_points``, ``layer``, ``kmeans`` / ``random`` / ``token_identity`` /
      ``meta`` agreement dicts (purity, nmi, ari), ``per_layer`` (kmeans agreement of every
      layer), ``cluster_majority`` / ``cluster_majority_share`` / ``cluster_sizes`` (k,),
      ``transition`` (k, k row-normalised), ``meta_of_cluster`` (k,), ``primitive_transition``
      (5, 5 true-label transition frequencies).

    Raises:
      ValueError: fewer clustered tokens than ``n_clusters`` (k > number of points).
    """
    rows = _rows_up_to(ev.labels, config.max_points)
    tokens, labels = ev.tokens[:rows], ev.labels[:rows]
    sel = labels >= 0
    n_points = int(sel.sum())
    if config.n_clusters > n_points:
        raise ValueError(
            f"cluster_analysis: n_clusters={config.n_clusters} > {n_points} clustered tokens "
            f"(k must not exceed the number of points; raise max_points or n_eval)"
        )
    true = labels[sel].astype(np.int64)
    seq = np.broadcast_to(np.arange(rows)[:, None], labels.shape)[sel]
    resid = np.asarray(_resid(model, jnp.asarray(tokens)))  # (L, B, T, C)
    layer = config.cluster_layer % config.n_layers
    per_layer, pred = [], None
    for li in range(config.n_layers):
        x = jnp.asarray(resid[li][sel], jnp.float32)
        km = metrics.kmeans(x, config.n_clusters, key=jax.random.fold_in(key, li))
        lab = np.asarray(km.labels, np.int64)
        per_layer.append(metrics.cluster_agreement(true, lab))
        if li == layer:
            pred = lab
    rng = np.random.default_rng(config.seed)
    rand = [metrics.cluster_agreement(true, rng.permutation(pred)) for _ in range(config.n_random)]
    k = config.n_clusters
    counts = metrics.cluster_transition_matrix(pred, seq, k, normalize=False)
    n_meta = min(config.n_meta, k)
    meta_of = metrics.spectral_clustering(counts, n_meta, key=jax.random.fold_in(key, 99))
    maj = np.zeros(k, np.int64)
    share = np.zeros(k)
    sizes = np.bincount(pred, minlength=k)
    for c in range(k):
        if sizes[c]:
            bc = np.bincount(true[pred == c], minlength=len(PRIMS))
            maj[c], share[c] = int(bc.argmax()), float(bc.max() / sizes[c])
    return {
        "n_points": n_points,
        "layer": layer,
        "kmeans": per_layer[layer],
        "random": {m: float(np.mean([r[m] for r in rand])) for m in ("purity", "nmi", "ari")},
        "token_identity": metrics.cluster_agreement(true, tokens[sel].astype(np.int64)),
        "meta": metrics.cluster_agreement(true, meta_of[pred]),
        "per_layer": per_layer,
        "cluster_majority": maj.tolist(),
        "cluster_majority_share": share.tolist(),
        "cluster_sizes": sizes.tolist(),
        "transition": metrics.cluster_transition_matrix(pred, seq, k).tolist(),
        "meta_of_cluster": np.asarray(meta_of).tolist(),
        "primitive_transition": metrics.cluster_transition_matrix(true, seq, len(PRIMS)).tolist(),
    }


def build_vectors(
    model: models.Llama,
    tokens: np.ndarray,
    labels: np.ndarray,
    config: AlgoTraceConfig,
    rows: np.ndarray | None = None,
    positions: str = "tokens",
) -> dict[str, dict[str, Any]]:
    """One function vector per primitive from the selected sequences.

    Mean head outputs over the primitive's tokens (``positions="tokens"``, the paper's
    description) or over the tokens just before each of its keywords (``"onset"``: the context
    that is about to open the primitive, as Todd et al.'s last-token function vectors), all
    selected rows; indirect effects on the
    primitive's keyword at the other primitives' tokens of the first ``ie_rows`` selected rows;
    the ``top_k_heads`` heads by indirect effect. Unselected rows stay in the arrays with an
    all-false mask, so every source (both tasks, one task) runs the same compiled programs.

    Args:
      model: the trained model.
      tokens, labels: ``(N, T)`` sequences and their primitive labels.
      config: the run's config (``ie_rows``, ``top_k_heads``).
      rows: ``(N,)`` bool, the sequences to use (``None`` = all).
      positions: ``"tokens"`` or ``"onset"`` (see above).

    Returns:
      primitive -> ``{"vector" (C,) np.float32, "heads" (L, Hq) bool, "ie" (L, Hq), "norm"}``.

    Raises:
      ValueError: a primitive with no tokens in the selected rows (named); unknown ``positions``.
    """
    if positions not in FV_POSITIONS:
        raise ValueError(
            f"build_vectors: positions must be one of {FV_POSITIONS}, got {positions!r}"
        )
    rows = np.ones(tokens.shape[0], bool) if rows is None else np.asarray(rows, bool)
    tok = jnp.asarray(tokens)
    chosen = np.nonzero(rows)[0][: config.ie_rows]
    ie_ix = np.concatenate([chosen, np.nonzero(~np.isin(np.arange(len(rows)), chosen))[0]])
    ie_ix = ie_ix[: min(config.ie_rows, len(rows))]
    ie_live = np.isin(ie_ix, chosen)[:, None]
    out = {}
    for p_ix, prim in enumerate(PRIMS):
        if positions == "tokens":
            mask = (labels == p_ix) & rows[:, None]
        else:
            mask = np.zeros(labels.shape, bool)
            mask[:, :-1] = tokens[:, 1:] == traces.ALGOTRACE_KEYWORDS[prim]
            mask &= rows[:, None]
        if not mask.any():
            raise ValueError(f"build_vectors: primitive {prim!r} has no tokens in these sequences")
        mean = mean_head_outputs(model, tok, mask)
        other = (labels[ie_ix] >= 0) & (labels[ie_ix] != p_ix) & ie_live
        ie = head_indirect_effects(model, tok[ie_ix], other, mean, traces.ALGOTRACE_KEYWORDS[prim])
        heads = top_heads(ie, config.top_k_heads)
        vec = np.asarray(function_vector(model, mean, heads))
        out[prim] = {
            "vector": vec, "heads": heads, "ie": np.asarray(ie), "norm": float(np.linalg.norm(vec))
        }  # fmt: skip
    return out


def _true_paths(tokens: np.ndarray) -> list[tuple[int, ...]]:
    out = []
    for row in tokens:
        row = row.tolist()
        start = row.index(_P) + 1
        out.append(tuple(row[start : row.index(_EOS, start)]))
    return out


def _gen_path(row: np.ndarray) -> tuple[int, ...] | None:
    row = row.tolist()
    if _P not in row:
        return None
    start = row.index(_P) + 1
    end = row.index(_EOS, start) if _EOS in row[start:] else len(row)
    return tuple(row[start:end])


def injection_experiment(
    model: models.Llama,
    prompts: traces.AlgoTraceData,
    conditions: dict[str, np.ndarray],
    config: AlgoTraceConfig,
    key: jax.Array,
) -> dict[str, dict[str, Any]]:
    """Samples every prompt under each condition (a residual vector at the generated positions).

    All conditions use the same sampling key and one compiled sampler (the zero vector for the
    uninjected run). Rates are pooled over the generated tokens of the rows of each task.

    Returns:
      condition -> ``{"rates": {"all"|"tsp"|"nav": [5 floats]}, "solved": {"tsp", "nav"},
      "mean_tokens"}``; ``solved`` = the generated path equals the true one.
    """
    n = prompts.tokens.shape[0]
    plen = prompts.prompt_len.astype(np.int32)
    width = int(plen.max())
    prompt = np.zeros((n, width), np.int32)
    for i in range(n):
        prompt[i, : plen[i]] = prompts.tokens[i, : plen[i]]
    positions = jnp.asarray(plen[:, None] - 1 + np.arange(config.max_new_tokens)[None], jnp.int32)
    truth = _true_paths(prompts.tokens)
    out = {}
    for name, vec in conditions.items():
        hook = models.AddToResidual(
            config.inject_layer, jnp.asarray(vec, jnp.float32), positions=positions, site="pre"
        )
        gen = models.sample_llama(
            model, jnp.asarray(prompt), max_new_tokens=config.max_new_tokens, key=key,
            temperature=config.temperature, lengths=jnp.asarray(plen), hooks=(hook,),
            stop_token=_EOS,
        )  # fmt: skip
        toks = np.asarray(gen.tokens)
        lab = traces.algotrace_primitive_labels(toks, 0)
        rates = {"all": traces.primitive_rates(lab, len(PRIMS)).tolist()}
        solved = {}
        for t_ix, task in enumerate(TASKS):
            rows = np.nonzero(prompts.task == t_ix)[0]
            rates[task] = traces.primitive_rates(lab[rows], len(PRIMS)).tolist()
            ok = [_gen_path(toks[i]) == truth[i] for i in rows]
            solved[task] = float(np.mean(ok)) if ok else float("nan")
        out[name] = {
            "rates": rates, "solved": solved,
            "mean_tokens": float(np.mean(np.asarray(gen.num_tokens))),
        }  # fmt: skip
    return out


def _delta(res: dict, cond: str, part: str = "all") -> np.ndarray:
    return np.asarray(res[cond]["rates"][part]) - np.asarray(res["none"]["rates"][part])


def _summarise_injection(res: dict, config: AlgoTraceConfig) -> dict[str, Any]:
    rows = [*PRIMS, "random"]
    table = {r: _delta(res, r).tolist() for r in rows}
    diag = {p: table[p][i] for i, p in enumerate(PRIMS)}
    row_max = {
        p: bool(table[p][i] > 0 and int(np.argmax(table[p])) == i) for i, p in enumerate(PRIMS)
    }
    beats_random = {p: bool(table[p][i] > table["random"][i]) for i, p in enumerate(PRIMS)}
    comp = {}
    for pair in config.compose_pairs:
        a, b = pair.split("+")
        ia, ib = PRIMS.index(a), PRIMS.index(b)
        d = {c: _delta(res, c) for c in (a, b, pair)}
        comp[pair] = {
            "delta_a": {c: float(d[c][ia]) for c in d},
            "delta_b": {c: float(d[c][ib]) for c in d},
            "sum_raises_both": bool(d[pair][ia] > 0 and d[pair][ib] > 0),
        }
    transfer = {}
    for p_ix, prim in enumerate(PRIMS):
        cell = {}
        for src, dst in (("tsp", "nav"), ("nav", "tsp")):
            cell[f"{src}->{dst}"] = float(_delta(res, f"{prim}@{src}", dst)[p_ix])
            cell[f"{dst}->{dst}"] = float(_delta(res, f"{prim}@{dst}", dst)[p_ix])
        transfer[prim] = cell
    return {
        "table": table,
        "diagonal": diag,
        "diagonal_positive": sum(v > 0 for v in diag.values()),
        "diagonal_row_max": sum(row_max.values()),
        "diagonal_beats_random": sum(beats_random.values()),
        "composition": comp,
        "transfer": transfer,
        "transfer_positive": sum(
            v[k] > 0 for v in transfer.values() for k in ("tsp->nav", "nav->tsp")
        ),
    }


def format_tables(results: dict[str, Any]) -> str:
    """Markdown: clustering agreement, the injection table, composition and transfer."""
    cl = results["clustering"]
    lines = [
        f"Clustering of {cl['n_points']} trace tokens (layer {cl['layer']} resid_post), vs true primitives",
        "| partition | purity | NMI | ARI |",
        "|---|---|---|---|",
    ]
    for name in ("kmeans", "meta", "random", "token_identity"):
        a = cl[name]
        lines.append(f"| {name} | {a['purity']:.3f} | {a['nmi']:.3f} | {a['ari']:.3f} |")
    inj = results["injection"]
    lines += [
        "",
        "Injection table: change in each primitive's rate (rows: injected vector)",
        "| vector | " + " | ".join(PRIMS) + " |",
        "|---|" + "---|" * len(PRIMS),
    ]
    for row, vals in inj["table"].items():
        lines.append(f"| {row} | " + " | ".join(f"{v:+.3f}" for v in vals) + " |")
    lines += [
        "",
        "Composition (delta of a's / b's rate)",
        "| pair | a alone | b alone | a+b |",
        "|---|---|---|---|",
    ]
    for pair, c in inj["composition"].items():
        a, b = pair.split("+")
        lines.append(
            f"| {pair} | {c['delta_a'][a]:+.3f} / {c['delta_b'][a]:+.3f} | "
            f"{c['delta_a'][b]:+.3f} / {c['delta_b'][b]:+.3f} | "
            f"{c['delta_a'][pair]:+.3f} / {c['delta_b'][pair]:+.3f} |"
        )
    lines += [
        "",
        "Transfer (delta of the primitive's rate on the target task)",
        "| primitive | tsp->nav | nav->nav | nav->tsp | tsp->tsp |",
        "|---|---|---|---|---|",
    ]
    for prim, c in inj["transfer"].items():
        lines.append(
            f"| {prim} | {c['tsp->nav']:+.3f} | {c['nav->nav']:+.3f} | "
            f"{c['nav->tsp']:+.3f} | {c['tsp->tsp']:+.3f} |"
        )
    lines += [
        "",
        f"Variants (headline: {results['headline_variant']}): where the mean head outputs are "
        "taken @ injection scale",
        "| variant | diagonal > 0 | diagonal = row max | "
        "diagonal > random | pairs raising both | transfers > 0 |",
        "|---|---|---|---|---|---|",
    ]
    for name, v in results["variant_summary"].items():
        lines.append(
            f"| {name} | {v['diagonal_positive']}/5 | {v['diagonal_row_max']}/5 | "
            f"{v['diagonal_beats_random']}/5 | {v['composition_raises_both']} | {v['transfer_positive']}/10 |"
        )
    return "\n".join(lines)


def train_and_evaluate(config: AlgoTraceConfig, workdir: str | pathlib.Path) -> dict[str, Any]:
    """Runs the whole experiment with progress; prints the tables; writes into ``workdir``:
    ``algotrace.json`` (the results and the config), ``summary.json`` (:func:`headline`),
    ``algotrace_clusters.png`` (agreement of the clusters with the true primitives),
    ``algotrace_injection.png`` (the headline injection table) and the training run's files
    (``metrics.jsonl``, ``curves.png``, checkpoints; a rerun resumes).

    Returns:
      The results dict (as written, without ``config``): ``train`` (final loss, wall),
      ``clustering`` (:func:`cluster_analysis`); for every variant ``"<fv_position>@<scale>"``
      in ``variants``: ``conditions`` (:func:`injection_experiment`) and ``injection`` (table,
      diagonal counts, composition, transfer); ``variant_summary`` (the counts per variant);
      and, for the headline variant (first position, first scale) ``headline_variant``,
      ``vectors`` (per source and primitive: norm, selected heads, indirect effects),
      ``vector_cosine``, ``conditions``, ``injection``; ``wall_s``.
    """
    if config.checkpoint:
        return checkpoint_and_evaluate(config, workdir)
    parallel.initialize_distributed()  # before any array exists; no-op without a launcher
    t0 = time.time()
    workdir = pathlib.Path(workdir)
    key = jax.random.key(config.seed)
    train_rows = _build_train_data(
        config
    )  # built once: the model's data and the evaluation's exclusion
    model, losses = train_model(config, workdir, train=train_rows)
    t_train = time.time() - t0
    if not parallel.is_primary():  # the analysis has nothing to split: process 0 only
        return {"train": {"final_loss": float(np.mean(losses[-20:])), "wall_s": t_train}}
    ev = _eval_data(config, train_rows)
    half = config.n_eval // 2
    with train_lib.stage(f"clustering trace-token activations (k = {config.n_clusters})"):
        clustering = cluster_analysis(model, ev, config, jax.random.fold_in(key, 2))

    fv_tok, fv_lab, fv_task = ev.tokens[:half], ev.labels[:half], ev.task[:half]
    sources = {"both": np.ones(half, bool), "tsp": fv_task == 0, "nav": fv_task == 1}
    prompts_ix = np.arange(half, min(config.n_eval, half + config.n_prompts))
    prompts = traces.AlgoTraceData(*(np.asarray(f)[prompts_ix] for f in ev))
    variants = {}
    for site in config.fv_positions:
        with train_lib.stage(f"primitive vectors from mean head outputs at '{site}' positions"):
            vectors = {
                src: build_vectors(model, fv_tok, fv_lab, config, rows, positions=site)
                for src, rows in sources.items()
            }
        for scale in config.inject_scales:
            conditions = _conditions(vectors, scale, config)
            with train_lib.stage(
                f"injecting {len(conditions)} vectors at scale {scale:g} into "
                f"{len(prompts_ix)} sampled traces"
            ):
                cond_res = injection_experiment(
                    model, prompts, conditions, config, jax.random.fold_in(key, 3)
                )
            variants[f"{site}@{scale:g}"] = {
                "conditions": cond_res, "injection": _summarise_injection(cond_res, config)
            }  # fmt: skip
        variants[f"{site}@{config.inject_scales[0]:g}"]["vectors"] = {
            src: {p: {"norm": v["norm"], "heads": v["heads"].tolist(), "ie": v["ie"].tolist()}
                  for p, v in vs.items()}
            for src, vs in vectors.items()
        }  # fmt: skip
        variants[f"{site}@{config.inject_scales[0]:g}"]["vector_cosine"] = np.round(
            _cosines([vectors["both"][p]["vector"] for p in PRIMS]), 4
        ).tolist()
    head = f"{config.fv_positions[0]}@{config.inject_scales[0]:g}"
    keys = ("diagonal_positive", "diagonal_row_max", "diagonal_beats_random", "transfer_positive")
    variant_summary = {
        name: {
            **{k: v["injection"][k] for k in keys},
            "composition_raises_both": sum(
                c["sum_raises_both"] for c in v["injection"]["composition"].values()
            ),
            "solved_none": v["conditions"]["none"]["solved"],
        }
        for name, v in variants.items()
    }

    results = {
        "train": {"final_loss": float(np.mean(losses[-20:])), "first_loss": float(losses[0]),
                  "wall_s": t_train},
        "clustering": clustering,
        "headline_variant": head,
        "vectors": variants[head]["vectors"],
        "vector_cosine": variants[head]["vector_cosine"],
        "conditions": variants[head]["conditions"],
        "injection": variants[head]["injection"],
        "variant_summary": variant_summary,
        "variants": {n: {k: v[k] for k in ("injection", "conditions")} for n, v in variants.items()},
        "wall_s": time.time() - t0,
    }  # fmt: skip
    write_summary(workdir / SUMMARY_FILE, results, config)
    plot_clustering(clustering, workdir / "algotrace_clusters.png")
    plot_injection(results["injection"], PRIMS, workdir / "algotrace_injection.png", title=head)
    train_lib.write_summary(workdir, headline(results), config=config)
    print_tables(results)
    return results


def checkpoint_and_evaluate(config: AlgoTraceConfig, workdir: str | pathlib.Path) -> dict[str, Any]:
    """``fidia-jax algotrace train --set checkpoint=PATH``: the method on a released model, with
    progress and its figures (:func:`.checkpoint.checkpoint_and_evaluate`)."""
    return checkpoint_lib.checkpoint_and_evaluate(config, workdir)


def print_checkpoint_tables(results: dict[str, Any]) -> None:
    """The console report of :func:`checkpoint_and_evaluate`."""
    cl = results["clustering"]
    train_lib.print_table(
        f"AlgoTrace on {results['checkpoint']}: {cl['n_points']} trace tokens clustered "
        f"(layer {cl['layer']} resid_post) vs the true primitives",
        ["partition", "purity", "NMI", "ARI"],
        [[PARTITIONS[n], cl[n]["purity"], cl[n]["nmi"], cl[n]["ari"]]
         for n in ("kmeans", "random", "token_identity")],
    )  # fmt: skip
    train_lib.print_table(
        "k-means purity / NMI per layer",
        ["layer", "purity", "NMI"],
        [[i, a["purity"], a["nmi"]] for i, a in enumerate(cl["per_layer"])],
    )
    inj = results["injection"]
    train_lib.print_table(
        f"Injection (layer {inj['layer']}, scale {inj['scale']:g}, {inj['n_prompts']} prompts, "
        "greedy): mean change of each primitive's line share [95% bootstrap CI]",
        ["injected vector", *PRIMS],
        [[name, *(f"{c['delta']:+.3f} [{c['ci95'][0]:+.3f}, {c['ci95'][1]:+.3f}]" for c in row)]
         for name, row in inj["table"].items()],
    )  # fmt: skip
    train_lib.print_table(
        "Own-rate change minus the random vector's change of the same rate (paired bootstrap)",
        ["primitive", "difference", "95% CI", "P(not above)"],
        [[p, f"{d['diff']:+.3f}", f"[{d['ci95'][0]:+.3f}, {d['ci95'][1]:+.3f}]",
          f"{d['p_not_above']:.3f}"] for p, d in inj["diagonal_vs_random"].items()],
    )  # fmt: skip
    print(
        "baseline line shares: "
        + ", ".join(f"{p} {r:.3f}" for p, r in zip(PRIMS, inj["baseline_rates"], strict=True))
        + f"; solved without injection {inj['solved']['none']:.3f}"
    )


def headline(results: dict[str, Any]) -> dict[str, Any]:
    """The headline numbers of :func:`train_and_evaluate`'s results (``summary.json``): final
    training loss, the agreement (purity, NMI, ARI) of each partition with the true primitives,
    and per variant the counts of the injection experiment."""
    cl = results["clustering"]
    return {
        "final_loss": results["train"]["final_loss"],
        "n_points": cl["n_points"],
        "cluster_layer": cl["layer"],
        "agreement": {name: cl[name] for name in PARTITIONS},
        "headline_variant": results["headline_variant"],
        "diagonal": results["injection"]["diagonal"],
        "variants": results["variant_summary"],
    }


def print_tables(results: dict[str, Any]) -> None:
    """The console report (labelled columns, nothing cut): agreement of the clusters with the
    true primitives, the injection table of the headline variant, composition, transfer and the
    counts of every variant."""
    cl = results["clustering"]
    train_lib.print_table(
        f"AlgoTrace: {cl['n_points']} trace tokens clustered (layer {cl['layer']} resid_post) "
        "vs the true primitives",
        ["partition", "purity", "NMI", "ARI"],
        [[PARTITIONS[n], cl[n]["purity"], cl[n]["nmi"], cl[n]["ari"]] for n in PARTITIONS],
    )
    inj = results["injection"]
    train_lib.print_table(
        f"Injection table ({results['headline_variant']}): change of each primitive's rate",
        ["injected vector", *PRIMS],
        [[f"{row}", *(f"{v:+.3f}" for v in vals)] for row, vals in inj["table"].items()],
    )
    train_lib.print_table(
        "Composition: change of a's / b's rate",
        ["pair a+b", "a alone", "b alone", "a+b injected", "raises both"],
        [
            [pair, *(f"{c['delta_a'][x]:+.3f} / {c['delta_b'][x]:+.3f}"
                     for x in (*pair.split("+"), pair)), str(c["sum_raises_both"])]
            for pair, c in inj["composition"].items()
        ],
    )  # fmt: skip
    train_lib.print_table(
        "Transfer: change of the primitive's rate on the target task",
        ["primitive", "tsp->nav", "nav->nav", "nav->tsp", "tsp->tsp"],
        [[p, *(f"{c[k]:+.3f}" for k in ("tsp->nav", "nav->nav", "nav->tsp", "tsp->tsp"))]
         for p, c in inj["transfer"].items()],
    )  # fmt: skip
    train_lib.print_table(
        f"Variants (positions of the mean head outputs @ injection scale; headline "
        f"{results['headline_variant']}): diagonal entries > 0, = their row's max, > the random "
        "vector's; composed pairs raising both; transfers > 0; paths solved without injection",
        ["variant", "diag > 0", "diag = row max", "diag > random", "pairs: both up",
         "transfer > 0", "solved tsp / nav"],
        [[name, f"{v['diagonal_positive']}/5", f"{v['diagonal_row_max']}/5",
          f"{v['diagonal_beats_random']}/5", str(v["composition_raises_both"]),
          f"{v['transfer_positive']}/10",
          f"{v['solved_none']['tsp']:.3f} / {v['solved_none']['nav']:.3f}"]
         for name, v in results["variant_summary"].items()],
    )  # fmt: skip


def _conditions(vectors: dict, scale: float, config: AlgoTraceConfig) -> dict[str, np.ndarray]:
    """The injected vectors: none, each primitive, random (mean norm), pairs, one-task vectors."""
    conditions = {"none": np.zeros(config.dim, np.float32)}
    for prim in PRIMS:
        conditions[prim] = scale * vectors["both"][prim]["vector"]
    mean_norm = float(np.mean([vectors["both"][p]["norm"] for p in PRIMS]))
    rnd = np.random.default_rng(config.seed + 7).standard_normal(config.dim)
    conditions["random"] = (scale * mean_norm * rnd / np.linalg.norm(rnd)).astype(np.float32)
    for pair in config.compose_pairs:
        a, b = pair.split("+")
        conditions[pair] = scale * (vectors["both"][a]["vector"] + vectors["both"][b]["vector"])
    for src in ("tsp", "nav"):
        for prim in PRIMS:
            conditions[f"{prim}@{src}"] = scale * vectors[src][prim]["vector"]
    return conditions


def _cosines(vecs: list[np.ndarray]) -> np.ndarray:
    m = np.stack(vecs).astype(np.float64)
    m = m / np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-12)
    return m @ m.T
