"""Read PyTorch ``.pt`` zip checkpoints with numpy only (no torch, no arbitrary code).

A checkpoint written by ``torch.save`` (format version >= 1.6) is a zip archive holding

* ``<prefix>/data.pkl`` -- a pickle of the saved object. Tensors appear in it as calls to
  ``torch._utils._rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks)``
  whose ``storage`` argument is a *persistent id* ``("storage", StorageClass, key, location,
  numel)``;
* ``<prefix>/data/<key>`` -- the raw bytes of each storage (little-endian unless
  ``<prefix>/byteorder`` says ``big``);
* ``<prefix>/version`` and other small bookkeeping entries.

:func:`load_torch_checkpoint` unpickles ``data.pkl`` with a :class:`pickle.Unpickler` whose
``find_class`` only hands out a short allow-list of tiny numpy shims (the tensor rebuild
functions, the typed storage classes and ``collections.OrderedDict``). Any other global --
``os.system``, ``builtins.eval``, ``subprocess.Popen``, ... -- raises
:class:`~fidia_jax.errors.UnsafePickleError` naming ``module.class`` *before* it can be called,
so a malicious file cannot execute code. Tensors come back as ``numpy.ndarray`` (a copy, C
contiguous, with the storage dtype).

This reader is our own implementation of the documented-by-example ``torch.save`` zip layout;
it does not import torch.
"""

from __future__ import annotations

import _compat_pickle
import collections
import io
import os
import pickle
import zipfile
from typing import Any

import numpy as np

from fidia_jax.errors import CheckpointError, UnsafePickleError

__all__ = ["load_torch_checkpoint", "ALLOWED_GLOBALS"]


class _StorageType:
    """Stand-in for ``torch.<Dtype>Storage``: only remembers the numpy dtype."""

    def __init__(self, name: str, dtype: np.dtype | str):
        self.name = name
        self.dtype = np.dtype(dtype)

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"_StorageType({self.name}, {self.dtype})"


def _bfloat16() -> np.dtype:
    import ml_dtypes

    return np.dtype(ml_dtypes.bfloat16)


_STORAGE_DTYPES: dict[str, Any] = {
    "FloatStorage": np.float32,
    "DoubleStorage": np.float64,
    "HalfStorage": np.float16,
    "BFloat16Storage": "bfloat16",
    "LongStorage": np.int64,
    "IntStorage": np.int32,
    "ShortStorage": np.int16,
    "CharStorage": np.int8,
    "ByteStorage": np.uint8,
    "BoolStorage": np.bool_,
}


def _storage_type(name: str) -> _StorageType:
    dtype = _STORAGE_DTYPES[name]
    return _StorageType(name, _bfloat16() if dtype == "bfloat16" else dtype)


def _rebuild_tensor_v2(
    storage, storage_offset, size, stride, requires_grad=False, backward_hooks=None, metadata=None
):
    """numpy shim of ``torch._utils._rebuild_tensor_v2``: a strided view of ``storage``, copied."""
    del requires_grad, backward_hooks, metadata
    if not isinstance(storage, np.ndarray) or storage.ndim != 1:
        raise CheckpointError("tensor rebuild got a storage that is not a 1-D array")
    size = tuple(int(s) for s in size)
    stride = tuple(int(s) for s in stride)
    offset = int(storage_offset)
    if len(size) != len(stride):
        raise CheckpointError(f"tensor size {size} and stride {stride} differ in rank")
    if any(s < 0 for s in size) or any(s < 0 for s in stride) or offset < 0:
        raise CheckpointError(f"negative size/stride/offset in tensor ({size}, {stride}, {offset})")
    if 0 in size:
        return np.zeros(size, storage.dtype)
    last = offset + sum((n - 1) * st for n, st in zip(size, stride, strict=True))
    if last >= storage.shape[0]:
        raise CheckpointError(
            f"tensor (offset {offset}, size {size}, stride {stride}) reaches past its storage of "
            f"{storage.shape[0]} elements"
        )
    item = storage.dtype.itemsize
    view = np.lib.stride_tricks.as_strided(
        storage[offset:], shape=size, strides=tuple(st * item for st in stride), writeable=False
    )
    return np.array(view, order="C", copy=True)


def _rebuild_parameter(data, requires_grad=False, backward_hooks=None):
    """numpy shim of ``torch._utils._rebuild_parameter``: the parameter's data array."""
    del requires_grad, backward_hooks
    return data


#: ``(module, name)`` pairs the restricted unpickler resolves, and what it resolves them to.
ALLOWED_GLOBALS: dict[tuple[str, str], Any] = {
    ("collections", "OrderedDict"): collections.OrderedDict,
    ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor_v2,
    ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
    **{("torch", name): _storage_type(name) for name in _STORAGE_DTYPES},
}


