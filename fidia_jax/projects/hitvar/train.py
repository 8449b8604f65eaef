"""The HIT-VAR experiment: x4 SR of degraded crops of the bundled photos, scored at every scale
x1..x4 on crops of held-out photos, with paired tests over the crops.

Phases (all Adam, one device; every gradient step is :func:`fidia_jax.train.make_train_step`,
every phase a :func:`fidia_jax.train.fit` with its own run name: progress, ``metrics.jsonl``,
checkpoints under ``checkpoints/<phase>`` and resume of an interrupted run):

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

import functools
import pathlib
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from fidia_jax import data, layers, metrics, models, rl, train
from fidia_jax.config import write_summary
from fidia_jax.errors import ConfigError
from fidia_jax.projects.hitvar.configs import HitVarConfig
from fidia_jax.projects.hitvar.data import Degradation, make_sr_pairs
from fidia_jax.projects.hitvar.losses import (
    hitvar_tokenizer_loss,
    next_scale_cross_entropy,
    token_log_prob,
)
from fidia_jax.projects.hitvar.model import (
    ConvSR,
    HitVarTokenizer,
    NextScaleTransformer,
    bicubic_resize,
    conv_sr_width_for_params,
    generate_tokens,
    hitvar_draw,
    lr_scale_term,
    next_scale_inputs,
)
from fidia_jax.projects.hitvar.schedule import HierarchicalSchedule, hierarchical_scale_schedule

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

from fidia_jax.projects.hitvar.report import (
    METHODS,
    PNG_FILE,
    SUMMARY_FILE,
    format_table,
    write_report,
    write_samples_png,
)


def _schedule(config: HitVarConfig) -> HierarchicalSchedule:
    return hierarchical_scale_schedule(
        config.lr_size, config.max_scale, config.grids, config.latent_size
    )


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


def _targets(hr, schedule):
    top = max(schedule.scales)
    return {
        m: hr if m == top else bicubic_resize(hr, m * schedule.lr_size) for m in schedule.scales
    }


def _fit(
    model: nnx.Module,
    loss_fn: Callable,
    batch_fn: Callable,
    steps: int,
    lr: float,
    seed: int,
    *,
    run: str,
    workdir: pathlib.Path | None,
    config: HitVarConfig,
    post: Callable | None = None,
    steps_cache: dict | None = None,
) -> tuple[nnx.Module, list[float]]:
    """Adam on the ``nnx.Param`` leaves with :func:`fidia_jax.train.make_train_step`, looped by
    :func:`fidia_jax.train.fit` (run ``run``; checkpoints and resume with ``workdir``).

    ``loss_fn(model, batch) -> (loss, aux)``; ``post(model, aux, key)`` may then update the
    module's other state (the EMA codebook) from the step's ``aux``, in the same compiled step,
    after the parameter update (``key = fold_in(key(seed), t)`` for step ``t``); a skipped
    non-finite step leaves that state as it was. ``model`` itself is not changed (the fit
    starts from a copy). ``steps_cache`` (a dict) lends the compiled step to a later fit of the
    same module structure and step size (the second VAR transformer: one compile, not two).
    """
    # the step donates its state: train copies, so that ``model`` stays usable
    graphdef, params, rest = train.split_model(model)
    params, rest = jax.tree.map(jnp.copy, (params, rest))
    tx = optax.adam(lr)

    def objective(p, model_state, batch):
        inputs, _ = batch
        loss, aux = loss_fn(train.merge_model(graphdef, p, model_state), inputs)
        return loss, (model_state, {} if post is None else {"post": aux})

    cache_key = (graphdef, lr)
    if steps_cache is not None and cache_key in steps_cache:
        step = steps_cache[cache_key]
    else:
        step = train.make_train_step(
            objective, tx, has_aux=True, has_state=True, donate=post is None
        )
    if steps_cache is not None:
        steps_cache[cache_key] = step
    if post is not None:
        inner = step

        @functools.partial(jax.jit, donate_argnums=(0,))
        def step(state, batch):
            state, metrics = inner(state, batch)
            m = train.merge_model(graphdef, state.params, state.model_state)
            post(m, metrics.pop("post"), batch[1])
            model_state = jax.lax.cond(
                metrics["nonfinite"] == 0,
                lambda: train.split_model(m)[2],
                lambda: state.model_state,
            )
            return state._replace(model_state=model_state), metrics

    key = jax.random.key(seed)
    res = train.fit(
        train.init_train_state(params, tx, model_state=rest),
        step,
        lambda t: (batch_fn(t), jax.random.fold_in(key, t)),
        num_steps=steps,
        workdir=workdir,
        run=run,
        checkpoint_every=config.checkpoint_every,
        log_every=1,  # every step's loss is reported (the curves of the results file)
    )
    curve = [r["loss"] for r in res.history if "loss" in r]
    return train.merge_model(graphdef, res.state.params, res.state.model_state), curve


def _batch_order(n: int, batch: int, seed: int, steps: int) -> np.ndarray:
    """``(steps, batch)`` row indices: consecutive seeded permutations of ``range(n)``, cut into
    batches (a pure function of the step, so a resumed fit draws the same batches)."""
    rng = np.random.default_rng(seed)
    order: list[int] = []
    while len(order) < batch * steps:
        order += list(rng.permutation(n))
    return np.asarray(order[: batch * steps], np.int64).reshape(steps, batch)


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


@functools.cache
def _tokenize_fn(grids: tuple[int, ...]):
    @nnx.jit
    def one(t, x):
        codes, prefixes, _ = t.quantize(t.encode(x))
        return (
            _flat(codes),
            next_scale_inputs(prefixes, grids),
            lr_scale_term(codes, t.codebook[...]),
        )

    return one


def _tokenize(tok: HitVarTokenizer, images: np.ndarray, batch: int):
    """Tokens ``(N, T)``, teacher-forcing inputs ``(N, T, D)`` and code embeddings ``(N, T, D)``
    (:func:`lr_scale_term`) of HR-sized images."""
    one = _tokenize_fn(tok.schedule.grids)
    parts = [one(tok, jnp.asarray(images[i : i + batch])) for i in range(0, len(images), batch)]
    return tuple(np.concatenate([np.asarray(p[j]) for p in parts]) for j in range(3))


@functools.cache
def _upsample_fn(side: int):
    return jax.jit(lambda x: jnp.clip(bicubic_resize(x, side), 0.0, 1.0))


def _upsampled(lr: np.ndarray, side: int, batch: int = 64) -> np.ndarray:
    """Bicubic upsampling of LR crops to the HR side, clipped to [0, 1] (what the tokenizer
    encodes as "the LR image": the rejected sequence of the (LR, HR) DPO pairs, and the
    per-scale LR term)."""
    up = _upsample_fn(side)
    return np.concatenate(
        [np.asarray(up(jnp.asarray(lr[i : i + batch]))) for i in range(0, len(lr), batch)]
    )


def _flat(codes):
    return jnp.concatenate([c.reshape(c.shape[0], -1) for c in codes], axis=1)


def _lr_scale_batch(lr_scale, i):
    return None if lr_scale is None else jnp.asarray(lr_scale[i])


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


def _lpips_ranked_pairs(config, tok, var, hr, lr, lr_scale, seed):
    """Ablation pairs: for each pool crop, the LPIPS-best and -worst of ``dpo_samples`` samples
    of the frozen VAR (an external reward; the paper's pairs need none)."""
    grids, top = tok.schedule.grids, max(tok.schedule.scales)

    @nnx.jit
    def sample(t, v, lo, ls, key):
        codes, prefixes = generate_tokens(
            v, t.codebook[...], lo, ls, key=key, temperature=config.dpo_temperature
        )
        img = jnp.clip(t.decode_tokens(codes, top), 0.0, 1.0)
        return _flat(codes), next_scale_inputs(prefixes, grids), img

    n, k = min(config.dpo_pool, len(hr)), config.dpo_samples
    key = jax.random.key(seed)
    out = {"tokens": [], "inputs": [], "valid": []}
    for i in range(0, n, config.batch_size):
        j_end = min(i + config.batch_size, n)
        lo, hi = jnp.asarray(lr[i:j_end]), hr[i:j_end]
        ls = None if lr_scale is None else jnp.asarray(lr_scale[i:j_end])
        toks, ins, rewards = [], [], []
        for j in range(k):
            tk, x, img = sample(tok, var, lo, ls, jax.random.fold_in(key, i * k + j))
            toks.append(tk)
            ins.append(x)
            rewards.append(-metrics.lpips(img, jnp.asarray(hi)))
        toks, ins, rewards = jnp.stack(toks, 1), jnp.stack(ins, 1), jnp.stack(rewards, 1)
        w, l, valid = jax.vmap(rl.dpo_pair)(rewards)
        rows = jnp.arange(toks.shape[0])
        out["tokens"].append(np.stack([toks[rows, w], toks[rows, l]], 1))
        out["inputs"].append(np.stack([ins[rows, w], ins[rows, l]], 1))
        out["valid"].append(np.asarray(valid))
    return {key_: np.concatenate(v) for key_, v in out.items()}


def lr_hr_pairs(hr_tokens, hr_inputs, lr_tokens, lr_inputs) -> dict[str, np.ndarray]:
    """The paper's preference pairs: preferred = the HR crop's tokens, rejected = the LR crop's
    tokens (the tokenizer applied to the bicubic-upsampled LR), both scored under the same LR
    condition. A pair whose two sequences are equal carries no preference (``valid = 0``).

    Args:
      hr_tokens, lr_tokens: ``(N, T)`` int tokens.
      hr_inputs, lr_inputs: ``(N, T, D)`` their teacher-forcing inputs (:func:`next_scale_inputs`).

    Returns:
      ``{"tokens": (N, 2, T), "inputs": (N, 2, T, D), "valid": (N,) float32}``.

    Raises:
      ValueError: shapes that differ between the HR and LR sequences.
    """
    if np.shape(hr_tokens) != np.shape(lr_tokens) or np.shape(hr_inputs) != np.shape(lr_inputs):
        raise ValueError(
            f"lr_hr_pairs: HR and LR sequences must share shapes, got tokens "
            f"{np.shape(hr_tokens)} / {np.shape(lr_tokens)}, inputs {np.shape(hr_inputs)} / "
            f"{np.shape(lr_inputs)}"
        )
    valid = np.any(np.asarray(hr_tokens) != np.asarray(lr_tokens), axis=1).astype(np.float32)
    return {
        "tokens": np.stack([hr_tokens, lr_tokens], 1),
        "inputs": np.stack([hr_inputs, lr_inputs], 1),
        "valid": valid,
    }


def _dpo_finetune(
    config, var, pairs, tokens, inputs, lr, lr_scale, seed, workdir, run, steps_cache=None
):
    """Preference phase: ``ce_weight * CE(true tokens) + DPO(pair)`` from the CE model (also the
    frozen reference), on the pairs' teacher-forced log-likelihoods under the LR condition."""
    n = len(pairs["valid"])
    ref_graph, ref_state = nnx.split(var)

    @jax.jit
    def ref_logp(state, x, lo, ls, tk):
        return token_log_prob(nnx.merge(ref_graph, state)(x, lo, ls), tk)

    ref = np.stack(
        [
            np.concatenate(
                [
                    np.asarray(
                        ref_logp(
                            ref_state,
                            jnp.asarray(pairs["inputs"][i : i + 64, j]),
                            jnp.asarray(lr[i : min(i + 64, n)]),
                            _lr_scale_batch(lr_scale, slice(i, min(i + 64, n))),
                            jnp.asarray(pairs["tokens"][i : i + 64, j]),
                        )
                    )
                    for i in range(0, n, 64)
                ]
            )
            for j in range(2)
        ],
        1,
    )
    order = _batch_order(n, config.batch_size, seed + 1, config.dpo_steps)
    dpo = jax.vmap(rl.dpo_loss, in_axes=(0, 0, None))

    def loss_fn(m, batch):
        x_w, x_l, t_w, t_l, ref_w, ref_l, valid, x_gt, t_gt, lo, ls = batch
        b = lo.shape[0]
        ls3 = None if ls is None else jnp.concatenate([ls, ls, ls])
        logits = m(jnp.concatenate([x_w, x_l, x_gt]), jnp.concatenate([lo, lo, lo]), ls3)
        logp = token_log_prob(logits[: 2 * b], jnp.concatenate([t_w, t_l]))
        r_w, r_l = rl.dpo_log_ratios(logp[:b], ref_w, logp[b:], ref_l)
        pref = jnp.sum(valid * dpo(r_w, r_l, config.dpo_beta)) / jnp.maximum(jnp.sum(valid), 1.0)
        ce = next_scale_cross_entropy(logits[2 * b :], t_gt)
        return pref + config.dpo_ce_weight * ce, None

    def batch_fn(t):
        i = order[t]
        p = pairs
        arrays = (p["inputs"][i, 0], p["inputs"][i, 1], p["tokens"][i, 0], p["tokens"][i, 1],
                  ref[i, 0], ref[i, 1], p["valid"][i], inputs[i], tokens[i], lr[i])  # fmt: skip
        return tuple(jnp.asarray(a) for a in arrays) + (_lr_scale_batch(lr_scale, i),)

    # the two DPO phases share one compiled step (same loss, same shapes)
    return _fit(var, loss_fn, batch_fn, config.dpo_steps, config.learning_rate * 0.1, seed,
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


def _cond(tok, lr, side, use_term, batch=64):
    """The per-scale LR term of LR crops (``None`` when off)."""
    if not use_term:
        return None
    return _tokenize(tok, _upsampled(lr, side), batch)[2]


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


def paired_test(a: np.ndarray, b: np.ndarray, alpha: float = 0.05) -> dict[str, Any]:
    """Two-sided Wilcoxon signed-rank test of paired per-item scores ``a`` vs ``b`` (lower is
    better, e.g. LPIPS per crop).

    Returns:
      ``{"mean_a", "mean_b", "mean_diff" (a - b), "p", "n", "a_better"}``; ``a_better`` is
      ``mean_a < mean_b`` and ``p < alpha`` (a difference within the noise is not a win);
      ``p = 1`` when every difference is zero.

    Raises:
      ValueError: different lengths, fewer than 2 items, or non-finite scores.
    """
    import scipy.stats

    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a.shape != b.shape or a.ndim != 1 or len(a) < 2:
        raise ValueError(f"paired_test: need two 1-D arrays of one length >= 2, got {a.shape}, "
                         f"{b.shape}")  # fmt: skip
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        raise ValueError("paired_test: scores must be finite")
    diff = a - b
    p = 1.0 if np.all(diff == 0) else float(scipy.stats.wilcoxon(a, b).pvalue)
    return {
        "mean_a": float(a.mean()),
        "mean_b": float(b.mean()),
        "mean_diff": float(diff.mean()),
        "p": p,
        "n": int(len(a)),
        "a_better": bool(a.mean() < b.mean() and p < alpha),
    }


def _lpips_per_crop(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.concatenate(
        [np.asarray(metrics.lpips(x[i : i + 64], y[i : i + 64])) for i in range(0, len(x), 64)]
    )


@functools.cache
def _var_run_fn(scales: tuple[int, ...], temp: float):
    @nnx.jit
    def run(t, v, lo, ls, k):
        codes, _ = generate_tokens(
            v, t.codebook[...], lo, ls, key=k if temp else None, temperature=temp
        )
        return {m: jnp.clip(t.decode_tokens(codes, m), 0.0, 1.0) for m in scales}

    return run


def _var_outputs(config, tok, var, lr_eval, scales, key=None):
    """Generated tokens decoded at ``scales`` (clipped to [0, 1]), in batches of 64."""
    side = config.lr_size * config.max_scale
    ls_all = _cond(tok, lr_eval, side, config.lr_scale_term)
    run = _var_run_fn(tuple(scales), float(config.eval_temperature))
    key = jax.random.key(config.seed + 7) if key is None else key
    parts = [
        run(tok, var, jnp.asarray(lr_eval[i : i + 64]),
            _lr_scale_batch(ls_all, slice(i, i + 64)), key)
        for i in range(0, len(lr_eval), 64)
    ]  # fmt: skip
    return {m: np.concatenate([np.asarray(p[m]) for p in parts]) for m in scales}


@functools.cache
def _reconstruct_fn(scales: tuple[int, ...]):
    @nnx.jit
    def rec(t, h):
        codes, _, _ = t.quantize(t.encode(h))
        return {m: jnp.clip(t.decode_tokens(codes, m), 0.0, 1.0) for m in scales}

    return rec


def _decoded_tokens_of(tok, images, scales):
    """The tokenizer's reconstruction of HR-sized images (their own tokens) at ``scales``."""
    rec = _reconstruct_fn(tuple(scales))
    parts = [rec(tok, jnp.asarray(images[i : i + 64])) for i in range(0, len(images), 64)]
    return {m: np.concatenate([np.asarray(p[m]) for p in parts]) for m in scales}


def token_check(config: HitVarConfig, tok, var, hr_eval, lr_eval) -> dict[str, Any]:
    """Do the tokens matter? Per-crop LPIPS at the top scale of the held-out crops for: the
    tokenizer decoding the true HR tokens (oracle), decoding the VAR's generated tokens, and
    bicubic upsampling; paired Wilcoxon tests (:func:`paired_test`) oracle vs generated and
    oracle vs bicubic. ``ok`` is true when the oracle beats both beyond the noise: only then can
    a better VAR (or DPO) improve the output.
    """
    top = config.max_scale
    side = config.lr_size * top
    y = np.clip(np.asarray(hr_eval), 0.0, 1.0)
    oracle = _decoded_tokens_of(tok, hr_eval, (top,))[top]
    gen = _var_outputs(config, tok, var, lr_eval, (top,))[top]
    bic = _upsampled(lr_eval, side)
    lp = {k: _lpips_per_crop(v, y) for k, v in (("oracle", oracle), ("generated", gen),
                                                 ("bicubic", bic))}  # fmt: skip
    res = {
        "lpips": {k: float(v.mean()) for k, v in lp.items()},
        "oracle_vs_generated": paired_test(lp["oracle"], lp["generated"]),
        "oracle_vs_bicubic": paired_test(lp["oracle"], lp["bicubic"]),
        "generated_vs_bicubic": paired_test(lp["generated"], lp["bicubic"]),
    }
    res["ok"] = res["oracle_vs_generated"]["a_better"] and res["oracle_vs_bicubic"]["a_better"]
    return res


def format_token_check(tc: dict[str, Any]) -> str:
    """One paragraph: the token check's LPIPS means and p-values."""
    lp = tc["lpips"]
    return (
        f"token check (top scale, LPIPS per held-out crop, Wilcoxon two-sided): true HR "
        f"tokens {lp['oracle']:.3f}, generated {lp['generated']:.3f}, bicubic "
        f"{lp['bicubic']:.3f}; oracle vs generated p={tc['oracle_vs_generated']['p']:.2g}, "
        f"oracle vs bicubic p={tc['oracle_vs_bicubic']['p']:.2g} -> "
        + (
            "passed: the tokens carry the image"
            if tc["ok"]
            else "NOT passed: decoding the true tokens does not beat both"
        )  # fmt: skip
    )


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
    workdir = pathlib.Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    with train.stage(
        f"SR crops: {config.n_train} training, {config.n_eval} held-out "
        f"({config.lr_size * config.max_scale} px HR, degraded x{config.max_scale})"
    ):
        d = make_data(config)
    trained = train_models(config, d, workdir)
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
