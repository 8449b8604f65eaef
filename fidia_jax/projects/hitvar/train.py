"""The HIT-VAR experiment: x4 SR of degraded crops of the bundled photos, scored at every scale
x1..x4 on crops of held-out photos, with paired tests over the crops.

Phases (all Adam, data-parallel over the visible devices: each batch's crops are split over a
:func:`fidia_jax.parallel.data_mesh`; every gradient step is
:func:`fidia_jax.train.make_train_step`, every phase a :func:`fidia_jax.train.fit` with its own
run name: progress, ``metrics.jsonl``, checkpoints under ``checkpoints/<phase>`` and resume of
an interrupted run; the evaluation runs on process 0 only):

1. Tokenizers: the HIT tokenizer (every token prefix decodes to its scale; loss = mean over
   scales of the pixel MSE to the HR image resized to that scale) and the plain RQ tokenizer
   (same encoder and quantiser, loss only on the full sequence at x4). The decoders read the
   tokens only. Codebooks learn by EMA; dead codes restart from the batch's residual vectors.
2. Next-scale transformers on each tokenizer's tokens of the training crops (cross-entropy),
   conditioned as in VARSR: the LR crop's conv embedding as start tokens and the per-scale LR
   term (the tokens of the bicubic-upsampled LR crop).
3. **Token check** (before any DPO): on the held-out crops, decoding the true HR tokens vs
   decoding the generated ones vs bicubic, per-crop LPIPS with paired Wilcoxon tests
   (:func:`token_check`). If the oracle does not beat both, neither the VAR nor DPO can help.
4. HIT-VAR's preference phase (``dpo_steps > 0``), the paper's pairs: for every training crop
   the HR tokens are preferred and the LR tokens rejected, both scored by the transformer under
   the same LR condition (:func:`lr_hr_pairs`); loss = DPO (reference: the frozen CE model) +
   ``dpo_ce_weight`` x CE on the true tokens. Ablation (``dpo_lpips_ablation``): the same phase
   on pairs of VAR samples ranked by LPIPS to the HR crop (an external reward).
5. The conv SR baseline (MSE at x4) with the width that matches HIT-VAR's inference parameter
   count (decoder + codebook + transformer, and the encoder when the LR term is on).

Evaluation on ``n_eval`` crops of the held-out photos: bicubic, conv SR, plain RQ+VAR, HIT-VAR
before DPO, after the LPIPS-pair ablation and after the (LR, HR) DPO, and two diagnostics: the
HIT tokenizer decoding the LR crop's tokens and decoding the HR crop's true tokens (the
oracle). Scale ``m`` is compared with the HR crop resized (bicubic) to ``m * lr_size``. PSNR /
SSIM per image (scikit-image), LPIPS-AlexNet per crop (scales with at least 31 pixels); a goal
is met only when the paired Wilcoxon signed-rank test over the crops gives ``p < 0.05``
(:func:`paired_test`).
"""

from __future__ import annotations

import pathlib
import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from fidia_jax import data, layers, metrics, models, parallel, train
from fidia_jax.config import write_summary
from fidia_jax.errors import ConfigError
from fidia_jax.projects.hitvar._common import (
    _batch_order,
    _fit,
    _lpips_per_crop,
    _lr_scale_batch,
    _schedule,
    _targets,
    _tokenize,
    _upsampled,
    paired_test,
)
from fidia_jax.projects.hitvar._dpo import _dpo_finetune, _lpips_ranked_pairs, lr_hr_pairs
from fidia_jax.projects.hitvar._token_oracle import (
    _decoded_tokens_of,
    _var_outputs,
    format_token_check,
    token_check,
)
from fidia_jax.projects.hitvar.configs import HitVarConfig
from fidia_jax.projects.hitvar.data import Degradation, make_sr_pairs
from fidia_jax.projects.hitvar.losses import (
    hitvar_tokenizer_loss,
    next_scale_cross_entropy,
)
from fidia_jax.projects.hitvar.model import (
    ConvSR,
    HitVarTokenizer,
    NextScaleTransformer,
    bicubic_resize,
    conv_sr_width_for_params,
    hitvar_draw,
)
from fidia_jax.projects.hitvar.report import (
    METHODS,
    PNG_FILE,
    SUMMARY_FILE,
    format_table,
    write_report,
    write_samples_png,
)

