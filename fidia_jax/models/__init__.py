"""fidia_jax.models: Flax NNX networks (ProteinMPNN, small LLaMA, an MLP, the methods' models).

Reusable layers (attention registry, RoPE) live in :mod:`fidia_jax.layers`.

Values out of their domain never pass silently (one rule, ``models/_domain.py``): token ids
outside the vocabulary, a sampling temperature that is not ``> 0``, prompt lengths outside
``[1, T]``, decoding past the KV cache, decoding orders that are not permutations raise
``ValueError`` when the values are concrete; when traced (inside ``jit``) they cannot raise and
give NaN outputs instead (a traced ``T <= 0`` samples greedily), as each function documents.
"""

from fidia_jax.models._checkpoints import LMTokenizer as LMTokenizer
from fidia_jax.models._checkpoints import hf_llama_config as hf_llama_config
from fidia_jax.models._checkpoints import load_gguf as load_gguf
from fidia_jax.models._checkpoints import load_hf_checkpoint as load_hf_checkpoint
from fidia_jax.models._checkpoints import load_lm_checkpoint as load_lm_checkpoint
from fidia_jax.models._checkpoints import load_tokenizer as load_tokenizer
from fidia_jax.models._context_check import check_prompt_lengths as check_prompt_lengths
from fidia_jax.models._context_check import (
    checkpoint_context_length as checkpoint_context_length,
)
from fidia_jax.models._domain import check_token_ids as check_token_ids
from fidia_jax.models._frame2seq import Frame2seq as Frame2seq
from fidia_jax.models._frame2seq import frame2seq_checkpoint_path as frame2seq_checkpoint_path
from fidia_jax.models._frame2seq import frame2seq_log_probs as frame2seq_log_probs
from fidia_jax.models._frame2seq import (
    frame2seq_sequence_log_likelihood as frame2seq_sequence_log_likelihood,
)
from fidia_jax.models._frame2seq import load_frame2seq as load_frame2seq
from fidia_jax.models._init import count_params as count_params
from fidia_jax.models._init import init_without_compile as init_without_compile
from fidia_jax.models._llama import Llama as Llama
from fidia_jax.models._llama import LlamaCache as LlamaCache
from fidia_jax.models._llama import LlamaConfig as LlamaConfig
from fidia_jax.models._llama_hooks import CAPTURE_NAMES as LLAMA_CAPTURE_NAMES
from fidia_jax.models._llama_hooks import AddToResidual as AddToResidual
from fidia_jax.models._llama_hooks import LlamaSamples as LlamaSamples
from fidia_jax.models._llama_hooks import PatchAttention as PatchAttention
from fidia_jax.models._llama_hooks import PatchHeads as PatchHeads
from fidia_jax.models._llama_hooks import ReplaceQKV as ReplaceQKV
from fidia_jax.models._llama_hooks import ReplaceUpdate as ReplaceUpdate
from fidia_jax.models._llama_hooks import sample_llama as sample_llama
from fidia_jax.models._llama_size import LlamaSize as LlamaSize
from fidia_jax.models._llama_vl import LlamaVL as LlamaVL
from fidia_jax.models._llama_vl import image_patches as image_patches
from fidia_jax.models._mlp import MLP as MLP
from fidia_jax.models._torch_checkpoint import load_torch_checkpoint as load_torch_checkpoint
from fidia_jax.models._vision_alexnet import ALEXNET_MIN_SIZE as ALEXNET_MIN_SIZE
from fidia_jax.models._vision_alexnet import LPIPS_NETS as LPIPS_NETS
from fidia_jax.models._vision_alexnet import VGG16_MIN_SIZE as VGG16_MIN_SIZE
from fidia_jax.models._vision_alexnet import alexnet_embedding as alexnet_embedding
from fidia_jax.models._vision_alexnet import alexnet_features as alexnet_features
from fidia_jax.models._vision_alexnet import load_lpips_weights as load_lpips_weights
from fidia_jax.models._vision_alexnet import lpips_input_transform as lpips_input_transform
from fidia_jax.models._vision_alexnet import vgg16_features as vgg16_features
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

__all__ = [
    "MPNN_ALPHABET",
    "MPNNInputs",
    "ProteinMPNN",
    "SampleResult",
    "ScoreResult",
    "load_checkpoint",
    "log_probs",
    "omit_mask",
    "random_decoding_order",
    "sample",
    "score",
    "check_token_ids",
    "load_torch_checkpoint",
    "Frame2seq",
    "frame2seq_checkpoint_path",
    "frame2seq_log_probs",
    "frame2seq_sequence_log_likelihood",
    "load_frame2seq",
    "Llama",
    "LlamaCache",
    "LlamaConfig",
    "LlamaSize",
    "LLAMA_CAPTURE_NAMES",
    "AddToResidual",
    "LlamaSamples",
    "LlamaVL",
    "PatchAttention",
    "PatchHeads",
    "ReplaceUpdate",
    "image_patches",
    "sample_llama",
    "MLP",
    "ALEXNET_MIN_SIZE",
    "LPIPS_NETS",
    "VGG16_MIN_SIZE",
    "alexnet_embedding",
    "alexnet_features",
    "load_lpips_weights",
    "lpips_input_transform",
    "vgg16_features",
    "count_params",
    "init_without_compile",
    "ReplaceQKV",
    "LMTokenizer",
    "hf_llama_config",
    "load_gguf",
    "load_lm_checkpoint",
    "load_hf_checkpoint",
    "load_tokenizer",
    "check_prompt_lengths",
    "checkpoint_context_length",
]