class _RestrictedUnpickler(pickle.Unpickler):
    """Unpickler that resolves only :data:`ALLOWED_GLOBALS` and reads storages from the zip."""

    def __init__(self, file, *, zf: zipfile.ZipFile, prefix: str, byteorder: str):
        super().__init__(file)
        self._zf = zf
        self._prefix = prefix
        self._byteorder = "<" if byteorder == "little" else ">"
        self._storages: dict[str, np.ndarray] = {}

    def find_class(self, module: str, name: str) -> Any:  # noqa: D102
        try:
            return ALLOWED_GLOBALS[(module, name)]
        except KeyError:
            shown = f"{module}.{name}"
            py3 = _compat_pickle.NAME_MAPPING.get((module, name))
            py3 = py3 or (_compat_pickle.IMPORT_MAPPING.get(module, module), name)
            if f"{py3[0]}.{py3[1]}" != shown:  # protocol-2 pickles use Python 2 module names
                shown += f" (= {py3[0]}.{py3[1]})"
            raise UnsafePickleError(
                f"checkpoint pickle refers to {shown}, which is not on the allow-list "
                f"(tensors, typed storages, collections.OrderedDict); refusing to load it"
            ) from None

    def persistent_load(self, pid: Any) -> np.ndarray:  # noqa: D102
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"):
            raise UnsafePickleError(f"unsupported persistent id in checkpoint pickle: {pid!r:.80}")
        _, storage_type, key, _location, numel = pid
        if not isinstance(storage_type, _StorageType):
            raise UnsafePickleError(f"persistent id names a non-storage type {storage_type!r:.80}")
        key = str(key)
        if key not in self._storages:
            entry = f"{self._prefix}data/{key}"
            try:
                raw = self._zf.read(entry)
            except KeyError:
                raise CheckpointError(f"checkpoint lacks storage entry {entry!r}") from None
            dtype = (
                storage_type.dtype.newbyteorder(self._byteorder)
                if storage_type.dtype.itemsize > 1
                else storage_type.dtype
            )
            if len(raw) % dtype.itemsize:
                raise CheckpointError(
                    f"storage {entry!r} has {len(raw)} bytes, not a multiple of {dtype.itemsize}"
                )
            arr = np.frombuffer(raw, dtype=dtype).astype(storage_type.dtype, copy=False)
            if int(numel) > arr.shape[0]:
                raise CheckpointError(
                    f"storage {entry!r} holds {arr.shape[0]} elements, pickle says {numel}"
                )
            self._storages[key] = arr
        return self._storages[key]


def load_torch_checkpoint(path: str | os.PathLike) -> Any:
    """Load a ``torch.save`` zip checkpoint into plain Python containers of numpy arrays.

    Args:
      path: file written by ``torch.save`` (zip format, torch >= 1.6).

    Returns:
      The unpickled object with every tensor replaced by a C-contiguous ``numpy.ndarray`` of the
      storage dtype (float32 for ``FloatStorage``, ...). Dicts stay dicts / ``OrderedDict``.

    Raises:
      CheckpointError: the file is missing, is not a zip checkpoint, or is internally
        inconsistent (missing storage, tensor out of bounds).
      UnsafePickleError: the pickle asks for any global outside :data:`ALLOWED_GLOBALS`;
        nothing from the pickle is executed in that case.
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise CheckpointError(f"checkpoint file not found: {path}")
    if not zipfile.is_zipfile(path):
        raise CheckpointError(
            f"{path} is not a zip-format torch checkpoint (legacy non-zip torch.save files are not supported)"
        )
    with zipfile.ZipFile(path) as zf:
        pkls = [n for n in zf.namelist() if n.endswith("/data.pkl") or n == "data.pkl"]
        if len(pkls) != 1:
            raise CheckpointError(
                f"{path}: expected exactly one data.pkl in the archive, found {pkls}"
            )
        prefix = pkls[0][: -len("data.pkl")]  # "archive/" or ""
        byteorder = "little"
        if f"{prefix}byteorder" in zf.namelist():
            byteorder = zf.read(f"{prefix}byteorder").decode().strip()
            if byteorder not in ("little", "big"):
                raise CheckpointError(f"{path}: unknown byteorder {byteorder!r}")
        unpickler = _RestrictedUnpickler(
            io.BytesIO(zf.read(pkls[0])), zf=zf, prefix=prefix, byteorder=byteorder
        )
        try:
            return unpickler.load()
        except (UnsafePickleError, CheckpointError):
            raise
        except Exception as exc:  # malformed pickle stream
            raise CheckpointError(f"{path}: could not unpickle checkpoint: {exc}") from exc
