"""Strict test settings (DESIGN.md #9): 4 host CPU devices, rank promotion raises."""

import os
import pathlib

os.environ.setdefault("XLA_FLAGS", "")
if "xla_force_host_platform_device_count" not in os.environ["XLA_FLAGS"]:
    os.environ["XLA_FLAGS"] += " --xla_force_host_platform_device_count=4"
os.environ.setdefault("JAX_PLATFORMS", "cpu")

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
