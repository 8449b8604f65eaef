"""CausalEGM against the authors' package: a recorded run of ``CausalEGM.train``.

Fixture: tests/data/causalegm/trace.npz (+ trace.json), made by
``tools/causalegm_make_fixture.py --authors-dir <checkout>`` from github SUwonglab/CausalEGM at
4be0962 (= PyPI causalegm 0.4.0) under TensorFlow 2.21 / Keras 3.15: the package's initial
weights, every step's batch rows, ``N(0, I)`` draw, gradient-penalty mixing weights and losses,
the weights after the first critic and generator steps and at the end, and the evaluations.

Tolerances. Both sides compute in float32 with different summation orders (rounding ~1e-7
relative per operation). Losses of the first steps are sums of a few hundred products through
networks of depth <= 4: ``rtol = 1e-5`` (with ``atol = 1e-6`` for terms near zero). Parameters
move by Adam steps of at most ~``lr`` (0.01) each: after one step the difference is the
rounding of ``m / (sqrt(v) + eps)`` times ``lr`` (~1e-8) plus the parameters' rounding, so
``atol = 1e-6``; after the 12 steps of the whole run, ``atol = 2e-5`` (12 steps x a few ulps of
the largest update, plus chaotic growth of rounding through the gradient-penalty's second
derivatives, measured at well below this).
"""

import json
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

from fidia_jax import train as train_lib
from fidia_jax.projects.causal import _fit, losses
from fidia_jax.projects.causal import model as models
from fidia_jax.projects.causal.data import CausalData

DATA = pathlib.Path(__file__).resolve().parents[2] / "data" / "causalegm"


@pytest.fixture(scope="module")
def trace():
    meta = json.loads((DATA / "trace.json").read_text())
    with np.load(DATA / "trace.npz") as f:
        arrays = {k: f[k] for k in f.files}
    return meta, arrays


def _stage(arrays, stage):
    return {k[len(stage) + 1 :]: v for k, v in arrays.items() if k.startswith(stage + "/")}


def _settings(meta):
    p = meta["params"]
    return _fit.EgmSettings(
        n_iter=meta["n_iter"],
        batches_per_eval=meta["batches_per_eval"],
        batch_size=meta["batch_size"],
        learning_rate=p["lr"],
        g_d_freq=p["g_d_freq"],
        z_dims=tuple(p["z_dims"]),
        g_units=tuple(p["g_units"]),
        e_units=tuple(p["e_units"]),
        f_units=tuple(p["f_units"]),
        h_units=tuple(p["h_units"]),
        dz_units=tuple(p["dz_units"]),
        dv_units=tuple(p["dv_units"]),
        alpha=p["alpha"],
        beta=p["beta"],
        gamma=p["gamma"],
    )


def _model(meta, arrays, s, stage="init"):
    m = models.CausalEGM(
        meta["v_dim"],
        z_dims=s.z_dims,
        g_units=s.g_units,
        e_units=s.e_units,
        f_units=s.f_units,
        h_units=s.h_units,
        dz_units=s.dz_units,
        dv_units=s.dv_units,
        rngs=nnx.Rngs(0),
    )
    m.load_package_weights(_stage(arrays, stage))
    return m


def _data(arrays):
    t = arrays["t"].astype(np.int32)
    return CausalData(x=arrays["v"], t=t, y=arrays["y"], mu=None, num_arms=2, name="fixture")


def _assert_params(graphdef, params, rest, expected, atol):
    m = nnx.merge(graphdef, params, rest)
    for name in models.CausalEGM._NETS:
        net = getattr(m, name)
        for i, layer in enumerate(net.layers):
            # a critic's hidden bias feeds batch norm, which subtracts it again: its gradient
            # is rounding noise (~1e-9), and Adam turns noise into steps of up to lr on both
            # sides, differently; it never reaches an output, so it is not compared
            hidden_critic = name.startswith("d") and i < len(net.layers) - 1
            for leaf in ("kernel",) if hidden_critic else ("kernel", "bias"):
                np.testing.assert_allclose(
                    np.asarray(getattr(layer, leaf)[...]),
                    expected[f"{name}/{i}/{leaf}"],
                    atol=atol,
                    rtol=0,
                    err_msg=f"{name}/{i}/{leaf}",
                )


