"""The conversion cache of the language-model loaders (``fidia_jax/_disk_cache.py``).

Tiny random checkpoints in the real layouts (the writers of ``test_checkpoints.py``: safetensors
shards + index, GGUF by ``gguf.GGUFWriter`` with Q8_0 tensors; the tokenizer vocabularies of
``tests/data/lm_tokenizer``). A hit must give the arrays of a fresh conversion bit for bit.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import pathlib
import shutil
import subprocess
import sys
import threading
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from fidia_jax import _disk_cache as cc
from fidia_jax import models
from fidia_jax.errors import ConfigError

st = pytest.importorskip("safetensors.numpy")
gguf = pytest.importorskip("gguf")
pytest.importorskip("sentencepiece")
pytest.importorskip("tokenizers")

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import test_checkpoints as h  # noqa: E402

sys.path.pop(0)

DATA = HERE.parent / "data" / "lm_tokenizer"
QUANT = ("attn_q", "ffn_up", "token_embd")


def _leaves(model) -> dict[str, np.ndarray]:
    flat = jax.tree_util.tree_flatten_with_path(nnx.state(model))[0]
    return {jax.tree_util.keystr(path): np.asarray(x) for path, x in flat}


def _assert_same(a, b):
    la, lb = _leaves(a), _leaves(b)
    assert la.keys() == lb.keys()
    for name in la:
        assert la[name].dtype == lb[name].dtype, name
        np.testing.assert_array_equal(la[name], lb[name], err_msg=name)
    assert a.config == b.config


def _gemma_gguf(path, seed=11):
    hf = dict(h.FAMILIES["gemma3_text"], query_pre_attn_scalar=16, rope_scaling=None)
    hf["sliding_window_pattern"] = 6
    h._write_gguf(path, "gemma3", hf, h._hf_weights(hf, seed=seed), quantize=QUANT)
    return path


def _entries(root, kind=None) -> list[pathlib.Path]:
    root = pathlib.Path(root)
    if not root.is_dir():
        return []
    return sorted(
        p
        for p in root.iterdir()
        if not p.name.startswith(".") and (kind is None or p.name.startswith(kind))
    )


def _valid(entry_dir: pathlib.Path) -> bool:
    body = json.loads((entry_dir / "manifest.json").read_text())["body"]
    e = cc.Entry(str(entry_dir.parent), body["kind"], body["key"], where="test")
    assert e.path == str(entry_dir)
    return e.read() is not None


def test_gguf_hit_is_bit_identical_and_shared_across_call_options(tmp_path, capsys):
    file = _gemma_gguf(tmp_path / "g.gguf")
    cache = tmp_path / "cache"
    fresh = models.load_gguf(file, cache=False)
    first = models.load_gguf(file, cache_dir=cache, cache=True)
    assert "converting g.gguf" in capsys.readouterr().err
    (entry,) = _entries(cache)
    assert entry.name.startswith("gguf-model-") and _valid(entry)
    assert sorted(p.name for p in entry.iterdir()) == ["manifest.json", "weights.safetensors"]
    hit = models.load_gguf(file, cache_dir=cache, cache=True)
    err = capsys.readouterr().err
    assert f"loaded from cache {entry}" in err and "converting" not in err
    _assert_same(first, fresh)
    _assert_same(hit, fresh)
    # max_seq_len / compute dtype change no array: the same entry, the call's config
    short = models.load_gguf(file, cache_dir=cache, cache=True, max_seq_len=16)
    assert short.config == models.load_gguf(file, cache=False, max_seq_len=16).config
    assert short.config.max_seq_len == 16 and len(_entries(cache)) == 1
    # another parameter dtype is another entry
    bf = models.load_gguf(file, cache_dir=cache, cache=True, dtype=jnp.bfloat16)
    bf_hit = models.load_gguf(file, cache_dir=cache, cache=True, dtype=jnp.bfloat16)
    _assert_same(bf_hit, models.load_gguf(file, cache=False, dtype=jnp.bfloat16))
    _assert_same(bf, bf_hit)
    assert bf_hit.tok_embeddings.embedding[...].dtype == jnp.bfloat16
    assert len(_entries(cache)) == 2


def test_hf_sharded_hit_is_bit_identical(tmp_path, capsys):
    hf = h.FAMILIES["gemma3_text"]
    h._write_hf(tmp_path / "m", hf, h._hf_weights(hf, seed=4), shards=2)
    cache = tmp_path / "cache"
    fresh = models.load_hf_checkpoint(tmp_path / "m", cache=False)
    models.load_hf_checkpoint(tmp_path / "m", cache=True, cache_dir=cache)
    hit = models.load_hf_checkpoint(tmp_path / "m", cache=True, cache_dir=cache)
    (entry,) = _entries(cache, "hf-model")
    assert f"loaded from cache {entry}" in capsys.readouterr().err
    _assert_same(hit, fresh)
    # config.json is in the key: another RoPE base is another entry
    cfg = json.loads((tmp_path / "m" / "config.json").read_text())
    (tmp_path / "m" / "config.json").write_text(json.dumps(dict(cfg, rope_theta=5e5)))
    again = models.load_hf_checkpoint(tmp_path / "m", cache=True, cache_dir=cache)
    assert again.config.rope_theta == 5e5
    assert "converting" in capsys.readouterr().err


def test_key_changes_when_the_file_changes(tmp_path):
    file = _gemma_gguf(tmp_path / "g.gguf", seed=1)
    cache = tmp_path / "cache"
    old = models.load_gguf(file, cache=True, cache_dir=cache)
    size, mtime = file.stat().st_size, file.stat().st_mtime_ns
    _gemma_gguf(file, seed=2)  # same layout, other values
    assert file.stat().st_size == size
    os.utime(file, ns=(mtime, mtime))  # even with the old mtime: the content hash differs
    new = models.load_gguf(file, cache=True, cache_dir=cache)
    _assert_same(new, models.load_gguf(file, cache=False))
    assert not np.array_equal(np.asarray(new.norm.scale[...]), np.asarray(old.norm.scale[...]))
    (entry,) = _entries(cache)  # the superseded entry of the same file is gone
    assert _valid(entry)


@pytest.mark.parametrize("damage", ["truncate", "no_manifest", "bad_seal", "garbage_header"])
def test_broken_entry_is_rebuilt_with_one_warning(tmp_path, damage):
    file = _gemma_gguf(tmp_path / "g.gguf")
    cache = tmp_path / "cache"
    fresh = models.load_gguf(file, cache=False)
    models.load_gguf(file, cache=True, cache_dir=cache)
    (entry,) = _entries(cache)
    weights, manifest = entry / "weights.safetensors", entry / "manifest.json"
    if damage == "truncate":
        with open(weights, "r+b") as f:
            f.truncate(weights.stat().st_size // 2)
    elif damage == "no_manifest":
        manifest.unlink()
    elif damage == "bad_seal":
        m = json.loads(manifest.read_text())
        m["body"]["info"]["config"]["rope_theta"] = 1.0
        manifest.write_text(json.dumps(m))
    else:  # same size, the safetensors header overwritten: caught when read
        raw = bytearray(weights.read_bytes())
        raw[8:40] = b"#" * 32
        weights.write_bytes(bytes(raw))
        m = json.loads(manifest.read_text())  # weights > 64 MiB carry no sha: size only
        m["body"]["files"]["weights.safetensors"]["sha256"] = None
        body = m["body"]
        m["sha256"] = hashlib.sha256(cc._canonical(body)).hexdigest()
        manifest.write_text(json.dumps(m))
    with pytest.warns(UserWarning, match="corrupt or partial") as rec:
        again = models.load_gguf(file, cache=True, cache_dir=cache)
    assert len([w for w in rec if "corrupt" in str(w.message)]) == 1
    assert str(entry) in str(rec[0].message) and "\n" not in str(rec[0].message)
    _assert_same(again, fresh)
    (entry2,) = _entries(cache)
    assert entry2 == entry and _valid(entry)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _assert_same(models.load_gguf(file, cache=True, cache_dir=cache), fresh)


def test_cache_off_writes_nothing(tmp_path, monkeypatch):
    file = _gemma_gguf(tmp_path / "g.gguf")
    monkeypatch.setenv("FIDIA_CACHE_DIR", str(tmp_path / "root"))
    default_dir = tmp_path / "root" / "lm_convert"
    assert cc.default_cache_dir() == str(default_dir)
    if sys.platform.startswith("linux"):
        assert cc.default_cache_dir({"XDG_CACHE_HOME": "/x"}) == "/x/fidia_jax/lm_convert"
    models.load_gguf(file, cache=False, cache_dir=tmp_path / "c")
    models.load_gguf(file)  # the default skips a file under 16 MiB
    assert not (tmp_path / "c").exists() and not default_dir.exists()
    monkeypatch.setattr(cc, "MIN_DEFAULT_BYTES", 0)
    monkeypatch.setenv("FIDIA_LM_CACHE", "0")
    models.load_gguf(file)
    assert not default_dir.exists()
    monkeypatch.delenv("FIDIA_LM_CACHE")
    models.load_gguf(file)  # default on: $FIDIA_CACHE_DIR/lm_convert
    assert len(_entries(default_dir)) == 1


def test_cache_arguments_and_unwritable_directory(tmp_path):
    file = _gemma_gguf(tmp_path / "g.gguf")
    (tmp_path / "f").write_text("x")
    with pytest.raises(ConfigError, match="cache_dir"):
        models.load_gguf(file, cache=True, cache_dir=tmp_path / "f")
    with pytest.raises(ConfigError, match="cache must be"):
        models.load_gguf(file, cache="yes")
    with pytest.warns(UserWarning, match="could not write the conversion cache"):
        model = models.load_gguf(file, cache=True, cache_dir=tmp_path / "f" / "sub")
    _assert_same(model, models.load_gguf(file, cache=False))


@pytest.mark.parametrize("name", ["spm_gemma3.gguf", "bpe_llama3.gguf"])
def test_gguf_tokenizer_from_cache_gives_the_same_ids(tmp_path, name, capsys):
    file = tmp_path / name
    shutil.copy(DATA / name, file)
    cache = tmp_path / "cache"
    fresh = models.load_tokenizer(file, cache=False)
    models.load_tokenizer(file, cache=True, cache_dir=cache)
    hit = models.load_tokenizer(file, cache=True, cache_dir=cache)
    assert "loaded from cache" in capsys.readouterr().err
    assert type(hit.backend) is type(fresh.backend)
    assert (hit.bos_id, hit.eos_id, hit.add_bos, hit.vocab_size) == (
        fresh.bos_id,
        fresh.eos_id,
        fresh.add_bos,
        fresh.vocab_size,
    )
    corpus = (DATA / "corpus.txt").read_text(encoding="utf-8")
    for text in [*corpus.split("\n"), corpus]:
        ids = fresh.encode(text)
        assert hit.encode(text) == ids
        assert hit.decode(ids) == fresh.decode(ids)


def _vocab_writer(base):
    """``gguf.GGUFWriter`` that also writes a SentencePiece vocabulary (one file, both parts)."""

    class Writer(base):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            tokens = ["<pad>", "<eos>", "<bos>", "<unk>", *(f"<0x{b:02X}>" for b in range(256))]
            tokens += ["▁", "a", "b", "▁a", "ab"]
            self.add_tokenizer_model("llama")
            self.add_token_list(tokens)
            self.add_token_scores([0.0] * 260 + [-1.0, -2.0, -2.0, -3.0, -3.0])
            self.add_token_types([3, 3, 3, 2] + [6] * 256 + [1] * 5)
            self.add_bos_token_id(2)
            self.add_eos_token_id(1)

    return Writer


def test_load_lm_checkpoint_caches_model_and_tokenizer(tmp_path, monkeypatch):
    monkeypatch.setattr(h.gguf, "GGUFWriter", _vocab_writer(gguf.GGUFWriter))
    file = _gemma_gguf(tmp_path / "g.gguf")
    monkeypatch.undo()
    cache = tmp_path / "cache"
    model0, tok0 = models.load_lm_checkpoint(file, cache=False)
    models.load_lm_checkpoint(file, cache=True, cache_dir=cache, max_seq_len=32)
    assert [p.name.split("-")[1] for p in _entries(cache)] == ["model", "tokenizer"]
    model, tok = models.load_lm_checkpoint(file, cache=True, cache_dir=cache)
    _assert_same(model, model0)
    ids = tok0.encode("ab a b")
    assert ids[0] == 2 and len(ids) > 2 and tok.encode("ab a b") == ids
    assert isinstance(tok.backend, type(tok0.backend))


def test_threads_racing_leave_one_valid_entry(tmp_path):
    file = _gemma_gguf(tmp_path / "g.gguf")
    cache = tmp_path / "cache"
    out, errors = [None] * 3, []
    go = threading.Barrier(3)

    def run(i):
        try:
            go.wait()
            out[i] = models.load_gguf(file, cache=True, cache_dir=cache)
        except BaseException as err:  # reported below
            errors.append(err)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(3)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not errors
    fresh = models.load_gguf(file, cache=False)
    for m in out:
        _assert_same(m, fresh)
    (entry,) = _entries(cache)
    assert _valid(entry)
    assert not [p for p in cache.iterdir() if p.name.startswith(".")]


_RACER = """
import importlib.util, os, sys, time
spec = importlib.util.spec_from_file_location("cc", sys.argv[1])
cc = importlib.util.module_from_spec(spec); spec.loader.exec_module(cc)
root, tag, go = sys.argv[2], sys.argv[3], sys.argv[4]
entry = cc.Entry(root, "race", {"k": 1}, where="racer", sources=["/x"])
while not os.path.exists(go):
    time.sleep(0.001)
