"""Frame2seq (inverse folding with invariant point attention) in Flax NNX, inference only.

A port of the forward pass of Frame2seq 0.0.8 (PyPI ``frame2seq``, MIT; files
``frame2seq/model/Frame2seq.py``, ``model/edge_update.py``, ``utils/featurize.py``,
``utils/rigid_utils.py``, ``openfold/model/structure_module.py``) in ``model.eval()`` mode: no
dropout, no attention dropout. The code is our own; the operations follow the torch code one by
one:

* single features: sinusoidal absolute position embedding (``single_dim`` channels) + cos/sin
  of the dihedrals phi, psi, omega; pair features: 24 Gaussian RBFs (centres
  ``linspace(0, 12, 24)`` Å, width 0.5 Å) of the 16 N/CA/C/CB distances of two residues (CB
  placed ideally, as Frame2seq's parser does) + one-hot relative position clipped to ±32;
* input sequence: 21-class one-hot -> linear, zeroed where the class is 20 (masked), LayerNorm,
  added to the single features;
* frames from N, CA, C by Gram-Schmidt; ``ipa_depth`` layers of OpenFold invariant point
  attention (4 query/key, 8 value points per head) + residual + LayerNorm, a transition (inside
  a ``st_mod_tsit_factor``-wide projection when > 1) and, except on the last layer, an edge
  transition (se3_diffusion's ``EdgeTransition``) on the pair features; a linear head to 21.

Vocabulary: Frame2seq's ``AA_TO_ID`` is ``ACDEFGHIKLMNPQRSTVWY`` + ``X`` (20), the same order
as ProteinMPNN's ``ACDEFGHIKLMNPQRSTVWYX``, so token ids pass through unchanged (the
permutation is the identity). Class 20 is both the input mask token and a 21st output class;
:class:`Frame2seq` returns the 20 amino-acid logits (or all 21 with ``with_unknown=True``).

Deliberate difference (padding): a dihedral that involves an atom of a slot with ``mask == 0``
is set to 0, as Frame2seq does at chain ends, and the coordinates of such slots are zeroed before
use. Frame2seq itself computes those angles from whatever coordinates the slot holds, so its
output for the residue next to a padded / missing slot depends on the padding; ours does not.
With every slot real (``mask`` all ones) the two are the same computation.

Precision: the network moves its logits by ~1e-4 per 1e-6 Å of input, so float32 results agree
with Frame2seq (whose coordinates are float64) to ~3e-3 in logits, and vary by as much with
XLA's choice of kernels; under ``jax.enable_x64`` the port agrees to ~2e-5 (see docs/frame2seq.md).

References:
  D. Akpinaroglu, K. Seki, A. Guo, E. Zhu, M. J. S. Kelly, T. Kortemme. Structure-conditioned
  masked language models for protein sequence design generalize beyond the native sequence
  space. bioRxiv 2023.12.15.571823. https://github.com/dakpinaroglu/Frame2seq
"""

from __future__ import annotations

import importlib.util
import math
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from fidia_jax.errors import CheckpointError, ConfigError
from fidia_jax.models._domain import check_token_ids, concrete
from fidia_jax.models._init import abstract_module
from fidia_jax.models._torch_checkpoint import load_torch_checkpoint

_INSTALL_HINT = "pip install --no-deps frame2seq==0.0.8"
_N_QK_POINTS, _N_V_POINTS = 4, 8  # hard-coded in Frame2seq.py (not read from its config)
_IPA_INF, _IPA_EPS = 1e5, 1e-8  # OpenFold IPA defaults inf = 1e5, eps = 1e-8
_RELPOS_K, _DIST_BINS, _DIST_BIN_WIDTH = 32, 24, 0.5  # Frame2seq.__init__
_UNKNOWN = 20  # class X: the mask token on input, a 21st class on output
_CONFIG_KEYS = ("ipa_depth", "ipa_dim", "ipa_heads", "ipa_pairwise_repr_dim", "sequence_dim", "single_dim",
                "st_mod_tsit_factor")  # fmt: skip