def test_package_stream_reproduced_exactly(trace):
    """Batch rows and ``z`` of every step equal the package's (numpy seed 123 in
    ``Base_sampler``; the run wraps around the 20 units twice, so the reshuffle order counts)."""
    meta, a = trace
    per_iter = meta["params"]["g_d_freq"] + 1
    z_dim = sum(meta["params"]["z_dims"])
    stream = _fit._PackageStream(meta["n_units"], meta["batch_size"], z_dim, 123)
    rows, zs = zip(*[stream.next() for _ in range((meta["n_iter"] + 1) * per_iter)], strict=True)
    rows = np.stack(rows).reshape(meta["n_iter"] + 1, per_iter, -1)
    zs = np.stack(zs).reshape(meta["n_iter"] + 1, per_iter, meta["batch_size"], z_dim)
    g = meta["params"]["g_d_freq"]
    np.testing.assert_array_equal(rows[:, :g].reshape(-1, meta["batch_size"]), a["disc_rows"])
    np.testing.assert_array_equal(rows[:, g], a["gen_rows"])
    np.testing.assert_array_equal(zs[:, :g].reshape(a["disc_z"].shape), a["disc_z"])
    np.testing.assert_array_equal(zs[:, g], a["gen_z"])


def test_first_critic_and_generator_losses_match_the_package(trace):
    """The losses the package returns from its first critic step (initial weights) and its
    first generator step (the weights after ``g_d_freq`` critic steps), on its inputs."""
    meta, a = trace
    s = _settings(meta)
    w = losses.EGMWeights()
    graphdef, state = nnx.split(_model(meta, a, s))

    @jax.jit
    def critic(state, z, v, eps):
        return losses.causalegm_critic_loss(nnx.merge(graphdef, state), z, v, eps[0], eps[1], w)

    @jax.jit
    def generator(state, z, v, t, y):
        return losses.causalegm_generator_loss(nnx.merge(graphdef, state), z, v, t, y, w)

    d_loss, aux = critic(state, a["disc_z"][0], a["v"][a["disc_rows"][0]], a["disc_eps"][0])
    # the package returns (dv_loss, dz_loss, d_loss)
    got = [aux["dv_loss"], aux["dz_loss"], d_loss]
    np.testing.assert_allclose(got, a["disc_losses"][0], rtol=1e-5, atol=1e-6)
    state = nnx.state(_model(meta, a, s, stage="before_gen1"))
    rows = a["gen_rows"][0]
    t = a["t"].astype(np.int32)
    g_loss, gaux = generator(state, a["gen_z"][0], a["v"][rows], t[rows], a["y"][rows])
    keys = ("g_adv", "e_adv", "l2_v", "l2_z", "l2_x", "l2_y")
    np.testing.assert_allclose(
        [gaux[k] for k in keys] + [g_loss], a["gen_losses"][0], rtol=1e-5, atol=1e-6
    )


def test_tf_moments_changes_only_second_derivatives():
    """TensorFlow's batch variance (stop-gradient on the mean): same value and input
    gradient, different gradient-penalty parameter gradient."""
    x = jax.random.normal(jax.random.key(0), (6, 3))
    tf_c = models.WganCritic(3, (5,), tf_moments=True, rngs=nnx.Rngs(2))
    ex_c = models.WganCritic(3, (5,), tf_moments=False, rngs=nnx.Rngs(2))
    np.testing.assert_allclose(tf_c(x), ex_c(x), rtol=1e-6)

    def input_grad(c):
        return jax.grad(lambda v: jnp.sum(c(v)))(x)

    np.testing.assert_allclose(input_grad(tf_c), input_grad(ex_c), rtol=1e-5, atol=1e-6)

    def gp_grad(c):
        gd, p = nnx.split(c)
        return jax.jit(jax.grad(lambda p: losses._penalty(nnx.merge(gd, p), x)))(p)

    a, b = gp_grad(tf_c), gp_grad(ex_c)
    diff = max(
        float(jnp.max(jnp.abs(u - v)))
        for u, v in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True)
    )
    assert diff > 1e-3


