"""Loaders refuse broken checkpoints with one CheckpointError naming the file and the tensor.

Each broken checkpoint is a tiny random one written here in the real layout (the writers of
``test_checkpoints.py``: Hugging Face safetensors shards + index, GGUF by ``gguf.GGUFWriter``),
then broken the way real downloads break: a tensor in two shards, an index that points at the
wrong shard, a stray weights file beside the index, truncated or corrupt files.
"""

from __future__ import annotations

import json
import os
import pathlib
import sys
import time

import numpy as np
import pytest

from fidia_jax import models
from fidia_jax.errors import CheckpointError

st = pytest.importorskip("safetensors.numpy")
gguf = pytest.importorskip("gguf")

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import test_checkpoints as h  # noqa: E402

sys.path.pop(0)

SHARD1, SHARD2 = "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"
EMB = "model.embed_tokens.weight"


def _sharded(path):
    hf = h.FAMILIES["llama"]
    h._write_hf(path, hf, h._hf_weights(hf, seed=1), shards=2)
    index = json.loads((path / "model.safetensors.index.json").read_text())
    return index["weight_map"]


def _refused(path, *needles, loader=models.load_hf_checkpoint):
    t0 = time.perf_counter()
    with pytest.raises(CheckpointError) as err:
        loader(path)
    assert time.perf_counter() - t0 < 5.0
    for needle in needles:
        assert needle in str(err.value), (needle, str(err.value))
    return str(err.value)


def test_sharded_checkpoint_still_loads(tmp_path):
    _sharded(tmp_path / "ok")
    model = models.load_hf_checkpoint(tmp_path / "ok")
    assert model.config.n_layers == h.L


def test_tensor_in_two_shards(tmp_path):
    wm = _sharded(tmp_path)
    other = SHARD2 if wm[EMB] == SHARD1 else SHARD1
    held = st.load_file(str(tmp_path / other))
    held[EMB] = np.zeros((h.V, h.C), np.float32)
    st.save_file(held, str(tmp_path / other))
    _refused(tmp_path, EMB, "two shards", SHARD1, SHARD2)


def test_index_points_to_wrong_shard(tmp_path):
    wm = _sharded(tmp_path)
    right = wm[EMB]
    wm[EMB] = SHARD2 if right == SHARD1 else SHARD1
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": wm}))
    _refused(tmp_path, EMB, wm[EMB], f"{right!r} holds it")


def test_tensor_missing_from_index(tmp_path):
    wm = _sharded(tmp_path)
    del wm[EMB]
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": wm}))
    _refused(tmp_path, EMB, "not in the index")


def test_unindexed_weights_file_beside_index(tmp_path):
    _sharded(tmp_path)
    st.save_file({"x": np.zeros(3, np.float32)}, str(tmp_path / "model.safetensors"))
    _refused(tmp_path, "model.safetensors", "does not list it")


def test_truncated_safetensors(tmp_path):
    wm = _sharded(tmp_path)
    file = tmp_path / SHARD2
    size = file.stat().st_size
    with open(file, "r+b") as f:
        f.truncate(size - 100)
    last = max(
        (n for n, s in wm.items() if s == SHARD2),
        key=lambda n: json.loads(_header(file))[n]["data_offsets"][1],
    )
    _refused(tmp_path, SHARD2, last, "truncated")


def _header(file):
    raw = pathlib.Path(file).read_bytes()
    n = int.from_bytes(raw[:8], "little")
    return raw[8 : 8 + n]


def test_corrupt_safetensors_header(tmp_path):
    hf = h.FAMILIES["llama"]
    h._write_hf(tmp_path, hf, h._hf_weights(hf, seed=1))
    file = tmp_path / "model.safetensors"
    raw = bytearray(file.read_bytes())
    raw[8:12] = b"\xff\xfe\x00{"  # not JSON
    file.write_bytes(bytes(raw))
    _refused(tmp_path, "model.safetensors", "corrupt")
    raw[:8] = (10**12).to_bytes(8, "little")  # header longer than the file
    file.write_bytes(bytes(raw))
    _refused(tmp_path, "model.safetensors", "truncated")


def test_safetensors_entry_size_mismatch(tmp_path):
    hf = h.FAMILIES["llama"]
    h._write_hf(tmp_path, hf, h._hf_weights(hf, seed=1))
    file = tmp_path / "model.safetensors"
    raw = file.read_bytes()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8 : 8 + n])
    header[EMB]["shape"] = [h.V, h.C + 1]  # same byte range, a shape that needs more
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (n - len(text))
    assert len(text) == n
    file.write_bytes(raw[:8] + text + raw[8 + n :])
    _refused(tmp_path, EMB, "shape need")


def _gguf(path):
    hf = h.FAMILIES["qwen3"]
    h._write_gguf(path, "qwen3", hf, h._hf_weights(hf, seed=2))
    return gguf.GGUFReader(str(path))


def test_gguf_data_cut_short(tmp_path):
    """Header and tensor table intact, data cut: refused from the table, naming the tensor."""
    file = tmp_path / "q.gguf"
    reader = _gguf(file)
    last = max(reader.tensors, key=lambda t: t.data_offset)
    del reader
    size = file.stat().st_size
    with open(file, "r+b") as f:
        f.truncate(size - 64)
    _refused(file, last.name, "truncated", str(file), loader=models.load_gguf)
    _refused(file, last.name, "truncated", loader=models.load_tokenizer)
    _refused(file, last.name, loader=models.load_lm_checkpoint)


def test_gguf_header_cut_or_corrupt(tmp_path):
    file = tmp_path / "q.gguf"
    _gguf(file)
    raw = file.read_bytes()
    (tmp_path / "head.gguf").write_bytes(raw[:200])  # inside the key-value table
    _refused(tmp_path / "head.gguf", "head.gguf", "truncated", loader=models.load_gguf)
    (tmp_path / "magic.gguf").write_bytes(b"GGUX" + raw[4:])
    _refused(tmp_path / "magic.gguf", "magic.gguf", "not a GGUF", loader=models.load_gguf)
    (tmp_path / "tiny.gguf").write_bytes(raw[:10])
    _refused(tmp_path / "tiny.gguf", "tiny.gguf", loader=models.load_gguf)


def test_gguf_intact_still_loads(tmp_path):
    _gguf(tmp_path / "q.gguf")
    assert models.load_gguf(tmp_path / "q.gguf").config.n_layers == h.L
    assert os.path.getsize(tmp_path / "q.gguf") > 0
