"""fidia_jax.protein: structure I/O, featurisation, motif specifications, success criteria and
the structure predictors behind them (AlphaFold2 with the ``fold`` extra)."""

from fidia_jax.protein._alphafold import AF2_LENGTH_BUCKETS as AF2_LENGTH_BUCKETS
from fidia_jax.protein._alphafold import AlphaFoldPrediction as AlphaFoldPrediction
from fidia_jax.protein._alphafold import AlphaFoldPredictor as AlphaFoldPredictor
from fidia_jax.protein._alphafold import alphafold_config as alphafold_config
from fidia_jax.protein._alphafold import find_alphafold_params as find_alphafold_params
from fidia_jax.protein._alphafold import random_alphafold_params as random_alphafold_params
from fidia_jax.protein._alphafold import read_alphafold_params as read_alphafold_params
from fidia_jax.protein._design import DesignSetup as DesignSetup
from fidia_jax.protein._design import prepare_design as prepare_design
from fidia_jax.protein._design import select_chains as select_chains
from fidia_jax.protein._fasta import read_fasta as read_fasta
from fidia_jax.protein._geometry import SSE_CODES as SSE_CODES
from fidia_jax.protein._geometry import cb_neighbor_counts as cb_neighbor_counts
from fidia_jax.protein._geometry import kabsch as kabsch
from fidia_jax.protein._geometry import kabsch_rmsd as kabsch_rmsd
from fidia_jax.protein._geometry import pairwise_distances as pairwise_distances
from fidia_jax.protein._geometry import secondary_structure as secondary_structure
from fidia_jax.protein._geometry import virtual_cb as virtual_cb
from fidia_jax.protein._motif import MotifBenchCase as MotifBenchCase
from fidia_jax.protein._motif import MotifInfo as MotifInfo
from fidia_jax.protein._motif import MotifSegment as MotifSegment
from fidia_jax.protein._motif import RFDiffusionProblem as RFDiffusionProblem
from fidia_jax.protein._motif import load_motif_info as load_motif_info
from fidia_jax.protein._motif import load_motifbench_cases as load_motifbench_cases
from fidia_jax.protein._motif import load_rfdiffusion_benchmark as load_rfdiffusion_benchmark
from fidia_jax.protein._motif import motif_segments as motif_segments
from fidia_jax.protein._motif import parse_motif_spec as parse_motif_spec
from fidia_jax.protein._mpnn_jsonl import read_bias_aa as read_bias_aa
from fidia_jax.protein._mpnn_jsonl import read_bias_by_res as read_bias_by_res
from fidia_jax.protein._mpnn_jsonl import read_chain_assignments as read_chain_assignments
from fidia_jax.protein._mpnn_jsonl import read_fixed_positions as read_fixed_positions
from fidia_jax.protein._mpnn_jsonl import read_omit_aa_by_res as read_omit_aa_by_res
from fidia_jax.protein._mpnn_jsonl import read_parsed_chains_jsonl as read_parsed_chains_jsonl
from fidia_jax.protein._mpnn_jsonl import read_tied_positions as read_tied_positions
from fidia_jax.protein._mpnn_jsonl import write_parsed_chains_jsonl as write_parsed_chains_jsonl
from fidia_jax.protein._rewards_terms import HYDROPATHY_KD as HYDROPATHY_KD
from fidia_jax.protein._rewards_terms import SSE_PROPENSITY as SSE_PROPENSITY
from fidia_jax.protein._rewards_terms import burial_score as burial_score
from fidia_jax.protein._rewards_terms import decode_tokens as decode_tokens
from fidia_jax.protein._rewards_terms import epitope_cys_count as epitope_cys_count
from fidia_jax.protein._rewards_terms import homopolymer_max_run as homopolymer_max_run
from fidia_jax.protein._rewards_terms import low_complexity_fraction as low_complexity_fraction
from fidia_jax.protein._rewards_terms import protparam_metrics as protparam_metrics
from fidia_jax.protein._rewards_terms import sequon_count as sequon_count
from fidia_jax.protein._rewards_terms import sse_score as sse_score
from fidia_jax.protein._rewards_terms import unpaired_cys_count as unpaired_cys_count
from fidia_jax.protein._structure import default_backbone_path as default_backbone_path
from fidia_jax.protein._structure import load_structure as load_structure
from fidia_jax.protein._success import StructurePredictor as StructurePredictor
from fidia_jax.protein._success import join_chains as join_chains
from fidia_jax.protein._success import structure_success as structure_success
from fidia_jax.protein._tasks import ENZYME_PDB_IDS as ENZYME_PDB_IDS
from fidia_jax.protein._tasks import EPITOPE_PDB_IDS as EPITOPE_PDB_IDS
from fidia_jax.protein._tasks import DesignTask as DesignTask
from fidia_jax.protein._tasks import assign_splits as assign_splits
from fidia_jax.protein._tasks import check_split as check_split
from fidia_jax.protein._tasks import load_generic_tasks as load_generic_tasks
from fidia_jax.protein._tasks import load_motifbench_tasks as load_motifbench_tasks
from fidia_jax.protein._tasks import load_rfdiffusion_tasks as load_rfdiffusion_tasks
from fidia_jax.protein._tasks import load_tasks as load_tasks
from fidia_jax.protein._tasks import restrict_to_chains as restrict_to_chains
from fidia_jax.protein._tasks import task_from_structure as task_from_structure
from fidia_jax.protein._types import ALPHABET as ALPHABET
from fidia_jax.protein._types import Protein as Protein