__all__ = [
    "METHODS",
    "format_table",
    "format_token_check",
    "lr_hr_pairs",
    "make_data",
    "paired_test",
    "score",
    "token_check",
    "train_and_evaluate",
    "train_models",
]


def make_data(config: HitVarConfig) -> dict[str, np.ndarray]:
    """Training crops of the non-held-out photos and evaluation crops of the held-out ones.

    Returns:
      ``{"hr_train", "lr_train", "hr_eval", "lr_eval"}`` float32 arrays ``(n, side, side, 3)``.

    Raises:
      ConfigError: a held-out name that is not a bundled photo, or nothing left to train on.
    """
    photos = data.bundled_photos()
    unknown = [n for n in config.held_out if n not in photos]
    if unknown or not config.held_out:
        raise ConfigError(
            f"held_out must name bundled photos {sorted(photos)}, got {config.held_out}"
        )
    train = {k: v for k, v in photos.items() if k not in config.held_out}
    held = {k: photos[k] for k in config.held_out}
    if not train:
        raise ConfigError("held_out leaves no photo to train on")
    deg = Degradation(
        scale=config.max_scale,
        blur_sigma=config.blur_sigma,
        noise_std=config.noise_std,
        jpeg_quality=config.jpeg_quality,
    )
    hr_side = config.lr_size * config.max_scale
    hr_tr, lr_tr = make_sr_pairs(train, hr_side, config.n_train, deg, seed=config.seed)
    hr_ev, lr_ev = make_sr_pairs(held, hr_side, config.n_eval, deg, seed=config.seed + 1)
    return {"hr_train": hr_tr, "lr_train": lr_tr, "hr_eval": hr_ev, "lr_eval": lr_ev}


def _tokenizer_step_fns(schedule, hierarchical: bool, config: HitVarConfig):
    top = max(schedule.scales)

    def loss_fn(m: HitVarTokenizer, batch):
        hr, _ = batch
        targets = _targets(hr, schedule)
        f = m.encode(hr)
        codes, prefixes, residuals = m.quantize(f)
        recon = {}
        for s in schedule.scales if hierarchical else (top,):
            fh = prefixes[m.prefix_for(s) - 1]
            recon[s] = m.decode_latent(f + jax.lax.stop_gradient(fh - f), s)
        loss, _ = hitvar_tokenizer_loss(
            recon, targets, f, prefixes[-1], commitment=config.commitment
        )
        d = f.shape[-1]
        z = jnp.concatenate([r.reshape(-1, d) for r in residuals])
        idx = jnp.concatenate([c.reshape(-1) for c in codes])
        return loss, (z, idx)

    def post(m: HitVarTokenizer, aux, key):
        z, idx = aux
        state = layers.ema_codebook_update(
            layers.CodebookEMA(m.codebook[...], m.cluster_size[...], m.embed_sum[...]),
            z,
            idx,
            decay=config.ema_decay,
        )
        # Dead codes (EMA count < 3% of the mean) restart at random residual vectors.
        dead = state.cluster_size < 0.03 * jnp.mean(state.cluster_size)
        pick = z[jax.random.randint(key, (state.codebook.shape[0],), 0, z.shape[0])]
        m.codebook[...] = jnp.where(dead[:, None], pick, state.codebook)
        m.embed_sum[...] = jnp.where(dead[:, None], pick, state.embed_sum)
        m.cluster_size[...] = jnp.where(dead, 1.0, state.cluster_size)

    return loss_fn, post


