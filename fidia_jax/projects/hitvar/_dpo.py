"""HIT-VAR's preference phase: the paper's (LR, HR) token pairs, the LPIPS-ranked sample pairs
of the ablation, and the DPO fine-tuning of the next-scale transformer on either.

The loss is DPO (reference: the frozen cross-entropy model, :func:`fidia_jax.rl.dpo_loss`) on
the pairs' teacher-forced log-likelihoods under the LR condition, plus ``dpo_ce_weight`` x the
cross-entropy of the true tokens.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from fidia_jax import metrics, rl
from fidia_jax.projects.hitvar._common import _batch_order, _fit, _flat, _lr_scale_batch
from fidia_jax.projects.hitvar.losses import next_scale_cross_entropy, token_log_prob
from fidia_jax.projects.hitvar.model import generate_tokens, next_scale_inputs

__all__ = ["lr_hr_pairs"]


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
