"""One test per error row of docs/input_contracts.md (issue 29 item 7): each input that breaks a
public function's range, shape, dtype or count assumption raises a ValueError naming the problem.

Rows are ``(id, call, message regex)``; the call gets concrete (eager) values, since values can
only be checked there (under ``jit`` each function's documented traced behaviour applies; the
traced rules are tested beside each function). Keep each call small: the file runs in seconds.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fidia_jax import layers, losses, metrics, models, rl
from fidia_jax.errors import DataError

X = np.random.default_rng(0).normal(size=(6, 3)).astype(np.float32)
XN = np.where(X > 1, np.nan, X)
P2 = np.array([[0.2, 0.8], [0.5, 0.5]])
U = np.ones(6) / 6
IMG = np.random.default_rng(1).uniform(size=(8, 8))
BALL_OUT = jnp.full((3,), 0.8)  # norm 1.39 > 1 (c = 1)

ROWS = [
    # ---------------------------------------------------------------- metrics: image quality
    ("psnr: float image, no range", lambda: metrics.psnr(IMG, IMG), "need a declared range"),
    ("psnr: value outside range", lambda: metrics.psnr(255 * IMG, IMG, data_range=1.0),
     r"x has values in .* outside the declared range \[0, 1\]"),
    ("ssim: float image, no range", lambda: metrics.ssim(IMG, IMG), "need a declared range"),
    ("ssim: value outside range", lambda: metrics.ssim(IMG - 0.5, IMG, data_range=1.0),
     r"x has values in \[-0\.\d+, .* outside the declared range \[0, 1\]"),
    ("ssim: 3-D without channel_axis", lambda: metrics.ssim(np.zeros((9, 9, 3)), np.zeros((9, 9, 3)), data_range=1),
     "channel_axis=-1"),
    ("lpips: [-1, 1] input", lambda: metrics.lpips(np.full((1, 32, 32, 3), -0.5), np.zeros((1, 32, 32, 3))),
     r"lpips: x has values in \[-0.5, -0.5\], outside the declared range \[0, 1\]"),
    ("lpips: not (B, H, W, 3)", lambda: metrics.lpips(np.zeros((1, 32, 32)), np.zeros((1, 32, 32))),
     r"\(B, H, W, 3\)"),
    ("frechet_distance: NaN", lambda: metrics.frechet_distance(XN, X), "non-finite"),
    # ---------------------------------------------------------------- metrics: anomaly detection
    ("auc_pr: all normal", lambda: metrics.auc_pr(np.arange(4.0), np.zeros(4)), "single class"),
    ("auc_pr: all anomalous", lambda: metrics.auc_pr(np.arange(4.0), np.ones(4)), "single class"),
    ("best_f1_threshold: one class", lambda: metrics.best_f1_threshold(np.arange(4.0), np.zeros(4)),
     "single class"),
    ("auc_pr: non-finite score", lambda: metrics.auc_pr([0.1, np.nan], [0, 1]), "finite"),
    ("point_f1: labels not 0/1", lambda: metrics.point_f1([0, 1], [0, 2]), "only 0 and 1"),
    ("point_f1: shapes differ", lambda: metrics.point_f1([0, 1], [0, 1, 1]), "same shape"),
    ("threshold_at_ratio: ratio 0", lambda: metrics.threshold_at_ratio(np.arange(3.0), 0), r"\(0, 1\]"),
    # ---------------------------------------------------------------- metrics: others
    ("rmse: shapes differ", lambda: metrics.rmse(X, X[:, :2]), "shape"),
    ("pearson_r: shapes differ", lambda: metrics.pearson_r(np.ones(5), np.ones(4)), "shape"),
    ("effective_rank: not 2-D", lambda: metrics.effective_rank(X[0]), "2-D"),
    ("effective_rank: NaN", lambda: metrics.effective_rank(XN), "non-finite"),
    ("sqrt_pehe: shapes differ", lambda: metrics.sqrt_pehe(X, X[:, :2]), r"\(N, K\)"),
    ("continual_metrics: accuracy > 1", lambda: metrics.continual_metrics(np.full((2, 2), 1.5)),
     r"\[0, 1\]"),
    ("risk_coverage: inf error", lambda: metrics.area_under_risk_coverage(np.arange(3.0), [0, np.inf, 1]),
     "NaN or inf"),
    ("risk_coverage: shapes differ", lambda: metrics.area_under_risk_coverage(np.arange(3.0), [0, 1]),
     "equal 1-D"),
    ("ldl: negative entries", lambda: metrics.cosine(np.array([[-0.2, 1.2]]), P2[:1]), "negative"),
    ("ldl: shapes differ", lambda: metrics.chebyshev(P2, P2[:, :1]), "shape"),
    ("ldl: NaN", lambda: metrics.ldl_metrics(np.array([[np.nan, 1.0]]), P2[:1]), "NaN"),
    ("cluster_purity: lengths differ", lambda: metrics.cluster_purity([0, 1, 1], [0, 1]), "lengths differ"),
    ("knn_affinity: k > N", lambda: metrics.knn_affinity(X, 10), r"n_neighbors must be in \[1, N=6\]"),
    # ---------------------------------------------------------------- losses
    ("gaussian_kl: shapes differ", lambda: losses.gaussian_kl(X, X, X[:, :2], X[:, :2]), "one shape"),
    ("mmd2_linear: weights shape", lambda: losses.mmd2_linear(X, U[:5], U), r"weights must be \(6,\)"),
    ("mmd2_linear: negative weights", lambda: losses.mmd2_linear(X, -U, U), "summing to 1"),
    ("mmd2_rbf: weights sum 3", lambda: losses.mmd2_rbf(X, 3 * U, U), "summing to 1"),
    ("token_nll: weights shape", lambda: losses.token_nll(jnp.zeros((1, 4, 5)), jnp.zeros((1, 4), int), jnp.ones((1, 3))),
     "weights must have the tokens' shape"),
    ("token_nll: negative weights", lambda: losses.token_nll(jnp.zeros((1, 4, 5)), jnp.zeros((1, 4), int), -jnp.ones((1, 4))),
     "non-negative"),
    ("next_token_loss: id out of range", lambda: losses.next_token_loss(jnp.zeros((1, 4, 5)), jnp.array([[0, 1, 7, 2]])),
     r"token ids in \[0, 5\), got 7"),
    ("rectified_flow: t outside [0, 1]", lambda: losses.rectified_flow_interpolate(jnp.zeros((2, 4, 4, 1)), jnp.zeros((2, 4, 4, 1)), jnp.array([1.5, 0.2])),
     r"t must lie in \[0, 1\]"),
    ("rectified_flow: noise shape", lambda: losses.rectified_flow_interpolate(jnp.zeros((2, 4, 4, 1)), jnp.zeros((2, 4, 4, 2)), jnp.array([0.5, 0.2])),
     "noise shape"),
    # ---------------------------------------------------------------- layers
    ("apply_rope: odd D", lambda: layers.apply_rope(jnp.zeros((1, 3, 2, 5)), jnp.zeros((1, 3), int)), "D even"),
    ("apply_rope: positions shape", lambda: layers.apply_rope(jnp.zeros((1, 3, 2, 4)), jnp.zeros((1, 4), int)),
     r"positions must be \(B, T\)"),
    ("xla_attention: head dims differ", lambda: layers.xla_attention(jnp.zeros((1, 2, 2, 4)), jnp.zeros((1, 3, 2, 3)), jnp.zeros((1, 3, 2, 3)), causal=False),
     "head dims differ"),
    ("xla_attention: kv_lengths > S", lambda: layers.xla_attention(jnp.zeros((1, 2, 2, 4)), jnp.zeros((1, 3, 2, 4)), jnp.zeros((1, 3, 2, 4)), causal=False, kv_lengths=jnp.array([4])),
     r"\[0, 3\]"),
    ("attention_weights: head dims differ", lambda: layers.attention_weights(jnp.zeros((1, 2, 2, 4)), jnp.zeros((1, 3, 2, 3))),
     "head dims differ"),
    ("poincare: curvature <= 0", lambda: layers.expmap0(jnp.ones((2, 3)), -1.0), "c must be > 0"),
    ("poincare: point outside the ball", lambda: layers.poincare_distance(BALL_OUT, jnp.zeros(3)),
     "must lie inside the Poincaré ball"),
    ("poincare: mobius_add outside", lambda: layers.mobius_add(BALL_OUT, jnp.zeros(3)), "inside the Poincaré ball"),
    ("poincare: logmap0 outside", lambda: layers.logmap0(BALL_OUT), "inside the Poincaré ball"),
    ("poincare: coordinate axes differ", lambda: layers.poincare_distance(jnp.zeros((2, 3)), jnp.zeros((2, 4))),
     "share the last"),
    ("mobius_matvec: kernel shape", lambda: layers.mobius_matvec(jnp.zeros((3, 5)), jnp.zeros((2, 4))), r"\(D_in, D_out\)"),
    ("prototype_logits: D differs", lambda: layers.prototype_logits(jnp.zeros((2, 3)), jnp.zeros((4, 5)), 1.0),
     r"\(N, D\) and \(K, D\)"),
    ("nearest_code: code dim", lambda: layers.nearest_code(jnp.zeros((4, 3)), jnp.zeros((8, 5))), "code dimension 5"),
    ("resize_images: rank", lambda: layers.resize_images(jnp.zeros((4, 4, 1)), 2), "rank 4"),
    # ---------------------------------------------------------------- model inputs
    ("Llama: id out of range", lambda: models.Llama(models.LlamaConfig.tiny(), rngs=__import__("flax").nnx.Rngs(0))(jnp.array([[1, 300]])),
     r"token ids in \[0, 256\)"),
    ("check_token_ids: negative id", lambda: models.check_token_ids(jnp.array([0, -1]), 21, name="S", where="f"),
     r"token ids in \[0, 21\), got -1"),
]  # fmt: skip


@pytest.mark.parametrize(("call", "message"), [r[1:] for r in ROWS], ids=[r[0] for r in ROWS])
def test_broken_assumption_is_a_clear_error(call, message):
    with pytest.raises(ValueError, match=message):
        call()


# ---------------------------------------------------------------- methods (issue 41, deliver 4)
# One parametrized test per method: ``(case id, call, error type, the argument's name)``. The
# projects are imported inside the calls (``_p``), so a row costs only its own package's import.


def _p(name):
    import importlib

    return importlib.import_module(f"fidia_jax.projects.{name}")


def _cfg(name):
    m = _p(name)
    return m.get_config(next(iter(m.PRESETS)))


Y2 = np.arange(6) % 2
D4 = np.random.default_rng(2).dirichlet(np.ones(4), size=6)
IMG11 = np.random.default_rng(3).uniform(-1, 1, size=(4, 8, 8, 1)).astype(np.float32)
NAN_IMG = np.where(IMG11 > 0.9, np.nan, IMG11)
SERIES = np.random.default_rng(4).normal(size=(64, 2))
MRP = rl.LinearMRP(
    np.full((3, 3), 1 / 3, np.float32), np.zeros((3, 3), np.float32),
    np.eye(3, dtype=np.float32)[:, :2], np.float32(0.9),
)  # fmt: skip  # 3 states, d = 2 features

METHOD_ROWS = {
    "causal": [
        ("causal: NaN covariates", lambda: _p("causal").CausalData(XN, Y2, X[:, 0], None, 2), DataError, "covariates"),
        ("causal: covariates rank", lambda: _p("causal").CausalData(X[:, 0], Y2, X[:, 0], None, 2), DataError, "covariates"),
        ("causal: arm id out of range", lambda: _p("causal").CausalData(X, Y2 + 3, X[:, 0], None, 2), DataError, "treatments"),
    ],
    "fidia": [
        ("fidia: NaN reference component", lambda: _p("fidia").fit_standardizer({"sse": X[:, 0] * np.nan}), ValueError, "'sse'"),
        ("fidia: passes_n length", lambda: _p("fidia").success_at_n(np.ones(4), np.ones(3, bool), 2), ValueError, "passes_n"),
        ("fidia: passes_n not 0/1", lambda: _p("fidia").success_at_n(np.ones(4), np.full(4, 3), 2), DataError, "passes_n"),
        ("fidia: positions_L width", lambda: _p("fidia").mean_pairwise_identity(np.zeros((3, 5), int), np.ones(7, bool)), ValueError, "positions_L"),
    ],
    "hist": [
        ("hist: NaN features", lambda: _p("hist").check_finite_features(XN), DataError, "features"),
        ("hist: NaN feats (neighbour ridge)", lambda: _p("hist").neighbour_features(np.zeros((6, 2)) + np.arange(6)[:, None], XN), DataError, "feats"),
        ("hist: coords width", lambda: _p("hist").neighbour_features(X, X), ValueError, "coords"),
        ("hist: NaN y_pred", lambda: _p("hist").section_metrics(X, XN, 2), DataError, "y_pred"),
    ],
    "hitvar": [
        ("hitvar: hr outside [0, 1]", lambda: _p("hitvar").degrade(np.full((16, 16, 3), 200.0)), DataError, "hr"),
        ("hitvar: NaN hr", lambda: _p("hitvar").degrade(np.full((16, 16, 3), np.nan)), DataError, "hr"),
        ("hitvar: hr width", lambda: _p("hitvar").degrade(np.zeros((16, 16, 4))), ValueError, "image"),
        ("hitvar: NaN paired scores", lambda: _p("hitvar").paired_test(np.arange(4.0), np.r_[np.nan, 1, 2, 3]), ValueError, "b holds"),
    ],
    "hypcl": [
        ("hypcl: NaN x_tr", lambda: _p("hypcl").ContinualData(XN, Y2, X, Y2, [(0, 1)]), DataError, "x_tr"),
        ("hypcl: x_te width", lambda: _p("hypcl").ContinualData(X, Y2, X[:, :2], Y2, [(0, 1)]), DataError, "x_te"),
        ("hypcl: y_tr out of range", lambda: _p("hypcl").ContinualData(X, Y2 + 1, X, Y2, [(0, 1)]), DataError, "y_tr"),
        ("hypcl: fractional y_tr", lambda: _p("hypcl").ContinualData(X, Y2 + 0.5, X, Y2, [(0, 1)]), DataError, "y_tr"),
        ("hypcl: run_stream y rows", lambda: _p("hypcl").run_stream(X, Y2[:5], _cfg("hypcl"), ["ncm"], [[0, 1]], 1), DataError, "y"),
        ("hypcl: labels_B out of range", lambda: _p("hypcl").masked_cross_entropy(jnp.zeros((2, 3)), jnp.array([0, -1]), jnp.ones(3, bool)), ValueError, "labels_B"),
    ],
    "ldl": [
        ("ldl: NaN x_train", lambda: _p("ldl").fit_predict(XN, D4, X, np.ones(4), np.zeros(4), _cfg("ldl")), DataError, "x_train"),
        ("ldl: x_test width", lambda: _p("ldl").baseline_predict("aa_knn", X, D4, X[:, :2], k=2), ValueError, "x_test"),
        ("ldl: negative d_train", lambda: _p("ldl").baseline_predict("aa_knn", X, D4 - 0.5, X, k=2), DataError, "d_train"),
    ],
    "multifidelity": [
        ("multifidelity: NaN x_train", lambda: _p("multifidelity").MultiFidelityData(XN, X[:, 0], Y2, X, X[:, 0], ("hf", "lf")), DataError, "x_train"),
        ("multifidelity: x_test width", lambda: _p("multifidelity").MultiFidelityData(X, X[:, 0], Y2, X[:, :2], X[:, 0], ("hf", "lf")), DataError, "x_test"),
        ("multifidelity: fidelity out of range", lambda: _p("multifidelity").MultiFidelityData(X, X[:, 0], Y2 + 2, X, X[:, 0], ("hf", "lf")), DataError, "fidelity_train"),
    ],
    "optimizers": [
        ("optimizers: token id out of range", lambda: _p("optimizers").make_task(_cfg("optimizers"), tokens=(np.full(4096, 300), np.zeros(4096, int))), ValueError, "tokens[0]"),
        ("optimizers: tokens rank", lambda: _p("optimizers").make_task(_cfg("optimizers"), tokens=(np.zeros(4096, int), np.zeros((2, 2048), int))), ValueError, "tokens[1]"),
    ],
    "streamflow": [
        ("streamflow: NaN images_a", lambda: _p("streamflow").fd_proxy(NAN_IMG, IMG11), DataError, "images_a"),
        ("streamflow: image shapes differ", lambda: _p("streamflow").fd_proxy(IMG11, IMG11[:, :4]), ValueError, "images_b"),
        ("streamflow: images_b outside [-1, 1]", lambda: _p("streamflow").fd_proxy(IMG11, 255 * IMG11), DataError, "images_b"),
    ],
    "td": [
        ("td: theta0 width", lambda: _p("td").run_linear_td0(jax.random.key(0), MRP, lambda t: 0.1, 4, theta0=np.zeros(5)), ValueError, "theta0"),
        ("td: sparsity 2", lambda: _p("td").random_linear_mrp(jax.random.key(0), 6, 3, sparsity=2.0), ValueError, "sparsity"),
    ],
    "teamwork": [
        ("teamwork: NaN training series", lambda: _p("teamwork").fit_detector("pca", np.where(SERIES > 2, np.nan, SERIES), _cfg("teamwork")), DataError, "training series"),
        ("teamwork: NaN test scores", lambda: _p("teamwork").evaluate_scores([(np.r_[np.nan, np.arange(5.0)], Y2, None)], 0.1), DataError, "runs[0] test_scores"),
        ("teamwork: anomaly_ratio 2", lambda: _p("teamwork").evaluate_scores([(np.arange(6.0), Y2, None)], 2.0), DataError, "anomaly_ratio"),
    ],
    "varjepa": [
        ("varjepa: NaN z_train", lambda: _p("varjepa").probe(_cfg("varjepa"), XN, Y2, X, Y2), DataError, "z_train"),
        ("varjepa: z_test width", lambda: _p("varjepa").probe(_cfg("varjepa"), X, Y2, X[:, :2], Y2), ValueError, "z_test"),
        ("varjepa: y_train rows", lambda: _p("varjepa").probe(_cfg("varjepa"), X, Y2[:5], X, Y2), ValueError, "y_train"),
    ],
}  # fmt: skip


@pytest.mark.parametrize("method", sorted(METHOD_ROWS))
def test_method_bad_input_names_the_argument(method):
    """Each method's boundary: a NaN, a wrong width / rank and an out-of-range value raise the
    typed error (``fidia_jax.errors.DataError`` or ``ValueError``) whose message names the
    argument, before any training starts."""
    for case, call, error, arg in METHOD_ROWS[method]:
        with pytest.raises(error) as info:
            call()
        assert arg in str(info.value), (case, str(info.value))


def test_value_check_helpers():
    """_checks.assert_finite / assert_value_range: concrete values are checked (DataError naming
    the argument, the count, the first index / the range found); traced values pass."""
    from fidia_jax import _checks

    _checks.assert_finite(X, "x")
    _checks.assert_finite(np.arange(3), "ids")  # integers cannot hold NaN
    with pytest.raises(DataError, match=r"^f: x holds 2 NaN/inf value\(s\), first at index 1\.$"):
        _checks.assert_finite(np.array([0.0, np.inf, np.nan]), "x", where="f")
    _checks.assert_value_range(np.array([0.0, 1.0]), 0, 1, "p")
    with pytest.raises(
        DataError, match=r"^g: img must lie in \[0, 1\], got values in \[-1, 2\]\.$"
    ):
        _checks.assert_value_range(np.array([[-1.0, 2.0]]), 0, 1, "img", where="g")
    with pytest.raises(DataError, match=r"got values in \[0\.5, 0\.5\] and NaN"):
        _checks.assert_value_range(np.array([0.5, np.nan]), 0, 1, "p")
    with pytest.raises(DataError, match="got only NaN"):
        _checks.assert_value_range(np.array([np.nan]), 0, 1, "p")

    def traced(a):
        _checks.assert_finite(a, "a")
        _checks.assert_value_range(a, 0, 1, "a")
        return a

    assert np.isnan(np.asarray(jax.jit(traced)(jnp.array([np.nan, 3.0])))[0])


def test_every_row_is_in_the_docs_table():
    """docs/input_contracts.md lists each row of this file (by its id), and vice versa."""
    import pathlib

    doc = (pathlib.Path(__file__).parents[1] / "docs" / "input_contracts.md").read_text()
    cells = {
        line.split("|")[1].strip().strip("`") for line in doc.splitlines() if line.startswith("| `")
    }
    ids = {r[0] for r in ROWS} | {r[0] for rows in METHOD_ROWS.values() for r in rows}
    assert ids <= cells, sorted(ids - cells)


def test_traced_rules_do_not_raise():
    """Under jit the value checks cannot raise: the documented traced behaviour applies."""
    assert np.isnan(float(jax.jit(metrics.effective_rank)(jnp.asarray(XN))))
    w = jax.jit(lambda a: losses.mmd2_linear(jnp.asarray(X), a, jnp.asarray(U)))(-jnp.asarray(U))
    assert np.isfinite(float(w))  # traced weights are the caller's (a training step builds them)