__all__: list[str] = [
    # records and structure I/O
    "ALPHABET",
    "Protein",
    "default_backbone_path",
    "load_structure",
    "read_fasta",
    # the original ProteinMPNN's helper-script JSONL files
    "read_bias_aa",
    "read_bias_by_res",
    "read_chain_assignments",
    "read_fixed_positions",
    "read_omit_aa_by_res",
    "read_tied_positions",
    "read_parsed_chains_jsonl",
    "write_parsed_chains_jsonl",
    # design problems on a structure (designed chains, fixed motif)
    "DesignSetup",
    "prepare_design",
    "select_chains",
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
    # geometry
    "SSE_CODES",
    "cb_neighbor_counts",
    "kabsch",
    "kabsch_rmsd",
    "pairwise_distances",
    "secondary_structure",
    "virtual_cb",
    # design tasks and splits
    "ENZYME_PDB_IDS",
    "EPITOPE_PDB_IDS",
    "DesignTask",
    "assign_splits",
    "check_split",
    "load_generic_tasks",
    "load_motifbench_tasks",
    "load_rfdiffusion_tasks",
    "load_tasks",
    "restrict_to_chains",
    "task_from_structure",
    # sequence terms (judge-free; FIDIA's composite reward in fidia_jax.projects.fidia builds on them)
    "HYDROPATHY_KD",
    "SSE_PROPENSITY",
    "burial_score",
    "decode_tokens",
    "epitope_cys_count",
    "homopolymer_max_run",
    "low_complexity_fraction",
    "protparam_metrics",
    "sequon_count",
    "sse_score",
    "unpaired_cys_count",
    # success criteria on a predicted structure
    "StructurePredictor",
    "join_chains",
    "structure_success",
    # folding models behind StructurePredictor (the 'fold' extra)
    "AF2_LENGTH_BUCKETS",
    "AlphaFoldPrediction",
    "AlphaFoldPredictor",
    "STRUCTURE_PREDICTORS",
    "alphafold_config",
    "find_alphafold_params",
    "random_alphafold_params",
    "read_alphafold_params",
]

#: Structure predictors by name (each imports its model package only when built).
STRUCTURE_PREDICTORS: dict[str, type] = {"alphafold2": AlphaFoldPredictor}
