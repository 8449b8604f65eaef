"""TeamWork primitives (our reconstruction): influence, roles, masks, the role-aware model."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from fidia_jax.projects.teamwork import losses
from fidia_jax.projects.teamwork import model as tw


def test_channel_influence_closed_form():
    # x0 i.i.d. N(0,1); x1_t = x0_{t-1} + 0.5 e_t. Own lags do not help x1, x0's lags leave the
    # noise only: U[0,1] = 0.5 log((1 + 0.25) / 0.25) = 0.5 log 5. Nothing helps x0: U[1,0] = 0.
    rng = np.random.default_rng(0)
    x0 = rng.standard_normal(6001)
    x1 = x0[:-1] + 0.5 * rng.standard_normal(6000)
    u = tw.channel_influence(np.stack([x0[1:], x1], axis=1), lags=2)
    assert u[0, 1] == pytest.approx(0.5 * math.log(5.0), abs=0.03)
    assert u[1, 0] < 0.01 and u[0, 0] == 0 and u[1, 1] == 0
    np.testing.assert_array_equal(tw.channel_roles(u), [True, False])


def test_channel_roles_and_edges():
    u = np.array([[0, 0.5, 0.4], [0.0, 0, 0.1], [0.0, 0.05, 0]], np.float32)
    # net drive: 0.9, -0.45, -0.45 -> only channel 0 dominant; n_dominant=2 adds channel 1.
    np.testing.assert_array_equal(tw.channel_roles(u), [True, False, False])
    np.testing.assert_array_equal(tw.channel_roles(u, n_dominant=2), [True, True, False])
    with pytest.raises(ValueError, match="n_dominant"):
        tw.channel_roles(u, n_dominant=3)
    edges, prior = tw.role_edges([True, False, False], u)
    np.testing.assert_array_equal(edges, [[0, 1, 1], [0, 0, 0], [0, 0, 0]])
    np.testing.assert_allclose(prior[0, 1:], np.log(np.array([0.5, 0.4]) + 1e-3), rtol=1e-6)
    assert prior[1:].sum() == 0
    free, prior0 = tw.role_edges([True, False, False], u, use_roles=False)
    np.testing.assert_array_equal(free, 1 - np.eye(3)) and np.testing.assert_array_equal(prior0, 0)


def test_span_mask_spans_and_ratio():
    rng = np.random.default_rng(0)
    m = tw.span_mask(rng, [1, 6], 48, 0.25, batch=4000)
    assert m.shape == (4000, 48, 2)
    assert m.mean() == pytest.approx(0.25, abs=0.01)
    # Channel 1 changes value only at span boundaries: at most ceil(48/6) + 1 runs per window.
    runs = 1 + np.sum(np.diff(m[:, :, 1].astype(int), axis=1) != 0, axis=1)
    assert runs.max() <= 9
    # Point masking: neighbouring steps independent (correlation ~ 0); spans: strongly correlated.
    c0 = np.corrcoef(m[:, :-1, 0].ravel(), m[:, 1:, 0].ravel())[0, 1]
    c1 = np.corrcoef(m[:, :-1, 1].ravel(), m[:, 1:, 1].ravel())[0, 1]
    assert abs(c0) < 0.02 and c1 > 0.7  # 5 of 6 neighbour pairs share a span


def test_eval_masks_cover_each_step_once():
    m = tw.eval_masks([1, 5, 12], 30, 4)
    assert m.shape == (4, 30, 3)
    np.testing.assert_array_equal(m.sum(0), 1)
    np.testing.assert_array_equal(m[1, :, 1], (np.arange(30) // 5) % 4 == 1)


def test_nll_and_score_closed_form():
    x = jnp.array([[[1.0, 2.0]]])
    mean = jnp.array([[[0.0, 0.0]]])
    var = jnp.array([[[1.0, 4.0]]])
    mask = jnp.array([[[True, False]]])
    assert float(losses.gaussian_nll(x, mean, var, mask)) == pytest.approx(0.5)  # 0.5 (0 + 1)
    np.testing.assert_allclose(tw.anomaly_score(x, mean, var), [[(1.0 + 1.0) / 2]])
    np.testing.assert_allclose(tw.anomaly_score(x, mean, None), [[(1.0 + 4.0) / 2]])


def test_masked_mse_closed_form():
    x = jnp.array([[[1.0, 2.0], [3.0, -1.0]]])
    mean = jnp.zeros_like(x)
    mask = jnp.array([[[True, False], [True, True]]])
    assert float(losses.masked_mse(x, mean, mask)) == pytest.approx((1 + 9 + 1) / 3)
    assert float(losses.masked_mse(x, mean, jnp.zeros_like(mask))) == 0.0


@pytest.fixture(scope="module")
def model_and_fn():
    net = tw.init_teamwork(3, 8, seed=0, dim=8, heads=2)
    graphdef, state = nnx.split(net)
    fn = jax.jit(lambda x, m, e, p: nnx.merge(graphdef, state)(x, m, e, p))
    return net, fn


def test_init_teamwork_draws_the_leaves_in_state_order():
    """init_without_compile + teamwork_draw: the weights of the host-side init it replaced
    (leaves visited in flat-state order, one default_rng(seed) stream), bit for bit."""
    kw = dict(dim=8, heads=2, use_gate=False)
    got = nnx.state(tw.init_teamwork(3, 8, seed=5, **kw))
    abstract = nnx.eval_shape(lambda: tw.TeamWork(3, 8, rngs=nnx.Rngs(0), **kw))
    rng = np.random.default_rng(5)
    flat = nnx.to_flat_state(nnx.state(abstract))
    assert len(flat) == len(nnx.to_flat_state(got))
    for (path, leaf), (path2, value) in zip(flat, nnx.to_flat_state(got), strict=True):
        assert path == path2
        want = tw.teamwork_draw(tuple(map(str, path)), leaf.shape, rng)
        np.testing.assert_array_equal(value[...], np.asarray(want, np.float32))


def test_init_teamwork_values():
    model = tw.init_teamwork(3, 8, seed=0, dim=8, heads=2)
    graphdef = nnx.split(model)[0]
    np.testing.assert_array_equal(model.block1.ln1.scale[...], np.ones(8))
    np.testing.assert_array_equal(model.head.bias[...], np.zeros(2))
    # kernels ~ N(0, 1/fan_in): the 3 * 8 * 8 entries of q, k, v together, std 1/sqrt(8).
    k = np.concatenate([np.ravel(getattr(model, n).kernel[...]) for n in ("q", "k", "v")])
    assert k.std() == pytest.approx(8**-0.5, rel=0.15)
    # Same structure as the eagerly built module.
    eager = nnx.split(nnx.eval_shape(lambda: tw.TeamWork(3, 8, dim=8, heads=2, rngs=nnx.Rngs(0))))[
        0
    ]
    assert eager == graphdef


def test_messages_flow_only_from_dominant_to_auxiliary(model_and_fn):
    _, fn = model_and_fn
    rng = np.random.default_rng(0)
    x_np = rng.normal(size=(2, 8, 3)).astype(np.float32)
    mask_np = rng.random((2, 8, 3)) < 0.3
    x, mask = jnp.asarray(x_np), jnp.asarray(mask_np)
    edges, prior = (jnp.asarray(a) for a in tw.role_edges([True, False, False]))
    mean, var = fn(x, mask, edges, prior)
    assert mean.shape == var.shape == (2, 8, 3) and bool(jnp.all(var > 0))
    # Changing an auxiliary input leaves the dominant channel's output exactly unchanged...
    x_aux = x_np.copy()
    x_aux[:, :, 2] += 5.0
    mean_aux, _ = fn(jnp.asarray(x_aux), mask, edges, prior)
    np.testing.assert_array_equal(mean_aux[:, :, 0], mean[:, :, 0])
    np.testing.assert_array_equal(mean_aux[:, :, 1], mean[:, :, 1])  # aux -> aux: no edge
    # ...while changing the dominant input changes the auxiliaries (it sends them messages).
    x_dom = x_np.copy()
    x_dom[:, :, 0] += 5.0
    mean_dom, _ = fn(jnp.asarray(x_dom), mask, edges, prior)
    assert float(jnp.max(jnp.abs(mean_dom[:, :, 1] - mean[:, :, 1]))) > 1e-4
    # Masked inputs are hidden: their values cannot change any output.
    x_masked = np.where(mask_np, 100.0, x_np).astype(np.float32)
    np.testing.assert_allclose(
        fn(jnp.asarray(x_masked), mask, edges, prior)[0], mean, rtol=1e-6, atol=1e-6
    )


def test_role_free_edges_let_every_channel_talk(model_and_fn):
    _, fn = model_and_fn
    x = np.random.default_rng(1).normal(size=(2, 8, 3)).astype(np.float32)
    mask = jnp.zeros((2, 8, 3), bool)
    edges, prior = (jnp.asarray(a) for a in tw.role_edges([True, False, False], use_roles=False))
    mean, _ = fn(jnp.asarray(x), mask, edges, prior)
    x[:, :, 2] += 5.0
    mean2, _ = fn(jnp.asarray(x), mask, edges, prior)
    assert float(jnp.max(jnp.abs(mean2[:, :, 0] - mean[:, :, 0]))) > 1e-4


def test_bad_shape_is_an_error(model_and_fn):
    model, _ = model_and_fn
    with pytest.raises(ValueError, match=r"expected \(B, 8, 3\)"):
        model(
            jnp.zeros((1, 9, 3)), jnp.zeros((1, 9, 3), bool), jnp.zeros((3, 3)), jnp.zeros((3, 3))
        )


def test_covering_minimum_brute_force():
    from fidia_jax.projects.teamwork.train import covering_minimum

    rng = np.random.default_rng(0)
    for n, w in ((7, 3), (5, 1), (4, 4), (10, 6)):
        r = rng.normal(size=n)
        got = covering_minimum(r, w)
        want = [min(r[max(0, t - w + 1) : min(t, n - 1) + 1]) for t in range(n + w - 1)]
        np.testing.assert_allclose(got, want)
    # a threshold flags a step exactly when every window covering it is above it (SKAB's rule)
    r = np.array([5.0, 5.0, 1.0, 5.0, 5.0])
    np.testing.assert_array_equal(covering_minimum(r, 2) >= 3, [1, 1, 0, 0, 1, 1])


@pytest.mark.integration  # eager Conv-AE calls compile op by op (seconds on a busy CPU)
def test_convae_shapes_dropout_and_errors():
    net = tw.init_convae(3, 12, seed=0)
    x = jnp.asarray(np.random.default_rng(1).normal(size=(2, 12, 3)), jnp.float32)
    out = net(x)
    assert out.shape == (2, 12, 3) and np.all(np.isfinite(np.asarray(out)))
    # keep masks of ones are the identity of dropout; a zero mask changes the output
    ones1, ones2 = jnp.ones((2, 6, 32)), jnp.ones((2, 6, 16))
    np.testing.assert_allclose(np.asarray(net(x, ones1, ones2)), np.asarray(out), atol=1e-6)
    assert np.abs(np.asarray(net(x, 0 * ones1, ones2) - out)).max() > 1e-4
    # Glorot-uniform kernels (limit sqrt(6 / (fan_in + fan_out))), zero biases
    k = np.asarray(net.enc1.kernel[...])
    assert k.shape == (7, 3, 32) and np.abs(k).max() <= math.sqrt(6 / (7 * 3 + 7 * 32))
    assert np.all(np.asarray(net.enc1.bias[...]) == 0)
    with pytest.raises(ValueError, match="multiple of 4"):
        tw.init_convae(3, 10)
    with pytest.raises(ValueError, match=r"expected \(B, 12, 3\)"):
        net(x[:, :8])