def frame2seq_checkpoint_path(index: int = 1) -> pathlib.Path:
    """Path of ``frame2seq/trained_models/model{index}.ckpt`` in the installed ``frame2seq`` wheel.

    The package is located with :func:`importlib.util.find_spec`, without importing it (its
    ``__init__`` imports torch).

    Args:
      index: 1, 2 or 3 (the three checkpoints of the Frame2seq ensemble).

    Returns:
      The ``.ckpt`` file (a PyTorch Lightning checkpoint, 12-40 MB).

    Raises:
      ConfigError: ``index`` not in 1..3.
      CheckpointError: the package or the file is missing (with the install hint
        ``pip install --no-deps frame2seq==0.0.8``).
    """
    if isinstance(index, bool) or index not in (1, 2, 3):
        raise ConfigError(f"Frame2seq checkpoint index must be 1, 2 or 3, got {index!r}")
    spec = importlib.util.find_spec("frame2seq")
    if spec is None or not spec.submodule_search_locations:
        raise CheckpointError(
            f"Frame2seq weights model{index}.ckpt not found: the 'frame2seq' package is not installed "
            f"(install its weights with `{_INSTALL_HINT}`) or pass path=..."
        )
    for loc in spec.submodule_search_locations:
        cand = pathlib.Path(loc) / "trained_models" / f"model{index}.ckpt"
        if cand.is_file():
            return cand
    raise CheckpointError(
        f"Frame2seq weights model{index}.ckpt not found in the installed frame2seq package "
        f"({list(spec.submodule_search_locations)}); try `{_INSTALL_HINT}` or pass path=..."
    )


# ----------------------------------------------------------------------------- geometry / features
def _normalize(v, eps=1e-12):
    """``torch.nn.functional.normalize``: ``v / max(|v|, eps)``."""
    return v / jnp.maximum(jnp.linalg.norm(v, axis=-1, keepdims=True), eps)


def _cb_local() -> tuple[np.float32, ...]:
    """The CB offset in the (N-CA, normal x (N-CA), normal) basis, in float32 as torch computes it."""
    length, planar, dihedral = np.float32(1.522), np.float32(1.927), np.float32(-2.143)
    return (length * np.cos(planar), length * np.sin(planar) * np.cos(dihedral),
            -length * np.sin(planar) * np.sin(dihedral))  # fmt: skip


_CB_D = _cb_local()


def _ideal_cb(n, ca, c):
    """Ideal C-beta as Frame2seq's parser places it, rounded to 1e-4 Å as the parser rounds it.

    ``place_missing_cb`` (``utils/place_ideal_atoms.py``; bond 1.522 Å, angle 1.927 rad,
    dihedral -2.143 rad from C, N, CA) puts a CB on every residue, and ``get_parsed_inputs``
    then rounds all coordinates to 4 decimals. The rounding is done on ``CA - floor(CA)`` plus
    the offset, to keep float32 error well below the 1e-4 Å grid (coordinates of PDB files
    are on a 1e-3 Å grid, so N, CA, C are unchanged by that rounding). Zero where undefined
    (NaN, e.g. padded slots), as Frame2seq does. Not differentiable (rounding).
    """
    bc = _normalize(n - ca, 0.0)
    nv = _normalize(jnp.cross(n - c, bc), 0.0)
    mv = (bc, jnp.cross(nv, bc), nv)
    offset = sum(m * float(d) for m, d in zip(mv, _CB_D, strict=True))
    whole = jnp.floor(ca)
    cb = whole + jnp.round((ca - whole) + offset, 4)
    return jnp.where(jnp.isnan(cb), 0.0, cb)


def _dihedral_features(x_BxLx3x3, mask_BxL):
    """``(B, L, 6)``: cos/sin of phi, psi, omega; 0 angle (cos 1, sin 0) where undefined."""
    b, l = mask_BxL.shape
    x = x_BxLx3x3.reshape(b, 3 * l, 3)
    u = _normalize(x[:, 1:] - x[:, :-1], 1e-12)
    u2, u1, u0 = u[:, :-2], u[:, 1:-1], u[:, 2:]
    n2 = _normalize(jnp.cross(u2, u1), 1e-12)
    n1 = _normalize(jnp.cross(u1, u0), 1e-12)
    cos_d = jnp.clip(jnp.sum(n2 * n1, -1), -1 + 1e-7, 1 - 1e-7)
    sgn = jnp.sign(jnp.sum(u2 * n1, -1))
    # cos(sign * acos(c)) = c and sin(sign * acos(c)) = sign * sqrt(1 - c^2), without acos
    # round trips; sign 0 gives the angle 0 as torch.sign does.
    cos_d = jnp.where(sgn == 0, 1.0, cos_d)
    sin_d = sgn * jnp.sqrt(jnp.maximum(1.0 - cos_d * cos_d, 0.0))
    pad = lambda a, v: jnp.pad(a, ((0, 0), (1, 2)), constant_values=v)  # noqa: E731
    cos_d, sin_d = pad(cos_d, 1.0).reshape(b, l, 3), pad(sin_d, 0.0).reshape(b, l, 3)
    m = mask_BxL.astype(bool)
    prev_ok = jnp.pad(m[:, :-1], ((0, 0), (1, 0)))  # phi_i uses residue i-1
    next_ok = jnp.pad(m[:, 1:], ((0, 0), (0, 1)))  # psi_i, omega_i use residue i+1
    ok = jnp.stack([prev_ok, next_ok, next_ok], -1)
    cos_d, sin_d = jnp.where(ok, cos_d, 1.0), jnp.where(ok, sin_d, 0.0)
    return jnp.concatenate([cos_d, sin_d], -1)


