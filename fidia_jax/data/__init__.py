"""fidia_jax.data: text corpora and the data-directory rule (:func:`resolve_data_dir`)."""

from fidia_jax._io import resolve_data_dir as resolve_data_dir
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

__all__ = [
    "resolve_data_dir",
    "BYTE_VOCAB_SIZE",
    "TextSplits",
    "decode_bytes",
    "encode_bytes",
    "load_shakespeare",
    "sample_windows",
    "BUNDLED_PHOTO_NAMES",
    "bundled_photos",
    "load_digit_images",
    "random_crops",
]