def write(path, n=0):
    with open(path, "wb") as f:
        for _ in range(64):  # 8 MiB in 128 kiB pieces: the two writes overlap
            f.write(tag.encode() * (1 << 17))
print(entry.write({"blob": write}, {"tag": tag}), entry.read() is not None)
"""


def test_two_processes_racing_leave_one_valid_entry(tmp_path):
    module = importlib.util.find_spec("fidia_jax._disk_cache").origin
    root, go = tmp_path / "cache", tmp_path / "go"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _RACER, module, str(root), tag, str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for tag in "AB"
    ]
    go.touch()
    results = [p.communicate(timeout=60) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], results
    assert [r[0].split() for r in results] == [["True", "True"]] * 2, results
    (entry,) = _entries(root)
    info = cc.Entry(str(root), "race", {"k": 1}, where="t").read()
    blob = (entry / "blob").read_bytes()
    assert len(blob) == 8 << 20 and blob == info["tag"].encode() * len(blob)
    assert not [p for p in root.iterdir() if p.name.startswith(".")]


@pytest.mark.slow
def test_gemma3_270m_cached_logits_equal_uncached(tmp_path):
    """The real Gemma 3 270M GGUF (``FIDIA_GEMMA3_GGUF``): logits of a prompt from a cache hit
    equal those of a fresh conversion bit for bit (5 min on the loaded 2-core CPU)."""
    path = os.environ.get("FIDIA_GEMMA3_GGUF")
    if not path:
        pytest.skip("set FIDIA_GEMMA3_GGUF to the Gemma 3 270M GGUF")
    forward = nnx.jit(lambda m, t: m(t))
    fresh, tok = models.load_lm_checkpoint(path, max_seq_len=32, cache=False)
    ids = jnp.asarray([tok.encode("The capital of France is")], jnp.int32)
    want = np.asarray(forward(fresh, ids))
    del fresh
    models.load_lm_checkpoint(path, max_seq_len=32, cache=True, cache_dir=tmp_path)
    hit, tok2 = models.load_lm_checkpoint(path, max_seq_len=32, cache=True, cache_dir=tmp_path)
    assert tok2.encode("The capital of France is") == [int(i) for i in ids[0]]
    np.testing.assert_array_equal(np.asarray(forward(hit, ids)), want)
