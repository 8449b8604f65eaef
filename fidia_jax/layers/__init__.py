"""fidia_jax.layers: reusable layers any model may call (attention registry, RoPE, HiST lattice).

Primitives by kind (``docs/architecture.md``): layers import only ``jax``/``flax``,
``fidia_jax.errors`` and ``fidia_jax.data`` (HiST's lattice check); the attention registry reaches the Pallas kernels of ``fidia_jax.kernels``
lazily, by name, so importing a layer never imports a kernel.
"""

from fidia_jax.layers._attention import AttentionFn as AttentionFn
from fidia_jax.layers._attention import attention_weights as attention_weights
from fidia_jax.layers._attention import get_attention_impl as get_attention_impl
from fidia_jax.layers._attention import is_decode_only as is_decode_only
from fidia_jax.layers._attention import list_attention_impls as list_attention_impls
from fidia_jax.layers._attention import register_attention_impl as register_attention_impl
from fidia_jax.layers._attention import xla_attention as xla_attention
from fidia_jax.layers._hist import AttentionStats as AttentionStats
from fidia_jax.layers._hist import LatticeLevel as LatticeLevel
from fidia_jax.layers._hist import PoolPlan as PoolPlan
from fidia_jax.layers._hist import WindowPlan as WindowPlan
from fidia_jax.layers._hist import check_lattice as check_lattice
from fidia_jax.layers._hist import dense_window_attention as dense_window_attention
from fidia_jax.layers._hist import hierarchy_sizes as hierarchy_sizes
from fidia_jax.layers._hist import lattice_window_attention as lattice_window_attention
from fidia_jax.layers._hist import merge_attention_stats as merge_attention_stats
from fidia_jax.layers._hist import plan_hierarchy as plan_hierarchy
from fidia_jax.layers._hist import plan_pooling as plan_pooling
from fidia_jax.layers._hist import plan_windows as plan_windows
from fidia_jax.layers._hist import sparse_patch_pool as sparse_patch_pool
from fidia_jax.layers._hist import sparse_unpool as sparse_unpool
from fidia_jax.layers._hist import window_attention_stats as window_attention_stats
from fidia_jax.layers._rope import apply_rope as apply_rope
# >>> vision
# <<< vision
# >>> streamflow
# <<< streamflow
# >>> hitvar
# <<< hitvar
# >>> hypcl
# <<< hypcl
# >>> dycon
# <<< dycon
# >>> algotrace
# <<< algotrace
# >>> residual_geometry
# <<< residual_geometry
# >>> safesci
# <<< safesci

__all__ = [
    "AttentionFn",
    "attention_weights",
    "AttentionStats",
    "LatticeLevel",
    "PoolPlan",
    "WindowPlan",
    "apply_rope",
    "check_lattice",
    "dense_window_attention",
    "get_attention_impl",
    "hierarchy_sizes",
    "is_decode_only",
    "lattice_window_attention",
    "list_attention_impls",
    "merge_attention_stats",
    "plan_hierarchy",
    "plan_pooling",
    "plan_windows",
    "register_attention_impl",
    "sparse_patch_pool",
    "sparse_unpool",
    "window_attention_stats",
    "xla_attention",
    # >>> vision
    # <<< vision
    # >>> streamflow
    # <<< streamflow
    # >>> hitvar
    # <<< hitvar
    # >>> hypcl
    # <<< hypcl
    # >>> dycon
    # <<< dycon
    # >>> algotrace
    # <<< algotrace
    # >>> residual_geometry
    # <<< residual_geometry
    # >>> safesci
    # <<< safesci
]
