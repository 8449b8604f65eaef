"""fidia_jax.projects.hitvar: HIT-VAR, hierarchical image tokenization for multi-scale SR.

A visual autoregressive (VAR) model predicts next-scale tokens of a residual-quantised latent of
the HR image, conditioned on the LR image as in VARSR (start tokens + a per-scale LR term); the
hierarchical tokenization makes every prefix of the token sequence decode to an image at its
own scale (x1 ... x4 of a 16x16 LR crop), the decoder reading the tokens only, and a DPO term
on the (LR, HR) token pair pushes the transformer to the HR tokens over the LR ones. :func:`train_and_evaluate` trains HIT-VAR and its
baselines (bicubic, a plain RQ + VAR without the hierarchy, a conv SR net of the same parameter
count) on degraded crops of the bundled photos and scores PSNR / SSIM / LPIPS at every scale on
crops of held-out photos; ``benchmarks/hitvar.py`` runs the documented comparison and
``notebooks/hitvar.py`` shows it.

Paper:
  "HIT-VAR: Hierarchical Image Tokenization for Multi-Scale Super-Resolution", ICML 2026,
  arXiv:2605.14891; earlier version "Multi-scale Image Super Resolution with a Single
  Auto-Regressive Model", Sanchez et al., arXiv:2506.04990. The LR conditioning follows VARSR
  (Qu et al., github qyp2000/VARSR, ``models/var.py``); the prefix -> scale rule, the sizes,
  the losses' weights and the DPO phase's schedule are our reconstruction (``docs/hitvar.md``
  marks each).

The method's own modules: ``schedule.py`` (:func:`hierarchical_scale_schedule`: which token
prefix decodes to which scale), ``model.py`` (:class:`HitVarTokenizer`,
:class:`NextScaleTransformer`, :func:`generate_tokens`, :class:`ConvSR`, ``hitvar_draw``, ...),
``losses.py`` (``hitvar_tokenizer_loss``, ``next_scale_cross_entropy``, ``token_log_prob``),
``data.py`` (:class:`Degradation`, :func:`degrade`, ``make_sr_pairs``); the names in
``__all__`` are re-exported here (the notebook uses the degradation and the schedule).
Shared primitives used: :mod:`fidia_jax.layers` (``multiscale_residual_quantize``,
``tokens_to_latent``, ``ema_codebook_update``, ``block_causal_mask``, ``resize_images``: VAR's
residual quantiser, textbook), :func:`fidia_jax.models.init_without_compile`,
:func:`fidia_jax.losses.token_log_probs`, :mod:`fidia_jax.rl` (``dpo_loss``,
``dpo_log_ratios``, ``dpo_pair``), :mod:`fidia_jax.data` (``bundled_photos``,
``random_crops``), :mod:`fidia_jax.metrics` (``psnr``, ``ssim``, ``lpips``),
:mod:`fidia_jax.train` (the step, the fit loop, the report files).
"""

from fidia_jax.projects.hitvar.configs import PRESETS as PRESETS
from fidia_jax.projects.hitvar.configs import HitVarConfig as HitVarConfig
from fidia_jax.projects.hitvar.configs import get_config as get_config
from fidia_jax.projects.hitvar.configs import load_config as load_config
from fidia_jax.projects.hitvar.data import Degradation as Degradation
from fidia_jax.projects.hitvar.data import degrade as degrade
from fidia_jax.projects.hitvar.model import ConvSR as ConvSR
from fidia_jax.projects.hitvar.model import HitVarTokenizer as HitVarTokenizer
from fidia_jax.projects.hitvar.model import NextScaleTransformer as NextScaleTransformer
from fidia_jax.projects.hitvar.model import generate_tokens as generate_tokens
from fidia_jax.projects.hitvar.model import hitvar_draw as hitvar_draw
from fidia_jax.projects.hitvar.model import lr_scale_term as lr_scale_term
from fidia_jax.projects.hitvar.schedule import HierarchicalSchedule as HierarchicalSchedule
from fidia_jax.projects.hitvar.schedule import (
    hierarchical_scale_schedule as hierarchical_scale_schedule,
)
from fidia_jax.projects.hitvar.train import METHODS as METHODS
from fidia_jax.projects.hitvar.train import format_table as format_table
from fidia_jax.projects.hitvar.train import format_token_check as format_token_check
from fidia_jax.projects.hitvar.train import lr_hr_pairs as lr_hr_pairs
from fidia_jax.projects.hitvar.train import make_data as make_data
from fidia_jax.projects.hitvar.train import paired_test as paired_test
from fidia_jax.projects.hitvar.train import score as score
from fidia_jax.projects.hitvar.train import token_check as token_check
from fidia_jax.projects.hitvar.train import train_and_evaluate as train_and_evaluate
from fidia_jax.projects.hitvar.train import train_models as train_models

__all__ = [
    "METHODS",
    "PRESETS",
    "ConvSR",
    "Degradation",
    "HierarchicalSchedule",
    "HitVarConfig",
    "HitVarTokenizer",
    "NextScaleTransformer",
    "degrade",
    "format_table",
    "format_token_check",
    "generate_tokens",
    "get_config",
    "hierarchical_scale_schedule",
    "hitvar_draw",
    "load_config",
    "lr_hr_pairs",
    "lr_scale_term",
    "make_data",
    "paired_test",
    "score",
    "token_check",
    "train_and_evaluate",
    "train_models",
]
