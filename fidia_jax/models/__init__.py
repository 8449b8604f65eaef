"""fidia_jax.models: Flax NNX models (ProteinMPNN, ...)."""

from fidia_jax.models._attention import AttentionFn as AttentionFn
from fidia_jax.models._attention import get_attention_impl as get_attention_impl
from fidia_jax.models._attention import is_decode_only as is_decode_only
from fidia_jax.models._attention import list_attention_impls as list_attention_impls
from fidia_jax.models._attention import register_attention_impl as register_attention_impl
from fidia_jax.models._attention import xla_attention as xla_attention
from fidia_jax.models._llama import Llama as Llama
from fidia_jax.models._llama import LlamaCache as LlamaCache
from fidia_jax.models._llama import LlamaConfig as LlamaConfig
from fidia_jax.models._llama import apply_rope as apply_rope
from fidia_jax.models._llama import next_token_loss as next_token_loss
from fidia_jax.models._proteinmpnn import MPNN_ALPHABET as MPNN_ALPHABET
from fidia_jax.models._proteinmpnn import MPNNInputs as MPNNInputs
from fidia_jax.models._proteinmpnn import ProteinMPNN as ProteinMPNN
from fidia_jax.models._proteinmpnn import SampleResult as SampleResult
from fidia_jax.models._proteinmpnn import ScoreResult as ScoreResult
from fidia_jax.models._proteinmpnn import load_checkpoint as load_checkpoint
from fidia_jax.models._proteinmpnn import log_probs as log_probs
from fidia_jax.models._proteinmpnn import random_decoding_order as random_decoding_order
from fidia_jax.models._proteinmpnn import sample as sample
from fidia_jax.models._proteinmpnn import score as score
from fidia_jax.models._torch_checkpoint import load_torch_checkpoint as load_torch_checkpoint

__all__ = [
    "MPNN_ALPHABET",
    "MPNNInputs",
    "ProteinMPNN",
    "SampleResult",
    "ScoreResult",
    "load_checkpoint",
    "load_torch_checkpoint",
    "log_probs",
    "random_decoding_order",
    "sample",
    "score",
    # small LLaMA + attention registry
    "AttentionFn",
    "get_attention_impl",
    "is_decode_only",
    "list_attention_impls",
    "register_attention_impl",
    "xla_attention",
    "Llama",
    "LlamaCache",
    "LlamaConfig",
    "apply_rope",
    "next_token_loss",
]
