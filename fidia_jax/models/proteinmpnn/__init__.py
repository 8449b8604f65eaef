"""ProteinMPNN (full backbone and CA-only) in Flax NNX, with the original weights.

A port of the vanilla / soluble (full backbone N, CA, C, O) ProteinMPNN of Dauparas et al.
(2022): featurisation (virtual C-beta, 25 RBF-encoded inter-atomic distances over the 48 nearest
CA neighbours, relative positional encoding with a chain flag), 3 message-passing encoder layers,
3 order-masked decoder layers, and a 21-way output head. The math follows
``protein_mpnn_utils.py`` of the original code (``ProteinFeatures``, ``EncLayer``, ``DecLayer``,
``ProteinMPNN.forward`` / ``ProteinMPNN.sample``) operation by operation; the code is our own.
The CA-only model (``variant="ca"``, ``ProteinMPNN(ca_only=True)``) swaps the featurisation for
``CAProteinFeatures`` (module ``_layers``; the original's ``CA_ProteinFeatures``: CA-trace
distances, local-frame directions and quaternions) and shares everything else.

Public pieces:

* :class:`MPNNInputs` -- the featurised structure (a pytree; add a leading batch axis to batch).
* :func:`load_checkpoint` -- the original ``.pt`` weights as numpy arrays (no torch needed).
* :class:`ProteinMPNN` (+ :meth:`ProteinMPNN.from_checkpoint`).
* :func:`log_probs` -- teacher-forced log-probabilities for a given decoding order (the
  original ``forward``).
* :func:`score` -- per-position log-likelihood of given sequences + mean NLL.
* :func:`sample` -- one jitted autoregressive sampler (encoder once, ``lax.scan`` over decoding
  steps with a per-layer node-state cache, batched over samples).
* :func:`omit_mask` -- the ``(21,)`` mask of tokens never sampled.
* :func:`tied_groups_from_spec`, :func:`homo_oligomer_groups` -- tied slot groups for
  ``sample(..., tied=...)`` / ``score(..., tied=...)`` (module ``_tied``).
* :func:`checkpoint_path` -- where the installed ``proteinmpnn`` package keeps a ``.pt`` file.
* :func:`inference_compiler_options`, :func:`inference_jit` -- the XLA options the
  forward-only programs (sampling, scoring, ``log_probs``) compile with on CPU, and the ``jit``
  that applies them to top-level calls (module ``_compile``).

Modules: ``_inputs`` (alphabet, :class:`MPNNInputs`), ``_checkpoint`` (reading and mapping the
original weights), ``_layers`` (featurisation, encoder and decoder layers, the decoder's
one-position :meth:`DecLayer.step`), ``_model`` (:class:`ProteinMPNN`), ``_sampling``
(:func:`log_probs`, :func:`score`, :func:`sample`).

Weight mapping (torch ``state_dict`` key -> NNX variable): the NNX attribute paths equal the torch
module paths; see ``_checkpoint``.

Not ported: training-time backbone noise (``augment_eps``) and dropout (the
port equals the original in ``model.eval()`` mode). PSSM biasing in sampling is
``sample(..., pssm=)``.

References:
  J. Dauparas, I. Anishchenko, N. Bennett, H. Bai, R. J. Ragotte, L. F. Milles, B. I. M. Wicky,
  A. Courbet, R. J. de Haas, N. Bethel, P. J. Y. Leung, T. F. Huddy, S. Pellock, D. Tischer,
  F. Chan, B. Koepnick, H. Nguyen, A. Kang, B. Sankaran, A. K. Bera, N. P. King, D. Baker.
  "Robust deep learning-based protein sequence design using ProteinMPNN." Science 378(6615):
  49-56, 2022. https://doi.org/10.1126/science.add2187 ; code:
  https://github.com/dauparas/ProteinMPNN (MIT).
"""

from fidia_jax.models.proteinmpnn._checkpoint import checkpoint_path as checkpoint_path
from fidia_jax.models.proteinmpnn._checkpoint import load_checkpoint as load_checkpoint
from fidia_jax.models.proteinmpnn._compile import (
    inference_compiler_options as inference_compiler_options,
)
from fidia_jax.models.proteinmpnn._compile import inference_jit as inference_jit
from fidia_jax.models.proteinmpnn._inputs import MPNN_ALPHABET as MPNN_ALPHABET
from fidia_jax.models.proteinmpnn._inputs import MPNNInputs as MPNNInputs
from fidia_jax.models.proteinmpnn._inputs import omit_mask as omit_mask
from fidia_jax.models.proteinmpnn._layers import DecLayer as DecLayer
from fidia_jax.models.proteinmpnn._layers import DecStepCache as DecStepCache
from fidia_jax.models.proteinmpnn._layers import EncLayer as EncLayer
from fidia_jax.models.proteinmpnn._layers import ProteinFeatures as ProteinFeatures
from fidia_jax.models.proteinmpnn._model import ProteinMPNN as ProteinMPNN
from fidia_jax.models.proteinmpnn._sampling import SampleResult as SampleResult
from fidia_jax.models.proteinmpnn._sampling import ScoreResult as ScoreResult
from fidia_jax.models.proteinmpnn._sampling import log_probs as log_probs
from fidia_jax.models.proteinmpnn._sampling import random_decoding_order as random_decoding_order
from fidia_jax.models.proteinmpnn._sampling import sample as sample
from fidia_jax.models.proteinmpnn._sampling import score as score
from fidia_jax.models.proteinmpnn._tied import homo_oligomer_groups as homo_oligomer_groups
from fidia_jax.models.proteinmpnn._tied import tied_groups_from_spec as tied_groups_from_spec

__all__ = [
    "DecLayer",
    "DecStepCache",
    "EncLayer",
    "MPNNInputs",
    "MPNN_ALPHABET",
    "ProteinFeatures",
    "ProteinMPNN",
    "SampleResult",
    "ScoreResult",
    "checkpoint_path",
    "homo_oligomer_groups",
    "inference_compiler_options",
    "inference_jit",
    "load_checkpoint",
    "log_probs",
    "omit_mask",
    "random_decoding_order",
    "sample",
    "score",
    "tied_groups_from_spec",
]
