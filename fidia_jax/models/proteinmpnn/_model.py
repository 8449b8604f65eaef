"""The full-backbone ProteinMPNN network (encoder + order-masked decoder) in Flax NNX."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from fidia_jax.models._domain import check_permutations, check_token_ids
from fidia_jax.models._init import abstract_module
from fidia_jax.models.proteinmpnn._checkpoint import (
    CA_UNUSED_KEYS,
    architecture,
    copy_torch_state_dict,
    load_checkpoint_full,
)
from fidia_jax.models.proteinmpnn._inputs import MPNNInputs
from fidia_jax.models.proteinmpnn._layers import (
    CAProteinFeatures,
    DecLayer,
    EncLayer,
    ProteinFeatures,
    gather_edges,
    gather_rows,
    linear,
)


class ProteinMPNN(nnx.Module):
    """ProteinMPNN (encoder + autoregressive decoder), as in Dauparas et al. 2022.

    The full-backbone model (default) featurises N, CA, C, O; with ``ca_only=True`` the CA-only
    model featurises the CA trace alone (:class:`CAProteinFeatures`); encoder, decoder, sampler
    and scoring are shared.

    Args:
      node_features: node feature width (128 in all released models; kept for parity with the
        original signature -- the full-backbone model has no node input features).
      edge_features: edge feature width (128).
      hidden_dim: hidden width ``C`` (128).
      num_encoder_layers: encoder depth (3).
      num_decoder_layers: decoder depth (3).
      vocab: number of tokens (21, :data:`MPNN_ALPHABET`).
      k_neighbors: neighbours per residue by CA distance (48).
      num_rbf: RBF bins per distance (16, centres 2..22 Å, width 1.25 Å).
      num_positional_embeddings: positional-encoding width (16).
      max_relative_feature: clip of the relative residue offset (32).
      scale: divisor of the summed messages (30).
      dtype: computation dtype of the dense layers (geometry is always float32).
      param_dtype: parameter dtype.
      precision: matmul precision (``"highest"`` keeps float32 parity on every backend).
      ca_only: build the CA-only model (``CA_ProteinFeatures`` of the original: edge input
        width 167 instead of 416); it reads only ``X[..., 1, :]`` (or ``X[..., 0, :]`` of a
        ``(L, 1, 3)`` input) and ``mask`` must mark the residues with a CA.
      rngs: initialisation randomness (xavier-uniform kernels, as in the original).
    """

    def __init__(
        self,
        node_features: int = 128,
        edge_features: int = 128,
        hidden_dim: int = 128,
        num_encoder_layers: int = 3,
        num_decoder_layers: int = 3,
        *,
        vocab: int = 21,
        k_neighbors: int = 48,
        num_rbf: int = 16,
        num_positional_embeddings: int = 16,
        max_relative_feature: int = 32,
        scale: float = 30.0,
        dtype=jnp.float32,
        param_dtype=jnp.float32,
        precision: str | jax.lax.Precision | None = "highest",
        ca_only: bool = False,
        rngs: nnx.Rngs,
    ):
        del node_features
        cfg = {"dtype": dtype, "param_dtype": param_dtype, "precision": precision}
        self.hidden_dim = hidden_dim
        self.vocab = vocab
        self.k_neighbors = k_neighbors
        self.dtype = dtype
        self.precision = precision
        self.ca_only = bool(ca_only)
        self.features = (CAProteinFeatures if ca_only else ProteinFeatures)(
            edge_features,
            top_k=k_neighbors,
            num_rbf=num_rbf,
            num_positional_embeddings=num_positional_embeddings,
            max_relative_feature=max_relative_feature,
            cfg=cfg,
            rngs=rngs,
        )
        self.W_e = linear(edge_features, hidden_dim, cfg=cfg, rngs=rngs)
        self.W_s = nnx.Embed(
            vocab,
            hidden_dim,
            dtype=dtype,
            param_dtype=param_dtype,
            embedding_init=nnx.initializers.xavier_uniform(),
            rngs=rngs,
        )
        self.encoder_layers = nnx.List(
            [
                EncLayer(hidden_dim, hidden_dim * 2, scale=scale, cfg=cfg, rngs=rngs)
                for _ in range(num_encoder_layers)
            ]
        )
        self.decoder_layers = nnx.List(
            [
                DecLayer(hidden_dim, hidden_dim * 3, scale=scale, cfg=cfg, rngs=rngs)
                for _ in range(num_decoder_layers)
            ]
        )
        self.W_out = linear(hidden_dim, vocab, cfg=cfg, rngs=rngs)

    # ---- construction from the original weights ----------------------------------------------

    @classmethod
    def from_checkpoint(
        cls,
        name: str = "v_48_020",
        *,
        variant: str = "vanilla",
        path=None,
        dtype=jnp.float32,
        param_dtype=jnp.float32,
        precision="highest",
    ) -> ProteinMPNN:
        """Build the model and load original weights (see :func:`load_checkpoint`).

        ``variant="ca"`` (or a CA-only ``path``) builds the CA-only model (``ca_only=True``),
        dropping the checkpoint entries its forward pass never reads (``CA_UNUSED_KEYS``).

        Raises:
          CheckpointError: missing file, or keys/shapes that do not match the architecture.
        """
        sd, meta = load_checkpoint_full(name, variant, path)
        arch = architecture(sd, meta)
        if arch["ca_only"]:
            sd = {k: v for k, v in sd.items() if k not in CA_UNUSED_KEYS}
        hidden = arch["hidden"]
        # Build abstractly (no random init: shapes only), then fill every parameter from `sd`.
        model = abstract_module(
            lambda rngs: cls(
                hidden, hidden, hidden, arch["n_enc"], arch["n_dec"], vocab=arch["vocab"],
                k_neighbors=arch["k_neighbors"], dtype=dtype, param_dtype=param_dtype,
                precision=precision, ca_only=arch["ca_only"], rngs=rngs,
            )
        )  # fmt: skip
        model.load_torch_state_dict(sd)
        return model

    def load_torch_state_dict(self, state_dict: dict[str, np.ndarray]) -> None:
        """Copy a torch-layout ``state_dict`` into this model (``(out,in)`` kernels transposed).

        Raises:
          CheckpointError: a key is missing/unexpected or a shape does not match.
        """
        copy_torch_state_dict(self, state_dict)

    # ---- forward pieces ----------------------------------------------------------------------

    def encode(self, X_BxLx4x3, mask_BxL, residue_idx_BxL, chain_encoding_BxL):
        """Featurise and run the encoder.

        Returns:
          ``(h_V_BxLxC, h_E_BxLxKxC, E_idx_BxLxK)``: node states (zero where ``mask`` is 0),
          edge states and neighbour indices (``K = min(k_neighbors, L)``).
        """
        E, E_idx = self.features(X_BxLx4x3, mask_BxL, residue_idx_BxL, chain_encoding_BxL)
        h_E = self.W_e(E)
        h_V = jnp.zeros(h_E.shape[:2] + (self.hidden_dim,), h_E.dtype)
        mask = mask_BxL.astype(h_E.dtype)
        mask_attend = mask[..., None] * gather_edges(
            jnp.broadcast_to(mask[:, None, :], E_idx.shape[:2] + mask.shape[-1:]), E_idx
        )
        for layer in self.encoder_layers:
            h_V, h_E = layer(h_V, h_E, E_idx, mask, mask_attend)
        return h_V, h_E, E_idx

    def decode(self, h_V_BxLxC, h_E_BxLxKxC, E_idx_BxLxK, S_BxL, mask_BxL, decoding_order_BxL):
        """Teacher-forced decoder: logits ``(B, L, vocab)`` given the full sequence and an order.

        Position ``i`` sees the tokens and decoder states of neighbours decoded before it and the
        encoder states (no token) of the others, exactly as the original ``forward``.

        Args:
          h_V_BxLxC, h_E_BxLxKxC, E_idx_BxLxK: :meth:`encode`'s outputs.
          S_BxL: ``(B, L)`` int token ids in ``[0, vocab)``.
          mask_BxL: ``(B, L)`` residue mask.
          decoding_order_BxL: ``(B, L)`` int, each row a permutation of ``0 .. L - 1``.

        Raises:
          ValueError: concrete token ids outside ``[0, vocab)`` or an order row that is not a
            permutation. Under tracing (``jit``) nothing can raise: such ids read a NaN embedding
            and such rows get NaN logits (see :mod:`fidia_jax.models._domain`).
        """
        S_BxL = check_token_ids(S_BxL, self.vocab, name="S_BxL", where="ProteinMPNN.decode")
        ok_B = check_permutations(
            decoding_order_BxL, name="decoding_order_BxL", where="ProteinMPNN.decode"
        )
        return self._decode(
            h_V_BxLxC, h_E_BxLxKxC, E_idx_BxLxK, S_BxL, mask_BxL, decoding_order_BxL, ok_B
        )

    def _decode(
        self, h_V_BxLxC, h_E_BxLxKxC, E_idx_BxLxK, S_BxL, mask_BxL, decoding_order_BxL, ok_B
    ):
        """:meth:`decode` on checked tokens; ``ok_B`` (or ``None``): rows whose logits are kept.

        A row with ``ok_B`` false gets a NaN residue mask, so all its logits are NaN (a select on
        the mask, not on the logits: the compiled arithmetic of the kept rows is unchanged).
        """
        dt = h_E_BxLxKxC.dtype
        mask = mask_BxL.astype(dt)
        if ok_B is not None:
            mask = jnp.where(ok_B[:, None], mask, jnp.asarray(jnp.nan, dt))
        rank_BxL = jnp.argsort(
            decoding_order_BxL, axis=-1
        )  # step at which each position is decoded
        rank_nb = jax.vmap(lambda r, i: r[i])(rank_BxL, E_idx_BxLxK)
        attend = (rank_nb < rank_BxL[..., None]).astype(dt)  # neighbour decoded earlier
        mask_bw = mask[:, :, None] * attend
        mask_fw = mask[:, :, None] * (1.0 - attend)
        h_S = self.W_s(S_BxL)
        h_V = h_V_BxLxC
        for layer in self.decoder_layers:
            h_V = layer(h_V, h_E_BxLxKxC, h_S, h_V_BxLxC, E_idx_BxLxK, mask_bw, mask_fw, mask)
        return self.W_out(h_V)

    def log_probs_many(self, inputs: MPNNInputs, sequences_BxNxL, decoding_order_BxNxL):
        """Teacher-forced log-softmax of ``N`` sequences per structure, encoding each structure once.

        Equal to :meth:`__call__` on the structures repeated ``N`` times (the encoder does not see
        the sequence), at about a third of the cost for ``N = 16``; gradients flow through the
        shared encoder states.

        Args:
          inputs: batched :class:`MPNNInputs`, leading axis ``B`` (``inputs.S`` is ignored).
          sequences_BxNxL: ``(B, N, L)`` int32 tokens.
          decoding_order_BxNxL: ``(B, N, L)`` int32 permutations.

        Returns:
          ``(B, N, L, 21)`` float32 log-softmax.

        Raises:
          ValueError: ``B`` or ``L`` of the structures, sequences and orders disagree; concrete
            token ids outside ``[0, vocab)`` or an order row that is not a permutation. Under
            tracing such ids read a NaN embedding and such rows are NaN (nothing can raise).
        """
        b, n, length = sequences_BxNxL.shape
        if inputs.X.shape[:2] != (b, length) or decoding_order_BxNxL.shape != (b, n, length):
            raise ValueError(
                f"log_probs_many: structures {inputs.X.shape[:2]} (B, L), sequences "
                f"{sequences_BxNxL.shape} and orders {decoding_order_BxNxL.shape} must agree on "
                "(B, N, L)"
            )
        where = "ProteinMPNN.log_probs_many"
        sequences_BxNxL = check_token_ids(
            sequences_BxNxL, self.vocab, name="sequences_BxNxL", where=where
        )
        ok_BxN = check_permutations(decoding_order_BxNxL, name="decoding_order_BxNxL", where=where)
        h_V, h_E, E_idx = self.encode(
            inputs.X, inputs.mask, inputs.residue_idx, inputs.chain_encoding
        )
        logits = self._decode_rows(
            h_V, h_E, E_idx, sequences_BxNxL, inputs.mask, decoding_order_BxNxL, ok_BxN
        )
        return jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)

    def _decode_rows(
        self, h_V_BxLxC, h_E_BxLxKxC, E_idx_BxLxK, S_BxNxL, mask_BxL, decoding_order_BxNxL, ok_BxN
    ):
        """:meth:`_decode` of ``N`` rows per structure, structure-only terms computed once
        (:meth:`DecLayer.rows`) -> ``(B, N, L, vocab)`` logits."""
        dt = h_E_BxLxKxC.dtype
        row_mask = jnp.broadcast_to(mask_BxL.astype(dt)[:, None], S_BxNxL.shape)
        if ok_BxN is not None:
            row_mask = jnp.where(ok_BxN[..., None], row_mask, jnp.asarray(jnp.nan, dt))
        rank = jnp.argsort(decoding_order_BxNxL, axis=-1)  # step at which each position is decoded
        rank_nb = gather_rows(rank, E_idx_BxLxK)
        attend = (rank_nb < rank[..., None]).astype(dt)  # neighbour decoded earlier
        mask_bw = row_mask[..., None] * attend
        mask_fw = row_mask[..., None] * (1.0 - attend)
        h_S = self.W_s(S_BxNxL)
        h_V = jnp.broadcast_to(h_V_BxLxC[:, None], S_BxNxL.shape + h_V_BxLxC.shape[-1:])
        for layer in self.decoder_layers:
            h_V = layer.rows(
                h_V, h_E_BxLxKxC, h_S, h_V_BxLxC, E_idx_BxLxK, mask_bw, mask_fw, mask_BxL, row_mask
            )
        return self.W_out(h_V)

    def __call__(self, inputs: MPNNInputs, decoding_order_BxL):
        """Teacher-forced log-softmax ``(B, L, vocab)`` float32 (batched inputs).

        Raises:
          ValueError: as :meth:`decode` (``inputs.S`` outside ``[0, vocab)``, an order row that is
            not a permutation), when concrete; under tracing those rows / neighbours are NaN.
        """
        S = check_token_ids(inputs.S, self.vocab, name="inputs.S", where="ProteinMPNN")
        ok_B = check_permutations(
            decoding_order_BxL, name="decoding_order_BxL", where="ProteinMPNN"
        )
        h_V, h_E, E_idx = self.encode(
            inputs.X, inputs.mask, inputs.residue_idx, inputs.chain_encoding
        )
        logits = self._decode(h_V, h_E, E_idx, S, inputs.mask, decoding_order_BxL, ok_B)
        return jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
