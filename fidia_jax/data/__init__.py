"""fidia_jax.data: text corpora and the data-directory rule (:func:`resolve_data_dir`)."""

from fidia_jax._io import resolve_data_dir as resolve_data_dir
from fidia_jax.data._algotrace import ALGOTRACE_KEYWORDS as ALGOTRACE_KEYWORDS
from fidia_jax.data._algotrace import ALGOTRACE_PRIMITIVES as ALGOTRACE_PRIMITIVES
from fidia_jax.data._algotrace import ALGOTRACE_STRATEGIES as ALGOTRACE_STRATEGIES
from fidia_jax.data._algotrace import ALGOTRACE_TASKS as ALGOTRACE_TASKS
from fidia_jax.data._algotrace import ALGOTRACE_VOCAB as ALGOTRACE_VOCAB
from fidia_jax.data._algotrace import AlgoTraceData as AlgoTraceData
from fidia_jax.data._algotrace import AlgoTraceInstance as AlgoTraceInstance
from fidia_jax.data._algotrace import algotrace_primitive_labels as algotrace_primitive_labels
from fidia_jax.data._algotrace import algotrace_trace as algotrace_trace
from fidia_jax.data._algotrace import decode_algotrace as decode_algotrace
from fidia_jax.data._algotrace import make_algotrace_data as make_algotrace_data
from fidia_jax.data._algotrace import random_algotrace_instance as random_algotrace_instance
from fidia_jax.data._causal import CausalData as CausalData
from fidia_jax.data._causal import acic2016_covariates as acic2016_covariates
from fidia_jax.data._causal import check_arms as check_arms
from fidia_jax.data._causal import load_ihdp as load_ihdp
from fidia_jax.data._causal import make_multiarm as make_multiarm
from fidia_jax.data._causal import split_causal as split_causal
from fidia_jax.data._dycon import DYCON_ROLES as DYCON_ROLES
from fidia_jax.data._dycon import DyconBatch as DyconBatch
from fidia_jax.data._dycon import DyconGeneration as DyconGeneration
from fidia_jax.data._dycon import DyconVocab as DyconVocab
from fidia_jax.data._dycon import make_dycon_task as make_dycon_task
from fidia_jax.data._dycon import parse_dycon_generation as parse_dycon_generation
from fidia_jax.data._dycon import remaining_length_target as remaining_length_target
from fidia_jax.data._hist import HER2ST_IMAGE_SECTIONS as HER2ST_IMAGE_SECTIONS
from fidia_jax.data._hist import SpotSection as SpotSection
from fidia_jax.data._hist import augment_lattice as augment_lattice
from fidia_jax.data._hist import check_spots as check_spots
from fidia_jax.data._hist import her2st_image_features as her2st_image_features
from fidia_jax.data._hist import load_her2st as load_her2st
from fidia_jax.data._hist import synthetic_sections as synthetic_sections
from fidia_jax.data._ldl import LDL_BENCHMARK_SETS as LDL_BENCHMARK_SETS
from fidia_jax.data._ldl import LDL_POLARITY as LDL_POLARITY
from fidia_jax.data._ldl import LdlDataset as LdlDataset
from fidia_jax.data._ldl import load_ldl_dataset as load_ldl_dataset
from fidia_jax.data._ldl import load_ldl_mat as load_ldl_mat
from fidia_jax.data._ldl import synthetic_ldl_dataset as synthetic_ldl_dataset
from fidia_jax.data._multifidelity import ANALYTIC_FUNCTIONS as ANALYTIC_FUNCTIONS
from fidia_jax.data._multifidelity import AnalyticMultiFidelity as AnalyticMultiFidelity
from fidia_jax.data._multifidelity import FreeSolvTable as FreeSolvTable
from fidia_jax.data._multifidelity import MultiFidelityData as MultiFidelityData
from fidia_jax.data._multifidelity import analytic_multifidelity_task as analytic_multifidelity_task
from fidia_jax.data._multifidelity import freesolv_features as freesolv_features
from fidia_jax.data._multifidelity import freesolv_multifidelity_task as freesolv_multifidelity_task
from fidia_jax.data._multifidelity import load_freesolv as load_freesolv
from fidia_jax.data._residual_geometry import DIGIT_QA_KINDS as DIGIT_QA_KINDS
from fidia_jax.data._residual_geometry import DIGIT_QA_VOCAB as DIGIT_QA_VOCAB
from fidia_jax.data._residual_geometry import DigitQuestions as DigitQuestions
from fidia_jax.data._residual_geometry import digit_qa_token as digit_qa_token
from fidia_jax.data._residual_geometry import make_digit_questions as make_digit_questions
from fidia_jax.data._safesci import SAFESCI_DISCIPLINES as SAFESCI_DISCIPLINES
from fidia_jax.data._safesci import SAFESCI_OFFICIAL_PROMPT as SAFESCI_OFFICIAL_PROMPT
from fidia_jax.data._safesci import SAFESCI_TYPES as SAFESCI_TYPES
from fidia_jax.data._safesci import SafeSciPrompt as SafeSciPrompt
from fidia_jax.data._safesci import SafeSciRecord as SafeSciRecord
from fidia_jax.data._safesci import load_safesci_jsonl as load_safesci_jsonl
from fidia_jax.data._safesci import safesci_prompt as safesci_prompt
from fidia_jax.data._safesci import safesci_record_from_dict as safesci_record_from_dict
from fidia_jax.data._teamwork import ANOMALY_KINDS as ANOMALY_KINDS
from fidia_jax.data._teamwork import SKAB_CHANNELS as SKAB_CHANNELS
from fidia_jax.data._teamwork import SKAB_TRAIN_SIZE as SKAB_TRAIN_SIZE
from fidia_jax.data._teamwork import SkabRun as SkabRun
from fidia_jax.data._teamwork import SyntheticSeries as SyntheticSeries
from fidia_jax.data._teamwork import dominant_period as dominant_period
from fidia_jax.data._teamwork import load_skab as load_skab
from fidia_jax.data._teamwork import make_synthetic as make_synthetic
from fidia_jax.data._teamwork import validate_series as validate_series
from fidia_jax.data._text import BYTE_VOCAB_SIZE as BYTE_VOCAB_SIZE
from fidia_jax.data._text import TextSplits as TextSplits
from fidia_jax.data._text import decode_bytes as decode_bytes
from fidia_jax.data._text import encode_bytes as encode_bytes
from fidia_jax.data._text import load_shakespeare as load_shakespeare
from fidia_jax.data._text import sample_windows as sample_windows
from fidia_jax.data._varjepa_tabular import TABULAR_DATASETS as TABULAR_DATASETS
from fidia_jax.data._varjepa_tabular import UNKNOWN_CATEGORY as UNKNOWN_CATEGORY
from fidia_jax.data._varjepa_tabular import TabularEncoder as TabularEncoder
from fidia_jax.data._varjepa_tabular import TabularSchema as TabularSchema
from fidia_jax.data._varjepa_tabular import TabularSplit as TabularSplit
from fidia_jax.data._varjepa_tabular import TabularSplits as TabularSplits
from fidia_jax.data._varjepa_tabular import fit_tabular_encoder as fit_tabular_encoder
from fidia_jax.data._varjepa_tabular import load_tabular as load_tabular
from fidia_jax.data._vision import BUNDLED_PHOTO_NAMES as BUNDLED_PHOTO_NAMES
from fidia_jax.data._vision import bundled_photos as bundled_photos
from fidia_jax.data._vision import load_digit_images as load_digit_images
from fidia_jax.data._vision import random_crops as random_crops

