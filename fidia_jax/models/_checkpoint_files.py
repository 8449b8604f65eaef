"""Checks of checkpoint files before they are read: safetensors shards and GGUF files.

Every check reads only the headers (the safetensors JSON header, the GGUF key-value table and
tensor table) and the file sizes, so a broken file is refused within seconds, before any tensor
data is read, with one :class:`~fidia_jax.errors.CheckpointError` naming the file and the tensor.
The layouts are the formats' own: safetensors (8-byte little-endian header length, JSON header
of ``{"dtype", "shape", "data_offsets"}`` per tensor, offsets from the end of the header) and
GGUF v2/v3 (llama.cpp's ``gguf.md``: magic, version, tensor count, key-value count, key-values,
tensor infos, data aligned to ``general.alignment``, default 32).
"""

from __future__ import annotations

import json
import math
import os
import re
import struct

from fidia_jax import _disk_cache
from fidia_jax.errors import CheckpointError


def safetensors_names(file: str, where: str) -> list[str]:
    """Tensor names of a safetensors file whose header and sizes are consistent
    (:func:`fidia_jax._disk_cache.safetensors_table`, which reads the header alone).

    Raises:
      CheckpointError: the file is shorter than its header says, the header is not JSON, or a
        tensor's byte range is outside the file or does not fit its dtype and shape (named).
    """
    try:
        return list(_disk_cache.safetensors_table(file))
    except ValueError as err:
        raise CheckpointError(f"{where}: {err}") from err


def safetensors_header_len(file: str) -> int:
    """Bytes of a safetensors file's length prefix and JSON header (call after
    :func:`safetensors_names` has checked the file)."""
    with open(file, "rb") as f:
        return 8 + struct.unpack("<Q", f.read(8))[0]


_SHARD = re.compile(r"^model(-\d+-of-\d+)?\.safetensors$")


def safetensors_layout(root: str, where: str) -> dict[str, str]:
    """Tensor name -> shard file of a Hugging Face directory, every shard's header checked.

    ``model.safetensors.index.json`` (when present) must list every tensor of every shard,
    each at the shard that holds it; no ``model*.safetensors`` file may lie beside the index
    unlisted; no tensor may be in two shards.

    Raises:
      CheckpointError: any of the above (naming the file and the tensor), a missing shard, or a
        file that :func:`safetensors_names` refuses.
    """
    index = os.path.join(root, "model.safetensors.index.json")
    single = os.path.join(root, "model.safetensors")
    if os.path.isfile(index):
        try:
            with open(index) as f:
                shard_of = json.load(f)["weight_map"]
            shard_of = {str(k): str(v) for k, v in shard_of.items()}
        except (ValueError, KeyError, TypeError, AttributeError) as err:
            raise CheckpointError(f"{where}: {index!r} is not a valid index") from err
        shards = sorted(set(shard_of.values()))
        unlisted = sorted(n for n in os.listdir(root) if _SHARD.match(n) and n not in set(shards))
        if unlisted:
            raise CheckpointError(
                f"{where}: weights file {unlisted[0]!r} lies beside {index!r} but the index "
                "does not list it (remove it or the index)"
            )
    elif os.path.isfile(single):
        shard_of, shards = None, ["model.safetensors"]
    else:
        raise CheckpointError(
            f"{where}: neither model.safetensors nor model.safetensors.index.json in {root!r}"
        )
    holder: dict[str, str] = {}
    for shard in shards:
        file = os.path.join(root, shard)
        if not os.path.isfile(file):
            raise CheckpointError(f"{where}: shard {shard!r} named by the index is missing")
        for name in safetensors_names(file, where):
            if name in holder:
                raise CheckpointError(
                    f"{where}: tensor {name!r} is in two shards, {holder[name]!r} and {shard!r}"
                )
            holder[name] = shard
    if shard_of is not None:
        for name, shard in sorted(shard_of.items()):
            if holder.get(name) != shard:
                other = f"; {holder[name]!r} holds it" if name in holder else ""
                raise CheckpointError(
                    f"{where}: the index puts tensor {name!r} in {shard!r}, which does not hold "
                    f"it{other}"
                )
        unindexed = sorted(set(holder) - set(shard_of))
        if unindexed:
            raise CheckpointError(
                f"{where}: tensor {unindexed[0]!r} of {holder[unindexed[0]]!r} is not in the index"
            )
    return holder


