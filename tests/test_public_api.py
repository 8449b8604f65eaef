"""The public API (DESIGN.md #1): every subpackage re-exports its names explicitly."""

import importlib
import types

import pytest

import fidia_jax

SUBPACKAGES = ["errors", "models", "optim", "rl", "kernels", "protein", "data"]


@pytest.mark.parametrize("name", SUBPACKAGES)
def test_subpackage_all_resolves(name):
    module = importlib.import_module(f"fidia_jax.{name}")
    assert getattr(fidia_jax, name) is module
    exported = module.__all__
    assert exported, f"fidia_jax.{name}.__all__ is empty"
    assert len(set(exported)) == len(exported), f"duplicate names in fidia_jax.{name}.__all__"
    for symbol in exported:
        obj = getattr(module, symbol)  # AttributeError names the missing export
        assert not symbol.startswith("_"), f"private name {symbol} exported from fidia_jax.{name}"
        if isinstance(obj, types.ModuleType):  # public subpackages (kernels.santa) are fine
            private = [part for part in obj.__name__.split(".") if part.startswith("_")]
            assert not private, f"fidia_jax.{name}.{symbol} leaks the private module {obj.__name__}"


def test_version_is_pep440():
    from packaging.version import Version

    assert Version(fidia_jax.__version__) >= Version("0.1.0")


@pytest.mark.parametrize(
    "name",
    ["ProteinMPNN", "MPNNInputs", "sample", "score", "log_probs", "Llama", "LlamaConfig"],
)
def test_models_api(name):
    assert callable(getattr(fidia_jax.models, name))


@pytest.mark.parametrize("name", ["scale", "scale_by_column_rms", "paso"])
def test_optim_api(name):
    assert callable(getattr(fidia_jax.optim, name))


@pytest.mark.parametrize("name", ["max_at_k", "max_at_k_effective_rewards", "pass_at_k"])
def test_rl_api(name):
    assert callable(getattr(fidia_jax.rl, name))
