"""fidia_jax.projects.attention: the experiments of the two attention-kernel papers.

One driver for both methods, because the second experiment uses the model the first trains
(:func:`train_and_evaluate`, presets in :mod:`.configs`):

1. **Attn-QAT** -- train a byte-level LLaMA on Shakespeare with bf16-input attention, the
   drop-in FP4 attention (FP4 forward, plain flash backward) and Attn-QAT (FP4 forward, matched
   backward), same init, batches and steps; compare loss curves and validation loss.
2. **SANTA** -- decode the bf16-trained model teacher-forced with dense attention and with SANTA
   stochastic value sampling (iid / stratified / systematic, several sample budgets ``S``);
   compare perplexity and top-1 agreement with dense decoding.

``benchmarks/attention_experiments.py`` runs it at the ``default`` scale (``docs/kernels.md``,
"Experiments"); ``fidia-jax attention train|demo --config tiny|demo|default`` at any scale.

Papers (the references the sources gave; authors and arXiv numbers were not available to us):
  SANTA / S²ANTA: Stochastic Additive No-mulT Attention. ICML 2026.
  Code: https://github.com/OPUSLab/SANTA (the CUDA kernel
  ``flash_style_fused_santa_fixed_tile_budgets``, read for its semantics, no code copied).
  Attn-QAT: 4-bit attention quantisation-aware training. ICML 2026.
  Code: hao-ai-lab/FastVideo (the torch reference ``fastvideo-kernel/tests/qat_forward_reference.py``
  at commit 20e4f7d3, run for the fixture ``tests/data/attn_qat/``; the Triton training kernels
  ``attn_qat_train.py`` / ``nvfp4_utils.py`` read, not run: they need a GPU).

What follows the authors' code and what is **reconstructed** (see ``docs/kernels.md`` and
``docs/fidelity.md``): in SANTA, the Bernoulli ternary queries
(:func:`fidia_jax.kernels.santa.ternary_query`, not used here) are reconstructed; in Attn-QAT,
the quantiser (``x * float32(1/scale)``), the 32-key tiles with their running max, and ``dV``
from the forward's own FP4 weights follow the authors' reference (fixture-tested); the
drop-in baseline's backward (``P`` recomputed from the unquantised ``Q, K``,
``D = rowsum(dO ∘ O_fp4)``) and the omitted NVFP4 per-tensor FP32 scale follow their Triton
kernels as read, and dQ / dK are checked against autodiff of our high-precision path only. The bf16 baseline (softmax attention on bf16-rounded ``q, k, v``) and the
experiment design (model size, steps, teacher-forced decoding, top-1 agreement) are ours, at a
small CPU scale, not the papers' setups.

Primitives used: :class:`fidia_jax.models.Llama`, :func:`fidia_jax.losses.next_token_loss` and
:func:`fidia_jax.losses.token_log_probs`, the training package's
:func:`fidia_jax.train.make_lm_task`, :func:`fidia_jax.train.make_train_step` and
:func:`fidia_jax.train.fit`, :func:`fidia_jax.layers.register_attention_impl`,
:func:`fidia_jax.layers.xla_attention`, :func:`fidia_jax.kernels.santa.make_santa_attention`,
the ``"attn_qat"`` / ``"attn_qat_dropin"`` attention impls
(:mod:`fidia_jax.kernels.attn_qat`), :func:`fidia_jax.data.load_shakespeare`,
:func:`fidia_jax.data.sample_windows`.
"""

from fidia_jax.projects.attention.configs import PRESETS as PRESETS
from fidia_jax.projects.attention.configs import QAT_IMPLS as QAT_IMPLS
from fidia_jax.projects.attention.configs import AttentionConfig as AttentionConfig
from fidia_jax.projects.attention.configs import DataConfig as DataConfig
from fidia_jax.projects.attention.configs import QatConfig as QatConfig
from fidia_jax.projects.attention.configs import SantaConfig as SantaConfig
from fidia_jax.projects.attention.configs import get_config as get_config
from fidia_jax.projects.attention.configs import llama_config as llama_config
from fidia_jax.projects.attention.configs import load_config as load_config
from fidia_jax.projects.attention.train import SUMMARY_FILE as SUMMARY_FILE
from fidia_jax.projects.attention.train import bf16_attention as bf16_attention
from fidia_jax.projects.attention.train import decode_logits as decode_logits
from fidia_jax.projects.attention.train import run_experiments as run_experiments
from fidia_jax.projects.attention.train import santa_evaluate as santa_evaluate
from fidia_jax.projects.attention.train import train_and_evaluate as train_and_evaluate
from fidia_jax.projects.attention.train import train_qat as train_qat

__all__ = [
    "PRESETS",
    "QAT_IMPLS",
    "SUMMARY_FILE",
    "AttentionConfig",
    "DataConfig",
    "QatConfig",
    "SantaConfig",
    "bf16_attention",
    "decode_logits",
    "get_config",
    "llama_config",
    "load_config",
    "run_experiments",
    "santa_evaluate",
    "train_and_evaluate",
    "train_qat",
]