def _train_tokenizer(config, schedule, hr, lr, hierarchical: bool, seed: int, workdir, run):
    tok = models.init_without_compile(
        lambda: HitVarTokenizer(
            schedule,
            channels=config.channels,
            latent_dim=config.latent_dim,
            codebook_size=config.codebook_size,
            hierarchical=hierarchical,
            res_blocks=config.res_blocks,
            rngs=nnx.Rngs(seed),
        ),
        draw=hitvar_draw(),
        seed=seed,
    )
    # Codes start at latent vectors of the first batch (k-means-style data init).
    idx0 = _batch_order(len(hr), config.batch_size, seed, 1)[0]
    f0 = np.asarray(nnx.jit(lambda t, x: t.encode(x))(tok, jnp.asarray(hr[idx0])))
    f0 = f0.reshape(-1, config.latent_dim)
    pick = np.random.default_rng(seed).integers(0, len(f0), config.codebook_size)
    tok.codebook[...] = jnp.asarray(f0[pick])
    tok.embed_sum[...] = jnp.asarray(f0[pick])
    loss_fn, post = _tokenizer_step_fns(schedule, hierarchical, config)
    order = _batch_order(len(hr), config.batch_size, seed + 1, config.tokenizer_steps)

    def batch_fn(t):
        i = order[t]
        return jnp.asarray(hr[i]), jnp.asarray(lr[i])

    return _fit(tok, loss_fn, batch_fn, config.tokenizer_steps, config.learning_rate, seed,
                run=run, workdir=workdir, config=config, post=post)  # fmt: skip


def _new_transformer(config, schedule, seed):
    return models.init_without_compile(
        lambda: NextScaleTransformer(
            schedule,
            latent_dim=config.latent_dim,
            codebook_size=config.codebook_size,
            dim=config.dim,
            depth=config.depth,
            heads=config.heads,
            context_size=config.context_size or None,
            rngs=nnx.Rngs(seed),
        ),
        draw=hitvar_draw(),
        seed=seed,
    )


def _train_var(config, schedule, tokens, inputs, lr, lr_scale, seed, workdir, run,
               steps_cache=None):  # fmt: skip
    model = _new_transformer(config, schedule, seed)
    order = _batch_order(len(tokens), config.batch_size, seed + 1, config.var_steps)

    def loss_fn(m, batch):
        x, lo, ls, tk = batch
        return next_scale_cross_entropy(m(x, lo, ls), tk), None

    def batch_fn(t):
        i = order[t]
        return jnp.asarray(inputs[i]), jnp.asarray(lr[i]), _lr_scale_batch(lr_scale, i), \
            jnp.asarray(tokens[i])  # fmt: skip

    return _fit(model, loss_fn, batch_fn, config.var_steps, config.learning_rate, seed,
                run=run, workdir=workdir, config=config, steps_cache=steps_cache)  # fmt: skip


def _inference_params(tok: HitVarTokenizer, var: NextScaleTransformer, lr_term: bool) -> int:
    """Parameters HIT-VAR uses at inference: the decoder, the codebook and the transformer, and
    the encoder too when the per-scale LR term is on (it tokenizes the upsampled LR)."""
    enc = sum(models.count_params(mod) for mod in (tok.enc_in, tok.enc_block, tok.enc_out)) + sum(
        models.count_params(c) for c in tok.enc_down
    )
    n = models.count_params(tok) + int(tok.codebook[...].size) + models.count_params(var)
    return n if lr_term else n - enc


def _train_conv_sr(config, hr, lr, n_params, seed, workdir, run):
    width = conv_sr_width_for_params(n_params, blocks=config.sr_blocks)
    net = models.init_without_compile(
        lambda: ConvSR(width=width, blocks=config.sr_blocks, rngs=nnx.Rngs(seed)),
        draw=hitvar_draw(),
        seed=seed,
    )
    order = _batch_order(len(hr), config.batch_size, seed + 1, config.sr_steps)
    side = hr.shape[1]

    def loss_fn(m, batch):
        h, lo = batch
        return jnp.mean((m(lo, side) - h) ** 2), None

    def batch_fn(t):
        i = order[t]
        return jnp.asarray(hr[i]), jnp.asarray(lr[i])

    return _fit(net, loss_fn, batch_fn, config.sr_steps, config.learning_rate, seed,
                run=run, workdir=workdir, config=config)  # fmt: skip


