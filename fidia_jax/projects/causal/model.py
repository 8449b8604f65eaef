"""Treatment-effect networks: TARNet/CFR with K outcome heads, CausalEGM, multi-treatment CausalEGM.

References:
  Shalit, Johansson, Sontag, "Estimating individual treatment effect: generalization bounds and
  algorithms", ICML 2017 (TARNet, CFR), https://arxiv.org/abs/1606.03976.
  Liu, Chen, Wong, Jiang, "CausalEGM: an encoding generative modeling approach to dimension
  reduction and covariate adjustment in causal inference with observational studies", PNAS 2024;
  authors' MIT package ``causalegm`` 0.4.0 (``CausalEGM/model.py``, ``causalEGM.py``,
  ``cli.py``), https://github.com/SUwonglab/CausalEGM.
  Liang, Chi, Zhang, "Causal representation learning with optimal compression under complex
  treatments", ICML 2026, https://arxiv.org/abs/2603.11907 (abstract only: the multi-treatment
  CausalEGM's treatment embedding here is **our reconstruction**).
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from fidia_jax.models import MLP

__all__ = [
    "CausalEGM",
    "DenseStack",
    "TARNet",
    "WganCritic",
    "arm_embedding_w2",
    "gaussian_w2_distances",
]

_GLOROT = nnx.initializers.glorot_uniform()  # Keras Dense default (the authors' TF nets)


class TARNet(nnx.Module):
    """TARNet / CFR: a shared representation ``Phi(x)`` and one outcome head per arm.

    CFR is TARNet trained with an IPM penalty on ``Phi`` (:mod:`~.losses` balancing
    losses); the network is the same. ELU activations as in the CFR code.

    Args:
      in_features: covariate width ``D``.
      num_arms: ``K >= 1`` heads.
      rep_hidden: widths of ``Phi`` (its last width is the representation size ``R``).
      head_hidden: hidden widths of each head.
      rngs: ``nnx.Rngs`` with ``params``.

    Call: ``model(x_NxD) -> (mu_hat_NxK, phi_NxR)``: every arm's predicted outcome.

    Raises:
      ValueError: ``num_arms < 1`` or an empty ``rep_hidden``.
    """

    def __init__(
        self,
        in_features: int,
        num_arms: int,
        *,
        rep_hidden: Sequence[int] = (200, 200, 200),
        head_hidden: Sequence[int] = (100, 100),
        rngs: nnx.Rngs,
    ):
        if num_arms < 1:
            raise ValueError(f"TARNet: num_arms must be >= 1, got {num_arms}")
        if not rep_hidden:
            raise ValueError("TARNet: rep_hidden needs at least one width")
        self.num_arms = num_arms
        self.phi = MLP(
            in_features, tuple(rep_hidden[:-1]), rep_hidden[-1], activation=jax.nn.elu, rngs=rngs
        )
        self.heads = nnx.List(
            [
                MLP(rep_hidden[-1], tuple(head_hidden), 1, activation=jax.nn.elu, rngs=rngs)
                for _ in range(num_arms)
            ]
        )

    def __call__(self, x_NxD):
        phi_NxR = jax.nn.elu(self.phi(x_NxD))
        mu_NxK = jnp.concatenate([head(phi_NxR) for head in self.heads], axis=-1)
        return mu_NxK, phi_NxR


class DenseStack(MLP):
    """The authors' ``BaseFullyConnectedNet``: ``Dense -> LeakyReLU(0.2)`` per width, then ``Dense``.

    A :class:`fidia_jax.models.MLP` with Glorot-uniform kernels and zero biases (Keras
    defaults); no batch norm (the package's default ``batchnorm=False``). The package attaches an
    L2 kernel regulariser (2.5e-5) but its custom training step never adds ``model.losses``, so
    it has no effect and is left out.

    Call: ``net(x_BxI) -> y_BxO``.
    """

    def __init__(
        self, in_features: int, hidden: Sequence[int], out_features: int, *, rngs: nnx.Rngs
    ):
        super().__init__(
            in_features,
            hidden,
            out_features,
            activation=_leaky_relu_02,
            kernel_init=_GLOROT,
            rngs=rngs,
        )


def _leaky_relu_02(x):
    return jax.nn.leaky_relu(x, 0.2)


class WganCritic(nnx.Module):
    """The authors' ``Discriminator``: ``Dense -> BatchNorm -> tanh`` per width, then ``Dense(1)``.

    Batch norm always normalises with the statistics of the batch it is given (what the Keras
    layer does when the model is called in training mode, as the package's training and
    gradient-penalty steps do); learnable scale and offset, ``epsilon = 1e-3`` (Keras default).

    ``tf_moments`` (default ``True``, the package's behaviour): the batch variance is computed
    as TensorFlow's ``tf.nn.moments`` (which Keras' ``BatchNormalization`` calls) computes it,
    ``mean((h - stop_gradient(mean(h)))^2)``. Values and first derivatives are the same as
    without the stop-gradient (the derivative through the mean is zero there), but second
    derivatives differ, and the WGAN gradient penalty differentiates the critic's input
    gradient with respect to its parameters: the package's critic update omits those terms.
    ``False``: the exact variance (our option).

    Call: ``critic(x_BxI) -> score_Bx1``.
    """

    def __init__(
        self,
        in_features: int,
        hidden: Sequence[int],
        *,
        tf_moments: bool = True,
        rngs: nnx.Rngs,
    ):
        self.tf_moments = bool(tf_moments)
        widths = [in_features, *hidden, 1]
        self.layers = nnx.List(
            [
                nnx.Linear(a, b, kernel_init=_GLOROT, rngs=rngs)
                for a, b in zip(widths[:-1], widths[1:], strict=True)
            ]
        )
        self.scales = nnx.List([nnx.Param(jnp.ones((w,))) for w in hidden])
        self.offsets = nnx.List([nnx.Param(jnp.zeros((w,))) for w in hidden])

    def __call__(self, x):
        *hidden, last = self.layers
        for layer, scale, offset in zip(hidden, self.scales, self.offsets, strict=True):
            h = layer(x)
            mean = jnp.mean(h, axis=0, keepdims=True)
            centre = jax.lax.stop_gradient(mean) if self.tf_moments else mean
            var = jnp.mean((h - centre) ** 2, axis=0, keepdims=True)
            h = (h - mean) * jax.lax.rsqrt(var + 1e-3) * scale[...][None] + offset[...][None]
            x = jnp.tanh(h)
        return last(x)


class CausalEGM(nnx.Module):
    """CausalEGM (authors' package 0.4.0), binary or multi-arm treatment.

    Latent ``z = (z0, z1, z2, z3)`` of sizes ``z_dims`` (default ``(3, 6, 3, 6)``): ``z0``
    affects treatment and outcome, ``z1`` the outcome only, ``z2`` the treatment only, ``z3``
    neither. Networks (default widths of the package's CLI):

    * ``e_net``: encoder ``v -> z`` (widths ``(64,)*5``), ``g_net``: generator ``z -> v``
      (``(64,)*5``);
    * ``f_net``: outcome ``(z0, z1, treatment code) -> y`` (``(64, 32, 8)``);
    * ``h_net``: treatment ``(z0, z2) -> x`` (``(64, 32, 8)``): one logit (binary, sigmoid) or
      ``K`` logits (multi-arm);
    * ``dz_net``, ``dv_net``: WGAN-GP critics on ``z`` and on ``v`` (``(64, 32, 8)``).

    The treatment code given to ``f_net`` is the 0/1 treatment when ``num_arms == 2`` (as the
    package), else ``[one_hot(t), embedding[t]]`` where ``embedding`` (``(K, m)``, a non-trainable
    variable) is the arms' latent W2 geometry set by :func:`arm_embedding_w2` during training
    (multi-treatment CausalEGM: **reconstruction**). ``embed_dim = 0`` gives plain one-hot.

    Args:
      v_dim: covariate width; num_arms: ``K >= 2``.
      z_dims: the four latent sizes; *_units: hidden widths; embed_dim: ``m`` (multi-arm only).
      critic_tf_moments: the critics' batch variance as TensorFlow computes it (default, the
        package; see :class:`WganCritic`), or the exact one (``False``).
      rngs: ``nnx.Rngs`` with ``params``.

    Raises:
      ValueError: ``num_arms < 2`` (one arm has no effect to estimate), ``len(z_dims) != 4``.
    """

    def __init__(
        self,
        v_dim: int,
        num_arms: int = 2,
        *,
        z_dims: Sequence[int] = (3, 6, 3, 6),
        g_units: Sequence[int] = (64, 64, 64, 64, 64),
        e_units: Sequence[int] = (64, 64, 64, 64, 64),
        f_units: Sequence[int] = (64, 32, 8),
        h_units: Sequence[int] = (64, 32, 8),
        dz_units: Sequence[int] = (64, 32, 8),
        dv_units: Sequence[int] = (64, 32, 8),
        embed_dim: int = 0,
        critic_tf_moments: bool = True,
        rngs: nnx.Rngs,
    ):
        if num_arms < 2:
            raise ValueError(
                f"CausalEGM: needs num_arms >= 2 (effects compare arms), got {num_arms}"
            )
        if len(z_dims) != 4 or min(z_dims) < 1:
            raise ValueError(f"CausalEGM: z_dims must be 4 sizes >= 1, got {tuple(z_dims)}")
        self.v_dim, self.num_arms = v_dim, num_arms
        self.z_dims = tuple(int(z) for z in z_dims)
        self.embed_dim = int(embed_dim) if num_arms > 2 else 0
        code = 1 if num_arms == 2 else num_arms + self.embed_dim
        z_total = sum(self.z_dims)
        z0, z1, z2, _ = self.z_dims
        self.g_net = DenseStack(z_total, g_units, v_dim, rngs=rngs)
        self.e_net = DenseStack(v_dim, e_units, z_total, rngs=rngs)
        self.dz_net = WganCritic(z_total, dz_units, tf_moments=critic_tf_moments, rngs=rngs)
        self.dv_net = WganCritic(v_dim, dv_units, tf_moments=critic_tf_moments, rngs=rngs)
        self.f_net = DenseStack(z0 + z1 + code, f_units, 1, rngs=rngs)
        self.h_net = DenseStack(z0 + z2, h_units, 1 if num_arms == 2 else num_arms, rngs=rngs)
        self.embedding = nnx.Variable(jnp.zeros((num_arms, self.embed_dim)))

    _NETS = ("g_net", "e_net", "f_net", "h_net", "dz_net", "dv_net")

    def load_package_weights(self, weights) -> None:
        """Sets every network's parameters from the package's Keras weights, in place.

        Args:
          weights: a mapping with, for each network ``<net>`` of ``g_net, e_net, f_net, h_net,
            dz_net, dv_net`` and each of its dense layers ``i`` (input side first),
            ``"<net>/<i>/kernel"`` (``(in, out)``, Keras' layout, as ours) and
            ``"<net>/<i>/bias"``, and for each hidden layer of the critics
            ``"<net>/<i>/gamma"`` and ``"<net>/<i>/beta"`` (batch norm scale and offset);
            e.g. what ``tools/causalegm_make_fixture.py`` stores from the package's
            ``all_layers``.

        Raises:
          ValueError: a missing key or a shape that differs from this model's.
        """

        def put(var, key):
            if key not in weights:
                raise ValueError(f"load_package_weights: weights has no {key!r}")
            value = jnp.asarray(weights[key], var[...].dtype)
            if value.shape != var[...].shape:
                raise ValueError(
                    f"load_package_weights: {key} has shape {value.shape}, "
                    f"this model's is {var[...].shape}"
                )
            var[...] = value

        for name in self._NETS:
            net = getattr(self, name)
            for i, layer in enumerate(net.layers):
                put(layer.kernel, f"{name}/{i}/kernel")
                put(layer.bias, f"{name}/{i}/bias")
            if isinstance(net, WganCritic):
                for i, (scale, offset) in enumerate(zip(net.scales, net.offsets, strict=True)):
                    put(scale, f"{name}/{i}/gamma")
                    put(offset, f"{name}/{i}/beta")

    def split(self, z_BxZ):
        """``(z0, z1, z2, z3)`` slices of a latent batch."""
        a, b, c, _ = np.cumsum(self.z_dims)
        return z_BxZ[:, :a], z_BxZ[:, a:b], z_BxZ[:, b:c], z_BxZ[:, c:]

    def treatment_code(self, t_B):
        """``f_net``'s treatment input: ``(B, 1)`` 0/1 (binary) or ``(B, K + m)`` (multi-arm)."""
        if self.num_arms == 2:
            return t_B.astype(jnp.float32)[:, None]
        onehot = jax.nn.one_hot(t_B, self.num_arms)
        return jnp.concatenate([onehot, self.embedding[...][t_B]], axis=-1)

    def outcome(self, z_BxZ, t_B):
        """``f_net(z0, z1, code(t)) -> (B,)`` predicted outcome under arm ``t``."""
        z0, z1, _, _ = self.split(z_BxZ)
        return self.f_net(jnp.concatenate([z0, z1, self.treatment_code(t_B)], -1))[:, 0]

    def treatment_logits(self, z_BxZ):
        """``h_net(z0, z2)``: ``(B,)`` logit (binary) or ``(B, K)`` logits."""
        z0, _, z2, _ = self.split(z_BxZ)
        out = self.h_net(jnp.concatenate([z0, z2], -1))
        return out[:, 0] if self.num_arms == 2 else out

    def potential_outcomes(self, v_NxV):
        """Every arm's predicted outcome ``(N, K)`` (the package's ``getCATE`` is column 1 - 0)."""
        z = self.e_net(v_NxV)
        n = v_NxV.shape[0]
        return jnp.stack(
            [self.outcome(z, jnp.full((n,), k, jnp.int32)) for k in range(self.num_arms)], -1
        )


def gaussian_w2_distances(means_KxD, covs_KxDxD) -> np.ndarray:
    """Pairwise 2-Wasserstein distances between Gaussians (Bures formula), ``(K, K)`` float64.

    ``W2^2 = ||m_k - m_l||^2 + tr(S_k + S_l - 2 (S_k^{1/2} S_l S_k^{1/2})^{1/2})``.
    """
    means = np.asarray(means_KxD, np.float64)
    covs = np.asarray(covs_KxDxD, np.float64)

    def sqrtm(s):
        w, u = np.linalg.eigh((s + s.T) / 2)
        return (u * np.sqrt(np.clip(w, 0, None))) @ u.T

    k = len(means)
    roots = [sqrtm(c) for c in covs]
    d2 = np.zeros((k, k))
    for i in range(k):
        for j in range(i + 1, k):
            cross = sqrtm(roots[i] @ covs[j] @ roots[i])
            val = np.sum((means[i] - means[j]) ** 2) + np.trace(covs[i] + covs[j] - 2 * cross)
            d2[i, j] = d2[j, i] = max(val, 0.0)
    return np.sqrt(d2)


def arm_embedding_w2(z_NxZ, t_N, num_arms: int, embed_dim: int, previous=None) -> np.ndarray:
    """Embeds the arms so that Euclidean distances follow their latent 2-Wasserstein distances.

    Each arm's latent sample is summarised by a Gaussian (mean, covariance with a ``1e-3``
    ridge); the ``(K, K)`` Bures-W2 distances (:func:`gaussian_w2_distances`) are embedded in
    ``embed_dim`` dimensions by classical multidimensional scaling. When ``previous`` is given,
    the new embedding is rotated onto it (orthogonal Procrustes) so that the outcome network's
    input does not jump between refreshes. Multi-treatment CausalEGM "keeps the Wasserstein
    geometry of the treatment space" (paper abstract); this construction is **our
    reconstruction**.

    Args:
      z_NxZ: ``(N, Z)`` latents; t_N: ``(N,)`` int arms; num_arms: ``K``; embed_dim: ``m``.
      previous: the embedding ``(K, m)`` to align to, or ``None``.

    Returns:
      ``(K, m)`` float32 embedding.

    Raises:
      ValueError: an arm without units (its geometry is undefined).
    """
    z = np.asarray(z_NxZ, np.float64)
    t = np.asarray(t_N)
    counts = np.bincount(t, minlength=num_arms)
    if np.any(counts == 0):
        raise ValueError(f"arm_embedding_w2: arms without units: {np.flatnonzero(counts == 0)}")
    means, covs = [], []
    for k in range(num_arms):
        zk = z[t == k]
        means.append(zk.mean(0))
        c = np.cov(zk.T) if len(zk) > 1 else np.zeros((z.shape[1], z.shape[1]))
        covs.append(np.atleast_2d(c) + 1e-3 * np.eye(z.shape[1]))
    dist = gaussian_w2_distances(np.stack(means), np.stack(covs))
    j = np.eye(num_arms) - 1.0 / num_arms
    b = -0.5 * j @ (dist**2) @ j
    w, u = np.linalg.eigh(b)
    order = np.argsort(w)[::-1][:embed_dim]
    emb = u[:, order] * np.sqrt(np.clip(w[order], 0, None))
    if emb.shape[1] < embed_dim:
        emb = np.pad(emb, ((0, 0), (0, embed_dim - emb.shape[1])))
    if previous is not None:
        prev = np.asarray(previous, np.float64)
        uu, _, vt = np.linalg.svd(emb.T @ prev)
        emb = emb @ (uu @ vt)
    return emb.astype(np.float32)