def test_whole_training_loop_matches_the_package(trace):
    """``fit_causalegm``'s loop from the package's initial weights, with the package's mixing
    weights: evaluations, model selection, best ITE and the final weights."""
    meta, a = trace
    s = _settings(meta)
    m = _model(meta, a, s)
    graphdef, _, rest = train_lib.split_model(m)
    eps = a["disc_eps"].reshape(meta["n_iter"] + 1, s.g_d_freq, 2)
    data = _data(a)
    predict, info = _fit._fit_egm(data, s, 0, m, run="fixture", eps=eps)
    assert [i for i, _ in info["evals"]] == [0, 2]
    np.testing.assert_allclose([v for _, v in info["evals"]], a["eval_mse_y"], rtol=1e-5)
    np.testing.assert_array_equal(info["best_iter"], int(a["best_batch_idx"]))
    mu = predict(a["v"])
    np.testing.assert_allclose(mu[:, 1] - mu[:, 0], a["best_causal_pre"], atol=2e-5)
    _assert_params(graphdef, info["_final_params"], rest, _stage(a, "final"), atol=2e-5)


def test_keras_adam_differs_from_optax_only_in_eps_placement():
    """Closed form of one step: Keras' ``-lr sqrt(1-b2)/(1-b1) m/(sqrt(v)+eps)`` vs optax."""
    g = jnp.asarray([1e-7, 0.5, -2.0], jnp.float32)
    ku, _ = _fit.keras_adam(0.1).update(g, _fit.keras_adam(0.1).init(g))
    m, v = 0.5 * g, 0.1 * g * g
    expected = -0.1 * np.sqrt(0.1) / 0.5 * m / (np.sqrt(v) + 1e-7)
    np.testing.assert_allclose(ku, expected, rtol=1e-5)
    ou, _ = optax.adam(0.1, b1=0.5, b2=0.9, eps=1e-7).update(g, optax.adam(0.1).init(g))
    # equal where |g| >> eps, different at |g| ~ eps
    np.testing.assert_allclose(ku[1:], ou[1:], rtol=1e-4)
    assert abs(float(ku[0]) - float(ou[0])) > 1e-3 * abs(float(ou[0]))


def test_stream_seed_none_uses_the_model_seed_and_errors():
    s0 = _fit._PackageStream(10, 4, 3, 0)
    s1 = _fit._PackageStream(10, 4, 3, 1)
    assert not np.array_equal(s0.next()[1], s1.next()[1])
    with pytest.raises(ValueError, match="batch_size"):
        _fit._PackageStream(10, 11, 3, 0)
    small = dict(g_units=(4,), e_units=(4,), f_units=(4,), h_units=(4,), dz_units=(4,))
    m = models.CausalEGM(3, z_dims=(1, 1, 1, 1), dv_units=(4,), **small, rngs=nnx.Rngs(0))
    with pytest.raises(ValueError, match="no 'g_net/0/kernel'"):
        m.load_package_weights({})
    data = CausalData(
        x=np.zeros((8, 4), np.float32),
        t=np.arange(8) % 2,
        y=np.zeros(8, np.float32),
        mu=None,
        num_arms=2,
    )
    with pytest.raises(ValueError, match="v_dim=3"):
        _fit.fit_causalegm(data, _fit.EgmSettings(n_iter=1), init=m)
    with pytest.raises(ValueError, match="adam"):
        _fit._fit_egm(data, _fit.EgmSettings(n_iter=1, adam="sgd"), 0, m, run="x")
    with pytest.raises(ValueError, match="has shape"):
        m.load_package_weights({"g_net/0/kernel": np.zeros((2, 4))})
