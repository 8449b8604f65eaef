"""fidia_jax.data: text corpora and the data-directory rule (:func:`resolve_data_dir`)."""

from fidia_jax._io import resolve_data_dir as resolve_data_dir
from fidia_jax.data._text import BYTE_VOCAB_SIZE as BYTE_VOCAB_SIZE
from fidia_jax.data._text import TextSplits as TextSplits
from fidia_jax.data._text import decode_bytes as decode_bytes
from fidia_jax.data._text import encode_bytes as encode_bytes
from fidia_jax.data._text import load_shakespeare as load_shakespeare
from fidia_jax.data._text import sample_windows as sample_windows

# >>> multifidelity
# <<< multifidelity
# >>> causal
# <<< causal
# >>> varjepa
# <<< varjepa
# >>> ldl
# <<< ldl
# >>> hist
# <<< hist
# >>> teamwork
# <<< teamwork

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
    # >>> multifidelity
    # <<< multifidelity
    # >>> causal
    # <<< causal
    # >>> varjepa
    # <<< varjepa
    # >>> ldl
    # <<< ldl
    # >>> hist
    # <<< hist
    # >>> teamwork
    # <<< teamwork
]
