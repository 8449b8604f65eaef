"""numpy-only torch checkpoint reader: layout decoding and refusal of unsafe pickles."""

from __future__ import annotations

import collections
import io
import os
import pickle
import sys
import types
import zipfile

import numpy as np
import pytest

from fidia_jax.errors import CheckpointError, UnsafePickleError
from fidia_jax.models import load_torch_checkpoint


def _write_zip(path, pkl: bytes, storages: dict[str, bytes], byteorder: str | None = None):
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("archive/data.pkl", pkl)
        for key, raw in storages.items():
            zf.writestr(f"archive/data/{key}", raw)
        zf.writestr("archive/version", "3\n")
        if byteorder is not None:
            zf.writestr("archive/byteorder", byteorder)


@pytest.fixture
def fake_torch(monkeypatch):
    """Stand-in ``torch`` / ``torch._utils`` modules so the stdlib pickler emits torch globals."""
    torch_mod = types.ModuleType("torch")
    utils_mod = types.ModuleType("torch._utils")

    def _rebuild_tensor_v2(*args):  # never called: only its name ends up in the pickle
        raise AssertionError("unreachable")

    _rebuild_tensor_v2.__module__ = "torch._utils"
    _rebuild_tensor_v2.__qualname__ = "_rebuild_tensor_v2"
    utils_mod._rebuild_tensor_v2 = _rebuild_tensor_v2
    storages = {}
    for name in ("FloatStorage", "LongStorage"):
        cls = type(name, (), {"__module__": "torch"})
        setattr(torch_mod, name, cls)
        storages[name] = cls
    torch_mod._utils = utils_mod
    monkeypatch.setitem(sys.modules, "torch", torch_mod)
    monkeypatch.setitem(sys.modules, "torch._utils", utils_mod)
    return types.SimpleNamespace(rebuild=_rebuild_tensor_v2, **storages)


class _Storage:
    def __init__(self, key, cls, numel):
        self.key, self.cls, self.numel = key, cls, numel


class _Tensor:
    def __init__(self, rebuild, storage, offset, size, stride):
        self.args = (rebuild, storage, offset, size, stride)

    def __reduce__(self):
        rebuild, storage, offset, size, stride = self.args
        return rebuild, (storage, offset, size, stride, False, collections.OrderedDict())


class _TorchLikePickler(pickle.Pickler):
    def persistent_id(self, obj):
        if isinstance(obj, _Storage):
            return ("storage", obj.cls, obj.key, "cpu", obj.numel)
        return None


def _dumps(obj) -> bytes:
    buf = io.BytesIO()
    _TorchLikePickler(buf, protocol=2).dump(obj)
    return buf.getvalue()


def test_strided_views_dtypes_and_shared_storage(tmp_path, fake_torch):
    base = np.arange(10, dtype=np.float32) * 1.5
    longs = np.array([7, -3, 2**40], np.int64)
    sf = _Storage("0", fake_torch.FloatStorage, 10)
    sl = _Storage("1", fake_torch.LongStorage, 3)
    obj = {
        "meta": 48,
        "sd": collections.OrderedDict(
            # (3, 2) view with stride (1, 3) starting at element 2 -> a transposed block
            t=_Tensor(fake_torch.rebuild, sf, 2, (3, 2), (1, 3)),
            flat=_Tensor(fake_torch.rebuild, sf, 0, (10,), (1,)),
            scalar=_Tensor(fake_torch.rebuild, sf, 9, (), ()),
            ints=_Tensor(fake_torch.rebuild, sl, 0, (3,), (1,)),
        ),
    }
    path = tmp_path / "ok.pt"
    _write_zip(path, _dumps(obj), {"0": base.tobytes(), "1": longs.tobytes()})
    out = load_torch_checkpoint(path)
    assert out["meta"] == 48 and isinstance(out["sd"], collections.OrderedDict)
    np.testing.assert_array_equal(out["sd"]["t"], base[2:8].reshape(2, 3).T)
    assert out["sd"]["t"].flags.c_contiguous and out["sd"]["t"].dtype == np.float32
    np.testing.assert_array_equal(out["sd"]["flat"], base)
    assert out["sd"]["scalar"].shape == () and out["sd"]["scalar"] == base[9]
    np.testing.assert_array_equal(out["sd"]["ints"], longs)
    assert out["sd"]["ints"].dtype == np.int64

    # big-endian archives are honoured
    path_be = tmp_path / "be.pt"
    _write_zip(
        path_be,
        _dumps(obj),
        {"0": base.astype(">f4").tobytes(), "1": longs.astype(">i8").tobytes()},
        "big",
    )
    out_be = load_torch_checkpoint(path_be)
    np.testing.assert_array_equal(out_be["sd"]["t"], out["sd"]["t"])
    np.testing.assert_array_equal(out_be["sd"]["ints"], longs)


def test_out_of_bounds_tensor_is_rejected(tmp_path, fake_torch):
    sf = _Storage("0", fake_torch.FloatStorage, 4)
    obj = {"x": _Tensor(fake_torch.rebuild, sf, 2, (3,), (1,))}
    path = tmp_path / "oob.pt"
    _write_zip(path, _dumps(obj), {"0": np.zeros(4, np.float32).tobytes()})
    with pytest.raises(CheckpointError, match="past its storage"):
        load_torch_checkpoint(path)


class _EvilSystem:
    def __init__(self, sentinel):
        self.sentinel = sentinel

    def __reduce__(self):
        return os.system, (f"touch {self.sentinel}",)


class _EvilEval:
    def __init__(self, sentinel):
        self.sentinel = sentinel

    def __reduce__(self):
        return eval, (f"open({str(self.sentinel)!r}, 'w').close()",)


@pytest.mark.parametrize(
    ("evil_cls", "qualname"),
    [(_EvilSystem, f"{os.system.__module__}.system"), (_EvilEval, "builtins.eval")],
)
def test_malicious_pickle_is_refused_without_executing(tmp_path, evil_cls, qualname):
    # The payload is live: plain pickle would run it and create the control sentinel.
    control = tmp_path / "control_ran"
    pickle.loads(pickle.dumps({"model_state_dict": evil_cls(control)}, protocol=2))
    assert control.exists()

    sentinel = tmp_path / "payload_ran"
    path = tmp_path / "evil.pt"
    _write_zip(path, pickle.dumps({"model_state_dict": evil_cls(sentinel)}, protocol=2), {})
    with pytest.raises(UnsafePickleError, match=qualname.replace(".", r"\.")):
        load_torch_checkpoint(path)
    assert not sentinel.exists()


def test_missing_and_non_zip_files(tmp_path):
    with pytest.raises(CheckpointError, match="not found"):
        load_torch_checkpoint(tmp_path / "nope.pt")
    legacy = tmp_path / "legacy.pt"
    legacy.write_bytes(pickle.dumps({"a": 1}))
    with pytest.raises(CheckpointError, match="not a zip"):
        load_torch_checkpoint(legacy)
