"""fidia_jax.data: text corpora and the data-directory rule (:func:`resolve_data_dir`)."""

from fidia_jax._io import resolve_data_dir as resolve_data_dir
from fidia_jax.data._hist import HER2ST_IMAGE_SECTIONS as HER2ST_IMAGE_SECTIONS
from fidia_jax.data._hist import SpotSection as SpotSection
from fidia_jax.data._hist import augment_lattice as augment_lattice
from fidia_jax.data._hist import check_spots as check_spots
from fidia_jax.data._hist import her2st_image_features as her2st_image_features
from fidia_jax.data._hist import load_her2st as load_her2st
from fidia_jax.data._hist import synthetic_sections as synthetic_sections
from fidia_jax.data._hitvar import Degradation as Degradation
from fidia_jax.data._hitvar import degrade as degrade
from fidia_jax.data._hitvar import make_sr_pairs as make_sr_pairs
from fidia_jax.data._hypcl import class_incremental_split as class_incremental_split
from fidia_jax.data._hypcl import hierarchical_gaussian_mixture as hierarchical_gaussian_mixture
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
    "Degradation",
    "degrade",
    "make_sr_pairs",
    "class_incremental_split",
    "hierarchical_gaussian_mixture",
]
