"""fidia_jax.protein: structure I/O, featurisation, motif specifications."""

from fidia_jax.protein._motif import MotifBenchCase as MotifBenchCase
from fidia_jax.protein._motif import MotifInfo as MotifInfo
from fidia_jax.protein._motif import MotifSegment as MotifSegment
from fidia_jax.protein._motif import RFDiffusionProblem as RFDiffusionProblem
from fidia_jax.protein._motif import load_motif_info as load_motif_info
from fidia_jax.protein._motif import load_motifbench_cases as load_motifbench_cases
from fidia_jax.protein._motif import load_rfdiffusion_benchmark as load_rfdiffusion_benchmark
from fidia_jax.protein._motif import motif_segments as motif_segments
from fidia_jax.protein._motif import parse_motif_spec as parse_motif_spec
from fidia_jax.protein._structure import default_backbone_path as default_backbone_path
from fidia_jax.protein._structure import load_structure as load_structure
from fidia_jax.protein._types import ALPHABET as ALPHABET
from fidia_jax.protein._types import Protein as Protein

__all__: list[str] = [
    # records and structure I/O
    "ALPHABET",
    "Protein",
    "default_backbone_path",
    "load_structure",
    # motif specifications and benchmark tables
    "MotifBenchCase",
    "MotifInfo",
    "MotifSegment",
    "RFDiffusionProblem",
    "load_motif_info",
    "load_motifbench_cases",
    "load_rfdiffusion_benchmark",
    "motif_segments",
    "parse_motif_spec",
]