def train_models(
    config: HitVarConfig, d: dict[str, np.ndarray], workdir: str | pathlib.Path | None = None
) -> dict[str, Any]:
    """Trains every model of the comparison on ``d["hr_train"]`` / ``d["lr_train"]``.

    Each training phase is a :func:`fidia_jax.train.fit` run: ``hit_tokenizer``, ``hit_var``,
    ``hit_dpo`` (DPO on the (LR, HR) token pairs), ``hit_dpo_lpips`` (ablation: DPO on
    LPIPS-ranked samples), ``plain_tokenizer``, ``plain_var``, ``conv_sr``; with ``workdir``
    each writes its losses to ``metrics.jsonl`` and its checkpoints to ``checkpoints/<run>``
    (a rerun resumes a cut phase and skips the finished ones). Before any DPO phase the token
    check runs on the held-out crops (:func:`token_check`) and is printed.

    Returns:
      ``{"hit_tokenizer", "plain_tokenizer", "hit_var_ce", "hit_var", "hit_var_lpips_dpo",
      "plain_var", "conv_sr", "curves", "wall_s", "dpo_valid_frac", "token_check",
      "params"}``.

    Raises:
      TrainingError: a non-finite loss or gradient in any phase.
    """
    workdir = None if workdir is None else pathlib.Path(workdir)
    sch = _schedule(config)
    hr, lr = d["hr_train"], d["lr_train"]
    side = hr.shape[1]
    with train.stage(f"bicubic-upsampled LR of the {len(lr)} training crops"):
        lr_up = _upsampled(lr, side)
    s, wall, curves = config.seed, {}, {}
    out: dict[str, Any] = {}
    var_steps: dict = {}  # the two VAR transformers share one compiled step
    for name, hier, off in (("hit", True, 0), ("plain", False, 100)):
        t0 = time.time()
        tok, curves[f"{name}_tokenizer"] = _train_tokenizer(
            config, sch, hr, lr, hier, s + off, workdir, f"{name}_tokenizer"
        )
        with train.stage(f"{name} tokenizer: tokens of the {len(hr)} HR and LR training crops"):
            toks, ins, _ = _tokenize(tok, hr, 64)
            lr_toks, lr_ins, lr_emb = _tokenize(tok, lr_up, 64)
        lr_scale = lr_emb if config.lr_scale_term else None
        var, curves[f"{name}_var"] = _train_var(
            config, sch, toks, ins, lr, lr_scale, s + off + 10, workdir, f"{name}_var", var_steps
        )
        out[f"{name}_tokenizer"], wall[name] = tok, time.time() - t0
        if name == "plain":
            out["plain_var"] = var
            continue
        out["hit_var_ce"] = var
        if "hr_eval" in d:
            with train.stage("token check before any DPO: true HR tokens vs generated vs bicubic"):
                out["token_check"] = token_check(config, tok, var, d["hr_eval"], d["lr_eval"])
            if not train.is_quiet():
                print(format_token_check(out["token_check"]), flush=True)
        t0 = time.time()
        out["hit_var"] = out["hit_var_lpips_dpo"] = var
        if config.dpo_steps:
            pairs = lr_hr_pairs(toks, ins, lr_toks, lr_ins)
            out["dpo_valid_frac"] = float(np.mean(pairs["valid"]))
            dpo_steps: dict = {}
            out["hit_var"], curves["hit_dpo"] = _dpo_finetune(
                config, nnx.merge(*nnx.split(var)), pairs, toks, ins, lr, lr_scale, s + 30,
                workdir, "hit_dpo", dpo_steps,
            )  # fmt: skip
            if config.dpo_lpips_ablation:
                with train.stage(
                    f"ablation pairs: {config.dpo_samples} samples for each of "
                    f"{min(config.dpo_pool, len(hr))} crops, ranked by LPIPS"
                ):
                    lp = _lpips_ranked_pairs(config, tok, var, hr, lr, lr_scale, s + 20)
                out["dpo_lpips_valid_frac"] = float(np.mean(lp["valid"]))
                out["hit_var_lpips_dpo"], curves["hit_dpo_lpips"] = _dpo_finetune(
                    config, nnx.merge(*nnx.split(var)), lp, toks, ins, lr, lr_scale, s + 40,
                    workdir, "hit_dpo_lpips", dpo_steps,
                )  # fmt: skip
        wall["dpo"] = time.time() - t0
    n_params = _inference_params(out["hit_tokenizer"], out["hit_var"], config.lr_scale_term)
    t0 = time.time()
    out["conv_sr"], curves["conv_sr"] = _train_conv_sr(
        config, hr, lr, n_params, s + 200, workdir, "conv_sr"
    )
    wall["conv_sr"] = time.time() - t0
    out["params"] = {
        "HIT-VAR (inference)": n_params,
        "plain RQ+VAR (inference)": _inference_params(
            out["plain_tokenizer"], out["plain_var"], config.lr_scale_term
        ),
        "conv SR": models.count_params(out["conv_sr"]),
    }
    out["curves"], out["wall_s"] = curves, wall
    return out


