"""fidia_jax.models: Flax NNX networks (ProteinMPNN, small LLaMA, an MLP, the methods' models).

Reusable layers (attention registry, RoPE) live in :mod:`fidia_jax.layers`.

Values out of their domain never pass silently (one rule, ``models/_domain.py``): token ids
outside the vocabulary, a sampling temperature that is not ``> 0``, prompt lengths outside
``[1, T]``, decoding past the KV cache, decoding orders that are not permutations raise
``ValueError`` when the values are concrete; when traced (inside ``jit``) they cannot raise and
give NaN outputs instead (a traced ``T <= 0`` samples greedily), as each function documents.
"""

from fidia_jax.models._llama import Llama as Llama
from fidia_jax.models._llama import LlamaCache as LlamaCache
from fidia_jax.models._llama import LlamaConfig as LlamaConfig
from fidia_jax.models._llama import next_token_loss as next_token_loss
from fidia_jax.models._lm_task import LlamaSize as LlamaSize
from fidia_jax.models._lm_task import LmTask as LmTask
from fidia_jax.models._lm_task import init_lm_state as init_lm_state
from fidia_jax.models._lm_task import lm_data_mesh as lm_data_mesh
from fidia_jax.models._lm_task import make_lm_batch_fn as make_lm_batch_fn
from fidia_jax.models._lm_task import make_lm_task as make_lm_task
from fidia_jax.models._lm_task import make_lm_train_step as make_lm_train_step
from fidia_jax.models._lm_task import place_lm_batch as place_lm_batch
from fidia_jax.models._mlp import MLP as MLP
from fidia_jax.models._torch_checkpoint import load_torch_checkpoint as load_torch_checkpoint
from fidia_jax.models.proteinmpnn import MPNN_ALPHABET as MPNN_ALPHABET
from fidia_jax.models.proteinmpnn import MPNNInputs as MPNNInputs
from fidia_jax.models.proteinmpnn import ProteinMPNN as ProteinMPNN
from fidia_jax.models.proteinmpnn import SampleResult as SampleResult
from fidia_jax.models.proteinmpnn import ScoreResult as ScoreResult
from fidia_jax.models.proteinmpnn import load_checkpoint as load_checkpoint
from fidia_jax.models.proteinmpnn import log_probs as log_probs
from fidia_jax.models.proteinmpnn import omit_mask as omit_mask
from fidia_jax.models.proteinmpnn import random_decoding_order as random_decoding_order
from fidia_jax.models.proteinmpnn import sample as sample
from fidia_jax.models.proteinmpnn import score as score

# >>> multifidelity
# <<< multifidelity
# >>> causal
# <<< causal
# >>> varjepa
# <<< varjepa
# >>> ldl
# <<< ldl
# >>> hist
# <<< hist
# >>> teamwork
# <<< teamwork

__all__ = [
    "MPNN_ALPHABET",
    "MPNNInputs",
    "ProteinMPNN",
    "SampleResult",
    "ScoreResult",
    "load_checkpoint",
    "load_torch_checkpoint",
    "log_probs",
    "omit_mask",
    "random_decoding_order",
    "sample",
    "score",
    # small LLaMA
    "Llama",
    "LlamaCache",
    "LlamaConfig",
    "LlamaSize",
    "LmTask",
    "init_lm_state",
    "lm_data_mesh",
    "make_lm_batch_fn",
    "make_lm_task",
    "make_lm_train_step",
    "next_token_loss",
    "place_lm_batch",
    # shared by the tabular methods and baselines
    "MLP",
    # >>> multifidelity
    # <<< multifidelity
    # >>> causal
    # <<< causal
    # >>> varjepa
    # <<< varjepa
    # >>> ldl
    # <<< ldl
    # >>> hist
    # <<< hist
    # >>> teamwork
    # <<< teamwork
]
