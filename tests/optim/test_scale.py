"""SCALE against a direct NumPy transcription of the authors' PyTorch update (the fixture
from the authors' code itself is tests/optim/test_scale_fidelity.py)."""

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from fidia_jax import optim
from fidia_jax.errors import ConfigError
from fidia_jax.models import Llama, LlamaConfig

V, C, H = 11, 6, 9


def make_params(rng):
    return {
        "embed_tokens": {"embedding": rng.standard_normal((V, C)).astype(np.float32)},
        "mlp": {
            "kernel": rng.standard_normal((C, H)).astype(np.float32),
            "bias": rng.standard_normal((H,)).astype(np.float32),
        },
        "proj": {"kernel": rng.standard_normal((H, 2, C)).astype(np.float32)},  # DenseGeneral
        "norm": {"scale": np.ones((C,), np.float32)},
        "lm_head": {"kernel": rng.standard_normal((C, V)).astype(np.float32)},
    }


def numpy_reference(
    params, grads_seq, lr_fn, *, wd, beta, adam_lr_fn, b1, b2, eps, placement="before_correction"
):
    """The reference's per-step update, written in PyTorch layout (weights transposed).

    main params: u = g / clamp(sqrt(mean(g^2, col_dim)), 1e-8); p = p*(1 - lr*wd) - lr*u,
      col_dim = 1 for linear weights (out, in), 0 for the embedding (vocab, features),
      ndim > 2 viewed as (out, -1);
    secondary (lm_head): buf = lerp(buf, g, 1 - beta), then as main;
    1-D: AdamW with bias corrections, eps added to sqrt(v) before the bias correction (the
      authors' code; ``placement="before_correction"``) or after it (optax.adamw).
    """
    p = {k: {kk: vv.astype(np.float64).copy() for kk, vv in v.items()} for k, v in params.items()}
    buf = np.zeros((V, C))
    m1 = {n: np.zeros_like(p[n][k]) for n, k in [("mlp", "bias"), ("norm", "scale")]}
    m2 = {n: np.zeros_like(p[n][k]) for n, k in [("mlp", "bias"), ("norm", "scale")]}

    def colnorm(g, col_dim):
        s = np.maximum(np.sqrt(np.mean(g**2, axis=col_dim, keepdims=True)), 1e-8)
        return g / s

    for t, grads in enumerate(grads_seq):
        lr, alr = lr_fn(t), adam_lr_fn(t)
        g = {k: {kk: np.asarray(vv, np.float64) for kk, vv in v.items()} for k, v in grads.items()}
        # embedding (vocab, features): torch layout identical, col_dim = 0.
        w = p["embed_tokens"]["embedding"]
        u = colnorm(g["embed_tokens"]["embedding"], 0)
        p["embed_tokens"]["embedding"] = w * (1 - lr * wd) - lr * u
        # linear (torch (out, in) = our kernel.T), col_dim = 1.
        wt = p["mlp"]["kernel"].T
        u = colnorm(g["mlp"]["kernel"].T, 1)
        p["mlp"]["kernel"] = (wt * (1 - lr * wd) - lr * u).T
        # DenseGeneral (H, 2, C): torch-style (out=C, in=(H, 2)) flattened to (C, 2H).
        gt = np.moveaxis(g["proj"]["kernel"], -1, 0).reshape(C, -1)
        wt = np.moveaxis(p["proj"]["kernel"], -1, 0).reshape(C, -1)
        new = wt * (1 - lr * wd) - lr * colnorm(gt, 1)
        p["proj"]["kernel"] = np.moveaxis(new.reshape(C, H, 2), 0, -1)
        # lm_head: torch (vocab, hidden).
        buf = buf + (1 - beta) * (g["lm_head"]["kernel"].T - buf)
        wt = p["lm_head"]["kernel"].T
        p["lm_head"]["kernel"] = (wt * (1 - lr * wd) - lr * colnorm(buf, 1)).T
        # 1-D AdamW.
        for n, k in [("mlp", "bias"), ("norm", "scale")]:
            gg = g[n][k]
            m1[n] = m1[n] + (1 - b1) * (gg - m1[n])
            m2[n] = m2[n] + (1 - b2) * (gg**2 - m2[n])
            bc1, bc2 = 1 - b1 ** (t + 1), 1 - b2 ** (t + 1)
            if placement == "before_correction":
                direction = m1[n] / (eps + np.sqrt(m2[n])) * np.sqrt(bc2) / bc1
            else:
                direction = (m1[n] / bc1) / (np.sqrt(m2[n] / bc2) + eps)
            p[n][k] = p[n][k] * (1 - alr * wd) - alr * direction
    return p