def _position_embedding(length: int, dim: int) -> np.ndarray:
    """Sinusoidal absolute position embedding ``(L, dim)`` (even channels sin, odd cos)."""
    div = np.exp(np.arange(0, dim, 2, dtype=np.float32) * np.float32(-(math.log(10000.0) / dim)))
    ang = np.arange(length, dtype=np.float32)[:, None] * div[None, :]
    pe = np.zeros((length, dim), np.float32)
    pe[:, 0::2], pe[:, 1::2] = np.sin(ang), np.cos(ang)
    return pe


def _pair_features(x4_BxLx4x3):
    """``(B, L, L, 16 * 24 + 65)``: RBFs of the 16 atom-pair distances, relative position one-hot."""
    b, l = x4_BxLx4x3.shape[:2]
    diff = x4_BxLx4x3[:, :, None, :, None] - x4_BxLx4x3[:, None, :, None, :]  # (B, L, L, 4, 4, 3)
    d = jnp.sqrt(jnp.sum(diff**2, -1))
    mu = jnp.linspace(0.0, _DIST_BINS * _DIST_BIN_WIDTH, _DIST_BINS).reshape(1, 1, 1, 1, 1, -1)
    rbf = jnp.exp(-(((d[..., None] - mu) / _DIST_BIN_WIDTH) ** 2))  # (B, L, L, 4, 4, 24)
    idx = np.arange(l)
    rel = np.clip(idx[:, None] - idx[None, :], -_RELPOS_K, _RELPOS_K) + _RELPOS_K
    relpos = np.eye(2 * _RELPOS_K + 1, dtype=np.float32)[rel]
    relpos = jnp.broadcast_to(relpos, (b, l, l, relpos.shape[-1]))
    return jnp.concatenate([rbf.reshape(b, l, l, -1), relpos], -1)


def _frames(x_BxLx3x3):
    """Gram-Schmidt frames (``Rigid.from_3_points(N, CA, C)``): rotations (columns e0, e1, e2), origins CA."""
    n, ca, c = x_BxLx3x3[..., 0, :], x_BxLx3x3[..., 1, :], x_BxLx3x3[..., 2, :]
    e0 = ca - n
    e0 = e0 / jnp.sqrt(jnp.sum(e0 * e0, -1, keepdims=True) + _IPA_EPS)
    e1 = c - ca
    e1 = e1 - e0 * jnp.sum(e0 * e1, -1, keepdims=True)
    e1 = e1 / jnp.sqrt(jnp.sum(e1 * e1, -1, keepdims=True) + _IPA_EPS)
    e2 = jnp.cross(e0, e1)
    return jnp.stack([e0, e1, e2], -1), ca


# ----------------------------------------------------------------------------- layers
def _ln(dim, rngs):
    return nnx.LayerNorm(dim, epsilon=1e-5, use_fast_variance=False, rngs=rngs)


