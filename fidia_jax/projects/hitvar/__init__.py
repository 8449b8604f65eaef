"""fidia_jax.projects.hitvar: HIT-VAR, hierarchical image tokenization for multi-scale SR.

A visual autoregressive (VAR) model predicts next-scale tokens of a residual-quantised latent of
the HR image, conditioned on the LR image; the hierarchical tokenization makes every prefix of
the token sequence decode to an image at its own scale (x1 ... x4 of a 16x16 LR crop) and a
DPO-style preference term sharpens the outputs. :func:`train_and_evaluate` trains HIT-VAR and its
baselines (bicubic, a plain RQ + VAR without the hierarchy, a conv SR net of the same parameter
count) on degraded crops of the bundled photos and scores PSNR / SSIM / LPIPS at every scale on
crops of held-out photos; ``benchmarks/hitvar.py`` runs the documented comparison and
``notebooks/hitvar.py`` shows it.

Paper:
  "HIT-VAR: Hierarchical Image Tokenization for Multi-Scale Super-Resolution", ICML 2026,
  arXiv:2605.14891. Only the abstract was available: the prefix -> scale rule, the LR
  conditioning, the losses' weights and the offline pairing of the preference term are our
  reconstruction (``docs/hitvar.md`` marks each).

Primitives used: :mod:`fidia_jax.layers` (``hierarchical_scale_schedule``,
``multiscale_residual_quantize``, ``tokens_to_latent``, ``ema_codebook_update``,
``vector_quantize``), :mod:`fidia_jax.models` (``HitVarTokenizer``, ``NextScaleTransformer``,
``generate_tokens``, ``ConvSR``), :mod:`fidia_jax.losses` (``hitvar_tokenizer_loss``,
``next_scale_cross_entropy``, ``token_log_prob``, ``dpo_log_ratios``), :mod:`fidia_jax.rl`
(``dpo_loss``, ``dpo_pair``), :mod:`fidia_jax.data` (``bundled_photos``, ``make_sr_pairs``,
``Degradation``), :mod:`fidia_jax.metrics` (``psnr``, ``ssim``, ``lpips``).
"""

from fidia_jax.projects.hitvar.configs import PRESETS as PRESETS
from fidia_jax.projects.hitvar.configs import HitVarConfig as HitVarConfig
from fidia_jax.projects.hitvar.configs import get_config as get_config
from fidia_jax.projects.hitvar.configs import load_config as load_config
from fidia_jax.projects.hitvar.train import METHODS as METHODS
from fidia_jax.projects.hitvar.train import format_table as format_table
from fidia_jax.projects.hitvar.train import make_data as make_data
from fidia_jax.projects.hitvar.train import score as score
from fidia_jax.projects.hitvar.train import train_and_evaluate as train_and_evaluate
from fidia_jax.projects.hitvar.train import train_models as train_models

__all__ = [
    "METHODS",
    "PRESETS",
    "HitVarConfig",
    "format_table",
    "get_config",
    "load_config",
    "make_data",
    "score",
    "train_and_evaluate",
    "train_models",
]
