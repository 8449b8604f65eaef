"""Strict test settings (DESIGN.md #9): 4 host CPU devices, rank promotion raises."""

import os
import pathlib

os.environ.setdefault("XLA_FLAGS", "")
if "xla_force_host_platform_device_count" not in os.environ["XLA_FLAGS"]:
    os.environ["XLA_FLAGS"] += " --xla_force_host_platform_device_count=4"
os.environ.setdefault("JAX_PLATFORMS", "cpu")
# the CLI's persistent compilation cache stays off in tests (no writes under ~/.cache)
os.environ.setdefault("FIDIA_COMPILATION_CACHE", "off")

import jax  # noqa: E402
import pytest  # noqa: E402

jax.config.update("jax_numpy_rank_promotion", "raise")

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
SHARED = REPO_ROOT.parent / "shared"


@pytest.fixture(scope="session")
def shared_data_dir() -> pathlib.Path:
    """``../shared/data`` (or $FIDIA_DATA_DIR); skips when absent."""
    path = pathlib.Path(os.environ.get("FIDIA_DATA_DIR", SHARED / "data"))
    if not path.is_dir():
        pytest.skip(f"shared data directory not found at {path}")
    return path


@pytest.fixture(scope="session")
def fixtures_dir() -> pathlib.Path:
    """``../shared/fixtures``; skips when absent."""
    path = SHARED / "fixtures"
    if not path.is_dir():
        pytest.skip(f"shared fixtures directory not found at {path}")
    return path


# ---- AlphaFold2 (the 'fold' extra): one tiny configuration for every test that folds ----------
#: 1 Evoformer block, 1 extra-MSA block, 1 structure-module layer, small channels, no distogram /
#: masked-MSA / resolved heads (pLDDT and the predicted-aligned-error head stay), float32. Every
#: key exists in the monomer (``model_*_ptm``) and the multimer (``model_*_multimer_v3``)
#: configurations alike.
ALPHAFOLD_TINY = {
    "model.embeddings_and_evoformer.evoformer_num_block": 1,
    "model.embeddings_and_evoformer.extra_msa_stack_num_block": 1,
    "model.embeddings_and_evoformer.msa_channel": 32,
    "model.embeddings_and_evoformer.pair_channel": 16,
    "model.embeddings_and_evoformer.seq_channel": 32,
    "model.embeddings_and_evoformer.extra_msa_channel": 8,
    "model.heads.structure_module.num_layer": 1,
    "model.heads.distogram.weight": 0.0,
    "model.heads.masked_msa.weight": 0.0,
    "model.heads.experimentally_resolved.weight": 0.0,
    "model.global_config.bfloat16": False,
}


class TinyAlphaFold:
    """The tests' tiny AlphaFold2: configurations, random parameters (made once per model name
    and seed in a session), the release's file layout, and XLA options that compile fast."""

    overrides = ALPHAFOLD_TINY
    monomer = "model_1_ptm"
    multimer = "model_1_multimer_v3"
    #: XLA:CPU compiles the tiny model about 3x faster without its LLVM optimisations.
    fast_compile = {"xla_backend_optimization_level": 0, "xla_llvm_disable_expensive_passes": True}

    def __init__(self):
        self._params = {}

    def config(self, model_name="model_1_ptm", num_recycles=1):
        from fidia_jax import protein

        return protein.alphafold_config(
            model_name, num_recycles=num_recycles, overrides=self.overrides
        )

    def params(self, model_name="model_1_ptm", seed=0):
        """Random parameters of the tiny ``model_name`` (they do not depend on the recycles)."""
        from fidia_jax import protein

        if (model_name, seed) not in self._params:
            cfg = self.config(model_name)
            self._params[model_name, seed] = protein.random_alphafold_params(cfg, seed=seed)
        return self._params[model_name, seed]

    @staticmethod
    def write_release_layout(params, path, model_name="model_1_ptm"):
        """The release's file layout: flat ``scope//name`` keys; the monomer files have the
        triangle-multiplication projections split left / right (the reader fuses them), the
        ``*_multimer_v3`` files have them fused already (the model's own names)."""
        import numpy as np
        from alphafold.model import utils

        flat = {f"{s}//{n}": np.asarray(v) for s, d in params.items() for n, v in d.items()}
        if not model_name.endswith("multimer_v3"):
            split = utils.flat_params_to_haiku(flat, fuse=False, to_jnp=False)
            flat = {f"{s}//{n}": v for s, d in split.items() for n, v in d.items()}
        np.savez(path, **flat)


@pytest.fixture(scope="session")
def tiny_alphafold() -> TinyAlphaFold:
    """The tiny AlphaFold2 of the tests; skips without the 'fold' extra."""
    pytest.importorskip(
        "alphafold",
        reason="needs the 'fold' extra: pip install 'fidia_jax[fold]' (alphafold-colabfold)",
    )
    return TinyAlphaFold()


@pytest.fixture
def tiny_gemma3_checkpoint(tmp_path) -> pathlib.Path:
    """A tiny random Gemma 3 text checkpoint (Hugging Face layout + byte-level tokenizer.json),
    written by ``tests/models/tiny_lm_checkpoint.py`` into ``tmp_path / "gemma"``."""
    import sys

    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent / "models"))
    try:
        from tiny_lm_checkpoint import write_tiny_gemma3
    finally:
        sys.path.pop(0)
    return write_tiny_gemma3(tmp_path / "gemma")


def pytest_sessionfinish(session, exitstatus):
    """Ends a session (an xdist worker's included) with no "Exception ignored in
    _xla_gc_callback ... KeyboardInterrupt" at shutdown.

    jax runs ``_xla_gc_callback`` (``jax._src.lib``) around every garbage collection. When an
    xdist worker has sent its results, execnet gives it 5 s to finish (pytest's unconfigure and
    the clean-up of the session's objects) before it sends the worker a SIGINT; with the whole
    suite's objects alive that clean-up runs hundreds of collections, each calling XLA, and the
    SIGINT lands inside jax's callback, where Python can only print it as "Exception ignored".
    Hypothesis's terminal summary, which runs in that window, also imports ``hypothesis`` when
    no test of the worker did (about 2 s on a loaded machine). So here, while the session is
    still running (before the worker reports that it has finished): hypothesis is imported,
    jax's caches are cleared, the garbage is collected once, the survivors are frozen (later
    collections skip them) and jax's callback is removed (the process is about to exit), so
    the shutdown is quick and never inside the callback.
    """
    import contextlib
    import gc

    with contextlib.suppress(ImportError):
        import hypothesis.internal.observability  # noqa: F401
    jax.clear_caches()
    gc.collect()
    gc.callbacks[:] = [
        cb for cb in gc.callbacks
        if not (getattr(cb, "__module__", "") == "jax._src.lib"
                and getattr(cb, "__name__", "") == "_xla_gc_callback")
    ]  # fmt: skip
    gc.freeze()


_HEAVY_TESTS = REPO_ROOT / "tests" / "heavy_tests.txt"


def pytest_collection_modifyitems(config, items):
    """Marks the tests listed in ``tests/heavy_tests.txt`` ``integration``.

    Each took several seconds per call (threshold in the file's header) in a measured `make test`
    (``tools/heavy_tests.py`` writes the list
    from a ``--durations=0`` report), so `make test` stays within 10 minutes on 2 cores; they run
    in `make test-integration`, which CI runs after it.
    """
    if not _HEAVY_TESTS.exists():
        return
    heavy = {
        line.strip()
        for line in _HEAVY_TESTS.read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    for item in items:
        if item.nodeid in heavy:
            item.add_marker(pytest.mark.integration)