class _IPA(nnx.Module):
    """OpenFold ``InvariantPointAttention`` (Algorithm 22 of AlphaFold 2), eval mode."""

    def __init__(self, c_s: int, c_z: int, c_hidden: int, heads: int, *, rngs: nnx.Rngs):
        self.c_hidden, self.heads = c_hidden, heads
        hc = c_hidden * heads
        self.linear_q = nnx.Linear(c_s, hc, rngs=rngs)
        self.linear_kv = nnx.Linear(c_s, 2 * hc, rngs=rngs)
        self.linear_q_points = nnx.Linear(c_s, heads * _N_QK_POINTS * 3, rngs=rngs)
        self.linear_kv_points = nnx.Linear(c_s, heads * (_N_QK_POINTS + _N_V_POINTS) * 3, rngs=rngs)
        self.linear_b = nnx.Linear(c_z, heads, rngs=rngs)
        self.head_weights = nnx.Param(jnp.zeros((heads,)))
        self.linear_out = nnx.Linear(heads * (c_z + c_hidden + 4 * _N_V_POINTS), c_s, rngs=rngs)

    def __call__(self, s_BxLxC, z_BxLxLxZ, rot_BxLx3x3, trans_BxLx3, mask_BxL):
        b, l, _ = s_BxLxC.shape
        h, c = self.heads, self.c_hidden

        def points(lin):  # torch.split into x|y|z blocks, stacked last, then the frame applied
            p = lin(s_BxLxC).reshape(b, l, 3, -1).swapaxes(-1, -2)  # (B, L, H*P, 3)
            p = jnp.einsum("blij,blpj->blpi", rot_BxLx3x3, p) + trans_BxLx3[:, :, None]
            return p.reshape(b, l, h, -1, 3)

        q = self.linear_q(s_BxLxC).reshape(b, l, h, c)
        kv = self.linear_kv(s_BxLxC).reshape(b, l, h, 2 * c)
        k, v = kv[..., :c], kv[..., c:]
        q_pts = points(self.linear_q_points)
        kv_pts = points(self.linear_kv_points)
        k_pts, v_pts = kv_pts[..., :_N_QK_POINTS, :], kv_pts[..., _N_QK_POINTS:, :]
        bias_BxLxLxH = self.linear_b(z_BxLxLxZ)
        a_BxHxLxL = jnp.einsum("bihc,bjhc->bhij", q, k) * math.sqrt(1.0 / (3 * c))
        a_BxHxLxL = a_BxHxLxL + math.sqrt(1.0 / 3) * jnp.transpose(bias_BxLxLxH, (0, 3, 1, 2))
        pt = jnp.sum((q_pts[:, :, None] - k_pts[:, None, :]) ** 2, -1)  # (B, L, L, H, P)
        w = jax.nn.softplus(self.head_weights[...]) * math.sqrt(
            1.0 / (3 * (_N_QK_POINTS * 9.0 / 2))
        )
        pt = -0.5 * jnp.sum(pt * w.reshape(1, 1, 1, h, 1), -1)  # (B, L, L, H)
        m = mask_BxL.astype(a_BxHxLxL.dtype)
        square = _IPA_INF * (m[:, :, None] * m[:, None, :] - 1.0)
        a_BxHxLxL = jax.nn.softmax(
            a_BxHxLxL + jnp.transpose(pt, (0, 3, 1, 2)) + square[:, None], axis=-1
        )
        o = jnp.einsum("bhij,bjhc->bihc", a_BxHxLxL, v).reshape(b, l, h * c)
        o_pt = jnp.einsum("bhij,bjhpx->bihpx", a_BxHxLxL, v_pts)  # global frame
        o_pt = jnp.einsum("blji,blhpj->blhpi", rot_BxLx3x3, o_pt - trans_BxLx3[:, :, None, None])
        o_pt_norm = jnp.sqrt(jnp.sum(o_pt**2, -1) + _IPA_EPS).reshape(b, l, -1)
        o_pt = o_pt.reshape(b, l, -1, 3)
        o_pair = jnp.einsum("bhij,bijz->bihz", a_BxHxLxL, z_BxLxLxZ).reshape(b, l, -1)
        cat = jnp.concatenate([o, o_pt[..., 0], o_pt[..., 1], o_pt[..., 2], o_pt_norm, o_pair], -1)
        return self.linear_out(cat)


class _Transition(nnx.Module):
    """OpenFold ``StructureModuleTransition`` with one layer: 3 linears (ReLU), residual, LayerNorm."""

    def __init__(self, c: int, *, rngs: nnx.Rngs):
        self.linear_1 = nnx.Linear(c, c, rngs=rngs)
        self.linear_2 = nnx.Linear(c, c, rngs=rngs)
        self.linear_3 = nnx.Linear(c, c, rngs=rngs)
        self.layer_norm = _ln(c, rngs)

    def __call__(self, s):
        y = self.linear_3(jax.nn.relu(self.linear_2(jax.nn.relu(self.linear_1(s)))))
        return self.layer_norm(y + s)


class _EdgeTransition(nnx.Module):
    """se3_diffusion ``EdgeTransition`` (2 trunk layers, node dilation 2) as in ``model/edge_update.py``."""

    def __init__(self, c_s: int, c_z: int, *, rngs: nnx.Rngs):
        nb = c_s // 2
        hid = 2 * nb + c_z
        self.initial_embed = nnx.Linear(c_s, nb, rngs=rngs)
        self.trunk_0 = nnx.Linear(hid, hid, rngs=rngs)
        self.trunk_2 = nnx.Linear(hid, hid, rngs=rngs)
        self.final_layer = nnx.Linear(hid, c_z, rngs=rngs)
        self.layer_norm = _ln(c_z, rngs)

    def __call__(self, s_BxLxC, z_BxLxLxZ):
        n = self.initial_embed(s_BxLxC)
        b, l, nb = n.shape
        e = jnp.concatenate(
            [
                z_BxLxLxZ,
                jnp.broadcast_to(n[:, :, None], (b, l, l, nb)),
                jnp.broadcast_to(n[:, None], (b, l, l, nb)),
            ],
            -1,
        )
        t = jax.nn.relu(self.trunk_2(jax.nn.relu(self.trunk_0(e))))
        return self.layer_norm(self.final_layer(t + e))