def _predict(config, trained, lr_eval) -> dict[str, dict[int, np.ndarray]]:
    """Outputs of every method at every scale, clipped to [0, 1]."""
    sch = _schedule(config)
    top, l_side = max(sch.scales), sch.lr_size

    @nnx.jit
    def conv_sr(net, lo):
        x4 = jnp.clip(net(lo, top * l_side), 0.0, 1.0)
        return {m: jnp.clip(bicubic_resize(x4, m * l_side), 0.0, 1.0) for m in sch.scales}

    def bicubic(lo):
        return {m: jnp.clip(bicubic_resize(lo, m * l_side), 0.0, 1.0) for m in sch.scales}

    out = {}
    for name, fn in (("bicubic", bicubic), ("conv SR", lambda lo: conv_sr(trained["conv_sr"], lo))):
        parts = [fn(jnp.asarray(lr_eval[i : i + 64])) for i in range(0, len(lr_eval), 64)]
        out[name] = {m: np.concatenate([np.asarray(p[m]) for p in parts]) for m in sch.scales}
    for name, tk, vk in (
        ("plain RQ+VAR", "plain_tokenizer", "plain_var"),
        ("HIT-VAR (no DPO)", "hit_tokenizer", "hit_var_ce"),
        ("HIT-VAR (DPO on LPIPS-ranked samples)", "hit_tokenizer", "hit_var_lpips_dpo"),
        ("HIT-VAR", "hit_tokenizer", "hit_var"),
    ):
        out[name] = _var_outputs(config, trained[tk], trained[vk], lr_eval, sch.scales)
    return out


def score(outputs: dict[int, np.ndarray], targets: dict[int, np.ndarray]) -> dict[str, dict]:
    """PSNR / SSIM (mean over images) and LPIPS-AlexNet (mean; ``None`` below 31 px) per scale."""
    res = {}
    for m, x in outputs.items():
        y = targets[m]
        row = {
            "psnr": float(
                np.mean([metrics.psnr(a, b, data_range=1.0) for a, b in zip(x, y, strict=True)])
            ),
            "ssim": float(
                np.mean(
                    [
                        metrics.ssim(a, b, data_range=1.0, channel_axis=-1)
                        for a, b in zip(x, y, strict=True)
                    ]
                )
            ),
            "lpips": None,
        }
        if x.shape[1] >= 31:
            row["lpips"] = float(
                np.mean(
                    np.concatenate(
                        [
                            np.asarray(metrics.lpips(x[i : i + 64], y[i : i + 64]))
                            for i in range(0, len(x), 64)
                        ]
                    )
                )
            )
        res[f"x{m}"] = row
    return res


