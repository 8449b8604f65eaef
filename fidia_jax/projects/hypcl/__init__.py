"""fidia_jax.projects.hypcl: hyperbolic adapters for class-incremental learning (HypCL).

A frozen pretrained encoder (ImageNet AlexNet, conv5) is adapted in the Poincaré ball: a small
adapter maps its features into the ball (``exp_0`` of a clipped linear projection, then a Möbius
linear layer), and one hyperbolic prototype per class gives the logits ``-d_c(z, p_k)^2``. Tasks
of two classes arrive one by one; the driver compares HypCL with the same adapter in Euclidean
space, nearest-class-mean on the frozen features, sequential fine-tuning (lower bound) and joint
training (upper bound), on several class orders, and sweeps the depth of a synthetic class tree.

Paper: "HypCL: Adapting CLIP in Hyperbolic Space for Continual Learning", ICML 2026 (poster
61473; no code released). That paper adapts CLIP with task-specific hyperbolic transformations,
a task-weighting step and class prototypes; **this driver is a reconstruction of a different
method, built from a summary** (one hyperbolic adapter on frozen features): the adapter, the
frozen old prototypes, the embedding-distillation term, the Riemannian Adam on the prototypes and
the whole protocol are our choices (``docs/hypcl.md`` marks each formula).

The method's own modules: ``model.py`` (:class:`PrototypeAdapter`, :class:`BallParam`,
``embedding_distance``), ``losses.py`` (:func:`masked_cross_entropy`,
:func:`embedding_distillation`), ``data.py`` (:func:`hierarchical_gaussian_mixture`,
:func:`class_incremental_split`); these six are re-exported here (the notebook builds a small
prototype classifier from them). Shared primitives used: :mod:`fidia_jax.layers` Poincaré-ball
ops (:func:`~fidia_jax.layers.expmap0`, :func:`~fidia_jax.layers.poincare_distance`,
:class:`~fidia_jax.layers.HypLinear`, :func:`~fidia_jax.layers.prototype_logits`, ...),
:func:`fidia_jax.optim.riemannian_adam`, :func:`fidia_jax.models.alexnet_embedding`,
:func:`fidia_jax.data.load_digit_images`, :func:`fidia_jax.metrics.continual_metrics`,
:mod:`fidia_jax.train` (the step, the report files).
"""

from fidia_jax.projects.hypcl._continual import ContinualData as ContinualData
from fidia_jax.projects.hypcl._continual import run_method as run_method
from fidia_jax.projects.hypcl.configs import METHODS as METHODS
from fidia_jax.projects.hypcl.configs import PRESETS as PRESETS
from fidia_jax.projects.hypcl.configs import HypclConfig as HypclConfig
from fidia_jax.projects.hypcl.configs import get_config as get_config
from fidia_jax.projects.hypcl.configs import load_config as load_config
from fidia_jax.projects.hypcl.data import class_incremental_split as class_incremental_split
from fidia_jax.projects.hypcl.data import (
    hierarchical_gaussian_mixture as hierarchical_gaussian_mixture,
)
from fidia_jax.projects.hypcl.losses import embedding_distillation as embedding_distillation
from fidia_jax.projects.hypcl.losses import masked_cross_entropy as masked_cross_entropy
from fidia_jax.projects.hypcl.model import BallParam as BallParam
from fidia_jax.projects.hypcl.model import PrototypeAdapter as PrototypeAdapter
from fidia_jax.projects.hypcl.model import embedding_distance as embedding_distance
from fidia_jax.projects.hypcl.model import nan_outside_ball as nan_outside_ball
from fidia_jax.projects.hypcl.train import class_orders as class_orders
from fidia_jax.projects.hypcl.train import digit_features as digit_features
from fidia_jax.projects.hypcl.train import format_table as format_table
from fidia_jax.projects.hypcl.train import paired_order_test as paired_order_test
from fidia_jax.projects.hypcl.train import run_stream as run_stream
from fidia_jax.projects.hypcl.train import synthetic_task as synthetic_task
from fidia_jax.projects.hypcl.train import train_and_evaluate as train_and_evaluate
from fidia_jax.projects.hypcl.train import tune_on_validation as tune_on_validation

__all__ = [
    "METHODS",
    "PRESETS",
    "BallParam",
    "ContinualData",
    "HypclConfig",
    "PrototypeAdapter",
    "class_incremental_split",
    "class_orders",
    "digit_features",
    "embedding_distance",
    "embedding_distillation",
    "format_table",
    "get_config",
    "hierarchical_gaussian_mixture",
    "load_config",
    "masked_cross_entropy",
    "nan_outside_ball",
    "paired_order_test",
    "run_method",
    "run_stream",
    "synthetic_task",
    "train_and_evaluate",
    "tune_on_validation",
]
