"""VAR's multi-scale residual quantiser against the authors' code (VARSR ``models/quant.py``).

Fixture: ``tests/data/varsr/varsr_quant.{npz,json}``, made by ``tools/varsr_make_fixture.py``
from github qyp2000/VARSR @ eca07cecaf42c020cb7aa4cd594928c659ad7ce3 (torch 2.13.0, CPU).

Tolerances: token indices exactly. Float maps: both sides compute in float32; per scale an
output value is a sum of at most 16 bicubic products (two 4-tap passes here) and a 3x3xD
convolution (``9 D`` products, a bias and the ``Phi`` mix), so each scale adds at most about
``(9 D + 16)`` roundings of the map's magnitude, and ``K`` scales accumulate:
``atol = K (9 D + 16) eps_f32 max(1, max|expected|)``. Stand-alone resizes: ``16 eps_f32``
times the input's magnitude (at most 16 products).
"""

import json
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from fidia_jax import layers
from fidia_jax.layers import _quantize

DATA = pathlib.Path(__file__).resolve().parents[1] / "data" / "varsr"
EPS = float(np.finfo(np.float32).eps)
META = json.loads((DATA / "varsr_quant.json").read_text())
CASES = {c["name"]: c for c in META["cases"]}


@pytest.fixture(scope="module")
def fx():
    with np.load(DATA / "varsr_quant.npz") as d:
        return {k: d[k] for k in d.files}


def _nhwc(x):
    return np.transpose(x, (0, 2, 3, 1))


def _case(fx, name):
    c = CASES[name]
    p = f"{name}/"
    f = jnp.asarray(_nhwc(fx[p + "f"]))
    cb = jnp.asarray(fx[p + "codebook"])
    phi = None
    if p + "phi_kernel" in fx:  # torch (P, C_out, C_in, 3, 3) -> HWIO (P, 3, 3, C_in, C_out)
        phi = (
            jnp.asarray(np.transpose(fx[p + "phi_kernel"], (0, 3, 4, 2, 1))),
            jnp.asarray(fx[p + "phi_bias"]),
        )
    grids = tuple(c["v_patch_nums"])
    tol = len(grids) * (9 * c["Cvae"] + 16) * EPS
    return c, p, f, cb, phi, grids, tol


def _close(got, want, tol):
    want = np.asarray(want)
    np.testing.assert_allclose(
        np.asarray(got), want, rtol=0, atol=tol * max(1.0, float(np.abs(want).max()))
    )


@pytest.mark.parametrize("name", list(CASES))
def test_tokenisation_matches_f_to_idxBl_or_fhat(fx, name):
    from fidia_jax.projects.hitvar.model import next_scale_inputs

    c, p, f, cb, phi, grids, tol = _case(fx, name)
    ratio, h, n = c["quant_resi"], grids[-1], len(grids)
    idx = [jnp.asarray(fx[p + f"idx_{k}"]) for k in range(n)]

    @jax.jit
    def run(f, cb, phi, idx):
        def quant(last):
            return layers.multiscale_residual_quantize(
                f, cb, grids, phi=phi, phi_ratio=ratio, phi_last=last
            )

        codes, prefixes, residuals = quant(False)
        b = f.shape[0]
        return {
            "codes": codes,
            "prefixes": prefixes,
            "rest": residuals[-1].reshape(b, h * h, -1),
            # phi_last=True through the quantiser too (small schedules: compile time)
            "forward": quant(True)[1][-1] if n <= 4 else None,
            "embed_to_fhat": layers.tokens_to_latent(
                idx, cb, h, phi=phi, phi_ratio=ratio, phi_last=True
            ),
            "latent": [
                layers.tokens_to_latent(idx, cb, h, k, phi=phi, phi_ratio=ratio) for k in (1, n)
            ],
            "next_scale_inputs": next_scale_inputs(prefixes, grids)[:, grids[0] ** 2 :],
        }

    out = run(f, cb, phi, idx)
    # tokenisation (``f_to_idxBl_or_fhat``): indices exactly, prefix sums, last residual
    for k in range(n):
        np.testing.assert_array_equal(np.asarray(out["codes"][k]), fx[p + f"idx_{k}"])
        if p + f"fhat_{k}" in fx:
            _close(out["prefixes"][k], _nhwc(fx[p + f"fhat_{k}"]), tol)
    _close(out["rest"], fx[p + "f_rest_last"], tol)
    # VQ-VAE training (``forward``) and decoding of token embeddings (``embed_to_fhat``): Phi
    # at every scale, the last included (the same codes, so the same map)
    for want in (fx[p + "fhat_forward"], fx[p + "fhat_embed_to_fhat"]):
        _close(out["embed_to_fhat"], _nhwc(want), tol)
        if out["forward"] is not None:
            _close(out["forward"], _nhwc(want), tol)
    # with the default (Phi skipped at the last scale) tokens_to_latent is the tokeniser's sum
    for k, lat in zip((1, n), out["latent"], strict=True):
        _close(lat, out["prefixes"][k - 1], tol)
    # teacher-forcing inputs of scales 2..K (``idxBl_to_var_input``): area-down of the prefixes
    _close(out["next_scale_inputs"], fx[p + "var_input"], tol)


def test_phi_sharing_rule_matches_authors_ticks():
    for c in META["cases"]:
        n = len(c["v_patch_nums"])
        got = [_quantize._phi_index(k, n, c["num_phi"]) for k in range(n)]
        np.testing.assert_array_equal(got, c["phi_of_scale"], err_msg=c["name"])
    with pytest.raises(ValueError, match="at least 2 scales"):
        _quantize._phi_index(0, 1, 4)


def test_area_and_bicubic_match_torch_interpolate(fx):
    x = _nhwc(fx["area/x"])
    cases = [("area", *c) for c in META["area_cases"]] + [
        ("bicubic", *c) for c in META["bicubic_cases"]
    ]

    @jax.jit
    def run(x):
        return [layers.resize_grid(x[:, :n_in, :n_in], n_out) for _, n_in, n_out in cases]

    for (mode, n_in, n_out), got in zip(cases, run(jnp.asarray(x)), strict=True):
        _close(got, _nhwc(fx[f"{mode}/{n_in}_{n_out}"]), 16 * EPS)


def test_jax_cubic_is_not_torch_bicubic(fx):
    # jax.image.resize("cubic"): Keys a = -0.5 and renormalised borders; torch: a = -0.75 and
    # repeated borders. The option "cubic" keeps jax's rule; it must differ well beyond rounding
    x = _nhwc(fx["area/x"])
    for n_in, n_out in ((5, 16), (3, 8)):
        want = _nhwc(fx[f"bicubic/{n_in}_{n_out}"])
        xs = jnp.asarray(x[:, :n_in, :n_in])
        jax_cubic = jax.image.resize(xs, (1, n_out, n_out, xs.shape[-1]), "cubic")
        np.testing.assert_allclose(
            layers.resize_grid(xs, n_out, up="cubic"), jax_cubic, rtol=0, atol=1e-5
        )
        assert np.abs(np.asarray(jax_cubic) - want).max() > 1e-2


def test_bad_modes_and_phi_shapes_are_named():
    f = jnp.zeros((1, 4, 4, 3))
    cb = jnp.zeros((8, 3))
    with pytest.raises(ValueError, match="up in"):
        layers.resize_grid(f, 2, up="nearest")
    with pytest.raises(ValueError, match="phi kernels must be"):
        layers.multiscale_residual_quantize(
            f, cb, (1, 2, 4), phi=(jnp.zeros((2, 3, 3, 3, 4)), jnp.zeros((2, 3)))
        )