@pytest.mark.parametrize(
    ("placement", "grad_scale"),
    [("before_correction", 1.0), ("after_correction", 1.0), ("before_correction", 1e-6)],
)
def test_matches_numpy_transcription(placement, grad_scale):
    rng = np.random.default_rng(0)
    params = make_params(rng)
    grads_seq = [
        jax.tree.map(
            lambda x: (grad_scale * rng.standard_normal(x.shape)).astype(np.float32), params
        )
        for _ in range(4)
    ]
    sched = optax.linear_schedule(0.05, 0.01, 4)
    adam_sched = optax.linear_schedule(0.02, 0.004, 4)
    opt = optim.scale(
        sched,
        momentum=0.8,
        weight_decay=0.1,
        adam_learning_rate=adam_sched,
        adam_b1=0.85,
        adam_b2=0.99,
        adam_eps_placement=placement,
    )
    p = jax.tree.map(jnp.asarray, params)
    state = opt.init(p)
    step = jax.jit(opt.update)
    for g in grads_seq:
        u, state = step(g, state, p)
        p = optax.apply_updates(p, u)
    ref = numpy_reference(
        params,
        grads_seq,
        lambda t: float(sched(t)),
        wd=0.1,
        beta=0.8,
        adam_lr_fn=lambda t: float(adam_sched(t)),
        b1=0.85,
        b2=0.99,
        eps=1e-8,
        placement=placement,
    )
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-6), p, ref)
    if grad_scale < 1e-3:  # there the two placements differ visibly (1e-8 vs ~1e-6 gradients)
        other = numpy_reference(
            params,
            grads_seq,
            lambda t: float(sched(t)),
            wd=0.1,
            beta=0.8,
            adam_lr_fn=lambda t: float(adam_sched(t)),
            b1=0.85,
            b2=0.99,
            eps=1e-8,
            placement="after_correction",
        )
        diff = np.max(np.abs(other["mlp"]["bias"] - ref["mlp"]["bias"]))
        assert diff > 1e-4, diff  # far above the 2e-6 tolerance the match above used


def test_unknown_eps_placement():
    with pytest.raises(ConfigError, match="adam_eps_placement"):
        optim.scale(1e-3, adam_eps_placement="torch")


def test_labels_and_state_only_on_last_layer():
    params = jax.tree.map(jnp.asarray, make_params(np.random.default_rng(1)))
    labels = optim.scale_param_labels(params)
    assert labels["lm_head"]["kernel"] == "last_layer"
    assert labels["mlp"]["kernel"] == "matrix" and labels["embed_tokens"]["embedding"] == "matrix"
    assert labels["mlp"]["bias"] == "vector" and labels["norm"]["scale"] == "vector"
    state = optim.scale(1e-3).init(params)
    n_state = sum(x.size for x in jax.tree.leaves(state) if x.ndim > 0)
    assert n_state == C * V + 2 * (H + C)  # momentum of lm_head + AdamW moments of vectors


def test_column_rms_is_one():
    g = jax.random.normal(jax.random.key(0), (7, 5)) * jnp.arange(1.0, 6.0)[None, :]
    u = optim.column_rms_normalize(g, (0,))
    np.testing.assert_allclose(jnp.sqrt(jnp.mean(u**2, axis=0)), np.ones(5), rtol=1e-6)
    z = optim.column_rms_normalize(jnp.zeros((3, 2)), (0,))
    assert np.all(np.asarray(z) == 0)  # eps clamp: no NaN


def test_last_layer_errors_and_override():
    params = {"a": {"kernel": jnp.ones((3, 4))}, "b": {"kernel": jnp.ones((4, 2))}}
    with pytest.raises(ConfigError, match="no last layer"):
        optim.scale(1e-3).init(params)
    with pytest.raises(ConfigError, match="ambiguous"):
        optim.scale_param_labels(params, last_layer=("a", "b"))
    labels = optim.scale_param_labels(params, last_layer="b")
    assert labels == {"a": {"kernel": "matrix"}, "b": {"kernel": "last_layer"}}
    labels = optim.scale_param_labels(params, last_layer=lambda n, x: n == "a/kernel")
    assert labels["a"]["kernel"] == "last_layer"
    labels = optim.scale_param_labels(params, require_last_layer=False)
    assert labels == {"a": {"kernel": "matrix"}, "b": {"kernel": "matrix"}}
    with pytest.raises(ConfigError, match="needs >= 2-D"):
        optim.scale_by_column_rms().update({"v": jnp.ones(3)}, optax.EmptyState())
    with pytest.raises(ConfigError, match="fan_in_axes"):
        optim.scale_by_column_rms(fan_in_axes=(0, 1)).update(
            {"w": jnp.ones((2, 3))}, optax.EmptyState()
        )


def test_llama_nnx_state_labels():
    model = Llama(LlamaConfig.tiny(n_layers=1), rngs=nnx.Rngs(0))
    params = nnx.state(model, nnx.Param)
    flat = jax.tree_util.tree_flatten_with_path(optim.scale_param_labels(params))[0]
    labels = {optim.path_to_name(p): lab for p, lab in flat}
    assert labels["lm_head/kernel"] == "last_layer"
    assert labels["tok_embeddings/embedding"] == "matrix"
    assert labels["layers/0/attention/wq/kernel"] == "matrix"
    assert labels["norm/scale"] == "vector"
    assert list(labels.values()).count("last_layer") == 1