class _Block(nnx.Module):
    """One Frame2seq layer: IPA + residual + LayerNorm, transition, optional edge transition."""

    def __init__(self, cfg: dict, last: bool, *, rngs: nnx.Rngs):
        d, zd, f = cfg["ipa_dim"], cfg["ipa_pairwise_repr_dim"], cfg["st_mod_tsit_factor"]
        self.ipa = _IPA(d, zd, d // cfg["ipa_heads"], cfg["ipa_heads"], rngs=rngs)
        self.layer_norm_ipa = _ln(d, rngs)
        self.pre_transit = nnx.Linear(d, d * f, rngs=rngs) if f > 1 else None
        self.transition = _Transition(d * f, rngs=rngs)
        self.post_transit = nnx.Linear(d * f, d, rngs=rngs) if f > 1 else None
        self.edge_transition = None if last else _EdgeTransition(d, zd, rngs=rngs)

    def __call__(self, s, z, rot, trans, mask):
        s = self.layer_norm_ipa(s + self.ipa(s, z, rot, trans, mask))
        if self.pre_transit is not None:
            s = self.post_transit(self.transition(self.pre_transit(s)))
        else:
            s = self.transition(s)
        if self.edge_transition is not None:
            z = self.edge_transition(s, z)
        return s, z


class Frame2seq(nnx.Module):
    """Frame2seq inverse-folding network (one checkpoint of the ensemble), inference only.

    Args:
      config: the model sizes, as in the checkpoint's ``hyper_parameters["config"]``: keys
        ``ipa_depth``, ``ipa_dim``, ``ipa_heads``, ``ipa_pairwise_repr_dim``, ``sequence_dim``
        (21), ``single_dim`` (must equal ``ipa_dim``), ``st_mod_tsit_factor``.
      rngs: initialisation randomness (the weights are replaced by :func:`load_frame2seq`).

    Raises:
      ConfigError: a key is missing or the sizes are inconsistent.
    """

    def __init__(self, config: dict, *, rngs: nnx.Rngs):
        missing = [k for k in _CONFIG_KEYS if k not in config]
        if missing:
            raise ConfigError(f"Frame2seq config lacks {missing}")
        cfg = {k: int(config[k]) for k in _CONFIG_KEYS}
        bad = cfg["single_dim"] != cfg["ipa_dim"] or cfg["ipa_dim"] % cfg["ipa_heads"]
        if bad or cfg["sequence_dim"] != 21:
            raise ConfigError(f"inconsistent Frame2seq config {cfg}")
        self.config = cfg
        sd, zd = cfg["single_dim"], cfg["ipa_pairwise_repr_dim"]
        self.sequence_to_single = nnx.Linear(6 + sd, sd, rngs=rngs)
        self.edge_to_pair = nnx.Linear(16 * _DIST_BINS + 2 * _RELPOS_K + 1, zd, rngs=rngs)
        self.single_to_sequence = nnx.Linear(sd, cfg["sequence_dim"], rngs=rngs)
        self.input_sequence_to_single = nnx.Linear(cfg["sequence_dim"], sd, rngs=rngs)
        self.input_sequence_layer_norm = _ln(sd, rngs)
        depth = cfg["ipa_depth"]
        self.layers = nnx.List([_Block(cfg, i == depth - 1, rngs=rngs) for i in range(depth)])

    def __call__(self, X, mask, input_tokens, *, with_unknown: bool = False) -> jax.Array:
        """Per-residue logits of the amino acid given the backbone and the visible sequence.

        Args:
          X: ``(B, L, 3, 3)`` or ``(B, L, 4, 3)`` float32 backbone coordinates in Å, atoms N, CA,
            C (a 4th atom, O, is ignored: Frame2seq uses an ideal CB and no O).
          mask: ``(B, L)`` bool/0-1; 0 marks padding (or a missing residue): those slots neither
            attend nor are attended to, and dihedrals touching them are set to 0 (module doc).
          input_tokens: ``(B, L)`` int, ProteinMPNN ids ``ACDEFGHIKLMNPQRSTVWYX``; 20 (X) = masked
            (unknown) residue, any other id is a residue the model sees. Concrete ids outside
            ``[0, 21)`` raise; traced ones make that row's outputs NaN.
          with_unknown: return Frame2seq's 21 classes (index 20 = its X class) instead of 20.

        Returns:
          ``(B, L, 20)`` float32 logits in the order ``ACDEFGHIKLMNPQRSTVWY`` (``(B, L, 21)`` with
          ``with_unknown``). Values at ``mask == 0`` slots are meaningless.

        Raises:
          ValueError: wrong ranks/shapes, or concrete token ids outside ``[0, 21)``.
        """
        X = jnp.asarray(X)
        X = X.astype(jnp.result_type(X.dtype, jnp.float32))  # float32 (float64 kept under x64)
        if X.ndim != 4 or X.shape[2] not in (3, 4) or X.shape[3] != 3:
            raise ValueError(f"Frame2seq: X must be (B, L, 3|4, 3), got {X.shape}")
        b, l = X.shape[:2]
        if jnp.shape(mask) != (b, l) or jnp.shape(input_tokens) != (b, l):
            shapes = f"mask {jnp.shape(mask)} and input_tokens {jnp.shape(input_tokens)}"
            raise ValueError(f"Frame2seq: {shapes} must be {(b, l)}")
        tokens = check_token_ids(input_tokens, 21, name="input_tokens", where="Frame2seq")
        m = jnp.asarray(mask).astype(bool)
        x = jnp.where(m[:, :, None, None], X[:, :, :3], 0.0)
        x4 = jnp.concatenate([x, _ideal_cb(x[:, :, 0], x[:, :, 1], x[:, :, 2])[:, :, None]], 2)
        return self._logits_from_atoms(x4, m, tokens, with_unknown)

    def _logits_from_atoms(self, x4_BxLx4x3, m, tokens, with_unknown: bool = False) -> jax.Array:
        """The network on N, CA, C, CB (already masked and checked): ``(B, L, 20|21)`` logits."""
        x, (b, l), sd = x4_BxLx4x3[:, :, :3], m.shape, self.config["single_dim"]
        eye = jnp.eye(21, dtype=jnp.float32)
        onehot = jnp.take(
            eye, tokens, axis=0, mode="fill", fill_value=jnp.nan
        )  # traced bad id: NaN
        seen = (tokens != _UNKNOWN)[..., None].astype(jnp.float32)
        pos = jnp.broadcast_to(_position_embedding(l, sd), (b, l, sd))
        s = self.sequence_to_single(jnp.concatenate([pos, _dihedral_features(x, m)], -1))
        s = s + self.input_sequence_layer_norm(self.input_sequence_to_single(onehot) * seen)
        z = self.edge_to_pair(_pair_features(x4_BxLx4x3))
        rot, trans = _frames(x)
        for layer in self.layers:
            s, z = layer(s, z, rot, trans, m)
        logits = self.single_to_sequence(s)
        return logits if with_unknown else logits[..., :_UNKNOWN]


# ----------------------------------------------------------------------------- weights
def _set(var: nnx.Variable, arr: np.ndarray, key: str) -> None:
    if var.shape != arr.shape:
        raise CheckpointError(f"Frame2seq weight {key}: shape {arr.shape} does not fit {var.shape}")
    var.set_value(jnp.asarray(arr))


def _linear(mod: nnx.Linear, sd: dict, key: str) -> None:
    _set(mod.kernel, sd.pop(f"{key}.weight").T, f"{key}.weight (transposed)")
    _set(mod.bias, sd.pop(f"{key}.bias"), f"{key}.bias")


def _norm(mod: nnx.LayerNorm, sd: dict, key: str) -> None:
    _set(mod.scale, sd.pop(f"{key}.weight"), f"{key}.weight")
    _set(mod.bias, sd.pop(f"{key}.bias"), f"{key}.bias")


def _assign(model: Frame2seq, state_dict: dict) -> None:
    """Copy a Frame2seq torch ``state_dict`` (numpy, torch layout) into ``model``.

    Key map: top-level linears and ``input_sequence_layer_norm`` keep their names; layer ``i`` is
    ``layers.i.{0: ipa, 2: layer_norm_ipa, 3: transition | (3: pre_transit, 4: transition,
    5: post_transit), 4|6: edge_transition}`` (index 1 is the parameter-free dropout); the edge
    transition's ``trunk.0`` / ``trunk.2`` are ``trunk_0`` / ``trunk_2``; ``Linear.weight``
    ``(out, in)`` is transposed into ``kernel``.
    """
    sd = dict(state_dict)
    for (
        key
    ) in "sequence_to_single edge_to_pair single_to_sequence input_sequence_to_single".split():
        _linear(getattr(model, key), sd, key)
    _norm(model.input_sequence_layer_norm, sd, "input_sequence_layer_norm")
    f = model.config["st_mod_tsit_factor"]
    for i, blk in enumerate(model.layers):
        p = f"layers.{i}"
        for (
            key
        ) in "linear_q linear_kv linear_q_points linear_kv_points linear_b linear_out".split():
            _linear(getattr(blk.ipa, key), sd, f"{p}.0.{key}")
        _set(blk.ipa.head_weights, sd.pop(f"{p}.0.head_weights"), f"{p}.0.head_weights")
        _norm(blk.layer_norm_ipa, sd, f"{p}.2")
        t = f"{p}.4" if f > 1 else f"{p}.3"
        if f > 1:
            _linear(blk.pre_transit, sd, f"{p}.3")
            _linear(blk.post_transit, sd, f"{p}.5")
        for key in ("linear_1", "linear_2", "linear_3"):
            _linear(getattr(blk.transition, key), sd, f"{t}.layers.0.{key}")
        _norm(blk.transition.layer_norm, sd, f"{t}.layer_norm")
        if blk.edge_transition is not None:
            e, et = f"{p}.6" if f > 1 else f"{p}.4", blk.edge_transition
            for key, name in (("initial_embed", "initial_embed"), ("trunk_0", "trunk.0"),
                              ("trunk_2", "trunk.2"), ("final_layer", "final_layer")):  # fmt: skip
                _linear(getattr(et, key), sd, f"{e}.{name}")
            _norm(et.layer_norm, sd, f"{e}.layer_norm")
    if sd:
        raise CheckpointError(
            f"Frame2seq checkpoint has {len(sd)} unused entries, e.g. {sorted(sd)[:3]}"
        )


def load_frame2seq(index: int = 1, *, path=None) -> Frame2seq:
    """Build a :class:`Frame2seq` with the weights of ``model{index}.ckpt`` (numpy reader, no torch).

    The sizes come from the checkpoint's ``hyper_parameters["config"]`` (model 1: 8 IPA layers of
    width 128, 4 heads, transition factor 1; models 2 and 3: factor 4).

    Args:
      index: 1, 2 or 3 (ignored when ``path`` is given).
      path: explicit ``.ckpt`` file.

    Returns:
      The model (float32 parameters).

    Raises:
      ConfigError: ``index`` not in 1..3.
      CheckpointError: the file is missing (install hint), is not a Frame2seq Lightning
        checkpoint, or its weights do not fit the configured sizes.
      UnsafePickleError: the pickle references anything outside the reader's allow-list.
    """
    file = pathlib.Path(path) if path is not None else frame2seq_checkpoint_path(index)
    obj = load_torch_checkpoint(file)
    try:
        config = obj["hyper_parameters"]["config"]
        state_dict = obj["state_dict"]
    except (TypeError, KeyError):
        raise CheckpointError(
            f"{file}: not a Frame2seq Lightning checkpoint (no hyper_parameters.config / state_dict)"
        ) from None
    # Built abstractly (no random initialisation, which costs seconds eagerly), then every
    # variable is replaced by a checkpoint array; _assign fails if any entry is left over.
    model = abstract_module(lambda rngs: Frame2seq(config, rngs=rngs))
    _assign(model, state_dict)
    leftover = [
        k for k, v in nnx.to_flat_state(nnx.state(model)) if not isinstance(v[...], jax.Array)
    ]
    if leftover:
        raise CheckpointError(f"{file}: no checkpoint weight for {leftover[:3]}")
    return model


# ----------------------------------------------------------------------------- scoring
def frame2seq_log_probs(
    models, X, mask, input_tokens=None, *, renormalize: bool = False
) -> jax.Array:
    """Ensemble log-probabilities, as Frame2seq's ``score`` / ``design`` (``utils/score.py``).

    Frame2seq's scoring path: every position's input class is set to 20 (masked; ``input_tokens
    = None`` here), the three models' 21-class logits are **averaged** (logits, not
    probabilities), divided by the temperature 1.0, and put through a softmax over all 21
    classes; the score of a sequence is ``-log p`` of its residues. ``design(fixed_positions=...)``
    is the same with the fixed residues visible: pass them in ``input_tokens`` (20 elsewhere).

    Args:
      models: one :class:`Frame2seq` or a sequence of them (Frame2seq's ensemble: models 1-3).
      X: ``(B, L, 3|4, 3)`` float32 Å, atoms N, CA, C (O ignored).
      mask: ``(B, L)`` bool, 0 = padding.
      input_tokens: ``(B, L)`` int ProteinMPNN ids (20 = masked); ``None`` = all masked.
      renormalize: ``False`` (default) reproduces Frame2seq: the softmax runs over its 21
        classes and the X column is dropped, so the 20 probabilities sum to ``1 - p(X)`` (p(X)
        is small for trained models). ``True``: softmax over the 20 amino-acid logits only.

    Returns:
      ``(B, L, 20)`` float32 log-probabilities (nats), order ``ACDEFGHIKLMNPQRSTVWY``.

    Raises:
      ValueError: as :meth:`Frame2seq.__call__`, or an empty ``models``.
    """
    models = [models] if isinstance(models, Frame2seq) else list(models)
    if not models:
        raise ValueError("frame2seq_log_probs: models is empty")
    if input_tokens is None:
        input_tokens = jnp.full(jnp.shape(mask), _UNKNOWN, jnp.int32)
    logits = sum(m(X, mask, input_tokens, with_unknown=True) for m in models) / len(models)
    if renormalize:
        return jax.nn.log_softmax(logits[..., :_UNKNOWN], -1)
    return jax.nn.log_softmax(logits, -1)[..., :_UNKNOWN]


def frame2seq_sequence_log_likelihood(log_probs_BxLx20, seqs_BxNxL, positions_BxL) -> jax.Array:
    """Mean log-likelihood per scored residue of ``N`` sequences per backbone (nats / residue).

    ``ll[b, n] = sum_l pos[b, l] * log_probs[b, l, seqs[b, n, l]] / sum_l pos[b, l]``; Frame2seq's
    ``avg_neg_pll`` is ``-ll`` with ``pos`` = the parsed residues.

    Args:
      log_probs_BxLx20: ``(B, L, 20)`` float log-probabilities (:func:`frame2seq_log_probs`).
      seqs_BxNxL: ``(B, N, L)`` int ProteinMPNN ids; 20 (X) allowed only where not scored.
      positions_BxL: ``(B, L)`` bool/0-1, the residues to score (e.g. the mask, or the designed
        positions only).

    Returns:
      ``(B, N)`` float32. A row with no scored position gives NaN (raises when concrete).

    Raises:
      ValueError: wrong shapes; concrete ids outside ``[0, 21)``; a concrete 20 (X) at a scored
        position; a concrete row with no scored position. Traced: an X or out-of-range id at a
        scored position gives NaN.
    """
    lp = jnp.asarray(log_probs_BxLx20)
    if lp.ndim != 3 or lp.shape[-1] != 20:
        raise ValueError(
            f"frame2seq_sequence_log_likelihood: log_probs must be (B, L, 20), got {lp.shape}"
        )
    b, l, _ = lp.shape
    if (
        jnp.ndim(seqs_BxNxL) != 3
        or jnp.shape(seqs_BxNxL)[::2] != (b, l)
        or jnp.shape(positions_BxL) != (b, l)
    ):
        raise ValueError(
            f"frame2seq_sequence_log_likelihood: seqs {jnp.shape(seqs_BxNxL)} must be (B, N, L) and positions "
            f"{jnp.shape(positions_BxL)} (B, L) with (B, L) = {(b, l)}"
        )
    seqs = check_token_ids(seqs_BxNxL, 21, name="seqs", where="frame2seq_sequence_log_likelihood")
    pos = jnp.asarray(positions_BxL).astype(bool)
    hs, hp = concrete(seqs_BxNxL), concrete(positions_BxL)
    if hs is not None and hp is not None:
        bad = (hs == _UNKNOWN) & hp.astype(bool)[:, None, :]
        if bad.any():
            raise ValueError(
                f"frame2seq_sequence_log_likelihood: token 20 (X) at scored position {tuple(np.argwhere(bad)[0])}"
            )
        if not hp.astype(bool).any(-1).all():
            raise ValueError("frame2seq_sequence_log_likelihood: a backbone has no scored position")
    # ids 20 (X) and 21 (check_token_ids' traced out-of-range marker) fall off the 20 columns: NaN
    picked = jnp.take_along_axis(lp[:, None], seqs[..., None], -1, mode="fill", fill_value=jnp.nan)[
        ..., 0
    ]
    total = jnp.sum(jnp.where(pos[:, None], picked, 0.0), -1)
    return total / jnp.sum(pos, -1, dtype=lp.dtype)[:, None]


__all__ = [
    "Frame2seq",
    "frame2seq_checkpoint_path",
    "frame2seq_log_probs",
    "frame2seq_sequence_log_likelihood",
    "load_frame2seq",
]