def train_and_evaluate(config: HitVarConfig, workdir: str | pathlib.Path) -> dict[str, Any]:
    """Trains the five models, scores them on held-out crops, writes ``workdir/hitvar.json``
    (and ``hitvar_samples.png`` when ``config.png``) and prints the table.

    Also writes ``summary.json`` (the headline numbers at the top scale), ``hitvar_table.png``
    (the top scale's table as bar charts), and per training phase its losses
    (``metrics.jsonl``, ``curves.png``) and checkpoints (``checkpoints/<phase>``): run again
    with the same work directory, an interrupted run resumes where its last checkpoint was.

    Returns:
      ``{"metrics": {method: {"x1": {psnr, ssim, lpips}, ...}}, "goals": {...}, "params",
      "wall_s", "curves", "dpo_valid_frac", "held_out", ...}``.

    Raises:
      ConfigError: a held-out name that is not a bundled photo.
      TrainingError: a non-finite loss or gradient in a training phase.
    """
    parallel.initialize_distributed()  # before any array exists; no-op without a launcher
    workdir = pathlib.Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    with train.stage(
        f"SR crops: {config.n_train} training, {config.n_eval} held-out "
        f"({config.lr_size * config.max_scale} px HR, degraded x{config.max_scale})"
    ):
        d = make_data(config)
    trained = train_models(config, d, workdir)
    if not parallel.is_primary():  # the evaluation has nothing to split: process 0 alone
        return {"curves": trained["curves"], "wall_s": {**trained["wall_s"]}}
    sch = _schedule(config)
    top = max(sch.scales)
    with train.stage(f"predicting the {len(d['lr_eval'])} held-out crops with every method"):
        # the bicubic-downsampled targets ring slightly past [0, 1] (up to 1.009 on the tiny
        # crops); the metrics take images in [0, 1], as the methods' outputs are
        targets = {
            m: np.clip(np.asarray(t), 0.0, 1.0)
            for m, t in _targets(jnp.asarray(d["hr_eval"]), sch).items()
        }
        preds = _predict(config, trained, d["lr_eval"])
        tok = trained["hit_tokenizer"]
        side = config.lr_size * top
        preds_all = {
            **preds,
            METHODS[-2]: _decoded_tokens_of(tok, _upsampled(d["lr_eval"], side), sch.scales),
            METHODS[-1]: _decoded_tokens_of(tok, d["hr_eval"], sch.scales),
        }
    with train.stage("scoring: PSNR, SSIM, LPIPS at every scale; paired tests over crops"):
        table = {name: score(preds_all[name], targets) for name in METHODS}
        per_crop = {name: _lpips_per_crop(preds_all[name][top], targets[top]) for name in METHODS}
        psnr_per_crop = {
            name: [
                float(metrics.psnr(a, b, data_range=1.0))
                for a, b in zip(preds_all[name][top], targets[top], strict=True)
            ]
            for name in METHODS
        }
    hv = per_crop["HIT-VAR"]
    tests = {
        "HIT-VAR vs bicubic": paired_test(hv, per_crop["bicubic"]),
        "HIT-VAR vs plain RQ+VAR": paired_test(hv, per_crop["plain RQ+VAR"]),
        "HIT-VAR vs conv SR": paired_test(hv, per_crop["conv SR"]),
        "HIT-VAR vs HIT-VAR (no DPO)": paired_test(hv, per_crop["HIT-VAR (no DPO)"]),
        "HIT-VAR vs DPO on LPIPS-ranked samples": paired_test(
            hv, per_crop["HIT-VAR (DPO on LPIPS-ranked samples)"]
        ),
        "oracle vs HIT-VAR (no DPO)": paired_test(
            per_crop[METHODS[-1]], per_crop["HIT-VAR (no DPO)"]
        ),
        "oracle vs bicubic": paired_test(per_crop[METHODS[-1]], per_crop["bicubic"]),
    }
    goals = {
        "tokens_matter": bool(
            tests["oracle vs HIT-VAR (no DPO)"]["a_better"]
            and tests["oracle vs bicubic"]["a_better"]
        ),
        "lpips_top_beats_bicubic": tests["HIT-VAR vs bicubic"]["a_better"],
        "lpips_top_beats_plain_var": tests["HIT-VAR vs plain RQ+VAR"]["a_better"],
        "dpo_helps": tests["HIT-VAR vs HIT-VAR (no DPO)"]["a_better"],
    }
    goals["met"] = goals["lpips_top_beats_bicubic"] and goals["lpips_top_beats_plain_var"]
    results = {
        "metrics": table,
        "goals": goals,
        "paired_tests": tests,
        "token_check": trained.get("token_check"),
        # per held-out crop at the top scale, for paired tests outside the run
        "per_crop": {
            name: {"lpips": [float(v) for v in per_crop[name]], "psnr": psnr_per_crop[name]}
            for name in METHODS
        },
        "params": trained["params"],
        "prefix_lengths": {f"x{m}": sch.prefix_length(m) for m in sch.scales},
        "num_tokens": sch.num_tokens,
        "held_out": list(config.held_out),
        "dpo_valid_frac": trained.get("dpo_valid_frac"),
        "dpo_lpips_valid_frac": trained.get("dpo_lpips_valid_frac"),
        "final_losses": {k: (v[-1] if v else None) for k, v in trained["curves"].items()},
        "curves": trained["curves"],
        "wall_s": {**trained["wall_s"], "total": time.time() - t0},
    }
    write_summary(workdir / SUMMARY_FILE, results, config)
    if config.png:
        write_samples_png(workdir / PNG_FILE, config, d, preds_all)
    write_report(results, config, workdir)
    return results