# GGUF value types: fixed sizes, 8 = string, 9 = array
_GGUF_FIXED = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


class _Cursor:
    def __init__(self, buf, file, where):
        self.buf, self.pos, self.file, self.where = buf, 0, file, where

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.buf):
            raise CheckpointError(
                f"{self.where}: {self.file!r} is truncated or corrupt (its GGUF header runs past "
                f"the end of the file at byte {self.pos})"
            )
        out = self.buf[self.pos : self.pos + n]
        self.pos += n
        return out

    def u32(self) -> int:
        return struct.unpack("<I", self.take(4))[0]

    def u64(self) -> int:
        return struct.unpack("<Q", self.take(8))[0]

    def string(self) -> bytes:
        return self.take(self.u64())

    def skip_value(self, vtype: int):
        if vtype in _GGUF_FIXED:
            self.take(_GGUF_FIXED[vtype])
        elif vtype == 8:
            self.take(self.u64())
        elif vtype == 9:
            etype, count = self.u32(), self.u64()
            if etype in _GGUF_FIXED:
                self.take(_GGUF_FIXED[etype] * count)
            else:
                for _ in range(count):
                    self.skip_value(etype)
        else:
            raise CheckpointError(
                f"{self.where}: {self.file!r} is corrupt (GGUF value type {vtype} at byte "
                f"{self.pos})"
            )


def check_gguf(file: str, where: str, quant_sizes) -> int | None:
    """Checks a GGUF file's header and that every tensor's data lies inside the file.

    Args:
      file: the path.
      where: the caller's name, for messages.
      quant_sizes: ``gguf.GGML_QUANT_SIZES`` (type -> (block size, bytes per block)).

    Returns:
      The length in bytes of the header (magic, counts, key-values and tensor infos: what the
      conversion cache hashes), or ``None`` for a GGUF v1 / other-byte-order file, which is
      left to the gguf reader.

    Raises:
      CheckpointError: not a GGUF v2/v3 file, a header that runs past the end of the file, an
        unknown tensor type, or a tensor whose data is cut short (named, with the sizes).
    """
    import mmap

    size = os.path.getsize(file)
    with open(file, "rb") as f:
        if size < 24:
            raise CheckpointError(f"{where}: {file!r} is not a GGUF file (too short)")
        buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        try:
            c = _Cursor(buf, file, where)  # mmap slices are bytes copies
            if bytes(c.take(4)) != b"GGUF":
                raise CheckpointError(f"{where}: {file!r} is not a GGUF file (bad magic)")
            version = c.u32()
            if version not in (2, 3):
                return None  # v1 or another byte order: left to the gguf reader
            n_tensors, n_kv = c.u64(), c.u64()
            alignment = 32
            for _ in range(n_kv):
                key = c.string()
                vtype = c.u32()
                if key == b"general.alignment" and vtype == 4:
                    alignment = c.u32()
                else:
                    c.skip_value(vtype)
            infos = []
            for _ in range(n_tensors):
                name = c.string().decode("utf-8", "replace")
                dims = [c.u64() for _ in range(c.u32())]
                ttype, offset = c.u32(), c.u64()
                infos.append((name, dims, ttype, offset))
            header_len = c.pos
            start = c.pos + (-c.pos) % max(alignment, 1)
        finally:
            buf.close()
    for name, dims, ttype, offset in infos:
        try:
            block, nbytes = quant_sizes[ttype]
        except (KeyError, ValueError) as err:
            raise CheckpointError(
                f"{where}: tensor {name!r} of {file!r} has an unknown GGUF type {ttype}"
            ) from err
        n = math.prod(dims)
        need = n // block * nbytes
        end = start + offset + need
        if end > size:
            raise CheckpointError(
                f"{where}: tensor {name!r} of {file!r} needs bytes up to {end}, the file has "
                f"{size} (truncated)"
            )
    return header_len
