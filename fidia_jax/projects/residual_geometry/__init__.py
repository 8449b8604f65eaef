"""fidia_jax.projects.residual_geometry: residual-update geometry of a tiny vision-language model.

The driver trains a small :class:`fidia_jax.models.LlamaVL` on synthetic visual questions about
the scikit-learn digits (which digit, is it even, digit + k) plus text-only arithmetic, then asks
the paper's questions of it: does attention *reconfigure* the residual stream (low RID, high
MixIG) while the FFN *innovates* (high RID, low MixIG)? What do matched-RMS noise in place of the
visual attention update (Noise Δ), noise visual queries/keys/values (Noise QKV) and predefined
visual attention weights (SAP) do to accuracy on visual vs text-only questions?
:func:`train_and_evaluate` runs it and writes a JSON summary; ``benchmarks/residual_geometry.py``
and ``notebooks/residual_geometry.py`` call it.

Paper:
  Xi, Tian, Yang, Yi, Lin, Hao, Wang, Wang, "Large vision-language models get lost in
  attention", ICML 2026, arXiv:2605.05668, https://arxiv.org/abs/2605.05668. Code:
  https://github.com/Lrbomchz/vlms_lost_in_attn @ 2ca01fdd (``utils/interp_utils.py``): eRank,
  ΔD (with its numerical-rank rule) and TME follow it by default and are checked against a
  fixture made from it; ΔS, RID, MixIG and SAP's predefined weights are not in the released
  code and stay **reconstructions** (see :mod:`.geometry` and ``docs/residual_geometry.md``).

Shared primitives used: :class:`fidia_jax.models.LlamaVL` (``inspect`` capture), hooks
:class:`~fidia_jax.models.ReplaceUpdate` (Noise Δ), :class:`~fidia_jax.models.ReplaceQKV`
(Noise QKV), :class:`~fidia_jax.models.PatchAttention` (SAP), :func:`fidia_jax.train.fit_llama`,
:func:`fidia_jax.data.load_digit_images`, :func:`fidia_jax.metrics.effective_rank` and the ridge
fit. The method's own modules: ``geometry.py`` (eRank, ΔS, ΔD, RID, TME, MixIG:
:func:`residual_information_dynamics`, ``geometry.cosine_mixing_entropy`` (the authors' TME),
:func:`token_mixing_entropy` (ours, of attention weights), :func:`mixing_information_gain`, ...), ``questions.py`` (the digit questions,
``make_digit_questions``), ``train.py`` (the experiment). Re-exported here: the three measures
(they apply unchanged to any model's captured activations); the rest stays in its module.
"""

from fidia_jax.projects.residual_geometry.configs import INTERVENTIONS as INTERVENTIONS
from fidia_jax.projects.residual_geometry.configs import PRESETS as PRESETS
from fidia_jax.projects.residual_geometry.configs import (
    ResidualGeometryConfig as ResidualGeometryConfig,
)
from fidia_jax.projects.residual_geometry.configs import get_config as get_config
from fidia_jax.projects.residual_geometry.configs import load_config as load_config
from fidia_jax.projects.residual_geometry.geometry import (
    mixing_information_gain as mixing_information_gain,
)
from fidia_jax.projects.residual_geometry.geometry import (
    note_residual_information_dynamics as note_residual_information_dynamics,
)
from fidia_jax.projects.residual_geometry.geometry import (
    residual_information_dynamics as residual_information_dynamics,
)
from fidia_jax.projects.residual_geometry.geometry import (
    similarity_mixing_entropy as similarity_mixing_entropy,
)
from fidia_jax.projects.residual_geometry.geometry import (
    similarity_mixing_gain as similarity_mixing_gain,
)
from fidia_jax.projects.residual_geometry.geometry import (
    token_mixing_entropy as token_mixing_entropy,
)
from fidia_jax.projects.residual_geometry.train import N_VISUAL as N_VISUAL
from fidia_jax.projects.residual_geometry.train import build_model as build_model
from fidia_jax.projects.residual_geometry.train import format_table as format_table
from fidia_jax.projects.residual_geometry.train import headline as headline
from fidia_jax.projects.residual_geometry.train import intervention_hooks as intervention_hooks
from fidia_jax.projects.residual_geometry.train import train_and_evaluate as train_and_evaluate
from fidia_jax.projects.residual_geometry.train import update_geometry as update_geometry

__all__ = [
    "INTERVENTIONS",
    "N_VISUAL",
    "PRESETS",
    "ResidualGeometryConfig",
    "build_model",
    "format_table",
    "headline",
    "get_config",
    "intervention_hooks",
    "load_config",
    "mixing_information_gain",
    "note_residual_information_dynamics",
    "residual_information_dynamics",
    "similarity_mixing_entropy",
    "similarity_mixing_gain",
    "token_mixing_entropy",
    "train_and_evaluate",
    "update_geometry",
]
