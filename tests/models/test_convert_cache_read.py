"""Reading the conversion cache's safetensors file without a memory map (issue 39, Deliver 4):
``fidia_jax._disk_cache.safetensors_table`` + ``read_into`` give back every array that
``safetensors.numpy`` wrote, bit for bit, and refuse a damaged file with a ``ValueError``."""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest

from fidia_jax import _disk_cache as cc

st = pytest.importorskip("safetensors.numpy")


def _arrays():
    rng = np.random.default_rng(0)
    return {
        "embed": rng.normal(size=(7, 5)).astype(np.float32),
        "layers.0.scale": rng.normal(size=(5,)).astype(np.float32),
        "layers.0.kernel": rng.normal(size=(5, 3, 2)).astype(np.float16),
        "ids": np.arange(6, dtype=np.int64).reshape(2, 3),
        "empty": np.zeros((0, 4), np.float32),
    }


def test_plain_reads_give_back_what_safetensors_wrote(tmp_path):
    path = str(tmp_path / "w.safetensors")
    arrays = _arrays()
    st.save_file(arrays, path, metadata={"note": "kept out of the table"})
    table = cc.safetensors_table(path)
    assert set(table) == set(arrays)
    codes = {np.float32: "F32", np.float16: "F16", np.int64: "I64"}
    for name, want in arrays.items():
        code, shape, offset, nbytes = table[name]
        assert (code, shape, nbytes) == (codes[want.dtype.type], want.shape, want.nbytes)
        got = np.empty(shape, want.dtype)
        cc.read_into(path, offset, memoryview(got.reshape(-1)).cast("B"))
        np.testing.assert_array_equal(got, want)
        assert got.tobytes() == want.tobytes()


def test_a_damaged_file_is_refused(tmp_path):
    path = tmp_path / "w.safetensors"
    st.save_file(_arrays(), str(path))
    data = path.read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    cut = tmp_path / "cut.safetensors"
    cut.write_bytes(data[:-8])  # the last tensor's data runs past the end
    with pytest.raises(ValueError, match="has data offsets"):
        cc.safetensors_table(str(cut))
    code, shape, offset, nbytes = cc.safetensors_table(str(path))["embed"]
    with pytest.raises(ValueError, match="bytes short"):
        cc.read_into(str(cut), len(data) - 16, bytearray(nbytes))
    head = json.loads(data[8 : 8 + n])
    head["embed"]["shape"] = [7, 6]  # the size no longer matches the offsets
    body = json.dumps(head).encode()
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(struct.pack("<Q", len(body)) + body + data[8 + n :])
    with pytest.raises(ValueError, match="'embed'.*has data offsets"):
        cc.safetensors_table(str(bad))
    head["embed"]["shape"], head["embed"]["dtype"] = [7, 5], "F7"
    body = json.dumps(head).encode()
    bad.write_bytes(struct.pack("<Q", len(body)) + body + data[8 + n :])
    with pytest.raises(ValueError, match="unknown dtype 'F7'"):
        cc.safetensors_table(str(bad))
    (tmp_path / "short").write_bytes(b"\x01\x02")
    with pytest.raises(ValueError, match="too short"):
        cc.safetensors_table(str(tmp_path / "short"))
    (tmp_path / "long").write_bytes(struct.pack("<Q", 10**6) + b"{}")
    with pytest.raises(ValueError, match="runs past the end"):
        cc.safetensors_table(str(tmp_path / "long"))
    (tmp_path / "json").write_bytes(struct.pack("<Q", 3) + b"{x}")
    with pytest.raises(ValueError, match="unreadable safetensors header"):
        cc.safetensors_table(str(tmp_path / "json"))
