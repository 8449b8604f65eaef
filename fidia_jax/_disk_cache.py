"""Converted arrays kept on disk, by source: the conversion cache of the language-model loaders,
whose entries (:class:`Entry`) and keys (:func:`fingerprint`) the ProteinMPNN start-up cache
(``fidia_jax/projects/proteinmpnn/_startup.py``, ``_structure_cache.py``) uses too. A shared
foundation (standard library only), so that a command that needs it imports no model.

Converting a checkpoint (reading a GGUF file's tables, dequantising every tensor, transposing,
casting; rebuilding its tokenizer) costs about a minute for Gemma 3 270M on a loaded 2-core
CPU. :func:`fidia_jax.models.load_gguf`, :func:`~fidia_jax.models.load_hf_checkpoint`,
:func:`~fidia_jax.models.load_tokenizer` and :func:`~fidia_jax.models.load_lm_checkpoint` write
what they convert once into an **entry** of a cache directory and read it back on the next load.

Where: ``cache_dir=`` when given; else ``$FIDIA_CACHE_DIR/lm_convert`` when ``FIDIA_CACHE_DIR``
is set; else the platform's user cache directory: ``$XDG_CACHE_HOME/fidia_jax/lm_convert`` or
``~/.cache/fidia_jax/lm_convert`` (Linux), ``~/Library/Caches/fidia_jax/lm_convert`` (macOS),
``%LOCALAPPDATA%/fidia_jax/Cache/lm_convert`` (Windows).

An entry is a directory ``<kind>-<sha256 of the key>`` holding the data files (e.g.
``weights.safetensors``, written with ``safetensors.numpy``) and ``manifest.json``, written
last: the key, each data file's size (and the sha256 of each file under 64 MiB), the
metadata the loader needs (e.g. the model's config), and the sha256 of all of that. The entry
is assembled in a temporary directory inside the cache directory and renamed into place in one
step, so a reader sees a whole entry or none, and two processes converting the same checkpoint
at once leave one valid entry (the second rename finds the first one's entry and drops its
own). An entry whose manifest is missing, unreadable or fails its sha256, or whose files differ
in size or hash from it (a truncated file, a deleted manifest), is reported with one warning
and rebuilt.

The key (:func:`fingerprint`) holds, per source file: its size, its ``st_mtime_ns`` and the
sha256 of its header and tensor table together with a sample of its data (the whole file when
it is at most 32 MiB; else 64 blocks of 64 KiB spread over the data and its last 64 KiB); the
loaders add what else the arrays depend on (parameter dtype, :data:`FORMAT_VERSION`, the
converting library's version). A file rewritten in place with the same size, header and
modification time, and changes only outside the sampled blocks, is not noticed: delete the
entry (or the cache directory), or load with ``cache=False``.

This module imports only the standard library (``numpy`` / ``safetensors`` are the callers'),
so that ``tests/models/test_lm_conversion_cache.py`` can race two processes on it cheaply.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import shutil
import struct
import sys
import tempfile
import time
import warnings
from collections.abc import Callable

__all__ = [
    "FORMAT_VERSION",
    "MIN_DEFAULT_BYTES",
    "Entry",
    "default_cache_dir",
    "fingerprint",
    "read_into",
    "resolve_cache_dir",
    "safetensors_table",
]

#: Bumped whenever the converted arrays or the manifest's contents change meaning (every
#: older entry is then a miss).
FORMAT_VERSION = 1

#: With the default ``cache=None``, sources smaller than this are converted afresh every time
#: (they take about a second; this keeps test suites and small checkpoints out of the cache).
MIN_DEFAULT_BYTES = 16 * 2**20

_WHOLE_FILE_BYTES = 32 * 2**20
_BLOCK = 64 * 2**10
_N_BLOCKS = 64
_HASH_FILES_UP_TO = 64 * 2**20
_STALE_TMP_SECONDS = 6 * 3600
_OFF = ("0", "off", "false", "no", "none")


def is_off(value: str) -> bool:
    """Whether an environment switch says off: ``0`` / ``off`` / ``false`` / ``no`` / ``none``
    (any case, surrounding spaces ignored)."""
    return value.strip().lower() in _OFF


def default_cache_dir(environ=None) -> str:
    """The default cache directory (see the module docstring for the order)."""
    env = os.environ if environ is None else environ
    if env.get("FIDIA_CACHE_DIR"):
        return os.path.join(env["FIDIA_CACHE_DIR"], "lm_convert")
    if sys.platform == "darwin":
        base = os.path.join(os.path.expanduser("~"), "Library", "Caches", "fidia_jax")
    elif os.name == "nt" and env.get("LOCALAPPDATA"):
        base = os.path.join(env["LOCALAPPDATA"], "fidia_jax", "Cache")
    else:
        home = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        base = os.path.join(home, "fidia_jax")
    return os.path.join(base, "lm_convert")


def resolve_cache_dir(cache, cache_dir, *, source_bytes: int, where: str) -> str | None:
    """The cache directory to use, or ``None`` when this load is not cached.

    Args:
      cache: ``True`` (cache, whatever the size), ``False`` (never), or ``None`` (the default:
        cache unless ``$FIDIA_LM_CACHE`` is ``0`` / ``off`` / ``false``, and only sources of at
        least :data:`MIN_DEFAULT_BYTES`).
      cache_dir: the directory (default :func:`default_cache_dir`).
      source_bytes: the total size of the source files.
      where: the caller's name, for messages.

    Raises:
      ConfigError: ``cache`` is not ``True`` / ``False`` / ``None``, or ``cache_dir`` exists
        and is not a directory.
    """
    from fidia_jax.errors import ConfigError

    if cache is not None and not isinstance(cache, bool):
        raise ConfigError(f"{where}: cache must be True, False or None, got {cache!r}")
    if cache is False:
        return None
    if cache is None:
        if is_off(os.environ.get("FIDIA_LM_CACHE", "1")):
            return None
        if source_bytes < MIN_DEFAULT_BYTES:
            return None
    root = default_cache_dir() if cache_dir is None else os.fspath(cache_dir)
    if os.path.exists(root) and not os.path.isdir(root):
        raise ConfigError(f"{where}: cache_dir {root!r} exists and is not a directory")
    return root


def fingerprint(file: str, header_len: int | None) -> dict:
    """The identity of one source file in a cache key: size, mtime and a content hash.

    Args:
      file: the path.
      header_len: bytes of its header and tensor table (hashed whole); ``None`` when unknown.

    Returns:
      ``{"size", "mtime_ns", "sha256"}``; the hash covers the whole file when it is at most
      32 MiB, else the header, 64 blocks of 64 KiB evenly spread over the rest, and the last
      64 KiB.
    """
    st = os.stat(file)
    size = st.st_size
    h = hashlib.sha256()
    with open(file, "rb") as f:
        if size <= _WHOLE_FILE_BYTES:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        else:
            head = min(int(header_len or 0), size)
            h.update(f.read(head))
            span = size - head
            for i in range(_N_BLOCKS):
                f.seek(head + span * i // _N_BLOCKS)
                h.update(f.read(_BLOCK))
            f.seek(size - _BLOCK)
            h.update(f.read(_BLOCK))
    return {"size": size, "mtime_ns": st.st_mtime_ns, "sha256": h.hexdigest()}


#: Bytes per element of the safetensors dtype codes.
_ST_ITEMSIZE = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1, "I16": 2, "U16": 2,
                "F16": 2, "BF16": 2, "I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8,
                "F64": 8}  # fmt: skip


def safetensors_table(path: str) -> dict[str, tuple[str, tuple[int, ...], int, int]]:
    """The tensors of a safetensors file, from its header alone (no data read, no ``mmap``).

    For reading the conversion cache's arrays one at a time with plain reads
    (:func:`read_into`) instead of ``safetensors.safe_open``, whose memory map keeps every page
    read so far resident until the file is closed: reading back Gemma 3 270M's 1.1 GB of
    float32 weights that way peaked at 2.4 GB resident (1.1 GB of it the mapped file),
    ``docs/safesci.md``, *Memory*.

    Returns:
      ``{name: (dtype code, shape, offset, nbytes)}``: the safetensors dtype code (``"F32"``,
      ``"BF16"``, ...), the shape, and the absolute byte offset and size of the data in the
      file (``__metadata__`` left out).

    Raises:
      ValueError: not a safetensors file (too short, a header length past the end, an
        unreadable JSON header), a corrupt entry (an unknown dtype code included), data past
        the end of the file ("truncated"), or a shape whose size disagrees with the data
        offsets; each message names the file and the tensor. The loaders
        (:func:`fidia_jax.models._checkpoint_files.safetensors_names`) turn it into a
        ``CheckpointError``.
    """
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise ValueError(f"{path!r} is not a safetensors file (too short)")
        (n,) = struct.unpack("<Q", head)
        if 8 + n > size:
            raise ValueError(
                f"{path!r} is truncated or not safetensors: its header claims {n} bytes, which "
                f"runs past the end of the file ({size} bytes)"
            )
        try:
            header = json.loads(f.read(n))
        except ValueError as err:  # UnicodeDecodeError included
            raise ValueError(
                f"{path!r} has a corrupt, unreadable safetensors header ({err})"
            ) from err
    if not isinstance(header, dict):
        raise ValueError(f"{path!r} has a corrupt safetensors header (not a JSON object)")
    data = size - 8 - n
    out = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        try:
            code, shape = meta["dtype"], tuple(int(d) for d in meta["shape"])
            begin, end = (int(x) for x in meta["data_offsets"])
        except (KeyError, TypeError, ValueError) as err:
            raise ValueError(
                f"tensor {name!r} of {path!r} has a corrupt header entry ({err!r})"
            ) from err
        if code not in _ST_ITEMSIZE:
            raise ValueError(
                f"tensor {name!r} of {path!r} has a corrupt header entry: unknown dtype {code!r}"
            )
        nbytes = math.prod(shape) * _ST_ITEMSIZE[code]
        if end > data:
            raise ValueError(
                f"tensor {name!r} of {path!r} has data offsets [{begin}, {end}), but the file "
                f"holds {data} bytes of data (truncated)"
            )
        if end - begin != nbytes or begin < 0:
            raise ValueError(
                f"tensor {name!r} of {path!r} has data offsets [{begin}, {end}) "
                f"({end - begin} bytes), its dtype and shape need {nbytes} ({code} {list(shape)})"
            )
        out[str(name)] = (code, shape, 8 + n + begin, nbytes)
    return out


def read_into(path: str, offset: int, buffer) -> None:
    """Fills the writable byte buffer ``buffer`` (e.g. ``memoryview(numpy_array).cast("B")``)
    from ``path`` at ``offset`` with plain reads (no memory map: only the buffer is resident).

    Raises:
      ValueError: the file ends before the buffer is full.
    """
    view = memoryview(buffer).cast("B")
    with open(path, "rb", buffering=0) as f:
        f.seek(offset)
        got = 0
        while got < len(view):
            n = f.readinto(view[got:])
            if not n:
                raise ValueError(
                    f"{path!r} ends {len(view) - got} bytes short of the {len(view)} bytes "
                    f"read at offset {offset}"
                )
            got += n


def _sha_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _canonical(obj) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


class Entry:
    """One cache entry: ``<root>/<kind>-<sha256 of key>``.

    Args:
      root: the cache directory.
      kind: a short name (``gguf-model``, ``hf-model``, ``gguf-tokenizer``).
      key: a JSON-able dict of everything the entry's contents depend on.
      where: the caller's name, for warnings.
      sources: the source paths (kept in the manifest; a new entry for the same sources and
        ``kind`` replaces older ones, so a checkpoint replaced in place leaves no stale entry).
    """

    MANIFEST = "manifest.json"

    def __init__(self, root: str, kind: str, key: dict, *, where: str, sources=()):
        self.root, self.kind, self.where = root, kind, where
        self.key = dict(key)
        self.sources = [os.path.abspath(os.fspath(s)) for s in sources]
        digest = hashlib.sha256(_canonical({"kind": kind, **self.key})).hexdigest()
        self.path = os.path.join(root, f"{kind}-{digest[:40]}")
        self.problem: str | None = None

    def file(self, name: str) -> str:
        """The path of the entry's data file ``name``."""
        return os.path.join(self.path, name)

    def _check(self) -> dict:
        """The manifest's ``info`` of a whole entry; raises ``ValueError`` saying what is wrong."""
        mpath = self.file(self.MANIFEST)
        if not os.path.isfile(mpath):
            raise ValueError("no manifest.json")
        try:
            with open(mpath, "rb") as f:
                manifest = json.loads(f.read())
            body, seal = manifest["body"], manifest["sha256"]
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise ValueError(f"unreadable manifest.json ({err})") from err
        if hashlib.sha256(_canonical(body)).hexdigest() != seal:
            raise ValueError("manifest.json fails its sha256")
        if body.get("format") != FORMAT_VERSION or body.get("key") != self.key:
            raise ValueError("manifest.json is of another key or format")
        for name, want in body["files"].items():
            path = self.file(name)
            if not os.path.isfile(path):
                raise ValueError(f"{name} is missing")
            size = os.path.getsize(path)
            if size != want["size"]:
                raise ValueError(f"{name} has {size} bytes, the manifest says {want['size']}")
            if want.get("sha256") and _sha_file(path) != want["sha256"]:
                raise ValueError(f"{name} fails its sha256")
        return body["info"]

    def read(self) -> dict | None:
        """The metadata (``info``) of a whole entry, or ``None``: a miss, or a broken entry
        (one warning; :meth:`write` then replaces it)."""
        if not os.path.isdir(self.path):
            return None
        try:
            return self._check()
        except ValueError as err:
            self.corrupt(str(err))
            return None

    def corrupt(self, reason: str) -> None:
        """Reports a broken entry (one warning line); the next :meth:`write` replaces it."""
        self.problem = reason
        warnings.warn(
            f"{self.where}: conversion cache entry {self.path} is corrupt or partial "
            f"({reason}); rebuilding it",
            stacklevel=3,
        )

    def write(self, files: dict[str, Callable[[str], None]], info: dict) -> bool:
        """Writes the entry atomically: ``files[name](path)`` writes each data file into a
        temporary directory, ``manifest.json`` goes last, then one rename.

        Returns ``True`` when this call's entry (or a whole one another process wrote first)
        is in place. A failure to write (disk full, no permission) is one warning, ``False``,
        and leaves no partial entry.
        """
        tmp = None
        try:
            os.makedirs(self.root, exist_ok=True)
            self._sweep()
            tmp = tempfile.mkdtemp(prefix=f".tmp-{self.kind}-", dir=self.root)
            listed = {}
            for name, writer in files.items():
                path = os.path.join(tmp, name)
                writer(path)
                size = os.path.getsize(path)
                sha = _sha_file(path) if size <= _HASH_FILES_UP_TO else None
                listed[name] = {"size": size, "sha256": sha}
            body = {
                "format": FORMAT_VERSION,
                "kind": self.kind,
                "key": self.key,
                "files": listed,
                "info": info,
                "sources": self.sources,
                "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            }
            manifest = {"body": body, "sha256": hashlib.sha256(_canonical(body)).hexdigest()}
            with open(os.path.join(tmp, self.MANIFEST), "w") as f:
                json.dump(manifest, f, indent=1, sort_keys=True)
            placed = self._place(tmp)
            tmp = None if placed else tmp
            if placed:
                self._drop_superseded()
            return True
        except OSError as err:
            warnings.warn(
                f"{self.where}: could not write the conversion cache at {self.root} ({err}); "
                "continuing without it",
                stacklevel=3,
            )
            return False
        finally:
            if tmp is not None:
                shutil.rmtree(tmp, ignore_errors=True)

    def _place(self, tmp: str) -> bool:
        """Renames ``tmp`` to the entry; ``False`` when a whole entry was already there.

        An entry found broken by this object (:meth:`corrupt`) is replaced; one that appeared
        in the meantime (another process's) is kept when :meth:`_check` passes.
        """
        replace = self.problem is not None
        for _ in range(2):
            try:
                os.rename(tmp, self.path)
                return True
            except OSError:
                if not os.path.isdir(self.path):
                    raise
            if not replace:
                try:  # someone's entry is there: keep it if it is whole
                    self._check()
                    return False
                except ValueError:
                    pass
            replace = False
            trash = tempfile.mkdtemp(prefix=".trash-", dir=self.root)
            try:
                os.rename(self.path, os.path.join(trash, "old"))
            except OSError:
                pass  # another process moved it first
            shutil.rmtree(trash, ignore_errors=True)
        return False

    def _sweep(self) -> None:
        """Removes trash and temporary directories left by killed processes (> 6 h old)."""
        now = time.time()
        with contextlib.suppress(OSError):
            for name in os.listdir(self.root):
                path = os.path.join(self.root, name)
                if (
                    name.startswith((".trash-", ".tmp-"))
                    and now - os.path.getmtime(path) > _STALE_TMP_SECONDS
                ):
                    shutil.rmtree(path, ignore_errors=True)

    def _drop_superseded(self) -> None:
        """Removes other entries of the same kind, sources and parameter dtype (an older
        version of a checkpoint replaced in place)."""
        if not self.sources:
            return
        with contextlib.suppress(OSError):
            for name in os.listdir(self.root):
                path = os.path.join(self.root, name)
                if not name.startswith(self.kind + "-") or path == self.path:
                    continue
                try:
                    with open(os.path.join(path, self.MANIFEST)) as f:
                        body = json.load(f)["body"]
                except (OSError, ValueError, KeyError, TypeError):
                    continue  # being written, or broken: left alone
                if body.get("sources") == self.sources and body.get("key", {}).get(
                    "param_dtype"
                ) == self.key.get("param_dtype"):
                    shutil.rmtree(path, ignore_errors=True)
