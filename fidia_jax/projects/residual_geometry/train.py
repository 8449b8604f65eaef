"""Train the tiny vision-language model, measure its update geometry, intervene on visual tokens.

1. Split the scikit-learn digit *images* (test questions never show a training image), draw
   questions (:func:`.questions.make_digit_questions`), train a :class:`~fidia_jax.models.LlamaVL`
   with the answer-only loss (:func:`fidia_jax.train.fit_llama`).
2. On ``n_analysis`` test sequences capture, per layer, the residual before attention, the
   attention update, the residual before the FFN and the FFN update (plus attention weights), for
   the plain model and under Noise Δ / Noise QKV / SAP on the 16 visual tokens of *every* layer.
   RID (``|ΔS| + ΔD``) is averaged over sequences (``X``: the sequence's ``(16 + 6, C)``
   residual), MixIG pools the tokens of all sequences. By default ΔD and TME are the authors'
   (``config.delta_d_form="authors"``: the new residual against the column and row subspaces
   of the layer input, with their dtype rank cutoff; TME the last token's sharpened cosine
   entropy of each update, the FFN's included); our forms are reported beside them
   (``delta_d_page``, ``rid_page``, ``tme_attention``). See :mod:`.geometry`.
3. Accuracy (argmax of the answer logits over the whole vocabulary) on every test question, per
   kind and for visual vs text-only questions, plain and under each intervention (all layers at
   once, and, with ``per_layer``, one layer at a time).
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

from fidia_jax import data, models, parallel, train
from fidia_jax.config import write_summary
from fidia_jax.projects.residual_geometry import questions
from fidia_jax.projects.residual_geometry.checkpoint import checkpoint_geometry, text_sequences
from fidia_jax.projects.residual_geometry.configs import INTERVENTIONS, ResidualGeometryConfig
from fidia_jax.projects.residual_geometry.geometry import (
    cosine_mixing_entropy,
    mixing_information_gain,
    note_residual_information_dynamics,
    similarity_mixing_gain,
    spectral_change,
    subspace_innovation,
    token_mixing_entropy,
)
from fidia_jax.projects.residual_geometry.plots import ROW_NAMES, accuracy_rows, plot_geometry
from fidia_jax.train import load_checked

__all__ = [
    "checkpoint_and_evaluate",
    "N_VISUAL",
    "build_model",
    "delta_d_pair",
    "format_table",
    "headline",
    "intervention_hooks",
    "print_tables",
    "train_and_evaluate",
    "update_geometry",
]

#: Visual tokens per image (8×8 digits, 2×2 patches).
N_VISUAL = 16
SUMMARY_FILE = "residual_geometry.json"
_ANSWER_POS = N_VISUAL + 4  # logits at absolute position 20 predict the answer token (text index 5)


def build_model(config: ResidualGeometryConfig) -> models.LlamaVL:
    """The untrained :class:`~fidia_jax.models.LlamaVL` of ``config`` (vocabulary 32, 22 positions)."""
    llama = models.LlamaConfig(
        vocab_size=32,
        dim=config.dim,
        n_layers=config.n_layers,
        n_heads=config.n_heads,
        n_kv_heads=config.n_kv_heads,
        hidden_dim=config.hidden_dim,
        max_seq_len=32,
    )
    return models.LlamaVL(llama, patch_dim=4, rngs=nnx.Rngs(config.seed))


def intervention_hooks(name: str, layers: tuple[int, ...], seq_len: int, key: jax.Array) -> tuple:
    """The hooks of one intervention on the visual positions ``0 .. 15`` of ``layers``.

    Args:
      name: a key of :data:`INTERVENTIONS`: ``noise_delta`` (:class:`~fidia_jax.models.ReplaceUpdate`
        of the attention update), ``noise_qkv`` (:class:`~fidia_jax.models.ReplaceQKV`, all three),
        ``sap`` (:class:`~fidia_jax.models.PatchAttention`: every query's weight on each visual key
        set to ``1 / n_t``, ``n_t`` the keys it may read, then the row renormalised).
      layers: block indices.
      seq_len: total positions ``16 + T`` (SAP's per-query value).
      key: noise key (layer ``l`` uses ``fold_in(key, l)``).

    Raises:
      ValueError: an unknown name.
    """
    vis = jnp.arange(N_VISUAL, dtype=jnp.int32)
    if name == "noise_delta":
        return tuple(
            models.ReplaceUpdate(l, jax.random.fold_in(key, l), vis, "attn") for l in layers
        )
    if name == "noise_qkv":
        return tuple(models.ReplaceQKV(l, jax.random.fold_in(key, l), vis, "qkv") for l in layers)
    if name == "sap":
        value = (1.0 / jnp.arange(1, seq_len + 1, dtype=jnp.float32))[None, None, :, None]
        return tuple(models.PatchAttention(l, vis, value, renormalize=True) for l in layers)
    raise ValueError(
        f"intervention_hooks: unknown intervention {name!r}; known: {tuple(INTERVENTIONS)}"
    )


_CAPTURE = ("resid_pre", "attn_out", "resid_mid", "ffn_out", "attn_weights")


@nnx.jit
def _inspect(vl, patches, tokens, hooks):
    logits, cap = vl.inspect(patches, tokens, capture=_CAPTURE, hooks=hooks)
    return jnp.argmax(logits[:, _ANSWER_POS], axis=-1), cap


@nnx.jit
def _predict(vl, patches, tokens, hooks):
    return jnp.argmax(vl(patches, tokens, hooks=hooks)[:, _ANSWER_POS], axis=-1)


def _accuracy(pred: np.ndarray, qs: questions.DigitQuestions) -> dict[str, float]:
    hit = np.asarray(pred) == qs.answer
    out = {
        "all": float(hit.mean()),
        "visual": float(hit[qs.visual].mean()),
        "text_only": float(hit[~qs.visual].mean()),
    }
    for i, kind in enumerate(questions.DIGIT_QA_KINDS):
        out[kind] = float(hit[qs.kind == i].mean())
    return out


_MODULE_PAIRS = {"attn": ("resid_pre", "attn_out"), "ffn": ("resid_mid", "ffn_out")}


def delta_d_pair(cap: dict[str, Any], layer: int, module: str, form: str) -> tuple:
    """The ``(X, ΔX)`` whose ΔD is reported for one layer's ``attn`` or ``ffn`` update.

    ``X`` keeps its captured dtype (it sets the default rank cutoff); ``ΔX`` is float64. For
    ``form="authors"`` the FFN's new residual ``X_ffn = resid_mid + ffn_out`` is measured against
    the *layer input* ``resid_pre`` (as the authors' ``novelty_from_hiddens_96`` does), so
    ``ΔX = X_ffn − resid_pre``; for ``form="page"`` (ours) against ``resid_mid``, ``ΔX =
    ffn_out``. Attention: ``(resid_pre, attn_out)`` in both forms.
    """
    x_name, dx_name = _MODULE_PAIRS[module]
    if form == "authors" and module == "ffn":
        x_in = np.asarray(cap["resid_pre"][layer])
        x_ffn = np.asarray(cap["resid_mid"][layer], np.float64) + np.asarray(
            cap["ffn_out"][layer], np.float64
        )
        return x_in, x_ffn - np.asarray(x_in, np.float64)
    return np.asarray(cap[x_name][layer]), np.asarray(cap[dx_name][layer], np.float64)


def update_geometry(
    cap: dict[str, Any],
    layer: int,
    module: str,
    *,
    rtol: float | None = None,
    rank: int | None = None,
    form: str = "authors",
) -> dict[str, float]:
    """RID (mean over sequences), MixIG (pooled) and TME of one layer's ``attn`` or ``ffn`` update.

    Args:
      cap: captured ``resid_pre`` / ``attn_out`` / ``resid_mid`` / ``ffn_out`` ``(L, B, T, C)`` and
        ``attn_weights`` ``(L, B, H, T, T)`` (:meth:`fidia_jax.models.LlamaVL.inspect`), in their
        captured dtype (it sets the default numerical-rank cutoff).
      layer: block index.
      module: ``"attn"`` (``X = resid_pre``, ``ΔX = attn_out``) or ``"ffn"`` (``resid_mid``,
        ``ffn_out``); MixIG uses the layer's attention weights as the mixing operator either way.
      rtol, rank: numerical rank of the residual subspace (default: the authors' dtype cutoff,
        :func:`.geometry.numerical_rank`).
      form: ΔD's form, ``"authors"`` (default) or ``"page"`` (:func:`.geometry.subspace_innovation`;
        the pair measured is :func:`delta_d_pair`'s).

    Returns:
      ``{"rid", "delta_s", "delta_d", "mixig", "r2_self", "r2_mix", "tme"}``: RID = ``|ΔS| + ΔD``
      per sequence (mean; each sequence's in ``"rid_per_sequence"``), ΔS of ``(X, ΔX)``, ΔD in ``form``, TME the authors' form
      (:func:`.geometry.cosine_mixing_entropy` of each sequence's update ``ΔX``, mean, both
      modules); the alternatives ``{"delta_d_page", "rid_page"}`` (ΔD in our form, same rank
      rule), ``"tme_attention"`` (attention only: :func:`.geometry.token_mixing_entropy` of the
      attention weights) and the third-party note's forms
      ``{"rid_note", "delta_s_note", "delta_d_note", "mixig_note"}``
      (:func:`.geometry.note_residual_information_dynamics` and
      :func:`.geometry.similarity_mixing_gain`, mean over sequences).

    Raises:
      ValueError: an unknown ``module`` or ``form``; what the measures raise.
    """
    if module not in _MODULE_PAIRS:
        raise ValueError(f"update_geometry: module must be 'attn' or 'ffn', got {module!r}")
    x_name, dx_name = _MODULE_PAIRS[module]
    x = np.asarray(cap[x_name][layer])  # captured dtype: the rank cutoff's eps
    dx = np.asarray(cap[dx_name][layer], np.float64)
    w = np.asarray(cap["attn_weights"][layer], np.float64)
    x_dd, dx_dd = delta_d_pair(cap, layer, module, form)
    n = x.shape[0]
    kw = {"rank": rank, "rtol": rtol}
    ds = np.asarray([spectral_change(x[b], dx[b]) for b in range(n)])
    dd = np.asarray([subspace_innovation(x_dd[b], dx_dd[b], form=form, **kw) for b in range(n)])
    if form == "page":
        dd_page = dd
    else:
        dd_page = np.asarray(
            [subspace_innovation(x[b], dx[b], form="page", **kw) for b in range(n)]
        )
    out = {
        "rid": float(np.mean(np.abs(ds) + dd)),
        "delta_s": float(np.mean(ds)),
        "delta_d": float(np.mean(dd)),
        "delta_d_page": float(np.mean(dd_page)),
        "rid_page": float(np.mean(np.abs(ds) + dd_page)),
        "rid_per_sequence": (np.abs(ds) + dd).tolist(),  # paired attention-vs-FFN tests
    }
    out.update(mixing_information_gain(np.asarray(x, np.float64), dx, w, seed=layer))
    out["tme"] = float(np.mean([cosine_mixing_entropy(dx[b]) for b in range(n)]))
    if module == "attn":
        out["tme_attention"] = token_mixing_entropy(w)
    # the third-party note's forms, same rank rule, mean over sequences (the tables' "note" rows)
    notes = [note_residual_information_dynamics(x[b], dx[b], **kw) for b in range(n)]
    for k in ("rid", "delta_s", "delta_d"):
        out[f"{k}_note"] = float(np.mean([r[k] for r in notes]))
    out["mixig_note"] = float(np.mean([similarity_mixing_gain(x[b], dx[b]) for b in range(n)]))
    return out


def _rank_sensitivity(cap, config: ResidualGeometryConfig, rows: dict[str, tuple[dict, str]]):
    """ΔD (in ``config.delta_d_form``) of every row and layer under each rank rule of the grids."""
    n_tokens, width = np.asarray(cap["resid_pre"]).shape[2:]
    rules = [("rtol", r) for r in config.rtol_grid] + [
        ("rank", k) for k in config.rank_grid if k <= min(n_tokens, width)
    ]
    out = {}
    for kind, value in rules:
        label = f"{kind}={value:g}"
        out[label] = {}
        for row, (c, module) in rows.items():
            per_layer = []
            for layer in range(config.n_layers):
                x, dx = delta_d_pair(c, layer, module, config.delta_d_form)
                kw = (
                    {"rank": int(value), "rtol": None} if kind == "rank" else {"rtol": float(value)}
                )
                dd = [
                    subspace_innovation(x[b], dx[b], form=config.delta_d_form, **kw)
                    for b in range(x.shape[0])
                ]
                per_layer.append(float(np.mean(dd)))
            out[label][row] = per_layer
    return out


def _train_mesh(config: ResidualGeometryConfig) -> jax.sharding.Mesh | None:
    """The ``data`` mesh of the training steps: the most devices ``<= config.num_devices``
    (``0``: all) that divide ``config.batch_size``; ``None`` on one device in one process."""
    return parallel.parallel_mesh(config.batch_size, num_devices=config.num_devices)


def fit_model(
    vl: models.LlamaVL,
    train_q: questions.DigitQuestions,
    config: ResidualGeometryConfig,
    workdir: str | pathlib.Path | None = None,
) -> tuple[models.LlamaVL, np.ndarray]:
    """Trains ``vl`` in place on ``train_q`` with the answer-only loss: AdamW (weight decay
    0.01) on a warmup-cosine schedule to 5 % of ``config.learning_rate``, ``config.steps``
    minibatches of ``config.batch_size``, data-parallel over :func:`_train_mesh`
    (:func:`fidia_jax.train.fit_llama`; run ``residual_geometry_vl`` in ``workdir``, which a
    rerun resumes). Returns ``(vl, losses)``, ``losses`` ``(steps,)`` float32."""
    schedule = optax.warmup_cosine_decay_schedule(
        0.0,
        config.learning_rate,
        max(config.warmup_steps, 1),
        config.steps,
        config.learning_rate * 0.05,
    )
    return train.fit_llama(
        vl,
        train_q.tokens,
        weights=train_q.weights,
        patches=train_q.patches,
        steps=config.steps,
        batch_size=config.batch_size,
        tx=optax.adamw(schedule, weight_decay=0.01),
        key=jax.random.key(config.seed + 3),
        workdir=workdir,
        run="residual_geometry_vl",
        mesh=_train_mesh(config),
    )


def train_and_evaluate(
    config: ResidualGeometryConfig, workdir: str | pathlib.Path
) -> dict[str, Any]:
    """Runs the experiment at ``config``'s scale with progress; prints the tables and writes into
    ``workdir``: ``residual_geometry.json`` (results and config), ``summary.json``
    (:func:`headline`), ``residual_geometry.png`` (RID, MixIG, ΔS, ΔD per layer of every
    update), ``accuracy.png`` (visual vs text-only accuracy, plain and under each intervention)
    and the training run's files (``metrics.jsonl``, ``curves.png``, checkpoints; run
    ``residual_geometry_vl``, a rerun resumes).

    Returns:
      JSON-ready results: ``train`` (losses, wall time), ``accuracy`` (``plain`` and each
      intervention: ``all_layers`` and ``layer_<l>``; each ``{all, visual, text_only, <kind>}``),
      ``geometry`` (row -> per-layer lists of ``rid``, ``delta_s``, ``delta_d``, ``mixig``,
      ``r2_self``, ``r2_mix``, ``tme``), ``rank_sensitivity`` (rule -> row -> per-layer ΔD),
      ``ordering`` (whether the paper's attention-vs-FFN ordering holds in every layer).
    """
    if config.checkpoint:
        return checkpoint_and_evaluate(config, workdir)
    t0 = time.time()
    workdir = pathlib.Path(workdir)
    with train.stage(
        f"residual geometry: the digits, {config.n_train} training and {config.n_test} test "
        "questions"
    ):
        images, labels = data.load_digit_images()
        perm = np.random.default_rng(config.seed).permutation(len(images))
        n_test_img = int(round(config.test_images * len(images)))
        test_idx, train_idx = perm[:n_test_img], perm[n_test_img:]
        train_q = questions.make_digit_questions(
            images[train_idx], labels[train_idx], config.n_train, seed=config.seed + 1
        )
        test_q = questions.make_digit_questions(
            images[test_idx], labels[test_idx], config.n_test, seed=config.seed + 2
        )
        vl = build_model(config)
    t_train = time.time()
    _, losses = fit_model(vl, train_q, config, workdir)
    train_s = time.time() - t_train

    patches, tokens = jnp.asarray(test_q.patches), jnp.asarray(test_q.tokens)
    seq_len = N_VISUAL + tokens.shape[1]
    n_an = config.n_analysis
    all_layers = tuple(range(config.n_layers))
    noise_key = jax.random.key(config.seed + 4)

    def run(hooks):  # one compiled pass gives the accuracy (all questions) and the captures
        pred, cap = _inspect(vl, patches, tokens, hooks)
        return _accuracy(pred, test_q), {k: np.asarray(v)[:, :n_an] for k, v in cap.items()}

    with train.stage(
        f"capturing the residual stream of {len(test_q.answer)} test questions, plain and under "
        f"{len(config.interventions)} intervention(s)"
    ):
        acc_plain, cap_plain = run(())
        accuracy = {"plain": acc_plain}
        caps = {"plain": cap_plain}
        for name in config.interventions:
            hooks = intervention_hooks(name, all_layers, seq_len, noise_key)
            acc_all, caps[name] = run(hooks)
            acc = {"all_layers": acc_all}
            if config.per_layer:
                for layer in all_layers:
                    h1 = intervention_hooks(name, (layer,), seq_len, noise_key)
                    acc[f"layer_{layer}"] = _accuracy(_predict(vl, patches, tokens, h1), test_q)
            accuracy[name] = acc

    # The paper's table: attention and FFN of the plain model; the attention update under noise.
    rows: dict[str, tuple[dict, str]] = {
        "attention": (caps["plain"], "attn"),
        "ffn": (caps["plain"], "ffn"),
    }
    for name in config.interventions:
        rows[name] = (caps[name], "attn")
    geometry: dict[str, dict[str, list[float]]] = {}
    with train.stage(f"RID, MixIG and TME of {len(rows)} updates × {config.n_layers} layers"):
        for row, (c, module) in rows.items():
            per_layer = [
                update_geometry(c, layer, module, rtol=config.rtol, form=config.delta_d_form)
                for layer in all_layers
            ]
            geometry[row] = {k: [p[k] for p in per_layer] for k in per_layer[0]}
        rank_sensitivity = _rank_sensitivity(caps["plain"], config, rows)

    att, ffn = geometry["attention"], geometry["ffn"]
    ordering = {
        "attention_rid_below_ffn": [a < f for a, f in zip(att["rid"], ffn["rid"], strict=True)],
        "attention_mixig_above_ffn": [
            a > f for a, f in zip(att["mixig"], ffn["mixig"], strict=True)
        ],
    }
    ordering["paper_ordering_every_layer"] = bool(
        all(ordering["attention_rid_below_ffn"]) and all(ordering["attention_mixig_above_ffn"])
    )
    results = {
        "train": {
            "final_loss": float(np.mean(losses[-max(1, len(losses) // 20) :])),
            "first_loss": float(losses[0]),
            "wall_s": train_s,
            "steps": config.steps,
        },
        "accuracy": accuracy,
        "geometry": geometry,
        "rank_sensitivity": rank_sensitivity,
        "ordering": ordering,
        "n_test": {"all": int(len(test_q.answer)), "visual": int(test_q.visual.sum())},
        "wall_s": time.time() - t0,
    }
    write_summary(workdir / SUMMARY_FILE, results, config)
    plot_geometry(geometry, workdir / "residual_geometry.png")
    train.plot_bars(
        accuracy_rows(accuracy), workdir / "accuracy.png", label="model",
        values=("visual", "text_only", "all"), higher_is_better={"visual": True,
        "text_only": True, "all": True},
        title="Test accuracy: interventions on the 16 visual tokens",
    )  # fmt: skip
    train.write_summary(workdir, headline(results), config=config)
    print_tables(results)
    return results


def checkpoint_and_evaluate(
    config: ResidualGeometryConfig, workdir: str | pathlib.Path
) -> dict[str, Any]:
    """``fidia-jax residual_geometry train --set checkpoint=PATH``: the text-only check.

    Stages, each announced before it starts, with a progress bar (ETA) over the loops: the
    tokenizer; the sequences' lengths against the smaller of ``checkpoint_max_seq_len`` and the
    checkpoint's trained context (:func:`fidia_jax.models.check_prompt_lengths`, before any
    weight is read; ``checkpoint_tokens > checkpoint_max_seq_len`` is already a ConfigError of
    the config); the weights; the captures (one bar over the batches); the measures (one bar
    over the layers). Then :func:`.checkpoint.checkpoint_geometry`'s table is printed and
    ``residual_geometry_checkpoint.json`` (results and config), ``summary.json`` and
    ``residual_geometry.png`` (the synthetic run's figure: RID, MixIG, ΔS, ΔD per layer of the
    attention and FFN updates and of the noise control) are written into ``workdir``. The
    synthetic run's ``accuracy.png`` (interventions on visual tokens) does not apply to a text
    model and is not written.

    Raises:
      CheckpointError: a missing path (one message naming it) or what the loaders raise.
      DataError: a sequence longer than the checkpoint's context (before the weights load).
      ConfigError: an unsupported family.
    """
    t0 = time.time()
    workdir = pathlib.Path(workdir)

    def texts(tok):  # the rows the model reads, as text (BOS added back by the check)
        seqs = text_sequences(
            tok, config.checkpoint_sequences, config.checkpoint_tokens, seed=config.seed
        )
        start = 1 if tok.bos_id is not None else 0
        return [tok.decode([int(i) for i in row[start:]]) for row in seqs]

    model, tok = load_checked(
        config.checkpoint, read=texts, max_seq_len=config.checkpoint_max_seq_len,
        where="residual_geometry checkpoint", what="residual geometry", labels=("sequence", ""),
        hint="lower checkpoint_tokens",
    )  # fmt: skip
    load_s = time.time() - t0
    res = checkpoint_geometry(model, tok, config)
    results = {"checkpoint": str(config.checkpoint), "load_s": load_s, **res,
               "wall_s": time.time() - t0}  # fmt: skip
    g = res["geometry"]
    figure = plot_geometry(
        g, workdir / "residual_geometry.png", layers=res["layers"],
        title=f"Residual-update geometry per layer of {pathlib.Path(results['checkpoint']).name} "
        f"(text only: {res['n_sequences']} sequences x {res['n_tokens']} tokens, BOS left out)",
    )  # fmt: skip
    results["figure"] = str(figure)
    write_summary(workdir / "residual_geometry_checkpoint.json", results, config)
    train.write_summary(
        workdir,
        {"checkpoint": results["checkpoint"],
         "mean": {row: {k: float(np.mean(v[k])) for k in ("rid", "rid_pooled", "mixig")}
                  for row, v in g.items()},
         "ordering": {k: int(sum(v)) for k, v in res["ordering"].items()},
         "n_layers": len(g["attention"]["rid"]), "wall_s": results["wall_s"]},
        config=config,
    )  # fmt: skip
    rows = []
    for i, layer in enumerate(res["layers"]):
        for name in ("attention", "ffn", "noise"):
            r = {k: v[i] for k, v in g[name].items()}
            wx = res["wilcoxon"][i]
            rows.append([
                layer, name, f"{r['rid']:.3f}", f"{r['delta_s']:+.3f}", f"{r['delta_d']:.3f}",
                f"{r['rid_pooled']:.3f}", f"{r['mixig']:.3f}",
                f"{r['r2_self']:.2f} -> {r['r2_mix']:.2f}",
                f"{r['tme']:.3f}" if "tme" in r else "-",
                f"{wx['median_difference']:+.3f} (p {wx['p']:.2g})" if name == "attention" else "",
            ])  # fmt: skip
    train.print_table(
        f"Residual geometry on {results['checkpoint']} (text only; {res['n_sequences']} "
        f"sequences x {res['n_tokens']} tokens, BOS left out)",
        ["layer", "update", "RID", "ΔS", "ΔD", "RID pooled", "MixIG", "R² self -> +mix",
         "TME", "attn - FFN RID (Wilcoxon)"],
        rows,
    )  # fmt: skip
    print(
        "layers (of {n}): attention RID < FFN RID {a} ({b} with p < 0.05); attention MixIG > "
        "FFN {c}; > noise {d}; per-sequence RIDs that raised (left out) {f}".format(
            n=len(g["attention"]["rid"]),
            a=sum(res["ordering"]["attention_rid_below_ffn"]),
            b=sum(res["ordering"]["attention_rid_below_ffn_p05"]),
            c=sum(res["ordering"]["attention_mixig_above_ffn"]),
            d=sum(res["ordering"]["attention_mixig_above_noise"]),
            f=len(res["rid_failures"]),
        )
    )
    print(f"figure: {figure} (no accuracy.png: no visual tokens to intervene on in a text model)")
    return results


def headline(results: dict[str, Any]) -> dict[str, Any]:
    """The headline numbers of :func:`train_and_evaluate`'s results (``summary.json``): final
    training loss; per update (attention, FFN, each intervention) RID and MixIG per layer and
    their means; accuracy (all, visual, text-only) plain and under each intervention; whether
    the paper's ordering holds in every layer."""
    return {
        "final_loss": results["train"]["final_loss"],
        "geometry": {
            row: {
                "rid": g["rid"], "mixig": g["mixig"],
                "rid_mean": float(np.mean(g["rid"])), "mixig_mean": float(np.mean(g["mixig"])),
            }
            for row, g in results["geometry"].items()
        },
        "accuracy": {
            r["model"]: {k: r[k] for k in ("all", "visual", "text_only")}
            for r in accuracy_rows(results["accuracy"])
        },
        "paper_ordering_every_layer": results["ordering"]["paper_ordering_every_layer"],
    }  # fmt: skip


def print_tables(results: dict[str, Any]) -> None:
    """The console report (labelled columns, nothing cut): the update geometry per row (mean
    over layers, then per layer), the accuracy table, and the paper's ordering."""
    geo = results["geometry"]
    n_layers = len(geo["attention"]["rid"])

    def mean(v):
        return float(np.mean(v))

    train.print_table(
        "Update geometry, mean over layers (RID = |ΔS| + ΔD; MixIG in nats; R² of the update "
        "from the token alone → with the mixed context)",
        ["update", "RID", "ΔS", "ΔD", "MixIG", "R² self → self+mix", "TME"],
        [
            [ROW_NAMES.get(row, row), mean(g["rid"]), mean(g["delta_s"]), mean(g["delta_d"]),
             mean(g["mixig"]), f"{mean(g['r2_self']):.2f} → {mean(g['r2_mix']):.2f}",
             mean(g["tme"]) if "tme" in g else "— (token-wise)"]
            for row, g in geo.items()
        ],
    )  # fmt: skip
    train.print_table(
        "RID and MixIG per layer",
        ["update", "measure", *(f"layer {i}" for i in range(n_layers))],
        [[ROW_NAMES.get(row, row), name, *g[key]]
         for key, name in (("rid", "RID"), ("mixig", "MixIG")) for row, g in geo.items()],
    )  # fmt: skip
    kinds = ("all", "visual", "text_only") + tuple(questions.DIGIT_QA_KINDS)
    train.print_table(
        "Test accuracy (interventions on the 16 visual tokens)",
        ["model", *kinds],
        [[r["model"], *(r[k] for k in kinds)] for r in accuracy_rows(results["accuracy"])],
    )
    order = results["ordering"]
    train.print_table(
        "The paper's ordering: attention reconfigures (lower RID, higher MixIG than the FFN); "
        f"holds in every layer: {order['paper_ordering_every_layer']}",
        ["layer", "attention RID < FFN RID", "attention MixIG > FFN MixIG"],
        [
            [f"layer {i}", str(a), str(b)]
            for i, (a, b) in enumerate(
                zip(order["attention_rid_below_ffn"], order["attention_mixig_above_ffn"],
                    strict=True)
            )
        ],
    )  # fmt: skip


def format_table(results: dict[str, Any]) -> str:
    """Two markdown tables: geometry (mean over layers, and per layer) and accuracy."""
    geo = results["geometry"]
    n_layers = len(geo["attention"]["rid"])
    lines = [
        "Update geometry (mean over layers; per layer in brackets). RID = |ΔS| + ΔD; MixIG in nats",
        "| update | RID | ΔS | ΔD | MixIG | R² self → self+mix | TME |",
        "|---|---|---|---|---|---|---|",
    ]
    names = {"attention": "attention", "ffn": "FFN", **INTERVENTIONS}
    for row, g in geo.items():

        def cell(k, g=g):
            v = g[k]
            return f"{np.mean(v):.3f} [" + ", ".join(f"{x:.3f}" for x in v) + "]"

        tme = cell("tme") if "tme" in g else "— (token-wise)"
        r2 = f"{np.mean(g['r2_self']):.2f} → {np.mean(g['r2_mix']):.2f}"
        lines.append(
            f"| {names[row]} | {cell('rid')} | {cell('delta_s')} | {cell('delta_d')} | "
            f"{cell('mixig')} | {r2} | {tme} |"
        )
    acc = results["accuracy"]
    kinds = ("visual", "text_only") + tuple(questions.DIGIT_QA_KINDS)
    lines += [
        "",
        "Test accuracy (interventions on the 16 visual tokens)",
        "| model | " + " | ".join(kinds) + " |",
        "|---" * (len(kinds) + 1) + "|",
    ]
    lines.append("| plain | " + " | ".join(f"{acc['plain'][k]:.3f}" for k in kinds) + " |")
    for name, by_layers in acc.items():
        if name == "plain":
            continue
        for where, a in by_layers.items():
            label = "all layers" if where == "all_layers" else where.replace("_", " ")
            lines.append(
                f"| {names[name]}, {label} | " + " | ".join(f"{a[k]:.3f}" for k in kinds) + " |"
            )
    lines.append(
        f"\nPaper's ordering (attention RID < FFN RID and attention MixIG > FFN MixIG) in every one "
        f"of {n_layers} layers: {results['ordering']['paper_ordering_every_layer']}"
    )
    return "\n".join(lines)