__all__: list[str] = [
    # byte tokenizer + Shakespeare corpus
    "BYTE_VOCAB_SIZE",
    "TextSplits",
    "decode_bytes",
    "encode_bytes",
    "load_shakespeare",
    # the one data-directory rule (argument / --data-dir, then $FIDIA_DATA_DIR, then DataError)
    "resolve_data_dir",
    "sample_windows",
    # multi-fidelity learning from trusted label subsets
    "ANALYTIC_FUNCTIONS",
    "AnalyticMultiFidelity",
    "FreeSolvTable",
    "MultiFidelityData",
    "analytic_multifidelity_task",
    "freesolv_features",
    "freesolv_multifidelity_task",
    "load_freesolv",
    # multi-treatment effects, CFR balancing, CausalEGM
    "CausalData",
    "acic2016_covariates",
    "check_arms",
    "load_ihdp",
    "make_multiarm",
    "split_causal",
    # Var-JEPA / T-JEPA (tabular)
    "TABULAR_DATASETS",
    "UNKNOWN_CATEGORY",
    "TabularEncoder",
    "TabularSchema",
    "TabularSplit",
    "TabularSplits",
    "fit_tabular_encoder",
    "load_tabular",
    # divisiveness-consistent label distribution learning
    "LDL_BENCHMARK_SETS",
    "LDL_POLARITY",
    "LdlDataset",
    "load_ldl_dataset",
    "load_ldl_mat",
    "synthetic_ldl_dataset",
    # HiST (spatial transcriptomics)
    "HER2ST_IMAGE_SECTIONS",
    "SpotSection",
    "augment_lattice",
    "check_spots",
    "her2st_image_features",
    "load_her2st",
    "synthetic_sections",
    # TeamWork (time-series anomaly detection)
    "ANOMALY_KINDS",
    "SKAB_CHANNELS",
    "SKAB_TRAIN_SIZE",
    "SkabRun",
    "SyntheticSeries",
    "dominant_period",
    "load_skab",
    "make_synthetic",
    "validate_series",
    "BUNDLED_PHOTO_NAMES",
    "bundled_photos",
    "load_digit_images",
    "random_crops",
    "DYCON_ROLES",
    "DyconBatch",
    "DyconGeneration",
    "DyconVocab",
    "make_dycon_task",
    "parse_dycon_generation",
    "remaining_length_target",
    "ALGOTRACE_KEYWORDS",
    "ALGOTRACE_PRIMITIVES",
    "ALGOTRACE_STRATEGIES",
    "ALGOTRACE_TASKS",
    "ALGOTRACE_VOCAB",
    "AlgoTraceData",
    "AlgoTraceInstance",
    "algotrace_primitive_labels",
    "algotrace_trace",
    "decode_algotrace",
    "make_algotrace_data",
    "random_algotrace_instance",
    "DIGIT_QA_KINDS",
    "DIGIT_QA_VOCAB",
    "DigitQuestions",
    "digit_qa_token",
    "make_digit_questions",
    "SAFESCI_DISCIPLINES",
    "SAFESCI_OFFICIAL_PROMPT",
    "SAFESCI_TYPES",
    "SafeSciPrompt",
    "SafeSciRecord",
    "load_safesci_jsonl",
    "safesci_prompt",
    "safesci_record_from_dict",
]
