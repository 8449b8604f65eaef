"""fidia_jax.protein: structure I/O, featurisation, motif specifications."""

from fidia_jax.protein._structure import default_backbone_path as default_backbone_path
from fidia_jax.protein._structure import load_structure as load_structure
from fidia_jax.protein._types import ALPHABET as ALPHABET
from fidia_jax.protein._types import Protein as Protein

__all__: list[str] = [
    "ALPHABET",
    "Protein",
    "default_backbone_path",
    "load_structure",
]
